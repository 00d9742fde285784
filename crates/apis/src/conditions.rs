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
    fn an_object_without_status_has_no_conditions() {
        let cr = CriticalService::new("a", Default::default());
        assert!(cr.conditions().is_empty());
    }
}
