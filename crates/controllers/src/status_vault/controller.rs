//! The running status vault controller: the StatusBackupPolicy cache, API discovery of the kinds
//! policies name, one lean watch per kind (started and stopped as policies change, only while
//! this replica leads), capture workers, backend health checks, and the policies' status.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::reflector;
use kube::runtime::watcher;
use kube::{Client, Resource as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{Notify, watch};
use vigil_apis::StatusBackupPolicy;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::Runtime;
use vigil_runtime::backoff::{BackoffPolicy, Backoffs};
use vigil_runtime::events::{EventNote, EventRecorder};
use vigil_runtime::leader::Leadership;
use vigil_runtime::shared::SharedWatches;

use super::backends::Backends;
pub use super::capture::SavedHook;
use super::capture::{self, Capture};
use super::decide::{self, Fingerprint, PolicyInputs};
use super::discovery::resolve;
use super::kinds::Kinds;
pub use super::model::FIELD_MANAGER;
use super::model::{BackendRef, Settings};
use super::queue::CaptureQueue;
use super::restore::{Restorer, StatusRestorer};
use super::scope::{Scope, ScopeWriters};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "statusvault";

/// What this controller's code does with the API, for its own kinds. The kinds policies cover
/// are only known at install time: `vigil manifests --status-vault-resources` adds, for each,
/// get/list/watch on the resource, patch on the resource (the restore annotations) and
/// patch on its `/status` (see [`covered_kind_permissions`]).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["statusbackuppolicies"],
        verbs: &["list", "watch"],
    },
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["statusbackuppolicies/status"],
        verbs: &["patch"],
    },
    // namespaceSelector: namespaces' labels, through a metadata-only watch.
    crate::permissions::Permission {
        group: "",
        resources: &["namespaces"],
        verbs: &["list", "watch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// Verbs on a covered kind: watched (get for the restore's fresh read), and patched for the
/// restore annotations; its `/status` is patched to restore.
pub const COVERED_VERBS: &[&str] = &["get", "list", "watch", "patch"];
pub const COVERED_STATUS_VERBS: &[&str] = &["patch"];

/// The rules for covered resources given as `plural` or `plural.group`
/// (`services,kubernetesclusters.infra.example.com`): `(group, resources, verbs)`.
pub fn covered_kind_permissions(resources: &[String]) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in resources {
        let r = r.trim().to_lowercase();
        if r.is_empty() {
            continue;
        }
        let (plural, group) = r.split_once('.').unwrap_or((r.as_str(), ""));
        by_group
            .entry(group.to_owned())
            .or_default()
            .insert(plural.to_owned());
    }
    let verbs = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for (group, plurals) in by_group {
        out.push((
            group.clone(),
            plurals.iter().cloned().collect(),
            verbs(COVERED_VERBS),
        ));
        out.push((
            group,
            plurals.iter().map(|p| format!("{p}/status")).collect(),
            verbs(COVERED_STATUS_VERBS),
        ));
    }
    out
}

/// Capture workers: records of different objects are written this many at a time.
const WORKERS: usize = 64;
/// How often policies' status and kinds' resolution are looked at without a change.
const TICK: Duration = Duration::from_secs(1);
/// How often backends are checked for health.
const CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// How kind resolution is retried (a CRD installed later is picked up).
const RESOLVE_RETRY: BackoffPolicy = BackoffPolicy {
    base: Duration::from_secs(1),
    max: Duration::from_secs(60),
    jitter: 0.1,
    quarantine_after: u32::MAX,
    quarantine_interval: Duration::from_secs(60),
};

/// The status vault: build it ([`StatusVault::on`] a Manager's runtime), hand its
/// [`StatusRestorer`] to the controllers that need it, then [`StatusVault::run_on`] it. Not a
/// kube-runtime controller (a supervisor loop over policies, one watch per covered kind, capture
/// workers): it takes only the plumbing from the runtime.
pub struct StatusVault {
    client: Client,
    capture: Arc<Capture>,
    writers: ScopeWriters,
    recorder: EventRecorder,
    /// Notified by what the controller reacts to at once: a policy or namespace event, a kind's
    /// first list, a backend failing or answering again.
    changed: Arc<Notify>,
}

impl StatusVault {
    /// The vault on `runtime`'s client, watches, leadership and Event recorder; run it with
    /// [`StatusVault::run_on`] on the same runtime.
    pub fn on(runtime: &Runtime, settings: Settings) -> Self {
        Self::build(
            runtime.client().clone(),
            runtime.watches().clone(),
            settings,
            runtime.leadership(),
            runtime.recorder().clone(),
        )
    }

    /// Calls `on_saved` after each successful save (a benchmark's probe); before it runs.
    pub fn on_saved(self, on_saved: SavedHook) -> Self {
        if self.capture.on_saved.set(on_saved).is_err() {
            tracing::warn!("a second on_saved hook is ignored");
        }
        self
    }

    fn build(
        client: Client,
        watches: SharedWatches,
        settings: Settings,
        leadership: watch::Receiver<Leadership>,
        recorder: EventRecorder,
    ) -> Self {
        let changed = Arc::new(Notify::new());
        let (scope, writers) = Scope::new(settings);
        let backends = Arc::new(Backends::new(changed.clone()));
        let queue = Arc::new(CaptureQueue::default());
        let restorer = Arc::new(Restorer::new(
            client.clone(),
            scope.clone(),
            backends.clone(),
            queue.clone(),
            recorder.clone(),
            leadership.clone(),
        ));
        let capture = Arc::new(Capture {
            watches: watches.clone(),
            scope,
            kinds: Arc::new(Kinds::new(changed.clone())),
            backends,
            queue,
            restorer,
            leadership,
            on_saved: std::sync::OnceLock::new(),
            written: Counter::default(),
            capture_lag: Capture::capture_lag_histogram(),
        });
        Self {
            client,
            capture,
            writers,
            recorder,
            changed,
        }
    }

    /// The runtime API for Vigil's controllers (see [`StatusRestorer::ensure_restored`]).
    pub fn restorer(&self) -> StatusRestorer {
        StatusRestorer {
            inner: self.capture.restorer.clone(),
        }
    }

    /// Runs until `runtime` shuts down, with its metrics; ready on `/readyz` once the policies
    /// and namespaces are loaded. `runtime` is the one the vault was made [`on`](Self::on).
    pub async fn run_on(self, runtime: Runtime) {
        let Self {
            client,
            capture,
            writers,
            recorder,
            changed,
        } = self;
        let registry = runtime.metrics();
        registry.register(
            "vigil_status_vault_records_written",
            "Status records written to the vault's backends",
            capture.written.clone(),
        );
        registry.register(
            "vigil_status_vault_capture_lag_seconds",
            "From a status change's watch event to its record being durable in the backend",
            capture.capture_lag.clone(),
        );
        let pending_gauge = Gauge::<i64>::default();
        registry.register(
            "vigil_status_vault_pending_captures",
            "Status records waiting for their backend",
            pending_gauge.clone(),
        );
        let metrics = registry.controller(NAME);

        let scope = capture.scope.clone();
        let mut tasks = vec![
            tokio::spawn(watch_policies(
                capture.watches.clone(),
                scope.clone(),
                writers.policies,
                changed.clone(),
            )),
            tokio::spawn(watch_namespaces(
                capture.watches.clone(),
                scope.clone(),
                writers.namespaces,
                changed.clone(),
            )),
        ];
        for _ in 0..WORKERS {
            tasks.push(tokio::spawn(capture::capture_worker(capture.clone())));
        }
        tasks.push(tokio::spawn(check_backends(capture.clone())));

        let mut supervisor = Supervisor {
            client,
            recorder,
            capture: capture.clone(),
            watches: HashMap::new(),
            retry_at: HashMap::new(),
            backoffs: Backoffs::new(RESOLVE_RETRY),
        };
        let mut reported_ready = false;
        let shutdown = runtime.shutdown();
        futures::pin_mut!(shutdown);
        let mut leadership = capture.leadership.clone();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = changed.notified() => {}
                _ = leadership.changed() => {}
                () = tokio::time::sleep(TICK) => {}
            }
            let synced = scope.synced();
            if synced && !reported_ready {
                runtime.set_ready(NAME, true);
                reported_ready = true;
            }
            if !synced {
                continue;
            }
            let timer = metrics.reconcile_started();
            supervisor.sync_watches().await;
            let ok = supervisor.update_policies().await;
            pending_gauge.set(i64::try_from(capture.queue.pending_for_all()).unwrap_or(i64::MAX));
            timer.finish(if ok {
                vigil_runtime::metrics::ReconcileResult::Success
            } else {
                vigil_runtime::metrics::ReconcileResult::Error
            });
        }
        // Give queued captures a moment to reach their backend before going away; what does not
        // make it is captured again by the next leader's initial list.
        let deadline = Instant::now() + Duration::from_secs(5);
        while capture.queue.pending_for_all() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (_, watch) in supervisor.watches.drain() {
            watch.handle.abort();
        }
        for task in tasks {
            task.abort();
        }
    }
}

