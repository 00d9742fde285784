//! The Deployment controller (`pkg/controller/deployment`): claims ReplicaSets, finds or
//! creates the one matching the current template (`<name>-<pod-template-hash>`), rolls out
//! (RollingUpdate within maxSurge/maxUnavailable, or Recreate), scales proportionally, keeps
//! `revisionHistoryLimit` old ReplicaSets, keeps the `deployment.kubernetes.io/*` annotations,
//! and reports status and conditions.
//!
//! The decisions are the pure functions of [`rollout`] and [`status`]; this file reads the
//! store, sequences the steps as `syncDeployment` does, and writes.

pub mod rollout;
pub mod status;

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::hash::{POD_TEMPLATE_HASH_LABEL, pod_template_hash};
use super::{apply, claim, pods, replicaset};
use crate::registry::meta;
use crate::registry::store::State;
use rollout::Rs;
use status::DeploymentView;

pub const STORAGE: &str = "apps/deployments";
pub const REVISION: &str = "deployment.kubernetes.io/revision";
const REVISION_HISTORY: &str = "deployment.kubernetes.io/revision-history";
const DESIRED_REPLICAS: &str = "deployment.kubernetes.io/desired-replicas";
const MAX_REPLICAS: &str = "deployment.kubernetes.io/max-replicas";
/// Annotations of a Deployment that are not copied to its ReplicaSets.
const NOT_COPIED: &[&str] = &[
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION,
    REVISION_HISTORY,
    DESIRED_REPLICAS,
    MAX_REPLICAS,
    "deprecated.deployment.rollback.to",
];

fn int(v: &Value, pointer: &str) -> i64 {
    v.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

fn annotation<'a>(obj: &'a Value, key: &str) -> Option<&'a str> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(key))
        .and_then(Value::as_str)
}

fn set_annotation(obj: &mut Value, key: &str, value: String) {
    let meta = meta::meta_mut(obj);
    let annotations = meta::object_mut(meta.entry("annotations").or_insert_with(|| json!({})));
    annotations.insert(key.into(), json!(value));
}

/// The rollout's view of a ReplicaSet.
fn rs_view(rs: &Value) -> Rs {
    let parse = |key: &str| annotation(rs, key).and_then(|v| v.parse::<i64>().ok());
    Rs {
        name: meta::name(rs).to_owned(),
        created: meta::meta_str(rs, "creationTimestamp").to_owned(),
        replicas: int(rs, "/spec/replicas"),
        status_replicas: int(rs, "/status/replicas"),
        ready: int(rs, "/status/readyReplicas"),
        available: int(rs, "/status/availableReplicas"),
        revision: parse(REVISION).unwrap_or(0),
        desired: parse(DESIRED_REPLICAS),
        max: parse(MAX_REPLICAS),
        generation: int(rs, "/metadata/generation"),
        observed_generation: int(rs, "/status/observedGeneration"),
        deleting: meta::is_deleting(rs),
    }
}

fn deployment_view(d: &Value) -> DeploymentView {
    let spec = d.get("spec").cloned().unwrap_or_default();
    DeploymentView {
        generation: int(d, "/metadata/generation"),
        replicas: spec.get("replicas").and_then(Value::as_i64).unwrap_or(1),
        strategy: rollout::strategy(&spec),
        // MaxInt32 is upstream's "no deadline".
        progress_deadline: spec
            .get("progressDeadlineSeconds")
            .and_then(Value::as_i64)
            .filter(|s| *s != i64::from(i32::MAX)),
        paused: spec.get("paused").and_then(Value::as_bool) == Some(true),
        status: d.get("status").cloned().unwrap_or_else(|| json!({})),
    }
}

