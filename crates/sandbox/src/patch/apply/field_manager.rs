//! The two ways a write records field ownership: server-side apply and a plain update.

use serde_json::{Map, Value};

use super::conflict::Conflict;
use super::managed_fields::{
    Identity, Operation, disown_others, find_conflicts, owned_view, read_entries, starting_entries,
    store_entries, upsert, without_server_metadata,
};
use super::prune::prune_map;
use super::walk::Walker;

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
