//! Fault injection (sandbox-only powers): failing verbs, latency, closed watches, compaction and
//! a server restart that keeps state — and the admin endpoint that exposes them over HTTP.

use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::runtime::watcher;
use vigil_sandbox::Fault;
use vigil_testenv::{TestEnv, require_sandbox};

use crate::support::config_map;

#[tokio::test]
async fn counted_faults_fail_then_clear() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    // 500, not 503: kube-rs retries 503 (and 429, 504) on its own.
    sandbox.inject(Fault::fail("create", "configmaps", 500, 2));
    let api = env.api::<ConfigMap>();
    for attempt in 0..2 {
        let err = api
            .create(&PostParams::default(), &config_map("f"))
            .await
            .expect_err("injected");
        assert!(
            matches!(err, kube::Error::Api(ref s) if s.code == 500),
            "attempt {attempt}: {err:?}"
        );
    }
    api.create(&PostParams::default(), &config_map("f"))
        .await
        .expect("third create succeeds");
    // Other verbs and resources were never affected.
    api.get("f").await.expect("get unaffected");
    env.cleanup().await;
}

#[tokio::test]
async fn latency_is_added_to_matching_requests() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("slow"))
        .await
        .expect("create");
    env.sandbox().expect("sandbox").inject(Fault::slow(
        "get",
        "configmaps",
        Duration::from_millis(150),
    ));
    let started = Instant::now();
    api.get("slow").await.expect("get");
    assert!(
        started.elapsed() >= Duration::from_millis(150),
        "latency injected"
    );
    env.sandbox().expect("sandbox").clear_faults();
    env.cleanup().await;
}

#[tokio::test]
async fn a_slowed_request_is_answered_as_soon_as_the_fault_is_cleared() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("healed"))
        .await
        .expect("create");
    let sandbox = env.sandbox().expect("sandbox");
    sandbox.inject(Fault::slow("get", "configmaps", Duration::from_secs(60)));
    let get = tokio::spawn({
        let api = api.clone();
        async move { api.get("healed").await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!get.is_finished(), "held while the fault stands");
    sandbox.clear_faults();
    tokio::time::timeout(Duration::from_secs(10), get)
        .await
        .expect("answered once the fault is cleared, long before its 60 s")
        .expect("task")
        .expect("get");
    env.cleanup().await;
}

#[tokio::test]
async fn restart_keeps_state_and_watchers_recover() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("before"))
        .await
        .expect("create");
    let mut events = watcher(api.clone(), watcher::Config::default()).boxed();
    // The first event batch is the initial list.
    let _ = tokio::time::timeout(Duration::from_secs(5), events.next())
        .await
        .expect("initial list");

    let sandbox = env.sandbox().expect("sandbox");
    sandbox.stop_serving().await;
    assert!(
        api.get("before").await.is_err(),
        "a stopped server answers nothing"
    );
    sandbox
        .resume_serving()
        .await
        .expect("listen again on the same address");
    api.get("before").await.expect("state survives the restart");

    api.create(&PostParams::default(), &config_map("after"))
        .await
        .expect("create after restart");
    let seen = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(cm) | watcher::Event::InitApply(cm)) = event
                && cm.metadata.name.as_deref() == Some("after")
            {
                return true;
            }
        }
        false
    })
    .await
    .expect("the watcher sees objects created after the restart");
    assert!(seen);
    env.cleanup().await;
}

