//! `vigil-bench hosted-clusters`: N KubernetesClusters of the article's shape, with no `provider`,
//! given to `vigil run` (its own process, on the host, `--default-cluster-provider hosted`) on the
//! real node of `../shared/kube/node-up.sh`: each becomes an upstream control plane as pods there.
//!
//! It prints:
//! - time from apply to `Ready`, p50 and max, as a watch of the bench sees it;
//! - memory of one hosted control plane: the resident memory of its pods' processes (etcd, two
//!   kube-apiservers, a kube-controller-manager), found by their pod's cgroup;
//! - Vigil's own CPU seconds and resident memory, in all and per cluster;
//! - Vigil's API requests to the management cluster at rest over `--settle`
//!   (`rest_client_requests_total`), writes apart;
//! - one cluster upgraded 1.28 → 1.29 while a client asks its API server every 100 ms: the
//!   upgrade's duration and the failed requests.
//!
//! Needs the node's exports and the control-plane images loaded into it, with the values file
//! `.ci/control-plane-images DIR` writes (`--control-plane-values`, or
//! `VIGIL_TEST_CONTROL_PLANE_VALUES`). The node has no storage provisioner: the bench makes a
//! hostPath PersistentVolume per cluster (it needs root, as the node does).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolume, Pod, Secret};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::json;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::ARTICLE_MANIFEST;
use vigil_testenv::hosted::{CatalogVersion, ControlPlaneImages, host_path_volume};
use vigil_testenv::wait_for;

use crate::support::http::http_get;
use crate::support::metrics::Reconciles;
use crate::support::node::Node;
use crate::support::stats::percentile;
use crate::support::usage::{cpu_seconds, rss_mib};
use crate::support::vigil::spawn_vigil;

#[derive(Debug, clap::Args)]
pub struct HostedClustersBench {
    /// Hosted clusters to provision.
    #[arg(long, default_value_t = 3)]
    clusters: usize,
    /// The chart values `.ci/control-plane-images` wrote (the catalog and etcd's image).
    #[arg(long, env = "VIGIL_TEST_CONTROL_PLANE_VALUES")]
    control_plane_values: PathBuf,
    /// How long the rest is measured, once every cluster is Ready.
    #[arg(long, default_value = "60s", value_parser = crate::support::duration::parse_duration)]
    settle: Duration,
    /// Skip the upgrade.
    #[arg(long)]
    no_upgrade: bool,
}

const CLASS: &str = "vigil-bench-hosted";
/// A guard against a run that never ends; nothing is timed by it.
const TIMEOUT: Duration = Duration::from_secs(600);

/// The catalog flags `vigil run` takes, from the values file.
fn catalog_flags(values: &std::path::Path) -> anyhow::Result<Vec<String>> {
    let images = ControlPlaneImages::read(values).map_err(anyhow::Error::msg)?;
    let pairs = |image: fn(&CatalogVersion) -> &str| {
        images
            .versions
            .iter()
            .map(|v| format!("{}={}", v.version, image(v)))
            .collect::<Vec<_>>()
            .join(",")
    };
    Ok(vec![
        "--hosted-etcd-image".to_owned(),
        images.etcd.clone(),
        "--hosted-apiserver-image".to_owned(),
        pairs(|v| &v.api_server),
        "--hosted-controller-manager-image".to_owned(),
        pairs(|v| &v.controller_manager),
    ])
}

fn ready(cluster: &KubernetesCluster) -> bool {
    cluster.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
    })
}

/// The resident memory (MiB) of the processes of the pods with these uids, from each
/// process's memory cgroup (`…/pod<uid>/…`, the kubelet's cgroupfs layout).
fn pods_rss_mib(uids: &[String]) -> f64 {
    let mut total = 0.0;
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    for entry in entries.flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cgroup) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
            continue;
        };
        let ours = cgroup.lines().any(|l| {
            uids.iter().any(|u| {
                l.contains(&format!("pod{u}")) || l.contains(&format!("pod{}", u.replace('-', "_")))
            })
        });
        if ours && let Some((_, rss)) = rss_mib(pid) {
            total += rss;
        }
    }
    total
}

