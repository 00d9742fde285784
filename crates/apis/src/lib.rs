//! Vigil's custom resource types. CRDs are generated from them (`CustomResourceExt::crd()`), so
//! the Rust types, the schema the API server enforces and `vigil manifests` never disagree;
//! [`crds`] adds the deprecated versions still served.
//! No I/O lives here.

pub mod conditions;
pub mod configmap_sync;
pub mod crds;
pub mod critical_service;
pub mod kafka_topic;
pub mod kubernetes_cluster;
mod rules;
pub mod status_backup_policy;

pub use conditions::HasConditions;
pub use configmap_sync::{ConfigMapSync, ConfigMapSyncSpec, ConfigMapSyncStatus};
pub use critical_service::{CriticalService, CriticalServiceSpec, CriticalServiceStatus};
pub use kafka_topic::{Topic, TopicSpec, TopicStatus};
pub use kubernetes_cluster::{KubernetesCluster, KubernetesClusterSpec, KubernetesClusterStatus};
pub use status_backup_policy::{
    StatusBackupPolicy, StatusBackupPolicySpec, StatusBackupPolicyStatus,
};
