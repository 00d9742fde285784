//! Prometheus metrics with controller-runtime's names, so dashboards and alerts written for Go
//! operators (kubebuilder, operator-sdk) work on Vigil unchanged.
//!
//! Everything lives in one [`prometheus_client`] [`Registry`] owned by [`Metrics`]; each controller
//! gets a cheap [`ControllerMetrics`] handle whose series carry its name as a label.
//!
//! | exposed name | type | labels |
//! |---|---|---|
//! | `controller_runtime_reconcile_total` | counter | `controller`, `result` |
//! | `controller_runtime_reconcile_errors_total` | counter | `controller` |
//! | `controller_runtime_reconcile_time_seconds` | histogram | `controller` |
//! | `workqueue_depth` | gauge | `name` |
//! | `workqueue_adds_total` | counter | `name` |
//! | `workqueue_retries_total` | counter | `name` |
//! | `workqueue_queue_duration_seconds` | histogram | `name` |
//! | `workqueue_work_duration_seconds` | histogram | `name` |
//! | `leader_election_master_status` | gauge | `name` |
//! | `<prefix>_quarantined_objects` | gauge | `controller` |
//! | `process_*` | client_golang's process metrics (CPU, memory, fds, start time) | |
//!
//! The client's request metrics (`rest_client_*`, client-go's names) are in [`crate::client`].
//! Series that neither controller-runtime nor client-go defines carry the product's prefix,
//! given to [`Metrics::new`] (the Manager's name by default; `vigil run`'s is `vigil`).

use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, text};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Metric, Registry};

/// Content type of [`Metrics::encode`]'s output: prometheus_client writes OpenMetrics text.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Value of the `name` label on `leader_election_master_status` until
/// [`Metrics::name_election`] names it (the Manager names it after its Lease).
pub const DEFAULT_ELECTION_NAME: &str = "leader";

/// controller-runtime's `reconcile_time_seconds` buckets, copied so latency dashboards line up.
const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9,
    1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0,
    25.0, 30.0, 40.0, 50.0, 60.0,
];

/// client-go's workqueue buckets, `ExponentialBuckets(10e-9, 10, 12)`: 10ns to 1000s. Written out
/// rather than computed so the `le` labels are exact decimals, not float noise.
const WORKQUEUE_BUCKETS: [f64; 12] = [
    1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0,
];

/// How one reconcile ended; the `result` label of `controller_runtime_reconcile_total`.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum ReconcileResult {
    /// Done; nothing to retry.
    Success,
    /// Failed; also counted in `controller_runtime_reconcile_errors_total`.
    Error,
    /// Succeeded but asked to be requeued right away (rate limited).
    Requeue,
    /// Succeeded and asked to be requeued after a delay.
    RequeueAfter,
}

impl ReconcileResult {
    /// The label value, spelled as controller-runtime spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Error => "error",
            Self::Requeue => "requeue",
            Self::RequeueAfter => "requeue_after",
        }
    }

    /// Every variant, to pre-create each series at zero as controller-runtime does.
    const ALL: [Self; 4] = [
        Self::Success,
        Self::Error,
        Self::Requeue,
        Self::RequeueAfter,
    ];
}

// Hand-written because the derive would emit the variant name ("RequeueAfter"), not the
// snake_case value controller-runtime uses.
impl EncodeLabelValue for ReconcileResult {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> Result<(), fmt::Error> {
        EncodeLabelValue::encode(&self.as_str(), encoder)
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ControllerLabel {
    controller: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    controller: String,
    result: ReconcileResult,
}

/// Workqueue and leader-election metrics use `name`, after client-go.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct NameLabel {
    name: String,
}

impl NameLabel {
    fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
        }
    }
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_time_histogram() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn workqueue_histogram() -> Histogram {
    Histogram::new(WORKQUEUE_BUCKETS)
}

/// The labelled families; cloning one shares its series (they are `Arc`s inside).
#[derive(Clone, Debug)]
struct Families {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabel, Counter>,
    reconcile_time: HistogramFamily<ControllerLabel>,
    depth: Family<NameLabel, Gauge>,
    adds: Family<NameLabel, Counter>,
    retries: Family<NameLabel, Counter>,
    queue_duration: HistogramFamily<NameLabel>,
    work_duration: HistogramFamily<NameLabel>,
    leader: Family<NameLabel, Gauge>,
    quarantined: Family<ControllerLabel, Gauge>,
}

