//! The pure decision for one CriticalService: which Services it covers, how each of them is doing,
//! which fallback pods to create or delete, and the status and events that say so.
//!
//! No clock, no randomness, no I/O: the same [`Inputs`] always give the same [`Plan`], and a world
//! that has not changed gives a plan with no writes and the previous status.
//!
//! This page is the policy, top to bottom: for each covered Service, look at it, then retire,
//! keep or answer with a fallback. Each concern has a page of its own under `decide/`:
//! - `look.rs`: what the caches say about one Service (its pods, its health, who owns it);
//! - `replacement.rs`: the waits before a fallback is made (the activation delay, a workload
//!   controller's replacement);
//! - `lifecycle.rs`: a fallback's life (created outside the selector, selected once Ready,
//!   rebuilt when out of date, deleted when orphaned);
//! - `standby.rs`: warm standbys (kept, promoted);
//! - `drain.rs`: a retiring fallback drained before it goes;
//! - `slices.rs`: Vigil's EndpointSlices of warm standbys;
//! - `actions.rs`: the writes and problems gathered while deciding;
//! - `status.rs`: the status and conditions that say so.

use vigil_apis::critical_service::{
    CoveredService, CriticalServiceSpec, CriticalServiceStatus, ServiceState,
};

mod actions;
mod drain;
mod lifecycle;
mod look;
mod replacement;
mod slices;
mod standby;
mod status;

use super::model::{Inputs, Plan, ROLE_STARTING, ServiceView, Settings};
use actions::{Actions, Problem, foreign_pod_problem, usable_template};
use lifecycle::{create, delete_orphans, rebuild_if_stale, select_once_ready};
use look::{Health, Observed, covered_services, observe, owns, role, warm_standby};
pub use replacement::{REPLACEMENT_APPEARS, REPLACEMENT_HEAD_START};
use replacement::{remaining_delay, replacement_expected, replacement_head_start};
use standby::{ensure_standby, promote};
use status::{build_status, degraded_changed, since};

/// Condition types and reasons this controller writes.
pub use vigil_runtime::conditions::{DEGRADED, READY};
pub const REASON_ALL_ANSWERING: &str = "AllServicesAnswering";
pub const REASON_SERVICES_LAME: &str = "ServicesLame";
pub const REASON_AS_EXPECTED: &str = "AsExpected";
/// The condition reporting warm standbys (only with `spec.warmStandby`), and its reasons.
pub const STANDBY_READY: &str = "StandbyReady";
pub const REASON_STANDBYS_READY: &str = "StandbysReady";
pub const REASON_STANDBYS_STARTING: &str = "StandbysStarting";
pub const REASON_STANDBYS_MISSING: &str = "StandbysMissing";
/// Event reasons.
pub const REASON_FALLBACK_CREATED: &str = "FallbackCreated";
pub const REASON_FALLBACK_DELETED: &str = "FallbackDeleted";
pub const REASON_STANDBY_CREATED: &str = "StandbyCreated";
pub const REASON_STANDBY_PROMOTED: &str = "StandbyPromoted";
pub const REASON_FALLBACK_DRAINING: &str = "FallbackDraining";
pub const REASON_FALLBACK_RESELECTED: &str = "FallbackReselected";
pub const REASON_FALLBACK_SELECTED: &str = "FallbackSelected";

/// How many items a condition message lists before summarising the rest, so a CriticalService
/// covering thousands of Services still has a readable (and API-valid) message.
const MESSAGE_LIST_LIMIT: usize = 10;

/// Whether a CriticalService covers a Service: right namespace, every `matchLabels` pair present,
/// a selector to answer through, and not `ExternalName` (which has no endpoints to stand in for).
pub fn covers(cr: &CriticalServiceSpec, service: &ServiceView, settings: &Settings) -> bool {
    let in_namespace = match &cr.namespace {
        Some(namespace) => service.namespace == *namespace,
        None => settings
            .watched_namespaces
            .as_ref()
            .is_none_or(|watched| watched.contains(&service.namespace)),
    };
    // The CRD requires at least one pair; an empty list that slipped past validation must not
    // turn into "every Service in the cluster gets a fallback".
    let labels_match = !cr.match_labels.is_empty()
        && cr
            .match_labels
            .iter()
            .all(|m| service.labels.get(&m.key) == Some(&m.value));
    in_namespace && labels_match && !service.selector.is_empty() && !service.external_name
}

