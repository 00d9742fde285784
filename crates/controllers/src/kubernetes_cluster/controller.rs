//! The running KubernetesCluster controller: the finalizer (added before the first provider
//! call), the status vault's restore for objects re-applied without status, one observation of
//! the provider per pass (by id, or by identity when no id is known), the decided request, the
//! status and Events, and the kubeconfig Secret — only what differs, only while this replica
//! leads.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use sha2::Digest as _;
use vigil_apis::kubernetes_cluster::{KubernetesClusterStatus, Phase};
use vigil_apis::{HasConditions as _, KubernetesCluster};
use vigil_provider::{ClusterProvider, Deletion, ProviderCluster, ProviderError, Providers};
use vigil_runtime::Runtime;

use super::decide::{self, DeletionInputs, DeletionLookup, Inputs};
pub use super::model::kubeconfig_secret_name;
use super::model::{
    Answer, Answered, CLUSTER_NAME_LABEL, Call, ClusterView, DeleteAnswer, DeletionStep,
    DeletionTarget, EventNote, FINALIZER, KUBECONFIG_HASH_ANNOTATION, KUBECONFIG_KEY,
    KUBECONFIG_LABEL, KUBECONFIG_SECRET_TYPE, OP_DELETE, Observed, Plan, Settings,
    reconcile_trigger,
};
use crate::status_vault::{RestoreOutcome, StatusRestorer};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "kubernetescluster";
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-kubernetescluster";
/// KubernetesClusters reconciled at once: provider calls are round trips to another system, so
/// more overlap than the API-only controllers.
const RECONCILE_CONCURRENCY: u16 = 16;
/// Event reason of an object waiting for the status vault's restore.
pub const REASON_WAITING_FOR_RESTORE: &str = "WaitingForStatusRestore";
/// How soon to look again when the status vault has not decided yet.
const RESTORE_PENDING_RETRY: Duration = Duration::from_secs(1);

