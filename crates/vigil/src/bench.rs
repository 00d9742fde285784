//! `vigil bench …`: benchmarks that print figures (never assertions).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{PostParams, WatchEvent, WatchParams};
use kube::{Api, Client};
use tokio::io::AsyncBufReadExt as _;

use crate::bench_child::percentile;

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Creates per second and watch-event delivery latency against a sandbox in a child process.
    Sandbox(SandboxBench),
    /// Endpoints settling time after a burst of pod readiness changes, pods × services.
    Endpoints(crate::bench_endpoints::EndpointsBench),
    /// ConfigMapSync propagation latency to 100 namespaces, and 1,000 ConfigMapSyncs × 10 at scale.
    #[command(name = "configmap-sync")]
    ConfigMapSync(crate::bench_configmap_sync::ConfigMapSyncBench),
    /// CriticalService reaction latency and a force-delete burst, Vigil in its own process.
    CriticalService(crate::bench_critical_service::CriticalServiceBench),
    /// CriticalServices at scale: start to steady state, writes and reconciles at rest, RSS.
    CriticalServiceScale(crate::bench_critical_service_scale::ScaleBench),
    /// Status vault: capture lag, automatic and CLI restore times, bytes per record.
    StatusVault(crate::bench_status_vault::StatusVaultBench),
    /// The article's restore at scale through the CLI: N LoadBalancer Services backed up, deleted, restored.
    StatusRestore(crate::bench_status_restore::StatusRestoreBench),
    /// KubernetesClusters through the external reference provider: time to all Ready, provider and API requests per object, RSS.
    KubernetesCluster(crate::bench_kubernetes_cluster::KubernetesClusterBench),
    /// KafkaTopic: time to Ready for 500 topics, broker requests in steady state, deletion.
    KafkaTopic(crate::bench_kafka_topic::KafkaTopicBench),
    /// The sandbox beside kube-apiserver 1.28 (../shared/kube): start to ready, one fixed workload.
    Fidelity(crate::bench_fidelity::FidelityBench),
    /// A 1,000-replica Deployment on the sandbox: time to available, time to roll out a new template, RSS.
    Deployment(crate::bench_deployment::DeploymentBench),
}

#[derive(Debug, clap::Args)]
pub struct SandboxBench {
    /// Objects to create.
    #[arg(long, default_value_t = 10_000)]
    objects: usize,
    /// Concurrent watchers.
    #[arg(long, default_value_t = 10)]
    watchers: usize,
    /// Creates in flight at once (1 = strictly sequential over one keep-alive connection).
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Which client creates: `kube` (kube::Client, what controllers use) or `raw` (bare HTTP/1.1
    /// on one keep-alive socket, strictly sequential: the server's own cost without client overhead).
    #[arg(long, value_enum, default_value_t = CreateClient::Kube)]
    client: CreateClient,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CreateClient {
    Kube,
    Raw,
}

pub async fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Sandbox(args) => sandbox(args).await,
        Bench::Endpoints(args) => crate::bench_endpoints::run(args).await,
        Bench::ConfigMapSync(args) => crate::bench_configmap_sync::run(args).await,
        Bench::CriticalService(args) => crate::bench_critical_service::run(args).await,
        Bench::CriticalServiceScale(args) => crate::bench_critical_service_scale::run(args).await,
        Bench::StatusVault(args) => crate::bench_status_vault::run(args).await,
        Bench::StatusRestore(args) => crate::bench_status_restore::run(args).await,
        Bench::KubernetesCluster(args) => crate::bench_kubernetes_cluster::run(args).await,
        Bench::KafkaTopic(args) => crate::bench_kafka_topic::run(args).await,
        Bench::Fidelity(args) => crate::bench_fidelity::run(args).await,
        Bench::Deployment(args) => crate::bench_deployment::run(args).await,
    }
}

/// A `vigil sandbox` child process, killed on drop.
pub struct Child {
    pub process: tokio::process::Child,
    pub url: String,
}

/// Starts `vigil sandbox` on a free port with extra arguments and waits for its ready line.
pub async fn spawn_sandbox(extra: &[&str]) -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("locating the vigil binary")?;
    let mut process = tokio::process::Command::new(exe)
        .args(["sandbox", "--listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the sandbox")?;
    let stdout = process.stdout.take().context("sandbox stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the sandbox did not get ready in 10 s")??
        .context("the sandbox exited before getting ready")?;
    let url = ready
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .context("no URL in the ready line")?
        .to_owned();
    Ok(Child { process, url })
}

/// Peak and current resident memory of a process, in MiB, from /proc.
pub fn rss_mib(pid: u32) -> Option<(f64, f64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|kb| kb.parse::<f64>().ok())
            .map(|kb| kb / 1024.0)
    };
    Some((field("VmHWM:")?, field("VmRSS:")?))
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

/// When each object's create request was sent, by name.
type SentTimes = Arc<Mutex<HashMap<String, Instant>>>;

fn note_sent(sent: &SentTimes, name: &str) {
    if let Ok(mut m) = sent.lock() {
        m.insert(name.to_owned(), Instant::now());
    }
}

fn object_name(i: usize) -> String {
    format!("bench-{i:06}")
}

fn config_map_json(name: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"payload": "x".repeat(64)}
    })
}

