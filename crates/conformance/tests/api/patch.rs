//! PATCH in all its flavours: JSON merge patch, JSON patch, strategic merge patch and server-side
//! apply (field ownership, conflicts, force), plus the errors each one returns.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use vigil_testenv::TestEnv;

use crate::support::{
    config_map, create_crd, delete_crd, expect_status, raw_request, simple_crd, test_group,
};

/// A ConfigMap with the given labels and data.
fn config_map_with(name: &str, labels: Value, data: Value) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "labels": labels},
        "data": data
    }))
    .expect("valid ConfigMap")
}

fn data_of(cm: &ConfigMap) -> BTreeMap<String, String> {
    cm.data.clone().unwrap_or_default()
}

fn labels_of(meta: &ObjectMeta) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn rv(meta: &ObjectMeta) -> u64 {
    meta.resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .expect("numeric resourceVersion")
}

/// A Deployment (0 replicas, so a real cluster starts no pods) with an `app` container (with args
/// and env) and a `sidecar` container.
fn deployment(name: &str) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "labels": {"team": "a"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [
                    {"name": "app", "image": "nginx:1", "args": ["--a", "--b"],
                     "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}]},
                    {"name": "sidecar", "image": "busybox:1"}
                ]}
            }
        }
    }))
    .expect("valid Deployment")
}

fn containers(d: &Deployment) -> BTreeMap<String, Container> {
    let spec = d
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .expect("pod template spec");
    spec.containers
        .iter()
        .map(|c| (c.name.clone(), c.clone()))
        .collect()
}

fn env_of(c: &Container) -> BTreeMap<String, String> {
    c.env
        .iter()
        .flatten()
        .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
        .collect()
}

/// The `fieldsV1` of every managedFields entry of `manager`.
fn fields_of<'a>(meta: &'a ObjectMeta, manager: &str) -> Vec<&'a Value> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| e.manager.as_deref() == Some(manager))
        .filter_map(|e| e.fields_v1.as_ref().map(|f| &f.0))
        .collect()
}

/// Whether `manager` owns the field at `path` (e.g. `["f:data", "f:a"]`).
fn owns(meta: &ObjectMeta, manager: &str, path: &[&str]) -> bool {
    fields_of(meta, manager)
        .into_iter()
        .any(|fields| path.iter().try_fold(fields, |v, key| v.get(key)).is_some())
}

fn apply_cm(name: &str, data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data})
}

#[tokio::test]
async fn merge_patch_merges_maps_and_null_deletes_keys() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let cm = config_map_with(
        "merge",
        json!({"keep": "yes", "drop": "yes"}),
        json!({"a": "1", "b": "2"}),
    );
    let created = api
        .create(&PostParams::default(), &cm)
        .await
        .expect("create");

    let patch = json!({
        "metadata": {"labels": {"drop": null, "added": "yes"}},
        "data": {"a": null, "b": "20", "c": "3"}
    });
    let patched = api
        .patch("merge", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("merge patch");
    assert_eq!(data_of(&patched), map(&[("b", "20"), ("c", "3")]));
    assert_eq!(
        labels_of(&patched.metadata),
        map(&[("keep", "yes"), ("added", "yes")])
    );
    assert!(
        rv(&patched.metadata) > rv(&created.metadata),
        "a patch bumps resourceVersion"
    );
    assert_eq!(patched.metadata.uid, created.metadata.uid);

    let fetched = api.get("merge").await.expect("get");
    assert_eq!(data_of(&fetched), map(&[("b", "20"), ("c", "3")]));
    assert_eq!(
        labels_of(&fetched.metadata),
        map(&[("keep", "yes"), ("added", "yes")])
    );
    env.cleanup().await;
}

#[tokio::test]
async fn merge_patch_replaces_lists_wholesale() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Deployment>();
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("merge patch");
    let got = containers(&patched);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        ["app"],
        "a merge patch replaces the whole list"
    );
    let app = &got["app"];
    assert_eq!(app.image.as_deref(), Some("nginx:2"));
    assert!(
        app.args.is_none() && app.env.is_none(),
        "fields not in the patched list item are gone: {app:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn json_patch_add_replace_remove_and_test() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let cm = config_map_with("jp", json!({}), json!({"a": "1", "b": "2"}));
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create");

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/data/a", "value": "1"},
        {"op": "add", "path": "/data/c", "value": "3"},
        {"op": "replace", "path": "/data/b", "value": "20"},
        {"op": "remove", "path": "/data/a"},
        {"op": "add", "path": "/metadata/labels", "value": {"app.kubernetes.io/name": "x"}}
    ]))
    .expect("valid JSON patch");
    let patched = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .expect("json patch");
    assert_eq!(data_of(&patched), map(&[("b", "20"), ("c", "3")]));
    assert_eq!(
        labels_of(&patched.metadata),
        map(&[("app.kubernetes.io/name", "x")])
    );

    // JSON pointers escape '/' as '~1'.
    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "replace", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "y"}
    ]))
    .expect("valid JSON patch");
    let patched = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .expect("escaped path");
    assert_eq!(
        labels_of(&patched.metadata),
        map(&[("app.kubernetes.io/name", "y")])
    );
    assert_eq!(
        data_of(&api.get("jp").await.expect("get")),
        map(&[("b", "20"), ("c", "3")])
    );
    env.cleanup().await;
}

