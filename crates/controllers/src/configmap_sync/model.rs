//! What the ConfigMapSync controller observes (lean views built from its caches) and what its
//! pure decision returns. A cached ConfigMap keeps metadata and a content hash, never its data:
//! a cluster's ConfigMaps can weigh gigabytes, their hashes do not.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::jiff::Timestamp;
use vigil_apis::configmap_sync::{ConfigMapSyncSpec, ConfigMapSyncStatus};

/// Label on everything Vigil creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "vigil";
/// Label on every copy, so `kubectl get cm -A -l configmapsync.apps.bixbite.io/copy` lists them.
pub const COPY_LABEL: &str = "configmapsync.apps.bixbite.io/copy";
/// Annotation naming the ConfigMapSync (`namespace/name`) a copy belongs to.
pub const OWNER_ANNOTATION: &str = "configmapsync.apps.bixbite.io/owner";
/// Annotation naming the source (`namespace/name`) of a copy.
pub const SOURCE_ANNOTATION: &str = "configmapsync.apps.bixbite.io/source";
/// Annotation holding the content hash a copy was written with.
pub const CONTENT_HASH_ANNOTATION: &str = "configmapsync.apps.bixbite.io/content-hash";
/// Source consent: an annotation on the source ConfigMap listing the namespaces whose
/// ConfigMapSyncs may read it (comma-separated), or `*`.
pub const SHAREABLE_WITH_ANNOTATION: &str = "configmapsync.apps.bixbite.io/shareable-with";
/// Destination consent: a label `accept-from.configmapsync.apps.bixbite.io/<namespace>: "true"`
/// on a namespace accepts copies written for ConfigMapSyncs of `<namespace>`.
pub const ACCEPT_FROM_LABEL_PREFIX: &str = "accept-from.configmapsync.apps.bixbite.io/";
/// Destination consent for every namespace's ConfigMapSyncs: this label set to `"true"`.
pub const ACCEPT_FROM_ANY_LABEL: &str = "configmapsync.apps.bixbite.io/accept-from-any";
/// The finalizer that lets a deleted ConfigMapSync remove its copies first (ownerReferences
/// cannot point across namespaces).
pub const FINALIZER: &str = "configmapsync.apps.bixbite.io/finalizer";
/// Largest source copied: the API server's limit on a ConfigMap's data.
pub const MAX_SOURCE_BYTES: usize = 1024 * 1024;

/// Operator settings the decision needs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Settings {
    /// `--configmapsync-trust-all`: every ConfigMapSync author is trusted, no consent needed.
    pub trust_all: bool,
    /// `--configmapsync-secrets`: ConfigMapSyncs of `kind: Secret` copy Secrets (the operator
    /// then watches Secrets and needs their permissions).
    pub secrets: bool,
}

/// A ConfigMap (or, for `kind: Secret`, a Secret) as the lean cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMapView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub resource_version: Option<String>,
    pub labels: BTreeMap<String, String>,
    /// The ConfigMapSync (`namespace/name`) whose copy this is, when Vigil manages it.
    pub owner: Option<String>,
    /// `sha256:…` of data, binaryData and immutability as observed.
    pub content_hash: String,
    /// Bytes of keys and values.
    pub size: usize,
    pub immutable: bool,
    /// The source-consent annotation, when present.
    pub shareable_with: Option<String>,
    pub terminating: bool,
}

/// A namespace as the lean cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceView {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub terminating: bool,
}

/// A ConfigMapSync as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncView {
    pub namespace: String,
    pub name: String,
    pub generation: Option<i64>,
    pub spec: ConfigMapSyncSpec,
    pub status: Option<ConfigMapSyncStatus>,
}

impl SyncView {
    /// `namespace/name`, as copies' owner annotation spells it.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Everything one decision for one ConfigMapSync reads.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub sync: &'a SyncView,
    /// The source ConfigMap, if it exists.
    pub source: Option<&'a ConfigMapView>,
    /// Every namespace, by name.
    pub namespaces: &'a BTreeMap<String, NamespaceView>,
    /// ConfigMaps named like the source in any namespace, and every copy this ConfigMapSync owns
    /// (whatever its name).
    pub config_maps: &'a [ConfigMapView],
    /// Every existing ConfigMapSync (`namespace/name`), to tell another's copy from an orphan.
    pub live_syncs: &'a BTreeSet<String>,
    pub now: Timestamp,
    pub settings: &'a Settings,
}

/// A Kubernetes Event to record about the ConfigMapSync.
pub use vigil_runtime::events::EventNote;

/// How a copy is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteKind {
    Create,
    /// Replace the existing object (PUT), guarded by its resourceVersion; `labels` are the
    /// existing labels to keep.
    Update {
        resource_version: Option<String>,
        labels: BTreeMap<String, String>,
    },
    /// An immutable ConfigMap cannot be updated: delete it (uid precondition) and create it.
    Recreate {
        uid: String,
    },
}

/// A copy to write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyWrite {
    pub namespace: String,
    pub kind: WriteKind,
}

/// A copy to delete, with the uid it must still have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CopyRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// What to do for one ConfigMapSync.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The full status to write (written only if it differs from the current one).
    pub status: ConfigMapSyncStatus,
    /// Copies to write, with the source's content (read once at apply time).
    pub writes: Vec<CopyWrite>,
    pub deletes: Vec<CopyRef>,
    pub events: Vec<EventNote>,
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed")]
    Api(#[from] kube::Error),
    /// Some copies could not be written: `message` names every failed destination (the
    /// quarantine's condition reads it), `source` is the first failure.
    #[error("{message}")]
    Copies {
        message: String,
        #[source]
        source: kube::Error,
    },
}
