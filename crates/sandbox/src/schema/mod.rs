//! CRD structural schemas: pruning, defaulting and validation of custom resources, plus the
//! checks a CRD's `openAPIV3Schema` must pass before it is served.
//!
//! The behaviour follows `k8s.io/apiextensions-apiserver` (pruning, defaulting, list-type and
//! embedded-resource validation, structural-schema rules) and `k8s.io/kube-openapi` (value
//! validation), down to the wording of the error messages, so clients see the same
//! `details.causes` from the sandbox as from a real cluster. Two consequences look odd but are
//! faithful: values in messages are printed the way Go prints them (`1e+06`,
//! `map[string]interface {}{"name":"a"}`), and the anyOf/oneOf/allOf/not summaries carry the
//! field `<nil>` because kube-openapi reports them without a path.
//!
//! Schemas and objects are untrusted input: malformed keywords are treated as absent and nothing
//! here panics.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::{Map, Number, Value};

use crate::field_error::{FieldError, FieldErrorKind, child_path, index_path};

/// Removes fields not declared in the schema (Kubernetes "pruning") and returns the removed
/// paths, sorted, dotted from the root without a leading dot (`spec.foo`, `spec.items[0].bar`),
/// so callers can implement `fieldValidation=Strict/Warn`.
///
/// The root is treated as a resource: `apiVersion`/`kind` (strings) and `metadata` (an object)
/// are always kept and `metadata` is never descended into. A node with
/// `x-kubernetes-preserve-unknown-fields: true` keeps unknown keys but its declared properties
/// are still pruned; `x-kubernetes-embedded-resource: true` keeps the type meta of nested
/// resources the same way.
pub fn prune(schema: &Value, obj: &mut Value) -> Vec<String> {
    let mut pruner = Pruner::default();
    pruner.value(obj, Some(Node(schema)), "", true);
    pruner.removed.sort();
    pruner.removed
}

/// Applies `default` values from the schema, top-down: a missing property (or a null one whose
/// schema is not nullable) gets its default, and the result is then defaulted itself. Array
/// items and `additionalProperties` values are defaulted too. Call after [`prune`].
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    default_value(obj, Node(schema));
}

/// Validates a custom resource against the schema and returns every error in a deterministic
/// order: value validation first (properties in key order), then embedded resources' type meta,
/// then `x-kubernetes-list-type` uniqueness — the order the API server appends them in.
pub fn validate(schema: &Value, obj: &Value) -> Vec<FieldError> {
    let mut validator = Validator::new(None);
    let schema = Node(schema);
    let mut errors = Vec::new();
    validator.node(schema, obj, "", &mut errors);
    validator.embedded_resources(schema, obj, "", false, &mut errors);
    validator.list_types(schema, obj, "", &mut errors);
    errors
}

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

/// Fields every resource (the root and embedded resources) carries besides its schema.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Formats the API server validates, with dashes removed as go-openapi normalises names
/// (`date-time` → `datetime`). Any other `format` (e.g. `int32`) is ignored.
const SUPPORTED_FORMATS: [&str; 24] = [
    "bsonobjectid",
    "uri",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "cidr",
    "mac",
    "uuid",
    "uuid3",
    "uuid4",
    "uuid5",
    "isbn",
    "isbn10",
    "isbn13",
    "creditcard",
    "ssn",
    "hexcolor",
    "rgbcolor",
    "byte",
    "password",
    "date",
    "duration",
    "datetime",
];

/// The `type`s a CRD schema may use, in the order the server lists them.
const OPENAPI_TYPES: [&str; 6] = ["array", "boolean", "integer", "number", "object", "string"];

// ---------------------------------------------------------------------------------------------
// Schema access
// ---------------------------------------------------------------------------------------------

/// One JSONSchemaProps node. Malformed keywords read as absent.
#[derive(Clone, Copy)]
struct Node<'a>(&'a Value);

/// `additionalProperties`: absent, a bare boolean, or a schema for every undeclared key.
#[derive(Clone, Copy)]
enum Additional<'a> {
    Absent,
    Allows(bool),
    Schema(Node<'a>),
}

impl<'a> Node<'a> {
    fn get(self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    fn flag(self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    fn text(self, key: &str) -> &'a str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }

    fn type_name(self) -> &'a str {
        self.text("type")
    }

    fn nullable(self) -> bool {
        self.flag("nullable")
    }

    fn preserves_unknown(self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    fn embedded(self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    fn int_or_string(self) -> bool {
        self.flag("x-kubernetes-int-or-string")
    }

    /// `default`, unless absent or null: the server cannot tell a null default from none.
    fn default_value(self) -> Option<&'a Value> {
        self.get("default").filter(|d| !d.is_null())
    }

    fn properties(self) -> Option<&'a Map<String, Value>> {
        self.get("properties").and_then(Value::as_object)
    }

    fn property(self, key: &str) -> Option<Node<'a>> {
        self.properties()?
            .get(key)
            .filter(|p| p.is_object())
            .map(Node)
    }

    fn property_nodes(self) -> impl Iterator<Item = (&'a String, Node<'a>)> {
        self.properties()
            .into_iter()
            .flatten()
            .filter(|(_, p)| p.is_object())
            .map(|(k, p)| (k, Node(p)))
    }

    fn has_properties(self) -> bool {
        self.properties().is_some_and(|p| !p.is_empty())
    }

