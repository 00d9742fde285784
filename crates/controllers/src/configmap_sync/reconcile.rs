//! The reconcile: through the finalizer, a [`super::decide::Plan`] decided from the caches and
//! applied ([`super::apply`]); on deletion, the copies cleaned up. The runtime's guard keeps
//! non-leaders from getting here.

use std::collections::HashSet;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::controller::Action;
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::{DeletionPolicy, SyncedKind};
use vigil_runtime::{Runtime, finalizer};

use super::apply::{apply, delete_copy, list_copies};
use super::decide::{self};
use super::metrics::Metrics;
use super::model::{Error, FINALIZER, Settings};
use super::observe::{Caches, Observed, view};

/// Shared by reconciles.
pub(super) struct Context {
    pub runtime: Runtime,
    pub settings: Settings,
    pub caches: Caches,
    pub metrics: Metrics,
}

/// Copies are cleaned up before a ConfigMapSync goes (ownerReferences cannot point across
/// namespaces), through the finalizer.
pub(super) async fn reconcile(
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

async fn apply_sync(sync: Arc<ConfigMapSync>, ctx: &Context) -> Result<Action, Error> {
    let plan = {
        let observed = ctx.caches.observe(&sync);
        decide::decide(&observed.inputs(&ctx.settings, Timestamp::now()))
    };
    apply(&sync, ctx, plan).await
}

/// The ConfigMapSync is being deleted: delete its copies (unless `deletionPolicy: Orphan`), then
/// the finalizer goes. Besides the cache, the API is asked for copies of this name, so a copy
/// written a moment ago (not in the cache yet) is not left behind.
async fn cleanup(sync: Arc<ConfigMapSync>, ctx: &Context) -> Result<Action, Error> {
    let this = view(&sync);
    let mut config_maps = ctx.caches.relevant(&this);
    if this.spec.deletion_policy() == DeletionPolicy::Delete {
        let listed = match (this.spec.kind(), ctx.caches.has_secrets()) {
            (SyncedKind::ConfigMap, _) => list_copies::<ConfigMap>(ctx, &this).await?,
            (SyncedKind::Secret, true) => list_copies::<Secret>(ctx, &this).await?,
            // Secrets not enabled: no permission to list them; none were written by this run.
            (SyncedKind::Secret, false) => Vec::new(),
        };
        let known: HashSet<String> = config_maps.iter().map(|c| c.uid.clone()).collect();
        config_maps.extend(listed.into_iter().filter(|v| !known.contains(&v.uid)));
    }
    let observed = Observed::for_cleanup(this, config_maps);
    let deletes = decide::cleanup(&observed.inputs(&ctx.settings, Timestamp::now()));
    for target in &deletes {
        delete_copy(ctx, observed.sync.spec.kind(), target).await?;
    }
    Ok(Action::await_change())
}
