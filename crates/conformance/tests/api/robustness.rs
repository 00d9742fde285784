//! Robustness of the HTTP layer: malformed and mistyped bodies, YAML bodies, content types,
//! unknown API paths, concurrent writers and bearer-token authentication.

use std::collections::HashSet;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, PostParams};
use serde_json::json;
use vigil_sandbox::SandboxConfig;
use vigil_testenv::{TestEnv, TestEnvOptions};

use crate::support::{is_gone, labelled_config_map, raw_request, rv_of};

fn config_maps_path(env: &TestEnv) -> String {
    format!("/api/v1/namespaces/{}/configmaps", env.namespace())
}

#[tokio::test]
async fn malformed_json_bodies_are_bad_requests() {
    let env = TestEnv::start().await.expect("test env");
    let path = config_maps_path(&env);
    let bodies: [&[u8]; 5] = [
        br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}"#,
        b"not json at all",
        b"[1, 2, 3]",
        br#"{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"k": 1,}}"#,
        b"",
    ];
    for body in bodies {
        let shown = String::from_utf8_lossy(body).into_owned();
        let response = raw_request(
            &env.client(),
            "POST",
            &path,
            Some("application/json"),
            Some(body.to_vec()),
        )
        .await;
        assert_eq!(response.status, 400, "body {shown:?}: {}", response.text);
        assert_eq!(
            response.json["kind"], "Status",
            "body {shown:?}: {}",
            response.text
        );
        assert_eq!(
            response.json["reason"], "BadRequest",
            "body {shown:?}: {}",
            response.text
        );
    }
    let list = env
        .api::<ConfigMap>()
        .list(&ListParams::default().fields("metadata.name=x"))
        .await
        .expect("list");
    assert!(list.items.is_empty(), "a malformed body created an object");
    env.cleanup().await;
}

#[tokio::test]
async fn yaml_body_creates_the_object() {
    let env = TestEnv::start().await.expect("test env");
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-yaml\n  labels:\n    via: yaml\ndata:\n  greeting: hello\n  number: \"42\"\n";
    let response = raw_request(
        &env.client(),
        "POST",
        &config_maps_path(&env),
        Some("application/yaml"),
        Some(yaml.as_bytes().to_vec()),
    )
    .await;
    assert_eq!(response.status, 201, "{}", response.text);
    assert_eq!(
        response.json["kind"], "ConfigMap",
        "answers in JSON as accepted: {}",
        response.text
    );
    assert_eq!(response.json["metadata"]["name"], "from-yaml");

    let stored = env.api::<ConfigMap>().get("from-yaml").await.expect("get");
    let data = stored.data.expect("data");
    assert_eq!(data.get("greeting").map(String::as_str), Some("hello"));
    assert_eq!(data.get("number").map(String::as_str), Some("42"));
    assert_eq!(
        stored
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("via"))
            .map(String::as_str),
        Some("yaml")
    );
    env.cleanup().await;
}

#[tokio::test]
async fn unsupported_content_types_are_415() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let body = serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "typed"}}),
    )
    .expect("json");
    let response = raw_request(
        &client,
        "POST",
        &config_maps_path(&env),
        Some("text/plain"),
        Some(body),
    )
    .await;
    assert_eq!(response.status, 415, "POST text/plain: {}", response.text);
    assert_eq!(
        response.json["reason"], "UnsupportedMediaType",
        "{}",
        response.text
    );
    assert!(is_gone(&env.api::<ConfigMap>(), "typed").await);

    // A PATCH must name a patch type: plain JSON is not one.
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &labelled_config_map("typed", &[]))
        .await
        .expect("create");
    let path = format!("{}/typed", config_maps_path(&env));
    let patch = serde_json::to_vec(&json!({"data": {"key": "patched"}})).expect("json");
    let response = raw_request(
        &client,
        "PATCH",
        &path,
        Some("application/json"),
        Some(patch),
    )
    .await;
    assert_eq!(
        response.status, 415,
        "PATCH application/json: {}",
        response.text
    );
    assert_eq!(
        response.json["reason"], "UnsupportedMediaType",
        "{}",
        response.text
    );
    env.cleanup().await;
}

