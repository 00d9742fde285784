//! The runtime's own faults (issue 25): what a slow or failing API server does to `vigil run`.
//! Sandbox only (it injects faults into the API server): on a real cluster it says so and skips
//! before starting anything.
//!
//! One `vigil run` (leader election with its production timings, the ConfigMapSync and
//! CriticalService controllers) faces, one after the other, for a few seconds each: every
//! response delayed by 2 s; every watch stalled (open, silent, never closed); every request
//! answered 429 with `Retry-After: 1`; every request answered 503. During each fault `/healthz`
//! must answer 200 throughout, and Vigil's request rate (the requests the sandbox received, less
//! the test's own; Vigil's `rest_client_requests_total` is printed beside it) must stay bounded —
//! a hot loop would be hundreds of requests a second.
//! A source ConfigMap changes in the middle of each fault; the test prints how long after the
//! fault ends the copy holds the change (the target is 1 s; the figure is printed, not asserted:
//! the assertion is only that it converges).

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use support::Proc;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use vigil_apis::{ConfigMapSync, CriticalService};
use vigil_testenv::vigil_sandbox::Fault;
use vigil_testenv::{TestEnv, require_sandbox, wait_for};

/// How long each fault lasts.
const FAULT: Duration = Duration::from_secs(6);
/// When, into the fault, the source changes.
const CHANGE_AT: Duration = Duration::from_secs(2);
/// Far above anything but a hot loop (a settled Vigil makes well under one request a second;
/// the retries of its few watches and its Lease add a handful).
const MAX_REQUESTS_PER_SECOND: f64 = 50.0;
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(60);

fn obj<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid manifest")
}

/// GET `path` on `addr`: the status code, or 0 when nothing answered within 2 s.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let attempt = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.ok()?;
        let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.ok()?;
        let mut response = String::new();
        stream.read_to_string(&mut response).await.ok()?;
        let code = response.split_whitespace().nth(1)?.parse().ok()?;
        let body = response
            .split_once("\r\n\r\n")
            .map(|(_, b)| b.to_owned())
            .unwrap_or_default();
        Some((code, body))
    };
    tokio::time::timeout(Duration::from_secs(2), attempt)
        .await
        .ok()
        .flatten()
        .unwrap_or((0, String::new()))
}

