//! KubernetesCluster on the `local` provider, end to end: the controller runs in-process (as in
//! the `vigil-controllers` crate's `tests/kubernetes_cluster.rs`, whose test world this includes)
//! and provisions real `vigil sandbox` processes of this build, which is why the test lives with
//! the `vigil` binary.

#[path = "../../controllers/tests/kubernetes_cluster_world/mod.rs"]
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
