//! The churn phase of `critical-service-scale` (`--churn-seconds`, after the window at rest):
//! how fast Vigil reacts while the cluster is busy.
//!
//! - Probe Services: `--probes` healthy Services are cut down to one pod each (`svc-<j>-0`).
//!   Once a second the bench deletes the last pod of the next probe Service (grace 0: gone at
//!   once, as a kubelet that stopped it) and times the fallback's ADDED event on its own watch
//!   (the reaction), then gives the Service its pod back (created and made Ready) so that the
//!   probe can be used again `--probes` seconds later. The probes have a client of their own,
//!   so their requests never queue behind the churn's in the bench.
//! - Each reaction is timed twice: from the DELETE request (what a user waits) and from the
//!   pod's DELETED event on a watch of the bench's (what Vigil can react to: the time the API
//!   server took to accept the deletion and tell its watchers is left out). The DELETE's own
//!   latency is printed too, so a slow API server shows as such rather than as a slow Vigil.
//! - Reaction at rest first: one probe a second, `--probes` of them, nothing else moving.
//! - Then churn: `--churn-rate` pod deletions a second (grace 0), each with its replacement
//!   (a new name, created and made Ready, as a ReplicaSet's), over the other healthy Services,
//!   for `--churn-seconds`, with the probes going on.
//! - The churn's requests run on a runtime of their own, on a thread of their own: the load's
//!   requests and responses never hold up the probes or the bench's watches, whose timings are
//!   the figures (the operating system shares the cores between the threads fairly, where one
//!   runtime's tasks would wait for each other).
//! - The CPU of every process on the machine during the churn (the API server's, Vigil's, the
//!   bench's) says whether the cores, rather than Vigil, are what slows the reactions.
//! - Meanwhile `/metrics` is read every second: reconciles, the work queue's depth, Vigil's
//!   requests by verb; and Vigil's CPU and RSS. The mean wait in Vigil's work queues and its
//!   mean reconcile, at rest and under churn, say how much of a reaction is Vigil's own.
//!
//! Figures only; what fell behind (the churn's own pace, a queue still deep after the churn, a
//! probe never answered) is said, never asserted.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Pod;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, WatchEvent};

use super::server::Server;
use super::{
    Layout, MANAGED_BY, Vigil, create_ready_pod, current_rv, fallback_name, reconciles, spawn_watch,
};
use crate::support::fmt::{diff, fmt_opt};
use crate::support::metrics::samples;
use crate::support::stats::percentile;
use crate::support::usage::{cpu_seconds, rss_mib};

/// The churn's settings, from the scale bench's flags.
pub(super) struct ChurnSettings {
    pub(super) seconds: u64,
    pub(super) rate: u32,
    pub(super) probes: usize,
    pub(super) concurrency: usize,
}

/// How long a probe waits for the fallback before it counts as never answered.
const PROBE_PATIENCE: Duration = Duration::from_secs(10);

/// What the churn phase measured.
pub(super) struct ChurnReport {
    at_rest: Vec<Reaction>,
    under_churn: Vec<Reaction>,
    /// Mean work-queue wait and mean reconcile (ms) at rest and under churn.
    vigil_at_rest: (Option<f64>, Option<f64>),
    vigil_under_churn: (Option<f64>, Option<f64>),
    unanswered: usize,
    deletions: usize,
    failures: usize,
    churn_took: Duration,
    target_rate: u32,
    reconciles_per_s: Option<f64>,
    max_depth: f64,
    deep_seconds: usize,
    depth_after: Option<f64>,
    requests: Option<String>,
    cpu: Option<f64>,
    rss: (f64, f64),
    /// Each process's share of a core during the churn.
    machine: String,
}