    fn items(self) -> Option<Node<'a>> {
        self.get("items").filter(|i| i.is_object()).map(Node)
    }

    fn additional(self) -> Additional<'a> {
        match self.get("additionalProperties") {
            Some(Value::Bool(allows)) => Additional::Allows(*allows),
            Some(schema @ Value::Object(_)) => Additional::Schema(Node(schema)),
            _ => Additional::Absent,
        }
    }

    fn additional_schema(self) -> Option<Node<'a>> {
        match self.additional() {
            Additional::Schema(schema) => Some(schema),
            _ => None,
        }
    }

    /// The schemas of `allOf`/`anyOf`/`oneOf`, with their index in the list.
    fn alternatives(self, key: &str) -> impl Iterator<Item = (usize, Node<'a>)> {
        self.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, s)| s.is_object())
            .map(|(i, s)| (i, Node(s)))
    }

    fn not(self) -> Option<Node<'a>> {
        self.get("not").filter(|n| n.is_object()).map(Node)
    }

    /// A non-negative integer keyword such as `maxLength`.
    fn count(self, key: &str) -> Option<u64> {
        let value = self.get(key)?;
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        })
    }

    fn number(self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    /// The accepted JSON types; int-or-string means "integer or string" whatever `type` says.
    fn types(self) -> Vec<&'a str> {
        if self.int_or_string() {
            return vec!["integer", "string"];
        }
        match self.get("type") {
            Some(Value::String(t)) if !t.is_empty() => vec![t.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            _ => Vec::new(),
        }
    }

    /// `format`, if it is one the server validates (others are stripped when the CRD is served).
    fn format(self) -> Option<&'a str> {
        let format = self.text("format");
        let normalized = format.replace('-', "");
        SUPPORTED_FORMATS
            .contains(&normalized.as_str())
            .then_some(format)
    }

    fn list_type(self) -> Option<&'a str> {
        self.get("x-kubernetes-list-type").and_then(Value::as_str)
    }

    fn list_map_keys(self) -> Vec<&'a str> {
        self.get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }
}

/// `<path>.<name>[<key>]`, the way field paths print map keys of a schema (`properties[spec]`).
fn key_path(path: &str, name: &str, key: &str) -> String {
    format!("{}[{key}]", child_path(path, name))
}

// ---------------------------------------------------------------------------------------------
// Pruning
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Pruner {
    removed: Vec<String>,
}

impl Pruner {
    /// Prunes `x` against `schema` (`None`: nothing below is declared). `resource_root` marks the
    /// top of a resource, whose type meta is kept and whose stray meta fields go unreported.
    fn value(&mut self, x: &mut Value, schema: Option<Node>, path: &str, resource_root: bool) {
        if let Some(schema) = schema
            && schema.preserves_unknown()
        {
            self.preserved(x, schema, path, resource_root);
            return;
        }
        match x {
            Value::Object(map) => self.object(map, schema, path, resource_root),
            Value::Array(list) => {
                let items = schema.and_then(Node::items);
                for (i, item) in list.iter_mut().enumerate() {
                    self.value(item, items, &index_path(path, i), false);
                }
            }
            _ => {}
        }
    }

    fn object(
        &mut self,
        map: &mut Map<String, Value>,
        schema: Option<Node>,
        path: &str,
        resource_root: bool,
    ) {
        let Some(schema) = schema else {
            for key in std::mem::take(map).keys() {
                self.removed.push(child_path(path, key));
            }
            return;
        };
        let embedded = resource_root || schema.embedded();
        map.retain(|key, value| {
            if embedded && is_kept_type_meta(key, value) {
                return true;
            }
            let child = child_path(path, key);
            if let Some(property) = schema.property(key) {
                self.value(value, Some(property), &child, false);
                return true;
            }
            match schema.additional() {
                Additional::Schema(additional) => {
                    self.value(value, Some(additional), &child, false)
                }
                // A bare boolean keeps the key but declares nothing below it.
                Additional::Allows(_) => self.value(value, None, &child, false),
                Additional::Absent => {
                    if !(resource_root && META_FIELDS.contains(&key.as_str())) {
                        self.removed.push(child);
                    }
                    return false;
                }
            }
            true
        });
    }

    /// Below `x-kubernetes-preserve-unknown-fields`, unknown keys stay but declared ones are
    /// still pruned (kube's `skipPrune`).
    fn preserved(&mut self, x: &mut Value, schema: Node, path: &str, resource_root: bool) {
        let embedded = resource_root || schema.embedded();
        match x {
            Value::Object(map) => {
                for (key, value) in map.iter_mut() {
                    if embedded && META_FIELDS.contains(&key.as_str()) {
                        continue;
                    }
                    let child = child_path(path, key);
                    if let Some(property) = schema.property(key) {
                        self.value(value, Some(property), &child, false);
                    } else {
                        match schema.additional() {
                            Additional::Schema(additional) => {
                                self.value(value, Some(additional), &child, false);
                            }
                            Additional::Allows(_) => self.value(value, None, &child, false),
                            Additional::Absent => {}
                        }
                    }
                }
            }
            Value::Array(list) => {
                if let Some(items) = schema.items() {
                    for (i, item) in list.iter_mut().enumerate() {
                        self.preserved(item, items, &index_path(path, i), false);
                    }
                }
            }
            _ => {}
        }
    }
}

/// A resource keeps `apiVersion`/`kind` when they are strings and `metadata` when it is an
/// object; anything else under those names is pruned like an unknown field.
fn is_kept_type_meta(key: &str, value: &Value) -> bool {
    match key {
        "apiVersion" | "kind" => value.is_string(),
        "metadata" => value.is_object(),
        _ => false,
    }
}

// ---------------------------------------------------------------------------------------------
// Defaulting
// ---------------------------------------------------------------------------------------------

fn default_value(x: &mut Value, schema: Node) {
    match x {
        Value::Object(map) => default_object(map, schema),
        Value::Array(list) => {
            if let Some(items) = schema.items() {
                for item in list.iter_mut() {
                    default_null(item, items);
                    default_value(item, items);
                }
            }
        }
        _ => {}
    }
}

fn default_object(map: &mut Map<String, Value>, schema: Node) {
    for (key, property) in schema.property_nodes() {
        let Some(default) = property.default_value() else {
            continue;
        };
        let missing = map
            .get(key)
            .is_none_or(|v| v.is_null() && !property.nullable());
        if missing {
            map.insert(key.clone(), default.clone());
        }
    }
    let additional = schema.additional_schema();
    for (key, value) in map.iter_mut() {
        if let Some(property) = schema.property(key) {
            default_value(value, property);
        } else if let Some(additional) = additional {
            default_null(value, additional);
            default_value(value, additional);
        }
    }
}

