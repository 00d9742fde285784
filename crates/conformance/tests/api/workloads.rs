//! Workload controllers as kube-controller-manager v1.28 runs them: Deployments (ReplicaSets
//! named by pod-template-hash, rolling and Recreate updates, rollback, pause, scale, history,
//! minReadySeconds, progress deadline, status and conditions), ReplicaSets (pods, adoption,
//! release, status) and Jobs (completions, parallelism, back-off limit, status). The simulated
//! kubelet plays the node, so the same tests run on the sandbox and on a real control plane.

use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    ControllerRevision, DaemonSet, Deployment, ReplicaSet, StatefulSet,
};
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use kube::ResourceExt as _;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use vigil_testenv::{TestEnv, TestEnvOptions, wait_for};

/// Rollouts take several controller rounds and kubelet reports.
const ROLLOUT_TIMEOUT: Duration = Duration::from_secs(30);
const HASH_LABEL: &str = "pod-template-hash";
const REVISION: &str = "deployment.kubernetes.io/revision";

async fn env() -> TestEnv {
    TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env")
}

fn deployment(name: &str, replicas: i32, image: &str) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "app", "image": image}]},
            },
        },
    })
}

async fn create_deployment(env: &TestEnv, body: Value) -> Deployment {
    let d: Deployment = serde_json::from_value(body).expect("deployment");
    env.api::<Deployment>()
        .create(&PostParams::default(), &d)
        .await
        .expect("create deployment")
}

async fn patch_deployment(env: &TestEnv, name: &str, patch: Value) {
    env.api::<Deployment>()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch deployment");
}

fn condition(conditions: &Value, type_: &str) -> (String, String) {
    conditions
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == type_)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or_default().to_owned(),
                c["reason"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .unwrap_or_default()
}

/// A Deployment's status as JSON, for compact checks and failure messages.
async fn status_of(env: &TestEnv, name: &str) -> Result<(Value, Deployment), String> {
    let d = env
        .api::<Deployment>()
        .get(name)
        .await
        .map_err(|e| e.to_string())?;
    let status = serde_json::to_value(&d.status).map_err(|e| e.to_string())?;
    Ok((status, d))
}

