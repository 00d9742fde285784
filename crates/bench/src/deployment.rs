//! `vigil-bench deployment`: one scenario — a Deployment of many replicas created and rolled out,
//! then rolled to a new template — on the sandbox and beside it on the real control plane of
//! `../shared/kube` (upstream kube-apiserver, kube-controller-manager and etcd v1.28, started
//! by its `up.sh` on the bench's own ports). On both, the simulated kubelet runs in this process
//! and plays the node, so each server sees the same client traffic and only the control plane
//! differs.
//!
//! Figures per phase: time until every replica is updated and available; requests sent by the
//! kubelet and the bench (counted client-side, on both); requests the real API server served in
//! all (its `apiserver_request_total`, which adds the controller manager's — the sandbox runs its
//! controllers in-process, without requests); writes (how far the store's resourceVersion moved:
//! etcd's revision on the real one); and the servers' resident memory.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::wait::await_condition;
use kube::{Client, Config};
use serde_json::json;
use vigil_kubelet::{Kubelet, KubeletConfig};

use crate::support::real_plane::{RealControlPlane, config_from, tempdir};
use crate::support::sandbox::spawn_sandbox;
use crate::support::usage::rss_mib;

#[derive(Debug, clap::Args)]
pub struct DeploymentBench {
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 1_000)]
    replicas: i32,
    /// maxSurge and maxUnavailable of the rolling update (percent).
    #[arg(long, default_value_t = 25)]
    percent: u32,
    /// Run the scenario on the sandbox only (no real control plane).
    #[arg(long)]
    sandbox_only: bool,
    /// The real control plane's folder (its `up.sh` and `down.sh`).
    #[arg(long, default_value = "../shared/kube")]
    kube_dir: PathBuf,
    /// The real API server's port; etcd listens on it − 4064 (peer − 4063), the controller
    /// manager on it + 14, so one already running on other ports is left alone.
    #[arg(long, default_value_t = 26443)]
    apiserver_port: u16,
}

const NS: &str = "bench";
const NAME: &str = "web";
/// The most one phase may take before the bench gives up.
const PHASE_LIMIT: Duration = Duration::from_secs(900);

/// What one phase (rollout) cost.
#[derive(Debug, Default, Clone, Copy)]
struct Phase {
    took: Duration,
    /// Sent by the kubelet and the bench.
    client_requests: u64,
    /// Served by the API server in all (the real one's metric; `None` on the sandbox).
    served_requests: Option<u64>,
    /// How far the store's resourceVersion moved.
    writes: u64,
}

/// The scenario's figures on one server.
#[derive(Debug, Default)]
struct Figures {
    create: Phase,
    update: Phase,
    /// (process, peak MiB, now MiB) of each server process.
    memory: Vec<(String, f64, f64)>,
}

/// A client whose every request is counted.
fn counting_client(config: Config, count: Arc<AtomicU64>) -> anyhow::Result<Client> {
    let layer =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            count.fetch_add(1, Ordering::Relaxed);
            request
        });
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build())
}

/// The sum of `apiserver_request_total` over every label set, from the server's /metrics.
async fn served_requests(client: &Client) -> anyhow::Result<u64> {
    let text = client
        .request_text(http::Request::get("/metrics").body(Vec::new())?)
        .await
        .context("GET /metrics")?;
    Ok(text
        .lines()
        .filter(|l| l.starts_with("apiserver_request_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64)
}

/// The store's current resourceVersion (a list's): etcd's revision on a real server.
async fn resource_version(client: &Client) -> anyhow::Result<u64> {
    let list = Api::<Namespace>::all(client.clone())
        .list(&ListParams::default().limit(1))
        .await?;
    list.metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .context("a list without a numeric resourceVersion")
}

/// Waits until the current generation is rolled out: every replica updated and available, no
/// old one left (through a watch, so waiting adds no polling requests).
async fn wait_rolled_out(api: &Api<Deployment>, replicas: i32) -> anyhow::Result<()> {
    let rolled_out = move |d: Option<&Deployment>| {
        d.is_some_and(|d| {
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation == d.metadata.generation
                && s.replicas == Some(replicas)
                && s.updated_replicas == Some(replicas)
                && s.available_replicas == Some(replicas)
        })
    };
    tokio::time::timeout(PHASE_LIMIT, await_condition(api.clone(), NAME, rolled_out))
        .await
        .map_err(|_| anyhow::anyhow!("the rollout did not complete in {PHASE_LIMIT:?}"))??;
    Ok(())
}

/// Runs one phase (`act`, then waiting for the rollout) and measures it.
async fn phase(
    client: &Client,
    count: &AtomicU64,
    real: bool,
    replicas: i32,
    act: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<Phase> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let served_before = if real {
        Some(served_requests(client).await?)
    } else {
        None
    };
    let rv_before = resource_version(client).await?;
    let sent_before = count.load(Ordering::Relaxed);
    let started = Instant::now();
    act.await?;
    wait_rolled_out(&api, replicas).await?;
    let took = started.elapsed();
    let client_requests = count.load(Ordering::Relaxed) - sent_before;
    let writes = resource_version(client).await?.saturating_sub(rv_before);
    let served_requests = match served_before {
        Some(before) => Some(served_requests(client).await?.saturating_sub(before)),
        None => None,
    };
    Ok(Phase {
        took,
        client_requests,
        served_requests,
        writes,
    })
}

/// The scenario on the server `config` reaches; `processes` are the server's (name, pid).
async fn scenario(
    args: &DeploymentBench,
    config: Config,
    real: bool,
    processes: &[(&str, u32)],
) -> anyhow::Result<Figures> {
    let count = Arc::new(AtomicU64::new(0));
    let client = counting_client(config, count.clone())?;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    // Pods are admitted once the namespace's default ServiceAccount exists (real clusters).
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    tokio::time::timeout(
        Duration::from_secs(60),
        await_condition(accounts, "default", |sa: Option<&ServiceAccount>| {
            sa.is_some()
        }),
    )
    .await
    .context("no default ServiceAccount in 60 s")??;
    let kubelet = Kubelet::start(
        client.clone(),
        KubeletConfig {
            node_name: "vigil-bench-node".into(),
            namespace: Some(NS.into()),
            ..KubeletConfig::default()
        },
    )
    .await?;

    let api: Api<Deployment> = Api::namespaced(client.clone(), NS);
    let percent = format!("{}%", args.percent);
    let body: Deployment = serde_json::from_value(json!({
        "metadata": {"name": NAME},
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": {"app": NAME}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": percent, "maxUnavailable": percent}},
            "template": {"metadata": {"labels": {"app": NAME}},
                         "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}},
        },
    }))?;
    let create = phase(&client, &count, real, args.replicas, async {
        api.create(&PostParams::default(), &body).await?;
        Ok(())
    })
    .await?;
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}});
    let update = phase(&client, &count, real, args.replicas, async {
        api.patch(NAME, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    })
    .await?;
    let memory = processes
        .iter()
        .map(|(name, pid)| {
            let (peak, now) = rss_mib(*pid).unwrap_or_default();
            ((*name).to_owned(), peak, now)
        })
        .collect();
    kubelet.stop().await;
    Ok(Figures {
        create,
        update,
        memory,
    })
}

