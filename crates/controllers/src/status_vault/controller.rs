//! The running status vault controller: the StatusBackupPolicy cache, API discovery of the kinds
//! policies name, one lean watch per kind (started and stopped as policies change, only while
//! this replica leads), capture workers, backend health checks, and the policies' status.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, PartialObjectMeta, Patch, PatchParams};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Client, Resource as _, ResourceExt as _};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::{Notify, watch};
use vigil_apis::StatusBackupPolicy;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::backoff::{BackoffPolicy, Backoffs};
use vigil_runtime::events;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::Metrics;
use vigil_runtime::shared::SharedWatches;
use vigil_vault::{EncryptionKey, Record, Saved, Vault, VaultOptions};

use super::capture::{self, Objects};
use super::decide::{self, PolicyInputs};
use super::model::{BackendHealth, BackendRef, PolicyView, Resolution, Settings};
use super::queue::CaptureQueue;
use super::restore::StatusRestorer;

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "statusvault";
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-statusvault";

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

/// Buckets of the capture lag histogram, in seconds (target: p99 under 1 s).
const CAPTURE_LAG_BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0,
];

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

/// Called after each successful save (benchmarks measure capture lag with it).
pub type SavedHook = Arc<dyn Fn(&Record, Saved) + Send + Sync>;

struct KindState {
    resolution: Resolution,
    objects: Objects,
    synced: bool,
}

/// State shared by the supervisor, the kind watches, the capture workers and the restorer.
pub struct Shared {
    pub(super) client: Client,
    /// Where kind watches come from: a kind another controller caches too is watched once.
    pub(super) watches: SharedWatches,
    pub(super) settings: Settings,
    pub(super) queue: CaptureQueue,
    pub(super) on_saved: Option<SavedHook>,
    pub(super) recorder: Recorder,
    pub(super) leadership: watch::Receiver<Leadership>,
    policies: Store<StatusBackupPolicy>,
    policies_synced: AtomicBool,
    namespaces: Store<PartialObjectMeta<Namespace>>,
    kinds: Mutex<BTreeMap<ResourceKind, KindState>>,
    vaults: tokio::sync::Mutex<HashMap<BackendRef, (u32, Vault)>>,
    health: Mutex<HashMap<BackendRef, BackendHealth>>,
    restore_attempts: Mutex<HashSet<String>>,
    warned: Mutex<HashSet<String>>,
    written: Counter,
    capture_lag: Histogram,
    changed: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Plain maps and sets: a panic elsewhere cannot leave them half-updated.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    pub(super) fn policies(&self) -> Vec<PolicyView> {
        self.policies
            .state()
            .iter()
            .map(|p| PolicyView {
                name: p.name_any(),
                generation: p.metadata.generation,
                spec: p.spec.clone(),
            })
            .collect()
    }

    pub(super) fn policies_synced(&self) -> bool {
        self.policies_synced.load(Ordering::Acquire)
    }

