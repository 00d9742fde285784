//! `vigil-bench configmap-sync`: the ConfigMapSync controller measured end to end, with
//! `vigil sandbox` and `vigil run --controllers configmapsync --configmapsync-trust-all` as
//! children of the bench (a fresh pair per part), the bench an ordinary API client.
//!
//! 1. Propagation latency: one source, one ConfigMapSync, 100 destination namespaces (a label
//!    selector). Per update, the source's `seq` key is replaced and the clock runs from the
//!    update request to the watch event showing the last of the 100 copies at that `seq`.
//! 2. Scale: 1,000 ConfigMapSyncs × 10 destinations, created at once against a running Vigil
//!    with the sources and namespaces in place: time until all 10,000 copies exist and until all
//!    1,000 statuses say Ready; Vigil's peak RSS; then the writes in steady state, counted by
//!    watches on ConfigMaps, ConfigMapSyncs and Events (per minute; target 0), and Vigil's
//!    reconciles over the same window.
//!
//! Figures only: nothing is asserted.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::watcher;
use kube::{Client, CustomResourceExt as _};
use serde_json::json;
use tokio::sync::mpsc;
use vigil_apis::ConfigMapSync;

use crate::support::client::in_parallel;
use crate::support::client::ok_if_exists;
use crate::support::client::own_client;
use crate::support::http::http_get;
use crate::support::metrics::samples;
use crate::support::sandbox::{Child, spawn_sandbox};
use crate::support::stats::percentile;
use crate::support::usage::rss_mib;
use crate::support::vigil::{Vigil, spawn_vigil};

#[derive(Debug, clap::Args)]
pub struct ConfigMapSyncBench {
    /// Source updates timed in the latency part.
    #[arg(long, default_value_t = 200)]
    updates: usize,
    /// Destination namespaces of the latency part.
    #[arg(long, default_value_t = 100)]
    destinations: usize,
    /// ConfigMapSyncs of the scale part (0 skips it).
    #[arg(long, default_value_t = 1000)]
    syncs: usize,
    /// Destination namespaces of each ConfigMapSync in the scale part.
    #[arg(long, default_value_t = 10)]
    fan_out: usize,
    /// Seconds of steady state watched for writes after the scale part converged.
    #[arg(long, default_value_t = 60)]
    steady_seconds: u64,
    /// Requests in flight from the bench while setting up.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

/// Targets.
const TARGET_P99: Duration = Duration::from_millis(100);
/// The label Vigil puts on every copy.
const COPY_SELECTOR: &str = "configmapsync.apps.bixbite.io/copy=true";
/// How long one update may take to reach every copy before it counts as an anomaly.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the scale part may take to converge.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(600);

pub async fn run(args: ConfigMapSyncBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.destinations > 0 && args.concurrency > 0 && args.fan_out > 0,
        "need --destinations, --fan-out and --concurrency > 0"
    );
    say!(
        "vigil-bench configmap-sync (sandbox and vigil run as child processes; the machine may be shared with other work)"
    );
    latency(&args).await?;
    if args.syncs > 0 {
        scale(&args).await?;
    }
    Ok(())
}

/// A sandbox and a Vigil running only the ConfigMapSync controller, trusting every author.
struct Pair {
    /// Dropped in this order: Vigil first, then the sandbox (and its kubeconfig).
    vigil: Vigil,
    sandbox: Child,
    url: String,
}

async fn start_sandbox() -> anyhow::Result<(Child, Client)> {
    let sandbox = spawn_sandbox(&["--no-kubelet", "--watch-window", "200000"]).await?;
    let client = sandbox.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    ok_if_exists(
        crds.create(&PostParams::default(), &ConfigMapSync::crd())
            .await,
    )?;
    let syncs: Api<ConfigMapSync> = Api::all(client.clone());
    wait_until(
        "the ConfigMapSync CRD to be served",
        Duration::from_secs(10),
        || async { Ok(syncs.list(&ListParams::default().limit(1)).await.is_ok()) },
    )
    .await?;
    Ok((sandbox, client))
}

