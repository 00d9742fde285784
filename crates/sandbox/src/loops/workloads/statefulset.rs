//! The StatefulSet controller (`pkg/controller/statefulset`, v1.28): pods with stable ordinal
//! names `<set>-<i>`, created in order and each only once its predecessors are Running and
//! Ready (`OrderedReady`) or all at once (`Parallel`), removed from the highest ordinal down,
//! updated from the highest ordinal down to `partition` (RollingUpdate) or left alone
//! (OnDelete); template revisions are ControllerRevisions named `<set>-<hash>`.
//!
//! [`plan`] and [`status`] are pure; [`sync`] reads the store and writes what they decided.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::hash::pod_template_hash;
use super::{apply, claim, pods};
use crate::registry::meta;
use crate::registry::store::State;

pub const STORAGE: &str = "apps/statefulsets";
pub(super) const REVISIONS: &str = "apps/controllerrevisions";
/// The pod label naming the ControllerRevision a pod was made from.
pub const REVISION_LABEL: &str = "controller-revision-hash";
const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";
const HASH_LABEL: &str = "controller.kubernetes.io/hash";

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

/// The ordinal of a pod named `<set>-<i>`, if it is one of the set's.
pub fn ordinal(set: &str, pod: &str) -> Option<i64> {
    pod.strip_prefix(set)?
        .strip_prefix('-')?
        .parse::<i64>()
        .ok()
        .filter(|i| *i >= 0)
}

fn running_and_ready(pod: &Value) -> bool {
    pods::phase(pod) == "Running" && pods::is_ready(pod)
}

fn revision_of(pod: &Value) -> &str {
    meta::labels(pod)
        .and_then(|l| l.get(REVISION_LABEL))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// One step of a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// Create the pod with this ordinal from the given revision.
    Create { ordinal: i64, revision: String },
    /// Delete this pod.
    Delete(String),
}

/// The steps towards the spec, given the set's pods (by name) and its current and update
/// revisions, as `updateStatefulSet` orders them.
pub fn plan(set: &Value, owned: &[&Value], current: &str, update: &str) -> Vec<Action> {
    let name = meta::name(set);
    let replicas = int(set, "/spec/replicas").max(0);
    let parallel = set
        .pointer("/spec/podManagementPolicy")
        .and_then(Value::as_str)
        == Some("Parallel");
    let rolling = set
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    let partition = int(set, "/spec/updateStrategy/rollingUpdate/partition");
    let mut slots: Vec<Option<&Value>> = vec![None; replicas as usize];
    let mut condemned: Vec<(i64, &Value)> = Vec::new();
    for pod in owned {
        match ordinal(name, meta::name(pod)) {
            Some(i) if i < replicas => slots[i as usize] = Some(pod),
            Some(i) => condemned.push((i, pod)),
            None => {}
        }
    }
    condemned.sort_by_key(|(i, _)| std::cmp::Reverse(*i));
    let mut actions = Vec::new();
    for (i, slot) in slots.iter().enumerate() {
        let i = i as i64;
        match slot {
            None => {
                // Ordinals below the partition keep the current revision.
                let revision = if rolling && i < partition {
                    current
                } else {
                    update
                };
                actions.push(Action::Create {
                    ordinal: i,
                    revision: revision.to_owned(),
                });
                if !parallel {
                    return actions;
                }
            }
            Some(pod)
                if matches!(pods::phase(pod), "Failed" | "Succeeded")
                    && !meta::is_deleting(pod) =>
            {
                // A finished pod is replaced under the same name.
                actions.push(Action::Delete(meta::name(pod).to_owned()));
                if !parallel {
                    return actions;
                }
            }
            Some(pod) if !parallel && (meta::is_deleting(pod) || !running_and_ready(pod)) => {
                return actions;
            }
            Some(_) => {}
        }
    }
    // Scale down from the highest ordinal; in order, one at a time once the rest is healthy.
    for (_, pod) in &condemned {
        if meta::is_deleting(pod) {
            if parallel {
                continue;
            }
            return actions;
        }
        actions.push(Action::Delete(meta::name(pod).to_owned()));
        if !parallel {
            return actions;
        }
    }
    if !actions.is_empty() || !rolling {
        return actions;
    }
    // Rolling update: from the highest ordinal down to the partition, one pod at a time.
    for i in (partition.max(0)..replicas).rev() {
        let Some(pod) = slots[i as usize] else {
            continue;
        };
        if revision_of(pod) != update && !meta::is_deleting(pod) {
            return vec![Action::Delete(meta::name(pod).to_owned())];
        }
        if meta::is_deleting(pod) || !running_and_ready(pod) {
            return Vec::new();
        }
    }
    Vec::new()
}