/// Runs the churn phase against `server`, Vigil running.
pub(super) async fn run(
    server: &Server,
    client: &Client,
    vigil: &Vigil,
    layout: &Layout,
    settings: &ChurnSettings,
    errors: Arc<Mutex<Vec<String>>>,
) -> anyhow::Result<ChurnReport> {
    // Every namespace's pods, for the watches.
    let pods: Api<Pod> = Api::all(client.clone());
    let probes = probe_services(layout, settings.probes);
    // The probes' requests on a client of their own: never queued behind the churn's.
    let probe_client = server.client()?;
    let probe_pods = |j: usize| layout.pods(&probe_client, j);
    // The probe Services keep one pod each.
    for j in &probes {
        for k in 1..layout.per_service {
            delete_now(&layout.pods(client, *j), &format!("svc-{j}-{k}")).await?;
        }
    }
    // Vigil's fallback pods as they are ADDED, on a watch of the bench's own.
    let added: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let managed = format!("{MANAGED_BY}=vigil");
    let rv = current_rv(&pods, &ListParams::default().labels(&managed)).await?;
    let watch = {
        let added = added.clone();
        spawn_watch(
            "fallback watch (churn)",
            Api::<Pod>::all(server.client()?),
            kube::api::WatchParams::default().labels(&managed),
            rv,
            errors.clone(),
            move |at, event: &WatchEvent<Pod>| {
                if let (WatchEvent::Added(pod), Ok(mut added)) = (event, added.lock())
                    && let Some(name) = pod.metadata.name.clone()
                {
                    added.insert(name, at);
                }
            },
        )
    };
    // The probe pods as they are DELETED, on another.
    let deleted: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let probe_selector = format!(
        "app in ({})",
        probes
            .iter()
            .map(|j| format!("svc-{j}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let rv = current_rv(&pods, &ListParams::default().labels(&probe_selector)).await?;
    let deletions_watch = {
        let deleted = deleted.clone();
        spawn_watch(
            "probe pods' watch (churn)",
            Api::<Pod>::all(server.client()?),
            kube::api::WatchParams::default().labels(&probe_selector),
            rv,
            errors.clone(),
            move |at, event: &WatchEvent<Pod>| {
                if let (WatchEvent::Deleted(pod), Ok(mut deleted)) = (event, deleted.lock())
                    && let Some(name) = pod.metadata.name.clone()
                {
                    deleted.insert(name, at);
                }
            },
        )
    };
    let seen = Seen { added, deleted };
    tokio::time::sleep(Duration::from_secs(2)).await;

    // At rest.
    let rest_started = reconciles(vigil).await.ok();
    let mut at_rest = Vec::new();
    let mut unanswered = 0;
    for (n, j) in probes.iter().enumerate() {
        let next = Instant::now() + Duration::from_secs(1);
        match probe(&probe_pods(*j), &seen, *j, n).await? {
            Some(d) => at_rest.push(d),
            None => unanswered += 1,
        }
        tokio::time::sleep_until(next.into()).await;
    }

    // Under churn.
    let before = reconciles(vigil).await.ok();
    let vigil_at_rest = before
        .as_ref()
        .zip(rest_started.as_ref())
        .map_or((None, None), |(b, r)| b.means_since(r));
    let cpu_before = vigil.child.cpu_seconds();
    let machine_before = Machine::take(server, vigil);
    let deletions = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let churn_started = Instant::now();
    let churn_for = Duration::from_secs(settings.seconds);
    let churn = {
        let load = Load {
            config: server.config(),
            namespaces: (0..layout.namespaces)
                .map(|n| layout.cr_namespace(n))
                .collect(),
            targets: layout_targets(layout, &probes),
            rate: settings.rate,
            concurrency: settings.concurrency,
            how_long: churn_for,
            deletions: deletions.clone(),
            failures: failures.clone(),
        };
        std::thread::Builder::new()
            .name("churn".into())
            .spawn(move || load.run())
            .context("starting the churn's thread")?
    };
    let mut under_churn = Vec::new();
    let mut max_depth: f64 = 0.0;
    let mut deep_seconds = 0;
    let mut n = probes.len();
    while churn_started.elapsed() < churn_for {
        let next = Instant::now() + Duration::from_secs(1);
        let j = probes[n % probes.len()];
        let api = probe_pods(j);
        let (reaction, depth) = tokio::join!(probe(&api, &seen, j, n), depth(vigil));
        match reaction? {
            Some(d) => under_churn.push(d),
            None => unanswered += 1,
        }
        if let Some(d) = depth {
            max_depth = max_depth.max(d);
            if d >= 10.0 {
                deep_seconds += 1;
            }
        }
        n += 1;
        tokio::time::sleep_until(next.into()).await;
    }
    tokio::task::spawn_blocking(move || churn.join())
        .await
        .context("waiting for the churn's thread")?
        .map_err(|_| anyhow::anyhow!("the churn's thread panicked"))??;
    let churn_took = churn_started.elapsed();
    let machine = Machine::take(server, vigil).since(&machine_before, churn_took);
    let after = reconciles(vigil).await.ok();
    let cpu = diff(vigil.child.cpu_seconds(), cpu_before);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let depth_after = depth(vigil).await;
    watch.abort();
    deletions_watch.abort();
    let vigil_under_churn = after
        .as_ref()
        .zip(before.as_ref())
        .map_or((None, None), |(a, b)| a.means_since(b));
    let reconciles_per_s = after
        .as_ref()
        .zip(before.as_ref())
        .map(|(a, b)| (a.total() - b.total()) / churn_took.as_secs_f64());
    let requests = after
        .as_ref()
        .zip(before.as_ref())
        .map(|(a, b)| a.requests_since(b));
    Ok(ChurnReport {
        at_rest,
        under_churn,
        vigil_at_rest,
        vigil_under_churn,
        unanswered,
        deletions: deletions.load(Ordering::Relaxed),
        failures: failures.load(Ordering::Relaxed),
        churn_took,
        target_rate: settings.rate,
        reconciles_per_s,
        max_depth,
        deep_seconds,
        depth_after,
        requests,
        cpu,
        rss: rss_mib(vigil.pid()).unwrap_or((0.0, 0.0)),
        machine,
    })
}

/// `count` healthy Services that a CriticalService covers, spread over the layout.
fn probe_services(layout: &Layout, count: usize) -> Vec<usize> {
    let covered: Vec<usize> = layout
        .healthy
        .iter()
        .copied()
        .filter(|j| layout.covered(*j))
        .collect();
    let count = count.clamp(1, covered.len().max(1));
    let step = (covered.len() / count).max(1);
    (0..count)
        .filter_map(|i| covered.get(i * step).copied())
        .collect()
}

/// The pods the churn deletes: every replica of the healthy Services that are not probes,
/// covered or not, as (Service, replica, namespace index).
fn layout_targets(layout: &Layout, probes: &[usize]) -> Vec<(usize, usize, usize)> {
    layout
        .healthy
        .iter()
        .filter(|j| !probes.contains(j))
        .flat_map(|j| {
            let n = layout.namespace_index(*j);
            (0..layout.per_service).map(move |k| (*j, k, n))
        })
        .collect()
}

/// Deletes a pod at once (grace 0), as a kubelet that stopped it; a pod already gone is fine.
async fn delete_now(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        ..DeleteParams::default()
    };
    match pods.delete(name, &params).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("deleting pod {name}")),
    }
}

