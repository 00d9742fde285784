//! The control plane's own faults, as a real cluster lives through them (issue 33): the API
//! server killed, or stopped gracefully as a rolling upgrade stops it, for 8 s; etcd frozen, or
//! killed and restarted, for 8 s. On kube-apiserver these run through `../shared/kube/fault.sh`
//! (CI's stage 2); on the sandbox, the API server's two faults run as a sandbox restart, which
//! answers as a restarted kube-apiserver does while it starts (the etcd faults need a real etcd
//! and are skipped there, saying so).
//!
//! One `vigil run` (leader election on, with its production timings; CriticalService and
//! ConfigMapSync) faces each fault in turn. The moment `/readyz` is `ok` again, the last pod
//! behind a protected Service is deleted and a synced ConfigMap changes; the test prints how long
//! Vigil took to create the fallback pod and to update the copy (the target is 1 s; the figure is
//! printed, the assertion is only that both happen), and checks that Vigil's request rate stayed
//! bounded while the control plane was down (a hot loop would be hundreds a second).

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Pod, PodTemplate, Service};
use kube::CustomResourceExt as _;
use kube::api::{Api, ApiResource, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::{Proc, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use vigil_apis::{ConfigMapSync, CriticalService};
use vigil_testenv::{ControlPlaneFault, TestEnv, TestEnvOptions, wait_for};

/// How long each component stays down (or frozen).
const DOWN: Duration = Duration::from_secs(8);
/// Far above anything but a hot loop (see `slow_api.rs`).
const MAX_REQUESTS_PER_SECOND: f64 = 50.0;
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(60);
/// The convergence target after `/readyz` is `ok` (printed, not asserted).
const TARGET: Duration = Duration::from_secs(1);

/// GET `path` on `addr`: the body, or empty when nothing answered within 2 s.
async fn get(addr: SocketAddr, path: &str) -> String {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        Some(response)
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or_default()
}

/// Every request Vigil's client has completed so far (`rest_client_requests_total`).
async fn requests_total(addr: SocketAddr) -> f64 {
    get(addr, "/metrics")
        .await
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The metrics address `vigil run` logs at start.
async fn metrics_addr(log: &Path) -> SocketAddr {
    wait_for("vigil run's metrics address", CONVERGE_TIMEOUT, || async {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        Ok::<_, String>(
            text.lines()
                .filter(|l| l.contains("metrics and probes serving"))
                .find_map(|l| {
                    l.split_whitespace()
                        .find_map(|w| w.strip_prefix("addr="))
                        .and_then(|a| a.parse::<SocketAddr>().ok())
                }),
        )
    })
    .await
    .expect("vigil run logs its metrics address")
}

fn spawn_vigil(kubeconfig: &Path, ns: &str, log: &Path) -> Proc {
    let log = std::fs::File::create(log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("POD_NAME", "vigil-control-plane-faults")
        .env("POD_NAMESPACE", ns)
        .env("RUST_LOG", "info,vigil_runtime=debug")
        .env("NO_COLOR", "1")
        .args(["run", "--leader-elect", "true", "--namespaces", ns])
        .args(["--controllers", "configmapsync,criticalservice"])
        .args(["--configmapsync-trust-all", "--metrics-addr", "127.0.0.1:0"])
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

/// Service `web-<i>` (covered by the CriticalService) and its one backend pod, Ready.
async fn protected_service(env: &TestEnv, i: usize) {
    let name = format!("web-{i}");
    env.api::<Service>()
        .create(
            &PostParams::default(),
            &json(
                json!({"metadata": {"name": name, "labels": {"tier": "critical"}},
                "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}}),
            ),
        )
        .await
        .expect("service");
    env.api::<Pod>()
        .create(
            &PostParams::default(),
            &json(
                json!({"metadata": {"name": format!("{name}-backend"), "labels": {"app": name}},
                "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}]}}),
            ),
        )
        .await
        .expect("backend pod");
}

/// The fallback pods Vigil made for Service `web-<i>`.
async fn fallback_of(pods: &Api<Pod>, i: usize) -> bool {
    let lp = ListParams::default().labels("app.kubernetes.io/managed-by=vigil");
    pods.list(&lp).await.is_ok_and(|list| {
        list.items.iter().any(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app"))
                .is_some_and(|app| *app == format!("web-{i}"))
        })
    })
}

/// How long after `since` `check` first holds (polled every 10 ms), or None after the timeout.
async fn converged<F, Fut>(since: Instant, mut check: F) -> Option<Duration>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    while since.elapsed() < CONVERGE_TIMEOUT {
        if check().await {
            return Some(since.elapsed());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}

fn verdict(took: Duration) -> &'static str {
    if took <= TARGET { "met" } else { "MISSED" }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vigil_converges_at_once_after_each_control_plane_fault() {
    let mut env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("test environment");
    let faults: Vec<ControlPlaneFault> = ControlPlaneFault::ALL
        .into_iter()
        .filter(|f| env.can_inject(*f))
        .collect();
    let skipped: Vec<&str> = ControlPlaneFault::ALL
        .into_iter()
        .filter(|f| !faults.contains(f))
        .map(ControlPlaneFault::describe)
        .collect();
    if !skipped.is_empty() {
        eprintln!(
            "control-plane faults: skipped here: {} ({})",
            skipped.join(", "),
            if env.is_sandbox() {
                "the sandbox has no etcd"
            } else {
                "set VIGIL_TEST_KUBE_WORKDIR to the up.sh WORKDIR"
            }
        );
    }
    if faults.is_empty() {
        env.cleanup().await;
        return;
    }
    let client = env.client();
    let ns = env.namespace().to_owned();
    let dest = format!("{ns}-copies");
    let dir = std::env::temp_dir().join(format!("vigil-control-plane-{ns}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_owned();
    for crd in [ConfigMapSync::crd(), CriticalService::crd()] {
        vigil_testenv::install_crd(&client, &crd)
            .await
            .expect("CRD served");
    }
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &json(json!({"metadata": {"name": dest}})),
        )
        .await
        .expect("destination namespace");
    let sources: Api<ConfigMap> = env.api();
    sources
        .create(
            &PostParams::default(),
            &json(json!({"metadata": {"name": "source"}, "data": {"v": "start"}})),
        )
        .await
        .expect("source");
    Api::<ConfigMapSync>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &json(json!({"apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
                "metadata": {"name": "sync"},
                "spec": {"sourceNamespace": ns, "destinationNamespace": dest, "configMapName": "source"}})),
        )
        .await
        .expect("ConfigMapSync");
    env.api::<PodTemplate>()
        .create(
            &PostParams::default(),
            &json(
                json!({"metadata": {"name": "critical-service-pod-template"},
                "template": {"spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}}}),
            ),
        )
        .await
        .expect("template");
    let cr_name = format!("{ns}-critical");
    Api::<CriticalService>::all(client.clone())
        .create(
            &PostParams::default(),
            &json(
                json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService",
                "metadata": {"name": cr_name},
                "spec": {"namespace": ns, "matchLabels": [{"key": "tier", "value": "critical"}]}}),
            ),
        )
        .await
        .expect("CriticalService");
    env.delete_on_cleanup(&ApiResource::erase::<CriticalService>(&()), &cr_name);
    for i in 0..faults.len() {
        protected_service(&env, i).await;
    }
    // Vigil starts on Services that answer: each has its backend listed ready (the kubelet and
    // the endpoints controller take a moment, longer under load; a Vigil started before would
    // rightly give a Service a fallback).
    let endpoints: Api<Endpoints> = env.api();
    for i in 0..faults.len() {
        wait_for(
            &format!("web-{i}'s backend ready"),
            CONVERGE_TIMEOUT,
            || async {
                let ready = endpoints
                    .get_opt(&format!("web-{i}"))
                    .await
                    .map_err(|e| e.to_string())?
                    .and_then(|e| e.subsets)
                    .is_some_and(|s| {
                        s.iter()
                            .any(|s| s.addresses.as_ref().is_some_and(|a| !a.is_empty()))
                    });
                Ok::<_, String>(ready.then_some(()))
            },
        )
        .await
        .expect("a ready backend");
    }

    let log = dir.join("vigil.log");
    let mut vigil = spawn_vigil(&kubeconfig, &ns, &log);
    let probes = metrics_addr(&log).await;
    let copies: Api<ConfigMap> = Api::namespaced(client.clone(), &dest);
    let copy_holds = |value: String| {
        let copies = copies.clone();
        async move {
            copies
                .get_opt("source")
                .await
                .ok()
                .flatten()
                .and_then(|c| c.data)
                .is_some_and(|d| d.get("v") == Some(&value))
        }
    };
    converged(Instant::now(), || copy_holds("start".into()))
        .await
        .unwrap_or_else(|| panic!("the copy was never written; see {}", log.display()));
    let pods: Api<Pod> = env.api();
    // Vigil at rest: every Service answers, no fallback.
    for i in 0..faults.len() {
        assert!(!fallback_of(&pods, i).await, "no fallback for web-{i} yet");
    }

    let mut lines = Vec::new();
    for (i, fault) in faults.iter().copied().enumerate() {
        let what = fault.describe();
        let before = requests_total(probes).await;
        let t0 = Instant::now();
        env.inject(fault, DOWN)
            .await
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let ready = Instant::now();
        let outage = ready.duration_since(t0);
        let during = requests_total(probes).await - before;
        // The moment /readyz is ok: the last backend goes, the source changes.
        let value = format!("after-{i}");
        let deleted = env
            .api::<Pod>()
            .delete(&format!("web-{i}-backend"), &DeleteParams::default())
            .await;
        let deleted_at = Instant::now();
        deleted.unwrap_or_else(|e| panic!("{what}: deleting the backend: {e}"));
        sources
            .patch(
                "source",
                &PatchParams::default(),
                &Patch::Merge(json!({"data": {"v": value}})),
            )
            .await
            .unwrap_or_else(|e| panic!("{what}: changing the source: {e}"));
        let changed_at = Instant::now();
        let (fallback, copy) = tokio::join!(
            converged(deleted_at, || fallback_of(&pods, i)),
            converged(changed_at, || copy_holds(value.clone())),
        );
        let Some(fallback) = fallback else {
            panic!(
                "{what}: no fallback pod for web-{i} within {CONVERGE_TIMEOUT:?} of /readyz ok; see {}",
                log.display()
            );
        };
        let Some(copy) = copy else {
            panic!(
                "{what}: the copy never held {value:?} within {CONVERGE_TIMEOUT:?}; see {}",
                log.display()
            );
        };
        let rate = during / outage.as_secs_f64();
        assert!(
            rate < MAX_REQUESTS_PER_SECOND,
            "{what}: vigil run completed {during} requests in {outage:?} ({rate:.1}/s): a hot loop; see {}",
            log.display()
        );
        assert!(
            vigil.0.try_wait().expect("try_wait").is_none(),
            "{what}: vigil run exited; see {}",
            log.display()
        );
        lines.push(format!(
            "  {what}, {DOWN:?}: /readyz ok {outage:.1?} after the fault began; fallback pod {fallback:?} after the last backend's deletion ({}), copy {copy:?} after the source changed ({}); {during} requests completed by Vigil meanwhile ({rate:.1}/s)",
            verdict(fallback),
            verdict(copy)
        ));
    }
    eprintln!(
        "control-plane faults on {} (target: {TARGET:?} after /readyz is ok):\n{}",
        if env.is_sandbox() {
            "the sandbox"
        } else {
            "kube-apiserver"
        },
        lines.join("\n")
    );
    drop(vigil);
    let _ = Api::<Namespace>::all(client.clone())
        .delete(&dest, &DeleteParams::background())
        .await;
    let _ = Api::<ConfigMapSync>::namespaced(client.clone(), &ns)
        .patch(
            "sync",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await;
    env.cleanup().await;
    let _ = std::fs::remove_dir_all(&dir);
}
