//! `vigil status` as an operator runs it, on the article's scenario: a `LoadBalancer` Service whose
//! `status.loadBalancer.ingress` a cloud controller set through `/status` is backed up, deleted,
//! and restored with `--status-include-resources Service` — re-created, then its status written
//! back — while other objects stay untouched; `--dry-run` changes nothing; a corrupt record is
//! reported and skipped, never applied. Once with a directory vault, once with an encrypted S3
//! vault on a real S3-compatible server (`.ci/s3-server`; skipped with a note without one).

#![allow(
    clippy::unwrap_used,
    reason = "test code: a failed unwrap is a failed test"
)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;
use vigil_testenv::{TestEnv, wait_for};
use vigil_vault::{Backend as _, ObjectKey};

const LB_IP: &str = "172.18.0.7";
const RESTORED_FROM: &str = "vigil.dev/status-restored-from";

struct Output {
    ok: bool,
    stdout: String,
    stderr: String,
}

async fn vigil(kubeconfig: &Path, args: &[&str]) -> Output {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(args)
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .expect("run vigil");
    Output {
        ok: out.status.success(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

fn must(out: Output, what: &str) -> String {
    assert!(
        out.ok,
        "{what} failed\nstdout:\n{}\nstderr:\n{}",
        out.stdout, out.stderr
    );
    out.stdout
}

/// The article's argocd-server Service (without the cloud controller's finalizer, which nothing
/// would remove on a cluster without a cloud controller).
fn argocd_server() -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "argocd-server", "labels": {
            "app.kubernetes.io/component": "server",
            "app.kubernetes.io/name": "argocd-server",
            "app.kubernetes.io/part-of": "argocd"}},
        "spec": {"type": "LoadBalancer",
            "selector": {"app.kubernetes.io/name": "argocd-server"},
            "ports": [{"name": "http", "port": 80, "protocol": "TCP", "targetPort": 8080},
                      {"name": "https", "port": 443, "protocol": "TCP", "targetPort": 8080}]}
    }))
    .expect("a Service")
}

fn ingress_ip(service: &Service) -> Option<String> {
    service
        .status
        .as_ref()?
        .load_balancer
        .as_ref()?
        .ingress
        .as_ref()?
        .first()?
        .ip
        .clone()
}

/// Waits until `name` is gone from `api`.
async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    wait_for(&format!("{name} deleted"), timeout, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(_)) => Ok(None),
            Err(e) => Err(e.to_string()),
        }
    })
    .await
    .expect("deletion");
}

/// Stores garbage as the newest version of argocd-server's records.
type Corrupter = Box<dyn Fn(ObjectKey) -> futures::future::BoxFuture<'static, ()>>;