/// kube-runtime's finalizer helper tests the absent `/metadata/finalizers` for null before adding
/// the first finalizer; the API server's JSON patch treats a missing path as null there, while a
/// test for any other value on a missing path fails.
#[tokio::test]
async fn json_patch_test_for_null_passes_on_a_missing_path() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("jp"))
        .await
        .expect("create");

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/finalizers", "value": null},
        {"op": "add", "path": "/metadata/finalizers", "value": ["example.com/keep"]}
    ]))
    .expect("valid JSON patch");
    let patched = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .expect("test for null on a missing path passes");
    assert_eq!(
        patched.metadata.finalizers,
        Some(vec!["example.com/keep".to_owned()])
    );

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "test", "path": "/metadata/labels", "value": {"a": "b"}}
    ]))
    .expect("valid JSON patch");
    let result = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await;
    expect_status(result, 422, "Invalid");

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "remove", "path": "/metadata/finalizers"}
    ]))
    .expect("valid JSON patch");
    api.patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await
        .expect("remove the finalizer");
    env.cleanup().await;
}

#[tokio::test]
async fn json_patch_failing_operation_is_422_and_changes_nothing() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = api
        .create(&PostParams::default(), &config_map("jp"))
        .await
        .expect("create");

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/data/x", "value": "1"},
        {"op": "test", "path": "/data/key", "value": "other"}
    ]))
    .expect("valid JSON patch");
    let result = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await;
    expect_status(result, 422, "Invalid");

    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "remove", "path": "/data/missing"}]))
            .expect("valid JSON patch");
    let result = api
        .patch("jp", &PatchParams::default(), &Patch::Json::<()>(ops))
        .await;
    expect_status(result, 422, "Invalid");

    let fetched = api.get("jp").await.expect("get");
    assert_eq!(
        data_of(&fetched),
        map(&[("key", "value")]),
        "a failed JSON patch applies no operation"
    );
    assert_eq!(
        fetched.metadata.resource_version,
        created.metadata.resource_version
    );
    env.cleanup().await;
}

#[tokio::test]
async fn strategic_merge_patch_merges_lists_by_key() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Deployment>();
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let patch = json!({
        "metadata": {"labels": {"tier": "web"}},
        "spec": {"template": {"spec": {"containers": [{
            "name": "app", "image": "nginx:2",
            "env": [{"name": "B", "value": "20"}, {"name": "C", "value": "3"}],
            "args": ["--c"]
        }]}}}
    });
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("strategic patch");
    assert_eq!(
        labels_of(&patched.metadata),
        map(&[("team", "a"), ("tier", "web")]),
        "labels are merged"
    );
    let got = containers(&patched);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        ["app", "sidecar"],
        "containers are merged by name"
    );
    assert_eq!(got["app"].image.as_deref(), Some("nginx:2"));
    assert_eq!(
        got["sidecar"].image.as_deref(),
        Some("busybox:1"),
        "the other container is kept"
    );
    assert_eq!(
        env_of(&got["app"]),
        map(&[("A", "1"), ("B", "20"), ("C", "3")]),
        "env is merged by name"
    );
    assert_eq!(
        got["app"].args,
        Some(vec!["--c".to_owned()]),
        "args is an atomic list: replaced"
    );

    let fetched = api.get("web").await.expect("get");
    assert_eq!(containers(&fetched), got);
    env.cleanup().await;
}