/// The status the set reports (`computeReplicaStatus` and `completeRollingUpdate`).
pub fn status(
    set: &Value,
    owned: &[&Value],
    current: &str,
    update: &str,
    now: DateTime<Utc>,
) -> Value {
    let name = meta::name(set);
    let min_ready = int(set, "/spec/minReadySeconds");
    let members: Vec<&&Value> = owned
        .iter()
        .filter(|p| ordinal(name, meta::name(p)).is_some())
        .collect();
    let created = |p: &Value| !pods::phase(p).is_empty();
    let count = |f: &dyn Fn(&Value) -> bool| members.iter().filter(|p| f(p)).count() as i64;
    let replicas = count(&|p| created(p));
    let ready = count(&|p| running_and_ready(p));
    let available = count(&|p| running_and_ready(p) && pods::is_available(p, min_ready, now));
    let live = |p: &Value| created(p) && !meta::is_deleting(p);
    let mut current_replicas = count(&|p| live(p) && revision_of(p) == current);
    let updated = count(&|p| live(p) && revision_of(p) == update);
    let mut current_revision = current.to_owned();
    let rolling = set
        .pointer("/spec/updateStrategy/type")
        .and_then(Value::as_str)
        != Some("OnDelete");
    if rolling && updated == replicas && ready == replicas {
        current_revision = update.to_owned();
        current_replicas = updated;
    }
    let mut out = Map::new();
    out.insert(
        "observedGeneration".into(),
        json!(int(set, "/metadata/generation")),
    );
    out.insert("replicas".into(), json!(replicas));
    if ready > 0 {
        out.insert("readyReplicas".into(), json!(ready));
    }
    if current_replicas > 0 {
        out.insert("currentReplicas".into(), json!(current_replicas));
    }
    if updated > 0 {
        out.insert("updatedReplicas".into(), json!(updated));
    }
    out.insert("currentRevision".into(), json!(current_revision));
    out.insert("updateRevision".into(), json!(update));
    out.insert(
        "collisionCount".into(),
        json!(int(set, "/status/collisionCount")),
    );
    out.insert("availableReplicas".into(), json!(available));
    Value::Object(out)
}

/// The revision's recorded template, as the ControllerRevision's `data` holds it.
fn revision_data(set: &Value) -> Value {
    let mut template = set.pointer("/spec/template").cloned().unwrap_or_default();
    meta::object_mut(&mut template).insert("$patch".into(), json!("replace"));
    json!({"spec": {"template": template}})
}

