//! Warm standbys (`spec.warmStandby`): one kept Ready beside each covered Service the
//! CriticalService owns, replaced when out of date, and promoted — one label patch — when the
//! Service turns lame.

use std::collections::BTreeMap;

use vigil_apis::critical_service::StandbyState;

use super::actions::{Actions, pod_ref, usable_template};
use super::lifecycle::selected_by;
use super::look::Observed;
use super::{REASON_STANDBY_CREATED, REASON_STANDBY_PROMOTED};
use crate::critical_service::fallback::{standby_pod, template_hash};
use crate::critical_service::model::{
    FALLBACK_ROLE_LABEL, Inputs, PodView, ROLE_ACTIVE, Relabel, about_pod,
};

/// Makes a warm standby an endpoint of its lame Service: one label patch adds the Service's
/// selector (and the active role), so the Service selects a pod that is already running.
pub(super) fn promote(observed: &Observed<'_>, standby: &PodView, actions: &mut Actions) {
    let service = observed.service;
    let mut labels = selected_by(service);
    labels.insert(FALLBACK_ROLE_LABEL.into(), Some(ROLE_ACTIVE.into()));
    actions.relabel.push(Relabel {
        pod: pod_ref(standby),
        labels,
        annotations: BTreeMap::new(),
    });
    let readiness = if standby.ready {
        "Ready"
    } else {
        "still starting"
    };
    actions.events.push(about_pod(
        REASON_STANDBY_PROMOTED,
        &standby.namespace,
        &standby.name,
        format!(
            "Promoted warm standby {}/{} ({readiness}) to answer for Service {}/{}, which has no ready endpoint of its own",
            standby.namespace, standby.name, service.namespace, service.name
        ),
    ));
}

/// Keeps one warm standby for the Service, besides the pod `answering` for it: an out-of-date
/// standby is replaced, a missing one started under a free standby name. Returns the standby
/// and its state.
pub(super) fn ensure_standby(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    answering: Option<&str>,
    actions: &mut Actions,
) -> (Option<String>, StandbyState) {
    let service = observed.service;
    let template = usable_template(inputs.template);
    let wanted = template
        .as_ref()
        .ok()
        .map(|(_, t)| template_hash(t, service, inputs.cr.spec.maintenance_message.as_deref()));
    let waiting = observed
        .standbys
        .iter()
        .filter(|p| Some(p.name.as_str()) != answering);
    let (fresh, stale): (Vec<&PodView>, Vec<&PodView>) =
        waiting.partition(|p| wanted.is_none() || p.template_hash.as_deref() == wanted.as_deref());
    let why = format!(
        "it is an out-of-date warm standby for Service {}/{} (template or CriticalService changed) and will be re-created",
        service.namespace, service.name
    );
    for pod in stale {
        actions.delete_pod(pod, &why);
    }
    let why = format!(
        "Service {}/{} needs one warm standby",
        service.namespace, service.name
    );
    for extra in fresh.iter().skip(1) {
        actions.delete_pod(extra, &why);
    }
    if let Some(standby) = fresh.first() {
        let state = if standby.ready {
            StandbyState::Ready
        } else {
            StandbyState::Starting
        };
        return (Some(standby.name.clone()), state);
    }
    let (key, template) = match template {
        Ok(found) => found,
        Err(problem) => {
            actions.problem(problem);
            return (None, StandbyState::Missing);
        }
    };
    // A name is free once no pod at all holds it: a promoted or out-of-date standby keeps its
    // name until it is gone.
    let free = observed.standby_names.iter().find(|name| {
        !inputs
            .pods
            .iter()
            .any(|p| p.namespace == service.namespace && p.name == **name)
    });
    let Some(name) = free else {
        return (None, StandbyState::Missing);
    };
    actions.create.push(standby_pod(
        inputs.cr,
        service,
        template,
        key,
        inputs.settings,
        name,
    ));
    actions.events.push(about_pod(
        REASON_STANDBY_CREATED,
        &service.namespace,
        name,
        format!(
            "Created warm standby {}/{name} for Service {}/{}",
            service.namespace, service.namespace, service.name
        ),
    ));
    (Some(name.clone()), StandbyState::Starting)
}