/// Decides what to do for `inputs.cr`.
pub fn decide(inputs: &Inputs<'_>) -> Plan {
    let previous = inputs.cr.status.clone().unwrap_or_default();
    let mut actions = Actions::default();
    let services: Vec<CoveredService> = covered_services(inputs)
        .into_iter()
        .map(|service| decide_service(inputs, service, &previous, &mut actions))
        .collect();
    delete_orphans(inputs, &mut actions);
    let status = build_status(inputs, &previous, services, &actions.problems);
    if degraded_changed(&previous.conditions, &status.conditions) {
        // Report problems when they are news; the same problem pass after pass is already in the
        // Degraded condition and must not flood the event stream.
        actions
            .events
            .extend(actions.problems.iter().map(Problem::event));
    }
    Plan {
        status,
        slices: actions.slices,
        relabel: actions.relabel,
        create: actions.create,
        delete: actions.delete,
        events: actions.events,
        requeue_after: actions.requeue_after,
    }
}

/// Decides for one covered Service and returns its status entry.
fn decide_service(
    inputs: &Inputs<'_>,
    service: &ServiceView,
    previous: &CriticalServiceStatus,
    actions: &mut Actions,
) -> CoveredService {
    let observed = observe(inputs, service);
    let before = previous
        .services
        .iter()
        .find(|s| s.namespace == service.namespace && s.name == service.name);
    let owner = owns(inputs, service);
    let (state, fallback) = if owner {
        match observed.health {
            Health::Healthy => retire(inputs, &observed, actions),
            Health::Recovering => keep(&observed),
            Health::Lame => answer(inputs, &observed, before, actions),
        }
    } else {
        report_only(&observed)
    };
    drain::finish(inputs, &observed, fallback.as_deref(), actions);
    // Only the owner keeps a standby; another CriticalService's standbys are its own business.
    let keeps_standby = owner && warm_standby(inputs);
    let standby =
        keeps_standby.then(|| ensure_standby(inputs, &observed, fallback.as_deref(), actions));
    let listed = if keeps_standby {
        let waiting = standby.as_ref().and_then(|(pod, _)| pod.as_deref());
        slices::Listed::new(&observed, fallback.as_deref(), waiting)
    } else {
        slices::Listed::none()
    };
    slices::reconcile(inputs, &observed, &listed, actions);
    CoveredService {
        namespace: service.namespace.clone(),
        name: service.name.clone(),
        state,
        since: Some(since(before, state, inputs.now)),
        fallback_pod: fallback,
        standby_pod: standby.as_ref().and_then(|(pod, _)| pod.clone()),
        standby: standby.map(|(_, state)| state),
    }
}

/// A state and the fallback pod of Vigil's that stands (or is being created or promoted) for
/// the Service, if any.
type Verdict = (ServiceState, Option<String>);

/// The pod answering for the Service: the fallback under its own name, else a promoted standby.
fn answering(observed: &Observed<'_>) -> Option<String> {
    match (observed.ours, observed.active) {
        (Some(_), _) => Some(observed.fallback_name.clone()),
        (None, Some(active)) => Some(active.name.clone()),
        (None, None) => None,
    }
}

