//! The wiring: the vault's parts on a Manager's runtime, its metrics, the caches' triggers, the
//! capture workers, the backend checks and the supervisor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use vigil_runtime::Runtime;

use super::NAME;
use super::backends::Backends;
pub use super::capture::SavedHook;
use super::capture::{self, Capture};
use super::kinds::Kinds;
use super::model::Settings;
use super::queue::CaptureQueue;
use super::restore::{Restorer, StatusRestorer};
use super::scope::{Scope, watch_scope};
use super::supervisor::{Supervisor, check_backends};
pub use super::{COVERED_STATUS_VERBS, COVERED_VERBS, PERMISSIONS, covered_kind_permissions};

/// Capture workers: records of different objects are written this many at a time.
const WORKERS: usize = 64;

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
        let changed = Arc::new(Notify::new());
        let scope = Scope::new(runtime, settings);
        let backends = Arc::new(Backends::new(changed.clone()));
        let queue = Arc::new(CaptureQueue::default());
        let leadership = runtime.leadership();
        let restorer = Arc::new(Restorer::new(
            runtime.client().clone(),
            scope.clone(),
            backends.clone(),
            queue.clone(),
            runtime.recorder().clone(),
            leadership.clone(),
            runtime.field_manager(NAME),
        ));
        let capture = Arc::new(Capture {
            watches: runtime.watches().clone(),
            scope,
            kinds: Arc::new(Kinds::new(changed.clone())),
            backends,
            queue,
            restorer,
            leadership,
            on_saved: std::sync::OnceLock::new(),
            written: Counter::default(),
            capture_lag: Capture::capture_lag_histogram(),
        });
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
        let pending = register_metrics(&runtime, &capture);
        let mut tasks = vec![tokio::spawn(watch_scope(
            capture.scope.clone(),
            changed.clone(),
        ))];
        for _ in 0..WORKERS {
            tasks.push(tokio::spawn(capture::capture_worker(capture.clone())));
        }
        tasks.push(tokio::spawn(check_backends(capture.clone())));
        let kind_watches = Supervisor::new(runtime.clone(), capture.clone())
            .run(changed, pending)
            .await;
        // Give queued captures a moment to reach their backend before going away; what does not
        // make it is captured again by the next leader's initial list.
        let deadline = Instant::now() + Duration::from_secs(5);
        while capture.queue.pending_for_all() > 0 && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for task in kind_watches.into_iter().chain(tasks) {
            task.abort();
        }
    }
}

/// Registers the vault's metrics; returns the pending captures' gauge the supervisor sets.
fn register_metrics(runtime: &Runtime, capture: &Capture) -> Gauge<i64> {
    let registry = runtime.metrics();
    registry.register(
        "vigil_status_vault_records_written",
        "Status records written to the vault's backends",
        capture.written.clone(),
    );
    registry.register(
        "vigil_status_vault_capture_lag_seconds",
        "From a status change's watch event to its record being durable in the backend",
        capture.capture_lag.clone(),
    );
    let pending = Gauge::<i64>::default();
    registry.register(
        "vigil_status_vault_pending_captures",
        "Status records waiting for their backend",
        pending.clone(),
    );
    pending
}
