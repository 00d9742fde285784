//! What the controller tests share: controllers run the way `vigil run` hosts them — on a
//! Manager (as the leader unless the test plays leadership itself, on shared watches of its own
//! client, with a fresh metrics registry) — stopped or killed on demand.

use std::sync::Arc;

use tokio::sync::watch;
use vigil_runtime::Manager;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::Metrics;

/// On a real cluster, one controller test at a time, whatever its kind: a controller watches its
/// kinds cluster-wide, so two tests' controllers would act on each other's objects, and the
/// subjects of this binary ran one after the other when each was a binary of its own.
/// (KubernetesCluster's tests hold `kubernetes_cluster_world::CLUSTER_SERIAL`, shared with the
/// `vigil` crate's tests that include that module.)
pub static CLUSTER_SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A Manager running controllers for one test.
pub struct Running {
    /// The Manager's metrics registry.
    pub metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Runs the controllers `add` adds to a Manager on `client`, as the leader, until stopped.
    pub fn spawn(client: kube::Client, add: impl FnOnce(&mut Manager) + Send + 'static) -> Self {
        Self::spawn_with(client, None, add)
    }

    /// Like [`Running::spawn`], leading exactly while `leadership` says so (if given).
    pub fn spawn_with(
        client: kube::Client,
        leadership: Option<watch::Receiver<Leadership>>,
        add: impl FnOnce(&mut Manager) + Send + 'static,
    ) -> Self {
        let metrics = Metrics::new("vigil");
        let registry = metrics.clone();
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let mut builder = Manager::for_client("vigil", client).metrics(registry);
            if let Some(leadership) = leadership {
                builder = builder.leadership(leadership);
            }
            let mut manager = builder.build().await.expect("a manager");
            add(&mut manager);
            manager
                .run_until(async move {
                    let _ = stopped.wait_for(|s| *s).await;
                })
                .await;
        });
        Self {
            metrics,
            stop,
            task,
        }
    }

    /// Stops the controllers and waits until they have finished.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.task.await.expect("manager task");
    }

    /// Ends the controllers abruptly, in-flight writes included (a crash, not a shutdown).
    #[allow(dead_code)] // not every test binary kills its controller
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
