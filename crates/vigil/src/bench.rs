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

#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Creates per second and watch-event delivery latency against a sandbox in a child process.
    Sandbox(SandboxBench),
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
}

pub async fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Sandbox(args) => sandbox(args).await,
    }
}

/// A `vigil sandbox` child process, killed on drop.
struct Child {
    process: tokio::process::Child,
    url: String,
}

async fn spawn_sandbox() -> anyhow::Result<Child> {
    let exe = std::env::current_exe().context("locating the vigil binary")?;
    let mut process = tokio::process::Command::new(exe)
        .args(["sandbox", "--listen", "127.0.0.1:0"])
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
fn rss_mib(pid: u32) -> Option<(f64, f64)> {
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

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1000.0)
}

async fn sandbox(args: SandboxBench) -> anyhow::Result<()> {
    let child = spawn_sandbox().await?;
    let pid = child.process.id().context("sandbox pid")?;
    let client = Client::try_from(kube::Config::new(child.url.parse()?))?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Warm the connection and learn the current resourceVersion to watch from.
    let list = api.list_metadata(&Default::default()).await?;
    let start_rv = list.metadata.resource_version.unwrap_or_default();

    let sent: Arc<Mutex<HashMap<String, Instant>>> =
        Arc::new(Mutex::new(HashMap::with_capacity(args.objects)));
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        let watch_client = Client::try_from(kube::Config::new(child.url.parse()?))?;
        let api: Api<ConfigMap> = Api::namespaced(watch_client, "default");
        let stream = api
            .watch(&WatchParams::default().timeout(290), &start_rv)
            .await?;
        let sent = sent.clone();
        let expected = args.objects;
        watchers.push(tokio::spawn(async move {
            let mut latencies = Vec::with_capacity(expected);
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
        }));
    }

    let started = Instant::now();
    let names: Vec<String> = (0..args.objects).map(|i| format!("bench-{i:06}")).collect();
    futures::stream::iter(names.into_iter().map(|name| {
        let api = api.clone();
        let sent = sent.clone();
        async move {
            let cm: ConfigMap = serde_json::from_value(serde_json::json!({
                "metadata": {"name": name},
                "data": {"payload": "x".repeat(64)}
            }))?;
            if let Ok(mut m) = sent.lock() {
                m.insert(name, Instant::now());
            }
            api.create(&PostParams::default(), &cm).await?;
            anyhow::Ok(())
        }
    }))
    .buffer_unordered(args.concurrency.max(1))
    .try_collect::<Vec<()>>()
    .await?;
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

    println!(
        "vigil bench sandbox: {} creates, {} watchers, concurrency {}",
        args.objects, args.watchers, args.concurrency
    );
    println!(
        "  creates:            {:.3} s total, {:.0} creates/s",
        elapsed.as_secs_f64(),
        args.objects as f64 / elapsed.as_secs_f64()
    );
    println!("  watchers complete:  {complete}/{}", args.watchers);
    println!(
        "  watch delivery:     p50 {}, p90 {}, p99 {}, max {} ({} events; measured from create request start)",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 90.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default()),
        latencies.len()
    );
    println!("  sandbox RSS:        peak {peak:.1} MiB, now {now:.1} MiB");
    drop(child);
    Ok(())
}
