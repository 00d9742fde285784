//! The deletion state machine: find the cluster, ask the provider to delete it (or orphan it),
//! wait until it is gone, then let the finalizer go.

use super::*;

/// How a deletion finds the cluster it deletes at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionLookup {
    /// No need to ask: this is the target.
    Known(DeletionTarget),
    /// Find the cluster by the object's identity (no id is known: a create whose answer was
    /// lost, or an object re-applied without status).
    FindByIdentity,
}

/// What the provider must tell before a deletion is decided (`provider_known`: the operator
/// knows the object's provider). Orphaned and paused objects never ask.
pub fn deletion_lookup(view: &ClusterView, provider_known: bool) -> DeletionLookup {
    if !asks_provider_to_delete(view) || !provider_known {
        return DeletionLookup::Known(DeletionTarget::ProviderUnknown);
    }
    match view.cluster_id() {
        Some(id) => DeletionLookup::Known(DeletionTarget::Cluster(id.to_owned())),
        None => DeletionLookup::FindByIdentity,
    }
}

/// Whether deleting the object means deleting its cluster at the provider now.
pub fn asks_provider_to_delete(view: &ClusterView) -> bool {
    view.spec.deletion_policy() == DeletionPolicy::Delete && !view.spec.paused()
}

/// Everything the deletion decision reads.
#[derive(Debug, Clone)]
pub struct DeletionInputs<'a> {
    pub cluster: &'a ClusterView,
    /// The cluster to delete: by id, or found by identity when no id is known (a create whose
    /// answer was lost).
    pub target: DeletionTarget,
    /// The first decision of this reconcile and what the provider answered to its delete;
    /// `None` on the first decision.
    pub answered: Option<(&'a DeletionPlan, &'a DeleteAnswer)>,
    pub settings: &'a Settings,
    pub now: Timestamp,
}

/// Decides a pass over a KubernetesCluster being deleted: orphan it, wait, ask the provider to
/// delete the cluster, or — once the provider says it is gone — release the finalizer.
pub fn decide_deletion(inputs: &DeletionInputs<'_>) -> DeletionPlan {
    let Some((first, answer)) = inputs.answered else {
        return decide_deletion_pass(inputs, inputs.cluster, None);
    };
    // Where the first decision left the object: its status, as if written.
    let mut after = inputs.cluster.clone();
    after.status = Some(first.status.clone());
    let mut plan = decide_deletion_pass(inputs, &after, Some(answer));
    plan.events.splice(0..0, first.events.iter().cloned());
    plan
}

pub(super) fn decide_deletion_pass(
    inputs: &DeletionInputs<'_>,
    view: &ClusterView,
    answer: Option<&DeleteAnswer>,
) -> DeletionPlan {
    // While the provider holds the cluster, look again every poll interval.
    let polls = asks_provider_to_delete(view) && inputs.target != DeletionTarget::ProviderUnknown;
    let plan = |report: Report, step| {
        let requeue = match step {
            DeletionStep::Release => None,
            DeletionStep::Delete(_) | DeletionStep::Wait => {
                polls.then_some(inputs.settings.poll_interval)
            }
        };
        DeletionPlan {
            step,
            status: report.status,
            events: report.events,
            requeue,
        }
    };
    if let Some(error) = unavailable_error(&inputs.target, answer) {
        let (status, events) = provider_unavailable(view, error, inputs.now);
        return DeletionPlan {
            step: DeletionStep::Wait,
            status,
            events,
            requeue: None,
        };
    }
    let mut report = Report::new(view, inputs.now);
    let provider = view.provider_name().to_owned();
    report.status.phase = Some(Phase::Deleting);

    if view.spec.deletion_policy() == DeletionPolicy::Orphan {
        let what = view
            .cluster_id()
            .map_or_else(|| "no cluster".to_owned(), |id| format!("cluster {id}"));
        report.event(EventNote::normal(
            REASON_ORPHANED,
            format!("deletionPolicy is Orphan: {what} left at provider {provider}"),
        ));
        return plan(report, DeletionStep::Release);
    }
    if view.spec.paused() {
        report.set(
            DELETING,
            Status::True,
            REASON_DELETE_WAITS,
            "deletion waits: spec.paused is true, so Vigil makes no call to the provider",
        );
        return plan(report, DeletionStep::Wait);
    }
    let id = match (&inputs.target, answer) {
        (_, Some(DeleteAnswer::Gone)) | (DeletionTarget::Absent, _) => {
            record_gone(&mut report, view, &provider);
            return plan(report, DeletionStep::Release);
        }
        (DeletionTarget::ProviderUnknown, _) => {
            let message = format!(
                "deletion waits: the operator knows no provider named {provider:?}, so the \
                 cluster cannot be deleted"
            );
            report.set(DELETING, Status::True, REASON_PROVIDER_UNKNOWN, &message);
            report.degraded(Some((REASON_PROVIDER_UNKNOWN.to_owned(), message)));
            return plan(report, DeletionStep::Wait);
        }
        (DeletionTarget::Cluster(id), _) => id.clone(),
        // Handled above.
        (DeletionTarget::Unavailable(_), _) => return plan(report, DeletionStep::Wait),
    };
    let step = deletion_step(&mut report, id, &provider, answer);
    plan(report, step)
}

