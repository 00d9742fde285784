//! Strategic merge patch (SMP), Kubernetes flavour, without OpenAPI.
//!
//! The real server reads each list field's `patchStrategy`/`patchMergeKey` from the Go struct
//! tags of the built-in types. Here a built-in table ([`list_strategy`]) stands in for those
//! tags; everything else follows `k8s.io/apimachinery/pkg/util/strategicpatch` with the server's
//! options (`MergeParallelList` and `IgnoreUnmatchedNulls`):
//!
//! * maps merge recursively and `null` deletes a key;
//! * lists merge per [`ListStrategy`]. A merged list is ordered like upstream's
//!   `normalizeElementOrder`: items named by the patch follow the patch order, server-only items
//!   keep their relative order, and a *new* item is placed before server-only items that it
//!   cannot be ordered against — so appending via SMP really prepends, exactly as on a real
//!   cluster (clients that care send `$setElementOrder`, as `kubectl apply` does);
//! * directives: `$patch: replace` / `$patch: delete` on maps, `{"$patch": "delete", <key>: v}`
//!   and `{"$patch": "replace"}` items in merging lists, `$retainKeys`,
//!   `$deleteFromPrimitiveList/<field>` and `$setElementOrder/<field>` (honoured, not validated).
//!
//! Known differences from upstream, all on inputs the real server would mangle or reject:
//! `$patch: delete` on a nested map removes the key (upstream leaves `{}`, which typed
//! round-tripping then drops); values that have nothing to merge into are cleaned of nulls and
//! directives instead of being stored raw; `$deleteFromPrimitiveList` removes equal items from
//! any list regardless of its strategy; `$setElementOrder` lists are not checked against the
//! patch list.

use serde_json::{Map, Number, Value};

/// How a list field merges under SMP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListStrategy {
    /// The patch list replaces the whole list (no `patchStrategy` tag; also every CRD list).
    Replace,
    /// Items are maps matched by this key; matched ones merge recursively.
    MergeByKey(&'static str),
    /// A set of scalars: the union of both lists.
    MergePrimitives,
}

/// The strategy of a list field of a built-in kind: the `patchStrategy`/`patchMergeKey` tags of
/// `k8s.io/api`, e.g. `("Pod", "spec.containers")` → `MergeByKey("name")`.
///
/// `path` is dotted with `[]` for list items and no indices: `spec.containers[].ports`.
/// Pod template paths of workloads (`spec.template.spec…`, CronJob's
/// `spec.jobTemplate.spec.template.spec…`, PodTemplate's `template.spec…`) resolve like a Pod's
/// `spec…`. `metadata.finalizers` and `metadata.ownerReferences` are the same for every kind,
/// because custom resources share `ObjectMeta` (server-side apply relies on that). Anything
/// unknown is `Replace`, which is also how CRD lists behave (CRDs don't support SMP at all).
pub fn list_strategy(kind: &str, path: &str) -> ListStrategy {
    if let Some(strategy) = metadata_list_strategy(path) {
        return strategy;
    }
    if let Some(rest) = pod_spec_prefix(kind).and_then(|prefix| path.strip_prefix(prefix)) {
        return pod_spec_list_strategy(rest);
    }
    kind_list_strategy(kind, path)
}

fn metadata_list_strategy(path: &str) -> Option<ListStrategy> {
    match path {
        "metadata.finalizers" => Some(ListStrategy::MergePrimitives),
        "metadata.ownerReferences" => Some(ListStrategy::MergeByKey("uid")),
        _ => None,
    }
}

/// Where the `PodSpec` sits in each kind that embeds one.
fn pod_spec_prefix(kind: &str) -> Option<&'static str> {
    match kind {
        "Pod" => Some("spec."),
        "PodTemplate" => Some("template.spec."),
        "Deployment"
        | "ReplicaSet"
        | "StatefulSet"
        | "DaemonSet"
        | "Job"
        | "ReplicationController" => Some("spec.template.spec."),
        "CronJob" => Some("spec.jobTemplate.spec.template.spec."),
        _ => None,
    }
}

