//! The v1 graduation of KubernetesCluster and Topic as a platform team lives it (docs/upgrading.md),
//! on the sandbox or on the real cluster named by `VIGIL_TEST_KUBECONFIG`:
//!
//! 1. the CRDs release 0.1.0 installed (`tests/fixtures/chart-0.1.0/crds`: `v1alpha1` only,
//!    stored) and objects created under them, spec and status;
//! 2. this release's CRDs applied server-side: `v1` stored, `v1alpha1` served and deprecated;
//!    `storedVersions` is `[v1alpha1, v1]`, and the API server refuses to drop `v1alpha1` yet;
//! 3. this release's `vigil run` (the KubernetesCluster controller) settles the clusters (a
//!    finalizer and a status each: written at v1), then `vigil migrate-storage` runs beside it
//!    and rewrites what Vigil never wrote (the Topics: no KafkaTopic controller here);
//! 4. `storedVersions` is `[v1]`, every object reads the same in both versions with nothing lost
//!    (the Topics keep their exact metadata, spec and status), a second run has
//!    nothing to do, and Vigil's client saw no 409 Conflict;
//! 5. the article's `vigil.dev/v1alpha1` manifest and a `kafka.vigil.dev/v1alpha1` Topic still
//!    apply unchanged, answered with the deprecation warning.
//!
//! It prints how many objects the migration rewrote and how long it took. The CRDs are cluster
//! objects: on a real cluster the test deletes them first (and every object of theirs, releasing
//! finalizers left by earlier tests) and leaves this release's CRDs installed.

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use crate::support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::{Client, ResourceExt as _};
use serde_json::{Value, json};
use support::Proc;
use vigil_testenv::{TestEnv, install_crd, wait_for, wait_until_served};

/// Objects of each kind in each namespace (the default keeps the test quick; raise it to measure).
fn objects() -> usize {
    std::env::var("VIGIL_MIGRATION_OBJECTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40)
}

const WAIT: Duration = Duration::from_secs(120);

/// A kind under migration: its CRD name, group, plural and Kind.
struct Kind {
    crd: &'static str,
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
}

const CLUSTERS: Kind = Kind {
    crd: "kubernetesclusters.vigil.dev",
    group: "vigil.dev",
    plural: "kubernetesclusters",
    kind: "KubernetesCluster",
};
const TOPICS: Kind = Kind {
    crd: "topics.kafka.vigil.dev",
    group: "kafka.vigil.dev",
    plural: "topics",
    kind: "Topic",
};

impl Kind {
    fn resource(&self, version: &str) -> ApiResource {
        let gvk = GroupVersionKind::gvk(self.group, version, self.kind);
        ApiResource::from_gvk_with_plural(&gvk, self.plural)
    }

    fn api(&self, client: &Client, ns: &str, version: &str) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), ns, &self.resource(version))
    }

    /// The CRD as release 0.1.0 shipped it.
    fn old_crd(&self) -> CustomResourceDefinition {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/chart-0.1.0/crds")
            .join(format!("{}.yaml", self.crd));
        let text = std::fs::read_to_string(&path).unwrap();
        serde_saphyr::from_str(&text).unwrap()
    }

    /// The CRD as this release ships it.
    fn new_crd(&self) -> CustomResourceDefinition {
        if self.kind == "Topic" {
            vigil_apis::crds::topic()
        } else {
            vigil_apis::crds::kubernetes_cluster()
        }
    }

    fn spec(&self, i: usize) -> Value {
        if self.kind == "Topic" {
            json!({"partitions": 3 + i % 5, "replicationFactor": 3, "topicName": format!("orders-{i}"),
                "config": {"retention.ms": format!("{}", 1000 * (i + 1))},
                "cluster": {"bootstrapServers": ["kafka-0.kafka:9092"]}})
        } else {
            json!({"type": "iks", "env": "test", "kubeVersion": "1.28", "osVersion": "UBUNTU_20_64",
                "paused": true,
                "product": {"name": format!("product {i}"), "shortName": "experiment",
                    "uuid": {"value": "aaa692e5-e6ce-4f19-ad20-6491ca74067c"}},
                "addons": [{"name": "cluster-autoscaler", "version": "1.2.2"}]})
        }
    }

    fn status(&self, i: usize) -> Value {
        if self.kind == "Topic" {
            json!({"topicName": format!("orders-{i}"), "partitions": 3 + i % 5, "replicationFactor": 3})
        } else {
            json!({"apiServerURL": format!("https://cluster-{i}.example.com"),
                "masterVersion": "1.28.23", "clusterID": format!("id-{i}")})
        }
    }
}

