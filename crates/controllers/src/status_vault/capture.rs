//! Continuous capture: one lean watch per covered kind turns status changes into records on the
//! capture queue, and workers drain the queue into the backends, retrying with backoff while a
//! backend fails. A watched object is kept as metadata plus a hash of its status, never whole.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Resource as _, ResourceExt as _};
use serde_json::Value;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::leader::Leadership;
use vigil_vault::{Record, Saved};

use super::controller::Shared;
use super::decide::{self, status_hash};
use super::model::{BackendRef, ObjectView, PolicyView};

/// Key of a watched object within its kind.
type Name = (Option<String>, String);

/// How capture retries a failing backend: quickly at first, at most every 5 s, never given up
/// (records stay queued in memory; after a restart the watch's initial list captures again).
pub const RETRY: BackoffPolicy = BackoffPolicy {
    base: Duration::from_millis(100),
    max: Duration::from_secs(5),
    jitter: 0.2,
    quarantine_after: u32::MAX,
    quarantine_interval: Duration::from_secs(5),
};

/// The lean view of a watched object.
pub fn view(obj: &DynamicObject) -> ObjectView {
    ObjectView {
        namespace: obj.namespace(),
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        labels: obj.labels().clone(),
        status_hash: status_hash(obj.data.get("status")),
    }
}

/// A record of `obj`'s current status (or of its deletion).
pub fn record_of(ar: &ApiResource, obj: &DynamicObject, status: Value, deleted: bool) -> Record {
    Record {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
        namespace: obj.namespace(),
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        resource_version: obj.resource_version().unwrap_or_default(),
        generation: obj.meta().generation,
        status,
        time: k8s_openapi::jiff::Timestamp::now().to_string(),
        deleted,
        object: None,
    }
}

/// The backends of the policies covering an object (each written once, however many policies).
fn backends_covering(
    shared: &Shared,
    policies: &[PolicyView],
    kind: &ResourceKind,
    object: &ObjectView,
) -> Vec<BackendRef> {
    let labels = |ns: &str| shared.namespace_labels(ns);
    let mut out: Vec<BackendRef> = policies
        .iter()
        .filter(|p| decide::covers(p, kind, object, &labels))
        .map(|p| decide::backend_of(p, &shared.settings))
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Watches one kind until aborted (the supervisor aborts it when no policy names the kind any
/// more, or leadership is lost).
pub async fn watch_kind(shared: Arc<Shared>, kind: ResourceKind, ar: ApiResource) {
    // Shared: a kind another controller caches (CriticalServices, Services…) is watched once.
    let mut stream = shared
        .watches
        .watch_resource::<DynamicObject>(&ar, None, &watcher::Config::default())
        .boxed();
    let mut relisted: HashSet<Name> = HashSet::new();
    let mut first_list = true;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::Init) => relisted.clear(),
            Ok(watcher::Event::InitApply(obj)) => {
                relisted.insert((obj.namespace(), obj.name_any()));
                observe(&shared, &kind, &ar, &obj);
            }
            Ok(watcher::Event::InitDone) => {
                // Objects gone while the watch was down: their deletion was not seen, so their
                // tombstone carries no status (the restore skips it for the previous record).
                let gone: Vec<(Name, ObjectView)> = shared.with_objects(&kind, |objects| {
                    objects
                        .iter()
                        .filter(|(name, _)| !relisted.contains(*name))
                        .map(|(n, v)| (n.clone(), v.clone()))
                        .collect()
                });
                for (name, seen) in gone {
                    let mut obj = DynamicObject::new(&name.1, &ar);
                    obj.metadata.namespace = name.0.clone();
                    obj.metadata.uid = Some(seen.uid.clone());
                    forget(&shared, &kind, &ar, &obj, Value::Null, &seen);
                }
                if first_list {
                    first_list = false;
                    tokio::spawn(tombstone_vanished(
                        shared.clone(),
                        kind.clone(),
                        relisted.clone(),
                    ));
                }
                shared.set_kind_synced(&kind);
            }
            Ok(watcher::Event::Apply(obj)) => observe(&shared, &kind, &ar, &obj),
            Ok(watcher::Event::Delete(obj)) => {
                let seen = view(&obj);
                let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
                forget(&shared, &kind, &ar, &obj, status, &seen);
            }
            Err(e) => tracing::debug!(kind = %kind.kind, error = %e, "watch error; retrying"),
        }
    }
}

