//! `vigil-bench critical-service-scale`: Vigil's CriticalService controller against a large
//! cluster, measured with Vigil in its own process. The product target: 10,000 Services,
//! 50,000 pods and 1,000 CriticalServices reach steady state in under 10 s, Vigil's peak RSS stays
//! under 100 MB, and in steady state Vigil makes no writes and no LIST beyond its watches' start.
//!
//! 1. Setup, before Vigil runs: the API server (`vigil sandbox --no-kubelet`, a child; or with
//!    `--real` upstream kube-apiserver 1.28, see `server.rs`) gets namespace `scale` (Vigil's
//!    own: the default PodTemplate), the CRD, CriticalServices `cs-<i>` (each covering label
//!    `cs=cs-<i>` in namespace `scale-<i mod N>`, N = `--service-namespaces`), Services `svc-<j>`
//!    (selector `app=svc-<j>`, label `cs=cs-<j mod CRs>`, in that CriticalService's namespace,
//!    so a namespace holds ~1/N of everything, as a real cluster's teams do) and their pods, made
//!    Ready by writing pod status directly (phase Running, podIP, Ready True) as `bench endpoints`
//!    does. A deterministic 1% of the Services (`j mod 100 == (j / 100) mod 100`: one in every
//!    block of 100, each covered by a different CriticalService) get no pods: they are lame and
//!    need a fallback. Setup ends once the server's EndpointSlices list every pod.
//! 2. `vigil run` starts (a child); steady state is reached when every lame Service has its
//!    fallback pod (a watch on Vigil's pods) and every CriticalService's status is at its
//!    generation with the right counts (a list of the CriticalServices every 500 ms).
//! 3. Steady state: for twice `--steady-seconds`, watches on pods, CriticalServices and Events
//!    count every write (the bench writes nothing then, so all are Vigil's); Vigil's CPU is read
//!    for each half, the first with no request to Vigil at all, the second with `/metrics`
//!    scraped every 15 s (its reconciles), as Prometheus does. Vigil has no API request metric: its LISTs are inferred (kube-runtime watchers
//!    list only when they start or must re-list, which they log at debug level, enabled here).
//! 4. Churn (`--churn-seconds`, see `churn.rs`): a probe Service's last pod deleted once a second
//!    and the fallback timed, at rest and then while `--churn-rate` pods a second are deleted
//!    and replaced; Vigil's reconciles, work queue depth, requests, CPU and RSS meanwhile.
//! 5. Vigil's peak RSS (VmHWM) and CPU time, and the server's; the RSS per cached object above
//!    an idle `vigil run` (the same flags on a second, empty sandbox, measured before the main
//!    run); and the start-up floor: how long the server takes to serve the LISTs Vigil's caches
//!    start with (the bench lists them itself, before Vigil starts), beside `/readyz`.
//!
//! Figures only: nothing is asserted; what Vigil did wrong is listed under "anomalies".

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplate, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, CustomResourceExt as _, Resource, ResourceExt as _};
use serde_json::json;
use vigil_apis::CriticalService;

use crate::support::fmt::diff;
use crate::support::fmt::fmt_count;
use crate::support::fmt::fmt_opt;
use crate::support::fmt::fmt_opt_count;
use crate::support::http::{HTTP_TIMEOUT, http_get};
use crate::support::metrics::Reconciles;
use crate::support::usage::{CLK_TCK, rss_mib};
use crate::support::vigil::ChildLog;

mod churn;
mod server;

use server::{NODE, Server};

#[derive(Debug, clap::Args)]
pub struct ScaleBench {
    /// Services (`svc-<j>`, selector `app=svc-<j>`).
    #[arg(long, default_value_t = 10_000)]
    services: usize,
    /// Pods, spread evenly over the Services (pods / services each); the 1% lame Services get none.
    #[arg(long, default_value_t = 50_000)]
    pods: usize,
    /// CriticalServices (`cs-<i>`, covering label `cs=cs-<i>`); Services spread evenly over them.
    #[arg(long, default_value_t = 1_000)]
    critical_services: usize,
    /// Namespaces the Services and their pods spread over (`scale-<n>`, at most one per
    /// CriticalService). kube-controller-manager's EndpointSlice and Endpoints controllers match
    /// each pod event against every Service of the pod's namespace: with all 10,000 Services in
    /// one namespace, kube-controller-manager 1.28 drains ~20 pod events a second and never
    /// settles. 100 namespaces of 100 Services is a shape real clusters have.
    #[arg(long, default_value_t = 100)]
    service_namespaces: usize,
    /// Requests in flight from the bench while setting up.
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Length of each half of the steady-state window, in seconds: the first with no request to
    /// Vigil, the second with /metrics scraped every 15 s.
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// How long to wait for steady state before measuring the window anyway, in seconds.
    #[arg(long, default_value_t = 600)]
    settle_timeout_seconds: u64,
    /// Length of the churn after the window at rest, in seconds (0: none): pod deletions with
    /// their replacements at `--churn-rate`, and a probe Service's last pod deleted once a second
    /// (see `critical_service_scale/churn.rs`).
    #[arg(long, default_value_t = 60)]
    churn_seconds: u64,
    /// Pod deletions a second during the churn (each with its replacement).
    #[arg(long, default_value_t = 100)]
    churn_rate: u32,
    /// Probe Services (cut down to one pod each), one probed a second at rest then under churn.
    #[arg(long, default_value_t = 30)]
    probes: usize,
    /// Share of the healthy Services no CriticalService covers (no `cs` label), in percent: their
    /// pods are cached and churned like the others, but need no fallback and wake no reconcile.
    #[arg(long, default_value_t = 10)]
    uncovered_percent: usize,
    /// Also write `vigil run`'s log (stderr) to this file.
    #[arg(long, value_name = "FILE")]
    vigil_log: Option<PathBuf>,
    /// `RUST_LOG` of `vigil run` (kube-runtime's watcher logs its watch and list errors at debug).
    #[arg(long, default_value = "info,kube_runtime::watcher=debug")]
    vigil_rust_log: String,
    /// Run on upstream kube-apiserver and kube-controller-manager 1.28 with etcd (`up.sh` of
    /// `--kube-dir`, stopped at the end) instead of a `vigil sandbox`.
    #[arg(long)]
    real: bool,
    /// The real control plane's folder (its `up.sh` and `down.sh`).
    #[arg(long, default_value = "../shared/kube")]
    kube_dir: PathBuf,
    /// The real API server's port; etcd listens on it − 4064 (peer − 4063), the controller
    /// manager on it + 14, so one already running on other ports is left alone.
    #[arg(long, default_value_t = 26453)]
    apiserver_port: u16,
}

/// Vigil's own namespace here (its default PodTemplate); the workloads are in
/// `scale-<n>` ([`Layout::namespace`]).
const NS: &str = "scale";
const TEMPLATE: &str = "critical-service-pod-template";
/// `vigil run`'s default `--pod-name-prefix`.
const PREFIX: &str = "service-watcher";
/// Vigil's mark on the pods it creates, and the Service a fallback answers for.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const SERVICE_LABEL: &str = "vigil.dev/service";
/// kube-runtime's watcher page size (`watcher::Config::default()`): its LISTs come in pages.
const WATCHER_PAGE: usize = 500;
/// How often the bench lists the CriticalServices while waiting for steady state.
const POLL: Duration = Duration::from_millis(500);
/// The targets.
const TARGET_SETTLE: Duration = Duration::from_secs(10);
const TARGET_RSS_BYTES: f64 = 100e6;

/// How often Prometheus scrapes in the second half of the steady-state window (its usual
/// `scrape_interval`).
const SCRAPE_INTERVAL: Duration = Duration::from_secs(15);

/// Vigil's CPU in the two halves of the steady-state window.
struct RestCpu {
    quiet: Option<f64>,
    quiet_took: Duration,
    scraped: Option<f64>,
    scraped_took: Duration,
    scrapes: usize,
}

impl RestCpu {
    fn describe(&self) -> String {
        let share = |cpu: Option<f64>, took: Duration| {
            cpu.map_or_else(
                || "?".to_owned(),
                |c| {
                    format!(
                        "{c:.2} s in {:.0} s = {:.3}% of one core",
                        took.as_secs_f64(),
                        100.0 * c / took.as_secs_f64().max(1e-9)
                    )
                },
            )
        };
        format!(
            "no request to Vigil: {}; /metrics scraped every {} s ({} scrapes): {}",
            share(self.quiet, self.quiet_took),
            SCRAPE_INTERVAL.as_secs(),
            self.scrapes,
            share(self.scraped, self.scraped_took)
        )
    }
}

