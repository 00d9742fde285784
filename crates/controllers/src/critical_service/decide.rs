//! The pure decision for one CriticalService: which Services it covers, how each of them is doing,
//! which fallback pods to create or delete, and the status and events that say so.
//!
//! No clock, no randomness, no I/O: the same [`Inputs`] always give the same [`Plan`], and a world
//! that has not changed gives a plan with no writes and the previous status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use vigil_apis::critical_service::{
    CoveredService, CriticalServiceSpec, CriticalServiceStatus, ServiceState, StandbyState,
};
use vigil_runtime::conditions::{self, NewCondition, Status};

use super::fallback::{
    fallback_pod, fallback_pod_name, standby_pod, standby_pod_names, template_hash,
};
use super::model::{
    CRITICAL_SERVICE_LABEL, EventNote, FALLBACK_ROLE_LABEL, Inputs, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, OWNED_VALUE, Plan, PodRef, PodView, Promotion, ROLE_ACTIVE, ROLE_STANDBY,
    SERVICE_LABEL, ServiceView, Settings, TemplateKey, TemplateLookup, about_pod,
};

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
        promote: actions.promote,
        create: actions.create,
        delete: actions.delete,
        events: actions.events,
        requeue_after: actions.requeue_after,
    }
}

/// The writes and findings gathered while deciding, Service by Service.
#[derive(Default)]
struct Actions {
    promote: Vec<Promotion>,
    create: Vec<Pod>,
    delete: Vec<PodRef>,
    events: Vec<EventNote>,
    problems: Vec<Problem>,
    requeue_after: Option<Duration>,
}

impl Actions {
    /// Deletes one of Vigil's pods (once, and not again while it terminates), with an event.
    fn delete_pod(&mut self, pod: &PodView, why: &str) {
        if pod.terminating || self.delete.iter().any(|d| d.uid == pod.uid) {
            return;
        }
        self.delete.push(PodRef {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
            uid: pod.uid.clone(),
        });
        self.events.push(about_pod(
            REASON_FALLBACK_DELETED,
            &pod.namespace,
            &pod.name,
            format!("Deleted fallback pod {}/{}: {why}", pod.namespace, pod.name),
        ));
    }

    /// Records a problem once (a template problem is found once per lame Service).
    fn problem(&mut self, problem: Problem) {
        if !self.problems.contains(&problem) {
            self.problems.push(problem);
        }
    }

    /// Keeps the earliest wake-up.
    fn requeue(&mut self, after: Duration) {
        self.requeue_after = Some(
            self.requeue_after
                .map_or(after, |current| current.min(after)),
        );
    }
}

/// Why Vigil cannot act. The declaration order is the severity order: a template problem blocks
/// every fallback of the CriticalService, a foreign pod only one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum ProblemKind {
    PodTemplateForbidden,
    PodTemplateNotFound,
    PodTemplateInvalid,
    ForeignPodInTheWay,
}

impl ProblemKind {
    fn reason(self) -> &'static str {
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
struct Problem {
    kind: ProblemKind,
    message: String,
}

impl Problem {
    fn event(&self) -> EventNote {
        EventNote::warning(self.kind.reason(), self.message.clone())
    }
}

/// The covered Services, sorted by (namespace, name) and without duplicates.
fn covered_services<'a>(inputs: &Inputs<'a>) -> Vec<&'a ServiceView> {
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
enum Health {
    /// A real pod is ready and the EndpointSlices list a real ready endpoint.
    Healthy,
    /// No real pod is ready: a fallback is wanted.
    Lame,
    /// Real pods are ready but the slices do not list one yet: keep a fallback, create none.
    Recovering,
}

/// What the caches say about one covered Service.
struct Observed<'a> {
    service: &'a ServiceView,
    fallback_name: String,
    /// Vigil's pod under the fallback name.
    ours: Option<&'a PodView>,
    /// A pod Vigil did not create under the fallback name: never touched.
    foreign: Option<&'a PodView>,
    /// A warm standby of Vigil's promoted to answer for the Service (not terminating).
    active: Option<&'a PodView>,
    /// Vigil's warm standbys waiting for the Service (not terminating), Ready ones first.
    standbys: Vec<&'a PodView>,
    /// The names standbys take turns at.
    standby_names: [String; 2],
    health: Health,
}

/// Looks at one covered Service.
fn observe<'a>(inputs: &Inputs<'a>, service: &'a ServiceView) -> Observed<'a> {
    let fallback_name = fallback_pod_name(&inputs.settings.pod_name_prefix, &service.name);
    let at_name = inputs
        .pods
        .iter()
        .find(|p| p.namespace == service.namespace && p.name == fallback_name);
    let ours = at_name.filter(|p| is_vigils(p));
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
        standbys,
        standby_names,
        health,
    }
}

/// The warm-standby role of one of Vigil's pods, if it is one.
fn role(pod: &PodView) -> Option<&str> {
    pod.labels.get(FALLBACK_ROLE_LABEL).map(String::as_str)
}

/// Whether the CriticalService asks for warm standbys.
fn warm_standby(inputs: &Inputs<'_>) -> bool {
    inputs.cr.spec.warm_standby == Some(true)
}

/// Whether Vigil created the pod: both of its marks are needed, so a pod that only shares a
/// label or the name is never treated as Vigil's (and never deleted).
fn is_vigils(pod: &PodView) -> bool {
    pod.labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGED_BY_VALUE)
        && pod.owned_annotation.as_deref() == Some(OWNED_VALUE)
}

