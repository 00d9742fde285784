//! The pure decisions of the KubernetesCluster controller: from the object and what its provider
//! reports, the one provider request to make (if any), the status to hold, the kubeconfig to
//! keep in its Secret, the Events to record and when to look again. No I/O: every branch is
//! unit-tested (`decide/tests.rs`).
//!
//! A reconcile decides once on what the provider reports and, when that decision asked the
//! provider for something, once more on the provider's answer ([`Inputs::answered`]): the
//! answer is what the provider reports now, so the status records it at once (the new cluster's
//! id above all). The second decision asks for nothing: what the answer calls for next waits
//! for the next pass.

use std::cmp::Ordering;
use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use vigil_apis::kubernetes_cluster::{
    AddonStatus, DeletionPolicy, KubernetesClusterStatus, Phase, Rejection,
};
use vigil_provider::{AddonState, ClusterState, ProviderCluster, compare_versions};
use vigil_runtime::conditions::{self, NewCondition, Status};

use super::model::{
    Answer, Answered, Call, ClusterView, DeleteAnswer, DeletionPlan, DeletionStep, DeletionTarget,
    EventNote, OP_CREATE, OP_SET_ADDONS, OP_UPGRADE, Observed, Plan, Settings,
};

mod addons;
mod deletion;
mod reasons;
mod version;

use addons::{addon_state, addons_readiness, converge_addons};
pub use deletion::*;
pub use reasons::*;
use version::{converge_version, warn_version_drift};

/// Everything one decision reads.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub cluster: &'a ClusterView,
    pub observed: Observed<'a>,
    /// The names of the providers the operator knows (to say so when the spec names another).
    pub providers: &'a [String],
    /// The provider's answer to the request of this reconcile's first decision; `None` on the
    /// first decision.
    pub answered: Option<Answered<'a>>,
    pub settings: &'a Settings,
    pub now: Timestamp,
}

/// Builds the status and Events of one pass: conditions change only when they must, and an
/// Event goes out only when a condition changes (so a steady cluster records nothing).
struct Report {
    status: KubernetesClusterStatus,
    generation: Option<i64>,
    now: Time,
    events: Vec<EventNote>,
    /// Operations that just finished, with their duration in seconds.
    finished: Vec<(&'static str, f64)>,
}

impl Report {
    fn new(view: &ClusterView, now: Timestamp) -> Self {
        let mut status = view.status.clone().unwrap_or_default();
        status.observed_generation = view.generation;
        Self {
            status,
            generation: view.generation,
            now: Time(now),
            events: Vec::new(),
            finished: Vec::new(),
        }
    }

    /// Sets a condition; returns whether it changed.
    fn set(&mut self, type_: &str, status: Status, reason: &str, message: &str) -> bool {
        conditions::set(
            &mut self.status.conditions,
            &NewCondition {
                type_,
                status,
                reason,
                message,
                observed_generation: self.generation,
            },
            &self.now,
        )
    }

    /// Marks a condition that still holds as describing the current generation (a pass
    /// judges the whole object, so what it leaves as is holds for the generation it read).
    fn refresh(&mut self, type_: &str) {
        if let Some(c) = self.status.conditions.iter_mut().find(|c| c.type_ == type_) {
            c.observed_generation = self.generation;
        }
    }

    fn is_true(&self, type_: &str) -> bool {
        conditions::is_true(&self.status.conditions, type_)
    }

    /// How long the condition has held its status, in seconds.
    fn held_for(&self, type_: &str) -> Option<f64> {
        let since = conditions::find(&self.status.conditions, type_)?
            .last_transition_time
            .0;
        let span = self.now.0.duration_since(since);
        Some(span.as_secs_f64().max(0.0))
    }

    /// Sets `type_` and records an Event when it turns `True` (or, with `on_false`, `False`).
    fn transition(
        &mut self,
        type_: &str,
        status: Status,
        reason: &str,
        message: &str,
        event: Option<(bool, &str)>,
    ) {
        let was_true = self.is_true(type_);
        self.set(type_, status, reason, message);
        let now_true = status == Status::True;
        if let Some((warning, event_reason)) = event
            && was_true != now_true
            && (now_true || !warning)
        {
            self.events.push(EventNote {
                warning,
                reason: event_reason.to_owned(),
                note: message.to_owned(),
                related: None,
            });
        }
    }

    fn event(&mut self, note: EventNote) {
        self.events.push(note);
    }

