//! Walking objects: field sets, diffs and the apply merge, all driven by the same list shapes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::patch::strategic_merge::{ListStrategy, list_strategy};

use super::field_set::{FieldSet, field_element, join, key_element, value_element};

/// How a value is walked.
pub(super) enum Shape<'v> {
    /// Owned as a whole: scalars, nulls, empty maps, atomic lists.
    Leaf,
    Map(&'v Map<String, Value>),
    /// An associative list whose items all carry a unique `key`.
    Keyed(&'static str, &'v [Value]),
    /// A set of unique scalars.
    Set(&'v [Value]),
}

pub(super) struct Walker<'a> {
    pub(super) kind: &'a str,
}

/// Paths that changed between two objects (added or modified leaves and list items) and paths
/// that disappeared (every node of a removed subtree).
#[derive(Debug, Default)]
pub(super) struct Diff {
    pub(super) changed: FieldSet,
    pub(super) removed: FieldSet,
}

impl Walker<'_> {
    fn shape<'v>(&self, path: &str, value: &'v Value) -> Shape<'v> {
        match value {
            Value::Object(map) if !map.is_empty() => Shape::Map(map),
            Value::Array(items) => list_shape(list_strategy(self.kind, path), items),
            _ => Shape::Leaf,
        }
    }

    /// The field set of a whole object (its top level is always walked as a map).
    pub(super) fn root_set(&self, object: &Map<String, Value>) -> FieldSet {
        let mut set = FieldSet::default();
        self.insert_map("", object, &mut set);
        set
    }

    /// Adds the paths `value` sets to `node`, the node of `value` itself (SMD's `ToFieldSet`).
    fn insert_value(&self, path: &str, value: &Value, node: &mut FieldSet) {
        match self.shape(path, value) {
            Shape::Leaf => node.member = true,
            Shape::Map(map) => self.insert_map(path, map, node),
            Shape::Keyed(key, items) => {
                for item in items {
                    self.insert_item(path, item, node.child(key_element(key, item)));
                }
            }
            Shape::Set(items) => {
                for item in items {
                    node.child(value_element(item)).member = true;
                }
            }
        }
    }

    fn insert_map(&self, path: &str, map: &Map<String, Value>, node: &mut FieldSet) {
        for (field, value) in map {
            self.insert_value(&join(path, field), value, node.child(field_element(field)));
        }
    }

    /// A keyed list item is itself a member, as well as its fields.
    fn insert_item(&self, list_path: &str, item: &Value, node: &mut FieldSet) {
        node.member = true;
        if let Some(fields) = item.as_object() {
            self.insert_map(&format!("{list_path}[]"), fields, node);
        }
    }

    /// Every path of `value`, containers included.
    fn insert_all(&self, path: &str, value: &Value, node: &mut FieldSet) {
        self.insert_value(path, value, node);
        node.fill();
    }

    pub(super) fn diff_root(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> Diff {
        let mut diff = Diff::default();
        self.diff_maps("", old, new, &mut diff.changed, &mut diff.removed);
        diff.changed.prune();
        diff.removed.prune();
        diff
    }

    fn diff_value(
        &self,
        path: &str,
        old: Option<&Value>,
        new: Option<&Value>,
        changed: &mut FieldSet,
        removed: &mut FieldSet,
    ) {
        match (old, new) {
            (None, None) => {}
            (None, Some(new)) => self.insert_value(path, new, changed),
            (Some(old), None) => self.insert_all(path, old, removed),
            (Some(old), Some(new)) => self.diff_present(path, old, new, changed, removed),
        }
    }

    fn diff_present(
        &self,
        path: &str,
        old: &Value,
        new: &Value,
        changed: &mut FieldSet,
        removed: &mut FieldSet,
    ) {
        match (self.shape(path, old), self.shape(path, new)) {
            (Shape::Map(a), Shape::Map(b)) => self.diff_maps(path, a, b, changed, removed),
            (Shape::Keyed(key, a), Shape::Keyed(_, b)) => {
                self.diff_keyed(path, key, a, b, changed, removed)
            }
            (Shape::Set(a), Shape::Set(b)) => diff_sets(a, b, changed, removed),
            (Shape::Leaf, Shape::Leaf) => changed.member |= old != new,
            _ => {
                self.insert_all(path, old, removed);
                self.insert_value(path, new, changed);
            }
        }
    }

    fn diff_maps(
        &self,
        path: &str,
        old: &Map<String, Value>,
        new: &Map<String, Value>,
        changed: &mut FieldSet,
        removed: &mut FieldSet,
    ) {
        let fields: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        for field in fields {
            let element = field_element(field);
            self.diff_value(
                &join(path, field),
                old.get(field),
                new.get(field),
                changed.child(element.clone()),
                removed.child(element),
            );
        }
    }

    fn diff_keyed(
        &self,
        path: &str,
        key: &str,
        old: &[Value],
        new: &[Value],
        changed: &mut FieldSet,
        removed: &mut FieldSet,
    ) {
        let old = index_items(key, old);
        let new = index_items(key, new);
        let elements: BTreeSet<&String> = old.keys().chain(new.keys()).collect();
        let item_path = format!("{path}[]");
        for element in elements {
            let (changed, removed) = (
                changed.child(element.clone()),
                removed.child(element.clone()),
            );
            match (old.get(element), new.get(element)) {
                (None, Some(item)) => self.insert_item(path, item, changed),
                (Some(item), None) => self.insert_all(path, item, removed),
                (Some(before), Some(after)) => {
                    let empty = Map::new();
                    let before = before.as_object().unwrap_or(&empty);
                    let after = after.as_object().unwrap_or(&empty);
                    self.diff_maps(&item_path, before, after, changed, removed);
                }
                (None, None) => {}
            }
        }
    }

    /// SMD's merge of an applied value into a live one; `None` means "remove the field".
    fn merge_value(&self, path: &str, live: Option<&Value>, applied: &Value) -> Option<Value> {
        match applied {
            Value::Null => None,
            Value::Object(fields) => Some(Value::Object(self.merge_map(
                path,
                live.and_then(Value::as_object),
                fields,
            ))),
            Value::Array(items) => Some(Value::Array(self.merge_list(
                path,
                live.and_then(Value::as_array),
                items,
            ))),
            scalar => Some(scalar.clone()),
        }
    }

    pub(super) fn merge_map(
        &self,
        path: &str,
        live: Option<&Map<String, Value>>,
        applied: &Map<String, Value>,
    ) -> Map<String, Value> {
        let mut out = live.cloned().unwrap_or_default();
        for (field, value) in applied {
            match self.merge_value(&join(path, field), out.get(field), value) {
                Some(merged) => {
                    out.insert(field.clone(), merged);
                }
                None => {
                    out.remove(field);
                }
            }
        }
        out
    }

    /// Keyed lists and sets merge itemwise (an empty one keeps every live item, as in SMD);
    /// atomic lists are replaced.
    fn merge_list(&self, path: &str, live: Option<&Vec<Value>>, items: &[Value]) -> Vec<Value> {
        let live = live.map_or(&[][..], Vec::as_slice);
        let item_path = format!("{path}[]");
        match list_shape(list_strategy(self.kind, path), items) {
            Shape::Keyed(key, _) => self.interleave(&item_path, live, items, |item| {
                item.get(key).map(|_| key_element(key, item))
            }),
            Shape::Set(_) => {
                self.interleave(&item_path, live, items, |item| Some(value_element(item)))
            }
            Shape::Leaf | Shape::Map(_) => items.to_vec(),
        }
    }

    /// SMD's `visitListItems` merge: live-only items stay where they are, applied items keep
    /// the applied order, and matching items merge.
    pub(super) fn interleave(
        &self,
        item_path: &str,
        lhs: &[Value],
        rhs: &[Value],
        id: impl Fn(&Value) -> Option<String>,
    ) -> Vec<Value> {
        let lhs_ids: Vec<Option<String>> = lhs.iter().map(&id).collect();
        let rhs_ids: Vec<Option<String>> = rhs.iter().map(&id).collect();
        let lhs_index = first_positions(&lhs_ids);
        let rhs_index = first_positions(&rhs_ids);
        let mut shared = rhs_ids
            .iter()
            .flatten()
            .filter(|id| lhs_index.contains_key(id.as_str()));
        let mut next_shared = shared.next();
        let mut merged_rhs = BTreeSet::new();
        let mut out = Vec::with_capacity(lhs.len() + rhs.len());
        let live_item = |id: Option<&String>| {
            id.and_then(|id| lhs_index.get(id.as_str()))
                .and_then(|&i| lhs.get(i))
        };
        let (mut li, mut ri) = (0, 0);
        while li < lhs.len() || ri < rhs.len() {
            let l_id = lhs_ids.get(li).and_then(Option::as_ref);
            let r_id = rhs_ids.get(ri).and_then(Option::as_ref);
            if li < lhs.len() && ri < rhs.len() {
                if let (Some(l), Some(applied)) = (l_id.filter(|l| Some(*l) == r_id), rhs.get(ri)) {
                    out.extend(self.merge_value(item_path, lhs.get(li), applied));
                    merged_rhs.insert(l.clone());
                    (li, ri) = (li + 1, ri + 1);
                    next_shared = shared.next();
                    continue;
                }
                let wanted_later = next_shared.is_some_and(|next| Some(next) != l_id);
                if l_id.is_some_and(|l| rhs_index.contains_key(l.as_str())) && wanted_later {
                    li += 1;
                    continue;
                }
            }
            if let Some(item) = lhs.get(li) {
                match l_id.filter(|l| rhs_index.contains_key(l.as_str())) {
                    None => {
                        out.push(item.clone());
                        li += 1;
                        continue;
                    }
                    Some(l) if merged_rhs.contains(l) => {
                        li += 1;
                        continue;
                    }
                    Some(_) => {}
                }
            }
            let Some(applied) = rhs.get(ri) else {
                li += 1; // unreachable for well-formed ids; guarantees progress regardless
                continue;
            };
            out.extend(self.merge_value(item_path, live_item(r_id), applied));
            merged_rhs.extend(r_id.cloned());
            ri += 1;
            if next_shared.is_some() && next_shared == r_id {
                next_shared = shared.next();
            }
        }
        out
    }
}