/// Creates pod `name` of Service `svc-<j>`, Ready, with an IP from `seq` (apart from setup's).
async fn create_ready(pods: &Api<Pod>, j: usize, name: &str, seq: usize) -> anyhow::Result<()> {
    let ip = format!(
        "10.{}.{}.{}",
        200 + (seq / 65_536) % 50,
        (seq / 256) % 256,
        seq % 256
    );
    create_ready_pod(pods, j, name, &ip).await
}

/// What the bench's watches saw: Vigil's fallbacks ADDED, the probe pods DELETED.
struct Seen {
    added: Arc<Mutex<HashMap<String, Instant>>>,
    deleted: Arc<Mutex<HashMap<String, Instant>>>,
}

impl Seen {
    /// When `name` was seen in `map` at `since` or later.
    fn at(map: &Mutex<HashMap<String, Instant>>, name: &str, since: Instant) -> Option<Instant> {
        map.lock()
            .ok()
            .and_then(|m| m.get(name).copied())
            .filter(|at| *at >= since)
    }
}

/// One probe's timings.
#[derive(Debug, Clone, Copy)]
struct Reaction {
    /// From the DELETE request to the fallback's ADDED event.
    from_request: Duration,
    /// From the pod's DELETED event to the fallback's ADDED event (both on the bench's
    /// watches); `None` if the DELETED event was not seen.
    from_event: Option<Duration>,
    /// The DELETE request's own latency.
    delete_took: Duration,
}