impl Families {
    fn new() -> Self {
        Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time_histogram),
            depth: Family::default(),
            adds: Family::default(),
            retries: Family::default(),
            queue_duration: Family::new_with_constructor(workqueue_histogram),
            work_duration: Family::new_with_constructor(workqueue_histogram),
            leader: Family::default(),
            quarantined: Family::default(),
        }
    }

    /// Registers every family under its exposed name. Counters are named without `_total`
    /// because prometheus_client appends it.
    fn register_all(&self, registry: &mut Registry, prefix: &Prefix) {
        let f = self.clone();
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            f.reconcile_total,
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            f.reconcile_errors,
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            f.reconcile_time,
        );
        registry.register("workqueue_depth", "Current depth of workqueue", f.depth);
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            f.adds,
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            f.retries,
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            f.queue_duration,
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            f.work_duration,
        );
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, \
             0 indicates backup, 1 indicates master",
            f.leader,
        );
        registry.register(
            prefix.name("quarantined_objects"),
            "Objects whose reconciles keep failing, now retried slowly (quarantined), per controller",
            f.quarantined,
        );
    }
}

/// All runtime metrics, registered in one [`Registry`].
#[derive(Debug)]
pub struct Metrics {
    // A Mutex because registering needs `&mut Registry` while `Metrics` is shared behind an Arc.
    registry: Mutex<Registry>,
    families: Families,
    client: crate::client::ClientMetrics,
    /// The `name` label of `leader_election_master_status`.
    election: Mutex<String>,
    prefix: Prefix,
}

/// The product's prefix of the series only this runtime defines, made a valid metric name.
#[derive(Clone, Debug)]
struct Prefix(String);

impl Prefix {
    /// `product` with what a metric name may not hold (`-`, `.`…) turned into `_`; an empty
    /// product gives no prefix.
    fn new(product: &str) -> Self {
        let mut prefix: String = product
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        if prefix.starts_with(|c: char| c.is_ascii_digit()) {
            prefix.insert(0, '_');
        }
        Self(prefix)
    }

    fn name(&self, name: &str) -> String {
        if self.0.is_empty() {
            name.to_owned()
        } else {
            format!("{}_{name}", self.0)
        }
    }
}

impl Metrics {
    /// Creates the registry with every runtime metric registered, the process's among them;
    /// `leader_election_master_status` starts at 0 so a scrape before the first election
    /// already shows "not leading". `product` prefixes the series only this runtime defines
    /// (`vigil` gives `vigil_quarantined_objects`; see the module documentation).
    pub fn new(product: &str) -> Arc<Self> {
        let prefix = Prefix::new(product);
        let families = Families::new();
        let mut registry = Registry::default();
        families.register_all(&mut registry, &prefix);
        let client = crate::client::ClientMetrics::new();
        client.register(&mut registry, &prefix.name(""));
        crate::process::register(&mut registry);
        let metrics = Self {
            registry: Mutex::new(registry),
            families,
            client,
            election: Mutex::new(DEFAULT_ELECTION_NAME.to_owned()),
            prefix,
        };
        metrics.set_leader(false);
        Arc::new(metrics)
    }

    /// Handle for one controller (label `controller="<name>"`, or `name="<name>"` on workqueue
    /// metrics); cheap to clone. Creates the controller's series at zero, as controller-runtime
    /// does, so rates and alerts have a baseline before the first reconcile.
    pub fn controller(&self, name: &str) -> ControllerMetrics {
        ControllerMetrics {
            inner: Arc::new(ControllerSeries::new(&self.families, name)),
        }
    }

    /// `name` with the product's prefix (`quarantined_objects` → `vigil_quarantined_objects`):
    /// the name of a series only this runtime, or the product, defines.
    pub fn product_name(&self, name: &str) -> String {
        self.prefix.name(name)
    }

    /// The API client's request series (see [`crate::client`]).
    pub fn client_metrics(&self) -> &crate::client::ClientMetrics {
        &self.client
    }

    /// Text exposition (OpenMetrics text as prometheus_client encodes it, ending in `# EOF`).
    pub fn encode(&self) -> String {
        let mut text = String::new();
        // Writing into a String cannot fail, and our label encoders cannot either; a metric
        // registered through `register` could, so report it rather than panic in a scrape.
        if let Err(error) = text::encode(&mut text, &self.lock_registry()) {
            tracing::error!(%error, "encoding metrics failed; the exposition is truncated");
        }
        text
    }

    /// Names the election in `leader_election_master_status{name}` (controller-runtime uses
    /// the Lease's name); the series starts over at 0 under the new name.
    pub fn name_election(&self, name: &str) {
        let old = std::mem::replace(
            &mut *self.election.lock().unwrap_or_else(PoisonError::into_inner),
            name.to_owned(),
        );
        self.families.leader.remove(&NameLabel::new(&old));
        self.set_leader(false);
    }

    /// Sets `leader_election_master_status{name}` to 1 while leading, else 0.
    pub fn set_leader(&self, leading: bool) {
        let name = self
            .election
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        self.families
            .leader
            .get_or_create(&NameLabel::new(&name))
            .set(i64::from(leading));
    }

