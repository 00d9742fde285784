//! Fuzz targets `vault-record` and `vault-key`: the status vault reading records it did not
//! necessarily write (a bucket or directory others can write to, a disk that flips bits) and the
//! encryption key it is given.
//!
//! `vault-record`: an input is the stored bytes of one version of one object, read through a
//! [`Vault`] on an in-memory backend, with the key the corpus was sealed with and without a key.
//! Besides never panicking: a sealed record altered in any way — truncated, extended, a bit
//! flipped, its header edited — is refused (AES-GCM authenticates the header, the object's name
//! and the ciphertext), and `latest` skips what it refuses as corrupt.
//!
//! The corpus is records the real vault wrote to a directory (`capture_corpus`): sealed and
//! plain, with and without a manifest, a tombstone.

use std::sync::Mutex;

use vigil_fuzz::proptest::prelude::*;
use vigil_vault::{
    Backend, EncryptionKey, Error, ObjectKey, Record, StoredVersion, Vault, VaultOptions,
};

const TARGET: &str = "vault-record";
/// The key the corpus was sealed with.
const KEY: [u8; 32] = *b"vigil-fuzz-corpus-key-0123456789";
const MAGIC: &[u8] = b"VGLV";

fn object() -> ObjectKey {
    ObjectKey::new(
        "infra.example.com",
        "KubernetesCluster",
        Some("team-a"),
        "db",
    )
}

/// A backend holding one object's versions in memory.
#[derive(Debug, Default)]
struct Memory {
    versions: Mutex<Vec<(u64, Vec<u8>)>>,
}

#[async_trait::async_trait]
impl Backend for Memory {
    fn location(&self) -> &str {
        "memory"
    }
    async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error> {
        if *key != object() {
            return Ok(Vec::new());
        }
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        Ok(versions
            .iter()
            .map(|(version, bytes)| StoredVersion {
                version: *version,
                bytes: bytes.len() as u64,
            })
            .collect())
    }
    async fn read(&self, _key: &ObjectKey, version: u64) -> Result<Vec<u8>, Error> {
        let versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions
            .iter()
            .find(|(v, _)| *v == version)
            .map(|(_, bytes)| bytes.clone())
            .ok_or_else(|| Error::Io {
                path: format!("memory/{version}"),
                source: std::io::ErrorKind::NotFound.into(),
            })
    }
    async fn write(&self, _key: &ObjectKey, version: u64, bytes: Vec<u8>) -> Result<(), Error> {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions.push((version, bytes));
        Ok(())
    }
    async fn remove(&self, _key: &ObjectKey, version: u64) -> Result<(), Error> {
        let mut versions = self.versions.lock().unwrap_or_else(|e| e.into_inner());
        versions.retain(|(v, _)| *v != version);
        Ok(())
    }
    async fn keys(&self) -> Result<Vec<ObjectKey>, Error> {
        Ok(vec![object()])
    }
    async fn check(&self) -> Result<(), Error> {
        Ok(())
    }
}

fn key() -> EncryptionKey {
    EncryptionKey::from_bytes(&KEY).expect("key")
}

fn record(generation: i64) -> Record {
    Record {
        api_version: "infra.example.com/v1".into(),
        kind: "KubernetesCluster".into(),
        namespace: Some("team-a".into()),
        name: "db".into(),
        uid: "6f1c2a9e-0000-4000-8000-000000000001".into(),
        resource_version: "12".into(),
        generation: Some(generation),
        status: serde_json::json!({
            "phase": "Running",
            "observedGeneration": generation,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Running",
                "message": "the cluster serves", "lastTransitionTime": "2026-11-26T17:00:00Z",
                "observedGeneration": generation}],
        }),
        time: "2026-11-26T17:00:00Z".into(),
        deleted: false,
        object: None,
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    /// The corpus's sealed records: the only envelopes that may decode.
    originals: Vec<Vec<u8>>,
    /// Record 1, sealed.
    sealed_one: Vec<u8>,
}

impl Harness {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let sealed_one = runtime.block_on(sealed_record_one()).expect("seal");
        Self {
            runtime,
            sealed_one,
            originals: vigil_fuzz::corpus(TARGET)
                .into_iter()
                .map(|s| s.bytes)
                .filter(|b| b.starts_with(MAGIC))
                .collect(),
        }
    }

    fn check(&self, input: &[u8]) -> Result<(), String> {
        self.runtime.block_on(async {
            for keyed in [true, false] {
                // Version 1: a good sealed record; version 2: the input.
                let backend = Memory::default();
                backend
                    .versions
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend([(1, self.sealed_one.clone()), (2, input.to_vec())]);
                let vault = Vault::with_backend(Box::new(backend), options(keyed));
                let read = vault.record(&object(), 2).await;
                if let Ok(got) = &read
                    && input.starts_with(MAGIC)
                    && !self.originals.iter().any(|o| o == input)
                {
                    return Err(format!(
                        "an altered sealed record was accepted (key: {keyed}): {got:?}"
                    ));
                }
                let latest = vault.latest(&object()).await;
                match (&read, &latest) {
                    (Ok(r), Ok(Some(l))) if r == l => {}
                    (Err(Error::Corrupt { .. }), Ok(Some(l))) if keyed && *l == record(1) => {}
                    (Err(Error::Corrupt { .. }), Err(_)) if !keyed => {}
                    (Err(Error::KeyRequired { .. } | Error::WrongKey { .. }), Err(_)) => {}
                    other => {
                        return Err(format!(
                            "latest disagrees with the version it should pick (key: {keyed}): {other:?}"
                        ));
                    }
                }
                let _ = vault.history(&object()).await;
            }
            Ok(())
        })
    }
}

fn options(keyed: bool) -> VaultOptions {
    VaultOptions {
        key: keyed.then(key),
        ..VaultOptions::default()
    }
}

