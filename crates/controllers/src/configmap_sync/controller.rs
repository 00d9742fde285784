//! The running ConfigMapSync controller: lean caches of ConfigMaps and namespaces, the mapping
//! from their changes to the ConfigMapSyncs they concern, the finalizer, and the apply step that
//! turns a [`Plan`] into writes — only what differs, only while this replica leads.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::{Client, Resource as _, ResourceExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::{ConfigMapSyncStatus, DestinationState, SyncedKind};
use vigil_runtime::backoff::{BackoffPolicy, Backoffs, NoTriggerBackoff};
use vigil_runtime::cache::{lean_cache, watch_all};
use vigil_runtime::conditions;
use vigil_runtime::events;
use vigil_runtime::index::Index;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::{ControllerMetrics, Metrics};
use vigil_runtime::reconcile::{Guard, guarded};
use vigil_runtime::shared::SharedWatches;

use super::cache;
use super::decide::{self, decide};
use super::model::{
    CONTENT_HASH_ANNOTATION, COPY_LABEL, CopyRef, CopyWrite, EventNote, FINALIZER, Inputs,
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION, Plan, SOURCE_ANNOTATION, Settings,
    SyncView, WriteKind,
};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "configmapsync";
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-configmapsync";
/// Copies written at once for one ConfigMapSync (a fan-out to 100 namespaces overlaps them).
const WRITE_CONCURRENCY: usize = 16;
/// ConfigMapSyncs reconciled at once. Unbounded, 1,000 ConfigMapSyncs created together would each
/// open their own HTTP/1.1 connections for their writes: thousands of sockets and their buffers
/// (over 100 MiB measured) for no gain in throughput.
const RECONCILE_CONCURRENCY: u16 = 8;

/// What this controller's code does with the API (kept in step with the calls below).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "apps.bixbite.io",
        resources: &["configmapsyncs"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "apps.bixbite.io",
        resources: &["configmapsyncs/status"],
        verbs: &["patch"],
    },
    // Every ConfigMap is watched (any may be a source); a source is read with one GET when a
    // copy must be written; copies are created, replaced (PUT) and deleted (uid precondition).
    crate::permissions::Permission {
        group: "",
        resources: &["configmaps"],
        verbs: &["get", "list", "watch", "create", "update", "delete"],
    },
    crate::permissions::Permission {
        group: "",
        resources: &["namespaces"],
        verbs: &["list", "watch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// What copying Secrets adds (`--configmapsync-secrets`; `vigil manifests
/// --configmapsync-secrets` grants it): the same verbs on Secrets.
pub const SECRET_PERMISSIONS: &[crate::permissions::Permission] =
    &[crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["get", "list", "watch", "create", "update", "delete"],
    }];

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Copies(String),
}