/// Replaces a null that its schema does not allow with the schema's default.
fn default_null(x: &mut Value, schema: Node) {
    if x.is_null()
        && !schema.nullable()
        && let Some(default) = schema.default_value()
    {
        *x = default.clone();
    }
}

// ---------------------------------------------------------------------------------------------
// Validation
// ---------------------------------------------------------------------------------------------

/// A JSON number as the server decodes it: integral literals become int64, the rest float64.
#[derive(Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(n: &Number) -> Self {
        match n.as_i64() {
            Some(i) => Self::Int(i),
            None => Self::Float(n.as_f64().unwrap_or(0.0)),
        }
    }
}

struct Validator<'p> {
    /// The path errors hang under: `None` for a custom resource (the server's nil path), the
    /// `...default` path when validating a schema default.
    root: Option<&'p str>,
    /// Compiled `pattern`s, so a long list of strings compiles each pattern once.
    patterns: HashMap<String, Result<Regex, String>>,
}

impl<'p> Validator<'p> {
    fn new(root: Option<&'p str>) -> Self {
        Self {
            root,
            patterns: HashMap::new(),
        }
    }

    /// The field of an error found at `path` (kube-openapi's name, `.`-trimmed, under the root).
    fn field(&self, path: &str) -> String {
        let path = path.strip_prefix('.').unwrap_or(path);
        match (self.root, path.is_empty()) {
            (None, true) => "<nil>".to_owned(),
            (None, false) => path.to_owned(),
            (Some(root), true) => root.to_owned(),
            (Some(root), false) => format!("{root}.{path}"),
        }
    }

    fn invalid(&self, path: &str, value: &Value, detail: &str) -> FieldError {
        invalid(self.field(path), value, detail)
    }

    /// kube-openapi's "must be of type" error; the bad value shown is the actual type's name.
    fn type_error(&self, path: &str, expected: &str, actual: &str) -> FieldError {
        let detail = format!(
            "{path} in body must be of type {expected}: {}",
            go_quote(actual)
        );
        self.invalid(path, &Value::from(actual), &detail)
    }

    /// anyOf/oneOf/allOf/not summaries, which the server reports at the root path with "".
    fn composite(&self, detail: &str) -> FieldError {
        self.invalid("", &Value::from(""), detail)
    }

    /// Validates one value, running kube-openapi's validators in its order: type, combinators,
    /// string, format, number, array, enum, object.
    fn node(&mut self, schema: Node, x: &Value, path: &str, out: &mut Vec<FieldError>) {
        self.check_type(schema, x, path, out);
        if x.is_null() {
            self.check_enum(schema, x, path, out);
            return;
        }
        self.check_combinators(schema, x, path, out);
        match x {
            Value::String(text) => {
                self.check_string(schema, x, text, path, out);
                self.check_format(schema, x, text, path, out);
            }
            Value::Number(n) => self.check_number(schema, x, Num::of(n), path, out),
            Value::Array(list) => self.check_array(schema, list, path, out),
            _ => {}
        }
        self.check_enum(schema, x, path, out);
        if let Value::Object(map) = x {
            self.check_object(schema, map, path, out);
        }
    }

    fn check_type(&self, schema: Node, x: &Value, path: &str, out: &mut Vec<FieldError>) {
        let types = schema.types();
        let format = schema.format();
        if types.is_empty() && format.is_none() {
            return;
        }
        if x.is_null() {
            if !types.is_empty() && !schema.nullable() {
                out.push(self.type_error(path, &types.join(","), "null"));
            }
            return;
        }
        let actual = json_type(x);
        let accepted = types.contains(&actual)
            || (actual == "number"
                && types.contains(&"integer")
                && x.as_f64().is_some_and(is_json_integer))
            || (actual == "integer" && types.contains(&"number"));
        let stringish = x.is_string() || x.is_array();
        if let Some(format) = format
            && !stringish
            && !accepted
        {
            out.push(self.type_error(path, format, go_format_name(x)));
            return;
        }
        let numeric = types.iter().any(|t| *t == "number" || *t == "integer");
        // A formatted non-numeric schema leaves strings and arrays to the format check.
        if format.is_some() && !numeric && stringish {
            return;
        }
        if !types.is_empty() && !accepted {
            out.push(self.type_error(path, &types.join(","), actual));
        }
    }

    fn check_combinators(
        &mut self,
        schema: Node,
        x: &Value,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        let quoted = go_quote(path);
        let any_of: Vec<_> = schema
            .alternatives("anyOf")
            .map(|(_, s)| self.sub(s, x, path))
            .collect();
        if !any_of.is_empty() && !any_of.iter().any(Vec::is_empty) {
            out.push(self.composite(&format!(
                "{quoted} must validate at least one schema (anyOf)"
            )));
            out.extend(fewest(any_of));
        }
        let one_of: Vec<_> = schema
            .alternatives("oneOf")
            .map(|(_, s)| self.sub(s, x, path))
            .collect();
        let valid = one_of.iter().filter(|errors| errors.is_empty()).count();
        if !one_of.is_empty() && valid != 1 {
            let found = match valid {
                0 => "Found none valid".to_owned(),
                n => format!("Found {n} valid alternatives"),
            };
            let detail = format!("{quoted} must validate one and only one schema (oneOf). {found}");
            out.push(self.composite(&detail));
            if valid == 0 {
                out.extend(fewest(one_of));
            }
        }
        let all_of: Vec<_> = schema
            .alternatives("allOf")
            .map(|(_, s)| self.sub(s, x, path))
            .collect();
        let valid = all_of.iter().filter(|errors| errors.is_empty()).count();
        if valid != all_of.len() {
            let none = if valid == 0 { ". None validated" } else { "" };
            out.extend(all_of.into_iter().flatten());
            out.push(self.composite(&format!(
                "{quoted} must validate all the schemas (allOf){none}"
            )));
        }
        if let Some(not) = schema.not()
            && self.sub(not, x, path).is_empty()
        {
            out.push(self.composite(&format!("{quoted} must not validate the schema (not)")));
        }
    }