#[tokio::test]
async fn strategic_merge_patch_directives_delete_and_replace() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Deployment>();
    api.create(&PostParams::default(), &deployment("web"))
        .await
        .expect("create");

    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "sidecar", "$patch": "delete"}]}}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("$patch: delete");
    let got = containers(&patched);
    assert_eq!(
        got.keys().collect::<Vec<_>>(),
        ["app"],
        "$patch: delete removes the list item"
    );
    assert_eq!(got["app"].image.as_deref(), Some("nginx:1"));
    assert_eq!(
        env_of(&got["app"]),
        map(&[("A", "1"), ("B", "2")]),
        "the remaining container is untouched"
    );

    let patch = json!({"metadata": {"labels": {"$patch": "replace", "only": "this"}}});
    let patched = api
        .patch("web", &PatchParams::default(), &Patch::Strategic(&patch))
        .await
        .expect("$patch: replace");
    assert_eq!(
        labels_of(&patched.metadata),
        map(&[("only", "this")]),
        "$patch: replace replaces the map"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn strategic_merge_patch_on_custom_resource_is_415() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let group = test_group(env.namespace(), "smp");
    let crd = create_crd(&client, simple_crd(&group, "Gizmo", "gizmos")).await;
    let ar =
        ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Gizmo"), "gizmos");
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), env.namespace(), &ar);
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Gizmo",
        "metadata": {"name": "g1"}, "spec": {"size": "small", "replicas": 1}
    }))
    .expect("valid object");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create custom object");

    let patch = json!({"spec": {"replicas": 2}});
    let status = expect_status(
        api.patch("g1", &PatchParams::default(), &Patch::Strategic(&patch))
            .await,
        415,
        "UnsupportedMediaType",
    );
    assert!(
        status.message.contains("application/merge-patch+json"),
        "lists accepted types: {}",
        status.message
    );
    let fetched = api.get("g1").await.expect("get");
    assert_eq!(
        fetched.data["spec"]["replicas"], 1,
        "the rejected patch changed nothing"
    );

    let patched = api
        .patch("g1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("merge patch on a CR");
    assert_eq!(
        patched.data["spec"],
        json!({"size": "small", "replicas": 2})
    );

    delete_crd(&client, crd.metadata.name.as_deref().expect("CRD name")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn apply_creates_a_missing_object_and_records_managed_fields() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let api = env.api::<ConfigMap>();
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/applied?fieldManager=manager-a",
        env.namespace()
    );
    let yaml = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: applied\n  labels:\n    a: \"1\"\ndata:\n  key: value\n";

    let created = raw_request(
        &client,
        "PATCH",
        &path,
        Some("application/apply-patch+yaml"),
        Some(yaml.into()),
    )
    .await;
    assert_eq!(
        created.status, 201,
        "apply of a missing object creates it: {}",
        created.text
    );
    assert_eq!(created.json["data"], json!({"key": "value"}));
    assert!(created.json["metadata"]["uid"].is_string());

    let fetched = api.get("applied").await.expect("applied object exists");
    assert_eq!(data_of(&fetched), map(&[("key", "value")]));
    assert_eq!(labels_of(&fetched.metadata), map(&[("a", "1")]));
    let entries = fetched.metadata.managed_fields.clone().unwrap_or_default();
    assert_eq!(entries.len(), 1, "one managedFields entry: {entries:?}");
    let entry = &entries[0];
    assert_eq!(entry.manager.as_deref(), Some("manager-a"));
    assert_eq!(entry.operation.as_deref(), Some("Apply"));
    assert_eq!(entry.api_version.as_deref(), Some("v1"));
    assert_eq!(entry.fields_type.as_deref(), Some("FieldsV1"));
    assert!(entry.time.is_some(), "the entry has a time");
    assert!(
        owns(&fetched.metadata, "manager-a", &["f:data", "f:key"]),
        "{entries:?}"
    );
    assert!(
        owns(
            &fetched.metadata,
            "manager-a",
            &["f:metadata", "f:labels", "f:a"]
        ),
        "{entries:?}"
    );

    // Applying the same configuration again is an update (200) that changes nothing.
    let again = raw_request(
        &client,
        "PATCH",
        &path,
        Some("application/apply-patch+yaml"),
        Some(yaml.into()),
    )
    .await;
    assert_eq!(again.status, 200, "{}", again.text);
    assert_eq!(
        again.json["metadata"]["resourceVersion"].as_str(),
        fetched.metadata.resource_version.as_deref()
    );
    env.cleanup().await;
}

