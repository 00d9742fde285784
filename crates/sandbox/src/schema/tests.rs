use serde_json::Value;

use crate::field_error::{FieldError, FieldErrorKind};

use serde_json::json;

use super::default::*;
use super::go_fmt::*;
use super::prune::*;
use super::structural::*;
use super::validate::*;

fn messages(errors: &[FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

/// A root schema with `spec` holding the given properties.
fn spec_schema(properties: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": properties},
        }
    })
}

fn object(spec: Value) -> Value {
    json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": spec})
}

fn validate_spec(properties: Value, spec: Value) -> Vec<String> {
    messages(&validate(&spec_schema(properties), &object(spec)))
}

// ----- prune -----

#[test]
fn prune_removes_unknown_fields_and_reports_sorted_paths() {
    let schema = spec_schema(json!({"replicas": {"type": "integer"}}));
    let mut obj = object(json!({"replicas": 1, "zeta": 1, "alpha": {"x": 1}}));
    obj["status"] = json!({"ready": true});
    let removed = prune(&schema, &mut obj);
    assert_eq!(removed, vec!["spec.alpha", "spec.zeta", "status"]);
    assert_eq!(obj["spec"], json!({"replicas": 1}));
    assert!(obj.get("status").is_none());
}

#[test]
fn prune_keeps_type_meta_and_metadata_even_when_undeclared() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object"}}});
    let mut obj = json!({
        "apiVersion": "v1", "kind": "K", "metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {}
    });
    let before = obj.clone();
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj, before);
}

#[test]
fn prune_drops_malformed_type_meta_at_root_without_reporting_it() {
    let schema = json!({"type": "object"});
    let mut obj = json!({"apiVersion": 5, "kind": "K", "metadata": "nope"});
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj, json!({"kind": "K"}));
}

#[test]
fn prune_preserve_unknown_fields_keeps_unknown_but_prunes_declared_children() {
    let schema = spec_schema(json!({
        "config": {
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": true,
            "properties": {"known": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }
    }));
    let mut obj = object(json!({"config": {"free": {"deep": 1}, "known": {"a": "x", "b": "y"}}}));
    let removed = prune(&schema, &mut obj);
    assert_eq!(removed, vec!["spec.config.known.b"]);
    assert_eq!(
        obj["spec"]["config"],
        json!({"free": {"deep": 1}, "known": {"a": "x"}})
    );
}

#[test]
fn prune_root_preserve_unknown_fields_keeps_everything_undeclared() {
    let schema = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    let mut obj = json!({"apiVersion": "v1", "kind": "K", "anything": {"goes": [1, 2]}});
    let before = obj.clone();
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj, before);
}

#[test]
fn prune_recurses_into_additional_properties_and_items() {
    let schema = spec_schema(json!({
        "byName": {
            "type": "object",
            "additionalProperties": {"type": "object", "properties": {"port": {"type": "integer"}}}
        },
        "list": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}}
    }));
    let mut obj = object(json!({
        "byName": {"a": {"port": 1, "junk": true}},
        "list": [{"name": "x"}, {"name": "y", "extra": 1}]
    }));
    let removed = prune(&schema, &mut obj);
    assert_eq!(removed, vec!["spec.byName.a.junk", "spec.list[1].extra"]);
    assert_eq!(obj["spec"]["list"], json!([{"name": "x"}, {"name": "y"}]));
}

#[test]
fn prune_bare_additional_properties_keeps_keys_but_nothing_below_them() {
    let schema = spec_schema(json!({"m": {"type": "object", "additionalProperties": true}}));
    let mut obj = object(json!({"m": {"a": "x", "b": {"nested": 1}}}));
    assert_eq!(prune(&schema, &mut obj), vec!["spec.m.b.nested"]);
    assert_eq!(obj["spec"]["m"], json!({"a": "x", "b": {}}));
}

#[test]
fn prune_embedded_resource_keeps_its_type_meta() {
    let schema = spec_schema(json!({
        "template": {
            "type": "object",
            "x-kubernetes-embedded-resource": true,
            "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}
        }
    }));
    let mut obj = object(json!({"template": {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "junk": 1},
        "spec": {"a": "x", "b": "y"}, "other": 1
    }}));
    let removed = prune(&schema, &mut obj);
    assert_eq!(removed, vec!["spec.template.other", "spec.template.spec.b"]);
    assert_eq!(
        obj["spec"]["template"]["metadata"],
        json!({"name": "p", "junk": 1})
    );
    assert_eq!(obj["spec"]["template"]["kind"], "Pod");
}

#[test]
fn prune_nested_meta_field_names_are_ordinary_fields() {
    let schema = spec_schema(json!({"a": {"type": "string"}}));
    let mut obj = object(json!({"a": "x", "kind": "nested"}));
    assert_eq!(prune(&schema, &mut obj), vec!["spec.kind"]);
}

#[test]
fn prune_int_or_string_is_a_leaf() {
    let schema = spec_schema(json!({"port": {"x-kubernetes-int-or-string": true}}));
    let mut obj = object(json!({"port": "http"}));
    assert!(prune(&schema, &mut obj).is_empty());
    assert_eq!(obj["spec"]["port"], "http");
}

#[test]
fn prune_object_without_properties_drops_all_keys() {
    let schema = spec_schema(json!({"empty": {"type": "object"}}));
    let mut obj = object(json!({"empty": {"a": 1, "b": 2}}));
    assert_eq!(
        prune(&schema, &mut obj),
        vec!["spec.empty.a", "spec.empty.b"]
    );
    assert_eq!(obj["spec"]["empty"], json!({}));
}

