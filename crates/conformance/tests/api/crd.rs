//! CustomResourceDefinitions: establishment and discovery, custom object CRUD and watch, structural
//! schema validation, pruning, defaulting, the status subresource, multiple versions, deletion and
//! server-side field validation.

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::core::{GroupVersionKind, Status};
use kube::discovery::{Discovery, Scope, pinned_kind};
use serde_json::{Value, json};
use vigil_testenv::TestEnv;

use crate::support::{create_crd, delete_crd, expect_status, poll_until, raw_request, test_group};

/// The OpenAPI schema of a Widget.
fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "string", "enum": ["small", "medium", "large"]},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1},
                    "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                    "port": {"x-kubernetes-int-or-string": true},
                    "config": {
                        "type": "object",
                        "properties": {"mode": {"type": "string", "default": "auto"}, "level": {"type": "integer"}}
                    },
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                }
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "observed": {"type": "integer"}}
            }
        }
    })
}

/// The `widgets.<group>` CRD: kind Widget, short name `wdg`, printer columns, status subresource.
fn widget_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{group}"), "labels": {vigil_testenv::TEST_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wdg"]},
            "versions": [widget_version("v1", true)]
        }
    })
}

fn widget_version(name: &str, storage: bool) -> Value {
    json!({
        "name": name, "served": true, "storage": storage,
        "schema": {"openAPIV3Schema": widget_schema()},
        "subresources": {"status": {}},
        "additionalPrinterColumns": [
            {"name": "Size", "type": "string", "jsonPath": ".spec.size"},
            {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
        ]
    })
}

fn widget_resource(group: &str, version: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, "Widget"), "widgets")
}

fn widget(group: &str, name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{group}/v1"), "kind": "Widget",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("valid Widget")
}

/// A test's Widget CRD and an `Api` for its objects in the test namespace.
struct Widgets {
    client: kube::Client,
    group: String,
    crd_name: String,
    api: Api<DynamicObject>,
}

impl Widgets {
    async fn install(env: &TestEnv, tag: &str) -> Self {
        let client = env.client();
        let group = test_group(env.namespace(), tag);
        let crd = create_crd(&client, widget_crd(&group)).await;
        let crd_name = crd.metadata.name.expect("CRD name");
        let api = Api::namespaced_with(
            client.clone(),
            env.namespace(),
            &widget_resource(&group, "v1"),
        );
        Self {
            client,
            group,
            crd_name,
            api,
        }
    }

    fn widget(&self, name: &str, spec: Value) -> DynamicObject {
        widget(&self.group, name, spec)
    }

    /// Creates a Widget that must be rejected as Invalid; returns the status.
    async fn rejected(&self, name: &str, spec: Value) -> Status {
        let status = expect_status(
            self.api
                .create(&PostParams::default(), &self.widget(name, spec))
                .await,
            422,
            "Invalid",
        );
        let details = status.details.clone().expect("Invalid carries details");
        assert_eq!(
            (
                details.kind.as_str(),
                details.group.as_str(),
                details.name.as_str()
            ),
            ("Widget", self.group.as_str(), name)
        );
        assert!(
            self.api.get_opt(name).await.expect("get").is_none(),
            "an invalid object is not stored"
        );
        status
    }

    /// Asserts that creating `spec` fails with exactly one error, `error`.
    async fn rejected_with(&self, name: &str, spec: Value, error: &str) {
        let status = self.rejected(name, spec).await;
        assert_eq!(
            status.message,
            format!("Widget.{} \"{name}\" is invalid: {error}", self.group)
        );
    }

    async fn uninstall(self) {
        delete_crd(&self.client, &self.crd_name).await;
    }
}

fn generation(obj: &DynamicObject) -> i64 {
    obj.metadata
        .generation
        .expect("custom objects have a generation")
}

