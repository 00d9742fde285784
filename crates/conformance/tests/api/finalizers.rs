//! Finalizers, delete preconditions, a pod's graceful deletion cut short, and garbage collection
//! through ownerReferences (Foreground, Background and Orphan propagation; dependents with
//! several owners).
//!
//! Real clusters run the garbage collector in kube-controller-manager, so everything it does is
//! awaited with a timeout.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Pod};
use kube::Api;
use kube::api::{
    DeleteParams, Patch, PatchParams, PostParams, Preconditions, WatchEvent, WatchParams,
};
use serde_json::json;
use vigil_testenv::TestEnv;

use crate::support::{
    config_map, event_summary, expect_status, is_gone, next_event, remove_finalizer, rv_of,
    wait_until,
};

const HOLD: &str = "example.com/hold";
const GC_TIMEOUT: Duration = Duration::from_secs(10);

fn held_config_map(name: &str, suite: &str) -> ConfigMap {
    let mut cm = config_map(name);
    cm.metadata.labels = Some([("suite".to_owned(), suite.to_owned())].into());
    cm.metadata.finalizers = Some(vec![HOLD.to_owned()]);
    cm
}

/// A ConfigMap labelled `suite` and owned by `owners` (blocking owner deletion).
fn dependent(name: &str, suite: &str, owners: &[&ConfigMap]) -> ConfigMap {
    let refs: Vec<_> = owners
        .iter()
        .map(|o| {
            json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "name": o.metadata.name, "uid": o.metadata.uid,
                "blockOwnerDeletion": true
            })
        })
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"suite": suite}, "ownerReferences": refs},
        "data": {"key": "value"}
    }))
    .expect("ConfigMap")
}

async fn create(api: &Api<ConfigMap>, cm: &ConfigMap) -> ConfigMap {
    api.create(&PostParams::default(), cm)
        .await
        .unwrap_or_else(|e| panic!("create {:?}: {e:?}", cm.metadata.name))
}

fn owner_uids(cm: &ConfigMap) -> Vec<String> {
    cm.metadata
        .owner_references
        .iter()
        .flatten()
        .map(|r| r.uid.clone())
        .collect()
}

fn uid(cm: &ConfigMap) -> String {
    cm.metadata.uid.clone().expect("uid")
}

#[tokio::test]
async fn finalizer_keeps_a_deleted_object_until_removed() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = create(&api, &held_config_map("held", "fin")).await;
    let mut events = api
        .watch(
            &WatchParams::default().labels("suite=fin"),
            &rv_of(&created).to_string(),
        )
        .await
        .expect("watch")
        .boxed();

    let deleted = api
        .delete("held", &DeleteParams::default())
        .await
        .expect("delete");
    let deleted = deleted
        .left()
        .expect("a delete held by a finalizer answers with the object");
    let timestamp = deleted
        .metadata
        .deletion_timestamp
        .clone()
        .expect("deletionTimestamp set");
    assert_eq!(deleted.metadata.deletion_grace_period_seconds, Some(0));
    assert_eq!(
        deleted.metadata.finalizers.as_deref(),
        Some(&[HOLD.to_owned()][..])
    );
    assert!(rv_of(&deleted) > rv_of(&created));

    let fetched = api
        .get("held")
        .await
        .expect("a finalizing object can still be read");
    assert_eq!(
        fetched.metadata.deletion_timestamp.as_ref(),
        Some(&timestamp)
    );
    let event = next_event(&mut events, "MODIFIED for the deletion").await;
    assert_eq!(
        event_summary(&event),
        ("MODIFIED", "held".to_owned(), rv_of(&deleted))
    );
    if let WatchEvent::Modified(cm) = &event {
        assert!(
            cm.metadata.deletion_timestamp.is_some(),
            "the MODIFIED event shows the deletionTimestamp"
        );
    }

    // Deleting again is harmless and keeps the original timestamp.
    api.delete("held", &DeleteParams::default())
        .await
        .expect("second delete");
    let fetched = api.get("held").await.expect("still there");
    assert_eq!(
        fetched.metadata.deletion_timestamp.as_ref(),
        Some(&timestamp)
    );

    // Other changes are still allowed while finalizing.
    let patched = api
        .patch(
            "held",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "finalizing"}})),
        )
        .await
        .expect("update a finalizing object");
    let event = next_event(&mut events, "MODIFIED for the data change").await;
    assert_eq!(
        event_summary(&event),
        ("MODIFIED", "held".to_owned(), rv_of(&patched))
    );

    // Removing the last finalizer deletes it.
    api.patch(
        "held",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .expect("remove finalizer");
    assert!(
        is_gone(&api, "held").await,
        "the object must be gone once its last finalizer is removed"
    );
    let event = next_event(&mut events, "DELETED").await;
    let (kind, name, rv) = event_summary(&event);
    // The server deletes at once: no intermediate write (MODIFIED) with emptied finalizers.
    assert_eq!(
        (kind, name.as_str()),
        ("DELETED", "held"),
        "removing the last finalizer must yield DELETED directly"
    );
    assert!(rv > rv_of(&patched));
    env.cleanup().await;
}