/// The caches every reconcile reads.
#[derive(Clone)]
struct Caches {
    syncs: Store<ConfigMapSync>,
    /// ConfigMapSyncs by the name of their ConfigMap.
    sync_index: Index<ConfigMapSync>,
    config_maps: Store<ConfigMap>,
    /// ConfigMaps by name and by owning ConfigMapSync.
    config_map_index: Index<ConfigMap>,
    /// Secrets by name and owner, when the operator copies Secrets.
    secrets: Option<(Store<Secret>, Index<Secret>)>,
    namespaces: Store<Namespace>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabel {
    verb: &'static str,
}

/// Shared by reconciles.
struct Context {
    client: Client,
    settings: Settings,
    caches: Caches,
    leadership: watch::Receiver<Leadership>,
    backoffs: Backoffs<ObjectRef<ConfigMapSync>>,
    metrics: ControllerMetrics,
    /// `vigil_configmapsync_copy_writes_total{verb}`.
    writes: Family<VerbLabel, Counter>,
    recorder: Recorder,
    /// Turns true once the ConfigMap and namespace caches have synced.
    synced: watch::Receiver<bool>,
}

/// Runs the controller until `shutdown` resolves. `ready` is set once every cache has synced.
pub async fn run(
    client: Client,
    watches: SharedWatches,
    settings: Settings,
    leadership: watch::Receiver<Leadership>,
    registry: Arc<Metrics>,
    ready: impl Fn(bool) + Send + Sync + 'static,
    shutdown: impl std::future::Future<Output = ()> + Send + Sync + 'static,
) {
    let metrics = registry.controller(NAME);
    let destinations = Family::<StateLabel, Gauge>::default();
    registry.register(
        "vigil_configmapsync_destinations",
        "ConfigMapSync destinations by state, from the ConfigMapSyncs' status",
        destinations.clone(),
    );
    let writes = Family::<VerbLabel, Counter>::default();
    registry.register(
        "vigil_configmapsync_copy_writes",
        "Writes to copies by verb (create, update, delete)",
        writes.clone(),
    );
    let (syncs, sync_writer) = reflector::store();
    let (config_maps, config_map_writer) = reflector::store();
    let (namespaces, namespace_writer) = reflector::store();
    let caches = Caches {
        syncs: syncs.clone(),
        sync_index: Index::new(cache::sync_keys),
        config_maps,
        config_map_index: Index::new(cache::object_keys::<ConfigMap>),
        secrets: None,
        namespaces,
    };
    let mut caches = caches;
    let mut secret_stream = None;
    if settings.secrets {
        let (store, writer) = reflector::store();
        let index = Index::new(cache::object_keys::<Secret>);
        secret_stream = Some(lean_cache(
            writer,
            index.clone(),
            watch_all::<Secret>(&watches),
            cache::slim_secret,
        ));
        caches.secrets = Some((store, index));
    }

    let sync_stream = lean_cache(
        sync_writer,
        caches.sync_index.clone(),
        watch_all::<ConfigMapSync>(&watches),
        cache::slim_sync,
    );
    let config_map_stream = lean_cache(
        config_map_writer,
        caches.config_map_index.clone(),
        watch_all::<ConfigMap>(&watches),
        cache::slim_config_map,
    );
    // Namespaces are few and read whole (labels): no index.
    let namespace_stream = lean_cache(
        namespace_writer,
        Index::new(|_: &Namespace| Vec::new()),
        watch_all::<Namespace>(&watches),
        cache::slim_namespace,
    );

    let (synced_tx, synced) = watch::channel(false);
    let ctx = Arc::new(Context {
        client: client.clone(),
        settings,
        caches: caches.clone(),
        leadership: leadership.clone(),
        backoffs: Backoffs::new(BackoffPolicy::default()),
        metrics,
        writes,
        synced: synced.clone(),
        recorder: Recorder::new(
            client,
            Reporter {
                controller: "vigil".into(),
                instance: std::env::var("POD_NAME").ok(),
            },
        ),
    });

    // Readiness: the secondary caches synced once. kube-runtime's `wait_until_ready` wakes a
    // single waiter per store and the Controller is the waiter on the ConfigMapSync store, so
    // this is the only task waiting on these two; the others wait on `synced`.
    let ready_caches = caches.clone();
    tokio::spawn(async move {
        let secrets = async {
            match &ready_caches.secrets {
                Some((store, _)) => store.wait_until_ready().await.is_ok(),
                None => true,
            }
        };
        let (a, b, c) = tokio::join!(
            ready_caches.config_maps.wait_until_ready(),
            ready_caches.namespaces.wait_until_ready(),
            secrets
        );
        let ok = a.is_ok() && b.is_ok() && c;
        let _ = synced_tx.send(ok);
        ready(ok);
    });
    tokio::spawn(report_destinations(syncs.clone(), destinations));

    // Becoming leader: look at everything again.
    let on_leadership = futures::stream::unfold(leadership.clone(), |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    });

    let sync_index = caches.sync_index.clone();
    let for_config_map = move |cm: ConfigMap| syncs_for_object(&sync_index, &cm);
    let secret_sync_index = caches.sync_index.clone();
    let for_secret = move |secret: Secret| syncs_for_object(&secret_sync_index, &secret);
    let ns_syncs = caches.syncs.clone();
    let for_namespace = move |ns: Namespace| syncs_for_namespace(&ns_syncs, &ns.name_any());

    let mut controller = Controller::for_stream(sync_stream, syncs)
        .with_config(
            kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY),
        )
        // Each shared watch backs off on its own (see `vigil_runtime::shared`); the trigger
        // backoff would stall all of them when one errs.
        .trigger_backoff(NoTriggerBackoff)
        .watches_stream(config_map_stream, for_config_map)
        .watches_stream(namespace_stream, for_namespace);
    if let Some(stream) = secret_stream {
        controller = controller.watches_stream(stream, for_secret);
    }
    controller
        .reconcile_all_on(on_leadership)
        .graceful_shutdown_on(shutdown)
        .run(reconcile, error_policy, ctx)
        .for_each(|_| futures::future::ready(()))
        .await;
}

