//! KubernetesCluster on the `local` provider, end to end: the controller runs in-process (as in
//! the `vigil-controllers` crate's `tests/kubernetes_cluster.rs`, whose test world this includes)
//! and provisions real `vigil sandbox` processes of this build, which is why the test lives with
//! the `vigil` binary.

#[path = "../../../controllers/tests/controllers/kubernetes_cluster_world/mod.rs"]
mod kubernetes_cluster_world;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use vigil_apis::kubernetes_cluster::Phase;
use vigil_controllers::kubernetes_cluster::decide as reasons;
use vigil_provider::local::{LocalConfig, LocalProvider};
use vigil_provider::{ClusterProvider, Providers};

use kubernetes_cluster_world::*;

/// A `local` provider rooted in a directory of its own; its sandbox processes are killed and
/// its files removed when dropped, so a failing test leaves nothing running.
struct LocalRoot(PathBuf);

impl LocalRoot {
    fn providers(&self) -> Providers {
        let mut config = LocalConfig::new(&self.0, env!("CARGO_BIN_EXE_vigil"));
        config.stop_grace = Duration::from_secs(3);
        let mut providers = Providers::new();
        providers.insert(
            "local",
            Arc::new(LocalProvider::new(config).expect("local provider"))
                as Arc<dyn ClusterProvider>,
        );
        providers
    }

    fn provider(&self) -> LocalProvider {
        LocalProvider::new(LocalConfig::new(&self.0, env!("CARGO_BIN_EXE_vigil")))
            .expect("local provider")
    }
}

impl Drop for LocalRoot {
    fn drop(&mut self) {
        self.provider().kill_all();
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A client for the kubeconfig a Secret holds (key `value`).
async fn client_from_secret(secret: &Secret) -> Client {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .expect("the kubeconfig in key value");
    let text = String::from_utf8(bytes.0.clone()).expect("utf-8");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&text).expect("a kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    Client::try_from(config).expect("client")
}
/// The article's manifest, with only its `apiVersion` changed, on the default `local` provider:
/// a real API server answers at `apiServerURL`, reports the `masterVersion` in status, and the
/// kubeconfig Secret reaches it. An upgrade restarts it on the new version with its data, and
/// deleting the object stops the server and removes its data before the finalizer goes.
#[tokio::test]
async fn the_articles_manifest_provisions_a_real_cluster_on_the_local_provider() {
    let w = World::start("article").await;
    let root = LocalRoot(w.dir.join("clusters"));
    let running = w.run(root.providers());
    let created = w.apply_manifest(ARTICLE).await;
    assert_eq!(
        created.status, None,
        "the API server drops a status on create"
    );
    let ready = w.wait_ready("my-custom-cluster-for-backup").await;
    let status = ready.status.clone().expect("status");
    let url = status.api_server_url.clone().expect("apiServerURL");
    assert!(
        url.starts_with("https://127.0.0.1:") || url.starts_with("http://127.0.0.1:"),
        "{url}"
    );
    assert_eq!(status.master_version.as_deref(), Some("1.28.0"));
    assert_eq!(
        status.kubeconfig_secret.as_deref(),
        Some("my-custom-cluster-for-backup-kubeconfig")
    );
    let names: Vec<&str> = status.addons.iter().map(|a| a.name.as_str()).collect();
    assert_eq!(names, ["cluster-autoscaler", "vpc-block-csi-driver"]);

    // The kubeconfig Secret reaches the cluster, which reports the version in status.
    let secrets: Api<Secret> = w.env.api();
    let secret = secrets
        .get("my-custom-cluster-for-backup-kubeconfig")
        .await
        .expect("kubeconfig Secret");
    let cluster = client_from_secret(&secret).await;
    let version = cluster.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, "v1.28.0");
    assert_eq!(cluster.default_namespace(), "default");
    let server_url = kube::config::Kubeconfig::from_yaml(
        &String::from_utf8(secret.data.as_ref().expect("data")["value"].0.clone()).expect("utf-8"),
    )
    .expect("kubeconfig")
    .clusters
    .into_iter()
    .find_map(|c| c.cluster.and_then(|c| c.server))
    .expect("a server");
    assert_eq!(server_url, url, "the Secret and the status name one server");
    // The addons are Deployments in the new cluster, which runs them: the status reports them
    // ready once each is available there.
    let addons_ready = w
        .wait_condition(
            "my-custom-cluster-for-backup",
            reasons::ADDONS_READY,
            "True",
            reasons::REASON_ADDONS_READY,
        )
        .await;
    let addons = addons_ready.status.expect("status").addons;
    assert!(
        addons.len() == 2 && addons.iter().all(|a| a.state == "Installed"),
        "{addons:?}"
    );
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.clone(), "kube-system");
    for name in ["cluster-autoscaler", "vpc-block-csi-driver"] {
        let d = deployments.get(name).await.expect("an addon Deployment");
        let available = d.status.and_then(|s| s.available_replicas);
        assert_eq!(available, Some(1), "{name} is available in the cluster");
    }
    // Something of the user's in the cluster, to find again after the upgrade.
    let configmaps: Api<k8s_openapi::api::core::v1::ConfigMap> =
        Api::namespaced(cluster.clone(), "default");
    configmaps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kept"}, "data": {"k": "v"}}))
                .expect("configmap"),
        )
        .await
        .expect("create in the new cluster");

    // Upgrade: forward, the same server and data, the new version.
    w.patch_spec(
        "my-custom-cluster-for-backup",
        json!({"kubeVersion": "1.29"}),
    )
    .await;
    let upgraded = w
        .wait(
            "my-custom-cluster-for-backup",
            "the upgrade to 1.29",
            CLUSTER_TIMEOUT,
            |c| {
                phase(c) == Some(Phase::Ready)
                    && c.status.as_ref().and_then(|s| s.master_version.as_deref()) == Some("1.29.0")
            },
        )
        .await;
    assert_eq!(
        upgraded.status.and_then(|s| s.api_server_url),
        Some(url.clone())
    );
    let version = cluster.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, "v1.29.0");
    assert!(
        configmaps.get_opt("kept").await.expect("get").is_some(),
        "data survives"
    );

    // Deleted: the server stops and its data goes before the object does.
    let id = status.cluster_id.clone().expect("id");
    let dir = root.provider().dir(&id);
    assert!(dir.exists());
    w.clusters()
        .delete("my-custom-cluster-for-backup", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone("my-custom-cluster-for-backup").await;
    assert!(!dir.exists(), "the cluster's data is removed");
    assert!(
        root.provider().processes().is_empty(),
        "its server process is stopped"
    );
    assert!(
        cluster.apiserver_version().await.is_err(),
        "the server no longer answers"
    );
    w.finish(running).await;
}

