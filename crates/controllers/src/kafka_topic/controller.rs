//! The wiring: a cache of Topics, the drift poll and its trigger stream, the backoff suited to
//! brokers' outages, and the controller that reconciles with [`reconcile`](super::reconcile).
//!
//! Broker traffic: a reconcile (on a Topic change, or when the drift poll flags the topic) reads
//! the topic with one `Metadata` and one `DescribeConfigs` request and writes only what differs.
//! The drift poll sends, per cluster and per `drift_interval`, one `Metadata` and one
//! `DescribeConfigs` for all of that cluster's topics together — whatever their number — and
//! reconciles only the topics that changed. Nothing else reaches the broker.
//!
//! [`apply`]: super::apply

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use vigil_apis::HasConditions as _;
use vigil_apis::kafka_topic::Topic;
use vigil_runtime::Runtime;
use vigil_runtime::backoff::BackoffPolicy;

pub use super::model::{Error, Settings};
pub use super::{NAME, PERMISSIONS, SECRET_PERMISSIONS};

use super::metrics::Metrics;
use super::observe::poll_drift;
use super::reconcile::{Context, reconcile};

/// Topics reconciled at once.
const RECONCILE_CONCURRENCY: u16 = 8;

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let metrics = Metrics::register(&runtime);
    let topics = runtime
        .cache::<Topic>()
        .namespaces(settings.namespaces.as_ref());
    // The cache keeps everything but managed fields.
    let topics = topics
        .slim(|t: &mut Topic| t.metadata.managed_fields = None)
        .build();
    let retry_max = settings.retry_max;
    let ctx = Arc::new(Context::new(runtime.clone(), settings, metrics));
    let (drift_tx, drift_rx) = mpsc::channel::<ObjectRef<Topic>>(1024);
    if !ctx.settings.drift_interval.is_zero() {
        runtime.spawn(poll_drift(ctx.clone(), topics.clone(), drift_tx));
    }
    let drifted = futures::stream::unfold(drift_rx, |mut rx| async move {
        rx.recv().await.map(|r| (r, rx))
    });
    let leader_ctx = ctx.clone();
    runtime
        .controller(&topics)
        .concurrency(RECONCILE_CONCURRENCY)
        .triggers(drifted)
        // Becoming leader (again): look at everything, the broker included — another replica
        // may have acted meanwhile.
        .on_leadership(move |_| leader_ctx.forget_all_settled())
        // Failures are mostly a broker's outages or refusals: slower to start, capped by
        // `retry_max`, and quarantined only after thirty.
        .backoff(BackoffPolicy {
            base: Duration::from_millis(100),
            max: retry_max,
            quarantine_after: 30,
            quarantine_interval: retry_max,
            ..BackoffPolicy::default()
        })
        .quarantine_condition(Topic::conditions)
        .run(reconcile, ctx)
        .await;
}
