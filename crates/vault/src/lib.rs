//! The status vault: versioned records of Kubernetes objects' `status`, kept outside the cluster
//! so that an object deleted and re-applied from git (or a rebuilt cluster) can get its status
//! back. Used by `vigil status backup|restore|history|show` and by `vigil run`'s capture and
//! restore controller.
//!
//! ```no_run
//! # async fn t() -> Result<(), vigil_vault::Error> {
//! use vigil_vault::{Vault, VaultOptions};
//! let vault = Vault::open("/var/lib/vigil/vault", VaultOptions::default()).await?;
//! // or Vault::open("s3://bucket/prefix?endpoint=http://127.0.0.1:9000", …)
//! # let record: vigil_vault::Record = todo!();
//! vault.save(&record).await?;            // Written { version } or Unchanged
//! let latest = vault.latest(&record.key()).await?;
//! # Ok(()) }
//! ```
//!
//! - Records are addressed by [`ObjectKey`] (group, kind, namespace, name), not by uid, and kept
//!   as numbered versions; [`VaultOptions::retention`] versions per object are kept (0: all).
//! - [`Vault::save`] writes nothing when the newest record already has the same uid, status and
//!   deleted flag (and no new manifest), so capturing the same state twice — say after a crash —
//!   never makes a second version.
//! - A deletion is recorded as a tombstone ([`Record::deleted`]); the history stays.
//! - [`Record::object`] optionally holds the object's manifest without server-set fields: the CLI
//!   backup fills it so that a restore can re-create a missing object. Continuous capture may
//!   leave it `None`; to re-create an object, look for the newest record in [`Vault::history`]
//!   that has one.
//! - A record that cannot be read back is [`Error::Corrupt`]: [`Vault::latest`] skips it (logs it
//!   and counts it in [`Vault::corrupt_records`]); it is never returned as data.
//! - With an [`EncryptionKey`], records are sealed with AES-256-GCM; a wrong key is
//!   [`Error::WrongKey`], an encrypted record read without a key [`Error::KeyRequired`].
//!
//! Backends: a local directory (the default; crash-safe writes, see `dir.rs`) and S3-compatible
//! object storage (`s3://bucket/prefix`, see `s3.rs`), behind the [`Backend`] trait.
//! `docs/status-vault.md` describes the layout and formats.

mod backend;
mod crypto;
mod dir;
mod error;
mod layout;
mod record;
mod s3;

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

pub use backend::{Backend, StoredVersion};
pub use crypto::{ENVELOPE_OVERHEAD, EncryptionKey};
pub use dir::DirBackend;
pub use error::Error;
pub use record::{ObjectKey, Record};
pub use s3::S3Backend;

/// Versions kept per object unless told otherwise.
pub const DEFAULT_RETENTION: usize = 10;

/// How a vault keeps records.
#[derive(Debug, Clone)]
pub struct VaultOptions {
    /// Versions kept per object; older ones are pruned after each write. 0 keeps all.
    pub retention: usize,
    /// Encrypt records at rest (and decrypt them on reading).
    pub key: Option<EncryptionKey>,
}

impl Default for VaultOptions {
    fn default() -> Self {
        Self {
            retention: DEFAULT_RETENTION,
            key: None,
        }
    }
}

/// What [`Vault::save`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Saved {
    /// A new version was stored.
    Written { version: u64 },
    /// The newest record already says the same; nothing was written.
    Unchanged,
}

/// What one object's records take in the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StoredSize {
    pub versions: usize,
    /// Bytes of all its versions, as stored (envelopes included).
    pub bytes: u64,
}

/// A handle on a vault; cheap to clone, shareable between tasks.
#[derive(Clone)]
pub struct Vault {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Box<dyn Backend>,
    options: VaultOptions,
    /// One writer per object at a time within this process, so that two saves of the same object
    /// never pick the same version number. Across processes, one writer per vault is assumed (the
    /// operator's leader).
    locks: std::sync::Mutex<HashMap<ObjectKey, Arc<tokio::sync::Mutex<()>>>>,
    corrupt: AtomicU64,
}

impl std::fmt::Debug for Vault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vault")
            .field("location", &self.location())
            .field("retention", &self.inner.options.retention)
            .field("encrypted", &self.inner.options.key.is_some())
            .finish()
    }
}

impl Vault {
    /// Opens the vault at `location`: a directory path (created if missing) or
    /// `s3://bucket/prefix` (see the S3 backend for its settings).
    pub async fn open(location: &str, options: VaultOptions) -> Result<Vault, Error> {
        if location.trim().is_empty() {
            return Err(Error::Location {
                location: location.into(),
                reason: "empty".into(),
            });
        }
        if location.starts_with("s3://") {
            let backend = S3Backend::new(location)?;
            return Ok(Self::with_backend(Box::new(backend), options));
        }
        if let Some((scheme, _)) = location.split_once("://") {
            return Err(Error::Location {
                location: location.into(),
                reason: format!(
                    "unknown scheme {scheme:?}: use a directory path or s3://bucket/prefix"
                ),
            });
        }
        let backend = DirBackend::open(location).await?;
        Ok(Self::with_backend(Box::new(backend), options))
    }

    /// A vault on a backend of the caller's choice.
    pub fn with_backend(backend: Box<dyn Backend>, options: VaultOptions) -> Vault {
        Vault {
            inner: Arc::new(Inner {
                backend,
                options,
                locks: Default::default(),
                corrupt: AtomicU64::new(0),
            }),
        }
    }

    /// Where the vault is, for messages.
    pub fn location(&self) -> &str {
        self.inner.backend.location()
    }

