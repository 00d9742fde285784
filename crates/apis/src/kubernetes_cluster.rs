//! `KubernetesCluster` (`vigil.dev/v1`, namespaced, short name `kc`; `v1alpha1` is still served,
//! deprecated, with the same schema: see [`crate::crds`]): a Kubernetes cluster
//! provisioned through a provider plug-in. The spec is the article's, unchanged (`type`, `env`,
//! `kubeVersion`, `osVersion`, `product.{name, shortName, uuid.value}`, `addons[].{name,
//! version}`), plus what production needs: `paused`, `deletionPolicy` and a `provider`
//! reference. The status keeps the article's `apiServerURL` and `masterVersion` — state the
//! status vault saves, so deleting and re-applying the object from git never provisions a
//! second cluster.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::Rule;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `major.minor` or `major.minor.patch`, without a leading `v` (`1.28`, `1.28.3`).
pub const KUBE_VERSION_PATTERN: &str = r"^[0-9]+\.[0-9]+(\.[0-9]+)?$";
/// An addon's version: dotted numbers, optionally `v`-prefixed, with an optional suffix
/// (`1.2.2`, `5.2`, `v1.14.0-rc.1`).
pub const ADDON_VERSION_PATTERN: &str = r"^v?[0-9]+(\.[0-9]+)*([-+][0-9A-Za-z.-]+)?$";
/// A UUID in its canonical textual form.
pub const UUID_PATTERN: &str =
    r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$";
/// An RFC 1123 DNS label.
pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// The article's manifest, its status included (the API server drops it on create), with only
/// its `apiVersion` line changed: what the demo applies and the tests prove works unchanged.
/// It stays `v1alpha1`, as written then: the deprecated version keeps serving it.
pub const ARTICLE_MANIFEST: &str = r#"apiVersion: vigil.dev/v1alpha1
kind: KubernetesCluster
metadata:
  name: my-custom-cluster-for-backup
spec:
  type: iks
  env: test
  kubeVersion: "1.28"
  osVersion: UBUNTU_20_64
  product:
    name: this is my solo experiment
    shortName: experiment
    uuid:
      value: aaa692e5-e6ce-4f19-ad20-6491ca74067c
  addons:
  - name: cluster-autoscaler
    version: "1.2.2"
  - name: vpc-block-csi-driver
    version: "5.2"
status:
  apiServerURL: https://my-private-endpoint.tld
  masterVersion: 1.28.23
"#;

/// The provider used when `spec.provider` is absent.
/// What `kubectl apply` prints when an identity field of a KubernetesCluster changes (the
/// controller's `ImmutableFieldChanged`, refused at the door).
pub fn immutable(field: &str) -> String {
    format!(
        "{field} cannot change once the cluster exists: set it back, or declare a new \
         KubernetesCluster (ImmutableFieldChanged)"
    )
}

/// `spec.kubeVersion` only goes forward (`DowngradeRefused`): `major.minor[.patch]` compared as
/// numbers, a missing patch being 0, as the controller compares them. Values the pattern
/// refuses are left to the pattern's own error.
fn no_downgrade() -> Rule {
    const VERSION: &str = "'^[0-9]+\\\\.[0-9]+(\\\\.[0-9]+)?$'";
    let part = |side: &str, i: usize| format!("int({side}.split('.')[{i}])");
    let patch = |side: &str| format!("({side}.split('.').size() > 2 ? {} : 0)", part(side, 2));
    let rule = format!(
        "!self.matches({VERSION}) || !oldSelf.matches({VERSION}) || {n0} > {o0} || ({n0} == {o0} \
         && ({n1} > {o1} || ({n1} == {o1} && {np} >= {op})))",
        n0 = part("self", 0),
        o0 = part("oldSelf", 0),
        n1 = part("self", 1),
        o1 = part("oldSelf", 1),
        np = patch("self"),
        op = patch("oldSelf"),
    );
    Rule::new(rule).message(kube::core::Message::Expression(
        "'kubeVersion ' + self + ' is older than ' + oldSelf + ': Kubernetes clusters cannot be \
         downgraded; set it back to ' + oldSelf + ' or later (DowngradeRefused)'"
            .to_owned(),
    ))
}

pub const DEFAULT_PROVIDER: &str = "local";

