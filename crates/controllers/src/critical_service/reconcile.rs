//! The reconcile: observe the caches, decide (the whole plan: pods, EndpointSlices, status,
//! Events), and apply only what differs.

use std::sync::Arc;

use kube::runtime::controller::Action;
use vigil_apis::CriticalService;

use super::Error;
use super::apply::Writer;
use super::model::Settings;
use super::observe::{self, Caches};

/// Shared by reconciles.
pub(super) struct Context {
    pub caches: Caches,
    pub settings: Settings,
    pub writer: Writer,
}

/// Decides from the caches and applies the plan.
pub(super) async fn reconcile(
    cr: Arc<CriticalService>,
    ctx: Arc<Context>,
) -> Result<Action, Error> {
    let status = ctx.writer.status(&cr);
    let plan = observe::observe_and_decide(&ctx.caches, &ctx.settings, &cr, status);
    ctx.writer.apply(&cr, plan).await
}