/// Fills the policy cache; the controller looks again on each event.
async fn watch_policies(
    watches: SharedWatches,
    scope: Arc<Scope>,
    writer: reflector::store::Writer<StatusBackupPolicy>,
    changed: Arc<Notify>,
) {
    let stream = reflector::reflector(
        writer,
        watches.watch::<StatusBackupPolicy>(None, &watcher::Config::default()),
    );
    futures::pin_mut!(stream);
    let mut told = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::InitDone) => scope.set_policies_synced(),
            // The CRD is not installed: no policy, nothing to do (the list is retried with
            // backoff, so installing the CRD later just works).
            Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if s.code == 404 => {
                if !told {
                    tracing::info!("no StatusBackupPolicy CRD installed: the status vault is idle");
                    told = true;
                }
                scope.set_policies_synced();
            }
            _ => {}
        }
        changed.notify_one();
    }
}

/// Fills the namespace cache (labels, for `namespaceSelector`).
async fn watch_namespaces(
    watches: SharedWatches,
    scope: Arc<Scope>,
    writer: reflector::store::Writer<PartialObjectMeta<Namespace>>,
    changed: Arc<Notify>,
) {
    let stream = reflector::reflector(
        writer,
        watches.watch::<PartialObjectMeta<Namespace>>(None, &watcher::Config::default()),
    );
    futures::pin_mut!(stream);
    while let Some(event) = stream.next().await {
        if let Ok(watcher::Event::InitDone) = event {
            scope.set_namespaces_synced();
        }
        changed.notify_one();
    }
}