/// A bound pod is deleted gracefully (its `terminationGracePeriodSeconds`); a second delete may
/// only shorten the grace period, and moves `deletionTimestamp` by as much: `deletionTimestamp`
/// less the grace period stays the time the deletion was asked for (kube-apiserver's
/// `rest.BeforeDelete`). Cut to 0 (what a kubelet does once the pod stopped), a pod held by a
/// finalizer stays until the finalizer goes. No kubelet runs here: the pod is bound by its
/// `nodeName` to a node that does not exist, so nothing else finishes the deletion.
#[tokio::test]
async fn a_pods_graceful_deletion_cut_short_keeps_when_it_was_asked_for() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Pod>();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "graceful", "finalizers": [HOLD]},
        "spec": {"nodeName": "conformance-nowhere", "terminationGracePeriodSeconds": 30,
            "containers": [{"name": "app", "image": "registry.example/app:1.0"}]}
    }))
    .expect("pod");
    api.create(&PostParams::default(), &pod)
        .await
        .expect("create");
    let deleting = |grace: Option<u32>| {
        let api = api.clone();
        async move {
            let params = DeleteParams {
                grace_period_seconds: grace,
                ..DeleteParams::default()
            };
            api.delete("graceful", &params)
                .await
                .expect("delete")
                .left()
                .expect("a pod being deleted gracefully answers with the object")
        }
    };
    let asked = |pod: &Pod| {
        let at = pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .expect("deletionTimestamp")
            .0
            .as_second();
        let grace = pod
            .metadata
            .deletion_grace_period_seconds
            .expect("deletionGracePeriodSeconds");
        (at - grace, grace)
    };
    let first = deleting(None).await;
    let (asked_at, grace) = asked(&first);
    assert_eq!(grace, 30, "the pod's own grace period");
    let shorter = deleting(Some(5)).await;
    assert_eq!(asked(&shorter), (asked_at, 5), "shortened, the same start");
    let longer = deleting(Some(20)).await;
    assert_eq!(asked(&longer), (asked_at, 5), "a longer one is ignored");
    let stopped = deleting(Some(0)).await;
    assert_eq!(
        asked(&stopped),
        (asked_at, 0),
        "cut to 0: held by the finalizer"
    );
    remove_finalizer(&api, "graceful", HOLD).await;
    wait_until(GC_TIMEOUT, "the pod to be gone", || {
        is_gone(&api, "graceful")
    })
    .await;
    env.cleanup().await;
}

