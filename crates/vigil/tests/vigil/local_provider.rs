//! The `local` cluster provider with real `vigil sandbox` processes: the provider contract, and
//! what only local clusters have — a kubeconfig that reaches a real API server, processes that
//! outlive the provider, restarts of dead processes, addon drift, and cleanup of everything.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, PostParams};
use vigil_provider::contract::{self, ContractHooks, ContractTiming};
use vigil_provider::local::{LocalConfig, LocalProvider, REFUSE_DELETE};
use vigil_provider::{AddonState, ClusterProvider, ClusterState, Deletion, ProviderCluster};

const UUID: &str = "5b0f6c1e-8f7e-4a43-9d55-0d7c7e0a1b2c";

/// A root directory whose sandbox processes are killed and files removed when dropped, so a
/// failing test leaves nothing running.
struct Root(PathBuf);

impl Root {
    fn new(test: &str) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path = std::env::temp_dir().join(format!(
            "vigil-local-{test}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&path);
        Self(path)
    }

    fn provider(&self) -> LocalProvider {
        let mut config = LocalConfig::new(&self.0, env!("CARGO_BIN_EXE_vigil"));
        config.stop_grace = Duration::from_secs(3);
        LocalProvider::new(config).expect("local provider")
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        if let Ok(provider) = LocalProvider::new(LocalConfig::new(&self.0, "vigil")) {
            provider.kill_all();
        }
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn timing() -> ContractTiming {
    ContractTiming {
        deadline: Duration::from_secs(30),
        poll: Duration::from_millis(100),
    }
}

struct MarkerHooks(PathBuf);

impl ContractHooks for MarkerHooks {
    fn refuse_deletes(&self, id: &str) {
        std::fs::write(self.0.join(id).join(REFUSE_DELETE), "held for an audit").expect("marker");
    }
    fn allow_deletes(&self, id: &str) {
        std::fs::remove_file(self.0.join(id).join(REFUSE_DELETE)).expect("marker");
    }
}

async fn running(provider: &LocalProvider, id: &str) -> ProviderCluster {
    contract::wait_for(provider, id, timing(), "Running", |c| {
        c.state == ClusterState::Running
    })
    .await
    .expect("Running")
}

async fn client_of(cluster: &ProviderCluster) -> kube::Client {
    let yaml = cluster.kubeconfig.as_deref().expect("kubeconfig");
    let kubeconfig = kube::config::Kubeconfig::from_yaml(yaml).expect("parses");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// Waits until the provider reports every addon `Installed`: its Deployment available.
async fn addons_available(provider: &LocalProvider, id: &str) -> ProviderCluster {
    contract::wait_for(provider, id, timing(), "every addon Installed", |c| {
        c.state == ClusterState::Running
            && c.addons.iter().all(|a| a.state == AddonState::Installed)
    })
    .await
    .expect("addons Installed")
}

fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill");
    assert!(status.success());
}

fn pids(provider: &LocalProvider, id: &str) -> Vec<u32> {
    provider
        .clusters()
        .expect("clusters")
        .into_iter()
        .find(|c| c.id == id)
        .map(|c| c.pids)
        .unwrap_or_default()
}

#[tokio::test]
async fn the_local_provider_keeps_the_contract() {
    let root = Root::new("contract");
    let provider = root.provider();
    contract::run_all(
        &provider,
        &MarkerHooks(root.0.clone()),
        UUID,
        "contract",
        ("1.28", "1.29.2"),
        timing(),
    )
    .await
    .expect("contract");
    assert!(provider.clusters().expect("clusters").is_empty());
    assert!(
        provider.processes().is_empty(),
        "{:?}",
        provider.processes()
    );
}

#[tokio::test]
async fn a_local_cluster_is_a_real_api_server_that_outlives_its_provider_and_comes_back() {
    let root = Root::new("lifecycle");
    let provider = root.provider();
    let request = contract::request(UUID, "real", "1.30", &[("cluster-autoscaler", "1.2.3")]);
    let created = provider.create(&request).await.expect("create");
    assert_eq!(created.state, ClusterState::Provisioning);
    let id = created.id.clone();
    let cluster = running(&provider, &id).await;
    let url = cluster.api_server_url.clone().expect("url");
    assert!(url.starts_with("https://127.0.0.1:"), "{url}");
    assert_eq!(cluster.master_version.as_deref(), Some("1.30.0"));

    // The kubeconfig reaches the API server, which reports the version asked for.
    let client = client_of(&cluster).await;
    let version = client.apiserver_version().await.expect("version");
    assert_eq!(version.git_version, "v1.30.0");
    let from_file = kube::config::Kubeconfig::read_from(root.0.join(&id).join("kubeconfig"))
        .expect("the sandbox wrote its kubeconfig");
    assert_eq!(
        from_file.clusters[0]
            .cluster
            .as_ref()
            .and_then(|c| c.server.clone()),
        Some(url.clone())
    );
    addons_available(&provider, &id).await;
    let addon: Api<Deployment> = Api::namespaced(client.clone(), "kube-system");
    let deployment = addon
        .get("cluster-autoscaler")
        .await
        .expect("addon installed");
    assert_eq!(
        deployment
            .metadata
            .annotations
            .and_then(|a| a.get("vigil.dev/addon-version").cloned()),
        Some("1.2.3".into())
    );
    let configmaps: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut marker = ConfigMap::default();
    marker.metadata.name = Some("kept".into());
    configmaps
        .create(&PostParams::default(), &marker)
        .await
        .expect("create a ConfigMap");

    // A new provider on the same root finds the same process, still serving.
    let first_pids = pids(&provider, &id);
    assert_eq!(first_pids.len(), 1, "{first_pids:?}");
    drop(provider);
    let provider = root.provider();
    let again = running(&provider, &id).await;
    assert_eq!(again.api_server_url.as_deref(), Some(url.as_str()));
    assert_eq!(pids(&provider, &id), first_pids);
    assert_eq!(
        provider
            .find(&request.identity)
            .await
            .expect("find")
            .map(|c| c.id),
        Some(id.clone())
    );

    // Drift: an addon deleted by hand is seen missing and installed again.
    addon
        .delete("cluster-autoscaler", &DeleteParams::default())
        .await
        .expect("delete the addon");
    let reinstalled = running(&provider, &id).await;
    assert!(
        reinstalled
            .addons
            .iter()
            .any(|a| a.name == "cluster-autoscaler" && a.state != AddonState::Failed),
        "{:?}",
        reinstalled.addons
    );
    addons_available(&provider, &id).await;
    addon.get("cluster-autoscaler").await.expect("reinstalled");

    // A dead process is restarted on the same port with the same data.
    tokio::time::sleep(Duration::from_millis(500)).await; // the sandbox flushes every 200 ms
    kill(first_pids[0]);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let restarting = provider.get(&id).await.expect("get").expect("exists");
    assert_eq!(
        restarting.state,
        ClusterState::Provisioning,
        "{restarting:?}"
    );
    assert_eq!(
        restarting.progress.as_deref(),
        Some("restarting the API server")
    );
    let back = running(&provider, &id).await;
    assert_eq!(back.api_server_url.as_deref(), Some(url.as_str()));
    let new_pids = pids(&provider, &id);
    assert_eq!(new_pids.len(), 1);
    assert_ne!(new_pids, first_pids);
    let client = client_of(&back).await;
    Api::<ConfigMap>::namespaced(client, "default")
        .get("kept")
        .await
        .expect("the data survived the restart");

    // Delete stops the process and removes the directory.
    contract::delete_until_gone(&provider, &id, timing())
        .await
        .expect("deleted");
    assert!(!root.0.join(&id).exists());
    assert!(provider.processes().is_empty());
    // Reaped, not left a zombie of this (parent) process.
    let proc_dir = PathBuf::from(format!("/proc/{}", new_pids[0]));
    for _ in 0..50 {
        if !proc_dir.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!proc_dir.exists(), "pid {} not reaped", new_pids[0]);
    assert_eq!(provider.delete(&id).await.expect("again"), Deletion::Gone);
}

#[tokio::test]
async fn a_process_whose_pid_was_never_recorded_is_adopted_not_duplicated() {
    let root = Root::new("adopt");
    let provider = root.provider();
    let request = contract::request(UUID, "adopted", "1.31", &[]);
    let id = provider.create(&request).await.expect("create").id;
    running(&provider, &id).await;
    // As if the operator died between starting the process and recording its pid.
    let record_path = root.0.join(&id).join("cluster.json");
    let mut record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record_path).expect("record")).expect("json");
    record["pid"] = serde_json::Value::Null;
    std::fs::write(&record_path, serde_json::to_vec(&record).expect("json")).expect("write");
    let before = pids(&provider, &id);
    running(&provider, &id).await;
    assert_eq!(pids(&provider, &id), before);
    assert_eq!(provider.processes().len(), 1);
}

#[tokio::test]
async fn two_providers_on_one_root_racing_to_create_make_one_cluster() {
    let root = Root::new("race");
    let (a, b) = (root.provider(), root.provider());
    let request = contract::request(UUID, "raced", "1.30", &[]);
    let (first, second) = tokio::join!(a.create(&request), b.create(&request));
    let (first, second) = (first.expect("a"), second.expect("b"));
    assert_eq!(first.id, second.id);
    running(&a, &first.id).await;
    assert_eq!(a.clusters().expect("clusters").len(), 1);
    assert_eq!(a.processes().len(), 1, "{:?}", a.processes());
}

#[tokio::test]
async fn deletes_are_refused_by_configuration_too() {
    let root = Root::new("refuse");
    let mut config = LocalConfig::new(&root.0, env!("CARGO_BIN_EXE_vigil"));
    config.refuse_deletes = true;
    let provider = LocalProvider::new(config).expect("provider");
    let id = provider
        .create(&contract::request(UUID, "kept", "1.30", &[]))
        .await
        .expect("create")
        .id;
    match provider.delete(&id).await {
        Err(vigil_provider::ProviderError::Rejected { reason, message }) => {
            assert_eq!(reason, "DeleteRefused");
            assert!(message.contains(&id), "{message}");
        }
        other => panic!("not refused: {other:?}"),
    }
    assert!(Path::new(&root.0.join(&id)).exists());
}

/// kubectl: `VIGIL_KUBECTL`, else the first `kubectl` on PATH; `None` when there is none.
fn kubectl() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("VIGIL_KUBECTL") {
        return Some(PathBuf::from(path)).filter(|p| p.is_file());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|p| p.join("kubectl"))
        .find(|p| p.is_file())
}

