//! KubernetesCluster's `hosted` provider on a real node (CI's third stage): Vigil installed by its
//! chart with the control-plane images of `.ci/control-plane-images`, then the article's manifest
//! as it is (no `provider` field): the default in a cluster is a hosted control plane, etcd and
//! two kube-apiservers and a kube-controller-manager running as pods of the node, in a namespace
//! that enforces the `restricted` Pod Security Standard.
//!
//! What it checks, in order:
//! - a `kubeVersion` outside the catalog is refused: `Degraded` names the catalog's versions and
//!   nothing of that cluster is created;
//! - the article's cluster gets Ready; through the `<name>-kubeconfig` Secret, the hosted API
//!   server reports v1.28 and takes a namespace and a ConfigMap;
//! - every control-plane pod deleted at once: the cluster comes back with its data;
//! - `kubeVersion` 1.28 → 1.29 while a client asks the hosted API server every 100 ms: the
//!   upgrade completes (`status.masterVersion` 1.29.14) and not one request fails;
//! - `deletionPolicy: Orphan`, the object deleted: the control plane keeps serving; the manifest
//!   applied again adopts it, by identity, with its data;
//! - deleted with the default `Delete`: nothing that carries the cluster's label is left.
//!
//! Needs a node (`../shared/kube/node-up.sh`), Vigil's image (`VIGIL_TEST_IMAGE`), the
//! control-plane images loaded into the node with the values file `.ci/control-plane-images`
//! prints (`VIGIL_TEST_CONTROL_PLANE_VALUES`) and Helm (`VIGIL_HELM`); without them it prints a
//! note and passes. The node has no storage provisioner, so the test makes etcd's
//! PersistentVolumes itself (hostPath, owned by the non-root user etcd runs as), as an
//! administrator of such a cluster would. It prints what it measures (`--nocapture`).

use crate::node_support;
use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Namespace, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use node_support::{diagnose, node, split_image};
use serde_json::json;
use support::{Helm, chart_dir};
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::ARTICLE_MANIFEST;
use vigil_testenv::hosted::host_path_volume;
use vigil_testenv::{TestEnv, wait_for};

/// The article's cluster.
const NAME: &str = "my-custom-cluster-for-backup";
/// The label on everything of a hosted control plane.
const CLUSTER_LABEL: &str = "vigil.dev/cluster";
/// etcd's claims are bound to these volumes (no provisioner on the node).
const STORAGE_CLASS: &str = "vigil-hosted-test";
/// Bound on each wait (a loaded CI machine is slow; nothing is timed by it).
const WAIT: Duration = Duration::from_secs(240);

fn article() -> KubernetesCluster {
    let mut cluster: KubernetesCluster =
        serde_saphyr::from_str(ARTICLE_MANIFEST).expect("the article's manifest");
    cluster.status = None;
    cluster
}