/// What this controller's code does with the API (kept in step with the calls below).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["kubernetesclusters"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["kubernetesclusters/status"],
        verbs: &["patch"],
    },
    // Kubeconfig Secrets: watched through a label selector (RBAC cannot narrow by label, hence
    // list/watch), written by server-side apply; deleted by the garbage collector through
    // their ownerReference.
    crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Provider(#[from] ProviderError),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OperationLabel {
    operation: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabel {
    provider: String,
    operation: &'static str,
    result: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PhaseLabel {
    phase: &'static str,
}

/// The controller's own metrics, besides controller-runtime's.
#[derive(Clone)]
struct ClusterMetrics {
    /// `vigil_kubernetescluster_operation_duration_seconds{operation}`.
    durations: Family<OperationLabel, Histogram, fn() -> Histogram>,
    /// `vigil_kubernetescluster_provider_requests_total{provider, operation, result}`.
    requests: Family<RequestLabel, Counter>,
}

fn duration_histogram() -> Histogram {
    // From a fraction of a second (the reference provider) to an hour (a real cloud).
    Histogram::new([
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ])
}

/// Shared by reconciles.
struct Context {
    runtime: Runtime,
    settings: Settings,
    providers: Providers,
    provider_names: Vec<String>,
    restorer: Option<StatusRestorer>,
    secrets: Store<Secret>,
    cluster_metrics: ClusterMetrics,
    /// Objects whose wait for the status vault was announced by an Event (once per wait).
    waiting_for_restore: std::sync::Mutex<std::collections::HashSet<ObjectRef<KubernetesCluster>>>,
}

/// Everything [`run_on`] needs besides the plumbing every controller gets.
pub struct Config {
    pub settings: Settings,
    pub providers: Providers,
    /// The status vault's restore: consulted before acting on an object whose status is empty.
    /// `None` when the vault does not run in this operator.
    pub restorer: Option<StatusRestorer>,
}

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, config: Config) {
    let registry = runtime.metrics();
    let cluster_metrics = ClusterMetrics {
        durations: Family::new_with_constructor(duration_histogram),
        requests: Family::default(),
    };
    registry.register(
        "vigil_kubernetescluster_operation_duration_seconds",
        "Time from starting a provision, upgrade or delete to its end, by operation",
        cluster_metrics.durations.clone(),
    );
    registry.register(
        "vigil_kubernetescluster_provider_requests",
        "Requests to cluster providers by provider, operation and result (ok, unavailable, \
         rejected, not_found)",
        cluster_metrics.requests.clone(),
    );
    let phases = Family::<PhaseLabel, Gauge>::default();
    registry.register(
        "vigil_kubernetescluster_clusters",
        "KubernetesClusters by phase, from their status",
        phases.clone(),
    );

    let clusters = runtime
        .cache::<KubernetesCluster>()
        .slim(slim_cluster)
        .build();
    let secrets = runtime
        .cache::<Secret>()
        .labels(KUBECONFIG_LABEL)
        .slim(slim_secret)
        .build();
    runtime.spawn(report_phases(clusters.store().clone(), phases));

    let provider_names = config.providers.names().map(str::to_owned).collect();
    let ctx = Arc::new(Context {
        runtime: runtime.clone(),
        settings: config.settings,
        providers: config.providers,
        provider_names,
        restorer: config.restorer,
        secrets: secrets.store().clone(),
        cluster_metrics,
        waiting_for_restore: Default::default(),
    });

    // A kubeconfig Secret concerns the cluster it is labelled with.
    let for_secret = |secret: Secret| {
        let name = secret.labels().get(CLUSTER_NAME_LABEL).cloned();
        let namespace = secret.namespace();
        name.zip(namespace)
            .map(|(name, ns)| ObjectRef::<KubernetesCluster>::new(&name).within(&ns))
    };

    runtime
        .controller(NAME, &clusters)
        // Our own status writes do not start the next pass: the requeue paces the polls.
        .trigger_on(reconcile_trigger)
        .concurrency(RECONCILE_CONCURRENCY)
        .watches(&secrets, for_secret)
        .quarantine_condition(KubernetesCluster::conditions)
        .field_manager(FIELD_MANAGER)
        .run(reconcile, ctx)
        .await;
}

/// The cache keeps what decisions read: no managed fields, no last-applied annotation.
fn slim_cluster(cluster: &mut KubernetesCluster) {
    cluster.metadata.managed_fields = None;
    if let Some(annotations) = cluster.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A kubeconfig Secret is cached without its data: the hash annotation says what it holds.
fn slim_secret(secret: &mut Secret) {
    secret.data = None;
    secret.string_data = None;
    secret.metadata.managed_fields = None;
}

/// Keeps `vigil_kubernetescluster_clusters{phase}` current from the cached statuses.
async fn report_phases(clusters: Store<KubernetesCluster>, gauge: Family<PhaseLabel, Gauge>) {
    let mut tick = tokio::time::interval(Duration::from_secs(2));
    loop {
        tick.tick().await;
        let mut counts = [0i64; Phase::ALL.len()];
        for cluster in clusters.state() {
            let phase = cluster
                .status
                .as_ref()
                .and_then(|s| s.phase)
                .unwrap_or(Phase::Pending);
            if let Some(i) = Phase::ALL.iter().position(|p| *p == phase) {
                counts[i] += 1;
            }
        }
        for (phase, count) in Phase::ALL.iter().zip(counts) {
            gauge
                .get_or_create(&PhaseLabel {
                    phase: phase.as_str(),
                })
                .set(count);
        }
    }
}

fn view(cluster: &KubernetesCluster) -> ClusterView {
    ClusterView {
        namespace: cluster.namespace().unwrap_or_default(),
        name: cluster.name_any(),
        generation: cluster.metadata.generation,
        spec: cluster.spec.clone(),
        status: cluster.status.clone(),
    }
}

impl Context {
    /// Records whether `key` waits for the status vault; true when a wait just began (to be
    /// announced once).
    fn restore_wait(&self, key: ObjectRef<KubernetesCluster>, waiting: bool) -> bool {
        let mut set = self
            .waiting_for_restore
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if waiting {
            set.insert(key)
        } else {
            set.remove(&key);
            false
        }
    }
}

/// The finalizer by hand, not through `vigil_runtime::finalizer::finalized` (kube-runtime's
/// helper): that helper releases the object on the first successful cleanup, while a deletion
/// at a provider takes many passes (each a success, requeued at the poll interval) — as
/// failures they would quarantine every slow deletion. And the status vault's restore must come
/// before the finalizer is added: the restore writes status at the resourceVersion it saw.
async fn reconcile(cluster: Arc<KubernetesCluster>, ctx: Arc<Context>) -> Result<Action, Error> {
    let cluster = cluster.as_ref();
    let ctx = ctx.as_ref();
    let view = view(cluster);
    let has_finalizer = cluster.finalizers().iter().any(|f| f == FINALIZER);
    if cluster.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return delete_cluster(cluster, &view, ctx).await;
    }
    // An object re-applied from git has no status: the vault may hold the one of the object it
    // replaces (its clusterID above all). Creating before knowing would make a second cluster.
    if view.cluster_id().is_none()
        && let Some(restorer) = &ctx.restorer
    {
        let outcome = restorer.ensure_restored(cluster).await;
        let key = ObjectRef::from_obj(cluster);
        match outcome {
            RestoreOutcome::NothingToRestore => {
                ctx.restore_wait(key, false);
            }
            // The restored object arrives as the next watch event.
            RestoreOutcome::Restored(_) => {
                ctx.restore_wait(key, false);
                return Ok(Action::requeue(RESTORE_PENDING_RETRY));
            }
            // Not in status: a status written now would read as "nothing to restore" next time.
            RestoreOutcome::Pending(why) => {
                tracing::debug!(cluster = %view.name, %why, "waiting for the status vault");
                if ctx.restore_wait(key, true) {
                    let note = EventNote::normal(
                        REASON_WAITING_FOR_RESTORE,
                        format!("no provider call until the status vault decides: {why}"),
                    );
                    publish(ctx, cluster, &[note]).await;
                }
                return Ok(Action::requeue(RESTORE_PENDING_RETRY));
            }
        }
    }
    if !has_finalizer {
        // Before any provider call: a cluster is never created for an object that could go
        // without its deletion being seen.
        let mut finalizers = cluster.finalizers().to_vec();
        finalizers.push(FINALIZER.to_owned());
        set_finalizers(ctx, cluster, finalizers).await?;
        return Ok(Action::await_change());
    }
    reconcile_live(cluster, &view, ctx).await
}

/// Finalizers set by a merge patch guarded by the resourceVersion (see [`reconcile`] for why
/// not kube-runtime's helper).
async fn set_finalizers(
    ctx: &Context,
    cluster: &KubernetesCluster,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let api: Api<KubernetesCluster> = Api::namespaced(
        ctx.runtime.client().clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": cluster.metadata.resource_version,
    }});
    api.patch(
        &cluster.name_any(),
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await?;
    Ok(())
}

