//! A Deployment's status and its conditions, as `sync.go` (`calculateStatus`,
//! `syncRolloutStatus`), `progress.go` and `util/deployment_util.go` compute them: the counts,
//! `Available` (MinimumReplicasAvailable / MinimumReplicasUnavailable) and `Progressing`
//! (NewReplicaSetCreated, FoundNewReplicaSet, ReplicaSetUpdated, NewReplicaSetAvailable,
//! ProgressDeadlineExceeded, DeploymentPaused, DeploymentResumed). Pure functions.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::rollout::{Rs, Strategy};
use crate::loops::workloads::pods::parse_time;

pub const AVAILABLE: &str = "Available";
pub const PROGRESSING: &str = "Progressing";
pub const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
pub const TIMED_OUT: &str = "ProgressDeadlineExceeded";
pub const PAUSED: &str = "DeploymentPaused";
pub const RESUMED: &str = "DeploymentResumed";
pub const RS_UPDATED: &str = "ReplicaSetUpdated";
pub const NEW_RS_CREATED: &str = "NewReplicaSetCreated";
pub const FOUND_NEW_RS: &str = "FoundNewReplicaSet";

fn time_text(now: DateTime<Utc>) -> String {
    now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// `NewDeploymentCondition`.
pub fn condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
    now: DateTime<Utc>,
) -> Value {
    let t = time_text(now);
    json!({"type": type_, "status": status, "lastUpdateTime": t, "lastTransitionTime": t, "reason": reason, "message": message})
}

fn field<'a>(c: &'a Value, key: &str) -> &'a str {
    c.get(key).and_then(Value::as_str).unwrap_or("")
}

pub fn get<'a>(conditions: &'a [Value], type_: &str) -> Option<&'a Value> {
    conditions.iter().find(|c| field(c, "type") == type_)
}

/// `SetDeploymentCondition`: same status and reason keep the old one; same status keeps its
/// transition time; the new condition goes last.
pub fn set(conditions: &mut Vec<Value>, mut new: Value) {
    let type_ = field(&new, "type").to_owned();
    if let Some(current) = get(conditions, &type_) {
        if field(current, "status") == field(&new, "status")
            && field(current, "reason") == field(&new, "reason")
        {
            return;
        }
        if field(current, "status") == field(&new, "status") {
            new["lastTransitionTime"] = current
                .get("lastTransitionTime")
                .cloned()
                .unwrap_or(Value::Null);
        }
    }
    conditions.retain(|c| field(c, "type") != type_);
    conditions.push(new);
}

pub fn remove(conditions: &mut Vec<Value>, type_: &str) {
    conditions.retain(|c| field(c, "type") != type_);
}

/// What the status computation reads of the Deployment.
#[derive(Debug, Clone)]
pub struct DeploymentView {
    pub generation: i64,
    pub replicas: i64,
    pub strategy: Strategy,
    /// `spec.progressDeadlineSeconds` (None: no deadline).
    pub progress_deadline: Option<i64>,
    pub paused: bool,
    /// The current status.
    pub status: Value,
}

