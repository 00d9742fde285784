//! The local provider without a real sandbox (those tests live in `crates/vigil/tests`, where the
//! `vigil` binary is built): ids that are not ours, a program that will not start, a crash loop.
#![cfg(target_os = "linux")]

use std::path::PathBuf;
use std::time::Duration;

use vigil_provider::contract;
use vigil_provider::local::{LocalConfig, LocalProvider};
use vigil_provider::{ClusterProvider, ClusterState, Deletion, ProviderError};

struct Root(PathBuf);

impl Root {
    fn new(test: &str) -> Self {
        let path = std::env::temp_dir().join(format!(
            "vigil-provider-local-{test}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&path);
        Self(path)
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn ids_that_are_not_ours_never_name_a_path() {
    let root = Root::new("ids");
    let provider = LocalProvider::new(LocalConfig::new(root.0.join("clusters"), "/nonexistent"))
        .expect("provider");
    for id in ["../escape", "c-../../x", "", "c-"] {
        assert_eq!(provider.get(id).await.expect("get"), None);
        assert_eq!(provider.delete(id).await.expect("delete"), Deletion::Gone);
        assert!(matches!(
            provider.upgrade(id, "1.30").await,
            Err(ProviderError::NotFound(_))
        ));
        assert!(matches!(
            provider.set_addons(id, &[]).await,
            Err(ProviderError::NotFound(_))
        ));
    }
    assert!(!root.0.exists(), "something was written");
}

#[tokio::test]
async fn a_program_that_cannot_start_is_unavailable_and_a_crash_loop_fails_with_its_log() {
    let root = Root::new("crash");
    let missing =
        LocalProvider::new(LocalConfig::new(&root.0, "/nonexistent/vigil")).expect("provider");
    let request = contract::request("u-1", "broken", "1.30", &[]);
    match missing.create(&request).await {
        Err(ProviderError::Unavailable(message)) => {
            assert!(message.contains("/nonexistent/vigil"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // The record was written first, so the next call finds the cluster and tries again.
    assert!(missing.find(&request.identity).await.is_err());

    let mut config = LocalConfig::new(&root.0, "/bin/sh");
    config.args = vec![
        "-c".into(),
        "echo 'cannot listen on 127.0.0.1: address in use' >&2; exit 1".into(),
        "sh".into(),
    ];
    let crashing = LocalProvider::new(config).expect("provider");
    let mut last = None;
    for _ in 0..6 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        last = crashing
            .get(&LocalProvider::id_for(&request.identity))
            .await
            .expect("get");
    }
    let cluster = last.expect("exists");
    assert_eq!(cluster.state, ClusterState::Failed, "{cluster:?}");
    let message = cluster.message.unwrap_or_default();
    assert!(message.contains("address in use"), "{message}");
    assert_eq!(
        crashing.delete(&cluster.id).await.expect("delete"),
        Deletion::Gone
    );
    assert!(crashing.clusters().expect("clusters").is_empty());
}
