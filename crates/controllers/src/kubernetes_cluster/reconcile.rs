//! One pass over a KubernetesCluster: the status vault's restore and the finalizer first, then
//! observe the provider, decide, make the decided request, decide on its answer, and apply.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use vigil_apis::KubernetesCluster;
use vigil_provider::{ClusterProvider, Deletion, ProviderError, Providers};
use vigil_runtime::Runtime;

use super::apply::{execute, set_finalizers, write_plan, write_status, write_status_best_effort};
use super::decide::{self, DeletionInputs, DeletionLookup, Inputs};
use super::metrics::ClusterMetrics;
use super::model::Settings;
use super::model::{
    Answer, Answered, ClusterView, DeleteAnswer, DeletionPlan, DeletionStep, DeletionTarget,
    EventNote, FINALIZER, OP_DELETE, Observed,
};
use super::observe::{observe, view};
use crate::status_vault::{RestoreOutcome, StatusRestorer};

/// Event reason of an object waiting for the status vault's restore.
pub const REASON_WAITING_FOR_RESTORE: &str = "WaitingForStatusRestore";
/// How soon to look again when the status vault has not decided yet.
const RESTORE_PENDING_RETRY: Duration = Duration::from_secs(1);

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed")]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Provider(#[from] ProviderError),
}

/// Shared by the passes.
pub(super) struct Context {
    pub(super) runtime: Runtime,
    pub(super) settings: Settings,
    pub(super) providers: Providers,
    pub(super) provider_names: Vec<String>,
    /// The provider of a spec that names none.
    pub(super) default_provider: String,
    pub(super) restorer: Option<StatusRestorer>,
    pub(super) secrets: Store<Secret>,
    pub(super) metrics: ClusterMetrics,
    /// Objects whose wait for the status vault was announced by an Event (once per wait).
    pub(super) waiting_for_restore: Mutex<HashSet<ObjectRef<KubernetesCluster>>>,
}