#[test]
fn prune_items_below_preserve_unknown_fields_keep_unknown_keys() {
    let schema = spec_schema(json!({
        "list": {
            "type": "array",
            "x-kubernetes-preserve-unknown-fields": true,
            "items": {"type": "object", "properties": {"a": {"type": "object"}}}
        }
    }));
    let mut obj = object(json!({"list": [{"a": {"x": 1}, "b": 2}]}));
    assert_eq!(prune(&schema, &mut obj), vec!["spec.list[0].a.x"]);
    assert_eq!(obj["spec"]["list"], json!([{"a": {}, "b": 2}]));
}

#[test]
fn prune_tolerates_malformed_schemas() {
    for schema in [
        json!(null),
        json!("x"),
        json!({"properties": []}),
        json!({"items": 3}),
    ] {
        let mut obj = object(json!({"a": [1, {"b": 2}]}));
        let removed = prune(&schema, &mut obj);
        assert_eq!(removed, vec!["spec"]);
    }
}

// ----- defaults -----

#[test]
fn defaults_fill_missing_properties_and_keep_existing_ones() {
    let schema = spec_schema(json!({
        "replicas": {"type": "integer", "default": 1},
        "mode": {"type": "string", "default": "fast"}
    }));
    let mut obj = object(json!({"mode": "slow"}));
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj["spec"], json!({"replicas": 1, "mode": "slow"}));
}

#[test]
fn defaults_replace_null_only_when_not_nullable() {
    let schema = spec_schema(json!({
        "strict": {"type": "string", "default": "a"},
        "loose": {"type": "string", "nullable": true, "default": "b"}
    }));
    let mut obj = object(json!({"strict": null, "loose": null}));
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj["spec"], json!({"strict": "a", "loose": null}));
}

#[test]
fn defaults_apply_top_down_into_defaulted_objects() {
    let schema = json!({
        "type": "object",
        "properties": {"spec": {
            "type": "object",
            "default": {},
            "properties": {
                "server": {
                    "type": "object",
                    "default": {"host": "h"},
                    "properties": {"host": {"type": "string"}, "port": {"type": "integer", "default": 80}}
                }
            }
        }}
    });
    let mut obj = json!({"apiVersion": "v1", "kind": "K"});
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj["spec"], json!({"server": {"host": "h", "port": 80}}));
}

#[test]
fn defaults_apply_inside_array_items_and_additional_properties() {
    let item = json!({
        "type": "object",
        "default": {"name": "filled"},
        "properties": {"name": {"type": "string"}, "weight": {"type": "integer", "default": 5}}
    });
    let schema = spec_schema(json!({
        "list": {"type": "array", "items": item},
        "map": {"type": "object", "additionalProperties": item}
    }));
    let mut obj =
        object(json!({"list": [{"name": "a"}, null], "map": {"k": {"name": "b"}, "n": null}}));
    apply_defaults(&schema, &mut obj);
    assert_eq!(
        obj["spec"],
        json!({
            "list": [{"name": "a", "weight": 5}, {"name": "filled", "weight": 5}],
            "map": {"k": {"name": "b", "weight": 5}, "n": {"name": "filled", "weight": 5}}
        })
    );
}

#[test]
fn defaults_ignore_null_defaults_and_malformed_schemas() {
    let schema = spec_schema(json!({"a": {"type": "string", "default": null}, "b": 7}));
    let mut obj = object(json!({}));
    apply_defaults(&schema, &mut obj);
    assert_eq!(obj["spec"], json!({}));
    apply_defaults(&json!("garbage"), &mut obj);
}

// ----- validate: types -----

#[test]
fn type_mismatch_message_matches_the_server() {
    let errors = validate(
        &spec_schema(json!({"replicas": {"type": "integer"}})),
        &object(json!({"replicas": "3"})),
    );
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].kind, FieldErrorKind::TypeInvalid);
    assert_eq!(errors[0].field, "spec.replicas");
    assert_eq!(
        errors[0].message,
        r#"Invalid value: "string": spec.replicas in body must be of type integer: "string""#
    );
}

#[test]
fn every_type_reports_the_actual_json_type() {
    let properties = json!({
        "s": {"type": "string"}, "i": {"type": "integer"}, "n": {"type": "number"},
        "b": {"type": "boolean"}, "o": {"type": "object"}, "a": {"type": "array", "items": {"type": "string"}}
    });
    let spec = json!({"s": 1, "i": true, "n": "x", "b": {}, "o": [], "a": 2.5});
    assert_eq!(
        validate_spec(properties, spec),
        vec![
            r#"spec.a: Invalid value: "number": spec.a in body must be of type array: "number""#,
            r#"spec.b: Invalid value: "object": spec.b in body must be of type boolean: "object""#,
            r#"spec.i: Invalid value: "boolean": spec.i in body must be of type integer: "boolean""#,
            r#"spec.n: Invalid value: "string": spec.n in body must be of type number: "string""#,
            r#"spec.o: Invalid value: "array": spec.o in body must be of type object: "array""#,
            r#"spec.s: Invalid value: "integer": spec.s in body must be of type string: "integer""#,
        ]
    );
}

#[test]
fn integers_reject_fractions_but_accept_integral_floats_and_numbers_accept_integers() {
    let properties = json!({"i": {"type": "integer"}, "n": {"type": "number"}});
    assert_eq!(
        validate_spec(properties.clone(), json!({"i": 1.5, "n": 2})),
        vec![
            r#"spec.i: Invalid value: "number": spec.i in body must be of type integer: "number""#
        ]
    );
    assert!(validate_spec(properties, json!({"i": 2.0, "n": 2.5})).is_empty());
}

