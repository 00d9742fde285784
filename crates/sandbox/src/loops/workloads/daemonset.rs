//! The DaemonSet controller (`pkg/controller/daemon`, v1.28): one pod per Ready node that the
//! template's `nodeSelector` admits, pinned to it by a required node affinity on
//! `metadata.name` (the scheduler, here the simulated kubelet, binds it), with the tolerations
//! the real controller adds; pods on nodes no longer wanted are deleted; RollingUpdate replaces
//! outdated pods `maxUnavailable` at a time. Revisions are ControllerRevisions as for
//! StatefulSets; pods carry `controller-revision-hash` (the bare hash) and
//! `pod-template-generation`.
//!
//! [`plan`] is pure; [`sync`] reads the store and writes what it decided.

use std::collections::BTreeMap;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{apply, claim, pods, statefulset};
use crate::registry::meta;
use crate::registry::store::State;

pub const STORAGE: &str = "apps/daemonsets";
const HASH_LABEL: &str = "controller-revision-hash";

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// Whether a node is Ready and the template's nodeSelector admits it.
pub fn wants(ds: &Value, node: &Value) -> bool {
    let ready = node
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| c["type"] == "Ready" && c["status"] == "True");
    let labels = meta::labels(node);
    let selected = ds
        .pointer("/spec/template/spec/nodeSelector")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v));
    ready && selected
}

