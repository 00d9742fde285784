//! Continuous capture: one lean watch per covered kind turns status changes into records on the
//! capture queue, and workers drain the queue into the backends, retrying with backoff while a
//! backend fails. A watched object is kept as metadata plus a hash of its status, never whole.
//! An object that appears with an empty status under an `OnCreate` policy is handed to the
//! [`Restorer`].

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject};
use kube::runtime::watcher;
use kube::{Resource as _, ResourceExt as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::histogram::Histogram;
use serde_json::Value;
use tokio::sync::{Notify, watch};
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::Runtime;
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::leader::Leadership;
use vigil_runtime::watches::SharedWatches;
use vigil_vault::{Record, Saved};

use super::backends::Backends;
use super::decide::{self, RestoreStep};
use super::error::BackendError;
use super::kinds::{Kinds, Name};
use super::model::{
    BackendRef, ObjectView, PolicyView, RESTORE_DONE, RESTORE_STATUS_ANNOTATION, Settings,
};
use super::queue::CaptureQueue;
use super::restore::{self, Restorer};
use super::scope::Scope;

/// How capture retries a failing backend: quickly at first, at most every 5 s, never given up
/// (records stay queued in memory; after a restart the watch's initial list captures again).
pub const RETRY: BackoffPolicy = BackoffPolicy {
    base: Duration::from_millis(100),
    max: Duration::from_secs(5),
    jitter: 0.2,
    quarantine_after: u32::MAX,
    quarantine_interval: Duration::from_secs(5),
};

/// Buckets of the capture lag histogram, in seconds (target: p99 under 1 s).
const CAPTURE_LAG_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

/// Called after each successful save (benchmarks measure capture lag with it).
pub type SavedHook = Arc<dyn Fn(&Record, Saved) + Send + Sync>;

/// What capture reads, fills and reports.
pub struct Capture {
    /// Where kind watches come from: a kind another controller caches too is watched once.
    pub watches: SharedWatches,
    pub scope: Arc<Scope>,
    pub kinds: Arc<Kinds>,
    pub backends: Arc<Backends>,
    pub queue: Arc<CaptureQueue>,
    pub restorer: Arc<Restorer>,
    pub leadership: watch::Receiver<Leadership>,
    /// Runs the vault's one-off tasks (a restore, tombstones after a relist) until shutdown.
    pub runtime: Runtime,
    /// Called after each successful save (set once, before the vault runs).
    pub on_saved: std::sync::OnceLock<SavedHook>,
    /// `vigil_status_vault_records_written_total`.
    pub written: Counter,
    /// `vigil_status_vault_capture_lag_seconds`.
    pub capture_lag: Histogram,
}

impl Capture {
    /// The vault's parts on `runtime`'s client, watches, leadership and Event recorder: its
    /// scope (caches starting now), backends, queue and restorer. `changed` is notified by what
    /// the supervisor reacts to at once.
    pub fn on(runtime: &Runtime, settings: Settings, changed: &Arc<Notify>) -> Self {
        let scope = Scope::new(runtime, settings);
        let backends = Arc::new(Backends::new(changed.clone()));
        let queue = Arc::new(CaptureQueue::default());
        let leadership = runtime.leadership();
        let restorer = Arc::new(Restorer::new(
            runtime.client().clone(),
            scope.clone(),
            backends.clone(),
            queue.clone(),
            runtime.recorder().clone(),
            leadership.clone(),
            runtime.field_manager(),
        ));
        Self {
            watches: runtime.watches().clone(),
            scope,
            kinds: Arc::new(Kinds::new(changed.clone())),
            backends,
            queue,
            restorer,
            leadership,
            runtime: runtime.clone(),
            on_saved: std::sync::OnceLock::new(),
            written: Counter::default(),
            capture_lag: Histogram::new(CAPTURE_LAG_BUCKETS),
        }
    }

    fn saved(&self, record: &Record, saved: Saved) {
        if let Some(hook) = self.on_saved.get() {
            hook(record, saved);
        }
        if matches!(saved, Saved::Written { .. }) {
            self.written.inc();
            // `time` is when the watch event arrived: this is the lag to a durable record.
            if let Ok(seen) = record.time.parse::<k8s_openapi::jiff::Timestamp>() {
                let lag = k8s_openapi::jiff::Timestamp::now().duration_since(seen);
                self.capture_lag.observe(lag.as_secs_f64().max(0.0));
            }
        }
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

/// Watches one kind until aborted (the controller aborts it when no policy names the kind any
/// more, or leadership is lost).
pub async fn watch_kind(capture: Arc<Capture>, kind: ResourceKind, ar: ApiResource) {
    // Shared: a kind another controller caches (CriticalServices, Services…) is watched once.
    let mut stream = capture
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
                observe(&capture, &kind, &ar, &obj);
            }
            Ok(watcher::Event::InitDone) => {
                // Objects gone while the watch was down: their deletion was not seen, so their
                // tombstone carries no status (the restore skips it for the previous record).
                let gone: Vec<(Name, ObjectView)> = capture.kinds.with_objects(&kind, |objects| {
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
                    forget(&capture, &kind, &ar, &obj, Value::Null, &seen);
                }
                if first_list {
                    first_list = false;
                    capture.runtime.spawn(tombstone_vanished(
                        capture.clone(),
                        kind.clone(),
                        relisted.clone(),
                    ));
                }
                capture.kinds.listed();
            }
            Ok(watcher::Event::Apply(obj)) => observe(&capture, &kind, &ar, &obj),
            Ok(watcher::Event::Delete(obj)) => {
                let seen = decide::object_view(&obj);
                let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
                forget(&capture, &kind, &ar, &obj, status, &seen);
            }
            Err(e) => tracing::debug!(kind = %kind.kind, error = %e, "watch error; retrying"),
        }
    }
}

/// A new observation of an object: queue a record if its status changed, and restore its
/// status if it came back empty under an `OnCreate` policy.
fn observe(capture: &Arc<Capture>, kind: &ResourceKind, ar: &ApiResource, obj: &DynamicObject) {
    let now = decide::object_view(obj);
    let name = (now.namespace.clone(), now.name.clone());
    let previous = capture
        .kinds
        .with_objects(kind, |objects| objects.insert(name, now.clone()));
    let scope = &capture.scope;
    let policies = scope.policies();
    let annotation_pending = obj
        .annotations()
        .get(RESTORE_STATUS_ANNOTATION)
        .is_some_and(|v| v != RESTORE_DONE);
    let plan = decide::on_observed(
        previous.as_ref(),
        &now,
        scope.backends_covering(&policies, kind, &now, false),
        !scope
            .backends_covering(&policies, kind, &now, true)
            .is_empty(),
        annotation_pending,
    );
    if !plan.capture_to.is_empty() {
        let status = obj.data.get("status").cloned().unwrap_or(Value::Null);
        for backend in plan.capture_to {
            capture
                .queue
                .push(backend, record_of(ar, obj, status.clone(), false));
        }
    }
    match plan.restore {
        RestoreStep::None => {}
        RestoreStep::Restore => {
            if capture.restorer.first_attempt(&now.uid) {
                capture.runtime.spawn(restore::restore_in_background(
                    capture.restorer.clone(),
                    ar.clone(),
                    now.namespace.clone(),
                    now.name.clone(),
                    now.uid.clone(),
                ));
            }
        }
        RestoreStep::MarkDone => {
            // The object has its status (kept, or just restored): tell other operators to go
            // ahead.
            let (restorer, ar, obj) = (capture.restorer.clone(), ar.clone(), obj.clone());
            capture.runtime.spawn(async move {
                restore::restore_once(&restorer, &ar, &obj).await;
            });
        }
    }
}

/// The object is gone: queue its tombstone (with its last status when known).
fn forget(
    capture: &Capture,
    kind: &ResourceKind,
    ar: &ApiResource,
    obj: &DynamicObject,
    status: Value,
    seen: &ObjectView,
) {
    capture.kinds.with_objects(kind, |objects| {
        objects.remove(&(seen.namespace.clone(), seen.name.clone()))
    });
    capture.restorer.forget_attempt(&seen.uid);
    let policies = capture.scope.policies();
    for backend in capture
        .scope
        .backends_covering(&policies, kind, seen, false)
    {
        capture
            .queue
            .push(backend, record_of(ar, obj, status.clone(), true));
    }
}

/// Drains the capture queue into the backends; runs until aborted.
pub async fn capture_worker(capture: Arc<Capture>) {
    loop {
        let (key, mut record) = capture.queue.next().await;
        let mut attempt: u32 = 0;
        loop {
            if *capture.leadership.borrow() != Leadership::Leading {
                // One writer per vault: the new leader's initial list captures this state again.
                capture.queue.done(&key, &record);
                break;
            }
            let retention = capture.scope.retention_of(&key.0);
            let result = match capture.backends.vault(&key.0, retention).await {
                Ok(vault) => vault
                    .save(&record)
                    .await
                    .map_err(|source| BackendError::vault(&key.0, source)),
                Err(e) => Err(e),
            };
            match result {
                Ok(saved) => {
                    capture
                        .backends
                        .succeeded(&key.0, matches!(saved, Saved::Written { .. }));
                    capture.saved(&record, saved);
                    capture.queue.done(&key, &record);
                    break;
                }
                Err(error) => {
                    attempt = attempt.saturating_add(1);
                    capture.backends.failed(&key.0, &error.to_string());
                    let delay = RETRY.delay(attempt, rand_unit()).delay;
                    tracing::debug!(backend = %key.0.location, %error, ?delay, "capture failed; retrying");
                    tokio::time::sleep(delay).await;
                    // A newer status may have replaced the one that failed.
                    match capture.queue.head(&key) {
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

/// Objects the vault holds as alive that the first list of a kind did not find were deleted
/// while no Vigil watched: they get their tombstone now, carrying the last recorded status. Only
/// in namespaces the policies writing to that backend cover (a vault is one cluster's). Best
/// effort: a backend that fails here is looked at again when the watch restarts.
async fn tombstone_vanished(capture: Arc<Capture>, kind: ResourceKind, present: HashSet<Name>) {
    let scope = &capture.scope;
    let policies: Vec<PolicyView> = scope
        .policies()
        .into_iter()
        .filter(|p| decide::names_kind(p, &kind))
        .collect();
    let mut backends: Vec<BackendRef> = policies.iter().map(|p| scope.backend_of(p)).collect();
    backends.sort();
    backends.dedup();
    let labels = |ns: &str| scope.namespace_labels(ns);
    for backend in backends {
        let retention = scope.retention_of(&backend);
        let keys = match capture.backends.vault(&backend, retention).await {
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
                scope.backend_of(p) == backend
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
                capture.queue.push(backend.clone(), tombstone);
            }
        }
    }
}
