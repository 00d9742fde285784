//! Pruning the fields an applier stopped applying.

use serde_json::{Map, Value};

use super::field_set::FieldSet;

/// Removes from `map` the paths in `dropped` that nobody in `claimed` owns (at or below them);
/// `protected` fields (the key of the enclosing list item) always stay.
pub(super) fn prune_map(
    map: &mut Map<String, Value>,
    dropped: &FieldSet,
    claimed: Option<&FieldSet>,
    protected: &[String],
) {
    for (element, gone) in &dropped.children {
        let Some(field) = element.strip_prefix("f:") else {
            continue;
        };
        if protected.iter().any(|p| p == field) {
            continue;
        }
        let claim = claimed.and_then(|c| c.children.get(element));
        if map
            .get_mut(field)
            .is_some_and(|child| prune_child(child, gone, claim, &[]))
        {
            map.remove(field);
        }
    }
}

fn prune_list(items: &mut Vec<Value>, dropped: &FieldSet, claimed: Option<&FieldSet>) {
    let mut doomed = Vec::new();
    for (element, gone) in &dropped.children {
        let Some(index) = find_item(items, element) else {
            continue;
        };
        let claim = claimed.and_then(|c| c.children.get(element));
        let protected = key_fields(element);
        if items
            .get_mut(index)
            .is_some_and(|item| prune_child(item, gone, claim, &protected))
        {
            doomed.push(index);
        }
    }
    doomed.sort_unstable();
    doomed.dedup();
    for index in doomed.into_iter().rev() {
        if index < items.len() {
            items.remove(index);
        }
    }
}

/// Prunes inside `child`; true when `child` itself should go: it was dropped and is unclaimed,
/// or pruning emptied it and nobody owns it as such.
fn prune_child(
    child: &mut Value,
    gone: &FieldSet,
    claim: Option<&FieldSet>,
    protected: &[String],
) -> bool {
    if gone.member && claim.is_none() {
        return true;
    }
    let was_empty = is_empty_container(child);
    match child {
        Value::Object(map) => prune_map(map, gone, claim, protected),
        Value::Array(items) => prune_list(items, gone, claim),
        _ => {}
    }
    !was_empty && is_empty_container(child) && !claim.is_some_and(|c| c.member)
}

fn is_empty_container(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.is_empty(),
        Value::Array(items) => items.is_empty(),
        _ => false,
    }
}

/// The list item a `k:` or `v:` element names.
fn find_item(items: &[Value], element: &str) -> Option<usize> {
    let parse = |json: &str| serde_json::from_str::<Value>(json).ok();
    if let Some(Value::Object(keys)) = element.strip_prefix("k:").and_then(parse) {
        items
            .iter()
            .position(|item| keys.iter().all(|(k, v)| item.get(k) == Some(v)))
    } else {
        let value = element.strip_prefix("v:").and_then(parse)?;
        items.iter().position(|item| *item == value)
    }
}

fn key_fields(element: &str) -> Vec<String> {
    let keys = element
        .strip_prefix("k:")
        .and_then(|json| serde_json::from_str::<Map<String, Value>>(json).ok());
    keys.map(|keys| keys.keys().cloned().collect())
        .unwrap_or_default()
}