/// Deletes the last pod of probe Service `svc-<j>` and times its fallback's ADDED event; then
/// gives the Service its pod back. `None`: no fallback within [`PROBE_PATIENCE`].
async fn probe(
    pods: &Api<Pod>,
    seen: &Seen,
    j: usize,
    seq: usize,
) -> anyhow::Result<Option<Reaction>> {
    let fallback = fallback_name(j);
    let last = format!("svc-{j}-0");
    let t0 = Instant::now();
    delete_now(pods, &last).await?;
    let delete_took = t0.elapsed();
    let mut reaction = None;
    while t0.elapsed() < PROBE_PATIENCE {
        if let Some(at) = Seen::at(&seen.added, &fallback, t0) {
            // The DELETED event precedes Vigil's reaction to it; give the watch a moment in
            // case the bench's two watches delivered out of order.
            let deleted_at = match Seen::at(&seen.deleted, &last, t0) {
                Some(d) => Some(d),
                None => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    Seen::at(&seen.deleted, &last, t0)
                }
            };
            reaction = Some(Reaction {
                from_request: at - t0,
                from_event: deleted_at.map(|d| at.saturating_duration_since(d)),
                delete_took,
            });
            break;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    create_ready(pods, j, &last, 1_000_000 + seq).await?;
    Ok(reaction)
}

/// The deepest work queue Vigil reports now (`workqueue_depth`), if /metrics answers.
async fn depth(vigil: &Vigil) -> Option<f64> {
    let (code, body) = vigil.get("/metrics").await.ok()?;
    (code == 200).then(|| {
        samples(&body)
            .filter(|s| s.name == "workqueue_depth")
            .map(|s| s.value)
            .fold(0.0, f64::max)
    })
}

/// The churn's load, run on a thread and runtime of its own ([`Load::run`]).
struct Load {
    config: kube::Config,
    /// The workload namespaces, by index.
    namespaces: Vec<String>,
    targets: Vec<(usize, usize, usize)>,
    rate: u32,
    concurrency: usize,
    how_long: Duration,
    deletions: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
}

impl Load {
    /// Runs the churn to its end on a single-threaded runtime (its client is made there, so its
    /// connections are driven there too).
    fn run(self) -> anyhow::Result<()> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("the churn's runtime")?;
        runtime.block_on(async move {
            let client = Client::try_from(self.config.clone())?;
            let by_namespace = self
                .namespaces
                .iter()
                .map(|ns| Api::namespaced(client.clone(), ns))
                .collect();
            self.churn(by_namespace).await;
            anyhow::Ok(())
        })
    }
}