async fn stored_versions(client: &Client, crd: &str) -> Vec<String> {
    let live = Api::<CustomResourceDefinition>::all(client.clone())
        .get(crd)
        .await
        .unwrap();
    live.status
        .and_then(|s| s.stored_versions)
        .unwrap_or_default()
}

/// Deletes the CRD (and so every object of it), releasing the finalizers of objects that an
/// earlier test's Vigil left behind, and waits until it is gone.
async fn remove_crd(client: &Client, kind: &Kind) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let Some(live) = crds.get_opt(kind.crd).await.unwrap() else {
        return;
    };
    if let Some(storage) = live.spec.versions.iter().find(|v| v.storage) {
        let all: Api<DynamicObject> = Api::all_with(client.clone(), &kind.resource(&storage.name));
        for obj in all.list(&ListParams::default()).await.unwrap() {
            let api = kind.api(client, &obj.namespace().unwrap(), &storage.name);
            let release = json!({"metadata": {"finalizers": null}});
            let _ = api
                .patch(
                    &obj.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(&release),
                )
                .await;
        }
    }
    let _ = crds.delete(kind.crd, &DeleteParams::default()).await;
    wait_for(&format!("CRD {} to go", kind.crd), WAIT, || async {
        Ok::<_, String>(
            crds.get_opt(kind.crd)
                .await
                .unwrap()
                .is_none()
                .then_some(()),
        )
    })
    .await
    .unwrap();
}

/// Applies this release's CRD server-side, as `kubectl apply --server-side -f crds/` does.
async fn apply_crd(
    client: &Client,
    crd: &CustomResourceDefinition,
    dry_run: bool,
) -> kube::Result<()> {
    let mut value = serde_json::to_value(crd).unwrap();
    value["apiVersion"] = json!("apiextensions.k8s.io/v1");
    value["kind"] = json!("CustomResourceDefinition");
    let mut params = PatchParams::apply("vigil-upgrade-test").force();
    params.dry_run = dry_run;
    Api::<CustomResourceDefinition>::all(client.clone())
        .patch(&crd.name_any(), &params, &Patch::Apply(&value))
        .await
        .map(|_| ())
}

/// Creates `count` objects of `kind` in `ns` at v1alpha1, each with its status; returns them as
/// read back (name → object).
async fn create_objects(
    client: &Client,
    kind: &Kind,
    ns: &str,
    count: usize,
) -> BTreeMap<String, Value> {
    let api = kind.api(client, ns, "v1alpha1");
    let mut created = BTreeMap::new();
    for i in 0..count {
        let name = format!("{}-{i:04}", kind.plural);
        let obj: DynamicObject = serde_json::from_value(json!({
            "apiVersion": format!("{}/v1alpha1", kind.group), "kind": kind.kind,
            "metadata": {"name": name, "labels": {"upgrade-test": "true"},
                "annotations": {"note": format!("object {i}")}},
            "spec": kind.spec(i),
        }))
        .unwrap();
        api.create(&PostParams::default(), &obj).await.unwrap();
        let status = json!({"status": kind.status(i)});
        let written = api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await
            .unwrap();
        created.insert(name, serde_json::to_value(written).unwrap());
    }
    created
}

/// What must survive the migration: everything but `apiVersion`, `resourceVersion` and
/// `managedFields` (whose entries carry the version they were written at).
fn content(obj: &Value) -> Value {
    let mut obj = obj.clone();
    if let Some(map) = obj.as_object_mut() {
        map.remove("apiVersion");
    }
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        meta.remove("managedFields");
    }
    obj
}

/// Every object of `kind` in `ns`, as each version shows it.
async fn read_both(client: &Client, kind: &Kind, ns: &str) -> [BTreeMap<String, Value>; 2] {
    let mut out = [BTreeMap::new(), BTreeMap::new()];
    for (slot, version) in out.iter_mut().zip(["v1", "v1alpha1"]) {
        for obj in kind
            .api(client, ns, version)
            .list(&ListParams::default())
            .await
            .unwrap()
        {
            let value = serde_json::to_value(&obj).unwrap();
            assert_eq!(value["apiVersion"], format!("{}/{version}", kind.group));
            slot.insert(obj.name_any(), value);
        }
    }
    out
}

