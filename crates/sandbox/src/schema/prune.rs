//! Pruning: removing the fields a schema does not declare.

use serde_json::{Map, Value};

use crate::field_error::{child_path, index_path};

use super::node::{Additional, META_FIELDS, Node};

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

#[derive(Default)]
pub(super) struct Pruner {
    pub(super) removed: Vec<String>,
}

impl Pruner {
    /// Prunes `x` against `schema` (`None`: nothing below is declared). `resource_root` marks the
    /// top of a resource, whose type meta is kept and whose stray meta fields go unreported.
    pub(super) fn value(
        &mut self,
        x: &mut Value,
        schema: Option<Node>,
        path: &str,
        resource_root: bool,
    ) {
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
