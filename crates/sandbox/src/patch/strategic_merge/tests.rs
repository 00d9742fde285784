use super::*;
use serde_json::json;

fn patch(kind: &str, original: Value, patch: Value) -> Value {
    apply_patch(kind, &original, &patch).unwrap_or_else(|e| panic!("patch failed: {e}"))
}

fn pod(containers: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": containers}})
}

#[test]
fn strategy_table() {
    use ListStrategy::*;
    assert_eq!(list_strategy("Pod", "spec.containers"), MergeByKey("name"));
    assert_eq!(
        list_strategy("Pod", "spec.containers[].ports"),
        MergeByKey("containerPort")
    );
    assert_eq!(
        list_strategy("Pod", "spec.initContainers[].env"),
        MergeByKey("name")
    );
    assert_eq!(
        list_strategy("Pod", "spec.containers[].volumeMounts"),
        MergeByKey("mountPath")
    );
    assert_eq!(list_strategy("Pod", "spec.containers[].args"), Replace);
    assert_eq!(list_strategy("Pod", "spec.volumes"), MergeByKey("name"));
    assert_eq!(list_strategy("Pod", "spec.tolerations"), Replace);
    assert_eq!(
        list_strategy("Pod", "status.conditions"),
        MergeByKey("type")
    );
    assert_eq!(
        list_strategy("Deployment", "spec.template.spec.containers"),
        MergeByKey("name")
    );
    assert_eq!(
        list_strategy("CronJob", "spec.jobTemplate.spec.template.spec.volumes"),
        MergeByKey("name")
    );
    assert_eq!(
        list_strategy("PodTemplate", "template.spec.containers[].env"),
        MergeByKey("name")
    );
    assert_eq!(list_strategy("Deployment", "spec.containers"), Replace);
    assert_eq!(list_strategy("Service", "spec.ports"), MergeByKey("port"));
    assert_eq!(
        list_strategy("Node", "status.addresses"),
        MergeByKey("type")
    );
    assert_eq!(list_strategy("EndpointSlice", "endpoints"), Replace);
    assert_eq!(
        list_strategy("Widget", "metadata.finalizers"),
        MergePrimitives
    );
    assert_eq!(
        list_strategy("ConfigMap", "metadata.ownerReferences"),
        MergeByKey("uid")
    );
    assert_eq!(list_strategy("Widget", "spec.items"), Replace);
    assert_eq!(list_strategy("CronJob", "status.conditions"), Replace);
}

#[test]
fn maps_merge_and_null_deletes() {
    let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}, "data": {"x": "1"}});
    let result = patch(
        "ConfigMap",
        original,
        json!({"metadata": {"labels": {"a": null, "c": "3"}}, "data": null}),
    );
    assert_eq!(
        result,
        json!({"metadata": {"labels": {"b": "2", "c": "3"}}})
    );
}

#[test]
fn nulls_in_new_values_are_dropped() {
    let result = patch(
        "ConfigMap",
        json!({}),
        json!({"metadata": {"labels": {"a": "1", "b": null}}}),
    );
    assert_eq!(result, json!({"metadata": {"labels": {"a": "1"}}}));
}

#[test]
fn containers_merge_by_name() {
    let original = pod(json!([
        {"name": "a", "image": "a:1", "ports": [{"containerPort": 80, "name": "http"}]},
        {"name": "b", "image": "b:1"}
    ]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"containers": [
            {"name": "a", "image": "a:2", "ports": [{"containerPort": 80, "protocol": "TCP"}]}
        ]}}),
    );
    assert_eq!(
        result["spec"]["containers"],
        json!([
            {"name": "a", "image": "a:2", "ports": [{"containerPort": 80, "name": "http", "protocol": "TCP"}]},
            {"name": "b", "image": "b:1"}
        ])
    );
}

#[test]
fn new_list_items_go_first_like_upstream() {
    let original = pod(json!([{"name": "a"}, {"name": "b"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"containers": [{"name": "c"}]}}),
    );
    assert_eq!(
        result["spec"]["containers"],
        json!([{"name": "c"}, {"name": "a"}, {"name": "b"}])
    );

    let original = pod(json!([{"name": "a"}, {"name": "b"}, {"name": "c"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"containers": [{"name": "b", "x": 1}, {"name": "d"}]}}),
    );
    assert_eq!(
        result["spec"]["containers"],
        json!([{"name": "a"}, {"name": "b", "x": 1}, {"name": "d"}, {"name": "c"}])
    );
}

