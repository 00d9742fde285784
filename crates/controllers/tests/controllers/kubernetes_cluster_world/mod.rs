//! The world of a KubernetesCluster end-to-end test: a TestEnv with the CRD, a directory of its
//! own, the controller (and, when asked, the status vault) running in-process, and the waits and
//! helpers the tests share. Used by `tests/kubernetes_cluster.rs` here and by the `vigil` crate's
//! `tests/kubernetes_cluster_local.rs` (the `local` provider needs the `vigil` binary), which
//! includes this file by path.

// Each including test binary uses a different part of it.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use tokio::sync::watch;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::Phase;
use vigil_controllers::kubernetes_cluster::controller::{self, Config};
use vigil_controllers::kubernetes_cluster::decide as reasons;
use vigil_controllers::kubernetes_cluster::model::Settings;
use vigil_controllers::status_vault::{self, StatusVault, model::Settings as VaultSettings};
use vigil_provider::{ClusterProvider, Providers};
use vigil_provider_reference::{ReferenceConfig, ReferenceProvider};
use vigil_runtime::Manager;
use vigil_runtime::conditions;
use vigil_runtime::metrics::Metrics;
use vigil_testenv::{TestEnv, wait_for};

/// Provisioning a real sandbox process, upgrades included, takes a few seconds.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(60);
/// The article's identity.
pub const ARTICLE_UUID: &str = "aaa692e5-e6ce-4f19-ad20-6491ca74067c";

/// The article's manifest; only its `apiVersion` line changed.
pub const ARTICLE: &str = vigil_apis::kubernetes_cluster::ARTICLE_MANIFEST;

