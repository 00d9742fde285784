//! `vigil demo`: Vigil's main job, seen in seconds without a cluster. It starts the sandbox, its
//! simulated kubelet and the CriticalService controller in this process, plays the article's
//! scenario step by step, provisions the KubernetesCluster article's cluster with the `local`
//! provider ([`cluster`]), then keeps everything running for `kubectl` until Ctrl-C or SIGTERM.

mod cluster;
mod narration;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Endpoints, Pod, PodTemplate, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::watch;
use vigil_apis::CriticalService;
use vigil_controllers::critical_service::controller;
use vigil_controllers::critical_service::model::{Settings, TemplateKey};
use vigil_kubelet::{Kubelet, KubeletConfig};
use vigil_runtime::Manager;
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
    let clusters_root =
        std::env::temp_dir().join(format!("vigil-demo-clusters-{}", std::process::id()));
    let act = cluster::play(
        &client,
        started,
        &clusters_root,
        &args.cluster_kubeconfig_out,
    )
    .await;
    let act = match act {
        Ok(act) => act,
        Err(e) => {
            // Whatever came up must not outlive the demo.
            if let Ok(local) = vigil_provider::local::LocalProvider::new(
                vigil_provider::local::LocalConfig::new(&clusters_root, "vigil"),
            ) {
                local.kill_all();
            }
            let _ = std::fs::remove_dir_all(&clusters_root);
            return Err(e);
        }
    };

    if !args.exit {
        // Listen before saying so: a SIGTERM right after the line (a supervisor, a test, `kill`)
        // must reach the handler, not the default action that would leave the cluster behind.
        let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
        let mut interrupt =
            signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
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
            _ = interrupt.recv() => {}
            _ = term.recv() => {}
            // `vigil demo | head`: the reader is gone, clean up as on SIGTERM.
            _ = crate::output::closed() => {}
        }
    }
    act.finish(started).await?;
    let _ = std::fs::remove_file(&args.cluster_kubeconfig_out);
    let _ = stop.send(true);
    let _ = operator.await;
    kubelet.stop().await;
    sandbox.shutdown().await;
    Ok(())
}