    /// Lets a controller register its own metric (e.g. a `vigil_lame_services` gauge) in the
    /// same registry, so one scrape returns everything. As with the runtime's own counters,
    /// name a counter without `_total`: prometheus_client appends it.
    pub fn register<M: Metric>(&self, name: &str, help: &str, metric: M) {
        self.lock_registry().register(name, help, metric);
    }

    /// Registration only appends, so a registry seen after a panic elsewhere is still whole:
    /// recover it from the poison instead of failing every later scrape.
    fn lock_registry(&self) -> MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// One controller's series, resolved once so recording is a plain atomic update.
#[derive(Debug)]
struct ControllerSeries {
    /// Indexed by [`ReconcileResult`] discriminant, built from [`ReconcileResult::ALL`].
    results: [Counter; 4],
    errors: Counter,
    reconcile_time: Histogram,
    depth: Gauge,
    adds: Counter,
    retries: Counter,
    queue_duration: Histogram,
    work_duration: Histogram,
    quarantined: Gauge,
}

impl ControllerSeries {
    fn new(families: &Families, name: &str) -> Self {
        let controller = ControllerLabel {
            controller: name.to_owned(),
        };
        let queue = NameLabel::new(name);
        Self {
            results: ReconcileResult::ALL.map(|result| {
                families.reconcile_total.get_or_create_owned(&ResultLabels {
                    controller: name.to_owned(),
                    result,
                })
            }),
            errors: families.reconcile_errors.get_or_create_owned(&controller),
            reconcile_time: families.reconcile_time.get_or_create_owned(&controller),
            depth: families.depth.get_or_create_owned(&queue),
            adds: families.adds.get_or_create_owned(&queue),
            retries: families.retries.get_or_create_owned(&queue),
            queue_duration: families.queue_duration.get_or_create_owned(&queue),
            work_duration: families.work_duration.get_or_create_owned(&queue),
            quarantined: families.quarantined.get_or_create_owned(&controller),
        }
    }

    fn result_counter(&self, result: ReconcileResult) -> &Counter {
        // ALL lists the variants in declaration order, so the discriminant is the index.
        &self.results[result as usize]
    }
}

/// Metrics handle for one controller; cheap to clone (one `Arc`).
#[derive(Clone, Debug)]
pub struct ControllerMetrics {
    inner: Arc<ControllerSeries>,
}

impl ControllerMetrics {
    /// Starts timing a reconcile; [`ReconcileTimer::finish`] records it.
    pub fn reconcile_started(&self) -> ReconcileTimer {
        ReconcileTimer {
            metrics: self.clone(),
            started: Instant::now(),
        }
    }

    /// An item was added to the workqueue (`workqueue_adds_total`).
    pub fn queue_add(&self) {
        self.inner.adds.inc();
    }

    /// The workqueue now holds `depth` items (`workqueue_depth`).
    pub fn queue_depth(&self, depth: i64) {
        self.inner.depth.set(depth);
    }

    /// An item was requeued with backoff (`workqueue_retries_total`).
    pub fn retry(&self) {
        self.inner.retries.inc();
    }

    /// `count` objects are quarantined now (`<prefix>_quarantined_objects`).
    pub fn set_quarantined(&self, count: usize) {
        self.inner
            .quarantined
            .set(i64::try_from(count).unwrap_or(i64::MAX));
    }

