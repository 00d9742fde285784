//! Lists: label and field selectors, limit/continue paging, list resourceVersions, cluster-wide
//! lists and deletecollection.
//!
//! Real clusters put a `kube-root-ca.crt` ConfigMap into every namespace, so ConfigMap lists here
//! always carry a label selector naming this test's objects.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::Api;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use vigil_testenv::TestEnv;

use crate::support::{expect_status, labelled_config_map, rv_of, sorted_names};

/// Creates `a`..`d` labelled `suite=sel` plus app/tier labels.
async fn create_labelled(api: &Api<ConfigMap>) {
    let objects = [
        (
            "a",
            vec![("suite", "sel"), ("app", "web"), ("tier", "front")],
        ),
        (
            "b",
            vec![("suite", "sel"), ("app", "web"), ("tier", "back")],
        ),
        ("c", vec![("suite", "sel"), ("app", "db")]),
        ("d", vec![("suite", "sel")]),
    ];
    for (name, labels) in objects {
        api.create(&PostParams::default(), &labelled_config_map(name, &labels))
            .await
            .expect("create");
    }
}

async fn list_names<K>(api: &Api<K>, lp: &ListParams) -> Vec<String>
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    let list = api
        .list(lp)
        .await
        .unwrap_or_else(|e| panic!("list with {lp:?}: {e:?}"));
    sorted_names(&list.items)
}