/// Waits until the Deployment's rollout of its current generation is complete, with every
/// replica updated, ready and available (`kubectl rollout status`).
async fn wait_complete(env: &TestEnv, name: &str, replicas: i64) -> Deployment {
    wait_for(
        &format!("deployment {name} to complete its rollout"),
        ROLLOUT_TIMEOUT,
        || async {
            let (s, d) = status_of(env, name).await?;
            let n = |k: &str| s[k].as_i64().unwrap_or(0);
            let done = s["observedGeneration"].as_i64() == d.metadata.generation
                && n("replicas") == replicas
                && n("updatedReplicas") == replicas
                && n("readyReplicas") == replicas
                && n("availableReplicas") == replicas
                && n("unavailableReplicas") == 0
                && condition(&s["conditions"], "Available")
                    == ("True".into(), "MinimumReplicasAvailable".into())
                && condition(&s["conditions"], "Progressing")
                    == ("True".into(), "NewReplicaSetAvailable".into());
            if done {
                Ok(Some(d))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("rollout completes")
}

async fn replica_sets(env: &TestEnv, app: &str) -> Vec<ReplicaSet> {
    let mut list = env
        .api::<ReplicaSet>()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .expect("list replicasets")
        .items;
    list.sort_by_key(|rs| {
        rs.annotations()
            .get(REVISION)
            .and_then(|r| r.parse::<i64>().ok())
    });
    list
}

async fn active_pods(env: &TestEnv, selector: &str) -> Vec<Pod> {
    env.api::<Pod>()
        .list(&ListParams::default().labels(selector))
        .await
        .expect("list pods")
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| {
            !matches!(
                p.status.as_ref().and_then(|s| s.phase.as_deref()),
                Some("Succeeded" | "Failed")
            )
        })
        .collect()
}

fn spec_replicas(rs: &ReplicaSet) -> i32 {
    rs.spec.as_ref().and_then(|s| s.replicas).unwrap_or(0)
}

fn controller_ref(obj: &impl kube::Resource) -> Value {
    let refs = obj.meta().owner_references.clone().unwrap_or_default();
    assert_eq!(refs.len(), 1, "one owner: {refs:?}");
    serde_json::to_value(&refs[0]).expect("ownerReference")
}

#[tokio::test]
async fn a_deployment_runs_its_pods_through_a_hash_named_replica_set() {
    let env = env().await;
    let d = create_deployment(&env, deployment("web", 3, "registry.example/app:1.0")).await;
    let done = wait_complete(&env, "web", 3).await;
    assert_eq!(
        done.annotations().get(REVISION).map(String::as_str),
        Some("1")
    );

    let rss = replica_sets(&env, "web").await;
    assert_eq!(rss.len(), 1);
    let rs = &rss[0];
    let hash = rs.labels().get(HASH_LABEL).cloned().expect("hash label");
    assert_eq!(rs.name_any(), format!("web-{hash}"));
    assert!(
        !hash.is_empty()
            && hash.len() <= 10
            && hash
                .chars()
                .all(|c| "bcdfghjklmnpqrstvwxz2456789".contains(c)),
        "hash {hash} rendered with SafeEncodeString"
    );
    let annotations = rs.annotations();
    assert_eq!(annotations.get(REVISION).map(String::as_str), Some("1"));
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("3")
    );
    assert_eq!(
        annotations
            .get("deployment.kubernetes.io/max-replicas")
            .map(String::as_str),
        Some("4")
    );
    assert_eq!(
        controller_ref(rs),
        json!({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web", "uid": d.uid().expect("uid"),
               "controller": true, "blockOwnerDeletion": true})
    );
    let selector =
        serde_json::to_value(&rs.spec.as_ref().expect("spec").selector).expect("selector");
    assert_eq!(
        selector,
        json!({"matchLabels": {"app": "web", HASH_LABEL: hash}})
    );
    let rs_status = serde_json::to_value(&rs.status).expect("status");
    assert_eq!(rs_status["replicas"], 3);
    assert_eq!(rs_status["fullyLabeledReplicas"], 3);
    assert_eq!(rs_status["readyReplicas"], 3);
    assert_eq!(rs_status["availableReplicas"], 3);
    assert_eq!(rs_status["observedGeneration"], 1);

    let pods = active_pods(&env, "app=web").await;
    assert_eq!(pods.len(), 3);
    for pod in &pods {
        assert_eq!(
            pod.metadata.generate_name.as_deref(),
            Some(format!("web-{hash}-").as_str())
        );
        assert_eq!(pod.labels().get(HASH_LABEL), Some(&hash));
        assert_eq!(
            controller_ref(pod),
            json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs.name_any(), "uid": rs.uid().expect("uid"),
                   "controller": true, "blockOwnerDeletion": true})
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn a_fresh_deployment_without_ready_pods_reports_minimum_replicas_unavailable() {
    let env = env().await;
    let mut body = deployment("slow", 2, "registry.example/app:1.0");
    body["spec"]["template"]["metadata"]["annotations"] =
        json!({vigil_testenv::STATE_ANNOTATION: "NotReady"});
    create_deployment(&env, body).await;
    let s = wait_for(
        "the rollout to be reported in progress",
        ROLLOUT_TIMEOUT,
        || async {
            let (s, _) = status_of(&env, "slow").await?;
            if s["replicas"] == 2 && s["updatedReplicas"] == 2 && s["unavailableReplicas"] == 2 {
                Ok(Some(s))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("status");
    assert_eq!(
        condition(&s["conditions"], "Available"),
        ("False".into(), "MinimumReplicasUnavailable".into())
    );
    assert_eq!(
        condition(&s["conditions"], "Progressing"),
        ("True".into(), "ReplicaSetUpdated".into())
    );
    assert!(s.get("availableReplicas").is_none_or(Value::is_null), "{s}");
    let messages: Vec<&str> = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["message"].as_str())
        .collect();
    assert!(
        messages.contains(&"Deployment does not have minimum availability."),
        "{messages:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn a_rolling_update_replaces_pods_and_a_rollback_reuses_the_old_replica_set() {
    let env = env().await;
    let mut body = deployment("roll", 2, "registry.example/app:1.0");
    body["spec"]["strategy"] =
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}});
    create_deployment(&env, body).await;
    wait_complete(&env, "roll", 2).await;
    let first = replica_sets(&env, "roll").await[0].name_any();

    patch_deployment(&env, "roll", json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2.0"}]}}}})).await;
    // maxUnavailable 0 and maxSurge 1: never fewer than 2 available, never more than 3 pods.
    wait_for("the rollout to v2", ROLLOUT_TIMEOUT, || async {
        let pods = active_pods(&env, "app=roll").await;
        assert!(
            pods.len() <= 3,
            "at most replicas + maxSurge pods: {}",
            pods.len()
        );
        let (s, d) = status_of(&env, "roll").await?;
        let done = s["observedGeneration"].as_i64() == d.metadata.generation
            && s["updatedReplicas"] == 2
            && s["availableReplicas"] == 2
            && s["replicas"] == 2
            && condition(&s["conditions"], "Progressing").1 == "NewReplicaSetAvailable";
        if done {
            Ok(Some(()))
        } else {
            Err(s.to_string())
        }
    })
    .await
    .expect("rolled out");
    let rss = replica_sets(&env, "roll").await;
    assert_eq!(rss.len(), 2);
    assert_eq!(rss[0].name_any(), first);
    assert_eq!(
        spec_replicas(&rss[0]),
        0,
        "the old ReplicaSet is scaled to zero and kept"
    );
    assert_eq!(spec_replicas(&rss[1]), 2);
    assert_eq!(
        rss[1].annotations().get(REVISION).map(String::as_str),
        Some("2")
    );
    let second = rss[1].name_any();
    let d = env.api::<Deployment>().get("roll").await.expect("get");
    assert_eq!(d.annotations().get(REVISION).map(String::as_str), Some("2"));

    // Rollback: the template changes back; the first ReplicaSet becomes the new one again.
    patch_deployment(&env, "roll", json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}}}})).await;
    let d = wait_complete(&env, "roll", 2).await;
    let rss = replica_sets(&env, "roll").await;
    assert_eq!(
        rss.len(),
        2,
        "no third ReplicaSet: {:?}",
        rss.iter().map(|r| r.name_any()).collect::<Vec<_>>()
    );
    let reused = rss
        .iter()
        .find(|r| r.name_any() == first)
        .expect("first kept");
    assert_eq!(spec_replicas(reused), 2);
    assert_eq!(
        reused.annotations().get(REVISION).map(String::as_str),
        Some("3")
    );
    assert_eq!(
        reused
            .annotations()
            .get("deployment.kubernetes.io/revision-history")
            .map(String::as_str),
        Some("1")
    );
    let other = rss
        .iter()
        .find(|r| r.name_any() == second)
        .expect("second kept");
    assert_eq!(spec_replicas(other), 0);
    assert_eq!(d.annotations().get(REVISION).map(String::as_str), Some("3"));
    env.cleanup().await;
}

