//! The test environment: a `kube::Client` on a fresh in-process sandbox, or on the real cluster
//! named by `VIGIL_TEST_KUBECONFIG`, plus a namespace of its own that is deleted afterwards.
//!
//! ```no_run
//! # async fn t() -> Result<(), vigil_testenv::TestEnvError> {
//! let env = vigil_testenv::TestEnv::start().await?;
//! let cms: kube::Api<k8s_openapi::api::core::v1::ConfigMap> = env.api();
//! // ... exercise the API in env.namespace() ...
//! env.cleanup().await;
//! # Ok(()) }
//! ```

mod conditions;
mod control_plane;
mod crds;
pub mod hosted;
mod requests;
mod wait;
mod watchdog;
mod workloads;

use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DeleteParams, DynamicObject, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use vigil_sandbox::{Sandbox, SandboxConfig};

pub use conditions::{ConditionView, condition, has_condition, wait_condition};
pub use control_plane::{ControlPlaneFault, KUBE_DIR_ENV, KUBE_WORKDIR_ENV};
pub use crds::{CrdError, install_crd, wait_until_served};
pub use requests::{RbacAttributes, RequestLog, rbac_attributes, recording_client};
pub use vigil_kubelet::{
    self, EXIT_CODE_ANNOTATION, KubeletConfig, RUN_SECONDS_ANNOTATION, STATE_ANNOTATION,
};
pub use vigil_sandbox;
pub use wait::{WaitError, wait_for};
pub use watchdog::{DEFAULT_LIMIT as WATCHDOG_DEFAULT_LIMIT, WATCHDOG_ENV, Watchdog};
pub use workloads::{SETTLE_TIMEOUT, WorkloadError};

use vigil_kubelet::Kubelet;

/// The environment variable naming a real cluster's kubeconfig.
pub const KUBECONFIG_ENV: &str = "VIGIL_TEST_KUBECONFIG";

/// Label put on every test namespace, so leftovers can be found and removed.
pub const TEST_LABEL: &str = "vigil.dev/test";

/// Why the environment could not start.
#[derive(Debug, thiserror::Error)]
pub enum TestEnvError {
    #[error("starting the sandbox: {0}")]
    Sandbox(#[from] vigil_sandbox::SandboxError),
    #[error("reading kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: kube::config::KubeconfigError,
    },
    #[error("building a client: {0}")]
    Client(#[from] kube::Error),
    #[error("creating the test namespace: {0}")]
    Namespace(kube::Error),
    #[error("writing a kubeconfig file: {0}")]
    Io(#[from] std::io::Error),
    #[error("starting the simulated kubelet: {0}")]
    Kubelet(vigil_kubelet::KubeletError),
    #[error(
        "namespace {namespace} has no default ServiceAccount after {waited:?}: is kube-controller-manager running?"
    )]
    NoServiceAccount {
        namespace: String,
        waited: std::time::Duration,
    },
}

/// How to start an environment.
#[derive(Debug, Clone, Default)]
pub struct TestEnvOptions {
    /// Settings of the sandbox, when one is started (ignored on a real cluster).
    pub sandbox: SandboxConfig,
    /// Run a simulated kubelet for this test's namespace (on either backend). Its node name and
    /// namespace are filled in per test so tests sharing a real cluster do not meet.
    pub kubelet: Option<KubeletConfig>,
}

impl TestEnvOptions {
    /// Options with a simulated kubelet that makes pods Ready at once.
    pub fn with_kubelet() -> Self {
        Self {
            kubelet: Some(KubeletConfig::default()),
            ..Self::default()
        }
    }
}

enum Backend {
    Sandbox(Sandbox),
    Cluster,
}

/// A client, a namespace of its own, and (on the sandbox) the server itself.
pub struct TestEnv {
    client: Client,
    namespace: String,
    backend: Backend,
    kubeconfig_text: String,
    kubeconfig_file: Option<PathBuf>,
    kubelet: Option<Kubelet>,
    cleaned: bool,
    /// Cluster-scoped objects the test made, deleted with the namespace (see
    /// [`TestEnv::delete_on_cleanup`]).
    cluster_scoped: std::sync::Mutex<Vec<(ApiResource, String)>>,
    /// Ends the test binary, naming the test, if the test holds this environment too long.
    _watchdog: Option<Watchdog>,
}

impl std::fmt::Debug for TestEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestEnv")
            .field("namespace", &self.namespace)
            .field("sandbox", &self.is_sandbox())
            .finish()
    }
}

impl TestEnv {
    /// A fresh sandbox (or the cluster of `VIGIL_TEST_KUBECONFIG`) and a new namespace.
    pub async fn start() -> Result<Self, TestEnvError> {
        Self::start_with(TestEnvOptions::default()).await
    }

