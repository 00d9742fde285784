//! A JSON value as the CEL value kube-apiserver binds to `self`: integers are `int`, `number`s are
//! `double` even when whole, objects with properties expose their fields under their escaped CEL
//! names, and a resource's root shows only `apiVersion`, `kind` and `metadata.name` /
//! `metadata.generateName`.

use std::collections::HashMap;
use std::sync::Arc;

use cel::objects::{Key, Map};
use serde_json::Value as Json;

use super::super::node::Node;
use super::types::{Root, embedded, escape};

pub(super) fn to_cel(node: Option<Node>, root: Root, json: &Json) -> cel::Value {
    match json {
        Json::Null => cel::Value::Null,
        Json::Bool(b) => cel::Value::Bool(*b),
        Json::Number(n) => {
            let double = node.is_some_and(|n| n.type_name() == "number");
            match n.as_i64() {
                Some(i) if !double => cel::Value::Int(i),
                _ => match n.as_u64() {
                    Some(u) if !double => cel::Value::UInt(u),
                    _ => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
                },
            }
        }
        Json::String(s) => cel::Value::String(Arc::new(s.clone())),
        Json::Array(items) => {
            let items_node = node.and_then(Node::items);
            let root = items_node.map_or(Root::Plain, embedded);
            let list = items.iter().map(|v| to_cel(items_node, root, v)).collect();
            cel::Value::List(Arc::new(list))
        }
        Json::Object(map) => {
            let mut out: HashMap<Key, cel::Value> = HashMap::with_capacity(map.len());
            let has_properties = node.is_some_and(Node::has_properties);
            for (key, value) in map {
                if root == Root::Resource && key == "metadata" {
                    out.insert(Key::String(Arc::new(key.clone())), root_metadata(value));
                    continue;
                }
                let (name, child) = match node {
                    Some(n) if has_properties || root == Root::Resource => {
                        let Some(name) = escape(key) else { continue };
                        (name, n.property(key))
                    }
                    Some(n) => (key.clone(), n.additional_schema()),
                    None => (key.clone(), None),
                };
                let child_root = child.map_or(Root::Plain, embedded);
                out.insert(
                    Key::String(Arc::new(name)),
                    to_cel(child, child_root, value),
                );
            }
            cel::Value::Map(Map { map: Arc::new(out) })
        }
    }
}

/// What a resource root's `metadata` shows to a rule: its name and generateName, nothing else.
fn root_metadata(json: &Json) -> cel::Value {
    let mut out: HashMap<Key, cel::Value> = HashMap::new();
    for key in ["name", "generateName"] {
        if let Some(Json::String(s)) = json.get(key) {
            out.insert(
                Key::String(Arc::new(key.to_owned())),
                cel::Value::String(Arc::new(s.clone())),
            );
        }
    }
    cel::Value::Map(Map { map: Arc::new(out) })
}
