//! The object store: every object by storage key and (namespace, name), one global resourceVersion,
//! and a bounded log of change events that watches replay from.
//!
//! Writes take the lock, bump the resourceVersion, serialize the object once (lists and watches reuse
//! the bytes) and append an event. Watchers are woken through a `tokio::sync::watch` channel carrying
//! the latest resourceVersion and read the log from their own cursor, so a slow watcher never blocks
//! writers and one wake-up delivers a whole batch.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, RwLock, RwLockReadGuard, RwLockWriteGuard};

use bytes::Bytes;
use serde_json::Value;
use tokio::sync::watch;

use crate::registry::meta;
use crate::registry::resources::Registry;

/// An object as stored, with its serialized form cached.
#[derive(Debug)]
pub struct Stored {
    pub value: Value,
    pub json: Bytes,
    pub rv: u64,
}

impl Stored {
    /// Wraps a value that is not (yet) stored, e.g. a dry-run result.
    pub fn new(value: Value, rv: u64) -> Arc<Self> {
        let json = Bytes::from(serde_json::to_vec(&value).unwrap_or_default());
        Arc::new(Self { value, json, rv })
    }

    pub fn namespace(&self) -> &str {
        meta::namespace(&self.value)
    }

    pub fn name(&self) -> &str {
        meta::name(&self.value)
    }
}

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    Added,
    Modified,
    Deleted,
}

/// One change, as kept in the log.
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventType,
    pub storage_key: Arc<str>,
    /// The object after the change (for DELETED: its last state, with the deletion's resourceVersion).
    pub object: Arc<Stored>,
    /// The object before the change, so a filtered watch can turn "no longer matches" into DELETED.
    pub previous: Option<Arc<Stored>>,
}

/// (namespace, name); cluster-scoped objects use "" as namespace. Ordered so lists are sorted.
pub type ObjectKey = (String, String);

/// The watched resourceVersion fell out of the retained window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expired {
    /// The oldest resourceVersion a watch can still start from.
    pub oldest: u64,
}

/// Everything behind the store lock.
#[derive(Debug)]
pub struct State {
    pub registry: Registry,
    rv: u64,
    objects: HashMap<Arc<str>, BTreeMap<ObjectKey, Arc<Stored>>>,
    log: VecDeque<Event>,
    window: usize,
    /// Highest resourceVersion dropped from the log; watches from before it get 410.
    compacted: u64,
    /// Next host number in the Service cluster-IP range.
    next_cluster_ip: u32,
}

impl State {
    /// The latest resourceVersion.
    pub fn rv(&self) -> u64 {
        self.rv
    }

    /// One object.
    pub fn get(&self, storage_key: &str, namespace: &str, name: &str) -> Option<Arc<Stored>> {
        self.objects
            .get(storage_key)?
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }

