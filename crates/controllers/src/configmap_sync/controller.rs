//! The running ConfigMapSync controller: lean caches of ConfigMaps and namespaces, the mapping
//! from their changes to the ConfigMapSyncs they concern, the finalizer, and the apply step that
//! turns a [`Plan`] into writes — only what differs, only while this replica leads.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use vigil_apis::configmap_sync::{DestinationState, SyncedKind};
use vigil_apis::{ConfigMapSync, HasConditions as _};
use vigil_runtime::Runtime;
use vigil_runtime::index::Index;
use vigil_runtime::{finalizer, status};

use super::cache;
use super::decide::{self, AfterWrites, WriteOutcome, decide};
use super::model::{
    CONTENT_HASH_ANNOTATION, COPY_LABEL, CopyRef, CopyWrite, FINALIZER, Inputs, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, OWNER_ANNOTATION, Plan, SOURCE_ANNOTATION, Settings, SyncView, WriteKind,
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
    runtime: Runtime,
    settings: Settings,
    caches: Caches,
    /// `vigil_configmapsync_copy_writes_total{verb}`.
    writes: Family<VerbLabel, Counter>,
}

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let registry = runtime.metrics();
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
    let syncs = runtime
        .cache::<ConfigMapSync>()
        .slim(cache::slim_sync)
        .index(cache::sync_keys)
        .build();
    let config_maps = runtime
        .cache::<ConfigMap>()
        .slim(cache::slim_config_map)
        .index(cache::object_keys::<ConfigMap>)
        .build();
    // Namespaces are few and read whole (labels): no index.
    let namespaces = runtime
        .cache::<Namespace>()
        .slim(cache::slim_namespace)
        .build();
    let secrets = settings.secrets.then(|| {
        runtime
            .cache::<Secret>()
            .slim(cache::slim_secret)
            .index(cache::object_keys::<Secret>)
            .build()
    });
    let caches = Caches {
        syncs: syncs.store().clone(),
        sync_index: syncs.index().clone(),
        config_maps: config_maps.store().clone(),
        config_map_index: config_maps.index().clone(),
        secrets: secrets
            .as_ref()
            .map(|s| (s.store().clone(), s.index().clone())),
        namespaces: namespaces.store().clone(),
    };
    let gauge_syncs = caches.syncs.clone();
    runtime.every(Duration::from_secs(2), move || {
        report_destinations(gauge_syncs.clone(), destinations.clone())
    });

    let sync_index = caches.sync_index.clone();
    let for_config_map = move |cm: ConfigMap| syncs_for_object(&sync_index, &cm);
    let secret_sync_index = caches.sync_index.clone();
    let for_secret = move |secret: Secret| syncs_for_object(&secret_sync_index, &secret);
    let ns_syncs = caches.syncs.clone();
    let for_namespace = move |ns: Namespace| syncs_for_namespace(&ns_syncs, &ns.name_any());

    // Deciding on half-filled caches would report missing sources and re-create copies: the
    // builder waits for every cache it is given.
    let mut controller = runtime
        .controller(NAME, &syncs)
        .concurrency(RECONCILE_CONCURRENCY)
        .watches(&config_maps, for_config_map)
        .watches(&namespaces, for_namespace);
    if let Some(secrets) = &secrets {
        controller = controller.watches(secrets, for_secret);
    }
    let ctx = Arc::new(Context {
        runtime: runtime.clone(),
        settings,
        caches,
        writes,
    });
    controller
        .quarantine_condition(ConfigMapSync::conditions)
        .field_manager(FIELD_MANAGER)
        .event_action("Sync")
        .run(reconcile, ctx)
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

fn view(sync: &ConfigMapSync) -> SyncView {
    SyncView {
        namespace: sync.namespace().unwrap_or_default(),
        name: sync.name_any(),
        generation: sync.metadata.generation,
        spec: sync.spec.clone(),
        status: sync.status.clone(),
    }
}

