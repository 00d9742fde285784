//! The checks a CRD's `openAPIV3Schema` must pass before it is served: structural-schema
//! rules, the OpenAPI subset CRDs may use, list and map types, and valid defaults.

use serde_json::Value;

use crate::field_error::{FieldError, FieldErrorKind, child_path, index_path};

use super::formats::compile_pattern;
use super::go_fmt::go_quote;
use super::node::{Additional, META_FIELDS, Node, key_path};
use super::prune::Pruner;
use super::validate::{Validator, invalid, not_supported};

/// Checks that a CRD version's `openAPIV3Schema` can be served, the way the API server does on
/// CRD create/update: structural-schema rules, the OpenAPI subset CRDs may use, and (once the
/// schema is structural) that every `default` is pruned and valid. Errors are rooted at
/// `path_prefix`, e.g. `spec.versions[0].schema.openAPIV3Schema.properties[spec].type`.
pub fn check_structural(schema: &Value, path_prefix: &str) -> Vec<FieldError> {
    if !schema.is_object() {
        return vec![FieldError::required(path_prefix, "schemas are required")];
    }
    let root = Node(schema);
    let mut errors = Vec::new();
    if root.nullable() {
        errors.push(FieldError::forbidden(
            child_path(path_prefix, "nullable"),
            "nullable cannot be true at the root",
        ));
    }
    let mut structural = Vec::new();
    structural_invariants(root, Level::Root, path_prefix, &mut structural);
    completeness(root, root, path_prefix, path_prefix, &mut structural);
    // The server sorts these by their printed form because it finds them walking Go maps.
    structural.sort_by_cached_key(ToString::to_string);
    if structural.is_empty() {
        check_defaults(root, path_prefix, &mut errors);
    } else {
        errors.extend(structural);
    }
    check_openapi(root, path_prefix, &Scope::root(), &mut errors);
    errors
}

/// The `type`s a CRD schema may use, in the order the server lists them.
const OPENAPI_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

/// Where a node sits, which decides what "type must not be empty" says.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Level {
    Root,
    Item,
    Field,
}

/// The structural-schema invariants (kube's `validateStructuralInvariants`).
fn structural_invariants(schema: Node, level: Level, path: &str, out: &mut Vec<FieldError>) {
    let ty = schema.type_name();
    if ty == "array" && schema.items().is_none() {
        out.push(FieldError::required(
            child_path(path, "items"),
            "must be specified",
        ));
    }
    if let Some(items) = schema.items() {
        structural_invariants(items, Level::Item, &child_path(path, "items"), out);
    }
    for (key, property) in schema.property_nodes() {
        structural_invariants(
            property,
            Level::Field,
            &key_path(path, "properties", key),
            out,
        );
    }
    let has_additional = !matches!(schema.additional(), Additional::Absent);
    if has_additional && level == Level::Root {
        out.push(FieldError::forbidden(
            child_path(path, "additionalProperties"),
            "must not be used at the root",
        ));
    }
    if let Some(additional) = schema.additional_schema() {
        structural_invariants(
            additional,
            Level::Field,
            &child_path(path, "additionalProperties"),
            out,
        );
    }
    structural_extensions(schema, path, out);
    value_validation(
        schema,
        is_int_or_string_any_of(schema),
        is_int_or_string_all_of(schema),
        path,
        out,
    );
    structural_type(schema, level, path, out);
    resource_invariants(schema, level, has_additional, path, out);
}

/// Rules for the top of a resource (the root and embedded resources): an object, with string
/// type meta, no additionalProperties, and a root `metadata` that only restricts names.
fn resource_invariants(
    schema: Node,
    level: Level,
    has_additional: bool,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    let ty = schema.type_name();
    if schema.embedded() && has_additional {
        let detail = "must not be used if x-kubernetes-embedded-resource is set";
        out.push(FieldError::forbidden(
            child_path(path, "additionalProperties"),
            detail,
        ));
    }
    if level == Level::Root && !ty.is_empty() && ty != "object" {
        out.push(invalid(
            child_path(path, "type"),
            &Value::from(ty),
            "must be object at the root",
        ));
    }
    if level == Level::Root || schema.embedded() {
        type_meta_schemas(schema, path, out);
    }
    if level == Level::Root
        && let Some(metadata) = schema.property("metadata")
        && restricts_more_than_names(metadata)
    {
        let detail = "must not specify anything other than name and generateName, but metadata is \
                      implicitly specified";
        out.push(FieldError::forbidden(
            key_path(path, "properties", "metadata"),
            detail,
        ));
    }
    if schema.embedded() && !schema.preserves_unknown() && !schema.has_properties() {
        let detail = "must not be empty if x-kubernetes-embedded-resource is true without \
                      x-kubernetes-preserve-unknown-fields";
        out.push(FieldError::required(child_path(path, "properties"), detail));
    }
}

