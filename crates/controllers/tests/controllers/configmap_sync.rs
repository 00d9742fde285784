//! ConfigMapSync end to end: the controller runs in-process against a TestEnv (a fresh sandbox
//! by default). Every behaviour of the product issue: copies and their marks, propagation,
//! restoring edited or deleted copies, the namespace selector (including namespaces created
//! later), a deleted source, deletion with and without `Orphan`, conflicts and adoption, two
//! ConfigMapSyncs on one destination, immutable sources, the consent model with and without
//! `--configmapsync-trust-all`, 50 destinations, a restart in the middle of a fan-out, and
//! injected API failures.
//!
//! Each test's ConfigMapSyncs live in the test's namespace; its other namespaces carry the test
//! namespace's name as a prefix and are deleted at the end. On a real cluster
//! (`VIGIL_TEST_KUBECONFIG`) the controllers of the tests run one at a time, since each one
//! reconciles every ConfigMapSync of the cluster; tests needing fault injection skip there.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::{ConfigMapSyncStatus, DestinationState};
use vigil_controllers::configmap_sync::controller;
use vigil_controllers::configmap_sync::model::{
    CONTENT_HASH_ANNOTATION, OWNER_ANNOTATION, SHAREABLE_WITH_ANNOTATION, Settings,
};
use vigil_controllers::permissions;
use vigil_testenv::vigil_sandbox::Fault;
use vigil_testenv::{RbacAttributes, SETTLE_TIMEOUT, TestEnv, wait_for};

use crate::support;
use support::Running;

/// What "a while" means for a fan-out to many namespaces.
const FAN_OUT_TIMEOUT: Duration = Duration::from_secs(60);

use crate::support::CLUSTER_SERIAL;

