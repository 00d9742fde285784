//! Create, get, update and delete of a built-in kind.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, PostParams};
use vigil_testenv::TestEnv;

use crate::support::config_map;

#[tokio::test]
async fn create_get_update_delete_round_trip() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = api
        .create(&PostParams::default(), &config_map("a"))
        .await
        .expect("create");
    let meta = &created.metadata;
    assert!(meta.uid.is_some());
    assert!(meta.creation_timestamp.is_some());
    let rv1: u64 = meta
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("numeric rv");

    let mut fetched = api.get("a").await.expect("get");
    assert_eq!(
        fetched
            .data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("value")
    );
    fetched
        .data
        .get_or_insert_default()
        .insert("more".into(), "x".into());
    let updated = api
        .replace("a", &PostParams::default(), &fetched)
        .await
        .expect("update");
    let rv2: u64 = updated
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("numeric rv");
    assert!(rv2 > rv1);

    // A second replace with the stale object conflicts.
    let err = api
        .replace("a", &PostParams::default(), &fetched)
        .await
        .expect_err("stale");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );

    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete");
    let err = api.get("a").await.expect_err("gone");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 404 && s.reason == "NotFound"),
        "{err:?}"
    );
    env.cleanup().await;
}
