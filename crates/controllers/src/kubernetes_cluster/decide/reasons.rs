//! The condition types and reasons the KubernetesCluster controller writes (conditions and
//! Events): one list, so a dashboard or a test can name them.

/// Condition types (`Ready` and `Degraded` are the runtime's, shared by every controller).
pub use vigil_runtime::conditions::{DEGRADED, READY};
pub const PROVISIONING: &str = "Provisioning";
pub const UPGRADING: &str = "Upgrading";
pub const DELETING: &str = "Deleting";
pub const PAUSED: &str = "Paused";
/// Every declared addon is installed and available in the cluster (and no other is left).
pub const ADDONS_READY: &str = "AddonsReady";

/// Reasons (conditions and Events).
pub const REASON_CREATING: &str = "Creating";
pub const REASON_PROVISIONING: &str = "Provisioning";
pub const REASON_PROVISIONED: &str = "Provisioned";
pub const REASON_ADOPTED: &str = "Adopted";
pub const REASON_CLUSTER_READY: &str = "ClusterReady";
pub const REASON_UPGRADING: &str = "Upgrading";
pub const REASON_UPGRADED: &str = "Upgraded";
pub const REASON_UP_TO_DATE: &str = "UpToDate";
pub const REASON_AS_EXPECTED: &str = "AsExpected";
pub const REASON_DOWNGRADE_REFUSED: &str = "DowngradeRefused";
pub const REASON_IMMUTABLE_FIELD_CHANGED: &str = "ImmutableFieldChanged";
pub const REASON_IDENTITY_MISMATCH: &str = "IdentityMismatch";
pub const REASON_CLUSTER_NOT_FOUND: &str = "ClusterNotFound";
pub const REASON_CLUSTER_FAILED: &str = "ClusterFailed";
pub const REASON_ADDON_FAILED: &str = "AddonFailed";
pub const REASON_CONVERGING_ADDONS: &str = "ConvergingAddons";
pub const REASON_ADDONS_READY: &str = "AddonsReady";
pub const REASON_ADDONS_PROGRESSING: &str = "AddonsProgressing";
pub const REASON_DRIFT_DETECTED: &str = "DriftDetected";
pub const REASON_PROVIDER_UNKNOWN: &str = "ProviderUnknown";
pub const REASON_PROVIDER_UNAVAILABLE: &str = "ProviderUnavailable";
pub const REASON_DELETING_AT_PROVIDER: &str = "DeletingAtProvider";
pub const REASON_PAUSED: &str = "Paused";
pub const REASON_RESUMED: &str = "Resumed";
pub const REASON_DELETING: &str = "Deleting";
pub const REASON_DELETED: &str = "Deleted";
pub const REASON_ORPHANED: &str = "Orphaned";
pub const REASON_DELETE_WAITS: &str = "DeletionWaits";