    /// Degraded: `Some` sets it True with a Warning Event when the reason is new; `None` clears
    /// it.
    fn degraded(&mut self, problem: Option<(String, String)>) {
        match problem {
            Some((reason, message)) => {
                let before = conditions::find(&self.status.conditions, DEGRADED)
                    .map(|c| (c.status.clone(), c.reason.clone()));
                self.set(DEGRADED, Status::True, &reason, &message);
                if before != Some(("True".to_owned(), reason.clone())) {
                    self.events.push(EventNote::warning(&reason, message));
                }
            }
            None => {
                self.set(
                    DEGRADED,
                    Status::False,
                    REASON_AS_EXPECTED,
                    "the cluster matches its spec",
                );
            }
        }
    }

    fn plan(self, call: Option<Call>, requeue: Option<std::time::Duration>) -> Plan {
        Plan {
            call,
            status: self.status,
            kubeconfig: None,
            events: self.events,
            requeue,
            finished: self.finished,
        }
    }
}

/// The rejection of `operation` recorded for this generation, if any.
fn rejection_for<'a>(
    status: &'a KubernetesClusterStatus,
    operation: &str,
) -> Option<&'a Rejection> {
    status
        .rejection
        .as_ref()
        .filter(|r| r.operation == operation)
}

/// Decides one pass for a KubernetesCluster that is not being deleted.
pub fn decide(inputs: &Inputs<'_>) -> Plan {
    let Some(answered) = &inputs.answered else {
        return decide_pass(inputs, inputs.cluster, inputs.observed.clone(), None);
    };
    // Where the first decision left the object: its status, as if written.
    let mut after = inputs.cluster.clone();
    after.status = Some(answered.first.status.clone());
    let operation = answered.first.call.as_ref().map_or("", Call::operation);
    let mut plan = match answered.answer.clone() {
        Answer::Accepted(cluster) => {
            if let Some(status) = after.status.as_mut() {
                // Recorded at once: the next pass looks the cluster up by id.
                status.cluster_id = Some(cluster.id.clone());
            }
            decide_pass(inputs, &after, Observed::Found(cluster), None)
        }
        Answer::Rejected { reason, message } => decide_pass(
            inputs,
            &after,
            inputs.observed.clone(),
            Some((operation, reason, message)),
        ),
        Answer::Unavailable(error) => provider_unavailable_plan(&after, error, inputs.now),
    };
    plan.events
        .splice(0..0, answered.first.events.iter().cloned());
    // What the answer calls for next waits for the next pass.
    plan.call = None;
    plan
}

/// The provider did not answer: only `Degraded` changes (see [`provider_unavailable`]).
fn provider_unavailable_plan(view: &ClusterView, error: &str, now: Timestamp) -> Plan {
    let (status, events) = provider_unavailable(view, error, now);
    Plan {
        call: None,
        status,
        kubeconfig: None,
        events,
        requeue: None,
        finished: Vec::new(),
    }
}

/// One decision on what the provider reports of the cluster (`rejected`: the operation,
/// reason and message of a request it just refused).
fn decide_pass(
    inputs: &Inputs<'_>,
    view: &ClusterView,
    observed: Observed<'_>,
    rejected: Option<(&str, &str, &str)>,
) -> Plan {
    let kubeconfig = match observed {
        Observed::Found(cluster) => cluster.kubeconfig.clone(),
        _ => None,
    };
    let mut plan = decide_cluster(inputs, view, observed, rejected);
    plan.kubeconfig = kubeconfig;
    plan
}

fn decide_cluster(
    inputs: &Inputs<'_>,
    view: &ClusterView,
    observed: Observed<'_>,
    rejected: Option<(&str, &str, &str)>,
) -> Plan {
    let mut report = Report::new(view, inputs.now);
    // A live object is not being deleted: a `Deleting` condition can only come from the status
    // the vault restored from an earlier object's tombstone (found by the chaos test).
    report.status.conditions.retain(|c| c.type_ != DELETING);
    record_rejection(&mut report, view, rejected);
    if decide_paused(&mut report, view) {
        return report.plan(None, None);
    }

    let provider = view.provider_name().to_owned();
    match observed {
        Observed::Unavailable(error) => provider_unavailable_plan(view, error, inputs.now),
        Observed::NotAsked => {
            let message = format!(
                "the operator knows no provider named {provider:?} (known: {})",
                inputs.providers.join(", ")
            );
            report.set(READY, Status::False, REASON_PROVIDER_UNKNOWN, &message);
            report.degraded(Some((REASON_PROVIDER_UNKNOWN.to_owned(), message)));
            if report.status.phase.is_none() {
                report.status.phase = Some(Phase::Pending);
            }
            report.plan(None, None)
        }
        Observed::Absent => decide_absent(view, &provider, inputs.settings, report),
        Observed::Found(cluster) => decide_found(view, cluster, &provider, inputs.settings, report),
    }
}