    /// An item waited `wait` in the queue before a worker took it
    /// (`workqueue_queue_duration_seconds`).
    pub fn queued_for(&self, wait: Duration) {
        self.inner.queue_duration.observe(wait.as_secs_f64());
    }
}

/// A reconcile in progress. Dropping it without [`finish`](Self::finish) records nothing, so a
/// cancelled reconcile does not count as any result.
#[derive(Debug)]
#[must_use = "call finish() to record the reconcile"]
pub struct ReconcileTimer {
    metrics: ControllerMetrics,
    started: Instant,
}

impl ReconcileTimer {
    /// Records the reconcile: its result, an error if it failed, and its duration in both
    /// `controller_runtime_reconcile_time_seconds` and `workqueue_work_duration_seconds`
    /// (controller-runtime reports the same span in both).
    pub fn finish(self, result: ReconcileResult) {
        let series = &self.metrics.inner;
        let seconds = self.started.elapsed().as_secs_f64();
        series.result_counter(result).inc();
        if result == ReconcileResult::Error {
            series.errors.inc();
        }
        series.reconcile_time.observe(seconds);
        series.work_duration.observe(seconds);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// True if some exposed sample line starts with `prefix` (series name and labels).
    fn has_sample(text: &str, prefix: &str) -> bool {
        text.lines().any(|line| line.starts_with(prefix))
    }

    #[test]
    fn reconcile_results_are_counted_by_result_label() {
        let metrics = Metrics::new("vigil");
        let crisvc = metrics.controller("crisvc");
        crisvc.reconcile_started().finish(ReconcileResult::Success);
        crisvc
            .reconcile_started()
            .finish(ReconcileResult::RequeueAfter);
        crisvc
            .reconcile_started()
            .finish(ReconcileResult::RequeueAfter);

        let text = metrics.encode();
        for expected in [
            r#"controller_runtime_reconcile_total{controller="crisvc",result="success"} 1"#,
            r#"controller_runtime_reconcile_total{controller="crisvc",result="error"} 0"#,
            r#"controller_runtime_reconcile_total{controller="crisvc",result="requeue"} 0"#,
            r#"controller_runtime_reconcile_total{controller="crisvc",result="requeue_after"} 2"#,
            r#"controller_runtime_reconcile_errors_total{controller="crisvc"} 0"#,
        ] {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
    }

    #[test]
    fn errors_count_in_both_counters() {
        let metrics = Metrics::new("vigil");
        let crisvc = metrics.controller("crisvc");
        crisvc.reconcile_started().finish(ReconcileResult::Error);

        let text = metrics.encode();
        assert!(text.contains(
            r#"controller_runtime_reconcile_total{controller="crisvc",result="error"} 1"#
        ));
        assert!(
            text.contains(r#"controller_runtime_reconcile_errors_total{controller="crisvc"} 1"#)
        );
    }

    #[test]
    fn reconcile_duration_lands_in_both_histograms() {
        let metrics = Metrics::new("vigil");
        metrics
            .controller("crisvc")
            .reconcile_started()
            .finish(ReconcileResult::Success);

        let text = metrics.encode();
        assert!(text.contains("# TYPE controller_runtime_reconcile_time_seconds histogram"));
        assert!(
            text.contains(
                r#"controller_runtime_reconcile_time_seconds_count{controller="crisvc"} 1"#
            )
        );
        assert!(has_sample(
            &text,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="0.005",controller="crisvc"}"#
        ));
        assert!(has_sample(
            &text,
            r#"controller_runtime_reconcile_time_seconds_bucket{le="60.0",controller="crisvc"}"#
        ));
        assert!(text.contains("# TYPE workqueue_work_duration_seconds histogram"));
        assert!(text.contains(r#"workqueue_work_duration_seconds_count{name="crisvc"} 1"#));
    }

    #[test]
    fn workqueue_metrics_use_the_name_label() {
        let metrics = Metrics::new("vigil");
        let queue = metrics.controller("crisvc");
        queue.queue_add();
        queue.queue_add();
        queue.queue_depth(2);
        queue.retry();
        queue.queued_for(Duration::from_millis(5));

        let text = metrics.encode();
        for expected in [
            "# TYPE workqueue_depth gauge",
            r#"workqueue_depth{name="crisvc"} 2"#,
            "# TYPE workqueue_adds counter",
            r#"workqueue_adds_total{name="crisvc"} 2"#,
            "# TYPE workqueue_retries counter",
            r#"workqueue_retries_total{name="crisvc"} 1"#,
            "# TYPE workqueue_queue_duration_seconds histogram",
            r#"workqueue_queue_duration_seconds_count{name="crisvc"} 1"#,
            r#"workqueue_queue_duration_seconds_bucket{le="1e-8",name="crisvc"} 0"#,
            r#"workqueue_queue_duration_seconds_bucket{le="0.01",name="crisvc"} 1"#,
        ] {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
    }

    #[test]
    fn leader_status_follows_set_leader() {
        let metrics = Metrics::new("vigil");
        metrics.name_election("vigil");
        let series = r#"leader_election_master_status{name="vigil"}"#;
        assert!(metrics.encode().contains(&format!("{series} 0")));
        metrics.set_leader(true);
        assert!(metrics.encode().contains(&format!("{series} 1")));
        metrics.set_leader(false);
        assert!(metrics.encode().contains(&format!("{series} 0")));
    }

    #[test]
    fn controllers_get_separate_series_and_shared_handles() {
        let metrics = Metrics::new("vigil");
        let a = metrics.controller("a");
        let a_again = metrics.controller("a");
        metrics.controller("b").queue_add();
        a.queue_add();
        a_again.clone().queue_add();

        let text = metrics.encode();
        assert!(text.contains(r#"workqueue_adds_total{name="a"} 2"#));
        assert!(text.contains(r#"workqueue_adds_total{name="b"} 1"#));
    }

    #[test]
    fn controllers_can_register_their_own_metrics() {
        let metrics = Metrics::new("vigil");
        let lame = Gauge::<i64>::default();
        metrics.register("vigil_lame_services", "Services marked lame", lame.clone());
        lame.set(3);
        assert!(metrics.encode().contains("vigil_lame_services 3"));
    }

    #[test]
    fn exposition_is_openmetrics_text() {
        let text = Metrics::new("vigil").encode();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(!text.contains("_total_total"), "{text}");
    }
}