pub async fn run(args: HostedClustersBench) -> anyhow::Result<()> {
    let node = Node::from_env()?;
    let catalog = catalog_flags(&args.control_plane_values)?;
    let client = crate::support::real_plane::client_from(&node.kubeconfig).await?;
    // The node may never have had Vigil installed: the CRD first (kept, as a chart keeps it).
    vigil_testenv::install_crd(&client, &vigil_apis::crds::kubernetes_cluster())
        .await
        .context("installing the KubernetesCluster CRD")?;
    let ns = format!("vigil-bench-hosted-{}", std::process::id());
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": ns, "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
            }}}))?,
        )
        .await
        .context("creating the namespace")?;
    let dir = std::env::temp_dir().join(&ns);
    let pvs: Api<PersistentVolume> = Api::all(client.clone());
    let mut volumes = Vec::new();
    for i in 0..args.clusters {
        let name = format!("{ns}-{i}");
        host_path_volume(&client, &name, &dir.join(format!("pv-{i}")), CLASS)
            .await
            .map_err(anyhow::Error::msg)?;
        volumes.push(name);
    }
    let outcome = measure(&args, &node, &client, &ns, &catalog).await;
    let _ = namespaces.delete(&ns, &DeleteParams::default()).await;
    for volume in &volumes {
        let _ = pvs.delete(volume, &DeleteParams::default()).await;
    }
    let _ = std::fs::remove_dir_all(&dir);
    outcome
}