/// Every request Vigil's client has sent so far (`rest_client_requests_total`, all labels).
async fn requests_total(addr: SocketAddr) -> f64 {
    let (_, body) = get(addr, "/metrics").await;
    body.lines()
        .filter(|l| l.starts_with("rest_client_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The metrics address `vigil run` logs at start.
async fn metrics_addr(log: &Path) -> SocketAddr {
    let found = wait_for(
        "vigil run's metrics address",
        Duration::from_secs(30),
        || async {
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
        },
    )
    .await;
    found.expect("vigil run logs its metrics address")
}

fn spawn_vigil(kubeconfig: &Path, ns: &str, log: &Path) -> Proc {
    let log = std::fs::File::create(log).expect("log file");
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("POD_NAME", "vigil-slow-api")
        .env("POD_NAMESPACE", ns)
        .env("RUST_LOG", "info")
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

/// Sets the source's value, retrying every 50 ms while the fault refuses the test's own writes
/// too (with a client that does not retry by itself: kube-rs's default one would hold the write
/// for seconds after a 503 storm, and the figure would measure the test's client, not Vigil);
/// returns how many requests that took and when the write was accepted.
async fn change_source(sources: &Api<ConfigMap>, value: &str) -> (u64, Instant) {
    let patch = json!({"data": {"v": value}});
    let mut sent = 0;
    loop {
        sent += 1;
        if sources
            .patch("source", &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .is_ok()
        {
            return (sent, Instant::now());
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_or_failing_api_server_neither_wedges_nor_hot_loops_vigil() {
    let mut env = TestEnv::start().await.expect("test environment");
    require_sandbox!(env);
    let client = env.client();
    let ns = env.namespace().to_owned();
    let dest = format!("{ns}-copies");
    let dir: PathBuf = std::env::temp_dir().join(format!("vigil-slow-api-{ns}"));
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
            &obj(json!({"metadata": {"name": dest}})),
        )
        .await
        .expect("destination namespace");
    let sources: Api<ConfigMap> = env.api();
    let mut no_retries = env.config().await.expect("client configuration");
    no_retries.default_retry = false;
    let changes: Api<ConfigMap> =
        Api::namespaced(kube::Client::try_from(no_retries).expect("a client"), &ns);
    sources
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "source"}, "data": {"v": "start"}})),
        )
        .await
        .expect("source");
    Api::<ConfigMapSync>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &obj(json!({"apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
                "metadata": {"name": "sync"},
                "spec": {"sourceNamespace": ns, "destinationNamespace": dest, "configMapName": "source"}})),
        )
        .await
        .expect("ConfigMapSync");
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
    let started = Instant::now();
    while !copy_holds("start".into()).await {
        assert!(
            started.elapsed() < CONVERGE_TIMEOUT,
            "the copy was never written; see {}",
            log.display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let sandbox = env.sandbox().expect("a sandbox");
    let faults: [(&str, Fault); 4] = [
        (
            "every response delayed by 2 s",
            Fault::slow("*", "*", Duration::from_secs(2)),
        ),
        (
            "every watch stalled, never closed",
            Fault::stall_watches("*"),
        ),
        (
            "every request 429 with Retry-After: 1",
            Fault::throttled("*", "*", Duration::from_secs(1)),
        ),
        (
            "a 503 storm: every request fails",
            Fault::flaky("*", "*", 503, 1.0),
        ),
    ];
    let mut lines = Vec::new();
    for (i, (what, fault)) in faults.into_iter().enumerate() {
        let value = format!("after-fault-{i}");
        let before = requests_total(probes).await;
        let received_before = sandbox.requests_received();
        let t0 = Instant::now();
        let stalls = fault.stall_watches;
        sandbox.inject(fault);
        if !stalls {
            // As when an API server struggles, open watches break too: Vigil must watch again
            // through the fault.
            sandbox.close_watches();
        }
        let change = tokio::spawn({
            let sources = changes.clone();
            let value = value.clone();
            async move {
                tokio::time::sleep(CHANGE_AT).await;
                change_source(&sources, &value).await
            }
        });
        let mut probes_sent = 0;
        let mut unhealthy = Vec::new();
        while t0.elapsed() < FAULT {
            let (code, _) = get(probes, "/healthz").await;
            probes_sent += 1;
            if code != 200 {
                unhealthy.push(format!("{:?}: {code}", t0.elapsed()));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let during = requests_total(probes).await - before;
        let lasted = t0.elapsed();
        sandbox.clear_faults();
        let ended = Instant::now();
        let (test_writes, changed_at) = change.await.expect("the source changed");
        // How long after the fault ended the test's own write went through (zero if during).
        let landed = changed_at.saturating_duration_since(ended);
        // What reached the server, less the test's own writes: Vigil's requests on the wire,
        // each retry counted (its client counts a request once it completes).
        let received = sandbox
            .requests_received()
            .saturating_sub(received_before)
            .saturating_sub(test_writes);
        assert!(
            unhealthy.is_empty(),
            "{what}: /healthz failed {} of {probes_sent} probes: {unhealthy:?}",
            unhealthy.len()
        );
        let rate = received as f64 / lasted.as_secs_f64();
        assert!(
            rate < MAX_REQUESTS_PER_SECOND,
            "{what}: vigil run sent {received} requests in {lasted:?} ({rate:.1}/s): a hot loop; see {}",
            log.display()
        );
        let mut converged = None;
        while ended.elapsed() < CONVERGE_TIMEOUT {
            if copy_holds(value.clone()).await {
                converged = Some(ended.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let Some(converged) = converged else {
            panic!(
                "{what}: the change made during the fault never reached the copy ({CONVERGE_TIMEOUT:?} after the fault ended); see {}",
                log.display()
            );
        };
        assert!(
            vigil.0.try_wait().expect("try_wait").is_none(),
            "{what}: vigil run exited; see {}",
            log.display()
        );
        lines.push(format!(
            "  {what}: /healthz 200 on all {probes_sent} probes; {received} requests reached the server in {lasted:.1?} ({rate:.1}/s; {during} completed by Vigil's client); converged {converged:?} after the fault ended (target 1 s{}; the test's change landed {landed:?} after it)",
            if converged <= Duration::from_secs(1) { ", met" } else { ", MISSED" }
        ));
    }
    eprintln!(
        "slow API server, one fault after the other:\n{}",
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
