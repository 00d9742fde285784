//! The wiring: the vault's parts on a Manager's runtime, its metrics, the caches' triggers, the
//! capture workers, the backend checks and the supervisor.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;
use vigil_runtime::Runtime;

use super::NAME;
pub use super::capture::SavedHook;
use super::capture::{self, Capture};
use super::model::Settings;
use super::restore::StatusRestorer;
use super::scope::watch_scope;
use super::supervisor::{Supervisor, check_backends};
pub use super::{COVERED_STATUS_VERBS, COVERED_VERBS, PERMISSIONS, covered_kind_permissions};

/// Capture workers: records of different objects are written this many at a time.
const WORKERS: usize = 64;
/// How long queued captures may take to reach their backend at shutdown.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// The status vault: build it ([`StatusVault::on`] a Manager's runtime), hand its
/// [`StatusRestorer`] to the controllers that need it, then [`StatusVault::run_on`] it.
pub struct StatusVault {
    capture: Arc<Capture>,
    /// Notified by what the vault reacts to at once: a policy or namespace event, a kind's
    /// first list, a backend failing or answering again.
    changed: Arc<Notify>,
}

impl StatusVault {
    /// The vault on `runtime`'s client, watches, leadership and Event recorder; run it with
    /// [`StatusVault::run_on`] on the same runtime.
    pub fn on(runtime: &Runtime, settings: Settings) -> Self {
        // Its writes (restores, annotations) are the vault's, whatever handle built it.
        let runtime = runtime.scoped(NAME);
        let changed = Arc::new(Notify::new());
        let capture = Arc::new(Capture::on(&runtime, settings, &changed));
        Self { capture, changed }
    }

    /// Calls `on_saved` after each successful save (a benchmark's probe); before it runs.
    pub fn on_saved(self, on_saved: SavedHook) -> Self {
        if self.capture.on_saved.set(on_saved).is_err() {
            tracing::warn!("a second on_saved hook is ignored");
        }
        self
    }

    /// The runtime API for Vigil's controllers (see [`StatusRestorer::ensure_restored`]).
    pub fn restorer(&self) -> StatusRestorer {
        StatusRestorer {
            inner: self.capture.restorer.clone(),
        }
    }

    /// Runs until `runtime` shuts down, with its metrics; ready on `/readyz` once the policies
    /// and namespaces are loaded. `runtime` is the one the vault was made [`on`](Self::on).
    pub async fn run_on(self, runtime: Runtime) {
        let Self { capture, changed } = self;
        let pending = super::metrics::register(&runtime, &capture);
        let scope = capture.scope.clone();
        let mut tasks = vec![tokio::spawn(watch_scope(scope, changed.clone()))];
        for _ in 0..WORKERS {
            tasks.push(tokio::spawn(capture::capture_worker(capture.clone())));
        }
        tasks.push(tokio::spawn(check_backends(capture.clone())));
        let kind_watches = Supervisor::new(runtime.clone(), capture.clone())
            .run(changed, pending)
            .await;
        capture.queue.drain(SHUTDOWN_DRAIN).await;
        for task in kind_watches.into_iter().chain(tasks) {
            task.abort();
        }
    }
}
