//! The Prometheus text format `/metrics` serves, read once for every bench: samples with their
//! series text, name, labels and value; and Vigil's reconcile counters built on them.

use std::collections::BTreeMap;

use super::fmt::fmt_count;

/// One sample line: `name{labels} value`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sample<'a> {
    /// The series as written, `name{labels}` (or `name` alone).
    pub(crate) series: &'a str,
    pub(crate) name: &'a str,
    /// What is between the braces, unparsed.
    labels: &'a str,
    pub(crate) value: f64,
}

impl<'a> Sample<'a> {
    /// The value of label `key`, unescaped only as far as the series Vigil serves need (none
    /// of their label values hold quotes or commas).
    pub(crate) fn label(&self, key: &str) -> Option<&'a str> {
        self.labels.split(',').find_map(|pair| {
            let (k, v) = pair.split_once('=')?;
            (k.trim() == key).then(|| v.trim().trim_matches('"'))
        })
    }
}

/// The samples of a `/metrics` body; comment lines (`# HELP`, `# TYPE`, `# EOF`) and lines
/// whose value is not a number are skipped.
pub(crate) fn samples(text: &str) -> impl Iterator<Item = Sample<'_>> {
    text.lines().filter_map(|line| {
        if line.starts_with('#') {
            return None;
        }
        let (series, value) = line.rsplit_once(' ')?;
        let value = value.trim().parse::<f64>().ok()?;
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => (name, rest.strip_suffix('}').unwrap_or(rest)),
            None => (series, ""),
        };
        Some(Sample {
            series,
            name,
            labels,
            value,
        })
    })
}

/// Vigil's reconcile counters.
#[derive(Debug, Clone, Default)]
pub(crate) struct Reconciles {
    /// `controller_runtime_reconcile_total` by `result`.
    pub(crate) by_result: BTreeMap<String, f64>,
    /// `controller_runtime_reconcile_errors_total`.
    pub(crate) errors: f64,
    /// `controller_runtime_reconcile_time_seconds` sum and count.
    pub(crate) time_sum: f64,
    pub(crate) time_count: f64,
    /// `rest_client_requests_total` by `method`: every request Vigil's client made.
    pub(crate) requests: BTreeMap<String, f64>,
    /// `workqueue_queue_duration_seconds` sum and count: how long keys waited in the work
    /// queues before a worker took them.
    pub(crate) queue_sum: f64,
    pub(crate) queue_count: f64,
}

impl Reconciles {
    pub(crate) fn parse(text: &str) -> Self {
        let mut out = Self::default();
        for sample in samples(text) {
            match sample.name {
                "controller_runtime_reconcile_total" => {
                    let result = sample.label("result").unwrap_or_default().to_owned();
                    *out.by_result.entry(result).or_default() += sample.value;
                }
                "controller_runtime_reconcile_errors_total" => out.errors += sample.value,
                "controller_runtime_reconcile_time_seconds_sum" => out.time_sum += sample.value,
                "controller_runtime_reconcile_time_seconds_count" => out.time_count += sample.value,
                "workqueue_queue_duration_seconds_sum" => out.queue_sum += sample.value,
                "workqueue_queue_duration_seconds_count" => out.queue_count += sample.value,
                "rest_client_requests_total" => {
                    let method = sample.label("method").unwrap_or_default().to_owned();
                    *out.requests.entry(method).or_default() += sample.value;
                }
                _ => {}
            }
        }
        out
    }

    pub(crate) fn total(&self) -> f64 {
        self.by_result.values().sum()
    }

    pub(crate) fn mean_time(&self) -> String {
        if self.time_count > 0.0 {
            format!(
                "{:.2} ms ({:.2} s in all)",
                1000.0 * self.time_sum / self.time_count,
                self.time_sum
            )
        } else {
            "n/a".to_owned()
        }
    }