/// The whole scenario against the vault at `location`.
async fn article_scenario(
    mut env: TestEnv,
    location: &str,
    key_file: Option<&Path>,
    corrupt: Corrupter,
) {
    let ns = env.namespace().to_owned();
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_path_buf();
    let services: Api<Service> = env.api();
    let config_maps: Api<ConfigMap> = env.api();
    let pp = PostParams::default();

    // A cloud controller gave argocd-server its load balancer, through /status.
    services
        .create(&pp, &argocd_server())
        .await
        .expect("create");
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": LB_IP, "ipMode": "Proxy"}]}}});
    services
        .patch_status("argocd-server", &PatchParams::default(), &Patch::Merge(&lb))
        .await
        .expect("status through /status");
    // Bystanders: another Service, and a ConfigMap the backup does not cover.
    let other: Service = serde_json::from_value(json!({
        "metadata": {"name": "other"}, "spec": {"ports": [{"port": 8080}]}}))
    .unwrap();
    services.create(&pp, &other).await.expect("create other");
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "untouched"}, "data": {"a": "1"}}))
            .unwrap();
    config_maps
        .create(&pp, &cm)
        .await
        .expect("create configmap");

    let mut key_args: Vec<String> = Vec::new();
    if let Some(file) = key_file {
        key_args = vec!["--encryption-key-file".into(), file.display().to_string()];
    }
    let with_key = |args: &[&str]| -> Vec<String> {
        args.iter()
            .map(|a| a.to_string())
            .chain(key_args.iter().cloned())
            .collect()
    };
    let run = |args: Vec<String>| {
        let kubeconfig = kubeconfig.clone();
        async move {
            let refs: Vec<&str> = args.iter().map(String::as_str).collect();
            vigil(&kubeconfig, &refs).await
        }
    };

    // velero backup create argocd --include-namespaces argocd
    let out = must(
        run(with_key(&[
            "status",
            "backup",
            "--include-namespaces",
            &ns,
            "--include-resources",
            "services",
            "--to",
            location,
        ]))
        .await,
        "backup",
    );
    assert!(out.contains("backed up 2 objects"), "{out}");
    let shown = must(
        run(with_key(&["status", "show", "--vault", location])).await,
        "show",
    );
    assert!(shown.contains(&format!("{ns}/argocd-server")), "{shown}");
    assert!(shown.contains(&format!("{ns}/other")), "{shown}");
    let history = must(
        run(with_key(&[
            "status",
            "history",
            "Service/argocd-server",
            "-n",
            &ns,
            "--vault",
            location,
        ]))
        .await,
        "history",
    );
    assert!(history.contains(LB_IP), "{history}");
    if key_file.is_some() {
        let out = run(vec![
            "status".into(),
            "show".into(),
            "--vault".into(),
            location.into(),
        ])
        .await;
        assert!(
            out.ok && out.stdout.contains("no readable record"),
            "an encrypted vault is unreadable without its key: {}{}",
            out.stdout,
            out.stderr
        );
        let out = run(vec![
            "status".into(),
            "restore".into(),
            "--from".into(),
            location.into(),
            "--status-include-resources".into(),
            "Service".into(),
            "--include-namespaces".into(),
            ns.clone(),
        ])
        .await;
        assert!(
            !out.ok,
            "restoring an encrypted vault without the key fails"
        );
        assert!(
            out.stdout.contains("is encrypted") || out.stderr.contains("is encrypted"),
            "and says why: {}{}",
            out.stdout,
            out.stderr
        );
    }
    let other_before = services.get("other").await.unwrap();
    let cm_before = config_maps.get("untouched").await.unwrap();

    // kubectl -n argocd delete svc argocd-server
    services
        .delete("argocd-server", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&services, "argocd-server", Duration::from_secs(30)).await;

    // --dry-run says what it would do and changes nothing.
    let restore_args = with_key(&[
        "status",
        "restore",
        "--from",
        location,
        "--status-include-resources",
        "Service",
        "--include-namespaces",
        &ns,
    ]);
    let mut dry = restore_args.clone();
    dry.push("--dry-run".into());
    let out = must(run(dry).await, "dry run");
    assert!(out.contains("would re-create and restore status"), "{out}");
    assert!(
        services.get_opt("argocd-server").await.unwrap().is_none(),
        "dry run created nothing"
    );

    // velero restore create --from-backup argocd --status-include-resources Service
    let out = must(run(restore_args.clone()).await, "restore");
    assert!(out.contains("re-created, status restored"), "{out}");
    let restored = services.get("argocd-server").await.expect("re-created");
    assert_eq!(
        ingress_ip(&restored).as_deref(),
        Some(LB_IP),
        "status is back"
    );
    let annotations = restored.metadata.annotations.clone().unwrap_or_default();
    assert!(annotations.contains_key(RESTORED_FROM), "{annotations:?}");
    assert_eq!(
        annotations
            .get("vigil.dev/restore-status")
            .map(String::as_str),
        Some("done")
    );
    assert_eq!(
        restored.spec.as_ref().and_then(|s| s.type_.as_deref()),
        Some("LoadBalancer")
    );

    // Others untouched: same object, same version.
    let other_after = services.get("other").await.unwrap();
    assert_eq!(other_after.metadata.uid, other_before.metadata.uid);
    assert_eq!(
        other_after.metadata.resource_version,
        other_before.metadata.resource_version
    );
    let cm_after = config_maps.get("untouched").await.unwrap();
    assert_eq!(
        cm_after.metadata.resource_version,
        cm_before.metadata.resource_version
    );

    // Again: nothing to do — the status is there now and is never overwritten.
    let out = must(run(restore_args.clone()).await, "second restore");
    assert!(out.contains("status already"), "{out}");

    // A corrupt newest record is reported and skipped; the good one before it is used.
    corrupt(ObjectKey::new("", "Service", Some(&ns), "argocd-server")).await;
    services
        .delete("argocd-server", &DeleteParams::default())
        .await
        .expect("delete again");
    wait_gone(&services, "argocd-server", Duration::from_secs(30)).await;
    let out = must(run(restore_args).await, "restore past a corrupt record");
    assert!(out.contains("corrupt record skipped"), "{out}");
    let restored = services.get("argocd-server").await.expect("re-created");
    assert_eq!(ingress_ip(&restored).as_deref(), Some(LB_IP));

    env.cleanup().await;
}