/// A ConfigMap concerns the ConfigMapSyncs naming it (as source, or as the name of their copies:
/// a foreign ConfigMap appearing at a destination), and the one owning it.
fn syncs_for_object<K: kube::Resource>(
    index: &Index<ConfigMapSync>,
    cm: &K,
) -> Vec<ObjectRef<ConfigMapSync>> {
    let mut out = index.get(&cache::name_key(&cm.name_any()));
    if let Some((ns, name)) = cm
        .annotations()
        .get(OWNER_ANNOTATION)
        .and_then(|o| o.split_once('/'))
    {
        let owner = ObjectRef::new(name).within(ns);
        if !out.contains(&owner) {
            out.push(owner);
        }
    }
    out
}

/// A namespace concerns the ConfigMapSyncs naming it, selecting namespaces, or listing it in
/// their status (it may just have stopped matching), and those living in it.
fn syncs_for_namespace(syncs: &Store<ConfigMapSync>, ns: &str) -> Vec<ObjectRef<ConfigMapSync>> {
    syncs
        .state()
        .iter()
        .filter(|s| {
            let spec = &s.spec;
            spec.namespace_selector.is_some()
                || spec.source_namespace == ns
                || spec.destination_namespace == ns
                || spec.destination_namespaces.iter().any(|d| d == ns)
                || s.namespace().as_deref() == Some(ns)
                || s.status
                    .iter()
                    .flat_map(|st| st.destinations.iter())
                    .any(|d| d.namespace == ns)
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}

/// Keeps `vigil_configmapsync_destinations{state}` current from the cached statuses.
async fn report_destinations(syncs: Store<ConfigMapSync>, gauge: Family<StateLabel, Gauge>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let mut counts: BTreeMap<DestinationState, i64> = BTreeMap::new();
        for sync in syncs.state() {
            for d in sync.status.iter().flat_map(|s| s.destinations.iter()) {
                *counts.entry(d.state).or_default() += 1;
            }
        }
        for state in DestinationState::ALL {
            gauge
                .get_or_create(&StateLabel {
                    state: state.as_str(),
                })
                .set(counts.get(&state).copied().unwrap_or(0));
        }
    }
}

fn view(sync: &ConfigMapSync) -> SyncView {
    SyncView {
        namespace: sync.namespace().unwrap_or_default(),
        name: sync.name_any(),
        generation: sync.metadata.generation,
        spec: sync.spec.clone(),
        status: sync.status.clone(),
    }
}

async fn reconcile(sync: Arc<ConfigMapSync>, ctx: Arc<Context>) -> Result<Action, Error> {
    // Deciding on half-filled caches would report missing sources and re-create copies.
    let guard = Guard {
        metrics: &ctx.metrics,
        leadership: &ctx.leadership,
        synced: Some(&ctx.synced),
        backoffs: &ctx.backoffs,
    };
    guarded(
        ObjectRef::from_obj(sync.as_ref()),
        guard,
        with_finalizer(&sync, &ctx),
    )
    .await
}

/// The finalizer, hand-rolled on merge patches guarded by the resourceVersion: first added (the
/// update brings the next pass), then held until the copies are cleaned up. kube-runtime's
/// `finalizer` helper adds it with a JSON patch whose `test` of an absent
/// `/metadata/finalizers` the sandbox rejects (real API servers accept it).
async fn with_finalizer(sync: &ConfigMapSync, ctx: &Context) -> Result<Action, Error> {
    let has = sync.finalizers().iter().any(|f| f == FINALIZER);
    let deleting = sync.metadata.deletion_timestamp.is_some();
    let set_finalizers = |finalizers: Vec<String>| async move {
        let api: Api<ConfigMapSync> =
            Api::namespaced(ctx.client.clone(), &sync.namespace().unwrap_or_default());
        let patch = serde_json::json!({"metadata": {
            "finalizers": finalizers,
            "resourceVersion": sync.metadata.resource_version,
        }});
        api.patch(
            &sync.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    };
    match (has, deleting) {
        (false, false) => {
            let mut finalizers = sync.finalizers().to_vec();
            finalizers.push(FINALIZER.to_owned());
            set_finalizers(finalizers).await?;
            Ok(Action::await_change())
        }
        (false, true) => Ok(Action::await_change()),
        (true, false) => apply_sync(sync, ctx).await,
        (true, true) => {
            cleanup(sync, ctx).await?;
            let rest: Vec<String> = sync
                .finalizers()
                .iter()
                .filter(|f| *f != FINALIZER)
                .cloned()
                .collect();
            set_finalizers(rest).await?;
            Ok(Action::await_change())
        }
    }
}

/// The cached objects a decision for `sync` reads: those named like its source, and its copies
/// (from the index, not a scan) — ConfigMaps, or Secrets for `kind: Secret`.
fn relevant_config_maps(ctx: &Context, sync: &SyncView) -> Vec<super::model::ConfigMapView> {
    fn gather<K: Copied>(
        store: &Store<K>,
        index: &Index<K>,
        sync: &SyncView,
    ) -> Vec<super::model::ConfigMapView> {
        let mut refs = index.get(&cache::name_key(&sync.spec.config_map_name));
        for copy in index.get(&cache::owner_key(&sync.key())) {
            if !refs.contains(&copy) {
                refs.push(copy);
            }
        }
        refs.iter()
            .filter_map(|r| store.get(r))
            .map(|obj| obj.view())
            .collect()
    }
    match (sync.spec.kind(), &ctx.caches.secrets) {
        (SyncedKind::ConfigMap, _) => {
            gather(&ctx.caches.config_maps, &ctx.caches.config_map_index, sync)
        }
        (SyncedKind::Secret, Some((store, index))) => gather(store, index, sync),
        // Secrets are not watched: the decision reports it.
        (SyncedKind::Secret, None) => Vec::new(),
    }
}

/// What the controller needs of a kind it copies.
trait Copied:
    kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
    + Clone
    + std::fmt::Debug
    + serde::Serialize
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
    /// The content hash (as the lean cache computes it).
    fn hash(&self) -> String;
    /// Slims a listed object as the lean cache does.
    fn slim(&mut self);
    fn view(&self) -> super::model::ConfigMapView;
    /// An object with this one's content (data, type, immutability) and empty metadata.
    fn content(&self) -> Self;
}

impl Copied for ConfigMap {
    fn hash(&self) -> String {
        cache::content_hash(self)
    }
    fn slim(&mut self) {
        cache::slim_config_map(self);
    }
    fn view(&self) -> super::model::ConfigMapView {
        cache::config_map_view(self)
    }
    fn content(&self) -> Self {
        ConfigMap {
            data: self.data.clone(),
            binary_data: self.binary_data.clone(),
            immutable: self.immutable,
            ..ConfigMap::default()
        }
    }
}

impl Copied for Secret {
    fn hash(&self) -> String {
        cache::secret_hash(self)
    }
    fn slim(&mut self) {
        cache::slim_secret(self);
    }
    fn view(&self) -> super::model::ConfigMapView {
        cache::secret_view(self)
    }
    fn content(&self) -> Self {
        Secret {
            data: self.data.clone(),
            type_: self.type_.clone(),
            immutable: self.immutable,
            ..Secret::default()
        }
    }
}

async fn apply_sync(sync: &ConfigMapSync, ctx: &Context) -> Result<Action, Error> {
    let plan = {
        let this = view(sync);
        let config_maps = relevant_config_maps(ctx, &this);
        let source = config_maps
            .iter()
            .find(|c| {
                c.namespace == this.spec.source_namespace && c.name == this.spec.config_map_name
            })
            .cloned();
        let namespaces: BTreeMap<String, _> = ctx
            .caches
            .namespaces
            .state()
            .iter()
            .map(|n| (n.name_any(), cache::namespace_view(n)))
            .collect();
        // Whether the owners of the ConfigMaps found still exist (another's copy or an orphan).
        let live: BTreeSet<String> = config_maps
            .iter()
            .filter_map(|c| c.owner.as_deref())
            .filter(|owner| {
                owner.split_once('/').is_some_and(|(ns, name)| {
                    ctx.caches
                        .syncs
                        .get(&ObjectRef::new(name).within(ns))
                        .is_some()
                })
            })
            .map(str::to_owned)
            .collect();
        decide(&Inputs {
            sync: &this,
            source: source.as_ref(),
            namespaces: &namespaces,
            config_maps: &config_maps,
            live_syncs: &live,
            now: k8s_openapi::jiff::Timestamp::now(),
            settings: &ctx.settings,
        })
    };
    apply(sync, ctx, plan).await
}

/// The copy of `source` for a destination.
fn copy_of<K: Copied>(sync: &ConfigMapSync, source: &K, write: &CopyWrite) -> K {
    let mut labels = match &write.kind {
        WriteKind::Update { labels, .. } => labels.clone(),
        _ => BTreeMap::new(),
    };
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    labels.insert(COPY_LABEL.into(), "true".into());
    let owner = format!(
        "{}/{}",
        sync.namespace().unwrap_or_default(),
        sync.name_any()
    );
    let annotations = BTreeMap::from([
        (OWNER_ANNOTATION.to_owned(), owner),
        (
            SOURCE_ANNOTATION.to_owned(),
            format!(
                "{}/{}",
                sync.spec.source_namespace, sync.spec.config_map_name
            ),
        ),
        (CONTENT_HASH_ANNOTATION.to_owned(), source.hash()),
    ]);
    let mut copy = source.content();
    let meta = copy.meta_mut();
    meta.name = Some(sync.spec.config_map_name.clone());
    meta.namespace = Some(write.namespace.clone());
    meta.labels = Some(labels);
    meta.annotations = Some(annotations);
    if let WriteKind::Update {
        resource_version, ..
    } = &write.kind
    {
        meta.resource_version = resource_version.clone();
    }
    copy
}

/// How one copy write ended.
enum Outcome {
    Done,
    /// Lost a race (409: the object changed, appeared, or is still being deleted). Not a
    /// failure and not retried here: that change reaches the cache as a watch event, which
    /// triggers the next pass — retrying before it arrives would only repeat the 409.
    Raced,
    Failed(String),
}

fn post_params() -> PostParams {
    PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    }
}