fn condition(cluster: &KubernetesCluster, type_: &str) -> Option<(String, String, String)> {
    let c = cluster
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn ready(cluster: &KubernetesCluster) -> bool {
    condition(cluster, "Ready").is_some_and(|(status, _, _)| status == "True")
}

/// Waits until the KubernetesCluster `name` satisfies `done`; on timeout, says where it was.
async fn wait_cluster(
    clusters: &Api<KubernetesCluster>,
    name: &str,
    what: &str,
    done: impl Fn(&KubernetesCluster) -> bool,
) -> KubernetesCluster {
    let result = wait_for(what, WAIT, || async {
        match clusters.get_opt(name).await {
            Ok(Some(c)) if done(&c) => Ok(Some(c)),
            Ok(Some(c)) => Err(format!("{:?}", c.status)),
            Ok(None) => Err("no such object".into()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    result.unwrap_or_else(|e| panic!("{e}"))
}

/// A client of the hosted cluster, from the kubeconfig Secret the controller keeps.
async fn hosted_client(secrets: &Api<Secret>) -> Client {
    let secret = secrets
        .get(&format!("{NAME}-kubeconfig"))
        .await
        .expect("the kubeconfig Secret");
    let data = secret.data.expect("data");
    let yaml = String::from_utf8(data.get("value").expect("its `value`").0.clone())
        .expect("a UTF-8 kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&yaml).expect("a kubeconfig");
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("a client config");
    config.connect_timeout = Some(Duration::from_secs(2));
    config.read_timeout = Some(Duration::from_secs(5));
    Client::try_from(config).expect("a client")
}

/// How many objects carrying the cluster's label are left, by kind (those that are not zero).
async fn left(client: &Client, ns: &str, name: &str) -> Vec<String> {
    let params = ListParams::default().labels(&format!("{CLUSTER_LABEL}={name}"));
    macro_rules! count {
        ($($kind:ty),*) => {{
            let mut out = Vec::new();
            $(
                let n = Api::<$kind>::namespaced(client.clone(), ns)
                    .list(&params)
                    .await
                    .map(|l| l.items.len())
                    .unwrap_or(usize::MAX);
                if n != 0 {
                    out.push(format!("{} {}", n, stringify!($kind)));
                }
            )*
            out
        }};
    }
    count!(
        Pod,
        Service,
        Secret,
        ConfigMap,
        PersistentVolumeClaim,
        StatefulSet,
        Deployment,
        PodDisruptionBudget
    )
}

/// Asks the hosted API server for the ConfigMap every 100 ms until told to stop; counts the
/// requests and the failures (with the first few errors).
struct Prober {
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
    failures: Arc<std::sync::Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    fn start(client: Client) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let failures = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (s, r, f) = (stop.clone(), requests.clone(), failures.clone());
        let task = tokio::spawn(async move {
            let api: Api<ConfigMap> = Api::namespaced(client, "app");
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            while !s.load(Ordering::Relaxed) {
                tick.tick().await;
                r.fetch_add(1, Ordering::Relaxed);
                let started = Instant::now();
                if let Err(e) = api.get("survivor").await {
                    f.lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push(format!("after {:?}: {e}", started.elapsed()));
                }
            }
        });
        Self {
            stop,
            requests,
            failures,
            task,
        }
    }

    async fn finish(self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.task.await;
        let failures = self
            .failures
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        (self.requests.load(Ordering::Relaxed), failures)
    }
}

/// hostPath PersistentVolumes for etcd (the node has no provisioner).
async fn make_volumes(
    client: &Client,
    dir: &std::path::Path,
    tag: &str,
    count: usize,
) -> Vec<String> {
    let mut names = Vec::new();
    for i in 0..count {
        let name = format!("{tag}-{i}");
        host_path_volume(client, &name, &dir.join(format!("pv-{i}")), STORAGE_CLASS)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        names.push(name);
    }
    names
}

/// Undoes what the test made outside its namespace, also when it fails: the release (its
/// cluster-scoped RBAC) and the PersistentVolumes with their directories.
struct Cleanup {
    helm: Helm,
    release: String,
    namespace: String,
    kubeconfig: std::path::PathBuf,
    volumes: Vec<String>,
    home: std::path::PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = self.helm.try_run(&[
            "uninstall",
            &self.release,
            "--namespace",
            &self.namespace,
            "--wait",
        ]);
        let (kubeconfig, volumes) = (self.kubeconfig.clone(), self.volumes.clone());
        // A runtime of its own: Drop runs outside the test's (or while it unwinds).
        let _ = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async {
                let client = support::client(&kubeconfig).await;
                let pvs: Api<PersistentVolume> = Api::all(client);
                for volume in &volumes {
                    let _ = pvs.delete(volume, &DeleteParams::default()).await;
                }
            });
        })
        .join();
        let _ = std::fs::remove_dir_all(&self.home);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_control_planes_on_a_real_node() {
    let test = "hosted_control_planes_on_a_real_node";
    let Some(node) = node(test) else { return };
    let Some(control_plane_values) = std::env::var("VIGIL_TEST_CONTROL_PLANE_VALUES")
        .ok()
        .filter(|v| !v.is_empty())
    else {
        eprintln!(
            "skipped {test}: no VIGIL_TEST_CONTROL_PLANE_VALUES (run .ci/control-plane-images DIR, load its archives into the node)"
        );
        return;
    };
    let home = std::env::temp_dir().join(format!("vigil-node-hosted-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("helm home");
    let Some(helm) = Helm::find(&node.kubeconfig, &home) else {
        eprintln!("skipped {test}: no helm (set VIGIL_HELM or put helm on PATH)");
        return;
    };
    let env = TestEnv::start().await.expect("the node's API server");
    let client: Client = env.client();
    let ns = env.namespace().to_owned();
    let suffix = ns.trim_start_matches("vigil-test-").to_owned();
    let release = format!("vigil-{suffix}");
    // The control plane must pass the restricted Pod Security Standard.
    Api::<Namespace>::all(client.clone())
        .patch(
            &ns,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
                "pod-security.kubernetes.io/enforce-version": "latest",
            }}})),
        )
        .await
        .expect("the namespace enforces restricted");
    let volumes = make_volumes(&client, &home, &format!("vigil-hosted-{suffix}"), 2).await;

    let (repository, tag) = split_image(&node.image);
    let values = json!({
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "replicaCount": 1,
        "kubernetesCluster": {"hosted": {"storageClass": STORAGE_CLASS, "imagePullPolicy": "Never"}},
    });
    let values_file = home.join("values.yaml");
    std::fs::write(&values_file, values.to_string()).expect("values file");
    let values_file = values_file.to_string_lossy().into_owned();
    let chart = chart_dir();
    let install = helm.try_run(&[
        "install",
        &release,
        &chart,
        "-f",
        &control_plane_values,
        "-f",
        &values_file,
        "--namespace",
        &ns,
        "--wait",
        "--timeout",
        "180s",
    ]);
    if let Err(e) = install {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let cleanup = Cleanup {
        helm: Helm::find(&node.kubeconfig, &home).expect("helm"),
        release: release.clone(),
        namespace: ns.clone(),
        kubeconfig: node.kubeconfig.clone(),
        volumes: volumes.clone(),
        home: home.clone(),
    };
    let clusters: Api<KubernetesCluster> = Api::namespaced(client.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);

    // A version outside the catalog: refused, nothing made.
    let mut refused = article();
    refused.metadata.name = Some("refused".into());
    refused.spec.kube_version = "1.27".into();
    refused.spec.product.uuid.value = "0b9e4d5c-0000-4000-8000-000000000127".into();
    clusters
        .create(&PostParams::default(), &refused)
        .await
        .expect("create the refused cluster");
    let seen = wait_cluster(&clusters, "refused", "1.27 refused", |c| {
        condition(c, "Degraded").is_some_and(|(s, _, m)| s == "True" && m.contains("1.28.0"))
    })
    .await;
    let (_, reason, message) = condition(&seen, "Degraded").expect("Degraded");
    eprintln!("node_hosted: kubeVersion 1.27 refused: {reason}: {message}");
    assert!(message.contains("1.29.14"), "{message}");
    assert_eq!(left(&client, &ns, "refused").await, Vec::<String>::new());
    clusters
        .delete("refused", &DeleteParams::default())
        .await
        .expect("delete the refused cluster");

    // The article's manifest as it is: a hosted control plane.
    let applied = Instant::now();
    clusters
        .create(&PostParams::default(), &article())
        .await
        .expect("create the article's cluster");
    let result = wait_for("the article's cluster Ready", WAIT, || async {
        match clusters.get_opt(NAME).await {
            Ok(Some(c)) if ready(&c) => Ok(Some(c)),
            Ok(c) => Err(format!("{:?}", c.and_then(|c| c.status))),
            Err(e) => Err(e.to_string()),
        }
    })
    .await;
    let cluster = match result {
        Ok(c) => c,
        Err(e) => panic!("{e}\n{}", diagnose(&client, &ns).await),
    };
    let to_ready = applied.elapsed();
    let status = cluster.status.clone().expect("status");
    eprintln!(
        "node_hosted: apply → Ready {:.1} s; provider {:?}, id {:?}, {:?} at {:?}",
        to_ready.as_secs_f64(),
        status.provider,
        status.cluster_id,
        status.master_version,
        status.api_server_url
    );
    assert_eq!(status.provider.as_deref(), Some("hosted"));
    assert!(
        status
            .master_version
            .as_deref()
            .is_some_and(|v| v.starts_with("1.28.")),
        "{status:?}"
    );
    let id = status.cluster_id.clone().expect("a cluster id");

    // kubectl's path: the kubeconfig Secret, then the hosted API server itself.
    let hosted = hosted_client(&secrets).await;
    let version = hosted
        .apiserver_version()
        .await
        .expect("the hosted /version");
    assert!(version.git_version.starts_with("v1.28."), "{version:?}");
    Api::<Namespace>::all(hosted.clone())
        .create(
            &PostParams::default(),
            &support::json(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "app"}}),
            ),
        )
        .await
        .expect("a namespace in the hosted cluster");
    Api::<ConfigMap>::namespaced(hosted.clone(), "app")
        .create(
            &PostParams::default(),
            &support::json(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "survivor"}, "data": {"kept": "yes"}})),
        )
        .await
        .expect("a ConfigMap in the hosted cluster");
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let cp = ListParams::default().labels(&format!("{CLUSTER_LABEL}={NAME}"));
    let running = pods.list(&cp).await.expect("list pods").items;
    eprintln!(
        "node_hosted: control-plane pods: {}",
        running
            .iter()
            .map(|p| p.name_any())
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(
        running.len() >= 4,
        "etcd, two API servers, a controller-manager"
    );

    // Every control-plane pod deleted at once: back, with its data, once every pod is a new one
    // (the old ones serve out their shutdown delay meanwhile).
    let old: Vec<String> = running
        .iter()
        .filter_map(|p| p.metadata.uid.clone())
        .collect();
    let deleted = Instant::now();
    pods.delete_collection(&DeleteParams::default(), &cp)
        .await
        .expect("delete every control-plane pod");
    let replaced = wait_for("every control-plane pod replaced", WAIT, || async {
        let now = pods.list(&cp).await.map_err(|e| e.to_string())?.items;
        let ready = |p: &Pod| {
            p.status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        };
        let old_left = now
            .iter()
            .filter(|p| p.metadata.uid.as_ref().is_some_and(|u| old.contains(u)))
            .count();
        let new_ready = now.iter().filter(|p| ready(p)).count();
        if old_left == 0 && new_ready >= 4 {
            Ok(Some(()))
        } else {
            Err(format!(
                "{old_left} old pods left, {new_ready} new ones ready"
            ))
        }
    })
    .await;
    if let Err(e) = replaced {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let back = wait_for("the ConfigMap served again", WAIT, || async {
        match Api::<ConfigMap>::namespaced(hosted.clone(), "app")
            .get("survivor")
            .await
        {
            Ok(cm) => Ok(Some(cm)),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        back.data.and_then(|d| d.get("kept").cloned()).as_deref(),
        Some("yes")
    );
    wait_cluster(&clusters, NAME, "Ready again", ready).await;
    eprintln!(
        "node_hosted: every control-plane pod deleted → all replaced, data served and Ready {:.1} s",
        deleted.elapsed().as_secs_f64()
    );

    // 1.28 → 1.29 under a client asking every 100 ms.
    let prober = Prober::start(hosted.clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let upgrade = Instant::now();
    clusters
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubeVersion": "1.29"}})),
        )
        .await
        .expect("ask for 1.29");
    let upgraded = wait_cluster(&clusters, NAME, "upgraded to 1.29", |c| {
        ready(c)
            && c.status.as_ref().is_some_and(|s| {
                s.master_version.as_deref() == Some("1.29.14")
                    && condition(c, "Upgrading").is_some_and(|(st, _, _)| st == "False")
            })
    })
    .await;
    let upgrade_time = upgrade.elapsed();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (requests, failures) = prober.finish().await;
    eprintln!(
        "node_hosted: upgrade 1.28 → 1.29 {:.1} s; {requests} requests every 100 ms, {} failed; masterVersion {:?}",
        upgrade_time.as_secs_f64(),
        failures.len(),
        upgraded
            .status
            .as_ref()
            .and_then(|s| s.master_version.clone())
    );
    assert!(
        failures.is_empty(),
        "requests failed during the upgrade: {failures:?}"
    );
    let version = hosted
        .apiserver_version()
        .await
        .expect("the hosted /version");
    assert_eq!(version.git_version, "v1.29.14");

    // Orphan: the object goes, the control plane stays; the manifest again adopts it.
    clusters
        .patch(
            NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"deletionPolicy": "Orphan"}})),
        )
        .await
        .expect("Orphan");
    wait_cluster(&clusters, NAME, "Orphan seen", |c| {
        c.status.as_ref().and_then(|s| s.observed_generation) == c.metadata.generation
    })
    .await;
    clusters
        .delete(NAME, &DeleteParams::default())
        .await
        .expect("delete the object");
    wait_for("the object gone", WAIT, || async {
        match clusters.get_opt(NAME).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(_)) => Err("still there".into()),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let still = Api::<ConfigMap>::namespaced(hosted.clone(), "app")
        .get("survivor")
        .await
        .expect("an orphaned control plane keeps serving");
    assert_eq!(
        still.data.and_then(|d| d.get("kept").cloned()).as_deref(),
        Some("yes")
    );
    let mut again = article();
    again.spec.kube_version = "1.29".into();
    let adopted_at = Instant::now();
    clusters
        .create(&PostParams::default(), &again)
        .await
        .expect("apply the manifest again");
    let adopted = wait_cluster(&clusters, NAME, "adopted", ready).await;
    eprintln!(
        "node_hosted: Orphan kept it serving; the manifest applied again adopted it in {:.1} s",
        adopted_at.elapsed().as_secs_f64()
    );
    assert_eq!(
        adopted
            .status
            .as_ref()
            .and_then(|s| s.cluster_id.as_deref()),
        Some(id.as_str()),
        "adopted by identity, not made anew"
    );

    // Delete: nothing of it left.
    let deleting = Instant::now();
    clusters
        .delete(NAME, &DeleteParams::default())
        .await
        .expect("delete the cluster");
    wait_for("the cluster deleted", WAIT, || async {
        if clusters
            .get_opt(NAME)
            .await
            .map_err(|e| e.to_string())?
            .is_some()
        {
            return Err("the object is still there".into());
        }
        let left = left(&client, &ns, NAME).await;
        if left.is_empty() {
            Ok(Some(()))
        } else {
            Err(left.join(", "))
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "node_hosted: deleted, nothing labelled {CLUSTER_LABEL}={NAME} left, in {:.1} s",
        deleting.elapsed().as_secs_f64()
    );

    drop(cleanup);
    env.cleanup().await;
}