/// Desired state of a KubernetesCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "vigil.dev",
    version = "v1",
    kind = "KubernetesCluster",
    plural = "kubernetesclusters",
    singular = "kubernetescluster",
    shortname = "kc",
    namespaced,
    status = "KubernetesClusterStatus",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Version","type":"string","jsonPath":".status.masterVersion"}"#,
    printcolumn = r#"{"name":"URL","type":"string","jsonPath":".status.apiServerURL"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesClusterSpec {
    /// The kind of cluster the provider builds (the article's `iks`).
    #[serde(rename = "type")]
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message(immutable("type").as_str()))]
    pub type_: String,
    /// The environment (`test`, `prod`, …).
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    #[x_kube(validation = Rule::new("self == oldSelf").message(immutable("env").as_str()))]
    pub env: String,
    /// The Kubernetes version, `major.minor` or `major.minor.patch` (`"1.28"`). Raising it
    /// upgrades the cluster; lowering it is refused (a `Degraded` condition says so).
    #[schemars(length(min = 3, max = 32), regex(pattern = KUBE_VERSION_PATTERN))]
    #[x_kube(validation = no_downgrade())]
    pub kube_version: String,
    /// The nodes' operating system image (`UBUNTU_20_64`).
    #[schemars(
        length(min = 1, max = 128),
        regex(pattern = r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    )]
    #[x_kube(validation = Rule::new("self == oldSelf").message(immutable("osVersion").as_str()))]
    pub os_version: String,
    /// The product the cluster serves; `uuid.value` and the object's name are the cluster's
    /// identity at the provider.
    pub product: Product,
    /// Addons to install, each name at most once.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64), extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub addons: Vec<Addon>,
    /// While true, Vigil makes no call to the provider for this cluster (not even to delete it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// What deleting this object does to the cluster: `Delete` (default) or `Orphan` (the
    /// cluster is left running; re-applying the object adopts it again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// The provider that provisions the cluster; absent: the operator's `local` provider.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderRef>,
}

impl KubernetesClusterSpec {
    pub fn paused(&self) -> bool {
        self.paused.unwrap_or(false)
    }

    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }

    /// The name of the provider to use.
    pub fn provider_name(&self) -> &str {
        self.provider
            .as_ref()
            .map_or(DEFAULT_PROVIDER, |p| p.name.as_str())
    }
}

/// The article's `product`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Product {
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub short_name: String,
    pub uuid: ProductUuid,
}

/// The article's `product.uuid`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ProductUuid {
    #[schemars(regex(pattern = UUID_PATTERN))]
    pub value: String,
}

/// One addon of the cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema)]
pub struct Addon {
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
    #[schemars(length(min = 1, max = 64), regex(pattern = ADDON_VERSION_PATTERN))]
    pub version: String,
}

/// What deleting a KubernetesCluster does to its cluster.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// The cluster is deleted at the provider before the object goes.
    #[default]
    Delete,
    /// The cluster is left running.
    Orphan,
}

/// A provider known to the operator (`vigil run --cluster-provider NAME=…`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct ProviderRef {
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub name: String,
}

/// Where a cluster is in its life.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub enum Phase {
    /// Nothing asked of the provider yet (waiting for a restore, paused, or a bad spec).
    Pending,
    Provisioning,
    Ready,
    Upgrading,
    /// The provider reports the cluster broken, or it vanished.
    Failed,
    Deleting,
}

impl Phase {
    pub const ALL: [Phase; 6] = [
        Phase::Pending,
        Phase::Provisioning,
        Phase::Ready,
        Phase::Upgrading,
        Phase::Failed,
        Phase::Deleting,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Provisioning => "Provisioning",
            Self::Ready => "Ready",
            Self::Upgrading => "Upgrading",
            Self::Failed => "Failed",
            Self::Deleting => "Deleting",
        }
    }
}

/// Observed state of a KubernetesCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubernetesClusterStatus {
    /// The article's API server URL.
    #[serde(
        rename = "apiServerURL",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub api_server_url: Option<String>,
    /// The article's master version: what the cluster's API server reports (`1.28.0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub master_version: Option<String>,
    /// The provider holding the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provider: Option<String>,
    /// The provider's id of the cluster: once set, the cluster is always looked up by it.
    #[serde(rename = "clusterID", default, skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// The Kubernetes version the provider was last asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kube_version: Option<String>,
    /// Each addon's state at the provider.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub addons: Vec<AddonStatus>,
    /// The Secret holding the cluster's kubeconfig (key `value`, Cluster API's convention).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubeconfig_secret: Option<String>,
    /// The last request the provider refused; not repeated until the spec changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rejection: Option<Rejection>,
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready`, `Provisioning`, `Upgrading`, `AddonsReady`, `Degraded`, `Deleting` (and `Paused`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// One addon's state.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct AddonStatus {
    pub name: String,
    pub version: String,
    /// `Installing`, `Installed`, `Removing`, `Failed` or `Missing` (declared, not at the
    /// provider).
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// A request the provider refused (an unknown addon, an unsupported version, …).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Rejection {
    /// `Create`, `Upgrade`, `SetAddons` or `Delete`.
    pub operation: String,
    /// The provider's CamelCase reason (`UnknownAddon`).
    pub reason: String,
    pub message: String,
    /// The generation whose spec was refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
