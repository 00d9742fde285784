//! API errors: the `Status` objects (code, reason, message, details) for 404, 405, 409, 413,
//! 422, 400 and 403 answers, as kube-apiserver writes them.

use std::sync::atomic::{AtomicUsize, Ordering};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::response::StatusSummary;
use serde_json::json;
use vigil_testenv::TestEnv;

use crate::support::{
    config_map, expect_status, is_gone, poll_until, raw_request, remove_finalizer,
};

/// Asserts `details.name`, `details.kind` and `details.group` of a Status.
fn assert_details(status: &kube::core::Status, name: &str, kind: &str) {
    let details = status
        .details
        .as_ref()
        .unwrap_or_else(|| panic!("Status without details: {status:?}"));
    assert_eq!(
        (
            details.name.as_str(),
            details.kind.as_str(),
            details.group.as_str()
        ),
        (name, kind, ""),
        "{status:?}"
    );
}

#[tokio::test]
async fn missing_object_is_not_found_for_get_delete_update_and_patch() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let expected = r#"configmaps "missing" not found"#;

    let status = expect_status(api.get("missing").await, 404, "NotFound");
    assert_eq!(status.message, expected);
    assert_eq!(status.status, Some(StatusSummary::Failure));
    assert_details(&status, "missing", "configmaps");

    let status = expect_status(
        api.delete("missing", &DeleteParams::default()).await,
        404,
        "NotFound",
    );
    assert_eq!(status.message, expected);
    assert_details(&status, "missing", "configmaps");

    // ConfigMaps do not allow create-on-update: a PUT of a missing object is a 404.
    let status = expect_status(
        api.replace("missing", &PostParams::default(), &config_map("missing"))
            .await,
        404,
        "NotFound",
    );
    assert_eq!(status.message, expected);

    let patch = Patch::Merge(json!({"data": {"k": "v"}}));
    let status = expect_status(
        api.patch("missing", &PatchParams::default(), &patch).await,
        404,
        "NotFound",
    );
    assert_eq!(status.message, expected);
    env.cleanup().await;
}

#[tokio::test]
async fn unknown_resource_path_is_not_found() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let ns = env.namespace();
    for path in [
        format!("/api/v1/namespaces/{ns}/nosuchthings"),
        format!("/api/v1/namespaces/{ns}/nosuchthings/x"),
        "/api/v1/nosuchthings".to_owned(),
    ] {
        let response = raw_request(&client, "GET", &path, None, None).await;
        assert_eq!(response.status, 404, "GET {path}: {}", response.text);
        // Inside a served group/version the server answers with a Status object.
        assert_eq!(
            response.json["kind"], "Status",
            "GET {path}: {}",
            response.text
        );
        assert_eq!(
            response.json["reason"], "NotFound",
            "GET {path}: {}",
            response.text
        );
        assert_eq!(response.json["code"], 404, "GET {path}: {}", response.text);
    }
    env.cleanup().await;
}

#[tokio::test]
async fn creating_twice_is_already_exists() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("twice"))
        .await
        .expect("first create");
    let status = expect_status(
        api.create(&PostParams::default(), &config_map("twice"))
            .await,
        409,
        "AlreadyExists",
    );
    assert_eq!(status.message, r#"configmaps "twice" already exists"#);
    assert_eq!(status.status, Some(StatusSummary::Failure));
    assert_details(&status, "twice", "configmaps");
    env.cleanup().await;
}

#[tokio::test]
async fn stale_resource_version_on_put_is_conflict() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = api
        .create(&PostParams::default(), &config_map("stale"))
        .await
        .expect("create");

    let mut fresh = created.clone();
    fresh
        .data
        .get_or_insert_default()
        .insert("key".into(), "second".into());
    api.replace("stale", &PostParams::default(), &fresh)
        .await
        .expect("first update");

    let mut stale = created.clone();
    stale
        .data
        .get_or_insert_default()
        .insert("key".into(), "third".into());
    let status = expect_status(
        api.replace("stale", &PostParams::default(), &stale).await,
        409,
        "Conflict",
    );
    assert_eq!(
        status.message,
        r#"Operation cannot be fulfilled on configmaps "stale": the object has been modified; please apply your changes to the latest version and try again"#
    );
    assert_details(&status, "stale", "configmaps");

    // The losing write changed nothing.
    let stored = api.get("stale").await.expect("get");
    assert_eq!(
        stored
            .data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("second")
    );
    env.cleanup().await;
}

