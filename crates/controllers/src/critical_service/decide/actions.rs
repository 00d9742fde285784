//! The writes and findings a decision gathers, Service by Service: pods to create, delete or
//! relabel, Vigil's EndpointSlices, Events, the earliest wake-up, and the problems that keep Vigil
//! from acting (a template it cannot use, a foreign pod under the fallback name).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};

use super::REASON_FALLBACK_DELETED;
use crate::critical_service::model::{
    EventNote, PodRef, PodView, Relabel, ServiceView, SliceWrite, TemplateKey, TemplateLookup,
    about_pod,
};

/// The writes and findings gathered while deciding, Service by Service.
#[derive(Default)]
pub(super) struct Actions {
    pub(super) slices: Vec<SliceWrite>,
    pub(super) relabel: Vec<Relabel>,
    pub(super) create: Vec<Pod>,
    pub(super) delete: Vec<PodRef>,
    pub(super) events: Vec<EventNote>,
    pub(super) problems: Vec<Problem>,
    pub(super) requeue_after: Option<Duration>,
}

/// The pod, by name and uid.
pub(super) fn pod_ref(pod: &PodView) -> PodRef {
    PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

impl Actions {
    /// Deletes one of Vigil's pods (once, and not again while it terminates), with an event.
    pub(super) fn delete_pod(&mut self, pod: &PodView, why: &str) {
        if pod.terminating || self.delete.iter().any(|d| d.uid == pod.uid) {
            return;
        }
        self.delete.push(pod_ref(pod));
        self.events.push(about_pod(
            REASON_FALLBACK_DELETED,
            &pod.namespace,
            &pod.name,
            format!("Deleted fallback pod {}/{}: {why}", pod.namespace, pod.name),
        ));
    }

    /// Records a problem once (a template problem is found once per lame Service).
    pub(super) fn problem(&mut self, problem: Problem) {
        if !self.problems.contains(&problem) {
            self.problems.push(problem);
        }
    }

    /// Keeps the earliest wake-up.
    pub(super) fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(
            self.requeue_after
                .map_or(after, |current| current.min(after)),
        );
    }
}

/// Why Vigil cannot act. The declaration order is the severity order: a template problem blocks
/// every fallback of the CriticalService, a foreign pod only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum ProblemKind {
    PodTemplateForbidden,
    PodTemplateNotFound,
    PodTemplateInvalid,
    ForeignPodInTheWay,
}

impl ProblemKind {
    pub(super) fn reason(self) -> &'static str {
        match self {
            Self::PodTemplateForbidden => "PodTemplateForbidden",
            Self::PodTemplateNotFound => "PodTemplateNotFound",
            Self::PodTemplateInvalid => "PodTemplateInvalid",
            Self::ForeignPodInTheWay => "ForeignPodInTheWay",
        }
    }
}

/// A problem and the human explanation that goes into the condition and the event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Problem {
    pub(super) kind: ProblemKind,
    pub(super) message: String,
}

impl Problem {
    pub(super) fn event(&self) -> EventNote {
        EventNote::warning(self.kind.reason(), self.message.clone())
    }
}

/// The template, or the problem that keeps it from being used.
pub(super) fn usable_template(
    lookup: &TemplateLookup,
) -> Result<(&TemplateKey, &PodTemplateSpec), Problem> {
    match lookup {
        TemplateLookup::Found { key, template } => {
            let has_containers = template
                .spec
                .as_ref()
                .is_some_and(|spec| !spec.containers.is_empty());
            if has_containers {
                Ok((key, template))
            } else {
                Err(Problem {
                    kind: ProblemKind::PodTemplateInvalid,
                    message: format!("PodTemplate {} has no containers", show(key)),
                })
            }
        }
        TemplateLookup::NotFound(key) => Err(Problem {
            kind: ProblemKind::PodTemplateNotFound,
            message: format!("PodTemplate {} not found", show(key)),
        }),
        TemplateLookup::Forbidden(key) => Err(Problem {
            kind: ProblemKind::PodTemplateForbidden,
            message: format!(
                "PodTemplate {} may not be read (RBAC or watched namespaces)",
                show(key)
            ),
        }),
    }
}

/// `namespace/name` of a template.
pub(super) fn show(key: &TemplateKey) -> String {
    format!("{}/{}", key.namespace, key.name)
}

/// A pod under the fallback name that Vigil did not create.
pub(super) fn foreign_pod_problem(service: &ServiceView, pod: &PodView) -> Problem {
    Problem {
        kind: ProblemKind::ForeignPodInTheWay,
        message: format!(
            "Pod {}/{} has the fallback name of Service {}/{} but was not created by Vigil; it is left alone and the Service stays lame",
            pod.namespace, pod.name, service.namespace, service.name
        ),
    }
}
