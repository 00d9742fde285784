use serde_json::Value;

use super::conflict::*;
use super::field_manager::*;
use super::field_set::*;
use super::walk::*;
use super::*;
use serde_json::json;

const T0: &str = "2024-01-01T00:00:00Z";
const T1: &str = "2024-01-01T00:01:00Z";

fn request<'a>(kind: &'a str, manager: &'a str, force: bool) -> ApplyRequest<'a> {
    ApplyRequest {
        kind,
        api_version: "v1",
        manager,
        force,
        now: T1,
        subresource: None,
    }
}

fn apply(live: Option<&Value>, applied: Value, manager: &str) -> Value {
    let req = request(applied["kind"].as_str().unwrap_or_default(), manager, false);
    server_side_apply(live, &applied, &req).unwrap_or_else(|c| panic!("conflicts: {c:?}"))
}

fn conflicts(live: &Value, applied: Value, manager: &str) -> Vec<Conflict> {
    let req = request(applied["kind"].as_str().unwrap_or_default(), manager, false);
    match server_side_apply(Some(live), &applied, &req) {
        Ok(obj) => panic!("expected conflicts, got {obj}"),
        Err(conflicts) => conflicts,
    }
}

fn entry<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
    obj["metadata"]["managedFields"]
        .as_array()
        .and_then(|list| {
            list.iter()
                .find(|e| e["manager"] == manager && e["operation"] == operation)
        })
        .unwrap_or_else(|| panic!("no {operation} entry for {manager} in {obj}"))
}

fn fields_v1<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
    &entry(obj, manager, operation)["fieldsV1"]
}

fn config_map(data: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data})
}

#[test]
fn apply_creates_object_with_ownership() {
    let applied = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "labels": {"app": "web"}},
        "data": {"key": "value"}
    });
    let obj = apply(None, applied, "kubectl");
    assert_eq!(obj["data"], json!({"key": "value"}));
    assert_eq!(obj["metadata"]["name"], "cm");
    let e = entry(&obj, "kubectl", "Apply");
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(e["time"], T1);
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
    );
    assert!(e.get("subresource").is_none());
}

#[test]
fn reapply_removes_fields_no_longer_applied() {
    let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
    let second = apply(Some(&first), config_map(json!({"a": "1"})), "m");
    assert_eq!(second["data"], json!({"a": "1"}));
    assert_eq!(
        fields_v1(&second, "m", "Apply"),
        &json!({"f:data": {"f:a": {}}})
    );
    let third = apply(
        Some(&second),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
        "m",
    );
    assert!(third.get("data").is_none(), "{third}");
    assert!(third["metadata"].get("managedFields").is_none(), "{third}");
}

#[test]
fn reapply_keeps_fields_owned_by_others() {
    let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
    let shared = apply(Some(&first), config_map(json!({"b": "2"})), "other");
    let after = apply(Some(&shared), config_map(json!({"a": "1"})), "m");
    assert_eq!(after["data"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        fields_v1(&after, "other", "Apply"),
        &json!({"f:data": {"f:b": {}}})
    );
}

#[test]
fn conflicts_with_update_manager() {
    let mut live = config_map(json!({"key": "old"}));
    record_update(None, &mut live, "kubectl-client-side-apply", "v1", T0, None);
    let found = conflicts(&live, config_map(json!({"key": "new"})), "kubectl");
    assert_eq!(
        found,
        vec![Conflict {
            manager: "kubectl-client-side-apply".to_owned(),
            field: ".data.key".to_owned(),
            updated_with: Some("v1".to_owned()),
            subresource: None,
        }]
    );
    assert_eq!(
        conflict_message(&found, "v1"),
        "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.key"
    );
    assert_eq!(
        found[0].cause_message("v1"),
        "conflict with \"kubectl-client-side-apply\" using v1"
    );
}

#[test]
fn conflicts_with_apply_manager_and_several_fields() {
    let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "m1");
    let found = conflicts(&live, config_map(json!({"a": "2", "b": "2"})), "m2");
    assert_eq!(found.len(), 2);
    assert_eq!(
        conflict_message(&found, "v1"),
        "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .data.a\n- .data.b"
    );
}