/// A running kind watch.
struct KindWatch {
    handle: tokio::task::JoinHandle<()>,
    /// The policies it was started for: a change restarts it.
    fingerprint: Fingerprint,
}

/// The controller's loop state: the kind watches it runs, and when unresolved kinds are tried
/// again.
struct Supervisor {
    client: Client,
    recorder: EventRecorder,
    capture: Arc<Capture>,
    watches: HashMap<ResourceKind, KindWatch>,
    /// When an unresolved kind is tried again.
    retry_at: HashMap<ResourceKind, Instant>,
    backoffs: Backoffs<ResourceKind>,
}

impl Supervisor {
    /// Starts watches for the kinds policies name (resolving them first), stops the others.
    async fn sync_watches(&mut self) {
        let leading = *self.capture.leadership.borrow() == Leadership::Leading;
        let policies = self.capture.scope.policies();
        let wanted = if leading {
            decide::wanted_kinds(&policies)
        } else {
            BTreeSet::new()
        };
        let kinds = &self.capture.kinds;
        let running = self.watches.iter().map(|(k, w)| (k, &w.fingerprint));
        for kind in decide::stale_watches(running, &wanted, &policies) {
            if let Some(watch) = self.watches.remove(&kind) {
                watch.handle.abort();
            }
            if wanted.contains(&kind) {
                kinds.restart(&kind);
            }
        }
        kinds.retain(&wanted);
        for kind in &wanted {
            if self.watches.contains_key(kind) {
                continue;
            }
            if self
                .retry_at
                .get(kind)
                .is_some_and(|at| Instant::now() < *at)
            {
                continue;
            }
            let (resolution, ar) = resolve(&self.client, kind).await;
            kinds.set_resolution(kind, resolution.clone());
            match ar {
                Some(ar) => {
                    self.backoffs.success(kind);
                    self.retry_at.remove(kind);
                    tracing::info!(group = %kind.group, kind = %kind.kind, resource = %ar.plural, "watching status");
                    let handle =
                        tokio::spawn(capture::watch_kind(self.capture.clone(), kind.clone(), ar));
                    let fingerprint = decide::fingerprint(&policies, kind);
                    self.watches.insert(
                        kind.clone(),
                        KindWatch {
                            handle,
                            fingerprint,
                        },
                    );
                }
                None => {
                    let retry = self.backoffs.failure(kind);
                    self.retry_at
                        .insert(kind.clone(), Instant::now() + retry.delay);
                    tracing::debug!(group = %kind.group, kind = %kind.kind, state = resolution.state(), delay = ?retry.delay, "kind not watched; retrying");
                }
            }
        }
    }

