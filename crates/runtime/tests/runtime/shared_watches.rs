//! Shared watches end to end, on the sandbox (or the cluster of `VIGIL_TEST_KUBECONFIG`): caches
//! of one kind, each of its own type, are fed by one LIST and one WATCH; a cache that joins late
//! still gets the whole state; the API watch stops with its last cache.
//!
//! Requests are counted on the client side (testenv's recording client), so this holds on a
//! real cluster too.

use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ApiResource, DynamicObject, ObjectMeta, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt as _};
use serde::Deserialize;
use vigil_runtime::metrics::Metrics;
use vigil_runtime::watches::SharedWatches;
use vigil_testenv::vigil_sandbox::Fault;
use vigil_testenv::{RequestLog, TestEnv, rbac_attributes, wait_for};

const TIMEOUT: Duration = Duration::from_secs(10);

/// A lean cache type: ConfigMaps' metadata only (the rest is skipped by serde).
#[derive(Resource, Clone, Debug, Deserialize)]
#[resource(inherit = ConfigMap)]
struct ConfigMapName {
    metadata: ObjectMeta,
}

/// (LISTs, WATCHes) of ConfigMaps among the requests.
fn config_map_lists_and_watches(requests: &RequestLog) -> (usize, usize) {
    let of_config_maps: Vec<_> = requests
        .requests()
        .into_iter()
        .filter_map(|(method, uri)| rbac_attributes(&method, &uri))
        .filter(|a| a.group.is_empty() && a.resource == "configmaps")
        .collect();
    let count = |verb: &str| of_config_maps.iter().filter(|a| a.verb == verb).count();
    (count("list"), count("watch"))
}

/// A reflector store fed by `stream`, polled in the background.
fn cache<K>(
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    cache_with(K::DynamicType::default(), stream)
}

fn cache_with<K>(
    dynamic_type: K::DynamicType,
    stream: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
) -> (Store<K>, tokio::task::JoinHandle<()>)
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone + Send + Sync,
{
    let writer = reflector::store::Writer::new(dynamic_type);
    let store = writer.as_reader();
    let task = tokio::spawn(reflector::reflector(writer, stream).for_each(|_| async {}));
    (store, task)
}

async fn create_config_map(env: &TestEnv, name: &str) {
    let cm = ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        ..ConfigMap::default()
    };
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &cm)
        .await
        .expect("create ConfigMap");
}

async fn wait_for_names<K: Resource + Clone>(what: &str, store: &Store<K>, expected: &[&str])
where
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let expected: Vec<String> = expected.iter().map(|s| (*s).to_owned()).collect();
    wait_for(what, TIMEOUT, || {
        // Clusters put `kube-root-ca.crt` in every namespace; the test's own ConfigMaps count.
        let mut names: Vec<String> = store
            .state()
            .iter()
            .map(|o| o.name_any())
            .filter(|n| !n.starts_with("kube-"))
            .collect();
        names.sort();
        let seen = names == expected;
        async move {
            if seen {
                Ok(Some(()))
            } else {
                Err(format!("{names:?}"))
            }
        }
    })
    .await
    .expect("cache content");
}

