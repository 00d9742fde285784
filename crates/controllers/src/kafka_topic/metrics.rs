//! The controller's own series: `vigil_kafka_broker_requests_total{api,result}` and
//! `vigil_kafka_topic_drift_total`.

use std::sync::Arc;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use vigil_kafka::RequestCounts;
use vigil_runtime::Runtime;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    api: &'static str,
    /// `ok`, `error` (the broker answered with an error) or `unavailable` (no answer): the
    /// ratio of `unavailable` is the broker availability the alerts watch.
    result: &'static str,
}

/// The registered series.
pub(super) struct Metrics {
    /// Every broker request (`vigil_kafka_broker_requests_total{api,result}`).
    pub requests: Arc<RequestCounts>,
    /// `vigil_kafka_topic_drift_total`: changes made in Kafka outside Vigil, found and reverted.
    pub drift: Counter,
}

impl Metrics {
    /// Registers the series on the Manager's registry.
    pub fn register(runtime: &Runtime) -> Self {
        let registry = runtime.metrics();
        let request_family = Family::<RequestLabels, Counter>::default();
        registry.register(
            "vigil_kafka_broker_requests",
            "Requests to Kafka brokers by API (Metadata, CreateTopics, …) and result (ok, error, unavailable)",
            request_family.clone(),
        );
        let drift = Counter::default();
        registry.register(
            "vigil_kafka_topic_drift",
            "Topics found changed in Kafka outside Vigil (and restored)",
            drift.clone(),
        );
        let requests = Arc::new(RequestCounts::with_hook(move |api, outcome| {
            request_family
                .get_or_create(&RequestLabels {
                    api,
                    result: outcome.as_str(),
                })
                .inc();
        }));
        Self { requests, drift }
    }
}
