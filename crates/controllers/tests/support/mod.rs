//! What the controller tests share: a controller run the way `vigil run` hosts it (as the leader,
//! on shared watches of its own client, with a fresh metrics registry), stopped or killed on
//! demand.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use tokio::sync::watch;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::Metrics;
use vigil_runtime::shared::SharedWatches;

/// The shutdown signal handed to a controller's `run`: resolves when the test stops it.
pub type Shutdown = Pin<Box<dyn Future<Output = ()> + Send + Sync>>;

/// A controller running for one test.
pub struct Running {
    /// The controller's metrics registry.
    pub metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    /// Runs `run` (a controller's `run`, its settings bound) as the leader until stopped.
    pub fn spawn<F, Fut>(client: kube::Client, run: F) -> Self
    where
        F: FnOnce(
                kube::Client,
                SharedWatches,
                watch::Receiver<Leadership>,
                Arc<Metrics>,
                Shutdown,
            ) -> Fut
            + Send
            + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let (leading_tx, leading) = watch::channel(Leadership::Leading);
        let (stop, mut stopped) = watch::channel(false);
        let metrics = Metrics::new();
        let registry = metrics.clone();
        let task = tokio::spawn(async move {
            let _keep = leading_tx;
            let watches = SharedWatches::new(client.clone());
            let shutdown: Shutdown = Box::pin(async move {
                let _ = stopped.wait_for(|s| *s).await;
            });
            run(client, watches, leading, metrics, shutdown).await;
        });
        Self {
            metrics: registry,
            stop,
            task,
        }
    }

    /// Stops the controller and waits until it has finished.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        self.task.await.expect("controller task");
    }

    /// Ends the controller abruptly, in-flight writes included (a crash, not a shutdown).
    #[allow(dead_code)] // not every test binary kills its controller
    pub async fn kill(self) {
        self.task.abort();
        let _ = self.task.await;
    }
}