/// A watcher that records, per ADDED event, the delay since the object's create was sent.
async fn watch_latencies(
    api: Api<ConfigMap>,
    start_rv: String,
    sent: SentTimes,
    expected: usize,
) -> Vec<Duration> {
    let mut latencies = Vec::with_capacity(expected);
    let Ok(stream) = api
        .watch(&WatchParams::default().timeout(290), &start_rv)
        .await
    else {
        return latencies;
    };
    let mut stream = stream.boxed();
    while latencies.len() < expected {
        match stream.try_next().await {
            Ok(Some(WatchEvent::Added(cm))) => {
                let now = Instant::now();
                let name = cm.metadata.name.unwrap_or_default();
                if let Some(t) = sent.lock().ok().and_then(|m| m.get(&name).copied()) {
                    latencies.push(now.saturating_duration_since(t));
                }
            }
            Ok(Some(_)) => {}
            Ok(None) | Err(_) => break,
        }
    }
    latencies
}

async fn sandbox(args: SandboxBench) -> anyhow::Result<()> {
    let child = spawn_sandbox(&["--no-kubelet"]).await?;
    let pid = child.process.id().context("sandbox pid")?;
    let client = Client::try_from(kube::Config::new(child.url.parse()?))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Warm the connection and learn the current resourceVersion to watch from.
    let list = api.list_metadata(&Default::default()).await?;
    let start_rv = list.metadata.resource_version.unwrap_or_default();

    let sent: SentTimes = Arc::new(Mutex::new(HashMap::with_capacity(args.objects)));
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        // One connection per watcher, as separate controllers would have.
        let watch_client = Client::try_from(kube::Config::new(child.url.parse()?))?;
        let api: Api<ConfigMap> = Api::namespaced(watch_client, "default");
        watchers.push(tokio::spawn(watch_latencies(
            api,
            start_rv.clone(),
            sent.clone(),
            args.objects,
        )));
    }
    // Let every watch be established before the clock starts.
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    match args.client {
        CreateClient::Kube => create_with_kube(&api, &sent, args.objects, args.concurrency).await?,
        CreateClient::Raw => create_raw(&child.url, &sent, args.objects).await?,
    }
    let elapsed = started.elapsed();

    let mut latencies = Vec::new();
    let mut complete = 0;
    for w in watchers {
        let l = tokio::time::timeout(Duration::from_secs(60), w)
            .await
            .context("watchers did not finish")??;
        if l.len() == args.objects {
            complete += 1;
        }
        latencies.extend(l);
    }
    latencies.sort_unstable();
    let (peak, now) = rss_mib(pid).unwrap_or((0.0, 0.0));

    say!(
        "vigil bench sandbox: {} creates ({:?} client, concurrency {}), {} watchers",
        args.objects,
        args.client,
        args.concurrency,
        args.watchers
    );
    say!(
        "  creates:            {:.3} s total, {:.0} creates/s",
        elapsed.as_secs_f64(),
        args.objects as f64 / elapsed.as_secs_f64()
    );
    say!("  watchers complete:  {complete}/{}", args.watchers);
    say!(
        "  watch delivery:     p50 {}, p90 {}, p99 {}, max {} ({} events; from create request sent to event decoded)",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 90.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default()),
        latencies.len()
    );
    say!("  sandbox RSS:        peak {peak:.1} MiB, now {now:.1} MiB");
    drop(child);
    Ok(())
}

async fn create_with_kube(
    api: &Api<ConfigMap>,
    sent: &SentTimes,
    objects: usize,
    concurrency: usize,
) -> anyhow::Result<()> {
    futures::stream::iter((0..objects).map(|i| async move {
        let name = object_name(i);
        let cm: ConfigMap = serde_json::from_value(config_map_json(&name))?;
        note_sent(sent, &name);
        api.create(&PostParams::default(), &cm).await?;
        anyhow::Ok(())
    }))
    .buffer_unordered(concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await?;
    Ok(())
}

/// Sequential creates as bare HTTP/1.1 requests on one keep-alive connection.
async fn create_raw(url: &str, sent: &SentTimes, objects: usize) -> anyhow::Result<()> {
    use tokio::io::AsyncWriteExt as _;
    let addr = url.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    let mut buf = Vec::with_capacity(64 * 1024);
    for i in 0..objects {
        let name = object_name(i);
        let body = serde_json::to_vec(&config_map_json(&name))?;
        let head = format!(
            "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        note_sent(sent, &name);
        stream.write_all(&[head.as_bytes(), &body].concat()).await?;
        read_created(&mut stream, &mut buf).await?;
    }
    Ok(())
}

/// Reads one response with a Content-Length body; anything but 201 Created is an error.
async fn read_created(stream: &mut tokio::net::TcpStream, buf: &mut Vec<u8>) -> anyhow::Result<()> {
    use tokio::io::AsyncReadExt as _;
    buf.clear();
    let mut chunk = vec![0u8; 16 * 1024];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = std::str::from_utf8(&buf[..end])?;
            anyhow::ensure!(
                head.starts_with("HTTP/1.1 201"),
                "create failed: {}",
                head.lines().next().unwrap_or("")
            );
            let length: usize = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .context("no content-length")?
                .parse()?;
            while buf.len() < end + 4 + length {
                let n = stream.read(&mut chunk).await?;
                anyhow::ensure!(n > 0, "connection closed");
                buf.extend_from_slice(&chunk[..n]);
            }
            return Ok(());
        }
        let n = stream.read(&mut chunk).await?;
        anyhow::ensure!(n > 0, "connection closed");
        buf.extend_from_slice(&chunk[..n]);
    }
}
