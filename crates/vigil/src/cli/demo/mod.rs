//! `vigil demo`: Vigil's main job, seen in seconds without a cluster. It starts the sandbox, its
//! simulated kubelet and the CriticalService controller in this process, plays the article's
//! scenario step by step, provisions the KubernetesCluster article's cluster with the `local`
//! provider ([`cluster`]), then keeps everything running for `kubectl` until Ctrl-C or SIGTERM.

mod cluster;
mod narration;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Endpoints, Pod, PodTemplate, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio::sync::watch;
use vigil_apis::CriticalService;
use vigil_controllers::critical_service::controller;
use vigil_controllers::critical_service::model::{Settings, TemplateKey};
use vigil_kubelet::{Kubelet, KubeletConfig};
use vigil_runtime::{Manager, ShutdownSignals};
use vigil_sandbox::{Sandbox, SandboxConfig};

use narration::{step, until};

#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// Loopback address of the sandbox; port 0 picks a free one.
    #[arg(long, default_value = "127.0.0.1:6443")]
    listen: SocketAddr,
    /// Where to write the kubeconfig for kubectl.
    #[arg(long, default_value = "vigil-demo.kubeconfig")]
    kubeconfig_out: PathBuf,
    /// Where to write the kubeconfig of the KubernetesCluster the demo provisions.
    #[arg(long, default_value = "vigil-demo-cluster.kubeconfig")]
    cluster_kubeconfig_out: PathBuf,
    /// Play the scenario and exit instead of serving until Ctrl-C.
    #[arg(long)]
    exit: bool,
}

fn object<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> anyhow::Result<T> {
    Ok(serde_json::from_value(value)?)
}

async fn endpoint_ips(api: &Api<Endpoints>) -> Vec<String> {
    let ep = api.get_opt("frontend").await.ok().flatten();
    ep.and_then(|e| e.subsets)
        .unwrap_or_default()
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect()
}

/// Runs the controllers `add` adds on a Manager in this process (one replica: it leads), until
/// the returned sender says stop.
fn in_process(
    client: kube::Client,
    add: impl FnOnce(&mut Manager) + Send + 'static,
) -> (watch::Sender<bool>, tokio::task::JoinHandle<()>) {
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(async move {
        let manager = Manager::for_client("vigil", client).build().await;
        let mut manager = match manager {
            Ok(manager) => manager,
            Err(error) => return tracing::error!(%error, "starting the manager"),
        };
        add(&mut manager);
        manager
            .run_until(async move {
                let _ = stopped.wait_for(|s| *s).await;
            })
            .await;
    });
    (stop, task)
}

pub async fn run(args: DemoArgs) -> anyhow::Result<()> {
    // First: from its first line on, SIGTERM and Ctrl-C stop the demo through its clean-up,
    // never through the default action that would leave a provisioned cluster behind (see
    // `vigil_runtime::signals`).
    let mut signals = ShutdownSignals::install().context("installing the signal handlers")?;
    // A closed output must not end the demo before it has deleted what it provisioned.
    crate::output::stop_when_closed();
    let sandbox = Sandbox::start(SandboxConfig {
        listen: args.listen,
        ..SandboxConfig::default()
    })
    .await
    .context("starting the sandbox")?;
    sandbox.write_kubeconfig(&args.kubeconfig_out)?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sandbox.kubeconfig())?;
    let client = kube::Client::try_from(
        kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?,
    )?;
    let kubelet = Kubelet::start(client.clone(), KubeletConfig::default()).await?;
    let started = Instant::now();
    say!(
        "sandbox ready at {} (kubeconfig: {})",
        sandbox.url(),
        args.kubeconfig_out.display()
    );
    let clusters_root =
        std::env::temp_dir().join(format!("vigil-demo-clusters-{}", std::process::id()));
    let played = tokio::select! {
        played = play(&args, &client, started, &clusters_root) => Some(played),
        () = signals.recv() => None,
        // `vigil demo | head`: the reader is gone, clean up as on SIGTERM.
        () = crate::output::closed() => None,
    };
    let played = match played {
        Some(Ok(played)) => played,
        Some(Err(e)) => {
            stop_everything(kubelet, sandbox, &clusters_root).await;
            return Err(e);
        }
        None => {
            tracing::info!("stopped before the scenario's end: cleaning up");
            stop_everything(kubelet, sandbox, &clusters_root).await;
            let _ = std::fs::remove_file(&args.cluster_kubeconfig_out);
            return Ok(());
        }
    };

    if !args.exit {
        say!(
            "\nexplore: kubectl --kubeconfig {} get crisvc,kc,pods,endpoints,secrets",
            args.kubeconfig_out.display()
        );
        say!(
            "         kubectl --kubeconfig {} version   (the provisioned cluster; Ctrl-C to stop)",
            args.cluster_kubeconfig_out.display()
        );
        // SIGTERM cleans up exactly as Ctrl-C does: the cluster is deleted through Vigil.
        tokio::select! {
            () = signals.recv() => {}
            // `vigil demo | head`: the reader is gone, clean up as on SIGTERM.
            () = crate::output::closed() => {}
        }
    }
    played.act.finish(started).await?;
    let _ = std::fs::remove_file(&args.cluster_kubeconfig_out);
    let _ = played.stop.send(true);
    let _ = played.operator.await;
    kubelet.stop().await;
    sandbox.shutdown().await;
    Ok(())
}

