//! Server-side apply (SSA) and field ownership (`metadata.managedFields`).
//!
//! A faithful-but-simplified port of the API server's field manager and
//! `sigs.k8s.io/structured-merge-diff`:
//!
//! * **Field sets** use the real `fieldsV1` trie: `f:<field>` for map fields, `k:{"<key>":…}` for
//!   items of lists merged by key, `v:<json>` for items of sets, `"."` when a node is itself
//!   owned and also has owned children. A set holds leaves (scalars, nulls, empty maps, atomic
//!   lists) and list items; non-empty maps are never owned themselves, which is what SMD does for
//!   struct fields, and empty keyed lists or sets aren't owned either, as in SMD. Apply entries
//!   therefore look like the real ones; Update entries lack the `"."` that upstream adds to maps
//!   created by the update, and structs the schema marks atomic (e.g. `spec.selector`) are
//!   tracked field by field.
//! * **List semantics** come from [`list_strategy`]: `MergeByKey` lists are associative,
//!   `MergePrimitives` lists are sets, everything else (including every list of a custom
//!   resource, since there is no schema) is atomic. A list whose items don't fit its strategy
//!   (missing or duplicate keys, non-scalar set items) is treated as atomic instead of rejected.
//! * **Apply** merges the applied object into the live one (maps recursively, keyed lists and sets
//!   itemwise with SMD's ordering, atomic lists replaced, `null` removes the field), prunes fields
//!   the manager applied last time but no longer applies unless another manager owns them (or
//!   something below them), reports conflicts — fields changed by this apply that another manager
//!   owns — and, with `force`, takes those fields over.
//! * **Update** (create/update/patch) gives the writer every leaf it added or changed and takes
//!   those fields, and removed ones, away from everybody else.
//! * Managers are identified like upstream: manager name, operation, subresource, and (for
//!   Update only) apiVersion. Entries with empty sets are dropped; entries are sorted like
//!   upstream (operation, time, manager, apiVersion, subresource). When neither the object nor any
//!   field set changed, the previous `managedFields` are kept verbatim, timestamps included.
//! * `apiVersion`, `kind`, `metadata.name`/`namespace` and server-managed metadata (`uid`,
//!   `resourceVersion`, `generation`, `creationTimestamp`, `deletionTimestamp`,
//!   `deletionGracePeriodSeconds`, `selfLink`, `managedFields`) are never owned; the
//!   server-managed ones are also never taken from an apply body.
//!
//! Simplifications (besides the missing schemas): keyed lists use a single key (upstream keys
//! container ports and Service ports by port *and* protocol); field sets aren't converted between
//! API versions; Update entries aren't capped at 10 / merged into `ancient-changes`; malformed
//! stored entries are skipped one by one (upstream discards the whole list); the caller
//! must drop fields the endpoint may not change (`status` on the main resource, everything but
//! `status` on `/status`) from the applied object and reject `metadata.managedFields` in apply
//! bodies, as the real server's reset strategies and validation do.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::patch::strategic_merge::{ListStrategy, list_strategy};

/// One server-side apply request.
pub struct ApplyRequest<'a> {
    /// Object kind, for [`list_strategy`] (unknown kinds have atomic lists).
    pub kind: &'a str,
    /// The request's `apiVersion`, recorded in the applier's managedFields entry.
    pub api_version: &'a str,
    /// The `fieldManager` query parameter (required for apply; the caller validates it).
    pub manager: &'a str,
    /// `force=true`: take over conflicting fields instead of failing.
    pub force: bool,
    /// RFC 3339 timestamp to stamp in `managedFields[].time`.
    pub now: &'a str,
    /// `Some("status")` when applying to `/status`.
    pub subresource: Option<&'a str>,
}

/// A field the applier would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owning manager's name.
    pub manager: String,
    /// The field as the server prints it: `.spec.replicas`, `.data.key`,
    /// `.spec.containers[name="c"].image`, `.metadata.finalizers[="f"]`.
    pub field: String,
    /// `Some(apiVersion)` when the owner's entry is an `Update` (the server then says
    /// `using <apiVersion>`); `None` when it is an `Apply`.
    pub updated_with: Option<String>,
    /// The owner entry's subresource, e.g. `status`.
    pub subresource: Option<String>,
}

impl Conflict {
    /// The message of this conflict's Status cause (reason `FieldManagerConflict`, field
    /// [`Conflict::field`]), e.g. `conflict with "kubectl" using apps/v1`.
    /// `api_version` stands in for an owner entry that recorded no apiVersion.
    pub fn cause_message(&self, api_version: &str) -> String {
        format!("conflict with {}", self.owner(api_version))
    }

    /// `printManager`: `"m"`, `"m" with subresource "status"`, `"m" using v1`.
    fn owner(&self, fallback_api_version: &str) -> String {
        let mut owner = quote(&self.manager);
        if let Some(subresource) = &self.subresource {
            owner = format!("{owner} with subresource {}", quote(subresource));
        }
        match self.updated_with.as_deref() {
            Some("") => format!("{owner} using {fallback_api_version}"),
            Some(api_version) => format!("{owner} using {api_version}"),
            None => owner,
        }
    }

