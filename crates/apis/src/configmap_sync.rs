//! `ConfigMapSync` (`apps.bixbite.io/v1`, namespaced, short name `cms`): keeps copies of one
//! ConfigMap in other namespaces. Compatible with the Kubebuilder tutorial's types: the JSON names
//! `sourceNamespace`, `destinationNamespace`, `configMapName` and `status.lastSyncTime`. The three
//! spec fields are required, so the tutorial's sample manifest (which capitalises them,
//! `SourceNamespace`) is rejected with a 422 naming them instead of being pruned into a no-op.
//! The other fields are Vigil's extensions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// An RFC 1123 DNS label (what a namespace name must be).
/// What `kubectl apply` prints when the source's namespace is named as a destination (the
/// controller's `InvalidDestination`, refused at the door).
pub const SOURCE_AS_DESTINATION_MESSAGE: &str = "the source's own namespace cannot be a \
     destination: a ConfigMap cannot be copied onto itself; name other namespaces \
     (InvalidDestination)";

/// The same, when the source's namespace is in `destinationNamespaces`.
pub const SOURCE_LISTED_MESSAGE: &str = "destinationNamespaces lists the source's own \
     namespace: a ConfigMap cannot be copied onto itself; remove it from the list \
     (InvalidDestination)";

pub const DNS_LABEL_PATTERN: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// An RFC 1123 DNS subdomain (what a ConfigMap name must be).
pub const DNS_SUBDOMAIN_PATTERN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Desired state of a ConfigMapSync.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[kube(
    group = "apps.bixbite.io",
    version = "v1",
    kind = "ConfigMapSync",
    plural = "configmapsyncs",
    singular = "configmapsync",
    shortname = "cms",
    namespaced,
    status = "ConfigMapSyncStatus",
    printcolumn = r#"{"name":"Source","type":"string","jsonPath":".spec.sourceNamespace"}"#,
    printcolumn = r#"{"name":"ConfigMap","type":"string","jsonPath":".spec.configMapName"}"#,
    printcolumn = r#"{"name":"Destinations","type":"integer","jsonPath":".status.destinationCount"}"#,
    printcolumn = r#"{"name":"Synced","type":"integer","jsonPath":".status.synced"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Last Sync","type":"date","jsonPath":".status.lastSyncTime"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
// The rule with a fieldPath comes last: kube-apiserver 1.28 reports the rules after a failed one
// under its fieldPath too (see docs/sandbox.md).
#[x_kube(
    validation = Rule::new("!has(self.destinationNamespaces) || !(self.sourceNamespace in self.destinationNamespaces)")
        .message(SOURCE_LISTED_MESSAGE),
    validation = Rule::new("self.destinationNamespace != self.sourceNamespace")
        .message(SOURCE_AS_DESTINATION_MESSAGE)
        .field_path(".destinationNamespace"),
)]
pub struct ConfigMapSyncSpec {
    /// Namespace of the source ConfigMap.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub source_namespace: String,
    /// The tutorial's single destination namespace; always a destination.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN))]
    pub destination_namespace: String,
    /// Name of the source ConfigMap, and of every copy.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS_SUBDOMAIN_PATTERN))]
    pub config_map_name: String,
    /// More destination namespaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 1000), inner(length(min = 1, max = 63), regex(pattern = DNS_LABEL_PATTERN)))]
    pub destination_namespaces: Vec<String>,
    /// Every namespace whose labels match is a destination too, including namespaces created
    /// later; a namespace that stops matching loses its copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = crate::rules::label_selector())]
    pub namespace_selector: Option<LabelSelector>,
    /// What happens to the copies when this ConfigMapSync is deleted: `Delete` (default) or
    /// `Orphan` (left in place).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// What happens to the copies while the source ConfigMap does not exist: `Keep` (default:
    /// consumers keep their last configuration) or `Delete`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_deleted_policy: Option<SourceDeletedPolicy>,
    /// Whether a ConfigMap of the same name that already exists at a destination, and that no
    /// ConfigMapSync manages, may be taken over and overwritten. Default false: that destination
    /// reports `Conflict` and is left alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt_existing: Option<bool>,
    /// What is copied: `ConfigMap` (default) or `Secret` (only when the operator runs with
    /// `--configmapsync-secrets`, which needs Secret permissions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<SyncedKind>,
}

/// The kind of object a ConfigMapSync copies.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SyncedKind {
    #[default]
    ConfigMap,
    Secret,
}

/// What happens to the copies when the ConfigMapSync is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// The copies are deleted.
    #[default]
    Delete,
    /// The copies stay, unmanaged from then on.
    Orphan,
}