fn structural_extensions(schema: Node, path: &str, out: &mut Vec<FieldError>) {
    if !schema.int_or_string() {
        return;
    }
    for key in [
        "x-kubernetes-preserve-unknown-fields",
        "x-kubernetes-embedded-resource",
    ] {
        if schema.flag(key) {
            let detail = "must be false if x-kubernetes-int-or-string is true";
            out.push(invalid(child_path(path, key), &Value::Bool(true), detail));
        }
    }
}

fn structural_type(schema: Node, level: Level, path: &str, out: &mut Vec<FieldError>) {
    let ty = schema.type_name();
    let field = child_path(path, "type");
    if schema.embedded() && ty != "object" {
        let detail = "must be object if x-kubernetes-embedded-resource is true";
        out.push(if ty.is_empty() {
            FieldError::required(field, detail)
        } else {
            invalid(field, &Value::from(ty), detail)
        });
    } else if ty.is_empty() && !schema.int_or_string() && !schema.preserves_unknown() {
        let detail = match level {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        out.push(FieldError::required(field, detail));
    }
}

/// At a resource's top, `kind`/`apiVersion` must be strings and `metadata` an object.
fn type_meta_schemas(schema: Node, path: &str, out: &mut Vec<FieldError>) {
    for (key, wanted) in [
        ("kind", "string"),
        ("apiVersion", "string"),
        ("metadata", "object"),
    ] {
        if let Some(property) = schema.property(key)
            && property.type_name() != wanted
        {
            let field = child_path(&key_path(path, "properties", key), "type");
            let value = Value::from(property.type_name());
            out.push(invalid(field, &value, &format!("must be {wanted}")));
        }
    }
}

/// Root `metadata` may only declare its type, defaults and schemas for `name`/`generateName`.
fn restricts_more_than_names(metadata: Node) -> bool {
    let Some(fields) = metadata.0.as_object() else {
        return false;
    };
    let is_set = |v: &Value| match v {
        Value::Null | Value::Bool(false) => false,
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
        _ => true,
    };
    let other_names = metadata
        .properties()
        .is_some_and(|p| p.keys().any(|k| k != "name" && k != "generateName"));
    other_names
        || fields.iter().any(|(key, value)| {
            !matches!(
                key.as_str(),
                "type" | "properties" | "default" | "example" | "externalDocs"
            ) && is_set(value)
        })
}

/// `anyOf: [{type: integer}, {type: string}]`, the one typed anyOf int-or-string may carry.
fn is_int_or_string_any_of(schema: Node) -> bool {
    let expected = [
        serde_json::json!({"type": "integer"}),
        serde_json::json!({"type": "string"}),
    ];
    schema
        .get("anyOf")
        .and_then(Value::as_array)
        .is_some_and(|any_of| any_of.as_slice() == expected)
}

fn is_int_or_string_all_of(schema: Node) -> bool {
    schema
        .get("allOf")
        .and_then(Value::as_array)
        .and_then(|all_of| all_of.first())
        .is_some_and(|first| is_int_or_string_any_of(Node(first)))
}

/// Checks the value validations of a node: its junctors must be structural and its pattern must
/// compile.
fn value_validation(
    schema: Node,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    out: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for (i, alternative) in schema.alternatives("anyOf") {
            nested_value_validation(
                alternative,
                false,
                &index_path(&child_path(path, "anyOf"), i),
                out,
            );
        }
    }
    for (i, alternative) in schema.alternatives("allOf") {
        let skip = skip_first_all_of_any_of && i == 0;
        nested_value_validation(
            alternative,
            skip,
            &index_path(&child_path(path, "allOf"), i),
            out,
        );
    }
    for (i, alternative) in schema.alternatives("oneOf") {
        nested_value_validation(
            alternative,
            false,
            &index_path(&child_path(path, "oneOf"), i),
            out,
        );
    }
    if let Some(not) = schema.not() {
        nested_value_validation(not, false, &child_path(path, "not"), out);
    }
    let pattern = schema.text("pattern");
    if !pattern.is_empty()
        && let Err(err) = compile_pattern(pattern)
    {
        let detail = format!("must be a valid regular expression, but isn't: {err}");
        out.push(invalid(
            child_path(path, "pattern"),
            &Value::from(pattern),
            &detail,
        ));
    }
}