fn temp_dir(label: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    std::env::temp_dir().join(format!(
        "vigil-status-{label}-{}-{nanos}",
        std::process::id()
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_scenario_with_a_directory_vault() {
    let env = TestEnv::start().await.expect("test env");
    let dir = temp_dir("dir");
    let root = dir.clone();
    let corrupt: Corrupter = Box::new(move |key| {
        let root = root.clone();
        Box::pin(async move {
            let backend = vigil_vault::DirBackend::open(root).await.unwrap();
            backend
                .write(&key, 2, b"{\"apiVersion\":\"v1\",\"kind\":\"Serv".to_vec())
                .await
                .unwrap();
        })
    });
    article_scenario(env, dir.to_str().unwrap(), None, corrupt).await;
    let _ = std::fs::remove_dir_all(&dir);

    // A mistyped vault is an error, not an empty vault (and is not created).
    let missing = dir.join("typo");
    let out = vigil(
        Path::new("/nonexistent/kubeconfig"),
        &["status", "show", "--vault", missing.to_str().unwrap()],
    )
    .await;
    assert!(
        !out.ok && out.stderr.contains("no vault at"),
        "{}",
        out.stderr
    );
    assert!(!missing.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn article_scenario_with_an_encrypted_s3_vault() {
    let Ok(endpoint) = std::env::var("VIGIL_TEST_S3_ENDPOINT") else {
        let _ = writeln!(
            std::io::stderr(),
            "note: skipping the S3 status CLI test: no S3 server (run `eval \"$(.ci/s3-server start)\"`)"
        );
        return;
    };
    let bucket = std::env::var("VIGIL_TEST_S3_BUCKET").unwrap_or_else(|_| "vigil-test".into());
    let env = TestEnv::start().await.expect("test env");
    let location = format!("s3://{bucket}/cli-{}?endpoint={endpoint}", env.namespace());
    let key_file = temp_dir("key");
    std::fs::write(&key_file, "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=\n").unwrap();
    let at = location.clone();
    let corrupt: Corrupter = Box::new(move |key| {
        let at = at.clone();
        Box::pin(async move {
            let backend = vigil_vault::S3Backend::new(&at).unwrap();
            backend
                .write(&key, 2, b"VGLV\x01garbage".to_vec())
                .await
                .unwrap();
        })
    });
    article_scenario(env, &location, Some(&key_file), corrupt).await;
    let _ = std::fs::remove_file(key_file);
}

/// The article's own case through the CLI: a cluster-scoped `KubernetesCluster` (a group with a
/// dot) whose status holds state nobody can give back; deleted and re-applied from git (so it
/// exists, without status); `vigil status restore` writes the status back without re-creating it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_re_applied_custom_resource_gets_its_status_back() {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

    const GROUP: &str = "clitest.infra.example.com";
    let mut env = TestEnv::start().await.expect("test env");
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_path_buf();
    let client = env.client();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("kubernetesclusters.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Cluster",
            "names": {"plural": "kubernetesclusters", "singular": "kubernetescluster", "kind": "KubernetesCluster"},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds
        .create(
            &PostParams::default(),
            &serde_json::from_value(crd).unwrap(),
        )
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {} // a real cluster may have it already
        Err(e) => panic!("creating the CRD: {e}"),
    }
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1alpha1", "KubernetesCluster"),
        "kubernetesclusters",
    );
    let clusters: Api<DynamicObject> = Api::all_with(client.clone(), &ar);
    wait_for("the CRD served", Duration::from_secs(30), || async {
        clusters
            .list(&ListParams::default())
            .await
            .map(|_| Some(()))
            .map_err(|e| e.to_string())
    })
    .await
    .expect("CRD served");

    // The manifest as kept in git (named after the test namespace: cluster-scoped objects are
    // shared on a real cluster), and its status as the cluster operator wrote it.
    let name = format!("{}-cluster", env.namespace());
    let from_git: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": "KubernetesCluster",
        "metadata": {"name": name, "labels": {"vigil.dev/test-ns": env.namespace()}},
        "spec": {"type": "iks", "env": "test", "kubeVersion": "1.28", "osVersion": "UBUNTU_20_64",
            "addons": [{"name": "cluster-autoscaler", "version": "1.2.2"}]}
    }))
    .unwrap();
    let saved_status =
        json!({"apiServerURL": "https://my-private-endpoint.tld", "masterVersion": "1.28.23"});
    clusters
        .create(&PostParams::default(), &from_git)
        .await
        .expect("create");
    clusters
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": saved_status})),
        )
        .await
        .expect("status");

    let dir = temp_dir("crd");
    let location = dir.to_str().unwrap().to_owned();
    let selector = format!("vigil.dev/test-ns={}", env.namespace());
    must(
        vigil(
            &kubeconfig,
            &[
                "status",
                "backup",
                "--include-resources",
                &format!("kubernetesclusters.{GROUP}"),
                "-l",
                &selector,
                "--to",
                &location,
            ],
        )
        .await,
        "backup",
    );

    // Deleted, then re-applied from git: it exists again, without status.
    clusters
        .delete(&name, &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&clusters, &name, Duration::from_secs(30)).await;
    clusters
        .create(&PostParams::default(), &from_git)
        .await
        .expect("re-apply");

    let out = must(
        vigil(
            &kubeconfig,
            &[
                "status",
                "restore",
                "--from",
                &location,
                "--status-include-resources",
                &format!("KubernetesCluster.{GROUP}"),
            ],
        )
        .await,
        "restore",
    );
    assert!(
        out.contains(
            "0 re-created with status, 0 re-created, 1 status restored, 0 skipped, 0 failed"
        ),
        "it existed: only its status is written: {out}"
    );
    let restored = clusters.get(&name).await.expect("the cluster");
    assert_eq!(restored.data.get("status"), Some(&saved_status));
    assert!(
        restored
            .metadata
            .annotations
            .unwrap_or_default()
            .contains_key(RESTORED_FROM)
    );

    // A kind without a status subresource cannot have its status written back: said up front.
    let out = vigil(
        &kubeconfig,
        &[
            "status",
            "restore",
            "--from",
            &location,
            "--status-include-resources",
            "configmaps",
        ],
    )
    .await;
    assert!(
        !out.ok && out.stderr.contains("ConfigMap has no status subresource"),
        "{}",
        out.stderr
    );

    let _ = clusters.delete(&name, &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(dir);
    env.cleanup().await;
}

