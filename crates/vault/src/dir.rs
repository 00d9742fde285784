//! The local directory backend (the default).
//!
//! A version is written crash-safely: the bytes go to a temporary file in the object's folder
//! (`.<version>.json.tmp-<pid>-<random>`), the file is fsynced, renamed to its final name, and the
//! folder is fsynced so that the rename itself is durable. A crash before the rename leaves only a
//! temporary file, which readers ignore (its name is not a version name) and a later write of the
//! same object removes once it is old; a crash after it leaves the whole version. Never a half
//! record under a version name — as long as the file system honours fsync and atomic rename
//! (ext4, xfs, btrfs, and the persistent volumes built on them do).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rand::RngCore as _;

use crate::backend::{Backend, StoredVersion};
use crate::layout::{key_path, parse_key_segments, parse_version_name, version_name};
use crate::{Error, ObjectKey};

/// A temporary file older than this is a leftover of a crash, not a write in progress.
const STALE_TEMP: Duration = Duration::from_secs(600);
const TEMP_MARKER: &str = ".tmp-";

#[derive(Debug)]
pub struct DirBackend {
    root: PathBuf,
    location: String,
}

impl DirBackend {
    /// A vault in `root`, created if missing.
    pub async fn open(root: impl Into<PathBuf>) -> Result<Self, Error> {
        let root = root.into();
        let location = root.display().to_string();
        let dir = root.clone();
        blocking(move || create_dirs_durably(&dir)).await?;
        Ok(Self { root, location })
    }

    fn folder(&self, key: &ObjectKey) -> PathBuf {
        self.root.join(key_path(key))
    }
}

async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, Error> + Send + 'static,
) -> Result<T, Error> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|e| Error::io("blocking file task", std::io::Error::other(e)))?
}

/// Creates `dir` and any missing parents, fsyncing each parent that gained an entry so the new
/// folders survive a crash.
fn create_dirs_durably(dir: &Path) -> Result<(), Error> {
    let mut missing = Vec::new();
    let mut cursor = Some(dir);
    while let Some(d) = cursor {
        if d.as_os_str().is_empty() || d.is_dir() {
            break;
        }
        missing.push(d.to_path_buf());
        cursor = d.parent();
    }
    for d in missing.iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(Error::io(d.display(), e)),
        }
        if let Some(parent) = d.parent().filter(|p| !p.as_os_str().is_empty()) {
            sync_dir(parent)?;
        }
    }
    Ok(())
}

fn sync_dir(dir: &Path) -> Result<(), Error> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(|e| Error::io(dir.display(), e))
}

/// Writes `bytes` to `dir/name` atomically and durably (see the module docs).
fn write_atomically(dir: &Path, name: &str, bytes: &[u8]) -> Result<(), Error> {
    create_dirs_durably(dir)?;
    remove_stale_temps(dir);
    let temp = dir.join(format!(
        ".{name}{TEMP_MARKER}{}-{:016x}",
        std::process::id(),
        rand::rng().next_u64()
    ));
    let result = (|| {
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&temp)
            .map_err(|e| Error::io(temp.display(), e))?;
        file.write_all(bytes)
            .and_then(|()| file.sync_all())
            .map_err(|e| Error::io(temp.display(), e))?;
        let target = dir.join(name);
        std::fs::rename(&temp, &target).map_err(|e| Error::io(target.display(), e))?;
        sync_dir(dir)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&temp);
    }
    result
}

/// Removes temporary files that a crashed writer left behind. Young ones may belong to a write in
/// progress in another process and are left alone.
fn remove_stale_temps(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        if !(name.starts_with('.') && name.contains(TEMP_MARKER)) {
            continue;
        }
        let stale = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > STALE_TEMP);
        if stale {
            tracing::info!(file = %entry.path().display(), "removing a temporary file left by an interrupted write");
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

fn sub_dirs(dir: &Path) -> Result<Vec<(String, PathBuf)>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir.display(), e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display(), e))?;
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        if let Some(name) = entry.file_name().to_str()
            && !name.starts_with('.')
        {
            out.push((name.to_owned(), entry.path()));
        }
    }
    Ok(out)
}

fn list_versions(dir: &Path) -> Result<Vec<StoredVersion>, Error> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io(dir.display(), e)),
    };
    let mut versions = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::io(dir.display(), e))?;
        let Some(version) = entry.file_name().to_str().and_then(parse_version_name) else {
            continue;
        };
        let bytes = entry.metadata().map(|m| m.len()).unwrap_or(0);
        versions.push(StoredVersion { version, bytes });
    }
    versions.sort_by_key(|v| v.version);
    Ok(versions)
}

#[async_trait::async_trait]
impl Backend for DirBackend {
    fn location(&self) -> &str {
        &self.location
    }

    async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error> {
        let dir = self.folder(key);
        blocking(move || list_versions(&dir)).await
    }

    async fn read(&self, key: &ObjectKey, version: u64) -> Result<Vec<u8>, Error> {
        let path = self.folder(key).join(version_name(version));
        blocking(move || std::fs::read(&path).map_err(|e| Error::io(path.display(), e))).await
    }

    async fn write(&self, key: &ObjectKey, version: u64, bytes: Vec<u8>) -> Result<(), Error> {
        let dir = self.folder(key);
        blocking(move || write_atomically(&dir, &version_name(version), &bytes)).await
    }

    async fn remove(&self, key: &ObjectKey, version: u64) -> Result<(), Error> {
        let path = self.folder(key).join(version_name(version));
        blocking(move || match std::fs::remove_file(&path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(path.display(), e)),
        })
        .await
    }

    async fn keys(&self) -> Result<Vec<ObjectKey>, Error> {
        let root = self.root.clone();
        blocking(move || {
            let mut keys = Vec::new();
            for (group, group_dir) in sub_dirs(&root)? {
                for (kind, kind_dir) in sub_dirs(&group_dir)? {
                    for (namespace, ns_dir) in sub_dirs(&kind_dir)? {
                        for (name, name_dir) in sub_dirs(&ns_dir)? {
                            if list_versions(&name_dir)?.is_empty() {
                                continue;
                            }
                            if let Some(key) =
                                parse_key_segments([&group, &kind, &namespace, &name])
                            {
                                keys.push(key);
                            }
                        }
                    }
                }
            }
            keys.sort();
            Ok(keys)
        })
        .await
    }

    async fn check(&self) -> Result<(), Error> {
        let root = self.root.clone();
        blocking(move || {
            create_dirs_durably(&root)?;
            let probe = root.join(format!(
                ".health{TEMP_MARKER}{}-{:016x}",
                std::process::id(),
                rand::rng().next_u64()
            ));
            std::fs::write(&probe, b"ok")
                .and_then(|()| std::fs::remove_file(&probe))
                .map_err(|e| Error::io(root.display(), e))
        })
        .await
    }
}
