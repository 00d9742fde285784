//! Field sets in the `fieldsV1` trie shape, and how their paths print.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// A set of field paths in the `fieldsV1` trie shape. Invariant: no empty child nodes.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct FieldSet {
    /// The path ending here is in the set (a leaf `{}`, or `"."` when it has children).
    pub(super) member: bool,
    /// Keyed by encoded path element: `f:name`, `k:{"name":"c"}`, `v:"x"`.
    pub(super) children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    pub(super) fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    pub(super) fn child(&mut self, element: String) -> &mut FieldSet {
        self.children.entry(element).or_default()
    }

    /// Restores the invariant after walkers created nodes that stayed empty.
    pub(super) fn prune(&mut self) {
        self.children.values_mut().for_each(FieldSet::prune);
        self.children.retain(|_, child| !child.is_empty());
    }

    /// Marks every node as a member: a removed subtree removes each of its paths.
    pub(super) fn fill(&mut self) {
        self.member = true;
        self.children.values_mut().for_each(FieldSet::fill);
    }

    pub(super) fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, theirs) in &other.children {
            self.child(element.clone()).union(theirs);
        }
    }

    pub(super) fn subtract(&mut self, other: &FieldSet) {
        self.member &= !other.member;
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                mine.subtract(theirs);
            }
        }
        self.children.retain(|_, child| !child.is_empty());
    }

    pub(super) fn intersection(&self, other: &FieldSet) -> FieldSet {
        let children = self
            .children
            .iter()
            .filter_map(|(element, mine)| {
                let both = mine.intersection(other.children.get(element)?);
                (!both.is_empty()).then(|| (element.clone(), both))
            })
            .collect();
        FieldSet {
            member: self.member && other.member,
            children,
        }
    }

    /// Member paths in SMD's iteration order: a node's members, then its children's subtrees.
    pub(super) fn paths(&self) -> Vec<Vec<&str>> {
        let mut out = Vec::new();
        self.collect_paths(&mut Vec::new(), &mut out);
        out
    }

    fn collect_paths<'s>(&'s self, prefix: &mut Vec<&'s str>, out: &mut Vec<Vec<&'s str>>) {
        for (element, child) in &self.children {
            if child.member {
                let mut path = prefix.clone();
                path.push(element);
                out.push(path);
            }
        }
        for (element, child) in &self.children {
            prefix.push(element);
            child.collect_paths(prefix, out);
            prefix.pop();
        }
    }

    /// Reads a `fieldsV1` object, skipping anything malformed.
    pub(super) fn from_fields_v1(value: &Value) -> FieldSet {
        let mut set = FieldSet::default();
        let Some(map) = value.as_object() else {
            return set;
        };
        for (element, child) in map {
            if element == "." {
                set.member = true;
            } else if is_path_element(element) && child.is_object() {
                let mut node = FieldSet::from_fields_v1(child);
                node.member |= child.as_object().is_some_and(Map::is_empty);
                if !node.is_empty() {
                    set.children.insert(element.clone(), node);
                }
            }
        }
        set
    }

    pub(super) fn to_fields_v1(&self) -> Value {
        let mut map = Map::new();
        if self.member && !self.children.is_empty() {
            map.insert(".".to_owned(), Value::Object(Map::new()));
        }
        for (element, child) in &self.children {
            map.insert(element.clone(), child.to_fields_v1());
        }
        Value::Object(map)
    }
}

fn is_path_element(element: &str) -> bool {
    ["f:", "k:", "v:", "i:"]
        .iter()
        .any(|prefix| element.starts_with(prefix))
}

pub(super) fn field_element(name: &str) -> String {
    format!("f:{name}")
}

/// `k:{"<key>":<value>}` for an item of a list merged by `key`.
pub(super) fn key_element(key: &str, item: &Value) -> String {
    let mut fields = Map::new();
    fields.insert(
        key.to_owned(),
        item.get(key).cloned().unwrap_or(Value::Null),
    );
    format!("k:{}", Value::Object(fields))
}

pub(super) fn value_element(item: &Value) -> String {
    format!("v:{item}")
}

/// A path as the server prints it in conflicts: `.spec.containers[name="c"].image`.
pub(super) fn display_path(path: &[&str]) -> String {
    path.iter()
        .map(|element| display_element(element))
        .collect()
}

/// `fieldpath.PathElement.String()`.
fn display_element(element: &str) -> String {
    let parse = |json: &str| serde_json::from_str::<Value>(json).ok();
    if let Some(name) = element.strip_prefix("f:") {
        format!(".{name}")
    } else if let Some(Value::Object(keys)) = element.strip_prefix("k:").and_then(parse) {
        let keys: Vec<String> = keys
            .iter()
            .map(|(k, v)| format!("{k}={}", display_value(v)))
            .collect();
        format!("[{}]", keys.join(","))
    } else if let Some(value) = element.strip_prefix("v:").and_then(parse) {
        format!("[={}]", display_value(&value))
    } else if let Some(index) = element.strip_prefix("i:") {
        format!("[{index}]")
    } else {
        "{{invalid path element}}".to_owned()
    }
}

/// `value.ToString`: strings quoted, everything else as JSON text.
fn display_value(value: &Value) -> String {
    value.to_string()
}

pub(super) fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

pub(super) fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}