/// Which Services exist, which are lame, and which CriticalService covers each.
struct Layout {
    services: usize,
    crs: usize,
    namespaces: usize,
    per_service: usize,
    /// Services that get pods, in order.
    healthy: Vec<usize>,
    /// Services without pods.
    lame: Vec<usize>,
    /// Healthy Services that no CriticalService covers.
    uncovered: HashSet<usize>,
    /// Per CriticalService: Services covered, fallbacks due.
    expected: Vec<(u32, u32)>,
}

impl Layout {
    fn new(args: &ScaleBench) -> Self {
        let is_lame = |j: usize| j % 100 == (j / 100) % 100;
        let (lame, healthy): (Vec<usize>, Vec<usize>) =
            (0..args.services).partition(|j| is_lame(*j));
        // The last `uncovered_percent` of every block of 100, lame ones excepted (they are what
        // the CriticalServices are for).
        let uncovered: HashSet<usize> = healthy
            .iter()
            .copied()
            .filter(|j| j % 100 >= 100 - args.uncovered_percent.min(100))
            .collect();
        let mut expected = vec![(0u32, 0u32); args.critical_services];
        for j in 0..args.services {
            if uncovered.contains(&j) {
                continue;
            }
            let e = &mut expected[j % args.critical_services];
            e.0 += 1;
            if is_lame(j) {
                e.1 += 1;
            }
        }
        Self {
            services: args.services,
            crs: args.critical_services,
            namespaces: args.service_namespaces,
            per_service: args.pods / args.services,
            healthy,
            lame,
            uncovered,
            expected,
        }
    }

    /// The namespace of Service `j` (and of its pods, and of the CriticalService covering it).
    fn namespace(&self, j: usize) -> String {
        self.cr_namespace(self.namespace_index(j))
    }

    /// `n` of Service `j`'s namespace `scale-<n>`.
    fn namespace_index(&self, j: usize) -> usize {
        (j % self.crs) % self.namespaces
    }

    /// The namespace CriticalService `cs-<i>` covers.
    fn cr_namespace(&self, i: usize) -> String {
        format!("{NS}-{}", i % self.namespaces)
    }

    /// The pods of Service `j`'s namespace.
    fn pods(&self, client: &Client, j: usize) -> Api<Pod> {
        Api::namespaced(client.clone(), &self.namespace(j))
    }

    /// Whether a CriticalService covers Service `j`.
    fn covered(&self, j: usize) -> bool {
        !self.uncovered.contains(&j)
    }

    fn pod_count(&self) -> usize {
        self.healthy.len() * self.per_service
    }

    /// Pod `p`: Service `healthy[p mod n]`, replica `p / n` (replica k of every Service first).
    fn pod(&self, p: usize) -> (usize, usize) {
        let n = self.healthy.len();
        (self.healthy[p % n], p / n)
    }
}

fn fallback_name(j: usize) -> String {
    format!("{PREFIX}-svc-{j}")
}

pub async fn run(args: ScaleBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.critical_services > 0
            && args.services >= args.critical_services
            && args.pods >= args.services
            && args.concurrency > 0
            && (1..=args.critical_services).contains(&args.service_namespaces),
        "need services >= critical-services >= service-namespaces > 0, pods >= services, concurrency > 0"
    );
    let began = Instant::now();
    let server = if args.real {
        Server::real(&args.kube_dir, args.apiserver_port).await?
    } else {
        Server::sandbox().await?
    };
    // Stopped whatever happened, an interruption included (the real control plane does not
    // stop on drop).
    let result = tokio::select! {
        result = run_on(&args, &server, began) => result,
        _ = tokio::signal::ctrl_c() => Err(anyhow::anyhow!("interrupted")),
    };
    server.stop().await;
    result
}

