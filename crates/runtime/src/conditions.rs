//! Status conditions as the Kubernetes API conventions define them: one entry per `type`, with
//! `status`, a CamelCase `reason`, a human `message`, the `observedGeneration` it was computed
//! from, and a `lastTransitionTime` that changes only when `status` does.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The condition every Vigil resource reports: the object is as its spec asks.
pub const READY: &str = "Ready";
/// The condition of an object that cannot be brought to its spec (or is quarantined).
pub const DEGRADED: &str = "Degraded";

/// Condition status values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The condition holds.
    True,
    /// The condition does not hold.
    False,
    /// Not known (yet).
    Unknown,
}

impl Status {
    /// The value as the API writes it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }
}

/// A condition to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewCondition<'a> {
    /// CamelCase, e.g. `Ready`.
    pub type_: &'a str,
    /// Whether it holds.
    pub status: Status,
    /// CamelCase, why (machine-readable).
    pub reason: &'a str,
    /// Why, for people.
    pub message: &'a str,
    /// The object's `metadata.generation` the condition describes.
    pub observed_generation: Option<i64>,
}

/// Sets `new` in `conditions`, keeping `lastTransitionTime` unless the status changes. Returns
/// whether anything changed, so a controller writes status only when it must.
pub fn set(conditions: &mut Vec<Condition>, new: &NewCondition<'_>, now: &Time) -> bool {
    let status = new.status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(existing) => {
            let changed = existing.status != status
                || existing.reason != new.reason
                || existing.message != new.message
                || existing.observed_generation != new.observed_generation;
            if existing.status != status {
                existing.last_transition_time = now.clone();
            }
            existing.status = status.to_owned();
            existing.reason = new.reason.to_owned();
            existing.message = new.message.to_owned();
            existing.observed_generation = new.observed_generation;
            changed
        }
        None => {
            conditions.push(Condition {
                type_: new.type_.to_owned(),
                status: status.to_owned(),
                reason: new.reason.to_owned(),
                message: new.message.to_owned(),
                observed_generation: new.observed_generation,
                last_transition_time: now.clone(),
            });
            true
        }
    }
}

/// Reason of the `Degraded` condition of an object whose reconciles keep failing (quarantined).
pub const REASON_RECONCILE_FAILING: &str = "ReconcileFailing";

/// Marks `conditions` `Degraded=True` with reason [`REASON_RECONCILE_FAILING`] and `message`, as
/// of now: the status half of a quarantine report. Returns whether anything changed.
pub fn set_reconcile_failing(
    conditions: &mut Vec<Condition>,
    message: &str,
    observed_generation: Option<i64>,
) -> bool {
    let degraded = NewCondition {
        type_: DEGRADED,
        status: Status::True,
        reason: REASON_RECONCILE_FAILING,
        message,
        observed_generation,
    };
    set(
        conditions,
        &degraded,
        &Time(k8s_openapi::jiff::Timestamp::now()),
    )
}

/// The condition of a type, if set.
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of a type is `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    find(conditions, type_).is_some_and(|c| c.status == "True")
}

/// Whether a reason follows the conventions (CamelCase: a letter first, then letters and digits),
/// which the API server enforces for `metav1.Condition`.
pub fn is_valid_reason(reason: &str) -> bool {
    let mut chars = reason.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ',' || c == ':')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("valid time"))
    }

    fn ready(status: Status, reason: &str) -> NewCondition<'_> {
        NewCondition {
            type_: "Ready",
            status,
            reason,
            message: "m",
            observed_generation: Some(1),
        }
    }

    #[test]
    fn transition_time_moves_only_when_status_changes() {
        let mut list = Vec::new();
        assert!(set(&mut list, &ready(Status::True, "Healthy"), &at(100)));
        assert!(
            !set(&mut list, &ready(Status::True, "Healthy"), &at(200)),
            "no change, no write"
        );
        assert_eq!(list[0].last_transition_time, at(100));
        assert!(
            set(&mut list, &ready(Status::True, "StillHealthy"), &at(300)),
            "reason changed"
        );
        assert_eq!(
            list[0].last_transition_time,
            at(100),
            "same status keeps its transition time"
        );
        assert!(set(&mut list, &ready(Status::False, "Lame"), &at(400)));
        assert_eq!(list[0].last_transition_time, at(400));
        assert!(!is_true(&list, "Ready"));
        assert_eq!(list.len(), 1, "one entry per type");
    }

    #[test]
    fn reasons_are_camel_case() {
        assert!(is_valid_reason("PodTemplateNotFound"));
        assert!(!is_valid_reason(""));
        assert!(!is_valid_reason("not found"));
        assert!(!is_valid_reason("1Bad"));
    }
}