    pub(super) fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&reflector::ObjectRef::new(ns))
            .map(|n| n.labels().clone())
    }

    pub(super) fn with_objects<T>(
        &self,
        kind: &ResourceKind,
        f: impl FnOnce(&mut Objects) -> T,
    ) -> T {
        let mut kinds = lock(&self.kinds);
        let state = kinds.entry(kind.clone()).or_insert_with(|| KindState {
            resolution: Resolution::Failed("not resolved yet".into()),
            objects: Objects::new(),
            synced: false,
        });
        f(&mut state.objects)
    }

    pub(super) fn set_kind_synced(&self, kind: &ResourceKind) {
        if let Some(state) = lock(&self.kinds).get_mut(kind) {
            state.synced = true;
        }
        self.changed.notify_one();
    }

    /// Whether this is the first restore attempt for an object (uid) since it was last seen.
    pub(super) fn first_restore_attempt(&self, uid: &str) -> bool {
        lock(&self.restore_attempts).insert(uid.to_owned())
    }

    pub(super) fn forget_restore_attempt(&self, uid: &str) {
        lock(&self.restore_attempts).remove(uid);
    }

    /// Whether a warning (by key) is reported for the first time.
    pub(super) fn first_warning(&self, key: &str) -> bool {
        lock(&self.warned).insert(key.to_owned())
    }

    /// The vault of a backend, opened on first use (and again when its retention changes).
    pub(super) async fn vault(&self, backend: &BackendRef) -> Result<Vault, String> {
        let retention = decide::retention_of(backend, &self.policies(), &self.settings);
        let mut vaults = self.vaults.lock().await;
        if let Some((r, vault)) = vaults.get(backend)
            && *r == retention
        {
            return Ok(vault.clone());
        }
        let key = match &backend.key_file {
            Some(path) => Some(EncryptionKey::from_file(path).map_err(|e| e.to_string())?),
            None => None,
        };
        let options = VaultOptions {
            retention: retention as usize,
            key,
        };
        let vault = Vault::open(&backend.location, options)
            .await
            .map_err(|e| e.to_string())?;
        vaults.insert(backend.clone(), (retention, vault.clone()));
        Ok(vault)
    }

    pub(super) fn backend_succeeded(&self, backend: &BackendRef, wrote: bool) {
        let mut health = lock(&self.health);
        let h = health.entry(backend.clone()).or_default();
        let recovered = h.error.take().is_some();
        if wrote {
            h.last_capture = Some(k8s_openapi::jiff::Timestamp::now().to_string());
        }
        drop(health);
        if recovered {
            tracing::info!(backend = %backend.location, "status vault backend answers again");
            self.changed.notify_one();
        }
    }

    pub(super) fn backend_failed(&self, backend: &BackendRef, error: &str) {
        let mut health = lock(&self.health);
        let h = health.entry(backend.clone()).or_default();
        let new = h.error.is_none();
        h.error = Some(error.to_owned());
        drop(health);
        if new {
            tracing::warn!(backend = %backend.location, %error, "status vault backend fails; captures are kept and retried");
            self.changed.notify_one();
        }
    }

    pub(super) fn metrics_captured(&self, record: &Record, saved: Saved) {
        if matches!(saved, Saved::Written { .. }) {
            self.written.inc();
            // `time` is when the watch event arrived: this is the lag to a durable record.
            if let Ok(seen) = record.time.parse::<k8s_openapi::jiff::Timestamp>() {
                let lag = k8s_openapi::jiff::Timestamp::now().duration_since(seen);
                self.capture_lag.observe(lag.as_secs_f64().max(0.0));
            }
        }
    }

    fn health_of(&self, backend: &BackendRef) -> BackendHealth {
        let mut h = lock(&self.health).get(backend).cloned().unwrap_or_default();
        h.pending = self.queue.pending_for(backend);
        h
    }
}

/// The status vault: build it, hand its [`StatusRestorer`] to the controllers that need it, then
/// [`StatusVault::run`] it.
pub struct StatusVault {
    shared: Arc<Shared>,
    policy_writer: reflector::store::Writer<StatusBackupPolicy>,
    namespace_writer: reflector::store::Writer<PartialObjectMeta<Namespace>>,
}

impl StatusVault {
    pub fn new(
        client: Client,
        watches: SharedWatches,
        settings: Settings,
        leadership: watch::Receiver<Leadership>,
    ) -> Self {
        Self::with_hook(client, watches, settings, leadership, None)
    }

