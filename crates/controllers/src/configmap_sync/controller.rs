//! The wiring: lean caches of ConfigMapSyncs, ConfigMaps, namespaces (and Secrets when enabled),
//! the triggers from each, the metrics, and the controller that reconciles with [`reconcile`](super::reconcile).
//!
//! [`apply`]: super::apply

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use vigil_apis::{ConfigMapSync, HasConditions as _};
use vigil_runtime::Runtime;

pub use super::model::{Error, Settings};
pub use super::{NAME, PERMISSIONS, SECRET_PERMISSIONS};
/// Condition reason of a quarantined ConfigMapSync (the controller builder reports it).
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;

use super::cache;
use super::metrics::{Metrics, report_destinations};
use super::observe::Caches;
use super::reconcile::{Context, reconcile};

/// ConfigMapSyncs reconciled at once. Unbounded, 1,000 ConfigMapSyncs created together would each
/// open their own HTTP/1.1 connections for their writes: thousands of sockets and their buffers
/// (over 100 MiB measured) for no gain in throughput.
const RECONCILE_CONCURRENCY: u16 = 8;

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let metrics = Metrics::register(&runtime);
    let syncs = runtime
        .cache::<ConfigMapSync>()
        .slim(cache::slim_sync)
        .index(cache::sync_keys);
    let syncs = syncs.build();
    let config_maps = runtime.cache::<ConfigMap>().slim(cache::slim_config_map);
    let config_maps = config_maps.index(cache::object_keys::<ConfigMap>).build();
    // Namespaces are few and read whole (labels): no index.
    let namespaces = runtime
        .cache::<Namespace>()
        .slim(crate::slim::namespace)
        .build();
    let secrets = settings.secrets.then(|| {
        let secrets = runtime.cache::<Secret>().slim(cache::slim_secret);
        secrets.index(cache::object_keys::<Secret>).build()
    });
    let caches = Caches::new(&syncs, &config_maps, &namespaces, secrets.as_ref());
    let (store, gauge) = (caches.syncs.clone(), metrics.destinations.clone());
    runtime.every(Duration::from_secs(2), move || {
        report_destinations(store.clone(), gauge.clone())
    });

    // Deciding on half-filled caches would report missing sources and re-create copies: the
    // builder waits for every cache it is given.
    let mut controller = runtime
        .controller(&syncs)
        .concurrency(RECONCILE_CONCURRENCY)
        .watches(&config_maps, caches.mapper_for_object::<ConfigMap>())
        .watches(&namespaces, caches.mapper_for_namespace());
    if let Some(secrets) = &secrets {
        controller = controller.watches(secrets, caches.mapper_for_object::<Secret>());
    }
    let ctx = Context {
        runtime: runtime.clone(),
        settings,
        caches,
        metrics,
    };
    controller
        .quarantine_condition(ConfigMapSync::conditions)
        .event_action("Sync")
        .run(reconcile, Arc::new(ctx))
        .await;
}