/// CPU seconds so far of every process the bench knows: the API server's, Vigil and the bench.
struct Machine(Vec<(&'static str, Option<f64>)>);

impl Machine {
    fn take(server: &Server, vigil: &Vigil) -> Self {
        let mut processes = server.cpu_by_process();
        processes.push(("vigil run", vigil.child.cpu_seconds()));
        processes.push(("the bench", cpu_seconds(std::process::id())));
        Self(processes)
    }

    /// Each process's share of one core over `took`, and their sum beside the machine's cores.
    fn since(&self, before: &Self, took: Duration) -> String {
        let secs = took.as_secs_f64().max(1e-9);
        let mut total = 0.0;
        let mut parts = Vec::new();
        for ((name, now), (_, then)) in self.0.iter().zip(&before.0) {
            match diff(*now, *then) {
                Some(cpu) => {
                    total += cpu;
                    parts.push(format!("{name} {:.0}%", 100.0 * cpu / secs));
                }
                None => parts.push(format!("{name} ?")),
            }
        }
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        format!(
            "{} of one core during the churn; together {:.0}% of the {cores} cores",
            parts.join(", "),
            100.0 * total / secs / cores as f64
        )
    }
}

impl Load {
    /// `rate` deletions a second, each with its replacement, for `how_long`, at most
    /// `concurrency` in flight; a tick with no room waits (the pace falls behind, which the
    /// report shows).
    async fn churn(self, by_namespace: Vec<Api<Pod>>) {
        let Self {
            targets,
            rate,
            concurrency,
            how_long,
            deletions,
            failures,
            ..
        } = self;
        if targets.is_empty() || rate == 0 {
            return;
        }
        let room = Arc::new(tokio::sync::Semaphore::new(concurrency.max(1)));
        // The current name of each target pod (a replacement gets a new one).
        let names: Arc<Mutex<HashMap<(usize, usize), String>>> = Arc::default();
        let mut tick = tokio::time::interval(Duration::from_secs(1) / rate);
        let started = Instant::now();
        let mut tasks = Vec::new();
        let mut seq = 0usize;
        while started.elapsed() < how_long {
            tick.tick().await;
            let Ok(permit) = room.clone().acquire_owned().await else {
                break;
            };
            let (j, k, n) = targets[rand::random_range(0..targets.len())];
            seq += 1;
            let (pods, names) = (by_namespace[n].clone(), names.clone());
            let (deletions, failures) = (deletions.clone(), failures.clone());
            tasks.push(tokio::spawn(async move {
                let _permit = permit;
                let current = names
                    .lock()
                    .ok()
                    .and_then(|n| n.get(&(j, k)).cloned())
                    .unwrap_or_else(|| format!("svc-{j}-{k}"));
                let next = format!("svc-{j}-{k}-r{seq}");
                let result = async {
                    delete_now(&pods, &current).await?;
                    create_ready(&pods, j, &next, seq).await
                }
                .await;
                match result {
                    Ok(()) => {
                        deletions.fetch_add(1, Ordering::Relaxed);
                        if let Ok(mut n) = names.lock() {
                            n.insert((j, k), next);
                        }
                    }
                    Err(_) => {
                        failures.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }));
            tasks.retain(|t| !t.is_finished());
        }
        for task in tasks {
            let _ = task.await;
        }
    }
}

impl ChurnReport {
    /// The report's lines.
    pub(super) fn lines(&self) -> Vec<String> {
        let from_request: Vec<Duration> = self.at_rest.iter().map(|r| r.from_request).collect();
        let churn_request: Vec<Duration> =
            self.under_churn.iter().map(|r| r.from_request).collect();
        let from_event: Vec<Duration> = self.at_rest.iter().filter_map(|r| r.from_event).collect();
        let churn_event: Vec<Duration> = self
            .under_churn
            .iter()
            .filter_map(|r| r.from_event)
            .collect();
        let delete_rest: Vec<Duration> = self.at_rest.iter().map(|r| r.delete_took).collect();
        let delete_churn: Vec<Duration> = self.under_churn.iter().map(|r| r.delete_took).collect();
        let achieved = self.deletions as f64 / self.churn_took.as_secs_f64().max(1e-9);
        let behind = achieved < 0.95 * f64::from(self.target_rate)
            || self.depth_after.is_some_and(|d| d > 0.0)
            || self.unanswered > 0;
        let vigil = |(queue, reconcile): (Option<f64>, Option<f64>)| {
            let ms = |v: Option<f64>| v.map_or_else(|| "?".to_owned(), |v| format!("{v:.2} ms"));
            format!("queue wait {}, reconcile {}", ms(queue), ms(reconcile))
        };
        vec![
            format!(
                "  churn:                {:.1} s: {} pod deletions with their replacements ({achieved:.1}/s, target {}/s), {} failed",
                self.churn_took.as_secs_f64(),
                self.deletions,
                self.target_rate,
                self.failures
            ),
            "    reaction, from the DELETE request to the fallback's ADDED event:".to_owned(),
            format!("      at rest:           {}", stats(&from_request).0),
            format!(
                "      churning:          {}; p99 under churn / at rest = {}   target ≤ 1.5",
                stats(&churn_request).0,
                ratio(&from_request, &churn_request)
            ),
            "    reaction, from the pod's DELETED event to the fallback's ADDED event (both on the bench's watches):".to_owned(),
            format!("      at rest:           {}", stats(&from_event).0),
            format!(
                "      churning:          {}; p99 under churn / at rest = {}   target ≤ 1.5",
                stats(&churn_event).0,
                ratio(&from_event, &churn_event)
            ),
            format!(
                "    the probes' DELETE:  at rest {}; churning {} (the API server's own latency)",
                stats(&delete_rest).0,
                stats(&delete_churn).0
            ),
            format!(
                "    the floor:           {}",
                floor(&from_request, &delete_churn)
            ),
            format!(
                "    Vigil's own (means): at rest {}; churning {}",
                vigil(self.vigil_at_rest),
                vigil(self.vigil_under_churn)
            ),
            format!(
                "    Vigil under churn:   {} reconciles/s; deepest work queue {:.0}, ≥ 10 deep in {} of the 1 s samples, {} 2 s after the churn; requests {}; CPU {} s ({}), RSS now {:.1} MiB, peak {:.1} MiB",
                self.reconciles_per_s
                    .map_or_else(|| "?".to_owned(), |r| format!("{r:.1}")),
                self.max_depth,
                self.deep_seconds,
                fmt_opt(self.depth_after),
                self.requests.as_deref().unwrap_or("?"),
                fmt_opt(self.cpu),
                self.cpu.map_or_else(
                    || "?".to_owned(),
                    |c| format!(
                        "{:.1}% of one core",
                        100.0 * c / self.churn_took.as_secs_f64()
                    )
                ),
                self.rss.1,
                self.rss.0
            ),
            format!("    the machine:         {}", self.machine),
            format!(
                "    fell behind:         {} ({} probes never answered within {} s)",
                if behind { "yes" } else { "no" },
                self.unanswered,
                PROBE_PATIENCE.as_secs()
            ),
        ]
    }
}

/// "p50 …, p99 …, max … (n probes)" and the p99, of `durations`.
fn stats(durations: &[Duration]) -> (String, Option<Duration>) {
    let mut sorted = durations.to_vec();
    sorted.sort();
    let Some(max) = sorted.last().copied() else {
        return ("-".to_owned(), None);
    };
    let p99 = percentile(&sorted, 99.0);
    (
        format!(
            "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} probes)",
            ms(percentile(&sorted, 50.0)),
            ms(p99),
            ms(max),
            sorted.len()
        ),
        Some(p99),
    )
}

/// p99 of `churning` over p99 of `rest`, or "?".
fn ratio(rest: &[Duration], churning: &[Duration]) -> String {
    stats(rest).1.zip(stats(churning).1).map_or_else(
        || "?".to_owned(),
        |(r, c)| format!("{:.2}", c.as_secs_f64() / r.as_secs_f64().max(1e-9)),
    )
}

/// Whether the target is within any controller's reach on this server: a reaction holds at
/// least one API write after the deletion (the fallback's POST), so one write's p99 under churn
/// (the probes' own DELETEs) bounds the reaction's p99 under churn from below.
fn floor(rest_reactions: &[Duration], churn_writes: &[Duration]) -> String {
    let (Some(rest), Some(write)) = (stats(rest_reactions).1, stats(churn_writes).1) else {
        return "?".to_owned();
    };
    let times = write.as_secs_f64() / rest.as_secs_f64().max(1e-9);
    format!(
        "a reaction holds at least one API write; one write's p99 under churn ({:.1} ms, the probes' DELETE) is {times:.2}× the reaction's p99 at rest, so ≤ 1.5 is {}",
        ms(write),
        if times > 1.5 {
            "out of reach for any controller on this server and machine"
        } else {
            "within reach"
        }
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_says_when_one_write_alone_misses_the_target() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|m| Duration::from_millis(*m))
                .collect::<Vec<_>>()
        };
        assert!(floor(&ms(&[10, 20]), &ms(&[5, 29])).ends_with("within reach"));
        let slow = floor(&ms(&[10, 20]), &ms(&[5, 31]));
        assert!(slow.contains("31.0 ms") && slow.contains("1.55×"), "{slow}");
        assert!(slow.ends_with("out of reach for any controller on this server and machine"));
        assert_eq!(floor(&[], &ms(&[5])), "?");
    }

    #[test]
    fn probes_are_spread_over_the_healthy_services_and_left_out_of_the_churn() {
        let layout = Layout {
            services: 10,
            crs: 2,
            namespaces: 2,
            per_service: 2,
            healthy: (0..10).collect(),
            lame: vec![],
            uncovered: [1, 2].into_iter().collect(),
            expected: vec![],
        };
        let probes = probe_services(&layout, 3);
        assert_eq!(probes, vec![0, 4, 6]);
        let targets = layout_targets(&layout, &probes);
        assert_eq!(targets.len(), 7 * 2);
        assert!(targets.iter().all(|(j, _, _)| !probes.contains(j)));
        assert!(targets.iter().any(|(j, _, _)| !layout.covered(*j)));
        // Each pod is written in its Service's namespace, and the churn reaches them all.
        assert!(
            targets
                .iter()
                .all(|(j, _, n)| *n == layout.namespace_index(*j))
        );
        assert!(targets.iter().any(|(_, _, n)| *n == 0) && targets.iter().any(|(_, _, n)| *n == 1));
    }
}
