//! What the KubernetesCluster controller observes and what its pure decision returns.

use std::time::Duration;

use vigil_apis::kubernetes_cluster::{KubernetesClusterSpec, KubernetesClusterStatus};
use vigil_provider::{Addon, ClusterIdentity, ClusterRequest, ProviderCluster};

/// Held until the cluster is deleted at the provider (or orphaned). Added before the first
/// provider call, so no create ever happens for an object that could vanish without cleanup.
pub const FINALIZER: &str = "vigil.dev/kubernetescluster";
/// Label on the kubeconfig Secret naming its cluster (Cluster API's).
pub const CLUSTER_NAME_LABEL: &str = "cluster.x-k8s.io/cluster-name";
/// Label on every kubeconfig Secret Vigil writes: the (label-selected) watch of them.
pub const KUBECONFIG_LABEL: &str = "vigil.dev/kubeconfig";
/// Annotation holding the hash of the kubeconfig a Secret was written with (the cache drops
/// the data itself).
pub const KUBECONFIG_HASH_ANNOTATION: &str = "vigil.dev/kubeconfig-hash";
/// Key of the kubeconfig in the Secret (Cluster API's).
pub const KUBECONFIG_KEY: &str = "value";
/// Type of the kubeconfig Secret (Cluster API's).
pub const KUBECONFIG_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";

/// The name of a cluster's kubeconfig Secret (Cluster API's convention).
pub fn kubeconfig_secret_name(cluster_name: &str) -> String {
    format!("{cluster_name}-kubeconfig")
}

/// Operator settings the decision needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// How often a cluster in a long operation is asked how far it got.
    pub poll_interval: Duration,
    /// How often a settled cluster is compared with its provider (drift detection).
    pub resync_interval: Duration,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            poll_interval: Duration::from_secs(2),
            resync_interval: Duration::from_secs(60),
        }
    }
}

/// A KubernetesCluster as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterView {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub spec: KubernetesClusterSpec,
    pub status: Option<KubernetesClusterStatus>,
}

impl ClusterView {
    /// The identity the provider knows the cluster by.
    pub fn identity(&self) -> ClusterIdentity {
        ClusterIdentity {
            uuid: self.spec.product.uuid.value.clone(),
            name: self.name.clone(),
        }
    }

    /// The provider's id, once known.
    pub fn cluster_id(&self) -> Option<&str> {
        self.status.as_ref()?.cluster_id.as_deref()
    }

    /// The provider holding the cluster: the one recorded in status once a cluster exists (a
    /// changed `spec.provider` cannot move it), else the spec's.
    pub fn provider_name(&self) -> &str {
        self.status
            .as_ref()
            .filter(|s| s.cluster_id.is_some())
            .and_then(|s| s.provider.as_deref())
            .unwrap_or_else(|| self.spec.provider_name())
    }

    /// The addons the spec declares, sorted by name.
    pub fn desired_addons(&self) -> Vec<Addon> {
        let mut addons: Vec<Addon> = self
            .spec
            .addons
            .iter()
            .map(|a| Addon {
                name: a.name.clone(),
                version: a.version.clone(),
            })
            .collect();
        addons.sort();
        addons
    }

    /// What to ask the provider to create.
    pub fn request(&self) -> ClusterRequest {
        ClusterRequest {
            identity: self.identity(),
            type_: self.spec.type_.clone(),
            env: self.spec.env.clone(),
            kube_version: self.spec.kube_version.clone(),
            os_version: self.spec.os_version.clone(),
            product_name: self.spec.product.name.clone(),
            product_short_name: self.spec.product.short_name.clone(),
            addons: self.desired_addons(),
            labels: [("namespace".to_owned(), self.namespace.clone())].into(),
        }
    }
}

/// What the provider said of the cluster this pass.
#[derive(Debug, Clone, PartialEq)]
pub enum Observed<'a> {
    /// Not asked (the provider is unknown).
    NotAsked,
    /// No cluster for this object (by id, or by identity when no id is known).
    Absent,
    Found(&'a ProviderCluster),
}

/// A provider request the decision asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Call {
    Create(ClusterRequest),
    Upgrade { id: String, kube_version: String },
    SetAddons { id: String, addons: Vec<Addon> },
}

impl Call {
    /// The operation's name, as in `status.rejection.operation` and metrics.
    pub fn operation(&self) -> &'static str {
        match self {
            Self::Create(_) => OP_CREATE,
            Self::Upgrade { .. } => OP_UPGRADE,
            Self::SetAddons { .. } => OP_SET_ADDONS,
        }
    }
}

pub const OP_CREATE: &str = "Create";
pub const OP_UPGRADE: &str = "Upgrade";
pub const OP_SET_ADDONS: &str = "SetAddons";
pub const OP_DELETE: &str = "Delete";

/// An Event to record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    pub warning: bool,
    pub reason: String,
    pub note: String,
}

impl EventNote {
    pub fn normal(reason: &str, note: impl Into<String>) -> Self {
        Self {
            warning: false,
            reason: reason.to_owned(),
            note: note.into(),
        }
    }

    pub fn warning(reason: &str, note: impl Into<String>) -> Self {
        Self {
            warning: true,
            reason: reason.to_owned(),
            note: note.into(),
        }
    }
}

/// What to do for one KubernetesCluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// At most one provider request.
    pub call: Option<Call>,
    /// The status to hold (written only if it differs from the object's).
    pub status: KubernetesClusterStatus,
    pub events: Vec<EventNote>,
    /// When to look again; `None`: on the next change.
    pub requeue: Option<Duration>,
    /// Operations that just finished (`Create`, `Upgrade`), with their duration in seconds.
    pub finished: Vec<(&'static str, f64)>,
}

/// What a pass over a KubernetesCluster being deleted does at the provider.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionStep {
    /// Ask the provider to delete the cluster with this id.
    Delete(String),
    /// Nothing (more) to do at the provider: remove the finalizer.
    Release,
    /// Wait (paused, or the provider is unknown): the status says why.
    Wait,
}

/// The cluster a deletion is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeletionTarget {
    /// The provider is unknown to the operator (or was not asked: paused, orphaned).
    ProviderUnknown,
    /// No cluster at the provider for this object.
    Absent,
    /// The provider's id of the cluster.
    Cluster(String),
}

/// What the provider answered to a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteAnswer {
    Gone,
    InProgress(Option<String>),
    /// Refused: the provider's reason and message.
    Refused(String, String),
}

/// The deletion decision: the step, and the status and Events that report it.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletionPlan {
    pub step: DeletionStep,
    pub status: KubernetesClusterStatus,
    pub events: Vec<EventNote>,
}