/// Schemas under allOf/anyOf/oneOf/not may only validate values, never declare structure.
fn nested_value_validation(schema: Node, skip_any_of: bool, path: &str, out: &mut Vec<FieldError>) {
    value_validation(schema, skip_any_of, false, path, out);
    if let Some(items) = schema.items() {
        nested_value_validation(items, false, &child_path(path, "items"), out);
    }
    for (key, property) in schema.property_nodes() {
        nested_value_validation(property, false, &key_path(path, "properties", key), out);
    }
    let empty = "must be empty to be structural";
    let undefined = "must be undefined to be structural";
    let falsy = "must be false to be structural";
    let forbidden = [
        ("type", !schema.type_name().is_empty(), empty),
        (
            "additionalProperties",
            schema.get("additionalProperties").is_some(),
            undefined,
        ),
        ("default", schema.default_value().is_some(), undefined),
        ("title", !schema.text("title").is_empty(), empty),
        ("description", !schema.text("description").is_empty(), empty),
        (
            "nullable",
            schema.nullable(),
            "must be false to be structural",
        ),
        (
            "x-kubernetes-preserve-unknown-fields",
            schema.preserves_unknown(),
            falsy,
        ),
        ("x-kubernetes-embedded-resource", schema.embedded(), falsy),
        ("x-kubernetes-int-or-string", schema.int_or_string(), falsy),
        (
            "x-kubernetes-list-map-keys",
            !schema.list_map_keys().is_empty(),
            empty,
        ),
        (
            "x-kubernetes-list-type",
            schema.list_type().is_some(),
            undefined,
        ),
        // Validation rules inside a junctor are never evaluated, so the server refuses them.
        (
            "x-kubernetes-validations",
            schema
                .get("x-kubernetes-validations")
                .and_then(serde_json::Value::as_array)
                .is_some_and(|rules| !rules.is_empty()),
            empty,
        ),
    ];
    for (key, set, detail) in forbidden {
        if set {
            out.push(FieldError::forbidden(child_path(path, key), detail));
        }
    }
    if schema.property("metadata").is_some() {
        let field = key_path(path, "properties", "metadata");
        out.push(FieldError::forbidden(
            field,
            "must not be specified in a nested context",
        ));
    }
}

/// Every property or items a junctor validates must also be declared structurally
/// (kube's `validateStructuralCompleteness`, which looks at the root's junctors).
fn completeness(
    holder: Node,
    schema: Node,
    schema_path: &str,
    holder_path: &str,
    out: &mut Vec<FieldError>,
) {
    if let Some(not) = holder.not() {
        nested_completeness(
            not,
            Some(schema),
            schema_path,
            &child_path(holder_path, "not"),
            out,
        );
    }
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, alternative) in holder.alternatives(junctor) {
            let at = index_path(&child_path(holder_path, junctor), i);
            nested_completeness(alternative, Some(schema), schema_path, &at, out);
        }
    }
}

fn nested_completeness(
    holder: Node,
    schema: Option<Node>,
    schema_path: &str,
    holder_path: &str,
    out: &mut Vec<FieldError>,
) {
    let Some(schema) = schema else {
        let detail = format!("because it is defined in {holder_path}");
        out.push(FieldError::required(schema_path, &detail));
        return;
    };
    completeness(holder, schema, schema_path, holder_path, out);
    if let Some(items) = holder.items() {
        let (at, items_path) = (
            child_path(schema_path, "items"),
            child_path(holder_path, "items"),
        );
        nested_completeness(items, schema.items(), &at, &items_path, out);
    }
    for (key, property) in holder.property_nodes() {
        let holder_at = key_path(holder_path, "properties", key);
        match (schema.property(key), schema.additional_schema()) {
            (Some(declared), _) => {
                let at = key_path(schema_path, "properties", key);
                nested_completeness(property, Some(declared), &at, &holder_at, out);
            }
            (None, Some(additional)) => {
                let at = child_path(schema_path, "additionalProperties");
                nested_completeness(property, Some(additional), &at, &holder_at, out);
            }
            (None, None) => {
                let detail = format!("because it is defined in {holder_at}");
                out.push(FieldError::required(
                    key_path(schema_path, "properties", key),
                    &detail,
                ));
            }
        }
    }
}

