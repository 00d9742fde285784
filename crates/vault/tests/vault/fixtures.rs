//! Records written by an earlier release stay readable: the vaults under
//! `tests/fixtures/vault-0.1.0/` (one plain, one AES-256-GCM encrypted with the committed test
//! key `key.b64`) were written once by this release's [`Vault::save`], and are read back here,
//! record by record. A change to the layout, the record format or the envelope that cannot read
//! them fails this test; a new format must keep reading these (or migrate them) and get
//! fixtures of its own.
//!
//! How they were made (never again for this release; a later release adds `vault-<version>/`):
//! `cargo test -p vigil-vault --test vault fixtures::write_fixtures -- --ignored`, which refuses to
//! overwrite a fixture directory that exists.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::path::{Path, PathBuf};

use serde_json::json;
use vigil_vault::{EncryptionKey, Error, ObjectKey, Record, Vault, VaultOptions};

/// The release that wrote the fixtures.
const RELEASE: &str = "0.1.0";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/vault-{RELEASE}"))
}

/// A test-only key (never used for anything else): 32 bytes, base64, as `--encryption-key-file`
/// takes it.
fn key() -> EncryptionKey {
    EncryptionKey::from_file(fixtures().join("key.b64")).unwrap()
}

/// What the fixtures hold, in the order they were saved: a KubernetesCluster's status as the
/// operator captures it (twice: provisioning, then ready), then `vigil status backup`'s record
/// with the manifest, a tombstone, and a core Service.
fn records() -> Vec<Record> {
    let cluster = |rv: &str, time: &str, status: serde_json::Value| Record {
        api_version: "vigil.dev/v1".into(),
        kind: "KubernetesCluster".into(),
        namespace: Some("team-a".into()),
        name: "my-custom-cluster-for-backup".into(),
        uid: "0f0c7a52-8a3e-4c53-9d1e-2b7a9e0c1d11".into(),
        resource_version: rv.into(),
        generation: Some(1),
        status,
        time: time.into(),
        deleted: false,
        object: None,
    };
    let provisioning = json!({"phase": "Provisioning", "provider": "local",
        "clusterID": "local-5f2b", "observedGeneration": 1});
    let ready = json!({"apiServerURL": "https://my-private-endpoint.tld",
        "masterVersion": "1.28.23", "phase": "Ready", "provider": "local",
        "clusterID": "local-5f2b", "kubeVersion": "1.28", "observedGeneration": 1,
        "kubeconfigSecret": "my-custom-cluster-for-backup-kubeconfig",
        "addons": [{"name": "cluster-autoscaler", "version": "1.2.2", "state": "Installed"}],
        "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned",
            "message": "the cluster answers", "lastTransitionTime": "2026-11-22T10:00:30Z",
            "observedGeneration": 1}]});
    let mut backup = cluster("12", "2026-11-22T10:01:00Z", ready.clone());
    backup.object = Some(
        json!({"apiVersion": "vigil.dev/v1", "kind": "KubernetesCluster",
        "metadata": {"name": "my-custom-cluster-for-backup", "namespace": "team-a",
            "labels": {"vigil.dev/backup": "true"}},
        "spec": {"type": "iks", "env": "test", "kubeVersion": "1.28", "osVersion": "UBUNTU_20_64",
            "product": {"name": "this is my solo experiment", "shortName": "experiment",
                "uuid": {"value": "aaa692e5-e6ce-4f19-ad20-6491ca74067c"}},
            "addons": [{"name": "cluster-autoscaler", "version": "1.2.2"}]}}),
    );
    backup.status = json!({"apiServerURL": "https://my-private-endpoint.tld",
        "masterVersion": "1.28.24", "phase": "Ready"});
    let mut tombstone = backup.clone();
    tombstone.resource_version = "13".into();
    tombstone.time = "2026-11-22T10:02:00Z".into();
    tombstone.deleted = true;
    tombstone.object = None;
    let service = Record {
        api_version: "v1".into(),
        kind: "Service".into(),
        namespace: Some("team-a".into()),
        name: "frontend".into(),
        uid: "7d3c2b1a-0000-4000-8000-000000000001".into(),
        resource_version: "7".into(),
        generation: None,
        status: json!({"loadBalancer": {"ingress": [{"ip": "203.0.113.10", "ipMode": "VIP"}]}}),
        time: "2026-11-22T10:00:10Z".into(),
        deleted: false,
        object: None,
    };
    vec![
        cluster("10", "2026-11-22T10:00:00Z", provisioning),
        cluster("11", "2026-11-22T10:00:30Z", ready),
        backup,
        tombstone,
        service,
    ]
}