/// `rest` is relative to a `PodSpec`: `containers`, `initContainers[].env`, …
fn pod_spec_list_strategy(rest: &str) -> ListStrategy {
    if let Some((list, field)) = rest.split_once("[].") {
        return match list {
            "containers" | "initContainers" | "ephemeralContainers" => {
                container_list_strategy(field)
            }
            _ => ListStrategy::Replace,
        };
    }
    match rest {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims"
        | "schedulingGates" => ListStrategy::MergeByKey("name"),
        "hostAliases" => ListStrategy::MergeByKey("ip"),
        "topologySpreadConstraints" => ListStrategy::MergeByKey("topologyKey"),
        _ => ListStrategy::Replace,
    }
}

/// Lists inside a `Container` (or `EphemeralContainer`).
fn container_list_strategy(field: &str) -> ListStrategy {
    match field {
        "ports" => ListStrategy::MergeByKey("containerPort"),
        "env" => ListStrategy::MergeByKey("name"),
        "volumeMounts" => ListStrategy::MergeByKey("mountPath"),
        "volumeDevices" => ListStrategy::MergeByKey("devicePath"),
        _ => ListStrategy::Replace,
    }
}

/// Lists outside pod specs, per kind.
fn kind_list_strategy(kind: &str, path: &str) -> ListStrategy {
    match (kind, path) {
        (_, "status.conditions") if has_mergeable_conditions(kind) => {
            ListStrategy::MergeByKey("type")
        }
        ("Pod", "status.podIPs" | "status.hostIPs") => ListStrategy::MergeByKey("ip"),
        ("Pod", "status.resourceClaimStatuses") => ListStrategy::MergeByKey("name"),
        ("Service", "spec.ports") => ListStrategy::MergeByKey("port"),
        ("Node", "spec.podCIDRs") => ListStrategy::MergePrimitives,
        ("Node", "status.addresses") => ListStrategy::MergeByKey("type"),
        ("ServiceAccount", "secrets") => ListStrategy::MergeByKey("name"),
        _ => ListStrategy::Replace,
    }
}

/// Kinds whose `status.conditions` carry `patchStrategy:"merge" patchMergeKey:"type"`.
fn has_mergeable_conditions(kind: &str) -> bool {
    matches!(
        kind,
        "Pod"
            | "Node"
            | "Namespace"
            | "PersistentVolumeClaim"
            | "Service"
            | "Deployment"
            | "ReplicaSet"
            | "StatefulSet"
            | "DaemonSet"
            | "Job"
            | "ReplicationController"
            | "HorizontalPodAutoscaler"
            | "PodDisruptionBudget"
    )
}

const DIRECTIVE: &str = "$patch";
const RETAIN_KEYS: &str = "$retainKeys";
const DELETE_FROM_PRIMITIVE_LIST: &str = "$deleteFromPrimitiveList";
const SET_ELEMENT_ORDER: &str = "$setElementOrder";

const ERR_RETAIN_KEYS: &str = "invalid patch format of retainKeys";
const ERR_PRIMITIVE_LIST: &str = "invalid patch format of primitive list";
const ERR_SET_ELEMENT_ORDER: &str = "invalid patch format of setElementOrder list";

/// Applies a strategic merge patch to `original`, an object of kind `kind`.
///
/// A `null` patch changes nothing (Go decodes it to an empty map). Errors, worded like
/// upstream, are for the caller to return as 400/422: a patch that isn't an object, an item of a
/// merging list without its merge key, an unknown `$patch` value, malformed directives, lists
/// mixing element types.
pub fn apply_patch(kind: &str, original: &Value, patch: &Value) -> Result<Value, String> {
    let patch = match patch {
        Value::Null => return Ok(original.clone()),
        Value::Object(patch) => patch,
        other => {
            return Err(format!(
                "json: cannot unmarshal {} into Go value of type map[string]interface {{}}",
                go_json_type(other)
            ));
        }
    };
    let original = original.as_object().cloned().unwrap_or_default();
    Merger { kind }
        .merge_map("", original, patch)
        .map(Value::Object)
}