async fn run_on(args: &ScaleBench, server: &Server, began: Instant) -> anyhow::Result<()> {
    let layout = Layout::new(args);
    let mut anomalies: Vec<String> = Vec::new();
    let client = server.client()?;

    // 1. Setup.
    let setup = setup(args, &layout, server, &client).await?;

    // The bench's watches, from before Vigil starts, each on its own connection.
    let watch_errors: Arc<Mutex<Vec<String>>> = Arc::default();
    // Every namespace's pods: the workloads' and Vigil's fallbacks are spread over them.
    let pods: Api<Pod> = Api::all(client.clone());
    let crs: Api<CriticalService> = Api::all(client.clone());
    let events: Api<KubeEvent> = Api::all(client.clone());
    let expected_fallbacks: Arc<HashSet<String>> =
        Arc::new(layout.lame.iter().map(|j| fallback_name(*j)).collect());
    let fallbacks: Arc<Mutex<FallbackSeen>> = Arc::default();
    let cr_writes: Arc<Mutex<CrWrites>> = Arc::default();
    let event_writes: Arc<Mutex<EventWrites>> = Arc::default();
    // When the bench last saw a write (any event on its watches: the bench itself writes nothing
    // once Vigil runs).
    let last_write: Arc<Mutex<Option<Instant>>> = Arc::default();
    let mut tasks = Vec::new();
    {
        let managed = format!("{MANAGED_BY}=vigil");
        let rv = current_rv(&pods, &ListParams::default().labels(&managed)).await?;
        let api: Api<Pod> = Api::all(server.client()?);
        let (seen, expected) = (fallbacks.clone(), expected_fallbacks.clone());
        let last = last_write.clone();
        tasks.push(spawn_watch(
            "fallback pod watch",
            api,
            WatchParams::default().labels(&managed),
            rv,
            watch_errors.clone(),
            move |at, event: &WatchEvent<Pod>| {
                note_write(&last, at, event);
                if let Ok(mut s) = seen.lock() {
                    s.apply(at, event, &expected);
                }
            },
        ));
    }
    {
        let rv = current_rv(&crs, &ListParams::default()).await?;
        let api: Api<CriticalService> = Api::all(server.client()?);
        let writes = cr_writes.clone();
        let last = last_write.clone();
        tasks.push(spawn_watch(
            "CriticalService watch",
            api,
            WatchParams::default(),
            rv,
            watch_errors.clone(),
            move |at, event: &WatchEvent<CriticalService>| {
                note_write(&last, at, event);
                if let (Ok(mut w), WatchEvent::Modified(cr)) = (writes.lock(), event) {
                    w.apply(cr);
                }
            },
        ));
    }
    {
        let rv = current_rv(&events, &ListParams::default()).await?;
        let api: Api<KubeEvent> = Api::all(server.client()?);
        let writes = event_writes.clone();
        let last = last_write.clone();
        tasks.push(spawn_watch(
            "Event watch",
            api,
            WatchParams::default(),
            rv,
            watch_errors.clone(),
            move |at, event: &WatchEvent<KubeEvent>| {
                note_write(&last, at, event);
                if let Ok(mut w) = writes.lock() {
                    w.apply(event);
                }
            },
        ));
    }
    // What start-up cannot beat: the server's LISTs of what Vigil caches; and what memory
    // Vigil needs with nothing cached, for the cost per cached object.
    let floor = list_floor(&client).await;
    let idle = idle_rss(args).await;
    // Let the watches be established before Vigil's clock starts.
    tokio::time::sleep(Duration::from_millis(200)).await;

    // 2. Start to steady state.
    let spawned = Instant::now();
    let mut vigil = spawn_vigil(&server.kubeconfig, args).await?;
    let metrics_logged = spawned.elapsed();
    let settle = settle(args, &layout, &crs, &fallbacks, &mut vigil, spawned).await?;
    let (fallbacks_at_steady, unexpected, double_adds) = match fallbacks.lock() {
        Ok(f) => (
            f.count_present(&expected_fallbacks),
            f.unexpected.clone(),
            f.double_adds,
        ),
        Err(_) => (0, Vec::new(), 0),
    };
    let multi_written = cr_writes
        .lock()
        .map(|w| w.per_cr.values().filter(|n| **n > 1).count())
        .unwrap_or(0);
    let startup_cr_writes_max = cr_writes
        .lock()
        .map(|w| w.per_cr.values().copied().max().unwrap_or(0))
        .unwrap_or(0);
    let rss_at_steady = rss_mib(vigil.pid()).unwrap_or((0.0, 0.0));

    // 3. Steady state: every pod write now, not only Vigil's pods.
    let all_pods: Arc<Mutex<PodWrites>> = Arc::default();
    {
        let rv = current_rv(&pods, &ListParams::default().limit(1)).await?;
        let api: Api<Pod> = Api::all(server.client()?);
        let writes = all_pods.clone();
        let last = last_write.clone();
        tasks.push(spawn_watch(
            "pod watch (steady state)",
            api,
            WatchParams::default(),
            rv,
            watch_errors.clone(),
            move |at, event: &WatchEvent<Pod>| {
                note_write(&last, at, event);
                if let Ok(mut w) = writes.lock() {
                    w.apply(event);
                }
            },
        ));
    }
    let window = Duration::from_secs(2 * args.steady_seconds);
    let window_started = Instant::now();
    let writes_now = || {
        cr_writes.lock().map_or(0, |w| w.modified)
            + event_writes.lock().map_or(0, |w| w.added + w.modified)
            + all_pods.lock().map_or(0, |w| w.total())
    };
    let mut last_writes = writes_now();
    // The bench's counters now; Vigil's /metrics as soon as it answers.
    let at_steady = Snapshot::take(&vigil, server, &fallbacks, &cr_writes, &event_writes)
        .await
        .unwrap_or_default();
    // Two halves: the first with no request to Vigil at all (what the process spends on its
    // own), the second with /metrics scraped every SCRAPE_INTERVAL, as Prometheus does. Per
    // sample: reconciles (None when /metrics was not read) and writes since the last sample.
    let half = Duration::from_secs(args.steady_seconds);
    let mut timeline: Vec<(Option<f64>, usize)> = Vec::new();
    let mut last_total = at_steady.reconciles.as_ref().map(Reconciles::total);
    let quiet_cpu_start = vigil.child.cpu_seconds();
    let mut scraped_cpu_start = None;
    let mut next_scrape = window_started + half;
    let mut scrapes_in_window = 0;
    // A sample every 5 s, the last one when the window closes; a scrape when one is due.
    let mut k = 1;
    loop {
        let until = (window_started + Duration::from_secs(5 * k))
            .min(window_started + window)
            .min(next_scrape.max(Instant::now()));
        tokio::time::sleep_until(until.into()).await;
        if scraped_cpu_start.is_none() && until >= window_started + half {
            scraped_cpu_start = Some((vigil.child.cpu_seconds(), Instant::now()));
        }
        let mut m = None;
        if until >= next_scrape && until < window_started + window {
            m = reconciles(&vigil).await.ok().map(|m| m.total());
            scrapes_in_window += 1;
            next_scrape += SCRAPE_INTERVAL;
        }
        if until >= window_started + Duration::from_secs(5 * k) || m.is_some() {
            let w = writes_now();
            timeline.push((m.zip(last_total).map(|(m, l)| m - l), w - last_writes));
            last_total = m.or(last_total);
            last_writes = w;
        }
        if until >= window_started + window {
            break;
        }
        if until >= window_started + Duration::from_secs(5 * k) {
            k += 1;
        }
    }
    let window_took = window_started.elapsed();
    let end_cpu = vigil.child.cpu_seconds();
    let rest_cpu = RestCpu {
        quiet: diff(scraped_cpu_start.and_then(|(c, _)| c), quiet_cpu_start),
        quiet_took: scraped_cpu_start.map_or(window_took, |(_, at)| at - window_started),
        scraped: diff(end_cpu, scraped_cpu_start.and_then(|(c, _)| c)),
        scraped_took: scraped_cpu_start.map_or(Duration::ZERO, |(_, at)| at.elapsed()),
        scrapes: scrapes_in_window,
    };
    // Events already on the wire when the window closes still count.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let at_end = Snapshot::take(&vigil, server, &fallbacks, &cr_writes, &event_writes)
        .await
        .unwrap_or_default();
    let pod_writes = all_pods.lock().map(|w| w.clone()).unwrap_or_default();
    let (peak, now) = rss_mib(vigil.pid()).unwrap_or((0.0, 0.0));
    let server_memory = server.memory();
    for task in &tasks {
        task.abort();
    }

    // 4. Churn.
    let churn = if args.churn_seconds > 0 {
        eprintln!(
            "churn: {} s at {} pod deletions/s, {} probe Services",
            args.churn_seconds, args.churn_rate, args.probes
        );
        let settings = churn::ChurnSettings {
            seconds: args.churn_seconds,
            rate: args.churn_rate,
            probes: args.probes,
            concurrency: args.concurrency,
        };
        match churn::run(
            server,
            &client,
            &vigil,
            &layout,
            &settings,
            watch_errors.clone(),
        )
        .await
        {
            Ok(report) => Some(report),
            Err(e) => {
                anomalies.push(format!("the churn failed: {e:#}"));
                None
            }
        }
    } else {
        None
    };
    let vigil_exited = vigil.child.exited_note();

    // Anomalies.
    if let Some(note) = &settle.failure {
        anomalies.push(note.clone());
    }
    if !unexpected.is_empty() {
        anomalies.push(format!(
            "{} fallback pods created for Services that are not lame: {}",
            unexpected.len(),
            unexpected
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if double_adds > 0 {
        anomalies.push(format!(
            "{double_adds} fallback pods ADDED again after having been deleted"
        ));
    }
    if at_steady.fallback.deleted + at_steady.fallback.terminating > 0 {
        anomalies.push(format!(
            "during startup Vigil deleted fallback pods: {} marked for deletion, {} DELETED",
            at_steady.fallback.terminating, at_steady.fallback.deleted
        ));
    }
    let errors = |r: &Option<Reconciles>| r.as_ref().map(|r| r.errors);
    let startup_errors = errors(&at_steady.reconciles).map(|e| e - settle.start_errors);
    let steady_errors = diff(errors(&at_end.reconciles), errors(&at_steady.reconciles));
    if startup_errors.is_some_and(|e| e > 0.0) || steady_errors.is_some_and(|e| e > 0.0) {
        anomalies.push(format!(
            "reconcile errors: {} during startup, {} in steady state",
            fmt_opt_count(startup_errors),
            fmt_opt_count(steady_errors)
        ));
    }
    let scrapes = vigil.scrapes();
    if scrapes.failed > 0 {
        anomalies.push(format!(
            "vigil's metrics/probe server did not answer {} of {} GETs within {} s (the slowest answer took {:.1} s): kubelet probes (1 s timeout by default) would fail then",
            scrapes.failed,
            scrapes.attempts,
            HTTP_TIMEOUT.as_secs(),
            scrapes.slowest.as_secs_f64()
        ));
    }
    if !vigil_exited.is_empty() {
        anomalies.push(format!("vigil run is gone{vigil_exited}"));
    }
    if let Ok(errors) = watch_errors.lock() {
        anomalies.extend(errors.iter().map(|e| format!("bench watch failed: {e}")));
    }

    // Figures.
    let per_min = |n: f64| n * 60.0 / window_took.as_secs_f64();
    let steady_writes = at_end.writes_since(&at_steady);
    let pod_writes_total = pod_writes.total();
    let writes_total = pod_writes_total + steady_writes.cr_status + steady_writes.events;
    let total = |r: &Option<Reconciles>| r.as_ref().map(Reconciles::total);
    let window_reconciles = diff(total(&at_end.reconciles), total(&at_steady.reconciles));
    let log = vigil.child.log_notes();
    let watcher_in_window = log.watcher_lines.saturating_sub(at_steady.watcher_lines);
    let watcher_before = at_steady.watcher_lines;

    say!(
        "vigil-bench critical-service-scale: {} Services ({} covered by none), {} pods ({} per Service; {} lame Services with none), {} CriticalServices, in {} namespaces ({NS}-<n>)",
        layout.services,
        layout.uncovered.len(),
        layout.pod_count(),
        layout.per_service,
        layout.lame.len(),
        layout.crs,
        layout.namespaces
    );
    say!(
        "  processes:            `vigil run` pid {} (--leader-elect false {}, RUST_LOG={}); API server: {} ({})",
        vigil.pid(),
        vigil_flags().join(" "),
        args.vigil_rust_log,
        server.label,
        server.processes()
    );
    say!(
        "  setup (before Vigil): {:.1} s: namespaces, CRD, PodTemplate {:.2} s; {} CriticalServices {:.2} s; {} Services {:.2} s; {} pods created and made Ready ({} requests, {} in flight) {:.1} s ({:.0} requests/s); EndpointSlices settled {:.1} s later ({} slices)",
        setup.total.as_secs_f64(),
        setup.base.as_secs_f64(),
        layout.crs,
        setup.crs.as_secs_f64(),
        layout.services,
        setup.services.as_secs_f64(),
        layout.pod_count(),
        2 * layout.pod_count(),
        args.concurrency,
        setup.pods.as_secs_f64(),
        (2 * layout.pod_count()) as f64 / setup.pods.as_secs_f64().max(1e-9),
        setup.slices.as_secs_f64(),
        setup.slice_count
    );
    let secs = |d: Option<Duration>| {
        d.map_or_else(
            || "never".to_owned(),
            |d| format!("{:.2} s", d.as_secs_f64()),
        )
    };
    match settle.steady {
        Some(steady) => say!(
            "  start → steady state: {:.2} s   target < {} s {}   (from spawning `vigil run`; seen by the CriticalService list returning then, the one before returned at {})",
            steady.as_secs_f64(),
            TARGET_SETTLE.as_secs(),
            if steady < TARGET_SETTLE {
                "(met)"
            } else {
                "(MISSED)"
            },
            secs(settle.previous_poll)
        ),
        None => say!(
            "  start → steady state: NOT REACHED within {} s   target < {} s (MISSED)",
            args.settle_timeout_seconds,
            TARGET_SETTLE.as_secs()
        ),
    }
    say!(
        "    metrics address logged:              {:.2} s",
        metrics_logged.as_secs_f64()
    );
    say!(
        "    /readyz 200 (every cache synced):    {}   target ≤ 3 s",
        secs(settle.ready)
    );
    match &floor {
        Ok((took, objects)) => say!(
            "      the server's LIST floor:           {:.2} s: the bench listing the {} objects Vigil caches (pods, Services, EndpointSlices, CriticalServices), at once and in pages of {WATCHER_PAGE}, as Vigil's watchers do; /readyz minus this is Vigil's own",
            took.as_secs_f64(),
            fmt_count(*objects as f64)
        ),
        Err(e) => say!("      the server's LIST floor:           ? ({e:#})"),
    }
    say!(
        "    first fallback ADDED:                {}",
        secs(settle.first_fallback)
    );
    say!(
        "    all {} fallbacks present:           {} (the last one's ADDED event); {} of {} present at the end of the wait",
        layout.lame.len(),
        secs(settle.fallbacks_complete),
        fallbacks_at_steady,
        layout.lame.len()
    );
    say!(
        "    every status at its generation:      {} (first poll showing it)",
        secs(settle.all_observed)
    );
    say!(
        "    every status with the right counts:  {} (first poll showing it; covered, lame 0, fallbackActive = its lame Services); last poll: {}/{} right",
        secs(settle.all_right),
        settle.last_right,
        layout.crs
    );
    match &at_steady.reconciles {
        Some(r) => say!(
            "    startup work:        {} reconciles{}; mean reconcile time {} (includes waiting for the caches to sync; /metrics read {:.1} s after steady state)",
            fmt_count(r.total()),
            r.breakdown_since(&Reconciles::default()),
            r.mean_time(),
            at_steady.scraped_after.as_secs_f64()
        ),
        None => say!("    startup work:        ? reconciles (/metrics did not answer)"),
    }
    say!(
        "    startup writes seen: {} fallback creates, {} fallback deletes, {} fallback updates; {} CriticalService status writes ({} CRs written more than once, at most {} times); {} Events ({})",
        at_steady.fallback.added,
        at_steady.fallback.deleted + at_steady.fallback.terminating,
        at_steady.fallback.modified,
        at_steady.cr_status,
        multi_written,
        startup_cr_writes_max,
        at_steady.events,
        at_steady.event_reasons
    );
    say!(
        "      status writes that changed each field: {}",
        changes_since(&at_steady.cr_changes, &BTreeMap::new())
    );
    say!(
        "    vigil at steady state: CPU {} s since start (utime+stime, {CLK_TCK} ticks/s), RSS {:.1} MiB, peak so far {:.1} MiB",
        fmt_opt(at_steady.vigil_cpu),
        rss_at_steady.1,
        rss_at_steady.0
    );
    say!(
        "  steady state:         {:.1} s window{}",
        window_took.as_secs_f64(),
        if settle.steady.is_none() {
            " (steady state was NOT reached: these figures are for whatever Vigil was doing)"
        } else {
            ""
        }
    );
    say!(
        "    writes:              {writes_total} ({:.1}/min)   target 0 {}: pods {} ADDED, {} MODIFIED, {} DELETED ({} of them Vigil's fallback pods); CriticalService status {}; Events {} created, {} updated",
        per_min(writes_total as f64),
        if writes_total == 0 {
            "(met)"
        } else {
            "(MISSED)"
        },
        pod_writes.added,
        pod_writes.modified,
        pod_writes.deleted,
        pod_writes.fallback,
        steady_writes.cr_status,
        steady_writes.events_added,
        steady_writes.events - steady_writes.events_added
    );
    if steady_writes.cr_status > 0 {
        say!(
            "      status writes that changed each field: {}",
            steady_writes.cr_changes
        );
    }
    match (&at_end.reconciles, &at_steady.reconciles, window_reconciles) {
        (Some(end), Some(start), Some(n)) => say!(
            "    reconciles:          {} ({:.1}/min){}",
            fmt_count(n),
            per_min(n),
            end.breakdown_since(start),
        ),
        _ => say!("    reconciles:          ? (/metrics did not answer)"),
    }
    say!(
        "    per sample:          reconciles [{}], writes [{}] (a sample every 5 s and at each scrape; ? = /metrics not read: never in the first half, then once every {} s; the next figure covers both); the last write seen {} after start",
        timeline
            .iter()
            .map(|v| fmt_opt_count(v.0))
            .collect::<Vec<_>>()
            .join(", "),
        timeline
            .iter()
            .map(|v| v.1.to_string())
            .collect::<Vec<_>>()
            .join(", "),
        SCRAPE_INTERVAL.as_secs(),
        last_write.lock().ok().and_then(|l| *l).map_or_else(
            || "never".to_owned(),
            |t| format!(
                "{:.2} s",
                t.saturating_duration_since(spawned).as_secs_f64()
            )
        )
    );
    let pages = |n: usize| n.div_ceil(WATCHER_PAGE).max(1);
    let start_pages = pages(layout.crs)
        + pages(layout.services)
        + pages(layout.pod_count())
        + pages(setup.slice_count)
        + pages(1);
    say!(
        "    LIST requests:       {watcher_in_window} inferred in the window   target 0 {}: Vigil has no request metric; its kube-runtime watchers (CriticalServices, Services, pods, EndpointSlices, ReplicaSets, StatefulSets, PodTemplates, all cluster-wide) LIST only when they start (~{start_pages} pages of {WATCHER_PAGE} here) or must re-list, and log every watch/list error at debug level (RUST_LOG above): {watcher_in_window} such kube_runtime::watcher lines in the window, {watcher_before} before it",
        if watcher_in_window == 0 {
            "(met)"
        } else {
            "(MISSED?)"
        }
    );
    let window_cpu = diff(at_end.vigil_cpu, at_steady.vigil_cpu);
    say!(
        "    CPU:                 vigil {} s ({} of one core), API server {} s",
        fmt_opt(window_cpu),
        window_cpu.map_or_else(
            || "?".to_owned(),
            |c| format!("{:.1}%", 100.0 * c / window_took.as_secs_f64())
        ),
        fmt_opt(diff(at_end.server_cpu, at_steady.server_cpu))
    );
    say!(
        "    CPU at rest:         {}   target ≤ 0.1% of one core with scrapes",
        rest_cpu.describe()
    );
    for line in churn.iter().flat_map(churn::ChurnReport::lines) {
        say!("{line}");
    }
    say!(
        "  vigil run:            peak RSS {peak:.1} MiB = {:.1} MB (VmHWM)   target < 100 MB {}; now {now:.1} MiB; CPU {} s in all: {} s to steady state, {} s in the window; metrics/probe server: {} GETs, {} unanswered within {} s, slowest {:.2} s",
        peak * 1024.0 * 1024.0 / 1e6,
        if peak * 1024.0 * 1024.0 < TARGET_RSS_BYTES {
            "(met)"
        } else {
            "(MISSED)"
        },
        fmt_opt(at_end.vigil_cpu),
        fmt_opt(at_steady.vigil_cpu),
        fmt_opt(window_cpu),
        scrapes.attempts,
        scrapes.failed,
        HTTP_TIMEOUT.as_secs(),
        scrapes.slowest.as_secs_f64()
    );
    match (&idle, &floor) {
        (Ok((idle_peak, idle_ready)), Ok((_, objects))) if *objects > 0 => {
            let per = |mib: f64| (mib - idle_peak) * 1024.0 / *objects as f64;
            say!(
                "    per cached object:   {:.2} KiB at steady state ({:.1} MiB), {:.2} KiB at the peak, above the idle process ({idle_peak:.1} MiB peak: the same `vigil run` on an empty sandbox, ready in {:.2} s), over {} objects   target ≤ 1 KiB",
                per(rss_at_steady.1),
                rss_at_steady.1,
                per(peak),
                idle_ready.as_secs_f64(),
                fmt_count(*objects as f64)
            );
        }
        (Err(e), _) => say!("    per cached object:   ? (the idle process: {e:#})"),
        _ => say!("    per cached object:   ? (no LIST floor to count the objects)"),
    }
    say!(
        "  vigil log:            {} WARN, {} ERROR lines; {} kube_runtime::watcher lines{}",
        log.warnings,
        log.errors,
        log.watcher_lines,
        log.first
            .iter()
            .map(|l| format!("\n    {l}"))
            .collect::<String>()
    );
    say!(
        "  API server:           {server_memory} (VmHWM: setup included); CPU {} s in all",
        fmt_opt(at_end.server_cpu)
    );
    if anomalies.is_empty() {
        say!("  anomalies:            none");
    } else {
        say!("  anomalies:            {}", anomalies.len());
        for a in &anomalies {
            say!("    - {a}");
        }
    }
    say!(
        "  reproduce:            target/release/vigil-bench critical-service-scale{} --services {} --pods {} --critical-services {} --service-namespaces {} --concurrency {} --steady-seconds {} --churn-seconds {} --churn-rate {} --probes {}",
        if args.real {
            format!(
                " --real --kube-dir {} --apiserver-port {}",
                args.kube_dir.display(),
                args.apiserver_port
            )
        } else {
            String::new()
        },
        args.services,
        args.pods,
        args.critical_services,
        args.service_namespaces,
        args.concurrency,
        args.steady_seconds,
        args.churn_seconds,
        args.churn_rate,
        args.probes
    );
    say!(
        "  total runtime:        {:.1} s",
        began.elapsed().as_secs_f64()
    );
    // Vigil is killed on drop, before the server stops.
    drop(vigil);
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Setup.

/// How long each part of the setup took.
struct Setup {
    base: Duration,
    crs: Duration,
    services: Duration,
    pods: Duration,
    slices: Duration,
    slice_count: usize,
    total: Duration,
}

/// Namespace `scale`, the CriticalService CRD (served) and the default PodTemplate: what Vigil
/// needs to start, with nothing to cache.
async fn base_setup(client: &Client) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .context("creating namespace scale")?;
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &CriticalService::crd())
        .await
        .context("creating the CriticalService CRD")?;
    let crs: Api<CriticalService> = Api::all(client.clone());
    let served = Instant::now();
    while crs.list(&ListParams::default().limit(1)).await.is_err() {
        anyhow::ensure!(
            served.elapsed() < Duration::from_secs(30),
            "the CriticalService CRD was not served within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Api::<PodTemplate>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": TEMPLATE},
                "template": {
                    "metadata": {"name": "critical-service-pod"},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}
                }
            }))?,
        )
        .await
        .context("creating the PodTemplate")?;
    Ok(())
}

