//! `vigil sandbox --data-dir D --kube-version X.Y` as the KubernetesCluster `local` provider runs
//! it: the process is killed (SIGKILL) or stopped (SIGTERM) and started again on D, possibly
//! reporting another version, and serves the same objects.

use crate::support;

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;
use support::{Proc, client};

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `vigil sandbox` on a free port with its state in `data_dir`; returns once it serves.
fn spawn(data_dir: &Path, kube_version: &str, kubeconfig: &Path) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--no-kubelet"])
        .arg("--data-dir")
        .arg(data_dir)
        .args(["--kube-version", kube_version])
        .arg("--kubeconfig-out")
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn vigil sandbox");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert!(line.contains("sandbox ready"), "{line:?}");
    Proc(child)
}

fn widgets() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("example.com", "v1", "Widget"),
        "widgets",
    )
}

fn configmap(name: &str) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name}, "data": {"k": name}})).expect("cm")
}

#[tokio::test]
async fn a_killed_sandbox_restarts_on_its_data_dir_with_another_version() {
    let dir = TempDir(
        std::env::temp_dir().join(format!("vigil-sandbox-data-dir-{}", std::process::id())),
    );
    let data = dir.0.join("data");
    let kubeconfig = dir.0.join("kubeconfig");
    std::fs::create_dir_all(&dir.0).expect("temp dir");

    let sandbox = spawn(&data, "1.28", &kubeconfig);
    let kube = client(&kubeconfig).await;
    let version = kube.apiserver_version().await.expect("version");
    assert_eq!(version.git_version, "v1.28.0");
    let ns: Namespace = Api::all(kube.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "kept"}})).expect("ns"),
        )
        .await
        .expect("namespace");
    let crd: CustomResourceDefinition = serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]
        }
    }))
    .expect("crd");
    Api::<CustomResourceDefinition>::all(kube.clone())
        .create(&PostParams::default(), &crd)
        .await
        .expect("crd");
    let mut widget = DynamicObject::new("w1", &widgets()).within("kept");
    widget.data = json!({"spec": {"size": 3}});
    let widget = Api::<DynamicObject>::namespaced_with(kube.clone(), "kept", &widgets())
        .create(&PostParams::default(), &widget)
        .await
        .expect("widget");
    let cm = Api::<ConfigMap>::namespaced(kube.clone(), "kept")
        .create(&PostParams::default(), &configmap("c1"))
        .await
        .expect("configmap");
    // Well past the flush interval, then SIGKILL (Proc's drop): no chance to save anything more.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(sandbox);

    let sandbox = spawn(&data, "1.29", &kubeconfig);
    let kube = client(&kubeconfig).await;
    let version = kube.apiserver_version().await.expect("version");
    assert_eq!(
        (version.git_version.as_str(), version.minor.as_str()),
        ("v1.29.0", "29")
    );
    let ns_after: Namespace = Api::all(kube.clone())
        .get("kept")
        .await
        .expect("namespace kept");
    assert_eq!(ns_after.metadata.uid, ns.metadata.uid);
    let widget_after = Api::<DynamicObject>::namespaced_with(kube.clone(), "kept", &widgets())
        .get("w1")
        .await
        .expect("widget kept and its CRD served");
    assert_eq!(widget_after.metadata.uid, widget.metadata.uid);
    assert_eq!(widget_after.data["spec"]["size"], 3);
    let cms = Api::<ConfigMap>::namespaced(kube.clone(), "kept");
    let cm_after = cms.get("c1").await.expect("configmap kept");
    assert_eq!(
        (&cm_after.metadata.uid, &cm_after.metadata.resource_version),
        (&cm.metadata.uid, &cm.metadata.resource_version)
    );

    // Two writes in quick succession, then SIGTERM at once: the second lands inside the flush
    // interval, so only the shutdown's final snapshot can keep it.
    cms.create(&PostParams::default(), &configmap("c2"))
        .await
        .expect("c2");
    let c3 = cms
        .create(&PostParams::default(), &configmap("c3"))
        .await
        .expect("c3");
    let mut sandbox = sandbox;
    let terminated = Command::new("kill")
        .args(["-TERM", &sandbox.0.id().to_string()])
        .status()
        .expect("kill");
    assert!(terminated.success());
    let status = sandbox.0.wait().expect("wait");
    assert!(status.success(), "exit on SIGTERM: {status}");

    let _sandbox = spawn(&data, "1.29", &kubeconfig);
    let kube = client(&kubeconfig).await;
    let c3_after = Api::<ConfigMap>::namespaced(kube, "kept")
        .get("c3")
        .await
        .expect("the last write before SIGTERM is kept");
    assert_eq!(c3_after.metadata.uid, c3.metadata.uid);
}