/// The template without the hash label, for `EqualIgnoreHash`.
fn without_hash(template: Option<&Value>) -> Value {
    let mut t = template.cloned().unwrap_or_default();
    if let Some(Value::Object(labels)) = t.pointer_mut("/metadata/labels") {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    t
}

/// `FindNewReplicaSet`: the oldest ReplicaSet whose template equals the Deployment's.
pub fn find_new(d: &Value, rss: &[Value]) -> Option<usize> {
    let want = without_hash(d.pointer("/spec/template"));
    let mut order: Vec<usize> = (0..rss.len()).collect();
    order.sort_by(|a, b| rollout::by_creation(&rs_view(&rss[*a]), &rs_view(&rss[*b])));
    order
        .into_iter()
        .find(|i| without_hash(rss[*i].pointer("/spec/template")) == want)
}

/// `copyDeploymentAnnotationsToReplicaSet`; returns whether anything changed.
fn copy_annotations(d: &Value, rs: &mut Value) -> bool {
    let mut changed = false;
    let source: Map<String, Value> = d
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    for (k, v) in source {
        if NOT_COPIED.contains(&k.as_str()) || annotation(rs, &k) == v.as_str() {
            continue;
        }
        set_annotation(rs, &k, v.as_str().unwrap_or_default().to_owned());
        changed = true;
    }
    changed
}

/// `SetNewReplicaSetAnnotations` on an existing ReplicaSet: annotations copied, the revision
/// raised (keeping the old one in `revision-history` on a rollback); returns whether it changed.
fn set_new_rs_annotations(d: &Value, rs: &mut Value, new_revision: i64) -> bool {
    let mut changed = copy_annotations(d, rs);
    let old = annotation(rs, REVISION).map(str::to_owned);
    let old_int = old
        .as_deref()
        .and_then(|o| o.parse::<i64>().ok())
        .unwrap_or(0);
    if old_int < new_revision {
        set_annotation(rs, REVISION, new_revision.to_string());
        changed = true;
        if let Some(old) = old {
            let history = match annotation(rs, REVISION_HISTORY).filter(|h| !h.is_empty()) {
                Some(h) => format!("{h},{old}"),
                None => old,
            };
            set_annotation(rs, REVISION_HISTORY, history);
        }
    }
    changed
}

/// One sync in progress: the Deployment as last written and its ReplicaSets.
struct Sync<'a> {
    state: &'a mut State,
    d: Value,
    rss: Vec<Value>,
    now: DateTime<Utc>,
}

/// Syncs one Deployment; returns when to look again, if a timer is needed.
pub fn sync(state: &mut State, ns: &str, name: &str, now: DateTime<Utc>) -> Option<Duration> {
    let d = state.get(STORAGE, ns, name)?.value.clone();
    let mut s = Sync {
        rss: claim_replica_sets(state, &d),
        state,
        d,
        now,
    };
    if meta::is_deleting(&s.d) {
        let view = deployment_view(&s.d);
        let all: Vec<Rs> = s.rss.iter().map(rs_view).collect();
        let new = find_new(&s.d, &s.rss).map(|i| all[i].clone());
        let status = status::calculate(&view, &all.iter().collect::<Vec<_>>(), new.as_ref(), now);
        s.write_status(status);
        return None;
    }
    if let Some(conditions) = status::paused_conditions(&deployment_view(&s.d), now) {
        let mut st = s.d.get("status").cloned().unwrap_or_else(|| json!({}));
        st["conditions"] = json!(conditions);
        s.write_status(st);
    }
    let view = deployment_view(&s.d);
    let all: Vec<Rs> = s.rss.iter().map(rs_view).collect();
    if view.paused || rollout::is_scaling_event(view.replicas, &all.iter().collect::<Vec<_>>()) {
        return s.scale_only();
    }
    if view.strategy.rolling {
        s.rolling()
    } else {
        s.recreate()
    }
}

/// `ClaimReplicaSets`: the ReplicaSets this Deployment controls, after adoption and release.
fn claim_replica_sets(state: &mut State, d: &Value) -> Vec<Value> {
    let ns = meta::namespace(d).to_owned();
    let candidates: Vec<Value> = state
        .range(replicaset::STORAGE, Some(&ns), None)
        .map(|r| r.value.clone())
        .collect();
    let refs: Vec<&Value> = candidates.iter().collect();
    let claimed = claim::claim(d, &refs, d.pointer("/spec/selector"));
    let reference = pods::controller_ref("apps/v1", "Deployment", d);
    let mut owned = Vec::new();
    for rs in &claimed.owned {
        if claimed.adopt.iter().any(|a| std::ptr::eq(*a, *rs)) {
            if let Ok(adopted) = apply::update(
                state,
                "apps",
                "replicasets",
                pods::with_owner(rs, reference.clone()),
            ) {
                owned.push(adopted);
            }
        } else {
            owned.push((*rs).clone());
        }
    }
    for rs in &claimed.release {
        let _ = apply::update(
            state,
            "apps",
            "replicasets",
            pods::without_owner(rs, meta::meta_str(d, "uid")),
        );
    }
    owned
}