#[test]
fn null_is_rejected_unless_nullable() {
    let properties = json!({"x": {"type": "string"}, "y": {"type": "string", "nullable": true}});
    assert_eq!(
        validate_spec(properties, json!({"x": null, "y": null})),
        vec![r#"spec.x: Invalid value: "null": spec.x in body must be of type string: "null""#]
    );
}

#[test]
fn int_or_string_accepts_both_and_names_both_when_wrong() {
    let properties = json!({"port": {"x-kubernetes-int-or-string": true}});
    assert!(validate_spec(properties.clone(), json!({"port": 80})).is_empty());
    assert!(validate_spec(properties.clone(), json!({"port": "http"})).is_empty());
    assert_eq!(
        validate_spec(properties.clone(), json!({"port": true})),
        vec![
            r#"spec.port: Invalid value: "boolean": spec.port in body must be of type integer,string: "boolean""#
        ]
    );
    assert_eq!(
        validate_spec(properties, json!({"port": null})),
        vec![
            r#"spec.port: Invalid value: "null": spec.port in body must be of type integer,string: "null""#
        ]
    );
}

// ----- validate: objects -----

#[test]
fn required_properties_are_reported_in_declared_order() {
    let schema = json!({
        "type": "object",
        "required": ["spec"],
        "properties": {"spec": {"type": "object", "required": ["size", "color"], "properties": {}}}
    });
    let errors = validate(&schema, &object(json!({"color": "red"})));
    assert_eq!(messages(&errors), vec!["spec.size: Required value"]);
    assert_eq!(errors[0].kind, FieldErrorKind::Required);
    let errors = validate(&schema, &json!({"apiVersion": "v1", "kind": "K"}));
    assert_eq!(messages(&errors), vec!["spec: Required value"]);
}

#[test]
fn min_and_max_properties() {
    let properties = json!({"m": {"type": "object", "minProperties": 2, "maxProperties": 2,
        "additionalProperties": {"type": "string"}}});
    assert_eq!(
        validate_spec(properties.clone(), json!({"m": {"a": "x"}})),
        vec!["spec.m: Invalid value: 1: spec.m in body should have at least 2 properties"]
    );
    let errors = validate(
        &spec_schema(properties),
        &object(json!({"m": {"a": "x", "b": "y", "c": 1}})),
    );
    // The server stops at the count check and does not look at the values.
    assert_eq!(
        messages(&errors),
        vec!["spec.m: Too many: 3: must have at most 2 items"]
    );
    assert_eq!(errors[0].kind, FieldErrorKind::TooMany);
}

#[test]
fn additional_properties_schema_validates_values_under_dotted_keys() {
    let properties = json!({"labels": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}}});
    assert_eq!(
        validate_spec(
            properties,
            json!({"labels": {"ok": "abc", "foo": 1, "bar": "long"}})
        ),
        vec![
            "spec.labels.bar: Too long: may not be more than 3 bytes",
            r#"spec.labels.foo: Invalid value: "integer": spec.labels.foo in body must be of type string: "integer""#,
        ]
    );
}

#[test]
fn additional_properties_false_forbids_undeclared_keys() {
    let properties = json!({"c": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "additionalProperties": false, "properties": {"a": {"type": "string"}}}});
    assert_eq!(
        validate_spec(properties, json!({"c": {"a": "x", "b": 1}})),
        vec![r#"spec.c: Invalid value: "b": spec.c.b in body is a forbidden property"#]
    );
}

#[test]
fn nested_array_paths_use_indices() {
    let properties = json!({"items": {"type": "array", "items": {"type": "object",
        "required": ["name"], "properties": {"name": {"type": "string"}}}}});
    assert_eq!(
        validate_spec(
            properties,
            json!({"items": [{"name": "a"}, {"name": "b"}, {"name": 3}, {}]})
        ),
        vec![
            r#"spec.items[2].name: Invalid value: "integer": spec.items[2].name in body must be of type string: "integer""#,
            "spec.items[3].name: Required value",
        ]
    );
}

#[test]
fn metadata_is_validated_against_declared_name_restrictions() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 3}}}
    }});
    let obj = json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "toolong", "uid": "x"}});
    assert_eq!(
        messages(&validate(&schema, &obj)),
        vec!["metadata.name: Too long: may not be more than 3 bytes"]
    );
}

// ----- validate: scalars -----

#[test]
fn enum_lists_supported_values() {
    let properties = json!({"color": {"type": "string", "enum": ["red", "blue"]}, "n": {"type": "integer", "enum": [1, 2]}});
    let errors = validate(
        &spec_schema(properties),
        &object(json!({"color": "pink", "n": 3})),
    );
    assert_eq!(
        messages(&errors),
        vec![
            r#"spec.color: Unsupported value: "pink": supported values: "red", "blue""#,
            r#"spec.n: Unsupported value: 3: supported values: "1", "2""#,
        ]
    );
    assert_eq!(errors[0].kind, FieldErrorKind::NotSupported);
}

#[test]
fn enum_compares_numbers_across_int_and_float() {
    let properties = json!({"n": {"type": "number", "enum": [1, 2.5]}, "z": {"nullable": true, "type": "string", "enum": ["a", null]}});
    assert!(validate_spec(properties, json!({"n": 1.0, "z": null})).is_empty());
}

