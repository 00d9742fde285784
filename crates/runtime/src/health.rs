//! The HTTP server for `/metrics`, `/healthz` and `/readyz`.
//!
//! `/healthz` is liveness: it answers 200 as long as the process can serve HTTP, so the kubelet
//! restarts Vigil only when it is truly wedged. `/readyz` is readiness: 200 only once every
//! registered check (typically "this controller's caches have synced") has passed. Leadership
//! is reported on `/readyz` but never required: a standby replica is healthy and ready, it is
//! just not reconciling, and failing it would make a rollout wait on an election.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::metrics::{self, Metrics};

/// Readiness inputs: caches synced per controller, and leadership (reported, not required).
///
/// Cloning shares the state, so controllers can hold a clone and the server another.
#[derive(Clone, Debug, Default)]
pub struct Health {
    state: Arc<Mutex<HealthState>>,
}

#[derive(Debug, Default)]
struct HealthState {
    /// In registration order, which is the order `/readyz` lists them (as kube does).
    checks: Vec<Check>,
    leading: bool,
}

#[derive(Debug)]
struct Check {
    name: String,
    ready: bool,
    /// Why it is not ready, when something is known to block it (a kind the API does not serve).
    reason: Option<String>,
}

impl HealthState {
    fn check_mut(&mut self, name: &str) -> Option<&mut Check> {
        self.checks.iter_mut().find(|check| check.name == name)
    }
}

impl Health {
    /// No checks, not leading. With no checks registered the process counts as ready.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a readiness check that is false until `set_ready(name, true)`. Registering a
    /// name twice keeps its current state, so a restarted controller cannot reset it by accident.
    pub fn register(&self, name: &str) {
        let mut state = self.lock();
        if state.check_mut(name).is_none() {
            state.checks.push(Check {
                name: name.to_owned(),
                ready: false,
                reason: None,
            });
        }
    }

    /// Marks check `name` ready or not; an unregistered name is registered on the way, so a
    /// forgotten `register` cannot leave a check silently unreported.
    pub fn set_ready(&self, name: &str, ready: bool) {
        self.set(name, ready, None);
    }

    /// Marks check `name` not ready, saying why on `/readyz` (`None`: no reason known).
    pub fn set_not_ready(&self, name: &str, reason: Option<String>) {
        self.set(name, false, reason);
    }

    fn set(&self, name: &str, ready: bool, reason: Option<String>) {
        let mut state = self.lock();
        match state.check_mut(name) {
            Some(check) => {
                check.ready = ready;
                check.reason = reason;
            }
            None => state.checks.push(Check {
                name: name.to_owned(),
                ready,
                reason,
            }),
        }
    }

    /// Records whether this replica holds the leader lease; shown on `/readyz` only.
    pub fn set_leading(&self, leading: bool) {
        self.lock().leading = leading;
    }

    /// True when every registered check is ready (vacuously true with none).
    pub fn is_ready(&self) -> bool {
        self.lock().checks.iter().all(|check| check.ready)
    }

    /// The `/readyz` verdict and body, taken from one snapshot so they agree:
    /// `[+]name ok` / `[-]name not ready` (`: reason` when one is known) per check, the leader
    /// line, then kube's summary line.
    fn readyz_report(&self) -> (bool, String) {
        let state = self.lock();
        let mut body = String::new();
        for check in &state.checks {
            let (mark, verdict) = if check.ready {
                ('+', "ok")
            } else {
                ('-', "not ready")
            };
            body.push_str(&format!("[{mark}]{} {verdict}", check.name));
            if let (false, Some(reason)) = (check.ready, &check.reason) {
                body.push_str(&format!(": {reason}"));
            }
            body.push('\n');
        }
        body.push_str(&format!("leader: {}\n", state.leading));
        let ready = state.checks.iter().all(|check| check.ready);
        body.push_str(if ready {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ready, body)
    }

    /// Every mutation is a single field write, so state seen after a panic elsewhere is still
    /// consistent: recover it rather than failing every later probe.
    fn lock(&self) -> MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// What the handlers share.
#[derive(Clone)]
struct AppState {
    metrics: Arc<Metrics>,
    health: Health,
}

/// Serves GET `/metrics` (OpenMetrics text), `/healthz` (200 `ok` while the process runs) and
/// `/readyz` (200 when every check is ready, else 503; the body lists each check and the
/// leader line, in kube's healthz style) until `shutdown` resolves; other paths answer 404.
///
/// Binds `addr` before returning, so a bind error surfaces here and the returned address is
/// the real one (useful with port 0). The task ends once `shutdown` resolves and in-flight
/// requests have finished.
pub async fn serve(
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Health,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = router(AppState { metrics, health });
    let task = tokio::spawn(async move {
        tracing::info!(addr = %bound, "serving /metrics, /healthz and /readyz");
        if let Err(error) = axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
        {
            tracing::error!(%error, addr = %bound, "health server failed");
        }
    });
    Ok((bound, task))
}

fn router(state: AppState) -> Router {
    Router::new()
        .route("/metrics", get(metrics_handler))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

async fn metrics_handler(State(state): State<AppState>) -> impl IntoResponse {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        state.metrics.encode(),
    )
}

async fn healthz() -> &'static str {
    "ok"
}

async fn readyz(State(state): State<AppState>) -> impl IntoResponse {
    let (ready, body) = state.health.readyz_report();
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_with_no_checks() {
        let health = Health::new();
        assert!(health.is_ready());
        let (ready, body) = health.readyz_report();
        assert!(ready);
        assert_eq!(body, "leader: false\nreadyz check passed\n");
    }

    #[test]
    fn registered_check_blocks_readiness_until_set() {
        let health = Health::new();
        health.register("crisvc");
        assert!(!health.is_ready());
        health.set_ready("crisvc", true);
        assert!(health.is_ready());
        health.set_ready("crisvc", false);
        assert!(!health.is_ready());
    }

    #[test]
    fn register_twice_keeps_state() {
        let health = Health::new();
        health.register("crisvc");
        health.set_ready("crisvc", true);
        health.register("crisvc");
        assert!(health.is_ready());
        assert_eq!(health.readyz_report().1.matches("crisvc").count(), 1);
    }

    #[test]
    fn set_ready_registers_unknown_names() {
        let health = Health::new();
        health.set_ready("late", false);
        assert!(!health.is_ready());
        assert!(health.readyz_report().1.contains("[-]late not ready\n"));
    }

    #[test]
    fn report_lists_checks_in_registration_order_with_leader_line() {
        let health = Health::new();
        health.register("zeta");
        health.register("alpha");
        health.set_ready("zeta", true);
        health.set_leading(true);
        let (ready, body) = health.readyz_report();
        assert!(!ready);
        assert_eq!(
            body,
            "[+]zeta ok\n[-]alpha not ready\nleader: true\nreadyz check failed\n"
        );
    }

    #[test]
    fn leadership_does_not_affect_readiness() {
        let health = Health::new();
        health.set_ready("crisvc", true);
        health.set_leading(false);
        assert!(health.is_ready());
    }

    #[test]
    fn clones_share_state() {
        let health = Health::new();
        let clone = health.clone();
        clone.register("crisvc");
        assert!(!health.is_ready());
        clone.set_ready("crisvc", true);
        assert!(health.is_ready());
    }
}
