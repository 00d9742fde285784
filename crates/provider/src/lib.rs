//! The plug-in boundary between the KubernetesCluster controller and whatever provisions
//! clusters: one trait, [`ClusterProvider`], and the types that cross it.
//!
//! The contract every provider keeps:
//! - **Identity, not ids, decides.** A cluster is created for a [`ClusterIdentity`]
//!   (`product.uuid.value` + the object's name). [`ClusterProvider::create`] is idempotent by
//!   identity: a second create for an identity that already has a cluster returns that cluster,
//!   and [`ClusterProvider::find`] finds it, so a retried create, or one whose answer was lost,
//!   never makes a second cluster.
//! - **Nothing blocks.** Long operations (provisioning, upgrades, addon installs, deletion) are
//!   *started* by a call and *reported* by later calls: [`ProviderCluster::state`] and
//!   [`ProviderCluster::progress`]. A call returns in about one network round trip, so a
//!   controller worker is never held by a cluster that takes minutes to come up.
//! - **State lives with the provider.** Clusters outlive the operator; nothing a provider needs
//!   to find or finish an operation may live only in the operator's memory.
//! - **Errors say whether to retry.** [`ProviderError::Unavailable`] is transient (outage,
//!   timeout: retry with backoff); [`ProviderError::Rejected`] means the request cannot succeed
//!   as it is (unknown addon, unsupported version, a refused delete): report it, do not hammer.

#[cfg(target_os = "linux")]
mod addons;
pub mod catalog;
pub mod contract;
pub mod external;
#[cfg(target_os = "linux")]
pub mod hosted;
pub mod kubeconfig;
#[cfg(target_os = "linux")]
pub mod local;
pub mod protocol;
#[cfg(target_os = "linux")]
mod rollout;

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// Who a cluster belongs to. Providers find clusters by it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct ClusterIdentity {
    /// `spec.product.uuid.value` of the KubernetesCluster.
    pub uuid: String,
    /// `metadata.name` of the KubernetesCluster.
    pub name: String,
}

impl ClusterIdentity {
    /// One string for the identity (`<uuid>/<name>`), e.g. as an idempotency key.
    pub fn key(&self) -> String {
        format!("{}/{}", self.uuid, self.name)
    }
}

impl std::fmt::Display for ClusterIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.key())
    }
}

/// An addon and its version.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Addon {
    pub name: String,
    pub version: String,
}

/// What to create: the identity and the KubernetesCluster's spec as the provider needs it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRequest {
    pub identity: ClusterIdentity,
    /// `spec.type` (e.g. `iks`).
    #[serde(rename = "type")]
    pub type_: String,
    /// `spec.env` (e.g. `test`).
    pub env: String,
    /// `spec.kubeVersion`: `1.28` or `1.28.3`.
    pub kube_version: String,
    /// `spec.osVersion` (e.g. `UBUNTU_20_64`).
    pub os_version: String,
    /// `spec.product.name`.
    pub product_name: String,
    /// `spec.product.shortName`.
    pub product_short_name: String,
    pub addons: Vec<Addon>,
    /// Free-form labels for the provider's own records (the owning object's namespace, …).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
}

/// Where a cluster is in its life, as its provider sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ClusterState {
    /// Being created; `progress` says how far.
    Provisioning,
    /// Up and serving at `api_server_url`.
    Running,
    /// Moving to a new `kube_version`; it may still serve.
    Upgrading,
    /// Being deleted.
    Deleting,
    /// Broken; `message` says why. The provider may or may not recover it on its own.
    Failed,
}

impl ClusterState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Provisioning => "Provisioning",
            Self::Running => "Running",
            Self::Upgrading => "Upgrading",
            Self::Deleting => "Deleting",
            Self::Failed => "Failed",
        }
    }
}

/// Where an addon is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum AddonState {
    Installing,
    Installed,
    Removing,
    Failed,
}

/// One addon as the provider sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddonStatus {
    pub name: String,
    pub version: String,
    pub state: AddonState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A cluster as its provider reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProviderCluster {
    /// The provider's id of the cluster (stable for its life).
    pub id: String,
    pub identity: ClusterIdentity,
    pub state: ClusterState,
    /// How far a long operation got, for humans ("starting the API server").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
    /// The version the cluster runs or is moving to (as requested: `1.28` or `1.28.3`).
    pub kube_version: String,
    /// The version the API server itself reports (`1.28.0`), once it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_version: Option<String>,
    /// The API server's URL, once it serves.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_server_url: Option<String>,
    /// The addons installed, being installed or removed.
    #[serde(default)]
    pub addons: Vec<AddonStatus>,
    /// A kubeconfig that reaches the cluster (credentials: never put it in a status).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<String>,
    /// Why the cluster is `Failed`, or anything else the provider wants said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// `type`, `env` and `osVersion` it was created with (they cannot change afterwards).
    #[serde(rename = "type")]
    pub type_: String,
    pub env: String,
    pub os_version: String,
}