#[test]
fn multiple_of_requires_a_positive_factor() {
    let properties = json!({
        "i": {"type": "integer", "multipleOf": -5},
        "f": {"type": "number", "multipleOf": -0.5}
    });
    assert_eq!(
        validate_spec(properties, json!({"i": 3, "f": 1.5})),
        vec![
            "spec.f: Invalid value: -0.5: factor MultipleOf declared for spec.f must be positive: -0.5",
            "spec.i: Invalid value: -5: factor MultipleOf declared for spec.i must be positive: -5",
        ]
    );
}

#[test]
fn minimum_and_maximum_messages() {
    let properties = json!({
        "a": {"type": "integer", "minimum": 0},
        "b": {"type": "integer", "maximum": 10},
        "c": {"type": "integer", "minimum": 0, "exclusiveMinimum": true},
        "d": {"type": "integer", "maximum": 10, "exclusiveMaximum": true},
        "e": {"type": "number", "minimum": 1.5},
        "f": {"type": "number", "maximum": 1000000}
    });
    let spec = json!({"a": -1, "b": 11, "c": 0, "d": 10, "e": 1.25, "f": 2e6});
    assert_eq!(
        validate_spec(properties, spec),
        vec![
            "spec.a: Invalid value: -1: spec.a in body should be greater than or equal to 0",
            "spec.b: Invalid value: 11: spec.b in body should be less than or equal to 10",
            "spec.c: Invalid value: 0: spec.c in body should be greater than 0",
            "spec.d: Invalid value: 10: spec.d in body should be less than 10",
            "spec.e: Invalid value: 1.25: spec.e in body should be greater than or equal to 1.5",
            "spec.f: Invalid value: 2e+06: spec.f in body should be less than or equal to 1e+06",
        ]
    );
}

#[test]
fn multiple_of_for_integers_and_floats() {
    let properties = json!({"i": {"type": "integer", "multipleOf": 5}, "f": {"type": "number", "multipleOf": 0.1}});
    assert!(validate_spec(properties.clone(), json!({"i": 15, "f": 0.3})).is_empty());
    assert_eq!(
        validate_spec(properties, json!({"i": 7, "f": 0.35})),
        vec![
            "spec.f: Invalid value: 0.35: spec.f in body should be a multiple of 0.1",
            "spec.i: Invalid value: 7: spec.i in body should be a multiple of 5",
        ]
    );
}

#[test]
fn string_length_counts_characters_and_stops_at_first_failure() {
    let properties =
        json!({"name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"}});
    let errors = validate(
        &spec_schema(properties.clone()),
        &object(json!({"name": "abcdefg"})),
    );
    assert_eq!(
        messages(&errors),
        vec!["spec.name: Too long: may not be more than 5 bytes"]
    );
    assert_eq!(errors[0].kind, FieldErrorKind::TooLong);
    assert_eq!(
        validate_spec(properties.clone(), json!({"name": "ab"})),
        vec![
            r#"spec.name: Invalid value: "ab": spec.name in body should be at least 3 chars long"#
        ]
    );
    assert_eq!(
        validate_spec(properties.clone(), json!({"name": "ABC"})),
        vec![r#"spec.name: Invalid value: "ABC": spec.name in body should match '^[a-z]+$'"#]
    );
    // Five characters, ten bytes: the limit is on characters.
    let properties = json!({"name": {"type": "string", "maxLength": 5}});
    assert!(validate_spec(properties, json!({"name": "ééééé"})).is_empty());
}

#[test]
fn patterns_use_ascii_classes_like_go() {
    let properties = json!({"d": {"type": "string", "pattern": r"^\d+$"}, "w": {"type": "string", "pattern": r"^[\w-]+\b"}});
    assert!(validate_spec(properties.clone(), json!({"d": "123", "w": "a-b_c"})).is_empty());
    assert_eq!(
        validate_spec(properties, json!({"d": "١٢٣", "w": "ok"})),
        vec![r#"spec.d: Invalid value: "١٢٣": spec.d in body should match '^\d+$'"#]
    );
}

#[test]
fn patterns_support_go_literal_quoting() {
    let properties = json!({"q": {"type": "string", "pattern": r"^\Qa.b\E(\Q+\E)?$"}});
    assert!(check(spec_schema(properties.clone())).is_empty());
    assert!(validate_spec(properties.clone(), json!({"q": "a.b+"})).is_empty());
    assert_eq!(validate_spec(properties, json!({"q": "axb"})).len(), 1);
}

#[test]
fn invalid_patterns_are_reported_when_validating() {
    let properties = json!({"p": {"type": "string", "pattern": "("}});
    let errors = validate_spec(properties, json!({"p": "x"}));
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with(r#"spec.p: Invalid value: "x": spec.p in body should match '(, but pattern is invalid: error parsing regexp: "#), "{errors:?}");
}

// ----- validate: arrays -----

#[test]
fn min_and_max_items() {
    let properties = json!({"items": {"type": "array", "minItems": 2, "maxItems": 3, "items": {"type": "integer"}}});
    assert_eq!(
        validate_spec(properties.clone(), json!({"items": [1]})),
        vec!["spec.items: Invalid value: 1: spec.items in body should have at least 2 items"]
    );
    let errors = validate(
        &spec_schema(properties),
        &object(json!({"items": [1, 2, 3, "x"]})),
    );
    assert_eq!(
        messages(&errors),
        vec![
            r#"spec.items[3]: Invalid value: "string": spec.items[3] in body must be of type integer: "string""#,
            "spec.items: Too many: 4: must have at most 3 items",
        ]
    );
    assert_eq!(errors[1].kind, FieldErrorKind::TooMany);
}

#[test]
fn list_type_set_reports_second_occurrences_after_value_errors() {
    let properties = json!({
        "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string", "maxLength": 3}}
    });
    let errors = validate(
        &spec_schema(properties),
        &object(json!({"tags": ["a", "b", "a", "a", "b", "long"]})),
    );
    assert_eq!(
        messages(&errors),
        vec![
            "spec.tags[5]: Too long: may not be more than 3 bytes",
            r#"spec.tags[2]: Duplicate value: "a""#,
            r#"spec.tags[4]: Duplicate value: "b""#,
        ]
    );
    assert_eq!(errors[1].kind, FieldErrorKind::Duplicate);
}

