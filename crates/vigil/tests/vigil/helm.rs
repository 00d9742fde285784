//! Helm against `vigil sandbox`: install, upgrade, rollback and uninstall of `charts/vigil`, as a
//! user would run them. Helm (client-go) sends its release Secrets and their DeleteOptions as
//! protobuf and applies the chart with server-side apply, so this is the sandbox's fidelity test
//! for a real Go client. The binary is `$VIGIL_HELM`, else `helm` on PATH; without one the tests
//! print a note and pass.

use crate::support;

use support::{Helm, chart_dir};

use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplate, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::ListParams;

const RELEASE: &str = "vigil";
const NAMESPACE: &str = "vigil-system";

/// The Deployment's replicas as the sandbox stores them.
async fn replicas(deployments: &Api<Deployment>) -> Option<i32> {
    deployments
        .get(RELEASE)
        .await
        .expect("get the Deployment")
        .spec
        .and_then(|s| s.replicas)
}

/// Names of the release records Helm keeps (Secrets labelled `owner=helm`).
async fn release_secrets(secrets: &Api<Secret>) -> Vec<String> {
    let mut names: Vec<String> = secrets
        .list(&ListParams::default().labels("owner=helm"))
        .await
        .expect("list Secrets")
        .items
        .into_iter()
        .filter_map(|s| s.metadata.name)
        .collect();
    names.sort();
    names
}

/// Polls until `count` reports zero, failing with `what` after 30 s.
async fn wait_until_none<F, Fut>(what: &str, mut count: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = usize>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let left = count().await;
        if left == 0 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{left} {what} still there 30 s after helm uninstall"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The whole lifecycle; `wait` adds `--wait` to every step, which needs the Deployment to become
/// available (the sandbox's workload controllers and its simulated kubelet).
async fn lifecycle(test: &str, wait: bool) {
    let home = std::env::temp_dir().join(format!("vigil-{test}-{}", std::process::id()));
    let kubeconfig = home.join("kubeconfig");
    let Some(helm) = Helm::find(&kubeconfig, &home) else {
        eprintln!("skipped {test}: helm not found (set VIGIL_HELM or put helm on PATH)");
        return;
    };
    std::fs::create_dir_all(&home).expect("helm home");
    let _sandbox = support::spawn_sandbox(&kubeconfig);
    let client = support::client(&kubeconfig).await;
    let waiting: &[&str] = if wait {
        &["--wait", "--timeout", "120s"]
    } else {
        &[]
    };
    let chart = chart_dir();
    let chart = chart.as_str();
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NAMESPACE);

    let mut install = vec![
        "install",
        RELEASE,
        chart,
        "-n",
        NAMESPACE,
        "--create-namespace",
    ];
    install.extend_from_slice(waiting);
    helm.run(&install);
    assert_eq!(replicas(&deployments).await, Some(2), "the chart's default");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "configmapsyncs.apps.bixbite.io",
        "criticalservices.mycrd.com",
        "kubernetesclusters.vigil.dev",
        "statusbackuppolicies.vigil.dev",
        "topics.kafka.vigil.dev",
    ] {
        crds.get(crd).await.expect("the chart's CRDs are installed");
    }
    assert_eq!(
        release_secrets(&secrets).await,
        ["sh.helm.release.v1.vigil.v1"]
    );

    let mut upgrade = vec![
        "upgrade",
        RELEASE,
        chart,
        "-n",
        NAMESPACE,
        "--set",
        "replicaCount=1",
    ];
    upgrade.extend_from_slice(waiting);
    helm.run(&upgrade);
    assert_eq!(replicas(&deployments).await, Some(1), "after the upgrade");

    let mut rollback = vec!["rollback", RELEASE, "1", "-n", NAMESPACE];
    rollback.extend_from_slice(waiting);
    helm.run(&rollback);
    assert_eq!(replicas(&deployments).await, Some(2), "after the rollback");
    let history = helm.run(&["history", RELEASE, "-n", NAMESPACE]);
    assert!(
        history.contains("Rollback to 1") && history.lines().count() == 4,
        "{history}"
    );
    assert_eq!(
        release_secrets(&secrets).await,
        [
            "sh.helm.release.v1.vigil.v1",
            "sh.helm.release.v1.vigil.v2",
            "sh.helm.release.v1.vigil.v3"
        ]
    );

    let mut uninstall = vec!["uninstall", RELEASE, "-n", NAMESPACE];
    uninstall.extend_from_slice(waiting);
    let out = helm.run(&uninstall);
    assert!(out.contains("uninstalled"), "{out}");

    // Nothing of the release is left (Helm keeps CRDs by design; they are not the release's).
    assert!(release_secrets(&secrets).await.is_empty());
    assert!(
        helm.run(&["list", "-A", "-q"]).trim().is_empty(),
        "helm still lists a release"
    );
    let gone = "gone after helm uninstall";
    let sa: Api<ServiceAccount> = Api::namespaced(client.clone(), NAMESPACE);
    assert!(
        sa.get_opt(RELEASE).await.expect("get").is_none(),
        "ServiceAccount {gone}"
    );
    let role: Api<Role> = Api::namespaced(client.clone(), NAMESPACE);
    assert!(
        role.get_opt("vigil-leader-election")
            .await
            .expect("get")
            .is_none(),
        "Role {gone}"
    );
    let binding: Api<RoleBinding> = Api::namespaced(client.clone(), NAMESPACE);
    assert!(
        binding
            .get_opt("vigil-leader-election")
            .await
            .expect("get")
            .is_none(),
        "RoleBinding {gone}"
    );
    let cluster_role: Api<ClusterRole> = Api::all(client.clone());
    assert!(
        cluster_role.get_opt(RELEASE).await.expect("get").is_none(),
        "ClusterRole {gone}"
    );
    let cluster_binding: Api<ClusterRoleBinding> = Api::all(client.clone());
    assert!(
        cluster_binding
            .get_opt(RELEASE)
            .await
            .expect("get")
            .is_none(),
        "ClusterRoleBinding {gone}"
    );
    let templates: Api<PodTemplate> = Api::namespaced(client.clone(), NAMESPACE);
    assert!(
        templates
            .get_opt("critical-service-pod-template")
            .await
            .expect("get")
            .is_none(),
        "PodTemplate {gone}"
    );
    assert!(
        deployments.get_opt(RELEASE).await.expect("get").is_none(),
        "Deployment {gone}"
    );
    // What the Deployment made goes with it, through the garbage collector.
    let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), NAMESPACE);
    wait_until_none("ReplicaSets", || async {
        replica_sets
            .list(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len())
    })
    .await;
    let pods: Api<Pod> = Api::namespaced(client.clone(), NAMESPACE);
    wait_until_none("pods", || async {
        pods.list(&ListParams::default())
            .await
            .map_or(usize::MAX, |l| l.items.len())
    })
    .await;
    let _ = std::fs::remove_dir_all(&home);
}

#[tokio::test]
async fn helm_install_upgrade_rollback_uninstall() {
    lifecycle("helm-lifecycle", false).await;
}

/// The same with `--wait` on every step: Helm waits for the Deployment to become available, which
/// takes the sandbox's Deployment and ReplicaSet controllers and its simulated kubelet.
#[tokio::test]
async fn helm_install_upgrade_rollback_uninstall_with_wait() {
    lifecycle("helm-lifecycle-wait", true).await;
}
