//! `vigil-bench kubernetes-cluster`: N KubernetesClusters provisioned through the external
//! reference provider (in this process, with a fixed latency per request) by `vigil run` in its
//! own process, against a sandbox in another:
//!
//! - time from the first create to all `Ready`, and each object's time from its create to `Ready`
//!   (p50/p99), as a watch of the bench sees it;
//! - provider requests per object (the reference provider's own counters, by endpoint);
//! - Kubernetes API requests per object: Vigil has no metric of its own API requests, so it
//!   reaches the sandbox through a counting proxy in this process (its kubeconfig names the
//!   proxy) that reads each request's line and passes the bytes through unchanged;
//! - operator peak RSS and CPU seconds;
//! - at rest over `--settle`: API writes (should be none) and provider requests per object per
//!   minute (the resync's drift checks);
//! - deleting every object: time until all are gone (through the finalizer, so the clusters are
//!   deleted at the provider first).

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::ResourceExt as _;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::Phase;
use vigil_provider_reference::{ReferenceConfig, ReferenceProvider};

use crate::support::http::http_get;
use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;
use crate::support::temp::TempDir;
use crate::support::usage::rss_mib;
use crate::support::vigil::{Vigil, spawn_vigil};

#[derive(Debug, clap::Args)]
pub struct KubernetesClusterBench {
    /// KubernetesClusters to provision.
    #[arg(long, default_value_t = 100)]
    objects: usize,
    /// The reference provider's fixed latency, added to every request.
    #[arg(long, default_value = "50ms", value_parser = crate::support::duration::parse_duration)]
    latency: Duration,
    /// How long the reference provider takes to provision a cluster.
    #[arg(long, default_value = "1s", value_parser = crate::support::duration::parse_duration)]
    provision_time: Duration,
    /// How long the steady state is measured, once every object is Ready.
    #[arg(long, default_value = "20s", value_parser = crate::support::duration::parse_duration)]
    settle: Duration,
    /// Vigil's `--kubernetescluster-poll-interval` (how often a provisioning cluster is asked).
    #[arg(long, default_value = "2s", value_parser = crate::support::duration::parse_duration)]
    poll_interval: Duration,
    /// Vigil's `--kubernetescluster-resync-interval` (drift checks of settled clusters); below
    /// the operator's 60 s default so that `--settle` sees them.
    #[arg(long, default_value = "10s", value_parser = crate::support::duration::parse_duration)]
    resync_interval: Duration,
    /// Creates and deletes in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

const NS: &str = "bench-kubernetes-cluster";
const PROVIDER: &str = "bench";
const UUID: &str = "aaa692e5-e6ce-4f19-ad20-6491ca74067c";
/// A guard against a run that never ends; nothing is timed by it.
const TIMEOUT: Duration = Duration::from_secs(600);

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}

