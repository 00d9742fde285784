//! The directory backend: the shared scenarios, plus what only a directory can show (a crash
//! before the rename leaves a temporary file that nothing reads; the on-disk layout).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::path::PathBuf;

use common::*;
use vigil_vault::{Backend, DirBackend, Vault, VaultOptions};

/// A fresh directory under the system temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(label: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "vigil-vault-{label}-{}-{:x}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&path).unwrap();
        Self(path)
    }
    fn location(&self) -> &str {
        self.0.to_str().unwrap()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

async fn open(dir: &TempDir, options: VaultOptions) -> Vault {
    Vault::open(dir.location(), options).await.unwrap()
}

#[tokio::test]
async fn unchanged_status_writes_nothing_in_a_directory() {
    let dir = TempDir::new("dedup");
    unchanged_status_writes_nothing(&open(&dir, VaultOptions::default()).await).await;
}

#[tokio::test]
async fn retention_prunes_the_oldest_in_a_directory() {
    let dir = TempDir::new("retention");
    retention_prunes_the_oldest(&open(&dir, options(3, None)).await).await;
}

#[tokio::test]
async fn retention_zero_keeps_every_version() {
    let dir = TempDir::new("keep-all");
    let vault = open(&dir, options(0, None)).await;
    let mut r = record("keep-all", "web", "uid-1", lb_status("10.0.0.0"));
    for i in 0..15 {
        r.status = lb_status(&format!("10.0.0.{i}"));
        vault.save(&r).await.unwrap();
    }
    assert_eq!(vault.versions(&r.key()).await.unwrap().len(), 15);
}

#[tokio::test]
async fn tombstone_keeps_history_in_a_directory() {
    let dir = TempDir::new("tombstone");
    tombstone_keeps_history(&open(&dir, VaultOptions::default()).await).await;
}

#[tokio::test]
async fn encryption_round_trip_and_wrong_key_in_a_directory() {
    let dir = TempDir::new("crypto");
    let raw = DirBackend::open(dir.location()).await.unwrap();
    encryption_round_trip_and_wrong_key(
        &open(&dir, options(10, Some(key(1)))).await,
        &open(&dir, options(10, Some(key(2)))).await,
        &open(&dir, options(10, None)).await,
        &raw,
    )
    .await;
}

#[tokio::test]
async fn corrupt_record_is_skipped_in_a_directory() {
    let dir = TempDir::new("corrupt");
    let raw = DirBackend::open(dir.location()).await.unwrap();
    corrupt_record_is_skipped(&open(&dir, VaultOptions::default()).await, &raw).await;
}

#[tokio::test]
async fn concurrent_saves_of_one_object_in_a_directory() {
    let dir = TempDir::new("concurrent");
    concurrent_saves_of_one_object(&open(&dir, VaultOptions::default()).await).await;
}

#[tokio::test]
async fn a_crash_before_the_rename_leaves_nothing_readable_behind() {
    let dir = TempDir::new("crash");
    let vault = open(&dir, VaultOptions::default()).await;
    let r = record("crash", "web", "uid-1", lb_status("10.0.0.1"));
    vault.save(&r).await.unwrap();
    let folder = dir.0.join("_core/Service/crash/web");
    // What a writer killed between write and rename leaves: a half-written temporary file.
    let temp = folder.join(".00000000000000000002.json.tmp-999-00000000deadbeef");
    std::fs::write(&temp, b"{\"apiVersion\":\"v1\",\"kind\":\"Serv").unwrap();
    assert_eq!(vault.latest(&r.key()).await.unwrap(), Some(r.clone()));
    assert_eq!(vault.history(&r.key()).await.unwrap().len(), 1);
    assert_eq!(
        vault.corrupt_records(),
        0,
        "a temporary file is not a record"
    );
    // The next write takes version 2 despite the leftover, and leaves no temp file of its own.
    let mut changed = r.clone();
    changed.status = lb_status("10.0.0.2");
    assert_eq!(
        vault.save(&changed).await.unwrap(),
        vigil_vault::Saved::Written { version: 2 }
    );
    let mut names: Vec<String> = std::fs::read_dir(&folder)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        vec![
            ".00000000000000000002.json.tmp-999-00000000deadbeef".to_owned(),
            "00000000000000000001.json".to_owned(),
            "00000000000000000002.json".to_owned(),
        ],
        "a young temp file may be another writer's and is left alone; ours is renamed"
    );
    assert_eq!(vault.latest(&r.key()).await.unwrap(), Some(changed));
}

#[tokio::test]
async fn layout_is_one_folder_per_object_and_keys_list_them() {
    let dir = TempDir::new("layout");
    let vault = open(&dir, VaultOptions::default()).await;
    let mut cluster = record(
        "x",
        "my-cluster",
        "uid-1",
        serde_json::json!({"apiServerURL": "https://x"}),
    );
    cluster.api_version = "infra.example.com/v1alpha1".into();
    cluster.kind = "KubernetesCluster".into();
    cluster.namespace = None;
    vault.save(&cluster).await.unwrap();
    vault
        .save(&record(
            "argocd",
            "argocd-server",
            "uid-2",
            lb_status("172.18.0.7"),
        ))
        .await
        .unwrap();
    assert!(
        dir.0
            .join(
                "infra.example.com/KubernetesCluster/_cluster/my-cluster/00000000000000000001.json"
            )
            .is_file()
    );
    assert!(
        dir.0
            .join("_core/Service/argocd/argocd-server/00000000000000000001.json")
            .is_file()
    );
    let keys = vault.keys().await.unwrap();
    assert_eq!(keys.len(), 2);
    assert!(keys.contains(&cluster.key()));
    vault.check().await.unwrap();
    let raw = DirBackend::open(dir.location()).await.unwrap();
    assert_eq!(raw.keys().await.unwrap(), keys);
}

#[tokio::test]
async fn unknown_schemes_are_refused() {
    let err = Vault::open("gs://bucket/x", VaultOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("unknown scheme"), "{err}");
}