#[tokio::test]
async fn new_finalizers_are_forbidden_on_a_deleting_object() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    create(&api, &held_config_map("held", "fin")).await;
    api.delete("held", &DeleteParams::default())
        .await
        .expect("delete");

    let add = Patch::Merge(json!({"metadata": {"finalizers": [HOLD, "example.com/second"]}}));
    let status = expect_status(
        api.patch("held", &PatchParams::default(), &add).await,
        422,
        "Invalid",
    );
    let causes = &status.details.as_ref().expect("details").causes;
    assert!(
        causes
            .iter()
            .any(|c| c.field == "metadata.finalizers" && c.reason == "FieldValueForbidden"),
        "causes: {causes:?}"
    );
    let fetched = api.get("held").await.expect("get");
    assert_eq!(
        fetched.metadata.finalizers.as_deref(),
        Some(&[HOLD.to_owned()][..])
    );

    remove_finalizer(&api, "held", HOLD).await;
    assert!(is_gone(&api, "held").await);
    env.cleanup().await;
}

#[tokio::test]
async fn delete_preconditions_must_match() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = create(&api, &config_map("guarded")).await;

    let wrong_uid = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some("00000000-0000-0000-0000-000000000000".into()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    let status = expect_status(api.delete("guarded", &wrong_uid).await, 409, "Conflict");
    // As the real server's `rest.BeforeDelete` words it: the kind, not the resource.
    assert!(
        status
            .message
            .starts_with("Operation cannot be fulfilled on ConfigMap \"guarded\": "),
        "message: {}",
        status.message
    );
    assert!(
        status
            .message
            .contains("the UID in the precondition (00000000-0000-0000-0000-000000000000) does not match the UID in record"),
        "message: {}",
        status.message
    );

    let updated = api
        .patch(
            "guarded",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "newer"}})),
        )
        .await
        .expect("update");
    let stale_rv = DeleteParams {
        preconditions: Some(Preconditions {
            uid: None,
            resource_version: created.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    let status = expect_status(api.delete("guarded", &stale_rv).await, 409, "Conflict");
    assert!(
        status
            .message
            .contains("the ResourceVersion in the precondition"),
        "message: {}",
        status.message
    );
    assert!(
        !is_gone(&api, "guarded").await,
        "failed preconditions must not delete"
    );

    let matching = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid(&created)),
            resource_version: updated.metadata.resource_version.clone(),
        }),
        ..DeleteParams::default()
    };
    api.delete("guarded", &matching)
        .await
        .expect("delete with matching preconditions");
    assert!(is_gone(&api, "guarded").await);
    env.cleanup().await;
}

#[tokio::test]
async fn foreground_deletion_waits_for_dependents() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let owner = create(&api, &config_map("owner")).await;
    let mut held = dependent("dep", "fg", &[&owner]);
    held.metadata.finalizers = Some(vec![HOLD.to_owned()]);
    let dep = create(&api, &held).await;
    let mut events = api
        .watch(&WatchParams::default(), &rv_of(&dep).to_string())
        .await
        .expect("watch")
        .boxed();

    let deleting = api
        .delete("owner", &DeleteParams::foreground())
        .await
        .expect("foreground delete");
    let deleting = deleting
        .left()
        .expect("a foreground delete answers with the object");
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "owner has a deletionTimestamp"
    );
    let finalizers = deleting.metadata.finalizers.clone().unwrap_or_default();
    assert!(
        finalizers.iter().any(|f| f == "foregroundDeletion"),
        "finalizers: {finalizers:?}"
    );

    // The garbage collector deletes the dependent; its finalizer keeps it, and so the owner.
    wait_until(
        GC_TIMEOUT,
        "the garbage collector deletes the dependent",
        || async {
            api.get("dep")
                .await
                .expect("dependent still exists")
                .metadata
                .deletion_timestamp
                .is_some()
        },
    )
    .await;
    let owner_now = api
        .get("owner")
        .await
        .expect("the owner waits for its dependent");
    assert!(
        owner_now
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == "foregroundDeletion")
    );

    remove_finalizer(&api, "dep", HOLD).await;
    wait_until(
        GC_TIMEOUT,
        "the owner is deleted after its dependent",
        || async { is_gone(&api, "owner").await },
    )
    .await;
    assert!(is_gone(&api, "dep").await);

    // The dependent's DELETED event precedes the owner's.
    let mut deleted = Vec::new();
    while deleted.last().map(String::as_str) != Some("owner") {
        if let WatchEvent::Deleted(cm) = next_event(&mut events, "DELETED events").await {
            let name = cm.metadata.name.unwrap_or_default();
            if name == "dep" || name == "owner" {
                deleted.push(name);
            }
        }
    }
    assert_eq!(deleted, ["dep", "owner"]);
    env.cleanup().await;
}

