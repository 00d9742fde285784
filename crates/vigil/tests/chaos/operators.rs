//! The processes and connections the faults hit: the two `vigil run` replicas (children of this
//! test, killed with SIGKILL), and a loopback TCP proxy between Vigil and the Kafka broker that
//! the test cuts — the broker down, as Vigil sees it — and restores on the same port.

use std::fs::File;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

/// Where and how the replicas run.
#[derive(Debug, Clone)]
pub struct ReplicaConfig {
    pub kubeconfig: PathBuf,
    /// The operator's own namespace: the Lease and the default PodTemplate live there.
    pub namespace: String,
    /// Namespaces the CriticalService and KafkaTopic controllers watch.
    pub watched: Vec<String>,
    pub vault_dir: PathBuf,
    pub clusters_dir: PathBuf,
    pub logs: PathBuf,
}

/// One replica: its name (`POD_NAME`), the running child if any, and how many times it started.
pub struct Replica {
    pub name: String,
    child: Option<Child>,
    pub starts: usize,
}

impl Replica {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            child: None,
            starts: 0,
        }
    }

    pub fn log(&self, config: &ReplicaConfig) -> PathBuf {
        config.logs.join(format!("{}.log", self.name))
    }

    /// Starts `vigil run` with leader election and all five controllers (a no-op if running).
    pub fn start(&mut self, config: &ReplicaConfig) {
        if self.alive() {
            return;
        }
        let log = File::options()
            .create(true)
            .append(true)
            .open(self.log(config))
            .expect("replica log file");
        let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
            .env("POD_NAME", &self.name)
            .env("POD_NAMESPACE", &config.namespace)
            // The KubernetesCluster controller's and the vault restore's debug lines name the
            // object they wait for: the failure report's log lines about it.
            .env(
                "RUST_LOG",
                "info,vigil_controllers::kubernetes_cluster=debug,vigil_controllers::status_vault::restore=debug",
            )
            .env("NO_COLOR", "1")
            .args([
                "run",
                "--leader-elect",
                "true",
                "--metrics-addr",
                "127.0.0.1:0",
            ])
            .args(["--namespaces", &config.watched.join(",")])
            .args(["--lease-duration", "2s", "--renew-deadline", "1500ms"])
            .args(["--retry-period", "200ms"])
            .arg("--status-vault-location")
            .arg(&config.vault_dir)
            .arg("--local-clusters-dir")
            .arg(&config.clusters_dir)
            .args(["--configmapsync-trust-all"])
            .args(["--kafka-drift-interval", "2s", "--kafka-retry-max", "1s"])
            .args(["--kafka-broker-timeout", "2s"])
            .args(["--kubernetescluster-poll-interval", "500ms"])
            .args(["--kubernetescluster-resync-interval", "5s"])
            .args(["--shutdown-timeout", "5s"])
            .arg("--kubeconfig")
            .arg(&config.kubeconfig)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn vigil run");
        self.child = Some(child);
        self.starts += 1;
    }

    /// SIGKILL: no chance to release the Lease or finish anything.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Whether the replica runs (a child that exited by itself is not).
    pub fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// The last `lines` lines of its log.
    pub fn tail(&self, config: &ReplicaConfig, lines: usize) -> String {
        let text = std::fs::read_to_string(self.log(config)).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n    ")
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A loopback proxy in front of the broker. Cut: the listener closes (connections refused) and
/// open connections drop; restored: it listens again on the same port.
pub struct BrokerProxy {
    pub addr: SocketAddr,
    target: String,
    up: Arc<AtomicBool>,
    cuts: watch::Sender<u64>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl BrokerProxy {
    pub async fn start(target: String) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the broker proxy");
        let addr = listener.local_addr().expect("proxy address");
        let mut proxy = Self {
            addr,
            target,
            up: Arc::new(AtomicBool::new(true)),
            cuts: watch::Sender::new(0),
            task: None,
        };
        proxy.serve(listener);
        proxy
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let target = self.target.clone();
        let cuts = self.cuts.clone();
        let up = self.up.clone();
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else {
                    continue;
                };
                if !up.load(Ordering::SeqCst) {
                    continue;
                }
                let target = target.clone();
                let mut cut = cuts.subscribe();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(&target).await else {
                        return;
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut.changed() => {}
                    }
                });
            }
        }));
    }

    /// The broker goes away: no new connections, open ones dropped.
    pub fn cut(&mut self) {
        self.up.store(false, Ordering::SeqCst);
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.cuts.send_modify(|n| *n += 1);
    }

    /// The broker is back on the same address.
    pub async fn restore(&mut self) {
        let started = std::time::Instant::now();
        let listener = loop {
            match tokio::net::TcpListener::bind(self.addr).await {
                Ok(l) => break l,
                Err(e) => {
                    assert!(
                        started.elapsed() < std::time::Duration::from_secs(30),
                        "the broker proxy cannot listen on {} again: {e}",
                        self.addr
                    );
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
            }
        };
        self.up.store(true, Ordering::SeqCst);
        self.serve(listener);
    }
}

impl Drop for BrokerProxy {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
        self.cuts.send_modify(|n| *n += 1);
    }
}