/// Every `default` must survive pruning unchanged and validate against its own node
/// (kube's `ValidateDefaults`; like it, defaults under additionalProperties are not visited).
fn check_defaults(schema: Node, path: &str, out: &mut Vec<FieldError>) {
    if let Some(default) = schema.default_value() {
        let at = child_path(path, "default");
        let mut pruned = default.clone();
        Pruner::default().value(&mut pruned, Some(schema), "", schema.embedded());
        if &pruned != default {
            out.push(invalid(at.clone(), default, "must not have unknown fields"));
        }
        let mut validator = Validator::new(Some(at.as_str()));
        let mut errors = Vec::new();
        validator.embedded_resources(schema, default, "", schema.embedded(), &mut errors);
        if errors.is_empty() {
            validator.node(schema, default, "", &mut errors);
        }
        out.extend(errors);
    }
    if let Some(items) = schema.items() {
        check_defaults(items, &child_path(path, "items"), out);
    }
    for (key, property) in schema.property_nodes() {
        check_defaults(property, &key_path(path, "properties", key), out);
    }
}

/// Context of the OpenAPI-subset checks as they descend.
#[derive(Clone)]
pub(super) struct Scope {
    pub(super) root: bool,
    /// Inside the schema of `apiVersion`, `kind` or `metadata` of a resource.
    pub(super) inside_meta: bool,
    /// Why `default` may not be used here, if it may not.
    pub(super) defaults_forbidden: Option<String>,
}

impl Scope {
    pub(super) fn root() -> Self {
        Self {
            root: true,
            inside_meta: false,
            defaults_forbidden: None,
        }
    }

    fn nested(&self) -> Self {
        Self {
            root: false,
            ..self.clone()
        }
    }
}

/// The OpenAPI subset CRDs may use (kube's `ValidateCustomResourceDefinitionOpenAPISchema`).
fn check_openapi(schema: Node, path: &str, scope: &Scope, out: &mut Vec<FieldError>) {
    check_keywords(schema, path, scope, out);
    if schema.flag("uniqueItems") {
        let detail =
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic";
        out.push(FieldError::forbidden(
            child_path(path, "uniqueItems"),
            detail,
        ));
    }
    let additional = schema.additional();
    if schema.has_properties()
        && matches!(
            additional,
            Additional::Allows(false) | Additional::Schema(_)
        )
    {
        let detail = "additionalProperties and properties are mutual exclusive";
        out.push(FieldError::forbidden(
            child_path(path, "additionalProperties"),
            detail,
        ));
    }
    if let Additional::Schema(additional) = additional {
        let mut sub = scope.nested();
        if scope.inside_meta {
            sub.defaults_forbidden =
                Some("inside additionalProperties applying to object metadata".into());
        }
        check_openapi(
            additional,
            &child_path(path, "additionalProperties"),
            &sub,
            out,
        );
    }
    for (key, property) in schema.property_nodes() {
        let mut sub = scope.nested();
        if (scope.root || schema.embedded()) && META_FIELDS.contains(&key.as_str()) {
            sub.inside_meta = true;
            if scope.root {
                sub.defaults_forbidden = Some(format!("in top-level {key}"));
            }
        }
        check_openapi(property, &key_path(path, "properties", key), &sub, out);
    }
    if let Some(not) = schema.not() {
        check_openapi(not, &child_path(path, "not"), &scope.nested(), out);
    }
    for junctor in ["allOf", "oneOf", "anyOf"] {
        for (i, alternative) in schema.alternatives(junctor) {
            check_openapi(
                alternative,
                &index_path(&child_path(path, junctor), i),
                &scope.nested(),
                out,
            );
        }
    }
    if let Some(items) = schema.items() {
        check_openapi(items, &child_path(path, "items"), &scope.nested(), out);
    }
    if schema.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(false)) {
        let field = child_path(path, "x-kubernetes-preserve-unknown-fields");
        out.push(invalid(
            field,
            &Value::Bool(false),
            "must be true or undefined",
        ));
    }
    check_map_type(schema, path, out);
    check_list_type(schema, path, out);
}

