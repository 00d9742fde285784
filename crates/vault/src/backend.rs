//! The storage interface every backend implements: numbered, immutable versions of opaque bytes
//! per object key. What the bytes mean (JSON, envelopes), de-duplication and retention live in
//! [`crate::Vault`], once for all backends.

use crate::{Error, ObjectKey};

/// One stored version of one object's record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoredVersion {
    pub version: u64,
    /// Size in the backend, envelope included.
    pub bytes: u64,
}

/// A place to keep records. Writes of one version must be all-or-nothing: after a crash a
/// version either exists whole or not at all.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + std::fmt::Debug {
    /// Where the vault is, for messages (`/var/lib/vigil/vault`, `s3://bucket/prefix`).
    fn location(&self) -> &str;
    /// The object's stored versions, oldest first.
    async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error>;
    /// The bytes of one version.
    async fn read(&self, key: &ObjectKey, version: u64) -> Result<Vec<u8>, Error>;
    /// Stores a new version atomically.
    async fn write(&self, key: &ObjectKey, version: u64, bytes: Vec<u8>) -> Result<(), Error>;
    /// Removes one version (retention).
    async fn remove(&self, key: &ObjectKey, version: u64) -> Result<(), Error>;
    /// Every object with at least one version.
    async fn keys(&self) -> Result<Vec<ObjectKey>, Error>;
    /// Whether the backend is reachable and writable.
    async fn check(&self) -> Result<(), Error>;
}