#[tokio::test]
async fn reapply_without_a_field_removes_it() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let pp = PatchParams::apply("manager-a");
    let full = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cfg", "labels": {"x": "1"}},
        "data": {"a": "1", "b": "2"}
    });
    api.patch("cfg", &pp, &Patch::Apply(&full))
        .await
        .expect("first apply");

    // Another manager adds a field with an ordinary update.
    let other = PatchParams {
        field_manager: Some("patcher".into()),
        ..Default::default()
    };
    let patched = api
        .patch("cfg", &other, &Patch::Merge(json!({"data": {"c": "3"}})))
        .await
        .expect("merge patch");
    let entry = patched
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.manager.as_deref() == Some("patcher"));
    assert_eq!(
        entry.and_then(|e| e.operation.as_deref()),
        Some("Update"),
        "non-apply writes record Update"
    );
    assert!(owns(&patched.metadata, "patcher", &["f:data", "f:c"]));

    let applied = api
        .patch(
            "cfg",
            &pp,
            &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))),
        )
        .await
        .expect("re-apply");
    assert_eq!(
        data_of(&applied),
        map(&[("a", "1"), ("c", "3")]),
        "b is removed; c belongs to another manager"
    );
    assert!(
        !labels_of(&applied.metadata).contains_key("x"),
        "the dropped label is removed: {:?}",
        applied.metadata.labels
    );
    assert!(!owns(&applied.metadata, "manager-a", &["f:data", "f:b"]));
    assert!(owns(&applied.metadata, "manager-a", &["f:data", "f:a"]));
    assert_eq!(
        data_of(&api.get("cfg").await.expect("get")),
        map(&[("a", "1"), ("c", "3")])
    );
    env.cleanup().await;
}

#[tokio::test]
async fn conflicting_apply_is_409_until_forced() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let a = PatchParams::apply("manager-a");
    let b = PatchParams::apply("manager-b");
    api.patch("cfg", &a, &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))))
        .await
        .expect("apply by a");

    let result = api
        .patch("cfg", &b, &Patch::Apply(apply_cm("cfg", json!({"a": "2"}))))
        .await;
    let status = expect_status(result, 409, "Conflict");
    assert!(
        status.message.starts_with("Apply failed with 1 conflict"),
        "message: {}",
        status.message
    );
    assert!(
        status.message.contains("conflict with \"manager-a\""),
        "message: {}",
        status.message
    );
    assert!(
        status.message.contains(".data.a"),
        "message: {}",
        status.message
    );
    let causes = status
        .details
        .as_ref()
        .map(|d| d.causes.clone())
        .unwrap_or_default();
    assert_eq!(causes.len(), 1, "{causes:?}");
    assert_eq!(causes[0].reason, "FieldManagerConflict");
    assert_eq!(causes[0].field, ".data.a");
    assert_eq!(
        data_of(&api.get("cfg").await.expect("get")),
        map(&[("a", "1")]),
        "the conflicting apply changed nothing"
    );

    let forced = api
        .patch(
            "cfg",
            &b.clone().force(),
            &Patch::Apply(apply_cm("cfg", json!({"a": "2"}))),
        )
        .await
        .expect("forced apply");
    assert_eq!(data_of(&forced), map(&[("a", "2")]));
    assert!(
        owns(&forced.metadata, "manager-b", &["f:data", "f:a"]),
        "{:?}",
        forced.metadata.managed_fields
    );
    assert!(
        !owns(&forced.metadata, "manager-a", &["f:data", "f:a"]),
        "force takes ownership away from manager-a"
    );

    // Now manager-a is the one in conflict.
    let result = api
        .patch("cfg", &a, &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))))
        .await;
    let status = expect_status(result, 409, "Conflict");
    assert!(
        status.message.contains("conflict with \"manager-b\""),
        "message: {}",
        status.message
    );
    env.cleanup().await;
}

#[tokio::test]
async fn apply_conflicts_with_an_update_manager() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("cfg"))
        .await
        .expect("create");
    let patcher = PatchParams {
        field_manager: Some("patcher".into()),
        ..Default::default()
    };
    api.patch("cfg", &patcher, &Patch::Merge(json!({"data": {"a": "p"}})))
        .await
        .expect("merge patch");

    let result = api
        .patch(
            "cfg",
            &PatchParams::apply("manager-a"),
            &Patch::Apply(apply_cm("cfg", json!({"a": "x"}))),
        )
        .await;
    let status = expect_status(result, 409, "Conflict");
    assert!(
        status.message.starts_with("Apply failed with 1 conflict"),
        "message: {}",
        status.message
    );
    assert!(
        status.message.contains("conflict with \"patcher\""),
        "message: {}",
        status.message
    );

    // The same value is no conflict.
    let applied = api
        .patch(
            "cfg",
            &PatchParams::apply("manager-a"),
            &Patch::Apply(apply_cm("cfg", json!({"a": "p"}))),
        )
        .await
        .expect("apply of the same value");
    assert!(owns(&applied.metadata, "manager-a", &["f:data", "f:a"]));
    env.cleanup().await;
}