/// Keywords CRD schemas may not use at all, and defaults where they are forbidden.
fn check_keywords(schema: Node, path: &str, scope: &Scope, out: &mut Vec<FieldError>) {
    let ty = schema.type_name();
    if !ty.is_empty() && !OPENAPI_TYPES.contains(&ty) {
        let supported: Vec<String> = OPENAPI_TYPES.iter().map(|t| go_quote(t)).collect();
        out.push(not_supported(
            child_path(path, "type"),
            &Value::from(ty),
            &supported,
        ));
    }
    if schema.default_value().is_some()
        && let Some(reason) = &scope.defaults_forbidden
    {
        out.push(FieldError::forbidden(
            child_path(path, "default"),
            &format!("must not be set {reason}"),
        ));
    }
    let non_empty = |key: &str| match schema.get(key) {
        Some(Value::Object(map)) => !map.is_empty(),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Null) | None => false,
        Some(_) => true,
    };
    for key in [
        "id",
        "additionalItems",
        "patternProperties",
        "definitions",
        "dependencies",
        "$ref",
    ] {
        if non_empty(key) {
            out.push(FieldError::forbidden(
                child_path(path, key),
                &format!("{key} is not supported"),
            ));
        }
    }
    if ty == "null" {
        let detail = "type cannot be set to null, use nullable as an alternative";
        out.push(FieldError::forbidden(child_path(path, "type"), detail));
    }
    if schema
        .get("items")
        .and_then(Value::as_array)
        .is_some_and(|items| !items.is_empty())
    {
        let detail = "items must be a schema object and not an array";
        out.push(FieldError::forbidden(child_path(path, "items"), detail));
    }
    if scope.inside_meta && schema.embedded() {
        let field = child_path(path, "x-kubernetes-embedded-resource");
        out.push(FieldError::forbidden(
            field,
            "must not be used inside of resource meta",
        ));
    }
}

fn check_map_type(schema: Node, path: &str, out: &mut Vec<FieldError>) {
    let Some(map_type) = schema.get("x-kubernetes-map-type").and_then(Value::as_str) else {
        return;
    };
    let ty = schema.type_name();
    if ty != "object" {
        out.push(type_must_be(
            path,
            ty,
            "must be object if x-kubernetes-map-type is specified",
        ));
    }
    if map_type != "atomic" && map_type != "granular" {
        let supported = [go_quote("atomic"), go_quote("granular")];
        let field = child_path(path, "x-kubernetes-map-type");
        out.push(not_supported(field, &Value::from(map_type), &supported));
    }
}

fn check_list_type(schema: Node, path: &str, out: &mut Vec<FieldError>) {
    let list_type = schema.list_type();
    let ty = schema.type_name();
    if list_type.is_some() && ty != "array" {
        out.push(type_must_be(
            path,
            ty,
            "must be array if x-kubernetes-list-type is specified",
        ));
    } else if list_type == Some("set")
        && let Some(items) = schema.items()
    {
        atomic_set_items(items, path, out);
    }
    if let Some(list_type) = list_type
        && !matches!(list_type, "atomic" | "set" | "map")
    {
        let supported = ["atomic", "set", "map"].map(go_quote);
        let field = child_path(path, "x-kubernetes-list-type");
        out.push(not_supported(field, &Value::from(list_type), &supported));
    }
    let keys = schema.list_map_keys();
    if !keys.is_empty() && list_type != Some("map") {
        let detail = "must be map if x-kubernetes-list-map-keys is non-empty";
        let field = child_path(path, "x-kubernetes-list-type");
        out.push(match list_type {
            None => FieldError::required(field, detail),
            Some(other) => invalid(field, &Value::from(other), detail),
        });
    }
    if list_type == Some("map") {
        check_list_map(schema, &keys, path, out);
    }
    if matches!(list_type, Some("set" | "map"))
        && let Some(items) = schema.items()
    {
        check_list_keys_nullability(schema, items, &keys, path, out);
    }
}

/// `type` is required (if empty) or invalid (otherwise) for the given reason.
fn type_must_be(path: &str, ty: &str, detail: &str) -> FieldError {
    let field = child_path(path, "type");
    if ty.is_empty() {
        FieldError::required(field, detail)
    } else {
        invalid(field, &Value::from(ty), detail)
    }
}