#[test]
fn unique_items_reports_duplicates_like_a_set() {
    let properties =
        json!({"nums": {"type": "array", "uniqueItems": true, "items": {"type": "integer"}}});
    assert_eq!(
        validate_spec(properties, json!({"nums": [1, 2, 1]})),
        vec!["spec.nums[2]: Duplicate value: 1"]
    );
}

#[test]
fn list_type_set_compares_objects_structurally() {
    let properties = json!({"s": {"type": "array", "x-kubernetes-list-type": "set",
        "items": {"type": "object", "x-kubernetes-map-type": "atomic", "x-kubernetes-preserve-unknown-fields": true}}});
    assert_eq!(
        validate_spec(
            properties,
            json!({"s": [{"a": 1, "b": [true]}, {"b": [true], "a": 1}]})
        ),
        vec![
            r#"spec.s[1]: Duplicate value: map[string]interface {}{"a":1, "b":[]interface {}{true}}"#
        ]
    );
}

#[test]
fn list_type_map_reports_duplicate_key_tuples() {
    let properties = json!({"ports": {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["port", "protocol"],
        "items": {"type": "object", "properties": {
            "port": {"type": "integer"}, "protocol": {"type": "string"}, "name": {"type": "string"}
        }}
    }});
    let spec = json!({"ports": [
        {"port": 80, "protocol": "TCP", "name": "a"},
        {"port": 80, "protocol": "UDP"},
        {"port": 80, "protocol": "TCP", "name": "b"},
        {"name": "nokeys"}, {"name": "nokeys2"}
    ]});
    assert_eq!(
        validate_spec(properties, spec),
        vec![
            r#"spec.ports[2]: Duplicate value: map[string]interface {}{"port":80, "protocol":"TCP"}"#,
            r#"spec.ports[4]: Duplicate value: map[string]interface {}{}"#,
        ]
    );
}