/// `vigil run` with the KubernetesCluster controller on namespace `ns` only.
fn spawn_vigil(kubeconfig: &Path, ns: &str, dir: &Path) -> Proc {
    let log = std::fs::File::create(dir.join("vigil.log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("RUST_LOG", "info")
        .env("NO_COLOR", "1")
        .args([
            "run",
            "--controllers",
            "kubernetescluster",
            "--namespaces",
            ns,
        ])
        .args(["--metrics-addr", "127.0.0.1:0", "--leader-elect", "false"])
        .arg("--local-clusters-dir")
        .arg(dir.join("local-clusters"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

/// The metrics address `vigil run` logs at start.
async fn metrics_addr(log: &Path) -> std::net::SocketAddr {
    wait_for(
        "vigil run's metrics address",
        Duration::from_secs(30),
        || async {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            Ok::<_, String>(
                text.lines()
                    .filter(|l| l.contains("metrics and probes serving"))
                    .find_map(|l| {
                        l.split_whitespace()
                            .find_map(|w| w.strip_prefix("addr="))
                            .and_then(|a| a.parse().ok())
                    }),
            )
        },
    )
    .await
    .unwrap()
}

/// Vigil's `/metrics` text.
async fn scrape(addr: std::net::SocketAddr) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let mut text = String::new();
    stream.read_to_string(&mut text).await.unwrap();
    text
}

/// `vigil migrate-storage`: its output, and how long it took.
fn migrate(kubeconfig: &Path) -> (String, Duration) {
    let started = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["migrate-storage", "--kubeconfig"])
        .arg(kubeconfig)
        .output()
        .unwrap();
    let took = started.elapsed();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "vigil migrate-storage failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (stdout, took)
}

/// Server-side applies `manifest` (YAML, unchanged) at its own apiVersion; returns the `Warning`
/// headers of the answer.
async fn apply_manifest(
    client: &Client,
    kind: &Kind,
    ns: &str,
    name: &str,
    manifest: &str,
) -> Vec<String> {
    let uri = format!(
        "/apis/{}/v1alpha1/namespaces/{ns}/{}/{name}?fieldManager=kubectl&force=true",
        kind.group, kind.plural
    );
    let request = http::Request::patch(uri)
        .header("Content-Type", "application/apply-patch+yaml")
        .body(manifest.as_bytes().to_vec())
        .unwrap();
    let response = client.send(request.map(Into::into)).await.unwrap();
    let code = response.status();
    let warnings = response
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap_or_default().to_owned())
        .collect();
    assert!(code.is_success(), "applying {name}: {code}");
    warnings
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn objects_stored_as_v1alpha1_are_migrated_to_v1_with_nothing_lost() {
    let mut env = TestEnv::start().await.expect("test environment");
    let client = env.client();
    let kubeconfig: PathBuf = env.kubeconfig_path().unwrap().to_owned();
    let first = env.namespace().to_owned();
    let second = format!("{first}-second");
    let dir = std::env::temp_dir().join(format!("vigil-migration-{first}"));
    std::fs::create_dir_all(&dir).unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": second}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let n = objects();

    // 1. Release 0.1.0's CRDs, and objects under them.
    for kind in [&CLUSTERS, &TOPICS] {
        remove_crd(&client, kind).await;
        install_crd(&client, &kind.old_crd()).await.unwrap();
        assert_eq!(stored_versions(&client, kind.crd).await, ["v1alpha1"]);
    }
    let mut before = BTreeMap::new();
    for kind in [&CLUSTERS, &TOPICS] {
        for ns in [&first, &second] {
            before.insert(
                (kind.kind, ns.clone()),
                create_objects(&client, kind, ns, n).await,
            );
        }
    }

    // 2. This release's CRDs.
    for kind in [&CLUSTERS, &TOPICS] {
        apply_crd(&client, &kind.new_crd(), false).await.unwrap();
        wait_until_served(&client, &kind.new_crd()).await.unwrap();
        assert_eq!(stored_versions(&client, kind.crd).await, ["v1alpha1", "v1"]);
        let mut v1_only = kind.new_crd();
        v1_only.spec.versions.retain(|v| v.name == "v1");
        let refused = apply_crd(&client, &v1_only, true).await;
        assert!(
            matches!(&refused, Err(kube::Error::Api(s)) if s.code == 422 && s.message.contains("must appear in spec.versions")),
            "{}: v1alpha1 cannot leave the CRD while stored: {refused:?}",
            kind.crd
        );
    }

    // 3. Vigil settles its objects (a finalizer and its status on each), then the migration.
    let mut vigil = spawn_vigil(&kubeconfig, &first, &dir);
    let metrics = metrics_addr(&dir.join("vigil.log")).await;
    // The KubernetesCluster controller serves every namespace (`--namespaces` scopes the
    // CriticalService controller): it settles the clusters of both.
    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &CLUSTERS.resource("v1"));
    wait_for("Vigil to settle every KubernetesCluster", WAIT, || async {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let settled = list
            .items
            .iter()
            .filter(|c| !c.finalizers().is_empty() && c.data["status"]["phase"].is_string())
            .count();
        Ok::<_, String>((settled == 2 * n).then_some(()))
    })
    .await
    .unwrap();
    let (report, took) = migrate(&kubeconfig);
    println!(
        "vigil migrate-storage ({n} objects of each kind in each of 2 namespaces), {:.2} s:\n{report}",
        took.as_secs_f64()
    );
    let rewritten: usize = report
        .lines()
        .filter_map(|l| {
            l.split(" rewritten")
                .next()?
                .rsplit(' ')
                .next()?
                .parse::<usize>()
                .ok()
        })
        .sum();
    assert!(
        rewritten >= 2 * n,
        "the Topics, which Vigil never wrote (no KafkaTopic controller), were stored as v1alpha1: {report}"
    );

    // 4. Stored as v1 only, nothing lost, readable in both versions, and Vigil saw no conflict.
    for kind in [&CLUSTERS, &TOPICS] {
        assert_eq!(
            stored_versions(&client, kind.crd).await,
            ["v1"],
            "{}",
            kind.crd
        );
        for ns in [&first, &second] {
            let [v1, v1alpha1] = read_both(&client, kind, ns).await;
            let created = &before[&(kind.kind, ns.clone())];
            assert_eq!(v1.len(), n, "{} in {ns}", kind.plural);
            for (name, obj) in &v1 {
                assert_eq!(
                    content(obj),
                    content(&v1alpha1[name]),
                    "{name}: both versions agree"
                );
                let was = &created[name];
                if kind.kind == "KubernetesCluster" {
                    // Vigil wrote these (a finalizer, its status): the rest is as created.
                    assert_eq!(obj["spec"], was["spec"], "{name}: spec");
                    for field in ["uid", "labels", "annotations", "creationTimestamp"] {
                        assert_eq!(obj["metadata"][field], was["metadata"][field], "{name}");
                    }
                } else {
                    assert_eq!(
                        content(obj),
                        content(was),
                        "{name}: spec, status and metadata"
                    );
                }
            }
        }
    }
    let (again, _) = migrate(&kubeconfig);
    // The two migrated CRDs are done; the others are at one version or, on a fresh sandbox, not
    // installed at all (on a shared cluster, other tests installed them): either way no work.
    for crd in [CLUSTERS.crd, TOPICS.crd] {
        assert!(
            again.contains(&format!(
                "{crd}: storedVersions already [v1], nothing to migrate"
            )),
            "a second run has nothing to do: {again}"
        );
    }
    assert!(
        again.lines().all(|l| l.ends_with("nothing to migrate")
            || l.ends_with("not installed, skipped")
            || l.starts_with("migrated 0 objects")),
        "a second run has nothing to do: {again}"
    );
    let exposition = scrape(metrics).await;
    let conflicts: Vec<&str> = exposition
        .lines()
        .filter(|l| l.starts_with("rest_client_requests_total{") && l.contains("code=\"409\""))
        .collect();
    assert!(
        conflicts.is_empty(),
        "Vigil saw write conflicts: {conflicts:?}"
    );
    vigil.0.kill().ok();
    let _ = vigil.0.wait();

    // 5. Manifests written for v1alpha1 still apply unchanged, with the deprecation warning.
    let warnings = apply_manifest(
        &client,
        &CLUSTERS,
        &second,
        "my-custom-cluster-for-backup",
        vigil_apis::kubernetes_cluster::ARTICLE_MANIFEST,
    )
    .await;
    assert!(
        warnings.iter().any(|w| w.starts_with("299 - ")
            && w.contains("vigil.dev/v1alpha1 KubernetesCluster is deprecated")),
        "{warnings:?}"
    );
    let article = CLUSTERS
        .api(&client, &second, "v1")
        .get("my-custom-cluster-for-backup")
        .await
        .unwrap();
    assert_eq!(
        article.data["spec"]["product"]["uuid"]["value"],
        "aaa692e5-e6ce-4f19-ad20-6491ca74067c"
    );
    let topic = "apiVersion: kafka.vigil.dev/v1alpha1\nkind: Topic\nmetadata:\n  name: orders\nspec:\n  \
                 partitions: 6\n  config:\n    retention.ms: \"604800000\"\n  cluster:\n    \
                 bootstrapServers: [\"kafka-0.kafka:9092\"]\n";
    let warnings = apply_manifest(&client, &TOPICS, &second, "orders", topic).await;
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("kafka.vigil.dev/v1alpha1 Topic is deprecated")),
        "{warnings:?}"
    );

    let _ = namespaces.delete(&second, &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(&dir);
    env.cleanup().await;
}
