//! Defaulting: filling in the `default` values a schema declares.

use serde_json::{Map, Value};

use super::node::Node;

/// Applies `default` values from the schema, top-down: a missing property (or a null one whose
/// schema is not nullable) gets its default, and the result is then defaulted itself. Array
/// items and `additionalProperties` values are defaulted too. Call after [`prune`].
pub fn apply_defaults(schema: &Value, obj: &mut Value) {
    default_value(obj, Node(schema));
}

pub(super) fn default_value(x: &mut Value, schema: Node) {
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