#[test]
fn list_type_map_requires_object_items() {
    let properties = json!({"l": {"type": "array", "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["k"], "x-kubernetes-preserve-unknown-fields": true}});
    assert_eq!(
        validate_spec(properties, json!({"l": [{"k": 1}, "x", 3]})),
        vec![r#"spec.l[1]: Invalid value: "x": must be an object for an array of list-type map"#]
    );
}

// ----- validate: formats -----

#[test]
fn format_errors_name_the_format() {
    let properties = json!({"when": {"type": "string", "format": "date-time"}});
    assert_eq!(
        validate_spec(properties.clone(), json!({"when": "nope"})),
        vec![
            r#"spec.when: Invalid value: "nope": spec.when in body must be of type date-time: "nope""#
        ]
    );
    assert!(validate_spec(properties, json!({"when": "2024-02-29T10:00:00.5Z"})).is_empty());
}

#[test]
fn cheap_formats_accept_and_reject() {
    let cases: &[(&str, &[&str], &[&str])] = &[
        (
            "date-time",
            &["2024-01-02T03:04:05Z", "2024-01-02t03:04:05+01:00"],
            &["2024-01-02", "2023-02-29T00:00:00Z", "2024-01-02T24:00:00Z"],
        ),
        (
            "date",
            &["2024-02-29", "1999-12-31"],
            &["2023-02-29", "2024-1-02", "2024-13-01", "x"],
        ),
        (
            "byte",
            &["aGVsbG8=", "aGk=", "YWJj"],
            &["", "abc", "a$==", "aG=k"],
        ),
        (
            "uuid",
            &[
                "123e4567-e89b-12d3-a456-426614174000",
                "123E4567E89B12D3A456426614174000",
            ],
            &["123", "g23e4567-e89b-12d3-a456-426614174000"],
        ),
        (
            "uuid4",
            &["123e4567-e89b-42d3-a456-426614174000"],
            &["123e4567-e89b-12d3-a456-426614174000"],
        ),
        (
            "email",
            &["a@b.com", "Jo <jo@x.org>"],
            &["nope", "@x.com", "a@", "a b@c.d"],
        ),
        (
            "hostname",
            &["example.com", "localhost", "a-b.example.io"],
            &["-bad.com", "exa_mple.com", "a..b"],
        ),
        (
            "ipv4",
            &["10.0.0.1"],
            &["10.0.0", "::1", "256.1.1.1", "01.1.1.1"],
        ),
        (
            "ipv6",
            &["::1", "2001:db8::1"],
            &["10.0.0.1", "2001:db8::g"],
        ),
        (
            "cidr",
            &["10.0.0.0/8", "2001:db8::/32"],
            &["10.0.0.0/33", "10.0.0.0", "x/8"],
        ),
        (
            "mac",
            &["00:1a:2b:3c:4d:5e", "00-1A-2B-3C-4D-5E", "001a.2b3c.4d5e"],
            &["00:1a:2b", "zz:1a:2b:3c:4d:5e"],
        ),
        (
            "uri",
            &["https://example.com/x", "/just/a/path", "urn:isbn:123"],
            &["relative/path", "", "1http://x"],
        ),
        ("hexcolor", &["#fff", "A0B1C2"], &["#ffff"]),
        ("bsonobjectid", &["507f1f77bcf86cd799439011"], &["507f1f77"]),
    ];
    for (format, good, bad) in cases {
        let properties = json!({"v": {"type": "string", "format": format}});
        for value in *good {
            assert!(
                validate_spec(properties.clone(), json!({"v": value})).is_empty(),
                "{format} should accept {value}"
            );
        }
        for value in *bad {
            assert_eq!(
                validate_spec(properties.clone(), json!({"v": value})).len(),
                1,
                "{format} should reject {value}"
            );
        }
    }
}

#[test]
fn unsupported_formats_are_ignored() {
    let properties = json!({
        "a": {"type": "integer", "format": "int32"},
        "b": {"type": "integer", "format": "int64"},
        "c": {"type": "string", "format": "made-up"}
    });
    assert!(
        validate_spec(
            properties,
            json!({"a": 9_999_999_999_i64, "b": 1, "c": "x"})
        )
        .is_empty()
    );
}

#[test]
fn formatted_string_schema_rejects_numbers_by_format_name() {
    let properties = json!({"when": {"type": "string", "format": "date-time"}});
    assert_eq!(
        validate_spec(properties, json!({"when": 5})),
        vec![
            r#"spec.when: Invalid value: "int64": spec.when in body must be of type date-time: "int64""#
        ]
    );
}

// ----- validate: junctors and embedded resources -----

#[test]
fn any_of_reports_summary_and_best_alternative() {
    let properties = json!({"v": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 1}]}});
    assert!(validate_spec(properties.clone(), json!({"v": 0})).is_empty());
    assert_eq!(
        validate_spec(properties, json!({"v": 5})),
        vec![
            r#"<nil>: Invalid value: "": "spec.v" must validate at least one schema (anyOf)"#,
            "spec.v: Invalid value: 5: spec.v in body should be greater than or equal to 10",
        ]
    );
}

#[test]
fn one_of_all_of_and_not() {
    let properties = json!({
        "one": {"type": "integer", "oneOf": [{"minimum": 0}, {"maximum": 10}]},
        "all": {"type": "integer", "allOf": [{"minimum": 0}, {"maximum": 10}]},
        "neg": {"type": "string", "not": {"enum": ["forbidden"]}}
    });
    assert_eq!(
        validate_spec(properties, json!({"one": 5, "all": 11, "neg": "forbidden"})),
        vec![
            "spec.all: Invalid value: 11: spec.all in body should be less than or equal to 10",
            r#"<nil>: Invalid value: "": "spec.all" must validate all the schemas (allOf)"#,
            r#"<nil>: Invalid value: "": "spec.neg" must not validate the schema (not)"#,
            r#"<nil>: Invalid value: "": "spec.one" must validate one and only one schema (oneOf). Found 2 valid alternatives"#,
        ]
    );
}

#[test]
fn embedded_resources_need_api_version_and_kind() {
    let properties = json!({"t": {"type": "object", "x-kubernetes-embedded-resource": true,
        "x-kubernetes-preserve-unknown-fields": true}});
    assert_eq!(
        validate_spec(properties.clone(), json!({"t": {"metadata": {}}})),
        vec![
            "spec.t.apiVersion: Required value",
            "spec.t.kind: Required value"
        ]
    );
    assert_eq!(
        validate_spec(
            properties.clone(),
            json!({"t": {"apiVersion": "a/b/c", "kind": ""}})
        ),
        vec![
            r#"spec.t.apiVersion: Invalid value: "a/b/c": unexpected GroupVersion string: a/b/c"#,
            r#"spec.t.kind: Invalid value: "": must not be empty"#,
        ]
    );
    let errors = validate_spec(
        properties.clone(),
        json!({"t": {"apiVersion": "v1", "kind": "Bad_Kind"}}),
    );
    assert_eq!(errors.len(), 1);
    assert!(errors[0].starts_with(r#"spec.t.kind: Invalid value: "Bad_Kind": may have mixed case, but should otherwise match: a DNS-1035 label"#));
    assert!(
        validate_spec(
            properties,
            json!({"t": {"apiVersion": "apps/v1", "kind": "Deployment"}})
        )
        .is_empty()
    );
}

#[test]
fn preserve_unknown_fields_does_not_relax_declared_validation() {
    let properties = json!({"free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
        "properties": {"n": {"type": "integer"}}}});
    assert!(
        validate_spec(
            properties.clone(),
            json!({"free": {"anything": [1, "x"], "n": 1}})
        )
        .is_empty()
    );
    assert_eq!(
        validate_spec(properties, json!({"free": {"n": "x"}})).len(),
        1
    );
}

#[test]
fn validation_survives_malformed_schemas_and_objects() {
    let schemas = [
        json!(null),
        json!([1, 2]),
        json!({"type": 5, "properties": {"spec": "x"}, "required": [1, null], "enum": "x"}),
        json!({"type": "object", "properties": {"spec": {"type": "array", "items": [1], "minItems": -1,
            "maxLength": "x", "pattern": 5, "multipleOf": 0, "anyOf": {}, "not": 3}}}),
    ];
    for schema in &schemas {
        for obj in [
            json!(null),
            json!(3),
            object(json!([1.5, {"a": null}])),
            object(json!(7)),
        ] {
            let _ = validate(schema, &obj);
            let mut copy = obj.clone();
            let _ = prune(schema, &mut copy);
            apply_defaults(schema, &mut copy);
        }
    }
}

#[test]
fn root_level_errors_print_the_nil_path() {
    let schema = json!({"type": "object", "maxProperties": 1});
    assert_eq!(
        messages(&validate(&schema, &json!({"a": 1, "b": 2}))),
        vec!["<nil>: Too many: 2: must have at most 1 items"]
    );
}

// ----- check_structural -----

const PREFIX: &str = "spec.versions[0].schema.openAPIV3Schema";

fn check(schema: Value) -> Vec<String> {
    messages(&check_structural(&schema, PREFIX))
}

#[test]
fn structural_schema_passes() {
    let schema = json!({
        "type": "object",
        "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
            "spec": {"type": "object", "properties": {
                "replicas": {"type": "integer", "default": 1, "minimum": 0},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "raw": {"x-kubernetes-preserve-unknown-fields": true},
                "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                "template": {"type": "object", "x-kubernetes-embedded-resource": true,
                    "x-kubernetes-preserve-unknown-fields": true},
                "mode": {"type": "string", "pattern": "^[a-z]+$", "anyOf": [{"enum": ["a"]}, {"enum": ["b"]}]}
            }},
            "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
        }
    });
    assert_eq!(check(schema), Vec::<String>::new());
}

