//! Two `vigil run` replicas against one `vigil sandbox`: only the leader acts; when the leader is
//! killed without a chance to release its Lease, the standby takes over within the lease
//! duration and acts, and no fallback pod is ever duplicated. When the leader is stopped as a
//! rolling upgrade stops it (SIGTERM), it releases the Lease and the standby, which watches it,
//! takes over and acts long before its next retry.

use crate::support;

use support::{Proc, client, critical_service_setup, holder, json, spawn_sandbox};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, ListParams, PostParams};

const NS: &str = "replicas";
const LEASE_DURATION: Duration = Duration::from_secs(2);

fn spawn_replica(kubeconfig: &Path, name: &str) -> Proc {
    spawn_replica_timed(kubeconfig, name, ["2s", "1500ms", "200ms"])
}

/// A replica with its `--lease-duration`, `--renew-deadline` and `--retry-period`.
fn spawn_replica_timed(kubeconfig: &Path, name: &str, timings: [&str; 3]) -> Proc {
    let [lease_duration, renew_deadline, retry_period] = timings;
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
            lease_duration,
            "--renew-deadline",
            renew_deadline,
            "--retry-period",
            retry_period,
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

/// A rolling upgrade's handover: the leader gets SIGTERM, drains, releases the Lease; the
/// standby sees the release through its watch and leads, then acts on a Service that went lame
/// meanwhile. With a 10 s retry period (each retry waits 10-22 s), both come well within it.
#[tokio::test]
async fn a_stopped_leader_hands_over_long_before_the_standbys_retry() {
    const RETRY: Duration = Duration::from_secs(10);
    let timings = ["30s", "20s", "10s"];
    let dir: PathBuf =
        std::env::temp_dir().join(format!("vigil-replicas-term-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    critical_service_setup(&client, NS).await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let leases: Api<Lease> = Api::namespaced(client.clone(), NS);

    let mut a = Some(spawn_replica_timed(&kubeconfig, "replica-a", timings));
    // The first to start leads at its first attempt; the other starts as its standby.
    wait_until("replica-a to lead", RETRY, || async {
        holder(&leases)
            .await
            .is_some_and(|h| h.starts_with("replica-a_"))
    })
    .await;
    let mut b = Some(spawn_replica_timed(&kubeconfig, "replica-b", timings));
    lame_service(&client, "one").await;
    wait_until("the leader to start one's fallback", RETRY, || async {
        fallbacks(&pods).await == vec!["service-watcher-one".to_owned()]
    })
    .await;
    // A moment for the standby's first attempt (it finds the Lease held) and its watch: it
    // is then in its 10 s+ wait.
    tokio::time::sleep(Duration::from_secs(1)).await;

    let leader = a.take().expect("replica-a");
    let stopped = Instant::now();
    let kill = Command::new("kill")
        .args(["-TERM", &leader.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let took = wait_until("replica-b to lead", RETRY, || async {
        holder(&leases)
            .await
            .is_some_and(|h| h.starts_with("replica-b_"))
    })
    .await;
    lame_service(&client, "two").await;
    let acted = wait_until("replica-b to start two's fallback", RETRY, || async {
        fallbacks(&pods).await.len() == 2
    })
    .await;
    eprintln!(
        "replicas: SIGTERM to the leader -> the standby leads after {} ms, and acts on a new lame \
         Service {} ms later (retry period {} ms)",
        took.as_millis(),
        acted.as_millis(),
        RETRY.as_millis()
    );
    assert!(
        stopped.elapsed() < RETRY,
        "the standby waited for its retry: it did not see the release"
    );
    drop((leader, b.take()));
    let _ = std::fs::remove_dir_all(&dir);
}