#[tokio::test]
async fn background_deletion_collects_dependents() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    for (owner_name, dep_name, params) in [
        ("owner-bg", "dep-bg", DeleteParams::background()),
        ("owner-default", "dep-default", DeleteParams::default()),
    ] {
        let owner = create(&api, &config_map(owner_name)).await;
        create(&api, &dependent(dep_name, "bg", &[&owner])).await;
        api.delete(owner_name, &params).await.expect("delete owner");
        assert!(
            is_gone(&api, owner_name).await,
            "{owner_name} is deleted at once"
        );
        wait_until(
            GC_TIMEOUT,
            &format!("the garbage collector deletes {dep_name}"),
            || async { is_gone(&api, dep_name).await },
        )
        .await;
    }
    env.cleanup().await;
}

#[tokio::test]
async fn orphan_deletion_keeps_dependents_and_drops_their_owner_reference() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let owner = create(&api, &config_map("owner")).await;
    create(&api, &dependent("dep", "orphan", &[&owner])).await;

    let deleting = api
        .delete("owner", &DeleteParams::orphan())
        .await
        .expect("orphan delete");
    let deleting = deleting
        .left()
        .expect("an orphan delete answers with the object");
    let finalizers = deleting.metadata.finalizers.clone().unwrap_or_default();
    assert!(
        finalizers.iter().any(|f| f == "orphan"),
        "finalizers: {finalizers:?}"
    );

    wait_until(GC_TIMEOUT, "the orphaned owner is deleted", || async {
        is_gone(&api, "owner").await
    })
    .await;
    // The collector orphans dependents before it lets the owner go.
    let dep = api.get("dep").await.expect("the dependent survives");
    assert!(
        owner_uids(&dep).is_empty(),
        "ownerReferences left: {:?}",
        dep.metadata.owner_references
    );
    assert!(dep.metadata.deletion_timestamp.is_none());
    env.cleanup().await;
}

#[tokio::test]
async fn dependent_with_two_owners_lives_until_the_last_is_gone() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let first = create(&api, &config_map("first")).await;
    let second = create(&api, &config_map("second")).await;
    create(&api, &dependent("shared", "two", &[&first, &second])).await;

    api.delete("first", &DeleteParams::background())
        .await
        .expect("delete first owner");
    // The collector drops the dangling reference and keeps the dependent for its other owner.
    wait_until(
        GC_TIMEOUT,
        "the reference to the deleted owner is removed",
        || async {
            let shared = api
                .get("shared")
                .await
                .expect("the dependent must survive while an owner exists");
            assert!(
                shared.metadata.deletion_timestamp.is_none(),
                "the dependent must not be deleted"
            );
            !owner_uids(&shared).contains(&uid(&first))
        },
    )
    .await;
    let shared = api.get("shared").await.expect("get dependent");
    assert_eq!(owner_uids(&shared), [uid(&second)]);

    api.delete("second", &DeleteParams::background())
        .await
        .expect("delete second owner");
    wait_until(
        GC_TIMEOUT,
        "the dependent is collected with its last owner",
        || async { is_gone(&api, "shared").await },
    )
    .await;
    env.cleanup().await;
}