/// A stop ends every open watch and then waits for the server's requests to finish. Clients
/// re-watch at once when a watch ends, so watches keep arriving while the server stops; one that
/// outlived the stop held it open forever (the chaos test hung on it once). Many clients
/// re-watching in a tight loop make that race likely on every stop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stop_ends_watches_that_arrive_while_it_stops() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    let sandbox = env.sandbox().expect("sandbox");
    let rewatching: Vec<_> = (0..32)
        .map(|_| {
            let api = api.clone();
            tokio::spawn(async move {
                loop {
                    let params = kube::api::WatchParams::default().timeout(290);
                    if let Ok(stream) = api.watch(&params, "0").await {
                        let mut stream = stream.boxed();
                        while stream.next().await.is_some() {}
                    } else {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    for round in 0..30 {
        // Watches end and come back at once, as they do for every client of a closing server.
        sandbox.close_watches();
        tokio::time::timeout(Duration::from_secs(20), sandbox.stop_serving())
            .await
            .unwrap_or_else(|_| panic!("round {round}: the stop never finished: a watch held it"));
        tokio::time::sleep(Duration::from_millis(50)).await;
        sandbox
            .resume_serving()
            .await
            .expect("listen again on the same address");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for task in rewatching {
        task.abort();
    }
    env.cleanup().await;
}

#[tokio::test]
async fn admin_endpoint_injects_and_clears_faults() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let client = env.client();
    let body = serde_json::to_vec(
        &serde_json::json!({"verb": "list", "resource": "configmaps", "code": 500, "count": 1}),
    )
    .expect("json");
    let req = http::Request::post("/vigil-sandbox/v1/faults")
        .body(body)
        .expect("request");
    client.request_text(req).await.expect("fault added");
    let api = env.api::<ConfigMap>();
    let err = api.list(&Default::default()).await.expect_err("injected");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 500),
        "{err:?}"
    );
    api.list(&Default::default())
        .await
        .expect("count exhausted");

    let req = http::Request::post("/vigil-sandbox/v1/faults")
        .body(serde_json::to_vec(&serde_json::json!({"code": 500})).expect("json"))
        .expect("request");
    client.request_text(req).await.expect("fault added");
    let req = http::Request::delete("/vigil-sandbox/v1/faults")
        .body(Vec::new())
        .expect("request");
    // The wildcard rule fails every API request, but the admin endpoint stays reachable.
    client.request_text(req).await.expect("faults cleared");
    api.list(&Default::default()).await.expect("faults cleared");
    env.cleanup().await;
}

#[tokio::test]
async fn admin_restart_keeps_state() {
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    api.create(&PostParams::default(), &config_map("kept"))
        .await
        .expect("create");
    let req = http::Request::post("/vigil-sandbox/v1/restart?downMillis=200")
        .body(Vec::new())
        .expect("request");
    env.client()
        .request_text(req)
        .await
        .expect("restart accepted");
    // Down, then up again on the same address, with the object still there.
    let back = vigil_testenv::wait_for(
        "the sandbox to serve again",
        Duration::from_secs(10),
        || async {
            match api.get_opt("kept").await {
                Ok(found) => Ok(Some(found)),
                Err(e) => Err(e.to_string()),
            }
        },
    )
    .await
    .expect("serving again");
    assert!(back.is_some(), "state survives an admin restart");
    env.cleanup().await;
}

/// A restart answers as a restarted kube-apiserver 1.28 does (seen with `../shared/kube/fault.sh`,
/// see `vigil_sandbox::startup`): built-in kinds at once, custom resources 503 with
/// `Retry-After: 5` for a moment, health checks failing a little longer, and a watch resumed from
/// before the restart accepted, then ended by a 410 Expired event (its watch cache starts afresh).
#[tokio::test]
async fn a_restart_answers_as_a_starting_kube_apiserver() {
    use crate::support::{create_crd, raw_request, simple_crd, test_group};
    let env = TestEnv::start().await.expect("env");
    require_sandbox!(env);
    let group = test_group(env.namespace(), "startup");
    create_crd(&env.client(), simple_crd(&group, "Gizmo", "gizmos")).await;
    let api = env.api::<ConfigMap>();
    let before = api
        .create(&PostParams::default(), &config_map("before"))
        .await
        .expect("create");
    let old_rv = before.metadata.resource_version.expect("resourceVersion");
    // A client that shows what the server answers: kube-rs's default one retries 503 itself.
    let mut config = env.config().await.expect("config");
    config.default_retry = false;
    let raw = kube::Client::try_from(config).expect("client");
    let ns = env.namespace().to_owned();

    let sandbox = env.sandbox().expect("sandbox");
    sandbox.stop_serving().await;
    sandbox.resume_serving().await.expect("serving again");

    let custom = raw_request(
        &raw,
        "GET",
        &format!("/apis/{group}/v1/namespaces/{ns}/gizmos"),
        None,
        None,
    )
    .await;
    assert_eq!(
        custom.status, 503,
        "custom resources while starting: {}",
        custom.text
    );
    assert_eq!(
        custom.json["message"],
        "the request has been made before all known HTTP paths have been installed, please try again"
    );
    assert_eq!(custom.json["details"]["retryAfterSeconds"], 5);
    assert_eq!(
        custom
            .headers
            .get("retry-after")
            .and_then(|v| v.to_str().ok()),
        Some("5")
    );
    let readyz = raw_request(&raw, "GET", "/readyz", None, None).await;
    assert_eq!(readyz.status, 500, "/readyz while starting");
    assert!(
        readyz
            .text
            .contains("[-]poststarthook/rbac/bootstrap-roles failed: reason withheld")
            && readyz.text.ends_with("readyz check failed\n"),
        "{}",
        readyz.text
    );
    assert_eq!(
        raw_request(&raw, "GET", "/version", None, None)
            .await
            .status,
        200
    );
    let core = raw_request(
        &raw,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        None,
        None,
    )
    .await;
    assert_eq!(core.status, 200, "built-in kinds are served at once");

    // A write the resumed watch has not seen, as a real server's own writes at its start.
    api.create(&PostParams::default(), &config_map("after"))
        .await
        .expect("a write after the restart");
    let resumed = raw_request(
        &raw,
        "GET",
        &format!(
            "/api/v1/namespaces/{ns}/configmaps?watch=1&resourceVersion={old_rv}&timeoutSeconds=2"
        ),
        None,
        None,
    )
    .await;
    assert_eq!(resumed.status, 200, "the resumed watch is accepted");
    assert!(
        resumed.text.contains(r#""type":"ERROR""#)
            && resumed.text.contains(r#""code":410"#)
            && resumed.text.contains("too old resource version"),
        "then ended by a 410: {}",
        resumed.text
    );

    let ready = Instant::now();
    crate::support::wait_until(
        Duration::from_secs(10),
        "/readyz ok after the start-up",
        || {
            let raw = raw.clone();
            async move { raw_request(&raw, "GET", "/readyz", None, None).await.text == "ok" }
        },
    )
    .await;
    let custom = raw_request(
        &raw,
        "GET",
        &format!("/apis/{group}/v1/namespaces/{ns}/gizmos"),
        None,
        None,
    )
    .await;
    assert_eq!(
        custom.status, 200,
        "custom resources served once started: {}",
        custom.text
    );
    eprintln!(
        "restart: /readyz ok {:?} after the custom resources' 503",
        ready.elapsed()
    );
    crate::support::delete_crd(&env.client(), &format!("gizmos.{group}")).await;
    env.cleanup().await;
}
