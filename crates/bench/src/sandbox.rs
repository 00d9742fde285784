//! `vigil-bench sandbox`: creates per second and watch-event delivery latency against `vigil
//! sandbox` in a child process.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{PostParams, WatchEvent, WatchParams};

use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;
use crate::support::usage::rss_mib;

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

pub async fn run(args: SandboxBench) -> anyhow::Result<()> {
    let child = spawn_sandbox(&["--no-kubelet"]).await?;
    let pid = child.process.id().context("sandbox pid")?;
    let client = child.client()?;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    // Warm the connection and learn the current resourceVersion to watch from.
    let list = api.list_metadata(&Default::default()).await?;
    let start_rv = list.metadata.resource_version.unwrap_or_default();

    let sent: SentTimes = Arc::new(Mutex::new(HashMap::with_capacity(args.objects)));
    let mut watchers = Vec::new();
    for _ in 0..args.watchers {
        // One connection per watcher, as separate controllers would have.
        let watch_client = child.client()?;
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
        "vigil-bench sandbox: {} creates ({:?} client, concurrency {}), {} watchers",
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