/// Polls `check` until it holds, or fails after [`TIMEOUT`].
async fn poll_until(what: &str, mut check: impl FnMut() -> bool) -> anyhow::Result<()> {
    let started = Instant::now();
    while !check() {
        anyhow::ensure!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

// --- The counting proxy -------------------------------------------------------------------

/// Vigil's API requests by (verb, resource), as the proxy saw them go by.
#[derive(Debug, Clone, Default)]
struct ApiCounts(BTreeMap<(&'static str, String), u64>);

impl ApiCounts {
    fn total(&self) -> u64 {
        self.0.values().sum()
    }

    fn writes(&self) -> u64 {
        self.0
            .iter()
            .filter(|((verb, _), _)| is_write(verb))
            .map(|(_, n)| n)
            .sum()
    }

    /// What `self` counted beyond `before`.
    fn since(&self, before: &Self) -> Self {
        let mut out = Self::default();
        for (key, n) in &self.0 {
            let delta = n - before.0.get(key).copied().unwrap_or(0);
            if delta > 0 {
                out.0.insert(key.clone(), delta);
            }
        }
        out
    }

    /// `verb resource: n/object`, largest first.
    fn per_object(&self, objects: usize) -> String {
        let mut rows: Vec<_> = self.0.iter().collect();
        rows.sort_by(|a, b| b.1.cmp(a.1));
        rows.iter()
            .map(|((verb, resource), n)| {
                format!("{verb} {resource} {:.2}", **n as f64 / objects as f64)
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn is_write(verb: &str) -> bool {
    matches!(verb, "create" | "update" | "patch" | "delete")
}

/// The RBAC-style verb and resource of a request line's method and target.
fn classify(method: &str, target: &str) -> (&'static str, String) {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let rest = match segments.as_slice() {
        ["api", _, rest @ ..] | ["apis", _, _, rest @ ..] => rest,
        _ => &[][..],
    };
    let rest = match rest {
        ["namespaces", _, tail @ ..] if !tail.is_empty() => tail,
        other => other,
    };
    let (resource, named) = match rest {
        [] => return ("discovery", path.to_owned()),
        [resource] => ((*resource).to_owned(), false),
        [resource, _name] => ((*resource).to_owned(), true),
        [resource, _name, sub, ..] => (format!("{resource}/{sub}"), true),
    };
    let watch = query
        .split('&')
        .any(|p| p == "watch=true" || p == "watch=1");
    let verb = match method {
        "GET" if watch => "watch",
        "GET" if named => "get",
        "GET" => "list",
        "POST" => "create",
        "PUT" => "update",
        "PATCH" => "patch",
        "DELETE" => "delete",
        _ => "other",
    };
    (verb, resource)
}

/// Listens on a free loopback port and passes every connection through to `upstream`,
/// counting the requests.
async fn start_proxy(upstream: SocketAddr) -> anyhow::Result<(SocketAddr, Arc<Mutex<ApiCounts>>)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
    let addr = listener.local_addr()?;
    let counts: Arc<Mutex<ApiCounts>> = Arc::default();
    let shared = counts.clone();
    tokio::spawn(async move {
        while let Ok((conn, _)) = listener.accept().await {
            let counts = shared.clone();
            tokio::spawn(async move {
                if let Err(e) = proxy_connection(conn, upstream, counts).await {
                    tracing::debug!(error = %e, "proxied connection ended");
                }
            });
        }
    });
    Ok((addr, counts))
}

/// One client connection: requests (head and `Content-Length` body; kube-rs sends no chunked
/// request bodies) are counted and forwarded; answers (watch streams included) are copied back
/// untouched.
async fn proxy_connection(
    client: tokio::net::TcpStream,
    upstream: SocketAddr,
    counts: Arc<Mutex<ApiCounts>>,
) -> anyhow::Result<()> {
    let server = tokio::net::TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (mut from_client, mut to_client) = client.into_split();
    let (mut from_server, mut to_server) = server.into_split();
    let answers =
        tokio::spawn(async move { tokio::io::copy(&mut from_server, &mut to_client).await });
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut chunk = vec![0u8; 16 * 1024];
    let result = async {
        loop {
            let head_end = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                let n = from_client.read(&mut chunk).await?;
                if n == 0 {
                    return anyhow::Ok(());
                }
                buf.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
            let mut line = head.split_whitespace();
            let (method, target) = (line.next().unwrap_or(""), line.next().unwrap_or(""));
            *lock(&counts).0.entry(classify(method, target)).or_default() += 1;
            let header = |name: &str| {
                head.lines().find_map(|l| {
                    let (key, value) = l.split_once(':')?;
                    key.trim()
                        .eq_ignore_ascii_case(name)
                        .then(|| value.trim().to_owned())
                })
            };
            anyhow::ensure!(
                header("transfer-encoding").is_none(),
                "a chunked request body: the proxy cannot frame it"
            );
            let length: usize = header("content-length")
                .map(|v| v.parse())
                .transpose()
                .context("content-length")?
                .unwrap_or(0);
            while buf.len() < head_end + length {
                let n = from_client.read(&mut chunk).await?;
                anyhow::ensure!(n > 0, "the client closed mid-request");
                buf.extend_from_slice(&chunk[..n]);
            }
            to_server.write_all(&buf[..head_end + length]).await?;
            buf.drain(..head_end + length);
        }
    }
    .await;
    answers.abort();
    result
}

/// A kubeconfig for Vigil that reaches the sandbox through the proxy.
fn proxied_kubeconfig(proxy: SocketAddr) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: proxied\n  cluster:\n    server: \
         \"http://{proxy}\"\nusers:\n- name: proxied\n  user: {{}}\ncontexts:\n- name: proxied\n  \
         context:\n    cluster: proxied\n    user: proxied\n    namespace: default\n\
         current-context: proxied\n"
    )
}

// --- The benchmark ------------------------------------------------------------------------

fn manifest(name: &str) -> anyhow::Result<KubernetesCluster> {
    Ok(serde_json::from_value(json!({
        "apiVersion": "vigil.dev/v1alpha1", "kind": "KubernetesCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "type": "iks", "env": "test", "kubeVersion": "1.28", "osVersion": "UBUNTU_20_64",
            "product": {"name": "benchmark", "shortName": "bench", "uuid": {"value": UUID}},
            "addons": [{"name": "cluster-autoscaler", "version": "1.2.2"},
                {"name": "vpc-block-csi-driver", "version": "5.2"}],
            "provider": {"name": PROVIDER}
        }
    }))?)
}

fn is_ready(c: &KubernetesCluster) -> bool {
    c.status.as_ref().is_some_and(|s| {
        s.phase == Some(Phase::Ready)
            && s.conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// What the bench's watch saw: when each object was first Ready, and which exist.
#[derive(Default)]
struct Seen {
    ready_at: HashMap<String, Instant>,
    present: HashMap<String, bool>,
}

/// Provider requests by endpoint, per object (and per minute when `minutes` is given).
fn provider_rates(
    requests: &BTreeMap<String, u64>,
    before: &BTreeMap<String, u64>,
    objects: usize,
    minutes: Option<f64>,
) -> (f64, String) {
    let scale = objects as f64 * minutes.unwrap_or(1.0);
    let mut total = 0;
    let mut rows = Vec::new();
    for (endpoint, n) in requests {
        let delta = n - before.get(endpoint).copied().unwrap_or(0);
        if delta > 0 {
            total += delta;
            rows.push(format!("{endpoint} {:.2}", delta as f64 / scale));
        }
    }
    (total as f64 / scale, rows.join(", "))
}

/// Runs `op` on every name, `concurrency` at a time, noting when each was sent.
async fn for_each_name<F, Fut>(
    names: &[String],
    concurrency: usize,
    op: F,
) -> anyhow::Result<HashMap<String, Instant>>
where
    F: Fn(String) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    let sent = futures::stream::iter(names.iter().cloned())
        .map(|name| {
            let at = Instant::now();
            let call = op(name.clone());
            async move { call.await.map(|()| (name, at)) }
        })
        .buffer_unordered(concurrency.max(1))
        .collect::<Vec<_>>()
        .await;
    sent.into_iter().collect()
}

pub async fn run(args: KubernetesClusterBench) -> anyhow::Result<()> {
    anyhow::ensure!(args.objects > 0, "--objects must be at least 1");
    let root = TempDir(std::env::temp_dir().join(format!(
        "vigil-bench-kubernetes-cluster-{}",
        std::process::id()
    )));
    std::fs::create_dir_all(&root.0)?;
    let sandbox = spawn_sandbox(&["--no-kubelet"]).await?;
    let client = sandbox.client()?;
    let clusters = crate::support::kinds::install_kind::<KubernetesCluster>(&client, NS).await?;

    let provider = ReferenceProvider::start(ReferenceConfig {
        provision_time: args.provision_time,
        ..ReferenceConfig::default()
    })
    .await?;
    provider.set_latency(args.latency);
    let upstream: SocketAddr = sandbox
        .url
        .trim_start_matches("http://")
        .parse()
        .context("sandbox address")?;
    let (proxy, api_counts) = start_proxy(upstream).await?;
    let kubeconfig = root.0.join("kubeconfig");
    std::fs::write(&kubeconfig, proxied_kubeconfig(proxy))?;
    let provider_flag = format!("{PROVIDER}={}", provider.url());
    let local_dir = root.0.join("local-clusters").display().to_string();
    let poll = format!("{}ms", args.poll_interval.as_millis());
    let resync = format!("{}ms", args.resync_interval.as_millis());
    let mut vigil = spawn_vigil(
        &kubeconfig,
        &[
            "--controllers",
            "kubernetescluster",
            "--cluster-provider",
            &provider_flag,
            "--local-clusters-dir",
            &local_dir,
            "--kubernetescluster-poll-interval",
            &poll,
            "--kubernetescluster-resync-interval",
            &resync,
        ],
    )
    .await?;
    let ready_started = Instant::now();
    while !matches!(http_get(&vigil.metrics_addr, "/readyz").await, Ok((200, _))) {
        anyhow::ensure!(
            ready_started.elapsed() < Duration::from_secs(30),
            "vigil run is not ready after 30 s{}",
            vigil.exit_note()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let api_at_start = lock(&api_counts).clone();

    let seen: Arc<Mutex<Seen>> = Arc::default();
    let watch = {
        let seen = seen.clone();
        let clusters = clusters.clone();
        tokio::spawn(async move {
            let mut events = watcher(clusters, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = events.next().await {
                let now = Instant::now();
                let mut seen = lock(&seen);
                match event {
                    watcher::Event::Apply(c) | watcher::Event::InitApply(c) => {
                        if is_ready(&c) {
                            seen.ready_at.entry(c.name_any()).or_insert(now);
                        }
                        seen.present.insert(c.name_any(), true);
                    }
                    watcher::Event::Delete(c) => {
                        seen.present.insert(c.name_any(), false);
                    }
                    watcher::Event::Init | watcher::Event::InitDone => {}
                }
            }
        })
    };

    // Provisioning.
    let names: Vec<String> = (0..args.objects).map(|i| format!("kc-{i:04}")).collect();
    let first_create = Instant::now();
    let created = for_each_name(&names, args.concurrency, |name| {
        let clusters = clusters.clone();
        async move {
            clusters
                .create(&PostParams::default(), &manifest(&name)?)
                .await?;
            Ok(())
        }
    })
    .await?;
    let creates_took = first_create.elapsed();
    poll_until("every KubernetesCluster Ready", || {
        lock(&seen).ready_at.len() >= names.len()
    })
    .await
    .with_context(|| vigil.exit_note())?;
    let all_ready = lock(&seen)
        .ready_at
        .values()
        .max()
        .copied()
        .unwrap_or(first_create);
    let provisioning = all_ready.saturating_duration_since(first_create);
    let mut to_ready: Vec<Duration> = {
        let seen = lock(&seen);
        names
            .iter()
            .filter_map(|n| {
                Some(
                    seen.ready_at
                        .get(n)?
                        .saturating_duration_since(*created.get(n)?),
                )
            })
            .collect()
    };
    to_ready.sort();
    let provider_after_provisioning = provider.stats();
    let api_after_provisioning = lock(&api_counts).clone();
    let provisioning_api = api_after_provisioning.since(&api_at_start);
    let (rss_provisioned, cpu_provisioned) = usage(&vigil);

    // Steady state: past the last polls and kubeconfig writes of the provisioning, then
    // measured over `--settle`.
    let quiet_in = args.poll_interval * 2;
    tokio::time::sleep(quiet_in).await;
    let provider_at_rest = provider.stats();
    let api_at_rest = lock(&api_counts).clone();
    let cpu_at_rest = vigil.cpu_seconds();
    tokio::time::sleep(args.settle).await;
    let rest_api = lock(&api_counts).since(&api_at_rest);
    let rest_provider = provider.stats();
    let rest_cpu = vigil.cpu_seconds().zip(cpu_at_rest).map(|(b, a)| b - a);
    let minutes = args.settle.as_secs_f64() / 60.0;

    // Deletion.
    let provider_before_delete = provider.stats();
    let api_before_delete = lock(&api_counts).clone();
    let delete_started = Instant::now();
    for_each_name(&names, args.concurrency, |name| {
        let clusters = clusters.clone();
        async move {
            clusters.delete(&name, &DeleteParams::default()).await?;
            Ok(())
        }
    })
    .await?;
    poll_until("every KubernetesCluster gone", || {
        let seen = lock(&seen);
        names.iter().all(|n| seen.present.get(n) == Some(&false))
    })
    .await
    .with_context(|| vigil.exit_note())?;
    let deletion = delete_started.elapsed();
    let left_at_provider = provider.clusters().len();
    let deletion_api = lock(&api_counts).since(&api_before_delete);
    let provider_after_delete = provider.stats();
    let (rss_end, cpu_end) = usage(&vigil);
    watch.abort();

    let n = args.objects;
    let per = |v: u64| v as f64 / n as f64;
    say!(
        "kubernetes-cluster ({n} objects; external reference provider in the bench process: latency {} per request, provisioning {}; vigil run in its own process: poll {}, resync {}; sandbox in another; machine shared with other work)",
        ms(args.latency),
        secs(args.provision_time),
        secs(args.poll_interval),
        secs(args.resync_interval),
    );
    say!(
        "  provisioning:        {n} creates sent in {} ({} in flight); first create → all Ready {}",
        secs(creates_took),
        args.concurrency,
        secs(provisioning)
    );
    say!(
        "  create → Ready:      p50 {}  p99 {}  max {}  (per object, as the bench's watch saw it)",
        secs(percentile(&to_ready, 50.0)),
        secs(percentile(&to_ready, 99.0)),
        secs(to_ready.last().copied().unwrap_or_default())
    );
    let (provider_per_object, provider_rows) = provider_rates(
        &provider_after_provisioning.requests,
        &BTreeMap::new(),
        n,
        None,
    );
    say!(
        "  provider requests:   {provider_per_object:.2} per object until all Ready ({provider_rows}); creates per identity: max {}, clusters made: {} for {n} objects",
        provider_after_provisioning
            .create_requests
            .values()
            .max()
            .copied()
            .unwrap_or(0),
        provider_after_provisioning
            .clusters_created
            .values()
            .sum::<u64>()
    );
    say!(
        "  API requests:        {:.2} per object until all Ready, {:.2} of them writes ({}); counted by a proxy between vigil run and the sandbox, from /readyz on",
        per(provisioning_api.total()),
        per(provisioning_api.writes()),
        provisioning_api.per_object(n)
    );
    say!(
        "  startup API requests: {} before /readyz ({})",
        api_at_start.total(),
        api_at_start.per_object(1)
    );
    say!(
        "  operator:            peak RSS {} MiB, CPU {} s when all Ready",
        fmt_opt(rss_provisioned),
        fmt_opt(cpu_provisioned)
    );
    let (rest_per_object_minute, rest_rows) = provider_rates(
        &rest_provider.requests,
        &provider_at_rest.requests,
        n,
        Some(minutes),
    );
    say!(
        "  at rest ({} from {} after all Ready):",
        secs(args.settle),
        secs(quiet_in)
    );
    say!(
        "    API writes:        {}   target 0: {}; API requests {} ({})",
        rest_api.writes(),
        if rest_api.writes() == 0 {
            "met"
        } else {
            "MISSED"
        },
        rest_api.total(),
        if rest_api.total() == 0 {
            "none".to_owned()
        } else {
            rest_api.per_object(1)
        }
    );
    say!(
        "    provider requests: {rest_per_object_minute:.2} per object per minute ({}) — drift checks every {} are {:.2}/object/min",
        if rest_rows.is_empty() {
            "none".to_owned()
        } else {
            rest_rows
        },
        secs(args.resync_interval),
        60.0 / args.resync_interval.as_secs_f64().max(1e-9)
    );
    say!(
        "    operator CPU:      {} s over the window",
        rest_cpu.map_or_else(|| "?".to_owned(), |c| format!("{c:.2}"))
    );
    let (delete_per_object, delete_rows) = provider_rates(
        &provider_after_delete.requests,
        &provider_before_delete.requests,
        n,
        None,
    );
    say!(
        "  deletion:            {n} deletes sent → all gone {}; provider requests {delete_per_object:.2} per object ({delete_rows}); API requests {:.2} per object ({}); clusters left at the provider: {left_at_provider}",
        secs(deletion),
        per(deletion_api.total()),
        deletion_api.per_object(n)
    );
    say!(
        "  operator at the end: peak RSS {} MiB, CPU {} s in all",
        fmt_opt(rss_end),
        fmt_opt(cpu_end)
    );
    say!("  vigil log:           {}", vigil.log_summary());
    drop(vigil);
    provider.shutdown().await;
    drop(sandbox);
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{} ms", d.as_millis())
}

fn fmt_opt(v: Option<f64>) -> String {
    v.map_or_else(|| "?".to_owned(), |v| format!("{v:.1}"))
}

/// Vigil's peak RSS (MiB) and CPU seconds so far.
fn usage(vigil: &Vigil) -> (Option<f64>, Option<f64>) {
    (
        rss_mib(vigil.pid).map(|(peak, _)| peak),
        vigil.cpu_seconds(),
    )
}

#[cfg(test)]
mod tests {
    use super::classify;

    #[test]
    fn requests_are_classified_as_rbac_would() {
        let cases = [
            (
                "GET",
                "/apis/vigil.dev/v1alpha1/kubernetesclusters?watch=true&resourceVersion=5",
                ("watch", "kubernetesclusters"),
            ),
            (
                "GET",
                "/apis/vigil.dev/v1alpha1/kubernetesclusters?limit=500",
                ("list", "kubernetesclusters"),
            ),
            (
                "PATCH",
                "/apis/vigil.dev/v1alpha1/namespaces/ns/kubernetesclusters/a/status",
                ("patch", "kubernetesclusters/status"),
            ),
            (
                "PATCH",
                "/apis/vigil.dev/v1alpha1/namespaces/ns/kubernetesclusters/a",
                ("patch", "kubernetesclusters"),
            ),
            (
                "PATCH",
                "/api/v1/namespaces/ns/secrets/a-kubeconfig?fieldManager=x&force=true",
                ("patch", "secrets"),
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/ns/events",
                ("create", "events"),
            ),
            ("GET", "/api/v1/namespaces/ns", ("get", "namespaces")),
            ("GET", "/apis", ("discovery", "/apis")),
        ];
        for (method, target, (verb, resource)) in cases {
            assert_eq!(
                classify(method, target),
                (verb, resource.to_owned()),
                "{method} {target}"
            );
        }
    }
}
