//! The waits before a fallback is made for a lame Service: the CriticalService's activation
//! delay, and a workload controller's replacement — not seen yet (a pod deleted under a
//! controller that still wants it), or already starting (its head start). A pod its workload
//! scaled away, a bare pod and a broken one are not waited for.

use std::time::Duration;

use vigil_apis::critical_service::{CoveredService, ServiceState};

use super::look::{is_vigils, selects};
use super::status::stored_now;
use crate::critical_service::model::{Inputs, ServiceView};

/// How much of the activation delay is left, if any. The Service has been lame since its previous
/// entry's `since` when that entry was Lame or FallbackActive (the outage was already running),
/// else since now, counted as the status will store it (see [`stored_now`]).
pub(super) fn remaining_delay(
    inputs: &Inputs<'_>,
    before: Option<&CoveredService>,
) -> Option<Duration> {
    let delay_ms = i64::from(inputs.cr.spec.activation_delay_seconds.unwrap_or(0)) * 1000;
    if delay_ms <= 0 {
        // No delay: act at once. (The wait below is measured from `since`, which is stored
        // rounded up to the second and so may lie up to a second ahead of now.)
        return None;
    }
    let now_as_stored = stored_now(inputs.now);
    let lame_since = before
        .filter(|b| matches!(b.state, ServiceState::Lame | ServiceState::FallbackActive))
        .and_then(|b| b.since.as_ref())
        .map_or(now_as_stored, |t| t.0)
        // A `since` in the future (clock skew) counts as "just now", never as a longer wait.
        .min(now_as_stored);
    // Below zero by less than a second when `since` is this pass's rounded-up now.
    let elapsed_ms = inputs
        .now
        .as_millisecond()
        .saturating_sub(lame_since.as_millisecond());
    let remaining_ms = delay_ms.saturating_sub(elapsed_ms);
    u64::try_from(remaining_ms)
        .ok()
        .filter(|ms| *ms > 0)
        .map(Duration::from_millis)
}

/// How long a replacement on its first start is given before a fallback is created: a
/// fallback needs as long as it to be Ready (schedule, start the container, pass the
/// readiness probe: about 1 s on the node here), so one that started earlier wins unless it is
/// slow. Creation times are kept to the second (rounded down), so the replacement is waited for
/// 2 to 3 s after it was created; one that is not Ready by then is slower than a fallback.
pub const REPLACEMENT_HEAD_START: Duration = Duration::from_secs(3);

/// The time left before a fallback is created when a real pod the Service selects is on its
/// first start (a workload controller's replacement) and younger than
/// [`REPLACEMENT_HEAD_START`].
pub(super) fn replacement_head_start(
    inputs: &Inputs<'_>,
    service: &ServiceView,
) -> Option<Duration> {
    let head_start_ms = i64::try_from(REPLACEMENT_HEAD_START.as_millis()).unwrap_or(i64::MAX);
    inputs
        .pods
        .iter()
        .filter(|p| {
            p.namespace == service.namespace
                && !is_vigils(p)
                && !p.terminating
                && selects(&service.selector, &p.labels)
        })
        .filter_map(|p| p.starting_since)
        .filter_map(|created| {
            let age_ms = inputs
                .now
                .as_millisecond()
                .saturating_sub(created.as_millisecond());
            u64::try_from(head_start_ms.saturating_sub(age_ms))
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        })
        .max()
}

/// How long after a pod under a workload controller is deleted its replacement is waited for
/// before a fallback is created. A ReplicaSet creates it within ~100 ms of the deletion; Vigil
/// may see the Service lame before it sees the replacement (on the node here the fallback was
/// created 15 ms after the replacement, whose head start it then missed: 268 failed requests
/// instead of 192 with no controller). Deletion times are whole seconds (the
/// `deletionTimestamp` less the grace period, rounded down), so the wait is 1 to 2 s after the
/// deletion; once the replacement is seen, [`REPLACEMENT_HEAD_START`] takes over.
pub const REPLACEMENT_APPEARS: Duration = Duration::from_secs(2);

/// The time left to wait for a replacement that is not seen yet: the Service selects no pod
/// that is not being deleted (a pod that is, a replacement or a broken one, is judged by
/// [`replacement_head_start`]), and one it selects was deleted under a workload controller less
/// than [`REPLACEMENT_APPEARS`] ago. Bare pods (no controller) are never waited for, nor pods
/// their workload no longer wants: it wants no replicas (a Deployment scaled to zero, whose
/// ReplicaSet then deletes its pods), so nothing replaces them. A workload that still wants
/// some, with every pod the Service selects being deleted, is making their replacements.
pub(super) fn replacement_expected(inputs: &Inputs<'_>, service: &ServiceView) -> Option<Duration> {
    let selected = || {
        inputs.pods.iter().filter(|p| {
            p.namespace == service.namespace
                && !is_vigils(p)
                && selects(&service.selector, &p.labels)
        })
    };
    if selected().any(|p| !p.terminating) {
        return None;
    }
    let wait_ms = i64::try_from(REPLACEMENT_APPEARS.as_millis()).unwrap_or(i64::MAX);
    selected()
        .filter(|p| p.controller_wants != Some(0))
        .filter_map(|p| p.deleted_under_controller)
        .filter_map(|deleted| {
            let since_ms = inputs
                .now
                .as_millisecond()
                .saturating_sub(deleted.as_millisecond());
            u64::try_from(wait_ms.saturating_sub(since_ms))
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        })
        .max()
}
