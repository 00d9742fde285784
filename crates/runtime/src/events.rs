//! Kubernetes Events as Vigil's controllers record them, through kube-runtime's `Recorder`: best
//! effort — an Event that cannot be written is logged at debug level and never fails the work
//! it reports on.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};

/// An Event a pure decision asks for: its type, reason (CamelCase) and note. The apply step
/// records it about the object it decided for (see [`EventRecorder::publish`]).
#[derive(Debug, Clone, PartialEq)]
pub struct EventNote {
    /// A Warning Event (else Normal).
    pub warning: bool,
    /// CamelCase, e.g. `FallbackCreated`.
    pub reason: String,
    /// What happened, for people.
    pub note: String,
    /// Another object the Event is about (its `related`, e.g. the pod a controller created):
    /// it also keeps kube-runtime's Recorder from folding Events about different objects into
    /// one series.
    pub related: Option<ObjectReference>,
}

impl EventNote {
    /// A Normal Event.
    pub fn normal(reason: &str, note: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            note: note.into(),
            related: None,
        }
    }

    /// A Warning Event.
    pub fn warning(reason: &str, note: impl Into<String>) -> Self {
        Self {
            warning: true,
            ..Self::normal(reason, note)
        }
    }

    /// The same Event, about `related` too.
    pub fn related(mut self, related: ObjectReference) -> Self {
        self.related = Some(related);
        self
    }
}

/// The Event recorder every controller of a process shares: reporting controller and instance
/// as the Manager was told (see [`crate::ManagerBuilder::reporting_instance`]). Cheap to clone.
#[derive(Clone)]
pub struct EventRecorder {
    recorder: Recorder,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder").finish_non_exhaustive()
    }
}

impl EventRecorder {
    /// A recorder writing as `controller` (the Events' `reportingController`) from `instance`
    /// (their `reportingInstance`: which replica, usually its pod's name).
    pub fn new(client: kube::Client, controller: &str, instance: Option<String>) -> Self {
        Self {
            recorder: Recorder::new(
                client,
                Reporter {
                    controller: controller.to_owned(),
                    instance,
                },
            ),
        }
    }

    /// kube-runtime's recorder, for an Event this module has no shortcut for.
    pub fn inner(&self) -> &Recorder {
        &self.recorder
    }

    /// Records `note` about `regarding`, as done while `action` (best effort).
    pub async fn publish(&self, regarding: &ObjectReference, note: &EventNote, action: &str) {
        let mut event = event(note.warning, &note.reason, &note.note, action);
        event.secondary.clone_from(&note.related);
        record(&self.recorder, &event, regarding).await;
    }

    /// Records every note, in order, about `regarding` (best effort).
    pub async fn publish_all(
        &self,
        regarding: &ObjectReference,
        notes: &[EventNote],
        action: &str,
    ) {
        for note in notes {
            self.publish(regarding, note, action).await;
        }
    }
}

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