#[tokio::test]
async fn invalid_name_is_unprocessable_with_field_causes() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let status = expect_status(
        api.create(&PostParams::default(), &config_map("Bad_Name"))
            .await,
        422,
        "Invalid",
    );
    assert!(
        status.message.starts_with(
            r#"ConfigMap "Bad_Name" is invalid: metadata.name: Invalid value: "Bad_Name""#
        ),
        "message: {}",
        status.message
    );
    // For Invalid the details name the Kind (not the resource).
    assert_details(&status, "Bad_Name", "ConfigMap");
    let causes = &status.details.as_ref().expect("details").causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field == "metadata.name" && c.reason == "FieldValueInvalid"),
        "causes: {causes:?}"
    );
    assert!(
        is_gone(&api, "Bad_Name").await,
        "the invalid object must not be stored"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn every_invalid_field_is_reported() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let cm: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "Bad_Name"},
        "data": {"bad key!": "v"}
    }))
    .expect("ConfigMap");
    let status = expect_status(
        api.create(&PostParams::default(), &cm).await,
        422,
        "Invalid",
    );
    let fields: Vec<&str> = status
        .details
        .as_ref()
        .expect("details")
        .causes
        .iter()
        .map(|c| c.field.as_str())
        .collect();
    assert!(fields.contains(&"metadata.name"), "causes: {fields:?}");
    assert!(fields.contains(&"data[bad key!]"), "causes: {fields:?}");
    env.cleanup().await;
}

#[tokio::test]
async fn pod_without_containers_is_invalid() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Pod>();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "empty"},
        "spec": {"containers": []}
    }))
    .expect("Pod");
    let status = expect_status(
        api.create(&PostParams::default(), &pod).await,
        422,
        "Invalid",
    );
    assert!(
        status.message.starts_with(r#"Pod "empty" is invalid: "#),
        "message: {}",
        status.message
    );
    assert!(
        status.message.contains("spec.containers: Required value"),
        "message: {}",
        status.message
    );
    assert_details(&status, "empty", "Pod");
    let causes = &status.details.as_ref().expect("details").causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field == "spec.containers" && c.reason == "FieldValueRequired"),
        "causes: {causes:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn namespace_in_body_must_match_url() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let expected =
        "the namespace of the provided object does not match the namespace sent on the request";

    let mut cm = config_map("elsewhere");
    cm.metadata.namespace = Some("some-other-namespace".into());
    let status = expect_status(
        api.create(&PostParams::default(), &cm).await,
        400,
        "BadRequest",
    );
    assert_eq!(status.message, expected);
    assert!(
        is_gone(&api, "elsewhere").await,
        "the object must not be created"
    );

    // The same on update.
    let mut stored = api
        .create(&PostParams::default(), &config_map("here"))
        .await
        .expect("create");
    stored.metadata.namespace = Some("some-other-namespace".into());
    let status = expect_status(
        api.replace("here", &PostParams::default(), &stored).await,
        400,
        "BadRequest",
    );
    assert_eq!(status.message, expected);
    env.cleanup().await;
}

#[tokio::test]
async fn malformed_json_is_bad_request() {
    let env = TestEnv::start().await.expect("test env");
    let path = format!("/api/v1/namespaces/{}/configmaps", env.namespace());
    let body = br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "#.to_vec();
    let response = raw_request(
        &env.client(),
        "POST",
        &path,
        Some("application/json"),
        Some(body),
    )
    .await;
    assert_eq!(response.status, 400, "{}", response.text);
    assert_eq!(response.json["kind"], "Status", "{}", response.text);
    assert_eq!(response.json["reason"], "BadRequest", "{}", response.text);
    assert_eq!(response.json["code"], 400, "{}", response.text);
    env.cleanup().await;
}