/// Sandbox faults: a conflict on the `/status` write is re-read and retried (the status still
/// empty, so it is written); a failing create is reported as FAILED and the command exits non-zero.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_conflict_is_retried_and_a_failure_is_reported() {
    use vigil_testenv::vigil_sandbox::Fault;

    let mut env = TestEnv::start().await.expect("test env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_path_buf();
    let services: Api<Service> = env.api();
    services
        .create(&PostParams::default(), &argocd_server())
        .await
        .expect("create");
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}});
    services
        .patch_status("argocd-server", &PatchParams::default(), &Patch::Merge(&lb))
        .await
        .expect("status");
    let dir = temp_dir("faults");
    let location = dir.to_str().unwrap().to_owned();
    must(
        vigil(
            &kubeconfig,
            &[
                "status",
                "backup",
                "--include-namespaces",
                &ns,
                "--include-resources",
                "Service",
                "--to",
                &location,
            ],
        )
        .await,
        "backup",
    );
    let restore = [
        "status",
        "restore",
        "--from",
        &location,
        "--include-namespaces",
        &ns,
        "--status-include-resources",
        "Service",
    ];
    let sandbox = env.sandbox().expect("sandbox");

    services
        .delete("argocd-server", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&services, "argocd-server", Duration::from_secs(30)).await;
    sandbox.inject(Fault::fail("update", "services/status", 409, 1));
    let out = must(
        vigil(&kubeconfig, &restore).await,
        "restore through a conflict",
    );
    assert!(out.contains("re-created, status restored"), "{out}");
    assert!(out.contains("written after 1 conflict(s)"), "{out}");
    let restored = services.get("argocd-server").await.expect("re-created");
    assert_eq!(ingress_ip(&restored).as_deref(), Some(LB_IP));

    services
        .delete("argocd-server", &DeleteParams::default())
        .await
        .expect("delete");
    wait_gone(&services, "argocd-server", Duration::from_secs(30)).await;
    sandbox.inject(Fault::fail("create", "services", 500, 1));
    let out = vigil(&kubeconfig, &restore).await;
    assert!(!out.ok, "a failed object fails the command");
    assert!(out.stdout.contains("FAILED: re-creating"), "{}", out.stdout);
    sandbox.clear_faults();

    let _ = std::fs::remove_dir_all(dir);
    env.cleanup().await;
}