/// A test's world: the environment, its extra namespaces, and the serial guard on a cluster.
struct World {
    env: TestEnv,
    namespaces: Vec<String>,
    _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl World {
    async fn start() -> Self {
        let env = TestEnv::start().await.expect("env");
        let serial = if env.is_sandbox() {
            None
        } else {
            Some(CLUSTER_SERIAL.lock().await)
        };
        install_crd(&env).await;
        Self {
            env,
            namespaces: Vec::new(),
            _serial: serial,
        }
    }

    /// The namespace of this test's ConfigMapSyncs.
    fn home(&self) -> String {
        self.env.namespace().to_owned()
    }

    /// A namespace name unique to this test.
    fn ns(&self, suffix: &str) -> String {
        format!("{}-{suffix}", self.env.namespace())
    }

    /// Creates namespace `<test>-<suffix>` with these labels.
    async fn create_ns(&mut self, suffix: &str, labels: &[(&str, &str)]) -> String {
        let name = self.ns(suffix);
        let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
        let ns: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}}))
                .expect("namespace");
        Api::<Namespace>::all(self.env.client())
            .create(&PostParams::default(), &ns)
            .await
            .expect("create namespace");
        self.namespaces.push(name.clone());
        name
    }

    async fn label_ns(&self, name: &str, labels: serde_json::Value) {
        Api::<Namespace>::all(self.env.client())
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({"metadata": {"labels": labels}})),
            )
            .await
            .expect("label namespace");
    }

    fn cms(&self, ns: &str) -> Api<ConfigMap> {
        Api::namespaced(self.env.client(), ns)
    }

    fn syncs(&self) -> Api<ConfigMapSync> {
        self.env.api()
    }

    /// Runs the controller (ConfigMaps only).
    fn controller(&self, trust_all: bool) -> Running {
        self.controller_with(Settings {
            trust_all,
            secrets: false,
        })
    }

    /// Runs the controller with these settings.
    fn controller_with(&self, settings: Settings) -> Running {
        self.controller_with_client(settings, self.env.client())
    }

    /// Runs the controller with these settings and its own client.
    fn controller_with_client(&self, settings: Settings, client: kube::Client) -> Running {
        Running::spawn(client, move |manager| {
            manager.add(controller::NAME, move |rt| controller::run_on(rt, settings));
        })
    }

    /// Creates or replaces ConfigMap `ns/name` with this data.
    async fn put_cm(&self, ns: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
        self.put_cm_with(ns, name, json!({"data": as_map(data)}))
            .await
    }

    /// Creates or replaces ConfigMap `ns/name`; `body` holds everything but the name.
    async fn put_cm_with(&self, ns: &str, name: &str, mut body: serde_json::Value) -> ConfigMap {
        let api = self.cms(ns);
        let metadata = body["metadata"].as_object().cloned().unwrap_or_default();
        body["metadata"] = json!(metadata);
        body["metadata"]["name"] = json!(name);
        match api.get_opt(name).await.expect("get") {
            Some(existing) => {
                body["metadata"]["resourceVersion"] = json!(existing.metadata.resource_version);
                let cm: ConfigMap = serde_json::from_value(body).expect("configmap");
                api.replace(name, &PostParams::default(), &cm)
                    .await
                    .expect("replace configmap")
            }
            None => {
                let cm: ConfigMap = serde_json::from_value(body).expect("configmap");
                api.create(&PostParams::default(), &cm)
                    .await
                    .expect("create configmap")
            }
        }
    }

    async fn get_cm(&self, ns: &str, name: &str) -> Option<ConfigMap> {
        self.cms(ns).get_opt(name).await.expect("get configmap")
    }

    /// Creates ConfigMapSync `name` in the home namespace with this spec.
    async fn create_sync(&self, name: &str, spec: serde_json::Value) -> ConfigMapSync {
        let sync: ConfigMapSync = serde_json::from_value(json!({
            "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
            "metadata": {"name": name}, "spec": spec,
        }))
        .expect("configmapsync");
        self.syncs()
            .create(&PostParams::default(), &sync)
            .await
            .expect("create configmapsync")
    }

    async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.syncs()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .expect("patch spec");
    }

    /// Waits until the ConfigMapSync's status satisfies `done`.
    async fn wait_status(
        &self,
        name: &str,
        what: &str,
        done: impl Fn(&ConfigMapSyncStatus) -> bool,
    ) -> ConfigMapSyncStatus {
        self.wait_status_for(name, what, SETTLE_TIMEOUT, done).await
    }

    async fn wait_status_for(
        &self,
        name: &str,
        what: &str,
        timeout: Duration,
        done: impl Fn(&ConfigMapSyncStatus) -> bool,
    ) -> ConfigMapSyncStatus {
        let what = format!("ConfigMapSync {name}: {what}");
        wait_for(&what, timeout, || async {
            let sync = self.syncs().get(name).await.map_err(|e| e.to_string())?;
            let status = sync.status.unwrap_or_default();
            if done(&status) {
                Ok(Some(status))
            } else {
                Err(show(&status))
            }
        })
        .await
        .expect(&what)
    }

    /// Waits until the ConfigMap `ns/name` satisfies `done` (None: absent).
    async fn wait_cm(
        &self,
        ns: &str,
        name: &str,
        what: &str,
        done: impl Fn(Option<&ConfigMap>) -> bool,
    ) -> Option<ConfigMap> {
        let what = format!("ConfigMap {ns}/{name}: {what}");
        wait_for(&what, SETTLE_TIMEOUT, || async {
            let cm = self
                .cms(ns)
                .get_opt(name)
                .await
                .map_err(|e| e.to_string())?;
            if done(cm.as_ref()) {
                Ok(Some(cm))
            } else {
                Err(format!("{:?}", cm.map(|c| (c.data, c.metadata.labels))))
            }
        })
        .await
        .expect(&what)
    }

    /// Waits until `ns/name` holds exactly `data`, and returns it.
    async fn wait_data(&self, ns: &str, name: &str, data: &[(&str, &str)]) -> ConfigMap {
        let want = as_map(data);
        self.wait_cm(ns, name, &format!("data {want:?}"), |cm| {
            cm.is_some_and(|c| c.data.clone().unwrap_or_default() == want)
        })
        .await
        .expect("present")
    }

    async fn wait_gone(&self, ns: &str, name: &str) {
        self.wait_cm(ns, name, "gone", |cm| cm.is_none()).await;
    }

    /// The resourceVersions of the ConfigMapSync, of `ns/name` in each namespace, and of the
    /// Events about the ConfigMapSync: what a write would change.
    async fn versions(
        &self,
        sync: &str,
        namespaces: &[String],
        name: &str,
    ) -> BTreeMap<String, Option<String>> {
        let mut out = BTreeMap::new();
        let current = self.syncs().get(sync).await.expect("get configmapsync");
        out.insert(format!("sync/{sync}"), current.metadata.resource_version);
        for ns in namespaces {
            out.insert(
                format!("cm/{ns}/{name}"),
                self.get_cm(ns, name)
                    .await
                    .and_then(|c| c.metadata.resource_version),
            );
        }
        for event in self.events_about(sync).await {
            out.insert(
                format!("event/{}", event.metadata.name.unwrap_or_default()),
                event.metadata.resource_version,
            );
        }
        out
    }

    /// Asserts that nothing is written for a while.
    async fn assert_no_writes(&self, sync: &str, namespaces: &[String], name: &str) {
        let before = self.versions(sync, namespaces, name).await;
        tokio::time::sleep(Duration::from_secs(1)).await;
        let after = self.versions(sync, namespaces, name).await;
        assert_eq!(before, after, "a settled controller writes nothing");
    }

    async fn events_about(&self, sync: &str) -> Vec<EventV1> {
        let events: Api<EventV1> = self.env.api();
        events
            .list(&ListParams::default())
            .await
            .expect("list events")
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(sync)
                    && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("ConfigMapSync")
            })
            .collect()
    }

    async fn wait_event(&self, sync: &str, reason: &str) -> EventV1 {
        let what = format!("a {reason} Event about ConfigMapSync {sync}");
        wait_for(&what, SETTLE_TIMEOUT, || async {
            let events = self.events_about(sync).await;
            match events.iter().find(|e| e.reason.as_deref() == Some(reason)) {
                Some(e) => Ok(Some(e.clone())),
                None => Err(format!(
                    "{:?}",
                    events.iter().map(|e| &e.reason).collect::<Vec<_>>()
                )),
            }
        })
        .await
        .expect(&what)
    }

    /// Deletes the ConfigMapSyncs (while the controller runs, so finalizers complete), then the
    /// namespaces, then the environment.
    async fn finish(self, controller: Running) {
        let syncs = self.syncs();
        let _ = syncs
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await;
        wait_for(
            "the test's ConfigMapSyncs to be gone",
            SETTLE_TIMEOUT,
            || async {
                let left = syncs
                    .list(&ListParams::default())
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(left.items.is_empty().then_some(()))
            },
        )
        .await
        .expect("ConfigMapSyncs deleted");
        controller.stop().await;
        let api: Api<Namespace> = Api::all(self.env.client());
        for ns in &self.namespaces {
            let _ = api.delete(ns, &DeleteParams::background()).await;
        }
        self.env.cleanup().await;
    }
}