/// A refusal holds for the generation it was made for (a new spec is worth asking again);
/// `rejected` is the one the provider just made, recorded with a Warning Event.
fn record_rejection(report: &mut Report, view: &ClusterView, rejected: Option<(&str, &str, &str)>) {
    if report
        .status
        .rejection
        .as_ref()
        .is_some_and(|r| r.observed_generation != view.generation)
    {
        report.status.rejection = None;
    }
    if let Some((operation, reason, message)) = rejected {
        report.status.rejection = Some(Rejection {
            operation: operation.to_owned(),
            reason: reason.to_owned(),
            message: message.to_owned(),
            observed_generation: view.generation,
        });
        report.event(EventNote::warning(
            reason,
            format!("the provider refused {operation}: {message}"),
        ));
    }
}

/// `Paused` follows `spec.paused`; true when the object is paused (its pass ends with no call).
fn decide_paused(report: &mut Report, view: &ClusterView) -> bool {
    if view.spec.paused() {
        report.transition(
            PAUSED,
            Status::True,
            REASON_PAUSED,
            "spec.paused is true: Vigil makes no call to the provider",
            Some((false, REASON_PAUSED)),
        );
        if report.status.phase.is_none() {
            report.status.phase = Some(Phase::Pending);
        }
        return true;
    }
    if conditions::find(&report.status.conditions, PAUSED).is_some() {
        report.transition(
            PAUSED,
            Status::False,
            REASON_RESUMED,
            "spec.paused is false: Vigil reconciles the cluster",
            Some((false, REASON_RESUMED)),
        );
    }
    false
}

/// The provider reports a cluster for this object: record it (adopting it when no id was
/// known), refuse one that belongs to another object, then decide by its state.
fn decide_found(
    view: &ClusterView,
    cluster: &ProviderCluster,
    provider: &str,
    settings: &Settings,
    mut report: Report,
) -> Plan {
    let adopted = view.cluster_id().is_none();
    record_cluster(&mut report.status, cluster, provider, view);
    if adopted {
        report.event(EventNote::normal(
            REASON_ADOPTED,
            format!(
                "found cluster {} at provider {provider} for {}: adopting it",
                cluster.id,
                view.identity()
            ),
        ));
    }

    if cluster.identity != view.identity() {
        let message = format!(
            "cluster {} at provider {provider} belongs to {}, not to {}: Vigil leaves it alone",
            cluster.id,
            cluster.identity,
            view.identity()
        );
        report.set(READY, Status::False, REASON_IDENTITY_MISMATCH, &message);
        report.degraded(Some((REASON_IDENTITY_MISMATCH.to_owned(), message)));
        report.status.phase = Some(Phase::Failed);
        return report.plan(None, Some(settings.resync_interval));
    }

    let (addons_status, addons_reason, addons_message) = addons_readiness(view, cluster);
    let addons_were =
        conditions::find(&report.status.conditions, ADDONS_READY).map(|c| c.status.clone());
    report.set(ADDONS_READY, addons_status, addons_reason, &addons_message);
    // An Event when the addons become ready again or at last, not when first reported ready.
    if addons_status == Status::True && addons_were.is_some_and(|s| s != "True") {
        report.event(EventNote::normal(REASON_ADDONS_READY, addons_message));
    }

    let mut problems: Vec<(String, String)> = Vec::new();
    let immutable = immutable_changes(view, cluster);
    if !immutable.is_empty() {
        problems.push((
            REASON_IMMUTABLE_FIELD_CHANGED.to_owned(),
            format!(
                "{} cannot change once the cluster exists; the cluster keeps its original values",
                immutable.join(", ")
            ),
        ));
    }
    decide_by_state(view, cluster, settings, problems, report)
}