#[test]
fn missing_types_are_required_per_level() {
    let schema = json!({"properties": {
        "spec": {"properties": {"list": {"type": "array", "items": {}}}}
    }});
    assert_eq!(
        check(schema),
        vec![
            format!(
                "{PREFIX}.properties[spec].properties[list].items.type: Required value: must not be empty for specified array items"
            ),
            format!(
                "{PREFIX}.properties[spec].type: Required value: must not be empty for specified object fields"
            ),
            format!("{PREFIX}.type: Required value: must not be empty at the root"),
        ]
    );
}

#[test]
fn root_must_be_an_object_without_additional_properties() {
    assert_eq!(
        check(json!({"type": "string", "nullable": true})),
        vec![
            format!("{PREFIX}.nullable: Forbidden: nullable cannot be true at the root"),
            format!(r#"{PREFIX}.type: Invalid value: "string": must be object at the root"#),
        ]
    );
    assert_eq!(
        check(json!({"type": "object", "additionalProperties": {"type": "string"}})),
        vec![format!(
            "{PREFIX}.additionalProperties: Forbidden: must not be used at the root"
        )]
    );
}

#[test]
fn arrays_need_items_and_patterns_must_compile() {
    let schema = json!({"type": "object", "properties": {
        "a": {"type": "array"}, "p": {"type": "string", "pattern": "(unclosed"}
    }});
    let errors = check(schema);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[0],
        format!("{PREFIX}.properties[a].items: Required value: must be specified")
    );
    assert!(errors[1].starts_with(&format!(
        r#"{PREFIX}.properties[p].pattern: Invalid value: "(unclosed": must be a valid regular expression, but isn't: error parsing regexp: "#
    )));
}