    fn sub(&mut self, schema: Node, x: &Value, path: &str) -> Vec<FieldError> {
        let mut errors = Vec::new();
        self.node(schema, x, path, &mut errors);
        errors
    }

    /// maxLength, minLength and pattern; like kube-openapi, stops at the first failure.
    fn check_string(
        &mut self,
        schema: Node,
        x: &Value,
        text: &str,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        let length = text.chars().count() as u64;
        if let Some(max) = schema.count("maxLength")
            && length > max
        {
            let detail = format!("may not be more than {max} bytes");
            out.push(FieldError::too_long(self.field(path), &detail));
            return;
        }
        if let Some(min) = schema.count("minLength")
            && length < min
        {
            let detail = format!("{path} in body should be at least {min} chars long");
            out.push(self.invalid(path, x, &detail));
            return;
        }
        let pattern = schema.text("pattern");
        if pattern.is_empty() {
            return;
        }
        let outcome = self
            .pattern(pattern)
            .as_ref()
            .map(|re| re.is_match(text))
            .map_err(Clone::clone);
        let detail = match outcome {
            Ok(true) => return,
            Ok(false) => format!("{path} in body should match '{pattern}'"),
            Err(err) => {
                format!("{path} in body should match '{pattern}, but pattern is invalid: {err}'")
            }
        };
        out.push(self.invalid(path, x, &detail));
    }

    fn pattern(&mut self, pattern: &str) -> &Result<Regex, String> {
        self.patterns
            .entry(pattern.to_owned())
            .or_insert_with(|| compile_pattern(pattern))
    }

    fn check_format(
        &self,
        schema: Node,
        x: &Value,
        text: &str,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        if let Some(format) = schema.format()
            && !format_valid(&format.replace('-', ""), text)
        {
            let detail = format!(
                "{path} in body must be of type {format}: {}",
                go_quote(text)
            );
            out.push(self.invalid(path, x, &detail));
        }
    }

    /// multipleOf, minimum and maximum, all reported. Integers are compared against bounds
    /// truncated to integers and the bounds print as such; floats print as Go floats.
    fn check_number(&self, schema: Node, x: &Value, n: Num, path: &str, out: &mut Vec<FieldError>) {
        if let Some(factor) = schema.number("multipleOf")
            && let Some(error) = self.multiple_of_error(x, n, factor, path)
        {
            out.push(error);
        }
        let bounds = [
            ("minimum", "exclusiveMinimum", Side::Lower),
            ("maximum", "exclusiveMaximum", Side::Upper),
        ];
        for (key, exclusive_key, side) in bounds {
            if let Some(limit) = schema.number(key)
                && let Some(detail) =
                    bound_failure(n, limit, schema.flag(exclusive_key), side, path)
            {
                out.push(self.invalid(path, x, &detail));
            }
        }
    }

    /// multipleOf as kube-openapi checks it: an integer against the factor truncated to an
    /// integer (when that is positive), anything else by float division with a tolerance.
    fn multiple_of_error(&self, x: &Value, n: Num, factor: f64, path: &str) -> Option<FieldError> {
        let must_be_positive = |shown: Value| {
            let detail = format!(
                "factor MultipleOf declared for {path} must be positive: {}",
                go_value(&shown)
            );
            Some(self.invalid(path, &shown, &detail))
        };
        let not_multiple = |shown: String| {
            let detail = format!("{path} in body should be a multiple of {shown}");
            Some(self.invalid(path, x, &detail))
        };
        if let Num::Int(i) = n {
            let whole = factor as i64;
            if whole < 0 {
                return must_be_positive(Value::from(whole));
            }
            if whole > 0 {
                return if i % whole == 0 {
                    None
                } else {
                    not_multiple(whole.to_string())
                };
            }
        }
        if factor < 0.0 {
            return must_be_positive(Value::from(factor));
        }
        let data = match n {
            Num::Int(i) => i as f64,
            Num::Float(f) => f,
        };
        let ratio = if factor < 1.0 {
            1.0 / factor * data
        } else {
            data / factor
        };
        if is_json_integer(ratio) {
            None
        } else {
            not_multiple(format_go_float(factor))
        }
    }

    fn check_array(&mut self, schema: Node, list: &[Value], path: &str, out: &mut Vec<FieldError>) {
        if let Some(items) = schema.items() {
            for (i, item) in list.iter().enumerate() {
                self.node(items, item, &index_path(path, i), out);
            }
        }
        let size = list.len();
        if let Some(min) = schema.count("minItems")
            && (size as u64) < min
        {
            let detail = format!("{path} in body should have at least {min} items");
            out.push(self.invalid(path, &Value::from(size), &detail));
        }
        if let Some(max) = schema.count("maxItems")
            && size as u64 > max
        {
            out.push(FieldError::too_many(self.field(path), size, max));
        }
    }

    fn check_enum(&self, schema: Node, x: &Value, path: &str, out: &mut Vec<FieldError>) {
        let Some(options) = schema.get("enum").and_then(Value::as_array) else {
            return;
        };
        if options.is_empty() || options.iter().any(|option| enum_matches(x, option)) {
            return;
        }
        let supported: Vec<String> = options.iter().map(enum_label).collect();
        out.push(not_supported(self.field(path), x, &supported));
    }

