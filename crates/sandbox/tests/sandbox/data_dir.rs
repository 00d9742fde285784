//! `SandboxConfig::data_dir` and `kube_version`, through a real kube-rs client: a sandbox restarted
//! on its data directory (after a clean shutdown or a crash) serves the same objects with the same
//! identities, and `/version` reports what was configured.

use crate::common;
use common::TempDir;
use std::path::Path;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::core::ObjectMeta;
use serde_json::json;
use vigil_sandbox::{KubeVersion, Sandbox, SandboxConfig, SandboxError};

async fn start(dir: &Path) -> Sandbox {
    Sandbox::start(SandboxConfig {
        data_dir: Some(dir.to_owned()),
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

async fn client(sandbox: &Sandbox) -> kube::Client {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sandbox.kubeconfig()).expect("yaml");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}
                }}}
            }]
        }
    }))
    .expect("crd")
}

/// What must survive a restart: uid, resourceVersion, creationTimestamp, generation.
type Identity = (Option<String>, Option<String>, Option<String>, Option<i64>);

fn identity(meta: &ObjectMeta) -> Identity {
    (
        meta.uid.clone(),
        meta.resource_version.clone(),
        meta.creation_timestamp.as_ref().map(|t| format!("{t:?}")),
        meta.generation,
    )
}

/// Creates a namespace, a CRD, a Widget and a ConfigMap; returns their identities once the
/// in-process controllers have settled, and the highest resourceVersion handed out.
async fn populate(client: &kube::Client) -> ([Identity; 4], u64) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "persist"}})).expect("ns"),
        )
        .await
        .expect("namespace created");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &crd())
        .await
        .expect("crd created");
    let mut widget = DynamicObject::new("w1", &widgets()).within("persist");
    widget.data = json!({"spec": {"size": 3}});
    Api::<DynamicObject>::namespaced_with(client.clone(), "persist", &widgets())
        .create(&PostParams::default(), &widget)
        .await
        .expect("widget created");
    Api::<ConfigMap>::namespaced(client.clone(), "persist")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "c1"}, "data": {"k": "v"}}))
                .expect("cm"),
        )
        .await
        .expect("configmap created");
    // The namespace lifecycle and CRD status follow-ups land within milliseconds.
    tokio::time::sleep(Duration::from_millis(200)).await;
    // The list resourceVersion is the store's counter, past every write so far (the CRD's status
    // and the namespace's ServiceAccount included).
    let list = Api::<ConfigMap>::all(client.clone())
        .list(&Default::default())
        .await
        .expect("list");
    let latest = list
        .metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("list resourceVersion");
    (read_back(client).await, latest)
}

/// Reads the same four objects back; the CRD's resource must be served again.
async fn read_back(client: &kube::Client) -> [Identity; 4] {
    let ns: Namespace = Api::all(client.clone())
        .get("persist")
        .await
        .expect("namespace restored");
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get("widgets.example.com")
        .await
        .expect("crd restored");
    let widget = Api::<DynamicObject>::namespaced_with(client.clone(), "persist", &widgets())
        .get("w1")
        .await
        .expect("widget served and restored");
    assert_eq!(widget.data["spec"]["size"], 3);
    let cm: ConfigMap = Api::namespaced(client.clone(), "persist")
        .get("c1")
        .await
        .expect("configmap restored");
    assert_eq!(
        cm.data
            .as_ref()
            .and_then(|d| d.get("k"))
            .map(String::as_str),
        Some("v")
    );
    [
        identity(&ns.metadata),
        identity(&crd.metadata),
        identity(&widget.metadata),
        identity(&cm.metadata),
    ]
}

/// A write after the restart gets a resourceVersion above every one handed out before it.
async fn assert_counter_continues(client: &kube::Client, before: u64) {
    let cm: ConfigMap = Api::namespaced(client.clone(), "persist")
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "after-restart"}})).expect("cm"),
        )
        .await
        .expect("write after restart");
    let rv: u64 = cm
        .metadata
        .resource_version
        .as_deref()
        .and_then(|rv| rv.parse().ok())
        .expect("numeric resourceVersion");
    assert!(
        rv > before,
        "resourceVersion went backwards: {rv} after {before}"
    );
}