/// What happens to the copies while the source does not exist.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum SourceDeletedPolicy {
    /// The copies keep the source's last content.
    #[default]
    Keep,
    /// The copies are deleted (and re-created when the source comes back).
    Delete,
}

impl ConfigMapSyncSpec {
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }

    pub fn source_deleted_policy(&self) -> SourceDeletedPolicy {
        self.source_deleted_policy.unwrap_or_default()
    }

    pub fn adopt_existing(&self) -> bool {
        self.adopt_existing.unwrap_or(false)
    }

    pub fn kind(&self) -> SyncedKind {
        self.kind.unwrap_or_default()
    }
}

/// Observed state of a ConfigMapSync.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapSyncStatus {
    /// When a copy was last written (the tutorial's field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (every destination holds an up-to-date copy) and `Degraded` (something keeps
    /// Vigil from syncing: missing source, missing consent, conflicts, API errors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Content hash of the source (`sha256:` + hex) when it was last read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_hash: Option<String>,
    /// One entry per destination namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<DestinationStatus>,
    /// Number of destinations.
    #[serde(default)]
    pub destination_count: u32,
    /// Destinations holding an up-to-date copy.
    #[serde(default)]
    pub synced: u32,
}

/// One destination and its copy.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DestinationStatus {
    pub namespace: String,
    pub state: DestinationState,
    /// Content hash of the copy Vigil last wrote or found up to date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_hash: Option<String>,
    /// When Vigil last wrote this copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_sync_time: Option<Time>,
    /// Why the destination is not synced.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// State of one destination.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum DestinationState {
    /// The copy matches the source.
    Synced,
    /// A ConfigMap Vigil may not overwrite holds the name (unmanaged without adoption, or another
    /// ConfigMapSync's copy).
    Conflict,
    /// The namespace does not consent to copies from this ConfigMapSync's namespace.
    NotPermitted,
    /// The namespace does not exist.
    NamespaceNotFound,
    /// The source is missing or unreadable; an existing copy keeps its content.
    Stale,
    /// The destination is the source itself.
    Invalid,
    /// Writing the copy failed; retried with backoff.
    Failed,
}

impl DestinationState {
    /// The label value in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Synced => "Synced",
            Self::Conflict => "Conflict",
            Self::NotPermitted => "NotPermitted",
            Self::NamespaceNotFound => "NamespaceNotFound",
            Self::Stale => "Stale",
            Self::Invalid => "Invalid",
            Self::Failed => "Failed",
        }
    }

    pub const ALL: [Self; 7] = [
        Self::Synced,
        Self::Conflict,
        Self::NotPermitted,
        Self::NamespaceNotFound,
        Self::Stale,
        Self::Invalid,
        Self::Failed,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    /// The tutorial's example with the Go types' JSON field names.
    const TUTORIAL_CR: &str = "apiVersion: apps.bixbite.io/v1
kind: ConfigMapSync
metadata:
  name: configmapsync-sample
spec:
  sourceNamespace: source
  destinationNamespace: destination
  configMapName: app-config
";

    #[test]
    fn crd_matches_the_tutorials_names_and_scope() {
        let crd = ConfigMapSync::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("configmapsyncs.apps.bixbite.io")
        );
        assert_eq!(crd.spec.scope, "Namespaced");
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1");
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
        let schema = serde_json::to_value(&version.schema).expect("schema json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["required"],
            serde_json::json!(["configMapName", "destinationNamespace", "sourceNamespace"])
        );
        assert_eq!(
            spec["properties"]["sourceNamespace"]["pattern"],
            DNS_LABEL_PATTERN
        );
        assert_eq!(
            spec["properties"]["destinationNamespaces"]["items"]["pattern"],
            DNS_LABEL_PATTERN
        );
        let status = &schema["openAPIV3Schema"]["properties"]["status"]["properties"];
        assert!(status["lastSyncTime"].is_object(), "{status}");
    }

    #[test]
    fn the_tutorials_example_parses() {
        let cr: ConfigMapSync = serde_saphyr::from_str(TUTORIAL_CR).expect("tutorial manifest");
        assert_eq!(cr.spec.source_namespace, "source");
        assert_eq!(cr.spec.deletion_policy(), DeletionPolicy::Delete);
        assert_eq!(cr.spec.source_deleted_policy(), SourceDeletedPolicy::Keep);
        assert!(!cr.spec.adopt_existing());
        assert_eq!(cr.spec.kind(), SyncedKind::ConfigMap);
    }
}
