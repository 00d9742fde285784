//! Two `vigil run` replicas against one `vigil sandbox`: only the leader acts; when the leader is
//! killed without a chance to release its Lease, the standby takes over within the lease
//! duration and acts, and no fallback pod is ever duplicated.

mod support;

use support::{Proc, client, critical_service_setup, json, spawn_sandbox};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, PostParams};

const NS: &str = "replicas";
const LEASE_DURATION: Duration = Duration::from_secs(2);

fn spawn_replica(kubeconfig: &Path, name: &str) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", NS)
        .args([
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
            "--leader-elect",
            "true",
            "--controllers",
            "criticalservice",
            "--namespaces",
            NS,
        ])
        .args([
            "--lease-duration",
            "2s",
            "--renew-deadline",
            "1500ms",
            "--retry-period",
            "200ms",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

async fn wait_until<F, Fut>(what: &str, timeout: Duration, mut check: F) -> Duration
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    started.elapsed()
}

async fn lame_service(client: &kube::Client, name: &str) {
    let svc = serde_json::json!({"metadata": {"name": name, "labels": {"tier": "critical"}},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}});
    Api::<Service>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &json(svc))
        .await
        .expect("service");
}

async fn fallbacks(pods: &Api<Pod>) -> Vec<String> {
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=vigil");
    pods.list(&lp)
        .await
        .map(|l| {
            l.items
                .into_iter()
                .filter_map(|p| p.metadata.name)
                .collect()
        })
        .unwrap_or_default()
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("vigil-leader")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

#[tokio::test]
async fn standby_takes_over_when_the_leader_dies() {
    let dir: PathBuf = std::env::temp_dir().join(format!("vigil-replicas-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    critical_service_setup(&client, NS).await;

    let mut a = Some(spawn_replica(&kubeconfig, "replica-a"));
    let mut b = Some(spawn_replica(&kubeconfig, "replica-b"));
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);

    lame_service(&client, "one").await;
    wait_until(
        "the leader to start one's fallback",
        Duration::from_secs(15),
        || async { fallbacks(&pods).await == vec!["service-watcher-one".to_owned()] },
    )
    .await;
    let leader = holder(&leases).await.expect("a leader holds the Lease");

    // SIGKILL: the leader cannot release the Lease; the standby must wait it out, then act.
    if leader.starts_with("replica-a_") {
        a.take()
    } else {
        b.take()
    };
    lame_service(&client, "two").await;
    let took = wait_until(
        "the standby to take over and start two's fallback",
        LEASE_DURATION * 4 + Duration::from_secs(5),
        || async { fallbacks(&pods).await.len() == 2 },
    )
    .await;
    let new_leader = holder(&leases).await.expect("a new leader");
    assert_ne!(new_leader, leader, "the other replica leads now");
    assert!(
        took < LEASE_DURATION * 4 + Duration::from_secs(5),
        "took over in {took:?}"
    );

    // Nothing is duplicated: one fallback per lame Service.
    let mut names = fallbacks(&pods).await;
    names.sort();
    assert_eq!(
        names,
        vec![
            "service-watcher-one".to_owned(),
            "service-watcher-two".to_owned()
        ]
    );
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
