//! Reading a schema: one JSONSchemaProps node, whose malformed keywords read as absent, and
//! the constants every part of the schema code shares.

use serde_json::{Map, Value};

use crate::field_error::child_path;

/// Fields every resource (the root and embedded resources) carries besides its schema.
pub(super) const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

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

/// One JSONSchemaProps node. Malformed keywords read as absent.
#[derive(Clone, Copy, Debug)]
pub(super) struct Node<'a>(pub(super) &'a Value);

/// `additionalProperties`: absent, a bare boolean, or a schema for every undeclared key.
#[derive(Clone, Copy)]
pub(super) enum Additional<'a> {
    Absent,
    Allows(bool),
    Schema(Node<'a>),
}

impl<'a> Node<'a> {
    pub(super) fn get(self, key: &str) -> Option<&'a Value> {
        self.0.get(key)
    }

    pub(super) fn flag(self, key: &str) -> bool {
        self.get(key).and_then(Value::as_bool).unwrap_or(false)
    }

    pub(super) fn text(self, key: &str) -> &'a str {
        self.get(key).and_then(Value::as_str).unwrap_or("")
    }

    pub(super) fn type_name(self) -> &'a str {
        self.text("type")
    }

    pub(super) fn nullable(self) -> bool {
        self.flag("nullable")
    }

    pub(super) fn preserves_unknown(self) -> bool {
        self.flag("x-kubernetes-preserve-unknown-fields")
    }

    pub(super) fn embedded(self) -> bool {
        self.flag("x-kubernetes-embedded-resource")
    }

    pub(super) fn int_or_string(self) -> bool {
        self.flag("x-kubernetes-int-or-string")
    }

    /// `default`, unless absent or null: the server cannot tell a null default from none.
    pub(super) fn default_value(self) -> Option<&'a Value> {
        self.get("default").filter(|d| !d.is_null())
    }

    pub(super) fn properties(self) -> Option<&'a Map<String, Value>> {
        self.get("properties").and_then(Value::as_object)
    }

    pub(super) fn property(self, key: &str) -> Option<Node<'a>> {
        self.properties()?
            .get(key)
            .filter(|p| p.is_object())
            .map(Node)
    }

    pub(super) fn property_nodes(self) -> impl Iterator<Item = (&'a String, Node<'a>)> {
        self.properties()
            .into_iter()
            .flatten()
            .filter(|(_, p)| p.is_object())
            .map(|(k, p)| (k, Node(p)))
    }

    pub(super) fn has_properties(self) -> bool {
        self.properties().is_some_and(|p| !p.is_empty())
    }

    pub(super) fn items(self) -> Option<Node<'a>> {
        self.get("items").filter(|i| i.is_object()).map(Node)
    }

    pub(super) fn additional(self) -> Additional<'a> {
        match self.get("additionalProperties") {
            Some(Value::Bool(allows)) => Additional::Allows(*allows),
            Some(schema @ Value::Object(_)) => Additional::Schema(Node(schema)),
            _ => Additional::Absent,
        }
    }

    pub(super) fn additional_schema(self) -> Option<Node<'a>> {
        match self.additional() {
            Additional::Schema(schema) => Some(schema),
            _ => None,
        }
    }

    /// The schemas of `allOf`/`anyOf`/`oneOf`, with their index in the list.
    pub(super) fn alternatives(self, key: &str) -> impl Iterator<Item = (usize, Node<'a>)> {
        self.get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
            .filter(|(_, s)| s.is_object())
            .map(|(i, s)| (i, Node(s)))
    }

    pub(super) fn not(self) -> Option<Node<'a>> {
        self.get("not").filter(|n| n.is_object()).map(Node)
    }

    /// A non-negative integer keyword such as `maxLength`.
    pub(super) fn count(self, key: &str) -> Option<u64> {
        let value = self.get(key)?;
        value.as_u64().or_else(|| {
            value
                .as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        })
    }

    pub(super) fn number(self, key: &str) -> Option<f64> {
        self.get(key).and_then(Value::as_f64)
    }

    /// The accepted JSON types; int-or-string means "integer or string" whatever `type` says.
    pub(super) fn types(self) -> Vec<&'a str> {
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
    pub(super) fn format(self) -> Option<&'a str> {
        let format = self.text("format");
        let normalized = format.replace('-', "");
        SUPPORTED_FORMATS
            .contains(&normalized.as_str())
            .then_some(format)
    }

    pub(super) fn list_type(self) -> Option<&'a str> {
        self.get("x-kubernetes-list-type").and_then(Value::as_str)
    }

    pub(super) fn list_map_keys(self) -> Vec<&'a str> {
        self.get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect()
    }
}

/// `<path>.<name>[<key>]`, the way field paths print map keys of a schema (`properties[spec]`).
pub(super) fn key_path(path: &str, name: &str, key: &str) -> String {
    format!("{}[{key}]", child_path(path, name))
}