#[tokio::test]
async fn recreate_stops_every_old_pod_before_starting_new_ones() {
    let env = env().await;
    let mut body = deployment("rec", 2, "registry.example/app:1.0");
    body["spec"]["strategy"] = json!({"type": "Recreate"});
    create_deployment(&env, body).await;
    wait_complete(&env, "rec", 2).await;
    let old_hash = replica_sets(&env, "rec").await[0]
        .labels()
        .get(HASH_LABEL)
        .cloned()
        .expect("hash");
    patch_deployment(&env, "rec", json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2.0"}]}}}})).await;
    wait_for("the Recreate rollout", ROLLOUT_TIMEOUT, || async {
        let pods = env
            .api::<Pod>()
            .list(&ListParams::default().labels("app=rec"))
            .await
            .map_err(|e| e.to_string())?
            .items;
        let old = pods
            .iter()
            .filter(|p| p.labels().get(HASH_LABEL) == Some(&old_hash))
            .count();
        let new = pods.len() - old;
        assert!(
            old == 0 || new == 0,
            "old ({old}) and new ({new}) pods never run together"
        );
        let (s, d) = status_of(&env, "rec").await?;
        let done = s["observedGeneration"].as_i64() == d.metadata.generation
            && s["updatedReplicas"] == 2
            && s["availableReplicas"] == 2
            && s["replicas"] == 2
            && condition(&s["conditions"], "Progressing").1 == "NewReplicaSetAvailable";
        if done {
            Ok(Some(()))
        } else {
            Err(s.to_string())
        }
    })
    .await
    .expect("recreated");
    let status = status_of(&env, "rec").await.expect("status").0;
    assert_eq!(
        condition(&status["conditions"], "Available"),
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    env.cleanup().await;
}

#[tokio::test]
async fn revision_history_limit_deletes_the_oldest_replica_sets() {
    let env = env().await;
    let mut body = deployment("hist", 1, "registry.example/app:1");
    body["spec"]["revisionHistoryLimit"] = json!(1);
    create_deployment(&env, body).await;
    wait_complete(&env, "hist", 1).await;
    for version in 2..=4 {
        patch_deployment(&env, "hist", json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": format!("registry.example/app:{version}")}]}}}})).await;
        wait_complete(&env, "hist", 1).await;
    }
    let names = wait_for(
        "history trimmed to one old ReplicaSet",
        ROLLOUT_TIMEOUT,
        || async {
            let rss = replica_sets(&env, "hist").await;
            let revisions: Vec<String> = rss
                .iter()
                .filter_map(|r| r.annotations().get(REVISION).cloned())
                .collect();
            if revisions == ["3", "4"] {
                Ok(Some(revisions))
            } else {
                Err(format!("{revisions:?}"))
            }
        },
    )
    .await
    .expect("history");
    assert_eq!(names.len(), 2);
    env.cleanup().await;
}

#[tokio::test]
async fn scaling_changes_the_pod_count_of_the_current_replica_set() {
    let env = env().await;
    create_deployment(&env, deployment("scale", 2, "registry.example/app:1.0")).await;
    wait_complete(&env, "scale", 2).await;
    patch_deployment(&env, "scale", json!({"spec": {"replicas": 4}})).await;
    wait_complete(&env, "scale", 4).await;
    assert_eq!(active_pods(&env, "app=scale").await.len(), 4);
    let rss = replica_sets(&env, "scale").await;
    assert_eq!(rss.len(), 1, "scaling makes no new ReplicaSet");
    assert_eq!(
        rss[0]
            .annotations()
            .get("deployment.kubernetes.io/desired-replicas")
            .map(String::as_str),
        Some("4")
    );
    patch_deployment(&env, "scale", json!({"spec": {"replicas": 1}})).await;
    wait_complete(&env, "scale", 1).await;
    wait_for("one pod left", ROLLOUT_TIMEOUT, || async {
        let n = active_pods(&env, "app=scale").await.len();
        if n == 1 {
            Ok(Some(()))
        } else {
            Err(format!("{n} pods"))
        }
    })
    .await
    .expect("scaled down");
    env.cleanup().await;
}

#[tokio::test]
async fn a_paused_deployment_holds_its_rollout_until_resumed() {
    let env = env().await;
    create_deployment(&env, deployment("pause", 1, "registry.example/app:1.0")).await;
    wait_complete(&env, "pause", 1).await;
    patch_deployment(&env, "pause", json!({"spec": {"paused": true}})).await;
    wait_for("the paused condition", ROLLOUT_TIMEOUT, || async {
        let (s, _) = status_of(&env, "pause").await?;
        if condition(&s["conditions"], "Progressing")
            == ("Unknown".into(), "DeploymentPaused".into())
        {
            Ok(Some(()))
        } else {
            Err(s.to_string())
        }
    })
    .await
    .expect("paused");
    patch_deployment(&env, "pause", json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2.0"}]}}}})).await;
    // Paused: the new generation is observed, but no ReplicaSet is made for it.
    wait_for(
        "the paused change to be observed",
        ROLLOUT_TIMEOUT,
        || async {
            let (s, d) = status_of(&env, "pause").await?;
            if s["observedGeneration"].as_i64() == d.metadata.generation {
                Ok(Some(()))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("observed");
    assert_eq!(replica_sets(&env, "pause").await.len(), 1);
    patch_deployment(&env, "pause", json!({"spec": {"paused": false}})).await;
    wait_complete(&env, "pause", 1).await;
    let rss = replica_sets(&env, "pause").await;
    assert_eq!(rss.len(), 2);
    assert_eq!(
        rss[1].annotations().get(REVISION).map(String::as_str),
        Some("2")
    );
    env.cleanup().await;
}

#[tokio::test]
async fn min_ready_seconds_delays_availability() {
    let env = env().await;
    let mut body = deployment("mrs", 1, "registry.example/app:1.0");
    body["spec"]["minReadySeconds"] = json!(3);
    create_deployment(&env, body).await;
    let s = wait_for(
        "a ready but not yet available pod",
        ROLLOUT_TIMEOUT,
        || async {
            let (s, _) = status_of(&env, "mrs").await?;
            if s["readyReplicas"] == 1 {
                Ok(Some(s))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("ready");
    assert!(
        s.get("availableReplicas").is_none_or(Value::is_null),
        "not available before minReadySeconds: {s}"
    );
    assert_eq!(
        condition(&s["conditions"], "Available").1,
        "MinimumReplicasUnavailable"
    );
    wait_complete(&env, "mrs", 1).await;
    let rs = &replica_sets(&env, "mrs").await[0];
    assert_eq!(rs.spec.as_ref().and_then(|s| s.min_ready_seconds), Some(3));
    env.cleanup().await;
}

#[tokio::test]
async fn a_stuck_rollout_exceeds_its_progress_deadline() {
    let env = env().await;
    let mut body = deployment("stuck", 1, "registry.example/app:1.0");
    body["spec"]["progressDeadlineSeconds"] = json!(2);
    body["spec"]["template"]["metadata"]["annotations"] =
        json!({vigil_testenv::STATE_ANNOTATION: "NotReady"});
    create_deployment(&env, body).await;
    let s = wait_for("ProgressDeadlineExceeded", ROLLOUT_TIMEOUT, || async {
        let (s, _) = status_of(&env, "stuck").await?;
        if condition(&s["conditions"], "Progressing")
            == ("False".into(), "ProgressDeadlineExceeded".into())
        {
            Ok(Some(s))
        } else {
            Err(s.to_string())
        }
    })
    .await
    .expect("deadline exceeded");
    let rs = replica_sets(&env, "stuck").await[0].name_any();
    let message = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Progressing")
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    assert_eq!(
        message,
        format!("ReplicaSet \"{rs}\" has timed out progressing.")
    );
    env.cleanup().await;
}

#[tokio::test]
async fn deleting_a_deployment_deletes_its_replica_sets_and_pods() {
    let env = env().await;
    create_deployment(&env, deployment("gone", 2, "registry.example/app:1.0")).await;
    wait_complete(&env, "gone", 2).await;
    env.api::<Deployment>()
        .delete("gone", &DeleteParams::background())
        .await
        .expect("delete");
    wait_for(
        "ReplicaSets and pods to go with their Deployment",
        ROLLOUT_TIMEOUT,
        || async {
            let rss = replica_sets(&env, "gone").await.len();
            let pods = env
                .api::<Pod>()
                .list(&ListParams::default().labels("app=gone"))
                .await
                .map_err(|e| e.to_string())?
                .items
                .len();
            if rss == 0 && pods == 0 {
                Ok(Some(()))
            } else {
                Err(format!("{rss} replicasets, {pods} pods"))
            }
        },
    )
    .await
    .expect("collected");
    env.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// ReplicaSets on their own
// ---------------------------------------------------------------------------------------------

fn replica_set(name: &str, replicas: i32) -> ReplicaSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name, "extra": "yes"}},
                         "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}},
        },
    }))
    .expect("replicaset")
}

async fn wait_rs_status(env: &TestEnv, name: &str, want: Value) -> ReplicaSet {
    wait_for(
        &format!("replicaset {name} status {want}"),
        ROLLOUT_TIMEOUT,
        || async {
            let rs = env
                .api::<ReplicaSet>()
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let status = serde_json::to_value(&rs.status).map_err(|e| e.to_string())?;
            if status == want {
                Ok(Some(rs))
            } else {
                Err(status.to_string())
            }
        },
    )
    .await
    .expect("replicaset status")
}

#[tokio::test]
async fn a_replica_set_adopts_matching_orphans_and_releases_pods_that_stop_matching() {
    let env = env().await;
    env.create_pod("orphan", "adopt").await.expect("orphan pod");
    env.wait_pod("orphan", true).await.expect("orphan ready");
    let rs = env
        .api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set("adopt", 2))
        .await
        .expect("create replicaset");
    // The orphan counts: one pod is created, not two. It lacks the template's `extra` label,
    // so it is not fully labeled.
    let done = wait_rs_status(&env, "adopt", json!({"replicas": 2, "fullyLabeledReplicas": 1, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1})).await;
    let orphan = env.api::<Pod>().get("orphan").await.expect("orphan");
    assert_eq!(
        controller_ref(&orphan),
        json!({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "adopt", "uid": rs.uid().expect("uid"),
               "controller": true, "blockOwnerDeletion": true})
    );
    assert_eq!(done.metadata.generation, Some(1));

    // Relabelled, the pod is released (its reference removed) and replaced.
    env.api::<Pod>()
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(&json!({"metadata": {"labels": {"app": "elsewhere"}}})),
        )
        .await
        .expect("relabel");
    wait_rs_status(&env, "adopt", json!({"replicas": 2, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2, "observedGeneration": 1})).await;
    let released = env
        .api::<Pod>()
        .get("orphan")
        .await
        .expect("released pod stays");
    assert!(
        released
            .metadata
            .owner_references
            .as_ref()
            .is_none_or(Vec::is_empty),
        "{:?}",
        released.metadata.owner_references
    );
    env.cleanup().await;
}

#[tokio::test]
async fn a_replica_set_replaces_deleted_pods_and_scales_down() {
    let env = env().await;
    env.api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set("keep", 3))
        .await
        .expect("create replicaset");
    wait_rs_status(&env, "keep", json!({"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 1})).await;
    let victim = active_pods(&env, "app=keep").await[0].name_any();
    env.delete_pod_as_kubelet_would(&victim)
        .await
        .expect("delete pod");
    wait_rs_status(&env, "keep", json!({"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 1})).await;
    assert!(
        active_pods(&env, "app=keep")
            .await
            .iter()
            .all(|p| p.name_any() != victim)
    );
    env.api::<ReplicaSet>()
        .patch(
            "keep",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale down");
    wait_rs_status(&env, "keep", json!({"replicas": 1, "fullyLabeledReplicas": 1, "readyReplicas": 1, "availableReplicas": 1, "observedGeneration": 2})).await;
    env.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// Jobs
// ---------------------------------------------------------------------------------------------

fn job(name: &str, completions: i32, parallelism: i32, backoff_limit: i32, exit_code: &str) -> Job {
    serde_json::from_value(json!({
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": completions, "parallelism": parallelism, "backoffLimit": backoff_limit,
            "template": {
                "metadata": {"annotations": {vigil_testenv::EXIT_CODE_ANNOTATION: exit_code}},
                "spec": {"restartPolicy": "Never", "containers": [{"name": "app", "image": "registry.example/job:1.0"}]},
            },
        },
    }))
    .expect("job")
}

async fn wait_job(env: &TestEnv, name: &str, type_: &str) -> (Job, Value) {
    wait_for(
        &format!("job {name} to be {type_}"),
        ROLLOUT_TIMEOUT,
        || async {
            let j = env
                .api::<Job>()
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let s = serde_json::to_value(&j.status).map_err(|e| e.to_string())?;
            if condition(&s["conditions"], type_).0 == "True" {
                Ok(Some((j, s)))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("job finished")
}

#[tokio::test]
async fn a_job_runs_pods_until_its_completions_succeed() {
    let env = env().await;
    let created = env
        .api::<Job>()
        .create(&PostParams::default(), &job("work", 2, 1, 6, "0"))
        .await
        .expect("create job");
    let uid = created.uid().expect("uid");
    // The server labels the Job and its template and selects by the controller uid.
    let labels = created.labels();
    assert_eq!(labels.get("batch.kubernetes.io/controller-uid"), Some(&uid));
    assert_eq!(labels.get("controller-uid"), Some(&uid));
    assert_eq!(labels.get("job-name").map(String::as_str), Some("work"));
    assert_eq!(
        labels
            .get("batch.kubernetes.io/job-name")
            .map(String::as_str),
        Some("work")
    );
    let spec = created.spec.as_ref().expect("spec");
    assert_eq!(
        serde_json::to_value(&spec.selector).expect("selector"),
        json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}})
    );
    assert_eq!(spec.completion_mode.as_deref(), Some("NonIndexed"));
    assert_eq!(spec.suspend, Some(false));

    let (j, s) = wait_job(&env, "work", "Complete").await;
    let mut keys: Vec<&str> = s
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(_, v)| !v.is_null())
        .map(|(k, _)| k.as_str())
        .collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "completionTime",
            "conditions",
            "ready",
            "startTime",
            "succeeded",
            "uncountedTerminatedPods"
        ]
    );
    assert_eq!(s["uncountedTerminatedPods"], json!({}));
    let complete = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Complete")
        .cloned()
        .unwrap_or_default();
    assert!(
        complete.get("reason").is_none_or(Value::is_null),
        "no reason on Complete in v1.28: {complete}"
    );
    assert_eq!(s["succeeded"], 2);
    assert!(s.get("failed").is_none_or(Value::is_null), "{s}");
    assert!(s.get("active").is_none_or(Value::is_null), "{s}");
    assert_eq!(s["ready"], 0);
    let status = j.status.expect("status");
    assert!(
        status.start_time.is_some() && status.completion_time.is_some(),
        "{s}"
    );
    let pods = env
        .api::<Pod>()
        .list(&ListParams::default().labels("job-name=work"))
        .await
        .expect("pods")
        .items;
    assert_eq!(pods.len(), 2, "one pod per completion with parallelism 1");
    for pod in &pods {
        assert_eq!(
            pod.status.as_ref().and_then(|s| s.phase.as_deref()),
            Some("Succeeded")
        );
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("work-"));
        assert!(
            pod.finalizers().is_empty(),
            "tracking finalizer removed once counted: {:?}",
            pod.finalizers()
        );
        assert_eq!(
            controller_ref(pod),
            json!({"apiVersion": "batch/v1", "kind": "Job", "name": "work", "uid": uid, "controller": true, "blockOwnerDeletion": true})
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn a_job_fails_once_its_backoff_limit_is_exceeded() {
    let env = env().await;
    env.api::<Job>()
        .create(&PostParams::default(), &job("doomed", 1, 1, 0, "1"))
        .await
        .expect("create job");
    let (j, s) = wait_job(&env, "doomed", "Failed").await;
    assert_eq!(s["failed"], 1);
    let failed = s["conditions"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|c| c["type"] == "Failed")
        .cloned()
        .unwrap_or_default();
    assert_eq!(failed["reason"], "BackoffLimitExceeded");
    assert_eq!(
        failed["message"],
        "Job has reached the specified backoff limit"
    );
    assert!(
        j.status
            .as_ref()
            .and_then(|s| s.completion_time.as_ref())
            .is_none()
    );
    let pods = env
        .api::<Pod>()
        .list(&ListParams::default().labels("job-name=doomed"))
        .await
        .expect("pods")
        .items;
    assert_eq!(pods.len(), 1);
    assert_eq!(
        pods[0].status.as_ref().and_then(|s| s.phase.as_deref()),
        Some("Failed")
    );
    env.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// StatefulSets
// ---------------------------------------------------------------------------------------------

fn stateful_set(name: &str, replicas: i32, policy: &str, not_ready: bool) -> StatefulSet {
    let mut template = json!({"metadata": {"labels": {"app": name}},
        "spec": {"containers": [{"name": "app", "image": "registry.example/db:1.0"}]}});
    if not_ready {
        template["metadata"]["annotations"] = json!({vigil_testenv::STATE_ANNOTATION: "NotReady"});
    }
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {"replicas": replicas, "serviceName": name, "podManagementPolicy": policy,
                 "selector": {"matchLabels": {"app": name}}, "template": template},
    }))
    .expect("statefulset")
}

async fn pod_names(env: &TestEnv, app: &str) -> Vec<String> {
    let mut names: Vec<String> = active_pods(env, &format!("app={app}"))
        .await
        .iter()
        .map(|p| p.name_any())
        .collect();
    names.sort();
    names
}

async fn wait_sts(env: &TestEnv, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    wait_for(
        &format!("statefulset {name}: {what}"),
        ROLLOUT_TIMEOUT,
        || async {
            let sts = env
                .api::<StatefulSet>()
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let s = serde_json::to_value(&sts.status).map_err(|e| e.to_string())?;
            if ok(&s) && s["observedGeneration"].as_i64() == sts.metadata.generation {
                Ok(Some(s))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("statefulset settles")
}

#[tokio::test]
async fn a_stateful_set_runs_ordinal_pods_and_records_its_revision() {
    let env = env().await;
    let sts = env
        .api::<StatefulSet>()
        .create(
            &PostParams::default(),
            &stateful_set("db", 3, "OrderedReady", false),
        )
        .await
        .expect("create");
    let s = wait_sts(&env, "db", "3 ready", |s| {
        s["readyReplicas"] == 3
            && s["availableReplicas"] == 3
            && s["currentReplicas"] == 3
            && s["updatedReplicas"] == 3
    })
    .await;
    assert_eq!(s["replicas"], 3);
    assert_eq!(s["currentRevision"], s["updateRevision"]);
    let revision = s["updateRevision"].as_str().unwrap_or_default().to_owned();
    assert!(revision.starts_with("db-"), "{revision}");
    assert_eq!(pod_names(&env, "db").await, ["db-0", "db-1", "db-2"]);
    for (i, pod) in env
        .api::<Pod>()
        .list(&ListParams::default().labels("app=db"))
        .await
        .expect("pods")
        .items
        .iter()
        .enumerate()
    {
        let name = format!("db-{i}");
        assert_eq!(pod.name_any(), name);
        let labels = pod.labels();
        assert_eq!(labels.get("controller-revision-hash"), Some(&revision));
        assert_eq!(
            labels.get("statefulset.kubernetes.io/pod-name"),
            Some(&name)
        );
        assert_eq!(
            labels.get("apps.kubernetes.io/pod-index"),
            Some(&i.to_string())
        );
        let spec = pod.spec.as_ref().expect("spec");
        assert_eq!(spec.hostname.as_deref(), Some(name.as_str()));
        assert_eq!(spec.subdomain.as_deref(), Some("db"));
        assert_eq!(
            controller_ref(pod),
            json!({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "db", "uid": sts.uid().expect("uid"), "controller": true, "blockOwnerDeletion": true})
        );
    }
    let revisions = env
        .api::<ControllerRevision>()
        .list(&ListParams::default().labels("app=db"))
        .await
        .expect("revisions")
        .items;
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].name_any(), revision);
    assert_eq!(revisions[0].revision, 1);

    // Scale down: the highest ordinals go.
    env.api::<StatefulSet>()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(&json!({"spec": {"replicas": 1}})),
        )
        .await
        .expect("scale");
    wait_for("db-1 and db-2 to go", ROLLOUT_TIMEOUT, || async {
        let names = pod_names(&env, "db").await;
        if names == ["db-0"] {
            Ok(Some(()))
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await
    .expect("scaled down");
    wait_sts(&env, "db", "1 replica", |s| {
        s["replicas"] == 1 && s["readyReplicas"] == 1
    })
    .await;
    env.cleanup().await;
}

#[tokio::test]
async fn ordered_ready_waits_for_each_pod_and_parallel_does_not() {
    let env = env().await;
    env.api::<StatefulSet>()
        .create(
            &PostParams::default(),
            &stateful_set("ord", 2, "OrderedReady", true),
        )
        .await
        .expect("create");
    env.api::<StatefulSet>()
        .create(
            &PostParams::default(),
            &stateful_set("par", 2, "Parallel", true),
        )
        .await
        .expect("create");
    wait_for("both Parallel pods", ROLLOUT_TIMEOUT, || async {
        let names = pod_names(&env, "par").await;
        if names == ["par-0", "par-1"] {
            Ok(Some(()))
        } else {
            Err(format!("{names:?}"))
        }
    })
    .await
    .expect("parallel pods");
    env.wait_pod("ord-0", false)
        .await
        .expect("ord-0 running, not ready");
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(
        pod_names(&env, "ord").await,
        ["ord-0"],
        "ord-1 waits for ord-0 to be Ready"
    );
    env.make_pod_ready("ord-0").await.expect("ord-0 ready");
    env.wait_pod("ord-1", false)
        .await
        .expect("ord-1 comes once ord-0 is Ready");
    env.cleanup().await;
}

#[tokio::test]
async fn a_stateful_set_rolls_a_new_template_out_from_the_highest_ordinal() {
    let env = env().await;
    env.api::<StatefulSet>()
        .create(
            &PostParams::default(),
            &stateful_set("roll", 2, "OrderedReady", false),
        )
        .await
        .expect("create");
    let first = wait_sts(&env, "roll", "2 ready", |s| {
        s["readyReplicas"] == 2 && s["updatedReplicas"] == 2
    })
    .await;
    env.api::<StatefulSet>()
        .patch("roll", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/db:2.0"}]}}}})))
        .await
        .expect("new template");
    let s = wait_sts(&env, "roll", "rolled out", |s| {
        s["updatedReplicas"] == 2
            && s["readyReplicas"] == 2
            && s["currentRevision"] == s["updateRevision"]
            && s["updateRevision"] != first["updateRevision"]
    })
    .await;
    assert_eq!(s["currentReplicas"], 2);
    let mut revisions: Vec<i64> = env
        .api::<ControllerRevision>()
        .list(&ListParams::default().labels("app=roll"))
        .await
        .expect("revisions")
        .items
        .iter()
        .map(|r| r.revision)
        .collect();
    revisions.sort();
    assert_eq!(revisions, [1, 2]);
    for pod in active_pods(&env, "app=roll").await {
        assert_eq!(
            pod.labels()
                .get("controller-revision-hash")
                .map(String::as_str),
            s["updateRevision"].as_str()
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn a_failed_job_pod_is_replaced_after_a_back_off() {
    let env = env().await;
    env.api::<Job>()
        .create(&PostParams::default(), &job("retry", 1, 1, 1, "1"))
        .await
        .expect("create job");
    let started = std::time::Instant::now();
    // The first pod fails; its replacement comes after the 10 s back-off, fails too, and the
    // second failure exceeds backoffLimit 1.
    let (_, s) = wait_job(&env, "retry", "Failed").await;
    assert_eq!(s["failed"], 2);
    assert!(
        started.elapsed() >= Duration::from_secs(8),
        "replaced after a back-off, not at once: {:?}",
        started.elapsed()
    );
    let pods = env
        .api::<Pod>()
        .list(&ListParams::default().labels("job-name=retry"))
        .await
        .expect("pods")
        .items;
    assert_eq!(pods.len(), 2);
    env.cleanup().await;
}

#[tokio::test]
async fn workload_loops_can_be_switched_off() {
    let options = TestEnvOptions {
        sandbox: vigil_testenv::vigil_sandbox::SandboxConfig {
            loops: vigil_testenv::vigil_sandbox::Loops {
                deployments: false,
                replicasets: false,
                statefulsets: false,
                jobs: false,
                ..vigil_testenv::vigil_sandbox::Loops::default()
            },
            ..Default::default()
        },
        // No kubelet needed: nothing may create pods.
        ..TestEnvOptions::default()
    };
    let env = TestEnv::start_with(options).await.expect("env");
    vigil_testenv::require_sandbox!(env);
    create_deployment(&env, deployment("off", 1, "registry.example/app:1.0")).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        replica_sets(&env, "off").await.is_empty(),
        "no Deployment controller, no ReplicaSet"
    );
    let d = env.api::<Deployment>().get("off").await.expect("get");
    assert!(d.status.is_none_or(|s| s.observed_generation.is_none()));
    env.cleanup().await;
}

// ---------------------------------------------------------------------------------------------
// DaemonSets
// ---------------------------------------------------------------------------------------------

/// A DaemonSet limited to this test's node (a real cluster may have other tests' nodes).
fn daemon_set(name: &str, node: &str, image: &str) -> DaemonSet {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": name},
        "spec": {
            "selector": {"matchLabels": {"app": name}},
            "template": {"metadata": {"labels": {"app": name}},
                         "spec": {"nodeSelector": {"kubernetes.io/hostname": node},
                                  "containers": [{"name": "app", "image": image}]}},
        },
    }))
    .expect("daemonset")
}

async fn wait_ds(env: &TestEnv, name: &str, what: &str, ok: impl Fn(&Value) -> bool) -> Value {
    wait_for(
        &format!("daemonset {name}: {what}"),
        ROLLOUT_TIMEOUT,
        || async {
            let ds = env
                .api::<DaemonSet>()
                .get(name)
                .await
                .map_err(|e| e.to_string())?;
            let s = serde_json::to_value(&ds.status).map_err(|e| e.to_string())?;
            if ok(&s) && s["observedGeneration"].as_i64() == ds.metadata.generation {
                Ok(Some(s))
            } else {
                Err(s.to_string())
            }
        },
    )
    .await
    .expect("daemonset settles")
}

#[tokio::test]
async fn a_daemon_set_runs_one_pod_on_each_selected_ready_node() {
    let env = env().await;
    let node = env.node_name().expect("kubelet").to_owned();
    let ds = env
        .api::<DaemonSet>()
        .create(
            &PostParams::default(),
            &daemon_set("agent", &node, "registry.example/agent:1"),
        )
        .await
        .expect("create");
    let s = wait_ds(&env, "agent", "one ready pod", |s| {
        s["numberReady"] == 1 && s["numberAvailable"] == 1
    })
    .await;
    assert_eq!(s["desiredNumberScheduled"], 1);
    assert_eq!(s["currentNumberScheduled"], 1);
    assert_eq!(s["numberMisscheduled"], 0);
    assert_eq!(s["updatedNumberScheduled"], 1);
    assert!(s.get("numberUnavailable").is_none_or(Value::is_null), "{s}");
    let pods = active_pods(&env, "app=agent").await;
    assert_eq!(pods.len(), 1);
    let pod = &pods[0];
    assert_eq!(
        pod.spec.as_ref().and_then(|s| s.node_name.as_deref()),
        Some(node.as_str())
    );
    let affinity = serde_json::to_value(pod.spec.as_ref().and_then(|s| s.affinity.as_ref()))
        .expect("affinity");
    assert_eq!(
        affinity,
        json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}}})
    );
    let tolerations: Vec<String> = pod
        .spec
        .as_ref()
        .and_then(|s| s.tolerations.clone())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t.key.clone())
        .collect();
    assert!(
        tolerations.contains(&"node.kubernetes.io/not-ready".to_owned())
            && tolerations.contains(&"node.kubernetes.io/unschedulable".to_owned()),
        "{tolerations:?}"
    );
    assert_eq!(
        pod.labels()
            .get("pod-template-generation")
            .map(String::as_str),
        Some("1")
    );
    let hash = pod
        .labels()
        .get("controller-revision-hash")
        .cloned()
        .expect("hash label");
    let revisions = env
        .api::<ControllerRevision>()
        .list(&ListParams::default().labels("app=agent"))
        .await
        .expect("revisions")
        .items;
    assert_eq!(revisions.len(), 1);
    assert_eq!(revisions[0].name_any(), format!("agent-{hash}"));
    assert_eq!(
        controller_ref(pod),
        json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent", "uid": ds.uid().expect("uid"), "controller": true, "blockOwnerDeletion": true})
    );

    // A new template replaces the pod.
    env.api::<DaemonSet>()
        .patch("agent", &PatchParams::default(), &Patch::Merge(&json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/agent:2"}]}}}})))
        .await
        .expect("update");
    wait_for("the pod to be replaced", ROLLOUT_TIMEOUT, || async {
        let pods = active_pods(&env, "app=agent").await;
        let new: Vec<&Pod> = pods
            .iter()
            .filter(|p| p.labels().get("controller-revision-hash") != Some(&hash))
            .collect();
        if pods.len() == 1 && new.len() == 1 {
            Ok(Some(()))
        } else {
            Err(format!("{} pods, {} new", pods.len(), new.len()))
        }
    })
    .await
    .expect("replaced");
    wait_ds(&env, "agent", "updated and ready", |s| {
        s["updatedNumberScheduled"] == 1 && s["numberReady"] == 1
    })
    .await;

    // A selector matching no node: no pod.
    env.api::<DaemonSet>()
        .create(
            &PostParams::default(),
            &daemon_set("nowhere", "no-such-node", "registry.example/agent:1"),
        )
        .await
        .expect("create");
    let s = wait_ds(&env, "nowhere", "nothing desired", |s| {
        s["desiredNumberScheduled"] == 0
    })
    .await;
    assert_eq!(s["currentNumberScheduled"], 0);
    assert!(active_pods(&env, "app=nowhere").await.is_empty());
    env.cleanup().await;
}

/// `kubectl get` of a resource in `env`'s namespace as the server's Table: (column name, cell)
/// of each row, for the columns kubectl shows without `-o wide` (priority 0).
async fn table_rows(
    env: &TestEnv,
    group_version: &str,
    resource: &str,
) -> Vec<Vec<(String, Value)>> {
    let path = format!("/{group_version}/namespaces/{}/{resource}", env.namespace());
    let request = http::Request::get(path)
        .header(
            http::header::ACCEPT,
            "application/json;as=Table;v=v1;g=meta.k8s.io",
        )
        .body(Vec::new())
        .expect("request");
    let table: Value = env.client().request(request).await.expect("table");
    let columns = table["columnDefinitions"].as_array().expect("columns");
    table["rows"]
        .as_array()
        .expect("rows")
        .iter()
        .map(|row| {
            columns
                .iter()
                .zip(row["cells"].as_array().expect("cells"))
                .filter(|(c, _)| c["priority"].as_i64().unwrap_or(0) == 0)
                .map(|(c, cell)| (c["name"].as_str().unwrap_or("").to_owned(), cell.clone()))
                .collect()
        })
        .collect()
}

/// What `kubectl get deploy,rs` prints: READY as ready/desired, UP-TO-DATE and AVAILABLE for a
/// Deployment; DESIRED, CURRENT and READY for its ReplicaSet.
#[tokio::test]
async fn tables_of_deployments_and_replica_sets_show_their_readiness() {
    let env = env().await;
    create_deployment(&env, deployment("tabled", 2, "registry.example/app:1")).await;
    wait_complete(&env, "tabled", 2).await;
    let without_age = |rows: Vec<Vec<(String, Value)>>| -> Vec<Vec<(String, Value)>> {
        rows.into_iter()
            .map(|r| r.into_iter().filter(|(name, _)| name != "Age").collect())
            .collect()
    };
    let deployments = without_age(table_rows(&env, "apis/apps/v1", "deployments").await);
    let cells = |pairs: &[(&str, Value)]| -> Vec<(String, Value)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), v.clone()))
            .collect()
    };
    assert_eq!(
        deployments,
        [cells(&[
            ("Name", json!("tabled")),
            ("Ready", json!("2/2")),
            ("Up-to-date", json!(2)),
            ("Available", json!(2)),
        ])]
    );
    let replica_sets = without_age(table_rows(&env, "apis/apps/v1", "replicasets").await);
    assert_eq!(replica_sets.len(), 1, "{replica_sets:?}");
    assert_eq!(
        replica_sets[0][1..],
        cells(&[
            ("Desired", json!(2)),
            ("Current", json!(2)),
            ("Ready", json!(2))
        ])
    );
    env.cleanup().await;
}