/// Counts a provider request in the metrics by its result.
fn count<T>(
    ctx: &Context,
    provider: &str,
    operation: &'static str,
    result: &Result<T, ProviderError>,
) {
    let result = match result {
        Ok(_) => "ok",
        Err(ProviderError::Unavailable(_)) => "unavailable",
        Err(ProviderError::Rejected { .. }) => "rejected",
        Err(ProviderError::NotFound(_)) => "not_found",
    };
    ctx.cluster_metrics
        .requests
        .get_or_create(&RequestLabel {
            provider: provider.to_owned(),
            operation,
            result,
        })
        .inc();
}

/// The cluster of this object at its provider: by id once known, else by identity (a create
/// whose answer was lost, or an object re-applied without status).
async fn observe(
    ctx: &Context,
    provider: &dyn ClusterProvider,
    view: &ClusterView,
) -> Result<Option<ProviderCluster>, ProviderError> {
    let name = view.provider_name();
    match view.cluster_id() {
        Some(id) => {
            let result = match provider.get(id).await {
                Err(ProviderError::NotFound(_)) => Ok(None),
                other => other,
            };
            count(ctx, name, "Get", &result);
            result
        }
        None => {
            let result = provider.find(&view.identity()).await;
            count(ctx, name, "Find", &result);
            result
        }
    }
}