/// Carries the kind, which (with the field path) picks each list's strategy.
struct Merger<'a> {
    kind: &'a str,
}

impl Merger<'_> {
    /// `mergeMap`: directives first, then every ordinary key.
    fn merge_map(
        &self,
        path: &str,
        mut original: Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        if let Some(directive) = patch.get(DIRECTIVE) {
            return self.map_directive(path, directive, patch);
        }
        apply_retain_keys(&mut original, patch)?;
        let ordered = self.apply_set_element_order(path, &mut original, patch)?;
        for (key, value) in patch {
            if key == RETAIN_KEYS || key.starts_with(SET_ELEMENT_ORDER) || ordered.contains(key) {
                continue;
            }
            match key.strip_prefix(DELETE_FROM_PRIMITIVE_LIST) {
                Some(rest) => {
                    let field = directive_field(rest).ok_or(ERR_PRIMITIVE_LIST)?;
                    self.merge_field(path, &mut original, field, value, true)?;
                }
                None => self.merge_field(path, &mut original, key, value, false)?,
            }
        }
        Ok(original)
    }

    /// `$patch` on a map: `replace` swaps in the rest of the patch, `delete` empties the map.
    fn map_directive(
        &self,
        path: &str,
        directive: &Value,
        patch: &Map<String, Value>,
    ) -> Result<Map<String, Value>, String> {
        match directive.as_str() {
            Some("replace") => {
                let mut replacement = patch.clone();
                replacement.remove(DIRECTIVE);
                self.merge_map(path, Map::new(), &replacement)
            }
            Some("delete") => Ok(Map::new()),
            _ => Err(bad_patch_type(directive, patch)),
        }
    }

    /// Merges one patch entry into `original[field]`; `delete_list` marks
    /// `$deleteFromPrimitiveList/<field>` entries.
    fn merge_field(
        &self,
        path: &str,
        original: &mut Map<String, Value>,
        field: &str,
        patch: &Value,
        delete_list: bool,
    ) -> Result<(), String> {
        let field_path = join(path, field);
        if patch.is_null() || is_map_delete(patch) {
            original.remove(field);
            return Ok(());
        }
        match original.get_mut(field) {
            Some(slot) => {
                let current = std::mem::take(slot);
                *slot = self.merge_existing(&field_path, current, patch, delete_list)?;
            }
            None if !delete_list => {
                original.insert(field.to_owned(), self.fresh(&field_path, patch)?);
            }
            None => {}
        }
        Ok(())
    }

    fn merge_existing(
        &self,
        path: &str,
        current: Value,
        patch: &Value,
        delete_list: bool,
    ) -> Result<Value, String> {
        match (current, patch) {
            (Value::Array(current), Value::Array(patch)) => self
                .merge_list(path, current, patch, delete_list)
                .map(Value::Array),
            (current, _) if delete_list => Ok(current),
            (Value::Object(current), Value::Object(patch)) => {
                self.merge_map(path, current, patch).map(Value::Object)
            }
            (_, patch) => self.fresh(path, patch),
        }
    }

    /// A patch value with nothing to merge into, cleaned of nulls and directives by merging it
    /// into an empty value of its own type.
    fn fresh(&self, path: &str, patch: &Value) -> Result<Value, String> {
        match patch {
            Value::Object(patch) => self.merge_map(path, Map::new(), patch).map(Value::Object),
            Value::Array(patch) => self
                .merge_list(path, Vec::new(), patch, false)
                .map(Value::Array),
            scalar => Ok(scalar.clone()),
        }
    }

    /// `mergeSliceHandler`.
    fn merge_list(
        &self,
        path: &str,
        original: Vec<Value>,
        patch: &[Value],
        delete_list: bool,
    ) -> Result<Vec<Value>, String> {
        if delete_list {
            return Ok(original
                .into_iter()
                .filter(|item| !patch.contains(item))
                .collect());
        }
        match list_strategy(self.kind, path) {
            ListStrategy::Replace => Ok(patch.to_vec()),
            ListStrategy::MergeByKey(key) => self.merge_slice(path, original, patch, Some(key)),
            ListStrategy::MergePrimitives => self.merge_slice(path, original, patch, None),
        }
    }

    /// `mergeSlice`: scalars are unioned, maps merged by key; then the order is enforced.
    fn merge_slice(
        &self,
        path: &str,
        original: Vec<Value>,
        patch: &[Value],
        key: Option<&'static str>,
    ) -> Result<Vec<Value>, String> {
        if original.is_empty() && patch.is_empty() {
            return Ok(original);
        }
        if !elements_are_maps(&original, patch)? {
            let mut merged = original.clone();
            for item in patch {
                if !merged.contains(item) {
                    merged.push(item.clone());
                }
            }
            return Ok(enforce_order(merged, patch, &original, None));
        }
        let Some(key) = key else {
            return Err(format!("cannot merge lists without merge key for {path}"));
        };
        let (original, patch) = apply_list_directives(original, patch, key)?;
        let merged = self.merge_keyed_items(path, original.clone(), &patch, key)?;
        Ok(enforce_order(merged, &patch, &original, Some(key)))
    }

    /// `mergeSliceWithoutSpecialElements`: patch items merge into the original item with the
    /// same key, or join the list.
    fn merge_keyed_items(
        &self,
        path: &str,
        mut original: Vec<Value>,
        patch: &[Value],
        key: &str,
    ) -> Result<Vec<Value>, String> {
        let item_path = format!("{path}[]");
        for item in patch.iter().filter_map(Value::as_object) {
            let Some(wanted) = item.get(key) else {
                return Err(no_merge_key(item, key));
            };
            let found = original.iter_mut().find(|o| o.get(key) == Some(wanted));
            match found {
                Some(slot) => {
                    let current = std::mem::take(slot);
                    let current = match current {
                        Value::Object(current) => current,
                        _ => Map::new(),
                    };
                    *slot = Value::Object(self.merge_map(&item_path, current, item)?);
                }
                None => original.push(Value::Object(self.merge_map(
                    &item_path,
                    Map::new(),
                    item,
                )?)),
            }
        }
        Ok(original)
    }

    /// `mergePatchIntoOriginal`: each `$setElementOrder/<field>` merges `<field>` right away and
    /// orders the result by the given list. Returns the fields it handled.
    fn apply_set_element_order(
        &self,
        path: &str,
        original: &mut Map<String, Value>,
        patch: &Map<String, Value>,
    ) -> Result<Vec<String>, String> {
        let mut handled = Vec::new();
        for (directive, order) in patch {
            let Some(rest) = directive.strip_prefix(SET_ELEMENT_ORDER) else {
                continue;
            };
            let field = directive_field(rest).ok_or(ERR_SET_ELEMENT_ORDER)?;
            let order = order.as_array().ok_or(ERR_SET_ELEMENT_ORDER)?;
            let current = optional_list(original.get(field))?.map(<[Value]>::to_vec);
            let patch_list = optional_list(patch.get(field))?;
            let field_path = join(path, field);
            let merged = match (current.clone(), patch_list) {
                (None, None) => continue,
                (Some(current), None) => current,
                (current, Some(patch_list)) => {
                    self.merge_list(&field_path, current.unwrap_or_default(), patch_list, false)?
                }
            };
            let key = match list_strategy(self.kind, &field_path) {
                ListStrategy::MergeByKey(key) => Some(key),
                ListStrategy::Replace | ListStrategy::MergePrimitives => None,
            };
            let ordered = enforce_order(merged, order, &current.unwrap_or_default(), key);
            original.insert(field.to_owned(), Value::Array(ordered));
            handled.push(field.to_owned());
        }
        Ok(handled)
    }
}