/// What the cluster's state at the provider calls for (`problems`: what `Degraded` reports).
fn decide_by_state(
    view: &ClusterView,
    cluster: &ProviderCluster,
    settings: &Settings,
    problems: Vec<(String, String)>,
    mut report: Report,
) -> Plan {
    match cluster.state {
        ClusterState::Provisioning => {
            let message = progress(cluster, "provisioning");
            report.status.phase = Some(Phase::Provisioning);
            report.transition(
                PROVISIONING,
                Status::True,
                REASON_PROVISIONING,
                &message,
                None,
            );
            report.set(READY, Status::False, REASON_PROVISIONING, &message);
            report.degraded(problems.into_iter().next());
            report.plan(None, Some(settings.poll_interval))
        }
        ClusterState::Upgrading => {
            let message = progress(cluster, "upgrading");
            report.status.phase = Some(Phase::Upgrading);
            report.set(UPGRADING, Status::True, REASON_UPGRADING, &message);
            report.degraded(problems.into_iter().next());
            report.plan(None, Some(settings.poll_interval))
        }
        ClusterState::Deleting => {
            let message = progress(cluster, "being deleted by the provider");
            report.status.phase = Some(Phase::Deleting);
            report.set(READY, Status::False, REASON_DELETING_AT_PROVIDER, &message);
            report.degraded(Some((REASON_DELETING_AT_PROVIDER.to_owned(), message)));
            report.plan(None, Some(settings.poll_interval))
        }
        ClusterState::Failed => {
            let message = format!(
                "the provider reports cluster {} failed: {}",
                cluster.id,
                cluster.message.as_deref().unwrap_or("no reason given")
            );
            report.status.phase = Some(Phase::Failed);
            report.set(READY, Status::False, REASON_CLUSTER_FAILED, &message);
            report.degraded(Some((REASON_CLUSTER_FAILED.to_owned(), message)));
            report.plan(None, Some(settings.resync_interval))
        }
        ClusterState::Running => decide_running(view, cluster, settings, problems, report),
    }
}

/// No cluster at the provider: create one — unless one existed (it vanished: say so, do not
/// silently provision a blank replacement) or the provider refused this spec.
fn decide_absent(
    view: &ClusterView,
    provider: &str,
    settings: &Settings,
    mut report: Report,
) -> Plan {
    if let Some(id) = view.cluster_id() {
        let message = format!(
            "provider {provider} has no cluster {id} any more; Vigil does not re-create it on its \
             own (its state would be lost): to provision a new one, clear status.clusterID"
        );
        report.status.phase = Some(Phase::Failed);
        report.status.api_server_url = None;
        report.set(READY, Status::False, REASON_CLUSTER_NOT_FOUND, &message);
        report.degraded(Some((REASON_CLUSTER_NOT_FOUND.to_owned(), message)));
        return report.plan(None, Some(settings.resync_interval));
    }
    if let Some(rejection) = rejection_for(&report.status, OP_CREATE).cloned() {
        report.status.phase = Some(Phase::Pending);
        report.set(READY, Status::False, &rejection.reason, &rejection.message);
        report.set(
            PROVISIONING,
            Status::False,
            &rejection.reason,
            &rejection.message,
        );
        report.degraded(Some((rejection.reason.clone(), rejection.message.clone())));
        return report.plan(None, None);
    }
    let message = format!(
        "asking provider {provider} for a {} cluster, Kubernetes {}",
        view.spec.type_, view.spec.kube_version
    );
    report.status.phase = Some(Phase::Provisioning);
    report.status.provider = Some(provider.to_owned());
    report.transition(
        PROVISIONING,
        Status::True,
        REASON_CREATING,
        &message,
        Some((false, REASON_CREATING)),
    );
    report.set(READY, Status::False, REASON_PROVISIONING, &message);
    report.plan(
        Some(Call::Create(view.request())),
        Some(settings.poll_interval),
    )
}

