//! Crash safety of the KubernetesCluster controller as a process: `vigil run` is SIGKILLed at
//! random points while it provisions 20 clusters through the external reference provider (in
//! this test process), and started again each time. Afterwards the provider has exactly one
//! cluster per object (none made twice, none left without its object), every object is `Ready`
//! with the provider's id, and deleting the objects (with one more kill in the middle) leaves the
//! provider empty.
//!
//! The delays between kills are random; the seed is printed in every failure message and
//! `VIGIL_CRASH_SEED=<n>` replays a run's delays.

use crate::support;

use support::{Proc, client, spawn_sandbox};

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::Phase;
use vigil_provider_reference::{ReferenceConfig, ReferenceProvider};
use vigil_testenv::{install_crd, wait_for};

const NS: &str = "kc-crash";
const OBJECTS: usize = 20;
/// Random kills while the clusters provision (besides the one right after the creates).
const KILLS: usize = 6;
/// The article's identity: every object shares the uuid, so its name tells identities apart.
const UUID: &str = "aaa692e5-e6ce-4f19-ad20-6491ca74067c";
/// Longer than the run of kills takes to begin, so most kills land while clusters provision.
const PROVISION_TIME: Duration = Duration::from_millis(1500);
/// Long enough for the kill during the deletions to land while clusters are being deleted.
const DELETE_TIME: Duration = Duration::from_millis(1000);
/// Every provider request takes this long, so kills also land while a request is in flight.
const LATENCY: Duration = Duration::from_millis(30);
/// Failure guards only: every wait ends as soon as its condition holds.
const READY_TIMEOUT: Duration = Duration::from_secs(90);
const GONE_TIMEOUT: Duration = Duration::from_secs(60);

/// A fresh directory of this test's own.
fn test_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vigil-kc-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("test dir");
    dir
}

/// `vigil run` with only the KubernetesCluster controller, the reference provider as `bank`.
fn spawn_vigil(kubeconfig: &Path, provider_url: &str, dir: &Path) -> Proc {
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args([
            "run",
            "--controllers",
            "kubernetescluster",
            "--cluster-provider",
            &format!("bank={provider_url}"),
            "--kubernetescluster-poll-interval",
            "100ms",
            "--metrics-addr",
            "127.0.0.1:0",
            "--leader-elect",
            "false",
            // Unused (every object names `bank`), but kept out of the default system path.
            "--local-clusters-dir",
        ])
        .arg(dir.join("local-clusters"))
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

fn name(i: usize) -> String {
    format!("crash-{i:02}")
}

fn identity_key(name: &str) -> String {
    format!("{UUID}/{name}")
}

/// The article's spec, on the `bank` provider.
fn manifest(name: &str) -> KubernetesCluster {
    serde_json::from_value(json!({
        "apiVersion": "vigil.dev/v1alpha1", "kind": "KubernetesCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "type": "iks", "env": "test", "kubeVersion": "1.28", "osVersion": "UBUNTU_20_64",
            "product": {"name": "this is my solo experiment", "shortName": "experiment",
                "uuid": {"value": UUID}},
            "addons": [{"name": "cluster-autoscaler", "version": "1.2.2"},
                {"name": "vpc-block-csi-driver", "version": "5.2"}],
            "provider": {"name": "bank"}
        }
    }))
    .expect("a KubernetesCluster")
}

fn is_ready(c: &KubernetesCluster) -> bool {
    let Some(status) = &c.status else {
        return false;
    };
    status.phase == Some(Phase::Ready)
        && status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True")
}

/// One line per object: name, phase, clusterID, Ready's reason (for failure messages).
fn describe(objects: &[KubernetesCluster]) -> String {
    objects
        .iter()
        .map(|c| {
            let status = c.status.as_ref();
            format!(
                "{} phase={:?} clusterID={:?} ready={:?}",
                c.name_any(),
                status.and_then(|s| s.phase),
                status.and_then(|s| s.cluster_id.as_deref()),
                status.and_then(|s| s
                    .conditions
                    .iter()
                    .find(|c| c.type_ == "Ready")
                    .map(|c| format!("{} {}", c.status, c.reason))),
            )
        })
        .collect::<Vec<_>>()
        .join("\n  ")
}

