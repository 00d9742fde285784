//! Which objects a list, watch or deletecollection sees: namespace, label and field selectors,
//! and `limit`/`continue` paging.

pub mod selector;

use std::collections::BTreeMap;
use std::sync::Arc;

use base64::Engine as _;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::query::selector::{FieldSelector, LabelSelector, field_value};
use crate::registry::convert;
use crate::registry::meta;
use crate::registry::resources::ResourceInfo;
use crate::registry::store::{ObjectKey, State, Stored};

/// Selection of objects for a list or watch.
#[derive(Debug, Clone)]
pub struct Filter {
    /// `None` lists across namespaces (or a cluster-scoped resource).
    pub namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
    events_v1: bool,
}

impl Filter {
    /// Parses the selectors, rejecting field keys the resource does not support (400, as the server does).
    pub fn new(
        info: &ResourceInfo,
        namespace: Option<&str>,
        label_selector: &str,
        field_selector: &str,
    ) -> Result<Self, ApiError> {
        let labels = LabelSelector::parse(label_selector).map_err(ApiError::bad_request)?;
        let fields = FieldSelector::parse(field_selector).map_err(ApiError::bad_request)?;
        if let Some(key) = fields.keys().find(|k| !info.supports_field_selector(k)) {
            return Err(ApiError::bad_request(format!(
                "field label not supported: {key}"
            )));
        }
        Ok(Self {
            namespace: namespace.filter(|_| info.namespaced).map(str::to_owned),
            labels,
            fields,
            events_v1: info.group == "events.k8s.io",
        })
    }

    /// Whether a stored object is selected.
    pub fn matches(&self, obj: &Value) -> bool {
        if self
            .namespace
            .as_deref()
            .is_some_and(|ns| meta::namespace(obj) != ns)
        {
            return false;
        }
        if !self.labels.is_empty() && !self.labels.matches(meta::labels(obj)) {
            return false;
        }
        self.fields.is_empty()
            || self
                .fields
                .matches(|key| field_value(obj, &self.storage_field(key)))
    }

    /// events.k8s.io field names map onto the stored core/v1 names.
    fn storage_field(&self, key: &str) -> String {
        if !self.events_v1 {
            return key.to_owned();
        }
        if let Some(rest) = key.strip_prefix("regarding.") {
            return format!("involvedObject.{rest}");
        }
        if key == "reportingController" {
            return "reportingComponent".to_owned();
        }
        key.to_owned()
    }
}

/// One page of a list.
#[derive(Debug)]
pub struct Page {
    pub items: Vec<Arc<Stored>>,
    pub resource_version: u64,
    pub continue_token: Option<String>,
    pub remaining: Option<usize>,
}

/// Reads a page of objects matching `filter`, resuming after a continue token. Objects are read
/// lazily in key order, so a page costs its own size plus a count of what remains (no copy of
/// the rest of the collection per page).
pub fn list(
    state: &State,
    info: &ResourceInfo,
    filter: &Filter,
    limit: Option<usize>,
    continue_token: Option<&str>,
) -> Result<Page, ApiError> {
    let resume = match continue_token.filter(|t| !t.is_empty()) {
        Some(token) => Some(decode_continue(token)?),
        None => None,
    };
    let namespace = filter.namespace.as_deref();
    let (rv, candidates): (u64, Box<dyn Iterator<Item = Arc<Stored>> + '_>) = match resume {
        Some((rv, after)) => {
            let changes = changes_since(state, info, namespace, rv, &after)?;
            let current = state.range(&info.storage_key, namespace, Some(&after));
            (rv, Box::new(snapshot(current, changes)))
        }
        None => (
            state.rv(),
            Box::new(state.range(&info.storage_key, namespace, None).cloned()),
        ),
    };
    let limit = limit.filter(|l| *l > 0);
    let mut items = Vec::new();
    let mut remaining = 0usize;
    let mut last_key: Option<ObjectKey> = None;
    for obj in candidates {
        if !filter.matches(&obj.value) {
            continue;
        }
        if limit.is_some_and(|l| items.len() >= l) {
            remaining += 1;
            continue;
        }
        last_key = Some((obj.namespace().to_owned(), obj.name().to_owned()));
        items.push(obj);
    }
    let continue_token = (remaining > 0)
        .then(|| last_key.map(|k| encode_continue(rv, &k)))
        .flatten();
    Ok(Page {
        items,
        resource_version: rv,
        remaining: (remaining > 0).then_some(remaining),
        continue_token,
    })
}

