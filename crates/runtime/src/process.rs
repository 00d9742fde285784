//! client_golang's `process_*` metrics, read from `/proc/self` at each scrape: CPU seconds,
//! resident and virtual memory, open and maximum file descriptors, start time. Every Go
//! operator exports them, so dashboards and alerts (memory near the limit, fd exhaustion,
//! restarts) work on a Rust operator unchanged.
//!
//! Hand-written rather than taken from `kubert-prometheus-process`, the crate made for this:
//! its releases are built on prometheus-client 0.23, whose `Registry` is not the 0.25 one this
//! runtime registers in, and it pulls in `procfs` and `libc` for the four files read here.

use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::{Registry, Unit};

/// Registers the `process_*` series in `registry` (on Linux; elsewhere there is no `/proc`
/// and nothing is registered).
pub(crate) fn register(registry: &mut Registry) {
    if cfg!(target_os = "linux") && std::path::Path::new("/proc/self/stat").exists() {
        registry
            .sub_registry_with_prefix("process")
            .register_collector(Box::new(ProcessCollector));
    }
}

/// Reads `/proc` at each scrape.
#[derive(Debug)]
struct ProcessCollector;

/// `/proc` counts CPU time in clock ticks of `USER_HZ`, which Linux fixes at 100 for user
/// space on every architecture (what `sysconf(_SC_CLK_TCK)` returns; read as a constant so the
/// crate needs no `unsafe` call).
const TICKS_PER_SECOND: f64 = 100.0;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        // A scrape must not fail because /proc could not be read: the series are left out, and
        // the rest of the exposition is served.
        if let Some(stat) = read("/proc/self/stat").and_then(|s| Stat::parse(&s)) {
            let cpu = (stat.utime + stat.stime) as f64 / TICKS_PER_SECOND;
            ConstCounter::new(cpu).encode(encoder.encode_descriptor(
                "cpu",
                "Total user and system CPU time spent in seconds.",
                Some(&Unit::Seconds),
                MetricType::Counter,
            )?)?;
            if let Some(boot) = read("/proc/stat").and_then(|s| boot_time(&s)) {
                let started = boot as f64 + stat.starttime as f64 / TICKS_PER_SECOND;
                ConstGauge::new(started).encode(encoder.encode_descriptor(
                    "start_time",
                    "Start time of the process since unix epoch in seconds.",
                    Some(&Unit::Seconds),
                    MetricType::Gauge,
                )?)?;
            }
        }
        if let Some(status) = read("/proc/self/status") {
            // In kB there, so no page size is needed (`stat`'s RSS is in pages).
            for (field, name, help) in [
                (
                    "VmRSS:",
                    "resident_memory",
                    "Resident memory size in bytes.",
                ),
                ("VmSize:", "virtual_memory", "Virtual memory size in bytes."),
            ] {
                if let Some(kib) = status_kib(&status, field) {
                    gauge(
                        &mut encoder,
                        name,
                        help,
                        Some(&Unit::Bytes),
                        kib.saturating_mul(1024),
                    )?;
                }
            }
        }
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            // The directory's own handle, open while it is read, is one of the entries.
            let open = fds.count().saturating_sub(1) as u64;
            gauge(
                &mut encoder,
                "open_fds",
                "Number of open file descriptors.",
                None,
                open,
            )?;
        }
        if let Some(max) = read("/proc/self/limits").and_then(|s| max_open_files(&s)) {
            gauge(
                &mut encoder,
                "max_fds",
                "Maximum number of open file descriptors.",
                None,
                max,
            )?;
        }
        Ok(())
    }
}

fn gauge(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    unit: Option<&Unit>,
    value: u64,
) -> Result<(), fmt::Error> {
    let value = i64::try_from(value).unwrap_or(i64::MAX);
    ConstGauge::new(value).encode(encoder.encode_descriptor(name, help, unit, MetricType::Gauge)?)
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path).ok()
}

/// The fields of `/proc/self/stat` the metrics need (proc(5)).
#[derive(Debug, PartialEq)]
struct Stat {
    utime: u64,
    stime: u64,
    starttime: u64,
}

impl Stat {
    fn parse(stat: &str) -> Option<Self> {
        // Field 2, the command, is in parentheses and may hold spaces and parentheses itself:
        // the fields that follow start after the last `)`.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // `fields[0]` is field 3 (state): field N is `fields[N - 3]`.
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Self {
            utime: field(14)?,
            stime: field(15)?,
            starttime: field(22)?,
        })
    }
}

/// `btime` of `/proc/stat`: when the system booted, in seconds since the epoch.
fn boot_time(stat: &str) -> Option<u64> {
    stat.lines()
        .find_map(|line| line.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A `kB` field of `/proc/self/status` (`VmRSS:   10240 kB`).
fn status_kib(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The soft limit of `Max open files` in `/proc/self/limits`.
fn max_open_files(limits: &str) -> Option<u64> {
    let line = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_command_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 1 4242 4242 0 -1 4194560 1200 0 0 0 250 75 0 0 20 0 9 0 \
                    123456 987654321 2048 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0";
        assert_eq!(
            Stat::parse(stat),
            Some(Stat {
                utime: 250,
                stime: 75,
                starttime: 123456,
            })
        );
        assert_eq!(Stat::parse("4242 (cut short) S 1"), None);
    }

    #[test]
    fn boot_time_and_the_fd_limit_are_found() {
        assert_eq!(
            boot_time("cpu  1 2 3\nintr 5\nbtime 1700000000\nprocesses 9\n"),
            Some(1_700_000_000)
        );
        let limits = "Limit                     Soft Limit           Hard Limit           Units     \n\
                      Max cpu time              unlimited            unlimited            seconds   \n\
                      Max open files            1024                 524288               files     \n";
        assert_eq!(max_open_files(limits), Some(1024));
        let status = "Name:\tvigil\nVmSize:\t  123456 kB\nVmRSS:\t   10240 kB\nThreads:\t9\n";
        assert_eq!(status_kib(status, "VmRSS:"), Some(10240));
        assert_eq!(status_kib(status, "VmSize:"), Some(123_456));
        assert_eq!(status_kib(status, "VmSwap:"), None);
    }

    #[test]
    fn this_process_is_exposed_as_client_golang_names_it() {
        let mut registry = Registry::default();
        register(&mut registry);
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &registry).expect("encodes");
        if !cfg!(target_os = "linux") {
            return;
        }
        for series in [
            "process_cpu_seconds_total ",
            "process_resident_memory_bytes ",
            "process_virtual_memory_bytes ",
            "process_start_time_seconds ",
            "process_open_fds ",
            "process_max_fds ",
        ] {
            let value: f64 = text
                .lines()
                .find_map(|l| l.strip_prefix(series))
                .unwrap_or_else(|| panic!("{series}missing from {text}"))
                .parse()
                .expect("a number");
            // A young test process may not have used one clock tick of CPU yet.
            let floor = if series.starts_with("process_cpu") {
                0.0
            } else {
                1.0
            };
            assert!(value >= floor, "{series}{value}");
        }
    }
}