pub async fn run(args: DeploymentBench) -> anyhow::Result<()> {
    let sandbox = spawn_sandbox(&["--no-kubelet"]).await?;
    let pid = sandbox.process.id().context("sandbox pid")?;
    let config = Config::new(sandbox.url.parse()?);
    let on_sandbox = scenario(&args, config, false, &[("vigil sandbox", pid)]).await?;
    drop(sandbox);

    let on_real = if args.sandbox_only {
        None
    } else {
        let temp = tempdir("vigil-bench-deployment")?;
        let plane =
            RealControlPlane::up(&args.kube_dir, &temp.join("kube"), args.apiserver_port).await?;
        let processes: Vec<(&str, u32)> = ["kube-apiserver", "kube-controller-manager", "etcd"]
            .into_iter()
            .filter_map(|name| Some((name, plane.pid(name)?)))
            .collect();
        let figures = async {
            let config = config_from(&plane.kubeconfig).await?;
            scenario(&args, config, true, &processes).await
        }
        .await;
        plane.down().await;
        let _ = std::fs::remove_dir_all(&temp);
        Some(figures?)
    };
    print(&args, &on_sandbox, on_real.as_ref());
    Ok(())
}

fn print(args: &DeploymentBench, sandbox: &Figures, real: Option<&Figures>) {
    say!(
        "vigil bench deployment: {} replicas, maxSurge = maxUnavailable = {}%; the simulated kubelet \
         (in the bench process) plays the node on both servers",
        args.replicas,
        args.percent
    );
    say!(
        "{:<46} {:>16} {:>28}",
        "",
        "sandbox",
        "kube-apiserver+kcm 1.28"
    );
    let row = |what: &str, s: String, r: Option<String>| {
        say!("{what:<46} {s:>16} {:>28}", r.unwrap_or_else(|| "-".into()));
    };
    for (label, pick) in [
        ("create", (|f: &Figures| f.create) as fn(&Figures) -> Phase),
        ("new template", |f: &Figures| f.update),
    ] {
        let s = pick(sandbox);
        let r = real.map(pick);
        row(
            &format!("{label}: all updated and available"),
            secs(s.took),
            r.map(|r| secs(r.took)),
        );
        row(
            &format!("{label}: requests by kubelet + bench"),
            s.client_requests.to_string(),
            r.map(|r| r.client_requests.to_string()),
        );
        row(
            &format!("{label}: requests served in all"),
            "(loops in-process)".into(),
            r.and_then(|r| r.served_requests).map(|n| n.to_string()),
        );
        row(
            &format!("{label}: writes (resourceVersion moved)"),
            s.writes.to_string(),
            r.map(|r| r.writes.to_string()),
        );
    }
    let total = |f: &Figures| {
        let peak: f64 = f.memory.iter().map(|(_, p, _)| p).sum();
        let now: f64 = f.memory.iter().map(|(_, _, n)| n).sum();
        format!("{peak:.0} / {now:.0} MiB")
    };
    row(
        "server RSS, peak / at the end",
        total(sandbox),
        real.map(total),
    );
    if let Some(real) = real {
        let parts: Vec<String> = real
            .memory
            .iter()
            .map(|(name, peak, now)| format!("{name} {peak:.0} / {now:.0}"))
            .collect();
        say!(
            "  real server RSS by process (MiB, peak / at the end): {}",
            parts.join(", ")
        );
    }
}

fn secs(d: Duration) -> String {
    format!("{:.2} s", d.as_secs_f64())
}
