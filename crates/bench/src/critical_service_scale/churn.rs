//! The churn phase of `critical-service-scale` (`--churn-seconds`, after the window at rest):
//! how fast Vigil reacts while the cluster is busy.
//!
//! - Probe Services: `--probes` healthy Services are cut down to one pod each (`svc-<j>-0`).
//!   Once a second the bench deletes the last pod of the next probe Service (grace 0: gone at
//!   once, as a kubelet that stopped it) and times the fallback's ADDED event on its own watch
//!   (the reaction), then gives the Service its pod back (created and made Ready) so that the
//!   probe can be used again `--probes` seconds later.
//! - Reaction at rest first: one probe a second, `--probes` of them, nothing else moving.
//! - Then churn: `--churn-rate` pod deletions a second (grace 0), each with its replacement
//!   (a new name, created and made Ready, as a ReplicaSet's), over the other healthy Services,
//!   for `--churn-seconds`, with the probes going on.
//! - Meanwhile `/metrics` is read every second: reconciles, the work queue's depth, Vigil's
//!   requests by verb; and Vigil's CPU and RSS.
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

use super::{
    Layout, MANAGED_BY, NS, Vigil, create_ready_pod, current_rv, fallback_name, reconciles,
    spawn_watch,
};
use crate::support::client::own_client;
use crate::support::fmt::{diff, fmt_opt};
use crate::support::metrics::samples;
use crate::support::stats::percentile;
use crate::support::usage::rss_mib;

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
    at_rest: Vec<Duration>,
    under_churn: Vec<Duration>,
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
}

/// Runs the churn phase against the sandbox at `url`, Vigil running.
pub(super) async fn run(
    url: &str,
    client: &Client,
    vigil: &Vigil,
    layout: &Layout,
    settings: &ChurnSettings,
    errors: Arc<Mutex<Vec<String>>>,
) -> anyhow::Result<ChurnReport> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let probes = probe_services(layout, settings.probes);
    // The probe Services keep one pod each.
    for j in &probes {
        for k in 1..layout.per_service {
            delete_now(&pods, &format!("svc-{j}-{k}")).await?;
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
            Api::<Pod>::namespaced(own_client(url)?, NS),
            kube::api::WatchParams::default().labels(&managed),
            rv,
            errors,
            move |at, event: &WatchEvent<Pod>| {
                if let (WatchEvent::Added(pod), Ok(mut added)) = (event, added.lock())
                    && let Some(name) = pod.metadata.name.clone()
                {
                    added.insert(name, at);
                }
            },
        )
    };
    tokio::time::sleep(Duration::from_secs(2)).await;

    // At rest.
    let mut at_rest = Vec::new();
    let mut unanswered = 0;
    for (n, j) in probes.iter().enumerate() {
        let next = Instant::now() + Duration::from_secs(1);
        match probe(&pods, &added, *j, n).await? {
            Some(d) => at_rest.push(d),
            None => unanswered += 1,
        }
        tokio::time::sleep_until(next.into()).await;
    }

    // Under churn.
    let before = reconciles(vigil).await.ok();
    let cpu_before = vigil.child.cpu_seconds();
    let deletions = Arc::new(AtomicUsize::new(0));
    let failures = Arc::new(AtomicUsize::new(0));
    let churn_started = Instant::now();
    let churn_for = Duration::from_secs(settings.seconds);
    let churn = tokio::spawn(churn_pods(
        pods.clone(),
        layout_targets(layout, &probes),
        settings.rate,
        settings.concurrency,
        churn_for,
        deletions.clone(),
        failures.clone(),
    ));
    let mut under_churn = Vec::new();
    let mut max_depth: f64 = 0.0;
    let mut deep_seconds = 0;
    let mut n = probes.len();
    while churn_started.elapsed() < churn_for {
        let next = Instant::now() + Duration::from_secs(1);
        let j = probes[n % probes.len()];
        let (reaction, depth) = tokio::join!(probe(&pods, &added, j, n), depth(vigil));
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
    churn.await.context("the churn task")?;
    let churn_took = churn_started.elapsed();
    let after = reconciles(vigil).await.ok();
    let cpu = diff(vigil.child.cpu_seconds(), cpu_before);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let depth_after = depth(vigil).await;
    watch.abort();
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
    })
}

/// `count` healthy Services spread over the layout.
fn probe_services(layout: &Layout, count: usize) -> Vec<usize> {
    let count = count.clamp(1, layout.healthy.len());
    let step = layout.healthy.len() / count;
    (0..count).map(|i| layout.healthy[i * step]).collect()
}

