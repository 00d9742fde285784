//! The data directory (`SandboxConfig::data_dir`, `vigil sandbox --data-dir`): the store survives a
//! restart of the process — crash, SIGKILL, or an upgrade to another version.
//!
//! Design: one snapshot file, `state.json`, rewritten whole after changes, at most every
//! [`FLUSH_INTERVAL`] while there are changes, and once more on clean shutdown. Each write goes to
//! `state.json.tmp`, is fsynced, renamed over `state.json`, and the directory is fsynced, so the
//! file on disk is always one complete snapshot: a SIGKILL or power cut loses at most the changes of
//! the last interval and never leaves a half-written file. We chose this over an append-only log
//! because the sandbox holds small clusters (a full rewrite is milliseconds), the snapshot reuses
//! the JSON bytes every stored object already caches (no serializing at all), restoring needs no
//! replay or compaction logic, and the write path of the store is untouched: the flusher learns of
//! changes from the store's existing change signal, so a sandbox without a data directory pays
//! nothing and one with it pays only an `Arc` clone per object per flush, under the read lock.
//!
//! What is kept: every object of every resource (CRDs and custom resources included) exactly as
//! served — uid, creationTimestamp, generation, resourceVersion — plus the resourceVersion counter
//! and the Service IP allocator, so neither goes backwards. What is not: the watch event log (after
//! a restart, watches from an older resourceVersion get 410 Expired, as after an etcd compaction).
//!
//! A `lock` file held with an exclusive advisory lock keeps two sandboxes off one directory; the
//! kernel releases it when the process dies, so a crash never leaves the directory locked.

use std::fs::{File, OpenOptions};
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::registry::store::{Snapshot, State, Store, Stored};
use crate::registry::{crd, meta};

/// How often, at most, the snapshot is rewritten while the store keeps changing: the most a
/// SIGKILL can lose.
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// The snapshot layout; bumped on incompatible changes so an old binary refuses a newer file
/// instead of misreading it.
const FORMAT: u32 = 1;
const STATE_FILE: &str = "state.json";
const TEMP_FILE: &str = "state.json.tmp";
const LOCK_FILE: &str = "lock";

/// Why the data directory could not be used.
#[derive(Debug, thiserror::Error)]
pub enum PersistError {
    #[error("cannot use data directory {path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("data directory {path} is in use by another sandbox")]
    Locked { path: PathBuf },
    #[error("cannot read sandbox state {path}: {reason}")]
    Corrupt { path: PathBuf, reason: String },
    #[error(
        "sandbox state {path} has format {found}, this version reads format {FORMAT}; \
         it was written by a newer vigil"
    )]
    Format { path: PathBuf, found: u32 },
}

/// An open, locked data directory.
#[derive(Debug)]
pub struct DataDir {
    dir: PathBuf,
    /// Held for the directory's lifetime: the advisory lock lives as long as this handle.
    _lock: File,
}

impl DataDir {
    /// Creates (if needed) and locks `dir`; returns the snapshot it holds, if any.
    pub fn open(dir: &Path) -> Result<(Self, Option<Snapshot>), PersistError> {
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| PersistError::Io { path, source }
        };
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(PersistError::Locked {
                    path: dir.to_owned(),
                });
            }
            Err(std::fs::TryLockError::Error(source)) => {
                return Err(PersistError::Io {
                    path: lock_path,
                    source,
                });
            }
        }
        let state_path = dir.join(STATE_FILE);
        let snapshot = match std::fs::read(&state_path) {
            Ok(bytes) => Some(decode(&state_path, &bytes)?),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => {
                return Err(PersistError::Io {
                    path: state_path,
                    source,
                });
            }
        };
        Ok((
            Self {
                dir: dir.to_owned(),
                _lock: lock,
            },
            snapshot,
        ))
    }

    /// The directory itself (other files kept there, such as the TLS CA, live beside the state).
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// Writes `snapshot` atomically: temp file, fsync, rename, fsync of the directory.
    pub fn write(&self, snapshot: &Snapshot) -> Result<(), PersistError> {
        let temp = self.dir.join(TEMP_FILE);
        let io = |path: &Path| {
            let path = path.to_owned();
            move |source| PersistError::Io { path, source }
        };
        let mut options = OpenOptions::new();
        options.write(true).create(true).truncate(true);
        // Secrets are stored as served: readable by the owner only, like the kubeconfig.
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
        let file = options.open(&temp).map_err(io(&temp))?;
        let mut out = BufWriter::with_capacity(1 << 16, file);
        encode(snapshot, &mut out).map_err(io(&temp))?;
        let file = out.into_inner().map_err(|e| PersistError::Io {
            path: temp.clone(),
            source: e.into_error(),
        })?;
        file.sync_all().map_err(io(&temp))?;
        drop(file);
        let target = self.dir.join(STATE_FILE);
        std::fs::rename(&temp, &target).map_err(io(&target))?;
        // The rename is durable only once the directory entry is.
        File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(&self.dir))?;
        Ok(())
    }
}

