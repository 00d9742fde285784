//! One cache over several namespaces (`runtime.cache::<K>().namespaces(…)`), end to end on the
//! sandbox: a change that a namespace's watch sees while another namespace is still listing
//! reaches the cache. kube-runtime's reflector swaps in the whole initial list when it ends, so a
//! change written to the store before that was lost — on a real cluster, where the lists of two
//! namespaces end at different times, a Service created meanwhile went unseen until it changed
//! again.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, PostParams};
use vigil_runtime::Manager;
use vigil_testenv::vigil_sandbox::Fault;
use vigil_testenv::{TestEnv, wait_for};

const TIMEOUT: Duration = Duration::from_secs(10);

async fn create_config_map(env: &TestEnv, namespace: &str, name: &str) {
    let cm: ConfigMap =
        serde_json::from_value(serde_json::json!({"metadata": {"name": name}})).expect("cm");
    Api::<ConfigMap>::namespaced(env.client(), namespace)
        .create(&PostParams::default(), &cm)
        .await
        .expect("create config map");
}

#[tokio::test]
async fn a_change_watched_while_another_namespace_lists_reaches_the_cache() {
    let env = TestEnv::start().await.expect("env");
    // Needs a failed LIST to hold one namespace's list back.
    vigil_testenv::require_sandbox!(env);
    let first = env.namespace().to_owned();
    let second = format!("{first}-b");
    let namespace: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": second}})).expect("ns");
    Api::<Namespace>::all(env.client())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("create namespace");
    env.delete_on_cleanup(&ApiResource::erase::<Namespace>(&()), &second);

    // The first LIST fails: that namespace lists again after the watch's back-off (0.8 s or
    // more), while the other has listed and watches.
    if let Some(sandbox) = env.sandbox() {
        sandbox.inject(Fault::fail("list", "configmaps", 500, 1));
    }
    let manager = Manager::for_client("test", env.client())
        .build()
        .await
        .expect("a manager");
    let namespaces = BTreeSet::from([first.clone(), second.clone()]);
    let cache = manager
        .runtime()
        .cache::<ConfigMap>()
        .namespaces(Some(&namespaces))
        .build();
    tokio::time::sleep(Duration::from_millis(300)).await;
    // One of these is seen by a watch (the namespace that listed), the other by the relist.
    create_config_map(&env, &first, "a").await;
    create_config_map(&env, &second, "b").await;

    let cached = wait_for("both ConfigMaps in the cache", TIMEOUT, || {
        let cache = cache.clone();
        async move {
            let mut names: Vec<String> = cache
                .state()
                .iter()
                .filter_map(|cm| cm.metadata.name.clone())
                // (Not the namespaces' own `kube-root-ca.crt`.)
                .filter(|name| name.len() == 1)
                .collect();
            names.sort();
            if names == ["a", "b"] {
                Ok(Some(names))
            } else {
                Err(format!("cached: {names:?}"))
            }
        }
    })
    .await;
    drop(manager);
    cached.expect("both ConfigMaps cached");
    env.cleanup().await;
}