/// The shape of a non-empty list under `strategy`; misfits are atomic.
fn list_shape(strategy: ListStrategy, items: &[Value]) -> Shape<'_> {
    match strategy {
        ListStrategy::MergeByKey(key)
            if unique_ids(items, |item| {
                item.get(key)
                    .filter(|v| is_scalar(v))
                    .map(|_| key_element(key, item))
            }) =>
        {
            Shape::Keyed(key, items)
        }
        ListStrategy::MergePrimitives
            if unique_ids(items, |item| is_scalar(item).then(|| value_element(item))) =>
        {
            Shape::Set(items)
        }
        _ => Shape::Leaf,
    }
}

/// Every item has an id and no two ids are equal.
fn unique_ids(items: &[Value], id: impl Fn(&Value) -> Option<String>) -> bool {
    let mut seen = BTreeSet::new();
    items
        .iter()
        .all(|item| id(item).is_some_and(|id| seen.insert(id)))
}

fn is_scalar(value: &Value) -> bool {
    !value.is_object() && !value.is_array()
}

fn index_items<'v>(key: &str, items: &'v [Value]) -> BTreeMap<String, &'v Value> {
    items
        .iter()
        .map(|item| (key_element(key, item), item))
        .collect()
}

fn first_positions(ids: &[Option<String>]) -> BTreeMap<&str, usize> {
    let mut positions = BTreeMap::new();
    for (i, id) in ids.iter().enumerate() {
        if let Some(id) = id {
            positions.entry(id.as_str()).or_insert(i);
        }
    }
    positions
}

fn diff_sets(old: &[Value], new: &[Value], changed: &mut FieldSet, removed: &mut FieldSet) {
    for item in new.iter().filter(|item| !old.contains(item)) {
        changed.child(value_element(item)).member = true;
    }
    for item in old.iter().filter(|item| !new.contains(item)) {
        removed.child(value_element(item)).member = true;
    }
}