#[test]
fn properties_and_additional_properties_are_exclusive() {
    let schema = json!({"type": "object", "properties": {"m": {"type": "object",
        "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}}}});
    assert_eq!(
        check(schema),
        vec![format!(
            "{PREFIX}.properties[m].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
}

#[test]
fn unsupported_keywords_are_forbidden() {
    let schema = json!({"type": "object", "properties": {
        "u": {"type": "array", "uniqueItems": true, "items": {"type": "string"}},
        "r": {"$ref": "#/definitions/x"},
        "t": {"type": "strnig"},
        "k": {"type": "object", "x-kubernetes-preserve-unknown-fields": false}
    }});
    assert_eq!(
        check(schema),
        vec![
            format!(
                "{PREFIX}.properties[r].type: Required value: must not be empty for specified object fields"
            ),
            format!(
                r#"{PREFIX}.properties[k].x-kubernetes-preserve-unknown-fields: Invalid value: false: must be true or undefined"#
            ),
            format!("{PREFIX}.properties[r].$ref: Forbidden: $ref is not supported"),
            format!(
                r#"{PREFIX}.properties[t].type: Unsupported value: "strnig": supported values: "array", "boolean", "integer", "number", "object", "string""#
            ),
            format!(
                "{PREFIX}.properties[u].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
            ),
        ]
    );
}

#[test]
fn defaults_must_validate_and_be_pruned() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
        "replicas": {"type": "integer", "default": "three"},
        "size": {"type": "integer", "minimum": 1, "default": 0},
        "obj": {"type": "object", "properties": {"a": {"type": "string"}}, "default": {"a": "x", "b": 1}}
    }}}});
    assert_eq!(
        check(schema),
        vec![
            format!(
                r#"{PREFIX}.properties[spec].properties[obj].default: Invalid value: map[string]interface {{}}{{"a":"x", "b":1}}: must not have unknown fields"#
            ),
            format!(
                r#"{PREFIX}.properties[spec].properties[replicas].default: Invalid value: "string":  in body must be of type integer: "string""#
            ),
            format!(
                "{PREFIX}.properties[spec].properties[size].default: Invalid value: 0:  in body should be greater than or equal to 1"
            ),
        ]
    );
}

#[test]
fn defaults_are_only_checked_once_the_schema_is_structural() {
    let schema = json!({"type": "object", "properties": {"a": {"default": 1}}});
    assert_eq!(
        check(schema),
        vec![format!(
            "{PREFIX}.properties[a].type: Required value: must not be empty for specified object fields"
        )]
    );
}

#[test]
fn top_level_metadata_is_restricted() {
    let schema = json!({"type": "object", "properties": {
        "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}, "default": {}},
        "kind": {"type": "integer"}
    }});
    assert_eq!(
        check(schema),
        vec![
            format!(r#"{PREFIX}.properties[kind].type: Invalid value: "integer": must be string"#),
            format!(
                "{PREFIX}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
            ),
            format!(
                "{PREFIX}.properties[metadata].default: Forbidden: must not be set in top-level metadata"
            ),
        ]
    );
}

#[test]
fn junctors_must_stay_value_validations() {
    let schema = json!({"type": "object", "properties": {"spec": {"type": "object",
        "properties": {"a": {"type": "string"}},
        "anyOf": [{"type": "object", "description": "d", "properties": {"a": {"nullable": true}}}],
        "not": {"properties": {"metadata": {}}}
    }}});
    assert_eq!(
        check(schema),
        vec![
            format!(
                "{PREFIX}.properties[spec].anyOf[0].description: Forbidden: must be empty to be structural"
            ),
            format!(
                "{PREFIX}.properties[spec].anyOf[0].properties[a].nullable: Forbidden: must be false to be structural"
            ),
            format!(
                "{PREFIX}.properties[spec].anyOf[0].type: Forbidden: must be empty to be structural"
            ),
            format!(
                "{PREFIX}.properties[spec].not.properties[metadata]: Forbidden: must not be specified in a nested context"
            ),
        ]
    );
}

#[test]
fn junctor_properties_must_be_declared() {
    let schema = json!({"type": "object", "properties": {"a": {"type": "string"}},
        "oneOf": [{"properties": {"b": {"minLength": 1}}}, {"required": ["a"]}]});
    assert_eq!(
        check(schema),
        vec![format!(
            "{PREFIX}.properties[b]: Required value: because it is defined in {PREFIX}.oneOf[0].properties[b]"
        )]
    );
}

#[test]
fn list_types_need_matching_shapes() {
    let schema = json!({"type": "object", "properties": {
        "m": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object",
            "properties": {"k": {"type": "string"}}}},
        "k": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["k", "missing"],
            "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        "o": {"type": "object", "x-kubernetes-list-type": "set"},
        "b": {"type": "array", "x-kubernetes-list-type": "bag", "items": {"type": "string"}}
    }});
    assert_eq!(
        check(schema),
        vec![
            format!(
                r#"{PREFIX}.properties[b].x-kubernetes-list-type: Unsupported value: "bag": supported values: "atomic", "set", "map""#
            ),
            format!(
                r#"{PREFIX}.properties[k].x-kubernetes-list-map-keys: Invalid value: []string{{"k", "missing"}}: entries must all be names of item properties"#
            ),
            format!(
                "{PREFIX}.properties[k].items.properties[k].default: Required value: this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property"
            ),
            format!(
                "{PREFIX}.properties[m].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
            ),
            format!(
                r#"{PREFIX}.properties[o].type: Invalid value: "object": must be array if x-kubernetes-list-type is specified"#
            ),
        ]
    );
}

#[test]
fn embedded_resources_must_be_objects_with_structure() {
    let schema = json!({"type": "object", "properties": {
        "e": {"x-kubernetes-embedded-resource": true},
        "f": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-int-or-string": true}
    }});
    assert_eq!(
        check(schema),
        vec![
            format!(
                "{PREFIX}.properties[e].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
            ),
            format!(
                "{PREFIX}.properties[e].type: Required value: must be object if x-kubernetes-embedded-resource is true"
            ),
            format!(
                "{PREFIX}.properties[f].properties: Required value: must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields"
            ),
            format!(
                "{PREFIX}.properties[f].x-kubernetes-embedded-resource: Invalid value: true: must be false if x-kubernetes-int-or-string is true"
            ),
        ]
    );
}

#[test]
fn check_structural_rejects_non_object_schemas_and_never_panics() {
    assert_eq!(
        check(json!(null)),
        vec![format!("{PREFIX}: Required value: schemas are required")]
    );
    let odd = json!({"type": "object", "properties": {"a": 1, "b": {"type": "array", "items": []},
        "c": {"allOf": 7, "anyOf": [1, {"type": "x"}], "not": [], "default": {"x": 1}}}});
    assert!(!check(odd).is_empty());
}

// ----- Go printing -----

#[test]
fn go_float_formatting() {
    let cases = [
        (0.0, "0"),
        (1.0, "1"),
        (1.5, "1.5"),
        (-2.25, "-2.25"),
        (100000.0, "100000"),
        (1e6, "1e+06"),
        (1234567.0, "1.234567e+06"),
        (0.0001, "0.0001"),
        (0.00001, "1e-05"),
        (1.5e-7, "1.5e-07"),
        (1e21, "1e+21"),
        (123.456, "123.456"),
    ];
    for (value, expected) in cases {
        assert_eq!(format_go_float(value), expected, "{value}");
    }
}

#[test]
fn go_quoting_and_values() {
    assert_eq!(
        go_quote("a\"b\\c\n\u{1}\u{7f}\u{a0}é"),
        r#""a\"b\\c\n\x01\x7f\u00a0é""#
    );
    assert_eq!(go_value(&json!(null)), r#""null""#);
    assert_eq!(
        go_value(&json!([1, null, {"k": 1.5}])),
        r#"[]interface {}{1, interface {}(nil), map[string]interface {}{"k":1.5}}"#
    );
    assert_eq!(go_value(&json!(1e300)), "1e+300");
}
