//! The controller's own series: `vigil_configmapsync_destinations{state}`, recomputed from the
//! cached statuses, and `vigil_configmapsync_copy_writes_total{verb}`.

use std::collections::BTreeMap;

use kube::runtime::reflector::Store;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::DestinationState;
use vigil_runtime::Runtime;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(super) struct StateLabel {
    state: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabel {
    verb: &'static str,
}

/// The registered families.
pub(super) struct Metrics {
    /// `vigil_configmapsync_destinations{state}`.
    pub destinations: Family<StateLabel, Gauge>,
    /// `vigil_configmapsync_copy_writes_total{verb}`.
    writes: Family<VerbLabel, Counter>,
}

impl Metrics {
    /// Registers the families on the Manager's registry.
    pub fn register(runtime: &Runtime) -> Self {
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
        Self {
            destinations,
            writes,
        }
    }

    /// Counts one write to a copy (`create`, `update` or `delete`).
    pub fn wrote(&self, verb: &'static str) {
        self.writes.get_or_create(&VerbLabel { verb }).inc();
    }
}

/// Keeps `vigil_configmapsync_destinations{state}` current from the cached statuses.
pub(super) async fn report_destinations(
    syncs: Store<ConfigMapSync>,
    gauge: Family<StateLabel, Gauge>,
) {
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