    /// Like [`TestEnv::start`], with options.
    pub async fn start_with(options: TestEnvOptions) -> Result<Self, TestEnvError> {
        let watchdog = Watchdog::arm();
        let (backend, kubeconfig_text) =
            match std::env::var_os(KUBECONFIG_ENV).filter(|v| !v.is_empty()) {
                Some(path) => {
                    let text = std::fs::read_to_string(&path)?;
                    (Backend::Cluster, text)
                }
                None => {
                    let sandbox = Sandbox::start(options.sandbox).await?;
                    let text = sandbox.kubeconfig();
                    (Backend::Sandbox(sandbox), text)
                }
            };
        let config = config_from_text(&kubeconfig_text).await?;
        let client = Client::try_from(config)?;
        let namespace = create_namespace(&client).await?;
        if matches!(backend, Backend::Cluster) {
            wait_for_default_service_account(&client, &namespace).await?;
        }
        let kubelet = match options.kubelet {
            Some(config) => {
                let config = KubeletConfig {
                    node_name: format!(
                        "vigil-node-{}",
                        namespace.trim_start_matches("vigil-test-")
                    ),
                    namespace: Some(namespace.clone()),
                    ..config
                };
                Some(
                    Kubelet::start(client.clone(), config)
                        .await
                        .map_err(TestEnvError::Kubelet)?,
                )
            }
            None => None,
        };
        Ok(Self {
            client,
            namespace,
            backend,
            kubeconfig_text,
            kubeconfig_file: None,
            kubelet,
            cleaned: false,
            cluster_scoped: std::sync::Mutex::new(Vec::new()),
            _watchdog: watchdog,
        })
    }

    /// A client for the environment.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The client configuration, for a test that builds a client of its own.
    pub async fn config(&self) -> Result<Config, TestEnvError> {
        config_from_text(&self.kubeconfig_text).await
    }

    /// A client that records every request it sends (see [`RequestLog`]).
    pub async fn recording_client(&self) -> Result<(Client, RequestLog), TestEnvError> {
        Ok(recording_client(self.config().await?)?)
    }

    /// This test's namespace.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// An `Api` for a namespaced kind in this test's namespace.
    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Whether this runs on the in-process sandbox (rather than a real cluster).
    pub fn is_sandbox(&self) -> bool {
        matches!(self.backend, Backend::Sandbox(_))
    }

    /// The sandbox, for tests that need its powers (fault injection); None on a real cluster.
    pub fn sandbox(&self) -> Option<&Sandbox> {
        match &self.backend {
            Backend::Sandbox(s) => Some(s),
            Backend::Cluster => None,
        }
    }

    /// A kubeconfig file for this environment (for kubectl), written on first use.
    pub fn kubeconfig_path(&mut self) -> Result<&Path, TestEnvError> {
        if self.kubeconfig_file.is_none() {
            let path = std::env::temp_dir().join(format!("vigil-{}.kubeconfig", self.namespace));
            std::fs::write(&path, &self.kubeconfig_text)?;
            self.kubeconfig_file = Some(path);
        }
        Ok(self.kubeconfig_file.as_deref().unwrap_or(Path::new("")))
    }

    /// The simulated kubelet's node, when one runs.
    pub fn node_name(&self) -> Option<&str> {
        self.kubelet.as_ref().map(Kubelet::node_name)
    }

    /// Has `cleanup` (or, after a panic, the drop) delete a cluster-scoped object the test
    /// made: the namespace takes only namespaced objects with it, and on a shared cluster a
    /// leftover (a StatusBackupPolicy, say) would act on the tests that come after.
    pub fn delete_on_cleanup(&self, resource: &ApiResource, name: &str) {
        if let Ok(mut list) = self.cluster_scoped.lock() {
            list.push((resource.clone(), name.to_owned()));
        }
    }

    fn take_cluster_scoped(&self) -> Vec<(ApiResource, String)> {
        self.cluster_scoped
            .lock()
            .map(|mut list| std::mem::take(&mut *list))
            .unwrap_or_default()
    }

    /// Deletes the test namespace (and, on the sandbox, stops the server).
    pub async fn cleanup(mut self) {
        self.cleaned = true;
        if let Some(kubelet) = self.kubelet.take() {
            kubelet.stop_and_deregister().await;
        }
        delete_cluster_scoped(&self.client, self.take_cluster_scoped()).await;
        delete_namespace(&self.client, &self.namespace).await;
        self.remove_kubeconfig_file();
        if let Backend::Sandbox(sandbox) = std::mem::replace(&mut self.backend, Backend::Cluster) {
            sandbox.shutdown().await;
        }
    }