/// A rebuilt cluster lacks the namespace too: restore creates it before the objects in it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_namespace_is_re_created_first() {
    use k8s_openapi::api::core::v1::Namespace;

    let mut env = TestEnv::start().await.expect("test env");
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_path_buf();
    let dr_ns = format!("{}-dr", env.namespace());
    let namespaces: Api<Namespace> = Api::all(env.client());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": dr_ns}})).unwrap();
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("namespace");
    let services: Api<Service> = Api::namespaced(env.client(), &dr_ns);
    services
        .create(&PostParams::default(), &argocd_server())
        .await
        .expect("create");
    let lb = json!({"status": {"loadBalancer": {"ingress": [{"ip": LB_IP}]}}});
    services
        .patch_status("argocd-server", &PatchParams::default(), &Patch::Merge(&lb))
        .await
        .expect("status");
    let dir = temp_dir("namespace");
    let location = dir.to_str().unwrap().to_owned();
    must(
        vigil(
            &kubeconfig,
            &[
                "status",
                "backup",
                "--include-namespaces",
                &dr_ns,
                "--include-resources",
                "services",
                "--to",
                &location,
            ],
        )
        .await,
        "backup",
    );
    namespaces
        .delete(&dr_ns, &DeleteParams::default())
        .await
        .expect("delete namespace");
    wait_gone(&namespaces, &dr_ns, Duration::from_secs(120)).await;

    let out = must(
        vigil(
            &kubeconfig,
            &[
                "status",
                "restore",
                "--from",
                &location,
                "--status-include-resources",
                "Service",
                "--include-namespaces",
                &dr_ns,
            ],
        )
        .await,
        "restore",
    );
    assert!(
        out.contains(&format!("namespace {dr_ns} re-created")),
        "{out}"
    );
    let restored = services.get("argocd-server").await.expect("re-created");
    assert_eq!(ingress_ip(&restored).as_deref(), Some(LB_IP));

    let _ = namespaces.delete(&dr_ns, &DeleteParams::default()).await;
    let _ = std::fs::remove_dir_all(dir);
    env.cleanup().await;
}