    /// Writes each policy's status where it changed, and Events for new problems. Returns
    /// whether every write succeeded.
    async fn update_policies(&mut self) -> bool {
        if *self.capture.leadership.borrow() != Leadership::Leading {
            return true;
        }
        let scope = &self.capture.scope;
        let policies = scope.policy_objects();
        let views = scope.policies();
        let resolutions = self.capture.kinds.resolutions();
        let labels = |ns: &str| scope.namespace_labels(ns);
        let covered: BTreeMap<String, u32> = views
            .iter()
            .map(|p| {
                let n = self
                    .capture
                    .kinds
                    .count(|kind, o| decide::covers(p, kind, o, &labels));
                (p.name.clone(), u32::try_from(n).unwrap_or(u32::MAX))
            })
            .collect();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let api: Api<StatusBackupPolicy> = Api::all(self.client.clone());
        let mut ok = true;
        for (policy, view) in policies.iter().zip(views.iter()) {
            let backend = scope.backend_of(view);
            let health = self
                .capture
                .backends
                .health_of(&backend, self.capture.queue.pending_for(&backend));
            let plan = decide::policy_status(&PolicyInputs {
                policy: view,
                previous: policy.status.as_ref(),
                resolutions: &resolutions,
                covered: covered.get(&view.name).copied().unwrap_or(0),
                backend: &backend,
                health: &health,
                now: &now,
            });
            if policy.status.as_ref() != Some(&plan.status) {
                let mut patch = serde_json::json!({"status": plan.status});
                // Merge patches leave out what serializes as absent: send emptied lists.
                patch["status"]["resources"] = serde_json::json!(plan.status.resources);
                if let Err(e) = api
                    .patch_status(
                        &view.name,
                        &PatchParams::apply(FIELD_MANAGER),
                        &Patch::Merge(&patch),
                    )
                    .await
                {
                    tracing::debug!(policy = %view.name, error = %e, "could not write the policy's status; retrying");
                    ok = false;
                    continue;
                }
            }
            for (reason, message) in &plan.warnings {
                let note = EventNote::warning(reason, message.clone());
                self.recorder
                    .publish(&policy.object_ref(&()), &note, "Watch")
                    .await;
            }
        }
        ok
    }
}

/// Checks the backends policies name, so an outage (and its end) shows even without captures.
async fn check_backends(capture: Arc<Capture>) {
    let scope = &capture.scope;
    loop {
        tokio::time::sleep(CHECK_INTERVAL).await;
        if *capture.leadership.borrow() != Leadership::Leading || !scope.policies_synced() {
            continue;
        }
        let backends: BTreeSet<BackendRef> = scope
            .policies()
            .iter()
            .map(|p| scope.backend_of(p))
            .collect();
        for backend in backends {
            let retention = scope.retention_of(&backend);
            let result = match capture.backends.vault(&backend, retention).await {
                Ok(vault) => vault.check().await.map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => capture.backends.succeeded(&backend, false),
                Err(e) => capture.backends.failed(&backend, &e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_resources_get_exact_rules() {
        let rules = covered_kind_permissions(&[
            "services".into(),
            "kubernetesclusters.infra.example.com".into(),
            " ".into(),
        ]);
        assert_eq!(
            rules,
            vec![
                (
                    String::new(),
                    vec!["services".to_owned()],
                    vec!["get".into(), "list".into(), "watch".into(), "patch".into()]
                ),
                (
                    String::new(),
                    vec!["services/status".to_owned()],
                    vec!["patch".into()]
                ),
                (
                    "infra.example.com".into(),
                    vec!["kubernetesclusters".to_owned()],
                    vec!["get".into(), "list".into(), "watch".into(), "patch".into()]
                ),
                (
                    "infra.example.com".into(),
                    vec!["kubernetesclusters/status".to_owned()],
                    vec!["patch".into()]
                ),
            ]
        );
    }
}