/// Creates the CRD (once) and waits until it is served.
async fn install_crd(env: &TestEnv) {
    vigil_testenv::install_crd(&env.client(), &ConfigMapSync::crd())
        .await
        .expect("ConfigMapSync CRD served");
}

fn as_map(data: &[(&str, &str)]) -> BTreeMap<String, String> {
    data.iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn show(status: &ConfigMapSyncStatus) -> String {
    let destinations: Vec<String> = status
        .destinations
        .iter()
        .map(|d| format!("{}={:?}", d.namespace, d.state))
        .collect();
    let conditions: Vec<String> = status
        .conditions
        .iter()
        .map(|c| format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message))
        .collect();
    format!("destinations {destinations:?}, conditions {conditions:?}")
}

fn condition(status: &ConfigMapSyncStatus, type_: &str) -> Option<(String, String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

fn is(status: &ConfigMapSyncStatus, type_: &str, value: &str, reason: &str) -> bool {
    condition(status, type_).is_some_and(|(s, r, _)| s == value && r == reason)
}

fn state_of(status: &ConfigMapSyncStatus, ns: &str) -> Option<DestinationState> {
    status
        .destinations
        .iter()
        .find(|d| d.namespace == ns)
        .map(|d| d.state)
}

fn all_synced(status: &ConfigMapSyncStatus, count: usize) -> bool {
    status.destinations.len() == count
        && status
            .destinations
            .iter()
            .all(|d| d.state == DestinationState::Synced)
        && is(status, "Ready", "True", "AllSynced")
}

/// Every destination synced at a source hash other than `old` (the content before a change).
fn all_synced_after(status: &ConfigMapSyncStatus, count: usize, old: Option<&str>) -> bool {
    all_synced(status, count)
        && status.source_hash.is_some()
        && status.source_hash.as_deref() != old
        && status
            .destinations
            .iter()
            .all(|d| d.content_hash == status.source_hash)
}

fn label<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn annotation<'a>(cm: &'a ConfigMap, key: &str) -> Option<&'a str> {
    cm.metadata
        .annotations
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

/// The tutorial's example (with its Go types' JSON names), trusted: the copy carries the
/// source's data, binaryData and the marks; the status has lastSyncTime and one Synced entry.
#[tokio::test]
async fn the_tutorials_example_is_synced_with_trust_all() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm_with(
        &src,
        "app-config",
        json!({"data": {"mode": "blue"}, "binaryData": {"blob": "AAEC"}}),
    )
    .await;
    let running = w.controller(true);
    w.create_sync(
        "configmapsync-sample",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "app-config"}),
    )
    .await;
    let status = w
        .wait_status("configmapsync-sample", "synced", |s| all_synced(s, 1))
        .await;
    assert!(status.last_sync_time.is_some(), "lastSyncTime");
    assert_eq!(status.observed_generation, Some(1));
    assert_eq!((status.synced, status.destination_count), (1, 1));
    let copy = w.wait_data(&dst, "app-config", &[("mode", "blue")]).await;
    assert_eq!(
        copy.binary_data.as_ref().and_then(|b| b.get("blob")),
        Some(&ByteString(vec![0, 1, 2]))
    );
    assert_eq!(label(&copy, "app.kubernetes.io/managed-by"), Some("vigil"));
    assert_eq!(
        annotation(&copy, OWNER_ANNOTATION),
        Some(format!("{}/configmapsync-sample", w.home()).as_str())
    );
    let hash = annotation(&copy, CONTENT_HASH_ANNOTATION).expect("hash annotation");
    assert_eq!(status.destinations[0].content_hash.as_deref(), Some(hash));
    assert_eq!(status.source_hash.as_deref(), Some(hash));
    w.wait_event("configmapsync-sample", "CopiesWritten").await;
    w.assert_no_writes("configmapsync-sample", &[dst], "app-config")
        .await;
    // The destination gauge (refreshed every 2 s from the statuses) and the write counter.
    let metrics = running.metrics.clone();
    let text = wait_for("vigil_configmapsync_destinations", SETTLE_TIMEOUT, || {
        let text = metrics.encode();
        async move {
            if text.contains("vigil_configmapsync_destinations{state=\"Synced\"} 1") {
                Ok(Some(text))
            } else {
                Err(text)
            }
        }
    })
    .await
    .expect("destination gauge");
    assert!(
        text.contains("vigil_configmapsync_destinations{state=\"Conflict\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("vigil_configmapsync_copy_writes_total{verb=\"create\"} 1"),
        "{text}"
    );
    w.finish(running).await;
}