impl Sync<'_> {
    fn view(&self) -> DeploymentView {
        deployment_view(&self.d)
    }

    fn views(&self) -> Vec<Rs> {
        self.rss.iter().map(rs_view).collect()
    }

    fn write_status(&mut self, status: Value) {
        if self.d.get("status") == Some(&status) {
            return;
        }
        let mut body = self.d.clone();
        body["status"] = status;
        if let Ok(written) = apply::update_status(self.state, "apps", "deployments", body) {
            self.d = written;
        }
    }

    /// Sets the Deployment's revision annotation (`SetDeploymentRevision`, written through
    /// `/status` upstream, so the generation does not change).
    fn set_revision(&mut self, revision: &str) {
        if annotation(&self.d, REVISION) == Some(revision) {
            return;
        }
        let mut body = self.d.clone();
        set_annotation(&mut body, REVISION, revision.to_owned());
        let annotations = body
            .pointer("/metadata/annotations")
            .cloned()
            .unwrap_or_default();
        if let Some(written) =
            apply::set_annotations_via_status(self.state, STORAGE, &self.d, annotations)
        {
            self.d = written;
        }
    }

    /// `scaleReplicaSet`: size and the desired/max annotations; returns whether the size changed.
    fn scale_rs(&mut self, index: usize, replicas: i64) -> bool {
        let view = self.view();
        let mut rs = self.rss[index].clone();
        let size_changed = int(&rs, "/spec/replicas") != replicas;
        let desired = view.replicas.to_string();
        let max = (view.replicas + view.strategy.max_surge).to_string();
        let annotations_changed = annotation(&rs, DESIRED_REPLICAS) != Some(desired.as_str())
            || annotation(&rs, MAX_REPLICAS) != Some(max.as_str());
        if !size_changed && !annotations_changed {
            return false;
        }
        rs["spec"]["replicas"] = json!(replicas);
        set_annotation(&mut rs, DESIRED_REPLICAS, desired);
        set_annotation(&mut rs, MAX_REPLICAS, max);
        match apply::update(self.state, "apps", "replicasets", rs) {
            Ok(written) => {
                self.rss[index] = written;
                size_changed
            }
            Err(_) => false,
        }
    }

    fn index_of(&self, name: &str) -> Option<usize> {
        self.rss.iter().position(|r| meta::name(r) == name)
    }

    /// `getAllReplicaSetsAndSyncRevision`: the new ReplicaSet's index (created when asked and
    /// missing), its revision and annotations brought up to date. None also when a hash
    /// collision was found (the collision count is raised and the next pass retries).
    fn sync_revision(&mut self, create: bool) -> Option<usize> {
        let max_old = self
            .views()
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != find_new(&self.d, &self.rss))
            .map(|(_, r)| r.revision)
            .max()
            .unwrap_or(0);
        let new_revision = max_old + 1;
        let view = self.view();
        if let Some(i) = find_new(&self.d, &self.rss) {
            let mut rs = self.rss[i].clone();
            let annotations_changed = set_new_rs_annotations(&self.d, &mut rs, new_revision);
            let min_ready = self.d.pointer("/spec/minReadySeconds").cloned();
            let min_ready_changed = rs.pointer("/spec/minReadySeconds") != min_ready.as_ref()
                && !(rs.pointer("/spec/minReadySeconds").is_none() && min_ready == Some(json!(0)));
            if annotations_changed || min_ready_changed {
                match min_ready {
                    Some(m) => rs["spec"]["minReadySeconds"] = m,
                    None => {
                        if let Some(spec) = rs.get_mut("spec").and_then(Value::as_object_mut) {
                            spec.remove("minReadySeconds");
                        }
                    }
                }
                if let Ok(written) = apply::update(self.state, "apps", "replicasets", rs) {
                    self.rss[i] = written;
                }
            }
            let revision = annotation(&self.rss[i], REVISION)
                .unwrap_or_default()
                .to_owned();
            self.set_revision(&revision);
            let mut conditions = view.conditions();
            if view.progress_deadline.is_some()
                && status::get(&conditions, status::PROGRESSING).is_none()
            {
                let msg = format!("Found new replica set \"{}\"", meta::name(&self.rss[i]));
                status::set(
                    &mut conditions,
                    status::condition(
                        status::PROGRESSING,
                        "True",
                        status::FOUND_NEW_RS,
                        &msg,
                        self.now,
                    ),
                );
                let mut st = self.d.get("status").cloned().unwrap_or_else(|| json!({}));
                st["conditions"] = json!(conditions);
                self.write_status(st);
            }
            return Some(i);
        }
        if !create {
            return None;
        }
        self.create_new(new_revision)
    }

    fn create_new(&mut self, new_revision: i64) -> Option<usize> {
        let view = self.view();
        let collision = self
            .d
            .pointer("/status/collisionCount")
            .and_then(Value::as_u64)
            .map(|c| c as u32);
        let template = self
            .d
            .pointer("/spec/template")
            .cloned()
            .unwrap_or_default();
        let hash = pod_template_hash(&template, collision);
        let mut rs_template = template.clone();
        let labels = meta::object_mut(
            meta::meta_mut(&mut rs_template)
                .entry("labels")
                .or_insert_with(|| json!({})),
        );
        labels.insert(POD_TEMPLATE_HASH_LABEL.into(), json!(hash));
        let labels = Value::Object(labels.clone());
        let mut selector = self
            .d
            .pointer("/spec/selector")
            .cloned()
            .unwrap_or_else(|| json!({}));
        meta::object_mut(
            meta::object_mut(&mut selector)
                .entry("matchLabels")
                .or_insert_with(|| json!({})),
        )
        .insert(POD_TEMPLATE_HASH_LABEL.into(), json!(hash));
        let name = format!("{}-{hash}", meta::name(&self.d));
        let all = self.views();
        let new_view = Rs {
            name: name.clone(),
            ..Rs::default()
        };
        let mut refs: Vec<&Rs> = all.iter().collect();
        refs.push(&new_view);
        let replicas = rollout::new_rs_replicas(view.replicas, view.strategy, &refs, &new_view);
        let mut rs = json!({
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {
                "name": name,
                "namespace": meta::namespace(&self.d),
                "labels": labels,
                "ownerReferences": [pods::controller_ref("apps/v1", "Deployment", &self.d)],
            },
            "spec": {"replicas": replicas, "selector": selector, "template": rs_template},
        });
        if let Some(m) = self
            .d
            .pointer("/spec/minReadySeconds")
            .filter(|m| m.as_i64() != Some(0))
        {
            rs["spec"]["minReadySeconds"] = m.clone();
        }
        copy_annotations(&self.d, &mut rs);
        set_annotation(&mut rs, REVISION, new_revision.to_string());
        set_annotation(&mut rs, DESIRED_REPLICAS, view.replicas.to_string());
        set_annotation(
            &mut rs,
            MAX_REPLICAS,
            (view.replicas + view.strategy.max_surge).to_string(),
        );
        let ns = meta::namespace(&self.d).to_owned();
        let (index, reason, msg) = match apply::create(self.state, "apps", "replicasets", &ns, rs) {
            Ok(created) => {
                self.rss.push(created);
                (
                    self.rss.len() - 1,
                    status::NEW_RS_CREATED,
                    format!("Created new replica set \"{name}\""),
                )
            }
            Err(e) if e.reason == "AlreadyExists" => {
                // Ours with the same template (a pass raced itself): use it. Otherwise the hash
                // collides with another template: bump the collision count and retry later.
                let existing = self
                    .state
                    .get(replicaset::STORAGE, &ns, &name)
                    .map(|r| r.value.clone());
                match existing {
                    Some(rs)
                        if pods::controller_uid(&rs) == Some(meta::meta_str(&self.d, "uid"))
                            && without_hash(rs.pointer("/spec/template"))
                                == without_hash(Some(&template)) =>
                    {
                        self.rss.push(rs);
                        (
                            self.rss.len() - 1,
                            status::FOUND_NEW_RS,
                            format!("Found new replica set \"{name}\""),
                        )
                    }
                    _ => {
                        let mut st = self.d.get("status").cloned().unwrap_or_else(|| json!({}));
                        st["collisionCount"] = json!(collision.unwrap_or(0) + 1);
                        self.write_status(st);
                        return None;
                    }
                }
            }
            Err(_) => return None,
        };
        self.set_revision(&new_revision.to_string());
        if view.progress_deadline.is_some() {
            let mut conditions = deployment_view(&self.d).conditions();
            status::set(
                &mut conditions,
                status::condition(status::PROGRESSING, "True", reason, &msg, self.now),
            );
            let mut st = self.d.get("status").cloned().unwrap_or_else(|| json!({}));
            st["conditions"] = json!(conditions);
            self.write_status(st);
        }
        Some(index)
    }

    /// `syncRolloutStatus`; returns the progress-deadline wake-up.
    fn rollout_status(&mut self, new: Option<usize>) -> Option<Duration> {
        let all = self.views();
        let new_view = new.map(|i| all[i].clone());
        let (st, requeue) = status::rollout(
            &self.view(),
            &all.iter().collect::<Vec<_>>(),
            new_view.as_ref(),
            self.now,
        );
        self.write_status(st);
        requeue
    }

    fn old_indexes(&self, new: Option<usize>) -> Vec<usize> {
        (0..self.rss.len()).filter(|i| Some(*i) != new).collect()
    }

    /// `cleanupDeployment`.
    fn cleanup(&mut self, new: Option<usize>) {
        let Some(limit) = self
            .d
            .pointer("/spec/revisionHistoryLimit")
            .and_then(Value::as_i64)
        else {
            return;
        };
        let old: Vec<Rs> = self
            .old_indexes(new)
            .into_iter()
            .map(|i| rs_view(&self.rss[i]))
            .collect();
        let ns = meta::namespace(&self.d).to_owned();
        for name in rollout::history_to_delete(limit, &old) {
            let _ = apply::delete(self.state, "apps", "replicasets", &ns, &name);
        }
    }

    /// `sync`: scaling (or paused): sizes only, no rollout.
    fn scale_only(&mut self) -> Option<Duration> {
        let new = self.sync_revision(false);
        let view = self.view();
        let all = self.views();
        let old: Vec<Rs> = self
            .old_indexes(new)
            .into_iter()
            .map(|i| all[i].clone())
            .collect();
        let changes = rollout::scale(
            view.replicas,
            view.strategy,
            int(&self.d, "/status/replicas"),
            new.map(|i| &all[i]),
            &old,
        );
        for (name, size) in changes {
            if let Some(i) = self.index_of(&name) {
                self.scale_rs(i, size);
            }
        }
        if view.paused {
            self.cleanup(new);
        }
        let all = self.views();
        let new_view = new.map(|i| all[i].clone());
        let st = status::calculate(
            &self.view(),
            &all.iter().collect::<Vec<_>>(),
            new_view.as_ref(),
            self.now,
        );
        self.write_status(st);
        None
    }

    /// `rolloutRolling`.
    fn rolling(&mut self) -> Option<Duration> {
        let Some(new) = self.sync_revision(true) else {
            return Some(Duration::from_millis(100));
        };
        let view = self.view();
        let all = self.views();
        let new_rs = all[new].clone();
        if new_rs.replicas != view.replicas {
            let target = if new_rs.replicas > view.replicas {
                view.replicas
            } else {
                rollout::new_rs_replicas(
                    view.replicas,
                    view.strategy,
                    &all.iter().collect::<Vec<_>>(),
                    &new_rs,
                )
            };
            if self.scale_rs(new, target) {
                return self.rollout_status(Some(new));
            }
        }
        let all = self.views();
        let old: Vec<Rs> = self
            .old_indexes(Some(new))
            .into_iter()
            .map(|i| all[i].clone())
            .collect();
        let mut scaled = false;
        for (name, size) in
            rollout::scale_down_old(view.replicas, view.strategy, &old, Some(&all[new]))
        {
            if let Some(i) = self.index_of(&name) {
                scaled |= self.scale_rs(i, size);
            }
        }
        if scaled {
            return self.rollout_status(Some(new));
        }
        if status::complete(&view, &view.status) {
            self.cleanup(Some(new));
        }
        self.rollout_status(Some(new))
    }

    /// `rolloutRecreate`: every old pod gone before the new ReplicaSet grows.
    fn recreate(&mut self) -> Option<Duration> {
        let mut new = self.sync_revision(false);
        let mut scaled = false;
        for i in self.old_indexes(new) {
            if int(&self.rss[i], "/spec/replicas") > 0 {
                scaled |= self.scale_rs(i, 0);
            }
        }
        if scaled || self.old_pods_running(new) {
            return self.rollout_status(new);
        }
        if new.is_none() {
            new = self.sync_revision(true);
        }
        let Some(n) = new else {
            return Some(Duration::from_millis(100));
        };
        let replicas = self.view().replicas;
        self.scale_rs(n, replicas);
        let view = self.view();
        if status::complete(&view, &view.status) {
            self.cleanup(new);
        }
        self.rollout_status(new)
    }

    /// `oldPodsRunning`: an old ReplicaSet still reports pods, or one of its pods (even one
    /// being deleted) has not finished.
    fn old_pods_running(&self, new: Option<usize>) -> bool {
        let old = self.old_indexes(new);
        if old
            .iter()
            .any(|i| int(&self.rss[*i], "/status/replicas") > 0)
        {
            return true;
        }
        let uids: Vec<&str> = old
            .iter()
            .map(|i| meta::meta_str(&self.rss[*i], "uid"))
            .collect();
        self.state
            .range("/pods", Some(meta::namespace(&self.d)), None)
            .filter(|p| pods::controller_uid(&p.value).is_some_and(|u| uids.contains(&u)))
            .any(|p| !matches!(pods::phase(&p.value), "Succeeded" | "Failed"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment() -> Value {
        json!({"metadata": {"name": "web", "uid": "d1", "annotations": {"team": "a", REVISION: "3",
               "kubectl.kubernetes.io/last-applied-configuration": "{}"}},
               "spec": {"template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "v2"}]}}}})
    }

    fn rs(name: &str, image: &str, created: &str) -> Value {
        json!({"metadata": {"name": name, "creationTimestamp": created},
               "spec": {"template": {"metadata": {"labels": {"app": "web", POD_TEMPLATE_HASH_LABEL: "x"}}, "spec": {"containers": [{"name": "c", "image": image}]}}}})
    }

    #[test]
    fn the_new_replica_set_is_the_oldest_with_the_same_template_ignoring_the_hash() {
        let rss = [
            rs("web-a", "v1", "2026-01-01T00:00:00Z"),
            rs("web-c", "v2", "2026-01-01T00:00:02Z"),
            rs("web-b", "v2", "2026-01-01T00:00:01Z"),
        ];
        assert_eq!(find_new(&deployment(), &rss), Some(2));
        assert_eq!(find_new(&deployment(), &rss[..1]), None);
    }

    #[test]
    fn a_rolled_back_replica_set_takes_the_next_revision_and_keeps_its_history() {
        let mut old = rs("web-a", "v2", "t");
        set_annotation(&mut old, REVISION, "1".into());
        assert!(set_new_rs_annotations(&deployment(), &mut old, 3));
        assert_eq!(annotation(&old, REVISION), Some("3"));
        assert_eq!(annotation(&old, REVISION_HISTORY), Some("1"));
        assert_eq!(annotation(&old, "team"), Some("a"));
        assert_eq!(
            annotation(&old, "kubectl.kubernetes.io/last-applied-configuration"),
            None
        );
        assert!(
            !set_new_rs_annotations(&deployment(), &mut old, 3),
            "settled"
        );
    }
}
