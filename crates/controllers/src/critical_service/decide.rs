//! The pure decision for one CriticalService: which Services it covers, how each of them is doing,
//! which fallback pods to create or delete, and the status and events that say so.
//!
//! No clock, no randomness, no I/O: the same [`Inputs`] always give the same [`Plan`], and a world
//! that has not changed gives a plan with no writes and the previous status.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use vigil_apis::critical_service::{
    CoveredService, CriticalServiceSpec, CriticalServiceStatus, ServiceState, StandbyState,
};

mod drain;
mod slices;
mod status;

use super::fallback::{
    fallback_pod_name, standby_pod, standby_pod_names, starting_fallback_pod, template_hash,
};
use super::model::{
    CRITICAL_SERVICE_LABEL, EventNote, FALLBACK_ROLE_LABEL, Inputs, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, OWNED_VALUE, Plan, PodRef, PodView, ROLE_ACTIVE, ROLE_RETIRING, ROLE_STANDBY,
    ROLE_STARTING, Relabel, SERVICE_LABEL, ServiceView, Settings, SliceWrite, TemplateKey,
    TemplateLookup, about_pod,
};
use status::{build_status, degraded_changed};

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

/// The writes and findings gathered while deciding, Service by Service.
#[derive(Default)]
struct Actions {
    slices: Vec<SliceWrite>,
    relabel: Vec<Relabel>,
    create: Vec<Pod>,
    delete: Vec<PodRef>,
    events: Vec<EventNote>,
    problems: Vec<Problem>,
    requeue_after: Option<Duration>,
}

/// The pod, by name and uid.
fn pod_ref(pod: &PodView) -> PodRef {
    PodRef {
        namespace: pod.namespace.clone(),
        name: pod.name.clone(),
        uid: pod.uid.clone(),
    }
}

impl Actions {
    /// Deletes one of Vigil's pods (once, and not again while it terminates), with an event.
    fn delete_pod(&mut self, pod: &PodView, why: &str) {
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
    /// Vigil's pods for the Service being drained (`spec.drainSeconds`; not terminating).
    retiring: Vec<&'a PodView>,
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

/// How long a replacement on its first start is given before a fallback is created: a
/// fallback needs as long as it to be Ready (schedule, start the container, pass the
/// readiness probe: about 1 s on the node here), so one that started earlier wins unless it is
/// slow. Creation times are kept to the second (rounded down), so the replacement is waited for
/// 2 to 3 s after it was created; one that is not Ready by then is slower than a fallback.
pub const REPLACEMENT_HEAD_START: Duration = Duration::from_secs(3);

/// The time left before a fallback is created when a real pod the Service selects is on its
/// first start (a workload controller's replacement) and younger than
/// [`REPLACEMENT_HEAD_START`].
fn replacement_head_start(inputs: &Inputs<'_>, service: &ServiceView) -> Option<Duration> {
    let head_start_ms = i64::try_from(REPLACEMENT_HEAD_START.as_millis()).unwrap_or(i64::MAX);
    inputs
        .pods
        .iter()
        .filter(|p| {
            p.namespace == service.namespace
                && !is_vigils(p)
                && !p.terminating
                && selects(&service.selector, &p.labels)
        })
        .filter_map(|p| p.starting_since)
        .filter_map(|created| {
            let age_ms = inputs
                .now
                .as_millisecond()
                .saturating_sub(created.as_millisecond());
            u64::try_from(head_start_ms.saturating_sub(age_ms))
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        })
        .max()
}

/// How long after a pod under a workload controller is deleted its replacement is waited for
/// before a fallback is created. A ReplicaSet creates it within ~100 ms of the deletion; Vigil
/// may see the Service lame before it sees the replacement (on the node here the fallback was
/// created 15 ms after the replacement, whose head start it then missed: 268 failed requests
/// instead of 192 with no controller). Deletion times are whole seconds (the
/// `deletionTimestamp` less the grace period, rounded down), so the wait is 1 to 2 s after the
/// deletion; once the replacement is seen, [`REPLACEMENT_HEAD_START`] takes over.
pub const REPLACEMENT_APPEARS: Duration = Duration::from_secs(2);

/// The time left to wait for a replacement that is not seen yet: the Service selects no pod
/// that is not being deleted (a pod that is, a replacement or a broken one, is judged by
/// [`replacement_head_start`]), and one it selects was deleted under a workload controller less
/// than [`REPLACEMENT_APPEARS`] ago. Bare pods (no controller) are never waited for.
fn replacement_expected(inputs: &Inputs<'_>, service: &ServiceView) -> Option<Duration> {
    let selected = || {
        inputs.pods.iter().filter(|p| {
            p.namespace == service.namespace
                && !is_vigils(p)
                && selects(&service.selector, &p.labels)
        })
    };
    if selected().any(|p| !p.terminating) {
        return None;
    }
    let wait_ms = i64::try_from(REPLACEMENT_APPEARS.as_millis()).unwrap_or(i64::MAX);
    selected()
        .filter_map(|p| p.deleted_under_controller)
        .filter_map(|deleted| {
            let since_ms = inputs
                .now
                .as_millisecond()
                .saturating_sub(deleted.as_millisecond());
            u64::try_from(wait_ms.saturating_sub(since_ms))
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
        })
        .max()
}

/// The labels a merge patch sets so that `service` selects the pod: its selector's.
fn selected_by(service: &ServiceView) -> BTreeMap<String, Option<String>> {
    service
        .selector
        .iter()
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect()
}

/// Makes a warm standby an endpoint of its lame Service: one label patch adds the Service's
/// selector (and the active role), so the Service selects a pod that is already running.
fn promote(observed: &Observed<'_>, standby: &PodView, actions: &mut Actions) {
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

/// Makes a fallback created outside the selector (role `starting`) an endpoint of its Service
/// once it is Ready: one label patch adds the selector's labels and drops the role. Not a pod
/// being deleted (out of date, or by someone else).
fn select_once_ready(observed: &Observed<'_>, pod: &PodView, actions: &mut Actions) {
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

/// Builds and records the fallback for a lame Service, outside the Service's selector until it
/// is Ready (see [`ROLE_STARTING`]).
fn create(
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
                Some(ROLE_ACTIVE | ROLE_RETIRING) => is_standby_name,
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

#[cfg(test)]
mod tests;