/// Whether every selector pair is among the labels.
fn selects(selector: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The health of a Service's real endpoints. Any fallback pod of Vigil's is left out, not just
/// this Service's: another Service's fallback may carry a selector that overlaps this one, and a
/// fallback is never a real endpoint.
fn health(
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
fn owns(inputs: &Inputs<'_>, service: &ServiceView) -> bool {
    !inputs
        .all_crs
        .iter()
        .any(|other| other.name < inputs.cr.name && covers(&other.spec, service, inputs.settings))
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
            Health::Healthy => retire(&observed, actions),
            Health::Recovering => keep(&observed),
            Health::Lame => answer(inputs, &observed, before, actions),
        }
    } else {
        report_only(&observed)
    };
    // Only the owner keeps a standby; another CriticalService's standbys are its own business.
    let standby = (owner && warm_standby(inputs))
        .then(|| ensure_standby(inputs, &observed, fallback.as_deref(), actions));
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

/// Healthy: a real endpoint answers, so Vigil's fallback (or promoted standby) goes.
fn retire(observed: &Observed<'_>, actions: &mut Actions) -> Verdict {
    let why = format!(
        "Service {}/{} has a ready endpoint of its own",
        observed.service.namespace, observed.service.name
    );
    for pod in observed.ours.iter().chain(observed.active.iter()) {
        actions.delete_pod(pod, &why);
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
    if let (true, Some(standby)) = (warm_standby(inputs), observed.standbys.first()) {
        // Even a standby still starting beats a pod not created yet.
        promote(observed, standby, actions);
        return (ServiceState::FallbackActive, Some(standby.name.clone()));
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

/// Makes a warm standby an endpoint of its lame Service: one label patch adds the Service's
/// selector (and the active role), so the Service selects a pod that is already running.
fn promote(observed: &Observed<'_>, standby: &PodView, actions: &mut Actions) {
    let service = observed.service;
    let mut labels = service.selector.clone();
    labels.insert(FALLBACK_ROLE_LABEL.into(), ROLE_ACTIVE.into());
    actions.promote.push(Promotion {
        pod: PodRef {
            namespace: standby.namespace.clone(),
            name: standby.name.clone(),
            uid: standby.uid.clone(),
        },
        labels,
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
fn ensure_standby(
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

/// Deletes Vigil's fallback when it was built from something else than what it would be built
/// from now (CriticalService or template changed); the next pass creates the new one, since the
/// old one holds the name until it is gone. A template that cannot be used is reported, and the
/// running fallback kept: an outdated fallback answers better than none.
fn rebuild_if_stale(
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

/// Builds and records the fallback for a lame Service.
fn create(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    key: &TemplateKey,
    template: &PodTemplateSpec,
    actions: &mut Actions,
) {
    let service = observed.service;
    actions.create.push(fallback_pod(
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
            "Created fallback pod {}/{} for Service {}/{}, which has no ready endpoint of its own",
            service.namespace, observed.fallback_name, service.namespace, service.name
        ),
    ));
}

/// How much of the activation delay is left, if any. The Service has been lame since its previous
/// entry's `since` when that entry was Lame or FallbackActive (the outage was already running),
/// else since now, counted as the status will store it (see [`stored_now`]).
fn remaining_delay(inputs: &Inputs<'_>, before: Option<&CoveredService>) -> Option<Duration> {
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

/// The template, or the problem that keeps it from being used.
fn usable_template(lookup: &TemplateLookup) -> Result<(&TemplateKey, &PodTemplateSpec), Problem> {
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
fn show(key: &TemplateKey) -> String {
    format!("{}/{}", key.namespace, key.name)
}

/// A pod under the fallback name that Vigil did not create.
fn foreign_pod_problem(service: &ServiceView, pod: &PodView) -> Problem {
    Problem {
        kind: ProblemKind::ForeignPodInTheWay,
        message: format!(
            "Pod {}/{} has the fallback name of Service {}/{} but was not created by Vigil; it is left alone and the Service stays lame",
            pod.namespace, pod.name, service.namespace, service.name
        ),
    }
}

/// Deletes Vigil's pods labelled with this CriticalService that are no longer the fallback of a
/// Service it covers (Service gone, stopped matching, lost its selector, CriticalService changed,
/// or a name from an older prefix). A pod that is still the fallback of a covered Service is left
/// to the per-Service decision, even when another CriticalService owns that Service now.
fn delete_orphans(inputs: &Inputs<'_>, actions: &mut Actions) {
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
fn is_current_fallback(inputs: &Inputs<'_>, pod: &PodView) -> bool {
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
                Some(ROLE_ACTIVE) => is_standby_name,
                Some(ROLE_STANDBY) => {
                    is_standby_name && warm_standby(inputs) && owns(inputs, service)
                }
                _ => false,
            };
            covers(&inputs.cr.spec, service, inputs.settings) && current
        })
}

/// When the Service entered `state`: kept from its previous entry if the state is the same, so an
/// unchanged world gives an unchanged status.
fn since(before: Option<&CoveredService>, state: ServiceState, now: Timestamp) -> Time {
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
fn stored_now(now: Timestamp) -> Timestamp {
    let up = i64::from(now.subsec_nanosecond() > 0);
    Timestamp::from_second(now.as_second().saturating_add(up)).unwrap_or(now)
}

/// The full status: entries, counts, and the conditions updated from the previous ones.
fn build_status(
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
fn degraded_changed(before: &[Condition], after: &[Condition]) -> bool {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
    use vigil_apis::critical_service::LabelMatch;

    use crate::critical_service::model::{
        CriticalServiceView, OWNED_ANNOTATION, ServicePortView, SliceView, TEMPLATE_HASH_ANNOTATION,
    };

    const NS: &str = "shop";
    const FALLBACK: &str = "service-watcher-web";

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(secs).expect("valid time")
    }

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn spec(pairs: &[(&str, &str)]) -> CriticalServiceSpec {
        CriticalServiceSpec {
            namespace: None,
            match_labels: pairs
                .iter()
                .map(|(k, v)| LabelMatch {
                    key: (*k).into(),
                    value: (*v).into(),
                })
                .collect(),
            pod_template: None,
            activation_delay_seconds: None,
            maintenance_message: None,
            warm_standby: None,
        }
    }

    fn cr(name: &str) -> CriticalServiceView {
        CriticalServiceView {
            name: name.into(),
            uid: format!("{name}-uid"),
            generation: Some(3),
            spec: spec(&[("role", "frontend")]),
            status: None,
        }
    }

    fn service(namespace: &str, name: &str) -> ServiceView {
        ServiceView {
            namespace: namespace.into(),
            name: name.into(),
            uid: format!("{name}-svc-uid"),
            labels: labels(&[("role", "frontend"), ("team", "shop")]),
            selector: labels(&[("app", name)]),
            external_name: false,
            ports: vec![ServicePortView {
                name: Some("http".into()),
                port: 80,
                target_port: Some(IntOrString::String("http".into())),
                protocol: "TCP".into(),
            }],
        }
    }

    fn key() -> TemplateKey {
        TemplateKey {
            namespace: "vigil".into(),
            name: "maintenance".into(),
        }
    }

    fn template(containers: Vec<Container>) -> TemplateLookup {
        TemplateLookup::Found {
            key: key(),
            template: Box::new(PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers,
                    ..PodSpec::default()
                }),
            }),
        }
    }

    fn page() -> Vec<Container> {
        vec![Container {
            name: "page".into(),
            image: Some("nginx".into()),
            ..Container::default()
        }]
    }

    fn settings() -> Settings {
        Settings {
            pod_name_prefix: "service-watcher".into(),
            default_template: key(),
            watched_namespaces: None,
        }
    }

    /// A real pod of Service `app`.
    fn real_pod(name: &str, app: &str, ready: bool) -> PodView {
        PodView {
            namespace: NS.into(),
            name: name.into(),
            uid: format!("{name}-uid"),
            labels: labels(&[("app", app)]),
            owned_annotation: None,
            template_hash: None,
            owner_uids: vec![],
            ready,
            terminating: false,
            ip: Some("10.0.0.1".into()),
        }
    }

    /// The pod cache's view of a created pod.
    fn view_of(pod: &Pod, ready: bool) -> PodView {
        let meta = &pod.metadata;
        let annotations = meta.annotations.clone().unwrap_or_default();
        PodView {
            namespace: meta.namespace.clone().unwrap_or_default(),
            name: meta.name.clone().unwrap_or_default(),
            uid: format!("{}-uid", meta.name.clone().unwrap_or_default()),
            labels: meta.labels.clone().unwrap_or_default(),
            owned_annotation: annotations.get(OWNED_ANNOTATION).cloned(),
            template_hash: annotations.get(TEMPLATE_HASH_ANNOTATION).cloned(),
            owner_uids: meta
                .owner_references
                .iter()
                .flatten()
                .map(|o| o.uid.clone())
                .collect(),
            ready,
            terminating: false,
            ip: None,
        }
    }

    /// Everything a decision reads, owned, plus the writes a controller would make.
    struct World {
        cr: CriticalServiceView,
        others: Vec<CriticalServiceView>,
        services: Vec<ServiceView>,
        pods: Vec<PodView>,
        slices: BTreeMap<(String, String), SliceView>,
        template: TemplateLookup,
        now: Timestamp,
        settings: Settings,
    }

    impl World {
        /// One CriticalService covering `shop/web`, which has no pods.
        fn new() -> Self {
            Self {
                cr: cr("frontend"),
                others: vec![],
                services: vec![service(NS, "web")],
                pods: vec![],
                slices: BTreeMap::new(),
                template: template(page()),
                now: at(1_000),
                settings: settings(),
            }
        }

        fn decide(&self) -> Plan {
            let mut all = self.others.clone();
            all.push(self.cr.clone());
            decide(&Inputs {
                cr: &self.cr,
                all_crs: &all,
                services: &self.services,
                pods: &self.pods,
                slices: &self.slices,
                template: &self.template,
                now: self.now,
                settings: &self.settings,
            })
        }

        /// Writes the plan as the controller would; created pods appear not ready yet.
        fn apply(&mut self, plan: &Plan) {
            self.cr.status = Some(plan.status.clone());
            for promoted in &plan.promote {
                if let Some(pod) = self.pods.iter_mut().find(|p| p.uid == promoted.pod.uid) {
                    pod.labels.extend(promoted.labels.clone());
                }
            }
            for gone in &plan.delete {
                if let Some(pod) = self.pods.iter_mut().find(|p| p.uid == gone.uid) {
                    pod.terminating = true;
                }
            }
            self.pods
                .extend(plan.create.iter().map(|p| view_of(p, false)));
        }

        /// Decides and applies.
        fn pass(&mut self) -> Plan {
            let plan = self.decide();
            self.apply(&plan);
            plan
        }

        /// Real endpoints of `web` ready in pods and slices.
        fn healthy(&mut self) {
            self.pods.push(real_pod("web-1", "web", true));
            self.slice_lists("web-1");
        }

        fn slice_lists(&mut self, pod: &str) {
            self.slices
                .entry((NS.into(), "web".into()))
                .or_default()
                .ready_pods
                .insert(pod.into());
        }

        /// Vigil's up-to-date fallback for `web`, as if created earlier.
        fn with_fallback(&mut self) {
            let plan = World {
                pods: vec![],
                slices: BTreeMap::new(),
                ..self.clone_inputs()
            }
            .decide();
            self.pods
                .extend(plan.create.iter().map(|p| view_of(p, true)));
        }

        fn clone_inputs(&self) -> World {
            World {
                cr: self.cr.clone(),
                others: self.others.clone(),
                services: self.services.clone(),
                pods: self.pods.clone(),
                slices: self.slices.clone(),
                template: self.template.clone(),
                now: self.now,
                settings: self.settings.clone(),
            }
        }

        fn fallback_uid(&self) -> String {
            self.pods
                .iter()
                .find(|p| p.name == FALLBACK)
                .map(|p| p.uid.clone())
                .unwrap_or_default()
        }
    }

    fn entry<'a>(plan: &'a Plan, name: &str) -> &'a CoveredService {
        plan.status
            .services
            .iter()
            .find(|s| s.name == name)
            .expect("service in status")
    }

    fn condition<'a>(plan: &'a Plan, type_: &str) -> &'a Condition {
        conditions::find(&plan.status.conditions, type_).expect("condition set")
    }

    fn reasons(plan: &Plan) -> Vec<(bool, &str)> {
        plan.events
            .iter()
            .map(|e| (e.warning, e.reason.as_str()))
            .collect()
    }

    fn assert_no_writes(plan: &Plan) {
        assert!(plan.promote.is_empty(), "promote: {:?}", plan.promote);
        assert!(plan.create.is_empty(), "create: {:?}", plan.create);
        assert!(plan.delete.is_empty(), "delete: {:?}", plan.delete);
        assert!(plan.events.is_empty(), "events: {:?}", plan.events);
    }

    // ---- coverage ----

    #[test]
    fn covers_follows_the_namespace_rules() {
        let web = service(NS, "web");
        let mut in_shop = spec(&[("role", "frontend")]);
        in_shop.namespace = Some(NS.into());
        assert!(covers(&in_shop, &web, &settings()));
        in_shop.namespace = Some("other".into());
        assert!(!covers(&in_shop, &web, &settings()));

        let anywhere = spec(&[("role", "frontend")]);
        assert!(covers(&anywhere, &web, &settings()), "None watches all");
        let mut watched = settings();
        watched.watched_namespaces = Some(BTreeSet::from(["other".to_owned()]));
        assert!(!covers(&anywhere, &web, &watched));
        watched.watched_namespaces = Some(BTreeSet::from([NS.to_owned()]));
        assert!(covers(&anywhere, &web, &watched));
    }

    #[test]
    fn covers_needs_every_match_label() {
        let web = service(NS, "web");
        let s = &settings();
        assert!(covers(&spec(&[("role", "frontend")]), &web, s), "subset");
        assert!(covers(
            &spec(&[("role", "frontend"), ("team", "shop")]),
            &web,
            s
        ));
        assert!(!covers(
            &spec(&[("role", "frontend"), ("tier", "x")]),
            &web,
            s
        ));
        assert!(!covers(&spec(&[("role", "backend")]), &web, s));
        assert!(!covers(&spec(&[]), &web, s), "empty list covers nothing");
    }

    #[test]
    fn covers_skips_selectorless_and_external_name_services() {
        let s = &settings();
        let wanted = spec(&[("role", "frontend")]);
        let mut no_selector = service(NS, "web");
        no_selector.selector.clear();
        assert!(!covers(&wanted, &no_selector, s));
        let mut external = service(NS, "web");
        external.external_name = true;
        assert!(!covers(&wanted, &external, s));
    }

    // ---- lame, healthy, recovering ----

    /// Regression: `since` is rounded up to the second, and was taken for a wait of up to a
    /// second even with no activation delay (the fallback came ~1 s late).
    #[test]
    fn without_activation_delay_a_fallback_comes_at_once_mid_second() {
        let mut world = World::new();
        world.now = at(1_000)
            .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(17))
            .expect("valid time");
        let plan = world.decide();
        assert_eq!(plan.create.len(), 1, "{plan:?}");
        assert_eq!(plan.requeue_after, None);
    }

    #[test]
    fn a_lame_service_gets_its_fallback() {
        let plan = World::new().decide();
        assert_eq!(plan.create.len(), 1);
        let pod = &plan.create[0];
        assert_eq!(pod.metadata.name.as_deref(), Some(FALLBACK));
        assert_eq!(pod.metadata.namespace.as_deref(), Some(NS));
        let pod_labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(pod_labels.get("app").map(String::as_str), Some("web"));
        assert_eq!(
            pod_labels.get(CRITICAL_SERVICE_LABEL).map(String::as_str),
            Some("frontend")
        );
        let owner = pod.metadata.owner_references.clone().unwrap_or_default();
        assert_eq!(owner.len(), 1);
        assert_eq!(owner[0].uid, "frontend-uid");
        assert!(plan.delete.is_empty());
        assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_CREATED)]);
        assert!(plan.events[0].note.contains("shop/service-watcher-web"));
        assert!(plan.events[0].note.contains("shop/web"));

        let web = entry(&plan, "web");
        assert_eq!(web.state, ServiceState::FallbackActive);
        assert_eq!(web.fallback_pod.as_deref(), Some(FALLBACK));
        assert_eq!(web.since, Some(Time(at(1_000))));
        let status = &plan.status;
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(
            (status.covered, status.lame, status.fallback_active),
            (1, 0, 1)
        );
        assert_eq!(condition(&plan, READY).status, "True");
        assert_eq!(condition(&plan, READY).reason, REASON_ALL_ANSWERING);
        assert_eq!(condition(&plan, DEGRADED).status, "False");
        assert_eq!(condition(&plan, DEGRADED).reason, REASON_AS_EXPECTED);
        assert_eq!(plan.requeue_after, None);
    }

    #[test]
    fn a_long_service_name_gets_a_valid_truncated_pod_name() {
        let mut world = World::new();
        world.services = vec![service(NS, &"w".repeat(63))];
        let plan = world.decide();
        let name = plan.create[0].metadata.name.clone().unwrap_or_default();
        assert!(name.len() <= 63 && !name.ends_with('-'), "{name}");
        assert_eq!(plan.status.services[0].fallback_pod, Some(name));
    }

    #[test]
    fn healthy_in_pods_and_slices_retires_the_fallback_by_uid() {
        let mut world = World::new();
        world.with_fallback();
        world.healthy();
        let plan = world.decide();
        assert!(plan.create.is_empty());
        assert_eq!(
            plan.delete,
            vec![PodRef {
                namespace: NS.into(),
                name: FALLBACK.into(),
                uid: world.fallback_uid(),
            }]
        );
        assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_DELETED)]);
        let web = entry(&plan, "web");
        assert_eq!(web.state, ServiceState::Healthy);
        assert_eq!(web.fallback_pod, None);

        world.apply(&plan);
        let terminating = world.decide();
        assert_no_writes(&terminating);
        assert_eq!(terminating.status, plan.status, "no second delete");
    }

    #[test]
    fn ready_pods_not_yet_in_slices_keep_but_never_create_a_fallback() {
        let mut world = World::new();
        world.pods.push(real_pod("web-1", "web", true));
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").state, ServiceState::Healthy);

        world.with_fallback();
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
        assert_eq!(entry(&plan, "web").fallback_pod.as_deref(), Some(FALLBACK));

        // The slice listing only the fallback is not a real endpoint.
        world.slice_lists(FALLBACK);
        assert_no_writes(&world.decide());
    }

    #[test]
    fn a_pod_losing_readiness_makes_the_service_lame_at_once() {
        for terminating in [false, true] {
            let mut world = World::new();
            let mut pod = real_pod("web-1", "web", terminating);
            pod.terminating = terminating;
            world.pods.push(pod);
            world.slice_lists("web-1"); // slices lag behind
            let plan = world.decide();
            assert_eq!(plan.create.len(), 1, "terminating={terminating}");
            assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
        }
    }

    #[test]
    fn other_services_fallbacks_are_not_real_endpoints() {
        let mut world = World::new();
        // `web-admin` selects app=web too; its fallback carries app=web.
        let mut admin = service(NS, "web-admin");
        admin.selector = labels(&[("app", "web")]);
        world.services = vec![admin, service(NS, "web")];
        let first = world.pass();
        assert_eq!(first.create.len(), 2);
        for pod in &mut world.pods {
            pod.ready = true;
        }
        world.slice_lists("service-watcher-web-admin");
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
    }

    // ---- activation delay ----

    #[test]
    fn the_activation_delay_holds_the_fallback_back_then_lets_it_go() {
        let mut world = World::new();
        world.cr.spec.activation_delay_seconds = Some(60);
        let first = world.pass();
        assert!(first.create.is_empty());
        assert_eq!(first.requeue_after, Some(Duration::from_secs(60)));
        assert_eq!(entry(&first, "web").state, ServiceState::Lame);
        assert_eq!(entry(&first, "web").since, Some(Time(at(1_000))));
        assert_eq!(condition(&first, READY).status, "False");
        assert_eq!(condition(&first, READY).reason, REASON_SERVICES_LAME);
        assert!(condition(&first, READY).message.contains("shop/web"));
        assert_eq!(first.status.lame, 1);

        world.now = at(1_030);
        let waiting = world.pass();
        assert!(waiting.create.is_empty());
        assert_eq!(waiting.requeue_after, Some(Duration::from_secs(30)));
        assert_eq!(entry(&waiting, "web").since, Some(Time(at(1_000))), "kept");
        assert_eq!(
            waiting.status, first.status,
            "nothing to write while waiting"
        );

        world.now = at(1_060);
        let due = world.pass();
        assert_eq!(due.create.len(), 1);
        assert_eq!(due.requeue_after, None);
        assert_eq!(entry(&due, "web").state, ServiceState::FallbackActive);
        assert_eq!(entry(&due, "web").since, Some(Time(at(1_060))));
    }

    #[test]
    fn an_activation_delay_is_never_cut_short_by_the_stored_second() {
        // Between passes the status goes through the API, which keeps times to the second.
        fn through_the_api(world: &mut World) {
            let json = serde_json::to_string(&world.cr.status).expect("serialize status");
            world.cr.status = serde_json::from_str(&json).expect("deserialize status");
        }
        let ms = |ms: i64| Timestamp::from_millisecond(ms).expect("valid time");
        let mut world = World::new();
        world.cr.spec.activation_delay_seconds = Some(2);
        world.now = ms(1_000_200);
        let first = world.pass();
        through_the_api(&mut world);
        assert!(first.create.is_empty());
        assert_eq!(
            entry(&first, "web").since,
            Some(Time(at(1_001))),
            "rounded up"
        );
        assert_eq!(first.requeue_after, Some(Duration::from_millis(2_800)));
        let stored = world.cr.status.clone();

        // 1.8 s into the outage: the stored `since` must not make it look like 2 s.
        world.now = ms(1_002_000);
        let early = world.pass();
        through_the_api(&mut world);
        assert!(early.create.is_empty(), "created 1.8 s into a 2 s delay");
        assert_eq!(early.requeue_after, Some(Duration::from_secs(1)));
        assert_eq!(Some(early.status), stored, "nothing to write while waiting");

        world.now = ms(1_003_000);
        let due = world.pass();
        assert_eq!(due.create.len(), 1);
        assert_eq!(entry(&due, "web").since, Some(Time(at(1_003))));
    }

    #[test]
    fn the_shortest_remaining_delay_wins() {
        let mut world = World::new();
        world.cr.spec.activation_delay_seconds = Some(60);
        world.services.push(service(NS, "api"));
        let first = world.pass();
        // `api` becomes lame 20s later than `web`.
        world.cr.status = Some(CriticalServiceStatus {
            services: first
                .status
                .services
                .iter()
                .filter(|s| s.name == "web")
                .cloned()
                .collect(),
            ..first.status.clone()
        });
        world.now = at(1_020);
        let plan = world.decide();
        assert_eq!(plan.requeue_after, Some(Duration::from_secs(40)));
    }

    #[test]
    fn a_fallback_gone_during_an_outage_returns_without_a_new_delay() {
        let mut world = World::new();
        world.cr.spec.activation_delay_seconds = Some(60);
        world.pass();
        world.now = at(1_060);
        world.pass();
        world.pods.clear(); // someone deleted the fallback
        world.now = at(2_000);
        let plan = world.decide();
        assert_eq!(plan.create.len(), 1);
        assert_eq!(
            entry(&plan, "web").since,
            Some(Time(at(1_060))),
            "same state"
        );
    }

    // ---- overlapping CriticalServices ----

    #[test]
    fn only_the_smallest_name_acts_for_a_shared_service() {
        let mut world = World::new();
        world.others = vec![cr("a-first"), cr("zz-last")];
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").state, ServiceState::Lame);

        // a-first created it.
        world.pods.push(view_of(
            &fallback_pod(
                &cr("a-first"),
                &service(NS, "web"),
                &PodTemplateSpec {
                    metadata: None,
                    spec: Some(PodSpec {
                        containers: page(),
                        ..PodSpec::default()
                    }),
                },
                &key(),
                &settings(),
            ),
            true,
        ));
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);

        world.healthy();
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(
            entry(&plan, "web").state,
            ServiceState::FallbackActive,
            "the owner retires it"
        );

        // The owner sees it the other way round.
        let mut owner = world.clone_inputs();
        owner.cr = cr("a-first");
        owner.others = vec![cr("frontend")];
        assert_eq!(owner.decide().delete.len(), 1);
    }

    #[test]
    fn a_crs_that_stops_covering_leaves_ownership_to_the_next() {
        let mut world = World::new();
        let mut other = cr("a-first");
        other.spec = spec(&[("role", "backend")]);
        world.others = vec![other];
        assert_eq!(world.decide().create.len(), 1);
    }

    // ---- foreign pods and template problems ----

    #[test]
    fn a_foreign_pod_with_the_fallback_name_is_never_touched() {
        let mut world = World::new();
        let mut foreign = real_pod(FALLBACK, "other", false);
        // Vigil's label alone is not enough: the annotation is missing.
        foreign.labels = labels(&[
            (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
            (CRITICAL_SERVICE_LABEL, "frontend"),
            (SERVICE_LABEL, "web"),
        ]);
        world.pods.push(foreign);
        let plan = world.pass();
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(reasons(&plan), vec![(true, "ForeignPodInTheWay")]);
        assert!(plan.events[0].note.contains("shop/service-watcher-web"));
        let degraded = condition(&plan, DEGRADED);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "ForeignPodInTheWay")
        );
        assert_eq!(entry(&plan, "web").state, ServiceState::Lame);
        assert_eq!(entry(&plan, "web").fallback_pod, None);

        world.now = at(2_000);
        let again = world.decide();
        assert_no_writes(&again);
        assert_eq!(again.status, plan.status, "already reported");
    }

    #[test]
    fn template_problems_degrade_and_block_creation() {
        let cases = [
            (TemplateLookup::NotFound(key()), "PodTemplateNotFound"),
            (TemplateLookup::Forbidden(key()), "PodTemplateForbidden"),
            (template(vec![]), "PodTemplateInvalid"),
            (
                TemplateLookup::Found {
                    key: key(),
                    template: Box::default(),
                },
                "PodTemplateInvalid",
            ),
        ];
        for (lookup, reason) in cases {
            let mut world = World::new();
            world.template = lookup;
            world.services.push(service(NS, "api"));
            let plan = world.decide();
            assert!(plan.create.is_empty(), "{reason}");
            assert_eq!(
                reasons(&plan),
                vec![(true, reason)],
                "once, not per Service"
            );
            assert!(
                plan.events[0].note.contains("vigil/maintenance"),
                "{reason}"
            );
            let degraded = condition(&plan, DEGRADED);
            assert_eq!(
                (degraded.status.as_str(), degraded.reason.as_str()),
                ("True", reason)
            );
            assert!(degraded.message.contains("vigil/maintenance"));
            assert_eq!(plan.status.lame, 2);
        }
    }

    #[test]
    fn template_problems_do_not_matter_when_no_fallback_is_needed() {
        let mut world = World::new();
        world.template = TemplateLookup::NotFound(key());
        world.healthy();
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(condition(&plan, DEGRADED).status, "False");
    }

    #[test]
    fn a_running_fallback_is_kept_when_its_template_goes_missing() {
        let mut world = World::new();
        world.with_fallback();
        world.template = TemplateLookup::NotFound(key());
        let plan = world.decide();
        assert!(plan.create.is_empty() && plan.delete.is_empty());
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
        assert_eq!(condition(&plan, READY).status, "True");
        assert_eq!(condition(&plan, DEGRADED).reason, "PodTemplateNotFound");
    }

    #[test]
    fn the_worst_problem_names_degraded_and_all_are_listed() {
        let mut world = World::new();
        world.template = TemplateLookup::NotFound(key());
        world.services.push(service(NS, "api"));
        world
            .pods
            .push(real_pod("service-watcher-api", "other", false));
        let plan = world.decide();
        let degraded = condition(&plan, DEGRADED);
        assert_eq!(degraded.reason, "PodTemplateNotFound");
        assert!(degraded.message.contains("ForeignPodInTheWay"));
        assert_eq!(plan.events.len(), 2);
    }

    // ---- cleanup and rebuilds ----

    /// Something that happens to the world between passes.
    type Change = fn(&mut World);

    #[test]
    fn our_pods_for_services_no_longer_covered_are_deleted_by_uid() {
        let changes: [(&str, Change); 4] = [
            ("service deleted", |w| w.services.clear()),
            ("stopped matching", |w| {
                w.services[0].labels.remove("role");
            }),
            ("selector removed", |w| w.services[0].selector.clear()),
            ("CR changed", |w| {
                w.cr.spec.namespace = Some("elsewhere".into())
            }),
        ];
        for (what, change) in changes {
            let mut world = World::new();
            world.with_fallback();
            change(&mut world);
            let plan = world.decide();
            assert!(plan.create.is_empty(), "{what}");
            assert_eq!(plan.delete.len(), 1, "{what}");
            assert_eq!(plan.delete[0].uid, world.fallback_uid(), "{what}");
            assert_eq!(
                reasons(&plan),
                vec![(false, REASON_FALLBACK_DELETED)],
                "{what}"
            );
        }
    }

    #[test]
    fn pods_of_others_are_not_cleaned_up() {
        let mut world = World::new();
        world.services.clear();
        let mut unmarked = real_pod("service-watcher-gone", "gone", true);
        unmarked.labels = labels(&[
            (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
            (CRITICAL_SERVICE_LABEL, "frontend"),
        ]);
        let mut other_cr = real_pod("service-watcher-x", "x", true);
        other_cr.labels = labels(&[
            (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
            (CRITICAL_SERVICE_LABEL, "backend"),
        ]);
        other_cr.owned_annotation = Some(OWNED_VALUE.into());
        world.pods = vec![unmarked, other_cr];
        assert_no_writes(&world.decide());
    }

    #[test]
    fn a_changed_template_deletes_now_and_recreates_next_pass() {
        let mut world = World::new();
        world.with_fallback();
        world.pass();
        world.cr.spec.activation_delay_seconds = Some(60);
        world.cr.spec.maintenance_message = Some("back at 5".into());
        world.now = at(5_000);
        let plan = world.pass();
        assert!(
            plan.create.is_empty(),
            "no create while the old pod holds the name"
        );
        assert_eq!(plan.delete.len(), 1);
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);

        let terminating = world.pass();
        assert_no_writes(&terminating);

        let old_hash = world.pods[0].template_hash.clone();
        world.pods.retain(|p| !p.terminating);
        let recreated = world.pass();
        assert_eq!(recreated.create.len(), 1, "no new activation delay");
        assert_eq!(entry(&recreated, "web").state, ServiceState::FallbackActive);
        assert_ne!(world.pods[0].template_hash, old_hash, "rebuilt");
        assert_no_writes(&world.decide());
    }

    // ---- steady state and status ----

    #[test]
    fn steady_states_write_nothing() {
        // Lame with its fallback.
        let mut world = World::new();
        let created = world.pass();
        world.now = at(9_000);
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(plan.status, created.status);

        // Healthy.
        let mut world = World::new();
        world.healthy();
        let first = world.pass();
        world.now = at(9_000);
        let plan = world.decide();
        assert_no_writes(&plan);
        assert_eq!(plan.status, first.status);
        assert_eq!(plan.requeue_after, None);
    }

    #[test]
    fn condition_transition_times_move_only_on_transitions() {
        let mut world = World::new();
        world.healthy();
        world.pass();
        world.now = at(2_000);
        let same = world.pass();
        assert_eq!(
            condition(&same, READY).last_transition_time,
            Time(at(1_000))
        );
        assert_eq!(
            condition(&same, DEGRADED).last_transition_time,
            Time(at(1_000))
        );

        world.template = TemplateLookup::NotFound(key());
        world.pods.clear();
        world.now = at(3_000);
        let lame = world.pass();
        assert_eq!(
            condition(&lame, READY).last_transition_time,
            Time(at(3_000))
        );
        assert_eq!(
            condition(&lame, DEGRADED).last_transition_time,
            Time(at(3_000))
        );
    }

    #[test]
    fn services_are_sorted_and_counted() {
        let mut world = World::new();
        world.services = vec![
            service("b", "web"),
            service(NS, "api"),
            service("a", "z"),
            service(NS, "api"),
        ];
        let plan = world.decide();
        let keys: Vec<(&str, &str)> = plan
            .status
            .services
            .iter()
            .map(|s| (s.namespace.as_str(), s.name.as_str()))
            .collect();
        assert_eq!(keys, vec![("a", "z"), ("b", "web"), (NS, "api")]);
        assert_eq!(plan.status.covered, 3);
    }

    #[test]
    fn long_lists_are_capped_in_messages() {
        let mut world = World::new();
        world.cr.spec.activation_delay_seconds = Some(60);
        world.services = (0..25).map(|i| service(NS, &format!("s{i:02}"))).collect();
        let plan = world.decide();
        assert!(condition(&plan, READY).message.ends_with("and 15 more"));
    }

    #[test]
    fn odd_inputs_do_not_panic() {
        let mut world = World::new();
        world.services = vec![];
        world.cr.status = Some(CriticalServiceStatus {
            services: vec![CoveredService {
                namespace: NS.into(),
                name: "web".into(),
                state: ServiceState::Lame,
                since: Some(Time(at(999_999))),
                fallback_pod: None,
                standby_pod: None,
                standby: None,
            }],
            ..CriticalServiceStatus::default()
        });
        let plan = world.decide();
        assert_eq!(plan.status.covered, 0);
        assert_eq!(condition(&plan, READY).status, "True");

        // A `since` in the future waits the delay, no longer.
        world.services = vec![service(NS, "web")];
        world.cr.spec.activation_delay_seconds = Some(86_400);
        assert_eq!(
            world.decide().requeue_after,
            Some(Duration::from_secs(86_400))
        );
        world.settings.pod_name_prefix = String::new();
        world.cr.spec.activation_delay_seconds = None;
        let _ = world.decide();
    }

    // ---- warm standby ----

    const STANDBY_A: &str = "service-watcher-web-standby-a";
    const STANDBY_B: &str = "service-watcher-web-standby-b";

    fn with_standby() -> World {
        let mut world = World::new();
        world.cr.spec.warm_standby = Some(true);
        world
    }

    fn set_ready(world: &mut World, name: &str, ready: bool) {
        let pod = world
            .pods
            .iter_mut()
            .find(|p| p.name == name)
            .expect("pod exists");
        pod.ready = ready;
    }

    /// A healthy `web` with a Ready standby under its first name.
    fn healthy_with_ready_standby() -> World {
        let mut world = with_standby();
        world.healthy();
        world.pass();
        set_ready(&mut world, STANDBY_A, true);
        world.pass();
        world
    }

    #[test]
    fn a_warm_standby_starts_unselected_beside_a_healthy_service() {
        let mut world = with_standby();
        world.healthy();
        let plan = world.pass();
        assert_eq!(plan.create.len(), 1, "{:?}", plan.create);
        let pod = &plan.create[0];
        assert_eq!(pod.metadata.name.as_deref(), Some(STANDBY_A));
        let labels = pod.metadata.labels.clone().unwrap_or_default();
        assert_eq!(labels.get("app"), None, "the Service must not select it");
        assert_eq!(
            labels.get(FALLBACK_ROLE_LABEL).map(String::as_str),
            Some(ROLE_STANDBY)
        );
        assert!(is_vigils(&view_of(pod, false)));
        assert_eq!(reasons(&plan), vec![(false, REASON_STANDBY_CREATED)]);
        let web = entry(&plan, "web");
        assert_eq!(web.state, ServiceState::Healthy);
        assert_eq!(
            (web.standby_pod.as_deref(), web.standby),
            (Some(STANDBY_A), Some(StandbyState::Starting))
        );
        assert_eq!(plan.status.standby_ready, Some(0));
        assert_eq!(
            condition(&plan, STANDBY_READY).reason,
            REASON_STANDBYS_STARTING
        );

        set_ready(&mut world, STANDBY_A, true);
        let plan = world.pass();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").standby, Some(StandbyState::Ready));
        assert_eq!(plan.status.standby_ready, Some(1));
        assert_eq!(condition(&plan, STANDBY_READY).status, "True");
        // At rest: nothing to write, the same status.
        let again = world.pass();
        assert_no_writes(&again);
        assert_eq!(again.status, plan.status);
    }

    #[test]
    fn a_lame_service_promotes_its_standby_in_one_write_and_gets_a_new_one() {
        let mut world = healthy_with_ready_standby();
        set_ready(&mut world, "web-1", false);
        let plan = world.pass();
        assert_eq!(plan.promote.len(), 1, "{:?}", plan.promote);
        let promotion = &plan.promote[0];
        assert_eq!(
            (promotion.pod.name.as_str(), promotion.pod.uid.as_str()),
            (STANDBY_A, "service-watcher-web-standby-a-uid")
        );
        assert_eq!(
            promotion.labels,
            labels(&[("app", "web"), (FALLBACK_ROLE_LABEL, ROLE_ACTIVE)])
        );
        // No fallback created from scratch: a new standby under the other name instead.
        let created: Vec<_> = plan
            .create
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(created, vec![STANDBY_B.to_owned()]);
        assert_eq!(
            reasons(&plan),
            vec![
                (false, REASON_STANDBY_PROMOTED),
                (false, REASON_STANDBY_CREATED)
            ]
        );
        let web = entry(&plan, "web");
        assert_eq!(
            (
                web.state,
                web.fallback_pod.as_deref(),
                web.standby_pod.as_deref()
            ),
            (
                ServiceState::FallbackActive,
                Some(STANDBY_A),
                Some(STANDBY_B)
            )
        );
        // The promoted standby answers; the next pass writes nothing new.
        set_ready(&mut world, STANDBY_B, true);
        let plan = world.pass();
        assert_no_writes(&plan);
        assert_eq!(entry(&plan, "web").fallback_pod.as_deref(), Some(STANDBY_A));

        // Recovery retires the promoted one by uid and keeps the new standby.
        set_ready(&mut world, "web-1", true);
        let plan = world.pass();
        assert_eq!(
            plan.delete
                .iter()
                .map(|d| d.uid.as_str())
                .collect::<Vec<_>>(),
            vec!["service-watcher-web-standby-a-uid"]
        );
        let web = entry(&plan, "web");
        assert_eq!(
            (web.state, web.standby_pod.as_deref(), web.standby),
            (
                ServiceState::Healthy,
                Some(STANDBY_B),
                Some(StandbyState::Ready)
            )
        );

        // The next outage promotes the other; its name is taken until the old one is gone.
        set_ready(&mut world, "web-1", false);
        let plan = world.pass();
        assert_eq!(plan.promote[0].pod.name, STANDBY_B);
        assert!(plan.create.is_empty(), "{:?}", plan.create);
        assert_eq!(entry(&plan, "web").standby, Some(StandbyState::Missing));
        assert_eq!(
            condition(&plan, STANDBY_READY).reason,
            REASON_STANDBYS_MISSING
        );
        world.pods.retain(|p| p.name != STANDBY_A);
        let plan = world.pass();
        assert_eq!(plan.create[0].metadata.name.as_deref(), Some(STANDBY_A));
    }

    #[test]
    fn the_last_endpoint_terminating_promotes_the_standby_at_once() {
        let mut world = healthy_with_ready_standby();
        // Deleted, still Ready and still listed as ready in the slices: its server may stop any
        // moment, so the standby goes in now.
        world
            .pods
            .iter_mut()
            .find(|p| p.name == "web-1")
            .expect("pod")
            .terminating = true;
        let plan = world.pass();
        assert_eq!(plan.promote.len(), 1, "{:?}", plan.promote);
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
    }

    #[test]
    fn a_lame_service_without_a_standby_gets_the_fallback_and_a_standby() {
        let mut world = with_standby();
        let plan = world.pass();
        let mut created: Vec<_> = plan
            .create
            .iter()
            .map(|p| p.metadata.name.clone().unwrap_or_default())
            .collect();
        created.sort();
        assert_eq!(created, vec![FALLBACK.to_owned(), STANDBY_A.to_owned()]);
        assert!(plan.promote.is_empty());
        let web = entry(&plan, "web");
        assert_eq!(web.fallback_pod.as_deref(), Some(FALLBACK));
    }

    #[test]
    fn the_activation_delay_holds_back_the_promotion_too() {
        let mut world = healthy_with_ready_standby();
        world.cr.spec.activation_delay_seconds = Some(5);
        set_ready(&mut world, "web-1", false);
        let plan = world.pass();
        assert!(plan.promote.is_empty());
        assert!(plan.requeue_after.is_some());
        world.now = at(1_010);
        let plan = world.pass();
        assert_eq!(plan.promote.len(), 1);
    }

    #[test]
    fn an_out_of_date_standby_is_replaced() {
        let mut world = healthy_with_ready_standby();
        world.cr.spec.maintenance_message = Some("back soon".into());
        let plan = world.pass();
        assert_eq!(
            plan.delete
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            vec![STANDBY_A]
        );
        // Its name is held until it is gone; the other one is free.
        assert_eq!(plan.create[0].metadata.name.as_deref(), Some(STANDBY_B));
    }

    #[test]
    fn switching_standbys_off_deletes_the_waiting_one_only() {
        let mut world = healthy_with_ready_standby();
        set_ready(&mut world, "web-1", false);
        world.pass();
        set_ready(&mut world, STANDBY_B, true);
        world.cr.spec.warm_standby = None;
        let plan = world.pass();
        // The promoted one keeps answering; the waiting one goes; the condition too.
        assert_eq!(
            plan.delete
                .iter()
                .map(|d| d.name.as_str())
                .collect::<Vec<_>>(),
            vec![STANDBY_B]
        );
        let web = entry(&plan, "web");
        assert_eq!(
            (web.fallback_pod.as_deref(), web.standby_pod.as_deref()),
            (Some(STANDBY_A), None)
        );
        assert!(conditions::find(&plan.status.conditions, STANDBY_READY).is_none());
        assert_eq!(plan.status.standby_ready, None);
        assert!(plan.create.is_empty());
    }

    #[test]
    fn only_the_owner_keeps_a_standby() {
        let mut world = with_standby();
        world.healthy();
        let mut other = cr("aaa-first");
        other.spec.warm_standby = Some(true);
        world.others = vec![other];
        let plan = world.pass();
        assert!(plan.create.is_empty(), "{:?}", plan.create);
        assert_eq!(entry(&plan, "web").standby, None);
    }
}