#[tokio::test]
async fn caches_of_one_kind_share_one_watch_and_a_late_cache_gets_the_whole_state() {
    let env = TestEnv::start().await.expect("test environment");
    let ns = env.namespace().to_owned();
    create_config_map(&env, "a").await;
    let (client, requests) = env.recording_client().await.expect("client");
    let watches = SharedWatches::new(client);
    let metrics = Metrics::new("test");
    watches.register_metrics(&metrics);
    let config = watcher::Config::default();

    // Two caches of two different types, subscribed before the watch has started.
    let (typed, typed_task) = cache(watches.watch::<ConfigMap>(Some(&ns), &config));
    let ar = ApiResource::erase::<ConfigMap>(&());
    let (dynamic, dynamic_task) =
        cache_with::<DynamicObject>(ar.clone(), watches.watch_resource(&ar, Some(&ns), &config));
    wait_for_names("typed cache", &typed, &["a"]).await;
    wait_for_names("dynamic cache", &dynamic, &["a"]).await;
    create_config_map(&env, "b").await;
    wait_for_names("typed cache", &typed, &["a", "b"]).await;
    wait_for_names("dynamic cache", &dynamic, &["a", "b"]).await;
    assert_eq!(
        config_map_lists_and_watches(&requests),
        (1, 1),
        "two caches, one LIST and one WATCH"
    );
    let encoded = metrics.encode();
    assert!(
        encoded.contains(&format!(
            "test_shared_watch_subscribers{{resource=\"configmaps\",namespace=\"{ns}\"}} 2"
        )),
        "{encoded}"
    );

    // A third cache joins the running watch: it gets everything; the watch relists once.
    let (late, late_task) = cache(watches.watch::<ConfigMapName>(Some(&ns), &config));
    wait_for_names("late cache", &late, &["a", "b"]).await;
    create_config_map(&env, "c").await;
    for (what, names) in [
        ("typed cache", typed.state().len()),
        ("dynamic cache", dynamic.state().len()),
    ] {
        assert!(names >= 2, "{what} kept its objects through the relist");
    }
    wait_for_names("typed cache", &typed, &["a", "b", "c"]).await;
    wait_for_names("dynamic cache", &dynamic, &["a", "b", "c"]).await;
    wait_for_names("late cache", &late, &["a", "b", "c"]).await;
    let (lists, watch_requests) = config_map_lists_and_watches(&requests);
    assert_eq!(lists, 2, "the late cache costs one relist");
    assert_eq!(
        watch_requests, 2,
        "the first watch was replaced, not doubled"
    );

    // The API watch ends with its last cache; a new cache starts a new one.
    for task in [typed_task, dynamic_task, late_task] {
        task.abort();
        let _ = task.await;
    }
    wait_for("the shared watch to stop", TIMEOUT, || {
        let encoded = metrics.encode();
        let stopped = encoded.contains(&format!(
            "test_shared_watch_subscribers{{resource=\"configmaps\",namespace=\"{ns}\"}} 0"
        ));
        async move { if stopped { Ok(Some(())) } else { Err(encoded) } }
    })
    .await
    .expect("watch stopped");
    let (again, again_task) = cache(watches.watch::<ConfigMapName>(Some(&ns), &config));
    wait_for_names("new cache", &again, &["a", "b", "c"]).await;
    assert_eq!(config_map_lists_and_watches(&requests).0, 3, "a fresh LIST");
    again_task.abort();
    env.cleanup().await;
}

#[tokio::test]
async fn watches_of_other_namespaces_or_selectors_are_not_shared() {
    let env = TestEnv::start().await.expect("test environment");
    let ns = env.namespace().to_owned();
    create_config_map(&env, "a").await;
    let (client, requests) = env.recording_client().await.expect("client");
    let watches = SharedWatches::new(client);
    let all = watcher::Config::default();
    let labelled = watcher::Config::default().labels("app=none");
    let (everything, t1) = cache(watches.watch::<ConfigMapName>(Some(&ns), &all));
    let (nothing, t2) = cache(watches.watch::<ConfigMapName>(Some(&ns), &labelled));
    wait_for_names("unfiltered cache", &everything, &["a"]).await;
    wait_for("the selected cache to sync", TIMEOUT, || {
        let ready = nothing.wait_until_ready();
        async move {
            match tokio::time::timeout(Duration::from_millis(10), ready).await {
                Ok(Ok(())) => Ok(Some(())),
                _ => Err("not synced".to_owned()),
            }
        }
    })
    .await
    .expect("synced");
    assert!(nothing.state().is_empty(), "the selector applies");
    assert!(!everything.state().is_empty());
    assert_eq!(config_map_lists_and_watches(&requests).0, 2, "two watches");
    t1.abort();
    t2.abort();
    env.cleanup().await;
}

/// Sandbox only (latency injection): a cache that joins while the watch's first LIST is still
/// in flight simply joins — it gets an `Init` of its own and the same objects — with no relist.
#[tokio::test]
async fn a_cache_joining_before_the_list_answers_costs_no_relist() {
    let env = TestEnv::start().await.expect("test environment");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    create_config_map(&env, "a").await;
    let Some(sandbox) = env.sandbox() else {
        return;
    };
    sandbox.inject(Fault::slow(
        "list",
        "configmaps",
        Duration::from_millis(500),
    ));
    let (client, requests) = env.recording_client().await.expect("client");
    let watches = SharedWatches::new(client);
    let config = watcher::Config::default();
    let (first, first_task) = cache(watches.watch::<ConfigMap>(Some(&ns), &config));
    wait_for("the first LIST to be sent", TIMEOUT, || {
        let sent = config_map_lists_and_watches(&requests).0 == 1;
        async move { Ok(sent.then_some(())) }
    })
    .await
    .expect("LIST sent");
    let (second, second_task) = cache(watches.watch::<ConfigMapName>(Some(&ns), &config));
    wait_for_names("first cache", &first, &["a"]).await;
    wait_for_names("second cache", &second, &["a"]).await;
    assert_eq!(
        config_map_lists_and_watches(&requests),
        (1, 1),
        "the newcomer rode on the LIST in flight"
    );
    sandbox.clear_faults();
    first_task.abort();
    second_task.abort();
    env.cleanup().await;
}