/// The state at resourceVersion `rv` of the objects after `after` that changed since: each
/// key's first later event carries its earlier state (`None`: created since). A token older
/// than the event log is 410 Expired.
fn changes_since(
    state: &State,
    info: &ResourceInfo,
    namespace: Option<&str>,
    rv: u64,
    after: &ObjectKey,
) -> Result<BTreeMap<ObjectKey, Option<Arc<Stored>>>, ApiError> {
    let expired = || {
        ApiError::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.",
        )
    };
    let later = state.all_events_after(rv).map_err(|_| expired())?;
    let mut at_rv: BTreeMap<ObjectKey, Option<Arc<Stored>>> = BTreeMap::new();
    for e in later.iter().filter(|e| *e.storage_key == *info.storage_key) {
        let key = (e.object.namespace().to_owned(), e.object.name().to_owned());
        if key <= *after || namespace.is_some_and(|ns| ns != key.0) {
            continue;
        }
        at_rv.entry(key).or_insert_with(|| e.previous.clone());
    }
    Ok(at_rv)
}

/// The objects as they were at the list's resourceVersion, so that every page of a paged list
/// shows one consistent state: the current objects in key order, merged with `changes` (the
/// earlier state of what changed since; objects created since are left out).
fn snapshot<'a>(
    current: impl Iterator<Item = &'a Arc<Stored>> + 'a,
    changes: BTreeMap<ObjectKey, Option<Arc<Stored>>>,
) -> impl Iterator<Item = Arc<Stored>> + 'a {
    let mut current = current.peekable();
    let mut changes = changes.into_iter().peekable();
    std::iter::from_fn(move || {
        loop {
            let Some((changed, _)) = changes.peek() else {
                return current.next().cloned();
            };
            let order = current
                .peek()
                .map(|o| (o.namespace(), o.name()).cmp(&(changed.0.as_str(), changed.1.as_str())));
            match order {
                Some(std::cmp::Ordering::Less) => return current.next().cloned(),
                Some(same_or_later) => {
                    if same_or_later == std::cmp::Ordering::Equal {
                        current.next();
                    }
                    if let Some((_, Some(then))) = changes.next() {
                        return Some(then);
                    }
                }
                None => {
                    if let Some((_, Some(then))) = changes.next() {
                        return Some(then);
                    }
                }
            }
        }
    })
}

fn encode_continue(rv: u64, key: &ObjectKey) -> String {
    let token = json!({"v": "meta.k8s.io/v1", "rv": rv, "start": [key.0, key.1]});
    base64::engine::general_purpose::URL_SAFE.encode(token.to_string())
}

fn decode_continue(token: &str) -> Result<(u64, ObjectKey), ApiError> {
    let bad = || ApiError::bad_request(format!("continue key is not valid: {token}"));
    let bytes = base64::engine::general_purpose::URL_SAFE
        .decode(token)
        .map_err(|_| bad())?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|_| bad())?;
    let rv = value.get("rv").and_then(Value::as_u64).ok_or_else(bad)?;
    let ns = value
        .pointer("/start/0")
        .and_then(Value::as_str)
        .ok_or_else(bad)?;
    let name = value
        .pointer("/start/1")
        .and_then(Value::as_str)
        .ok_or_else(bad)?;
    Ok((rv, (ns.to_owned(), name.to_owned())))
}

/// Serializes an object for `info`'s version, reusing the stored bytes when no conversion is needed.
pub fn object_json(info: &ResourceInfo, stored: &Stored) -> bytes::Bytes {
    if convert::is_storage_form(info)
        && stored.value.get("apiVersion").and_then(Value::as_str)
            == Some(info.storage_api_version.as_str())
    {
        return stored.json.clone();
    }
    let converted = convert::from_storage(info, &stored.value);
    bytes::Bytes::from(serde_json::to_vec(converted.as_ref()).unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::store::Store;

    #[test]
    fn pages_through_a_namespace() {
        let store = Store::new(100);
        for i in 0..5 {
            let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "a", "name": format!("c{i}"), "labels": {"n": i.to_string()}}});
            store.write(|s| s.put("/configmaps", obj));
        }
        let info = crate::registry::resources::Registry::builtin()
            .get("", "v1", "configmaps")
            .expect("builtin");
        let state = store.read();
        let filter = Filter::new(&info, Some("a"), "n!=3", "").expect("valid");
        let first = list(&state, &info, &filter, Some(2), None).expect("page");
        assert_eq!(first.items.len(), 2);
        assert_eq!(first.remaining, Some(2));
        let token = first.continue_token.expect("more");
        let second = list(&state, &info, &filter, Some(2), Some(&token)).expect("page");
        let names: Vec<&str> = second.items.iter().map(|o| o.name()).collect();
        assert_eq!(names, vec!["c2", "c4"]);
        assert!(second.continue_token.is_none());
        assert!(Filter::new(&info, None, "", "spec.nodeName=x").is_err());
        assert!(list(&state, &info, &filter, None, Some("garbage")).is_err());
    }
}
