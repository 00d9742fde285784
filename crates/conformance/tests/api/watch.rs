//! Watches: initial replay, ordered streams from a resourceVersion, selector semantics,
//! bookmarks, timeouts, 410 Expired, forced disconnects, fan-out, and `kube::runtime` watchers.
//!
//! Real clusters put a `kube-root-ca.crt` ConfigMap into every namespace, so the watches here
//! carry a label selector naming this test's objects.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use kube::api::{
    DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use serde_json::json;
use vigil_sandbox::SandboxConfig;
use vigil_testenv::{TestEnv, TestEnvOptions};

use crate::support::{
    EVENT_TIMEOUT, event_summary, labelled_config_map, next_event, rv_of, wait_until,
};

type EventStream = futures::stream::BoxStream<'static, Result<WatchEvent<ConfigMap>, kube::Error>>;

async fn watch(api: &Api<ConfigMap>, wp: &WatchParams, rv: &str) -> EventStream {
    api.watch(wp, rv)
        .await
        .unwrap_or_else(|e| panic!("watch from {rv:?}: {e:?}"))
        .boxed()
}

async fn create(api: &Api<ConfigMap>, name: &str, labels: &[(&str, &str)]) -> ConfigMap {
    api.create(&PostParams::default(), &labelled_config_map(name, labels))
        .await
        .unwrap_or_else(|e| panic!("create {name}: {e:?}"))
}

async fn set_data(api: &Api<ConfigMap>, name: &str, value: &str) -> ConfigMap {
    let patch = Patch::Merge(json!({"data": {"key": value}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap_or_else(|e| panic!("patch {name}: {e:?}"))
}

async fn set_label(api: &Api<ConfigMap>, name: &str, key: &str, value: &str) -> ConfigMap {
    let patch = Patch::Merge(json!({"metadata": {"labels": {key: value}}}));
    api.patch(name, &PatchParams::default(), &patch)
        .await
        .unwrap_or_else(|e| panic!("patch {name}: {e:?}"))
}

/// The current resourceVersion of the ConfigMap collection.
async fn list_rv(api: &Api<ConfigMap>) -> String {
    let list = api
        .list(&ListParams::default().labels("vigil-none=none"))
        .await
        .expect("list");
    list.metadata
        .resource_version
        .expect("list resourceVersion")
}

#[tokio::test]
async fn watch_from_zero_or_unset_replays_current_objects_then_streams() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "replay")];
    create(&api, "a", &labels).await;
    create(&api, "b", &labels).await;
    let wp = WatchParams::default()
        .labels("suite=replay")
        .disable_bookmarks();

    let mut existing = BTreeSet::from(["a".to_owned(), "b".to_owned()]);
    for rv in ["0", ""] {
        let mut stream = watch(&api, &wp, rv).await;
        let mut initial = BTreeSet::new();
        for _ in 0..existing.len() {
            let (kind, name, _) =
                event_summary(&next_event(&mut stream, "initial ADDED events").await);
            assert_eq!(
                kind, "ADDED",
                "initial events of a watch from {rv:?} are ADDED"
            );
            initial.insert(name);
        }
        assert_eq!(initial, existing, "watch from {rv:?}");

        let name = format!("later{}", rv.len());
        let created = create(&api, &name, &labels).await;
        existing.insert(name.clone());
        let (kind, got, event_rv) =
            event_summary(&next_event(&mut stream, "ADDED of a new object").await);
        assert_eq!(
            (kind, got.as_str(), event_rv),
            ("ADDED", name.as_str(), rv_of(&created)),
            "watch from {rv:?}"
        );

        let modified = set_data(&api, "a", &format!("v{}", rv.len())).await;
        let (kind, got, event_rv) = event_summary(&next_event(&mut stream, "MODIFIED of a").await);
        assert_eq!(
            (kind, got.as_str(), event_rv),
            ("MODIFIED", "a", rv_of(&modified)),
            "watch from {rv:?}"
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn watch_from_resource_version_streams_only_later_changes_in_order() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "order")];
    let x = create(&api, "x", &labels).await;
    let start = rv_of(&x);

    let m1 = set_data(&api, "x", "changed").await;
    let y = create(&api, "y", &labels).await;
    api.delete("x", &DeleteParams::default())
        .await
        .expect("delete x");
    let m2 = set_data(&api, "y", "changed").await;

    let wp = WatchParams::default().labels("suite=order");
    let mut stream = watch(&api, &wp, &start.to_string()).await;
    let mut events = Vec::new();
    for i in 0..4 {
        events.push(event_summary(
            &next_event(&mut stream, &format!("event {i}")).await,
        ));
    }
    let kinds: Vec<(&str, &str)> = events.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("MODIFIED", "x"),
            ("ADDED", "y"),
            ("DELETED", "x"),
            ("MODIFIED", "y")
        ]
    );
    assert_eq!(events[0].2, rv_of(&m1));
    assert_eq!(events[1].2, rv_of(&y));
    assert_eq!(events[3].2, rv_of(&m2));
    let rvs: Vec<u64> = events.iter().map(|e| e.2).collect();
    assert!(
        rvs[0] > start && rvs.windows(2).all(|w| w[0] < w[1]),
        "resourceVersions must increase: start {start}, {rvs:?}"
    );

    // From a later resourceVersion only what followed it arrives.
    let mut stream = watch(&api, &wp, &rv_of(&y).to_string()).await;
    let (kind, name, _) = event_summary(&next_event(&mut stream, "DELETED x").await);
    assert_eq!((kind, name.as_str()), ("DELETED", "x"));
    let (kind, name, _) = event_summary(&next_event(&mut stream, "MODIFIED y").await);
    assert_eq!((kind, name.as_str()), ("MODIFIED", "y"));

    // And it keeps streaming live changes.
    let z = create(&api, "z", &labels).await;
    let (kind, name, rv) = event_summary(&next_event(&mut stream, "ADDED z").await);
    assert_eq!((kind, name.as_str(), rv), ("ADDED", "z", rv_of(&z)));
    env.cleanup().await;
}