/// Without `--configmapsync-trust-all` the same example is Degraded with a message naming both
/// missing consents (and a Warning Event); nothing is copied. Giving the consents syncs it.
#[tokio::test]
async fn without_trust_the_example_is_degraded_naming_the_missing_consent() {
    let mut w = World::start().await;
    let home = w.home();
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src, "app-config", &[("mode", "blue")]).await;
    let running = w.controller(false);
    w.create_sync(
        "sample",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "app-config"}),
    )
    .await;
    let status = w
        .wait_status("sample", "Degraded ConsentMissing", |s| {
            is(s, "Degraded", "True", "ConsentMissing")
        })
        .await;
    let (_, _, message) = condition(&status, "Degraded").expect("Degraded");
    assert_eq!(
        message,
        format!(
            "source ConfigMap {src}/app-config does not exist or does not consent to be read by ConfigMapSyncs in namespace {home} (annotation configmapsync.apps.bixbite.io/shareable-with: \"{home}\" missing); namespace {dst} does not consent to copies from ConfigMapSyncs in namespace {home} (label accept-from.configmapsync.apps.bixbite.io/{home}=true missing)"
        )
    );
    assert_eq!(
        state_of(&status, &dst),
        Some(DestinationState::NotPermitted)
    );
    let event = w.wait_event("sample", "ConsentMissing").await;
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert!(
        w.get_cm(&dst, "app-config").await.is_none(),
        "nothing copied"
    );

    // The source consents: only the destination's consent is missing now.
    w.put_cm_with(
        &src,
        "app-config",
        json!({"metadata": {"annotations": {SHAREABLE_WITH_ANNOTATION: home}}, "data": {"mode": "blue"}}),
    )
    .await;
    let status = w
        .wait_status("sample", "only the destination's consent missing", |s| {
            condition(s, "Degraded").is_some_and(|(_, _, m)| m.starts_with("namespace "))
        })
        .await;
    assert!(
        condition(&status, "Degraded").is_some_and(|(_, _, m)| m.contains(&format!(
            "accept-from.configmapsync.apps.bixbite.io/{home}=true"
        )))
    );
    // The destination consents: synced.
    w.label_ns(
        &dst,
        json!({ format!("accept-from.configmapsync.apps.bixbite.io/{home}"): "true" }),
    )
    .await;
    w.wait_status("sample", "synced", |s| {
        all_synced(s, 1) && is(s, "Degraded", "False", "AsExpected")
    })
    .await;
    w.wait_data(&dst, "app-config", &[("mode", "blue")]).await;
    w.finish(running).await;
}

/// Source updated → copies updated; a copy edited or deleted by someone → restored.
#[tokio::test]
async fn source_changes_propagate_and_tampered_copies_are_restored() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let a = w.create_ns("a", &[]).await;
    let b = w.create_ns("b", &[]).await;
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": a, "destinationNamespaces": [b], "configMapName": "cfg"}),
    )
    .await;
    w.wait_status("s", "synced", |s| all_synced(s, 2)).await;
    w.put_cm(&src, "cfg", &[("v", "2"), ("extra", "x")]).await;
    w.wait_data(&a, "cfg", &[("v", "2"), ("extra", "x")]).await;
    w.wait_data(&b, "cfg", &[("v", "2"), ("extra", "x")]).await;
    // A key removed from the source goes from the copies too.
    w.put_cm(&src, "cfg", &[("v", "3")]).await;
    w.wait_data(&a, "cfg", &[("v", "3")]).await;

    // Edited copy: restored (the marks stay, so it is still Vigil's).
    let mut edited = w.get_cm(&a, "cfg").await.expect("copy");
    edited.data = Some(as_map(&[("v", "tampered")]));
    w.cms(&a)
        .replace("cfg", &PostParams::default(), &edited)
        .await
        .expect("edit copy");
    w.wait_data(&a, "cfg", &[("v", "3")]).await;
    // Deleted copy: re-created.
    w.cms(&b)
        .delete("cfg", &DeleteParams::default())
        .await
        .expect("delete copy");
    w.wait_data(&b, "cfg", &[("v", "3")]).await;
    w.wait_status("s", "synced", |s| all_synced(s, 2)).await;
    w.assert_no_writes("s", &[a, b], "cfg").await;
    w.finish(running).await;
}