#[tokio::test]
async fn label_selector_operators() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    create_labelled(&api).await;
    let cases: &[(&str, &[&str])] = &[
        ("suite=sel", &["a", "b", "c", "d"]),
        ("suite=sel,app=web", &["a", "b"]),
        ("suite=sel,app==web", &["a", "b"]),
        // `!=` and `notin` also match objects without the key.
        ("suite=sel,app!=web", &["c", "d"]),
        ("suite=sel,app in (web,db)", &["a", "b", "c"]),
        ("suite=sel,app in (db)", &["c"]),
        ("suite=sel,app notin (web)", &["c", "d"]),
        ("suite=sel,tier", &["a", "b"]),
        ("suite=sel,!tier", &["c", "d"]),
        ("suite=sel,app=web,tier=back", &["b"]),
        ("suite=sel,app=web,tier!=back", &["a"]),
        ("suite=sel,app=nothing", &[]),
        ("suite=sel,tier in (front,back),app notin (db)", &["a", "b"]),
    ];
    for (selector, expected) in cases {
        let names = list_names(&api, &ListParams::default().labels(selector)).await;
        assert_eq!(names, *expected, "labelSelector {selector:?}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn malformed_label_selector_is_bad_request() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    for selector in ["app in (", "app=web=x", "=web"] {
        expect_status(
            api.list(&ListParams::default().labels(selector)).await,
            400,
            "BadRequest",
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn metadata_field_selectors() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    create_labelled(&api).await;
    let ns = env.namespace();
    let cases: Vec<(String, &[&str])> = vec![
        ("metadata.name=b".into(), &["b"]),
        ("metadata.name==b".into(), &["b"]),
        ("metadata.name!=b".into(), &["a", "c", "d"]),
        ("metadata.name=nothing".into(), &[]),
        (format!("metadata.namespace={ns}"), &["a", "b", "c", "d"]),
        ("metadata.namespace=some-other-namespace".into(), &[]),
        ("metadata.name!=a,metadata.name!=d".into(), &["b", "c"]),
    ];
    for (selector, expected) in cases {
        let lp = ListParams::default().labels("suite=sel").fields(&selector);
        assert_eq!(
            list_names(&api, &lp).await,
            expected,
            "fieldSelector {selector:?}"
        );
    }
    // Label and field selectors combine.
    let lp = ListParams::default()
        .labels("suite=sel,app=web")
        .fields("metadata.name!=a");
    assert_eq!(list_names(&api, &lp).await, ["b"]);
    env.cleanup().await;
}

#[tokio::test]
async fn unsupported_field_selector_is_bad_request() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    for selector in ["data.key=value", "spec.nodeName=x", "metadata.labels=x"] {
        let status = expect_status(
            api.list(&ListParams::default().fields(selector)).await,
            400,
            "BadRequest",
        );
        let field = selector.split('=').next().unwrap_or_default();
        assert!(
            status.message.contains(field),
            "message for {selector:?}: {}",
            status.message
        );
    }
    env.cleanup().await;
}

/// A pod that no scheduler or kubelet will touch: bound to a node that does not exist, or left
/// for a scheduler that does not exist.
fn inert_pod(name: &str, node: Option<&str>) -> Pod {
    let mut spec = json!({
        "schedulerName": "vigil-no-such-scheduler",
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.9"}]
    });
    if let Some(node) = node {
        spec["nodeName"] = json!(node);
    }
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("Pod")
}

#[tokio::test]
async fn pod_field_selectors_on_phase_and_node_name() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Pod>();
    for (name, node) in [
        ("p1", Some("vigil-node-a")),
        ("p2", Some("vigil-node-b")),
        ("p3", None),
    ] {
        let created = api
            .create(&PostParams::default(), &inert_pod(name, node))
            .await
            .expect("create pod");
        let phase = created.status.as_ref().and_then(|s| s.phase.as_deref());
        assert_eq!(phase, Some("Pending"), "a new pod is Pending");
    }
    let running = Patch::Merge(json!({"status": {"phase": "Running"}}));
    api.patch_status("p2", &PatchParams::default(), &running)
        .await
        .expect("set p2 Running");

    let cases: &[(&str, &[&str])] = &[
        ("status.phase=Running", &["p2"]),
        ("status.phase=Pending", &["p1", "p3"]),
        ("status.phase!=Pending", &["p2"]),
        ("status.phase=Succeeded", &[]),
        ("spec.nodeName=vigil-node-a", &["p1"]),
        ("spec.nodeName=", &["p3"]),
        ("spec.nodeName!=", &["p1", "p2"]),
        ("spec.nodeName=vigil-node-b,status.phase=Running", &["p2"]),
        ("spec.nodeName=vigil-node-a,status.phase=Running", &[]),
        ("metadata.name=p3", &["p3"]),
    ];
    for (selector, expected) in cases {
        let names = list_names(&api, &ListParams::default().fields(selector)).await;
        assert_eq!(names, *expected, "fieldSelector {selector:?}");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn limit_and_continue_page_through_a_consistent_snapshot() {
    let env = TestEnv::start().await.expect("test env");
    // Secrets: nothing else creates them in a fresh namespace (unlike ConfigMaps).
    let api = env.api::<Secret>();
    let mut expected = Vec::new();
    for i in 0..7 {
        let name = format!("page-{i}");
        let secret: Secret = serde_json::from_value(json!({
            "metadata": {"name": name}, "stringData": {"n": i.to_string()}
        }))
        .expect("Secret");
        api.create(&PostParams::default(), &secret)
            .await
            .expect("create");
        expected.push(name);
    }

    let mut seen = Vec::new();
    let mut pages = 0;
    let mut continue_token: Option<String> = None;
    let mut snapshot_rv: Option<String> = None;
    loop {
        let mut lp = ListParams::default().limit(3);
        if let Some(token) = &continue_token {
            lp = lp.continue_token(token);
        }
        let page = api.list(&lp).await.expect("list page");
        pages += 1;
        assert!(
            page.items.len() <= 3,
            "page {pages} has {} items",
            page.items.len()
        );
        seen.extend(
            page.items
                .iter()
                .map(|s| s.metadata.name.clone().unwrap_or_default()),
        );
        // Every page is served from the resourceVersion of the first.
        let rv = page
            .metadata
            .resource_version
            .clone()
            .expect("list resourceVersion");
        match &snapshot_rv {
            None => snapshot_rv = Some(rv),
            Some(first) => assert_eq!(&rv, first, "page {pages} resourceVersion"),
        }
        if let Some(remaining) = page.metadata.remaining_item_count {
            assert_eq!(
                remaining,
                (7 - seen.len()) as i64,
                "remainingItemCount on page {pages} (continued lists are a snapshot at the first page's resourceVersion)"
            );
        }
        if pages == 1 {
            assert_eq!(page.items.len(), 3, "the first page is full");
            // Created after the snapshot: later pages must not show it.
            let late: Secret =
                serde_json::from_value(json!({"metadata": {"name": "page-9"}})).expect("Secret");
            api.create(&PostParams::default(), &late)
                .await
                .expect("create during paging");
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => continue_token = Some(token),
            None => {
                assert_eq!(
                    page.metadata.remaining_item_count, None,
                    "last page has no remainingItemCount"
                );
                break;
            }
        }
        assert!(pages < 10, "paging does not terminate");
    }
    assert_eq!(pages, 3, "7 items in pages of 3");
    // Items come in key (name) order, each exactly once.
    assert_eq!(seen, expected);

    let all = list_names(&api, &ListParams::default()).await;
    assert!(
        all.contains(&"page-9".to_owned()),
        "a fresh list sees the late object: {all:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn list_resource_version_is_numeric_and_not_older_than_items() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let mut newest = 0;
    for name in ["r1", "r2", "r3"] {
        let created = api
            .create(
                &PostParams::default(),
                &labelled_config_map(name, &[("suite", "rv")]),
            )
            .await
            .expect("create");
        newest = newest.max(rv_of(&created));
    }
    let list = api
        .list(&ListParams::default().labels("suite=rv"))
        .await
        .expect("list");
    let list_rv: u64 = list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            panic!(
                "list resourceVersion {:?} is not numeric",
                list.metadata.resource_version
            )
        });
    assert_eq!(list.items.len(), 3);
    assert!(
        list_rv >= newest,
        "list rv {list_rv} < newest object rv {newest}"
    );
    for item in &list.items {
        assert!(rv_of(item) <= list_rv);
        assert_eq!(item.metadata.namespace.as_deref(), Some(env.namespace()));
    }
    env.cleanup().await;
}

#[tokio::test]
async fn cluster_wide_list_sees_objects_in_the_test_namespace() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let selector = format!("vigil-owner={}", env.namespace());
    let labels = [("vigil-owner", env.namespace())];
    for name in ["x", "y"] {
        api.create(&PostParams::default(), &labelled_config_map(name, &labels))
            .await
            .expect("create");
    }
    let all: Api<ConfigMap> = Api::all(env.client());
    let list = all
        .list(&ListParams::default().labels(&selector))
        .await
        .expect("cluster-wide list");
    let found: BTreeSet<(String, String)> = list
        .items
        .iter()
        .map(|cm| {
            (
                cm.metadata.namespace.clone().unwrap_or_default(),
                cm.metadata.name.clone().unwrap_or_default(),
            )
        })
        .collect();
    let expected: BTreeSet<(String, String)> = ["x", "y"]
        .iter()
        .map(|n| (env.namespace().to_owned(), (*n).to_owned()))
        .collect();
    assert_eq!(found, expected);

    // Without a selector the cluster-wide list still includes them, next to other namespaces'.
    let list = all
        .list(&ListParams::default())
        .await
        .expect("cluster-wide list");
    let mine = list
        .items
        .iter()
        .filter(|cm| cm.metadata.namespace.as_deref() == Some(env.namespace()))
        .count();
    assert!(
        mine >= 2,
        "cluster-wide list shows {mine} of this namespace's ConfigMaps"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn delete_collection_with_label_selector_deletes_only_matches() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    for (name, doomed) in [("d1", "true"), ("d2", "true"), ("k1", "false"), ("k2", "")] {
        let mut labels = vec![("suite", "dc")];
        if !doomed.is_empty() {
            labels.push(("doomed", doomed));
        }
        api.create(&PostParams::default(), &labelled_config_map(name, &labels))
            .await
            .expect("create");
    }
    let deleted = api
        .delete_collection(
            &DeleteParams::default(),
            &ListParams::default().labels("suite=dc,doomed=true"),
        )
        .await
        .expect("deletecollection");
    let deleted = deleted
        .left()
        .expect("deletecollection answers with the list of deleted objects");
    assert_eq!(sorted_names(&deleted.items), ["d1", "d2"]);
    assert_eq!(
        list_names(&api, &ListParams::default().labels("suite=dc")).await,
        ["k1", "k2"]
    );
    env.cleanup().await;
}
