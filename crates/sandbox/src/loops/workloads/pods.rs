//! What the workload controllers read from pods and write on what they own: activity, readiness
//! and availability (`podutil.IsPodAvailable`), controller ownerReferences, and pods stamped
//! from a template (`controller.GetPodFromTemplate`).

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use crate::registry::meta;

/// A controller ownerReference, exactly as kube-controller-manager writes it.
pub fn controller_ref(api_version: &str, kind: &str, owner: &Value) -> Value {
    json!({
        "apiVersion": api_version,
        "kind": kind,
        "name": meta::name(owner),
        "uid": meta::meta_str(owner, "uid"),
        "controller": true,
        "blockOwnerDeletion": true,
    })
}

/// The uid of the object's controller (the ownerReference with `controller: true`).
pub fn controller_uid(obj: &Value) -> Option<&str> {
    controller_of(obj)
        .and_then(|r| r.get("uid"))
        .and_then(Value::as_str)
}

/// The ownerReference with `controller: true`, if any.
pub fn controller_of(obj: &Value) -> Option<&Value> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)?
        .iter()
        .find(|r| r.get("controller").and_then(Value::as_bool) == Some(true))
}

/// `obj` with `reference` added to its ownerReferences (adoption).
pub fn with_owner(obj: &Value, reference: Value) -> Value {
    let mut out = obj.clone();
    let meta = meta::meta_mut(&mut out);
    let refs = meta.entry("ownerReferences").or_insert_with(|| json!([]));
    if let Value::Array(list) = refs {
        list.push(reference);
    }
    out
}

/// `obj` without the ownerReference naming `uid` (release).
pub fn without_owner(obj: &Value, uid: &str) -> Value {
    let mut out = obj.clone();
    let meta = meta::meta_mut(&mut out);
    if let Some(Value::Array(list)) = meta.get_mut("ownerReferences") {
        list.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid));
        if list.is_empty() {
            meta.remove("ownerReferences");
        }
    }
    out
}

pub fn phase(pod: &Value) -> &str {
    pod.pointer("/status/phase")
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `controller.IsPodActive`: not finished and not being deleted.
pub fn is_active(pod: &Value) -> bool {
    !matches!(phase(pod), "Succeeded" | "Failed") && !meta::is_deleting(pod)
}

fn ready_condition(pod: &Value) -> Option<&Map<String, Value>> {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)?
        .iter()
        .filter_map(Value::as_object)
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"))
}

pub fn is_ready(pod: &Value) -> bool {
    ready_condition(pod)
        .and_then(|c| c.get("status"))
        .and_then(Value::as_str)
        == Some("True")
}

/// Parses a metav1.Time.
pub fn parse_time(text: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(text)
        .ok()
        .map(|t| t.with_timezone(&Utc))
}

/// When a Ready pod becomes available: its Ready transition plus `min_ready_seconds`.
/// None when it is not Ready.
pub fn available_at(pod: &Value, min_ready_seconds: i64) -> Option<DateTime<Utc>> {
    let cond = ready_condition(pod)?;
    if cond.get("status").and_then(Value::as_str) != Some("True") {
        return None;
    }
    let since = cond
        .get("lastTransitionTime")
        .and_then(Value::as_str)
        .and_then(parse_time)
        // A Ready pod with no transition time counts from the epoch, i.e. as available.
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    Some(since + chrono::Duration::seconds(min_ready_seconds.max(0)))
}

/// `podutil.IsPodAvailable`.
pub fn is_available(pod: &Value, min_ready_seconds: i64, now: DateTime<Utc>) -> bool {
    available_at(pod, min_ready_seconds).is_some_and(|at| min_ready_seconds == 0 || at <= now)
}

