//! What the process-level tests share: a child process killed when dropped, a `vigil sandbox`
//! child, a client for its kubeconfig, and the CriticalService setup the multi-process tests
//! start from.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, PodTemplate};
use kube::CustomResourceExt as _;
use kube::api::{Api, PostParams};
use vigil_apis::CriticalService;

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `vigil sandbox` on a free port, its kubeconfig written to `kubeconfig`; returns once it serves.
pub fn spawn_sandbox(kubeconfig: &Path) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sandbox");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert!(line.contains("sandbox ready"), "{line}");
    Proc(child)
}

/// A client for the kubeconfig file at `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// A client program for the tests that drive real clients (kubectl, helm): the path in the
/// environment variable `env_var` (CI installs them there), else `name` on PATH; None when neither.
pub fn client_program(env_var: &str, name: &str) -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        let path = std::path::PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Helm bound to one kubeconfig, with cache, config and data directories of its own under `home`.
pub struct Helm {
    pub bin: std::path::PathBuf,
    pub kubeconfig: std::path::PathBuf,
    pub home: std::path::PathBuf,
}

impl Helm {
    /// Helm from `VIGIL_HELM`, else `helm` on PATH; None when neither exists.
    pub fn find(kubeconfig: &Path, home: &Path) -> Option<Self> {
        Some(Self {
            bin: client_program("VIGIL_HELM", "helm")?,
            kubeconfig: kubeconfig.to_owned(),
            home: home.to_owned(),
        })
    }

    /// Runs helm; panics with its output when it fails.
    pub fn run(&self, args: &[&str]) -> String {
        self.try_run(args).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Runs helm: its stdout, or what it said when it failed.
    pub fn try_run(&self, args: &[&str]) -> Result<String, String> {
        let output = Command::new(&self.bin)
            .args(args)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .env_remove("KUBECONFIG")
            .env("HELM_CACHE_HOME", self.home.join("cache"))
            .env("HELM_CONFIG_HOME", self.home.join("config"))
            .env("HELM_DATA_HOME", self.home.join("data"))
            .output()
            .expect("run helm");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        if output.status.success() {
            Ok(stdout)
        } else {
            Err(format!(
                "helm {args:?} failed:\nstdout: {stdout}\nstderr: {}",
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }
}

/// The chart in this repository.
pub fn chart_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../charts/vigil")
        .to_string_lossy()
        .into_owned()
}

/// A typed object from JSON.
pub fn json<T: k8s_openapi::serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("object")
}

/// The namespace `ns`, the CriticalService CRD (served), the fallback PodTemplate, and the
/// CriticalService `critical` covering the Services of `ns` labelled `tier=critical`.
pub async fn critical_service_setup(client: &kube::Client, ns: &str) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &json(serde_json::json!({"metadata": {"name": ns}})),
        )
        .await
        .expect("namespace");
    vigil_testenv::install_crd(client, &CriticalService::crd())
        .await
        .expect("crd");
    let template = serde_json::json!({"metadata": {"name": "critical-service-pod-template"}, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}});
    Api::<PodTemplate>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &json(template))
        .await
        .expect("template");
    let cr = serde_json::json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService", "metadata": {"name": "critical"},
        "spec": {"namespace": ns, "matchLabels": [{"key": "tier", "value": "critical"}]}});
    Api::<CriticalService>::all(client.clone())
        .create(&PostParams::default(), &json(cr))
        .await
        .expect("cr");
}

/// Who holds the `vigil-leader` Lease (a released Lease, with an empty holder, counts as none).
pub async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("vigil-leader")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}