async fn start_vigil(sandbox: Child) -> anyhow::Result<Pair> {
    let mut vigil = spawn_vigil(
        sandbox.kubeconfig(),
        &[
            "--controllers",
            "configmapsync",
            "--configmapsync-trust-all",
        ],
    )
    .await?;
    wait_until(
        "vigil run to report ready on /readyz",
        Duration::from_secs(30),
        || async {
            Ok(matches!(
                http_get(&vigil.metrics_addr, "/readyz").await,
                Ok((200, _))
            ))
        },
    )
    .await
    .with_context(|| vigil.exit_note())?;
    let url = sandbox.url.clone();
    Ok(Pair {
        vigil,
        sandbox,
        url,
    })
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, check: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn create_namespace(
    client: &Client,
    name: &str,
    labels: serde_json::Value,
) -> anyhow::Result<()> {
    let ns: Namespace =
        serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))?;
    ok_if_exists(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await,
    )
    .with_context(|| format!("creating namespace {name}"))
}

async fn create_config_map(
    client: &Client,
    ns: &str,
    name: &str,
    data: serde_json::Value,
) -> anyhow::Result<()> {
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}, "data": data}))?;
    ok_if_exists(
        Api::<ConfigMap>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &cm)
            .await,
    )
    .with_context(|| format!("creating ConfigMap {ns}/{name}"))
}

/// A background watch, stopped when dropped (before the sandbox it watches goes).
struct Abort(tokio::task::JoinHandle<()>);

impl Drop for Abort {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn met(ok: bool) -> &'static str {
    if ok { "(met)" } else { "(MISSED)" }
}

// ---------------------------------------------------------------------------------------------
// Part 1: propagation latency.

const LATENCY_SRC: &str = "cms-bench-src";
const LATENCY_NAME: &str = "latency";

/// Watches every copy and sends `(namespace, seq)` for each change after the initial list.
fn watch_copies(client: Client) -> (mpsc::UnboundedReceiver<(String, u64, Instant)>, Abort) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let api: Api<ConfigMap> = Api::all(client);
        let config = watcher::Config::default().labels(COPY_SELECTOR);
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            let cm = match event {
                Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) => cm,
                _ => continue,
            };
            let at = Instant::now();
            let seq = cm
                .data
                .as_ref()
                .and_then(|d| d.get("seq"))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            let ns = cm.metadata.namespace.unwrap_or_default();
            if tx.send((ns, seq, at)).is_err() {
                return;
            }
        }
    });
    (rx, Abort(task))
}

