//! Vigil's image (built by `.ci/image`, loaded into a real node) runs as its Dockerfile says:
//! `vigil --version`, and `vigil run` from the image's own entrypoint and command, as the image's
//! user (uid/gid 65532: the pods set only `runAsNonRoot`, which the kubelet checks against the
//! image) with a read-only root filesystem and no capabilities.
//!
//! Needs a node and the image (see node_support); without them it prints a note and passes.

use crate::node_support;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, PostParams};
use node_support::{container_process, diagnose, http_get_path, logs, node};
use serde_json::json;
use vigil_testenv::{TestEnv, wait_for};

const WAIT: Duration = Duration::from_secs(90);

/// The hardened container security context of the chart, minus the user: the image's decides.
fn security_context() -> serde_json::Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "capabilities": {"drop": ["ALL"]},
    })
}

fn phase(pod: &Pod) -> String {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_image_prints_its_version_as_its_own_user() {
    let Some(node) = node("the_image_prints_its_version_as_its_own_user") else {
        return;
    };
    let env = TestEnv::start().await.expect("the node's API server");
    let pods: Api<Pod> = env.api();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "vigil-version"},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": true},
            "containers": [{
                "name": "vigil", "image": node.image, "imagePullPolicy": "Never",
                "args": ["--version"],
                "securityContext": security_context(),
            }],
        },
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let done = wait_for("vigil --version to complete", WAIT, || async {
        let pod = pods.get("vigil-version").await.map_err(|e| e.to_string())?;
        match phase(&pod).as_str() {
            "Succeeded" | "Failed" => Ok(Some(pod)),
            other => Err(other.to_owned()),
        }
    })
    .await;
    let done = match done {
        Ok(pod) => pod,
        Err(e) => panic!("{e}\n{}", diagnose(&env.client(), env.namespace()).await),
    };
    let output = logs(&env.client(), env.namespace(), "vigil-version").await;
    assert_eq!(phase(&done), "Succeeded", "{output}");
    assert!(
        output.starts_with(concat!("vigil ", env!("CARGO_PKG_VERSION"), " (commit ")),
        "{output}"
    );
    env.cleanup().await;
}

/// `vigil run` from the image's entrypoint and command: it stays up, serves `/healthz` and
/// `/metrics` on the image's exposed port, and the host sees its process as uid and gid 65532
/// with `/` mounted read-only.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vigil_run_runs_as_65532_on_a_read_only_root() {
    let Some(node) = node("vigil_run_runs_as_65532_on_a_read_only_root") else {
        return;
    };
    let env = TestEnv::start().await.expect("the node's API server");
    let pods: Api<Pod> = env.api();
    let name = "vigil-run";
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {
            "securityContext": {"runAsNonRoot": true},
            "containers": [{
                "name": "vigil", "image": node.image, "imagePullPolicy": "Never",
                "env": [
                    {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                ],
                "ports": [{"containerPort": 8080}],
                "securityContext": security_context(),
            }],
        },
    }))
    .expect("pod");
    pods.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let ip: Ipv4Addr = wait_for("vigil run to start", WAIT, || async {
        let pod = pods.get(name).await.map_err(|e| e.to_string())?;
        let status = pod.status.clone().unwrap_or_default();
        let running = status
            .container_statuses
            .iter()
            .flatten()
            .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()));
        match status.pod_ip.and_then(|ip| ip.parse().ok()) {
            Some(ip) if running => Ok(Some(ip)),
            _ => Err(format!("{:?}", status.container_statuses)),
        }
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = SocketAddrV4::new(ip, 8080);
    let healthz = wait_for("/healthz to answer", WAIT, || async {
        Ok(http_get_path(addr, "/healthz").await)
    })
    .await;
    if let Err(e) = healthz {
        panic!(
            "{e}\n{}\n{}",
            logs(&env.client(), env.namespace(), name).await,
            diagnose(&env.client(), env.namespace()).await
        );
    }
    let metrics = http_get_path(addr, "/metrics").await.expect("/metrics");
    assert!(metrics.contains("# EOF"), "OpenMetrics text");
    let process = container_process("/usr/local/bin/vigil", name).expect("its process on the host");
    assert_eq!(process.uids, [65532; 4], "uids");
    assert_eq!(process.gids, [65532; 4], "gids");
    assert!(
        process.root_mount_options.split(',').any(|o| o == "ro"),
        "/ is mounted {}",
        process.root_mount_options
    );
    // Still the same container a few seconds later: nothing it needs to write is missing.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let pod = pods.get(name).await.expect("get");
    let restarts: i32 = pod
        .status
        .and_then(|s| s.container_statuses)
        .unwrap_or_default()
        .iter()
        .map(|c| c.restart_count)
        .sum();
    assert_eq!(
        restarts,
        0,
        "{}",
        logs(&env.client(), env.namespace(), name).await
    );
    env.cleanup().await;
}
