//! The status a decision writes: the covered Services, their counts, and the `Ready`,
//! `StandbyReady` and `Degraded` conditions (their `lastTransitionTime` moves only when their
//! status does).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use vigil_apis::critical_service::{
    CoveredService, CriticalServiceStatus, ServiceState, StandbyState,
};
use vigil_runtime::conditions::{self, NewCondition, Status};

use super::actions::Problem;
use super::look::warm_standby;
use super::{
    DEGRADED, Inputs, MESSAGE_LIST_LIMIT, READY, REASON_ALL_ANSWERING, REASON_AS_EXPECTED,
    REASON_SERVICES_LAME, REASON_STANDBYS_MISSING, REASON_STANDBYS_READY, REASON_STANDBYS_STARTING,
    STANDBY_READY,
};

/// The full status: entries, counts, and the conditions updated from the previous ones.
pub(super) fn build_status(
    inputs: &Inputs<'_>,
    previous: &CriticalServiceStatus,
    services: Vec<CoveredService>,
    problems: &[Problem],
) -> CriticalServiceStatus {
    let count =
        |state: ServiceState| count_u32(services.iter().filter(|s| s.state == state).count());
    let mut conditions = previous.conditions.clone();
    let generation = inputs.cr.generation;
    let now = Time(inputs.now);
    set_ready(&mut conditions, &services, generation, &now);
    set_degraded(&mut conditions, problems, generation, &now);
    let standby_ready = warm_standby(inputs).then(|| {
        set_standby_ready(&mut conditions, &services, generation, &now);
        count_u32(
            services
                .iter()
                .filter(|s| s.standby == Some(StandbyState::Ready))
                .count(),
        )
    });
    if standby_ready.is_none() {
        // Standbys switched off: the condition would only be stale.
        conditions.retain(|c| c.type_ != STANDBY_READY);
    }
    CriticalServiceStatus {
        observed_generation: generation,
        conditions,
        covered: count_u32(services.len()),
        lame: count(ServiceState::Lame),
        fallback_active: count(ServiceState::FallbackActive),
        standby_ready,
        services,
    }
}

/// `StandbyReady` (with `spec.warmStandby` only): every Service this CriticalService keeps a
/// standby for has a Ready one. Starting ones are the normal state after a promotion; missing
/// ones (a template problem, names held by pods being deleted) are named.
fn set_standby_ready(
    conditions: &mut Vec<Condition>,
    services: &[CoveredService],
    generation: Option<i64>,
    now: &Time,
) {
    let with = |state: StandbyState| -> Vec<String> {
        services
            .iter()
            .filter(|s| s.standby == Some(state))
            .map(|s| format!("{}/{}", s.namespace, s.name))
            .collect()
    };
    let (missing, starting) = (with(StandbyState::Missing), with(StandbyState::Starting));
    let ready = with(StandbyState::Ready).len();
    let (status, reason, message) = if !missing.is_empty() {
        let message = format!("Services without a warm standby: {}", list(&missing, ", "));
        (Status::False, REASON_STANDBYS_MISSING, message)
    } else if !starting.is_empty() {
        let message = format!("Warm standbys starting for: {}", list(&starting, ", "));
        (Status::False, REASON_STANDBYS_STARTING, message)
    } else {
        let message = format!("{ready} warm standbys Ready");
        (Status::True, REASON_STANDBYS_READY, message)
    };
    conditions::set(
        conditions,
        &NewCondition {
            type_: STANDBY_READY,
            status,
            reason,
            message: &message,
            observed_generation: generation,
        },
        now,
    );
}

