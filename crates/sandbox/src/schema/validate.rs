//! Value validation of custom resources, as `k8s.io/kube-openapi` does it, with its wording.

use std::collections::HashMap;

use regex::Regex;
use serde_json::{Map, Value};

use crate::field_error::{FieldError, FieldErrorKind, child_path, index_path};

use super::formats::{compile_pattern, format_valid};
use super::go_fmt::{Num, format_go_float, go_quote, go_value, is_json_integer};
use super::node::{Additional, Node};

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

pub(super) struct Validator<'p> {
    /// The path errors hang under: `None` for a custom resource (the server's nil path), the
    /// `...default` path when validating a schema default.
    pub(super) root: Option<&'p str>,
    /// Compiled `pattern`s, so a long list of strings compiles each pattern once.
    pub(super) patterns: HashMap<String, Result<Regex, String>>,
}

impl<'p> Validator<'p> {
    pub(super) fn new(root: Option<&'p str>) -> Self {
        Self {
            root,
            patterns: HashMap::new(),
        }
    }

    /// The field of an error found at `path` (kube-openapi's name, `.`-trimmed, under the root).
    pub(super) fn field(&self, path: &str) -> String {
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
        FieldError::type_invalid(self.field(path), &Value::from(actual), &detail)
    }

    /// anyOf/oneOf/allOf/not summaries, which the server reports at the root path with "".
    fn composite(&self, detail: &str) -> FieldError {
        self.invalid("", &Value::from(""), detail)
    }

    /// Validates one value, running kube-openapi's validators in its order: type, combinators,
    /// string, format, number, array, enum, object.
    pub(super) fn node(&mut self, schema: Node, x: &Value, path: &str, out: &mut Vec<FieldError>) {
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
    pub(super) fn embedded_resources(
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
pub(super) enum Side {
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

pub(super) fn invalid(field: String, value: &Value, detail: &str) -> FieldError {
    FieldError {
        kind: FieldErrorKind::Invalid,
        field,
        message: format!("Invalid value: {}: {detail}", go_value(value)),
    }
}

pub(super) fn not_supported(field: String, value: &Value, supported: &[String]) -> FieldError {
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

pub(super) fn duplicate(field: String, value: &Value) -> FieldError {
    FieldError {
        kind: FieldErrorKind::Duplicate,
        field,
        message: format!("Duplicate value: {}", go_value(value)),
    }
}
