//! `vigil-bench fidelity`: the sandbox beside a real control plane — upstream kube-apiserver and
//! kube-controller-manager v1.28 started by `../shared/kube/up.sh` — in one run: the time from
//! start to ready, then one fixed workload through `kube::Client` on each (ConfigMap create, get,
//! list, update and delete, with a watch that must see every change), phase by phase.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

use crate::support::sandbox::spawn_sandbox;

#[derive(Debug, clap::Args)]
pub struct FidelityBench {
    /// The real control plane's folder (its `up.sh` and `down.sh`).
    #[arg(long, default_value = "../shared/kube")]
    kube_dir: PathBuf,
    /// ConfigMaps in the workload.
    #[arg(long, default_value_t = 300)]
    objects: usize,
    /// The real API server's port; the other ports follow it, so one already running on the
    /// default ports (a test run's) is left alone.
    #[arg(long, default_value_t = 26443)]
    apiserver_port: u16,
}

/// How long each phase of the workload took.
#[derive(Debug, Default)]
struct Phases {
    create: Duration,
    get: Duration,
    list: Duration,
    update: Duration,
    delete: Duration,
    /// From the first create until the watch had delivered every ADDED, MODIFIED and DELETED.
    watch_all: Duration,
    total: Duration,
}

pub async fn run(args: FidelityBench) -> anyhow::Result<()> {
    say!(
        "fidelity: {} ConfigMaps created, read, listed, updated and deleted one by one, watched",
        args.objects
    );

    let started = Instant::now();
    let temp = tempdir("vigil-bench-fidelity")?;
    let sandbox_kubeconfig = temp.join("sandbox.kubeconfig");
    let sandbox = spawn_sandbox(&[
        "--no-kubelet",
        "--kubeconfig-out",
        &sandbox_kubeconfig.display().to_string(),
    ])
    .await?;
    let sandbox_ready = started.elapsed();
    let sandbox_phases = workload(&client_from(&sandbox_kubeconfig).await?, args.objects).await?;
    drop(sandbox);

    let work = temp.join("kube");
    let started = Instant::now();
    let up = RealControlPlane::up(&args.kube_dir, &work, args.apiserver_port).await?;
    let real_ready = started.elapsed();
    let real_phases = workload(&client_from(&up.kubeconfig).await?, args.objects).await;
    up.down().await;
    let real_phases = real_phases?;
    let _ = std::fs::remove_dir_all(&temp);

    say!(
        "{:<34} {:>14} {:>18} {:>8}",
        "",
        "sandbox",
        "kube-apiserver 1.28",
        "ratio"
    );
    row("start to ready", sandbox_ready, real_ready);
    row(
        "create (sequential)",
        sandbox_phases.create,
        real_phases.create,
    );
    row("get each", sandbox_phases.get, real_phases.get);
    row("list all", sandbox_phases.list, real_phases.list);
    row(
        "update each (merge patch)",
        sandbox_phases.update,
        real_phases.update,
    );
    row("delete each", sandbox_phases.delete, real_phases.delete);
    row(
        "watch saw every event",
        sandbox_phases.watch_all,
        real_phases.watch_all,
    );
    row("workload in all", sandbox_phases.total, real_phases.total);
    say!(
        "(the real start includes etcd's; its first start also unpacks the binaries and makes \
         certificates, which later starts reuse)"
    );
    Ok(())
}

fn row(what: &str, sandbox: Duration, real: Duration) {
    let ratio = real.as_secs_f64() / sandbox.as_secs_f64().max(1e-9);
    say!(
        "{what:<34} {:>14} {:>18} {:>7.1}x",
        human(sandbox),
        human(real),
        ratio
    );
}

fn human(d: Duration) -> String {
    if d >= Duration::from_secs(1) {
        format!("{:.2} s", d.as_secs_f64())
    } else {
        format!("{:.1} ms", d.as_secs_f64() * 1000.0)
    }
}

/// The fixed workload, in a namespace of its own (deleted afterwards).
async fn workload(client: &Client, objects: usize) -> anyhow::Result<Phases> {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = format!("vigil-bench-fidelity-{}", std::process::id());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await
        .context("creating the namespace")?;
    let result = phases(client, &ns, objects).await;
    let _ = namespaces.delete(&ns, &DeleteParams::background()).await;
    result
}