impl Context {
    /// Records whether `key` waits for the status vault; true when a wait just began (to be
    /// announced once).
    pub(super) fn restore_wait(&self, key: ObjectRef<KubernetesCluster>, waiting: bool) -> bool {
        let mut set = self
            .waiting_for_restore
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
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
pub(super) async fn reconcile(
    cluster: Arc<KubernetesCluster>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let cluster = cluster.as_ref();
    let ctx = ctx.as_ref();
    let view = view(cluster, &ctx.default_provider);
    let has_finalizer = cluster.finalizers().iter().any(|f| f == FINALIZER);
    if cluster.metadata.deletion_timestamp.is_some() {
        if !has_finalizer {
            return Ok(Action::await_change());
        }
        return delete_cluster(cluster, &view, ctx).await;
    }
    if let Some(wait) = await_restore(cluster, &view, ctx).await {
        return Ok(wait);
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

/// An object re-applied from git has no status: the vault may hold the one of the object it
/// replaces (its clusterID above all), and creating before knowing would make a second
/// cluster. `Some` when the pass must stop here and look again.
async fn await_restore(
    cluster: &KubernetesCluster,
    view: &ClusterView,
    ctx: &Context,
) -> Option<Action> {
    let restorer = ctx
        .restorer
        .as_ref()
        .filter(|_| view.cluster_id().is_none())?;
    let outcome = restorer.ensure_restored(cluster).await;
    let key = ObjectRef::from_obj(cluster);
    match outcome {
        RestoreOutcome::NothingToRestore => {
            ctx.restore_wait(key, false);
            None
        }
        // The restored object arrives as the next watch event.
        RestoreOutcome::Restored(_) => {
            ctx.restore_wait(key, false);
            Some(Action::requeue(RESTORE_PENDING_RETRY))
        }
        // Not in status: a status written now would read as "nothing to restore" next time.
        RestoreOutcome::Pending(why) => {
            tracing::debug!(cluster = %view.name, %why, "waiting for the status vault");
            if ctx.restore_wait(key, true) {
                let note = EventNote::normal(
                    REASON_WAITING_FOR_RESTORE,
                    format!("no provider call until the status vault decides: {why}"),
                );
                ctx.runtime.events(cluster, &[note], "Reconcile").await;
            }
            Some(Action::requeue(RESTORE_PENDING_RETRY))
        }
    }
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
        (Some(provider), false) => Some(observe(&ctx.metrics, provider.as_ref(), view).await),
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
        now: Timestamp::now(),
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
        now: Timestamp::now(),
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

/// The object is being deleted: delete the cluster at its provider (unless orphaned), and
/// release the finalizer once the provider says it is gone.
async fn delete_cluster(
    cluster: &KubernetesCluster,
    view: &ClusterView,
    ctx: &Context,
) -> Result<Action, Error> {
    let provider_name = view.provider_name().to_owned();
    let provider = ctx.providers.get(&provider_name);
    let (target, error) = deletion_target(ctx, provider.as_deref(), view).await;
    let inputs = DeletionInputs {
        cluster: view,
        target,
        answered: None,
        settings: &ctx.settings,
        now: Timestamp::now(),
    };
    let first = decide::decide_deletion(&inputs);
    let (plan, error) = match (&first.step, &provider) {
        (DeletionStep::Delete(id), Some(provider)) => {
            let (answer, error) = ask_to_delete(ctx, provider.as_ref(), &provider_name, id).await;
            let plan = decide::decide_deletion(&DeletionInputs {
                answered: Some((&first, &answer)),
                now: Timestamp::now(),
                ..inputs
            });
            (plan, error)
        }
        _ => (first, error),
    };
    if plan.step == DeletionStep::Release {
        release(ctx, cluster, view, &plan).await?;
        return Ok(Action::await_change());
    }
    let unavailable = matches!(
        error,
        Some(ProviderError::Unavailable(_) | ProviderError::NotFound(_))
    );
    write_status_best_effort(ctx, cluster, &plan.status, unavailable).await?;
    ctx.runtime.events(cluster, &plan.events, "Reconcile").await;
    match error {
        Some(e) => Err(Error::Provider(e)),
        None => Ok(plan
            .requeue
            .map_or_else(Action::await_change, Action::requeue)),
    }
}

/// The cluster the deletion is about, looked up by identity at the provider when no id is
/// known; with the provider's error if it did not answer.
async fn deletion_target(
    ctx: &Context,
    provider: Option<&dyn ClusterProvider>,
    view: &ClusterView,
) -> (DeletionTarget, Option<ProviderError>) {
    match (decide::deletion_lookup(view, provider.is_some()), provider) {
        (DeletionLookup::Known(target), _) => (target, None),
        (DeletionLookup::FindByIdentity, None) => (DeletionTarget::ProviderUnknown, None),
        (DeletionLookup::FindByIdentity, Some(provider)) => {
            match observe(&ctx.metrics, provider, view).await {
                Ok(Some(found)) => (DeletionTarget::Cluster(found.id), None),
                Ok(None) => (DeletionTarget::Absent, None),
                Err(e) => (DeletionTarget::Unavailable(e.to_string()), Some(e)),
            }
        }
    }
}

/// Asks the provider to delete cluster `id`; its answer, and the error that goes to the
/// backoff (a refusal too: the provider may change its mind).
async fn ask_to_delete(
    ctx: &Context,
    provider: &dyn ClusterProvider,
    provider_name: &str,
    id: &str,
) -> (DeleteAnswer, Option<ProviderError>) {
    let result = provider.delete(id).await;
    ctx.metrics.count(provider_name, OP_DELETE, &result);
    match result {
        Ok(Deletion::Gone) | Err(ProviderError::NotFound(_)) => (DeleteAnswer::Gone, None),
        Ok(Deletion::InProgress(progress)) => (DeleteAnswer::InProgress(progress), None),
        Err(ProviderError::Rejected { reason, message }) => (
            DeleteAnswer::Refused(reason.clone(), message.clone()),
            Some(ProviderError::Rejected { reason, message }),
        ),
        Err(e) => (DeleteAnswer::Unavailable(e.to_string()), Some(e)),
    }
}

/// The cluster is gone (or orphaned): record the deletion's duration, write the last status,
/// and remove the finalizer.
async fn release(
    ctx: &Context,
    cluster: &KubernetesCluster,
    view: &ClusterView,
    plan: &DeletionPlan,
) -> Result<(), Error> {
    if let Some(since) = &cluster.metadata.deletion_timestamp
        && decide::asks_provider_to_delete(view)
    {
        let seconds = Timestamp::now()
            .duration_since(since.0)
            .as_secs_f64()
            .max(0.0);
        ctx.metrics.finished(OP_DELETE, seconds);
    }
    // The deleted cluster leaves the status before the object goes, so the status vault's
    // tombstone (the object's last status) names no cluster to restore (see
    // `decide_deletion`); the finalizer's patch is guarded by the status write's version.
    let mut released = cluster.clone();
    if let Some(version) = write_status(ctx, cluster, &plan.status).await? {
        released.metadata.resource_version = Some(version);
    }
    ctx.runtime.events(cluster, &plan.events, "Reconcile").await;
    let rest: Vec<String> = cluster
        .finalizers()
        .iter()
        .filter(|f| *f != FINALIZER)
        .cloned()
        .collect();
    set_finalizers(ctx, &released, rest).await?;
    Ok(())
}