/// `$retainKeys`: drop original keys not listed; every patched key must be listed.
fn apply_retain_keys(
    original: &mut Map<String, Value>,
    patch: &Map<String, Value>,
) -> Result<(), String> {
    let Some(retained) = patch.get(RETAIN_KEYS) else {
        return Ok(());
    };
    let retained = retained.as_array().ok_or(ERR_RETAIN_KEYS)?;
    let listed = |key: &str| retained.iter().any(|r| r.as_str() == Some(key));
    let unlisted_patch_key = patch.iter().any(|(key, value)| {
        !value.is_null()
            && key != RETAIN_KEYS
            && !key.starts_with(DELETE_FROM_PRIMITIVE_LIST)
            && !key.starts_with(SET_ELEMENT_ORDER)
            && !listed(key)
    });
    if unlisted_patch_key {
        return Err(ERR_RETAIN_KEYS.to_owned());
    }
    original.retain(|key, _| listed(key));
    Ok(())
}

/// `mergeSliceWithSpecialElements`: applies `$patch` items; returns the (possibly trimmed or
/// replaced) original and the remaining patch items.
fn apply_list_directives(
    mut original: Vec<Value>,
    patch: &[Value],
    key: &str,
) -> Result<(Vec<Value>, Vec<Value>), String> {
    let mut plain = Vec::new();
    let mut replace = false;
    for item in patch {
        let Some((map, directive)) = item.as_object().and_then(|m| Some((m, m.get(DIRECTIVE)?)))
        else {
            plain.push(item.clone());
            continue;
        };
        match directive.as_str() {
            Some("delete") => {
                let doomed = map.get(key).ok_or_else(|| no_merge_key(map, key))?;
                original.retain(|o| o.get(key) != Some(doomed));
            }
            Some("replace") => replace = true,
            Some("merge") => {
                return Err("merging lists cannot yet be specified in the patch".to_owned());
            }
            _ => return Err(bad_patch_type(directive, map)),
        }
    }
    if replace {
        return Ok((plain, Vec::new()));
    }
    Ok((original, plain))
}

