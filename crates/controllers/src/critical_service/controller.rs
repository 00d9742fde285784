//! The CriticalService controller's wiring: its lean caches, the triggers from Service, pod,
//! EndpointSlice and PodTemplate changes, and the reconcile (observe, decide, apply).

use std::sync::Arc;

use k8s_openapi::api::core::v1::PodTemplate;
use kube::runtime::controller::Action;
use vigil_apis::{CriticalService, HasConditions as _};
use vigil_runtime::Runtime;
use vigil_runtime::cache::Source as _;

use super::apply::Writer;
use super::cache::{self, CachedPod, CachedService, CachedSlice};
pub use super::model::Settings;
use super::observe::{self, Caches};
pub use super::{Error, NAME, PERMISSIONS};
/// Condition reason of a quarantined CriticalService (the controller builder reports it).
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;

/// Reconciles running at once. Unbounded, a start with a thousand CriticalServices ran a
/// thousand reconciles at once, each holding its own HTTP connection and buffers (most of the
/// operator's memory at that moment) for no gain in speed on a shared API server.
pub const MAX_CONCURRENT_RECONCILES: u16 = 16;

/// Shared by reconciles.
struct Context {
    caches: Caches,
    settings: Settings,
    writer: Writer,
}

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let ns = settings.watched_namespaces.as_ref();
    let crs = runtime
        .cache::<CriticalService>()
        .slim(cache::slim_critical_service);
    let crs = crs.index(cache::critical_service_keys).build();
    let services = runtime
        .cache::<CachedService>()
        .namespaces(ns)
        .slim(cache::slim_service);
    let services = services.index(cache::service_keys).build();
    // Pods are most of a cluster: kept as compact entries, not objects.
    let pods = runtime
        .cache::<CachedPod>()
        .namespaces(ns)
        .slim(cache::slim_pod);
    let pods = pods.index(cache::pod_keys).build_compact(cache::pod_entry);
    let slices = runtime
        .cache::<CachedSlice>()
        .namespaces(ns)
        .slim(cache::slim_slice);
    let slices = slices
        .index(cache::slice_keys)
        .build_compact(cache::slice_entry);
    // Templates may live outside the watched namespaces (POD_TEMPLATE_NS): watch them everywhere.
    let templates = runtime
        .cache::<PodTemplate>()
        .namespaces(None)
        .slim(cache::slim_template);
    let templates = templates.build();
    let caches = Caches::new(&crs, &services, &pods, &slices, &templates);
    let synced = vec![
        services.synced(),
        pods.synced(),
        slices.synced(),
        templates.synced(),
    ];
    super::metrics::report_lame_services(&runtime, caches.clone(), settings.clone(), synced);
    let (c, s) = (&caches, &settings);
    runtime
        .controller(NAME, &crs)
        .concurrency(MAX_CONCURRENT_RECONCILES)
        .watches(&services, observe::for_service(c.clone(), s.clone()))
        .watches(&pods, observe::for_pod(c.clone(), s.clone()))
        .watches(&slices, observe::for_slice(c.clone(), s.clone()))
        .watches(&templates, observe::for_template(c.clone(), s.clone()))
        .quarantine_condition(CriticalService::conditions)
        .run(
            reconcile,
            Arc::new(Context {
                writer: Writer::new(runtime.clone()),
                caches,
                settings,
            }),
        )
        .await;
}

/// Decides from the caches and applies the plan.
async fn reconcile(cr: Arc<CriticalService>, ctx: Arc<Context>) -> Result<Action, Error> {
    let status = ctx.writer.status(&cr);
    let plan = observe::observe_and_decide(&ctx.caches, &ctx.settings, &cr, status);
    ctx.writer.apply(&cr, plan).await
}
