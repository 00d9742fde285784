//! `StatusBackupPolicy` (`vigil.dev/v1`, cluster-scoped, short name `sbp`): which objects' status
//! the status vault keeps — kinds (any CRD or built-in with a status subresource), namespaces,
//! labels — where it keeps it, how many versions, and whether Vigil restores it by itself when an
//! object comes back (`OnCreate`) or only on request (`Manual`, through `vigil status restore`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What to protect, where, and how to restore it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "vigil.dev",
    version = "v1",
    kind = "StatusBackupPolicy",
    plural = "statusbackuppolicies",
    singular = "statusbackuppolicy",
    shortname = "sbp",
    status = "StatusBackupPolicyStatus",
    printcolumn = r#"{"name":"Mode","type":"string","jsonPath":".spec.restoreMode"}"#,
    printcolumn = r#"{"name":"Covered","type":"integer","jsonPath":".status.objectsCovered"}"#,
    printcolumn = r#"{"name":"Backend","type":"string","jsonPath":".status.backend.state"}"#,
    printcolumn = r#"{"name":"Last capture","type":"date","jsonPath":".status.lastCapture"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct StatusBackupPolicySpec {
    /// Kinds whose status is kept, e.g. `{kind: Service}` or
    /// `{group: infra.example.com, kind: KubernetesCluster}`.
    #[schemars(length(min = 1, max = 64))]
    pub resources: Vec<ResourceKind>,
    /// Namespaces covered; empty (and no `namespaceSelector`): every namespace. Cluster-scoped
    /// objects are covered whatever the namespaces say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1024))]
    pub namespaces: Vec<String>,
    /// Namespaces covered, by their labels (in addition to `namespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = crate::rules::label_selector())]
    pub namespace_selector: Option<LabelSelector>,
    /// Only objects with these labels; absent: every object of the kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = crate::rules::label_selector())]
    pub selector: Option<LabelSelector>,
    /// Where the records go; absent: the operator's default (`--status-vault-location`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// Versions kept per object (the oldest go first); absent: 10.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 10000))]
    pub retention: Option<u32>,
    /// `OnCreate` (default): when a covered object re-appears with an empty status, Vigil restores
    /// the status it kept. `Manual`: only `vigil status restore` does.
    #[serde(default)]
    pub restore_mode: RestoreMode,
}

/// A kind by API group and name.
#[derive(
    Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
pub struct ResourceKind {
    /// API group; empty or absent for the core group (`Service`, `ConfigMap`, …).
    #[serde(default)]
    #[schemars(
        length(max = 253),
        regex(pattern = r"^$|^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
    )]
    pub group: String,
    /// The kind, as in `kind:` of a manifest (`KubernetesCluster`).
    #[schemars(length(min = 1, max = 63), regex(pattern = r"^[A-Za-z][A-Za-z0-9]*$"))]
    pub kind: String,
}

/// Where records are kept.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Backend {
    /// A directory inside the operator's container (`/var/lib/vigil/status-vault`) or an
    /// S3-compatible bucket (`s3://bucket/prefix`).
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^(/.*|s3://[^/?]+.*)$"))]
    pub location: String,
    /// Path of a file holding a 32-byte AES-256-GCM key (raw or base64) inside the operator's
    /// container, typically a Secret mounted as a volume; absent: records are stored in clear.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 1024), regex(pattern = r"^/"))]
    pub encryption_key_file: Option<String>,
}

/// When kept status goes back to a re-created object.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum RestoreMode {
    /// Automatically, as soon as the object re-appears with an empty status.
    #[default]
    OnCreate,
    /// Only through `vigil status restore`.
    Manual,
}

/// Observed state of a StatusBackupPolicy.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StatusBackupPolicyStatus {
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (every kind resolved and watched, the backend answers) and `Degraded` (a kind that
    /// does not exist or has no status subresource, or a backend that fails).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Objects the policy covers right now.
    #[serde(default)]
    pub objects_covered: u32,
    /// When a status of a covered object was last written to the backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_capture: Option<Time>,
    /// Captures waiting for the backend (non-zero while it is unavailable).
    #[serde(default)]
    pub pending_captures: u32,
    /// How the backend answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<BackendStatus>,
    /// How each kind resolved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub resources: Vec<ResourceState>,
}

/// The backend's health.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct BackendStatus {
    pub location: String,
    /// `Available` or `Unavailable`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// How one kind of the policy resolved through API discovery.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ResourceState {
    #[serde(default)]
    pub group: String,
    pub kind: String,
    /// The resource (plural) once resolved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<String>,
    /// `Watching`, `KindNotFound`, `NoStatusSubresource` or `DiscoveryFailed`.
    pub state: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    const POLICY: &str = "apiVersion: vigil.dev/v1
kind: StatusBackupPolicy
metadata:
  name: clusters
spec:
  resources:
    - group: infra.example.com
      kind: KubernetesCluster
    - kind: Service
  namespaces: [argocd]
  retention: 20
";

    #[test]
    fn crd_is_cluster_scoped_with_status_and_validation() {
        let crd = StatusBackupPolicy::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("statusbackuppolicies.vigil.dev")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let schema = serde_json::to_value(&version.schema).expect("schema");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(spec["required"], serde_json::json!(["resources"]));
        assert_eq!(spec["properties"]["resources"]["minItems"], 1);
        assert_eq!(
            spec["properties"]["restoreMode"]["enum"],
            serde_json::json!(["OnCreate", "Manual"])
        );
        assert!(spec["properties"]["retention"]["minimum"].is_number());
        let location = &spec["properties"]["backend"]["properties"]["location"]["pattern"];
        let pattern = location.as_str().expect("location pattern");
        assert!(pattern.starts_with("^(/"), "{pattern}");
    }

    #[test]
    fn a_policy_parses_with_defaults() {
        let p: StatusBackupPolicy = serde_saphyr::from_str(POLICY).expect("policy");
        assert_eq!(p.spec.restore_mode, RestoreMode::OnCreate);
        assert_eq!(p.spec.resources[1].group, "");
        assert_eq!(p.spec.retention, Some(20));
        assert!(p.spec.backend.is_none());
    }
}
