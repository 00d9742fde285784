//! What the status vault controller observes (lean views: metadata and a hash of the status,
//! never whole objects) and the names it shares with other operators.

use std::collections::BTreeMap;

use vigil_apis::status_backup_policy::{ResourceKind, StatusBackupPolicySpec};

/// Set on an object whose status Vigil restored: the capture time of the record it came from.
pub const RESTORED_FROM_ANNOTATION: &str = "vigil.dev/status-restored-from";
/// The convention for other operators: manifests kept in git carry
/// `vigil.dev/restore-status: pending`; Vigil sets it to `done` once it restored the status (or
/// found nothing to restore). Operators skip objects while it says `pending`.
pub const RESTORE_STATUS_ANNOTATION: &str = "vigil.dev/restore-status";
pub const RESTORE_PENDING: &str = "pending";
pub const RESTORE_DONE: &str = "done";
/// Versions kept per object when a policy names no retention.
pub const DEFAULT_RETENTION: u32 = 10;

/// Operator-wide settings (flags of `vigil run`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Backend of policies that name none (`--status-vault-location`).
    pub default_location: String,
    /// Encryption key file of that default backend (`--status-vault-key-file`).
    pub default_key_file: Option<String>,
}

/// One backend as policies name it: the vault is opened once per location.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BackendRef {
    pub location: String,
    pub key_file: Option<String>,
}

/// A StatusBackupPolicy as the decisions see it.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyView {
    pub name: String,
    pub generation: Option<i64>,
    pub spec: StatusBackupPolicySpec,
}

/// A watched object as the lean cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectView {
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// Hash of the status (see [`super::decide::status_hash`]); `None`: empty status.
    pub status_hash: Option<u64>,
}

/// How a kind resolved through API discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resolution {
    /// Served, with a status subresource: watched.
    Watching {
        resource: String,
        api_version: String,
        namespaced: bool,
    },
    /// No such kind in the group (or no such group).
    NotFound(String),
    /// The kind exists but has no `/status`: its status cannot be written back.
    NoStatusSubresource { resource: String },
    /// Discovery itself failed (API errors): retried.
    Failed(String),
}

impl Resolution {
    /// The `state` string of the policy's status and condition reasons.
    pub fn state(&self) -> &'static str {
        match self {
            Self::Watching { .. } => "Watching",
            Self::NotFound(_) => "KindNotFound",
            Self::NoStatusSubresource { .. } => "NoStatusSubresource",
            Self::Failed(_) => "DiscoveryFailed",
        }
    }
}

/// The kind of a vault key, as policies name it.
pub fn resource_kind(group: &str, kind: &str) -> ResourceKind {
    ResourceKind {
        group: group.to_owned(),
        kind: kind.to_owned(),
    }
}

/// How the backend of a policy is doing, as captures and checks saw it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BackendHealth {
    /// The last error, while the backend fails; `None` when the last attempt succeeded.
    pub error: Option<String>,
    /// When a record was last written (RFC 3339).
    pub last_capture: Option<String>,
    /// Captures waiting for the backend.
    pub pending: usize,
}