async fn execute(
    ctx: &Context,
    provider: &dyn ClusterProvider,
    provider_name: &str,
    call: &Call,
) -> Result<ProviderCluster, ProviderError> {
    let result = match call {
        Call::Create(request) => provider.create(request).await,
        Call::Upgrade { id, kube_version } => provider.upgrade(id, kube_version).await,
        Call::SetAddons { id, addons } => provider.set_addons(id, addons).await,
    };
    count(ctx, provider_name, call.operation(), &result);
    result
}

/// A live (not deleted) object: observe, decide, make the decided request and decide on its
/// answer, then write what differs.
async fn reconcile_live(
    cluster: &KubernetesCluster,
    view: &ClusterView,
    ctx: &Context,
) -> Result<Action, Error> {
    let provider_name = view.provider_name().to_owned();
    let provider = ctx.providers.get(&provider_name);
    let looked = match (&provider, view.spec.paused()) {
        (Some(provider), false) => Some(observe(ctx, provider.as_ref(), view).await),
        _ => None,
    };
    let looked_error = looked
        .as_ref()
        .and_then(|r| r.as_ref().err())
        .map(ToString::to_string);
    let observed = match &looked {
        None => Observed::NotAsked,
        Some(Ok(None)) => Observed::Absent,
        Some(Ok(Some(found))) => Observed::Found(found),
        Some(Err(_)) => Observed::Unavailable(looked_error.as_deref().unwrap_or_default()),
    };
    let inputs = Inputs {
        cluster: view,
        observed,
        providers: &ctx.provider_names,
        answered: None,
        settings: &ctx.settings,
        now: k8s_openapi::jiff::Timestamp::now(),
    };
    let first = decide::decide(&inputs);
    let (Some(call), Some(provider)) = (&first.call, &provider) else {
        write_plan(ctx, cluster, &first, looked_error.is_none()).await?;
        return match looked {
            Some(Err(e)) => Err(e.into()),
            _ => Ok(first
                .requeue
                .map_or_else(Action::await_change, Action::requeue)),
        };
    };
    let result = execute(ctx, provider.as_ref(), &provider_name, call).await;
    let error_text = result.as_ref().err().map(ToString::to_string);
    let answer = match &result {
        Ok(answer) => Answer::Accepted(answer),
        Err(ProviderError::Rejected { reason, message }) => Answer::Rejected { reason, message },
        Err(_) => Answer::Unavailable(error_text.as_deref().unwrap_or_default()),
    };
    let unavailable = matches!(answer, Answer::Unavailable(_));
    let plan = decide::decide(&Inputs {
        answered: Some(Answered {
            first: &first,
            answer,
        }),
        now: k8s_openapi::jiff::Timestamp::now(),
        ..inputs
    });
    write_plan(ctx, cluster, &plan, !unavailable).await?;
    match result {
        Err(e) if unavailable => Err(e.into()),
        _ => Ok(plan
            .requeue
            .map_or_else(Action::await_change, Action::requeue)),
    }
}

/// Executes a plan's writes: the finished operations' durations, the kubeconfig Secret and
/// the status where they differ, the Events. When the provider did not answer (`answered`
/// false), the status is best effort: the provider's error goes to the backoff.
async fn write_plan(
    ctx: &Context,
    cluster: &KubernetesCluster,
    plan: &Plan,
    answered: bool,
) -> Result<(), Error> {
    for (operation, seconds) in &plan.finished {
        ctx.cluster_metrics
            .durations
            .get_or_create(&OperationLabel { operation })
            .observe(*seconds);
    }
    if let Some(kubeconfig) = &plan.kubeconfig {
        ensure_kubeconfig_secret(ctx, cluster, kubeconfig).await?;
    }
    if cluster.status.as_ref() != Some(&plan.status) {
        match patch_status(ctx, cluster, &plan.status).await {
            Ok(_) => {}
            Err(e) if !answered => {
                tracing::debug!(error = %e, "could not report the provider's outage in status");
            }
            Err(e) => return Err(e.into()),
        }
    }
    publish(ctx, cluster, &plan.events).await;
    Ok(())
}

