//! The status vault's metrics: records written, capture lag, captures pending.

use prometheus_client::metrics::gauge::Gauge;
use vigil_runtime::Runtime;

use super::capture::Capture;

/// Registers the vault's metrics; returns the pending captures' gauge the supervisor sets.
pub(super) fn register(runtime: &Runtime, capture: &Capture) -> Gauge<i64> {
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