    fn check_object(
        &mut self,
        schema: Node,
        map: &Map<String, Value>,
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        let size = map.len();
        if let Some(min) = schema.count("minProperties")
            && (size as u64) < min
        {
            let detail = format!("{path} in body should have at least {min} properties");
            out.push(self.invalid(path, &Value::from(size), &detail));
            return;
        }
        if let Some(max) = schema.count("maxProperties")
            && size as u64 > max
        {
            out.push(FieldError::too_many(self.field(path), size, max));
            return;
        }
        let undeclared = map.iter().filter(|(key, _)| schema.property(key).is_none());
        match schema.additional() {
            Additional::Allows(false) => {
                for (key, _) in undeclared {
                    let detail = format!("{path}.{key} in body is a forbidden property");
                    out.push(self.invalid(path, &Value::from(key.as_str()), &detail));
                }
            }
            Additional::Schema(additional) => {
                for (key, value) in undeclared {
                    self.node(additional, value, &child_path(path, key), out);
                }
            }
            Additional::Allows(true) | Additional::Absent => {}
        }
        for (key, property) in schema.property_nodes() {
            if let Some(value) = map.get(key) {
                self.node(property, value, &child_path(path, key), out);
            }
        }
        let required = schema.get("required").and_then(Value::as_array);
        for key in required.into_iter().flatten().filter_map(Value::as_str) {
            if !map.contains_key(key) {
                out.push(FieldError::required(self.field(&child_path(path, key)), ""));
            }
        }
    }

    /// Nested `x-kubernetes-embedded-resource` objects need a valid `apiVersion` and `kind`
    /// (kube's objectmeta validation; `metadata` itself is not checked here).
    fn embedded_resources(
        &self,
        schema: Node,
        x: &Value,
        path: &str,
        resource_root: bool,
        out: &mut Vec<FieldError>,
    ) {
        match x {
            Value::Object(map) => {
                if resource_root || schema.embedded() {
                    self.type_meta(map, path, out);
                }
                for (key, value) in map {
                    let child = child_path(path, key);
                    if let Some(property) = schema.property(key) {
                        self.embedded_resources(property, value, &child, false, out);
                    } else if let Some(additional) = schema.additional_schema() {
                        self.embedded_resources(additional, value, &child, false, out);
                    }
                }
            }
            Value::Array(list) => {
                if let Some(items) = schema.items() {
                    for (i, item) in list.iter().enumerate() {
                        self.embedded_resources(items, item, &index_path(path, i), false, out);
                    }
                }
            }
            _ => {}
        }
    }

    fn type_meta(&self, map: &Map<String, Value>, path: &str, out: &mut Vec<FieldError>) {
        for key in ["apiVersion", "kind"] {
            if !map.contains_key(key) {
                out.push(FieldError::required(self.field(&child_path(path, key)), ""));
            }
        }
        for (key, value) in map {
            let detail = match (key.as_str(), value.as_str()) {
                ("apiVersion" | "kind", None) => "must be a string".to_owned(),
                ("apiVersion" | "kind", Some("")) => "must not be empty".to_owned(),
                ("apiVersion", Some(version)) if version.matches('/').count() > 1 => {
                    format!("unexpected GroupVersion string: {version}")
                }
                ("kind", Some(kind)) => match dns1035_errors(&kind.to_lowercase()) {
                    errors if errors.is_empty() => continue,
                    errors => {
                        format!(
                            "may have mixed case, but should otherwise match: {}",
                            errors.join(",")
                        )
                    }
                },
                _ => continue,
            };
            out.push(self.invalid(&child_path(path, key), value, &detail));
        }
    }

    /// `x-kubernetes-list-type: set|map` (and `uniqueItems`) uniqueness, checked after value
    /// validation as the API server does.
    fn list_types(&self, schema: Node, x: &Value, path: &str, out: &mut Vec<FieldError>) {
        match x {
            Value::Object(map) => {
                for (key, value) in map {
                    let child = child_path(path, key);
                    if let Some(property) = schema.property(key) {
                        self.list_types(property, value, &child, out);
                    } else if let Some(additional) = schema.additional_schema() {
                        self.list_types(additional, value, &child, out);
                    }
                }
            }
            Value::Array(list) => {
                match schema.list_type() {
                    Some("map") => self.list_map_duplicates(schema, list, path, out),
                    Some("set") => self.set_duplicates(list, path, out),
                    _ if schema.flag("uniqueItems") => self.set_duplicates(list, path, out),
                    _ => {}
                }
                if let Some(items) = schema.items() {
                    for (i, item) in list.iter().enumerate() {
                        self.list_types(items, item, &index_path(path, i), out);
                    }
                }
            }
            _ => {}
        }
    }

    fn set_duplicates(&self, list: &[Value], path: &str, out: &mut Vec<FieldError>) {
        for (i, item) in repeats(list) {
            out.push(duplicate(self.field(&index_path(path, i)), item));
        }
    }

    /// Items of a list-type map must be objects with unique key tuples; a duplicate is reported
    /// with its keys, as the server does (`map[string]interface {}{"name":"a"}`).
    fn list_map_duplicates(
        &self,
        schema: Node,
        list: &[Value],
        path: &str,
        out: &mut Vec<FieldError>,
    ) {
        let not_object = list
            .iter()
            .enumerate()
            .find(|(_, x)| !(x.is_null() || x.is_object()));
        if let Some((i, item)) = not_object {
            let detail = "must be an object for an array of list-type map";
            out.push(self.invalid(&index_path(path, i), item, detail));
            return;
        }
        let keys = schema.list_map_keys();
        let tuples: Vec<Value> = list
            .iter()
            .map(|item| {
                let present = keys
                    .iter()
                    .filter_map(|key| Some(((*key).to_owned(), item.get(key)?.clone())));
                Value::Object(present.collect())
            })
            .collect();
        for (i, tuple) in repeats(&tuples) {
            out.push(duplicate(self.field(&index_path(path, i)), tuple));
        }
    }
}

