//! Object and namespace lifecycle: initial and new namespaces, namespace termination, immortal
//! namespaces, generateName, uid/creationTimestamp, the global resourceVersion, dryRun and
//! no-op updates.

use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchParams};
use serde_json::json;
use vigil_testenv::TestEnv;

use crate::support::{
    config_map, event_summary, expect_status, is_gone, next_event, rv_of, wait_until,
};

fn phase(ns: &Namespace) -> Option<&str> {
    ns.status.as_ref()?.phase.as_deref()
}

fn secret(name: &str) -> Secret {
    serde_json::from_value(
        json!({"metadata": {"name": name}, "stringData": {"password": "hunter2"}}),
    )
    .expect("Secret")
}

#[tokio::test]
async fn initial_namespaces_exist_and_are_active() {
    let env = TestEnv::start().await.expect("test env");
    let api: Api<Namespace> = Api::all(env.client());
    for name in ["default", "kube-system", "kube-public"] {
        let ns = api
            .get(name)
            .await
            .unwrap_or_else(|e| panic!("get namespace {name}: {e:?}"));
        assert_eq!(phase(&ns), Some("Active"), "namespace {name}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn new_namespace_is_active_with_the_kubernetes_finalizer() {
    let env = TestEnv::start().await.expect("test env");
    let api: Api<Namespace> = Api::all(env.client());
    let ns = api.get(env.namespace()).await.expect("get test namespace");
    assert_eq!(phase(&ns), Some("Active"));
    let finalizers = ns
        .spec
        .as_ref()
        .and_then(|s| s.finalizers.clone())
        .unwrap_or_default();
    assert_eq!(finalizers, ["kubernetes"]);
    // Namespaces get the well-known name label.
    let label = ns
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("kubernetes.io/metadata.name"))
        .map(String::as_str);
    assert_eq!(label, Some(env.namespace()));
    env.cleanup().await;
}

#[tokio::test]
async fn deleting_a_namespace_terminates_it_with_its_contents() {
    let env = TestEnv::start().await.expect("test env");
    let namespaces: Api<Namespace> = Api::all(env.client());
    let name = format!("{}-doomed", env.namespace());
    let ns: Namespace = serde_json::from_value(
        json!({"metadata": {"name": name, "labels": {vigil_testenv::TEST_LABEL: "true"}}}),
    )
    .expect("Namespace");
    let created = namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    assert_eq!(phase(&created), Some("Active"));

    let cms: Api<ConfigMap> = Api::namespaced(env.client(), &name);
    let secrets: Api<Secret> = Api::namespaced(env.client(), &name);
    for cm in ["c1", "c2", "c3"] {
        cms.create(&PostParams::default(), &config_map(cm))
            .await
            .expect("create ConfigMap");
    }
    secrets
        .create(&PostParams::default(), &secret("s1"))
        .await
        .expect("create Secret");

    let deleting = namespaces
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete namespace");
    let deleting = deleting
        .left()
        .expect("deleting a namespace answers with the namespace");
    assert_eq!(phase(&deleting), Some("Terminating"));
    assert!(deleting.metadata.deletion_timestamp.is_some());

    // A real namespace controller retries with backoff while any API group's discovery fails
    // (other tests come and go with their CRDs), so give it time.
    wait_until(
        Duration::from_secs(60),
        &format!("namespace {name} is gone"),
        || async { is_gone(&namespaces, &name).await },
    )
    .await;
    let left = cms
        .list(&ListParams::default())
        .await
        .expect("list ConfigMaps");
    assert!(
        left.items.is_empty(),
        "ConfigMaps outlived their namespace: {:?}",
        left.items.len()
    );
    let left = secrets
        .list(&ListParams::default())
        .await
        .expect("list Secrets");
    assert!(left.items.is_empty(), "Secrets outlived their namespace");
    env.cleanup().await;
}

#[tokio::test]
async fn immortal_namespaces_cannot_be_deleted() {
    let env = TestEnv::start().await.expect("test env");
    let api: Api<Namespace> = Api::all(env.client());
    for name in ["default", "kube-system", "kube-public"] {
        let status = expect_status(
            api.delete(name, &DeleteParams::default()).await,
            403,
            "Forbidden",
        );
        assert_eq!(
            status.message,
            format!(r#"namespaces "{name}" is forbidden: this namespace may not be deleted"#)
        );
        let ns = api.get(name).await.expect("still there");
        assert!(
            ns.metadata.deletion_timestamp.is_none(),
            "{name} was marked for deletion"
        );
        assert_eq!(phase(&ns), Some("Active"));
    }
    env.cleanup().await;
}

#[tokio::test]
async fn generate_name_appends_a_random_suffix() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let mut template = config_map("unused");
    template.metadata.name = None;
    template.metadata.generate_name = Some("gen-".into());

    let mut names = Vec::new();
    for _ in 0..2 {
        let created = api
            .create(&PostParams::default(), &template)
            .await
            .expect("create with generateName");
        let name = created.metadata.name.clone().expect("generated name");
        let suffix = name
            .strip_prefix("gen-")
            .unwrap_or_else(|| panic!("{name} lacks the prefix"));
        assert_eq!(suffix.len(), 5, "suffix of {name}");
        assert!(
            suffix
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()),
            "suffix of {name}"
        );
        assert_eq!(created.metadata.generate_name.as_deref(), Some("gen-"));
        api.get(&name).await.expect("the generated name is stored");
        names.push(name);
    }
    assert_ne!(names[0], names[1]);

    // An explicit name wins over generateName.
    template.metadata.name = Some("explicit".into());
    let created = api
        .create(&PostParams::default(), &template)
        .await
        .expect("create");
    assert_eq!(created.metadata.name.as_deref(), Some("explicit"));
    env.cleanup().await;
}

