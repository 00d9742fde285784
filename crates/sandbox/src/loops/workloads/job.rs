//! The Job controller (`pkg/controller/job`, v1.28 with pod tracking finalizers): runs up to
//! `parallelism` pods until `completions` succeed, counts each finished pod once (removing its
//! `batch.kubernetes.io/job-tracking` finalizer as it counts it), recreates failed pods after
//! an exponential back-off (10 s doubling, at most 6 min), and fails the Job once more than
//! `backoffLimit` pods failed (condition `Failed`, reason `BackoffLimitExceeded`).
//!
//! [`decide`] is pure; [`sync`] reads the store and writes what it decided.

use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::{apply, claim, pods};
use crate::registry::meta;
use crate::registry::store::State;

pub const STORAGE: &str = "batch/jobs";
/// The finalizer that keeps a finished pod until the Job has counted it.
pub const TRACKING_FINALIZER: &str = "batch.kubernetes.io/job-tracking";
const BACKOFF_BASE: Duration = Duration::from_secs(10);
const BACKOFF_MAX: Duration = Duration::from_secs(360);

fn int(v: &Value, pointer: &str) -> Option<i64> {
    v.pointer(pointer).and_then(Value::as_i64)
}

fn time_text(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

fn has_tracking_finalizer(pod: &Value) -> bool {
    meta::finalizers(pod)
        .iter()
        .any(|f| f == TRACKING_FINALIZER)
}

/// Whether the Job already finished (a `Complete` or `Failed` condition is True).
pub fn finished(job: &Value) -> bool {
    job.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            matches!(
                c.get("type").and_then(Value::as_str),
                Some("Complete" | "Failed")
            ) && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// When a failed pod finished: its containers' termination time, else its last condition change.
fn finished_at(pod: &Value) -> Option<DateTime<Utc>> {
    let terminated = pod
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|c| {
            c.pointer("/state/terminated/finishedAt")
                .and_then(Value::as_str)
        })
        .filter_map(pods::parse_time)
        .max();
    terminated.or_else(|| {
        pod.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|c| c.get("lastTransitionTime").and_then(Value::as_str))
            .filter_map(pods::parse_time)
            .max()
    })
}

/// One sync's decisions.
#[derive(Debug, PartialEq)]
pub struct Plan {
    pub create: usize,
    /// Active pods to delete (surplus, or the Job finished).
    pub delete: Vec<String>,
    /// Pods counted now, or finished with the Job: their tracking finalizer goes.
    pub release: Vec<String>,
    pub status: Value,
    /// Look again then (the back-off before recreating a failed pod ends).
    pub requeue: Option<Duration>,
}

fn condition(type_: &str, reason: Option<(&str, &str)>, now: &str) -> Value {
    let mut c =
        json!({"type": type_, "status": "True", "lastProbeTime": now, "lastTransitionTime": now});
    if let Some((reason, message)) = reason {
        c["reason"] = json!(reason);
        c["message"] = json!(message);
    }
    c
}