/// `sliceElementType`: all items must share a JSON type, and lists of lists are unsupported.
/// Returns whether the items are maps.
fn elements_are_maps(original: &[Value], patch: &[Value]) -> Result<bool, String> {
    let mut items = original.iter().chain(patch);
    let Some(first) = items.next() else {
        return Err("no elements in any of the given slices".to_owned());
    };
    if first.is_array() {
        return Err("lists of lists are not supported".to_owned());
    }
    if items.any(|item| std::mem::discriminant(item) != std::mem::discriminant(first)) {
        let lists = Value::Array(vec![
            Value::Array(original.to_vec()),
            Value::Array(patch.to_vec()),
        ]);
        return Err(format!(
            "list element types are not identical: {}",
            go_format(&lists)
        ));
    }
    Ok(first.is_object())
}

/// `normalizeElementOrder`: items named in `patch_order` come in that order, server-only items
/// keep their `server_order`, and the two are interleaved by `server_order` where both are known.
fn enforce_order(
    merged: Vec<Value>,
    patch_order: &[Value],
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let (mut from_patch, mut server_only): (Vec<Value>, Vec<Value>) = merged
        .into_iter()
        .partition(|item| position(patch_order, item, key).is_some());
    from_patch.sort_by_key(|item| position(patch_order, item, key));
    server_only.sort_by_key(|item| position(server_order, item, key).unwrap_or(usize::MAX));
    merge_sorted(server_only, from_patch, server_order, key)
}