#[test]
fn set_element_order_orders_the_merge() {
    let original = pod(json!([{"name": "a"}, {"name": "b"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {
            "$setElementOrder/containers": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
            "containers": [{"name": "c", "image": "c"}]
        }}),
    );
    assert_eq!(
        result["spec"]["containers"],
        json!([{"name": "a"}, {"name": "b"}, {"name": "c", "image": "c"}])
    );

    let original = pod(json!([{"name": "a"}, {"name": "b"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"$setElementOrder/containers": [{"name": "b"}, {"name": "a"}]}}),
    );
    assert_eq!(
        result["spec"]["containers"],
        json!([{"name": "b"}, {"name": "a"}])
    );
}

#[test]
fn status_conditions_merge_by_type() {
    let original = json!({"status": {"conditions": [
        {"type": "Ready", "status": "False"},
        {"type": "Initialized", "status": "True"}
    ]}});
    let result = patch(
        "Pod",
        original,
        json!({"status": {
            "$setElementOrder/conditions": [{"type": "Initialized"}, {"type": "Ready"}],
            "conditions": [{"type": "Ready", "status": "True"}]
        }}),
    );
    assert_eq!(
        result["status"]["conditions"],
        json!([{"type": "Initialized", "status": "True"}, {"type": "Ready", "status": "True"}])
    );
}

#[test]
fn service_ports_merge_by_port() {
    let original = json!({"spec": {"ports": [{"port": 80, "name": "http"}, {"port": 443}]}});
    let result = patch(
        "Service",
        original,
        json!({"spec": {"ports": [{"port": 443, "name": "https"}]}}),
    );
    assert_eq!(
        result["spec"]["ports"],
        json!([{"port": 80, "name": "http"}, {"port": 443, "name": "https"}])
    );
}

#[test]
fn delete_directive_in_list() {
    let original = pod(json!([{"name": "a"}, {"name": "b"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"containers": [{"$patch": "delete", "name": "a"}]}}),
    );
    assert_eq!(result["spec"]["containers"], json!([{"name": "b"}]));
}

#[test]
fn replace_directive_in_list() {
    let original = pod(json!([{"name": "a", "image": "x"}, {"name": "b"}]));
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"containers": [{"name": "c"}, {"$patch": "replace"}]}}),
    );
    assert_eq!(result["spec"]["containers"], json!([{"name": "c"}]));
}

#[test]
fn replace_directive_on_map() {
    let original = json!({"metadata": {"labels": {"a": "1", "b": "2"}}});
    let result = patch(
        "ConfigMap",
        original,
        json!({"metadata": {"labels": {"$patch": "replace", "c": "3"}}}),
    );
    assert_eq!(result, json!({"metadata": {"labels": {"c": "3"}}}));
}

#[test]
fn delete_directive_on_map() {
    let original = json!({"metadata": {"name": "x", "labels": {"a": "1"}}});
    let result = patch(
        "ConfigMap",
        original,
        json!({"metadata": {"labels": {"$patch": "delete"}}}),
    );
    assert_eq!(result, json!({"metadata": {"name": "x"}}));
    let whole = patch("ConfigMap", json!({"a": 1}), json!({"$patch": "delete"}));
    assert_eq!(whole, json!({}));
}

#[test]
fn finalizers_union_keeps_order() {
    let original = json!({"metadata": {"finalizers": ["a", "b"]}});
    let result = patch(
        "Widget",
        original.clone(),
        json!({"metadata": {"finalizers": ["b", "c"]}}),
    );
    assert_eq!(result["metadata"]["finalizers"], json!(["a", "b", "c"]));
    let result = patch(
        "Widget",
        original,
        json!({"metadata": {"finalizers": ["a"]}}),
    );
    assert_eq!(result["metadata"]["finalizers"], json!(["a", "b"]));
}