#[tokio::test]
async fn crd_becomes_established_and_discoverable() {
    let env = TestEnv::start().await.expect("test env");
    let widgets = Widgets::install(&env, "disc").await;
    let (client, group) = (&widgets.client, widgets.group.clone());

    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&widgets.crd_name)
        .await
        .expect("get CRD");
    let status = crd.status.expect("CRD status");
    let accepted = status.accepted_names.expect("acceptedNames");
    assert_eq!(
        (accepted.kind.as_str(), accepted.plural.as_str()),
        ("Widget", "widgets")
    );
    assert_eq!(accepted.short_names, Some(vec!["wdg".to_owned()]));
    assert_eq!(status.stored_versions, Some(vec!["v1".to_owned()]));
    let conditions = status.conditions.unwrap_or_default();
    for wanted in ["NamesAccepted", "Established"] {
        assert!(
            conditions
                .iter()
                .any(|c| c.type_ == wanted && c.status == "True"),
            "{wanted}: {conditions:?}"
        );
    }

    // The group's resource list.
    let list = poll_until("the group version to list widgets", || async {
        let list = client
            .list_api_group_resources(&format!("{group}/v1"))
            .await
            .ok()?;
        list.resources
            .iter()
            .any(|r| r.name == "widgets")
            .then_some(list)
    })
    .await;
    let res = list
        .resources
        .iter()
        .find(|r| r.name == "widgets")
        .expect("widgets");
    assert_eq!(
        (
            res.kind.as_str(),
            res.namespaced,
            res.singular_name.as_str()
        ),
        ("Widget", true, "widget")
    );
    assert_eq!(res.short_names, Some(vec!["wdg".to_owned()]));
    for verb in [
        "create",
        "delete",
        "deletecollection",
        "get",
        "list",
        "patch",
        "update",
        "watch",
    ] {
        assert!(
            res.verbs.iter().any(|v| v == verb),
            "widgets verb {verb}: {:?}",
            res.verbs
        );
    }
    let status_res = list
        .resources
        .iter()
        .find(|r| r.name == "widgets/status")
        .expect("widgets/status");
    assert_eq!(status_res.kind, "Widget");
    let groups = client.list_api_groups().await.expect("/apis");
    let api_group = groups
        .groups
        .iter()
        .find(|g| g.name == group)
        .expect("group listed under /apis");
    assert_eq!(
        api_group
            .preferred_version
            .as_ref()
            .map(|v| v.group_version.clone()),
        Some(format!("{group}/v1"))
    );

    // kube-rs discovery resolves the kind.
    let gvk = GroupVersionKind::gvk(&group, "v1", "Widget");
    let discovery = Discovery::new(client.clone())
        .filter(&[&group])
        .run()
        .await
        .expect("discovery");
    let (ar, caps) = discovery
        .resolve_gvk(&gvk)
        .expect("Widget resolved by discovery");
    assert_eq!(
        (ar.plural.as_str(), ar.api_version.clone()),
        ("widgets", format!("{group}/v1"))
    );
    assert_eq!(caps.scope, Scope::Namespaced);
    assert!(
        caps.subresources
            .iter()
            .any(|(sub, _)| sub.plural == "status"),
        "{:?}",
        caps.subresources
    );
    let (pinned, _) = pinned_kind(client, &gvk).await.expect("pinned_kind");
    assert_eq!(pinned.plural, "widgets");

    widgets.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn custom_objects_create_get_list_watch_delete() {
    let env = TestEnv::start().await.expect("test env");
    let widgets = Widgets::install(&env, "crud").await;
    let api = &widgets.api;

    let list = api.list(&Default::default()).await.expect("list");
    assert!(list.items.is_empty());
    let rv = list
        .metadata
        .resource_version
        .expect("list resourceVersion");
    let mut events = api
        .watch(&WatchParams::default().timeout(10), &rv)
        .await
        .expect("watch")
        .boxed();

    let created = api
        .create(
            &PostParams::default(),
            &widgets.widget("w1", json!({"size": "small", "replicas": 3})),
        )
        .await
        .expect("create");
    assert!(created.metadata.uid.is_some() && created.metadata.creation_timestamp.is_some());
    assert_eq!(generation(&created), 1);
    let types = created.types.clone().expect("apiVersion and kind");
    assert_eq!(
        (types.api_version, types.kind),
        (format!("{}/v1", widgets.group), "Widget".to_owned())
    );

    let fetched = api.get("w1").await.expect("get");
    assert_eq!(
        fetched.data["spec"],
        json!({"size": "small", "replicas": 3})
    );
    assert_eq!(fetched.metadata.namespace.as_deref(), Some(env.namespace()));
    let listed = api.list(&Default::default()).await.expect("list");
    assert_eq!(
        listed
            .items
            .iter()
            .map(|o| o.metadata.name.clone().unwrap_or_default())
            .collect::<Vec<_>>(),
        ["w1"]
    );

    let mut changed = fetched.clone();
    changed.data["spec"]["size"] = json!("large");
    let replaced = api
        .replace("w1", &PostParams::default(), &changed)
        .await
        .expect("replace");
    assert_eq!(replaced.data["spec"]["size"], "large");
    api.delete("w1", &DeleteParams::default())
        .await
        .expect("delete");
    expect_status(api.get("w1").await, 404, "NotFound");

    let mut seen = Vec::new();
    while seen.len() < 3 {
        let event = tokio::time::timeout(std::time::Duration::from_secs(10), events.try_next())
            .await
            .expect("watch event within 10s")
            .expect("watch stream")
            .expect("watch ended early");
        match event {
            WatchEvent::Added(o) => seen.push(("ADDED", o.data["spec"]["size"].clone())),
            WatchEvent::Modified(o) => seen.push(("MODIFIED", o.data["spec"]["size"].clone())),
            WatchEvent::Deleted(o) => seen.push(("DELETED", o.data["spec"]["size"].clone())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        seen,
        [
            ("ADDED", json!("small")),
            ("MODIFIED", json!("large")),
            ("DELETED", json!("large"))
        ]
    );

    widgets.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn printer_columns_shape_the_table_view() {
    let env = TestEnv::start().await.expect("test env");
    let widgets = Widgets::install(&env, "table").await;
    widgets
        .api
        .create(
            &PostParams::default(),
            &widgets.widget("w1", json!({"size": "small", "replicas": 3})),
        )
        .await
        .expect("create");

    let path = format!(
        "/apis/{}/v1/namespaces/{}/widgets",
        widgets.group,
        env.namespace()
    );
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .expect("request");
    let table: Value = widgets.client.request(request).await.expect("table");
    assert_eq!(table["kind"], "Table");
    let columns: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .expect("columns")
        .iter()
        .filter_map(|c| c["name"].as_str())
        .collect();
    assert_eq!(columns, ["Name", "Size", "Replicas", "Age"]);
    let rows = table["rows"].as_array().expect("rows");
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0]["cells"][0], "w1");
    assert_eq!(rows[0]["cells"][1], "small");
    assert_eq!(rows[0]["cells"][2], 3);

    widgets.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn schema_violations_are_422_with_field_paths() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "valid").await;

    w.rejected_with(
        "bad-type",
        json!({"size": "small", "replicas": "string"}),
        r#"spec.replicas: Invalid value: "string": spec.replicas in body must be of type integer: "string""#,
    )
    .await;
    w.rejected_with(
        "no-size",
        json!({"replicas": 2}),
        "spec.size: Required value",
    )
    .await;
    w.rejected_with(
        "bad-enum",
        json!({"size": "huge"}),
        r#"spec.size: Unsupported value: "huge": supported values: "small", "medium", "large""#,
    )
    .await;
    w.rejected_with(
        "too-few",
        json!({"size": "small", "replicas": 0}),
        "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
    )
    .await;
    w.rejected_with(
        "too-many",
        json!({"size": "small", "replicas": 11}),
        "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
    )
    .await;
    w.rejected_with(
        "bad-pattern",
        json!({"size": "small", "name": "ABC"}),
        r#"spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#,
    )
    .await;
    w.rejected_with(
        "too-many-tags",
        json!({"size": "small", "tags": ["a", "b", "c"]}),
        "spec.tags: Too many: 3: must have at most 2 items",
    )
    .await;
    // The wording of "Too long" changed across releases; the field and type did not.
    let status = w
        .rejected("too-long", json!({"size": "small", "name": "abcdefghij"}))
        .await;
    let prefix = format!(
        "Widget.{} \"too-long\" is invalid: spec.name: Too long",
        w.group
    );
    assert!(
        status.message.starts_with(&prefix),
        "message: {}",
        status.message
    );
    let status = w
        .rejected("bad-port", json!({"size": "small", "port": true}))
        .await;
    assert!(
        status.message.contains("spec.port: Invalid value"),
        "message: {}",
        status.message
    );

    // Every violation is reported, each as a cause with its field path.
    let status = w
        .rejected("many", json!({"replicas": 0, "tags": ["a", "b", "c"]}))
        .await;
    for error in [
        "spec.size: Required value",
        "spec.replicas: Invalid value: 0",
        "spec.tags: Too many: 3",
    ] {
        assert!(
            status.message.contains(error),
            "{error} in {}",
            status.message
        );
    }
    let mut fields: Vec<String> = status
        .details
        .expect("details")
        .causes
        .into_iter()
        .map(|c| c.field)
        .collect();
    fields.sort();
    assert_eq!(fields, ["spec.replicas", "spec.size", "spec.tags"]);

    // Updates and patches are validated too.
    let ok = w
        .api
        .create(
            &PostParams::default(),
            &w.widget("ok", json!({"size": "small"})),
        )
        .await
        .expect("valid create");
    let mut bad = ok.clone();
    bad.data["spec"]["size"] = json!("huge");
    let status = expect_status(
        w.api.replace("ok", &PostParams::default(), &bad).await,
        422,
        "Invalid",
    );
    assert!(
        status
            .message
            .contains(r#"spec.size: Unsupported value: "huge""#),
        "message: {}",
        status.message
    );
    let patch = json!({"spec": {"replicas": 99}});
    let status = expect_status(
        w.api
            .patch("ok", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
        422,
        "Invalid",
    );
    assert!(
        status.message.contains("spec.replicas: Invalid value: 99"),
        "message: {}",
        status.message
    );
    assert_eq!(
        w.api.get("ok").await.expect("get").data["spec"],
        json!({"size": "small", "replicas": 1})
    );

    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn unknown_fields_are_pruned_unless_preserved() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "prune").await;
    let mut obj = w.widget(
        "w1",
        json!({"size": "small", "unknown": "x", "config": {"mode": "manual", "bogus": 1}, "extra": {"any": {"nested": [1, true]}}}),
    );
    obj.data["topLevel"] = json!("dropped");
    let created = w
        .api
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    let expected_spec = json!({"size": "small", "replicas": 1, "config": {"mode": "manual"}, "extra": {"any": {"nested": [1, true]}}});
    assert_eq!(created.data["spec"], expected_spec);
    assert!(
        created.data.get("topLevel").is_none(),
        "unknown top-level field pruned: {:?}",
        created.data
    );

    let fetched = w.api.get("w1").await.expect("get");
    assert_eq!(
        fetched.data["spec"], expected_spec,
        "the stored object lacks the unknown fields"
    );
    assert!(fetched.data.get("topLevel").is_none());

    let patch = json!({"spec": {"unknown": "again", "extra": {"more": "kept"}}});
    let patched = w
        .api
        .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    assert!(
        patched.data["spec"].get("unknown").is_none(),
        "pruned on update too: {}",
        patched.data["spec"]
    );
    assert_eq!(
        patched.data["spec"]["extra"],
        json!({"any": {"nested": [1, true]}, "more": "kept"})
    );

    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn defaults_are_applied() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "dflt").await;

    let created = w
        .api
        .create(
            &PostParams::default(),
            &w.widget("w1", json!({"size": "small"})),
        )
        .await
        .expect("create");
    assert_eq!(
        created.data["spec"],
        json!({"size": "small", "replicas": 1}),
        "replicas defaulted; no config object invented"
    );
    let created = w
        .api
        .create(
            &PostParams::default(),
            &w.widget("w2", json!({"size": "small", "replicas": 4, "config": {}})),
        )
        .await
        .expect("create");
    assert_eq!(
        created.data["spec"],
        json!({"size": "small", "replicas": 4, "config": {"mode": "auto"}}),
        "nested default"
    );
    assert_eq!(
        w.api.get("w2").await.expect("get").data["spec"]["config"],
        json!({"mode": "auto"})
    );

    // A patch that removes a defaulted field gets the default back.
    let patch = json!({"spec": {"replicas": null}});
    let patched = w
        .api
        .patch("w2", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch");
    assert_eq!(patched.data["spec"]["replicas"], 1);

    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn int_or_string_accepts_both() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "ios").await;
    let number = w
        .api
        .create(
            &PostParams::default(),
            &w.widget("num", json!({"size": "small", "port": 8080})),
        )
        .await
        .expect("int");
    assert_eq!(number.data["spec"]["port"], 8080);
    let name = w
        .api
        .create(
            &PostParams::default(),
            &w.widget("str", json!({"size": "small", "port": "http"})),
        )
        .await
        .expect("string");
    assert_eq!(name.data["spec"]["port"], "http");
    assert_eq!(
        w.api.get("num").await.expect("get").data["spec"]["port"],
        8080
    );
    w.rejected("obj", json!({"size": "small", "port": {"a": 1}}))
        .await;
    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "status").await;
    let api = &w.api;

    let mut obj = w.widget("w1", json!({"size": "small", "replicas": 2}));
    obj.data["status"] = json!({"phase": "Ready"});
    let created = api
        .create(&PostParams::default(), &obj)
        .await
        .expect("create");
    assert!(
        created.data.get("status").is_none(),
        "create drops status: {:?}",
        created.data
    );
    assert_eq!(generation(&created), 1);

    // A main-resource update ignores status.
    let mut update = created.clone();
    update.data["status"] = json!({"phase": "Ignored"});
    let updated = api
        .replace("w1", &PostParams::default(), &update)
        .await
        .expect("replace");
    assert!(
        updated.data.get("status").is_none(),
        "main resource ignores status: {:?}",
        updated.data
    );
    assert_eq!(generation(&updated), 1, "no spec change, no new generation");

    // A /status update changes only status, and not the generation.
    let mut update = updated.clone();
    update.data["status"] = json!({"phase": "Running", "observed": 1});
    update.data["spec"]["replicas"] = json!(9);
    let status_updated = api
        .replace_status("w1", &PostParams::default(), &update)
        .await
        .expect("replace status");
    assert_eq!(
        status_updated.data["status"],
        json!({"phase": "Running", "observed": 1})
    );
    assert_eq!(
        status_updated.data["spec"]["replicas"], 2,
        "/status ignores spec"
    );
    assert_eq!(generation(&status_updated), 1);
    let patch = json!({"status": {"phase": "Done"}});
    let patched = api
        .patch_status("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch status");
    assert_eq!(
        patched.data["status"],
        json!({"phase": "Done", "observed": 1})
    );
    assert_eq!(generation(&patched), 1);
    assert_eq!(
        api.get_status("w1").await.expect("get status").data["status"]["phase"],
        "Done"
    );

    // A spec change bumps the generation and keeps status; a metadata change does not.
    let patch = json!({"spec": {"replicas": 3}, "status": {"phase": "Ignored"}});
    let patched = api
        .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch spec");
    assert_eq!(generation(&patched), 2);
    assert_eq!(patched.data["status"]["phase"], "Done");
    let patch = json!({"metadata": {"labels": {"x": "y"}}});
    let patched = api
        .patch("w1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch labels");
    assert_eq!(
        generation(&patched),
        2,
        "metadata changes do not bump the generation"
    );

    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn two_served_versions_serve_the_same_objects() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let group = test_group(env.namespace(), "multi");
    let mut manifest = widget_crd(&group);
    manifest["spec"]["versions"] =
        json!([widget_version("v1", true), widget_version("v1beta1", false)]);
    let crd = create_crd(&client, manifest).await;
    let v1: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        env.namespace(),
        &widget_resource(&group, "v1"),
    );
    let beta: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        env.namespace(),
        &widget_resource(&group, "v1beta1"),
    );

    let mut obj = widget(&group, "from-beta", json!({"size": "medium"}));
    obj.types.as_mut().expect("types").api_version = format!("{group}/v1beta1");
    let created = beta
        .create(&PostParams::default(), &obj)
        .await
        .expect("create via v1beta1");
    assert_eq!(
        created.types.as_ref().map(|t| t.api_version.clone()),
        Some(format!("{group}/v1beta1"))
    );
    let as_v1 = v1.get("from-beta").await.expect("get via v1");
    assert_eq!(
        as_v1.types.as_ref().map(|t| t.api_version.clone()),
        Some(format!("{group}/v1"))
    );
    assert_eq!(as_v1.metadata.uid, created.metadata.uid);
    assert_eq!(as_v1.data["spec"], json!({"size": "medium", "replicas": 1}));

    v1.create(
        &PostParams::default(),
        &widget(&group, "from-v1", json!({"size": "large"})),
    )
    .await
    .expect("create via v1");
    let as_beta = beta.get("from-v1").await.expect("get via v1beta1");
    assert_eq!(
        as_beta.types.as_ref().map(|t| t.api_version.clone()),
        Some(format!("{group}/v1beta1"))
    );
    assert_eq!(as_beta.data["spec"]["size"], "large");
    for api in [&v1, &beta] {
        let mut names: Vec<String> = api
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .into_iter()
            .filter_map(|o| o.metadata.name)
            .collect();
        names.sort();
        assert_eq!(names, ["from-beta", "from-v1"]);
    }

    let groups = client.list_api_groups().await.expect("/apis");
    let api_group = groups
        .groups
        .iter()
        .find(|g| g.name == group)
        .expect("group listed");
    let mut versions: Vec<&str> = api_group
        .versions
        .iter()
        .map(|v| v.version.as_str())
        .collect();
    versions.sort();
    assert_eq!(versions, ["v1", "v1beta1"]);
    assert_eq!(
        api_group
            .preferred_version
            .as_ref()
            .map(|v| v.version.as_str()),
        Some("v1")
    );
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(crd.metadata.name.as_deref().expect("name"))
        .await
        .expect("CRD");
    assert_eq!(
        crd.status.and_then(|s| s.stored_versions),
        Some(vec!["v1".to_owned()])
    );

    delete_crd(&client, crd.metadata.name.as_deref().expect("CRD name")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn deleting_the_crd_deletes_its_objects() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "gone").await;
    for name in ["w1", "w2"] {
        w.api
            .create(
                &PostParams::default(),
                &w.widget(name, json!({"size": "small"})),
            )
            .await
            .expect("create");
    }
    delete_crd(&w.client, &w.crd_name).await;

    let path = format!(
        "/apis/{}/v1/namespaces/{}/widgets",
        w.group,
        env.namespace()
    );
    poll_until("the resource to stop being served", || async {
        (raw_request(&w.client, "GET", &path, None, None)
            .await
            .status
            == 404)
            .then_some(())
    })
    .await;
    poll_until("the group to leave discovery", || async {
        let groups = w.client.list_api_groups().await.ok()?;
        (!groups.groups.iter().any(|g| g.name == w.group)).then_some(())
    })
    .await;
    // With its group gone, no API handler serves the path: the server's mux answers with a
    // plain-text 404, not a Status (clients see a 404 all the same).
    poll_until("the group's paths to fall through to the mux", || async {
        let r = raw_request(&w.client, "GET", &format!("{path}/w1"), None, None).await;
        (r.status == 404 && r.text == "404 page not found\n").then_some(())
    })
    .await;
    match w.api.get("w1").await {
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        other => panic!("expected a 404, got {other:?}"),
    }

    // Re-creating the CRD does not bring the objects back.
    create_crd(&w.client, widget_crd(&w.group)).await;
    assert!(
        w.api
            .list(&Default::default())
            .await
            .expect("list")
            .items
            .is_empty(),
        "objects were deleted with their CRD"
    );
    w.uninstall().await;
    env.cleanup().await;
}

