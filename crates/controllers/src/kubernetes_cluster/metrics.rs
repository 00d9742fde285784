//! The controller's own metrics, besides controller-runtime's: operation durations, provider
//! requests by result, and clusters by phase.

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::Phase;
use vigil_provider::ProviderError;
use vigil_runtime::Runtime;

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

/// The families, registered once in the Manager's registry.
#[derive(Clone)]
pub(super) struct ClusterMetrics {
    /// `vigil_kubernetescluster_operation_duration_seconds{operation}`.
    durations: Family<OperationLabel, Histogram, fn() -> Histogram>,
    /// `vigil_kubernetescluster_provider_requests_total{provider, operation, result}`.
    requests: Family<RequestLabel, Counter>,
    /// `vigil_kubernetescluster_clusters{phase}`.
    phases: Family<PhaseLabel, Gauge>,
}

fn duration_histogram() -> Histogram {
    // From a fraction of a second (the reference provider) to an hour (a real cloud).
    Histogram::new([
        0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0,
    ])
}

impl ClusterMetrics {
    /// Creates the families and registers them in `runtime`'s registry.
    pub(super) fn register(runtime: &Runtime) -> Self {
        let metrics = Self {
            durations: Family::new_with_constructor(duration_histogram),
            requests: Family::default(),
            phases: Family::default(),
        };
        let registry = runtime.metrics();
        registry.register(
            "vigil_kubernetescluster_operation_duration_seconds",
            "Time from starting a provision, upgrade or delete to its end, by operation",
            metrics.durations.clone(),
        );
        registry.register(
            "vigil_kubernetescluster_provider_requests",
            "Requests to cluster providers by provider, operation and result (ok, unavailable, \
             rejected, not_found)",
            metrics.requests.clone(),
        );
        registry.register(
            "vigil_kubernetescluster_clusters",
            "KubernetesClusters by phase, from their status",
            metrics.phases.clone(),
        );
        metrics
    }

    /// An operation that took `seconds` to finish.
    pub(super) fn finished(&self, operation: &'static str, seconds: f64) {
        self.durations
            .get_or_create(&OperationLabel { operation })
            .observe(seconds);
    }

    /// Counts a provider request by its result.
    pub(super) fn count<T>(
        &self,
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
        self.requests
            .get_or_create(&RequestLabel {
                provider: provider.to_owned(),
                operation,
                result,
            })
            .inc();
    }

    /// Sets `vigil_kubernetescluster_clusters{phase}` from the cached statuses.
    pub(super) fn report_phases(&self, clusters: &Store<KubernetesCluster>) {
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
            self.phases
                .get_or_create(&PhaseLabel {
                    phase: phase.as_str(),
                })
                .set(count);
        }
    }
}