    fn remove_kubeconfig_file(&mut self) {
        if let Some(path) = self.kubeconfig_file.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

impl Drop for TestEnv {
    /// A test that panicked never reached `cleanup`: delete its namespace anyway. On the sandbox
    /// dropping the server is enough; on a real cluster the namespace is deleted from a helper
    /// thread with its own runtime, since the test's runtime may be shutting down.
    fn drop(&mut self) {
        self.remove_kubeconfig_file();
        if self.cleaned || self.is_sandbox() {
            return;
        }
        let text = self.kubeconfig_text.clone();
        let namespace = self.namespace.clone();
        let node = self.kubelet.take().map(|k| k.node_name().to_owned());
        let cluster_scoped = self.take_cluster_scoped();
        let worker = std::thread::spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            runtime.block_on(async move {
                if let Ok(client) = config_from_text(&text)
                    .await
                    .and_then(|c| Ok(Client::try_from(c)?))
                {
                    delete_cluster_scoped(&client, cluster_scoped).await;
                    delete_namespace(&client, &namespace).await;
                    if let Some(node) = node {
                        Kubelet::deregister(&client, &node).await;
                    }
                }
            });
        });
        let _ = worker.join();
    }
}

async fn config_from_text(text: &str) -> Result<Config, TestEnvError> {
    let kubeconfig = Kubeconfig::from_yaml(text).map_err(|source| TestEnvError::Kubeconfig {
        path: KUBECONFIG_ENV.into(),
        source,
    })?;
    Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(|source| TestEnvError::Kubeconfig {
            path: KUBECONFIG_ENV.into(),
            source,
        })
}

/// A random suffix of lowercase letters and digits.
fn random_suffix(len: usize) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    (0..len)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

async fn create_namespace(client: &Client) -> Result<String, TestEnvError> {
    let api: Api<Namespace> = Api::all(client.clone());
    let name = format!("vigil-test-{}", random_suffix(8));
    let ns: Namespace = serde_json::from_value(serde_json::json!({
        "metadata": {"name": name, "labels": {TEST_LABEL: "true"}}
    }))
    .map_err(|e| TestEnvError::Namespace(kube::Error::SerdeError(e)))?;
    api.create(&PostParams::default(), &ns)
        .await
        .map_err(TestEnvError::Namespace)?;
    Ok(name)
}

/// How long kube-controller-manager may take to give a new namespace its `default`
/// ServiceAccount (the upstream e2e framework's `ServiceAccountProvisionTimeout`).
const SERVICE_ACCOUNT_PROVISION_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(120);

/// On a real cluster a pod is refused ("error looking up service account") until
/// kube-controller-manager has created its namespace's `default` ServiceAccount, which takes a
/// moment after the namespace, and much longer while its watches recover from a kube-apiserver
/// restart (a fault test's): as Kubernetes' own e2e framework does, a test starts once it is there.
async fn wait_for_default_service_account(
    client: &Client,
    namespace: &str,
) -> Result<(), TestEnvError> {
    let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
        Api::namespaced(client.clone(), namespace);
    let started = std::time::Instant::now();
    loop {
        match accounts.get_opt("default").await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) | Err(_) if started.elapsed() < SERVICE_ACCOUNT_PROVISION_TIMEOUT => {
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
            Ok(None) => {
                return Err(TestEnvError::NoServiceAccount {
                    namespace: namespace.to_owned(),
                    waited: SERVICE_ACCOUNT_PROVISION_TIMEOUT,
                });
            }
            Err(e) => return Err(TestEnvError::Namespace(e)),
        }
    }
}

async fn delete_cluster_scoped(client: &Client, objects: Vec<(ApiResource, String)>) {
    for (resource, name) in objects {
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        if let Err(e) = api.delete(&name, &DeleteParams::background()).await
            && !matches!(&e, kube::Error::Api(s) if s.code == 404)
        {
            tracing::warn!(%name, error = %e, "could not delete a test's cluster-scoped object");
        }
    }
}

async fn delete_namespace(client: &Client, namespace: &str) {
    let api: Api<Namespace> = Api::all(client.clone());
    if let Err(e) = api.delete(namespace, &DeleteParams::background()).await {
        tracing::warn!(namespace, error = %e, "could not delete the test namespace");
    }
}

/// Skips the rest of a test that needs the sandbox's powers when running on a real cluster.
#[macro_export]
macro_rules! require_sandbox {
    ($env:expr) => {
        if !$env.is_sandbox() {
            eprintln!("skipped on a real cluster: this test needs sandbox-only powers");
            $env.cleanup().await;
            return;
        }
    };
}
