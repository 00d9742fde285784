//! `vigil-bench fidelity`: the sandbox beside a real control plane — upstream kube-apiserver and
//! kube-controller-manager v1.28 started by `../shared/kube/up.sh` — in one run: the time from
//! start to ready, then one fixed workload through `kube::Client` on each (ConfigMap create, get,
//! list, update and delete, with a watch that must see every change), phase by phase.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::{Api, Client};

use crate::support::real_plane::{RealControlPlane, client_from, tempdir};
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
    let sandbox = spawn_sandbox(&["--no-kubelet"]).await?;
    let sandbox_ready = started.elapsed();
    let sandbox_phases = workload(&client_from(sandbox.kubeconfig()).await?, args.objects).await?;
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