    /// Whether records are encrypted at rest.
    pub fn encrypted(&self) -> bool {
        self.inner.options.key.is_some()
    }

    /// Corrupt records met (and skipped) by this handle so far.
    pub fn corrupt_records(&self) -> u64 {
        self.inner.corrupt.load(Ordering::Relaxed)
    }

    fn lock_for(&self, key: &ObjectKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self
            .inner
            .locks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        locks.entry(key.clone()).or_default().clone()
    }

    /// Stores `record` as the object's newest version, unless the newest readable record
    /// already has the same uid, status and deleted flag (see [`Saved::Unchanged`]). Prunes
    /// versions beyond the retention.
    pub async fn save(&self, record: &Record) -> Result<Saved, Error> {
        if record.kind.is_empty() || record.name.is_empty() || record.api_version.is_empty() {
            return Err(Error::Corrupt {
                what: "record to save".into(),
                reason: "apiVersion, kind and name are required".into(),
            });
        }
        let key = record.key();
        let lock = self.lock_for(&key);
        let _guard = lock.lock().await;
        let backend = &self.inner.backend;
        let versions = backend.versions(&key).await?;
        if let Some((_, newest)) = self.newest_readable(&key, &versions).await?
            && record.same_as(&newest)
        {
            return Ok(Saved::Unchanged);
        }
        let version = versions.last().map_or(1, |v| v.version + 1);
        backend.write(&key, version, self.encode(record)?).await?;
        let retention = self.inner.options.retention;
        let total = versions.len() + 1;
        if retention > 0 && total > retention {
            for old in &versions[..total - retention] {
                if let Err(error) = backend.remove(&key, old.version).await {
                    tracing::warn!(%key, version = old.version, %error, "could not prune an old version; will retry on the next write");
                }
            }
        }
        Ok(Saved::Written { version })
    }

    /// The object's newest readable record. Corrupt records are skipped (logged and counted); a
    /// wrong or missing key is an error, not a skip.
    pub async fn latest(&self, key: &ObjectKey) -> Result<Option<Record>, Error> {
        let versions = self.inner.backend.versions(key).await?;
        Ok(self
            .newest_readable(key, &versions)
            .await?
            .map(|(_, record)| record))
    }

    async fn newest_readable(
        &self,
        key: &ObjectKey,
        versions: &[StoredVersion],
    ) -> Result<Option<(u64, Record)>, Error> {
        for stored in versions.iter().rev() {
            match self.read_version(key, stored.version).await {
                Ok(record) => return Ok(Some((stored.version, record))),
                Err(error @ Error::Corrupt { .. }) => {
                    self.inner.corrupt.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(%error, "skipping a corrupt record");
                }
                Err(other) => return Err(other),
            }
        }
        Ok(None)
    }

    /// Every stored version of the object, oldest first; unreadable ones as `Err`.
    pub async fn history(&self, key: &ObjectKey) -> Result<Vec<Result<Record, Error>>, Error> {
        let versions = self.inner.backend.versions(key).await?;
        let mut out = Vec::with_capacity(versions.len());
        for stored in versions {
            out.push(self.read_version(key, stored.version).await);
        }
        Ok(out)
    }

    /// One stored version of the object (see [`Vault::versions`]); `Corrupt` if unreadable.
    pub async fn record(&self, key: &ObjectKey, version: u64) -> Result<Record, Error> {
        self.read_version(key, version).await
    }

    /// The stored version numbers and sizes of the object, oldest first.
    pub async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error> {
        self.inner.backend.versions(key).await
    }

    /// What the object's records take in the backend — for `vigil bench status-vault`'s bytes
    /// per record (`bytes / versions`).
    pub async fn stored_size(&self, key: &ObjectKey) -> Result<StoredSize, Error> {
        let versions = self.inner.backend.versions(key).await?;
        Ok(StoredSize {
            versions: versions.len(),
            bytes: versions.iter().map(|v| v.bytes).sum(),
        })
    }

    /// Every object the vault holds records of, sorted.
    pub async fn keys(&self) -> Result<Vec<ObjectKey>, Error> {
        self.inner.backend.keys().await
    }

    /// Whether the backend is reachable and writable.
    pub async fn check(&self) -> Result<(), Error> {
        self.inner.backend.check().await
    }

    async fn read_version(&self, key: &ObjectKey, version: u64) -> Result<Record, Error> {
        let bytes = self.inner.backend.read(key, version).await?;
        self.decode(key, version, &bytes)
    }

    /// The bytes stored for `record`: JSON, sealed when a key is set.
    fn encode(&self, record: &Record) -> Result<Vec<u8>, Error> {
        let json = serde_json::to_vec(record)?;
        Ok(match &self.inner.options.key {
            Some(key) => crypto::seal(key, &layout::key_path(&record.key()), &json),
            None => json,
        })
    }

    fn decode(&self, key: &ObjectKey, version: u64, bytes: &[u8]) -> Result<Record, Error> {
        let what = format!("{key} version {version} in {}", self.location());
        let owned;
        let json = if crypto::is_envelope(bytes) {
            owned = crypto::open(
                self.inner.options.key.as_ref(),
                &layout::key_path(key),
                &what,
                bytes,
            )?;
            &owned[..]
        } else {
            bytes
        };
        let record: Record = serde_json::from_slice(json).map_err(|e| Error::Corrupt {
            what: what.clone(),
            reason: format!("not a valid record: {e}"),
        })?;
        if &record.key() != key {
            return Err(Error::Corrupt {
                what,
                reason: format!("it describes {}, not this object", record.key()),
            });
        }
        Ok(record)
    }
}