async fn measure(
    args: &HostedClustersBench,
    node: &Node,
    client: &Client,
    ns: &str,
    catalog: &[String],
) -> anyhow::Result<()> {
    let mut flags: Vec<&str> = vec![
        "--controllers",
        "kubernetescluster",
        "--namespaces",
        ns,
        "--default-cluster-provider",
        "hosted",
        "--hosted-storage-class",
        CLASS,
        "--hosted-image-pull-policy",
        "Never",
    ];
    flags.extend(catalog.iter().map(String::as_str));
    let vigil = spawn_vigil(&node.kubeconfig, &flags).await?;
    let (_, idle_rss) = rss_mib(vigil.pid).unwrap_or_default();
    let cpu_start = cpu_seconds(vigil.pid).unwrap_or_default();
    println!(
        "hosted-clusters: {} clusters of the article's shape on node {} (no provider field: `hosted` by default)",
        args.clusters, node.name
    );

    let clusters: Api<KubernetesCluster> = Api::namespaced(client.clone(), ns);
    let mut applied = Vec::new();
    for i in 0..args.clusters {
        let mut cluster: KubernetesCluster = serde_saphyr::from_str(ARTICLE_MANIFEST)?;
        cluster.status = None;
        cluster.metadata.name = Some(format!("cluster-{i}"));
        cluster.spec.product.uuid.value = format!("7f000000-0000-4000-8000-{i:012}");
        clusters.create(&PostParams::default(), &cluster).await?;
        applied.push((cluster.name_any(), Instant::now()));
    }
    let mut to_ready = Vec::new();
    let mut pending = applied.clone();
    let started = Instant::now();
    while !pending.is_empty() {
        anyhow::ensure!(
            started.elapsed() < TIMEOUT,
            "clusters not Ready: {pending:?}"
        );
        let list = clusters.list(&ListParams::default()).await?;
        pending.retain(|(name, at)| {
            let done = list.items.iter().any(|c| c.name_any() == *name && ready(c));
            if done {
                to_ready.push(at.elapsed());
            }
            !done
        });
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    to_ready.sort();
    println!(
        "  apply → Ready: p50 {:.1} s, max {:.1} s (Kamaji's headline: 16 s)",
        percentile(&to_ready, 50.0).as_secs_f64(),
        to_ready.last().copied().unwrap_or_default().as_secs_f64()
    );

    // One control plane's memory, from its pods' processes.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let of_first = pods
        .list(&ListParams::default().labels("vigil.dev/cluster=cluster-0"))
        .await?;
    let uids: Vec<String> = of_first
        .items
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    println!(
        "  one hosted control plane ({} pods: etcd, 2 kube-apiservers, kube-controller-manager): {:.0} MiB resident (k0smotron reports 210–560 MiB)",
        uids.len(),
        pods_rss_mib(&uids)
    );

    // Vigil at rest.
    let metrics = |addr: String| async move {
        http_get(&addr, "/metrics")
            .await
            .map(|(_, body)| Reconciles::parse(&body))
    };
    let before = metrics(vigil.metrics_addr.clone()).await?;
    let cpu_ready = cpu_seconds(vigil.pid).unwrap_or_default();
    tokio::time::sleep(args.settle).await;
    let after = metrics(vigil.metrics_addr.clone()).await?;
    let cpu_rest = cpu_seconds(vigil.pid).unwrap_or_default() - cpu_ready;
    let (peak, rss) = rss_mib(vigil.pid).unwrap_or_default();
    let writes: f64 = ["POST", "PUT", "PATCH", "DELETE"]
        .iter()
        .map(|m| {
            after.requests.get(*m).copied().unwrap_or(0.0)
                - before.requests.get(*m).copied().unwrap_or(0.0)
        })
        .sum();
    let total: f64 = after.requests.values().sum::<f64>() - before.requests.values().sum::<f64>();
    let per_minute = total * 60.0 / args.settle.as_secs_f64() / args.clusters as f64;
    println!(
        "  Vigil: {:.2} CPU-s to provision them ({:.2} per cluster); RSS {:.1} MiB (idle {:.1}, +{:.2} per cluster), peak {:.1} MiB",
        cpu_ready - cpu_start,
        (cpu_ready - cpu_start) / args.clusters as f64,
        rss,
        idle_rss,
        (rss - idle_rss) / args.clusters as f64,
        peak
    );
    println!(
        "  at rest over {:.0} s: {} API requests to the management cluster ({per_minute:.1} per cluster per minute; writes {writes}), CPU {:.3} % of a core",
        args.settle.as_secs_f64(),
        after.requests_since(&before),
        100.0 * cpu_rest / args.settle.as_secs_f64()
    );

    if !args.no_upgrade {
        upgrade(client, ns, &clusters).await?;
    }

    let deleting = Instant::now();
    clusters
        .delete_collection(&DeleteParams::default(), &ListParams::default())
        .await?;
    wait_for(
        "every cluster deleted, nothing of them left",
        TIMEOUT,
        || async {
            let objects = clusters
                .list(&ListParams::default())
                .await
                .map(|l| l.items.len());
            let left = pods
                .list(&ListParams::default().labels("vigil.dev/cluster"))
                .await
                .map(|l| l.items.len());
            match (objects, left) {
                (Ok(0), Ok(0)) => Ok(Some(())),
                other => Err(format!("objects and pods left: {other:?}")),
            }
        },
    )
    .await?;
    println!(
        "  delete: every cluster and its pods gone in {:.1} s",
        deleting.elapsed().as_secs_f64()
    );
    drop(vigil);
    Ok(())
}

/// cluster-0 from 1.28 to 1.29 while a client asks its API server every 100 ms.
async fn upgrade(
    client: &Client,
    ns: &str,
    clusters: &Api<KubernetesCluster>,
) -> anyhow::Result<()> {
    let secret = Api::<Secret>::namespaced(client.clone(), ns)
        .get("cluster-0-kubeconfig")
        .await?;
    let yaml = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .map(|v| String::from_utf8_lossy(&v.0).into_owned())
        .context("the kubeconfig Secret's value")?;
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::from_yaml(&yaml)?,
        &Default::default(),
    )
    .await?;
    let hosted = Client::try_from(config)?;
    let namespaces: Api<Namespace> = Api::all(hosted.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "probe"}}))?,
        )
        .await;
    Api::<ConfigMap>::namespaced(hosted.clone(), "probe")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "probe"}}))?,
        )
        .await?;
    let stop = Arc::new(AtomicBool::new(false));
    let (requests, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let prober = {
        let (stop, requests, failed) = (stop.clone(), requests.clone(), failed.clone());
        let api: Api<ConfigMap> = Api::namespaced(hosted, "probe");
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            while !stop.load(Ordering::Relaxed) {
                tick.tick().await;
                requests.fetch_add(1, Ordering::Relaxed);
                if api.get("probe").await.is_err() {
                    failed.fetch_add(1, Ordering::Relaxed);
                }
            }
        })
    };
    let started = Instant::now();
    clusters
        .patch(
            "cluster-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubeVersion": "1.29"}})),
        )
        .await?;
    wait_for("cluster-0 at 1.29", TIMEOUT, || async {
        let upgraded = clusters.get("cluster-0").await.is_ok_and(|c| {
            ready(&c)
                && c.status.as_ref().is_some_and(|s| {
                    s.master_version
                        .as_deref()
                        .is_some_and(|v| v.starts_with("1.29."))
                        && s.conditions
                            .iter()
                            .any(|c| c.type_ == "Upgrading" && c.status == "False")
                })
        });
        Ok(upgraded.then_some(()))
    })
    .await?;
    let took = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    let _ = prober.await;
    println!(
        "  upgrade 1.28 → 1.29 of one cluster: {:.1} s (API servers, then the controller-manager, each rolled with a surge); {} requests every 100 ms, {} failed",
        took.as_secs_f64(),
        requests.load(Ordering::Relaxed),
        failed.load(Ordering::Relaxed)
    );
    Ok(())
}
