//! The `metadata.managedFields` entries: reading, updating and storing them.

use serde_json::{Map, Value};

use super::conflict::Conflict;
use super::field_set::{FieldSet, display_path};
use super::walk::Diff;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Operation {
    Apply,
    Update,
}

impl Operation {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Identity {
    pub(super) manager: String,
    pub(super) operation: Operation,
    pub(super) api_version: String,
    pub(super) subresource: Option<String>,
}

impl Identity {
    /// Upstream's manager identifier leaves out the apiVersion of appliers, so re-applying with
    /// another version updates the same entry.
    pub(super) fn same_owner(&self, other: &Identity) -> bool {
        self.manager == other.manager
            && self.operation == other.operation
            && self.subresource == other.subresource
            && (self.operation == Operation::Apply || self.api_version == other.api_version)
    }
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Entry {
    pub(super) id: Identity,
    pub(super) time: Option<String>,
    pub(super) set: FieldSet,
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

pub(super) fn managed_fields(object: &Map<String, Value>) -> Option<&Vec<Value>> {
    object.get("metadata")?.get("managedFields")?.as_array()
}

/// The entries of `object`, skipping malformed ones and folding duplicate owners together.
pub(super) fn read_entries(object: &Map<String, Value>) -> Vec<Entry> {
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
pub(super) fn starting_entries(
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
pub(super) fn disown_others(entries: &mut [Entry], me: &Identity, diff: &Diff) {
    for entry in entries.iter_mut().filter(|e| !e.id.same_owner(me)) {
        entry.set.subtract(&diff.changed);
        entry.set.subtract(&diff.removed);
    }
}

/// Records `me`'s new set (with the request's apiVersion and time).
pub(super) fn upsert(entries: &mut Vec<Entry>, me: Identity, set: FieldSet, now: &str) {
    entries.retain(|e| !e.id.same_owner(&me));
    entries.push(Entry {
        id: me,
        time: Some(now.to_owned()),
        set,
    });
}

/// Other managers' fields that this write changes.
pub(super) fn find_conflicts(
    entries: &[Entry],
    me: &Identity,
    changed: &FieldSet,
) -> Vec<Conflict> {
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
pub(super) fn store_entries(
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
pub(super) fn without_server_metadata(mut object: Map<String, Value>) -> Map<String, Value> {
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
pub(super) fn owned_view(object: &Map<String, Value>) -> Map<String, Value> {
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