#[tokio::test]
async fn unsupported_verbs_are_method_not_allowed() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // Namespaces have no deletecollection.
    let response = raw_request(&client, "DELETE", "/api/v1/namespaces", None, None).await;
    assert_eq!(
        response.status, 405,
        "DELETE /api/v1/namespaces: {}",
        response.text
    );
    assert_eq!(
        response.json["reason"], "MethodNotAllowed",
        "{}",
        response.text
    );
    assert_eq!(
        response.json["message"],
        "the server does not allow this method on the requested resource"
    );
    let ns: Api<Namespace> = Api::all(client.clone());
    assert!(
        ns.get(env.namespace()).await.is_ok(),
        "the test namespace must survive"
    );

    // POST goes to collections, never to an object path.
    let path = format!("/api/v1/namespaces/{}/configmaps/posted", env.namespace());
    let body = serde_json::to_vec(&config_map("posted")).expect("json");
    let response = raw_request(&client, "POST", &path, Some("application/json"), Some(body)).await;
    assert_eq!(response.status, 405, "POST {path}: {}", response.text);
    assert_eq!(
        response.json["reason"], "MethodNotAllowed",
        "{}",
        response.text
    );
    assert!(is_gone(&env.api::<ConfigMap>(), "posted").await);
    env.cleanup().await;
}

#[tokio::test]
async fn body_over_three_mebibytes_is_too_large() {
    let env = TestEnv::start().await.expect("test env");
    let path = format!("/api/v1/namespaces/{}/configmaps", env.namespace());
    let big = "x".repeat(3 * 1024 * 1024 + 1024);
    let body = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "huge"},
        "data": {"big": big}
    }))
    .expect("json");
    let response = raw_request(
        &env.client(),
        "POST",
        &path,
        Some("application/json"),
        Some(body),
    )
    .await;
    assert_eq!(
        response.status,
        413,
        "{}",
        response.text.chars().take(300).collect::<String>()
    );
    assert_eq!(
        response.json["reason"], "RequestEntityTooLarge",
        "{}",
        response.text
    );
    assert!(is_gone(&env.api::<ConfigMap>(), "huge").await);
    env.cleanup().await;
}

#[tokio::test]
async fn create_in_missing_namespace_is_not_found() {
    let env = TestEnv::start().await.expect("test env");
    let missing = format!("{}-missing", env.namespace());
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &missing);
    let status = expect_status(
        api.create(&PostParams::default(), &config_map("orphan"))
            .await,
        404,
        "NotFound",
    );
    assert_eq!(
        status.message,
        format!(r#"namespaces "{missing}" not found"#)
    );
    assert_details(&status, &missing, "namespaces");
    env.cleanup().await;
}

#[tokio::test]
async fn create_in_terminating_namespace_is_forbidden() {
    const HOLD: &str = "example.com/hold";
    let env = TestEnv::start().await.expect("test env");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let name = format!("{}-term", env.namespace());
    let ns: Namespace = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {vigil_testenv::TEST_LABEL: "true"}, "finalizers": [HOLD]}
    }))
    .expect("Namespace");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete namespace");

    // The finalizer keeps the namespace Terminating. Admission may lag the deletion briefly.
    let api: Api<ConfigMap> = Api::namespaced(env.client(), &name);
    let attempt = AtomicUsize::new(0);
    let status = poll_until(
        "creates in the terminating namespace to be refused",
        || async {
            let cm_name = format!("late-{}", attempt.fetch_add(1, Ordering::SeqCst));
            match api
                .create(&PostParams::default(), &config_map(&cm_name))
                .await
            {
                Ok(_) => None,
                Err(kube::Error::Api(status)) => Some((cm_name, *status)),
                Err(e) => panic!("create {cm_name}: {e:?}"),
            }
        },
    )
    .await;
    let (cm_name, status) = status;
    assert_eq!(
        (status.code, status.reason.as_str()),
        (403, "Forbidden"),
        "{status:?}"
    );
    assert_eq!(
        status.message,
        format!(
            r#"configmaps "{cm_name}" is forbidden: unable to create new content in namespace {name} because it is being terminated"#
        )
    );
    let causes = &status.details.as_ref().expect("details").causes;
    assert!(
        causes
            .iter()
            .any(|c| c.reason == "NamespaceTerminating" && c.field == "metadata.namespace"),
        "causes: {causes:?}"
    );

    // Release the namespace so that it can go away.
    remove_finalizer(&namespaces, &name, HOLD).await;
    env.cleanup().await;
}