/// A namespace selector: matching namespaces get copies, including namespaces created later;
/// a namespace relabelled out of the selector loses its copy.
#[tokio::test]
async fn the_namespace_selector_follows_namespaces_created_later_and_relabelled() {
    let mut w = World::start().await;
    let home = w.home();
    let src = w.create_ns("src", &[]).await;
    let team = format!("team-{home}");
    let first = w.create_ns("first", &[("team", &team)]).await;
    w.create_ns("other", &[("team", "nobody")]).await;
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    w.create_sync(
        "s",
        json!({
            "sourceNamespace": src, "destinationNamespace": home, "configMapName": "cfg",
            "namespaceSelector": {"matchLabels": {"team": team}},
        }),
    )
    .await;
    w.wait_status("s", "home and first synced", |s| all_synced(s, 2))
        .await;
    w.wait_data(&first, "cfg", &[("v", "1")]).await;
    assert!(w.get_cm(&w.ns("other"), "cfg").await.is_none());

    let later = w.create_ns("later", &[("team", &team)]).await;
    w.wait_data(&later, "cfg", &[("v", "1")]).await;
    w.wait_status("s", "three synced", |s| all_synced(s, 3))
        .await;

    w.label_ns(&first, json!({"team": "gone"})).await;
    w.wait_gone(&first, "cfg").await;
    let status = w
        .wait_status("s", "first dropped", |s| all_synced(s, 2))
        .await;
    assert_eq!(state_of(&status, &first), None);
    w.wait_event("s", "CopiesDeleted").await;
    w.finish(running).await;
}

/// Source deleted: `SourceNotFound`, copies kept (the default); with `sourceDeletedPolicy:
/// Delete` they go, and come back with the source.
#[tokio::test]
async fn a_deleted_source_keeps_or_deletes_copies_per_policy() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "cfg"}),
    )
    .await;
    w.wait_status("s", "synced", |s| all_synced(s, 1)).await;
    w.cms(&src)
        .delete("cfg", &DeleteParams::default())
        .await
        .expect("delete source");
    let status = w
        .wait_status("s", "SourceNotFound", |s| {
            is(s, "Degraded", "True", "SourceNotFound") && is(s, "Ready", "False", "SourceNotFound")
        })
        .await;
    assert_eq!(state_of(&status, &dst), Some(DestinationState::Stale));
    w.wait_event("s", "SourceNotFound").await;
    assert!(w.get_cm(&dst, "cfg").await.is_some(), "kept by default");

    w.patch_spec("s", json!({"sourceDeletedPolicy": "Delete"}))
        .await;
    w.wait_gone(&dst, "cfg").await;
    w.put_cm(&src, "cfg", &[("v", "2")]).await;
    w.wait_data(&dst, "cfg", &[("v", "2")]).await;
    w.wait_status("s", "synced again", |s| all_synced(s, 1))
        .await;
    w.finish(running).await;
}

/// Deleting a ConfigMapSync deletes its copies (the finalizer), unless `deletionPolicy: Orphan`.
#[tokio::test]
async fn deleting_the_sync_deletes_its_copies_unless_orphaned() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src, "deleted", &[("v", "1")]).await;
    w.put_cm(&src, "orphaned", &[("v", "1")]).await;
    let running = w.controller(true);
    w.create_sync(
        "deletes",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "deleted"}),
    )
    .await;
    w.create_sync(
        "orphans",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "orphaned", "deletionPolicy": "Orphan"}),
    )
    .await;
    w.wait_status("deletes", "synced", |s| all_synced(s, 1))
        .await;
    w.wait_status("orphans", "synced", |s| all_synced(s, 1))
        .await;
    let sync = w.syncs().get("deletes").await.expect("get");
    assert!(
        sync.metadata
            .finalizers
            .unwrap_or_default()
            .contains(&"configmapsync.apps.bixbite.io/finalizer".to_owned())
    );
    for name in ["deletes", "orphans"] {
        w.syncs()
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete sync");
    }
    w.wait_gone(&dst, "deleted").await;
    wait_for("both ConfigMapSyncs gone", SETTLE_TIMEOUT, || async {
        let left = w
            .syncs()
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(left.items.is_empty().then_some(()))
    })
    .await
    .expect("gone");
    assert_eq!(
        w.get_cm(&dst, "orphaned")
            .await
            .and_then(|c| c.data)
            .unwrap_or_default(),
        as_map(&[("v", "1")]),
        "the orphan stays"
    );
    assert!(
        w.get_cm(&src, "deleted").await.is_some(),
        "the source stays"
    );
    w.finish(running).await;
}

/// A ConfigMap Vigil did not create is never overwritten: `Conflict` until adoption is allowed.
#[tokio::test]
async fn an_unmanaged_configmap_is_a_conflict_until_adoption_is_allowed() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src, "cfg", &[("v", "source")]).await;
    w.put_cm(&dst, "cfg", &[("v", "theirs")]).await;
    let running = w.controller(true);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "cfg"}),
    )
    .await;
    let status = w
        .wait_status("s", "Conflict", |s| is(s, "Degraded", "True", "Conflict"))
        .await;
    assert_eq!(state_of(&status, &dst), Some(DestinationState::Conflict));
    w.wait_event("s", "Conflict").await;
    w.assert_no_writes("s", std::slice::from_ref(&dst), "cfg")
        .await;
    assert_eq!(
        w.get_cm(&dst, "cfg").await.and_then(|c| c.data),
        Some(as_map(&[("v", "theirs")])),
        "not overwritten"
    );
    w.patch_spec("s", json!({"adoptExisting": true})).await;
    let copy = w.wait_data(&dst, "cfg", &[("v", "source")]).await;
    assert_eq!(label(&copy, "app.kubernetes.io/managed-by"), Some("vigil"));
    w.wait_status("s", "synced", |s| all_synced(s, 1)).await;
    w.finish(running).await;
}