#[tokio::test]
async fn applying_the_same_value_shares_ownership() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let a = PatchParams::apply("manager-a");
    let b = PatchParams::apply("manager-b");
    api.patch("cfg", &a, &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))))
        .await
        .expect("apply by a");
    let shared = api
        .patch("cfg", &b, &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))))
        .await
        .expect("apply by b");
    assert!(
        owns(&shared.metadata, "manager-a", &["f:data", "f:a"]),
        "{:?}",
        shared.metadata.managed_fields
    );
    assert!(
        owns(&shared.metadata, "manager-b", &["f:data", "f:a"]),
        "{:?}",
        shared.metadata.managed_fields
    );
    let appliers = shared
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter(|e| e.operation.as_deref() == Some("Apply"))
        .count();
    assert_eq!(appliers, 2);

    // manager-a lets go of the field: manager-b still owns it, so it stays.
    let released = api
        .patch("cfg", &a, &Patch::Apply(apply_cm("cfg", json!({"b": "x"}))))
        .await
        .expect("apply by a");
    assert_eq!(data_of(&released), map(&[("a", "1"), ("b", "x")]));
    assert!(!owns(&released.metadata, "manager-a", &["f:data", "f:a"]));
    assert!(owns(&released.metadata, "manager-b", &["f:data", "f:a"]));
    env.cleanup().await;
}

#[tokio::test]
async fn apply_requires_a_field_manager() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    // kube-rs does not check this client-side: the server rejects the PatchOptions (422).
    let result = api
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Apply(apply_cm("cfg", json!({"a": "1"}))),
        )
        .await;
    let status = expect_status(result, 422, "Invalid");
    assert!(
        status.message.contains("fieldManager: Required value"),
        "message: {}",
        status.message
    );
    assert!(
        api.get_opt("cfg").await.expect("get").is_none(),
        "nothing was created"
    );

    // `force` is only for apply.
    api.create(&PostParams::default(), &config_map("cfg"))
        .await
        .expect("create");
    let path = format!(
        "/api/v1/namespaces/{}/configmaps/cfg?force=true",
        env.namespace()
    );
    let body = serde_json::to_vec(&json!({"data": {"a": "1"}})).expect("json");
    let response = raw_request(
        &env.client(),
        "PATCH",
        &path,
        Some("application/merge-patch+json"),
        Some(body),
    )
    .await;
    assert_eq!(
        (response.status, response.json["reason"].as_str()),
        (422, Some("Invalid")),
        "{}",
        response.text
    );
    assert!(
        response.text.contains("force: Forbidden"),
        "{}",
        response.text
    );
    env.cleanup().await;
}

#[tokio::test]
async fn merge_patch_with_a_stale_resource_version_conflicts() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = api
        .create(&PostParams::default(), &config_map("cfg"))
        .await
        .expect("create");
    let stale = created.metadata.resource_version.clone().expect("rv");
    let updated = api
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"a": "1"}})),
        )
        .await
        .expect("patch");

    let patch = json!({"metadata": {"resourceVersion": stale}, "data": {"b": "2"}});
    expect_status(
        api.patch("cfg", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
        409,
        "Conflict",
    );
    assert_eq!(
        data_of(&api.get("cfg").await.expect("get")),
        map(&[("key", "value"), ("a", "1")])
    );

    let patch = json!({"metadata": {"resourceVersion": updated.metadata.resource_version}, "data": {"b": "2"}});
    let patched = api
        .patch("cfg", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("current rv");
    assert_eq!(
        data_of(&patched),
        map(&[("key", "value"), ("a", "1"), ("b", "2")])
    );
    env.cleanup().await;
}

#[tokio::test]
async fn patch_of_a_missing_object_is_404() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let patch = json!({"data": {"a": "1"}});
    let status = expect_status(
        api.patch("missing", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
        404,
        "NotFound",
    );
    assert_eq!(status.message, "configmaps \"missing\" not found");
    let details = status.details.expect("details");
    assert_eq!(
        (details.name.as_str(), details.kind.as_str()),
        ("missing", "configmaps")
    );

    expect_status(
        api.patch(
            "missing",
            &PatchParams::default(),
            &Patch::Strategic(&patch),
        )
        .await,
        404,
        "NotFound",
    );
    let ops: json_patch::Patch =
        serde_json::from_value(json!([{"op": "add", "path": "/data/a", "value": "1"}]))
            .expect("valid JSON patch");
    expect_status(
        api.patch("missing", &PatchParams::default(), &Patch::Json::<()>(ops))
            .await,
        404,
        "NotFound",
    );
    assert!(api.get_opt("missing").await.expect("get").is_none());
    env.cleanup().await;
}
