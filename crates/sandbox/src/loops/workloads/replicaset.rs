//! The ReplicaSet controller (`pkg/controller/replicaset`): claims the active pods its selector
//! matches (adopting orphans, releasing pods that stopped matching), creates or deletes pods
//! until `spec.replicas` are active, and reports status.
//!
//! [`decide`] is pure (claiming is in `claim.rs`); [`sync`] reads the store and writes what they decided.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{apply, claim, pods};
use crate::registry::meta;
use crate::registry::store::State;

pub const STORAGE: &str = "apps/replicasets";
const PODS: &str = "/pods";
/// At most this many pods are created or deleted per sync, as upstream's `burstReplicas`.
const BURST: usize = 500;

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// What one sync of a ReplicaSet does.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Pods to create.
    pub create: usize,
    /// Names of pods to delete.
    pub delete: Vec<String>,
    /// The status to report.
    pub status: Value,
    /// Look again then: a Ready pod becomes available after `minReadySeconds`.
    pub requeue: Option<Duration>,
}

/// The ReplicaSet's next step, given the active pods it owns.
pub fn decide(rs: &Value, owned: &[&Value], now: DateTime<Utc>) -> Plan {
    let replicas = int(rs, "/spec/replicas").max(0) as usize;
    let min_ready = int(rs, "/spec/minReadySeconds");
    let deleting = meta::is_deleting(rs);
    let (mut create, mut delete) = (0, Vec::new());
    if !deleting {
        if owned.len() < replicas {
            create = (replicas - owned.len()).min(BURST);
        } else if owned.len() > replicas {
            let mut ranked: Vec<&&Value> = owned.iter().collect();
            ranked.sort_by_key(|p| pods::deletion_rank(p));
            delete = ranked
                .into_iter()
                .take((owned.len() - replicas).min(BURST))
                .map(|p| meta::name(p).to_owned())
                .collect();
        }
    }
    let template_labels = rs
        .pointer("/spec/template/metadata/labels")
        .and_then(Value::as_object);
    let fully_labeled = owned
        .iter()
        .filter(|p| {
            let labels = meta::labels(p);
            template_labels
                .into_iter()
                .flatten()
                .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
        })
        .count();
    let ready = owned.iter().filter(|p| pods::is_ready(p)).count();
    let available = owned
        .iter()
        .filter(|p| pods::is_available(p, min_ready, now))
        .count();
    // A Ready pod not yet available: wake up when the first one becomes so.
    let requeue = owned
        .iter()
        .filter_map(|p| pods::available_at(p, min_ready))
        .filter(|at| *at > now && min_ready > 0)
        .min()
        .and_then(|at| (at - now).to_std().ok())
        .map(|d| d + Duration::from_millis(50));
    let mut status = Map::new();
    status.insert("replicas".into(), json!(owned.len()));
    for (key, n) in [
        ("fullyLabeledReplicas", fully_labeled),
        ("readyReplicas", ready),
        ("availableReplicas", available),
    ] {
        if n > 0 {
            status.insert(key.into(), json!(n));
        }
    }
    let generation = int(rs, "/metadata/generation");
    if generation > 0 {
        status.insert("observedGeneration".into(), json!(generation));
    }
    if let Some(conditions) = rs.pointer("/status/conditions") {
        status.insert("conditions".into(), conditions.clone());
    }
    Plan {
        create,
        delete,
        status: Value::Object(status),
        requeue,
    }
}

/// Syncs one ReplicaSet; returns when to look again, if a timer is needed.
pub fn sync(state: &mut State, ns: &str, name: &str, now: DateTime<Utc>) -> Option<Duration> {
    let rs = state.get(STORAGE, ns, name)?.value.clone();
    let spec_selector = rs.pointer("/spec/selector").cloned();
    let candidates: Vec<std::sync::Arc<crate::registry::store::Stored>> = state
        .range(PODS, Some(ns), None)
        .filter(|p| pods::is_active(&p.value))
        .cloned()
        .collect();
    let values: Vec<&Value> = candidates.iter().map(|p| &p.value).collect();
    let claimed = claim::claim(&rs, &values, spec_selector.as_ref());
    let reference = pods::controller_ref("apps/v1", "ReplicaSet", &rs);
    let uid = meta::meta_str(&rs, "uid").to_owned();
    let mut owned: Vec<Value> = Vec::new();
    for pod in &claimed.owned {
        if claimed.adopt.iter().any(|a| std::ptr::eq(*a, *pod)) {
            // Adoption can lose a race (the pod changed): then it is simply not ours this pass.
            if let Ok(adopted) =
                apply::update(state, "", "pods", pods::with_owner(pod, reference.clone()))
            {
                owned.push(adopted);
            }
        } else {
            owned.push((*pod).clone());
        }
    }
    for pod in &claimed.release {
        let _ = apply::update(state, "", "pods", pods::without_owner(pod, &uid));
    }
    let owned_refs: Vec<&Value> = owned.iter().collect();
    let plan = decide(&rs, &owned_refs, now);
    let template = rs.pointer("/spec/template").cloned().unwrap_or_default();
    for _ in 0..plan.create {
        let pod = pods::pod_from_template(&template, &format!("{name}-"), reference.clone());
        if apply::create(state, "", "pods", ns, pod).is_err() {
            break;
        }
    }
    for pod in &plan.delete {
        let _ = apply::delete(state, "", "pods", ns, pod);
    }
    // Pods just created or deleted count from the next pass, which their events trigger.
    if rs.get("status") != Some(&plan.status) {
        let mut updated = rs.clone();
        updated["status"] = plan.status;
        let _ = apply::update_status(state, "apps", "replicasets", updated);
    }
    plan.requeue
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rs(replicas: i64) -> Value {
        json!({"metadata": {"name": "rs", "uid": "u-rs", "generation": 2},
               "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                        "template": {"metadata": {"labels": {"app": "web", "extra": "1"}}}}})
    }

    fn pod(name: &str, labels: Value, owner: Option<&str>, ready: bool) -> Value {
        let mut p = json!({"metadata": {"name": name, "labels": labels, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n"}, "status": {"phase": "Running",
            "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}, "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
        if let Some(uid) = owner {
            p["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true}]);
        }
        p
    }

    fn now() -> DateTime<Utc> {
        pods::parse_time("2026-01-01T00:01:00Z").expect("time")
    }

    #[test]
    fn creates_missing_pods_and_deletes_extra_not_ready_first() {
        let plan = decide(&rs(3), &[], now());
        assert_eq!(plan.create, 3);
        assert_eq!(plan.status, json!({"replicas": 0, "observedGeneration": 2}));
        let ready = pod("r", json!({"app": "web", "extra": "1"}), None, true);
        let not_ready = pod("n", json!({"app": "web"}), None, false);
        let plan = decide(&rs(1), &[&ready, &not_ready], now());
        assert_eq!(plan.delete, vec!["n".to_owned()]);
        assert_eq!(
            plan.status,
            json!({"replicas": 2, "fullyLabeledReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 2})
        );
    }

    #[test]
    fn min_ready_seconds_delays_availability_and_asks_for_a_wake_up() {
        let mut owner = rs(1);
        owner["spec"]["minReadySeconds"] = json!(90);
        let ready = pod("r", json!({"app": "web"}), None, true);
        let plan = decide(&owner, &[&ready], now());
        assert_eq!(plan.status["readyReplicas"], 1);
        assert!(plan.status.get("availableReplicas").is_none());
        let wake = plan.requeue.expect("requeue");
        assert!(wake >= Duration::from_secs(30) && wake < Duration::from_secs(31));
    }
}
