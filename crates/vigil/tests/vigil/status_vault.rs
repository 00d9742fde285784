//! The status vault inside `vigil run` (a child process, with a directory vault).
//!
//! Crash safety: `vigil run` is killed with SIGKILL in the middle of a burst of 1,000 status
//! changes, then started again. Afterwards every object's latest status is in the vault, no
//! record is corrupt, and no state was captured twice as a new version.
//!
//! Shared watches: backing up CriticalServices' status while the CriticalService controller runs
//! takes one watch of CriticalServices, not two.

use crate::support;

use support::{Proc, client, spawn_sandbox};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::CustomResourceExt as _;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, Patch, PatchParams, PostParams,
};
use serde_json::json;
use vigil_apis::{CriticalService, StatusBackupPolicy};
use vigil_testenv::{install_crd, wait_condition};
use vigil_vault::{ObjectKey, Vault, VaultOptions};

const NS: &str = "status-vault-crash";
const GROUP: &str = "infra.example.com";
const KIND: &str = "KubernetesCluster";
const OBJECTS: usize = 100;
const ROUNDS: usize = 10;

/// A fresh directory of this test's own: (the directory, its kubeconfig path, its vault path).
fn test_dir(name: &str) -> (PathBuf, PathBuf, PathBuf) {
    let dir =
        std::env::temp_dir().join(format!("vigil-status-vault-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let vault = dir.join("vault");
    (dir, kubeconfig, vault)
}

fn spawn_vigil(kubeconfig: &Path, vault: &Path) -> Proc {
    spawn_vigil_with(kubeconfig, vault, "statusvault", "127.0.0.1:0")
}

fn spawn_vigil_with(kubeconfig: &Path, vault: &Path, controllers: &str, metrics: &str) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args([
            "run",
            "--controllers",
            controllers,
            "--metrics-addr",
            metrics,
            "--leader-elect",
            "false",
            "--status-vault-location",
        ])
        .arg(vault)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(), String>>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok(()) => return,
            Err(e) => e,
        };
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}; last seen: {last}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1alpha1", KIND),
        "kubernetesclusters",
    )
}

/// Creates the StatusBackupPolicy `clusters` with this spec (its CRD installed).
async fn create_policy(client: &kube::Client, spec: serde_json::Value) {
    let policies: Api<StatusBackupPolicy> = Api::all(client.clone());
    let policy = json!({"apiVersion": "vigil.dev/v1", "kind": "StatusBackupPolicy",
        "metadata": {"name": "clusters"}, "spec": spec});
    policies
        .create(
            &PostParams::default(),
            &serde_json::from_value(policy).expect("policy"),
        )
        .await
        .expect("create policy");
}

async fn setup(client: &kube::Client, vault: &Path) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).expect("ns"),
        )
        .await
        .expect("namespace");
    install_crd(client, &StatusBackupPolicy::crd())
        .await
        .expect("policy crd");
    let clusters_crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("kubernetesclusters.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "kubernetesclusters", "singular": "kubernetescluster", "kind": KIND},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    install_crd(client, &serde_json::from_value(clusters_crd).expect("crd"))
        .await
        .expect("clusters crd");
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar());
    create_policy(
        client,
        json!({"resources": [{"group": GROUP, "kind": KIND}], "namespaces": [NS],
            "backend": {"location": vault.display().to_string()}, "retention": 100}),
    )
    .await;
    for i in 0..OBJECTS {
        let obj = json!({"apiVersion": format!("{GROUP}/v1alpha1"), "kind": KIND,
            "metadata": {"name": format!("c{i}")}, "spec": {"type": "iks"}});
        clusters
            .create(
                &PostParams::default(),
                &serde_json::from_value(obj).expect("obj"),
            )
            .await
            .expect("create cluster");
    }
}

/// Waits until the StatusBackupPolicy `clusters` is Ready.
async fn wait_policy_ready(client: &kube::Client) {
    let policies: Api<StatusBackupPolicy> = Api::all(client.clone());
    wait_condition(
        &policies,
        "clusters",
        "Ready",
        "True",
        Duration::from_secs(20),
    )
    .await
    .expect("the policy to be Ready");
}