/// `Ready`: every covered Service answers, directly or through a fallback.
fn set_ready(
    conditions: &mut Vec<Condition>,
    services: &[CoveredService],
    generation: Option<i64>,
    now: &Time,
) {
    let lame: Vec<String> = services
        .iter()
        .filter(|s| s.state == ServiceState::Lame)
        .map(|s| format!("{}/{}", s.namespace, s.name))
        .collect();
    let (status, reason, message) = if lame.is_empty() {
        (
            Status::True,
            REASON_ALL_ANSWERING,
            answering_message(services),
        )
    } else {
        let message = format!(
            "Services without an answering endpoint: {}",
            list(&lame, ", ")
        );
        (Status::False, REASON_SERVICES_LAME, message)
    };
    conditions::set(
        conditions,
        &NewCondition {
            type_: READY,
            status,
            reason,
            message: &message,
            observed_generation: generation,
        },
        now,
    );
}

/// The `Ready` message when every covered Service answers.
fn answering_message(services: &[CoveredService]) -> String {
    let through_fallback = services
        .iter()
        .filter(|s| s.state == ServiceState::FallbackActive)
        .count();
    match services.len() {
        0 => "No Service is covered".to_owned(),
        n => format!("All {n} covered Services answer, {through_fallback} through a fallback pod"),
    }
}

/// `Degraded`: something keeps Vigil from acting. The reason is the most severe problem; the
/// message lists them all.
fn set_degraded(
    conditions: &mut Vec<Condition>,
    problems: &[Problem],
    generation: Option<i64>,
    now: &Time,
) {
    let mut sorted: Vec<&Problem> = problems.iter().collect();
    // Stable sort: problems of one kind keep the (namespace, name) order they were found in.
    sorted.sort_by_key(|p| p.kind);
    let (status, reason, message) = match sorted.first() {
        Some(worst) => {
            let lines: Vec<String> = sorted
                .iter()
                .map(|p| format!("{}: {}", p.kind.reason(), p.message))
                .collect();
            (Status::True, worst.kind.reason(), list(&lines, "; "))
        }
        None => (
            Status::False,
            REASON_AS_EXPECTED,
            "Vigil can act for every covered Service".to_owned(),
        ),
    };
    conditions::set(
        conditions,
        &NewCondition {
            type_: DEGRADED,
            status,
            reason,
            message: &message,
            observed_generation: generation,
        },
        now,
    );
}

/// Whether the Degraded condition says something new (status, reason or message).
pub(super) fn degraded_changed(before: &[Condition], after: &[Condition]) -> bool {
    let key = |c: &Condition| (c.status.clone(), c.reason.clone(), c.message.clone());
    conditions::find(before, DEGRADED).map(key) != conditions::find(after, DEGRADED).map(key)
}

/// Items joined with `separator`, the first few only, so messages stay short.
fn list(items: &[String], separator: &str) -> String {
    let shown = items
        .iter()
        .take(MESSAGE_LIST_LIMIT)
        .cloned()
        .collect::<Vec<_>>()
        .join(separator);
    match items.len().saturating_sub(MESSAGE_LIST_LIMIT) {
        0 => shown,
        more => format!("{shown}{separator}and {more} more"),
    }
}

/// A count for the status (which holds `u32`), saturating instead of wrapping.
fn count_u32(n: usize) -> u32 {
    u32::try_from(n).unwrap_or(u32::MAX)
}

/// When the Service entered `state`: kept from its previous entry if the state is the same, so an
/// unchanged world gives an unchanged status.
pub(super) fn since(before: Option<&CoveredService>, state: ServiceState, now: Timestamp) -> Time {
    before
        .filter(|b| b.state == state)
        .and_then(|b| b.since.clone())
        .unwrap_or(Time(stored_now(now)))
}

/// `now` rounded up to a whole second, as a new `since` is written. The API keeps a `Time` to
/// the second (`metav1.Time`), so a `since` written with its fraction comes back up to a second
/// earlier than the change it marks, and an activation delay measured from it would run out up
/// to a second early (a 1 s delay almost at once). Rounded up, it comes back unchanged and never
/// earlier than the change: the delay runs out on time or less than a second late, never early.
pub(super) fn stored_now(now: Timestamp) -> Timestamp {
    let up = i64::from(now.subsec_nanosecond() > 0);
    Timestamp::from_second(now.as_second().saturating_add(up)).unwrap_or(now)
}
