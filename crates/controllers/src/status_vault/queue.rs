//! The capture queue: records waiting for their backend, coalesced per object.
//!
//! A burst of status changes of one object keeps only the newest (latest wins), so the backend
//! sees one write per object per moment it can take one. A record of another object under the
//! same key (the uid changed: deleted and re-created) queues behind the waiting one instead of
//! replacing it, so a tombstone is never lost to its successor's first status and records reach
//! the backend in order. One worker handles a key at a time.

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use tokio::sync::Notify;
use vigil_vault::{ObjectKey, Record};

use super::model::BackendRef;

/// A queue entry's address: which backend, which object.
pub type QueueKey = (BackendRef, ObjectKey);

#[derive(Default)]
struct State {
    pending: HashMap<QueueKey, VecDeque<Record>>,
    /// Keys with waiting records that no worker holds, oldest first.
    ready: VecDeque<QueueKey>,
    in_flight: HashSet<QueueKey>,
}

/// Records waiting for their backend.
#[derive(Default)]
pub struct CaptureQueue {
    state: Mutex<State>,
    notify: Notify,
}

impl CaptureQueue {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        super::lock(&self.state)
    }

    /// Queues `record` for `backend`, coalescing with what already waits for the same object.
    pub fn push(&self, backend: BackendRef, record: Record) {
        let key = (backend, record.key());
        let mut state = self.lock();
        let entry = state.pending.entry(key.clone()).or_default();
        let was_empty = entry.is_empty();
        match entry.back_mut() {
            Some(last) if last.uid == record.uid => {
                // A tombstone whose deletion was not seen carries no status: keep the waiting one.
                let mut record = record;
                if record.deleted && record.status.is_null() {
                    record.status = std::mem::take(&mut last.status);
                }
                *last = record;
            }
            _ => entry.push_back(record),
        }
        if was_empty && !state.in_flight.contains(&key) {
            state.ready.push_back(key);
            drop(state);
            self.notify.notify_one();
        }
    }

    /// Waits for a key no other worker holds and returns it with its oldest waiting record; the
    /// caller holds the key until [`CaptureQueue::done`].
    pub async fn next(&self) -> (QueueKey, Record) {
        loop {
            let notified = self.notify.notified();
            {
                let mut state = self.lock();
                while let Some(key) = state.ready.pop_front() {
                    let head = state.pending.get(&key).and_then(|q| q.front().cloned());
                    if let Some(record) = head {
                        state.in_flight.insert(key.clone());
                        // More work may be waiting for other workers.
                        if !state.ready.is_empty() {
                            self.notify.notify_one();
                        }
                        return (key, record);
                    }
                }
            }
            notified.await;
        }
    }

    /// The record to write now for a held key: its oldest waiting one (a newer status of the
    /// same object may have replaced the one handed out).
    pub fn head(&self, key: &QueueKey) -> Option<Record> {
        self.lock()
            .pending
            .get(key)
            .and_then(|q| q.front().cloned())
    }

    /// `written` reached the backend: drops it (unless a newer status of the same object replaced
    /// it meanwhile) and hands the key back. Returns whether records still wait for it.
    pub fn done(&self, key: &QueueKey, written: &Record) -> bool {
        let mut state = self.lock();
        let more = match state.pending.get_mut(key) {
            Some(q) => {
                if q.front() == Some(written) {
                    q.pop_front();
                }
                !q.is_empty()
            }
            None => false,
        };
        if !more {
            state.pending.remove(key);
        }
        state.in_flight.remove(key);
        if more {
            state.ready.push_back(key.clone());
            drop(state);
            self.notify.notify_one();
        }
        more
    }

    /// Records waiting for a backend.
    pub fn pending_for(&self, backend: &BackendRef) -> usize {
        self.lock()
            .pending
            .iter()
            .filter(|((b, _), _)| b == backend)
            .map(|(_, q)| q.len())
            .sum()
    }

    /// Records waiting for any backend.
    pub fn pending_for_all(&self) -> usize {
        self.lock().pending.values().map(VecDeque::len).sum()
    }

    /// Waits, at most `within`, for the queued records to reach their backends (at shutdown:
    /// what does not make it is captured again by the next leader's initial list).
    pub async fn drain(&self, within: std::time::Duration) {
        let deadline = std::time::Instant::now() + within;
        while self.pending_for_all() > 0 && std::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// Whether records of an object still wait for any backend (a restore must wait for them:
    /// the vault does not hold the object's last state yet).
    pub fn has_pending(&self, object: &ObjectKey) -> bool {
        self.lock().pending.keys().any(|(_, o)| o == object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn backend() -> BackendRef {
        BackendRef {
            location: "/v".into(),
            key_file: None,
        }
    }

    fn record(uid: &str, n: i64, deleted: bool) -> Record {
        Record {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: Some("ns".into()),
            name: "a".into(),
            uid: uid.into(),
            resource_version: n.to_string(),
            generation: None,
            status: json!({"n": n}),
            time: "2026-01-01T00:00:00Z".into(),
            deleted,
            object: None,
        }
    }

    #[tokio::test]
    async fn a_burst_coalesces_to_the_newest_status() {
        let q = CaptureQueue::default();
        for n in 0..100 {
            q.push(backend(), record("u1", n, false));
        }
        assert_eq!(q.pending_for(&backend()), 1);
        let (key, r) = q.next().await;
        assert_eq!(r.status, json!({"n": 99}));
        assert!(!q.done(&key, &r));
        assert_eq!(q.pending_for(&backend()), 0);
        assert!(!q.has_pending(&r.key()));
    }

    #[tokio::test]
    async fn a_tombstone_is_not_replaced_by_the_next_objects_status() {
        let q = CaptureQueue::default();
        q.push(backend(), record("u1", 1, false));
        q.push(backend(), record("u1", 1, true));
        q.push(backend(), record("u2", 2, false));
        assert_eq!(q.pending_for(&backend()), 2);
        let (key, first) = q.next().await;
        assert!(first.deleted && first.uid == "u1");
        assert!(q.done(&key, &first));
        let (key, second) = q.next().await;
        assert_eq!(second.uid, "u2");
        assert!(!q.done(&key, &second));
    }

    #[tokio::test]
    async fn a_newer_status_arriving_during_a_write_is_written_next() {
        let q = CaptureQueue::default();
        q.push(backend(), record("u1", 1, false));
        let (key, writing) = q.next().await;
        q.push(backend(), record("u1", 2, false));
        assert_eq!(q.head(&key).map(|r| r.status), Some(json!({"n": 2})));
        assert!(q.done(&key, &writing), "the newer one still waits");
        let (key, next) = q.next().await;
        assert_eq!(next.status, json!({"n": 2}));
        assert!(!q.done(&key, &next));
    }

    #[tokio::test]
    async fn a_held_key_is_not_handed_to_another_worker() {
        let q = std::sync::Arc::new(CaptureQueue::default());
        q.push(backend(), record("u1", 1, false));
        let (key, r) = q.next().await;
        q.push(backend(), record("u1", 2, false));
        use futures::FutureExt as _;
        assert!(
            q.next().now_or_never().is_none(),
            "held by the first worker"
        );
        q.done(&key, &r);
        let (_, next) = q.next().await;
        assert_eq!(next.status, json!({"n": 2}));
    }
}