async fn setup(client: &kube::Client) {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}})).expect("namespace"),
        )
        .await
        .expect("create namespace");
    install_crd(client, &vigil_apis::crds::kubernetes_cluster())
        .await
        .expect("the KubernetesCluster CRD served");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vigil_run_killed_during_provisioning_makes_each_cluster_once_and_deletes_them_all() {
    let seed: u64 = std::env::var("VIGIL_CRASH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random);
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    // What happened, for every failure message: the seed and each kill's delay.
    let mut log = format!("seed {seed} (VIGIL_CRASH_SEED replays it); kills:");

    let dir = test_dir();
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    setup(&client).await;
    let provider = ReferenceProvider::start(ReferenceConfig {
        provision_time: PROVISION_TIME,
        delete_time: DELETE_TIME,
        ..ReferenceConfig::default()
    })
    .await
    .expect("reference provider");
    provider.set_latency(LATENCY);
    let url = provider.url();
    let clusters: Api<KubernetesCluster> = Api::namespaced(client.clone(), NS);
    let names: Vec<String> = (0..OBJECTS).map(name).collect();

    let mut vigil = spawn_vigil(&kubeconfig, &url, &dir);
    for name in &names {
        clusters
            .create(&PostParams::default(), &manifest(name))
            .await
            .expect("create KubernetesCluster");
    }
    // The first kill: right after the creates, as the first finalizers and creates go out.
    drop(vigil);
    log.push_str(" 0ms(after the creates)");
    vigil = spawn_vigil(&kubeconfig, &url, &dir);
    for _ in 0..KILLS {
        let delay = rng.random_range(50..=800);
        tokio::time::sleep(Duration::from_millis(delay)).await;
        drop(vigil);
        log.push_str(&format!(" {delay}ms"));
        vigil = spawn_vigil(&kubeconfig, &url, &dir);
    }
    log.push_str(&format!(
        "; provider requests by then: {:?}",
        provider.stats().requests
    ));

    let ready = wait_for("all 20 clusters Ready", READY_TIMEOUT, || async {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.len() == OBJECTS && list.items.iter().all(is_ready) {
            return Ok(Some(list.items));
        }
        Err(describe(&list.items))
    })
    .await
    .unwrap_or_else(|e| panic!("{log}\n{e}"));

    // Exactly one cluster per object at the provider: none made twice, none without its object.
    let stats = provider.stats();
    let at_provider = provider.clusters();
    let by_identity: BTreeMap<String, String> = at_provider
        .iter()
        .map(|c| (c.identity.key(), c.id.clone()))
        .collect();
    let context = format!(
        "{log}\nprovider clusters: {by_identity:?}\nstats: {stats:?}\nobjects:\n  {}",
        describe(&ready)
    );
    assert_eq!(at_provider.len(), OBJECTS, "{context}");
    assert_eq!(
        by_identity.len(),
        OBJECTS,
        "two clusters share an identity; {context}"
    );
    let expected: BTreeSet<String> = names.iter().map(|n| identity_key(n)).collect();
    let orphans: Vec<&String> = by_identity
        .keys()
        .filter(|k| !expected.contains(*k))
        .collect();
    assert!(
        orphans.is_empty(),
        "orphaned clusters {orphans:?}; {context}"
    );
    for object in &ready {
        let key = identity_key(&object.name_any());
        assert_eq!(
            provider.clusters_created(&key),
            1,
            "clusters made for {key}; {context}"
        );
        let recorded = object.status.as_ref().and_then(|s| s.cluster_id.clone());
        assert_eq!(
            recorded.as_ref(),
            by_identity.get(&key),
            "{}'s status.clusterID is not the provider's cluster of its identity; {context}",
            object.name_any()
        );
    }

    // Deletion through the finalizer, with a kill in the middle of it.
    for name in &names {
        clusters
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete KubernetesCluster");
    }
    let delay = rng.random_range(50..=800);
    tokio::time::sleep(Duration::from_millis(delay)).await;
    drop(vigil);
    log.push_str(&format!("; during the deletions: {delay}ms"));
    let _vigil = spawn_vigil(&kubeconfig, &url, &dir);
    wait_for("every KubernetesCluster gone", GONE_TIMEOUT, || async {
        let list = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        if list.items.is_empty() {
            return Ok(Some(()));
        }
        Err(describe(&list.items))
    })
    .await
    .unwrap_or_else(|e| panic!("{log}\n{e}"));
    let left: Vec<(String, String)> = provider
        .clusters()
        .into_iter()
        .map(|c| (c.identity.key(), c.id))
        .collect();
    assert!(
        left.is_empty(),
        "objects gone, yet the provider still has clusters {left:?}; {log}"
    );
    for name in &names {
        let key = identity_key(name);
        assert_eq!(
            provider.clusters_created(&key),
            1,
            "a cluster was made again for {key} during the deletions; {log}"
        );
    }
    // What the run went through (with --nocapture): how many creates were retried after a kill.
    let stats = provider.stats();
    let retried = stats.create_requests.values().filter(|n| **n > 1).count();
    eprintln!(
        "{log}; identities whose create was sent again: {retried}; requests: {:?}",
        stats.requests
    );
    provider.shutdown().await;
    let _ = std::fs::remove_dir_all(&dir);
}