/// The ControllerRevision of the set's current template: found or created. Returns its name.
/// Shared with DaemonSets (`kind`), whose revisions have the same shape.
pub(super) fn update_revision(
    state: &mut State,
    set: &Value,
    revisions: &[Value],
    kind: &str,
) -> Option<String> {
    let data = revision_data(set);
    if let Some(existing) = revisions.iter().find(|r| r.get("data") == Some(&data)) {
        return Some(meta::name(existing).to_owned());
    }
    let collision = set
        .pointer("/status/collisionCount")
        .and_then(Value::as_u64)
        .map(|c| c as u32);
    let hash = pod_template_hash(&data, collision);
    let name = format!("{}-{hash}", meta::name(set));
    let next = revisions
        .iter()
        .map(|r| int(r, "/revision"))
        .max()
        .unwrap_or(0)
        + 1;
    let mut labels = set
        .pointer("/spec/template/metadata/labels")
        .cloned()
        .unwrap_or_else(|| json!({}));
    meta::object_mut(&mut labels).insert(HASH_LABEL.into(), json!(hash));
    let body = json!({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": name, "namespace": meta::namespace(set), "labels": labels,
                     "ownerReferences": [pods::controller_ref("apps/v1", kind, set)]},
        "data": data,
        "revision": next,
    });
    apply::create(
        state,
        "apps",
        "controllerrevisions",
        meta::namespace(set),
        body,
    )
    .ok()
    .map(|_| name)
}

/// A pod of the set from a revision's template.
fn new_pod(set: &Value, ordinal: i64, revision: &str, template: &Value) -> Value {
    let set_name = meta::name(set);
    let pod_name = format!("{set_name}-{ordinal}");
    let mut pod = pods::pod_from_template(
        template,
        "",
        pods::controller_ref("apps/v1", "StatefulSet", set),
    );
    let metadata = meta::meta_mut(&mut pod);
    metadata.remove("generateName");
    metadata.insert("name".into(), json!(pod_name));
    let labels = meta::object_mut(metadata.entry("labels").or_insert_with(|| json!({})));
    labels.insert(REVISION_LABEL.into(), json!(revision));
    labels.insert(POD_NAME_LABEL.into(), json!(pod_name));
    labels.insert(POD_INDEX_LABEL.into(), json!(ordinal.to_string()));
    let spec = meta::object_mut(&mut pod["spec"]);
    spec.insert("hostname".into(), json!(pod_name));
    if let Some(service) = set
        .pointer("/spec/serviceName")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
    {
        spec.insert("subdomain".into(), json!(service));
    }
    pod
}

