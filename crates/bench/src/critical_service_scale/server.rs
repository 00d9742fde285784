//! The API server the scale bench runs against: a `vigil sandbox --no-kubelet` of its own (the
//! default), or upstream kube-apiserver and kube-controller-manager 1.28 with etcd, started by
//! `../shared/kube/up.sh` on ports of the bench's own (`--real`).
//!
//! On the real server the setup's pods need a Node that exists and stays Ready: the EndpointSlice
//! controller of kube-controller-manager leaves out the pods whose Node it cannot find, its pod
//! garbage collector deletes them, and its node lifecycle controller would taint and evict them
//! once the Node's heartbeat stops. The bench registers [`NODE`] and renews its Lease (through
//! the simulated kubelet's node functions), as a kubelet that runs nothing would.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::Api;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::support::real_plane::{RealControlPlane, config_from, tempdir};
use crate::support::sandbox::{Child, spawn_sandbox};
use crate::support::usage::{cpu_seconds, rss_mib};

/// The Node every pod of the setup and the churn is bound to (no kubelet runs on it).
pub(super) const NODE: &str = "scale-node";

/// How often the real server's Node Lease is renewed (a kubelet's default).
const LEASE_RENEWAL: Duration = Duration::from_secs(10);

/// A running API server, its kubeconfig and its processes.
pub(super) struct Server {
    /// What the report calls it.
    pub(super) label: &'static str,
    pub(super) kubeconfig: PathBuf,
    config: kube::Config,
    /// Its processes, for CPU and memory: the sandbox, or kube-apiserver, etcd and
    /// kube-controller-manager.
    processes: Vec<(&'static str, u32)>,
    held: Held,
}

/// What must live as long as the server, and be stopped with it.
enum Held {
    Sandbox {
        _child: Child,
    },
    Real {
        plane: RealControlPlane,
        work: PathBuf,
        stop_renewals: watch::Sender<bool>,
        renewals: JoinHandle<()>,
    },
}

impl Server {
    /// A `vigil sandbox --no-kubelet` of the bench's own.
    pub(super) async fn sandbox() -> anyhow::Result<Self> {
        let child = spawn_sandbox(&["--no-kubelet"]).await?;
        let pid = child.process.id().context("sandbox pid")?;
        let config = kube::Config::new(child.url.parse().context("sandbox URL")?);
        Ok(Self {
            label: "vigil sandbox",
            kubeconfig: child.kubeconfig().to_owned(),
            config,
            processes: vec![("vigil sandbox", pid)],
            held: Held::Sandbox { _child: child },
        })
    }

    /// kube-apiserver 1.28 of `kube_dir` on `port` (etcd and kube-controller-manager on the
    /// ports `up.sh` derives from it), with [`NODE`] registered and kept alive.
    pub(super) async fn real(kube_dir: &Path, port: u16) -> anyhow::Result<Self> {
        let work = tempdir("vigil-bench-critical-service-scale")?;
        let plane = RealControlPlane::up(kube_dir, &work.join("kube"), port).await?;
        let processes: Vec<(&'static str, u32)> =
            ["kube-apiserver", "etcd", "kube-controller-manager"]
                .into_iter()
                .filter_map(|name| Some((name, plane.pid(name)?)))
                .collect();
        let (stop_renewals, stopped) = watch::channel(false);
        let started = async {
            let config = config_from(&plane.kubeconfig).await?;
            let client = Client::try_from(config.clone())?;
            vigil_kubelet::node::register(&client, NODE)
                .await
                .with_context(|| format!("registering Node {NODE}"))?;
            let renewals = tokio::spawn(vigil_kubelet::node::renew_lease_forever(
                client,
                NODE.to_owned(),
                LEASE_RENEWAL,
                stopped,
            ));
            anyhow::Ok((config, renewals))
        }
        .await;
        let (config, renewals) = match started {
            Ok(started) => started,
            Err(e) => {
                plane.down().await;
                let _ = std::fs::remove_dir_all(&work);
                return Err(e);
            }
        };
        Ok(Self {
            label: "kube-apiserver 1.28",
            kubeconfig: plane.kubeconfig.clone(),
            config,
            processes,
            held: Held::Real {
                plane,
                work,
                stop_renewals,
                renewals,
            },
        })
    }

    pub(super) fn is_real(&self) -> bool {
        matches!(self.held, Held::Real { .. })
    }

    /// Its client configuration, for a client made on another runtime.
    pub(super) fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// CPU time of each of its processes so far, in seconds, named.
    pub(super) fn cpu_by_process(&self) -> Vec<(&'static str, Option<f64>)> {
        self.processes
            .iter()
            .map(|(name, pid)| (*name, cpu_seconds(*pid)))
            .collect()
    }

    /// A client with a connection pool of its own.
    pub(super) fn client(&self) -> anyhow::Result<Client> {
        Ok(Client::try_from(self.config.clone())?)
    }

    /// Waits until pods can be created in `namespace`: on a real server, its ServiceAccount
    /// admission refuses them until the controller manager has made the `default` account.
    pub(super) async fn ready_for_pods(&self, namespace: &str) -> anyhow::Result<()> {
        if !self.is_real() {
            return Ok(());
        }
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client()?, namespace);
        let started = Instant::now();
        while accounts.get_opt("default").await?.is_none() {
            anyhow::ensure!(
                started.elapsed() < Duration::from_secs(60),
                "no ServiceAccount default in {namespace} after 60 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// The server's processes, named, with their pids.
    pub(super) fn processes(&self) -> String {
        self.processes
            .iter()
            .map(|(name, pid)| format!("{name} pid {pid}"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// CPU time of all its processes so far, in seconds.
    pub(super) fn cpu_seconds(&self) -> Option<f64> {
        self.processes
            .iter()
            .map(|(_, pid)| cpu_seconds(*pid))
            .sum()
    }

    /// Peak and current resident memory of each process, in MiB.
    pub(super) fn memory(&self) -> String {
        self.processes
            .iter()
            .map(|(name, pid)| match rss_mib(*pid) {
                Some((peak, now)) => format!("{name} peak {peak:.1} MiB, now {now:.1} MiB"),
                None => format!("{name} ?"),
            })
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// Stops it: the sandbox is killed; the real server's Node is removed and its processes
    /// stopped by `down.sh`, and its folder removed.
    pub(super) async fn stop(self) {
        let client = self.client();
        match self.held {
            Held::Sandbox { .. } => {}
            Held::Real {
                plane,
                work,
                stop_renewals,
                renewals,
            } => {
                let _ = stop_renewals.send(true);
                let _ = renewals.await;
                if let Ok(client) = client {
                    vigil_kubelet::node::deregister(&client, NODE).await;
                }
                plane.down().await;
                let _ = std::fs::remove_dir_all(&work);
            }
        }
    }
}