#[tokio::test]
async fn crd_name_must_be_plural_dot_group() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let group = test_group(env.namespace(), "name");
    let mut manifest = widget_crd(&group);
    manifest["metadata"]["name"] = json!(format!("gadgets.{group}"));
    let crd: CustomResourceDefinition = serde_json::from_value(manifest).expect("CRD");
    let api = Api::<CustomResourceDefinition>::all(client.clone());
    let status = expect_status(
        api.create(&PostParams::default(), &crd).await,
        422,
        "Invalid",
    );
    assert!(
        status
            .message
            .contains(r#"must be spec.names.plural+"."+spec.group"#),
        "message: {}",
        status.message
    );
    let details = status.details.expect("details");
    assert_eq!(
        (details.kind.as_str(), details.group.as_str()),
        ("CustomResourceDefinition", "apiextensions.k8s.io")
    );
    assert!(
        details.causes.iter().any(|c| c.field == "metadata.name"),
        "{:?}",
        details.causes
    );
    assert!(
        api.get_opt(&format!("gadgets.{group}"))
            .await
            .expect("get")
            .is_none()
    );
    env.cleanup().await;
}

#[tokio::test]
async fn field_validation_strict_rejects_unknown_fields() {
    let env = TestEnv::start().await.expect("test env");
    let w = Widgets::install(&env, "strict").await;
    let path = format!(
        "/apis/{}/v1/namespaces/{}/widgets",
        w.group,
        env.namespace()
    );
    let body = |name: &str| {
        serde_json::to_vec(&widget(&w.group, name, json!({"size": "small", "foo": 1})))
            .expect("json")
    };

    let strict = raw_request(
        &w.client,
        "POST",
        &format!("{path}?fieldValidation=Strict"),
        Some("application/json"),
        Some(body("strict")),
    )
    .await;
    assert_eq!(
        (strict.status, strict.json["reason"].as_str()),
        (400, Some("BadRequest")),
        "{}",
        strict.text
    );
    let message = strict.json["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(r#"unknown field "spec.foo""#),
        "message: {message}"
    );
    expect_status(w.api.get("strict").await, 404, "NotFound");

    // The default (Warn) stores the pruned object and warns.
    let warn = raw_request(
        &w.client,
        "POST",
        &path,
        Some("application/json"),
        Some(body("warn")),
    )
    .await;
    assert_eq!(warn.status, 201, "{}", warn.text);
    assert!(
        warn.json["spec"].get("foo").is_none(),
        "pruned: {}",
        warn.json
    );
    let warnings: Vec<&str> = warn
        .headers
        .get_all("warning")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect();
    assert!(
        warnings
            .iter()
            .any(|w| w.contains(r#"unknown field \"spec.foo\""#)
                || w.contains(r#"unknown field "spec.foo""#)),
        "warnings: {warnings:?}"
    );

    let ignore = raw_request(
        &w.client,
        "POST",
        &format!("{path}?fieldValidation=Ignore"),
        Some("application/json"),
        Some(body("ignore")),
    )
    .await;
    assert_eq!(ignore.status, 201, "{}", ignore.text);
    assert!(
        ignore.headers.get("warning").is_none(),
        "Ignore does not warn"
    );

    w.uninstall().await;
    env.cleanup().await;
}
