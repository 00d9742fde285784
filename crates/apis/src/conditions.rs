//! Where each of Vigil's objects keeps its status conditions, so code that handles any of them
//! (the runtime's quarantine, which sets `Degraded`) reads them without a closure per kind.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use crate::{ConfigMapSync, CriticalService, KubernetesCluster, StatusBackupPolicy, Topic};

/// An object with `status.conditions`.
pub trait HasConditions {
    /// The object's status conditions (none before its first status).
    fn conditions(&self) -> &[Condition];
}

macro_rules! status_conditions {
    ($($kind:ty),*) => {$(
        impl HasConditions for $kind {
            fn conditions(&self) -> &[Condition] {
                self.status.as_ref().map_or(&[], |status| &status.conditions)
            }
        }
    )*};
}

status_conditions!(
    ConfigMapSync,
    CriticalService,
    KubernetesCluster,
    StatusBackupPolicy,
    Topic
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_read_from_the_status() {
        let mut cr: CriticalService = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "a"}, "spec": {"matchLabels": []}}),
        )
        .expect("a CriticalService");
        assert!(cr.conditions().is_empty(), "no status, no conditions");
        cr.status = Some(
            serde_json::from_value(serde_json::json!({
                "conditions": [{"type": "Ready", "status": "True", "reason": "R", "message": "",
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}]
            }))
            .expect("a status"),
        );
        assert_eq!(cr.conditions()[0].type_, "Ready");
    }
}
