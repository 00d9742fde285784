//! The S3 backend against a real S3-compatible server: the shared scenarios, a missing bucket and
//! an unreachable endpoint. Start the server with `eval "$(.ci/s3-server start)"` (`.ci/run`
//! does); without `VIGIL_TEST_S3_ENDPOINT` the server tests print a note and skip.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::common;

use std::io::Write as _;

use common::*;
use vigil_vault::{Error, S3Backend, Vault, VaultOptions};

/// `s3://<test bucket>/<unique prefix>?endpoint=…`, or None (with a note) when no server is set.
fn location(test: &str) -> Option<String> {
    let Ok(endpoint) = std::env::var("VIGIL_TEST_S3_ENDPOINT") else {
        // Straight to stderr, past the test harness's capture, so the skip is seen.
        let _ = writeln!(
            std::io::stderr(),
            "note: skipping {test}: no S3 server (run `eval \"$(.ci/s3-server start)\"` to test the S3 backend)"
        );
        return None;
    };
    let bucket = std::env::var("VIGIL_TEST_S3_BUCKET").unwrap_or_else(|_| "vigil-test".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    Some(format!(
        "s3://{bucket}/{test}-{}-{nanos}?endpoint={endpoint}",
        std::process::id()
    ))
}

async fn open(location: &str, options: VaultOptions) -> Vault {
    Vault::open(location, options).await.unwrap()
}

#[tokio::test]
async fn unchanged_status_writes_nothing_in_s3() {
    let Some(at) = location("dedup") else { return };
    let vault = open(&at, VaultOptions::default()).await;
    vault.check().await.unwrap();
    unchanged_status_writes_nothing(&vault).await;
}

#[tokio::test]
async fn retention_prunes_the_oldest_in_s3() {
    let Some(at) = location("retention") else {
        return;
    };
    retention_prunes_the_oldest(&open(&at, options(3, None)).await).await;
}

#[tokio::test]
async fn tombstone_keeps_history_in_s3() {
    let Some(at) = location("tombstone") else {
        return;
    };
    tombstone_keeps_history(&open(&at, VaultOptions::default()).await).await;
}

#[tokio::test]
async fn encryption_round_trip_and_wrong_key_in_s3() {
    let Some(at) = location("crypto") else { return };
    let raw = S3Backend::new(&at).unwrap();
    encryption_round_trip_and_wrong_key(
        &open(&at, options(10, Some(key(1)))).await,
        &open(&at, options(10, Some(key(2)))).await,
        &open(&at, options(10, None)).await,
        &raw,
    )
    .await;
}

#[tokio::test]
async fn corrupt_record_is_skipped_in_s3() {
    let Some(at) = location("corrupt") else {
        return;
    };
    let raw = S3Backend::new(&at).unwrap();
    corrupt_record_is_skipped(&open(&at, VaultOptions::default()).await, &raw).await;
}

#[tokio::test]
async fn concurrent_saves_of_one_object_in_s3() {
    let Some(at) = location("concurrent") else {
        return;
    };
    concurrent_saves_of_one_object(&open(&at, VaultOptions::default()).await).await;
}

#[tokio::test]
async fn keys_list_every_object_in_s3() {
    let Some(at) = location("keys") else { return };
    let vault = open(&at, VaultOptions::default()).await;
    let mut cluster = record(
        "x",
        "my-cluster",
        "uid-1",
        serde_json::json!({"masterVersion": "1.28.23"}),
    );
    cluster.api_version = "infra.example.com/v1alpha1".into();
    cluster.kind = "KubernetesCluster".into();
    cluster.namespace = None;
    vault.save(&cluster).await.unwrap();
    let svc = record("argocd", "argocd-server", "uid-2", lb_status("172.18.0.7"));
    vault.save(&svc).await.unwrap();
    let mut expected = vec![cluster.key(), svc.key()];
    expected.sort();
    assert_eq!(vault.keys().await.unwrap(), expected);
}

#[tokio::test]
async fn a_missing_bucket_is_a_clear_error() {
    let Some(at) = location("missing") else {
        return;
    };
    let at = at.replacen("s3://", "s3://no-such-bucket-", 1);
    let vault = open(&at, VaultOptions::default()).await;
    match vault.check().await {
        Err(Error::NoSuchBucket { bucket, .. }) => assert!(bucket.starts_with("no-such-bucket-")),
        other => panic!("expected NoSuchBucket, got {other:?}"),
    }
    let r = record("missing", "web", "uid-1", lb_status("10.0.0.1"));
    match vault.save(&r).await {
        Err(Error::NoSuchBucket { .. }) => {}
        other => panic!("expected NoSuchBucket on save, got {other:?}"),
    }
}

#[tokio::test]
async fn an_unreachable_endpoint_is_a_clear_error() {
    // Port 1 on loopback: nothing listens there; needs no S3 server.
    let vault = open(
        "s3://b/p?endpoint=http://127.0.0.1:1",
        VaultOptions::default(),
    )
    .await;
    match vault.check().await {
        Err(Error::Unreachable { reason, .. }) => assert!(!reason.is_empty()),
        other => panic!("expected Unreachable, got {other:?}"),
    }
}