/// The node a pod is for: its nodeName, else its required `metadata.name` affinity.
pub fn node_of(pod: &Value) -> Option<String> {
    if let Some(n) = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
    {
        return Some(n.to_owned());
    }
    pod.pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms/0/matchFields/0/values/0")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// What one sync does.
#[derive(Debug, PartialEq)]
pub struct Plan {
    /// Nodes that need a pod.
    pub create: Vec<String>,
    /// Pods to delete (surplus, misscheduled, or outdated within maxUnavailable).
    pub delete: Vec<String>,
    pub status: Value,
}

/// The DaemonSet's next step given the wanted nodes, its active pods and its current hash.
pub fn plan(
    ds: &Value,
    wanted: &[String],
    owned: &[&Value],
    hash: &str,
    now: DateTime<Utc>,
) -> Plan {
    let min_ready = int(ds, "/spec/minReadySeconds");
    let mut by_node: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for pod in owned {
        if let Some(node) = node_of(pod) {
            by_node.entry(node).or_default().push(pod);
        }
    }
    let (mut create, mut delete) = (Vec::new(), Vec::new());
    let mut misscheduled = 0;
    for (node, list) in &by_node {
        if !wanted.contains(node) {
            misscheduled += 1;
            delete.extend(
                list.iter()
                    .filter(|p| !meta::is_deleting(p))
                    .map(|p| meta::name(p).to_owned()),
            );
        } else if list.len() > 1 {
            let mut ranked = list.clone();
            ranked.sort_by_key(|p| pods::deletion_rank(p));
            delete.extend(
                ranked
                    .iter()
                    .take(list.len() - 1)
                    .map(|p| meta::name(p).to_owned()),
            );
        }
    }
    let on_wanted: Vec<&Value> = wanted
        .iter()
        .filter_map(|n| {
            by_node
                .get(n)
                .and_then(|l| l.iter().find(|p| !meta::is_deleting(p)))
                .copied()
        })
        .collect();
    for node in wanted {
        let has = by_node.get(node).is_some_and(|l| !l.is_empty());
        if !has {
            create.push(node.clone());
        }
    }
    let label = |p: &Value| {
        meta::labels(p)
            .and_then(|l| l.get(HASH_LABEL))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let ready = on_wanted.iter().filter(|p| pods::is_ready(p)).count() as i64;
    let available = on_wanted
        .iter()
        .filter(|p| pods::is_available(p, min_ready, now))
        .count() as i64;
    let updated = on_wanted
        .iter()
        .filter(|p| label(p).as_deref() == Some(hash))
        .count() as i64;
    let desired = wanted.len() as i64;
    let rolling = ds
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    if rolling && create.is_empty() && delete.is_empty() {
        // Replace outdated pods while no more than maxUnavailable are unavailable.
        let max_unavailable = match ds.pointer("/spec/updateStrategy/rollingUpdate/maxUnavailable")
        {
            Some(Value::String(p)) => p
                .trim_end_matches('%')
                .parse::<i64>()
                .map_or(1, |pct| (pct * desired / 100).max(1)),
            Some(v) => v.as_i64().unwrap_or(1).max(1),
            None => 1,
        };
        let unavailable = desired - available;
        let budget = (max_unavailable - unavailable).max(0) as usize;
        delete.extend(
            on_wanted
                .iter()
                .filter(|p| label(p).as_deref() != Some(hash))
                .take(budget)
                .map(|p| meta::name(p).to_owned()),
        );
    }
    let mut status = Map::new();
    status.insert(
        "currentNumberScheduled".into(),
        json!(desired - create.len() as i64),
    );
    status.insert("desiredNumberScheduled".into(), json!(desired));
    status.insert("numberMisscheduled".into(), json!(misscheduled));
    status.insert("numberReady".into(), json!(ready));
    if available > 0 {
        status.insert("numberAvailable".into(), json!(available));
    }
    if desired - available > 0 {
        status.insert("numberUnavailable".into(), json!(desired - available));
    }
    status.insert(
        "observedGeneration".into(),
        json!(int(ds, "/metadata/generation")),
    );
    if updated > 0 {
        status.insert("updatedNumberScheduled".into(), json!(updated));
    }
    Plan {
        create,
        delete,
        status: Value::Object(status),
    }
}

/// Tolerations the real controller adds to every daemon pod.
fn tolerations() -> Vec<Value> {
    let mut out = vec![
        json!({"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}),
        json!({"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}),
    ];
    for key in [
        "disk-pressure",
        "memory-pressure",
        "pid-pressure",
        "unschedulable",
    ] {
        out.push(json!({"key": format!("node.kubernetes.io/{key}"), "operator": "Exists", "effect": "NoSchedule"}));
    }
    out
}

fn new_pod(ds: &Value, node: &str, hash: &str) -> Value {
    let template = ds.pointer("/spec/template").cloned().unwrap_or_default();
    let mut pod = pods::pod_from_template(
        &template,
        &format!("{}-", meta::name(ds)),
        pods::controller_ref("apps/v1", "DaemonSet", ds),
    );
    let labels = meta::object_mut(
        meta::meta_mut(&mut pod)
            .entry("labels")
            .or_insert_with(|| json!({})),
    );
    labels.insert(HASH_LABEL.into(), json!(hash));
    labels.insert(
        "pod-template-generation".into(),
        json!(int(ds, "/metadata/generation").to_string()),
    );
    let spec = meta::object_mut(&mut pod["spec"]);
    let affinity = meta::object_mut(spec.entry("affinity").or_insert_with(|| json!({})));
    affinity.insert(
        "nodeAffinity".into(),
        json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}),
    );
    let list = spec.entry("tolerations").or_insert_with(|| json!([]));
    if let Value::Array(list) = list {
        for t in tolerations() {
            if !list
                .iter()
                .any(|x| x.get("key") == t.get("key") && x.get("effect") == t.get("effect"))
            {
                list.push(t);
            }
        }
    }
    pod
}

/// Syncs one DaemonSet; returns when to look again, if a timer is needed.
pub fn sync(state: &mut State, ns: &str, name: &str, now: DateTime<Utc>) -> Option<Duration> {
    let ds = state.get(STORAGE, ns, name)?.value.clone();
    if meta::is_deleting(&ds) {
        return None;
    }
    let uid = meta::meta_str(&ds, "uid").to_owned();
    let revisions: Vec<Value> = state
        .range(statefulset::REVISIONS, Some(ns), None)
        .filter(|r| pods::controller_uid(&r.value) == Some(uid.as_str()))
        .map(|r| r.value.clone())
        .collect();
    let revision = statefulset::update_revision(state, &ds, &revisions, "DaemonSet")?;
    let hash = revision.rsplit('-').next().unwrap_or_default().to_owned();
    let wanted: Vec<String> = state
        .range("/nodes", None, None)
        .filter(|n| wants(&ds, &n.value))
        .map(|n| n.name().to_owned())
        .collect();
    let candidates: Vec<Value> = state
        .range("/pods", Some(ns), None)
        .filter(|p| pods::is_active(&p.value))
        .map(|p| p.value.clone())
        .collect();
    let refs: Vec<&Value> = candidates.iter().collect();
    let claimed = claim::claim(&ds, &refs, ds.pointer("/spec/selector"));
    let owned: Vec<&Value> = claimed
        .owned
        .iter()
        .copied()
        .filter(|p| !claimed.adopt.iter().any(|a| std::ptr::eq(*a, *p)))
        .collect();
    let plan = plan(&ds, &wanted, &owned, &hash, now);
    if ds.get("status") != Some(&plan.status) {
        let mut body = ds.clone();
        body["status"] = plan.status;
        let _ = apply::update_status(state, "apps", "daemonsets", body);
    }
    for pod in &plan.delete {
        let _ = apply::delete(state, "", "pods", ns, pod);
    }
    for node in &plan.create {
        let _ = apply::create(state, "", "pods", ns, new_pod(&ds, node, &hash));
    }
    let min_ready = int(&ds, "/spec/minReadySeconds");
    owned
        .iter()
        .filter_map(|p| pods::available_at(p, min_ready))
        .filter(|at| *at > now && min_ready > 0)
        .min()
        .and_then(|at| (at - now).to_std().ok())
        .map(|d| d + Duration::from_millis(50))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds() -> Value {
        json!({"metadata": {"name": "ds", "generation": 1},
               "spec": {"template": {"spec": {"nodeSelector": {"role": "edge"}}}}})
    }

    fn node(name: &str, ready: bool, role: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {"role": role}},
               "status": {"conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    fn pod(name: &str, node: &str, hash: &str) -> Value {
        json!({"metadata": {"name": name, "labels": {HASH_LABEL: hash}}, "spec": {"nodeName": node},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}})
    }

    #[test]
    fn only_ready_selected_nodes_are_wanted() {
        assert!(wants(&ds(), &node("a", true, "edge")));
        assert!(!wants(&ds(), &node("b", false, "edge")));
        assert!(!wants(&ds(), &node("c", true, "core")));
        let p = new_pod(&ds(), "a", "h1");
        assert_eq!(node_of(&p).as_deref(), Some("a"));
        assert_eq!(p["metadata"]["labels"]["pod-template-generation"], "1");
    }

    #[test]
    fn one_pod_per_wanted_node_and_none_elsewhere() {
        let now = pods::parse_time("2026-01-01T00:00:00Z").expect("time");
        let (a, stray) = (pod("p1", "a", "h1"), pod("p2", "gone", "h1"));
        let plan = plan(&ds(), &["a".into(), "b".into()], &[&a, &stray], "h1", now);
        assert_eq!(plan.create, vec!["b".to_owned()]);
        assert_eq!(plan.delete, vec!["p2".to_owned()]);
        assert_eq!(plan.status["desiredNumberScheduled"], 2);
        assert_eq!(plan.status["currentNumberScheduled"], 1);
        assert_eq!(plan.status["numberMisscheduled"], 1);
    }

    #[test]
    fn outdated_pods_are_replaced_one_at_a_time() {
        let now = pods::parse_time("2026-01-01T00:00:00Z").expect("time");
        let (a, b) = (pod("p1", "a", "old"), pod("p2", "b", "old"));
        let plan = plan(&ds(), &["a".into(), "b".into()], &[&a, &b], "new", now);
        assert_eq!(plan.delete.len(), 1);
    }
}