/// The object is being deleted: delete the cluster at its provider (unless orphaned), and
/// release the finalizer once the provider says it is gone.
async fn delete_cluster(
    cluster: &KubernetesCluster,
    view: &ClusterView,
    ctx: &Context,
) -> Result<Action, Error> {
    let provider_name = view.provider_name().to_owned();
    let provider = ctx.providers.get(&provider_name);
    let mut error = None;
    let target = match (decide::deletion_lookup(view, provider.is_some()), &provider) {
        (DeletionLookup::Known(target), _) => target,
        (DeletionLookup::FindByIdentity, None) => DeletionTarget::ProviderUnknown,
        (DeletionLookup::FindByIdentity, Some(provider)) => {
            match observe(ctx, provider.as_ref(), view).await {
                Ok(Some(found)) => DeletionTarget::Cluster(found.id),
                Ok(None) => DeletionTarget::Absent,
                Err(e) => {
                    let target = DeletionTarget::Unavailable(e.to_string());
                    error = Some(e);
                    target
                }
            }
        }
    };
    let inputs = DeletionInputs {
        cluster: view,
        target,
        answered: None,
        settings: &ctx.settings,
        now: k8s_openapi::jiff::Timestamp::now(),
    };
    let first = decide::decide_deletion(&inputs);
    let (plan, error) = match (&first.step, &provider) {
        (DeletionStep::Delete(id), Some(provider)) => {
            let result = provider.delete(id).await;
            count(ctx, &provider_name, OP_DELETE, &result);
            let (answer, error) = match result {
                Ok(Deletion::Gone) | Err(ProviderError::NotFound(_)) => (DeleteAnswer::Gone, None),
                Ok(Deletion::InProgress(progress)) => (DeleteAnswer::InProgress(progress), None),
                Err(ProviderError::Rejected { reason, message }) => (
                    DeleteAnswer::Refused(reason.clone(), message.clone()),
                    // Retried with backoff: the provider may change its mind.
                    Some(ProviderError::Rejected { reason, message }),
                ),
                Err(e) => (DeleteAnswer::Unavailable(e.to_string()), Some(e)),
            };
            let plan = decide::decide_deletion(&DeletionInputs {
                answered: Some((&first, &answer)),
                now: k8s_openapi::jiff::Timestamp::now(),
                ..inputs
            });
            (plan, error)
        }
        _ => (first, error),
    };
    if plan.step == DeletionStep::Release {
        if let Some(since) = &cluster.metadata.deletion_timestamp
            && decide::asks_provider_to_delete(view)
        {
            let seconds = k8s_openapi::jiff::Timestamp::now()
                .duration_since(since.0)
                .as_secs_f64()
                .max(0.0);
            ctx.cluster_metrics
                .durations
                .get_or_create(&OperationLabel {
                    operation: OP_DELETE,
                })
                .observe(seconds);
        }
        // The deleted cluster leaves the status before the object goes, so the status vault's
        // tombstone (the object's last status) names no cluster to restore (see
        // `decide_deletion`); the finalizer's patch is guarded by the status write's version.
        let released = if cluster.status.as_ref() != Some(&plan.status) {
            patch_status(ctx, cluster, &plan.status).await?
        } else {
            cluster.clone()
        };
        publish(ctx, cluster, &plan.events).await;
        let rest: Vec<String> = cluster
            .finalizers()
            .iter()
            .filter(|f| *f != FINALIZER)
            .cloned()
            .collect();
        set_finalizers(ctx, &released, rest).await?;
        return Ok(Action::await_change());
    }
    let unavailable = matches!(
        error,
        Some(ProviderError::Unavailable(_) | ProviderError::NotFound(_))
    );
    if cluster.status.as_ref() != Some(&plan.status) {
        match patch_status(ctx, cluster, &plan.status).await {
            Ok(_) => {}
            Err(e) if unavailable => {
                tracing::debug!(error = %e, "could not report the provider's outage in status");
            }
            Err(e) => return Err(e.into()),
        }
    }
    publish(ctx, cluster, &plan.events).await;
    match error {
        Some(e) => Err(Error::Provider(e)),
        None => Ok(plan
            .requeue
            .map_or_else(Action::await_change, Action::requeue)),
    }
}