    /// Like [`StatusVault::new`], calling `on_saved` after each successful save.
    pub fn with_hook(
        client: Client,
        watches: SharedWatches,
        settings: Settings,
        leadership: watch::Receiver<Leadership>,
        on_saved: Option<SavedHook>,
    ) -> Self {
        let (policies, policy_writer) = reflector::store();
        let (namespaces, namespace_writer) = reflector::store();
        let recorder = Recorder::new(
            client.clone(),
            Reporter {
                controller: "vigil".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        );
        let shared = Arc::new(Shared {
            client,
            watches,
            settings,
            queue: CaptureQueue::default(),
            on_saved,
            recorder,
            leadership,
            policies,
            policies_synced: AtomicBool::new(false),
            namespaces,
            kinds: Mutex::new(BTreeMap::new()),
            vaults: tokio::sync::Mutex::new(HashMap::new()),
            health: Mutex::new(HashMap::new()),
            restore_attempts: Mutex::new(HashSet::new()),
            warned: Mutex::new(HashSet::new()),
            written: Counter::default(),
            capture_lag: Histogram::new(CAPTURE_LAG_BUCKETS),
            changed: Notify::new(),
        });
        Self {
            shared,
            policy_writer,
            namespace_writer,
        }
    }

    /// The runtime API for Vigil's controllers (see [`StatusRestorer::ensure_restored`]).
    pub fn restorer(&self) -> StatusRestorer {
        StatusRestorer {
            shared: self.shared.clone(),
        }
    }

    /// Runs until `shutdown` resolves. `ready` is set once the policies and namespaces are
    /// loaded.
    pub async fn run(
        self,
        registry: Arc<Metrics>,
        ready: impl Fn(bool) + Send + Sync + 'static,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let Self {
            shared,
            policy_writer,
            namespace_writer,
        } = self;
        registry.register(
            "vigil_status_vault_records_written",
            "Status records written to the vault's backends",
            shared.written.clone(),
        );
        registry.register(
            "vigil_status_vault_capture_lag_seconds",
            "From a status change's watch event to its record being durable in the backend",
            shared.capture_lag.clone(),
        );
        let pending_gauge = Gauge::<i64>::default();
        registry.register(
            "vigil_status_vault_pending_captures",
            "Status records waiting for their backend",
            pending_gauge.clone(),
        );
        let metrics = registry.controller(NAME);

        let ns_synced = Arc::new(AtomicBool::new(false));
        let mut tasks = Vec::new();
        {
            let shared = shared.clone();
            tasks.push(tokio::spawn(async move {
                let stream = reflector::reflector(
                    policy_writer,
                    shared
                        .watches
                        .watch::<StatusBackupPolicy>(None, &watcher::Config::default()),
                );
                futures::pin_mut!(stream);
                let mut told = false;
                while let Some(event) = stream.next().await {
                    match event {
                        Ok(watcher::Event::InitDone) => {
                            shared.policies_synced.store(true, Ordering::Release);
                        }
                        // The CRD is not installed: no policy, nothing to do (the list is
                        // retried with backoff, so installing the CRD later just works).
                        Err(watcher::Error::InitialListFailed(kube::Error::Api(s)))
                            if s.code == 404 =>
                        {
                            if !told {
                                tracing::info!(
                                    "no StatusBackupPolicy CRD installed: the status vault is idle"
                                );
                                told = true;
                            }
                            shared.policies_synced.store(true, Ordering::Release);
                        }
                        _ => {}
                    }
                    shared.changed.notify_one();
                }
            }));
        }
        {
            let shared = shared.clone();
            let ns_synced = ns_synced.clone();
            tasks.push(tokio::spawn(async move {
                let stream = reflector::reflector(
                    namespace_writer,
                    shared
                        .watches
                        .watch::<PartialObjectMeta<Namespace>>(None, &watcher::Config::default()),
                );
                futures::pin_mut!(stream);
                while let Some(event) = stream.next().await {
                    if let Ok(watcher::Event::InitDone) = event {
                        ns_synced.store(true, Ordering::Release);
                    }
                    shared.changed.notify_one();
                }
            }));
        }
        for _ in 0..WORKERS {
            tasks.push(tokio::spawn(capture::capture_worker(shared.clone())));
        }
        tasks.push(tokio::spawn(check_backends(shared.clone())));

        let mut supervisor = Supervisor {
            shared: shared.clone(),
            watches: HashMap::new(),
            retry_at: HashMap::new(),
            backoffs: Backoffs::new(RESOLVE_RETRY),
            fingerprints: HashMap::new(),
        };
        let mut reported_ready = false;
        futures::pin_mut!(shutdown);
        let mut leadership = shared.leadership.clone();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = shared.changed.notified() => {}
                _ = leadership.changed() => {}
                () = tokio::time::sleep(TICK) => {}
            }
            let synced = shared.policies_synced() && ns_synced.load(Ordering::Acquire);
            if synced && !reported_ready {
                ready(true);
                reported_ready = true;
            }
            if !synced {
                continue;
            }
            let timer = metrics.reconcile_started();
            supervisor.sync_watches().await;
            let ok = supervisor.update_policies().await;
            pending_gauge.set(i64::try_from(shared.queue.pending_for_all()).unwrap_or(i64::MAX));
            timer.finish(if ok {
                vigil_runtime::metrics::ReconcileResult::Success
            } else {
                vigil_runtime::metrics::ReconcileResult::Error
            });
        }
        // Give queued captures a moment to reach their backend before going away; what does not
        // make it is captured again by the next leader's initial list.
        let deadline = Instant::now() + Duration::from_secs(5);
        while shared.queue.pending_for_all() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (_, (handle, _)) in supervisor.watches.drain() {
            handle.abort();
        }
        for task in tasks {
            task.abort();
        }
    }
}