/// Two ConfigMapSyncs writing the same destination: the first one's copy stays, the second
/// reports Conflict (even with adoption allowed), and nothing flaps.
#[tokio::test]
async fn two_syncs_on_one_destination_the_second_reports_conflict_and_nothing_flaps() {
    let mut w = World::start().await;
    let src1 = w.create_ns("src1", &[]).await;
    let src2 = w.create_ns("src2", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src1, "cfg", &[("from", "one")]).await;
    w.put_cm(&src2, "cfg", &[("from", "two")]).await;
    let running = w.controller(true);
    w.create_sync(
        "first",
        json!({"sourceNamespace": src1, "destinationNamespace": dst, "configMapName": "cfg"}),
    )
    .await;
    w.wait_status("first", "synced", |s| all_synced(s, 1)).await;
    w.create_sync(
        "second",
        json!({"sourceNamespace": src2, "destinationNamespace": dst, "configMapName": "cfg", "adoptExisting": true}),
    )
    .await;
    let status = w
        .wait_status("second", "Conflict", |s| {
            is(s, "Degraded", "True", "Conflict")
        })
        .await;
    let (_, _, message) = condition(&status, "Degraded").expect("Degraded");
    assert!(
        message.contains(&format!("ConfigMapSync {}/first", w.home())),
        "{message}"
    );
    // Nothing flaps: the copy, both ConfigMapSyncs and their Events stay as they are.
    let mut before = w.versions("first", std::slice::from_ref(&dst), "cfg").await;
    before.extend(w.versions("second", &[], "cfg").await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let mut after = w.versions("first", std::slice::from_ref(&dst), "cfg").await;
    after.extend(w.versions("second", &[], "cfg").await);
    assert_eq!(before, after, "nothing flaps");
    assert_eq!(
        w.get_cm(&dst, "cfg").await.and_then(|c| c.data),
        Some(as_map(&[("from", "one")]))
    );
    w.finish(running).await;
}

/// An immutable source: copies are immutable too, and replaced (delete + create) on change.
#[tokio::test]
async fn an_immutable_source_is_replaced_when_it_changes() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm_with(&src, "cfg", json!({"data": {"v": "1"}, "immutable": true}))
        .await;
    let running = w.controller(true);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "cfg"}),
    )
    .await;
    let first = w.wait_data(&dst, "cfg", &[("v", "1")]).await;
    assert_eq!(first.immutable, Some(true));
    // An immutable source is itself replaced to change.
    w.cms(&src)
        .delete("cfg", &DeleteParams::default())
        .await
        .expect("delete source");
    w.put_cm_with(&src, "cfg", json!({"data": {"v": "2"}, "immutable": true}))
        .await;
    let second = w.wait_data(&dst, "cfg", &[("v", "2")]).await;
    assert_eq!(second.immutable, Some(true));
    assert_ne!(first.metadata.uid, second.metadata.uid, "re-created");
    w.wait_status("s", "synced", |s| all_synced(s, 1)).await;
    w.finish(running).await;
}

/// One source, 50 destination namespaces: all get the copy, and an update reaches all of them.
#[tokio::test]
async fn fifty_destinations_from_one_source() {
    let mut w = World::start().await;
    let home = w.home();
    let src = w.create_ns("src", &[]).await;
    let fleet = format!("fleet-{home}");
    let mut destinations = Vec::new();
    for i in 0..50 {
        destinations.push(w.create_ns(&format!("d{i:02}"), &[("fleet", &fleet)]).await);
    }
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    w.create_sync(
        "fan",
        json!({
            "sourceNamespace": src, "destinationNamespace": destinations[0], "configMapName": "cfg",
            "namespaceSelector": {"matchLabels": {"fleet": fleet}},
        }),
    )
    .await;
    let old = w
        .wait_status_for("fan", "50 synced", FAN_OUT_TIMEOUT, |s| all_synced(s, 50))
        .await
        .source_hash;
    w.put_cm(&src, "cfg", &[("v", "2")]).await;
    let hash = w
        .wait_status_for("fan", "50 synced at v2", FAN_OUT_TIMEOUT, |s| {
            all_synced_after(s, 50, old.as_deref())
        })
        .await
        .source_hash;
    for ns in &destinations {
        let copy = w.wait_data(ns, "cfg", &[("v", "2")]).await;
        assert_eq!(annotation(&copy, CONTENT_HASH_ANNOTATION), hash.as_deref());
    }
    w.assert_no_writes("fan", &destinations, "cfg").await;
    w.finish(running).await;
}