/// The JSON type name Go's validator infers for a decoded value.
fn json_type(x: &Value) -> &'static str {
    match x {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::String(_) => "string",
        Value::Number(n) if n.as_i64().is_some() => "integer",
        Value::Number(_) => "number",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The format go-openapi associates with a decoded Go value, shown when a formatted schema gets
/// a value of the wrong kind.
fn go_format_name(x: &Value) -> &'static str {
    match x {
        Value::Number(n) if n.as_i64().is_some() => "int64",
        Value::Number(_) => "float64",
        _ => "",
    }
}

/// The alternative with the fewest errors stands for a failed anyOf/oneOf (kube-openapi keeps
/// the one with the most passing checks; ties go to the first).
fn fewest(results: Vec<Vec<FieldError>>) -> Vec<FieldError> {
    results
        .into_iter()
        .reduce(|best, next| if next.len() < best.len() { next } else { best })
        .unwrap_or_default()
}

/// Which side of a `minimum`/`maximum` a value must stay on.
#[derive(Clone, Copy)]
enum Side {
    Lower,
    Upper,
}

/// The detail of a `minimum`/`maximum` violation, if `n` is on the wrong side of `limit`.
fn bound_failure(n: Num, limit: f64, exclusive: bool, side: Side, path: &str) -> Option<String> {
    let (ordering, shown) = match n {
        Num::Int(i) => {
            let limit = limit as i64;
            (i.cmp(&limit), limit.to_string())
        }
        Num::Float(f) => (f.partial_cmp(&limit)?, format_go_float(limit)),
    };
    let (outside, relation) = match (side, exclusive) {
        (Side::Lower, false) => (ordering.is_lt(), "greater than or equal to"),
        (Side::Lower, true) => (ordering.is_le(), "greater than"),
        (Side::Upper, false) => (ordering.is_gt(), "less than or equal to"),
        (Side::Upper, true) => (ordering.is_ge(), "less than"),
    };
    outside.then(|| format!("{path} in body should be {relation} {shown}"))
}

/// Enum membership as kube-openapi decides it: numbers are converted to the option's kind
/// (so `5.0` matches `5`), everything else must be equal.
fn enum_matches(x: &Value, option: &Value) -> bool {
    match (x, option) {
        (Value::Number(value), Value::Number(option)) => match (Num::of(value), Num::of(option)) {
            (Num::Int(v), Num::Int(o)) => v == o,
            (Num::Float(v), Num::Int(o)) => v as i64 == o,
            (v, Num::Float(o)) => match v {
                Num::Int(v) => v as f64 == o,
                Num::Float(v) => v == o,
            },
        },
        _ => x == option,
    }
}

/// How an enum option is listed: strings as-is, anything else as JSON, then quoted.
fn enum_label(option: &Value) -> String {
    match option {
        Value::String(s) => go_quote(s),
        other => go_quote(&other.to_string()),
    }
}

/// The second occurrence of every repeated value, with its index (later repeats are not
/// reported, as by the server).
fn repeats(list: &[Value]) -> Vec<(usize, &Value)> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut repeated = Vec::new();
    for (i, item) in list.iter().enumerate() {
        // Object keys serialize sorted, so equal values have equal text.
        let count = seen.entry(item.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            repeated.push((i, item));
        }
    }
    repeated
}

/// Errors of `IsDNS1035Label`, which a `kind` (lowercased) must satisfy.
fn dns1035_errors(label: &str) -> Vec<&'static str> {
    let mut errors = Vec::new();
    if label.len() > 63 {
        errors.push("must be no more than 63 characters");
    }
    let bytes = label.as_bytes();
    let valid = bytes.first().is_some_and(u8::is_ascii_lowercase)
        && bytes
            .last()
            .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if !valid {
        errors.push(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start \
             with an alphabetic character, and end with an alphanumeric character (e.g. \
             'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
        );
    }
    errors
}

fn invalid(field: String, value: &Value, detail: &str) -> FieldError {
    FieldError {
        kind: FieldErrorKind::Invalid,
        field,
        message: format!("Invalid value: {}: {detail}", go_value(value)),
    }
}

fn not_supported(field: String, value: &Value, supported: &[String]) -> FieldError {
    FieldError {
        kind: FieldErrorKind::NotSupported,
        field,
        message: format!(
            "Unsupported value: {}: supported values: {}",
            go_value(value),
            supported.join(", ")
        ),
    }
}

fn duplicate(field: String, value: &Value) -> FieldError {
    FieldError {
        kind: FieldErrorKind::Duplicate,
        field,
        message: format!("Duplicate value: {}", go_value(value)),
    }
}

// ---------------------------------------------------------------------------------------------
// Patterns and formats
// ---------------------------------------------------------------------------------------------

/// Compiles a schema `pattern`. The server uses Go's RE2, whose `\d`, `\w`, `\s` and `\b` are
/// ASCII-only and which knows `\Q...\E` literals; the `regex` crate's classes are
/// Unicode-aware and it has no `\Q`, so the pattern is translated first.
fn compile_pattern(pattern: &str) -> Result<Regex, String> {
    Regex::new(&go_compatible_pattern(pattern)).map_err(|err| {
        let text = err.to_string();
        let reason = text
            .lines()
            .rev()
            .find_map(|l| l.strip_prefix("error: "))
            .unwrap_or(&text);
        format!("error parsing regexp: {reason}")
    })
}

fn go_compatible_pattern(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    let mut class_depth = 0usize;
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(escaped) = chars.next() else {
                    out.push(c);
                    break;
                };
                let replacement = match escaped {
                    'Q' => {
                        let rest = chars.as_str();
                        let (literal, after) = rest.split_once("\\E").unwrap_or((rest, ""));
                        out.push_str(&regex::escape(literal));
                        chars = after.chars();
                        continue;
                    }
                    'd' => "[0-9]",
                    'D' => "[^0-9]",
                    'w' => "[0-9A-Za-z_]",
                    'W' => "[^0-9A-Za-z_]",
                    's' => "[\\t\\n\\f\\r ]",
                    'S' => "[^\\t\\n\\f\\r ]",
                    'b' if class_depth == 0 => "(?-u:\\b)",
                    'B' if class_depth == 0 => "(?-u:\\B)",
                    _ => {
                        out.push(c);
                        out.push(escaped);
                        continue;
                    }
                };
                out.push_str(replacement);
            }
            '[' => {
                class_depth += 1;
                out.push(c);
            }
            ']' => {
                class_depth = class_depth.saturating_sub(1);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}

