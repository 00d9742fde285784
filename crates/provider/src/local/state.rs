//! A local cluster's record on disk (`<root>/<id>/cluster.json`): everything needed to find,
//! restart, upgrade or delete the cluster after the operator restarts. Written atomically (temp
//! file, fsync, rename), so a crash leaves the previous record or the next, never half of one.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::{Addon, AddonStatus, ClusterIdentity, ClusterRequest};

/// The record's file name in a cluster's directory.
pub const RECORD: &str = "cluster.json";

/// Where a cluster is in its life, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    Provisioning,
    Running,
    Upgrading,
    Deleting,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub id: String,
    pub identity: ClusterIdentity,
    /// The create request, as it was.
    pub request: ClusterRequest,
    pub phase: Phase,
    /// The loopback port the API server listens on, for the cluster's life.
    pub port: u16,
    /// The API server's bearer token.
    pub token: String,
    /// The version wanted (the request's, then each upgrade's).
    pub kube_version: String,
    /// What the API server last reported.
    #[serde(default)]
    pub master_version: Option<String>,
    /// The addons wanted.
    pub addons: Vec<Addon>,
    /// The addons last seen in the cluster.
    #[serde(default)]
    pub observed_addons: Vec<AddonStatus>,
    /// The sandbox process last started (it may have died since).
    #[serde(default)]
    pub pid: Option<u32>,
    /// The version that process was started with.
    #[serde(default)]
    pub process_kube_version: Option<String>,
    /// Unix ms when stopping the process was first asked (for a restart or a delete): SIGTERM
    /// until the grace period is over, SIGKILL after.
    #[serde(default)]
    pub stopping_since_ms: Option<u64>,
    /// Starts since the API server last answered (to tell a crash loop from a restart).
    #[serde(default)]
    pub starts_without_answer: u32,
    /// A note for `message` (a moved port, a crash loop).
    #[serde(default)]
    pub note: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    pub updated_at: String,
}

/// Reads `<dir>/cluster.json`; `Ok(None)` if there is none.
pub fn load(dir: &Path) -> std::io::Result<Option<Record>> {
    let path = dir.join(RECORD);
    match std::fs::read(&path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map(Some).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{}: {e}", path.display()),
            )
        }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Writes `<dir>/cluster.json` atomically, stamping `updated_at`.
pub fn save(dir: &Path, record: &mut Record) -> std::io::Result<()> {
    record.updated_at = now_rfc3339();
    let bytes = serde_json::to_vec_pretty(record).map_err(std::io::Error::other)?;
    write_atomically(&dir.join(RECORD), &bytes, 0o600)
}

/// Temp file in the same directory, fsync, rename: readers see the old or the new content.
pub fn write_atomically(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let tmp: PathBuf = path.with_extension("tmp");
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(mode)
        .open(&tmp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&tmp, path)
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}
