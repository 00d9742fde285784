//! Kubernetes Events as Vigil's controllers record them, through kube-runtime's `Recorder`: best
//! effort — an Event that cannot be written is logged at debug level and never fails the work
//! it reports on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder};

/// An Event with this type, reason (CamelCase) and note, for `action` (what the controller was
/// doing: `Reconcile`, `Sync`…). Set `secondary` for a related object.
pub fn event(warning: bool, reason: &str, note: &str, action: &str) -> Event {
    Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(note.to_owned()),
        action: action.to_owned(),
        secondary: None,
    }
}

/// Records `event` about `regarding`; a failure is only logged.
pub async fn record(recorder: &Recorder, event: &Event, regarding: &ObjectReference) {
    if let Err(error) = recorder.publish(event, regarding).await {
        tracing::debug!(%error, reason = %event.reason, "could not record an event");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn warning_or_normal_with_reason_note_and_action() {
        let e = event(true, "ReconcileFailing", "3 failures", "Reconcile");
        assert_eq!(e.type_, EventType::Warning);
        assert_eq!(
            (e.reason.as_str(), e.note.as_deref(), e.action.as_str()),
            ("ReconcileFailing", Some("3 failures"), "Reconcile")
        );
        assert_eq!(event(false, "Synced", "", "Sync").type_, EventType::Normal);
        assert!(e.secondary.is_none());
    }
}