fn lazy_regex(pattern: &str) -> Option<Regex> {
    Regex::new(pattern).ok()
}

fn regex_matches(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

static CLOCK: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"^([0-9]{2}):([0-9]{2}):([0-9]{2})(.[0-9]+)?(z|([+-][0-9]{2}:[0-9]{2}))$")
});
static UUID: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID3: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?3[0-9a-f]{3}-?[0-9a-f]{4}-?[0-9a-f]{12}$")
});
static UUID4: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?4[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
static UUID5: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(r"(?i)^[0-9a-f]{8}-?[0-9a-f]{4}-?5[0-9a-f]{3}-?[89ab][0-9a-f]{3}-?[0-9a-f]{12}$")
});
/// go-openapi's hostname pattern (RFC 1034 labels, also allowing Unicode letters and symbols).
static HOSTNAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    lazy_regex(
        r"^([a-zA-Z0-9\p{S}\p{L}]((-?[a-zA-Z0-9\p{S}\p{L}]{0,62})?)|([a-zA-Z0-9\p{S}\p{L}](([a-zA-Z0-9\-\p{S}\p{L}]{0,61}[a-zA-Z0-9\p{S}\p{L}])?)(\.)){1,}([a-zA-Z0-9\p{S}\p{L}])(-?[a-zA-Z0-9\p{S}\p{L}]){1,62})$",
    )
});
static HEXCOLOR: LazyLock<Option<Regex>> =
    LazyLock::new(|| lazy_regex(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$"));
static SSN: LazyLock<Option<Regex>> =
    LazyLock::new(|| lazy_regex(r"^[0-9]{3}[- ]?[0-9]{2}[- ]?[0-9]{4}$"));

/// Whether `text` satisfies a supported format (name without dashes). Formats the sandbox
/// does not check (isbn, creditcard, rgbcolor, duration, password) always pass.
fn format_valid(format: &str, text: &str) -> bool {
    match format {
        "datetime" => is_date_time(text),
        "date" => is_date(text),
        "byte" => is_base64(text),
        "uuid" => regex_matches(&UUID, text),
        "uuid3" => regex_matches(&UUID3, text),
        "uuid4" => regex_matches(&UUID4, text),
        "uuid5" => regex_matches(&UUID5, text),
        "email" => is_email(text),
        "hostname" => is_hostname(text),
        "ipv4" => text.contains('.') && text.parse::<std::net::IpAddr>().is_ok(),
        "ipv6" => text.contains(':') && text.parse::<std::net::IpAddr>().is_ok(),
        "cidr" => is_cidr(text),
        "mac" => is_mac(text),
        "uri" => is_request_uri(text),
        "hexcolor" => regex_matches(&HEXCOLOR, text),
        "ssn" => regex_matches(&SSN, text),
        "bsonobjectid" => text.len() == 24 && text.bytes().all(|b| b.is_ascii_hexdigit()),
        _ => true,
    }
}

/// strfmt's date-time: a full date, `t`, then `hh:mm:ss[.frac](z|±hh:mm)`, case-insensitive.
fn is_date_time(text: &str) -> bool {
    if text.len() < 4 {
        return false;
    }
    let lower = text.to_lowercase();
    let mut parts = lower.split('t');
    let (Some(date), Some(clock)) = (parts.next(), parts.next()) else {
        return false;
    };
    let Some(captures) = CLOCK.as_ref().and_then(|re| re.captures(clock)) else {
        return false;
    };
    is_date(date)
        && captures.get(1).is_some_and(|h| h.as_str() <= "23")
        && captures.get(2).is_some_and(|m| m.as_str() <= "59")
        && captures.get(3).is_some_and(|s| s.as_str() <= "59")
}

/// A calendar date `YYYY-MM-DD`, as Go's `time.Parse("2006-01-02", ...)` accepts it.
fn is_date(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| -> Option<u32> {
        let part = bytes.get(range)?;
        part.iter()
            .all(u8::is_ascii_digit)
            .then(|| part.iter().fold(0, |n, b| n * 10 + u32::from(b - b'0')))
    };
    if bytes.len() != 10 || bytes.get(4) != Some(&b'-') || bytes.get(7) != Some(&b'-') {
        return false;
    }
    let (Some(year), Some(month), Some(day)) = (digits(0..4), digits(5..7), digits(8..10)) else {
        return false;
    };
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

/// Standard padded base64, non-empty (govalidator's `IsBase64`).
fn is_base64(text: &str) -> bool {
    let bytes = text.as_bytes();
    let alphabet = |b: &u8| b.is_ascii_alphanumeric() || *b == b'+' || *b == b'/';
    if bytes.is_empty() || !bytes.len().is_multiple_of(4) {
        return false;
    }
    let (body, last) = bytes.split_at(bytes.len() - 4);
    body.iter().all(alphabet)
        && match last {
            [a, b, c, d] => {
                alphabet(a)
                    && alphabet(b)
                    && ((alphabet(c) && (alphabet(d) || *d == b'=')) || (*c == b'=' && *d == b'='))
            }
            _ => false,
        }
}

/// Loose RFC 5322 check: an optional `Name <addr>` wrapper around `local@domain`.
fn is_email(text: &str) -> bool {
    let address = match (text.rfind('<'), text.strip_suffix('>')) {
        (Some(start), Some(inner)) => inner.get(start + 1..).unwrap_or(""),
        _ => text,
    };
    match address.rsplit_once('@') {
        Some((local, domain)) => {
            !local.is_empty()
                && !domain.is_empty()
                && !address.chars().any(|c| c.is_whitespace() || c.is_control())
                && !domain.starts_with('.')
                && !domain.ends_with('.')
        }
        None => false,
    }
}

fn is_hostname(text: &str) -> bool {
    regex_matches(&HOSTNAME, text)
        && text.len() <= 255
        && text.split('.').all(|label| label.len() <= 63)
}

fn is_cidr(text: &str) -> bool {
    let Some((ip, bits)) = text.split_once('/') else {
        return false;
    };
    let Ok(ip) = ip.parse::<std::net::IpAddr>() else {
        return false;
    };
    let limit = if ip.is_ipv4() { 32 } else { 128 };
    !bits.is_empty()
        && bits.len() <= 3
        && bits.bytes().all(|b| b.is_ascii_digit())
        && bits.parse::<u32>().is_ok_and(|n| n <= limit)
}

/// Go's `net.ParseMAC`: 6, 8 or 20 octets as `xx:xx:...`/`xx-xx-...`, or groups `xxxx.xxxx...`.
fn is_mac(text: &str) -> bool {
    let hex_groups = |separator: char, width: usize, counts: [usize; 3]| {
        let groups: Vec<&str> = text.split(separator).collect();
        counts.contains(&groups.len())
            && groups
                .iter()
                .all(|g| g.len() == width && g.bytes().all(|b| b.is_ascii_hexdigit()))
    };
    hex_groups(':', 2, [6, 8, 20])
        || hex_groups('-', 2, [6, 8, 20])
        || hex_groups('.', 4, [3, 4, 10])
}

/// Loose `url.ParseRequestURI`: an absolute URI (`scheme:...`) or an absolute path.
fn is_request_uri(text: &str) -> bool {
    if text.is_empty() || text.chars().any(|c| c.is_ascii_control()) {
        return false;
    }
    if text.starts_with('/') {
        return true;
    }
    let Some((scheme, _)) = text.split_once(':') else {
        return false;
    };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
}

// ---------------------------------------------------------------------------------------------
// CRD schema checks
// ---------------------------------------------------------------------------------------------

/// Where a node sits, which decides what "type must not be empty" says.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
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
struct Scope {
    root: bool,
    /// Inside the schema of `apiVersion`, `kind` or `metadata` of a resource.
    inside_meta: bool,
    /// Why `default` may not be used here, if it may not.
    defaults_forbidden: Option<String>,
}

impl Scope {
    fn root() -> Self {
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

// ---------------------------------------------------------------------------------------------
// Go value printing
// ---------------------------------------------------------------------------------------------

/// A bad value as the API server's field errors print it: numbers and booleans bare, strings
/// quoted, null as `"null"`, objects and arrays in Go syntax.
fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "\"null\"".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(_) | Value::Object(_) => go_syntax(value),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`).
fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Array(list) => {
            let items: Vec<String> = list.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(key, _)| *key);
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_syntax(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
        scalar => go_value(scalar),
    }
}

/// Integers print as int64; anything else was a float64 in Go.
fn go_number(n: &Number) -> String {
    match Num::of(n) {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format_go_float(f),
    }
}

/// Formats a float the way Go's `%v` does (`strconv.FormatFloat(f, 'g', -1, 64)`): shortest
/// round-trip digits, in exponent form (`1e+06`, `1.5e-07`) when the decimal exponent is below
/// -4 or at least 6. Shared with the printer-column code, which prints numbers the same way.
pub(crate) fn format_go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let scientific = format!("{:e}", f.abs());
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return f.to_string();
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return f.to_string();
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    if exponent < 0 {
        let zeros = "0".repeat(exponent.unsigned_abs() as usize - 1);
        return format!("{sign}0.{zeros}{digits}");
    }
    let whole_len = exponent as usize + 1;
    if digits.len() <= whole_len {
        format!("{sign}{digits}{}", "0".repeat(whole_len - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(whole_len);
        format!("{sign}{whole}.{fraction}")
    }
}

/// go-openapi's `IsFloat64AJSONInteger`: integral within ±(2^53-1), or within a relative 1e-9
/// of the integer below a positive value.
fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_INT: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || f.abs() > MAX_JSON_INT {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    let whole = f.trunc();
    f > 0.0 && whole > 0.0 && (f - whole) / (f + whole) < 1e-9
}

/// Go's `strconv.Quote`: JSON-like, but control characters use `\a`, `\v`, `\x..` escapes and
/// invisible Unicode is escaped as `\u....`.
fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_go_printable(c) => {
                let _ = if (c as u32) < 0x10000 {
                    write!(out, "\\u{:04x}", c as u32)
                } else {
                    write!(out, "\\U{:08x}", c as u32)
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `unicode.IsPrint`: no controls, no spaces other than ' ', no invisible
/// formatting characters.
fn is_go_printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}'))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

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
        let mut obj =
            object(json!({"config": {"free": {"deep": 1}, "known": {"a": "x", "b": "y"}}}));
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
        assert_eq!(errors[0].kind, FieldErrorKind::Invalid);
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
        let properties =
            json!({"x": {"type": "string"}, "y": {"type": "string", "nullable": true}});
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
        let obj =
            json!({"apiVersion": "v1", "kind": "K", "metadata": {"name": "toolong", "uid": "x"}});
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
        let properties = json!({"name": {"type": "string", "minLength": 3, "maxLength": 5, "pattern": "^[a-z]+$"}});
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
            vec![
                r#"spec.l[1]: Invalid value: "x": must be an object for an array of list-type map"#
            ]
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
        let properties =
            json!({"v": {"type": "integer", "anyOf": [{"minimum": 10}, {"maximum": 1}]}});
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
                format!(
                    r#"{PREFIX}.properties[kind].type: Invalid value: "integer": must be string"#
                ),
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
}