#[tokio::test]
async fn label_selector_watch_reports_objects_entering_and_leaving() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let o = create(&api, "o", &[("suite", "sel"), ("color", "blue")]).await;
    let wp = WatchParams::default().labels("suite=sel,color=red");
    let mut stream = watch(&api, &wp, &rv_of(&o).to_string()).await;

    // Starts matching: ADDED.
    let red = set_label(&api, "o", "color", "red").await;
    let event = next_event(&mut stream, "ADDED when o starts matching").await;
    assert_eq!(
        event_summary(&event),
        ("ADDED", "o".to_owned(), rv_of(&red))
    );

    // Stops matching: DELETED, carrying the last matching state at the new resourceVersion.
    let green = set_label(&api, "o", "color", "green").await;
    let event = next_event(&mut stream, "DELETED when o stops matching").await;
    assert_eq!(
        event_summary(&event),
        ("DELETED", "o".to_owned(), rv_of(&green))
    );
    if let WatchEvent::Deleted(obj) = &event {
        let color = obj
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("color"))
            .map(String::as_str);
        assert_eq!(
            color,
            Some("red"),
            "the DELETED event carries the object as it last matched"
        );
    }

    // Changes while not matching are invisible; matching again is a new ADDED.
    set_data(&api, "o", "unseen").await;
    let red_again = set_label(&api, "o", "color", "red").await;
    let event = next_event(&mut stream, "ADDED when o matches again").await;
    assert_eq!(
        event_summary(&event),
        ("ADDED", "o".to_owned(), rv_of(&red_again))
    );
    env.cleanup().await;
}