/// `mergeSortedSlice`: a left item goes first only when both items are in `server_order` and it
/// precedes there; otherwise the right (patch) item goes first.
fn merge_sorted(
    left: Vec<Value>,
    right: Vec<Value>,
    server_order: &[Value],
    key: Option<&str>,
) -> Vec<Value> {
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    loop {
        let take_left = match (left.peek(), right.peek()) {
            (None, None) => break,
            (Some(_), None) => true,
            (None, Some(_)) => false,
            (Some(l), Some(r)) => matches!(
                (position(server_order, l, key), position(server_order, r, key)),
                (Some(li), Some(ri)) if li < ri
            ),
        };
        out.extend(if take_left { left.next() } else { right.next() });
    }
    out
}

/// Index of `item` in `list`, comparing merge-key values for maps and whole values otherwise.
fn position(list: &[Value], item: &Value, key: Option<&str>) -> Option<usize> {
    let identity = |value: &'_ Value| -> Option<Value> {
        match key {
            Some(key) => value.get(key).cloned(),
            None => Some(value.clone()),
        }
    };
    let wanted = identity(item);
    list.iter()
        .position(|candidate| identity(candidate) == wanted)
}

fn optional_list(value: Option<&Value>) -> Result<Option<&[Value]>, String> {
    match value {
        None => Ok(None),
        Some(Value::Array(items)) => Ok(Some(items)),
        Some(_) => Err(ERR_SET_ELEMENT_ORDER.to_owned()),
    }
}

/// The `<field>` of `$directive/<field>`, given the text after the directive name.
fn directive_field(rest: &str) -> Option<&str> {
    rest.strip_prefix('/')
}

fn is_map_delete(patch: &Value) -> bool {
    patch.get(DIRECTIVE).and_then(Value::as_str) == Some("delete")
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_owned()
    } else {
        format!("{path}.{field}")
    }
}

fn no_merge_key(map: &Map<String, Value>, key: &str) -> String {
    format!(
        "map: {} does not contain declared merge key: {key}",
        go_format_map(map)
    )
}

fn bad_patch_type(directive: &Value, map: &Map<String, Value>) -> String {
    format!(
        "unknown patch type: {} in map: {}",
        go_format(directive),
        go_format_map(map)
    )
}

/// The JSON type names Go's decoder uses in `cannot unmarshal <type>` errors.
fn go_json_type(value: &Value) -> &'static str {
    match value {
        Value::Array(_) => "array",
        Value::String(_) => "string",
        Value::Number(_) => "number",
        Value::Bool(_) => "bool",
        Value::Null | Value::Object(_) => "object",
    }
}

/// Go's `%v` of a decoded JSON value, so error texts read like upstream's.
fn go_format(value: &Value) -> String {
    match value {
        Value::Null => "<nil>".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_format_number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(go_format).collect();
            format!("[{}]", items.join(" "))
        }
        Value::Object(map) => go_format_map(map),
    }
}

/// `map[k1:v1 k2:v2]`, keys sorted as Go's fmt sorts them.
fn go_format_map(map: &Map<String, Value>) -> String {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by_key(|(key, _)| *key);
    let entries: Vec<String> = entries
        .iter()
        .map(|(k, v)| format!("{k}:{}", go_format(v)))
        .collect();
    format!("map[{}]", entries.join(" "))
}

/// JSON numbers decode to float64 in Go, and `%v` prints those in `%g` style: exponent form
/// when the decimal exponent is below -4 or at least 6 (`1e+06`).
fn go_format_number(number: &Number) -> String {
    let value = number.as_f64().unwrap_or_default();
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or_default();
    if value != 0.0 && !(-4..6).contains(&exponent) {
        let sign = if exponent < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exponent.unsigned_abs())
    } else {
        value.to_string()
    }
}

#[cfg(test)]
mod tests;
