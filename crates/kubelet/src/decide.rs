//! What the kubelet does with one pod: a pure function of the pod and the clock.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

/// Annotation that steers a pod: `Pending` or `NotReady` (absent: the pod becomes Ready).
pub const STATE_ANNOTATION: &str = "kubelet.vigil.dev/state";
/// Annotation that makes a pod's containers exit with this code once it has run (after the
/// ready delay and [`RUN_SECONDS_ANNOTATION`]): `"0"` makes the pod `Succeeded`, any other
/// code `Failed` (whatever its restartPolicy: the simulated kubelet never restarts containers).
pub const EXIT_CODE_ANNOTATION: &str = "kubelet.vigil.dev/exit-code";
/// Annotation: how many seconds a pod with an exit code runs (Ready) before it exits; default 0.
pub const RUN_SECONDS_ANNOTATION: &str = "kubelet.vigil.dev/run-seconds";

/// The state the kubelet reports for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodState {
    /// Scheduled, containers not started, no IP.
    Pending,
    /// Running with an IP, not ready.
    NotReady,
    /// Running, ready.
    Ready,
    /// Its containers exited with this code: Succeeded (0) or Failed.
    Exited(i32),
}

/// The kubelet's next step for a pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decision {
    /// Not this kubelet's pod.
    Ignore,
    /// Unscheduled: bind it to this node.
    Bind,
    /// Deleted gracefully: stop it and delete it for good.
    Finish,
    /// Its status must become `state`; look again after `requeue_after` (the ready delay).
    Report {
        state: PodState,
        requeue_after: Option<Duration>,
    },
    /// Status is right; nothing to write.
    Nothing,
}

fn wanted_state(
    pod: &Pod,
    started: Option<Instant>,
    ready_delay: Duration,
    now: Instant,
) -> (PodState, Option<Duration>) {
    let annotation = pod
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(STATE_ANNOTATION))
        .map(String::as_str);
    let exit_code =
        annotation_of(pod, EXIT_CODE_ANNOTATION).and_then(|c| c.trim().parse::<i32>().ok());
    match annotation {
        Some("Pending") => (PodState::Pending, None),
        Some("NotReady") => (PodState::NotReady, None),
        _ if exit_code.is_some() => {
            let run = annotation_of(pod, RUN_SECONDS_ANNOTATION)
                .and_then(|s| s.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0)
                .map_or(Duration::ZERO, Duration::from_secs_f64);
            let elapsed = started.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
            let exit_at = ready_delay + run;
            match exit_code {
                Some(code) if started.is_some() && elapsed >= exit_at => {
                    (PodState::Exited(code), None)
                }
                // Not started yet: report it running first, so it has a start time.
                _ if elapsed >= ready_delay => {
                    (PodState::Ready, Some(exit_at.saturating_sub(elapsed)))
                }
                _ => (PodState::NotReady, Some(ready_delay - elapsed)),
            }
        }
        _ => {
            let elapsed = started.map_or(Duration::ZERO, |s| now.saturating_duration_since(s));
            if elapsed >= ready_delay {
                (PodState::Ready, None)
            } else {
                (PodState::NotReady, Some(ready_delay - elapsed))
            }
        }
    }
}

fn annotation_of<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

/// The state a pod's status currently shows.
fn reported_state(pod: &Pod) -> Option<PodState> {
    let status = pod.status.as_ref()?;
    let ready = status
        .conditions
        .iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    match (status.phase.as_deref(), status.pod_ip.is_some(), ready) {
        (Some("Running"), true, true) => Some(PodState::Ready),
        (Some("Running"), true, false) => Some(PodState::NotReady),
        // A pod the kubelet has marked scheduled but not started.
        (Some("Pending"), false, false)
            if status
                .conditions
                .iter()
                .flatten()
                .any(|c| c.type_ == "PodScheduled" && c.status == "True") =>
        {
            Some(PodState::Pending)
        }
        _ => None,
    }
}