/// The Job's next step given the pods it owns (in any phase).
pub fn decide(job: &Value, owned: &[&Value], now: DateTime<Utc>) -> Plan {
    let now_text = time_text(now);
    let status = job.get("status").cloned().unwrap_or_else(|| json!({}));
    let uncounted: Vec<&&Value> = owned.iter().filter(|p| has_tracking_finalizer(p)).collect();
    if finished(job) {
        // Stragglers of a finished Job: stop the active ones, let every one go.
        return Plan {
            create: 0,
            delete: owned
                .iter()
                .filter(|p| pods::is_active(p))
                .map(|p| meta::name(p).to_owned())
                .collect(),
            release: uncounted.iter().map(|p| meta::name(p).to_owned()).collect(),
            status,
            requeue: None,
        };
    }
    let newly_succeeded = uncounted
        .iter()
        .filter(|p| pods::phase(p) == "Succeeded")
        .count() as i64;
    // A pod that failed, or was deleted before it succeeded, counts as failed.
    let newly_failed = uncounted
        .iter()
        .filter(|p| {
            pods::phase(p) == "Failed" || (meta::is_deleting(p) && pods::phase(p) != "Succeeded")
        })
        .count() as i64;
    let mut release: Vec<String> = uncounted
        .iter()
        .filter(|p| !pods::is_active(p))
        .map(|p| meta::name(p).to_owned())
        .collect();
    let succeeded = int(&status, "/succeeded").unwrap_or(0) + newly_succeeded;
    let mut failed = int(&status, "/failed").unwrap_or(0) + newly_failed;
    let active: Vec<&&Value> = owned.iter().filter(|p| pods::is_active(p)).collect();
    let ready = active.iter().filter(|p| pods::is_ready(p)).count();
    let completions = int(job, "/spec/completions");
    let parallelism = int(job, "/spec/parallelism").unwrap_or(1).max(0);
    let backoff_limit = int(job, "/spec/backoffLimit").unwrap_or(6);
    let suspended = job.pointer("/spec/suspend").and_then(Value::as_bool) == Some(true);

    let mut out = Map::new();
    let start = status
        .get("startTime")
        .cloned()
        .or_else(|| (!suspended).then(|| json!(now_text)));
    if let Some(start) = start {
        out.insert("startTime".into(), start);
    }
    let mut conditions: Vec<Value> = status
        .get("conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut create = 0;
    let mut delete = Vec::new();
    let mut requeue = None;
    let mut active_count = active.len() as i64;
    let complete = match completions {
        Some(c) => succeeded >= c,
        None => succeeded > 0 && active.is_empty(),
    };
    let stop_all = |delete: &mut Vec<String>, release: &mut Vec<String>| {
        for p in &active {
            delete.push(meta::name(p).to_owned());
            if has_tracking_finalizer(p) {
                release.push(meta::name(p).to_owned());
            }
        }
    };
    if failed > backoff_limit {
        stop_all(&mut delete, &mut release);
        failed += active_count;
        active_count = 0;
        conditions.push(condition(
            "Failed",
            Some((
                "BackoffLimitExceeded",
                "Job has reached the specified backoff limit",
            )),
            &now_text,
        ));
    } else if complete {
        stop_all(&mut delete, &mut release);
        active_count = 0;
        conditions.push(condition("Complete", None, &now_text));
        out.insert("completionTime".into(), json!(now_text));
    } else if suspended {
        stop_all(&mut delete, &mut release);
        active_count = 0;
    } else {
        let want = match completions {
            Some(c) => (c - succeeded).min(parallelism).max(0),
            None if succeeded > 0 => active_count,
            None => parallelism,
        };
        if active_count > want {
            let mut ranked = active.clone();
            ranked.sort_by_key(|p| pods::deletion_rank(p));
            for p in ranked.into_iter().take((active_count - want) as usize) {
                delete.push(meta::name(p).to_owned());
            }
        } else if active_count < want {
            // Back-off after failures: 10 s, doubling per failure, from the last one.
            let last_failure = owned
                .iter()
                .filter(|p| pods::phase(p) == "Failed")
                .filter_map(|p| finished_at(p))
                .max();
            let wait = if failed > 0 {
                BACKOFF_BASE
                    .saturating_mul(1u32 << (failed - 1).clamp(0, 10))
                    .min(BACKOFF_MAX)
            } else {
                Duration::ZERO
            };
            let ready_at =
                last_failure.map(|t| t + chrono::Duration::from_std(wait).unwrap_or_default());
            match ready_at.filter(|at| *at > now) {
                Some(at) => {
                    requeue = (at - now)
                        .to_std()
                        .ok()
                        .map(|d| d + Duration::from_millis(50))
                }
                None => create = (want - active_count) as usize,
            }
        }
    }
    if active_count > 0 {
        out.insert("active".into(), json!(active_count));
    }
    if succeeded > 0 {
        out.insert("succeeded".into(), json!(succeeded));
    }
    if failed > 0 {
        out.insert("failed".into(), json!(failed));
    }
    if !conditions.is_empty() {
        out.insert("conditions".into(), json!(conditions));
    }
    if let Some(t) = status.get("completionTime") {
        out.entry("completionTime").or_insert_with(|| t.clone());
    }
    out.insert(
        "ready".into(),
        json!(if active_count > 0 { ready } else { 0 }),
    );
    out.insert("uncountedTerminatedPods".into(), json!({}));
    release.sort();
    release.dedup();
    Plan {
        create,
        delete,
        release,
        status: Value::Object(out),
        requeue,
    }
}

/// Syncs one Job; returns when to look again, if a timer is needed.
pub fn sync(state: &mut State, ns: &str, name: &str, now: DateTime<Utc>) -> Option<Duration> {
    let job = state.get(STORAGE, ns, name)?.value.clone();
    let candidates: Vec<Value> = state
        .range("/pods", Some(ns), None)
        .map(|p| p.value.clone())
        .collect();
    let refs: Vec<&Value> = candidates.iter().collect();
    let claimed = claim::claim(&job, &refs, job.pointer("/spec/selector"));
    let reference = pods::controller_ref("batch/v1", "Job", &job);
    let mut owned = Vec::new();
    for pod in &claimed.owned {
        if claimed.adopt.iter().any(|a| std::ptr::eq(*a, *pod)) {
            if pods::is_active(pod)
                && let Ok(adopted) =
                    apply::update(state, "", "pods", pods::with_owner(pod, reference.clone()))
            {
                owned.push(adopted);
            }
        } else {
            owned.push((*pod).clone());
        }
    }
    let owned_refs: Vec<&Value> = owned.iter().collect();
    let plan = decide(&job, &owned_refs, now);
    // Status first: a pod's count must be recorded before its finalizer (the proof it is not
    // yet counted) goes, or a crash between the two would lose or double it.
    if job.get("status") != Some(&plan.status) {
        let mut body = job.clone();
        body["status"] = plan.status.clone();
        if apply::update_status(state, "batch", "jobs", body).is_err() {
            return Some(Duration::from_millis(100));
        }
    }
    for pod in &plan.delete {
        let _ = apply::delete(state, "", "pods", ns, pod);
    }
    for pod in &plan.release {
        if let Some(live) = state.get("/pods", ns, pod) {
            let mut body = live.value.clone();
            let rest: Vec<String> = meta::finalizers(&body)
                .into_iter()
                .filter(|f| f != TRACKING_FINALIZER)
                .collect();
            meta::set_meta(
                &mut body,
                "finalizers",
                if rest.is_empty() {
                    Value::Null
                } else {
                    json!(rest)
                },
            );
            let _ = apply::update(state, "", "pods", body);
        }
    }
    let mut template = job.pointer("/spec/template").cloned().unwrap_or_default();
    let template_meta = meta::meta_mut(&mut template);
    let list = template_meta
        .entry("finalizers")
        .or_insert_with(|| json!([]));
    if let Value::Array(list) = list {
        list.push(json!(TRACKING_FINALIZER));
    }
    for _ in 0..plan.create {
        let pod = pods::pod_from_template(&template, &format!("{name}-"), reference.clone());
        if apply::create(state, "", "pods", ns, pod).is_err() {
            break;
        }
    }
    plan.requeue
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(completions: Option<i64>, parallelism: i64, backoff: i64) -> Value {
        let mut j = json!({"metadata": {"name": "j", "uid": "ju"}, "spec": {"parallelism": parallelism, "backoffLimit": backoff}});
        if let Some(c) = completions {
            j["spec"]["completions"] = json!(c);
        }
        j
    }

    fn pod(name: &str, phase: &str, finalizer: bool) -> Value {
        let mut p = json!({"metadata": {"name": name}, "status": {"phase": phase,
            "containerStatuses": [{"state": {"terminated": {"finishedAt": "2026-01-01T00:00:00Z"}}}]}});
        if finalizer {
            p["metadata"]["finalizers"] = json!([TRACKING_FINALIZER]);
        }
        p
    }

    fn now() -> DateTime<Utc> {
        pods::parse_time("2026-01-01T00:00:05Z").expect("time")
    }

    #[test]
    fn runs_parallelism_pods_until_completions_succeed() {
        let plan = decide(&job(Some(3), 2, 6), &[], now());
        assert_eq!(plan.create, 2);
        assert_eq!(plan.status["startTime"], "2026-01-01T00:00:05Z");
        assert_eq!(plan.status["ready"], 0);
        let (a, b) = (pod("a", "Succeeded", true), pod("b", "Running", false));
        let plan = decide(&job(Some(3), 2, 6), &[&a, &b], now());
        assert_eq!(plan.create, 1, "two left to do, one running, parallelism 2");
        assert_eq!(plan.release, vec!["a".to_owned()]);
        assert_eq!(plan.status["succeeded"], 1);
        assert_eq!(plan.status["active"], 1);
    }

    #[test]
    fn completes_when_enough_succeeded() {
        let mut j = job(Some(1), 1, 6);
        j["status"] = json!({"startTime": "2026-01-01T00:00:00Z"});
        let a = pod("a", "Succeeded", true);
        let plan = decide(&j, &[&a], now());
        assert_eq!(plan.status["succeeded"], 1);
        assert_eq!(plan.status["conditions"][0]["type"], "Complete");
        assert_eq!(plan.status["completionTime"], "2026-01-01T00:00:05Z");
        assert_eq!(plan.create, 0);
        // Counted once: the finalizer is gone afterwards and the count stays.
        j["status"] = plan.status;
        let counted = pod("a", "Succeeded", false);
        assert_eq!(decide(&j, &[&counted], now()).status["succeeded"], 1);
    }

    #[test]
    fn fails_past_the_backoff_limit_and_backs_off_before_that() {
        let f = pod("a", "Failed", true);
        let plan = decide(&job(Some(1), 1, 0), &[&f], now());
        let c = &plan.status["conditions"][0];
        assert_eq!(
            (c["type"].as_str(), c["reason"].as_str()),
            (Some("Failed"), Some("BackoffLimitExceeded"))
        );
        assert_eq!(c["message"], "Job has reached the specified backoff limit");
        let plan = decide(&job(Some(1), 1, 2), &[&f], now());
        assert_eq!(plan.create, 0, "10 s back-off after the first failure");
        let wait = plan.requeue.expect("requeue");
        assert!(wait > Duration::from_secs(4) && wait < Duration::from_secs(6));
    }
}