    /// The owner's identifier as upstream serializes it; conflict messages group by it, sorted.
    fn owner_identifier(&self) -> String {
        let operation = if self.updated_with.is_some() {
            "Update"
        } else {
            "Apply"
        };
        let mut id = format!(
            "{{\"manager\":{},\"operation\":\"{operation}\"",
            quote(&self.manager)
        );
        if let Some(api_version) = self.updated_with.as_deref().filter(|v| !v.is_empty()) {
            id.push_str(&format!(",\"apiVersion\":{}", quote(api_version)));
        }
        if let Some(subresource) = &self.subresource {
            id.push_str(&format!(",\"subresource\":{}", quote(subresource)));
        }
        id.push('}');
        id
    }
}

/// Server-side apply of `applied` (the user's partial object) onto `live` (None when the object
/// doesn't exist yet). Returns the new full object with `metadata.managedFields` updated, or the
/// conflicts (sorted by owner, then field) when `force` is off.
///
/// The applier's field set is the leaves and list items of `applied`, minus the never-owned
/// fields listed in the module docs; `metadata.labels`/`annotations` entries are owned one by one.
/// Equal values are shared ownership, not conflicts.
pub fn server_side_apply(
    live: Option<&Value>,
    applied: &Value,
    req: &ApplyRequest,
) -> Result<Value, Vec<Conflict>> {
    let walker = Walker { kind: req.kind };
    let live = live.and_then(Value::as_object);
    let mut entries = live.map(read_entries).unwrap_or_default();
    let applied = without_server_metadata(applied.as_object().cloned().unwrap_or_default());
    let me = Identity {
        manager: req.manager.to_owned(),
        operation: Operation::Apply,
        api_version: req.api_version.to_owned(),
        subresource: req.subresource.map(str::to_owned),
    };
    let applied_set = walker.root_set(&owned_view(&applied));

    let mut merged = walker.merge_map("", live, &applied);
    let mut dropped = entries
        .iter()
        .find(|e| e.id.same_owner(&me))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    dropped.subtract(&applied_set);
    let mut claimed = applied_set.clone();
    entries
        .iter()
        .filter(|e| !e.id.same_owner(&me))
        .for_each(|e| claimed.union(&e.set));
    prune_map(&mut merged, &dropped, Some(&claimed), &[]);

    let empty = Map::new();
    let diff = walker.diff_root(&owned_view(live.unwrap_or(&empty)), &owned_view(&merged));
    let conflicts = find_conflicts(&entries, &me, &diff.changed);
    if !conflicts.is_empty() && !req.force {
        return Err(conflicts);
    }
    disown_others(&mut entries, &me, &diff);
    upsert(&mut entries, me, applied_set, req.now);
    store_entries(live, &mut merged, entries);
    Ok(Value::Object(merged))
}

/// For writes that aren't apply (create/update/patch): `manager` (operation Update) takes every
/// leaf whose value differs between `old` (None on create) and `new`, and other managers lose
/// those fields and any removed ones. Updates `new`'s `metadata.managedFields`, stamping `now`.
///
/// Like upstream, a `managedFields` list the client sent in `new` replaces the stored one when it
/// decodes cleanly, and `[]` (or `[{}]`) resets it; on subresources the stored one always wins.
/// The kind (for list strategies) is read from `new`.
pub fn record_update(
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    api_version: &str,
    now: &str,
    subresource: Option<&str>,
) {
    let Some(new) = new.as_object_mut() else {
        return;
    };
    let old = old.and_then(Value::as_object);
    let mut entries = starting_entries(old, new, subresource);
    let kind = new.get("kind").and_then(Value::as_str).unwrap_or_default();
    let walker = Walker { kind };
    let empty = Map::new();
    let diff = walker.diff_root(&owned_view(old.unwrap_or(&empty)), &owned_view(new));
    let me = Identity {
        manager: manager.to_owned(),
        operation: Operation::Update,
        api_version: api_version.to_owned(),
        subresource: subresource.map(str::to_owned),
    };
    let mut set = entries
        .iter()
        .find(|e| e.id.same_owner(&me))
        .map(|e| e.set.clone())
        .unwrap_or_default();
    set.subtract(&diff.removed);
    set.union(&diff.changed);
    disown_others(&mut entries, &me, &diff);
    upsert(&mut entries, me, set, now);
    store_entries(old, new, entries);
}