async fn phases(client: &Client, ns: &str, objects: usize) -> anyhow::Result<Phases> {
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), ns);
    let names: Vec<String> = (0..objects).map(|i| format!("cm-{i:05}")).collect();
    let from = api
        .list_metadata(&ListParams::default())
        .await?
        .metadata
        .resource_version
        .unwrap_or_default();
    // Every object is added, modified and deleted once: the watch must see all of it.
    let expected = objects * 3;
    let watch_api = api.clone();
    let watcher = tokio::spawn(async move {
        let mut seen = 0;
        let mut from = from;
        // A server may end a watch early; resume from the last version seen.
        while seen < expected {
            let mut stream = watch_api
                .watch(&WatchParams::default().timeout(290), &from)
                .await?
                .boxed();
            while let Some(event) = stream.try_next().await? {
                match event {
                    WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                        from = o.metadata.resource_version.unwrap_or_default();
                        seen += 1;
                    }
                    WatchEvent::Bookmark(b) => from = b.metadata.resource_version,
                    WatchEvent::Error(e) => anyhow::bail!("watch error: {e:?}"),
                }
                if seen == expected {
                    break;
                }
            }
        }
        Ok::<Instant, anyhow::Error>(Instant::now())
    });

    let mut p = Phases::default();
    let start = Instant::now();
    let t = Instant::now();
    for name in &names {
        let cm: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "labels": {"bench": "fidelity"}},
            "data": {"key": "value"},
        }))?;
        api.create(&PostParams::default(), &cm).await?;
    }
    p.create = t.elapsed();
    let t = Instant::now();
    for name in &names {
        api.get(name).await?;
    }
    p.get = t.elapsed();
    let t = Instant::now();
    let listed = api
        .list(&ListParams::default().labels("bench=fidelity"))
        .await?;
    anyhow::ensure!(
        listed.items.len() == objects,
        "listed {}",
        listed.items.len()
    );
    p.list = t.elapsed();
    let t = Instant::now();
    for name in &names {
        let patch = serde_json::json!({"data": {"key": "changed"}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
    }
    p.update = t.elapsed();
    let t = Instant::now();
    for name in &names {
        api.delete(name, &DeleteParams::default()).await?;
    }
    p.delete = t.elapsed();
    p.total = start.elapsed();
    let all_seen = tokio::time::timeout(Duration::from_secs(60), watcher)
        .await
        .context("the watch did not deliver every event within 60 s")???;
    p.watch_all = all_seen.duration_since(start);
    Ok(p)
}

/// A control plane started by `up.sh` on ports of its own; stopped by `down`.
struct RealControlPlane {
    kube_dir: PathBuf,
    work: PathBuf,
    kubeconfig: PathBuf,
}

impl RealControlPlane {
    async fn up(kube_dir: &Path, work: &Path, port: u16) -> anyhow::Result<Self> {
        let up = kube_dir.join("up.sh");
        anyhow::ensure!(
            up.exists(),
            "no real control plane at {} (--kube-dir)",
            kube_dir.display()
        );
        let offset = |delta: i32| (i32::from(port) + delta).to_string();
        let status = tokio::process::Command::new(&up)
            .arg(work)
            .env("KUBE_APISERVER_PORT", port.to_string())
            .env("KUBE_ETCD_PORT", offset(-4064))
            .env("KUBE_ETCD_PEER_PORT", offset(-4063))
            .env("KUBE_KCM_PORT", offset(14))
            .stdout(std::process::Stdio::null())
            .status()
            .await
            .with_context(|| format!("running {}", up.display()))?;
        let plane = Self {
            kube_dir: kube_dir.to_owned(),
            work: work.to_owned(),
            kubeconfig: work.join("kubeconfig"),
        };
        if !status.success() {
            plane.down().await;
            anyhow::bail!("{} failed: {status}", up.display());
        }
        Ok(plane)
    }

    async fn down(self) {
        let _ = tokio::process::Command::new(self.kube_dir.join("down.sh"))
            .arg(&self.work)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await;
    }
}

async fn client_from(path: &Path) -> anyhow::Result<Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(Client::try_from(config)?)
}

fn tempdir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
