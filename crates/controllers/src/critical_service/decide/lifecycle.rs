//! A fallback's life: created outside its Service's selector, selected once Ready, rebuilt when
//! what it was built from changed, and deleted once it is no longer the fallback of a Service
//! this CriticalService covers.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::PodTemplateSpec;

use super::actions::{Actions, pod_ref, usable_template};
use super::look::{Observed, is_vigils, owns, role, warm_standby};
use super::{REASON_FALLBACK_CREATED, REASON_FALLBACK_SELECTED, covers};
use crate::critical_service::fallback::{
    fallback_pod_name, standby_pod_names, starting_fallback_pod, template_hash,
};
use crate::critical_service::model::{
    CRITICAL_SERVICE_LABEL, FALLBACK_ROLE_LABEL, Inputs, PodView, ROLE_ACTIVE, ROLE_RETIRING,
    ROLE_STANDBY, ROLE_STARTING, Relabel, SERVICE_LABEL, ServiceView, TemplateKey, about_pod,
};

/// Builds and records the fallback for a lame Service, outside the Service's selector until it
/// is Ready (see [`ROLE_STARTING`]).
pub(super) fn create(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    key: &TemplateKey,
    template: &PodTemplateSpec,
    actions: &mut Actions,
) {
    let service = observed.service;
    actions.create.push(starting_fallback_pod(
        inputs.cr,
        service,
        template,
        key,
        inputs.settings,
    ));
    actions.events.push(about_pod(
        REASON_FALLBACK_CREATED,
        &service.namespace,
        &observed.fallback_name,
        format!(
            "Created fallback pod {}/{} for Service {}/{}, which has no ready endpoint of its own; the Service selects it once it is Ready",
            service.namespace, observed.fallback_name, service.namespace, service.name
        ),
    ));
}

/// Makes a fallback created outside the selector (role `starting`) an endpoint of its Service
/// once it is Ready: one label patch adds the selector's labels and drops the role. Not a pod
/// being deleted (out of date, or by someone else).
pub(super) fn select_once_ready(observed: &Observed<'_>, pod: &PodView, actions: &mut Actions) {
    let deleting = pod.terminating || actions.delete.iter().any(|d| d.uid == pod.uid);
    if role(pod) != Some(ROLE_STARTING) || !pod.ready || deleting {
        return;
    }
    let service = observed.service;
    let mut labels = selected_by(service);
    labels.insert(FALLBACK_ROLE_LABEL.into(), None);
    actions.relabel.push(Relabel {
        pod: pod_ref(pod),
        labels,
        annotations: BTreeMap::new(),
    });
    actions.events.push(about_pod(
        REASON_FALLBACK_SELECTED,
        &pod.namespace,
        &pod.name,
        format!(
            "Fallback pod {}/{} is Ready: Service {}/{} selects it",
            pod.namespace, pod.name, service.namespace, service.name
        ),
    ));
}

/// Deletes Vigil's fallback when it was built from something else than what it would be built
/// from now (CriticalService or template changed); the next pass creates the new one, since the
/// old one holds the name until it is gone. A template that cannot be used is reported, and the
/// running fallback kept: an outdated fallback answers better than none.
pub(super) fn rebuild_if_stale(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    pod: &PodView,
    actions: &mut Actions,
) {
    match usable_template(inputs.template) {
        Ok((_, template)) => {
            let message = inputs.cr.spec.maintenance_message.as_deref();
            let wanted = template_hash(template, observed.service, message);
            if pod.template_hash.as_deref() != Some(wanted.as_str()) {
                let why = format!(
                    "it is out of date for Service {}/{} (template or CriticalService changed) and will be re-created",
                    observed.service.namespace, observed.service.name
                );
                actions.delete_pod(pod, &why);
            }
        }
        Err(problem) => actions.problem(problem),
    }
}

/// The labels a merge patch sets so that `service` selects the pod: its selector's.
pub(super) fn selected_by(service: &ServiceView) -> BTreeMap<String, Option<String>> {
    service
        .selector
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect()
}

/// Deletes Vigil's pods labelled with this CriticalService that are no longer the fallback of a
/// Service it covers (Service gone, stopped matching, lost its selector, CriticalService changed,
/// or a name from an older prefix). A pod that is still the fallback of a covered Service is left
/// to the per-Service decision, even when another CriticalService owns that Service now.
pub(super) fn delete_orphans(inputs: &Inputs<'_>, actions: &mut Actions) {
    let orphans = inputs.pods.iter().filter(|pod| {
        is_vigils(pod)
            && pod.labels.get(CRITICAL_SERVICE_LABEL) == Some(&inputs.cr.name)
            && !is_current_fallback(inputs, pod)
    });
    for pod in orphans {
        let service = pod.labels.get(SERVICE_LABEL).map_or("?", String::as_str);
        let why = format!(
            "Service {}/{service} is no longer covered by CriticalService {}",
            pod.namespace, inputs.cr.name
        );
        actions.delete_pod(pod, &why);
    }
}

/// Whether the pod is, by name, the fallback of a Service this CriticalService covers, or one
/// of its warm standbys: promoted (it answers until the Service recovers) or waiting (while
/// this CriticalService asks for standbys and owns the Service).
pub(super) fn is_current_fallback(inputs: &Inputs<'_>, pod: &PodView) -> bool {
    pod.labels
        .get(SERVICE_LABEL)
        .and_then(|name| {
            inputs
                .services
                .iter()
                .find(|s| s.namespace == pod.namespace && s.name == *name)
        })
        .is_some_and(|service| {
            let prefix = &inputs.settings.pod_name_prefix;
            let is_standby_name = standby_pod_names(prefix, &service.name).contains(&pod.name);
            let current = match role(pod) {
                _ if fallback_pod_name(prefix, &service.name) == pod.name => true,
                Some(ROLE_ACTIVE | ROLE_RETIRING) => is_standby_name,
                Some(ROLE_STANDBY) => {
                    is_standby_name && warm_standby(inputs) && owns(inputs, service)
                }
                _ => false,
            };
            covers(&inputs.cr.spec, service, inputs.settings) && current
        })
}