/// Record 1 as the real vault seals it.
async fn sealed_record_one() -> Result<Vec<u8>, String> {
    let backend = std::sync::Arc::new(Memory::default());
    let vault = Vault::with_backend(Box::new(Shared(backend.clone())), options(true));
    vault.save(&record(1)).await.map_err(|e| e.to_string())?;
    let versions = backend.versions.lock().unwrap_or_else(|e| e.into_inner());
    versions
        .first()
        .map(|(_, b)| b.clone())
        .ok_or_else(|| "nothing saved".to_owned())
}

/// A backend shared with the test, to read back what the vault wrote.
#[derive(Debug)]
struct Shared(std::sync::Arc<Memory>);

#[async_trait::async_trait]
impl Backend for Shared {
    fn location(&self) -> &str {
        self.0.location()
    }
    async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error> {
        self.0.versions(key).await
    }
    async fn read(&self, key: &ObjectKey, version: u64) -> Result<Vec<u8>, Error> {
        self.0.read(key, version).await
    }
    async fn write(&self, key: &ObjectKey, version: u64, bytes: Vec<u8>) -> Result<(), Error> {
        self.0.write(key, version, bytes).await
    }
    async fn remove(&self, key: &ObjectKey, version: u64) -> Result<(), Error> {
        self.0.remove(key, version).await
    }
    async fn keys(&self) -> Result<Vec<ObjectKey>, Error> {
        self.0.keys().await
    }
    async fn check(&self) -> Result<(), Error> {
        self.0.check().await
    }
}

#[test]
fn vault_records_never_panic_and_altered_ciphertext_is_refused() {
    let harness = Harness::new();
    let generated = vigil_fuzz::corpus_and_random(TARGET, vigil_fuzz::JSON_TOKENS);
    vigil_fuzz::fuzz(TARGET, generated, |input| harness.check(input));
}

/// Every single-bit flip and every truncation of a sealed record is refused as corrupt.
#[test]
fn every_bit_flip_and_truncation_of_a_sealed_record_is_refused() {
    let harness = Harness::new();
    let sealed = harness
        .originals
        .first()
        .expect("a sealed record in the corpus")
        .clone();
    let runtime = &harness.runtime;
    let vault = |bytes: Vec<u8>| {
        let backend = Memory::default();
        backend
            .versions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((1, bytes));
        Vault::with_backend(Box::new(backend), options(true))
    };
    assert!(
        runtime
            .block_on(vault(sealed.clone()).record(&object(), 1))
            .is_ok()
    );
    for bit in 0..sealed.len() * 8 {
        let mut flipped = sealed.clone();
        flipped[bit / 8] ^= 1 << (bit % 8);
        let result = runtime.block_on(vault(flipped).record(&object(), 1));
        assert!(
            matches!(result, Err(Error::Corrupt { .. } | Error::WrongKey { .. })),
            "bit {bit}: {result:?}"
        );
    }
    for len in 0..sealed.len() {
        let result = runtime.block_on(vault(sealed[..len].to_vec()).record(&object(), 1));
        assert!(result.is_err(), "truncated to {len}: {result:?}");
    }
}

#[test]
fn encryption_keys_from_outside_never_panic() {
    let generated = prop_oneof![
        1 => vigil_fuzz::corpus_and_random("vault-key", &[b"=", b"\n", b" ", b"+", b"/", b"-", b"_"]),
        1 => prop::collection::vec(any::<u8>(), 30..34),
    ];
    vigil_fuzz::fuzz("vault-key", generated, |input| {
        let result = EncryptionKey::from_bytes(input);
        let text = std::str::from_utf8(input).map(str::trim).unwrap_or("");
        let base64_of_32 = text.len() == 44 && text.ends_with('=') && !text.ends_with("==");
        if result.is_ok() && input.len() != 32 && !base64_of_32 {
            return Err(format!(
                "accepted a key of {} bytes: {input:?}",
                input.len()
            ));
        }
        Ok(())
    });
}

/// Records the corpus: what the real vault writes to a directory (`VIGIL_FUZZ_CAPTURE=1 cargo
/// test -p vigil-fuzz --test fuzz vault::capture_corpus -- --ignored`).
#[test]
#[ignore = "records the corpus; see its doc"]
fn capture_corpus() {
    if std::env::var("VIGIL_FUZZ_CAPTURE").is_err() {
        eprintln!("set VIGIL_FUZZ_CAPTURE=1");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vigil-fuzz-vault-{}", std::process::id()));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        for (keyed, label) in [(true, "sealed"), (false, "plain")] {
            let _ = std::fs::remove_dir_all(&dir);
            let vault = Vault::open(dir.to_str().expect("utf-8"), options(keyed))
                .await
                .expect("open");
            let mut with_manifest = record(2);
            with_manifest.object = Some(serde_json::json!({
                "apiVersion": "infra.example.com/v1", "kind": "KubernetesCluster",
                "metadata": {"name": "db", "namespace": "team-a", "labels": {"team": "a"}},
                "spec": {"type": "iks", "kubeVersion": "1.28"},
            }));
            let mut tombstone = record(2);
            tombstone.deleted = true;
            vault.save(&record(1)).await.expect("save");
            vault.save(&with_manifest).await.expect("save");
            vault.save(&tombstone).await.expect("save");
            for (version, what) in [(1, "status"), (2, "manifest"), (3, "tombstone")] {
                let path = dir
                    .join("infra.example.com/KubernetesCluster/team-a/db")
                    .join(format!("{version:020}.json"));
                let bytes = std::fs::read(&path).expect("read");
                vigil_fuzz::save_to_corpus(TARGET, &format!("{label}-{what}.bin"), &bytes);
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    });
}