/// What the scenario leaves running until the demo stops.
struct Played {
    /// Stops the in-process CriticalService operator.
    stop: watch::Sender<bool>,
    operator: tokio::task::JoinHandle<()>,
    /// The provisioned cluster and its controller.
    act: cluster::ClusterAct,
}

/// Stops the demo when its scenario did not finish (an error, or a signal in the middle): the
/// API first, so that no controller provisions anything more, then whatever cluster came up,
/// which must not outlive the demo.
async fn stop_everything(kubelet: Kubelet, sandbox: Sandbox, clusters_root: &Path) {
    kubelet.stop().await;
    sandbox.shutdown().await;
    if let Ok(local) = vigil_provider::local::LocalProvider::new(
        vigil_provider::local::LocalConfig::new(clusters_root, "vigil"),
    ) {
        local.kill_all();
    }
    let _ = std::fs::remove_dir_all(clusters_root);
}

/// The article's scenario, then the KubernetesCluster act.
async fn play(
    args: &DemoArgs,
    client: &kube::Client,
    started: Instant,
    clusters_root: &Path,
) -> anyhow::Result<Played> {
    let client = client.clone();
    // Install: the CRD and the fallback's PodTemplate (the article's nginx).
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &CriticalService::crd())
        .await?;
    let crs: Api<CriticalService> = Api::all(client.clone());
    until("the CriticalService CRD", || async {
        crs.list(&Default::default()).await.ok().map(|_| ())
    })
    .await?;
    let template = json!({"metadata": {"name": "critical-service-pod-template"},
        "template": {"metadata": {"name": "critical-service-pod"}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}}});
    Api::<PodTemplate>::namespaced(client.clone(), "default")
        .create(&PostParams::default(), &object(template)?)
        .await?;

    // Run the operator in-process (a single replica: no leader election).
    let settings = Settings {
        pod_name_prefix: "service-watcher".into(),
        default_template: TemplateKey {
            namespace: "default".into(),
            name: "critical-service-pod-template".into(),
        },
        watched_namespaces: None::<BTreeSet<String>>,
    };
    let (stop, operator) = in_process(client.clone(), move |manager| {
        manager.add(controller::NAME, move |rt| controller::run_on(rt, settings));
    });
    step(
        started,
        "Vigil is running: CRD criticalservices.mycrd.com and PodTemplate critical-service-pod-template installed",
    );

    // The article's section 5.4.
    let services: Api<Service> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client.clone(), "default");
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), "default");
    let service = json!({"metadata": {"name": "frontend", "labels": {"role": "frontend"}},
        "spec": {"selector": {"role": "frontend"}, "type": "NodePort", "ports": [{"port": 80}]}});
    services
        .create(&PostParams::default(), &object(service)?)
        .await?;
    step(
        started,
        "Service default/frontend created: no pod selects it, it has no endpoint",
    );
    let cr = json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService", "metadata": {"name": "frontend"},
        "spec": {"namespace": "default", "matchLabels": [{"key": "role", "value": "frontend"}]}});
    crs.create(&PostParams::default(), &object(cr)?).await?;
    step(
        started,
        "CriticalService frontend created (the article's critical-service.yaml)",
    );
    let ip = until("the fallback pod to answer", || async {
        let ips = endpoint_ips(&endpoints).await;
        ips.first().cloned()
    })
    .await?;
    step(
        started,
        &format!("Vigil started pod service-watcher-frontend: the Service answers again at {ip}"),
    );

    let nginx = json!({"metadata": {"name": "nginx", "labels": {"role": "frontend"}},
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9", "ports": [{"containerPort": 80}]}]}});
    pods.create(&PostParams::default(), &object(nginx)?).await?;
    step(
        started,
        "pod nginx (role=frontend) created (the article's nginx-pod.yaml)",
    );
    until("the fallback to retire", || async {
        let gone = pods
            .get_opt("service-watcher-frontend")
            .await
            .ok()
            .flatten()
            .is_none();
        let ips = endpoint_ips(&endpoints).await;
        (gone && ips.len() == 1).then_some(())
    })
    .await?;
    step(
        started,
        &format!(
            "nginx is a ready endpoint ({}): Vigil retired its fallback pod",
            endpoint_ips(&endpoints).await.join(",")
        ),
    );

    pods.delete("nginx", &DeleteParams::default()).await?;
    step(started, "pod nginx deleted");
    until("the fallback to come back", || async {
        pods.get_opt("service-watcher-frontend")
            .await
            .ok()
            .flatten()
            .map(|_| ())
    })
    .await?;
    step(
        started,
        "Vigil started service-watcher-frontend again: the Service keeps answering",
    );

    // The second act: a Kubernetes cluster provisioned from the article's manifest.
    let act = cluster::play(
        &client,
        started,
        clusters_root,
        &args.cluster_kubeconfig_out,
    )
    .await?;
    Ok(Played {
        stop,
        operator,
        act,
    })
}