/// `sha256:` of the kubeconfig, as the Secret's hash annotation holds it.
fn kubeconfig_hash(kubeconfig: &str) -> String {
    let digest = sha2::Sha256::digest(kubeconfig.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Writes `<name>-kubeconfig` when the cached one is missing or holds another kubeconfig.
async fn ensure_kubeconfig_secret(
    ctx: &Context,
    cluster: &KubernetesCluster,
    kubeconfig: &str,
) -> Result<(), kube::Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = kubeconfig_secret_name(&cluster.name_any());
    let hash = kubeconfig_hash(kubeconfig);
    let cached = ctx.secrets.get(&ObjectRef::new(&name).within(&namespace));
    if cached
        .as_ref()
        .and_then(|s| s.annotations().get(KUBECONFIG_HASH_ANNOTATION).cloned())
        .as_deref()
        == Some(hash.as_str())
    {
        return Ok(());
    }
    let owner = OwnerReference {
        api_version: KubernetesCluster::api_version(&()).into_owned(),
        kind: KubernetesCluster::kind(&()).into_owned(),
        name: cluster.name_any(),
        uid: cluster.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let secret = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            labels: Some(
                [
                    (CLUSTER_NAME_LABEL.to_owned(), cluster.name_any()),
                    (KUBECONFIG_LABEL.to_owned(), "true".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        "vigil".to_owned(),
                    ),
                ]
                .into(),
            ),
            annotations: Some([(KUBECONFIG_HASH_ANNOTATION.to_owned(), hash)].into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some(KUBECONFIG_SECRET_TYPE.to_owned()),
        data: Some(
            [(
                KUBECONFIG_KEY.to_owned(),
                ByteString(kubeconfig.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    };
    let mut value = serde_json::to_value(&secret).map_err(kube::Error::SerdeError)?;
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    let api: Api<Secret> = Api::namespaced(ctx.runtime.client().clone(), &namespace);
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(&value),
    )
    .await?;
    Ok(())
}

async fn patch_status(
    ctx: &Context,
    cluster: &KubernetesCluster,
    status: &KubernetesClusterStatus,
) -> Result<KubernetesCluster, kube::Error> {
    let api: Api<KubernetesCluster> = Api::namespaced(
        ctx.runtime.client().clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    // A merge patch leaves out what serializes as absent: send the lists and optional fields
    // explicitly, or an emptied one would stay in the stored status forever.
    let mut patch = serde_json::json!({"status": status});
    for (field, value) in [
        ("addons", serde_json::json!(status.addons)),
        ("conditions", serde_json::json!(status.conditions)),
        ("rejection", serde_json::json!(status.rejection)),
        ("apiServerURL", serde_json::json!(status.api_server_url)),
        ("masterVersion", serde_json::json!(status.master_version)),
        ("clusterID", serde_json::json!(status.cluster_id)),
    ] {
        patch["status"][field] = value;
    }
    api.patch_status(
        &cluster.name_any(),
        &PatchParams::apply(FIELD_MANAGER),
        &Patch::Merge(&patch),
    )
    .await
}

async fn publish(ctx: &Context, cluster: &KubernetesCluster, notes: &[EventNote]) {
    ctx.runtime
        .recorder()
        .publish_all(&cluster.object_ref(&()), notes, "Reconcile")
        .await;
}