/// `{"format":1,"resourceVersion":N,"nextClusterIP":N,"resources":[{"key":K,"objects":[...]}]}`,
/// the objects spliced from their cached JSON.
fn encode(snapshot: &Snapshot, out: &mut impl std::io::Write) -> std::io::Result<()> {
    write!(
        out,
        "{{\"format\":{FORMAT},\"resourceVersion\":{},\"nextClusterIP\":{},\"resources\":[",
        snapshot.rv, snapshot.next_cluster_ip
    )?;
    for (i, (key, objects)) in snapshot.objects.iter().enumerate() {
        if i > 0 {
            out.write_all(b",")?;
        }
        out.write_all(b"{\"key\":")?;
        serde_json::to_writer(&mut *out, &**key)?;
        out.write_all(b",\"objects\":[")?;
        for (j, object) in objects.iter().enumerate() {
            if j > 0 {
                out.write_all(b",")?;
            }
            out.write_all(&object.json)?;
        }
        out.write_all(b"]}")?;
    }
    out.write_all(b"]}\n")
}

#[derive(Deserialize)]
struct Header {
    format: u32,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct SavedState {
    resource_version: u64,
    #[serde(rename = "nextClusterIP")]
    next_cluster_ip: u32,
    resources: Vec<SavedResource>,
}

#[derive(Deserialize)]
struct SavedResource {
    key: String,
    objects: Vec<Value>,
}

fn decode(path: &Path, bytes: &[u8]) -> Result<Snapshot, PersistError> {
    let corrupt = |reason: String| PersistError::Corrupt {
        path: path.to_owned(),
        reason,
    };
    // The format first, so a newer layout is reported as such rather than as damage.
    let header: Header = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    if header.format != FORMAT {
        return Err(PersistError::Format {
            path: path.to_owned(),
            found: header.format,
        });
    }
    let file: SavedState = serde_json::from_slice(bytes).map_err(|e| corrupt(e.to_string()))?;
    let mut objects = Vec::with_capacity(file.resources.len());
    for resource in file.resources {
        let mut stored = Vec::with_capacity(resource.objects.len());
        for value in resource.objects {
            let rv = meta::meta_str(&value, "resourceVersion")
                .parse::<u64>()
                .map_err(|_| {
                    corrupt(format!(
                        "object {:?} in {:?} has no numeric metadata.resourceVersion",
                        meta::name(&value),
                        resource.key
                    ))
                })?;
            if meta::name(&value).is_empty() {
                return Err(corrupt(format!(
                    "an object in {:?} has no metadata.name",
                    resource.key
                )));
            }
            stored.push(Stored::new(value, rv));
        }
        objects.push((Arc::from(resource.key), stored));
    }
    Ok(Snapshot {
        rv: file.resource_version,
        next_cluster_ip: file.next_cluster_ip,
        objects,
    })
}

/// Loads `snapshot` into a fresh store and serves its CRDs' resources again.
pub fn restore(store: &Store, snapshot: Snapshot) {
    store.write(|state| {
        state.restore(snapshot);
        register_crds(state);
    });
}

/// Registers every stored CRD's resources, as [`crate::registry::ops::sync_crd`] does on a write, but
/// without rewriting status (a restart is not a change). CRDs whose names were accepted go
/// first, so a conflict resolves as it did before the restart.
fn register_crds(state: &mut State) {
    let mut crds: Vec<Arc<Stored>> = state
        .range("apiextensions.k8s.io/customresourcedefinitions", None, None)
        .cloned()
        .collect();
    let accepted = |crd: &Stored| {
        crd.value
            .pointer("/status/conditions")
            .and_then(Value::as_array)
            .is_some_and(|conditions| {
                conditions.iter().any(|c| {
                    c.get("type").and_then(Value::as_str) == Some("NamesAccepted")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
    };
    crds.sort_by_key(|crd| {
        (
            !accepted(crd),
            meta::meta_str(&crd.value, "creationTimestamp").to_owned(),
        )
    });
    for crd_obj in crds {
        if crd::names_conflict(&state.registry, &crd_obj.value).is_none() {
            state
                .registry
                .set_crd_resources(crd_obj.name(), crd::served_resources(&crd_obj.value));
        }
    }
}

/// Rewrites the snapshot after changes (debounced by [`FLUSH_INTERVAL`]) until `stop` fires or
/// is dropped, then writes a last one if anything changed since.
pub async fn run(dir: DataDir, store: Arc<Store>, mut stop: oneshot::Receiver<()>) {
    let dir = Arc::new(dir);
    let mut changes = store.subscribe();
    let mut flushed = store.read().rv();
    let mut last_attempt: Option<Instant> = None;
    loop {
        if store.read().rv() == flushed {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { break },
                _ = &mut stop => break,
            }
        }
        if let Some(last) = last_attempt {
            tokio::select! {
                _ = tokio::time::sleep_until(last + FLUSH_INTERVAL) => {}
                _ = &mut stop => break,
            }
        }
        // Changes from here on wake the next round.
        changes.mark_unchanged();
        last_attempt = Some(Instant::now());
        if let Some(rv) = flush(&dir, &store).await {
            flushed = rv;
        }
    }
    if store.read().rv() != flushed {
        flush(&dir, &store).await;
    }
}

/// Writes the current state; returns its resourceVersion, or None (logged) when the write failed,
/// in which case the next round tries again.
async fn flush(dir: &Arc<DataDir>, store: &Store) -> Option<u64> {
    let snapshot = store.read().snapshot();
    let rv = snapshot.rv;
    let dir = dir.clone();
    match tokio::task::spawn_blocking(move || dir.write(&snapshot)).await {
        Ok(Ok(())) => Some(rv),
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot save the sandbox state");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "saving the sandbox state failed");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn temp_dir(label: &str) -> PathBuf {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default();
        std::env::temp_dir().join(format!(
            "vigil-persist-{label}-{}-{nanos:x}",
            std::process::id()
        ))
    }

    #[test]
    fn snapshot_round_trips_and_keeps_the_counter() {
        let path = temp_dir("roundtrip");
        let store = Store::new(100);
        store.write(|s| {
            s.put(
                "/configmaps",
                json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "a", "name": "x", "uid": "u1"}}),
            )
        });
        store.write(|s| s.allocate_cluster_ip());
        {
            let (dir, loaded) = DataDir::open(&path).expect("open");
            assert!(loaded.is_none());
            dir.write(&store.read().snapshot()).expect("write");
            assert!(
                matches!(DataDir::open(&path), Err(PersistError::Locked { .. })),
                "a second opener is refused while the first holds the lock"
            );
        }
        let (_dir, loaded) = DataDir::open(&path).expect("reopen");
        let restored = Store::new(100);
        restore(&restored, loaded.expect("snapshot"));
        let state = restored.read();
        let cm = state.get("/configmaps", "a", "x").expect("restored");
        assert_eq!(cm.value["metadata"]["uid"], "u1");
        assert_eq!(state.rv(), store.read().rv());
        assert!(state.events_after("/configmaps", 0, 10).is_err());
        drop(state);
        let next = restored.write(|s| s.allocate_cluster_ip());
        assert_ne!(next, "10.96.0.10", "the IP allocator continues");
        let _ = std::fs::remove_dir_all(&path);
    }

    #[test]
    fn damaged_or_newer_files_are_clear_errors() {
        let path = temp_dir("corrupt");
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join(STATE_FILE), b"{\"format\":1,\"resourceVe").expect("write");
        let err = DataDir::open(&path).expect_err("truncated file refused");
        assert!(matches!(err, PersistError::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains("state.json"), "{err}");
        std::fs::write(path.join(STATE_FILE), b"{\"format\":7}").expect("write");
        let err = DataDir::open(&path).expect_err("newer format refused");
        assert!(
            matches!(err, PersistError::Format { found: 7, .. }),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&path);
    }
}