/// Whether the pod's required node affinity admits `node` by name (`matchFields` on
/// `metadata.name`, as DaemonSet pods carry it). Label expressions are not evaluated: the
/// simulated node accepts them.
fn affinity_allows(pod: &Pod, node: &str) -> bool {
    let terms = pod
        .spec
        .as_ref()
        .and_then(|s| s.affinity.as_ref())
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|a| {
            a.required_during_scheduling_ignored_during_execution
                .as_ref()
        })
        .map(|r| r.node_selector_terms.clone())
        .unwrap_or_default();
    if terms.is_empty() {
        return true;
    }
    // Terms are ORed; within a term, every field requirement must hold.
    terms.iter().any(|t| {
        t.match_fields.iter().flatten().all(|f| {
            f.key != "metadata.name"
                || match f.operator.as_str() {
                    "In" => f.values.iter().flatten().any(|v| v == node),
                    "NotIn" => !f.values.iter().flatten().any(|v| v == node),
                    _ => true,
                }
        })
    })
}

/// Decides what the kubelet of `node` does with `pod` now; `started` is when it first ran it.
pub fn decide(
    pod: &Pod,
    node: &str,
    started: Option<Instant>,
    ready_delay: Duration,
    now: Instant,
) -> Decision {
    let Some(spec) = pod.spec.as_ref() else {
        return Decision::Ignore;
    };
    let deleting = pod.metadata.deletion_timestamp.is_some();
    let bound_to = spec.node_name.as_deref().unwrap_or("");
    if bound_to.is_empty() {
        let ours_to_schedule = spec
            .scheduler_name
            .as_deref()
            .is_none_or(|s| s == "default-scheduler");
        return if !deleting && ours_to_schedule && affinity_allows(pod, node) {
            Decision::Bind
        } else {
            Decision::Ignore
        };
    }
    if bound_to != node {
        return Decision::Ignore;
    }
    if deleting {
        // Once the grace period is cut to zero only finalizers hold the pod; the server removes it.
        let finished = pod.metadata.deletion_grace_period_seconds == Some(0);
        return if finished {
            Decision::Nothing
        } else {
            Decision::Finish
        };
    }
    let phase = pod.status.as_ref().and_then(|s| s.phase.as_deref());
    if matches!(phase, Some("Succeeded" | "Failed")) {
        return Decision::Nothing;
    }
    let (state, requeue_after) = wanted_state(pod, started, ready_delay, now);
    if reported_state(pod) == Some(state) {
        return match requeue_after {
            // Already reported NotReady while the ready delay runs: look again when it ends.
            Some(_) => Decision::Report {
                state,
                requeue_after,
            },
            None => Decision::Nothing,
        };
    }
    Decision::Report {
        state,
        requeue_after,
    }
}