/// Healthy: a real endpoint answers, so Vigil's fallback (or promoted standby) goes: drained
/// first (by default; see [`drain::configured`]), deleted at once with `drainSeconds: 0`.
fn retire(inputs: &Inputs<'_>, observed: &Observed<'_>, actions: &mut Actions) -> Verdict {
    let why = format!(
        "Service {}/{} has a ready endpoint of its own",
        observed.service.namespace, observed.service.name
    );
    for pod in observed.ours.iter().chain(observed.active.iter()) {
        if role(pod) == Some(ROLE_STARTING) {
            // Never selected, so never an endpoint: nothing to drain.
            actions.delete_pod(pod, &why);
        } else if drain::configured(inputs).is_some() && !pod.terminating {
            drain::start(inputs, observed, pod, &why, actions);
        } else {
            actions.delete_pod(pod, &why);
        }
    }
    (ServiceState::Healthy, None)
}

/// Real pods are ready but not yet in the slices: retiring the fallback now could leave the
/// Service with no endpoint, and creating one is pointless.
fn keep(observed: &Observed<'_>) -> Verdict {
    match answering(observed) {
        Some(pod) => (ServiceState::FallbackActive, Some(pod)),
        None => (ServiceState::Healthy, None),
    }
}

/// A Service another CriticalService owns: report what is seen, write nothing.
fn report_only(observed: &Observed<'_>) -> Verdict {
    match (answering(observed), observed.health) {
        (Some(pod), _) => (ServiceState::FallbackActive, Some(pod)),
        (None, Health::Lame) => (ServiceState::Lame, None),
        (None, Health::Healthy | Health::Recovering) => (ServiceState::Healthy, None),
    }
}

/// Lame: keep (or rebuild) Vigil's fallback, or create one once the activation delay is over.
fn answer(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    before: Option<&CoveredService>,
    actions: &mut Actions,
) -> Verdict {
    if let Some(pod) = observed.ours {
        // The pod answers until it is gone (even while terminating): reporting it keeps the state
        // FallbackActive, so its replacement is not held back by the activation delay again.
        rebuild_if_stale(inputs, observed, pod, actions);
        select_once_ready(observed, pod, actions);
        return (
            ServiceState::FallbackActive,
            Some(observed.fallback_name.clone()),
        );
    }
    if let Some(active) = observed.active {
        // A promoted standby answers until the Service recovers, even if the template changed
        // since: swapping it would cost the clients the very gap it exists to avoid.
        return (ServiceState::FallbackActive, Some(active.name.clone()));
    }
    if let Some(remaining) = remaining_delay(inputs, before) {
        actions.requeue(remaining);
        return (ServiceState::Lame, None);
    }
    if let Some(draining) = observed.retiring.first() {
        // Still running and (most likely) still ready: the fastest way back.
        drain::reselect(observed, draining, actions);
        return (ServiceState::FallbackActive, Some(draining.name.clone()));
    }
    if let (true, Some(standby)) = (warm_standby(inputs), observed.standbys.first()) {
        // Even a standby still starting beats a pod not created yet.
        promote(observed, standby, actions);
        return (ServiceState::FallbackActive, Some(standby.name.clone()));
    }
    if let Some(left) = replacement_expected(inputs, observed.service) {
        // The last pod was deleted under a workload controller, which creates its replacement
        // within a moment: a fallback created before Vigil sees it would race it (and lose).
        actions.requeue(left);
        return (ServiceState::Lame, None);
    }
    if let Some(left) = replacement_head_start(inputs, observed.service) {
        // A workload controller's replacement started first: a fallback created now would not
        // answer sooner, and its endpoint changes would use up kube-proxy's sync burst and
        // delay the replacement's programming. Wait for it a bounded time, then act.
        actions.requeue(left);
        return (ServiceState::Lame, None);
    }
    if let Some(foreign) = observed.foreign {
        actions.problem(foreign_pod_problem(observed.service, foreign));
        return (ServiceState::Lame, None);
    }
    match usable_template(inputs.template) {
        Ok((key, template)) => {
            create(inputs, observed, key, template, actions);
            (
                ServiceState::FallbackActive,
                Some(observed.fallback_name.clone()),
            )
        }
        Err(problem) => {
            actions.problem(problem);
            (ServiceState::Lame, None)
        }
    }
}

#[cfg(test)]
mod tests;
