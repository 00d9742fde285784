//! The kubelet's Node: registration, its heartbeat Lease, and removal.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use serde_json::json;
use tokio::sync::watch;

use crate::FIELD_MANAGER;

/// Namespace of node heartbeat Leases.
const LEASE_NAMESPACE: &str = "kube-node-lease";

/// A stable node IP derived from the name, in 10.0.0.0/16.
pub fn host_ip(node: &str) -> String {
    let h = node
        .bytes()
        .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    format!("10.0.{}.{}", (h >> 8) % 256, (h % 253) + 2)
}

/// Creates or refreshes the Node object with a Ready condition.
pub async fn register(client: &Client, node: &str) -> Result<(), kube::Error> {
    let nodes: Api<Node> = Api::all(client.clone());
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let ip = host_ip(node);
    let body = json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": node, "labels": {
            "kubernetes.io/hostname": node, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "node.kubernetes.io/instance-type": "vigil-simulated",
        }},
        "spec": {},
    });
    nodes
        .patch(
            node,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await?;
    let status = json!({"status": {
        "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "vigil simulated kubelet is posting ready status",
                        "lastHeartbeatTime": now, "lastTransitionTime": now}],
        "addresses": [{"type": "InternalIP", "address": ip}, {"type": "Hostname", "address": node}],
        "capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"},
        "nodeInfo": {"kubeletVersion": "v1.33.0-vigil", "kubeProxyVersion": "", "operatingSystem": "linux", "architecture": "amd64",
                     "containerRuntimeVersion": "vigil://simulated", "osImage": "vigil", "kernelVersion": "", "machineID": "", "systemUUID": "", "bootID": ""},
    }});
    nodes
        .patch_status(node, &PatchParams::default(), &Patch::Merge(&status))
        .await?;
    renew_lease(client, node).await
}

async fn renew_lease(client: &Client, node: &str) -> Result<(), kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
    let body = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": node, "namespace": LEASE_NAMESPACE},
        "spec": {"holderIdentity": node, "leaseDurationSeconds": 40, "renewTime": now},
    });
    leases
        .patch(
            node,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(&body),
        )
        .await
        .map(|_| ())
}

/// Renews the node Lease every `interval` until `stop` turns true; errors are retried next time.
pub async fn renew_lease_forever(
    client: Client,
    node: String,
    interval: Duration,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(interval);
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if let Err(e) = renew_lease(&client, &node).await {
                    tracing::debug!(error = %e, "node lease renewal failed");
                }
            }
            changed = stop.changed() => if changed.is_err() || *stop.borrow() { return },
        }
    }
}

/// Deletes the Node and its Lease; failures are logged (best-effort cleanup).
pub async fn deregister(client: &Client, node: &str) {
    let nodes: Api<Node> = Api::all(client.clone());
    if let Err(e) = nodes.delete(node, &DeleteParams::default()).await {
        tracing::debug!(error = %e, node, "could not delete node");
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), LEASE_NAMESPACE);
    if let Err(e) = leases.delete(node, &DeleteParams::default()).await {
        tracing::debug!(error = %e, node, "could not delete node lease");
    }
}
