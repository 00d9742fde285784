//! The provider contract (`vigil_provider::contract`) against the `hosted` provider, on a real
//! node (CI's third stage): control planes of the images `.ci/control-plane-images` built, run by
//! the node's kubelet, reached from this process through their Services' ClusterIPs (kube-proxy
//! programs the host too) — the same checks the `local` and external providers pass: never two
//! clusters for one identity, bad requests refused with nothing made, an upgrade forward only
//! and to the asked version, addons converged (applied and reported unable to run: a control
//! plane has no nodes), a refused delete, then nothing left.
//!
//! Needs a node (`../shared/kube/node-up.sh`: `KUBE_NODE_NAME`, `VIGIL_TEST_KUBECONFIG`) and the
//! control-plane images loaded into it with the values file `.ci/control-plane-images` prints
//! (`VIGIL_TEST_CONTROL_PLANE_VALUES`); without them it prints a note and passes.
#![cfg(target_os = "linux")]

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolume};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use vigil_provider::contract::{self, ContractHooks, ContractTiming, Nodes};
use vigil_provider::hosted::{HostedConfig, HostedProvider, VersionImages, names};
use vigil_testenv::hosted::{ControlPlaneImages, host_path_volume};

const UUID: &str = "5d0c51a2-3c41-4f7e-9a52-6f0e1c2b7a10";
const STORAGE_CLASS: &str = "vigil-hosted-contract";

/// Refuses deletes by the record's annotation, as an administrator would.
struct Annotate {
    client: kube::Client,
    namespace: String,
}

impl Annotate {
    fn set(&self, id: &str, value: Option<&str>) {
        let (client, namespace) = (self.client.clone(), self.namespace.clone());
        let record = names::Names::from_id(id).expect("a hosted id").record();
        let patch = json!({"metadata": {"annotations": {names::REFUSE_DELETE: value}}});
        tokio::task::block_in_place(|| {
            tokio::runtime::Handle::current().block_on(async move {
                Api::<ConfigMap>::namespaced(client, &namespace)
                    .patch(&record, &PatchParams::default(), &Patch::Merge(&patch))
                    .await
                    .expect("annotate the record");
            })
        });
    }
}

impl ContractHooks for Annotate {
    fn refuse_deletes(&self, id: &str) {
        self.set(id, Some("the contract test refuses it"));
    }
    fn allow_deletes(&self, id: &str) {
        self.set(id, None);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_hosted_provider_keeps_the_contract() {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let (Some(_), Some(kubeconfig), Some(values)) = (
        var("KUBE_NODE_NAME"),
        var("VIGIL_TEST_KUBECONFIG"),
        var("VIGIL_TEST_CONTROL_PLANE_VALUES"),
    ) else {
        eprintln!(
            "skipped the_hosted_provider_keeps_the_contract: needs a real node and VIGIL_TEST_CONTROL_PLANE_VALUES"
        );
        return;
    };
    let kubeconfig = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    let namespace = format!("vigil-contract-{}", std::process::id());
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": namespace, "labels": {
                "pod-security.kubernetes.io/enforce": "restricted",
            }}}))
            .expect("a namespace"),
        )
        .await
        .expect("create the namespace");
    // No provisioner on the node: a hostPath volume owned by the user etcd runs as.
    let dir = std::env::temp_dir().join(&namespace);
    host_path_volume(&client, &namespace, &dir, STORAGE_CLASS)
        .await
        .expect("a volume for etcd");
    let pvs: Api<PersistentVolume> = Api::all(client.clone());

    let images = ControlPlaneImages::read(std::path::Path::new(&values)).expect("the values file");
    let versions = images
        .versions
        .into_iter()
        .map(|v| VersionImages {
            version: v.version,
            api_server: v.api_server,
            controller_manager: v.controller_manager,
        })
        .collect();
    let mut hosted = HostedConfig::new(versions, images.etcd);
    hosted.storage_class = Some(STORAGE_CLASS.into());
    hosted.image_pull_policy = "Never".into();
    hosted.default_namespace = Some(namespace.clone());
    let provider = HostedProvider::new(client.clone(), hosted).expect("the hosted provider");
    let hooks = Annotate {
        client: client.clone(),
        namespace: namespace.clone(),
    };
    let timing = ContractTiming {
        deadline: Duration::from_secs(240),
        poll: Duration::from_millis(500),
    };
    let started = std::time::Instant::now();
    let outcome = contract::run_all_with(
        &provider,
        &hooks,
        UUID,
        "contract",
        ("1.28", "1.29"),
        timing,
        Nodes::None,
    )
    .await;
    eprintln!(
        "hosted contract: {:.1} s, {}",
        started.elapsed().as_secs_f64(),
        if outcome.is_ok() { "kept" } else { "broken" }
    );
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&namespace, &DeleteParams::default())
        .await;
    let _ = pvs.delete(&namespace, &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
    outcome.expect("the hosted provider keeps the contract");
}
