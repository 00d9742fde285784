//! What the KubernetesCluster controller observes and what its pure decision returns.

use std::hash::{Hash as _, Hasher as _};
use std::time::Duration;

use vigil_apis::KubernetesCluster;
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

/// What a change of a KubernetesCluster must alter to start a reconcile (a kube-runtime
/// predicate: equal hashes, no reconcile): everything but the status the controller writes
/// itself. Without it, each status write of a pass (a provisioning progress that moved, say)
/// came back as a watch event and started the next pass at once, so a cluster in a long
/// operation was asked as fast as the provider answered instead of every poll interval — the
/// requeue paces those passes. Of the status, only what someone else may set counts: the
/// clusterID and provider (the status vault's restore, or a person clearing it to provision
/// anew).
pub fn reconcile_trigger(cluster: &KubernetesCluster) -> Option<u64> {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    let meta = &cluster.metadata;
    meta.uid.hash(&mut hasher);
    meta.generation.hash(&mut hasher);
    meta.finalizers.hash(&mut hasher);
    meta.deletion_timestamp
        .as_ref()
        .map(|t| t.0.as_millisecond())
        .hash(&mut hasher);
    meta.labels.hash(&mut hasher);
    meta.annotations.hash(&mut hasher);
    // The spec too, not only the generation: a server that does not bump it still triggers.
    serde_json::to_string(&cluster.spec).ok().hash(&mut hasher);
    let status = cluster.status.as_ref();
    status
        .and_then(|s| s.cluster_id.as_deref())
        .hash(&mut hasher);
    status.and_then(|s| s.provider.as_deref()).hash(&mut hasher);
    Some(hasher.finish())
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
    /// The operator's provider for a spec that names none (`hosted` in a cluster).
    pub default_provider: String,
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
    /// changed `spec.provider`, or a new operator default, cannot move it), else the spec's, else
    /// the operator's default.
    pub fn provider_name(&self) -> &str {
        self.status
            .as_ref()
            .filter(|s| s.cluster_id.is_some())
            .and_then(|s| s.provider.as_deref())
            .or_else(|| self.spec.provider.as_ref().map(|p| p.name.as_str()))
            .unwrap_or(&self.default_provider)
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
    /// Not asked (the provider is unknown, or the object is paused).
    NotAsked,
    /// No cluster for this object (by id, or by identity when no id is known).
    Absent,
    Found(&'a ProviderCluster),
    /// The provider did not answer: the error.
    Unavailable(&'a str),
}

/// What the provider answered to a request.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer<'a> {
    /// Done or under way: the cluster as the provider now reports it.
    Accepted(&'a ProviderCluster),
    /// Refused: the provider's reason and message.
    Rejected { reason: &'a str, message: &'a str },
    /// No answer: the error.
    Unavailable(&'a str),
}

/// A reconcile's first decision, and the provider's answer to its request.
#[derive(Debug, Clone, PartialEq)]
pub struct Answered<'a> {
    pub first: &'a Plan,
    pub answer: Answer<'a>,
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
pub use vigil_runtime::events::EventNote;

/// What to do for one KubernetesCluster.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// At most one provider request.
    pub call: Option<Call>,
    /// The status to hold (written only if it differs from the object's).
    pub status: KubernetesClusterStatus,
    /// The kubeconfig the provider reports, for the kubeconfig Secret (written only if the
    /// Secret holds another).
    pub kubeconfig: Option<String>,
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
    /// Finding the cluster failed: the provider did not answer (the error).
    Unavailable(String),
}

/// What the provider answered to a delete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteAnswer {
    Gone,
    InProgress(Option<String>),
    /// Refused: the provider's reason and message.
    Refused(String, String),
    /// No answer: the error.
    Unavailable(String),
}

/// The deletion decision: the step, the status and Events that report it, and when to look
/// again.
#[derive(Debug, Clone, PartialEq)]
pub struct DeletionPlan {
    pub step: DeletionStep,
    pub status: KubernetesClusterStatus,
    pub events: Vec<EventNote>,
    /// When to look again; `None`: on the next change.
    pub requeue: Option<Duration>,
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use vigil_apis::KubernetesCluster;
    use vigil_apis::kubernetes_cluster::Phase;

    use super::{FINALIZER, reconcile_trigger};

    fn cluster() -> KubernetesCluster {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "vigil.dev/v1alpha1", "kind": "KubernetesCluster",
            "metadata": {"name": "c", "namespace": "ns", "uid": "u1", "generation": 1},
            "spec": {"type": "iks", "env": "test", "kubeVersion": "1.28",
                "osVersion": "UBUNTU_20_64",
                "product": {"name": "p", "shortName": "p", "uuid": {"value": "x"}}},
            "status": {"clusterID": "rc-1", "provider": "bank", "phase": "Provisioning"}
        }))
        .expect("a KubernetesCluster")
    }

    #[test]
    fn the_controllers_own_status_writes_start_no_reconcile() {
        let before = cluster();
        let mut after = before.clone();
        let status = after.status.as_mut().expect("status");
        status.phase = Some(Phase::Ready);
        status.master_version = Some("1.28.0".into());
        status.api_server_url = Some("https://rc-1.example".into());
        after.metadata.resource_version = Some("42".into());
        assert_eq!(reconcile_trigger(&before), reconcile_trigger(&after));
    }

    /// A change made to the object, named in the failure message.
    type Change = fn(&mut KubernetesCluster);

    #[test]
    fn spec_metadata_and_the_clusters_identity_in_status_start_one() {
        let base = cluster();
        let changes: [(&str, Change); 8] = [
            ("spec", |c| c.spec.kube_version = "1.29".into()),
            ("generation", |c| c.metadata.generation = Some(2)),
            ("finalizer", |c| {
                c.metadata.finalizers = Some(vec![FINALIZER.to_owned()]);
            }),
            ("deletion", |c| {
                c.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
            }),
            ("annotation", |c| {
                c.metadata.annotations = Some([("a".to_owned(), "b".to_owned())].into());
            }),
            ("clusterID cleared", |c| {
                if let Some(s) = c.status.as_mut() {
                    s.cluster_id = None;
                }
            }),
            ("status restored elsewhere", |c| {
                if let Some(s) = c.status.as_mut() {
                    s.provider = Some("other".into());
                }
            }),
            ("re-created", |c| c.metadata.uid = Some("u2".into())),
        ];
        for (what, change) in changes {
            let mut changed = base.clone();
            change(&mut changed);
            assert_ne!(
                reconcile_trigger(&base),
                reconcile_trigger(&changed),
                "{what} must start a reconcile"
            );
        }
    }
}
