//! What the caches say about one covered Service: Vigil's pods for it (the fallback, a promoted
//! or waiting standby, pods draining), a foreign pod in the way, how its own endpoints are doing,
//! and which CriticalService owns its fallback.

use std::collections::BTreeMap;

use crate::critical_service::fallback::{fallback_pod_name, standby_pod_names};
use crate::critical_service::model::{
    FALLBACK_ROLE_LABEL, Inputs, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNED_VALUE, PodView,
    ROLE_ACTIVE, ROLE_RETIRING, ROLE_STANDBY, SERVICE_LABEL, ServiceView,
};

use super::covers;

/// The covered Services, sorted by (namespace, name) and without duplicates.
pub(super) fn covered_services<'a>(inputs: &Inputs<'a>) -> Vec<&'a ServiceView> {
    let by_key: BTreeMap<(&str, &str), &ServiceView> = inputs
        .services
        .iter()
        .filter(|s| covers(&inputs.cr.spec, s, inputs.settings))
        .map(|s| ((s.namespace.as_str(), s.name.as_str()), s))
        .collect();
    by_key.into_values().collect()
}

/// How a Service's own endpoints are doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Health {
    /// A real pod is ready and the EndpointSlices list a real ready endpoint.
    Healthy,
    /// No real pod is ready: a fallback is wanted.
    Lame,
    /// Real pods are ready but the slices do not list one yet: keep a fallback, create none.
    Recovering,
}

/// What the caches say about one covered Service.
pub(super) struct Observed<'a> {
    pub(super) service: &'a ServiceView,
    pub(super) fallback_name: String,
    /// Vigil's pod under the fallback name.
    pub(super) ours: Option<&'a PodView>,
    /// A pod Vigil did not create under the fallback name: never touched.
    pub(super) foreign: Option<&'a PodView>,
    /// A warm standby of Vigil's promoted to answer for the Service (not terminating).
    pub(super) active: Option<&'a PodView>,
    /// Vigil's pods for the Service being drained (`spec.drainSeconds`; not terminating).
    pub(super) retiring: Vec<&'a PodView>,
    /// Vigil's warm standbys waiting for the Service (not terminating), Ready ones first.
    pub(super) standbys: Vec<&'a PodView>,
    /// The names standbys take turns at.
    pub(super) standby_names: [String; 2],
    pub(super) health: Health,
}

/// Looks at one covered Service.
pub(super) fn observe<'a>(inputs: &Inputs<'a>, service: &'a ServiceView) -> Observed<'a> {
    let fallback_name = fallback_pod_name(&inputs.settings.pod_name_prefix, &service.name);
    let at_name = inputs
        .pods
        .iter()
        .find(|p| p.namespace == service.namespace && p.name == fallback_name);
    let ours = at_name.filter(|p| is_vigils(p) && role(p) != Some(ROLE_RETIRING));
    let foreign = at_name.filter(|p| !is_vigils(p));
    let health = health(inputs, service, &fallback_name, foreign.is_some());
    let standby_names = standby_pod_names(&inputs.settings.pod_name_prefix, &service.name);
    let slot_pods = || {
        inputs.pods.iter().filter(|p| {
            p.namespace == service.namespace
                && standby_names.contains(&p.name)
                && is_vigils(p)
                && p.labels.get(SERVICE_LABEL) == Some(&service.name)
                && !p.terminating
        })
    };
    let active = slot_pods().find(|p| role(p) == Some(ROLE_ACTIVE));
    let retiring = inputs
        .pods
        .iter()
        .filter(|p| {
            p.namespace == service.namespace
                && (p.name == fallback_name || standby_names.contains(&p.name))
                && is_vigils(p)
                && p.labels.get(SERVICE_LABEL) == Some(&service.name)
                && role(p) == Some(ROLE_RETIRING)
                && !p.terminating
        })
        .collect();
    let mut standbys: Vec<&PodView> = slot_pods()
        .filter(|p| role(p) == Some(ROLE_STANDBY))
        .collect();
    standbys.sort_by_key(|p| !p.ready);
    Observed {
        service,
        fallback_name,
        ours,
        foreign,
        active,
        retiring,
        standbys,
        standby_names,
        health,
    }
}

/// The warm-standby role of one of Vigil's pods, if it is one.
pub(super) fn role(pod: &PodView) -> Option<&str> {
    pod.labels.get(FALLBACK_ROLE_LABEL).map(String::as_str)
}

/// Whether the CriticalService asks for warm standbys.
pub(super) fn warm_standby(inputs: &Inputs<'_>) -> bool {
    inputs.cr.spec.warm_standby == Some(true)
}

/// Whether Vigil created the pod: both of its marks are needed, so a pod that only shares a
/// label or the name is never treated as Vigil's (and never deleted).
pub(super) fn is_vigils(pod: &PodView) -> bool {
    pod.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_VALUE)
        && pod.owned_annotation.as_deref() == Some(OWNED_VALUE)
}

/// Whether every selector pair is among the labels.
pub(super) fn selects(
    selector: &BTreeMap<String, String>,
    labels: &BTreeMap<String, String>,
) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The health of a Service's real endpoints. Any fallback pod of Vigil's is left out, not just
/// this Service's: another Service's fallback may carry a selector that overlaps this one, and a
/// fallback is never a real endpoint.
pub(super) fn health(
    inputs: &Inputs<'_>,
    service: &ServiceView,
    fallback_name: &str,
    foreign_at_name: bool,
) -> Health {
    let in_namespace = || {
        inputs
            .pods
            .iter()
            .filter(|p| p.namespace == service.namespace)
    };
    // Pod events are fresher than slices: a pod losing readiness counts at once.
    let real_ready_pods = in_namespace().any(|p| {
        !is_vigils(p) && selects(&service.selector, &p.labels) && p.ready && !p.terminating
    });
    // Slices decide retirement. The fallback name is not a real endpoint even if the pod cache has
    // already forgotten the pod, unless someone else's pod holds that name.
    let is_real_endpoint = |name: &String| {
        (name != fallback_name || foreign_at_name)
            && !in_namespace().any(|p| p.name == *name && is_vigils(p))
    };
    let real_ready_in_slices = inputs
        .slices
        .get(&(service.namespace.clone(), service.name.clone()))
        .is_some_and(|slice| slice.ready_pods.iter().any(is_real_endpoint));
    match (real_ready_pods, real_ready_in_slices) {
        (true, true) => Health::Healthy,
        (false, _) => Health::Lame,
        (true, false) => Health::Recovering,
    }
}

/// Whether this CriticalService owns the Service's fallback: among all that cover it, the one with
/// the smallest name does, so overlapping CriticalServices never fight over one pod.
pub(super) fn owns(inputs: &Inputs<'_>, service: &ServiceView) -> bool {
    !inputs
        .all_crs
        .iter()
        .any(|other| other.name < inputs.cr.name && covers(&other.spec, service, inputs.settings))
}
