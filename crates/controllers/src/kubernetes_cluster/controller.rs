//! The wiring: the caches, the controller, its metrics, and the context its passes share.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use vigil_apis::{HasConditions as _, KubernetesCluster};
use vigil_provider::Providers;
use vigil_runtime::Runtime;

use super::metrics::ClusterMetrics;
pub use super::model::kubeconfig_secret_name;
use super::model::{KUBECONFIG_LABEL, Settings, reconcile_trigger};
use super::observe::{cluster_of_secret, slim_cluster, slim_secret};
use super::reconcile::Context;
pub use super::reconcile::{Error, REASON_WAITING_FOR_RESTORE};
pub use super::{NAME, PERMISSIONS};
use crate::status_vault::StatusRestorer;

/// KubernetesClusters reconciled at once: provider calls are round trips to another system, so
/// more overlap than the API-only controllers.
const RECONCILE_CONCURRENCY: u16 = 16;

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
    let metrics = ClusterMetrics::register(&runtime);
    let clusters = runtime
        .cache::<KubernetesCluster>()
        .slim(slim_cluster)
        .build();
    let secrets = runtime
        .cache::<Secret>()
        .labels(KUBECONFIG_LABEL)
        .slim(slim_secret)
        .build();
    let (reporter, store) = (metrics.clone(), clusters.store().clone());
    runtime.every(Duration::from_secs(2), move || {
        reporter.report_phases(&store);
        std::future::ready(())
    });

    let ctx = Arc::new(Context {
        runtime: runtime.clone(),
        settings: config.settings,
        provider_names: config.providers.names().map(str::to_owned).collect(),
        default_provider: config
            .providers
            .default_name()
            .unwrap_or(vigil_apis::kubernetes_cluster::DEFAULT_PROVIDER)
            .to_owned(),
        providers: config.providers,
        restorer: config.restorer,
        secrets: secrets.store().clone(),
        metrics,
        waiting_for_restore: Mutex::default(),
    });
    runtime
        .controller(&clusters)
        // Our own status writes do not start the next pass: the requeue paces the polls.
        .trigger_on(reconcile_trigger)
        .concurrency(RECONCILE_CONCURRENCY)
        .watches(&secrets, cluster_of_secret)
        .quarantine_condition(KubernetesCluster::conditions)
        .run(super::reconcile::reconcile, ctx)
        .await;
}