/// The provider's error when it did not answer the lookup or the delete.
pub(super) fn unavailable_error<'a>(
    target: &'a DeletionTarget,
    answer: Option<&'a DeleteAnswer>,
) -> Option<&'a str> {
    match (target, answer) {
        (_, Some(DeleteAnswer::Unavailable(error))) | (DeletionTarget::Unavailable(error), _) => {
            Some(error)
        }
        _ => None,
    }
}

/// The cluster is gone at the provider: say so, and let the last status name no cluster.
pub(super) fn record_gone(report: &mut Report, view: &ClusterView, provider: &str) {
    report.set(
        DELETING,
        Status::True,
        REASON_DELETED,
        &format!("the cluster is gone at provider {provider}"),
    );
    report.event(EventNote::normal(
        REASON_DELETED,
        format!(
            "{} deleted at provider {provider}",
            view.cluster_id()
                .map_or_else(|| "the cluster".to_owned(), |id| format!("cluster {id}"))
        ),
    ));
    // The last status names no cluster any more: the status vault keeps it in the object's
    // tombstone, and an object re-applied under the same name gets it back — with the id of a
    // deleted cluster it would fail as `ClusterNotFound` instead of provisioning a new one
    // (found by the chaos test, crates/vigil/tests/chaos).
    report.status.cluster_id = None;
    report.status.api_server_url = None;
    report.status.master_version = None;
}

/// Cluster `id` still exists at the provider: ask it to delete, or wait on the deletion it
/// answered (in progress, or refused).
pub(super) fn deletion_step(
    report: &mut Report,
    id: String,
    provider: &str,
    answer: Option<&DeleteAnswer>,
) -> DeletionStep {
    match answer {
        None | Some(DeleteAnswer::Gone) => {
            let message = format!("deleting cluster {id} at provider {provider}");
            report.transition(
                DELETING,
                Status::True,
                REASON_DELETING,
                &message,
                Some((false, REASON_DELETING)),
            );
            DeletionStep::Delete(id)
        }
        Some(DeleteAnswer::InProgress(progress)) => {
            let message = match progress {
                Some(p) => format!("deleting cluster {id}: {p}"),
                None => format!("deleting cluster {id}"),
            };
            report.set(DELETING, Status::True, REASON_DELETING, &message);
            DeletionStep::Wait
        }
        Some(DeleteAnswer::Refused(reason, message)) => {
            let message = format!(
                "provider {provider} refuses to delete cluster {id}: {message}; the finalizer \
                 stays until it agrees (or set deletionPolicy: Orphan)"
            );
            report.set(DELETING, Status::True, reason, &message);
            report.degraded(Some((reason.clone(), message)));
            DeletionStep::Wait
        }
        // Handled by the caller.
        Some(DeleteAnswer::Unavailable(_)) => DeletionStep::Wait,
    }
}

/// The provider did not answer: `Degraded` says so (with a Warning Event when it starts); the
/// rest of the status stays as it was.
pub fn provider_unavailable(
    view: &ClusterView,
    error: &str,
    now: Timestamp,
) -> (KubernetesClusterStatus, Vec<EventNote>) {
    let mut report = Report::new(view, now);
    let message = format!(
        "provider {} does not answer: {error}; retrying with backoff",
        view.provider_name()
    );
    report.degraded(Some((REASON_PROVIDER_UNAVAILABLE.to_owned(), message)));
    (report.status, report.events)
}