/// Runs kubectl with `kubeconfig`; asserts it succeeded and returns its stdout.
async fn kubectl_ok(bin: &Path, kubeconfig: &Path, cache: &Path, args: &[&str]) -> String {
    let run = tokio::process::Command::new(bin)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--cache-dir")
        .arg(cache)
        .arg("--request-timeout=10s")
        .args(args)
        .env_remove("KUBECONFIG")
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish within 30s"))
        .expect("run kubectl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The kubeconfig a local cluster hands out (the one the controller stores in the
/// `<name>-kubeconfig` Secret) works with client-go, which sends a bearer token only over TLS.
#[tokio::test]
async fn a_local_cluster_kubeconfig_works_with_kubectl() {
    let root = Root::new("kubectl");
    let provider = root.provider();
    let id = provider
        .create(&contract::request(
            UUID,
            "kubectl",
            "1.28",
            &[("coredns", "1.11.3"), ("metrics-server", "0.7.2")],
        ))
        .await
        .expect("create")
        .id;
    let cluster = running(&provider, &id).await;
    let kubeconfig = cluster.kubeconfig.clone().expect("kubeconfig");
    assert!(
        kubeconfig.contains("server: \"https://127.0.0.1:")
            && kubeconfig.contains("certificate-authority-data: "),
        "the kubeconfig names a TLS server and its CA: {kubeconfig}"
    );
    let Some(bin) = kubectl() else {
        eprintln!(
            "skipped the kubectl part: no kubectl binary (set VIGIL_KUBECTL or put kubectl on PATH)"
        );
        return;
    };
    let file = root.0.join("cluster.kubeconfig");
    std::fs::write(&file, &kubeconfig).expect("write kubeconfig");
    let cache = root.0.join("kubectl-cache");

    let version = kubectl_ok(&bin, &file, &cache, &["version", "-o", "json"]).await;
    let version: serde_json::Value = serde_json::from_str(&version).expect("JSON");
    assert_eq!(
        version["serverVersion"]["gitVersion"], "v1.28.0",
        "{version}"
    );
    let namespaces = kubectl_ok(&bin, &file, &cache, &["get", "namespaces", "-o", "name"]).await;
    for ns in ["default", "kube-system"] {
        assert!(
            namespaces.lines().any(|l| l == format!("namespace/{ns}")),
            "{namespaces}"
        );
    }

    // The addons are Deployments in the cluster's kube-system that its own workload loops and
    // simulated kubelet make available; the provider reports them Installed only then.
    let installed = addons_available(&provider, &id).await;
    assert_eq!(installed.addons.len(), 2, "{:?}", installed.addons);
    let listed = kubectl_ok(
        &bin,
        &file,
        &cache,
        &["-n", "kube-system", "get", "deployments", "-o", "json"],
    )
    .await;
    let listed: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let items = listed["items"].as_array().expect("items");
    for name in ["coredns", "metrics-server"] {
        let d = items
            .iter()
            .find(|d| d["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("no Deployment {name}: {listed}"));
        assert_eq!(d["status"]["availableReplicas"], 1, "{d}");
        assert_eq!(d["status"]["updatedReplicas"], 1, "{d}");
        let available = d["status"]["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == "Available"))
            .unwrap_or_else(|| panic!("no Available condition: {d}"));
        assert_eq!(available["status"], "True", "{d}");
    }
    // What a user types: the table kubectl prints shows each ready.
    let table = kubectl_ok(&bin, &file, &cache, &["-n", "kube-system", "get", "deploy"]).await;
    for name in ["coredns", "metrics-server"] {
        assert!(
            table
                .lines()
                .any(|l| l.split_whitespace().take(2).eq([name, "1/1"])),
            "{table}"
        );
    }
}