fn is_uuid(s: &str) -> bool {
    let parts: Vec<&str> = s.split('-').collect();
    parts.iter().map(|p| p.len()).eq([8, 4, 4, 4, 12])
        && parts.iter().all(|p| {
            p.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
        })
}

#[tokio::test]
async fn uid_and_creation_timestamp_are_set_once() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let created = api
        .create(&PostParams::default(), &config_map("ident"))
        .await
        .expect("create");
    let uid = created.metadata.uid.clone().expect("uid");
    assert!(is_uuid(&uid), "uid {uid:?} is not a UUID");
    let created_at = created
        .metadata
        .creation_timestamp
        .clone()
        .expect("creationTimestamp");

    let mut changed = created.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("key".into(), "changed".into());
    // Clients cannot change them.
    changed.metadata.creation_timestamp = None;
    let updated = api
        .replace("ident", &PostParams::default(), &changed)
        .await
        .expect("update");
    assert_eq!(updated.metadata.uid.as_deref(), Some(uid.as_str()));
    assert_eq!(
        updated.metadata.creation_timestamp.as_ref(),
        Some(&created_at)
    );

    // A new object under the same name is a new identity.
    api.delete("ident", &DeleteParams::default())
        .await
        .expect("delete");
    let recreated = api
        .create(&PostParams::default(), &config_map("ident"))
        .await
        .expect("recreate");
    assert_ne!(recreated.metadata.uid.as_deref(), Some(uid.as_str()));
    env.cleanup().await;
}