#[tokio::test]
async fn body_of_another_kind_is_bad_request() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let secret = serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mistyped"}, "stringData": {"a": "b"}
    }))
    .expect("json");
    let response = raw_request(
        &client,
        "POST",
        &config_maps_path(&env),
        Some("application/json"),
        Some(secret),
    )
    .await;
    assert_eq!(
        response.status, 400,
        "Secret posted to configmaps: {}",
        response.text
    );
    assert_eq!(response.json["reason"], "BadRequest", "{}", response.text);
    let message = response.json["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("cannot be handled as a ConfigMap"),
        "message: {message}"
    );

    let deployment = serde_json::to_vec(&json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "mistyped"}
    }))
    .expect("json");
    let response = raw_request(
        &client,
        "POST",
        &config_maps_path(&env),
        Some("application/json"),
        Some(deployment),
    )
    .await;
    assert_eq!(
        response.status, 400,
        "Deployment posted to configmaps: {}",
        response.text
    );
    assert_eq!(response.json["reason"], "BadRequest", "{}", response.text);

    assert!(
        is_gone(&env.api::<ConfigMap>(), "mistyped").await,
        "nothing is created from a mistyped body"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn unknown_groups_and_versions_are_404() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let ns = env.namespace();
    for path in [
        "/apis/nonexistent.vigil.dev/v1/things".to_owned(),
        format!("/apis/nonexistent.vigil.dev/v1/namespaces/{ns}/things"),
        "/apis/apps/v9/deployments".to_owned(),
        "/api/v9/pods".to_owned(),
        "/apis/nonexistent.vigil.dev".to_owned(),
    ] {
        let response = raw_request(&client, "GET", &path, None, None).await;
        assert_eq!(response.status, 404, "GET {path}: {}", response.text);
    }
    env.cleanup().await;
}

#[tokio::test]
async fn concurrent_creates_all_succeed_with_distinct_resource_versions() {
    const TASKS: usize = 10;
    const PER_TASK: usize = 5;
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let tasks = (0..TASKS).map(|t| {
        let api = api.clone();
        tokio::spawn(async move {
            let mut rvs = Vec::new();
            for i in 0..PER_TASK {
                let cm = labelled_config_map(&format!("c-{t}-{i}"), &[("suite", "concurrent")]);
                let created = api
                    .create(&PostParams::default(), &cm)
                    .await
                    .unwrap_or_else(|e| panic!("create c-{t}-{i}: {e:?}"));
                rvs.push(rv_of(&created));
            }
            rvs
        })
    });
    let mut all = Vec::new();
    for result in futures::future::join_all(tasks).await {
        all.extend(result.expect("create task"));
    }
    let distinct: HashSet<u64> = all.iter().copied().collect();
    assert_eq!(
        distinct.len(),
        TASKS * PER_TASK,
        "resourceVersions must be distinct: {all:?}"
    );

    let list = api
        .list(&ListParams::default().labels("suite=concurrent"))
        .await
        .expect("list");
    assert_eq!(list.items.len(), TASKS * PER_TASK);
    let listed: HashSet<u64> = list.items.iter().map(rv_of).collect();
    assert_eq!(
        listed, distinct,
        "listed objects carry the resourceVersions their creates returned"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn requests_without_the_bearer_token_are_unauthorized() {
    const TOKEN: &str = "vigil-conformance-token";
    let options = TestEnvOptions {
        sandbox: SandboxConfig {
            token: Some(TOKEN.into()),
            ..SandboxConfig::default()
        },
        ..TestEnvOptions::default()
    };
    let env = TestEnv::start_with(options).await.expect("test env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    assert_eq!(sandbox.token(), Some(TOKEN));

    // The environment's client carries the token.
    env.api::<ConfigMap>()
        .list(&ListParams::default())
        .await
        .expect("list with the token");

    let url = sandbox.url().parse().expect("sandbox url");
    let anonymous =
        kube::Client::try_from(kube::Config::new(url)).expect("client without credentials");
    let path = config_maps_path(&env);
    for authorization in [
        None,
        Some("Bearer wrong-token".to_owned()),
        Some(format!("Basic {TOKEN}")),
    ] {
        let response = send(&anonymous, &path, authorization.as_deref()).await;
        assert_eq!(
            response.0, 401,
            "authorization {authorization:?}: {}",
            response.1
        );
        let status: serde_json::Value = serde_json::from_str(&response.1).unwrap_or_default();
        assert_eq!(status["kind"], "Status", "{}", response.1);
        assert_eq!(status["reason"], "Unauthorized", "{}", response.1);
    }
    let watch = format!("{path}?watch=true&timeoutSeconds=1");
    assert_eq!(
        send(&anonymous, &watch, None).await.0,
        401,
        "watches need the token too"
    );

    let (code, text) = send(&anonymous, &path, Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(code, 200, "the right token is accepted: {text}");
    env.cleanup().await;
}

/// GET `path` with an optional Authorization header: (status code, body).
async fn send(client: &kube::Client, path: &str, authorization: Option<&str>) -> (u16, String) {
    let mut builder = http::Request::get(path).header(http::header::ACCEPT, "application/json");
    if let Some(value) = authorization {
        builder = builder.header(http::header::AUTHORIZATION, value);
    }
    let request = builder
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = client.send(request).await.expect("send");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await.expect("body");
    (code, String::from_utf8_lossy(&bytes).into_owned())
}