#[tokio::test]
async fn a_clean_restart_on_the_data_dir_serves_the_same_objects() {
    let dir = TempDir::new("clean");
    let sandbox = start(&dir.0).await;
    let (created, latest) = populate(&client(&sandbox).await).await;
    sandbox.shutdown().await;

    let sandbox = start(&dir.0).await;
    let client = client(&sandbox).await;
    assert_eq!(read_back(&client).await, created);
    assert_counter_continues(&client, latest).await;
    // A new custom resource still goes through the restored CRD's schema.
    let mut bad = DynamicObject::new("w2", &widgets()).within("persist");
    bad.data = json!({"spec": {"size": "big"}});
    let err = Api::<DynamicObject>::namespaced_with(client.clone(), "persist", &widgets())
        .create(&PostParams::default(), &bad)
        .await
        .expect_err("schema still enforced");
    assert!(
        matches!(&err, kube::Error::Api(s) if s.code == 422),
        "{err:?}"
    );
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_crash_loses_at_most_the_flush_interval() {
    let dir = TempDir::new("crash");
    let sandbox = start(&dir.0).await;
    let (created, latest) = populate(&client(&sandbox).await).await;
    tokio::time::sleep(vigil_sandbox::FLUSH_INTERVAL * 3).await;
    // What a SIGKILL leaves behind is what is on disk now, with the sandbox still running:
    // copy it elsewhere and start from the copy.
    let crashed = TempDir::new("crash-copy");
    std::fs::create_dir_all(&crashed.0).expect("mkdir");
    for entry in std::fs::read_dir(&dir.0).expect("read dir") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), crashed.0.join(entry.file_name())).expect("copy");
    }
    let restarted = start(&crashed.0).await;
    let client = client(&restarted).await;
    assert_eq!(read_back(&client).await, created);
    assert_counter_continues(&client, latest).await;
    restarted.shutdown().await;
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_dropped_sandbox_flushes_and_unlocks_its_data_dir() {
    let dir = TempDir::new("drop");
    let sandbox = start(&dir.0).await;
    let (created, _) = populate(&client(&sandbox).await).await;
    drop(sandbox);
    // The persister finishes on its own; until then the directory is (rightly) locked.
    let mut restarted = None;
    for _ in 0..100 {
        match Sandbox::start(SandboxConfig {
            data_dir: Some(dir.0.clone()),
            ..SandboxConfig::default()
        })
        .await
        {
            Ok(s) => {
                restarted = Some(s);
                break;
            }
            Err(SandboxError::DataDir(_)) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(e) => panic!("unexpected start error: {e}"),
        }
    }
    let restarted = restarted.expect("the data dir is released after a drop");
    assert_eq!(read_back(&client(&restarted).await).await, created);
    restarted.shutdown().await;
}

#[tokio::test]
async fn a_damaged_state_file_is_a_clear_start_error() {
    let dir = TempDir::new("damaged");
    std::fs::create_dir_all(&dir.0).expect("mkdir");
    std::fs::write(dir.0.join("state.json"), b"{\"format\":1,\"resou").expect("write");
    let err = Sandbox::start(SandboxConfig {
        data_dir: Some(dir.0.clone()),
        ..SandboxConfig::default()
    })
    .await
    .expect_err("damaged state refused");
    let message = err.to_string();
    assert!(
        message.contains("state.json") && message.contains("cannot read sandbox state"),
        "{message}"
    );
}

#[tokio::test]
async fn version_reports_the_configured_kubernetes_version() {
    let sandbox = Sandbox::start(SandboxConfig {
        kube_version: Some("1.28".parse::<KubeVersion>().expect("valid")),
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox");
    let info = client(&sandbox)
        .await
        .apiserver_version()
        .await
        .expect("version");
    assert_eq!(
        (
            info.git_version.as_str(),
            info.major.as_str(),
            info.minor.as_str()
        ),
        ("v1.28.0", "1", "28")
    );
    sandbox.shutdown().await;

    let sandbox = Sandbox::start(SandboxConfig::default())
        .await
        .expect("sandbox");
    let info = client(&sandbox)
        .await
        .apiserver_version()
        .await
        .expect("version");
    assert_eq!(info.git_version, "v1.33.0-vigil-sandbox");
    sandbox.shutdown().await;
}