/// Runs the controller until `shutdown` resolves (a [`StatusVault`] nobody else consults).
pub async fn run(
    client: Client,
    watches: SharedWatches,
    settings: Settings,
    leadership: watch::Receiver<Leadership>,
    registry: Arc<Metrics>,
    ready: impl Fn(bool) + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) {
    StatusVault::new(client, watches, settings, leadership)
        .run(registry, ready, shutdown)
        .await;
}

struct Supervisor {
    shared: Arc<Shared>,
    /// Running kind watches and the API resource they watch.
    watches: HashMap<ResourceKind, (tokio::task::JoinHandle<()>, ApiResource)>,
    /// When an unresolved kind is tried again.
    retry_at: HashMap<ResourceKind, Instant>,
    backoffs: Backoffs<ResourceKind>,
    /// The policies (name, generation) naming each watched kind: a change restarts its watch,
    /// so objects the edit newly covers are captured.
    fingerprints: HashMap<ResourceKind, Vec<(String, Option<i64>)>>,
}

impl Supervisor {
    /// Starts watches for the kinds policies name (resolving them first), stops the others.
    async fn sync_watches(&mut self) {
        let leading = *self.shared.leadership.borrow() == Leadership::Leading;
        let policies = self.shared.policies();
        let wanted = if leading {
            decide::wanted_kinds(&policies)
        } else {
            BTreeSet::new()
        };
        let fingerprint = |kind: &ResourceKind| {
            let mut f: Vec<(String, Option<i64>)> = policies
                .iter()
                .filter(|p| decide::names_kind(p, kind))
                .map(|p| (p.name.clone(), p.generation))
                .collect();
            f.sort();
            f
        };
        let stale: Vec<ResourceKind> = self
            .watches
            .keys()
            .filter(|k| !wanted.contains(*k) || self.fingerprints.get(*k) != Some(&fingerprint(k)))
            .cloned()
            .collect();
        for kind in stale {
            if let Some((handle, _)) = self.watches.remove(&kind) {
                handle.abort();
            }
            self.fingerprints.remove(&kind);
            let mut kinds = lock(&self.shared.kinds);
            if wanted.contains(&kind) {
                // Restarted: forget the statuses seen so the initial list captures them again
                // (the vault writes nothing for those it already holds).
                if let Some(state) = kinds.get_mut(&kind) {
                    for o in state.objects.values_mut() {
                        o.status_hash = None;
                    }
                    state.synced = false;
                }
            } else {
                kinds.remove(&kind);
            }
        }
        lock(&self.shared.kinds).retain(|k, _| wanted.contains(k));
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
            let (resolution, ar) = resolve(&self.shared.client, kind).await;
            let watching = ar.is_some();
            {
                let mut kinds = lock(&self.shared.kinds);
                let state = kinds.entry(kind.clone()).or_insert_with(|| KindState {
                    resolution: resolution.clone(),
                    objects: Objects::new(),
                    synced: false,
                });
                state.resolution = resolution.clone();
            }
            match ar {
                Some(ar) => {
                    self.backoffs.success(kind);
                    self.retry_at.remove(kind);
                    tracing::info!(group = %kind.group, kind = %kind.kind, resource = %ar.plural, "watching status");
                    let handle = tokio::spawn(capture::watch_kind(
                        self.shared.clone(),
                        kind.clone(),
                        ar.clone(),
                    ));
                    self.watches.insert(kind.clone(), (handle, ar));
                    self.fingerprints.insert(kind.clone(), fingerprint(kind));
                }
                None => {
                    let retry = self.backoffs.failure(kind);
                    self.retry_at
                        .insert(kind.clone(), Instant::now() + retry.delay);
                    tracing::debug!(group = %kind.group, kind = %kind.kind, state = resolution.state(), delay = ?retry.delay, "kind not watched; retrying");
                }
            }
            debug_assert!(watching || !self.watches.contains_key(kind));
        }
    }

    /// Writes each policy's status where it changed, and Events for new problems. Returns
    /// whether every write succeeded.
    async fn update_policies(&mut self) -> bool {
        if *self.shared.leadership.borrow() != Leadership::Leading {
            return true;
        }
        let shared = &self.shared;
        let policies: Vec<Arc<StatusBackupPolicy>> = shared.policies.state();
        let views = shared.policies();
        let (resolutions, covered) = {
            let kinds = lock(&shared.kinds);
            let resolutions: BTreeMap<ResourceKind, Resolution> = kinds
                .iter()
                .map(|(k, s)| (k.clone(), s.resolution.clone()))
                .collect();
            let labels = |ns: &str| shared.namespace_labels(ns);
            let covered: BTreeMap<String, u32> = views
                .iter()
                .map(|p| {
                    let n: usize = kinds
                        .iter()
                        .map(|(kind, s)| {
                            s.objects
                                .values()
                                .filter(|o| decide::covers(p, kind, o, &labels))
                                .count()
                        })
                        .sum();
                    (p.name.clone(), u32::try_from(n).unwrap_or(u32::MAX))
                })
                .collect();
            (resolutions, covered)
        };
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let api: Api<StatusBackupPolicy> = Api::all(shared.client.clone());
        let mut ok = true;
        for (policy, view) in policies.iter().zip(views.iter()) {
            let backend = decide::backend_of(view, &shared.settings);
            let health = shared.health_of(&backend);
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
                let event = events::event(true, reason, message, "Watch");
                events::record(&shared.recorder, &event, &policy.object_ref(&())).await;
            }
        }
        ok
    }
}

