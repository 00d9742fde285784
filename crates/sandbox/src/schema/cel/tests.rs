//! Rules checked and evaluated against the outcomes and messages kube-apiserver 1.28 gives for
//! the same schemas and objects (recorded from a real server; the differential tests in
//! crates/conformance replay them against both).

use serde_json::{Value, json};

use super::{check_rules, validate_rules};

fn schema(spec_rules: Value, properties: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": spec_rules,
                "properties": properties,
            }
        }
    })
}

fn widget() -> Value {
    schema(
        json!([
            {"rule": "self.min <= self.max", "message": "min must not exceed max"},
            {"rule": "!has(self.a) || !has(self.b)",
             "messageExpression": "'a and b are exclusive, got a=' + self.a",
             "fieldPath": ".a", "reason": "FieldValueForbidden"},
            {"rule": "self.name == oldSelf.name", "message": "name is immutable"},
            {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas cannot go down"},
        ]),
        json!({
            "name": {"type": "string", "maxLength": 20,
                     "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]},
            "min": {"type": "integer"},
            "max": {"type": "integer"},
            "a": {"type": "string"},
            "b": {"type": "string"},
            "replicas": {"type": "integer"},
            "tags": {
                "type": "array", "maxItems": 10,
                "items": {"type": "string", "maxLength": 10,
                          "x-kubernetes-validations": [{"rule": "self.startsWith('t-')", "message": "tags start with t-"}]},
                "x-kubernetes-validations": [
                    {"rule": "self.all(t, t.size() > 2)"},
                    {"rule": "self.isSorted()", "message": "tags sorted"},
                ],
            },
            "labels": {
                "type": "object", "maxProperties": 5,
                "additionalProperties": {"type": "string", "maxLength": 10},
                "x-kubernetes-validations": [{"rule": "self.all(k, k.matches('^[a-z]+$'))", "message": "keys lowercase"}],
            },
        }),
    )
}

fn printed(errors: &[crate::field_error::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

#[test]
fn a_create_reports_every_failed_rule_in_the_servers_words() {
    let obj = json!({"apiVersion": "probe.example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
        "spec": {"name": "n1", "min": 5, "max": 3, "a": "x", "b": "y", "replicas": 3,
                 "tags": ["t-b", "t-a", "x"], "labels": {"A": "b"}}});
    assert!(check_rules(&widget(), "spec.validation.openAPIV3Schema").is_empty());
    let errors = validate_rules(&widget(), &obj, None);
    assert_eq!(
        printed(&errors),
        [
            r#"spec: Invalid value: "object": min must not exceed max"#,
            "spec.a: Forbidden: a and b are exclusive, got a=x",
            r#"spec.labels: Invalid value: "object": keys lowercase"#,
            r#"spec.tags: Invalid value: "array": failed rule: self.all(t, t.size() > 2)"#,
            r#"spec.tags: Invalid value: "array": tags sorted"#,
            r#"spec.tags[2]: Invalid value: "string": tags start with t-"#,
        ]
    );
    assert_eq!(errors[1].kind.reason(), "FieldValueForbidden");
}

#[test]
fn transition_rules_run_only_where_an_old_value_exists() {
    let old = json!({"spec": {"name": "n1", "min": 1, "max": 3, "replicas": 3}});
    let new = json!({"spec": {"name": "n2", "min": 1, "max": 3, "replicas": 2}});
    let errors = validate_rules(&widget(), &new, Some(&old));
    assert_eq!(
        printed(&errors),
        [
            r#"spec: Invalid value: "object": name is immutable"#,
            r#"spec: Invalid value: "object": replicas cannot go down"#,
            r#"spec.name: Invalid value: "string": Value is immutable"#,
        ]
    );
    // A field the old object did not have: its own transition rule is skipped.
    let old = json!({"spec": {"min": 1, "max": 3, "replicas": 3}});
    let new = json!({"spec": {"name": "n2", "min": 1, "max": 3, "replicas": 3}});
    let errors = validate_rules(&widget(), &new, Some(&old));
    assert_eq!(
        printed(&errors),
        ["spec: Invalid value: \"object\": no such key: name evaluating rule: name is immutable"]
    );
}

#[test]
fn map_lists_correlate_items_by_key_other_lists_do_not() {
    let items = json!({"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 10},
        "version": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "no downgrade"}]},
    }, "required": ["name"]});
    let s = schema(
        json!([]),
        json!({"addons": {"type": "array", "maxItems": 5, "items": items,
                           "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]}}),
    );
    assert!(check_rules(&s, "p").is_empty());
    let old =
        json!({"spec": {"addons": [{"name": "a", "version": 2}, {"name": "b", "version": 5}]}});
    let new =
        json!({"spec": {"addons": [{"name": "b", "version": 4}, {"name": "c", "version": 1}]}});
    assert_eq!(
        printed(&validate_rules(&s, &new, Some(&old))),
        [r#"spec.addons[0].version: Invalid value: "integer": no downgrade"#]
    );
    // In an atomic list there is nothing to correlate: the CRD is refused.
    let mut atomic = s.clone();
    atomic["properties"]["spec"]["properties"]["addons"]["x-kubernetes-list-type"] =
        json!("atomic");
    let errors = check_rules(&atomic, "p");
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0]
            .message
            .contains("oldSelf cannot be used on the uncorrelatable portion")
    );
}

#[test]
fn bad_rules_fail_the_crd_with_the_servers_errors() {
    let props = json!({"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}, "n": {"type": "integer"}});
    let check = |rules: Value| {
        printed(&check_rules(
            &schema(rules, props.clone()),
            "spec.validation.openAPIV3Schema",
        ))
    };
    let errors = check(json!([{"rule": "self.nme == \"a\""}]));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with(
        "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value: apiextensions.ValidationRule{Rule:\"self.nme == \\\"a\\\"\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\"}: compilation failed: ERROR: <input>:1:"
    ), "{errors:?}");
    assert!(errors[0].contains("undefined field 'nme'"));
    let errors = check(json!([{"rule": "self.name.foo()"}]));
    assert!(
        errors[0].contains("undeclared reference to 'foo' (in container '')"),
        "{errors:?}"
    );
    let errors = check(json!([{"rule": "self.name.format([1])"}]));
    assert!(
        errors[0].contains("undeclared reference to 'format'"),
        "{errors:?}"
    );
    let errors = check(json!([{"rule": "self.name"}]));
    assert!(
        errors[0].ends_with("cel expression must evaluate to a bool"),
        "{errors:?}"
    );
    let errors = check(json!([{"rule": "self.name =="}]));
    assert!(
        errors[0].contains("compilation failed: ERROR: <input>:1:"),
        "{errors:?}"
    );
    let errors = check(json!([{"rule": "true", "messageExpression": "1"}]));
    assert!(
        errors[0].ends_with("messageExpression must evaluate to a string"),
        "{errors:?}"
    );
    let errors = check(json!([{"rule": "true", "fieldPath": ".nope"}]));
    assert_eq!(
        errors,
        [
            r#"spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].fieldPath: Invalid value: ".nope": fieldPath must be a valid path"#
        ]
    );
    let errors = check(json!([{"rule": "", "message": "x"}]));
    assert_eq!(
        errors,
        [
            "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Required value: rule is not specified"
        ]
    );
    let errors = check(json!([{"rule": "self.name.url() != ''"}]));
    assert!(
        errors[0].contains("the sandbox does not evaluate it"),
        "{errors:?}"
    );
}

#[test]
fn rules_too_expensive_for_unbounded_lists_are_refused_as_the_server_does() {
    let props = json!({"tags": {"type": "array", "items": {"type": "string"}}});
    let rule = "self.tags.all(a, self.tags.all(b, self.tags.all(c, a+b+c != \"\")))";
    let errors = printed(&check_rules(
        &schema(json!([{"rule": rule}]), props.clone()),
        "spec.validation.openAPIV3Schema",
    ));
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule";
    assert_eq!(
        errors,
        [
            format!("{at}: Forbidden: estimated rule cost exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"),
            format!("{at}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"),
            "spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)".to_owned(),
        ]
    );
    // One pass over the same unbounded list is within budget.
    let ok = schema(json!([{"rule": "self.tags.all(t, t.size() > 2)"}]), props);
    assert!(check_rules(&ok, "p").is_empty());
}

#[test]
fn runtime_errors_and_libraries() {
    let s = schema(
        json!([
            {"rule": "self.items.sum() < 10", "message": "sum"},
            {"rule": "self.items.max() == self.items[self.items.size() - 1]", "message": "last is max"},
            {"rule": "self.text.find('[0-9]+') == '42'", "message": "find"},
            {"rule": "self.text.findAll('[a-z]').size() == 2", "message": "findAll"},
            {"rule": "self.text.split('-').size() == 2 && self.text.lowerAscii() == self.text", "message": "strings"},
            {"rule": "self.items.indexOf(3) == 1", "message": "indexOf"},
        ]),
        json!({"items": {"type": "array", "maxItems": 5, "items": {"type": "integer"}},
               "text": {"type": "string", "maxLength": 20}}),
    );
    assert!(
        check_rules(&s, "p").is_empty(),
        "{:?}",
        check_rules(&s, "p")
    );
    let good = json!({"spec": {"items": [1, 3, 4], "text": "ab-42"}});
    assert!(
        validate_rules(&s, &good, None).is_empty(),
        "{:?}",
        validate_rules(&s, &good, None)
    );
    let bad = json!({"spec": {"items": [4, 5, 3], "text": "abc-x-1"}});
    assert_eq!(
        printed(&validate_rules(&s, &bad, None)),
        [
            r#"spec: Invalid value: "object": sum"#,
            r#"spec: Invalid value: "object": last is max"#,
            r#"spec: Invalid value: "object": find"#,
            r#"spec: Invalid value: "object": findAll"#,
            r#"spec: Invalid value: "object": strings"#,
            r#"spec: Invalid value: "object": indexOf"#,
        ]
    );
}

#[test]
fn the_resource_root_sees_name_but_not_other_metadata() {
    let mut s = schema(json!([]), json!({"x": {"type": "string"}}));
    s["x-kubernetes-validations"] = json!([{"rule": "self.metadata.name.startsWith('ok-')", "message": "name must start with ok-"}]);
    assert!(check_rules(&s, "p").is_empty());
    let obj = json!({"metadata": {"name": "bad", "labels": {"a": "b"}}, "spec": {}});
    assert_eq!(
        printed(&validate_rules(&s, &obj, None)),
        [r#"<nil>: Invalid value: "object": name must start with ok-"#]
    );
    s["x-kubernetes-validations"] = json!([{"rule": "has(self.metadata.labels)"}]);
    let errors = printed(&check_rules(&s, "p"));
    assert!(errors[0].contains("undefined field 'labels'"), "{errors:?}");
}

#[test]
fn a_failed_rules_field_path_moves_the_later_rules_of_its_node_as_in_1_28() {
    let s = schema(
        json!([
            {"rule": "self.a != 'x'", "message": "a", "fieldPath": ".a"},
            {"rule": "self.b != 'x'", "message": "b", "fieldPath": ".b"},
            {"rule": "false", "message": "c"},
        ]),
        json!({"a": {"type": "string"}, "b": {"type": "string"}}),
    );
    let obj = json!({"spec": {"a": "x", "b": "x"}});
    assert_eq!(
        printed(&validate_rules(&s, &obj, None)),
        [
            r#"spec.a: Invalid value: "object": a"#,
            r#"spec.a.b: Invalid value: "object": b"#,
            r#"spec.a.b: Invalid value: "object": c"#,
        ]
    );
}

#[test]
fn rules_inside_a_junctor_are_not_structural() {
    let s = schema(
        json!([]),
        json!({"name": {"type": "string", "allOf": [{"x-kubernetes-validations": [{"rule": "self != 'x'"}]}]}}),
    );
    let errors = printed(&super::super::check_structural(
        &s,
        "spec.validation.openAPIV3Schema",
    ));
    assert_eq!(
        errors,
        [
            "spec.validation.openAPIV3Schema.properties[spec].properties[name].allOf[0].x-kubernetes-validations: Forbidden: must be empty to be structural"
        ]
    );
}
