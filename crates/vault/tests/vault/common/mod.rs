//! Scenarios every backend must pass, run by `dir.rs` on a temporary directory and by `s3.rs`
//! on a real S3-compatible server.

#![allow(dead_code)]
#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use serde_json::json;
use vigil_vault::{Backend, EncryptionKey, Error, ObjectKey, Record, Saved, Vault, VaultOptions};

pub fn record(namespace: &str, name: &str, uid: &str, status: serde_json::Value) -> Record {
    Record {
        api_version: "v1".into(),
        kind: "Service".into(),
        namespace: Some(namespace.into()),
        name: name.into(),
        uid: uid.into(),
        resource_version: "1".into(),
        generation: Some(1),
        status,
        time: "2026-11-22T10:00:00Z".into(),
        deleted: false,
        object: None,
    }
}

pub fn lb_status(ip: &str) -> serde_json::Value {
    json!({"loadBalancer": {"ingress": [{"ip": ip, "ipMode": "Proxy"}]}})
}

pub fn key(byte: u8) -> EncryptionKey {
    EncryptionKey::from_bytes(&[byte; 32]).expect("a 32-byte key")
}

pub fn options(retention: usize, key: Option<EncryptionKey>) -> VaultOptions {
    VaultOptions { retention, key }
}

/// Same status twice is one version; a changed status or a new uid is a new one; the latest is
/// the newest; the history is oldest first.
pub async fn unchanged_status_writes_nothing(vault: &Vault) {
    let mut r = record("dedup", "web", "uid-1", lb_status("10.0.0.1"));
    assert_eq!(vault.save(&r).await.unwrap(), Saved::Written { version: 1 });
    r.resource_version = "2".into();
    r.time = "2026-11-22T10:00:05Z".into();
    assert_eq!(
        vault.save(&r).await.unwrap(),
        Saved::Unchanged,
        "a re-capture of the same state (e.g. after a crash) makes no new version"
    );
    r.status = lb_status("10.0.0.2");
    assert_eq!(vault.save(&r).await.unwrap(), Saved::Written { version: 2 });
    r.uid = "uid-2".into();
    assert_eq!(
        vault.save(&r).await.unwrap(),
        Saved::Written { version: 3 },
        "a new object with the same status is news"
    );
    let latest = vault.latest(&r.key()).await.unwrap().expect("a record");
    assert_eq!(latest, r);
    let history: Vec<Record> = vault
        .history(&r.key())
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.expect("readable"))
        .collect();
    assert_eq!(history.len(), 3);
    assert_eq!(history[0].status, lb_status("10.0.0.1"));
    assert_eq!(history[2].uid, "uid-2");
    assert!(vault.keys().await.unwrap().contains(&r.key()));
    let missing = ObjectKey::new("", "Service", Some("dedup"), "absent");
    assert_eq!(vault.latest(&missing).await.unwrap(), None);
    assert!(vault.history(&missing).await.unwrap().is_empty());
}

/// Only the newest `retention` versions are kept.
pub async fn retention_prunes_the_oldest(vault: &Vault) {
    let mut r = record("retention", "web", "uid-1", json!({}));
    for i in 0..7 {
        r.status = lb_status(&format!("10.0.0.{i}"));
        vault.save(&r).await.unwrap();
    }
    let versions: Vec<u64> = vault
        .versions(&r.key())
        .await
        .unwrap()
        .iter()
        .map(|v| v.version)
        .collect();
    assert_eq!(
        versions,
        vec![5, 6, 7],
        "retention 3 keeps the newest three"
    );
    let history = vault.history(&r.key()).await.unwrap();
    assert_eq!(
        history.last().unwrap().as_ref().unwrap().status,
        lb_status("10.0.0.6")
    );
}

/// A deletion is a new version (a tombstone) and the earlier status stays in the history.
pub async fn tombstone_keeps_history(vault: &Vault) {
    let mut r = record("tombstone", "web", "uid-1", lb_status("10.0.0.1"));
    vault.save(&r).await.unwrap();
    r.deleted = true;
    assert_eq!(vault.save(&r).await.unwrap(), Saved::Written { version: 2 });
    assert_eq!(
        vault.save(&r).await.unwrap(),
        Saved::Unchanged,
        "a second tombstone is nothing new"
    );
    let latest = vault.latest(&r.key()).await.unwrap().unwrap();
    assert!(latest.deleted);
    assert_eq!(
        latest.status,
        lb_status("10.0.0.1"),
        "the tombstone keeps the last status"
    );
    let history = vault.history(&r.key()).await.unwrap();
    assert_eq!(history.len(), 2);
    assert!(!history[0].as_ref().unwrap().deleted);
}