/// Copies are cleaned up before a ConfigMapSync goes (ownerReferences cannot point across
/// namespaces), through the finalizer.
async fn reconcile(
    sync: Arc<ConfigMapSync>,
    ctx: Arc<Context>,
) -> Result<Action, finalizer::Error<Error>> {
    let api: Api<ConfigMapSync> = Api::namespaced(
        ctx.runtime.client().clone(),
        &sync.namespace().unwrap_or_default(),
    );
    finalizer::finalized(
        &api,
        FINALIZER,
        sync,
        |sync| apply_sync(sync, &ctx),
        |sync| cleanup(sync, &ctx),
    )
    .await
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

async fn apply_sync(sync: Arc<ConfigMapSync>, ctx: &Context) -> Result<Action, Error> {
    let sync = sync.as_ref();
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

fn outcome<T>(result: Result<T, kube::Error>) -> WriteOutcome {
    match result {
        Ok(_) => WriteOutcome::Done,
        Err(kube::Error::Api(s)) if s.code == 409 => WriteOutcome::Raced,
        Err(e) => WriteOutcome::Failed(e.to_string()),
    }
}

async fn write_copy<K: Copied>(ctx: &Context, copy: K, write: &CopyWrite) -> WriteOutcome {
    let api: Api<K> = Api::namespaced(ctx.runtime.client().clone(), &write.namespace);
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
                Err(e) => return WriteOutcome::Failed(e.to_string()),
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
    let api: Api<K> = Api::namespaced(ctx.runtime.client().clone(), &target.namespace);
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
) -> Result<Option<BTreeMap<String, WriteOutcome>>, kube::Error> {
    let sources: Api<K> =
        Api::namespaced(ctx.runtime.client().clone(), &sync.spec.source_namespace);
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

/// Writes what the plan asks for; then the status (only when it changed) and the Events that
/// [`decide::after_writes`] makes of the plan and the writes' outcomes.
async fn apply(sync: &ConfigMapSync, ctx: &Context, plan: Plan) -> Result<Action, Error> {
    let mut outcomes = BTreeMap::new();
    if !plan.writes.is_empty() {
        // The cache holds hashes only: read the source's content once for every copy.
        let written = match sync.spec.kind() {
            SyncedKind::ConfigMap => write_all::<ConfigMap>(sync, ctx, &plan.writes).await?,
            SyncedKind::Secret => write_all::<Secret>(sync, ctx, &plan.writes).await?,
        };
        let Some(written) = written else {
            // Deleted since the cache saw it: its deletion event brings a new pass.
            return Ok(Action::await_change());
        };
        outcomes = written;
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

    let now = k8s_openapi::jiff::Timestamp::now();
    let (status, events, error) =
        match decide::after_writes(&plan, &outcomes, sync.metadata.generation, now) {
            AfterWrites::Wait => return Ok(Action::await_change()),
            AfterWrites::Report {
                status,
                events,
                error,
            } => (status, events, error),
        };
    status::write(
        ctx.runtime.client(),
        sync,
        sync.status.as_ref(),
        &status,
        &["destinations", "conditions"],
        FIELD_MANAGER,
    )
    .await?;
    ctx.runtime
        .recorder()
        .publish_all(&sync.object_ref(&()), &events, "Sync")
        .await;
    if let Some(error) = error {
        return Err(Error::Copies(error));
    }
    if let Some(e) = delete_error {
        return Err(e.into());
    }
    Ok(Action::await_change())
}

/// The ConfigMapSync is being deleted: delete its copies (unless `deletionPolicy: Orphan`), then
/// the finalizer goes. Besides the cache, the API is asked for copies of this name, so a copy
/// written a moment ago (not in the cache yet) is not left behind.
async fn cleanup(sync: Arc<ConfigMapSync>, ctx: &Context) -> Result<Action, Error> {
    let this = view(&sync);
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
    Ok(Action::await_change())
}

/// Copies of this name in any namespace, asked of the API (not the cache).
async fn list_copies<K: Copied>(
    ctx: &Context,
    sync: &SyncView,
) -> Result<Vec<super::model::ConfigMapView>, kube::Error> {
    let all: Api<K> = Api::all(ctx.runtime.client().clone());
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

/// Condition reason of a quarantined ConfigMapSync (the controller builder reports it).
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;