fn delete_params(uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

fn outcome<T>(result: Result<T, kube::Error>) -> Outcome {
    match result {
        Ok(_) => Outcome::Done,
        Err(kube::Error::Api(s)) if s.code == 409 => Outcome::Raced,
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

async fn write_copy<K: Copied>(ctx: &Context, copy: K, write: &CopyWrite) -> Outcome {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &write.namespace);
    let name = copy.name_any();
    match &write.kind {
        WriteKind::Create => {
            ctx.writes
                .get_or_create(&VerbLabel { verb: "create" })
                .inc();
            outcome(api.create(&post_params(), &copy).await)
        }
        WriteKind::Update { .. } => {
            ctx.writes
                .get_or_create(&VerbLabel { verb: "update" })
                .inc();
            outcome(api.replace(&name, &post_params(), &copy).await)
        }
        WriteKind::Recreate { uid } => {
            ctx.writes
                .get_or_create(&VerbLabel { verb: "delete" })
                .inc();
            match api.delete(&name, &delete_params(uid)).await {
                Ok(_) => {}
                // Gone already, or replaced by someone: the create below (or the next pass) decides.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Outcome::Failed(e.to_string()),
            }
            ctx.writes
                .get_or_create(&VerbLabel { verb: "create" })
                .inc();
            outcome(api.create(&post_params(), &copy).await)
        }
    }
}

async fn delete_copy(ctx: &Context, kind: SyncedKind, target: &CopyRef) -> Result<(), kube::Error> {
    match kind {
        SyncedKind::ConfigMap => delete_object::<ConfigMap>(ctx, target).await,
        SyncedKind::Secret => delete_object::<Secret>(ctx, target).await,
    }
}

async fn delete_object<K: Copied>(ctx: &Context, target: &CopyRef) -> Result<(), kube::Error> {
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &target.namespace);
    ctx.writes
        .get_or_create(&VerbLabel { verb: "delete" })
        .inc();
    match api.delete(&target.name, &delete_params(&target.uid)).await {
        Ok(_) => Ok(()),
        // Gone already, or someone else's object now carries the name: nothing of ours to delete.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Reads the source once and writes every planned copy (up to [`WRITE_CONCURRENCY`] at once);
/// `None` if the source is gone.
async fn write_all<K: Copied>(
    sync: &ConfigMapSync,
    ctx: &Context,
    writes: &[CopyWrite],
) -> Result<Option<Vec<(String, Outcome)>>, kube::Error> {
    let sources: Api<K> = Api::namespaced(ctx.client.clone(), &sync.spec.source_namespace);
    let Some(source) = sources.get_opt(&sync.spec.config_map_name).await? else {
        return Ok(None);
    };
    // Collected first: a lazily mapped stream of borrowing futures trips the compiler's `Send`
    // inference for the controller's future.
    let futures: Vec<_> = writes
        .iter()
        .map(|w| {
            let copy = copy_of(sync, &source, w);
            async move { (w.namespace.clone(), write_copy(ctx, copy, w).await) }
        })
        .collect();
    Ok(Some(
        futures::stream::iter(futures)
            .buffer_unordered(WRITE_CONCURRENCY)
            .collect()
            .await,
    ))
}

/// Writes what the plan asks for, the status only when it changed, and the plan's Events.
async fn apply(sync: &ConfigMapSync, ctx: &Context, mut plan: Plan) -> Result<Action, Error> {
    let mut failed: BTreeMap<String, String> = BTreeMap::new();
    let mut written = 0;
    if !plan.writes.is_empty() {
        // The cache holds hashes only: read the source's content once for every copy.
        let outcomes = match sync.spec.kind() {
            SyncedKind::ConfigMap => write_all::<ConfigMap>(sync, ctx, &plan.writes).await?,
            SyncedKind::Secret => write_all::<Secret>(sync, ctx, &plan.writes).await?,
        };
        let Some(outcomes) = outcomes else {
            // Deleted since the cache saw it: its deletion event brings a new pass.
            return Ok(Action::await_change());
        };
        for (ns, outcome) in outcomes {
            match outcome {
                Outcome::Done => written += 1,
                Outcome::Raced => {}
                Outcome::Failed(e) => {
                    failed.insert(ns, e);
                }
            }
        }
    }
    let kind = sync.spec.kind();
    let deletions: Vec<_> = plan
        .deletes
        .iter()
        .map(|d| delete_copy(ctx, kind, d))
        .collect();
    let deletions: Vec<_> = futures::stream::iter(deletions)
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    let delete_error = deletions.into_iter().find_map(Result::err);

    if !plan.writes.is_empty() && written == 0 && failed.is_empty() && plan.deletes.is_empty() {
        // Every write raced: the cache is behind. Writing the status now (a new lastSyncTime)
        // would trigger another pass on the same stale cache; the watch events will come.
        return Ok(Action::await_change());
    }
    if !failed.is_empty() {
        mark_failed(&mut plan.status, &failed, sync.metadata.generation);
        plan.events
            .retain(|e| e.reason != decide::REASON_COPIES_WRITTEN);
    }
    if sync.status.as_ref() != Some(&plan.status) {
        patch_status(ctx, sync, &plan.status).await?;
    }
    publish(ctx, sync, &plan.events).await;
    if !failed.is_empty() {
        let list: Vec<String> = failed.iter().map(|(ns, e)| format!("{ns}: {e}")).collect();
        return Err(Error::Copies(format!(
            "writing copies failed: {}",
            list.join("; ")
        )));
    }
    if let Some(e) = delete_error {
        return Err(e.into());
    }
    Ok(Action::await_change())
}

/// Destinations whose write failed: `Failed` with the error, and `Ready` false.
fn mark_failed(
    status: &mut ConfigMapSyncStatus,
    failed: &BTreeMap<String, String>,
    generation: Option<i64>,
) {
    use vigil_runtime::conditions::{NewCondition, Status, set};
    for entry in &mut status.destinations {
        if let Some(error) = failed.get(&entry.namespace) {
            entry.state = DestinationState::Failed;
            entry.error = Some(error.clone());
        }
    }
    status.synced = status
        .destinations
        .iter()
        .filter(|d| d.state == DestinationState::Synced)
        .count()
        .try_into()
        .unwrap_or(u32::MAX);
    let message = format!(
        "writing the copy failed in {}; retrying",
        failed.keys().cloned().collect::<Vec<_>>().join(", ")
    );
    let now =
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now());
    set(
        &mut status.conditions,
        &NewCondition {
            type_: decide::READY,
            status: Status::False,
            reason: decide::REASON_SYNC_FAILED,
            message: &message,
            observed_generation: generation,
        },
        &now,
    );
}

async fn patch_status(
    ctx: &Context,
    sync: &ConfigMapSync,
    status: &ConfigMapSyncStatus,
) -> Result<(), kube::Error> {
    let api: Api<ConfigMapSync> =
        Api::namespaced(ctx.client.clone(), &sync.namespace().unwrap_or_default());
    // A merge patch leaves out what serializes as absent: send the lists explicitly, or an
    // emptied list would stay in the stored status forever.
    let mut patch = serde_json::json!({"status": status});
    patch["status"]["destinations"] = serde_json::json!(status.destinations);
    patch["status"]["conditions"] = serde_json::json!(status.conditions);
    api.patch_status(
        &sync.name_any(),
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

async fn publish(ctx: &Context, sync: &ConfigMapSync, events: &[EventNote]) {
    let reference = sync.object_ref(&());
    for note in events {
        let event = events::event(note.warning, &note.reason, &note.note, "Sync");
        events::record(&ctx.recorder, &event, &reference).await;
    }
}

/// The ConfigMapSync is being deleted: delete its copies (unless `deletionPolicy: Orphan`), then
/// the finalizer goes. Besides the cache, the API is asked for copies of this name, so a copy
/// written a moment ago (not in the cache yet) is not left behind.
async fn cleanup(sync: &ConfigMapSync, ctx: &Context) -> Result<Action, Error> {
    let this = view(sync);
    let mut config_maps = relevant_config_maps(ctx, &this);
    if this.spec.deletion_policy() == vigil_apis::configmap_sync::DeletionPolicy::Delete {
        let listed = match (this.spec.kind(), &ctx.caches.secrets) {
            (SyncedKind::ConfigMap, _) => list_copies::<ConfigMap>(ctx, &this).await?,
            (SyncedKind::Secret, Some(_)) => list_copies::<Secret>(ctx, &this).await?,
            // Secrets not enabled: no permission to list them; none were written by this run.
            (SyncedKind::Secret, None) => Vec::new(),
        };
        let known: HashSet<String> = config_maps.iter().map(|c| c.uid.clone()).collect();
        config_maps.extend(listed.into_iter().filter(|v| !known.contains(&v.uid)));
    }
    let namespaces = BTreeMap::new();
    let live = BTreeSet::new();
    let deletes = decide::cleanup(&Inputs {
        sync: &this,
        source: None,
        namespaces: &namespaces,
        config_maps: &config_maps,
        live_syncs: &live,
        now: k8s_openapi::jiff::Timestamp::now(),
        settings: &ctx.settings,
    });
    for target in &deletes {
        delete_copy(ctx, this.spec.kind(), target).await?;
    }
    ctx.backoffs.forget(&ObjectRef::from_obj(sync));
    Ok(Action::await_change())
}

/// Copies of this name in any namespace, asked of the API (not the cache).
async fn list_copies<K: Copied>(
    ctx: &Context,
    sync: &SyncView,
) -> Result<Vec<super::model::ConfigMapView>, kube::Error> {
    let all: Api<K> = Api::all(ctx.client.clone());
    let params = ListParams::default()
        .labels(&format!("{COPY_LABEL}=true"))
        .fields(&format!("metadata.name={}", sync.spec.config_map_name));
    Ok(all
        .list(&params)
        .await?
        .items
        .into_iter()
        .map(|mut obj| {
            obj.slim();
            obj.view()
        })
        .collect())
}

/// Failures retry with per-ConfigMapSync exponential backoff; one that keeps failing is
/// quarantined (retried slowly) and reported once: a `Degraded` condition and a Warning Event.
fn error_policy(sync: Arc<ConfigMapSync>, error: &Error, ctx: Arc<Context>) -> Action {
    ctx.backoffs.retry_after_failure(
        &ObjectRef::from_obj(sync.as_ref()),
        &format!(
            "configmapsync/{}/{}",
            sync.namespace().unwrap_or_default(),
            sync.name_any()
        ),
        error,
        &ctx.metrics,
        |message| {
            tokio::spawn(report_quarantine(sync.clone(), ctx.clone(), message));
        },
    )
}

/// Condition reason of a quarantined ConfigMapSync.
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;

async fn report_quarantine(sync: Arc<ConfigMapSync>, ctx: Arc<Context>, message: String) {
    let mut status = sync.status.clone().unwrap_or_default();
    if conditions::set_reconcile_failing(&mut status.conditions, &message, sync.metadata.generation)
        && let Err(e) = patch_status(&ctx, &sync, &status).await
    {
        tracing::debug!(error = %e, "could not report the quarantine in status");
    }
    let note = EventNote {
        warning: true,
        reason: REASON_RECONCILE_FAILING.into(),
        note: message,
    };
    publish(&ctx, &sync, &[note]).await;
}