/// Items of a set must be atomic themselves, so that equality is well defined.
fn atomic_set_items(items: Node, path: &str, out: &mut Vec<FieldError>) {
    let detail = "must be atomic as item of a list with x-kubernetes-list-type=set";
    let items_path = child_path(path, "items");
    match items.type_name() {
        "array" if items.list_type().is_some_and(|t| t != "atomic") => {
            let value = Value::from(items.list_type().unwrap_or_default());
            out.push(invalid(
                child_path(&items_path, "x-kubernetes-list-type"),
                &value,
                detail,
            ));
        }
        "object"
            if items.get("x-kubernetes-map-type").and_then(Value::as_str) != Some("atomic") =>
        {
            // The server prints the items' list type here (usually unset, so "null").
            let value = items.list_type().map_or(Value::Null, Value::from);
            out.push(invalid(
                child_path(&items_path, "x-kubernetes-map-type"),
                &value,
                detail,
            ));
        }
        _ => {}
    }
}

fn check_list_map(schema: Node, keys: &[&str], path: &str, out: &mut Vec<FieldError>) {
    if keys.is_empty() {
        let detail = "must not be empty if x-kubernetes-list-type is map";
        out.push(FieldError::required(
            child_path(path, "x-kubernetes-list-map-keys"),
            detail,
        ));
    }
    let Some(items) = schema.items() else {
        let detail = "must have a schema if x-kubernetes-list-type is map";
        out.push(FieldError::required(child_path(path, "items"), detail));
        return;
    };
    let items_type = items.type_name();
    if items_type != "object" {
        let detail = "must be object if parent array's x-kubernetes-list-type is map";
        out.push(invalid(
            child_path(&child_path(path, "items"), "type"),
            &Value::from(items_type),
            detail,
        ));
        return;
    }
    let keys_field = child_path(path, "x-kubernetes-list-map-keys");
    let keys_value = Value::from(keys.iter().map(|k| Value::from(*k)).collect::<Vec<_>>());
    for (i, key) in keys.iter().enumerate() {
        match items.property(key) {
            Some(property) if matches!(property.type_name(), "array" | "object") => {
                let at = child_path(
                    &key_path(&child_path(path, "items"), "properties", key),
                    "type",
                );
                let detail =
                    "must be a scalar type if parent array's x-kubernetes-list-type is map";
                // The server prints the items' type rather than the key's.
                out.push(invalid(at, &Value::from(items_type), detail));
            }
            Some(_) => {}
            None => {
                let detail = "entries must all be names of item properties";
                out.push(string_slice_invalid(
                    keys_field.clone(),
                    &keys_value,
                    detail,
                ));
            }
        }
        if keys.get(..i).is_some_and(|earlier| earlier.contains(key)) {
            let detail = "must not contain duplicate entries";
            out.push(string_slice_invalid(
                keys_field.clone(),
                &keys_value,
                detail,
            ));
        }
    }
}

/// List keys must be present on every item (required or defaulted) and never null.
fn check_list_keys_nullability(
    schema: Node,
    items: Node,
    keys: &[&str],
    path: &str,
    out: &mut Vec<FieldError>,
) {
    let items_path = child_path(path, "items");
    if items.nullable() {
        let detail = format!(
            "cannot be nullable when x-kubernetes-list-type is {}",
            schema.text("x-kubernetes-list-type")
        );
        out.push(FieldError::forbidden(
            child_path(&items_path, "nullable"),
            &detail,
        ));
    }
    if schema.list_type() != Some("map") {
        return;
    }
    let required = items.get("required").and_then(Value::as_array);
    let is_required =
        |key: &str| required.is_some_and(|r| r.iter().any(|k| k.as_str() == Some(key)));
    for key in keys {
        let Some(property) = items.property(key) else {
            continue;
        };
        let at = key_path(&items_path, "properties", key);
        if !is_required(key) && property.default_value().is_none() {
            let detail = "this property is in x-kubernetes-list-map-keys, so it must have a default or be a \
                          required property";
            out.push(FieldError::required(child_path(&at, "default"), detail));
        }
        if property.nullable() {
            let detail = "this property is in x-kubernetes-list-map-keys, so it cannot be nullable";
            out.push(FieldError::forbidden(child_path(&at, "nullable"), detail));
        }
    }
}

/// An Invalid error whose value is a Go `[]string`, printed as such.
fn string_slice_invalid(field: String, values: &Value, detail: &str) -> FieldError {
    let quoted: Vec<String> = values
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(go_quote)
        .collect();
    FieldError {
        kind: FieldErrorKind::Invalid,
        field,
        message: format!("Invalid value: []string{{{}}}: {detail}", quoted.join(", ")),
    }
}