/// Resolves a kind through API discovery: its resource, and whether it has `/status`.
async fn resolve(client: &Client, kind: &ResourceKind) -> (Resolution, Option<ApiResource>) {
    let group_label = if kind.group.is_empty() {
        "the core group".to_owned()
    } else {
        format!("group {}", kind.group)
    };
    let group = match kube::discovery::group(client, &kind.group).await {
        Ok(g) => g,
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
            return (
                Resolution::NotFound(format!("the API server serves no {group_label}")),
                None,
            );
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return (
                Resolution::NotFound(format!("the API server serves no {group_label}")),
                None,
            );
        }
        Err(e) => return (Resolution::Failed(e.to_string()), None),
    };
    // The kind may live in any version the group serves: two CRDs of one group can serve
    // different versions (`vigil.dev/v1` StatusBackupPolicy, `vigil.dev/v1alpha1`
    // KubernetesCluster), and the group's preferred version is only one of them.
    let preferred = group.preferred_version_or_latest().to_owned();
    let versions: Vec<String> = std::iter::once(preferred.clone())
        .chain(
            group
                .versions()
                .filter(|v| **v != preferred)
                .map(str::to_owned),
        )
        .collect();
    let found = versions.iter().find_map(|version| {
        let resources = group.versioned_resources(version);
        resources
            .iter()
            .find(|(ar, _)| ar.kind == kind.kind)
            .or_else(|| {
                resources.iter().find(|(ar, _)| {
                    ar.kind.eq_ignore_ascii_case(&kind.kind)
                        || ar.plural.eq_ignore_ascii_case(&kind.kind)
                })
            })
            .cloned()
    });
    let Some((ar, caps)) = found else {
        return (
            Resolution::NotFound(format!(
                "no kind {} in {group_label} (versions {})",
                kind.kind,
                versions.join(", ")
            )),
            None,
        );
    };
    if !caps
        .subresources
        .iter()
        .any(|(sub, _)| sub.plural == "status")
    {
        return (
            Resolution::NoStatusSubresource {
                resource: ar.plural.clone(),
            },
            None,
        );
    }
    (
        Resolution::Watching {
            resource: ar.plural.clone(),
            api_version: ar.api_version.clone(),
            namespaced: caps.scope == kube::discovery::Scope::Namespaced,
        },
        Some(ar.clone()),
    )
}

/// Checks the backends policies name, so an outage (and its end) shows even without captures.
async fn check_backends(shared: Arc<Shared>) {
    loop {
        tokio::time::sleep(CHECK_INTERVAL).await;
        if *shared.leadership.borrow() != Leadership::Leading || !shared.policies_synced() {
            continue;
        }
        let backends: BTreeSet<BackendRef> = shared
            .policies()
            .iter()
            .map(|p| decide::backend_of(p, &shared.settings))
            .collect();
        for backend in backends {
            let result = match shared.vault(&backend).await {
                Ok(vault) => vault.check().await.map_err(|e| e.to_string()),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => shared.backend_succeeded(&backend, false),
                Err(e) => shared.backend_failed(&backend, &e),
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
