//! The real node of `../shared/kube/node-up.sh`, as its exports describe it: a bench that needs
//! real containers, kube-proxy and traffic runs under them (`eval "$(node-up.sh WORKDIR)"`).

use std::path::PathBuf;

use anyhow::Context as _;

use super::http::http_get;
use super::metrics::samples;

/// What `node-up.sh` exported.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub(crate) name: String,
    pub(crate) kubeconfig: PathBuf,
    /// `localhost/kube-node/web:1`: busybox httpd answering `pod=<POD_NAME> ip=<POD_IP>`.
    pub(crate) image_web: String,
    pub(crate) containerd_sock: String,
    /// kube-proxy's metrics (`KUBE_NODE_PROXY_METRICS_PORT`, default 20249).
    pub(crate) proxy_metrics: String,
}

impl Node {
    /// The node of the current environment, or why there is none.
    pub(crate) fn from_env() -> anyhow::Result<Self> {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| {
                    format!("{name} is not set: run under the exports of ../shared/kube/node-up.sh")
                })
        };
        let kubeconfig = var("VIGIL_TEST_KUBECONFIG").or_else(|_| var("KUBECONFIG"))?;
        let port = std::env::var("KUBE_NODE_PROXY_METRICS_PORT").unwrap_or_else(|_| "20249".into());
        Ok(Self {
            name: var("KUBE_NODE_NAME")?,
            kubeconfig: kubeconfig.into(),
            image_web: var("KUBE_NODE_IMAGE_WEB")?,
            containerd_sock: var("KUBE_NODE_CONTAINERD_SOCK")?,
            proxy_metrics: format!("127.0.0.1:{port}"),
        })
    }

    /// Kills a container's process with SIGKILL, as the kernel's OOM killer does: the container
    /// (`containerd://ID` from the pod's status) dies at once and the kubelet finds out on its own.
    pub(crate) async fn kill_container(&self, container_id: &str) -> anyhow::Result<()> {
        let id = container_id
            .strip_prefix("containerd://")
            .unwrap_or(container_id);
        let out = tokio::process::Command::new("ctr")
            .args(["--address", &self.containerd_sock, "--namespace", "k8s.io"])
            .args(["tasks", "kill", "--signal", "SIGKILL", id])
            .output()
            .await
            .context("running ctr")?;
        anyhow::ensure!(
            out.status.success(),
            "ctr tasks kill {id}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// Forgets the host's connection-tracking entries to `ip` (`conntrack -D -d IP`), so a run
    /// starts as a fresh client would. The probe opens a hundred connections a second to one
    /// ClusterIP, so the kernel hands it the same source ports again within minutes; a new SYN
    /// whose tuple matches an entry left by an earlier run's failed attempt (SYN_SENT, kept 2
    /// minutes) is taken for a retransmission of it and follows that entry's old translation,
    /// to a pod long gone: lost, whatever the Service's endpoints are now.
    pub(crate) async fn forget_connections(&self, ip: std::net::IpAddr) -> anyhow::Result<()> {
        let out = tokio::process::Command::new("conntrack")
            .args(["-D", "-d", &ip.to_string()])
            .output()
            .await
            .context("running conntrack")?;
        // 1 with "0 flow entries have been deleted": nothing to forget.
        let nothing = String::from_utf8_lossy(&out.stderr).contains(" 0 flow entries");
        anyhow::ensure!(
            out.status.success() || nothing,
            "conntrack -D -d {ip}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        Ok(())
    }

    /// kube-proxy's sync and network-programming counters now.
    pub(crate) async fn proxy_counters(&self) -> ProxyCounters {
        let Ok((200, text)) = http_get(&self.proxy_metrics, "/metrics").await else {
            return ProxyCounters::default();
        };
        let mut counters = ProxyCounters::default();
        for sample in samples(&text) {
            match sample.name {
                "kubeproxy_sync_proxy_rules_duration_seconds_sum" => {
                    counters.sync_sum = sample.value
                }
                "kubeproxy_sync_proxy_rules_duration_seconds_count" => {
                    counters.syncs = sample.value;
                }
                "kubeproxy_network_programming_duration_seconds_sum" => {
                    counters.programming_sum = sample.value;
                }
                "kubeproxy_network_programming_duration_seconds_count" => {
                    counters.programmed = sample.value;
                }
                _ => {}
            }
        }
        counters
    }
}

/// kube-proxy's counters: rule syncs and their duration, and network programming latency (from
/// the change of an endpoint, stamped by the EndpointSlice controller, to the rules carrying it:
/// it includes the wait for `minSyncPeriod`).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ProxyCounters {
    pub(crate) syncs: f64,
    pub(crate) sync_sum: f64,
    pub(crate) programmed: f64,
    pub(crate) programming_sum: f64,
}

impl ProxyCounters {
    /// What happened between `self` (before) and `after`.
    pub(crate) fn delta(&self, after: &Self) -> Self {
        Self {
            syncs: after.syncs - self.syncs,
            sync_sum: after.sync_sum - self.sync_sum,
            programmed: after.programmed - self.programmed,
            programming_sum: after.programming_sum - self.programming_sum,
        }
    }

    pub(crate) fn add(&mut self, other: &Self) {
        self.syncs += other.syncs;
        self.sync_sum += other.sync_sum;
        self.programmed += other.programmed;
        self.programming_sum += other.programming_sum;
    }
}