/// A running cluster: finish reports of operations that ended, then converge the version and
/// the addons, one request at a time.
fn decide_running(
    view: &ClusterView,
    cluster: &ProviderCluster,
    settings: &Settings,
    mut problems: Vec<(String, String)>,
    mut report: Report,
) -> Plan {
    let url = cluster.api_server_url.as_deref().unwrap_or("(no URL)");
    let version = cluster
        .master_version
        .as_deref()
        .unwrap_or(&cluster.kube_version);
    finish_operations(&mut report, cluster, url, version);
    warn_version_drift(&mut report, view, cluster);

    let mut call = converge_version(&mut report, view, cluster, version, &mut problems);
    converge_addons(&mut report, view, cluster, &mut problems, &mut call);
    let requeue = if cluster
        .addons
        .iter()
        .any(|a| matches!(a.state, AddonState::Installing | AddonState::Removing))
        || call.is_some()
    {
        settings.poll_interval
    } else {
        settings.resync_interval
    };
    if let Some(failed) = cluster
        .addons
        .iter()
        .find(|a| a.state == AddonState::Failed)
    {
        problems.push((
            REASON_ADDON_FAILED.to_owned(),
            format!(
                "addon {} {} failed: {}",
                failed.name,
                failed.version,
                failed.message.as_deref().unwrap_or("no reason given")
            ),
        ));
    }

    if call.is_none() || report.status.phase != Some(Phase::Upgrading) {
        report.status.phase = Some(Phase::Ready);
    }
    report.set(
        READY,
        Status::True,
        REASON_CLUSTER_READY,
        &format!(
            "cluster {} serves at {url}, Kubernetes {version}",
            cluster.id
        ),
    );
    report.degraded(problems.into_iter().next());
    report.plan(call, Some(requeue))
}

/// Provisioning and upgrading that the running cluster shows done: their conditions turn
/// False (with an Event) and their durations are recorded.
fn finish_operations(report: &mut Report, cluster: &ProviderCluster, url: &str, version: &str) {
    if report.is_true(PROVISIONING) {
        if let Some(secs) = report.held_for(PROVISIONING) {
            report.finished.push((OP_CREATE, secs));
        }
        report.transition(
            PROVISIONING,
            Status::False,
            REASON_PROVISIONED,
            &format!(
                "cluster {} serves at {url}, Kubernetes {version}",
                cluster.id
            ),
            Some((false, REASON_PROVISIONED)),
        );
    } else {
        // Provisioned long ago: still so for this generation (an upgrade's, say); found by the
        // chaos test, whose invariant wants every condition to describe the current generation.
        report.refresh(PROVISIONING);
    }
    if report.is_true(UPGRADING) {
        if let Some(secs) = report.held_for(UPGRADING) {
            report.finished.push((OP_UPGRADE, secs));
        }
        report.transition(
            UPGRADING,
            Status::False,
            REASON_UP_TO_DATE,
            &format!("cluster {} runs Kubernetes {version}", cluster.id),
            Some((false, REASON_UPGRADED)),
        );
    }
}

/// `progress` of a long operation, or a default text.
fn progress(cluster: &ProviderCluster, doing: &str) -> String {
    match &cluster.progress {
        Some(p) => format!("cluster {} is {doing}: {p}", cluster.id),
        None => format!("cluster {} is {doing}", cluster.id),
    }
}

/// The spec fields that cannot change once the cluster exists, and differ from it.
fn immutable_changes(view: &ClusterView, cluster: &ProviderCluster) -> Vec<String> {
    let mut out = Vec::new();
    let pairs = [
        ("spec.type", &view.spec.type_, &cluster.type_),
        ("spec.env", &view.spec.env, &cluster.env),
        ("spec.osVersion", &view.spec.os_version, &cluster.os_version),
    ];
    for (field, spec, actual) in pairs {
        if spec != actual {
            out.push(format!("{field} ({actual} → {spec})"));
        }
    }
    out
}

/// Copies what the provider reports into the status: id, URL, version and each addon's state
/// (declared addons the provider does not have are `Missing`).
fn record_cluster(
    status: &mut KubernetesClusterStatus,
    cluster: &ProviderCluster,
    provider: &str,
    view: &ClusterView,
) {
    status.cluster_id = Some(cluster.id.clone());
    status.provider = Some(provider.to_owned());
    status.api_server_url = cluster.api_server_url.clone();
    status.master_version = cluster.master_version.clone();
    status.kube_version = Some(cluster.kube_version.clone());
    status.kubeconfig_secret = cluster
        .kubeconfig
        .as_ref()
        .map(|_| super::model::kubeconfig_secret_name(&view.name));
    let mut addons: Vec<AddonStatus> = cluster
        .addons
        .iter()
        .map(|a| AddonStatus {
            name: a.name.clone(),
            version: a.version.clone(),
            state: addon_state(a.state).to_owned(),
            message: a.message.clone(),
        })
        .collect();
    for declared in &view.spec.addons {
        if !addons.iter().any(|a| a.name == declared.name) {
            addons.push(AddonStatus {
                name: declared.name.clone(),
                version: declared.version.clone(),
                state: "Missing".into(),
                message: None,
            });
        }
    }
    addons.sort_by(|a, b| a.name.cmp(&b.name));
    status.addons = addons;
}

#[cfg(test)]
mod tests;