async fn latency(args: &ConfigMapSyncBench) -> anyhow::Result<()> {
    let (sandbox, client) = start_sandbox().await?;
    create_namespace(&client, LATENCY_SRC, json!({})).await?;
    let destinations: Vec<String> = (0..args.destinations)
        .map(|i| format!("cms-bench-dst-{i:03}"))
        .collect();
    in_parallel(destinations.len(), args.concurrency, |i| {
        let client = client.clone();
        let name = destinations[i].clone();
        async move { create_namespace(&client, &name, json!({"cms-bench": "latency"})).await }
    })
    .await?;
    create_config_map(
        &client,
        LATENCY_SRC,
        LATENCY_NAME,
        json!({"seq": "0", "payload": "x".repeat(256)}),
    )
    .await?;
    let pair = start_vigil(sandbox).await?;
    let client = own_client(&pair.url)?;
    let (mut copies, _copy_watch) = watch_copies(own_client(&pair.url)?);

    let sync: ConfigMapSync = serde_json::from_value(json!({
        "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
        "metadata": {"name": LATENCY_NAME, "namespace": LATENCY_SRC},
        "spec": {
            "sourceNamespace": LATENCY_SRC, "destinationNamespace": destinations[0],
            "configMapName": LATENCY_NAME,
            "namespaceSelector": {"matchLabels": {"cms-bench": "latency"}},
        }
    }))?;
    let fan_out_started = Instant::now();
    Api::<ConfigMapSync>::namespaced(client.clone(), LATENCY_SRC)
        .create(&PostParams::default(), &sync)
        .await
        .context("creating the ConfigMapSync")?;
    let initial = wait_for_seq(&mut copies, 0, destinations.len(), CONVERGE_TIMEOUT).await;
    let initial = initial.map(|t| t.saturating_duration_since(fan_out_started));

    let sources: Api<ConfigMap> = Api::namespaced(client.clone(), LATENCY_SRC);
    let mut samples = Vec::with_capacity(args.updates);
    let mut anomalies = Vec::new();
    for seq in 1..=args.updates as u64 {
        let patch = json!({"data": {"seq": seq.to_string()}});
        let sent = Instant::now();
        sources
            .patch(LATENCY_NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .context("updating the source")?;
        match wait_for_seq(&mut copies, seq, destinations.len(), STEP_TIMEOUT).await {
            Some(last) => samples.push(last.saturating_duration_since(sent)),
            None => {
                anomalies.push(format!(
                    "update {seq} did not reach every copy within {STEP_TIMEOUT:?}"
                ));
                if anomalies.len() >= 3 {
                    break;
                }
            }
        }
    }
    samples.sort_unstable();
    let (peak, now) = rss_mib(pair.vigil.pid).unwrap_or((0.0, 0.0));
    let sandbox_rss = pair
        .sandbox
        .process
        .id()
        .and_then(rss_mib)
        .unwrap_or((0.0, 0.0));
    say!(
        "\n1. propagation latency: 1 source → {} destination namespaces (namespace selector)",
        destinations.len()
    );
    match initial {
        Some(d) => say!(
            "  first fan-out:        {} from ConfigMapSync created to the last copy's ADDED event",
            ms(d)
        ),
        None => say!("  first fan-out:        did not complete"),
    }
    if samples.is_empty() {
        say!("  update → all copies:  no samples");
    } else {
        let p99 = percentile(&samples, 99.0);
        say!(
            "  update → all copies:  p50 {}, p99 {}, max {} over {} updates (from the source's PATCH sent to the event showing the last copy updated)   target p99 < {} {}",
            ms(percentile(&samples, 50.0)),
            ms(p99),
            ms(samples.last().copied().unwrap_or_default()),
            samples.len(),
            ms(TARGET_P99),
            met(p99 < TARGET_P99),
        );
    }
    say!("  vigil run:            peak RSS {peak:.1} MiB, now {now:.1} MiB");
    say!("  sandbox:              peak RSS {:.1} MiB", sandbox_rss.0);
    say!(
        "  anomalies:            {}",
        if anomalies.is_empty() {
            "none".into()
        } else {
            anomalies.join("; ")
        }
    );
    say!("  vigil log:            {}", pair.vigil.log_summary());
    Ok(())
}

/// Reads copy events until `count` distinct namespaces show `seq`; returns when the last did.
async fn wait_for_seq(
    copies: &mut mpsc::UnboundedReceiver<(String, u64, Instant)>,
    seq: u64,
    count: usize,
    timeout: Duration,
) -> Option<Instant> {
    let mut seen: HashSet<String> = HashSet::with_capacity(count);
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let (ns, at_seq, at) = tokio::time::timeout_at(deadline, copies.recv())
            .await
            .ok()??;
        if at_seq == seq && seen.insert(ns) && seen.len() == count {
            return Some(at);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Part 2: 1,000 ConfigMapSyncs × 10 destinations.

const SCALE_SRC: &str = "cms-scale-src";

fn scale_name(i: usize) -> String {
    format!("cfg-{i:05}")
}

/// Counts the watch events (after the initial list) of one kind, i.e. the writes to it.
fn count_writes<K>(api: Api<K>, config: watcher::Config) -> (Arc<AtomicUsize>, Abort)
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let count = Arc::new(AtomicUsize::new(0));
    let counter = count.clone();
    let task = tokio::spawn(async move {
        let mut events = watcher(api, config).boxed();
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) = event {
                counter.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    (count, Abort(task))
}

/// Counters from Vigil's /metrics: reconciles, and copy writes by verb.
async fn vigil_counters(vigil: &Vigil) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let Ok((200, body)) = http_get(&vigil.metrics_addr, "/metrics").await else {
        return out;
    };
    for sample in samples(&body) {
        if matches!(
            sample.name,
            "controller_runtime_reconcile_total" | "vigil_configmapsync_copy_writes_total"
        ) {
            *out.entry(sample.series.to_owned()).or_default() += sample.value;
        }
    }
    out
}

fn counter_changes(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> String {
    let parts: Vec<String> = after
        .iter()
        .filter_map(|(k, v)| {
            let d = v - before.get(k).copied().unwrap_or(0.0);
            (d != 0.0).then(|| format!("{k} +{d:.0}"))
        })
        .collect();
    if parts.is_empty() {
        "none".into()
    } else {
        parts.join(", ")
    }
}

async fn scale(args: &ConfigMapSyncBench) -> anyhow::Result<()> {
    let (sandbox, client) = start_sandbox().await?;
    create_namespace(&client, SCALE_SRC, json!({})).await?;
    let destinations: Vec<String> = (0..args.fan_out)
        .map(|i| format!("cms-scale-{i:02}"))
        .collect();
    for ns in &destinations {
        create_namespace(&client, ns, json!({})).await?;
    }
    in_parallel(args.syncs, args.concurrency, |i| {
        let client = client.clone();
        async move {
            create_config_map(
                &client,
                SCALE_SRC,
                &scale_name(i),
                json!({"index": i.to_string(), "payload": "y".repeat(128)}),
            )
            .await
        }
    })
    .await?;
    let pair = start_vigil(sandbox).await?;
    let client = own_client(&pair.url)?;
    let (idle_peak, _) = rss_mib(pair.vigil.pid).unwrap_or((0.0, 0.0));

    // Copies appearing, counted by the bench's own watch.
    let (copies_added, _copies_added_watch) = count_writes(
        Api::<ConfigMap>::all(own_client(&pair.url)?),
        watcher::Config::default().labels(COPY_SELECTOR),
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    let expected = args.syncs * args.fan_out;
    let started = Instant::now();
    let syncs: Api<ConfigMapSync> = Api::namespaced(client.clone(), SCALE_SRC);
    in_parallel(args.syncs, args.concurrency, |i| {
        let syncs = syncs.clone();
        let destinations = &destinations;
        async move {
            let sync: ConfigMapSync = serde_json::from_value(json!({
                "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
                "metadata": {"name": scale_name(i)},
                "spec": {
                    "sourceNamespace": SCALE_SRC, "destinationNamespace": destinations[0],
                    "destinationNamespaces": destinations[1..], "configMapName": scale_name(i),
                }
            }))?;
            ok_if_exists(syncs.create(&PostParams::default(), &sync).await)
        }
    })
    .await?;
    let created_after = started.elapsed();

    let mut copies_after = None;
    let mut ready_after = None;
    let deadline = Instant::now() + CONVERGE_TIMEOUT;
    let mut last_ready = 0;
    while (copies_after.is_none() || ready_after.is_none()) && Instant::now() < deadline {
        if copies_after.is_none() && copies_added.load(Ordering::Relaxed) >= expected {
            copies_after = Some(started.elapsed());
        }
        if ready_after.is_none() {
            let list = syncs.list(&ListParams::default()).await?;
            last_ready = list
                .items
                .iter()
                .filter(|s| {
                    s.status.as_ref().is_some_and(|st| {
                        st.synced as usize == args.fan_out
                            && st
                                .conditions
                                .iter()
                                .any(|c| c.type_ == "Ready" && c.status == "True")
                    })
                })
                .count();
            if last_ready == args.syncs {
                ready_after = Some(started.elapsed());
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let (peak, now) = rss_mib(pair.vigil.pid).unwrap_or((0.0, 0.0));

    // Steady state: let stragglers finish (2 s), then count every write for the window.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (cm_writes, _cm_writes_watch) = count_writes(
        Api::<ConfigMap>::all(own_client(&pair.url)?),
        watcher::Config::default(),
    );
    let (sync_writes, _sync_writes_watch) = count_writes(
        Api::<ConfigMapSync>::all(own_client(&pair.url)?),
        watcher::Config::default(),
    );
    let (event_writes, _event_writes_watch) = count_writes(
        Api::<EventV1>::all(own_client(&pair.url)?),
        watcher::Config::default(),
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let baseline = (
        cm_writes.load(Ordering::Relaxed),
        sync_writes.load(Ordering::Relaxed),
        event_writes.load(Ordering::Relaxed),
    );
    let counters_before = vigil_counters(&pair.vigil).await;
    let cpu_before = pair.vigil.cpu_seconds();
    let window = Duration::from_secs(args.steady_seconds.max(1));
    tokio::time::sleep(window).await;
    let writes = (
        cm_writes.load(Ordering::Relaxed) - baseline.0,
        sync_writes.load(Ordering::Relaxed) - baseline.1,
        event_writes.load(Ordering::Relaxed) - baseline.2,
    );
    let counters_after = vigil_counters(&pair.vigil).await;
    let cpu_after = pair.vigil.cpu_seconds();
    let (peak_end, now_end) = rss_mib(pair.vigil.pid).unwrap_or((0.0, 0.0));
    let per_minute = (writes.0 + writes.1 + writes.2) as f64 * 60.0 / window.as_secs_f64();

    say!(
        "\n2. scale: {} ConfigMapSyncs × {} destinations ({} copies), created at once against a running Vigil",
        args.syncs,
        args.fan_out,
        expected
    );
    say!(
        "  creates sent:         {:.2} s for {} ConfigMapSyncs ({} in flight)",
        created_after.as_secs_f64(),
        args.syncs,
        args.concurrency
    );
    match copies_after {
        Some(d) => say!(
            "  all copies exist:     {:.2} s from the first create",
            d.as_secs_f64()
        ),
        None => say!(
            "  all copies exist:     NOT within {CONVERGE_TIMEOUT:?} ({} of {expected} seen)",
            copies_added.load(Ordering::Relaxed)
        ),
    }
    match ready_after {
        Some(d) => say!(
            "  all statuses Ready:   {:.2} s from the first create (time to converge from empty)",
            d.as_secs_f64()
        ),
        None => say!(
            "  all statuses Ready:   NOT within {CONVERGE_TIMEOUT:?} ({last_ready} of {} Ready)",
            args.syncs
        ),
    }
    say!(
        "  vigil run RSS:        before the ConfigMapSyncs peak {idle_peak:.1} MiB; converged peak {peak:.1} MiB, now {now:.1} MiB; after steady state peak {peak_end:.1} MiB, now {now_end:.1} MiB"
    );
    say!(
        "  steady state:         {per_minute:.1} API writes/min over {:.0} s (ConfigMaps {}, ConfigMapSyncs {}, Events {})   target 0 {}",
        window.as_secs_f64(),
        writes.0,
        writes.1,
        writes.2,
        met(per_minute == 0.0)
    );
    say!(
        "  vigil counters moved: {}",
        counter_changes(&counters_after, &counters_before)
    );
    if let (Some(a), Some(b)) = (cpu_after, cpu_before) {
        say!("  vigil CPU at rest:    {:.2} s over the window", a - b);
    }
    say!("  vigil log:            {}", pair.vigil.log_summary());
    Ok(())
}
