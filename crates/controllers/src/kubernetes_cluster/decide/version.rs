//! The cluster's Kubernetes version: upgrades forward only, and a version that moved outside
//! Vigil reported as drift.

use super::*;

/// The server's version moved with no upgrade of Vigil's under way: changed outside Vigil.
pub(super) fn warn_version_drift(
    report: &mut Report,
    view: &ClusterView,
    cluster: &ProviderCluster,
) {
    let previous_version = view
        .status
        .as_ref()
        .and_then(|s| s.master_version.as_deref());
    let upgrading_before = view
        .status
        .as_ref()
        .is_some_and(|s| conditions::is_true(&s.conditions, UPGRADING));
    if let (Some(before), Some(now)) = (previous_version, cluster.master_version.as_deref())
        && before != now
        && !upgrading_before
    {
        report.event(EventNote::warning(
            REASON_DRIFT_DETECTED,
            format!(
                "cluster {} now reports Kubernetes {now}, was {before}, with no upgrade by Vigil",
                cluster.id
            ),
        ));
    }
}

/// The upgrade to ask for when the spec wants a newer Kubernetes (unless refused); an older
/// or incomparable one is a problem, never a downgrade.
pub(super) fn converge_version(
    report: &mut Report,
    view: &ClusterView,
    cluster: &ProviderCluster,
    version: &str,
    problems: &mut Vec<(String, String)>,
) -> Option<Call> {
    match compare_versions(&view.spec.kube_version, &cluster.kube_version) {
        Some(Ordering::Greater) => match rejection_for(&report.status, OP_UPGRADE) {
            Some(r) => problems.push((r.reason.clone(), r.message.clone())),
            None => {
                let message = format!(
                    "upgrading cluster {} from Kubernetes {} to {}",
                    cluster.id, cluster.kube_version, view.spec.kube_version
                );
                report.status.phase = Some(Phase::Upgrading);
                report.transition(
                    UPGRADING,
                    Status::True,
                    REASON_UPGRADING,
                    &message,
                    Some((false, REASON_UPGRADING)),
                );
                return Some(Call::Upgrade {
                    id: cluster.id.clone(),
                    kube_version: view.spec.kube_version.clone(),
                });
            }
        },
        Some(Ordering::Less) => problems.push((
            REASON_DOWNGRADE_REFUSED.to_owned(),
            format!(
                "spec.kubeVersion {} is older than the cluster's {}: Kubernetes clusters cannot \
                 be downgraded; set it back to {} or later",
                view.spec.kube_version, cluster.kube_version, cluster.kube_version
            ),
        )),
        Some(Ordering::Equal) => {
            if report.status.phase != Some(Phase::Upgrading) {
                report.set(
                    UPGRADING,
                    Status::False,
                    REASON_UP_TO_DATE,
                    &format!("cluster {} runs Kubernetes {version}", cluster.id),
                );
            }
        }
        None => problems.push((
            REASON_DOWNGRADE_REFUSED.to_owned(),
            format!(
                "cannot compare spec.kubeVersion {} with the cluster's {}",
                view.spec.kube_version, cluster.kube_version
            ),
        )),
    }
    None
}