impl DeploymentView {
    pub fn conditions(&self) -> Vec<Value> {
        self.status
            .get("conditions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    }

    fn count(&self, key: &str) -> i64 {
        count(&self.status, key)
    }
}

fn count(status: &Value, key: &str) -> i64 {
    status.get(key).and_then(Value::as_i64).unwrap_or(0)
}

/// `calculateStatus`: counts over every ReplicaSet and the `Available` condition.
pub fn calculate(d: &DeploymentView, all: &[&Rs], new: Option<&Rs>, now: DateTime<Utc>) -> Value {
    let available: i64 = all.iter().map(|r| r.available).sum();
    let total: i64 = all.iter().map(|r| r.replicas).sum();
    let mut status = Map::new();
    status.insert("observedGeneration".into(), json!(d.generation));
    for (key, n) in [
        (
            "replicas",
            all.iter().map(|r| r.status_replicas).sum::<i64>(),
        ),
        ("updatedReplicas", new.map_or(0, |n| n.status_replicas)),
        ("readyReplicas", all.iter().map(|r| r.ready).sum()),
        ("availableReplicas", available),
        ("unavailableReplicas", (total - available).max(0)),
    ] {
        if n != 0 {
            status.insert(key.into(), json!(n));
        }
    }
    let mut conditions = d.conditions();
    if available >= d.replicas - d.strategy.max_unavailable {
        set(
            &mut conditions,
            condition(
                AVAILABLE,
                "True",
                "MinimumReplicasAvailable",
                "Deployment has minimum availability.",
                now,
            ),
        );
    } else {
        set(
            &mut conditions,
            condition(
                AVAILABLE,
                "False",
                "MinimumReplicasUnavailable",
                "Deployment does not have minimum availability.",
                now,
            ),
        );
    }
    status.insert("conditions".into(), json!(conditions));
    if let Some(c) = d.status.get("collisionCount") {
        status.insert("collisionCount".into(), c.clone());
    }
    Value::Object(status)
}

/// `DeploymentComplete`.
pub fn complete(d: &DeploymentView, status: &Value) -> bool {
    count(status, "updatedReplicas") == d.replicas
        && count(status, "replicas") == d.replicas
        && count(status, "availableReplicas") == d.replicas
        && count(status, "observedGeneration") >= d.generation
}

/// `DeploymentProgressing`: something moved since the last status.
fn progressing(d: &DeploymentView, new: &Value) -> bool {
    let old_old = d.count("replicas") - d.count("updatedReplicas");
    let new_old = count(new, "replicas") - count(new, "updatedReplicas");
    count(new, "updatedReplicas") > d.count("updatedReplicas")
        || count(new, "readyReplicas") > d.count("readyReplicas")
        || new_old < old_old
        || count(new, "availableReplicas") > d.count("availableReplicas")
}

/// When the Progressing condition's deadline passes (None: no deadline applies).
fn deadline(d: &DeploymentView, conditions: &[Value]) -> Option<DateTime<Utc>> {
    let seconds = d.progress_deadline?;
    let c = get(conditions, PROGRESSING)?;
    if matches!(field(c, "reason"), NEW_RS_AVAILABLE | TIMED_OUT) {
        return None;
    }
    parse_time(field(c, "lastUpdateTime")).map(|t| t + chrono::Duration::seconds(seconds))
}

/// `DeploymentTimedOut`.
fn timed_out(d: &DeploymentView, now: DateTime<Utc>) -> bool {
    let conditions = d.conditions();
    match get(&conditions, PROGRESSING) {
        Some(c) if field(c, "reason") == TIMED_OUT => true,
        _ => deadline(d, &conditions).is_some_and(|at| at < now),
    }
}

/// `syncRolloutStatus`: the status after a rollout step, with `Progressing` updated, and when
/// to look again for the progress deadline (`requeueStuckDeployment`).
pub fn rollout(
    d: &DeploymentView,
    all: &[&Rs],
    new: Option<&Rs>,
    now: DateTime<Utc>,
) -> (Value, Option<Duration>) {
    let mut status = calculate(d, all, new, now);
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if d.progress_deadline.is_none() {
        remove(&mut conditions, PROGRESSING);
    }
    let current = get(&d.conditions(), PROGRESSING).cloned();
    let is_complete = count(&status, "replicas") == count(&status, "updatedReplicas")
        && current
            .as_ref()
            .is_some_and(|c| field(c, "reason") == NEW_RS_AVAILABLE);
    if d.progress_deadline.is_some() && !is_complete {
        let name = new.map(|n| n.name.as_str());
        if complete(d, &status) {
            let msg = match name {
                Some(n) => format!("ReplicaSet \"{n}\" has successfully progressed."),
                None => "Deployment has successfully progressed.".into(),
            };
            set(
                &mut conditions,
                condition(PROGRESSING, "True", NEW_RS_AVAILABLE, &msg, now),
            );
        } else if progressing(d, &status) {
            let msg = match name {
                Some(n) => format!("ReplicaSet \"{n}\" is progressing."),
                None => "Deployment is progressing.".into(),
            };
            let mut c = condition(PROGRESSING, "True", RS_UPDATED, &msg, now);
            if let Some(cur) = current.as_ref().filter(|c| field(c, "status") == "True") {
                c["lastTransitionTime"] = cur
                    .get("lastTransitionTime")
                    .cloned()
                    .unwrap_or(Value::Null);
            }
            remove(&mut conditions, PROGRESSING);
            set(&mut conditions, c);
        } else if timed_out(d, now) {
            let msg = match name {
                Some(n) => format!("ReplicaSet \"{n}\" has timed out progressing."),
                None => "Deployment has timed out progressing.".into(),
            };
            set(
                &mut conditions,
                condition(PROGRESSING, "False", TIMED_OUT, &msg, now),
            );
        }
    }
    status["conditions"] = json!(conditions);
    // requeueStuckDeployment: wake up when the deadline passes, if it has not yet.
    let requeue = if complete(d, &status) {
        None
    } else {
        deadline(d, &conditions)
            .and_then(|at| (at - now).to_std().ok())
            .map(|left| left + Duration::from_millis(100))
    };
    (status, requeue)
}

/// `checkPausedConditions`: the conditions after pausing or resuming (None: unchanged).
pub fn paused_conditions(d: &DeploymentView, now: DateTime<Utc>) -> Option<Vec<Value>> {
    d.progress_deadline?;
    let mut conditions = d.conditions();
    let current = get(&conditions, PROGRESSING);
    if current.is_some_and(|c| field(c, "reason") == TIMED_OUT) {
        return None;
    }
    let paused_shown = current.is_some_and(|c| field(c, "reason") == PAUSED);
    if d.paused && !paused_shown {
        set(
            &mut conditions,
            condition(PROGRESSING, "Unknown", PAUSED, "Deployment is paused", now),
        );
    } else if !d.paused && paused_shown {
        set(
            &mut conditions,
            condition(
                PROGRESSING,
                "Unknown",
                RESUMED,
                "Deployment is resumed",
                now,
            ),
        );
    } else {
        return None;
    }
    Some(conditions)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(s: &str) -> DateTime<Utc> {
        parse_time(&format!("2026-01-01T00:{s}Z")).expect("time")
    }

    fn view(replicas: i64, status: Value) -> DeploymentView {
        DeploymentView {
            generation: 1,
            replicas,
            strategy: Strategy {
                rolling: true,
                max_surge: 1,
                max_unavailable: 0,
            },
            progress_deadline: Some(600),
            paused: false,
            status,
        }
    }

    fn rs(name: &str, replicas: i64, available: i64) -> Rs {
        Rs {
            name: name.into(),
            replicas,
            status_replicas: replicas,
            ready: available,
            available,
            ..Rs::default()
        }
    }

    #[test]
    fn counts_and_minimum_availability() {
        let new = rs("web-1", 2, 1);
        let s = calculate(&view(2, json!({})), &[&new], Some(&new), at("00:00"));
        assert_eq!(s["replicas"], 2);
        assert_eq!(s["updatedReplicas"], 2);
        assert_eq!(s["availableReplicas"], 1);
        assert_eq!(s["unavailableReplicas"], 1);
        assert_eq!(s["conditions"][0]["reason"], "MinimumReplicasUnavailable");
        assert!(s.get("readyReplicas").is_some());
    }

    #[test]
    fn a_new_rollout_reports_progress_then_completion() {
        let new = rs("web-1", 2, 0);
        let (s, requeue) = rollout(&view(2, json!({})), &[&new], Some(&new), at("00:00"));
        let c = get(s["conditions"].as_array().expect("conditions"), PROGRESSING)
            .expect("progressing")
            .clone();
        assert_eq!(c["reason"], RS_UPDATED);
        assert_eq!(c["message"], "ReplicaSet \"web-1\" is progressing.");
        assert!(requeue.is_some(), "the deadline is watched");
        let done = rs("web-1", 2, 2);
        let (s, requeue) = rollout(&view(2, s), &[&done], Some(&done), at("00:05"));
        let conditions = s["conditions"].as_array().expect("conditions");
        assert_eq!(
            get(conditions, PROGRESSING).expect("p")["reason"],
            NEW_RS_AVAILABLE
        );
        assert_eq!(get(conditions, AVAILABLE).expect("a")["status"], "True");
        assert_eq!(requeue, None);
        // Order as the real controller leaves it: Available, then Progressing.
        assert_eq!(conditions[0]["type"], AVAILABLE);
    }

    #[test]
    fn no_progress_past_the_deadline_times_out() {
        let mut d = view(
            2,
            json!({"replicas": 2, "updatedReplicas": 2, "observedGeneration": 1,
            "conditions": [condition(PROGRESSING, "True", RS_UPDATED, "x", at("00:00"))]}),
        );
        d.progress_deadline = Some(10);
        let stuck = rs("web-1", 2, 0);
        let (s, requeue) = rollout(&d, &[&stuck], Some(&stuck), at("00:05"));
        assert_eq!(
            get(s["conditions"].as_array().expect("c"), PROGRESSING).expect("p")["reason"],
            RS_UPDATED
        );
        let left = requeue.expect("requeue");
        assert!(left > Duration::from_secs(4) && left < Duration::from_secs(6));
        let (s, _) = rollout(&d, &[&stuck], Some(&stuck), at("00:11"));
        let c = get(s["conditions"].as_array().expect("c"), PROGRESSING)
            .expect("p")
            .clone();
        assert_eq!(
            (c["status"].as_str(), c["reason"].as_str()),
            (Some("False"), Some(TIMED_OUT))
        );
        assert_eq!(
            c["message"],
            "ReplicaSet \"web-1\" has timed out progressing."
        );
    }

    #[test]
    fn pausing_and_resuming_show_in_progressing() {
        let mut d = view(1, json!({}));
        d.paused = true;
        let c = paused_conditions(&d, at("00:00")).expect("paused");
        assert_eq!(c[0]["reason"], PAUSED);
        assert_eq!(c[0]["status"], "Unknown");
        d.status = json!({"conditions": c});
        assert!(paused_conditions(&d, at("00:01")).is_none());
        d.paused = false;
        let c = paused_conditions(&d, at("00:02")).expect("resumed");
        assert_eq!(c[0]["reason"], RESUMED);
    }
}