/// The pods the churn deletes: every replica of the healthy Services that are not probes.
fn layout_targets(layout: &Layout, probes: &[usize]) -> Vec<(usize, usize)> {
    layout
        .healthy
        .iter()
        .filter(|j| !probes.contains(j))
        .flat_map(|j| (0..layout.per_service).map(move |k| (*j, k)))
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

/// Deletes the last pod of probe Service `svc-<j>` and times its fallback's ADDED event; then
/// gives the Service its pod back. `None`: no fallback within [`PROBE_PATIENCE`].
async fn probe(
    pods: &Api<Pod>,
    added: &Mutex<HashMap<String, Instant>>,
    j: usize,
    seq: usize,
) -> anyhow::Result<Option<Duration>> {
    let fallback = fallback_name(j);
    let last = format!("svc-{j}-0");
    let t0 = Instant::now();
    delete_now(pods, &last).await?;
    let mut reaction = None;
    while t0.elapsed() < PROBE_PATIENCE {
        let seen = added
            .lock()
            .ok()
            .and_then(|a| a.get(&fallback).copied())
            .filter(|at| *at >= t0);
        if let Some(at) = seen {
            reaction = Some(at - t0);
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

/// `rate` deletions a second, each with its replacement, for `how_long`, at most `concurrency`
/// in flight; a tick with no room waits (the pace falls behind, which the report shows).
async fn churn_pods(
    pods: Api<Pod>,
    targets: Vec<(usize, usize)>,
    rate: u32,
    concurrency: usize,
    how_long: Duration,
    deletions: Arc<AtomicUsize>,
    failures: Arc<AtomicUsize>,
) {
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
        let (j, k) = targets[rand::random_range(0..targets.len())];
        seq += 1;
        let (pods, names) = (pods.clone(), names.clone());
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

impl ChurnReport {
    /// The report's lines.
    pub(super) fn lines(&self) -> Vec<String> {
        let stats = |d: &[Duration]| {
            let mut sorted = d.to_vec();
            sorted.sort();
            if sorted.is_empty() {
                return ("-".to_owned(), None);
            }
            let p99 = percentile(&sorted, 99.0);
            (
                format!(
                    "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms ({} probes)",
                    ms(percentile(&sorted, 50.0)),
                    ms(p99),
                    ms(*sorted.last().unwrap_or(&Duration::ZERO)),
                    sorted.len()
                ),
                Some(p99),
            )
        };
        let (rest, rest_p99) = stats(&self.at_rest);
        let (churn, churn_p99) = stats(&self.under_churn);
        let ratio = rest_p99.zip(churn_p99).map_or_else(
            || "?".to_owned(),
            |(r, c)| format!("{:.2}", c.as_secs_f64() / r.as_secs_f64().max(1e-9)),
        );
        let achieved = self.deletions as f64 / self.churn_took.as_secs_f64().max(1e-9);
        let behind = achieved < 0.95 * f64::from(self.target_rate)
            || self.depth_after.is_some_and(|d| d > 0.0)
            || self.unanswered > 0;
        vec![
            format!(
                "  churn:                {:.1} s: {} pod deletions with their replacements ({achieved:.1}/s, target {}/s), {} failed",
                self.churn_took.as_secs_f64(),
                self.deletions,
                self.target_rate,
                self.failures
            ),
            format!("    reaction at rest:    {rest} (last pod deleted → fallback ADDED)"),
            format!(
                "    reaction, churning:  {churn}; p99 under churn / at rest = {ratio}   target ≤ 1.5"
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
            format!(
                "    fell behind:         {} ({} probes never answered within {} s)",
                if behind { "yes" } else { "no" },
                self.unanswered,
                PROBE_PATIENCE.as_secs()
            ),
        ]
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_spread_over_the_healthy_services_and_left_out_of_the_churn() {
        let layout = Layout {
            services: 10,
            crs: 2,
            per_service: 2,
            healthy: (0..10).collect(),
            lame: vec![],
            expected: vec![],
        };
        let probes = probe_services(&layout, 3);
        assert_eq!(probes, vec![0, 3, 6]);
        let targets = layout_targets(&layout, &probes);
        assert_eq!(targets.len(), 7 * 2);
        assert!(targets.iter().all(|(j, _)| !probes.contains(j)));
    }
}