/// Syncs one StatefulSet; returns when to look again, if a timer is needed.
pub fn sync(state: &mut State, ns: &str, name: &str, now: DateTime<Utc>) -> Option<Duration> {
    let set = state.get(STORAGE, ns, name)?.value.clone();
    if meta::is_deleting(&set) {
        return None;
    }
    let uid = meta::meta_str(&set, "uid").to_owned();
    let revisions: Vec<Value> = state
        .range(REVISIONS, Some(ns), None)
        .filter(|r| pods::controller_uid(&r.value) == Some(uid.as_str()))
        .map(|r| r.value.clone())
        .collect();
    let update = update_revision(state, &set, &revisions, "StatefulSet")?;
    let current = set
        .pointer("/status/currentRevision")
        .and_then(Value::as_str)
        .filter(|c| revisions.iter().any(|r| meta::name(r) == *c))
        .unwrap_or(&update)
        .to_owned();
    let candidates: Vec<Value> = state
        .range("/pods", Some(ns), None)
        .map(|p| p.value.clone())
        .collect();
    let refs: Vec<&Value> = candidates.iter().collect();
    let claimed = claim::claim(&set, &refs, set.pointer("/spec/selector"));
    let reference = pods::controller_ref("apps/v1", "StatefulSet", &set);
    let mut owned = Vec::new();
    for pod in &claimed.owned {
        if claimed.adopt.iter().any(|a| std::ptr::eq(*a, *pod)) {
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
    let st = status(&set, &owned_refs, &current, &update, now);
    if set.get("status") != Some(&st) {
        let mut body = set.clone();
        body["status"] = st;
        let _ = apply::update_status(state, "apps", "statefulsets", body);
    }
    for action in plan(&set, &owned_refs, &current, &update) {
        match action {
            Action::Create { ordinal, revision } => {
                let template = state
                    .get(REVISIONS, ns, &revision)
                    .and_then(|r| r.value.pointer("/data/spec/template").cloned())
                    .map(|mut t| {
                        meta::object_mut(&mut t).remove("$patch");
                        t
                    })
                    .or_else(|| set.pointer("/spec/template").cloned())
                    .unwrap_or_default();
                let _ = apply::create(
                    state,
                    "",
                    "pods",
                    ns,
                    new_pod(&set, ordinal, &revision, &template),
                );
            }
            Action::Delete(pod) => {
                let _ = apply::delete(state, "", "pods", ns, &pod);
            }
        }
    }
    // Availability after minReadySeconds needs a wake-up of its own.
    let min_ready = int(&set, "/spec/minReadySeconds");
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

    fn set(replicas: i64, policy: &str) -> Value {
        json!({"metadata": {"name": "db", "uid": "s1", "generation": 1},
               "spec": {"replicas": replicas, "podManagementPolicy": policy,
                        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}}})
    }

    fn pod(i: i64, ready: bool, revision: &str) -> Value {
        json!({"metadata": {"name": format!("db-{i}"), "labels": {REVISION_LABEL: revision}},
               "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready {"True"} else {"False"}}]}})
    }

    fn create(i: i64) -> Action {
        Action::Create {
            ordinal: i,
            revision: "r1".into(),
        }
    }

    #[test]
    fn ordinals_are_parsed_from_names() {
        assert_eq!(ordinal("db", "db-12"), Some(12));
        assert_eq!(ordinal("db", "db-x"), None);
        assert_eq!(ordinal("db", "dbx-1"), None);
    }

    #[test]
    fn ordered_ready_creates_one_pod_at_a_time_parallel_all_at_once() {
        assert_eq!(
            plan(&set(3, "OrderedReady"), &[], "r1", "r1"),
            vec![create(0)]
        );
        let p0 = pod(0, false, "r1");
        assert!(
            plan(&set(3, "OrderedReady"), &[&p0], "r1", "r1").is_empty(),
            "waits for db-0"
        );
        let p0 = pod(0, true, "r1");
        assert_eq!(
            plan(&set(3, "OrderedReady"), &[&p0], "r1", "r1"),
            vec![create(1)]
        );
        assert_eq!(
            plan(&set(3, "Parallel"), &[], "r1", "r1"),
            vec![create(0), create(1), create(2)]
        );
    }

    #[test]
    fn scale_down_removes_the_highest_ordinal_first() {
        let pods: Vec<Value> = (0..3).map(|i| pod(i, true, "r1")).collect();
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(
            plan(&set(1, "OrderedReady"), &refs, "r1", "r1"),
            vec![Action::Delete("db-2".into())]
        );
        assert_eq!(
            plan(&set(1, "Parallel"), &refs, "r1", "r1"),
            vec![Action::Delete("db-2".into()), Action::Delete("db-1".into())]
        );
    }

    #[test]
    fn rolling_update_goes_from_the_top_down() {
        let pods: Vec<Value> = vec![pod(0, true, "r1"), pod(1, true, "r1"), pod(2, true, "r2")];
        let refs: Vec<&Value> = pods.iter().collect();
        assert_eq!(
            plan(&set(3, "OrderedReady"), &refs, "r1", "r2"),
            vec![Action::Delete("db-1".into())]
        );
        let now = pods::parse_time("2026-01-01T00:00:00Z").expect("time");
        let s = status(&set(3, "OrderedReady"), &refs, "r1", "r2", now);
        assert_eq!(s["currentReplicas"], 2);
        assert_eq!(s["updatedReplicas"], 1);
        assert_eq!(s["currentRevision"], "r1");
        let done: Vec<Value> = (0..3).map(|i| pod(i, true, "r2")).collect();
        let refs: Vec<&Value> = done.iter().collect();
        let s = status(&set(3, "OrderedReady"), &refs, "r1", "r2", now);
        assert_eq!(
            (s["currentRevision"].as_str(), s["currentReplicas"].as_i64()),
            (Some("r2"), Some(3))
        );
        assert_eq!(s["readyReplicas"], 3);
    }
}