#[tokio::test]
async fn bookmarks_are_sent_only_when_allowed() {
    let options = TestEnvOptions {
        sandbox: SandboxConfig {
            bookmark_interval: Duration::from_millis(200),
            ..SandboxConfig::default()
        },
        ..TestEnvOptions::default()
    };
    let env = TestEnv::start_with(options).await.expect("test env");
    // Real servers send bookmarks about once a minute: too slow for this test.
    vigil_testenv::require_sandbox!(env);
    let api = env.api::<ConfigMap>();
    let start: u64 = list_rv(&api).await.parse().expect("numeric list rv");

    // Without allowWatchBookmarks: no BOOKMARK for the whole 1 s watch.
    let plain = {
        let api = api.clone();
        let wp = WatchParams::default()
            .labels("suite=bm")
            .disable_bookmarks()
            .timeout(1);
        tokio::spawn(async move {
            let events: Vec<_> = watch(&api, &wp, &start.to_string())
                .await
                .try_collect()
                .await
                .expect("plain watch");
            events
                .iter()
                .filter(|e| matches!(e, WatchEvent::Bookmark(_)))
                .count()
        })
    };

    let wp = WatchParams::default().labels("suite=bm").timeout(10);
    let mut stream = watch(&api, &wp, &start.to_string()).await;
    let first = next_bookmark(&mut stream).await;
    assert!(first >= start, "bookmark rv {first} < start {start}");

    let created = create(&api, "marked", &[("suite", "bm")]).await;
    let mut seen_added = false;
    let deadline = Instant::now() + EVENT_TIMEOUT;
    loop {
        assert!(
            Instant::now() < deadline,
            "no bookmark after the ADDED event"
        );
        match tokio::time::timeout(EVENT_TIMEOUT, stream.next())
            .await
            .expect("event")
            .expect("stream open")
            .expect("event")
        {
            WatchEvent::Added(cm) => {
                assert_eq!(cm.metadata.name.as_deref(), Some("marked"));
                seen_added = true;
            }
            WatchEvent::Bookmark(b) if seen_added => {
                let rv: u64 = b
                    .metadata
                    .resource_version
                    .parse()
                    .expect("numeric bookmark rv");
                assert!(
                    rv >= rv_of(&created),
                    "bookmark after ADDED has rv {rv} < {}",
                    rv_of(&created)
                );
                assert_eq!(
                    (b.types.api_version.as_str(), b.types.kind.as_str()),
                    ("v1", "ConfigMap")
                );
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected event {other:?}"),
        }
    }
    let unrequested = plain.await.expect("plain watch task");
    assert_eq!(
        unrequested, 0,
        "BOOKMARK events sent without allowWatchBookmarks"
    );
    env.cleanup().await;
}

/// The resourceVersion of the next BOOKMARK; panics on other events.
async fn next_bookmark(stream: &mut EventStream) -> u64 {
    match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
        Ok(Some(Ok(WatchEvent::Bookmark(b)))) => b
            .metadata
            .resource_version
            .parse()
            .expect("numeric bookmark rv"),
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
}

#[tokio::test]
async fn timeout_seconds_ends_the_stream() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let rv = list_rv(&api).await;
    let started = Instant::now();
    let mut stream = watch(
        &api,
        &WatchParams::default().labels("suite=timeout").timeout(1),
        &rv,
    )
    .await;
    let ended = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(event) = stream.next().await {
            match event {
                Ok(WatchEvent::Bookmark(_)) => {}
                other => panic!("unexpected event on an idle watch: {other:?}"),
            }
        }
    })
    .await;
    assert!(
        ended.is_ok(),
        "a watch with timeoutSeconds=1 was still open after 10 s"
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(900),
        "watch ended after {elapsed:?}, before its timeout"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn watch_from_compacted_resource_version_gets_410_expired() {
    let env = TestEnv::start().await.expect("test env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "expired")];
    let old = create(&api, "old", &labels).await;
    for i in 0..3 {
        set_data(&api, "old", &format!("v{i}")).await;
    }
    sandbox.compact(0);

    let wp = WatchParams::default().labels("suite=expired");
    let mut stream = watch(&api, &wp, &rv_of(&old).to_string()).await;
    match next_event(&mut stream, "the 410 ERROR event").await {
        WatchEvent::Error(status) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (410, "Expired"),
                "{status:?}"
            );
        }
        other => panic!("expected an ERROR event with code 410, got {other:?}"),
    }

    // A watch from the current resourceVersion works.
    let rv = list_rv(&api).await;
    let mut stream = watch(&api, &wp, &rv).await;
    let fresh = create(&api, "fresh", &labels).await;
    let event = next_event(&mut stream, "ADDED fresh").await;
    assert_eq!(
        event_summary(&event),
        ("ADDED", "fresh".to_owned(), rv_of(&fresh))
    );
    env.cleanup().await;
}

