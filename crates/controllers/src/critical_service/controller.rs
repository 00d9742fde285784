//! The CriticalService controller's wiring: its lean caches, the triggers from Service, pod,
//! EndpointSlice, PodTemplate, ReplicaSet and StatefulSet changes, and the controller running
//! [`reconcile`].

use std::sync::Arc;

use vigil_apis::{CriticalService, HasConditions as _};
use vigil_runtime::Runtime;

use super::apply::Writer;
use super::cache::{self, Sources};
pub use super::model::Settings;
use super::observe::{self, Caches};
use super::reconcile::{Context, reconcile};
pub use super::{Error, NAME, PERMISSIONS};
/// Condition reason of a quarantined CriticalService (the controller builder reports it).
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;

/// Reconciles running at once. Unbounded, a start with a thousand CriticalServices ran a
/// thousand reconciles at once, each holding its own HTTP connection and buffers (most of the
/// operator's memory at that moment) for no gain in speed on a shared API server.
pub const MAX_CONCURRENT_RECONCILES: u16 = 16;

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let sources = Sources::new(&runtime, settings.watched_namespaces.as_ref());
    let caches = Caches::new(&sources);
    super::metrics::report_lame_services(&runtime, &sources, caches.clone(), settings.clone());
    let (c, s) = (&caches, &settings);
    let context = Arc::new(Context {
        writer: Writer::new(runtime.clone()),
        caches: caches.clone(),
        settings: settings.clone(),
    });
    runtime
        .controller(&sources.crs)
        .concurrency(MAX_CONCURRENT_RECONCILES)
        .watches(
            &sources.services,
            observe::for_service(c.clone(), s.clone()),
        )
        .watches(&sources.pods, observe::for_pod(c.clone(), s.clone()))
        .watches(&sources.slices, observe::for_slice(c.clone(), s.clone()))
        .watches(
            &sources.templates,
            observe::for_template(c.clone(), s.clone()),
        )
        .watches(
            &sources.replica_sets,
            observe::for_workload(c.clone(), s.clone(), cache::REPLICA_SET),
        )
        .watches(
            &sources.stateful_sets,
            observe::for_workload(c.clone(), s.clone(), cache::STATEFUL_SET),
        )
        .quarantine_condition(CriticalService::conditions)
        .run(reconcile, context)
        .await;
}