#[test]
fn conflict_message_groups_owners_in_order() {
    let conflict = |manager: &str, field: &str, updated_with: Option<&str>| Conflict {
        manager: manager.to_owned(),
        field: field.to_owned(),
        updated_with: updated_with.map(str::to_owned),
        subresource: None,
    };
    let conflicts = [
        conflict("b", ".y", Some("")),
        conflict("a", ".x", None),
        conflict("b", ".z", Some("")),
    ];
    assert_eq!(
        conflict_message(&conflicts, "apps/v1"),
        "Apply failed with 3 conflicts: conflicts with \"a\":\n- .x\nconflicts with \"b\" using apps/v1:\n- .y\n- .z"
    );
}

#[test]
fn force_takes_ownership() {
    let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "m1");
    let applied = config_map(json!({"a": "2"}));
    let obj = server_side_apply(Some(&live), &applied, &request("ConfigMap", "m2", true)).unwrap();
    assert_eq!(obj["data"], json!({"a": "2", "b": "1"}));
    assert_eq!(
        fields_v1(&obj, "m1", "Apply"),
        &json!({"f:data": {"f:b": {}}})
    );
    assert_eq!(
        fields_v1(&obj, "m2", "Apply"),
        &json!({"f:data": {"f:a": {}}})
    );
}

#[test]
fn equal_values_are_shared_without_conflict() {
    let live = apply(None, config_map(json!({"a": "1"})), "m1");
    let obj = apply(Some(&live), config_map(json!({"a": "1"})), "m2");
    assert_eq!(
        fields_v1(&obj, "m1", "Apply"),
        &json!({"f:data": {"f:a": {}}})
    );
    assert_eq!(
        fields_v1(&obj, "m2", "Apply"),
        &json!({"f:data": {"f:a": {}}})
    );
}

#[test]
fn labels_are_owned_per_key() {
    let labelled = |labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": labels}});
    let first = apply(None, labelled(json!({"a": "1"})), "m1");
    let second = apply(Some(&first), labelled(json!({"b": "2"})), "m2");
    assert_eq!(second["metadata"]["labels"], json!({"a": "1", "b": "2"}));
    assert_eq!(
        fields_v1(&second, "m1", "Apply"),
        &json!({"f:metadata": {"f:labels": {"f:a": {}}}})
    );
    assert_eq!(
        fields_v1(&second, "m2", "Apply"),
        &json!({"f:metadata": {"f:labels": {"f:b": {}}}})
    );
    let third = apply(Some(&second), labelled(json!({})), "m1");
    assert_eq!(third["metadata"]["labels"], json!({"b": "2"}));
}

fn deployment(containers: Value) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"replicas": 1, "template": {"spec": {"containers": containers}}}
    })
}

#[test]
fn keyed_lists_merge_and_use_k_elements() {
    let first = apply(
        None,
        deployment(json!([{"name": "a", "image": "a:1"}])),
        "m1",
    );
    let fields = fields_v1(&first, "m1", "Apply");
    assert_eq!(
        fields["f:spec"]["f:template"]["f:spec"]["f:containers"],
        json!({"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}})
    );
    let sidecar = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
        "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:1"}]}}}});
    let second = apply(Some(&first), sidecar, "m2");
    let names: Vec<&Value> = second["spec"]["template"]["spec"]["containers"]
        .as_array()
        .map(|c| c.iter().map(|c| &c["name"]).collect())
        .unwrap_or_default();
    assert_eq!(names, [&json!("a"), &json!("b")]);

    let found = conflicts(
        &second,
        deployment(json!([{"name": "b", "image": "b:2"}])),
        "m1",
    );
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].field,
        ".spec.template.spec.containers[name=\"b\"].image"
    );

    let dropped = apply(Some(&second), deployment(json!([])), "m1");
    let containers = &dropped["spec"]["template"]["spec"]["containers"];
    assert_eq!(
        containers,
        &json!([{"name": "b", "image": "b:1"}]),
        "{dropped}"
    );
}