async fn setup(
    args: &ScaleBench,
    layout: &Layout,
    server: &Server,
    client: &Client,
) -> anyhow::Result<Setup> {
    let started = Instant::now();
    base_setup(client).await?;
    for n in 0..layout.namespaces {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": layout.cr_namespace(n)}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await
            .with_context(|| format!("creating namespace {}", layout.cr_namespace(n)))?;
    }
    for n in 0..layout.namespaces {
        server.ready_for_pods(&layout.cr_namespace(n)).await?;
    }
    let crs: Api<CriticalService> = Api::all(client.clone());
    let base = started.elapsed();

    let phase = Instant::now();
    in_parallel("CriticalServices", layout.crs, args.concurrency, |i| {
        let crs = crs.clone();
        let namespace = layout.cr_namespace(i);
        async move {
            let cr: CriticalService = serde_json::from_value(json!({
                "apiVersion": "mycrd.com/v1", "kind": "CriticalService",
                "metadata": {"name": format!("cs-{i}")},
                "spec": {"namespace": namespace, "matchLabels": [{"key": "cs", "value": format!("cs-{i}")}]}
            }))?;
            crs.create(&PostParams::default(), &cr)
                .await
                .with_context(|| format!("creating CriticalService cs-{i}"))?;
            Ok(())
        }
    })
    .await?;
    let crs_took = phase.elapsed();

    let phase = Instant::now();
    in_parallel("Services", layout.services, args.concurrency, |j| {
        let services: Api<Service> = Api::namespaced(client.clone(), &layout.namespace(j));
        let labels = if layout.covered(j) {
            json!({"cs": format!("cs-{}", j % layout.crs)})
        } else {
            json!({})
        };
        async move {
            let svc: Service = serde_json::from_value(json!({
                "metadata": {"name": format!("svc-{j}"), "labels": labels},
                "spec": {
                    "selector": {"app": format!("svc-{j}")},
                    "ports": [{"name": "http", "port": 80, "targetPort": 8080}]
                }
            }))?;
            services
                .create(&PostParams::default(), &svc)
                .await
                .with_context(|| format!("creating Service svc-{j}"))?;
            Ok(())
        }
    })
    .await?;
    let services_took = phase.elapsed();

    let phase = Instant::now();
    in_parallel(
        "pods (created and made Ready)",
        layout.pod_count(),
        args.concurrency,
        |p| {
            let (j, k) = layout.pod(p);
            let pods = layout.pods(client, j);
            async move {
                let ip = format!("10.{}.{}.{}", 1 + p / 65_536, (p / 256) % 256, p % 256);
                create_ready_pod(&pods, j, &format!("svc-{j}-{k}"), &ip).await?;
                Ok(())
            }
        },
    )
    .await?;
    let pods_took = phase.elapsed();

    // The server's EndpointSlices list every pod ready (and nothing for the lame Services).
    let phase = Instant::now();
    let slices: Api<EndpointSlice> = Api::all(client.clone());
    let slice_count = loop {
        let list = slices
            .list(&ListParams::default())
            .await
            .context("listing EndpointSlices")?;
        let mut ready: HashMap<&str, usize> = HashMap::new();
        for slice in &list.items {
            if let Some(service) = slice.labels().get("kubernetes.io/service-name") {
                let n = slice
                    .endpoints
                    .iter()
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                    .count();
                *ready.entry(service.as_str()).or_default() += n;
            }
        }
        let wrong = layout
            .healthy
            .iter()
            .filter(|j| {
                ready.get(format!("svc-{j}").as_str()).copied().unwrap_or(0) != layout.per_service
            })
            .count()
            + layout
                .lame
                .iter()
                .filter(|j| ready.get(format!("svc-{j}").as_str()).copied().unwrap_or(0) != 0)
                .count();
        if wrong == 0 {
            break list.items.len();
        }
        anyhow::ensure!(
            phase.elapsed() < Duration::from_secs(600),
            "EndpointSlices not settled after 600 s: {wrong} Services still wrong"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let slices_took = phase.elapsed();
    eprintln!(
        "setup done in {:.1} s (EndpointSlices settled, {slice_count} slices); starting vigil run",
        started.elapsed().as_secs_f64()
    );
    Ok(Setup {
        base,
        crs: crs_took,
        services: services_took,
        pods: pods_took,
        slices: slices_took,
        slice_count,
        total: started.elapsed(),
    })
}

/// Creates pod `name` of Service `svc-<j>` (bound to [`NODE`], where no kubelet runs) and makes it Ready
/// with `ip` by writing its status, as a kubelet would report it.
async fn create_ready_pod(pods: &Api<Pod>, j: usize, name: &str, ip: &str) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": format!("svc-{j}")}},
        "spec": {"nodeName": NODE, "containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
    }))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("creating pod {name}"))?;
    let status = json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": "True"}]
    }});
    pods.patch_status(name, &PatchParams::default(), &Patch::Merge(status))
        .await
        .with_context(|| format!("making pod {name} Ready"))?;
    Ok(())
}