/// The full status the kubelet reports for `state`, keeping transition times that did not change.
pub fn status(
    pod: &Pod,
    state: PodState,
    ip: &str,
    host_ip: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let now_text = now.to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let old = pod.status.as_ref();
    let since = |type_: &str, value: &str| {
        old.and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .find(|c| c.type_ == type_ && c.status == value)
            .and_then(|c| c.last_transition_time.as_ref())
            .map(|t| t.0.to_string())
            .unwrap_or_else(|| now_text.clone())
    };
    let condition = |type_: &str, ok: bool| {
        let value = if ok { "True" } else { "False" };
        json!({"type": type_, "status": value, "lastProbeTime": null, "lastTransitionTime": since(type_, value)})
    };
    let exited = match state {
        PodState::Exited(code) => Some(code),
        _ => None,
    };
    let running = state != PodState::Pending;
    let ready = state == PodState::Ready;
    let started_at = old
        .and_then(|s| s.start_time.as_ref())
        .map(|t| t.0.to_string())
        .unwrap_or_else(|| now_text.clone());
    let uid = pod.metadata.uid.as_deref().unwrap_or("");
    let containers: Vec<Value> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter())
        .map(|c| {
            let container_state = if let Some(code) = exited {
                json!({"terminated": {"exitCode": code, "reason": if code == 0 { "Completed" } else { "Error" },
                       "startedAt": started_at, "finishedAt": now_text, "containerID": format!("vigil://{uid}/{}", c.name)}})
            } else if running {
                json!({"running": {"startedAt": started_at}})
            } else {
                json!({"waiting": {"reason": "ContainerCreating"}})
            };
            json!({
                "name": c.name,
                "image": c.image.clone().unwrap_or_default(),
                "imageID": "",
                "containerID": format!("vigil://{uid}/{}", c.name),
                "ready": ready,
                "started": running && exited.is_none(),
                "restartCount": 0,
                "state": container_state,
            })
        })
        .collect();
    let phase = match exited {
        Some(0) => "Succeeded",
        Some(_) => "Failed",
        None if running => "Running",
        None => "Pending",
    };
    let mut status = json!({
        "phase": phase,
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": started_at,
        "qosClass": "BestEffort",
        "conditions": [
            condition("PodReadyToStartContainers", running && exited.is_none()),
            condition("Initialized", true),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled", true),
        ],
        "containerStatuses": containers,
    });
    if exited.is_some()
        && let Some(conditions) = status["conditions"].as_array_mut()
    {
        // As the real kubelet reports a finished pod.
        for c in conditions
            .iter_mut()
            .filter(|c| c["type"] != "PodScheduled")
        {
            c["reason"] = json!("PodCompleted");
        }
    }
    if running {
        status["podIP"] = json!(ip);
        status["podIPs"] = json!([{"ip": ip}]);
    } else {
        status["podIP"] = Value::Null;
        status["podIPs"] = Value::Null;
    }
    status
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(value: Value) -> Pod {
        serde_json::from_value(value).expect("pod")
    }

    fn base() -> Value {
        json!({"metadata": {"name": "p", "namespace": "a", "uid": "u1"}, "spec": {"containers": [{"name": "c", "image": "i"}]}})
    }

    fn bound(mut v: Value) -> Value {
        v["spec"]["nodeName"] = json!("n1");
        v
    }

    #[test]
    fn unscheduled_pods_are_bound_unless_another_scheduler_owns_them() {
        let now = Instant::now();
        assert_eq!(
            decide(&pod(base()), "n1", None, Duration::ZERO, now),
            Decision::Bind
        );
        let mut other = base();
        other["spec"]["schedulerName"] = json!("my-scheduler");
        assert_eq!(
            decide(&pod(other), "n1", None, Duration::ZERO, now),
            Decision::Ignore
        );
        let mut elsewhere = base();
        elsewhere["spec"]["nodeName"] = json!("n2");
        assert_eq!(
            decide(&pod(elsewhere), "n1", None, Duration::ZERO, now),
            Decision::Ignore
        );
    }

    #[test]
    fn bound_pods_become_ready_after_the_delay() {
        let now = Instant::now();
        let p = pod(bound(base()));
        assert_eq!(
            decide(&p, "n1", None, Duration::ZERO, now),
            Decision::Report {
                state: PodState::Ready,
                requeue_after: None
            }
        );
        let delayed = decide(&p, "n1", Some(now), Duration::from_secs(2), now);
        assert_eq!(
            delayed,
            Decision::Report {
                state: PodState::NotReady,
                requeue_after: Some(Duration::from_secs(2))
            }
        );
    }

    #[test]
    fn reported_status_is_stable_and_annotation_steers_it() {
        let now = Instant::now();
        let mut v = bound(base());
        let ready = status(
            &pod(v.clone()),
            PodState::Ready,
            "10.244.0.2",
            "10.0.0.1",
            chrono::Utc::now(),
        );
        v["status"] = ready;
        assert_eq!(
            decide(&pod(v.clone()), "n1", Some(now), Duration::ZERO, now),
            Decision::Nothing,
            "no write in steady state"
        );
        v["metadata"]["annotations"] = json!({STATE_ANNOTATION: "NotReady"});
        assert_eq!(
            decide(&pod(v.clone()), "n1", Some(now), Duration::ZERO, now),
            Decision::Report {
                state: PodState::NotReady,
                requeue_after: None
            }
        );
        v["metadata"]["annotations"] = json!({STATE_ANNOTATION: "Pending"});
        let pending = status(
            &pod(v.clone()),
            PodState::Pending,
            "",
            "10.0.0.1",
            chrono::Utc::now(),
        );
        assert!(pending["podIP"].is_null());
        assert_eq!(pending["phase"], "Pending");
        v["status"] = pending;
        assert_eq!(
            decide(&pod(v), "n1", Some(now), Duration::ZERO, now),
            Decision::Nothing
        );
    }

    #[test]
    fn graceful_deletion_is_finished_once() {
        let now = Instant::now();
        let mut v = bound(base());
        v["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        v["metadata"]["deletionGracePeriodSeconds"] = json!(30);
        assert_eq!(
            decide(&pod(v.clone()), "n1", None, Duration::ZERO, now),
            Decision::Finish
        );
        v["metadata"]["deletionGracePeriodSeconds"] = json!(0);
        assert_eq!(
            decide(&pod(v), "n1", None, Duration::ZERO, now),
            Decision::Nothing
        );
    }

    #[test]
    fn an_exit_code_finishes_the_pod_after_it_ran() {
        let now = Instant::now();
        let mut v = bound(base());
        v["metadata"]["annotations"] =
            json!({EXIT_CODE_ANNOTATION: "0", RUN_SECONDS_ANNOTATION: "2"});
        // Not started yet: it runs first.
        assert!(matches!(
            decide(&pod(v.clone()), "n1", None, Duration::ZERO, now),
            Decision::Report {
                state: PodState::Ready,
                ..
            }
        ));
        let started = now - Duration::from_secs(1);
        assert_eq!(
            decide(&pod(v.clone()), "n1", Some(started), Duration::ZERO, now),
            Decision::Report {
                state: PodState::Ready,
                requeue_after: Some(Duration::from_secs(1))
            }
        );
        let started = now - Duration::from_secs(3);
        assert_eq!(
            decide(&pod(v.clone()), "n1", Some(started), Duration::ZERO, now),
            Decision::Report {
                state: PodState::Exited(0),
                requeue_after: None
            }
        );
        let done = status(
            &pod(v.clone()),
            PodState::Exited(0),
            "10.244.0.2",
            "10.0.0.1",
            chrono::Utc::now(),
        );
        assert_eq!(done["phase"], "Succeeded");
        assert_eq!(
            done["containerStatuses"][0]["state"]["terminated"]["reason"],
            "Completed"
        );
        let failed = status(
            &pod(v.clone()),
            PodState::Exited(3),
            "10.244.0.2",
            "10.0.0.1",
            chrono::Utc::now(),
        );
        assert_eq!(failed["phase"], "Failed");
        assert_eq!(
            failed["containerStatuses"][0]["state"]["terminated"]["exitCode"],
            3
        );
        v["status"] = done;
        assert_eq!(
            decide(&pod(v), "n1", Some(started), Duration::ZERO, now),
            Decision::Nothing
        );
    }

    #[test]
    fn a_pod_pinned_to_another_node_by_affinity_is_left_alone() {
        let now = Instant::now();
        let mut v = base();
        v["spec"]["affinity"] = json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n2"]}]}]}}});
        assert_eq!(
            decide(&pod(v.clone()), "n1", None, Duration::ZERO, now),
            Decision::Ignore
        );
        assert_eq!(
            decide(&pod(v), "n2", None, Duration::ZERO, now),
            Decision::Bind
        );
    }
}