#[test]
fn delete_from_primitive_list() {
    let original = json!({"metadata": {"finalizers": ["a", "b", "c"]}});
    let result = patch(
        "Widget",
        original,
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "z"]}}),
    );
    assert_eq!(result["metadata"]["finalizers"], json!(["a", "c"]));
    let untouched = patch(
        "Widget",
        json!({"metadata": {}}),
        json!({"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}}),
    );
    assert_eq!(untouched, json!({"metadata": {}}));
}

#[test]
fn retain_keys_clears_unlisted_fields() {
    let original = pod(json!([]));
    let original = patch(
        "Pod",
        original,
        json!({"spec": {"volumes": [{"name": "v", "emptyDir": {}}]}}),
    );
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"volumes": [
            {"name": "v", "$retainKeys": ["name", "hostPath"], "hostPath": {"path": "/x"}}
        ]}}),
    );
    assert_eq!(
        result["spec"]["volumes"],
        json!([{"name": "v", "hostPath": {"path": "/x"}}])
    );
    let error = apply_patch(
        "Pod",
        &json!({}),
        &json!({"spec": {"$retainKeys": ["a"], "b": 1}}),
    )
    .unwrap_err();
    assert_eq!(error, ERR_RETAIN_KEYS);
}

#[test]
fn replace_lists_and_unknown_kinds() {
    let original = json!({"spec": {"items": [1, 2], "tolerations": [{"key": "a"}]}});
    let result = patch("Widget", original, json!({"spec": {"items": [3]}}));
    assert_eq!(result["spec"]["items"], json!([3]));
    let original = pod(json!([]));
    let original = patch(
        "Pod",
        original,
        json!({"spec": {"tolerations": [{"key": "a"}]}}),
    );
    let result = patch(
        "Pod",
        original,
        json!({"spec": {"tolerations": [{"key": "b"}]}}),
    );
    assert_eq!(result["spec"]["tolerations"], json!([{"key": "b"}]));
}

#[test]
fn type_changes_replace() {
    let result = patch(
        "Widget",
        json!({"spec": {"a": {"b": 1}}}),
        json!({"spec": {"a": "text"}}),
    );
    assert_eq!(result, json!({"spec": {"a": "text"}}));
}

#[test]
fn null_patch_is_a_no_op() {
    let original = json!({"a": 1});
    assert_eq!(patch("Widget", original.clone(), Value::Null), original);
}

#[test]
fn errors() {
    let error = apply_patch("Pod", &json!({}), &json!([1])).unwrap_err();
    assert_eq!(
        error,
        "json: cannot unmarshal array into Go value of type map[string]interface {}"
    );
    let error = apply_patch("Pod", &json!({}), &json!("x")).unwrap_err();
    assert!(error.contains("cannot unmarshal string"));

    let original = pod(json!([{"name": "a"}]));
    let error = apply_patch(
        "Pod",
        &original,
        &json!({"spec": {"containers": [{"image": "x"}]}}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "map: map[image:x] does not contain declared merge key: name"
    );

    let error = apply_patch("Pod", &original, &json!({"spec": {"$patch": "explode"}})).unwrap_err();
    assert_eq!(
        error,
        "unknown patch type: explode in map: map[$patch:explode]"
    );

    let error = apply_patch(
        "Pod",
        &original,
        &json!({"spec": {"containers": [{"$patch": "delete"}]}}),
    )
    .unwrap_err();
    assert_eq!(
        error,
        "map: map[$patch:delete] does not contain declared merge key: name"
    );

    let error = apply_patch("Pod", &original, &json!({"spec": {"containers": ["a"]}})).unwrap_err();
    assert_eq!(
        error,
        "list element types are not identical: [[map[name:a]] [a]]"
    );

    let error = apply_patch(
        "Widget",
        &json!({"metadata": {"finalizers": [["a"]]}}),
        &json!({"metadata": {"finalizers": [["b"]]}}),
    )
    .unwrap_err();
    assert_eq!(error, "lists of lists are not supported");

    let error = apply_patch(
        "Pod",
        &original,
        &json!({"spec": {"$setElementOrder/containers": "x"}}),
    )
    .unwrap_err();
    assert_eq!(error, ERR_SET_ELEMENT_ORDER);
    let error = apply_patch(
        "Pod",
        &original,
        &json!({"spec": {"$deleteFromPrimitiveListX": []}}),
    )
    .unwrap_err();
    assert_eq!(error, ERR_PRIMITIVE_LIST);
}

#[test]
fn go_number_formatting() {
    let cases = [
        (json!(80), "80"),
        (json!(1.5), "1.5"),
        (json!(1_000_000), "1e+06"),
        (json!(0.00001), "1e-05"),
        (json!(0), "0"),
        (json!(-123456), "-123456"),
    ];
    for (value, expected) in cases {
        assert_eq!(go_format(&value), expected);
    }
}
