//! The status subresource of built-in kinds (Service, Deployment) and metadata.generation.
//!
//! Status writes use a ClusterIP Service: no controller of a real cluster writes its status.
//! Deployments are created with 0 replicas, so their controller starts no pods.

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use vigil_testenv::TestEnv;

use crate::support::{config_map, raw_request, rv_of};

fn condition(reason: &str) -> Value {
    json!({
        "type": "Tested", "status": "True", "reason": reason, "message": "set by the conformance suite",
        "lastTransitionTime": "2024-01-01T00:00:00Z"
    })
}

fn service(name: &str) -> Service {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": "original"}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]},
        "status": {"conditions": [condition("FromCreate")]}
    }))
    .expect("Service")
}

/// The reasons of the service's status conditions.
fn condition_reasons(svc: &Service) -> Vec<String> {
    svc.status
        .iter()
        .flat_map(|s| s.conditions.iter().flatten())
        .map(|c| c.reason.clone())
        .collect()
}

fn selector_app(svc: &Service) -> Option<String> {
    svc.spec.as_ref()?.selector.as_ref()?.get("app").cloned()
}

#[tokio::test]
async fn create_drops_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Service>();
    let created = api
        .create(&PostParams::default(), &service("svc"))
        .await
        .expect("create");
    assert!(
        condition_reasons(&created).is_empty(),
        "status from the create body was kept: {:?}",
        created.status
    );
    let fetched = api.get_status("svc").await.expect("get status");
    assert!(condition_reasons(&fetched).is_empty());
    env.cleanup().await;
}

#[tokio::test]
async fn put_on_the_main_resource_ignores_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Service>();
    api.create(&PostParams::default(), &service("svc"))
        .await
        .expect("create");
    let mut svc = api.get("svc").await.expect("get");
    let before = rv_of(&svc);
    svc.metadata
        .labels
        .get_or_insert_default()
        .insert("touched".into(), "yes".into());
    svc.status = Some(
        serde_json::from_value(json!({"conditions": [condition("FromMainPut")]}))
            .expect("ServiceStatus"),
    );

    let updated = api
        .replace("svc", &PostParams::default(), &svc)
        .await
        .expect("replace");
    assert!(rv_of(&updated) > before);
    assert_eq!(
        updated
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("touched"))
            .map(String::as_str),
        Some("yes")
    );
    assert!(
        condition_reasons(&updated).is_empty(),
        "status changed through the main resource: {:?}",
        updated.status
    );
    assert!(condition_reasons(&api.get("svc").await.expect("get")).is_empty());

    // A merge patch of the main resource ignores status too.
    let patch = Patch::Merge(
        json!({"metadata": {"labels": {"patched": "yes"}}, "status": {"conditions": [condition("FromMainPatch")]}}),
    );
    let patched = api
        .patch("svc", &PatchParams::default(), &patch)
        .await
        .expect("patch");
    assert!(
        condition_reasons(&patched).is_empty(),
        "status changed through the main resource: {:?}",
        patched.status
    );
    env.cleanup().await;
}

#[tokio::test]
async fn put_on_status_changes_only_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Service>();
    api.create(&PostParams::default(), &service("svc"))
        .await
        .expect("create");

    // GET /status returns the whole object.
    let mut svc = api.get_status("svc").await.expect("get status");
    assert_eq!(
        selector_app(&svc).as_deref(),
        Some("original"),
        "GET /status includes spec"
    );
    let before = rv_of(&svc);
    svc.spec.as_mut().expect("spec").selector =
        Some([("app".to_owned(), "from-status-put".to_owned())].into());
    svc.status = Some(
        serde_json::from_value(json!({"conditions": [condition("FromStatusPut")]}))
            .expect("ServiceStatus"),
    );

    let updated = api
        .replace_status("svc", &PostParams::default(), &svc)
        .await
        .expect("replace status");
    assert_eq!(condition_reasons(&updated), ["FromStatusPut"]);
    assert_eq!(
        selector_app(&updated).as_deref(),
        Some("original"),
        "spec changed through /status"
    );
    assert!(
        rv_of(&updated) > before,
        "a status write changes the resourceVersion"
    );

    let fetched = api.get("svc").await.expect("get");
    assert_eq!(condition_reasons(&fetched), ["FromStatusPut"]);
    assert_eq!(selector_app(&fetched).as_deref(), Some("original"));
    assert_eq!(rv_of(&fetched), rv_of(&updated));

    // A stale resourceVersion on /status conflicts like on the main resource.
    let err = api
        .replace_status("svc", &PostParams::default(), &svc)
        .await
        .expect_err("stale status write");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409 && s.reason == "Conflict"),
        "{err:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn patch_on_status_changes_only_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Service>();
    let created = api
        .create(&PostParams::default(), &service("svc"))
        .await
        .expect("create");
    let patch = Patch::Merge(json!({
        "spec": {"selector": {"app": "from-status-patch"}},
        "status": {"conditions": [condition("FromStatusPatch")]}
    }));
    let patched = api
        .patch_status("svc", &PatchParams::default(), &patch)
        .await
        .expect("patch status");
    assert_eq!(condition_reasons(&patched), ["FromStatusPatch"]);
    assert_eq!(
        selector_app(&patched).as_deref(),
        Some("original"),
        "spec changed through /status"
    );
    assert!(rv_of(&patched) > rv_of(&created));
    let fetched = api.get("svc").await.expect("get");
    assert_eq!(condition_reasons(&fetched), ["FromStatusPatch"]);
    assert_eq!(selector_app(&fetched).as_deref(), Some("original"));
    env.cleanup().await;
}

fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]}
            }
        },
        "status": {"replicas": 5, "readyReplicas": 5, "observedGeneration": 9, "collisionCount": 2}
    }))
    .expect("Deployment")
}

#[tokio::test]
async fn deployment_create_drops_status_and_starts_at_generation_one() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Deployment>();
    let created = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));
    assert_eq!(
        created.status.clone().unwrap_or_default(),
        DeploymentStatus::default(),
        "status from the create body was kept"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn generation_counts_spec_changes_not_labels_or_status() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Deployment>();
    let pp = PatchParams::default();
    let created = api
        .create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");
    assert_eq!(created.metadata.generation, Some(1));

    let labelled = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"extra": "yes"}}})),
        )
        .await
        .expect("metadata patch");
    assert!(rv_of(&labelled) > rv_of(&created));
    assert_eq!(
        labelled.metadata.generation,
        Some(1),
        "metadata changes do not bump generation"
    );

    let status = api
        .patch_status(
            "web",
            &pp,
            &Patch::Merge(json!({"status": {"collisionCount": 7}})),
        )
        .await
        .expect("status patch");
    assert!(rv_of(&status) > rv_of(&labelled));
    assert_eq!(
        status.status.as_ref().and_then(|s| s.collision_count),
        Some(7)
    );
    assert_eq!(
        status.metadata.generation,
        Some(1),
        "status changes do not bump generation"
    );

    let spec = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(
        spec.metadata.generation,
        Some(2),
        "a spec change bumps generation"
    );
    let again = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"minReadySeconds": 5}})),
        )
        .await
        .expect("no-op spec patch");
    assert_eq!(
        again.metadata.generation,
        Some(2),
        "an unchanged spec does not bump generation"
    );
    let more = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"spec": {"minReadySeconds": 6}})),
        )
        .await
        .expect("spec patch");
    assert_eq!(more.metadata.generation, Some(3));

    // Deployments (only) also count annotation changes: their controller copies annotations
    // to ReplicaSets.
    let annotated = api
        .patch(
            "web",
            &pp,
            &Patch::Merge(json!({"metadata": {"annotations": {"note": "x"}}})),
        )
        .await
        .expect("annotation patch");
    assert_eq!(
        annotated.metadata.generation,
        Some(4),
        "a Deployment annotation change bumps generation"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn config_maps_have_no_generation_and_no_status_subresource() {
    let env = TestEnv::start().await.expect("test env");
    let api: Api<ConfigMap> = env.api();
    let created = api
        .create(&PostParams::default(), &config_map("plain"))
        .await
        .expect("create");
    assert_eq!(
        created.metadata.generation, None,
        "ConfigMaps do not track generation"
    );
    let mut changed = created.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("key".into(), "changed".into());
    let updated = api
        .replace("plain", &PostParams::default(), &changed)
        .await
        .expect("update");
    assert_eq!(updated.metadata.generation, None);

    let path = format!(
        "/api/v1/namespaces/{}/configmaps/plain/status",
        env.namespace()
    );
    let response = raw_request(&env.client(), "GET", &path, None, None).await;
    assert_eq!(
        response.status, 404,
        "ConfigMaps have no status subresource: {}",
        response.text
    );
    env.cleanup().await;
}