/// On a real cluster, one controller at a time (see the module documentation).
pub static CLUSTER_SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A test's world: its environment, a directory of its own, the serial guard on a cluster.
pub struct World {
    pub env: TestEnv,
    pub dir: PathBuf,
    pub _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

/// Controllers running for one test; `stop` ends them.
pub struct Running {
    pub metrics: Arc<Metrics>,
    pub stop: watch::Sender<bool>,
    pub tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Running {
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

impl World {
    pub async fn start(name: &str) -> Self {
        let env = TestEnv::start().await.expect("env");
        let serial = if env.is_sandbox() {
            None
        } else {
            Some(CLUSTER_SERIAL.lock().await)
        };
        let dir = std::env::temp_dir().join(format!("vigil-kc-{name}-{}", env.namespace()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test dir");
        install_crd(&env.client(), vigil_apis::crds::kubernetes_cluster()).await;
        Self {
            env,
            dir,
            _serial: serial,
        }
    }

    pub fn clusters(&self) -> Api<KubernetesCluster> {
        self.env.api()
    }

    /// Runs the controller with `providers` (and, with `vault`, the status vault feeding it
    /// restores), through `client`.
    pub fn run_with(&self, providers: Providers, vault: bool, client: Client) -> Running {
        let (stop, mut stopped) = watch::channel(false);
        let metrics = Metrics::new("vigil");
        let registry = metrics.clone();
        let vault_dir = self.dir.join("vault").display().to_string();
        let task = tokio::spawn(async move {
            let mut manager = Manager::for_client("vigil", client)
                .metrics(registry)
                .build()
                .await
                .expect("a manager");
            let mut restorer = None;
            if vault {
                let settings = VaultSettings {
                    default_location: vault_dir,
                    default_key_file: None,
                };
                let status_vault = StatusVault::on(manager.runtime(), settings);
                restorer = Some(status_vault.restorer());
                manager.add(status_vault::NAME, move |rt| status_vault.run_on(rt));
            }
            let config = Config {
                settings: Settings {
                    poll_interval: Duration::from_millis(100),
                    resync_interval: Duration::from_secs(2),
                },
                providers,
                restorer,
            };
            manager.add(controller::NAME, move |rt| controller::run_on(rt, config));
            manager
                .run_until(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await;
        });
        Running {
            metrics,
            stop,
            tasks: vec![task],
        }
    }

    pub fn run(&self, providers: Providers) -> Running {
        self.run_with(providers, false, self.env.client())
    }

    /// Creates a KubernetesCluster from a manifest (its status, if any, is dropped by the API
    /// server, as the article says).
    pub async fn apply_manifest(&self, yaml: &str) -> KubernetesCluster {
        let mut value: Value = serde_saphyr::from_str(yaml).expect("manifest");
        value["metadata"]["namespace"] = json!(self.env.namespace());
        let cluster: KubernetesCluster =
            serde_json::from_value(value).expect("a KubernetesCluster");
        self.clusters()
            .create(&PostParams::default(), &cluster)
            .await
            .expect("create KubernetesCluster")
    }

    /// A KubernetesCluster named `name` (the article's spec, with `extra` merged into it).
    pub async fn create(&self, name: &str, extra: Value) -> KubernetesCluster {
        let mut value: Value = serde_saphyr::from_str(ARTICLE).expect("manifest");
        value["metadata"] = json!({"name": name, "namespace": self.env.namespace()});
        if let Some(status) = value.as_object_mut() {
            status.remove("status");
        }
        merge(&mut value["spec"], extra);
        let cluster: KubernetesCluster =
            serde_json::from_value(value).expect("a KubernetesCluster");
        self.clusters()
            .create(&PostParams::default(), &cluster)
            .await
            .expect("create KubernetesCluster")
    }

    pub async fn patch_spec(&self, name: &str, spec: Value) {
        self.clusters()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": spec})),
            )
            .await
            .expect("patch spec");
    }

    /// Waits until `check` accepts the object; the message names what was awaited.
    pub async fn wait(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        check: impl Fn(&KubernetesCluster) -> bool,
    ) -> KubernetesCluster {
        let api = self.clusters();
        wait_for(what, timeout, || async {
            let found = api.get_opt(name).await.map_err(|e| e.to_string())?;
            Ok(found.filter(|c| check(c)))
        })
        .await
        .unwrap_or_else(|e| {
            panic!("{e}");
        })
    }

    pub async fn wait_ready(&self, name: &str) -> KubernetesCluster {
        self.wait(name, "the cluster to be Ready", CLUSTER_TIMEOUT, |c| {
            phase(c) == Some(Phase::Ready)
                && condition(c, reasons::READY) == Some(("True", reasons::REASON_CLUSTER_READY))
        })
        .await
    }

    pub async fn wait_condition(
        &self,
        name: &str,
        type_: &str,
        status: &str,
        reason: &str,
    ) -> KubernetesCluster {
        self.wait(
            name,
            &format!("{type_}={status} ({reason})"),
            CLUSTER_TIMEOUT,
            |c| condition(c, type_) == Some((status, reason)),
        )
        .await
    }

    pub async fn wait_gone(&self, name: &str) {
        let api = self.clusters();
        wait_for(
            "the KubernetesCluster to be gone",
            CLUSTER_TIMEOUT,
            || async {
                match api.get_opt(name).await {
                    Ok(None) => Ok(Some(())),
                    Ok(Some(_)) => Ok(None),
                    Err(e) => Err(e.to_string()),
                }
            },
        )
        .await
        .expect("gone");
    }

    pub async fn finish(self, running: Running) {
        // Leave nothing behind at the provider: clusters are deleted with their objects.
        let api = self.clusters();
        if let Ok(list) = api.list(&Default::default()).await {
            for c in list.items {
                let _ = api.delete(&c.name_any(), &DeleteParams::default()).await;
            }
            wait_for("every KubernetesCluster gone", CLUSTER_TIMEOUT, || async {
                let left = api
                    .list(&Default::default())
                    .await
                    .map_err(|e| e.to_string())?;
                if left.items.is_empty() {
                    return Ok(Some(()));
                }
                Err(format!(
                    "left: {:?}",
                    left.items
                        .iter()
                        .map(|c| (c.name_any(), c.status.as_ref().map(|s| &s.conditions)))
                        .collect::<Vec<_>>()
                ))
            })
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        }
        running.stop().await;
        let _ = std::fs::remove_dir_all(&self.dir);
        self.env.cleanup().await;
    }
}

pub fn merge(target: &mut Value, patch: Value) {
    match (target, patch) {
        (Value::Object(t), Value::Object(p)) => {
            for (k, v) in p {
                merge(t.entry(k).or_insert(Value::Null), v);
            }
        }
        (t, p) => *t = p,
    }
}

pub fn phase(c: &KubernetesCluster) -> Option<Phase> {
    c.status.as_ref()?.phase
}

pub fn condition<'a>(c: &'a KubernetesCluster, type_: &str) -> Option<(&'a str, &'a str)> {
    let found = conditions::find(&c.status.as_ref()?.conditions, type_)?;
    Some((found.status.as_str(), found.reason.as_str()))
}

pub fn message<'a>(c: &'a KubernetesCluster, type_: &str) -> &'a str {
    c.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_))
        .map_or("", |c| c.message.as_str())
}

pub async fn install_crd(client: &Client, crd: CustomResourceDefinition) {
    vigil_testenv::install_crd(client, &crd)
        .await
        .expect("CRD served");
}

pub async fn reference(config: ReferenceConfig) -> ReferenceProvider {
    ReferenceProvider::start(config)
        .await
        .expect("reference provider")
}

/// Providers with the reference provider as `bank` (and no `local`).
pub fn bank(reference: &ReferenceProvider) -> Providers {
    let external =
        vigil_provider::external::ExternalProvider::new(vigil_provider::external::ExternalConfig {
            url: reference.url(),
            token: None,
            timeout: Duration::from_secs(2),
        })
        .expect("external provider");
    let mut providers = Providers::new();
    providers.insert("bank", Arc::new(external) as Arc<dyn ClusterProvider>);
    providers
}

pub fn identity_key(name: &str) -> String {
    format!("{ARTICLE_UUID}/{name}")
}

pub fn on_bank() -> Value {
    json!({"provider": {"name": "bank"}})
}