/// The chaos test's sequence on a real `local` cluster, with the status vault: a Ready cluster
/// is orphaned (`deletionPolicy: Orphan`), its manifest applied again from git (no status), and
/// its `kubeVersion` raised at once, while the vault restores the status, or right after. Each
/// round must end Ready on the new version, on the same cluster and server; the object must
/// never report `Failed` on the way (a failure names the decision: its Degraded condition).
#[tokio::test]
async fn orphaned_reapplied_and_upgraded_at_once_the_cluster_converges() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::CustomResourceExt as _;
    use kube::ResourceExt as _;
    use vigil_apis::StatusBackupPolicy;
    use vigil_testenv::wait_for;

    let w = World::start("orphan-upgrade").await;
    let crd: CustomResourceDefinition = StatusBackupPolicy::crd();
    install_crd(&w.env.client(), crd).await;
    let root = LocalRoot(w.dir.join("clusters"));
    let running = w.run_with(root.providers(), true, w.env.client());
    let policies: Api<StatusBackupPolicy> = Api::all(w.env.client());
    let policy_name = format!("kc-{}", w.env.namespace().trim_start_matches("vigil-test-"));
    let policy: StatusBackupPolicy = serde_json::from_value(json!({
        "apiVersion": "vigil.dev/v1", "kind": "StatusBackupPolicy",
        "metadata": {"name": policy_name},
        "spec": {
            "resources": [{"group": "vigil.dev", "kind": "KubernetesCluster"}],
            "namespaces": [w.env.namespace()],
        },
    }))
    .expect("policy");
    policies
        .create(&PostParams::default(), &policy)
        .await
        .expect("create policy");
    w.env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<StatusBackupPolicy>(&()),
        &policy_name,
    );

    const NAME: &str = "git";
    let manifest = |minor: u32| json!({"kubeVersion": format!("1.{minor}"), "addons": []});
    let failed_because = |c: &vigil_apis::KubernetesCluster| -> Option<String> {
        (phase(c) == Some(Phase::Failed)).then(|| {
            format!(
                "Degraded: {:?} {}; Ready: {:?} {}",
                condition(c, reasons::DEGRADED),
                message(c, reasons::DEGRADED),
                condition(c, reasons::READY),
                message(c, reasons::READY)
            )
        })
    };
    w.create(NAME, manifest(28)).await;
    let first = w.wait_ready(NAME).await;
    let id = first.status.as_ref().and_then(|s| s.cluster_id.clone());
    let url = first.status.as_ref().and_then(|s| s.api_server_url.clone());
    assert!(id.is_some(), "an id");

    // Round by round, the upgrade comes later: with the create, once the restore wrote the
    // status, and once the re-applied object is Ready again on the old version.
    for (round, minor) in (28..31).enumerate() {
        // Orphaned, as the chaos workload does: the policy first, then the deletion.
        w.wait(
            NAME,
            "the vault to have seen the settled status",
            CLUSTER_TIMEOUT,
            |c| {
                phase(c) == Some(Phase::Ready)
                    && c.status.as_ref().and_then(|s| s.observed_generation)
                        == c.metadata.generation
            },
        )
        .await;
        // The vault captures asynchronously: give it the settled status.
        tokio::time::sleep(Duration::from_millis(500)).await;
        w.patch_spec(NAME, json!({"deletionPolicy": "Orphan"}))
            .await;
        w.clusters()
            .delete(NAME, &DeleteParams::default())
            .await
            .expect("delete");
        w.wait_gone(NAME).await;

        // Applied again from git, then upgraded.
        w.create(NAME, manifest(minor)).await;
        match round {
            0 => {}
            1 => {
                w.wait(NAME, "the status restored", CLUSTER_TIMEOUT, |c| {
                    c.status.as_ref().is_some_and(|s| s.cluster_id.is_some())
                })
                .await;
            }
            _ => {
                w.wait(
                    NAME,
                    "Ready again before the upgrade",
                    CLUSTER_TIMEOUT,
                    |c| {
                        phase(c) == Some(Phase::Ready)
                            && c.metadata.finalizers.iter().flatten().next().is_some()
                            && c.status.as_ref().and_then(|s| s.observed_generation)
                                == c.metadata.generation
                    },
                )
                .await;
            }
        }
        let wanted = format!("1.{}.0", minor + 1);
        w.patch_spec(NAME, json!({"kubeVersion": format!("1.{}", minor + 1)}))
            .await;
        let api = w.clusters();
        let done = wait_for(
            &format!("round {round}: Ready on {wanted}, never Failed"),
            CLUSTER_TIMEOUT,
            || async {
                let c = api.get(NAME).await.map_err(|e| e.to_string())?;
                if let Some(why) = failed_because(&c) {
                    return Ok(Some(Err(why)));
                }
                let status = c.status.clone().unwrap_or_default();
                let ready = phase(&c) == Some(Phase::Ready)
                    && status.master_version.as_deref() == Some(wanted.as_str())
                    && status.observed_generation == c.metadata.generation;
                if ready {
                    Ok(Some(Ok(c)))
                } else {
                    Err(format!("{:?} {:?}", status.phase, status.conditions))
                }
            },
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        let done = done.unwrap_or_else(|why| {
            panic!("round {round}: the re-applied cluster went Failed: {why}")
        });
        let status = done.status.clone().expect("status");
        assert_eq!(status.cluster_id, id, "round {round}: the same cluster");
        assert_eq!(status.api_server_url, url, "round {round}: the same server");
        assert!(
            done.annotations()
                .contains_key("vigil.dev/status-restored-from"),
            "round {round}: the status came from the vault"
        );
        assert_eq!(root.provider().clusters().expect("clusters").len(), 1);
    }

    let _ = policies
        .delete(&policy_name, &DeleteParams::default())
        .await;
    w.patch_spec(NAME, json!({"deletionPolicy": "Delete"}))
        .await;
    w.finish(running).await;
}