/// The 409 message, worded like kube-apiserver's:
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key`, or
/// `Apply failed with 2 conflicts: conflicts with "m" using v1:\n- .spec.a\n- .spec.b`.
/// `api_version` stands in for owner entries that recorded no apiVersion.
pub fn conflict_message(conflicts: &[Conflict], api_version: &str) -> String {
    if let [only] = conflicts {
        let cause = only.cause_message(api_version);
        return format!("Apply failed with 1 conflict: {cause}: {}", only.field);
    }
    let mut by_owner: BTreeMap<String, (String, Vec<&str>)> = BTreeMap::new();
    for conflict in conflicts {
        by_owner
            .entry(conflict.owner_identifier())
            .or_insert_with(|| (conflict.owner(api_version), Vec::new()))
            .1
            .push(&conflict.field);
    }
    let mut lines = Vec::new();
    for (owner, fields) in by_owner.values() {
        lines.push(format!("conflicts with {owner}:"));
        lines.extend(fields.iter().map(|field| format!("- {field}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}

// ---------------------------------------------------------------------------------------------
// Field sets.

/// A set of field paths in the `fieldsV1` trie shape. Invariant: no empty child nodes.
#[derive(Debug, Clone, Default, PartialEq)]
struct FieldSet {
    /// The path ending here is in the set (a leaf `{}`, or `"."` when it has children).
    member: bool,
    /// Keyed by encoded path element: `f:name`, `k:{"name":"c"}`, `v:"x"`.
    children: BTreeMap<String, FieldSet>,
}

impl FieldSet {
    fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    fn child(&mut self, element: String) -> &mut FieldSet {
        self.children.entry(element).or_default()
    }

    /// Restores the invariant after walkers created nodes that stayed empty.
    fn prune(&mut self) {
        self.children.values_mut().for_each(FieldSet::prune);
        self.children.retain(|_, child| !child.is_empty());
    }

    /// Marks every node as a member: a removed subtree removes each of its paths.
    fn fill(&mut self) {
        self.member = true;
        self.children.values_mut().for_each(FieldSet::fill);
    }

    fn union(&mut self, other: &FieldSet) {
        self.member |= other.member;
        for (element, theirs) in &other.children {
            self.child(element.clone()).union(theirs);
        }
    }

    fn subtract(&mut self, other: &FieldSet) {
        self.member &= !other.member;
        for (element, theirs) in &other.children {
            if let Some(mine) = self.children.get_mut(element) {
                mine.subtract(theirs);
            }
        }
        self.children.retain(|_, child| !child.is_empty());
    }

    fn intersection(&self, other: &FieldSet) -> FieldSet {
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
    fn paths(&self) -> Vec<Vec<&str>> {
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
    fn from_fields_v1(value: &Value) -> FieldSet {
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

    fn to_fields_v1(&self) -> Value {
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

fn field_element(name: &str) -> String {
    format!("f:{name}")
}

/// `k:{"<key>":<value>}` for an item of a list merged by `key`.
fn key_element(key: &str, item: &Value) -> String {
    let mut fields = Map::new();
    fields.insert(
        key.to_owned(),
        item.get(key).cloned().unwrap_or(Value::Null),
    );
    format!("k:{}", Value::Object(fields))
}

fn value_element(item: &Value) -> String {
    format!("v:{item}")
}

/// A path as the server prints it in conflicts: `.spec.containers[name="c"].image`.
fn display_path(path: &[&str]) -> String {
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

fn quote(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

// ---------------------------------------------------------------------------------------------
// Walking objects: field sets, diffs and the apply merge, all driven by the same list shapes.

/// How a value is walked.
enum Shape<'v> {
    /// Owned as a whole: scalars, nulls, empty maps, atomic lists.
    Leaf,
    Map(&'v Map<String, Value>),
    /// An associative list whose items all carry a unique `key`.
    Keyed(&'static str, &'v [Value]),
    /// A set of unique scalars.
    Set(&'v [Value]),
}

struct Walker<'a> {
    kind: &'a str,
}

/// Paths that changed between two objects (added or modified leaves and list items) and paths
/// that disappeared (every node of a removed subtree).
#[derive(Debug, Default)]
struct Diff {
    changed: FieldSet,
    removed: FieldSet,
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
    fn root_set(&self, object: &Map<String, Value>) -> FieldSet {
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

    fn diff_root(&self, old: &Map<String, Value>, new: &Map<String, Value>) -> Diff {
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

    fn merge_map(
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
    fn interleave(
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

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

// ---------------------------------------------------------------------------------------------
// Pruning fields an applier stopped applying.

/// Removes from `map` the paths in `dropped` that nobody in `claimed` owns (at or below them);
/// `protected` fields (the key of the enclosing list item) always stay.
fn prune_map(
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

// ---------------------------------------------------------------------------------------------
// managedFields entries.

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Operation {
    Apply,
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Identity {
    manager: String,
    operation: Operation,
    api_version: String,
    subresource: Option<String>,
}

impl Identity {
    /// Upstream's manager identifier leaves out the apiVersion of appliers, so re-applying with
    /// another version updates the same entry.
    fn same_owner(&self, other: &Identity) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }
}

#[derive(Debug, Clone, PartialEq)]
struct Entry {
    id: Identity,
    time: Option<String>,
    set: FieldSet,
}

impl Entry {
    fn parse(value: &Value) -> Option<Entry> {
        let map = value.as_object()?;
        let operation = match map.get("operation")?.as_str()? {
            "Apply" => Operation::Apply,
            "Update" => Operation::Update,
            _ => return None,
        };
        if map.get("fieldsType").is_some_and(|t| *t != "FieldsV1") {
            return None;
        }
        let set = match map.get("fieldsV1") {
            None => FieldSet::default(),
            Some(fields @ Value::Object(_)) => FieldSet::from_fields_v1(fields),
            Some(_) => return None,
        };
        let id = Identity {
            manager: optional_string(map, "manager")?.unwrap_or_default(),
            operation,
            api_version: optional_string(map, "apiVersion")?.unwrap_or_default(),
            subresource: optional_string(map, "subresource")?.filter(|s| !s.is_empty()),
        };
        Some(Entry {
            id,
            time: optional_string(map, "time")?,
            set,
        })
    }

    fn to_json(&self) -> Value {
        let mut map = Map::new();
        map.insert("manager".to_owned(), Value::String(self.id.manager.clone()));
        map.insert(
            "operation".to_owned(),
            Value::String(self.id.operation.as_str().to_owned()),
        );
        if !self.id.api_version.is_empty() {
            map.insert(
                "apiVersion".to_owned(),
                Value::String(self.id.api_version.clone()),
            );
        }
        if let Some(time) = &self.time {
            map.insert("time".to_owned(), Value::String(time.clone()));
        }
        map.insert(
            "fieldsType".to_owned(),
            Value::String("FieldsV1".to_owned()),
        );
        map.insert("fieldsV1".to_owned(), self.set.to_fields_v1());
        if let Some(subresource) = &self.id.subresource {
            map.insert("subresource".to_owned(), Value::String(subresource.clone()));
        }
        Value::Object(map)
    }
}

/// `Ok(None)` when absent, `None` (a malformed entry) when present but not a string.
fn optional_string(map: &Map<String, Value>, field: &str) -> Option<Option<String>> {
    match map.get(field) {
        None => Some(None),
        Some(Value::String(s)) => Some(Some(s.clone())),
        Some(_) => None,
    }
}

fn managed_fields(object: &Map<String, Value>) -> Option<&Vec<Value>> {
    object.get("metadata")?.get("managedFields")?.as_array()
}

/// The entries of `object`, skipping malformed ones and folding duplicate owners together.
fn read_entries(object: &Map<String, Value>) -> Vec<Entry> {
    let parsed = managed_fields(object)
        .into_iter()
        .flatten()
        .filter_map(Entry::parse);
    let mut entries: Vec<Entry> = Vec::new();
    for entry in parsed {
        match entries.iter_mut().find(|e| e.id.same_owner(&entry.id)) {
            Some(existing) => existing.set.union(&entry.set),
            None => entries.push(entry),
        }
    }
    entries
}

/// `decodeLiveOrNew`: the client's own `managedFields` win when they decode cleanly (that is how
/// users reset ownership); `[]` or `[{}]` start from nothing; otherwise the stored ones.
fn starting_entries(
    old: Option<&Map<String, Value>>,
    new: &Map<String, Value>,
    subresource: Option<&str>,
) -> Vec<Entry> {
    let stored = || old.map(read_entries).unwrap_or_default();
    if subresource.is_some() {
        return stored();
    }
    let Some(sent) = managed_fields(new) else {
        return stored();
    };
    if sent.is_empty()
        || sent
            .iter()
            .all(|e| e.as_object().is_some_and(Map::is_empty))
    {
        return Vec::new();
    }
    if sent.iter().all(|e| Entry::parse(e).is_some()) {
        return read_entries(new);
    }
    stored()
}

/// Everyone but `me` loses fields this write changed or removed.
fn disown_others(entries: &mut [Entry], me: &Identity, diff: &Diff) {
    for entry in entries.iter_mut().filter(|e| !e.id.same_owner(me)) {
        entry.set.subtract(&diff.changed);
        entry.set.subtract(&diff.removed);
    }
}

/// Records `me`'s new set (with the request's apiVersion and time).
fn upsert(entries: &mut Vec<Entry>, me: Identity, set: FieldSet, now: &str) {
    entries.retain(|e| !e.id.same_owner(&me));
    entries.push(Entry {
        id: me,
        time: Some(now.to_owned()),
        set,
    });
}

/// Other managers' fields that this write changes.
fn find_conflicts(entries: &[Entry], me: &Identity, changed: &FieldSet) -> Vec<Conflict> {
    let mut conflicts: Vec<Conflict> = entries
        .iter()
        .filter(|e| !e.id.same_owner(me))
        .flat_map(|entry| {
            let overlap = entry.set.intersection(changed);
            let fields: Vec<String> = overlap.paths().iter().map(|p| display_path(p)).collect();
            fields.into_iter().map(move |field| Conflict {
                manager: entry.id.manager.clone(),
                field,
                updated_with: (entry.id.operation == Operation::Update)
                    .then(|| entry.id.api_version.clone()),
                subresource: entry.id.subresource.clone(),
            })
        })
        .collect();
    conflicts.sort_by_cached_key(Conflict::owner_identifier);
    conflicts
}

/// Writes `entries` (minus empty ones, sorted like upstream) into `object`, or keeps the old
/// object's list verbatim when nothing but timestamps would change.
fn store_entries(
    old: Option<&Map<String, Value>>,
    object: &mut Map<String, Value>,
    mut entries: Vec<Entry>,
) {
    entries.retain(|e| !e.set.is_empty());
    entries.sort_by(|a, b| {
        (
            a.id.operation,
            &a.time,
            &a.id.manager,
            &a.id.api_version,
            &a.id.subresource,
        )
            .cmp(&(
                b.id.operation,
                &b.time,
                &b.id.manager,
                &b.id.api_version,
                &b.id.subresource,
            ))
    });
    let stored = match old {
        Some(old) if is_timestamp_only_change(old, object, &entries) => {
            managed_fields(old).cloned()
        }
        _ => Some(entries.iter().map(Entry::to_json).collect()),
    };
    match stored.filter(|list| !list.is_empty()) {
        Some(list) => {
            if let Some(metadata) = metadata_mut(object) {
                metadata.insert("managedFields".to_owned(), Value::Array(list));
            }
        }
        None => {
            if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
                metadata.remove("managedFields");
            }
        }
    }
}

/// Upstream's `IgnoreManagedFieldsTimestampsTransformer`: a write that changes nothing keeps the
/// old timestamps, so no-op writes stay no-ops.
fn is_timestamp_only_change(
    old: &Map<String, Value>,
    new: &Map<String, Value>,
    entries: &[Entry],
) -> bool {
    let mut before = read_entries(old);
    before.retain(|e| !e.set.is_empty());
    let same_sets = before.len() == entries.len()
        && entries
            .iter()
            .all(|e| before.iter().any(|b| b.id == e.id && b.set == e.set));
    same_sets && without_managed_fields(old) == without_managed_fields(new)
}

/// The object as it would be without managedFields (and without the `metadata` map that writing
/// them may have created).
fn without_managed_fields(object: &Map<String, Value>) -> Map<String, Value> {
    let mut object = object.clone();
    if let Some(Value::Object(metadata)) = object.get_mut("metadata") {
        metadata.remove("managedFields");
        if metadata.is_empty() {
            object.remove("metadata");
        }
    }
    object
}

fn metadata_mut(object: &mut Map<String, Value>) -> Option<&mut Map<String, Value>> {
    object
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()))
        .as_object_mut()
}

/// Metadata the server maintains itself: never merged from an apply body and never owned.
const SERVER_METADATA: [&str; 8] = [
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "selfLink",
    "managedFields",
];

/// Fields that name the object: merged, but owned by nobody (upstream strips them from sets).
const IDENTITY_METADATA: [&str; 2] = ["name", "namespace"];
const IDENTITY_FIELDS: [&str; 2] = ["apiVersion", "kind"];

/// Drops server-maintained metadata; a `metadata` that isn't a map is dropped whole, since the
/// server always keeps (and writes managedFields into) a metadata map.
fn without_server_metadata(mut object: Map<String, Value>) -> Map<String, Value> {
    match object.get_mut("metadata") {
        Some(Value::Object(metadata)) => SERVER_METADATA.iter().for_each(|field| {
            metadata.remove(*field);
        }),
        Some(_) => {
            object.remove("metadata");
        }
        None => {}
    }
    object
}

/// The part of an object whose fields can be owned.
fn owned_view(object: &Map<String, Value>) -> Map<String, Value> {
    let mut view = without_server_metadata(object.clone());
    IDENTITY_FIELDS.iter().for_each(|field| {
        view.remove(*field);
    });
    if let Some(Value::Object(metadata)) = view.get_mut("metadata") {
        IDENTITY_METADATA.iter().for_each(|field| {
            metadata.remove(*field);
        });
        if metadata.is_empty() {
            view.remove("metadata");
        }
    }
    view
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const T0: &str = "2024-01-01T00:00:00Z";
    const T1: &str = "2024-01-01T00:01:00Z";

    fn request<'a>(kind: &'a str, manager: &'a str, force: bool) -> ApplyRequest<'a> {
        ApplyRequest {
            kind,
            api_version: "v1",
            manager,
            force,
            now: T1,
            subresource: None,
        }
    }

    fn apply(live: Option<&Value>, applied: Value, manager: &str) -> Value {
        let req = request(applied["kind"].as_str().unwrap_or_default(), manager, false);
        server_side_apply(live, &applied, &req).unwrap_or_else(|c| panic!("conflicts: {c:?}"))
    }

    fn conflicts(live: &Value, applied: Value, manager: &str) -> Vec<Conflict> {
        let req = request(applied["kind"].as_str().unwrap_or_default(), manager, false);
        match server_side_apply(Some(live), &applied, &req) {
            Ok(obj) => panic!("expected conflicts, got {obj}"),
            Err(conflicts) => conflicts,
        }
    }

    fn entry<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
        obj["metadata"]["managedFields"]
            .as_array()
            .and_then(|list| {
                list.iter()
                    .find(|e| e["manager"] == manager && e["operation"] == operation)
            })
            .unwrap_or_else(|| panic!("no {operation} entry for {manager} in {obj}"))
    }

    fn fields_v1<'v>(obj: &'v Value, manager: &str, operation: &str) -> &'v Value {
        &entry(obj, manager, operation)["fieldsV1"]
    }

    fn config_map(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "ns"}, "data": data})
    }

    #[test]
    fn apply_creates_object_with_ownership() {
        let applied = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ns", "labels": {"app": "web"}},
            "data": {"key": "value"}
        });
        let obj = apply(None, applied, "kubectl");
        assert_eq!(obj["data"], json!({"key": "value"}));
        assert_eq!(obj["metadata"]["name"], "cm");
        let e = entry(&obj, "kubectl", "Apply");
        assert_eq!(e["apiVersion"], "v1");
        assert_eq!(e["time"], T1);
        assert_eq!(e["fieldsType"], "FieldsV1");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:app": {}}}})
        );
        assert!(e.get("subresource").is_none());
    }

    #[test]
    fn reapply_removes_fields_no_longer_applied() {
        let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
        let second = apply(Some(&first), config_map(json!({"a": "1"})), "m");
        assert_eq!(second["data"], json!({"a": "1"}));
        assert_eq!(
            fields_v1(&second, "m", "Apply"),
            &json!({"f:data": {"f:a": {}}})
        );
        let third = apply(
            Some(&second),
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}}),
            "m",
        );
        assert!(third.get("data").is_none(), "{third}");
        assert!(third["metadata"].get("managedFields").is_none(), "{third}");
    }

    #[test]
    fn reapply_keeps_fields_owned_by_others() {
        let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
        let shared = apply(Some(&first), config_map(json!({"b": "2"})), "other");
        let after = apply(Some(&shared), config_map(json!({"a": "1"})), "m");
        assert_eq!(after["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            fields_v1(&after, "other", "Apply"),
            &json!({"f:data": {"f:b": {}}})
        );
    }

    #[test]
    fn conflicts_with_update_manager() {
        let mut live = config_map(json!({"key": "old"}));
        record_update(None, &mut live, "kubectl-client-side-apply", "v1", T0, None);
        let found = conflicts(&live, config_map(json!({"key": "new"})), "kubectl");
        assert_eq!(
            found,
            vec![Conflict {
                manager: "kubectl-client-side-apply".to_owned(),
                field: ".data.key".to_owned(),
                updated_with: Some("v1".to_owned()),
                subresource: None,
            }]
        );
        assert_eq!(
            conflict_message(&found, "v1"),
            "Apply failed with 1 conflict: conflict with \"kubectl-client-side-apply\" using v1: .data.key"
        );
        assert_eq!(
            found[0].cause_message("v1"),
            "conflict with \"kubectl-client-side-apply\" using v1"
        );
    }

    #[test]
    fn conflicts_with_apply_manager_and_several_fields() {
        let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "m1");
        let found = conflicts(&live, config_map(json!({"a": "2", "b": "2"})), "m2");
        assert_eq!(found.len(), 2);
        assert_eq!(
            conflict_message(&found, "v1"),
            "Apply failed with 2 conflicts: conflicts with \"m1\":\n- .data.a\n- .data.b"
        );
    }

    #[test]
    fn conflict_message_groups_owners_in_order() {
        let conflict = |manager: &str, field: &str, updated_with: Option<&str>| Conflict {
            manager: manager.to_owned(),
            field: field.to_owned(),
            updated_with: updated_with.map(str::to_owned),
            subresource: None,
        };
        let conflicts = [
            conflict("b", ".y", Some("")),
            conflict("a", ".x", None),
            conflict("b", ".z", Some("")),
        ];
        assert_eq!(
            conflict_message(&conflicts, "apps/v1"),
            "Apply failed with 3 conflicts: conflicts with \"a\":\n- .x\nconflicts with \"b\" using apps/v1:\n- .y\n- .z"
        );
    }

    #[test]
    fn force_takes_ownership() {
        let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "m1");
        let applied = config_map(json!({"a": "2"}));
        let obj =
            server_side_apply(Some(&live), &applied, &request("ConfigMap", "m2", true)).unwrap();
        assert_eq!(obj["data"], json!({"a": "2", "b": "1"}));
        assert_eq!(
            fields_v1(&obj, "m1", "Apply"),
            &json!({"f:data": {"f:b": {}}})
        );
        assert_eq!(
            fields_v1(&obj, "m2", "Apply"),
            &json!({"f:data": {"f:a": {}}})
        );
    }

    #[test]
    fn equal_values_are_shared_without_conflict() {
        let live = apply(None, config_map(json!({"a": "1"})), "m1");
        let obj = apply(Some(&live), config_map(json!({"a": "1"})), "m2");
        assert_eq!(
            fields_v1(&obj, "m1", "Apply"),
            &json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(
            fields_v1(&obj, "m2", "Apply"),
            &json!({"f:data": {"f:a": {}}})
        );
    }

    #[test]
    fn labels_are_owned_per_key() {
        let labelled = |labels: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "labels": labels}});
        let first = apply(None, labelled(json!({"a": "1"})), "m1");
        let second = apply(Some(&first), labelled(json!({"b": "2"})), "m2");
        assert_eq!(second["metadata"]["labels"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            fields_v1(&second, "m1", "Apply"),
            &json!({"f:metadata": {"f:labels": {"f:a": {}}}})
        );
        assert_eq!(
            fields_v1(&second, "m2", "Apply"),
            &json!({"f:metadata": {"f:labels": {"f:b": {}}}})
        );
        let third = apply(Some(&second), labelled(json!({})), "m1");
        assert_eq!(third["metadata"]["labels"], json!({"b": "2"}));
    }

    fn deployment(containers: Value) -> Value {
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"replicas": 1, "template": {"spec": {"containers": containers}}}
        })
    }

    #[test]
    fn keyed_lists_merge_and_use_k_elements() {
        let first = apply(
            None,
            deployment(json!([{"name": "a", "image": "a:1"}])),
            "m1",
        );
        let fields = fields_v1(&first, "m1", "Apply");
        assert_eq!(
            fields["f:spec"]["f:template"]["f:spec"]["f:containers"],
            json!({"k:{\"name\":\"a\"}": {".": {}, "f:image": {}, "f:name": {}}})
        );
        let sidecar = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:1"}]}}}});
        let second = apply(Some(&first), sidecar, "m2");
        let names: Vec<&Value> = second["spec"]["template"]["spec"]["containers"]
            .as_array()
            .map(|c| c.iter().map(|c| &c["name"]).collect())
            .unwrap_or_default();
        assert_eq!(names, [&json!("a"), &json!("b")]);

        let found = conflicts(
            &second,
            deployment(json!([{"name": "b", "image": "b:2"}])),
            "m1",
        );
        assert_eq!(found.len(), 1);
        assert_eq!(
            found[0].field,
            ".spec.template.spec.containers[name=\"b\"].image"
        );

        let dropped = apply(Some(&second), deployment(json!([])), "m1");
        let containers = &dropped["spec"]["template"]["spec"]["containers"];
        assert_eq!(
            containers,
            &json!([{"name": "b", "image": "b:1"}]),
            "{dropped}"
        );
    }

    #[test]
    fn finalizers_are_sets() {
        let with = |finalizers: Value| json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "finalizers": finalizers}});
        let first = apply(None, with(json!(["a"])), "m1");
        let second = apply(Some(&first), with(json!(["b"])), "m2");
        assert_eq!(second["metadata"]["finalizers"], json!(["a", "b"]));
        assert_eq!(
            fields_v1(&second, "m2", "Apply"),
            &json!({"f:metadata": {"f:finalizers": {"v:\"b\"": {}}}})
        );
        let third = apply(Some(&second), with(json!(["c"])), "m1");
        assert_eq!(third["metadata"]["finalizers"], json!(["b", "c"]));
    }

    #[test]
    fn unknown_kinds_have_atomic_lists() {
        let widget = |items: Value| json!({"apiVersion": "x/v1", "kind": "Widget", "metadata": {"name": "w"}, "spec": {"items": items}});
        let first = apply(None, widget(json!([1, 2])), "m1");
        assert_eq!(
            fields_v1(&first, "m1", "Apply"),
            &json!({"f:spec": {"f:items": {}}})
        );
        let found = conflicts(&first, widget(json!([3])), "m2");
        assert_eq!(found[0].field, ".spec.items");
    }

    #[test]
    fn null_in_apply_removes_field() {
        let first = apply(None, config_map(json!({"a": "1", "b": "2"})), "m");
        let obj = apply(Some(&first), config_map(json!({"a": "1", "b": null})), "m");
        assert_eq!(obj["data"], json!({"a": "1"}));
    }

    #[test]
    fn record_update_on_create_owns_every_leaf() {
        let mut obj = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "cm", "namespace": "ns", "uid": "u", "resourceVersion": "1", "labels": {"a": "1"}},
            "data": {"k": "v"}
        });
        record_update(None, &mut obj, "kubectl-create", "v1", T0, None);
        let e = entry(&obj, "kubectl-create", "Update");
        assert_eq!(e["time"], T0);
        assert_eq!(e["apiVersion"], "v1");
        assert_eq!(
            e["fieldsV1"],
            json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}})
        );
    }

    #[test]
    fn record_update_owns_list_items() {
        let mut pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "i"}], "tolerations": [{"key": "k"}]}});
        record_update(None, &mut pod, "kubectl-create", "v1", T0, None);
        assert_eq!(
            fields_v1(&pod, "kubectl-create", "Update")["f:spec"],
            json!({
                "f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}},
                "f:tolerations": {}
            })
        );
    }

    #[test]
    fn record_update_transfers_ownership() {
        let live = apply(None, config_map(json!({"a": "1", "b": "1"})), "applier");
        let mut new = live.clone();
        new["data"]["a"] = json!("2");
        new["data"]["c"] = json!("3");
        record_update(Some(&live), &mut new, "editor", "v1", T1, None);
        assert_eq!(
            fields_v1(&new, "applier", "Apply"),
            &json!({"f:data": {"f:b": {}}})
        );
        assert_eq!(
            fields_v1(&new, "editor", "Update"),
            &json!({"f:data": {"f:a": {}, "f:c": {}}})
        );
        let list = new["metadata"]["managedFields"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        assert_eq!(
            list.first().map(|e| &e["operation"]),
            Some(&json!("Apply")),
            "Apply entries sort first"
        );

        let mut removed = new.clone();
        if let Some(data) = removed["data"].as_object_mut() {
            data.remove("b");
        }
        record_update(Some(&new), &mut removed, "editor", "v1", T1, None);
        let managers: Vec<&Value> = removed["metadata"]["managedFields"]
            .as_array()
            .map(|l| l.iter().map(|e| &e["manager"]).collect())
            .unwrap_or_default();
        assert_eq!(
            managers,
            [&json!("editor")],
            "the applier lost its last field"
        );
    }

    #[test]
    fn noop_update_keeps_timestamps() {
        let mut live = config_map(json!({"a": "1"}));
        record_update(None, &mut live, "m", "v1", T0, None);
        let mut same = live.clone();
        record_update(Some(&live), &mut same, "m", "v1", T1, None);
        assert_eq!(same, live);
        let reapplied = apply(
            Some(&apply(None, config_map(json!({"a": "1"})), "x")),
            config_map(json!({"a": "1"})),
            "x",
        );
        assert_eq!(entry(&reapplied, "x", "Apply")["time"], T1);
    }

    #[test]
    fn client_can_reset_managed_fields() {
        let live = apply(None, config_map(json!({"a": "1"})), "m");
        let mut reset = live.clone();
        reset["metadata"]["managedFields"] = json!([]);
        record_update(Some(&live), &mut reset, "editor", "v1", T1, None);
        assert!(reset["metadata"].get("managedFields").is_none(), "{reset}");
    }

    #[test]
    fn status_subresource_entries_are_separate() {
        let live = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Pending"}});
        let applied = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Running"}});
        let req = ApplyRequest {
            subresource: Some("status"),
            ..request("Pod", "kubelet", false)
        };
        let obj = server_side_apply(Some(&live), &applied, &req).unwrap();
        assert_eq!(entry(&obj, "kubelet", "Apply")["subresource"], "status");
        let found = conflicts(
            &obj,
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "status": {"phase": "Failed"}}),
            "other",
        );
        assert_eq!(found[0].subresource.as_deref(), Some("status"));
        assert_eq!(
            conflict_message(&found, "v1"),
            "Apply failed with 1 conflict: conflict with \"kubelet\" with subresource \"status\": .status.phase"
        );
    }

    #[test]
    fn malformed_managed_fields_are_ignored() {
        let mut live = config_map(json!({"a": "1"}));
        live["metadata"]["managedFields"] = json!([
            "junk",
            {"manager": "bad-op", "operation": "Delete", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}},
            {"manager": "bad-type", "operation": "Apply", "fieldsType": "FieldsV2", "fieldsV1": {}},
            {"manager": "bad-fields", "operation": "Apply", "fieldsV1": [1]},
            {"manager": "odd", "operation": "Update", "apiVersion": "v1", "fieldsType": "FieldsV1",
             "fieldsV1": {"f:data": {"f:a": {}, "junk": 1, "f:b": "x"}, "weird": {}}}
        ]);
        let obj = apply(Some(&live), config_map(json!({"c": "3"})), "m");
        let managers: Vec<&Value> = obj["metadata"]["managedFields"]
            .as_array()
            .map(|l| l.iter().map(|e| &e["manager"]).collect())
            .unwrap_or_default();
        assert_eq!(managers, [&json!("m"), &json!("odd")]);
        assert_eq!(
            fields_v1(&obj, "odd", "Update"),
            &json!({"f:data": {"f:a": {}}})
        );
        live["metadata"]["managedFields"] = json!("not a list");
        assert!(
            server_side_apply(
                Some(&live),
                &config_map(json!({"a": "2"})),
                &request("ConfigMap", "m", false)
            )
            .is_ok()
        );
    }

    #[test]
    fn dot_marker_round_trips() {
        let fields = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}}, "f:spec": {"k:{\"name\":\"c\"}": {".": {}, "f:name": {}}}});
        let set = FieldSet::from_fields_v1(&fields);
        assert_eq!(set.to_fields_v1(), fields);
        let paths: Vec<String> = set.paths().iter().map(|p| display_path(p)).collect();
        assert_eq!(
            paths,
            [
                ".metadata.labels",
                ".metadata.labels.a",
                ".spec[name=\"c\"]",
                ".spec[name=\"c\"].name"
            ]
        );
    }

    #[test]
    fn interleave_follows_smd_order() {
        let walker = Walker { kind: "Pod" };
        let names = |items: Vec<Value>| -> Vec<String> {
            items
                .iter()
                .map(|i| i["name"].as_str().unwrap_or_default().to_owned())
                .collect()
        };
        let list =
            |names: &[&str]| -> Vec<Value> { names.iter().map(|n| json!({"name": n})).collect() };
        let id = |item: &Value| Some(key_element("name", item));
        let merged = walker.interleave(
            "spec.containers[]",
            &list(&["a", "b", "c"]),
            &list(&["d", "b"]),
            id,
        );
        assert_eq!(names(merged), ["a", "d", "b", "c"]);
        let merged = walker.interleave(
            "spec.containers[]",
            &list(&["a", "b", "c"]),
            &list(&["c", "a"]),
            id,
        );
        assert_eq!(names(merged), ["b", "c", "a"]);
    }
}
