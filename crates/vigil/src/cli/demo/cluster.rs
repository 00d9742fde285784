//! The demo's second act: the article's KubernetesCluster, provisioned by the `local` provider
//! as a real API server (a `vigil sandbox` process of this binary), reachable through the
//! kubeconfig Secret Vigil writes — then, when the demo ends, deleted with its object.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::sync::watch;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::{ARTICLE_MANIFEST, Phase};
use vigil_controllers::kubernetes_cluster::controller::{self, Config, kubeconfig_secret_name};
use vigil_controllers::kubernetes_cluster::decide::ADDONS_READY;
use vigil_controllers::kubernetes_cluster::model::Settings;
use vigil_provider::local::{LocalConfig, LocalProvider};
use vigil_provider::{ClusterProvider, Providers};

use super::narration::{step, until};

const NAME: &str = "my-custom-cluster-for-backup";

/// The KubernetesCluster controller running for the demo.
pub struct ClusterAct {
    client: kube::Client,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    root: PathBuf,
}

/// Installs the CRD, starts the controller with the `local` provider rooted at `root`, applies
/// the article's manifest and follows it to `Ready`; writes the new cluster's kubeconfig to
/// `kubeconfig_out`.
pub async fn play(
    client: &kube::Client,
    started: Instant,
    root: &Path,
    kubeconfig_out: &Path,
) -> anyhow::Result<ClusterAct> {
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(
            &PostParams::default(),
            &vigil_apis::crds::kubernetes_cluster(),
        )
        .await?;
    let clusters: Api<KubernetesCluster> = Api::namespaced(client.clone(), "default");
    until("the KubernetesCluster CRD", || async {
        clusters.list(&Default::default()).await.ok().map(|_| ())
    })
    .await?;

    let program = std::env::current_exe().context("locating the vigil binary")?;
    let local = LocalProvider::new(LocalConfig::new(root, program))?;
    let mut providers = Providers::new();
    providers.insert("local", Arc::new(local) as Arc<dyn ClusterProvider>);
    let config = Config {
        settings: Settings {
            poll_interval: Duration::from_millis(100),
            ..Settings::default()
        },
        providers,
        restorer: None,
    };
    let (stop, task) = super::in_process(client.clone(), move |manager| {
        manager.add(controller::NAME, move |rt| controller::run_on(rt, config));
    });
    let act = ClusterAct {
        client: client.clone(),
        stop,
        task,
        root: root.to_owned(),
    };
    step(
        started,
        "KubernetesCluster controller running with the local provider (CRD kubernetesclusters.vigil.dev)",
    );

    let mut cluster: KubernetesCluster = serde_saphyr::from_str(ARTICLE_MANIFEST)?;
    cluster.metadata.namespace = Some("default".into());
    clusters.create(&PostParams::default(), &cluster).await?;
    step(
        started,
        "KubernetesCluster my-custom-cluster-for-backup applied (the article's manifest, apiVersion vigil.dev/v1alpha1)",
    );
    // Each phase on the way is printed once.
    let reported = std::cell::Cell::new(None);
    let reported = &reported;
    let ready = until("the cluster to be Ready", || async {
        let c = clusters.get_opt(NAME).await.ok().flatten()?;
        let status = c.status.as_ref()?;
        let phase = status.phase?;
        if reported.get() != Some(phase) && phase != Phase::Ready {
            let note = status
                .conditions
                .iter()
                .find(|c| c.type_ == phase.as_str())
                .map(|c| c.message.clone())
                .unwrap_or_default();
            say!("          phase {}: {note}", phase.as_str());
            reported.set(Some(phase));
        }
        (phase == Phase::Ready).then(|| status.clone())
    })
    .await?;
    step(
        started,
        &format!(
            "cluster {} Ready: API server at {}, masterVersion {}",
            ready.cluster_id.as_deref().unwrap_or("?"),
            ready.api_server_url.as_deref().unwrap_or("?"),
            ready.master_version.as_deref().unwrap_or("?"),
        ),
    );

    // The addons are Deployments the new cluster runs itself (its workload loops and simulated
    // kubelet); the status says when every one is available there.
    let addons = until("the addons to be available", || async {
        let c = clusters.get_opt(NAME).await.ok().flatten()?;
        c.status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == ADDONS_READY && c.status == "True")
            .map(|c| c.message)
    })
    .await?;
    step(
        started,
        &format!("AddonsReady: {addons} (Deployments in its kube-system)"),
    );

    let secrets: Api<Secret> = Api::namespaced(client.clone(), "default");
    let secret = secrets.get(&kubeconfig_secret_name(NAME)).await?;
    let kubeconfig = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .context("the kubeconfig Secret has no key value")?;
    std::fs::write(kubeconfig_out, &kubeconfig.0)
        .with_context(|| format!("writing {}", kubeconfig_out.display()))?;
    let text = String::from_utf8(kubeconfig.0.clone())?;
    // Read from a Secret: refused if it would run a command or read this machine's files.
    let config = vigil_provider::kubeconfig::client_config(&text)
        .await
        .with_context(|| format!("the kubeconfig in Secret {}", kubeconfig_secret_name(NAME)))?;
    let new_cluster = kube::Client::try_from(config)?;
    let version = new_cluster.apiserver_version().await?;
    step(
        started,
        &format!(
            "Secret {} reaches it: the new cluster reports {} (kubeconfig: {})",
            kubeconfig_secret_name(NAME),
            version.git_version,
            kubeconfig_out.display()
        ),
    );
    Ok(act)
}

impl ClusterAct {
    /// Deletes the KubernetesCluster (the finalizer waits until its server is stopped and its
    /// data removed), then stops the controller.
    pub async fn finish(self, started: Instant) -> anyhow::Result<()> {
        let clusters: Api<KubernetesCluster> = Api::namespaced(self.client.clone(), "default");
        clusters.delete(NAME, &DeleteParams::default()).await?;
        until("the cluster to be deleted", || async {
            clusters
                .get_opt(NAME)
                .await
                .ok()
                .and_then(|c| c.is_none().then_some(()))
        })
        .await?;
        step(
            started,
            "KubernetesCluster deleted: its API server stopped and its data removed first",
        );
        let _ = self.stop.send(true);
        let _ = self.task.await;
        let _ = std::fs::remove_dir_all(&self.root);
        Ok(())
    }
}