/// The operator stopped in the middle of a fan-out to 50 namespaces and started again:
/// it converges, every destination has exactly its one copy, none is left unsynced.
#[tokio::test]
async fn an_operator_restarted_mid_fan_out_converges() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let mut destinations = Vec::new();
    for i in 0..50 {
        destinations.push(w.create_ns(&format!("d{i:02}"), &[]).await);
    }
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let first = w.controller(true);
    w.create_sync(
        "fan",
        json!({
            "sourceNamespace": src, "destinationNamespace": destinations[0],
            "destinationNamespaces": destinations[1..], "configMapName": "cfg",
        }),
    )
    .await;
    let old = w
        .wait_status_for("fan", "50 synced", FAN_OUT_TIMEOUT, |s| all_synced(s, 50))
        .await
        .source_hash;
    // Slow copy updates down (on the sandbox), change the source, and kill the operator as soon
    // as the first copy is updated: in the middle of the fan-out.
    if let Some(sandbox) = w.env.sandbox() {
        sandbox.inject(Fault::slow(
            "update",
            "configmaps",
            Duration::from_millis(100),
        ));
    }
    w.put_cm(&src, "cfg", &[("v", "2")]).await;
    let updated = wait_for("a first copy updated", FAN_OUT_TIMEOUT, || async {
        for ns in &destinations {
            let cm = w.cms(ns).get_opt("cfg").await.map_err(|e| e.to_string())?;
            if cm.and_then(|c| c.data) == Some(as_map(&[("v", "2")])) {
                return Ok(Some(ns.clone()));
            }
        }
        Ok(None)
    })
    .await
    .expect("fan-out started");
    first.kill().await;
    if let Some(sandbox) = w.env.sandbox() {
        sandbox.clear_faults();
    }
    eprintln!("killed after {updated} was updated");
    let second = w.controller(true);
    let status = w
        .wait_status_for("fan", "50 synced at v2", FAN_OUT_TIMEOUT, |s| {
            all_synced_after(s, 50, old.as_deref())
        })
        .await;
    assert_eq!(status.synced, 50);
    let owner = format!("{}/fan", w.home());
    for ns in &destinations {
        let copies = w
            .cms(ns)
            .list(&ListParams::default().labels("configmapsync.apps.bixbite.io/copy=true"))
            .await
            .expect("list copies");
        assert_eq!(copies.items.len(), 1, "exactly one copy in {ns}");
        let copy = &copies.items[0];
        assert_eq!(copy.data, Some(as_map(&[("v", "2")])), "{ns}");
        assert_eq!(annotation(copy, OWNER_ANNOTATION), Some(owner.as_str()));
    }
    w.assert_no_writes("fan", &destinations, "cfg").await;
    w.finish(second).await;
}

/// Failing API calls (creating copies, replacing them, the status write) are retried with
/// backoff: the copies still arrive, the failures are counted, and the world settles with no
/// further writes.
#[tokio::test]
async fn injected_api_failures_back_off_and_recover() {
    let mut w = World::start().await;
    vigil_testenv::require_sandbox!(w.env);
    let src = w.create_ns("src", &[]).await;
    let a = w.create_ns("a", &[]).await;
    let b = w.create_ns("b", &[]).await;
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    let sandbox = w.env.sandbox().expect("sandbox");
    sandbox.inject(Fault::fail("create", "configmaps", 500, 3));
    sandbox.inject(Fault::fail("patch", "configmapsyncs/status", 500, 2));
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": a, "destinationNamespaces": [b], "configMapName": "cfg"}),
    )
    .await;
    w.wait_status("s", "synced", |s| all_synced(s, 2)).await;
    w.wait_data(&a, "cfg", &[("v", "1")]).await;
    w.wait_data(&b, "cfg", &[("v", "1")]).await;
    let old = w
        .syncs()
        .get("s")
        .await
        .expect("get")
        .status
        .and_then(|s| s.source_hash);
    sandbox.inject(Fault::fail("update", "configmaps", 500, 3));
    // The source is patched: the injected fault fails updates (PUT), Vigil's way to write copies.
    w.cms(&src)
        .patch(
            "cfg",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"v": "2"}})),
        )
        .await
        .expect("patch source");
    w.wait_data(&a, "cfg", &[("v", "2")]).await;
    w.wait_data(&b, "cfg", &[("v", "2")]).await;
    w.wait_status("s", "synced at v2", |s| {
        all_synced_after(s, 2, old.as_deref())
    })
    .await;
    let metrics = running.metrics.encode();
    let errors = metrics
        .lines()
        .find(|l| {
            l.starts_with("controller_runtime_reconcile_errors_total")
                && l.contains("configmapsync")
        })
        .and_then(|l| l.split_whitespace().last())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0);
    assert!(errors >= 1.0, "failures were retried: {metrics}");
    w.assert_no_writes("s", &[a, b], "cfg").await;
    w.finish(running).await;
}