#[tokio::test]
async fn closed_watches_end_and_the_runtime_watcher_recovers() {
    let env = TestEnv::start().await.expect("test env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "recover")];

    // A plain watch ends.
    let rv = list_rv(&api).await;
    let mut stream = watch(&api, &WatchParams::default().labels("suite=recover"), &rv).await;
    sandbox.close_watches();
    let ended = tokio::time::timeout(EVENT_TIMEOUT, async {
        while let Some(event) = stream.next().await {
            if !matches!(event, Ok(WatchEvent::Bookmark(_))) {
                panic!("unexpected event on a closed watch: {event:?}");
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "close_watches() did not end the watch");

    // kube::runtime::watcher reconnects and keeps delivering.
    create(&api, "r0", &labels).await;
    let config = watcher::Config::default().labels("suite=recover");
    let mut applied = watcher(api.clone(), config)
        .default_backoff()
        .applied_objects()
        .boxed();
    expect_applied(&mut applied, "r0").await;
    for name in ["r1", "r2", "r3"] {
        sandbox.close_watches();
        create(&api, name, &labels).await;
        expect_applied(&mut applied, name).await;
    }
    env.cleanup().await;
}

/// Reads applied objects until `name` shows up.
async fn expect_applied<S>(stream: &mut S, name: &str)
where
    S: futures::Stream<Item = Result<ConfigMap, watcher::Error>> + Unpin,
{
    let found = tokio::time::timeout(EVENT_TIMEOUT, async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(cm) if cm.metadata.name.as_deref() == Some(name) => return true,
                Ok(_) => {}
                // Transient errors are retried by the backoff.
                Err(e) => eprintln!("watcher error (retried): {e}"),
            }
        }
        false
    })
    .await;
    assert_eq!(found, Ok(true), "the watcher did not deliver {name}");
}

#[tokio::test]
async fn many_concurrent_watchers_all_receive_every_event() {
    const WATCHERS: usize = 20;
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "fanout")];
    let base = create(&api, "base", &labels).await;
    let wp = WatchParams::default().labels("suite=fanout");
    let start = rv_of(&base).to_string();
    let streams = futures::future::join_all((0..WATCHERS).map(|_| watch(&api, &wp, &start))).await;

    create(&api, "f1", &labels).await;
    create(&api, "f2", &labels).await;
    set_data(&api, "f1", "changed").await;
    api.delete("f2", &DeleteParams::default())
        .await
        .expect("delete f2");
    create(&api, "f3", &labels).await;
    let expected = [
        ("ADDED", "f1"),
        ("ADDED", "f2"),
        ("MODIFIED", "f1"),
        ("DELETED", "f2"),
        ("ADDED", "f3"),
    ];

    let results = futures::future::join_all(streams.into_iter().enumerate().map(
        |(i, mut stream)| async move {
            let mut got = Vec::new();
            for _ in 0..expected.len() {
                got.push(event_summary(
                    &next_event(&mut stream, &format!("watcher {i}")).await,
                ));
            }
            got
        },
    ))
    .await;
    let reference = &results[0];
    for (i, got) in results.iter().enumerate() {
        let kinds: Vec<(&str, &str)> = got.iter().map(|(k, n, _)| (*k, n.as_str())).collect();
        assert_eq!(kinds, expected, "watcher {i}");
        assert_eq!(got, reference, "watcher {i} saw different resourceVersions");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn reflector_converges_to_the_current_objects() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<ConfigMap>();
    let labels = [("suite", "reflect")];
    for name in ["a", "b", "c"] {
        create(&api, name, &labels).await;
    }
    let (store, writer) = reflector::store::<ConfigMap>();
    let stream = reflector(
        writer,
        watcher(
            api.clone(),
            watcher::Config::default().labels("suite=reflect"),
        ),
    );
    let driver = tokio::spawn(stream.default_backoff().for_each(|_| async {}));
    tokio::time::timeout(EVENT_TIMEOUT, store.wait_until_ready())
        .await
        .expect("store ready in time")
        .expect("store ready");

    let names = |store: &reflector::Store<ConfigMap>| -> BTreeSet<String> {
        store
            .state()
            .iter()
            .filter_map(|cm| cm.metadata.name.clone())
            .collect()
    };
    assert_eq!(
        names(&store),
        BTreeSet::from(["a", "b", "c"].map(String::from))
    );

    create(&api, "d", &labels).await;
    api.delete("a", &DeleteParams::default())
        .await
        .expect("delete a");
    set_data(&api, "b", "updated").await;
    set_label(&api, "c", "suite", "elsewhere").await;
    wait_until(
        EVENT_TIMEOUT,
        "the reflector holds exactly b (updated) and d",
        || {
            let store = store.clone();
            async move {
                let b_updated = store.state().iter().any(|cm| {
                    cm.metadata.name.as_deref() == Some("b")
                        && cm
                            .data
                            .as_ref()
                            .and_then(|d| d.get("key"))
                            .map(String::as_str)
                            == Some("updated")
                });
                names(&store) == BTreeSet::from(["b", "d"].map(String::from)) && b_updated
            }
        },
    )
    .await;
    driver.abort();
    env.cleanup().await;
}