/// Runs `count` requests with `concurrency` in flight, printing progress on stderr.
async fn in_parallel<F, Fut>(
    what: &str,
    count: usize,
    concurrency: usize,
    make: F,
) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let started = Instant::now();
    let done = AtomicUsize::new(0);
    let step = (count / 5).max(1000);
    futures::stream::iter((0..count).map(|i| {
        let fut = make(i);
        let done = &done;
        async move {
            fut.await?;
            let n = done.fetch_add(1, Ordering::Relaxed) + 1;
            if n.is_multiple_of(step) || n == count {
                eprintln!(
                    "setup: {what}: {n}/{count} after {:.1} s",
                    started.elapsed().as_secs_f64()
                );
            }
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Start to steady state.

/// When each milestone was first seen, from spawning `vigil run`.
struct Settle {
    ready: Option<Duration>,
    first_fallback: Option<Duration>,
    fallbacks_complete: Option<Duration>,
    all_observed: Option<Duration>,
    all_right: Option<Duration>,
    steady: Option<Duration>,
    /// The poll before the one that showed steady state.
    previous_poll: Option<Duration>,
    /// CriticalServices right at the last poll.
    last_right: usize,
    start_errors: f64,
    failure: Option<String>,
}

async fn settle(
    args: &ScaleBench,
    layout: &Layout,
    crs: &Api<CriticalService>,
    fallbacks: &Mutex<FallbackSeen>,
    vigil: &mut Vigil,
    spawned: Instant,
) -> anyhow::Result<Settle> {
    let deadline = spawned + Duration::from_secs(args.settle_timeout_seconds);
    let expected: HashSet<String> = layout.lame.iter().map(|j| fallback_name(*j)).collect();
    // /readyz on a poll of its own, every 20 ms: the poll below comes every 500 ms.
    let mut readyz = {
        let addr = vigil.child.metrics_addr.clone();
        tokio::spawn(async move {
            while Instant::now() < deadline {
                if matches!(http_get(&addr, "/readyz").await, Ok((200, _))) {
                    return Some(Instant::now());
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            None
        })
    };
    let mut out = Settle {
        ready: None,
        first_fallback: None,
        fallbacks_complete: None,
        all_observed: None,
        all_right: None,
        steady: None,
        previous_poll: None,
        last_right: 0,
        start_errors: reconciles(vigil).await.map_or(0.0, |r| r.errors),
        failure: None,
    };
    let mut tick = tokio::time::interval(POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_progress = Instant::now();
    let mut last_poll: Option<Duration> = None;
    let mut list_error: Option<String>;
    loop {
        tick.tick().await;
        if out.ready.is_none() && readyz.is_finished() {
            out.ready = (&mut readyz)
                .await
                .ok()
                .flatten()
                .map(|at| at.saturating_duration_since(spawned));
        }
        let list = crs.list(&ListParams::default()).await;
        let at = spawned.elapsed();
        let (first_added, complete, present) = match fallbacks.lock() {
            Ok(f) => (
                f.first_added,
                f.last_expected_added,
                f.count_present(&expected),
            ),
            Err(_) => (None, None, 0),
        };
        out.first_fallback = first_added.map(|t| t.saturating_duration_since(spawned));
        let all_fallbacks = present == expected.len();
        out.fallbacks_complete = all_fallbacks
            .then(|| complete.map(|t| t.saturating_duration_since(spawned)))
            .flatten()
            .or(all_fallbacks.then_some(Duration::ZERO));
        let (observed, right) = match &list {
            Ok(list) => {
                list_error = None;
                check_statuses(layout, &list.items)
            }
            Err(e) => {
                list_error = Some(format!("{e}"));
                (0, 0)
            }
        };
        out.last_right = right;
        if observed == layout.crs && out.all_observed.is_none() {
            out.all_observed = Some(at);
        }
        if right == layout.crs && out.all_right.is_none() {
            out.all_right = Some(at);
        }
        if right == layout.crs && all_fallbacks {
            out.steady = Some(at);
            out.previous_poll = last_poll;
            return Ok(out);
        }
        last_poll = Some(at);
        if last_progress.elapsed() >= Duration::from_secs(10) {
            last_progress = Instant::now();
            let m = reconciles(vigil).await.ok();
            eprintln!(
                "waiting for steady state: {:.0} s: fallbacks {present}/{}, statuses at generation {observed}/{}, right {right}/{}, reconciles {}, vigil RSS {:.1} MiB{}",
                at.as_secs_f64(),
                expected.len(),
                layout.crs,
                layout.crs,
                fmt_opt_count(m.map(|m| m.total())),
                rss_mib(vigil.pid()).map_or(0.0, |r| r.1),
                list_error
                    .as_deref()
                    .map(|e| format!(", list error: {e}"))
                    .unwrap_or_default()
            );
        }
        let exited = vigil.child.exited_note();
        if !exited.is_empty() || Instant::now() > deadline {
            out.failure = Some(format!(
                "steady state not reached within {:.0} s: fallbacks {present}/{}, statuses at generation {observed}/{}, right {right}/{}{}{exited}",
                at.as_secs_f64(),
                expected.len(),
                layout.crs,
                layout.crs,
                list_error
                    .map(|e| format!(", last list error: {e}"))
                    .unwrap_or_default()
            ));
            return Ok(out);
        }
    }
}

/// CriticalServices whose status is at their generation, and those also with the right counts.
fn check_statuses(layout: &Layout, items: &[CriticalService]) -> (usize, usize) {
    let mut observed = 0;
    let mut right = 0;
    for cr in items {
        let Some(i) = cr
            .name_any()
            .strip_prefix("cs-")
            .and_then(|i| i.parse::<usize>().ok())
        else {
            continue;
        };
        let Some(&(covered, fallbacks)) = layout.expected.get(i) else {
            continue;
        };
        let Some(status) = &cr.status else {
            continue;
        };
        if status.observed_generation.is_none()
            || status.observed_generation != cr.metadata.generation
        {
            continue;
        }
        observed += 1;
        if status.covered == covered && status.lame == 0 && status.fallback_active == fallbacks {
            right += 1;
        }
    }
    (observed, right)
}

// ---------------------------------------------------------------------------------------------
// What the bench's watches saw.

/// Vigil's fallback pods, from a watch with its managed-by label.
#[derive(Debug, Clone, Default)]
struct FallbackSeen {
    /// Present and not being deleted.
    present: HashSet<String>,
    /// Ever seen (to notice a pod created again).
    ever: HashSet<String>,
    added: usize,
    modified: usize,
    /// Marked for deletion (deletionTimestamp appeared).
    terminating: usize,
    deleted: usize,
    double_adds: usize,
    first_added: Option<Instant>,
    /// When the last expected fallback arrived.
    last_expected_added: Option<Instant>,
    /// Fallbacks of Services that are not lame.
    unexpected: Vec<String>,
}

impl FallbackSeen {
    fn apply(&mut self, at: Instant, event: &WatchEvent<Pod>, expected: &HashSet<String>) {
        match event {
            WatchEvent::Added(pod) => {
                let name = pod.name_any();
                self.added += 1;
                self.first_added.get_or_insert(at);
                if !self.ever.insert(name.clone()) {
                    self.double_adds += 1;
                }
                if expected.contains(&name) {
                    self.last_expected_added = Some(at);
                } else {
                    let service = pod.labels().get(SERVICE_LABEL).cloned().unwrap_or_default();
                    self.unexpected.push(format!("{name} (Service {service})"));
                }
                self.present.insert(name);
            }
            WatchEvent::Modified(pod) => {
                self.modified += 1;
                if pod.metadata.deletion_timestamp.is_some() && self.present.remove(&pod.name_any())
                {
                    self.terminating += 1;
                }
            }
            WatchEvent::Deleted(pod) => {
                self.deleted += 1;
                self.present.remove(&pod.name_any());
            }
            WatchEvent::Bookmark(_) | WatchEvent::Error(_) => {}
        }
    }

    fn count_present(&self, expected: &HashSet<String>) -> usize {
        expected
            .iter()
            .filter(|n| self.present.contains(*n))
            .count()
    }
}

/// MODIFIED events on CriticalServices: status writes (the bench changes no spec), and what each
/// one changed.
#[derive(Debug, Default)]
struct CrWrites {
    modified: usize,
    per_cr: HashMap<String, usize>,
    /// The status last seen, per CriticalService.
    last: HashMap<String, serde_json::Value>,
    /// How many writes changed each status field ("first status" for the first one).
    changed: BTreeMap<String, usize>,
}

impl CrWrites {
    fn apply(&mut self, cr: &CriticalService) {
        let name = cr.name_any();
        self.modified += 1;
        *self.per_cr.entry(name.clone()).or_default() += 1;
        let new = serde_json::to_value(&cr.status).unwrap_or_default();
        let old = self.last.insert(name, new.clone()).unwrap_or_default();
        let mut fields = std::collections::BTreeSet::new();
        status_changes(&old, &new, &mut fields);
        if fields.is_empty() {
            fields.insert("nothing in status".to_owned());
        }
        for f in fields {
            *self.changed.entry(f).or_default() += 1;
        }
    }
}

/// The status fields that differ: top-level keys, and per field of `services[]` and
/// `conditions[]` entries (conditions matched by type).
fn status_changes(
    old: &serde_json::Value,
    new: &serde_json::Value,
    out: &mut std::collections::BTreeSet<String>,
) {
    use serde_json::Value;
    let (Value::Object(old), Value::Object(new)) = (old, new) else {
        out.insert("first status".to_owned());
        return;
    };
    let keys: std::collections::BTreeSet<&String> = old.keys().chain(new.keys()).collect();
    for key in keys {
        let (a, b) = (old.get(key), new.get(key));
        if a == b {
            continue;
        }
        let entries = |v: Option<&Value>| v.and_then(Value::as_array).cloned().unwrap_or_default();
        match key.as_str() {
            "services" | "conditions" => {
                let (a, b) = (entries(a), entries(b));
                let id = |e: &Value| {
                    if key == "conditions" {
                        e.get("type").cloned()
                    } else {
                        e.get("name").cloned()
                    }
                };
                let before: HashMap<String, &Value> = a
                    .iter()
                    .filter_map(|e| Some((id(e)?.to_string(), e)))
                    .collect();
                if a.len() != b.len() {
                    out.insert(format!("{key} (entries added or removed)"));
                }
                for e in &b {
                    let Some(prev) = id(e).and_then(|i| before.get(&i.to_string()).copied()) else {
                        continue;
                    };
                    let (Some(e), Some(prev)) = (e.as_object(), prev.as_object()) else {
                        continue;
                    };
                    for (field, v) in e {
                        if prev.get(field) != Some(v) {
                            out.insert(format!("{key}[].{field}"));
                        }
                    }
                }
            }
            _ => {
                out.insert(key.clone());
            }
        }
    }
}

/// Events (events.k8s.io/v1, every namespace) created or updated: Vigil's Recorder.
#[derive(Debug, Default)]
struct EventWrites {
    added: usize,
    modified: usize,
    by_reason: BTreeMap<String, usize>,
}

impl EventWrites {
    fn apply(&mut self, event: &WatchEvent<KubeEvent>) {
        let e = match event {
            WatchEvent::Added(e) => {
                self.added += 1;
                e
            }
            WatchEvent::Modified(e) => {
                self.modified += 1;
                e
            }
            _ => return,
        };
        *self
            .by_reason
            .entry(e.reason.clone().unwrap_or_default())
            .or_default() += 1;
    }
}

/// Every pod event in the namespace during the steady-state window.
#[derive(Debug, Clone, Default)]
struct PodWrites {
    added: usize,
    modified: usize,
    deleted: usize,
    /// Of those, on pods with Vigil's managed-by label.
    fallback: usize,
}

impl PodWrites {
    fn apply(&mut self, event: &WatchEvent<Pod>) {
        let pod = match event {
            WatchEvent::Added(p) => {
                self.added += 1;
                p
            }
            WatchEvent::Modified(p) => {
                self.modified += 1;
                p
            }
            WatchEvent::Deleted(p) => {
                self.deleted += 1;
                p
            }
            _ => return,
        };
        if pod.labels().get(MANAGED_BY).is_some_and(|v| v == "vigil") {
            self.fallback += 1;
        }
    }

    fn total(&self) -> usize {
        self.added + self.modified + self.deleted
    }
}

/// Counters and resources at one moment.
#[derive(Debug, Default)]
struct Snapshot {
    /// None when /metrics did not answer.
    reconciles: Option<Reconciles>,
    /// How long after the other figures /metrics was read.
    scraped_after: Duration,
    fallback: FallbackSeen,
    cr_status: usize,
    cr_changes: BTreeMap<String, usize>,
    events: usize,
    events_added: usize,
    event_reasons: String,
    watcher_lines: usize,
    vigil_cpu: Option<f64>,
    /// CPU of the API server's processes.
    server_cpu: Option<f64>,
}

/// What changed between two snapshots.
struct SteadyWrites {
    cr_status: usize,
    cr_changes: String,
    events: usize,
    events_added: usize,
}

impl Snapshot {
    async fn take(
        vigil: &Vigil,
        server: &Server,
        fallbacks: &Mutex<FallbackSeen>,
        cr_writes: &Mutex<CrWrites>,
        event_writes: &Mutex<EventWrites>,
    ) -> anyhow::Result<Self> {
        // The bench's own counters and /proc first; Vigil's /metrics may be slow to answer.
        let taken = Instant::now();
        let vigil_cpu = vigil.child.cpu_seconds();
        let server_cpu = server.cpu_seconds();
        let watcher_lines = vigil.child.log_notes().watcher_lines;
        let fallback = fallbacks
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .clone();
        let (cr_status, cr_changes) = {
            let w = cr_writes.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            (w.modified, w.changed.clone())
        };
        let (events, events_added, event_reasons) = {
            let e = event_writes
                .lock()
                .map_err(|_| anyhow::anyhow!("poisoned"))?;
            let reasons = e
                .by_reason
                .iter()
                .map(|(r, n)| format!("{r} {n}"))
                .collect::<Vec<_>>()
                .join(", ");
            (e.added + e.modified, e.added, reasons)
        };
        let reconciles = reconciles_patiently(vigil, Duration::from_secs(60)).await;
        Ok(Self {
            reconciles,
            scraped_after: taken.elapsed(),
            fallback,
            cr_status,
            cr_changes,
            events,
            events_added,
            event_reasons,
            watcher_lines,
            vigil_cpu,
            server_cpu,
        })
    }

    fn writes_since(&self, before: &Self) -> SteadyWrites {
        SteadyWrites {
            cr_status: self.cr_status.saturating_sub(before.cr_status),
            cr_changes: changes_since(&self.cr_changes, &before.cr_changes),
            events: self.events.saturating_sub(before.events),
            events_added: self.events_added.saturating_sub(before.events_added),
        }
    }
}

/// "field n, …" for the counts that grew since `before`.
fn changes_since(now: &BTreeMap<String, usize>, before: &BTreeMap<String, usize>) -> String {
    let parts: Vec<String> = now
        .iter()
        .filter_map(|(k, n)| {
            let d = n.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| format!("{k} {d}"))
        })
        .collect();
    if parts.is_empty() {
        "none".to_owned()
    } else {
        parts.join(", ")
    }
}

/// Records the arrival of an object event (not bookmarks or errors) as the last write seen.
fn note_write<K>(last: &Mutex<Option<Instant>>, at: Instant, event: &WatchEvent<K>) {
    if matches!(
        event,
        WatchEvent::Added(_) | WatchEvent::Modified(_) | WatchEvent::Deleted(_)
    ) && let Ok(mut l) = last.lock()
    {
        *l = Some(at);
    }
}

/// The resourceVersion of a list, to watch from.
async fn current_rv<K>(api: &Api<K>, params: &ListParams) -> anyhow::Result<String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    Ok(api
        .list_metadata(params)
        .await
        .context("listing to start a watch")?
        .metadata
        .resource_version
        .unwrap_or_default())
}

/// Watches from `rv` until aborted, resuming after each server-side timeout, and hands every
/// event to `on` with its arrival time. A failure is recorded in `errors`.
fn spawn_watch<K, F>(
    what: &'static str,
    api: Api<K>,
    params: WatchParams,
    mut rv: String,
    errors: Arc<Mutex<Vec<String>>>,
    mut on: F,
) -> tokio::task::JoinHandle<()>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
    F: FnMut(Instant, &WatchEvent<K>) + Send + 'static,
{
    tokio::spawn(async move {
        let result: anyhow::Result<()> = async {
            loop {
                let stream = api.watch(&params.clone().timeout(290), &rv).await?;
                let mut stream = stream.boxed();
                while let Some(event) = stream.try_next().await? {
                    let at = Instant::now();
                    match &event {
                        WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                            if let Some(v) = &o.meta().resource_version {
                                rv.clone_from(v);
                            }
                        }
                        WatchEvent::Bookmark(b) => rv.clone_from(&b.metadata.resource_version),
                        WatchEvent::Error(s) => {
                            anyhow::bail!("watch error {}: {}", s.code, s.message)
                        }
                    }
                    on(at, &event);
                }
            }
        }
        .await;
        if let Err(e) = result
            && let Ok(mut errors) = errors.lock()
        {
            errors.push(format!("{what}: {e:#}"));
        }
    })
}

// ---------------------------------------------------------------------------------------------
// The `vigil run` child.

/// `vigil run` as a child process (see `support::vigil`), and how its metrics server answered.
/// How fast the server serves what Vigil's caches list when they start: pods, Services and
/// EndpointSlices of every namespace and the CriticalServices, all at once and in pages of
/// [`WATCHER_PAGE`], as kube-runtime's watchers list them. `/readyz` cannot answer before this.
async fn list_floor(client: &Client) -> anyhow::Result<(Duration, usize)> {
    async fn all<K>(api: Api<K>) -> anyhow::Result<usize>
    where
        K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let mut count = 0;
        let mut params = ListParams::default().limit(WATCHER_PAGE as u32);
        loop {
            let page = api.list(&params).await?;
            count += page.items.len();
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(next) => params = params.continue_token(&next),
                None => return Ok(count),
            }
        }
    }
    let started = Instant::now();
    let (pods, services, slices, crs) = tokio::try_join!(
        all(Api::<Pod>::all(client.clone())),
        all(Api::<Service>::all(client.clone())),
        all(Api::<EndpointSlice>::all(client.clone())),
        all(Api::<CriticalService>::all(client.clone())),
    )?;
    Ok((started.elapsed(), pods + services + slices + crs))
}

/// Vigil's RSS with nothing to cache: the same `vigil run` against a second sandbox holding only
/// what it needs to start ([`base_setup`]), read a second after `/readyz` answers. The scale's
/// RSS above it is what the cached objects cost.
async fn idle_rss(args: &ScaleBench) -> anyhow::Result<(f64, Duration)> {
    let sandbox = Server::sandbox().await?;
    base_setup(&sandbox.client()?).await?;
    let log = ChildLog {
        rust_log: args.vigil_rust_log.clone(),
        copy: None,
    };
    let spawned = Instant::now();
    let mut vigil = Vigil {
        child: crate::support::vigil::spawn_vigil_with(&sandbox.kubeconfig, &vigil_flags(), log)
            .await?,
        scrapes: Arc::default(),
    };
    loop {
        if matches!(vigil.get("/readyz").await, Ok((200, _))) {
            break;
        }
        anyhow::ensure!(
            spawned.elapsed() < Duration::from_secs(60),
            "the idle vigil run was not ready within 60 s{}",
            vigil.child.exited_note()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let ready = spawned.elapsed();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (peak, _) = rss_mib(vigil.pid()).context("the idle vigil run's RSS")?;
    Ok((peak, ready))
}

struct Vigil {
    child: crate::support::vigil::Vigil,
    scrapes: Arc<Mutex<Scrapes>>,
}

/// How Vigil's metrics and probe server answered the bench.
#[derive(Debug, Clone, Copy, Default)]
struct Scrapes {
    attempts: usize,
    /// No answer within [`HTTP_TIMEOUT`] (or a broken one).
    failed: usize,
    slowest: Duration,
}

async fn spawn_vigil(kubeconfig: &Path, args: &ScaleBench) -> anyhow::Result<Vigil> {
    let copy = match &args.vigil_log {
        Some(path) => Some(
            std::fs::File::create(path).with_context(|| format!("creating {}", path.display()))?,
        ),
        None => None,
    };
    let log = ChildLog {
        rust_log: args.vigil_rust_log.clone(),
        copy,
    };
    Ok(Vigil {
        child: crate::support::vigil::spawn_vigil_with(kubeconfig, &vigil_flags(), log).await?,
        scrapes: Arc::default(),
    })
}

/// `vigil run`'s flags in this bench (beside the kubeconfig, metrics address and election):
/// every namespace, as the chart installs it, its PodTemplate in its own.
fn vigil_flags() -> [&'static str; 4] {
    ["--controllers", "criticalservice", "--pod-template-ns", NS]
}

impl Vigil {
    /// A GET to Vigil's metrics and probe server, timed.
    async fn get(&self, path: &str) -> anyhow::Result<(u16, String)> {
        let started = Instant::now();
        let result = http_get(&self.child.metrics_addr, path).await;
        if let Ok(mut s) = self.scrapes.lock() {
            s.attempts += 1;
            s.slowest = s.slowest.max(started.elapsed());
            if result.is_err() {
                s.failed += 1;
            }
        }
        result
    }

    fn scrapes(&self) -> Scrapes {
        self.scrapes.lock().map(|s| *s).unwrap_or_default()
    }

    fn pid(&self) -> u32 {
        self.child.pid
    }
}

/// Vigil's counters, retrying for up to `within` when /metrics does not answer.
async fn reconciles_patiently(vigil: &Vigil, within: Duration) -> Option<Reconciles> {
    let deadline = Instant::now() + within;
    loop {
        match reconciles(vigil).await {
            Ok(r) => return Some(r),
            Err(_) if Instant::now() < deadline => {}
            Err(_) => return None,
        }
    }
}

async fn reconciles(vigil: &Vigil) -> anyhow::Result<Reconciles> {
    let (code, body) = vigil
        .get("/metrics")
        .await
        .context("reading vigil's /metrics")?;
    anyhow::ensure!(code == 200, "vigil's /metrics answered {code}");
    Ok(Reconciles::parse(&body))
}

// ---------------------------------------------------------------------------------------------
// Small things.

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        bench: ScaleBench,
    }

    fn layout(args: &[&str]) -> Layout {
        let cli = Cli::parse_from(std::iter::once("bench").chain(args.iter().copied()));
        Layout::new(&cli.bench)
    }

    #[test]
    fn services_share_their_critical_services_namespace_and_spread_evenly() {
        let layout = layout(&[
            "--services",
            "1000",
            "--pods",
            "5000",
            "--critical-services",
            "100",
            "--service-namespaces",
            "10",
        ]);
        let mut per_namespace: HashMap<String, usize> = HashMap::new();
        for j in 0..layout.services {
            // A CriticalService selects in one namespace: each Service it covers is there.
            assert_eq!(layout.namespace(j), layout.cr_namespace(j % layout.crs));
            *per_namespace.entry(layout.namespace(j)).or_default() += 1;
        }
        assert_eq!(per_namespace.len(), 10);
        assert!(per_namespace.values().all(|n| *n == 100));
        // The lame Services are spread too: every namespace has some to fall back for.
        let lame: HashSet<String> = layout.lame.iter().map(|j| layout.namespace(*j)).collect();
        assert_eq!(lame.len(), 10);
    }
}