#[tokio::test]
async fn sigkill_during_a_burst_loses_no_status_and_duplicates_no_version() {
    let (dir, kubeconfig, vault_dir) = test_dir("crash");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    setup(&client, &vault_dir).await;

    let mut vigil = Some(spawn_vigil(&kubeconfig, &vault_dir));
    wait_policy_ready(&client).await;

    // 1,000 status changes: 10 rounds over 100 objects, 16 in flight; SIGKILL after 300.
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar());
    let changes: Vec<(usize, usize)> = (1..=ROUNDS)
        .flat_map(|round| (0..OBJECTS).map(move |i| (round, i)))
        .collect();
    let mut sent = 0usize;
    let mut burst = futures::stream::iter(changes)
        .map(|(round, i)| {
            let clusters = clusters.clone();
            async move {
                clusters
                    .patch_status(
                        &format!("c{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": {"round": round, "apiServerURL": format!("https://c{i}.tld")}})),
                    )
                    .await
                    .expect("patch status");
            }
        })
        .buffer_unordered(16);
    while burst.next().await.is_some() {
        sent += 1;
        if sent == 300 {
            drop(vigil.take()); // SIGKILL, no chance to flush
        }
    }
    assert!(vigil.is_none(), "killed during the burst");
    let _vigil = spawn_vigil(&kubeconfig, &vault_dir);

    let vault = Vault::open(&vault_dir.display().to_string(), VaultOptions::default())
        .await
        .expect("vault");
    let key = |i: usize| ObjectKey::new(GROUP, KIND, Some(NS), format!("c{i}"));
    wait_until(
        "every object's last status in the vault",
        Duration::from_secs(60),
        || async {
            for i in 0..OBJECTS {
                let latest = vault.latest(&key(i)).await.map_err(|e| e.to_string())?;
                let round = latest.as_ref().and_then(|r| r.status.get("round").cloned());
                if round != Some(json!(ROUNDS)) {
                    return Err(format!("c{i}: {round:?}"));
                }
            }
            Ok(())
        },
    )
    .await;

    for i in 0..OBJECTS {
        let history = vault.history(&key(i)).await.expect("history");
        let records: Vec<_> = history
            .into_iter()
            .map(|r| r.unwrap_or_else(|e| panic!("c{i}: corrupt record: {e}")))
            .collect();
        for pair in records.windows(2) {
            assert!(
                !(pair[0].uid == pair[1].uid
                    && pair[0].status == pair[1].status
                    && pair[0].deleted == pair[1].deleted),
                "c{i}: the same state captured twice: {:?}",
                pair[1]
            );
        }
        assert!(records.len() <= ROUNDS, "c{i}: {} versions", records.len());
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A free local port for `vigil run`'s metrics (bound, then released for the child to take).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("addr").port()
}

/// `GET /metrics`, over a bare HTTP/1.0 connection.
async fn scrape(addr: &str) -> Result<String, String> {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: vigil\r\n\r\n")
        .await
        .map_err(|e| e.to_string())?;
    let mut body = String::new();
    stream
        .read_to_string(&mut body)
        .await
        .map_err(|e| e.to_string())?;
    Ok(body)
}

#[tokio::test]
async fn backing_up_criticalservices_shares_the_controllers_watch_of_them() {
    let (dir, kubeconfig, vault_dir) = test_dir("shared");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;

    for crd in [StatusBackupPolicy::crd(), CriticalService::crd()] {
        install_crd(&client, &crd).await.expect("crd");
    }
    let critical: Api<CriticalService> = Api::all(client.clone());
    create_policy(
        &client,
        json!({"resources": [{"group": "mycrd.com", "kind": "CriticalService"}],
            "backend": {"location": vault_dir.display().to_string()}}),
    )
    .await;

    let metrics = format!("127.0.0.1:{}", free_port());
    let _vigil = spawn_vigil_with(
        &kubeconfig,
        &vault_dir,
        "criticalservice,statusvault",
        &metrics,
    );
    wait_policy_ready(&client).await;
    let cr = json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService",
        "metadata": {"name": "shared-watch"},
        "spec": {"matchLabels": [{"key": "app", "value": "shared-watch"}]}});
    critical
        .create(
            &PostParams::default(),
            &serde_json::from_value(cr).expect("cr"),
        )
        .await
        .expect("create CriticalService");

    // The controller writes the CriticalService's status; the vault captures it.
    let vault = Vault::open(&vault_dir.display().to_string(), VaultOptions::default())
        .await
        .expect("vault");
    let key = ObjectKey::new(
        "mycrd.com",
        "CriticalService",
        None,
        "shared-watch".to_owned(),
    );
    wait_until(
        "the CriticalService's status in the vault",
        Duration::from_secs(20),
        || async {
            let latest = vault.latest(&key).await.map_err(|e| e.to_string())?;
            match latest {
                Some(record) if record.status.get("conditions").is_some() => Ok(()),
                other => Err(format!("{other:?}")),
            }
        },
    )
    .await;

    // Both controllers are fed by one watch of CriticalServices.
    let shared =
        r#"vigil_shared_watch_subscribers{resource="criticalservices.mycrd.com",namespace=""} 2"#;
    wait_until(
        "one watch with two subscribers",
        Duration::from_secs(10),
        || async {
            let text = scrape(&metrics).await?;
            if text.contains(shared) {
                Ok(())
            } else {
                Err(text
                    .lines()
                    .filter(|l| l.starts_with("vigil_shared_watch"))
                    .collect::<Vec<_>>()
                    .join("\n"))
            }
        },
    )
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}