/// Encrypted records read back with the key; not with another key or none; the stored bytes
/// do not contain the status in clear.
pub async fn encryption_round_trip_and_wrong_key(
    encrypted: &Vault,
    wrong_key: &Vault,
    no_key: &Vault,
    raw: &dyn Backend,
) {
    let r = record("crypto", "web", "uid-1", lb_status("172.18.0.7"));
    encrypted.save(&r).await.unwrap();
    assert_eq!(encrypted.latest(&r.key()).await.unwrap(), Some(r.clone()));
    let stored = raw.read(&r.key(), 1).await.unwrap();
    assert!(
        !String::from_utf8_lossy(&stored).contains("172.18.0.7"),
        "status is not stored in clear"
    );
    match wrong_key.latest(&r.key()).await {
        Err(Error::WrongKey { .. }) => {}
        other => panic!("a wrong key must be a clear error, got {other:?}"),
    }
    match no_key.latest(&r.key()).await {
        Err(Error::KeyRequired { .. }) => {}
        other => panic!("no key must be a clear error, got {other:?}"),
    }
    let mut changed = r.clone();
    changed.status = lb_status("172.18.0.8");
    match wrong_key.save(&changed).await {
        Err(Error::WrongKey { .. }) => {}
        other => panic!("one key per vault: saving with another key must fail, got {other:?}"),
    }
    let plain = encrypted.stored_size(&r.key()).await.unwrap();
    assert_eq!(plain.versions, 1);
    assert_eq!(
        plain.bytes as usize,
        serde_json::to_vec(&r).unwrap().len() + vigil_vault::ENVELOPE_OVERHEAD
    );
}

/// A truncated or garbage newest record is reported and skipped: `latest` returns the previous
/// good one, `history` shows the bad one as `Corrupt`, and a save still works.
pub async fn corrupt_record_is_skipped(vault: &Vault, raw: &dyn Backend) {
    let r = record("corrupt", "web", "uid-1", lb_status("10.0.0.1"));
    vault.save(&r).await.unwrap();
    let good = raw.read(&r.key(), 1).await.unwrap();
    raw.write(&r.key(), 2, good[..good.len() / 2].to_vec())
        .await
        .unwrap();
    let before = vault.corrupt_records();
    assert_eq!(vault.latest(&r.key()).await.unwrap(), Some(r.clone()));
    assert!(vault.corrupt_records() > before, "the skip is counted");
    let history = vault.history(&r.key()).await.unwrap();
    assert!(
        matches!(history[1], Err(Error::Corrupt { .. })),
        "{history:?}"
    );
    // A record of another object copied here is not applied to this one.
    let other = record("corrupt", "other", "uid-9", lb_status("10.9.9.9"));
    raw.write(&r.key(), 3, serde_json::to_vec(&other).unwrap())
        .await
        .unwrap();
    assert_eq!(vault.latest(&r.key()).await.unwrap(), Some(r.clone()));
    let mut changed = r.clone();
    changed.status = lb_status("10.0.0.2");
    assert_eq!(
        vault.save(&changed).await.unwrap(),
        Saved::Written { version: 4 }
    );
    assert_eq!(vault.latest(&r.key()).await.unwrap(), Some(changed));
}

/// Concurrent saves of one object never lose a version or reuse a number.
pub async fn concurrent_saves_of_one_object(vault: &Vault) {
    let mut tasks = Vec::new();
    for i in 0..8 {
        let vault = vault.clone();
        tasks.push(tokio::spawn(async move {
            let r = record(
                "concurrent",
                "web",
                "uid-1",
                lb_status(&format!("10.1.0.{i}")),
            );
            vault.save(&r).await.unwrap()
        }));
    }
    let mut versions = Vec::new();
    for t in tasks {
        if let Saved::Written { version } = t.await.unwrap() {
            versions.push(version);
        }
    }
    versions.sort();
    assert_eq!(versions, (1..=8).collect::<Vec<_>>());
}
