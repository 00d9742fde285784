//! Version conversion between what a client sends/reads and what is stored.
//!
//! Custom resources are stored at one version and served at all of them; without conversion
//! webhooks (the `None` strategy) only `apiVersion` changes. core/v1 and events.k8s.io/v1 Events
//! are one stored resource with renamed fields, so both APIs see the same events.

use std::borrow::Cow;

use serde_json::Value;

use crate::registry::resources::ResourceInfo;

/// core/v1 Event field ↔ events.k8s.io/v1 Event field, for the fields that were renamed.
const EVENT_RENAMES: &[(&str, &str)] = &[
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
];

fn is_events_v1(info: &ResourceInfo) -> bool {
    info.group == "events.k8s.io"
}

fn rename(obj: &mut Value, from_to: impl Iterator<Item = (&'static str, &'static str)>) {
    if let Value::Object(map) = obj {
        for (from, to) in from_to {
            if let Some(v) = map.remove(from) {
                map.insert(to.to_owned(), v);
            }
        }
    }
}

/// Converts an object received at `info`'s version to the stored form.
pub fn to_storage(info: &ResourceInfo, mut obj: Value) -> Value {
    if is_events_v1(info) {
        rename(
            &mut obj,
            EVENT_RENAMES.iter().map(|(core, v1)| (*v1, *core)),
        );
    }
    set_api_version(&mut obj, &info.storage_api_version, &info.kind);
    obj
}

/// The stored object as `info`'s version shows it (borrowed when nothing changes).
pub fn from_storage<'a>(info: &ResourceInfo, stored: &'a Value) -> Cow<'a, Value> {
    let wanted = info.api_version();
    if stored.get("apiVersion").and_then(Value::as_str) == Some(wanted.as_str()) {
        return Cow::Borrowed(stored);
    }
    let mut obj = stored.clone();
    if is_events_v1(info) {
        rename(&mut obj, EVENT_RENAMES.iter().copied());
    }
    set_api_version(&mut obj, &wanted, &info.kind);
    Cow::Owned(obj)
}

/// Whether the stored form can be sent as is.
pub fn is_storage_form(info: &ResourceInfo) -> bool {
    info.api_version() == info.storage_api_version
}

fn set_api_version(obj: &mut Value, api_version: &str, kind: &str) {
    if let Value::Object(map) = obj {
        map.insert("apiVersion".into(), Value::String(api_version.to_owned()));
        map.insert("kind".into(), Value::String(kind.to_owned()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::resources::Registry;
    use serde_json::json;

    #[test]
    fn events_convert_both_ways() {
        let r = Registry::builtin();
        let v1 = r.get("events.k8s.io", "v1", "events").expect("served");
        let sent = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "note": "hi", "regarding": {"name": "p"}, "reason": "R"});
        let stored = to_storage(&v1, sent.clone());
        assert_eq!(stored["apiVersion"], "v1");
        assert_eq!(stored["message"], "hi");
        assert_eq!(stored["involvedObject"]["name"], "p");
        assert_eq!(from_storage(&v1, &stored).into_owned(), sent);
        let core = r.get("", "v1", "events").expect("served");
        assert!(matches!(from_storage(&core, &stored), Cow::Borrowed(_)));
    }
}