/// Bad input the schema cannot catch: a destination namespace that does not exist is reported
/// (`NamespaceNotFound`) and synced once it exists; the source's own namespace as a destination
/// is refused at the door.
#[tokio::test]
async fn missing_and_invalid_destinations_are_reported_not_crashed_on() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    let later = w.ns("later");
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let running = w.controller(true);
    // The source's own namespace as a destination is refused at the door with the rule's
    // message (the controller's InvalidDestination, for objects stored before the rule, is
    // decide.rs's unit test).
    let bad: ConfigMapSync = serde_json::from_value(json!({
        "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync", "metadata": {"name": "s"},
        "spec": {"sourceNamespace": src, "destinationNamespace": dst, "destinationNamespaces": [later, src], "configMapName": "cfg"},
    }))
    .expect("configmapsync");
    let refused = w
        .syncs()
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("the source as a destination is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(&format!(
            "spec: Invalid value: \"object\": {}",
            vigil_apis::configmap_sync::SOURCE_LISTED_MESSAGE
        )),
        "{}",
        status.message
    );
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "destinationNamespaces": [later], "configMapName": "cfg"}),
    )
    .await;
    let status = w
        .wait_status("s", "NamespaceNotFound", |s| {
            is(s, "Degraded", "True", "NamespaceNotFound")
        })
        .await;
    assert_eq!(
        state_of(&status, &later),
        Some(DestinationState::NamespaceNotFound)
    );
    assert_eq!(state_of(&status, &dst), Some(DestinationState::Synced));
    w.create_ns("later", &[]).await;
    w.wait_data(&later, "cfg", &[("v", "1")]).await;
    w.wait_status("s", "every destination synced", |s| {
        is(s, "Ready", "True", "AllSynced") && state_of(s, &later) == Some(DestinationState::Synced)
    })
    .await;
    assert_eq!(
        w.get_cm(&src, "cfg").await.and_then(|c| c.data),
        Some(as_map(&[("v", "1")])),
        "the source is untouched"
    );
    w.finish(running).await;
}

/// `kind: Secret`: refused (`SecretsNotEnabled`) while the operator does not copy Secrets; with
/// `--configmapsync-secrets` the Secret is copied (data and type) and follows its source.
#[tokio::test]
async fn secrets_are_copied_only_when_the_operator_enables_them() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    let secrets = |ns: &str| -> Api<Secret> { Api::namespaced(w.env.client(), ns) };
    let source: Secret = serde_json::from_value(json!({
        "metadata": {"name": "creds"},
        "type": "example.com/token",
        "data": {"token": "czNjcjN0"},
    }))
    .expect("secret");
    secrets(&src)
        .create(&PostParams::default(), &source)
        .await
        .expect("create secret");
    let off = w.controller(true);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "creds", "kind": "Secret"}),
    )
    .await;
    w.wait_status("s", "SecretsNotEnabled", |s| {
        is(s, "Degraded", "True", "SecretsNotEnabled")
    })
    .await;
    assert!(
        secrets(&dst).get_opt("creds").await.expect("get").is_none(),
        "nothing copied"
    );
    off.stop().await;

    let on = w.controller_with(Settings {
        trust_all: true,
        secrets: true,
    });
    w.wait_status("s", "synced", |s| all_synced(s, 1)).await;
    let copy = secrets(&dst)
        .get("creds")
        .await
        .expect("the Secret is copied");
    assert_eq!(copy.type_.as_deref(), Some("example.com/token"));
    assert_eq!(copy.data, source.data);
    assert_eq!(
        copy.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("app.kubernetes.io/managed-by"))
            .map(String::as_str),
        Some("vigil")
    );
    assert!(
        w.get_cm(&dst, "creds").await.is_none(),
        "no ConfigMap is made of it"
    );
    secrets(&src)
        .patch(
            "creds",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"token": "bmV3"}})),
        )
        .await
        .expect("update source");
    wait_for("the copy to follow the source", SETTLE_TIMEOUT, || async {
        let copy = secrets(&dst)
            .get("creds")
            .await
            .map_err(|e| e.to_string())?;
        let token = copy.data.and_then(|d| d.get("token").cloned());
        Ok((token == Some(ByteString(b"new".to_vec()))).then_some(()))
    })
    .await
    .expect("updated copy");
    w.finish(on).await;
}

/// The ClusterRole `vigil manifests` generates from the controller's declared permissions is
/// exactly what its code uses through a whole lifecycle (a copy created, updated from its
/// source, then deleted with the ConfigMapSync through the finalizer): every request is granted,
/// and every granted verb is used but one that only an Event repeating needs. Requests are
/// recorded on the client side (the sandbox does not enforce RBAC), so this holds on a real
/// cluster too.
#[tokio::test]
async fn the_controllers_requests_are_exactly_its_declared_permissions() {
    let mut w = World::start().await;
    let src = w.create_ns("src", &[]).await;
    let dst = w.create_ns("dst", &[]).await;
    w.put_cm(&src, "cfg", &[("v", "1")]).await;
    let (client, log) = w.env.recording_client().await.expect("recording client");
    let settings = Settings {
        trust_all: true,
        secrets: false,
    };
    let running = w.controller_with_client(settings, client);
    w.create_sync(
        "s",
        json!({"sourceNamespace": src, "destinationNamespace": dst, "configMapName": "cfg"}),
    )
    .await;
    w.wait_status("s", "synced", |s| all_synced(s, 1)).await;
    w.put_cm(&src, "cfg", &[("v", "2")]).await;
    w.wait_data(&dst, "cfg", &[("v", "2")]).await;
    w.syncs()
        .delete("s", &DeleteParams::default())
        .await
        .expect("delete sync");
    w.wait_gone(&dst, "cfg").await;

    let granted = permissions::granted(controller::PERMISSIONS)
        .map(|(group, resource, verb)| RbacAttributes::new(group, resource, verb));
    log.check_exactly(granted, &["patch events.k8s.io/events"])
        .expect("the ClusterRole is exactly what the code uses");
    w.finish(running).await;
}