/// How a delete went.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Deletion {
    /// The cluster and everything of it is gone (or never existed).
    Gone,
    /// Deletion runs; ask again. The text says how far.
    InProgress(Option<String>),
}

/// Why a provider call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProviderError {
    /// Transient: the provider is down, slow, or answered garbage. Retry with backoff.
    #[error("provider unavailable: {0}")]
    Unavailable(String),
    /// The request cannot succeed as it is. `reason` is CamelCase (`UnknownAddon`,
    /// `UnsupportedVersion`, `DeleteRefused`, …) and becomes a condition's reason.
    #[error("{reason}: {message}")]
    Rejected { reason: String, message: String },
    /// No cluster with this id.
    #[error("cluster {0} not found")]
    NotFound(String),
}

pub type ProviderResult<T> = Result<T, ProviderError>;

/// A cluster provider: local sandbox processes, the bank's systems over HTTP, …
///
/// Every method returns in about one round trip; see the crate docs for the contract.
#[async_trait::async_trait]
pub trait ClusterProvider: Send + Sync + 'static {
    /// The cluster of this identity, if there is one (in any state but gone).
    async fn find(&self, identity: &ClusterIdentity) -> ProviderResult<Option<ProviderCluster>>;
    /// Starts creating a cluster; idempotent by identity (returns the existing one if any).
    async fn create(&self, request: &ClusterRequest) -> ProviderResult<ProviderCluster>;
    /// The cluster with this id; `None` if it does not exist (any more).
    async fn get(&self, id: &str) -> ProviderResult<Option<ProviderCluster>>;
    /// Starts moving the cluster to `kube_version` (forward only: providers reject downgrades).
    async fn upgrade(&self, id: &str, kube_version: &str) -> ProviderResult<ProviderCluster>;
    /// Starts converging the cluster's addons to exactly `addons` (installs, upgrades, removes).
    async fn set_addons(&self, id: &str, addons: &[Addon]) -> ProviderResult<ProviderCluster>;
    /// Starts deleting the cluster, or reports how far deletion got; `Gone` once nothing is left.
    /// Deleting a cluster that does not exist is `Gone`.
    async fn delete(&self, id: &str) -> ProviderResult<Deletion>;
}

/// The providers an operator knows, by the name a KubernetesCluster's `spec.provider.name` uses.
#[derive(Clone, Default)]
pub struct Providers {
    by_name: BTreeMap<String, Arc<dyn ClusterProvider>>,
    /// The provider of a cluster whose spec names none (`None`: the controller's own default).
    default: Option<String>,
}

impl std::fmt::Debug for Providers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.by_name.keys()).finish()
    }
}

impl Providers {
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `provider` under `name` (replacing any provider of that name).
    pub fn insert(&mut self, name: impl Into<String>, provider: Arc<dyn ClusterProvider>) {
        self.by_name.insert(name.into(), provider);
    }

    pub fn get(&self, name: &str) -> Option<Arc<dyn ClusterProvider>> {
        self.by_name.get(name).cloned()
    }

    /// Makes `name` the provider of clusters whose spec names none.
    pub fn set_default(&mut self, name: impl Into<String>) {
        self.default = Some(name.into());
    }

    /// The provider of clusters whose spec names none, if set.
    pub fn default_name(&self) -> Option<&str> {
        self.default.as_deref()
    }

    /// The registered names, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.by_name.keys().map(String::as_str)
    }
}

/// Compares Kubernetes versions `major.minor[.patch]` (a missing patch counts as 0); `None` if
/// either does not parse.
pub fn compare_versions(a: &str, b: &str) -> Option<std::cmp::Ordering> {
    Some(parse_version(a)?.cmp(&parse_version(b)?))
}

/// `1.28` → `(1, 28, 0)`; `v1.28.3` → `(1, 28, 3)`; anything else → `None`.
pub fn parse_version(text: &str) -> Option<(u32, u32, u32)> {
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = match parts.next() {
        Some(p) => p.parse().ok()?,
        None => 0,
    };
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering;

    #[test]
    fn versions_compare_numerically_and_a_missing_patch_is_zero() {
        assert_eq!(compare_versions("1.28", "1.28.0"), Some(Ordering::Equal));
        assert_eq!(compare_versions("1.9", "1.28"), Some(Ordering::Less));
        assert_eq!(compare_versions("v1.29.1", "1.29"), Some(Ordering::Greater));
        assert_eq!(compare_versions("1.x", "1.28"), None);
        assert_eq!(parse_version("1.28.3.4"), None);
    }

    #[test]
    fn identity_key_names_uuid_then_name() {
        let id = ClusterIdentity {
            uuid: "aaa692e5-e6ce-4f19-ad20-6491ca74067c".into(),
            name: "my-custom-cluster-for-backup".into(),
        };
        assert_eq!(
            id.key(),
            "aaa692e5-e6ce-4f19-ad20-6491ca74067c/my-custom-cluster-for-backup"
        );
    }
}