#[tokio::test]
async fn resource_version_is_one_counter_across_kinds() {
    let env = TestEnv::start().await.expect("test env");
    let cms = env.api::<ConfigMap>();
    let secrets = env.api::<Secret>();
    let r1 = rv_of(
        &cms.create(&PostParams::default(), &config_map("first"))
            .await
            .expect("create ConfigMap"),
    );
    let r2 = rv_of(
        &secrets
            .create(&PostParams::default(), &secret("second"))
            .await
            .expect("create Secret"),
    );
    let patch = Patch::Merge(json!({"data": {"key": "third"}}));
    let r3 = rv_of(
        &cms.patch("first", &PatchParams::default(), &patch)
            .await
            .expect("update ConfigMap"),
    );
    let r4 = rv_of(
        &secrets
            .create(&PostParams::default(), &secret("fourth"))
            .await
            .expect("create Secret"),
    );
    assert!(
        r1 < r2 && r2 < r3 && r3 < r4,
        "resourceVersions {r1} {r2} {r3} {r4} must increase"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn dry_run_writes_change_nothing() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };

    let answered = api
        .create(&dry, &config_map("dry"))
        .await
        .expect("dry-run create");
    assert_eq!(answered.metadata.name.as_deref(), Some("dry"));
    assert_eq!(
        answered
            .data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("value")
    );
    assert!(
        answered.metadata.uid.is_some(),
        "a dry-run create fills in server fields"
    );
    assert!(
        is_gone(&api, "dry").await,
        "a dry-run create must not store the object"
    );
    let list = api
        .list(&ListParams::default().fields("metadata.name=dry"))
        .await
        .expect("list");
    assert!(list.items.is_empty());

    // Dry-run update and delete of a stored object.
    let stored = api
        .create(&PostParams::default(), &config_map("dry"))
        .await
        .expect("real create");
    expect_status(
        api.create(&dry, &config_map("dry")).await,
        409,
        "AlreadyExists",
    );
    let mut changed = stored.clone();
    changed
        .data
        .get_or_insert_default()
        .insert("key".into(), "dry-change".into());
    let answered = api
        .replace("dry", &dry, &changed)
        .await
        .expect("dry-run update");
    assert_eq!(
        answered
            .data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("dry-change")
    );
    let fetched = api.get("dry").await.expect("get");
    assert_eq!(
        fetched
            .data
            .as_ref()
            .and_then(|d| d.get("key"))
            .map(String::as_str),
        Some("value")
    );
    assert_eq!(rv_of(&fetched), rv_of(&stored));

    api.delete(
        "dry",
        &DeleteParams {
            dry_run: true,
            ..DeleteParams::default()
        },
    )
    .await
    .expect("dry-run delete");
    let fetched = api
        .get("dry")
        .await
        .expect("a dry-run delete must keep the object");
    assert_eq!(rv_of(&fetched), rv_of(&stored));
    env.cleanup().await;
}

#[tokio::test]
async fn no_op_updates_keep_the_resource_version() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let mut cm = config_map("steady");
    cm.metadata.labels = Some([("suite".to_owned(), "noop".to_owned())].into());
    api.create(&PostParams::default(), &cm)
        .await
        .expect("create");
    let stored = api.get("steady").await.expect("get");
    let rv = rv_of(&stored);

    let same = api
        .replace("steady", &PostParams::default(), &stored)
        .await
        .expect("unchanged PUT");
    assert_eq!(rv_of(&same), rv, "an unchanged PUT must not write");
    let same = api
        .patch(
            "steady",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "value"}})),
        )
        .await
        .expect("no-op patch");
    assert_eq!(rv_of(&same), rv, "a no-op patch must not write");
    let same = api
        .patch("steady", &PatchParams::default(), &Patch::Merge(json!({})))
        .await
        .expect("empty patch");
    assert_eq!(rv_of(&same), rv, "an empty patch must not write");

    // No watch event either: the first event after `rv` is the next real change.
    let mut events = api
        .watch(
            &WatchParams::default().labels("suite=noop"),
            &rv.to_string(),
        )
        .await
        .expect("watch")
        .boxed();
    let changed = api
        .patch(
            "steady",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"key": "moved"}})),
        )
        .await
        .expect("patch");
    assert!(rv_of(&changed) > rv);
    let event = next_event(&mut events, "the MODIFIED event of the real change").await;
    assert_eq!(
        event_summary(&event),
        ("MODIFIED", "steady".to_owned(), rv_of(&changed))
    );
    env.cleanup().await;
}