    /// Since `before`: the mean wait in the work queues and the mean reconcile, in ms (`None`
    /// for a mean of nothing).
    pub(crate) fn means_since(&self, before: &Self) -> (Option<f64>, Option<f64>) {
        let mean = |sum: f64, count: f64| (count > 0.0).then(|| 1000.0 * sum / count);
        (
            mean(
                self.queue_sum - before.queue_sum,
                self.queue_count - before.queue_count,
            ),
            mean(
                self.time_sum - before.time_sum,
                self.time_count - before.time_count,
            ),
        )
    }

    /// "N (GET a, POST b, …)": the requests Vigil's client made since `before`.
    pub(crate) fn requests_since(&self, before: &Self) -> String {
        let total = self.requests.values().sum::<f64>() - before.requests.values().sum::<f64>();
        let parts: Vec<String> = self
            .requests
            .iter()
            .map(|(method, v)| {
                let was = before.requests.get(method).copied().unwrap_or(0.0);
                format!("{method} {}", fmt_count(v - was))
            })
            .collect();
        format!("{} ({})", fmt_count(total), parts.join(", "))
    }

    /// " (success 3, error 0, …; reconcile_errors_total +0)" for the change since `before`.
    pub(crate) fn breakdown_since(&self, before: &Self) -> String {
        let parts: Vec<String> = self
            .by_result
            .iter()
            .map(|(result, v)| {
                let was = before.by_result.get(result).copied().unwrap_or(0.0);
                format!("{result} {}", fmt_count(v - was))
            })
            .collect();
        format!(
            " ({}; reconcile_errors_total +{})",
            parts.join(", "),
            fmt_count(self.errors - before.errors)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BODY: &str = "# HELP controller_runtime_reconcile_total Reconciles.\n\
        # TYPE controller_runtime_reconcile_total counter\n\
        controller_runtime_reconcile_total{controller=\"criticalservice\",result=\"success\"} 7\n\
        controller_runtime_reconcile_total{controller=\"criticalservice\",result=\"error\"} 1\n\
        controller_runtime_reconcile_errors_total{controller=\"criticalservice\"} 1\n\
        controller_runtime_reconcile_time_seconds_sum{controller=\"criticalservice\"} 0.5\n\
        controller_runtime_reconcile_time_seconds_count{controller=\"criticalservice\"} 8\n\
        vigil_kafka_broker_requests_total{api=\"CreateTopics\"} 3\n\
        process_open_fds 12\n\
        # EOF\n";

    #[test]
    fn reads_samples_names_and_labels() {
        let all: Vec<Sample> = samples(BODY).collect();
        assert_eq!(all.len(), 7);
        let kafka = all[5];
        assert_eq!(kafka.name, "vigil_kafka_broker_requests_total");
        assert_eq!(
            kafka.series,
            "vigil_kafka_broker_requests_total{api=\"CreateTopics\"}"
        );
        assert_eq!(kafka.label("api"), Some("CreateTopics"));
        assert_eq!(kafka.value, 3.0);
        assert_eq!(all[6].name, "process_open_fds");
        assert_eq!(all[6].label("api"), None);
    }

    #[test]
    fn counts_reconciles() {
        let r = Reconciles::parse(BODY);
        assert_eq!(r.total(), 8.0);
        assert_eq!(r.errors, 1.0);
        assert_eq!(r.mean_time(), "62.50 ms (0.50 s in all)");
        assert_eq!(
            r.breakdown_since(&Reconciles::default()),
            " (error 1, success 7; reconcile_errors_total +1)"
        );
    }

    #[test]
    fn means_queue_waits_and_reconciles_over_a_window() {
        let before = Reconciles::parse(BODY);
        let after = Reconciles::parse(
            "controller_runtime_reconcile_time_seconds_sum{controller=\"criticalservice\"} 0.9\n\
             controller_runtime_reconcile_time_seconds_count{controller=\"criticalservice\"} 12\n\
             workqueue_queue_duration_seconds_sum{name=\"criticalservice\"} 0.2\n\
             workqueue_queue_duration_seconds_count{name=\"criticalservice\"} 4\n",
        );
        let (queue, reconcile) = after.means_since(&before);
        assert_eq!(queue.map(f64::round), Some(50.0));
        assert_eq!(reconcile.map(f64::round), Some(100.0));
        assert_eq!(before.means_since(&before), (None, None));
    }
}
