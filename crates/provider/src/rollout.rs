//! Whether an addon's Deployment is available: the judgment `kubectl rollout status` makes
//! (kubectl v1.28's `DeploymentStatusViewer`), as a pure function of the Deployment.

use k8s_openapi::api::apps::v1::Deployment;

/// The `Progressing` condition's reason once `progressDeadlineSeconds` passed without progress.
const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";

/// Where a Deployment's rollout is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rollout {
    /// Every replica of the current template is updated and available, no old one is left.
    Available,
    /// Still rolling out; the text says what it waits for.
    Progressing(String),
    /// The Deployment controller gave up (its progress deadline passed).
    Failed(String),
}

/// Reads the Deployment's status as `kubectl rollout status` does.
pub fn rollout(deployment: &Deployment) -> Rollout {
    let status = deployment.status.clone().unwrap_or_default();
    let observed = status.observed_generation.unwrap_or(0);
    if deployment.metadata.generation.unwrap_or(0) > observed {
        return Rollout::Progressing(
            "waiting for the Deployment controller to observe the new spec".into(),
        );
    }
    if let Some(deadline) = status.conditions.iter().flatten().find(|c| {
        c.type_ == "Progressing" && c.reason.as_deref() == Some(PROGRESS_DEADLINE_EXCEEDED)
    }) {
        return Rollout::Failed(format!(
            "the rollout exceeded its progress deadline: {}",
            deadline.message.as_deref().unwrap_or("no message")
        ));
    }
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let updated = status.updated_replicas.unwrap_or(0);
    let replicas = status.replicas.unwrap_or(0);
    let available = status.available_replicas.unwrap_or(0);
    if updated < wanted {
        return Rollout::Progressing(format!(
            "{updated} of {wanted} replicas updated to the current template"
        ));
    }
    if replicas > updated {
        return Rollout::Progressing(format!(
            "{} old replicas pending termination",
            replicas - updated
        ));
    }
    if available < updated {
        return Rollout::Progressing(format!("{available} of {updated} replicas available"));
    }
    Rollout::Available
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn deployment(generation: i64, status: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "metadata": {"name": "coredns", "generation": generation},
            "spec": {"replicas": 2, "selector": {}, "template": {}},
            "status": status,
        }))
        .expect("a Deployment")
    }

    #[test]
    fn a_spec_not_yet_observed_is_progressing() {
        let d = deployment(
            2,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
        );
        assert!(matches!(rollout(&d), Rollout::Progressing(m) if m.contains("observe")));
    }

    #[test]
    fn each_missing_step_is_named() {
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1}),
        );
        assert_eq!(
            rollout(&d),
            Rollout::Progressing("1 of 2 replicas updated to the current template".into())
        );
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "replicas": 3, "updatedReplicas": 2, "availableReplicas": 2}),
        );
        assert_eq!(
            rollout(&d),
            Rollout::Progressing("1 old replicas pending termination".into())
        );
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 1}),
        );
        assert_eq!(
            rollout(&d),
            Rollout::Progressing("1 of 2 replicas available".into())
        );
    }

    #[test]
    fn rolled_out_is_available_and_a_passed_deadline_is_failed() {
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 2}),
        );
        assert_eq!(rollout(&d), Rollout::Available);
        let d = deployment(
            1,
            json!({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 2, "availableReplicas": 0,
                   "conditions": [{"type": "Progressing", "status": "False",
                                   "reason": "ProgressDeadlineExceeded",
                                   "message": "ReplicaSet \"coredns-1\" has timed out progressing."}]}),
        );
        assert!(matches!(rollout(&d), Rollout::Failed(m) if m.contains("timed out")));
    }
}