#[test]
fn finalizers_are_sets() {
    let with = |finalizers: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "finalizers": finalizers}});
    let first = apply(None, with(json!(["a"])), "m1");
    let second = apply(Some(&first), with(json!(["b"])), "m2");
    assert_eq!(second["metadata"]["finalizers"], json!(["a", "b"]));
    assert_eq!(
        fields_v1(&second, "m2", "Apply"),
        &json!({"f:metadata": {"f:finalizers": {"v:\"b\"": {}}}})
    );
    let third = apply(Some(&second), with(json!(["c"])), "m1");
    assert_eq!(third["metadata"]["finalizers"], json!(["b", "c"]));
}

#[test]
fn unknown_kinds_have_atomic_lists() {
    let widget = |items: Value| json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"items": items}});
    let first = apply(None, widget(json!([1, 2])), "m1");
    assert_eq!(
        fields_v1(&first, "m1", "Apply"),
        &json!({"f:spec": {"f:items": {}}})
    );
    let found = conflicts(&first, widget(json!([3])), "m2");
    assert_eq!(found[0].field, ".spec.items");
}

#[test]
fn null_in_apply_removes_field() {
    let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
    let obj = apply(Some(&first), config_map(json!({"a": "1", "b": null})), "m");
    assert_eq!(obj["data"], json!({"a": "1"}));
}

#[test]
fn record_update_on_create_owns_every_leaf() {
    let mut obj = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cm", "namespace": "ns", "uid": "u", "resourceVersion": "1", "labels": {"a": "1"}},
        "data": {"k": "v"}
    });
    record_update(None, &mut obj, "kubectl-create", "v1", T0, None);
    let e = entry(&obj, "kubectl-create", "Update");
    assert_eq!(e["time"], T0);
    assert_eq!(e["apiVersion"], "v1");
    assert_eq!(
        e["fieldsV1"],
        json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
    );
}

#[test]
fn record_update_owns_list_items() {
    let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k"}]}});
    record_update(None, &mut pod, "kubectl-create", "v1", T0, None);
    assert_eq!(
        fields_v1(&pod, "kubectl-create", "Update")["f:spec"],
        json!({
            "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}},
            "f:tolerations": {}
        })
    );
}

#[test]
fn record_update_transfers_ownership() {
    let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "applier");
    let mut new = live.clone();
    new["data"]["a"] = json!("2");
    new["data"]["c"] = json!("3");
    record_update(Some(&live), &mut new, "editor", "v1", T1, None);
    assert_eq!(
        fields_v1(&new, "applier", "Apply"),
        &json!({"f:data": {"f:b": {}}})
    );
    assert_eq!(
        fields_v1(&new, "editor", "Update"),
        &json!({"f:data": {"f:a": {}, "f:c": {}}})
    );
    let list = new["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        list.first().map(|e| &e["operation"]),
        Some(&json!("Apply")),
        "Apply entries sort first"
    );

    let mut removed = new.clone();
    if let Some(data) = removed["data"].as_object_mut() {
        data.remove("b");
    }
    record_update(Some(&new), &mut removed, "editor", "v1", T1, None);
    let managers: Vec<&Value> = removed["metadata"]["managedFields"]
        .as_array()
        .map(|l| l.iter().map(|e| &e["manager"]).collect())
        .unwrap_or_default();
    assert_eq!(
        managers,
        [&json!("editor")],
        "the applier lost its last field"
    );
}

#[test]
fn noop_update_keeps_timestamps() {
    let mut live = config_map(json!({"a": "1"}));
    record_update(None, &mut live, "m", "v1", T0, None);
    let mut same = live.clone();
    record_update(Some(&live), &mut same, "m", "v1", T1, None);
    assert_eq!(same, live);
    let reapplied = apply(
        Some(&apply(None, config_map(json!({"a": "1"})), "x")),
        config_map(json!({"a": "1"})),
        "x",
    );
    assert_eq!(entry(&reapplied, "x", "Apply")["time"], T1);
}

