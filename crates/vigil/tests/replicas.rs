//! Two `vigil run` replicas against one `vigil sandbox`: only the leader acts; when the leader is
//! killed without a chance to release its Lease, the standby takes over within the lease
//! duration and acts, and no fallback pod is ever duplicated.

mod support;

use support::{Proc, client, spawn_sandbox};

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplate, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, ListParams, PostParams};
use vigil_apis::CriticalService;

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

fn json<T: k8s_openapi::serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("object")
}

async fn setup(client: &kube::Client) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &json(serde_json::json!({"metadata": {"name": NS}})),
        )
        .await
        .expect("namespace");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &CriticalService::crd())
        .await
        .expect("crd");
    let crs: Api<CriticalService> = Api::all(client.clone());
    wait_until("the CRD to be served", Duration::from_secs(10), || async {
        crs.list(&ListParams::default()).await.is_ok()
    })
    .await;
    let template = serde_json::json!({"metadata": {"name": "critical-service-pod-template"}, "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}});
    Api::<PodTemplate>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &json(template))
        .await
        .expect("template");
    let cr = serde_json::json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService", "metadata": {"name": "critical"},
        "spec": {"namespace": NS, "matchLabels": [{"key": "tier", "value": "critical"}]}});
    crs.create(&PostParams::default(), &json(cr))
        .await
        .expect("cr");
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
    setup(&client).await;

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