    /// Objects of a storage key in key order, optionally in one namespace, starting after `after`.
    pub fn range<'a>(
        &'a self,
        storage_key: &str,
        namespace: Option<&'a str>,
        after: Option<&ObjectKey>,
    ) -> impl Iterator<Item = &'a Arc<Stored>> + 'a {
        use std::ops::Bound;
        let lower = match (after, namespace) {
            (Some(k), _) => Bound::Excluded(k.clone()),
            (None, Some(ns)) => Bound::Included((ns.to_owned(), String::new())),
            (None, None) => Bound::Unbounded,
        };
        self.objects
            .get(storage_key)
            .into_iter()
            .flat_map(move |m| m.range((lower.clone(), Bound::Unbounded)))
            .take_while(move |((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .map(|(_, v)| v)
    }

    /// Storage keys that hold at least one object.
    pub fn storage_keys(&self) -> Vec<Arc<str>> {
        self.objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn stamp(&mut self, mut value: Value) -> (u64, Arc<Stored>) {
        let rv = self.next_rv();
        meta::set_meta(&mut value, "resourceVersion", Value::String(rv.to_string()));
        (rv, Stored::new(value, rv))
    }

    fn log_event(
        &mut self,
        kind: EventType,
        storage_key: &Arc<str>,
        object: Arc<Stored>,
        previous: Option<Arc<Stored>>,
    ) {
        self.log.push_back(Event {
            rv: object.rv,
            kind,
            storage_key: storage_key.clone(),
            object,
            previous,
        });
        while self.log.len() > self.window {
            if let Some(dropped) = self.log.pop_front() {
                self.compacted = dropped.rv;
            }
        }
    }

    fn interned_key(&mut self, storage_key: &str) -> Arc<str> {
        match self.objects.get_key_value(storage_key) {
            Some((k, _)) => k.clone(),
            None => {
                let k: Arc<str> = Arc::from(storage_key);
                self.objects.insert(k.clone(), BTreeMap::new());
                k
            }
        }
    }

    /// Inserts a new object or replaces an existing one, assigning the next resourceVersion.
    pub fn put(&mut self, storage_key: &str, value: Value) -> Arc<Stored> {
        let key = self.interned_key(storage_key);
        let (_, stored) = self.stamp(value);
        let object_key = (stored.namespace().to_owned(), stored.name().to_owned());
        let previous = self
            .objects
            .get_mut(&key)
            .and_then(|m| m.insert(object_key, stored.clone()));
        let kind = if previous.is_some() {
            EventType::Modified
        } else {
            EventType::Added
        };
        self.log_event(kind, &key, stored.clone(), previous);
        stored
    }

    /// Removes an object; its DELETED event carries a fresh resourceVersion.
    pub fn remove(
        &mut self,
        storage_key: &str,
        namespace: &str,
        name: &str,
    ) -> Option<Arc<Stored>> {
        self.remove_as(storage_key, namespace, name, None)
    }

    /// Removes an object, reporting `last` (e.g. its state with the final finalizer gone) as the
    /// DELETED object instead of the stored one: watchers see one DELETED, no MODIFIED first.
    pub fn remove_as(
        &mut self,
        storage_key: &str,
        namespace: &str,
        name: &str,
        last: Option<Value>,
    ) -> Option<Arc<Stored>> {
        let key = self.interned_key(storage_key);
        let previous = self
            .objects
            .get_mut(&key)?
            .remove(&(namespace.to_owned(), name.to_owned()))?;
        let (_, stored) = self.stamp(last.unwrap_or_else(|| previous.value.clone()));
        self.log_event(EventType::Deleted, &key, stored.clone(), Some(previous));
        Some(stored)
    }

    /// Up to `max` events after `rv` for one storage key, and the resourceVersion to resume from
    /// (the last event examined, whatever its key); `Expired` when `rv` is older than the log.
    pub fn events_after(
        &self,
        storage_key: &str,
        rv: u64,
        max: usize,
    ) -> Result<(Vec<Event>, u64), Expired> {
        if rv < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        let mut out = Vec::new();
        let mut last = rv;
        for e in self.log.range(start..) {
            if out.len() >= max {
                break;
            }
            last = e.rv;
            if &*e.storage_key == storage_key {
                out.push(e.clone());
            }
        }
        Ok((out, last))
    }

    /// Every event after `rv`, whatever its key, or `Expired`.
    pub fn all_events_after(&self, rv: u64) -> Result<Vec<Event>, Expired> {
        if rv < self.compacted {
            return Err(Expired {
                oldest: self.compacted,
            });
        }
        let start = self.log.partition_point(|e| e.rv <= rv);
        Ok(self.log.range(start..).cloned().collect())
    }

    /// Drops all but the newest `keep` events (fault injection: makes older watches expire).
    pub fn compact(&mut self, keep: usize) {
        while self.log.len() > keep {
            if let Some(dropped) = self.log.pop_front() {
                self.compacted = dropped.rv;
            }
        }
        if keep == 0 {
            self.compacted = self.rv;
        }
    }

    /// Allocates the next Service cluster IP from 10.96.0.0/12.
    pub fn allocate_cluster_ip(&mut self) -> String {
        let n = self.next_cluster_ip;
        self.next_cluster_ip = self.next_cluster_ip.wrapping_add(1) % (1 << 20);
        let base: u32 = (10 << 24) | (96 << 16);
        std::net::Ipv4Addr::from(base + n.max(10)).to_string()
    }

    /// Changes how many events are retained.
    pub fn set_window(&mut self, window: usize) {
        self.window = window.max(1);
        self.compact(self.window);
    }
}

/// What the data directory keeps of the state: every object and the counters that must never go
/// backwards. Taken under the read lock as `Arc` clones, so holding the lock costs no serializing.
#[derive(Debug)]
pub struct Snapshot {
    pub rv: u64,
    pub next_cluster_ip: u32,
    /// Objects by storage key, each in key order.
    pub objects: Vec<(Arc<str>, Vec<Arc<Stored>>)>,
}

impl State {
    /// The persistent part of the state (see [`Snapshot`]).
    pub fn snapshot(&self) -> Snapshot {
        let mut objects: Vec<(Arc<str>, Vec<Arc<Stored>>)> = self
            .objects
            .iter()
            .filter(|(_, m)| !m.is_empty())
            .map(|(k, m)| (k.clone(), m.values().cloned().collect()))
            .collect();
        // A stable order makes snapshots of the same state byte-identical (diffable, testable).
        objects.sort_by(|a, b| a.0.cmp(&b.0));
        Snapshot {
            rv: self.rv,
            next_cluster_ip: self.next_cluster_ip,
            objects,
        }
    }

    /// Loads a snapshot into an empty store: objects keep their resourceVersions, the counter
    /// continues from the highest one seen, and the (empty) event log starts there, so watches
    /// from before the restart get 410 Expired as after an etcd compaction.
    pub fn restore(&mut self, snapshot: Snapshot) {
        let mut rv = snapshot.rv;
        for (key, objects) in snapshot.objects {
            let key = self.interned_key(&key);
            let map = self.objects.entry(key).or_default();
            for stored in objects {
                rv = rv.max(stored.rv);
                map.insert(
                    (stored.namespace().to_owned(), stored.name().to_owned()),
                    stored,
                );
            }
        }
        self.rv = rv;
        self.compacted = rv;
        self.log.clear();
        self.next_cluster_ip = snapshot.next_cluster_ip;
    }
}

/// The shared store: state behind a lock plus the change signal watchers wait on.
#[derive(Debug)]
pub struct Store {
    state: RwLock<State>,
    changed: watch::Sender<u64>,
}

impl Store {
    /// A store holding the built-in registry and no objects, retaining `window` events.
    pub fn new(window: usize) -> Self {
        let state = State {
            registry: Registry::builtin(),
            rv: 0,
            objects: HashMap::new(),
            log: VecDeque::new(),
            window: window.max(1),
            compacted: 0,
            next_cluster_ip: 10,
        };
        Self {
            state: RwLock::new(state),
            changed: watch::Sender::new(0),
        }
    }

    /// Reads the state. A poisoned lock (a panic while writing) is still readable: the state is
    /// only mutated through small steps that leave it consistent.
    pub fn read(&self) -> RwLockReadGuard<'_, State> {
        self.state.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` with exclusive access, then wakes watchers if anything changed.
    pub fn write<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        let (out, rv) = {
            let mut guard: RwLockWriteGuard<'_, State> =
                self.state.write().unwrap_or_else(|e| e.into_inner());
            let out = f(&mut guard);
            (out, guard.rv)
        };
        self.changed.send_if_modified(|current| {
            let moved = *current != rv;
            *current = rv;
            moved
        });
        out
    }

    /// A receiver that changes whenever the store does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn cm(ns: &str, name: &str) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": ns, "name": name}})
    }

    #[test]
    fn resource_versions_increase_and_events_replay() {
        let store = Store::new(100);
        let a = store.write(|s| s.put("/configmaps", cm("a", "x")));
        let b = store.write(|s| s.put("/configmaps", cm("a", "x")));
        assert!(b.rv > a.rv);
        assert_eq!(
            meta::meta_str(&b.value, "resourceVersion"),
            b.rv.to_string()
        );
        let state = store.read();
        let (events, _) = state
            .events_after("/configmaps", 0, 100)
            .expect("in window");
        assert_eq!(
            events.iter().map(|e| e.kind).collect::<Vec<_>>(),
            vec![EventType::Added, EventType::Modified]
        );
        assert_eq!(
            state
                .events_after("/configmaps", a.rv, 100)
                .expect("in window")
                .0
                .len(),
            1
        );
        let (none, cursor) = state.events_after("/secrets", 0, 100).expect("in window");
        assert!(none.is_empty());
        assert_eq!(cursor, b.rv);
    }

    #[test]
    fn old_resource_versions_expire() {
        let store = Store::new(2);
        for i in 0..5 {
            store.write(|s| s.put("/configmaps", cm("a", &format!("c{i}"))));
        }
        let state = store.read();
        assert!(state.events_after("/configmaps", 1, 10).is_err());
        assert_eq!(
            state
                .events_after("/configmaps", 3, 10)
                .expect("kept")
                .0
                .len(),
            2
        );
    }

    #[test]
    fn range_is_per_namespace_and_resumable() {
        let store = Store::new(100);
        for (ns, n) in [("a", "1"), ("a", "2"), ("b", "1")] {
            store.write(|s| s.put("/configmaps", cm(ns, n)));
        }
        let state = store.read();
        let in_a: Vec<&str> = state
            .range("/configmaps", Some("a"), None)
            .map(|o| o.name())
            .collect();
        assert_eq!(in_a, vec!["1", "2"]);
        let after = ("a".to_owned(), "2".to_owned());
        let rest: Vec<&str> = state
            .range("/configmaps", None, Some(&after))
            .map(|o| o.namespace())
            .collect();
        assert_eq!(rest, vec!["b"]);
        drop(state);
        let removed = store
            .write(|s| s.remove("/configmaps", "a", "1"))
            .expect("present");
        assert_eq!(
            store.read().range("/configmaps", Some("a"), None).count(),
            1
        );
        assert!(removed.rv > 3);
    }
}