#[test]
fn client_can_reset_managed_fields() {
    let live = apply(None, config_map(json!({"a": "1"})), "m");
    let mut reset = live.clone();
    reset["metadata"]["managedFields"] = json!([]);
    record_update(Some(&live), &mut reset, "editor", "v1", T1, None);
    assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
}

#[test]
fn status_subresource_entries_are_separate() {
    let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Pending"}});
    let applied = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}});
    let req = ApplyRequest {
        subresource: Some("status"),
        ..request("Pod", "kubelet", false)
    };
    let obj = server_side_apply(Some(&live), &applied, &req).unwrap();
    assert_eq!(entry(&obj, "kubelet", "Apply")["subresource"], "status");
    let found = conflicts(
        &obj,
        json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Failed"}}),
        "other",
    );
    assert_eq!(found[0].subresource.as_deref(), Some("status"));
    assert_eq!(
        conflict_message(&found, "v1"),
        "Apply failed with 1 conflict: conflict with \"kubelet\" with subresource \"status\": .status.phase"
    );
}

#[test]
fn malformed_managed_fields_are_ignored() {
    let mut live = config_map(json!({"a": "1"}));
    live["metadata"]["managedFields"] = json!([
        "junk",
        {"manager": "bad-op", "operation": "Delete", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}},
        {"manager": "bad-type", "operation": "Apply", "fieldsType": "FieldsV2", "fieldsV1": {}},
        {"manager": "bad-fields", "operation": "Apply", "fieldsV1": [1]},
        {"manager": "odd", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
         "fieldsV1": {"f:data": {"f:a": {}, "junk": 1, "f:b": "x"}, "weird": {}}}
    ]);
    let obj = apply(Some(&live), config_map(json!({"c": "3"})), "m");
    let managers: Vec<&Value> = obj["metadata"]["managedFields"]
        .as_array()
        .map(|l| l.iter().map(|e| &e["manager"]).collect())
        .unwrap_or_default();
    assert_eq!(managers, [&json!("m"), &json!("odd")]);
    assert_eq!(
        fields_v1(&obj, "odd", "Update"),
        &json!({"f:data": {"f:a": {}}})
    );
    live["metadata"]["managedFields"] = json!("not a list");
    assert!(
        server_side_apply(
            Some(&live),
            &config_map(json!({"a": "2"})),
            &request("ConfigMap", "m", false)
        )
        .is_ok()
    );
}

#[test]
fn dot_marker_round_trips() {
    let fields = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}}}});
    let set = FieldSet::from_fields_v1(&fields);
    assert_eq!(set.to_fields_v1(), fields);
    let paths: Vec<String> = set.paths().iter().map(|p| display_path(p)).collect();
    assert_eq!(
        paths,
        [
            ".metadata.labels",
            ".metadata.labels.a",
            ".spec[name=\"c\"]",
            ".spec[name=\"c\"].name"
        ]
    );
}

#[test]
fn interleave_follows_smd_order() {
    let walker = Walker { kind: "Pod" };
    let names = |items: Vec<Value>| -> Vec<String> {
        items
            .iter()
            .map(|i| i["name"].as_str().unwrap_or_default().to_owned())
            .collect()
    };
    let list =
        |names: &[&str]| -> Vec<Value> { names.iter().map(|n| json!({"name": n})).collect() };
    let id = |item: &Value| Some(key_element("name", item));
    let merged = walker.interleave(
        "spec.containers[]",
        &list(&["a", "b", "c"]),
        &list(&["d", "b"]),
        id,
    );
    assert_eq!(names(merged), ["a", "d", "b", "c"]);
    let merged = walker.interleave(
        "spec.containers[]",
        &list(&["a", "b", "c"]),
        &list(&["c", "a"]),
        id,
    );
    assert_eq!(names(merged), ["b", "c", "a"]);
}