/// The fixture vaults: directory name and options.
fn vaults() -> [(&'static str, VaultOptions); 2] {
    [
        (
            "plain",
            VaultOptions {
                retention: 0,
                key: None,
            },
        ),
        (
            "encrypted",
            VaultOptions {
                retention: 0,
                key: Some(key()),
            },
        ),
    ]
}

/// A copy of a fixture vault in a fresh temporary directory: reading must not be able to change
/// the committed files.
fn copy(name: &str) -> PathBuf {
    // One directory per call: the tests of this file run in parallel threads of one process, and
    // two of them copy the same fixture (a shared directory was removed under the other's feet).
    static CALLS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let to = std::env::temp_dir().join(format!(
        "vigil-vault-fixture-{name}-{}-{call}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&to);
    copy_dir(&fixtures().join(name), &to);
    to
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn this_release_reads_the_records_release_0_1_0_wrote() {
    let expected = records();
    let mut keys: Vec<ObjectKey> = expected.iter().map(Record::key).collect();
    keys.dedup();
    keys.sort();
    for (name, options) in vaults() {
        let dir = copy(name);
        let vault = Vault::open(dir.to_str().unwrap(), options).await.unwrap();
        let mut found = vault.keys().await.unwrap();
        found.sort();
        assert_eq!(found, keys, "{name}: the objects");
        for key in &keys {
            let history: Vec<Record> = vault
                .history(key)
                .await
                .unwrap()
                .into_iter()
                .map(|r| r.unwrap_or_else(|e| panic!("{name}: {key}: {e}")))
                .collect();
            let want: Vec<Record> = expected
                .iter()
                .filter(|r| r.key() == *key)
                .cloned()
                .collect();
            assert_eq!(history, want, "{name}: {key}: every version, oldest first");
            assert_eq!(
                vault.latest(key).await.unwrap().as_ref(),
                want.last(),
                "{name}: {key}"
            );
        }
        assert_eq!(vault.corrupt_records(), 0, "{name}");
        let _ = std::fs::remove_dir_all(dir);
    }
}

#[tokio::test]
async fn the_encrypted_fixture_still_needs_its_key() {
    let dir = copy("encrypted");
    let key = records()[0].key();
    let without = Vault::open(dir.to_str().unwrap(), VaultOptions::default())
        .await
        .unwrap();
    assert!(
        matches!(
            without.record(&key, 1).await,
            Err(Error::KeyRequired { .. })
        ),
        "an encrypted record read without a key"
    );
    let wrong = VaultOptions {
        retention: 0,
        key: Some(EncryptionKey::from_bytes(&[7; 32]).unwrap()),
    };
    let with_wrong = Vault::open(dir.to_str().unwrap(), wrong).await.unwrap();
    assert!(
        matches!(
            with_wrong.record(&key, 1).await,
            Err(Error::WrongKey { .. })
        ),
        "an encrypted record read with another key"
    );
    let _ = std::fs::remove_dir_all(dir);
}

/// Writes the fixtures; run once per release (see the top of this file).
#[tokio::test]
#[ignore = "writes the committed fixtures: run by hand, once per release"]
async fn write_fixtures() {
    let root = fixtures();
    if !root.join("key.b64").exists() {
        std::fs::create_dir_all(&root).unwrap();
        let raw: [u8; 32] = std::array::from_fn(|i| (i as u8).wrapping_mul(37).wrapping_add(11));
        use base64::Engine as _;
        let text = base64::engine::general_purpose::STANDARD.encode(raw);
        std::fs::write(root.join("key.b64"), format!("{text}\n")).unwrap();
    }
    for (name, options) in vaults() {
        let dir = root.join(name);
        assert!(
            !dir.exists(),
            "{} exists: fixtures are written once; a new release writes vault-<version>/",
            dir.display()
        );
        let vault = Vault::open(dir.to_str().unwrap(), options).await.unwrap();
        for record in records() {
            vault.save(&record).await.unwrap();
        }
    }
}