/// A new observation of an object: queue a record if its status changed, and restore its
/// status if it came back empty under an `OnCreate` policy.
fn observe(shared: &Arc<Shared>, kind: &ResourceKind, ar: &ApiResource, obj: &DynamicObject) {
    let now = view(obj);
    let name = (now.namespace.clone(), now.name.clone());
    let previous = shared.with_objects(kind, |objects| objects.insert(name, now.clone()));
    let policies = shared.policies();
    if decide::worth_capturing(previous.as_ref(), &now) {
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        for backend in backends_covering(shared, &policies, kind, &now) {
            shared
                .queue
                .push(backend, record_of(ar, obj, status.clone(), false));
        }
    }
    let labels = |ns: &str| shared.namespace_labels(ns);
    let restore_annotation_pending = obj
        .annotations()
        .get(super::model::RESTORE_STATUS_ANNOTATION)
        .is_some_and(|v| v != super::model::RESTORE_DONE);
    if !decide::restores_on_create(&policies, kind, &now, &labels) {
        return;
    }
    if now.status_hash.is_none() {
        if shared.first_restore_attempt(&now.uid) {
            tokio::spawn(super::restore::restore_in_background(
                shared.clone(),
                ar.clone(),
                now.namespace.clone(),
                now.name.clone(),
                now.uid.clone(),
            ));
        }
    } else if restore_annotation_pending {
        // The object has its status (kept, or just restored): tell other operators to go ahead.
        let (shared, ar, obj) = (shared.clone(), ar.clone(), obj.clone());
        tokio::spawn(async move {
            super::restore::restore_once(&shared, &ar, &obj).await;
        });
    }
}

/// The object is gone: queue its tombstone (with its last status when known).
fn forget(
    shared: &Shared,
    kind: &ResourceKind,
    ar: &ApiResource,
    obj: &DynamicObject,
    status: Value,
    seen: &ObjectView,
) {
    shared.with_objects(kind, |objects| {
        objects.remove(&(seen.namespace.clone(), seen.name.clone()))
    });
    shared.forget_restore_attempt(&seen.uid);
    let policies = shared.policies();
    for backend in backends_covering(shared, &policies, kind, seen) {
        shared
            .queue
            .push(backend, record_of(ar, obj, status.clone(), true));
    }
}

/// Drains the capture queue into the backends; runs until aborted.
pub async fn capture_worker(shared: Arc<Shared>) {
    loop {
        let (key, mut record) = shared.queue.next().await;
        let mut attempt: u32 = 0;
        loop {
            if *shared.leadership.borrow() != Leadership::Leading {
                // One writer per vault: the new leader's initial list captures this state again.
                shared.queue.done(&key, &record);
                break;
            }
            let result = match shared.vault(&key.0).await {
                Ok(vault) => vault.save(&record).await.map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match result {
                Ok(saved) => {
                    shared.backend_succeeded(&key.0, matches!(saved, Saved::Written { .. }));
                    if let Some(hook) = &shared.on_saved {
                        hook(&record, saved);
                    }
                    shared.metrics_captured(&record, saved);
                    shared.queue.done(&key, &record);
                    break;
                }
                Err(error) => {
                    attempt = attempt.saturating_add(1);
                    shared.backend_failed(&key.0, &error);
                    let delay = RETRY.delay(attempt, rand_unit()).delay;
                    tracing::debug!(backend = %key.0.location, %error, ?delay, "capture failed; retrying");
                    tokio::time::sleep(delay).await;
                    // A newer status may have replaced the one that failed.
                    match shared.queue.head(&key) {
                        Some(newer) => record = newer,
                        None => break,
                    }
                }
            }
        }
    }
}

/// A number in [0, 1) for jitter, without a random-number crate: the clock's nanoseconds.
fn rand_unit() -> f64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    f64::from(nanos % 1000) / 1000.0
}

/// Objects of a kind, by namespace and name.
pub type Objects = HashMap<Name, ObjectView>;

/// Objects the vault holds as alive that the first list of a kind did not find were deleted
/// while no Vigil watched: they get their tombstone now, carrying the last recorded status. Only
/// in namespaces the policies writing to that backend cover (a vault is one cluster's). Best
/// effort: a backend that fails here is looked at again when the watch restarts.
async fn tombstone_vanished(shared: Arc<Shared>, kind: ResourceKind, present: HashSet<Name>) {
    let policies: Vec<PolicyView> = shared
        .policies()
        .into_iter()
        .filter(|p| decide::names_kind(p, &kind))
        .collect();
    let mut backends: Vec<BackendRef> = policies
        .iter()
        .map(|p| decide::backend_of(p, &shared.settings))
        .collect();
    backends.sort();
    backends.dedup();
    let labels = |ns: &str| shared.namespace_labels(ns);
    for backend in backends {
        let keys = match shared.vault(&backend).await {
            Ok(vault) => match vault.keys().await {
                Ok(keys) => (vault, keys),
                Err(e) => {
                    tracing::debug!(backend = %backend.location, error = %e, "cannot list the vault for vanished objects");
                    continue;
                }
            },
            Err(e) => {
                tracing::debug!(backend = %backend.location, error = %e, "cannot open the vault for vanished objects");
                continue;
            }
        };
        let (vault, keys) = keys;
        for key in keys {
            if key.group != kind.group || key.kind != kind.kind {
                continue;
            }
            if present.contains(&(key.namespace.clone(), key.name.clone())) {
                continue;
            }
            let in_scope = policies.iter().any(|p| {
                decide::backend_of(p, &shared.settings) == backend
                    && decide::covers_namespace(p, key.namespace.as_deref(), &labels)
            });
            if !in_scope {
                continue;
            }
            if let Ok(Some(last)) = vault.latest(&key).await
                && !last.deleted
            {
                let tombstone = Record {
                    deleted: true,
                    time: k8s_openapi::jiff::Timestamp::now().to_string(),
                    object: None,
                    ..last
                };
                shared.queue.push(backend.clone(), tombstone);
            }
        }
    }
}