/// A pod from an owner's template: its labels, annotations, finalizers and spec, named
/// `{prefix}` + a generated suffix, controlled by `owner_ref`.
pub fn pod_from_template(template: &Value, generate_name: &str, owner_ref: Value) -> Value {
    let mut metadata = Map::new();
    for field in ["labels", "annotations", "finalizers"] {
        if let Some(v) = template.pointer(&format!("/metadata/{field}")) {
            metadata.insert(field.into(), v.clone());
        }
    }
    metadata.insert("generateName".into(), json!(generate_name));
    metadata.insert("ownerReferences".into(), json!([owner_ref]));
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template.get("spec").cloned().unwrap_or_else(|| json!({})),
    })
}

/// Rank for choosing which pods to delete first when scaling down (`controller.ActivePods`
/// ordering): unscheduled before scheduled, pending before running, not ready before ready,
/// recently ready before long ready, newer before older. Lower sorts first.
pub fn deletion_rank(
    pod: &Value,
) -> (
    bool,
    u8,
    bool,
    std::cmp::Reverse<String>,
    std::cmp::Reverse<String>,
) {
    let scheduled = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let phase_rank = match phase(pod) {
        "Pending" => 0,
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    };
    let ready_since = ready_condition(pod)
        .filter(|_| is_ready(pod))
        .and_then(|c| c.get("lastTransitionTime"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    (
        scheduled,
        phase_rank,
        is_ready(pod),
        std::cmp::Reverse(ready_since),
        std::cmp::Reverse(meta::meta_str(pod, "creationTimestamp").to_owned()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(ready: Option<&str>, node: Option<&str>, created: &str) -> Value {
        let mut p = json!({"metadata": {"name": "p", "creationTimestamp": created}, "spec": {}, "status": {"phase": "Pending"}});
        if let Some(n) = node {
            p["spec"]["nodeName"] = json!(n);
            p["status"]["phase"] = json!("Running");
        }
        if let Some(since) = ready {
            p["status"]["conditions"] =
                json!([{"type": "Ready", "status": "True", "lastTransitionTime": since}]);
        }
        p
    }

    #[test]
    fn availability_waits_min_ready_seconds_after_ready() {
        let now = parse_time("2026-01-01T00:00:10Z").expect("time");
        let p = pod(
            Some("2026-01-01T00:00:05Z"),
            Some("n"),
            "2026-01-01T00:00:00Z",
        );
        assert!(is_available(&p, 0, now));
        assert!(is_available(&p, 5, now));
        assert!(!is_available(&p, 6, now));
        assert!(!is_available(&pod(None, Some("n"), "x"), 0, now));
    }

    #[test]
    fn scale_down_prefers_unscheduled_then_not_ready_then_newest() {
        let unscheduled = pod(None, None, "2026-01-01T00:00:00Z");
        let not_ready = pod(None, Some("n"), "2026-01-01T00:00:00Z");
        let ready_old = pod(
            Some("2026-01-01T00:00:01Z"),
            Some("n"),
            "2026-01-01T00:00:00Z",
        );
        let ready_new = pod(
            Some("2026-01-01T00:00:09Z"),
            Some("n"),
            "2026-01-01T00:00:08Z",
        );
        let mut all = [&ready_old, &ready_new, &not_ready, &unscheduled];
        all.sort_by_key(|p| deletion_rank(p));
        assert_eq!(all, [&unscheduled, &not_ready, &ready_new, &ready_old]);
    }

    #[test]
    fn owner_references_are_added_and_released() {
        let owner = json!({"metadata": {"name": "rs", "uid": "u1"}});
        let r = controller_ref("apps/v1", "ReplicaSet", &owner);
        assert_eq!(r["controller"], true);
        assert_eq!(r["blockOwnerDeletion"], true);
        let adopted = with_owner(&json!({"metadata": {"name": "p"}}), r);
        assert_eq!(controller_uid(&adopted), Some("u1"));
        let released = without_owner(&adopted, "u1");
        assert!(released.pointer("/metadata/ownerReferences").is_none());
    }
}
