//! KubernetesCluster end to end: the controller runs in-process against a TestEnv (a fresh
//! sandbox by default, `VIGIL_TEST_KUBECONFIG`'s cluster otherwise), with the external reference
//! provider (in the test process, with fault injection). The `local` provider's test (real
//! `vigil sandbox` processes) is in the `vigil` crate's `tests/kubernetes_cluster_local.rs`, and
//! the process-level tests (`vigil run` killed during provisioning) in its
//! `kubernetes_cluster_crash.rs`.
//!
//! On a real cluster the controllers of the tests run one at a time, since each reconciles every
//! KubernetesCluster of the cluster.

use crate::kubernetes_cluster_world;

use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt as _, Resource as _, ResourceExt as _};
use serde_json::{Value, json};
use vigil_apis::kubernetes_cluster::Phase;
use vigil_apis::{KubernetesCluster, StatusBackupPolicy};
use vigil_controllers::kubernetes_cluster::controller::{self, kubeconfig_secret_name};
use vigil_controllers::kubernetes_cluster::decide as reasons;
use vigil_controllers::kubernetes_cluster::model::FINALIZER;
use vigil_controllers::permissions;
use vigil_provider_reference::{LoseMode, Outage, ReferenceConfig};
use vigil_testenv::{RbacAttributes, wait_for};

use kubernetes_cluster_world::*;

#[tokio::test]
async fn a_cluster_is_provisioned_through_an_external_provider_and_deleted_with_its_object() {
    let w = World::start("external").await;
    let provider = reference(ReferenceConfig::default()).await;
    let running = w.run(bank(&provider));
    w.create("ext", on_bank()).await;
    let ready = w.wait_ready("ext").await;
    let status = ready.status.clone().expect("status");
    let id = status.cluster_id.clone().expect("a cluster id");
    assert!(status.api_server_url.is_some_and(|u| u.contains(&id)));
    assert_eq!(
        status
            .master_version
            .as_deref()
            .map(|v| v.starts_with("1.28")),
        Some(true)
    );
    assert!(ready.finalizers().iter().any(|f| f == FINALIZER));
    assert_eq!(provider.clusters_created(&identity_key("ext")), 1);
    assert!(
        status.addons.iter().all(|a| a.state == "Installed"),
        "{:?}",
        status.addons
    );

    // The kubeconfig Secret (Cluster API's name and key), owned by the object.
    let secrets: Api<Secret> = w.env.api();
    let secret = secrets
        .get(&kubeconfig_secret_name("ext"))
        .await
        .expect("kubeconfig Secret");
    assert!(
        secret
            .data
            .as_ref()
            .is_some_and(|d| d.contains_key("value"))
    );
    assert_eq!(
        secret.owner_references().first().map(|o| o.uid.as_str()),
        ready.uid().as_deref()
    );

    // Steady state: no API writes, whatever the resyncs (every 2 s here).
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = w.clusters().get("ext").await.expect("get");
    assert_eq!(
        after.resource_version(),
        ready.resource_version(),
        "no write in steady state"
    );

    w.clusters()
        .delete("ext", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone("ext").await;
    assert!(
        provider.clusters().is_empty(),
        "the cluster is gone at the provider before the object"
    );
    let metrics = running.metrics.encode();
    assert!(
        metrics.contains(
            "vigil_kubernetescluster_operation_duration_seconds_count{operation=\"Create\"} 1"
        ),
        "{metrics}"
    );
    assert!(metrics.contains("vigil_kubernetescluster_provider_requests_total{provider=\"bank\",operation=\"Create\",result=\"ok\"} 1"), "{metrics}");
    w.finish(running).await;
    provider.shutdown().await;
}

#[tokio::test]
async fn an_outage_is_degraded_with_backoff_then_the_cluster_converges() {
    let w = World::start("outage").await;
    let provider = reference(ReferenceConfig::default()).await;
    provider.set_outage(Some(Outage::Unavailable));
    let running = w.run(bank(&provider));
    w.create("down", on_bank()).await;
    let degraded = w
        .wait_condition(
            "down",
            reasons::DEGRADED,
            "True",
            reasons::REASON_PROVIDER_UNAVAILABLE,
        )
        .await;
    assert!(
        message(&degraded, reasons::DEGRADED).contains("bank"),
        "{:?}",
        degraded.status
    );
    // Backoff: a handful of attempts in two seconds, not a hot loop.
    let requests = provider.total_requests();
    tokio::time::sleep(Duration::from_secs(2)).await;
    let more = provider.total_requests() - requests;
    assert!(more <= 10, "{more} requests in 2 s during the outage");
    provider.set_outage(None);
    let ready = w.wait_ready("down").await;
    assert_eq!(
        condition(&ready, reasons::DEGRADED),
        Some(("False", reasons::REASON_AS_EXPECTED))
    );
    assert_eq!(provider.clusters_created(&identity_key("down")), 1);
    w.finish(running).await;
    provider.shutdown().await;
}

#[tokio::test]
async fn lost_create_answers_never_make_a_second_cluster() {
    let w = World::start("lost").await;
    let provider = reference(ReferenceConfig::default()).await;
    // A provider that does not dedupe creates by identity: what keeps one cluster per object
    // here is Vigil's own lookup by identity before any create.
    provider.update_faults(|f| f.ignore_idempotency = true);
    let running = w.run(bank(&provider));
    for (name, mode) in [
        ("lost-error", LoseMode::Error),
        ("lost-drop", LoseMode::Drop),
    ] {
        provider.lose_next_creates(2, mode);
        w.create(name, on_bank()).await;
        w.wait_ready(name).await;
        assert_eq!(provider.clusters_created(&identity_key(name)), 1, "{name}");
    }
    assert_eq!(provider.clusters().len(), 2);
    w.finish(running).await;
    provider.shutdown().await;
}

#[tokio::test]
async fn a_refused_delete_keeps_the_finalizer_and_says_why() {
    let w = World::start("refuse").await;
    let provider = reference(ReferenceConfig::default()).await;
    let running = w.run(bank(&provider));
    w.create("kept", on_bank()).await;
    let ready = w.wait_ready("kept").await;
    let id = ready.status.and_then(|s| s.cluster_id).expect("id");
    provider.refuse_deletes(&id);
    w.clusters()
        .delete("kept", &DeleteParams::default())
        .await
        .expect("delete");
    let waiting = w
        .wait_condition("kept", reasons::DELETING, "True", "DeleteRefused")
        .await;
    assert!(waiting.finalizers().iter().any(|f| f == FINALIZER));
    assert!(message(&waiting, reasons::DELETING).contains(&id));
    assert_eq!(provider.clusters().len(), 1);
    provider.allow_deletes(&id);
    w.wait_gone("kept").await;
    assert!(provider.clusters().is_empty());
    w.finish(running).await;
    provider.shutdown().await;
}

#[tokio::test]
async fn upgrades_go_forward_downgrades_and_unknown_addons_are_conditions() {
    let w = World::start("versions").await;
    let provider = reference(ReferenceConfig::default()).await;
    let running = w.run(bank(&provider));
    w.create("v", on_bank()).await;
    w.wait_ready("v").await;

    w.patch_spec("v", json!({"kubeVersion": "1.29"})).await;
    let upgraded = w
        .wait("v", "the upgrade to 1.29", CLUSTER_TIMEOUT, |c| {
            phase(c) == Some(Phase::Ready)
                && c.status
                    .as_ref()
                    .and_then(|s| s.master_version.as_deref())
                    .is_some_and(|v| v.starts_with("1.29"))
        })
        .await;
    assert_eq!(
        condition(&upgraded, reasons::UPGRADING),
        Some(("False", reasons::REASON_UP_TO_DATE))
    );

    // A downgrade is refused at the door with the rule's message (the controller's own check,
    // DowngradeRefused, for objects stored before the rule: decide_tests.rs); the cluster keeps
    // serving as it was.
    let refused = w
        .clusters()
        .patch(
            "v",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"kubeVersion": "1.27"}})),
        )
        .await
        .expect_err("a downgrade is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}");
    };
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status.message.contains(
            "spec.kubeVersion: Invalid value: \"string\": kubeVersion 1.27 is older than 1.29: \
             Kubernetes clusters cannot be downgraded; set it back to 1.29 or later (DowngradeRefused)"
        ),
        "{}",
        status.message
    );

    w.patch_spec(
        "v",
        json!({"kubeVersion": "1.29", "addons": [{"name": "flux-capacitor", "version": "1.0"}]}),
    )
    .await;
    let unknown = w
        .wait_condition("v", reasons::DEGRADED, "True", "UnknownAddon")
        .await;
    assert!(message(&unknown, reasons::DEGRADED).contains("flux-capacitor"));
    let rejection = unknown
        .status
        .and_then(|s| s.rejection)
        .expect("rejection recorded");
    assert_eq!(rejection.operation, "SetAddons");
    // Not repeated for the same generation.
    let addon_requests = provider.requests("set_addons");
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(provider.requests("set_addons"), addon_requests);

    // Fixed: converges and Degraded clears.
    w.patch_spec(
        "v",
        json!({"addons": [{"name": "metrics-server", "version": "0.7.2"}]}),
    )
    .await;
    let fixed = w
        .wait_condition("v", reasons::DEGRADED, "False", reasons::REASON_AS_EXPECTED)
        .await;
    assert_eq!(fixed.status.and_then(|s| s.rejection), None);
    w.finish(running).await;
    provider.shutdown().await;
}

#[tokio::test]
async fn paused_clusters_are_left_alone_and_unknown_providers_are_a_condition() {
    let w = World::start("paused").await;
    let provider = reference(ReferenceConfig::default()).await;
    let running = w.run(bank(&provider));
    let mut paused = on_bank();
    paused["paused"] = json!(true);
    w.create("p", paused).await;
    w.wait_condition("p", reasons::PAUSED, "True", reasons::REASON_PAUSED)
        .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(
        provider.total_requests(),
        0,
        "no provider call while paused"
    );
    w.patch_spec("p", json!({"paused": false})).await;
    w.wait_ready("p").await;

    w.create("nowhere", json!({"provider": {"name": "nowhere"}}))
        .await;
    let unknown = w
        .wait_condition(
            "nowhere",
            reasons::DEGRADED,
            "True",
            reasons::REASON_PROVIDER_UNKNOWN,
        )
        .await;
    assert!(message(&unknown, reasons::DEGRADED).contains("bank"));
    // Its deletion waits for a provider that does not exist, and says so; orphaned, it goes.
    w.clusters()
        .delete("nowhere", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_condition(
        "nowhere",
        reasons::DELETING,
        "True",
        reasons::REASON_PROVIDER_UNKNOWN,
    )
    .await;
    w.patch_spec("nowhere", json!({"deletionPolicy": "Orphan"}))
        .await;
    w.wait_gone("nowhere").await;
    w.finish(running).await;
    provider.shutdown().await;
}

/// A malformed spec never reaches the controller: the API server's schema rejects it.
#[tokio::test]
async fn a_malformed_spec_is_rejected_by_the_schema() {
    let w = World::start("schema").await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        w.env.client(),
        w.env.namespace(),
        &kube::api::ApiResource::erase::<KubernetesCluster>(&()),
    );
    let mut base: Value = serde_saphyr::from_str(ARTICLE).expect("manifest");
    // The article's manifest says `v1alpha1`; posted to the `v1` path it must say `v1` (both
    // versions share one schema, which is what this test is about).
    base["apiVersion"] = json!(KubernetesCluster::api_version(&()));
    let cases = [
        ("kubeVersion", json!({"kubeVersion": "latest"})),
        (
            "uuid",
            json!({"product": {"uuid": {"value": "not-a-uuid"}}}),
        ),
        (
            "addons",
            json!({"addons": [{"name": "a", "version": "1.0"}, {"name": "a", "version": "2.0"}]}),
        ),
        ("deletionPolicy", json!({"deletionPolicy": "Sometimes"})),
        (
            "version",
            json!({"addons": [{"name": "a", "version": "one"}]}),
        ),
    ];
    for (i, (field, bad)) in cases.into_iter().enumerate() {
        let mut object = base.clone();
        object["metadata"] = json!({"name": format!("bad-{i}"), "namespace": w.env.namespace()});
        merge(&mut object["spec"], bad);
        let object: DynamicObject = serde_json::from_value(object).expect("object");
        let err = api
            .create(&PostParams::default(), &object)
            .await
            .expect_err(&format!("{field} must be rejected"));
        match err {
            kube::Error::Api(s) => {
                assert_eq!(s.code, 422, "{field}: {s:?}");
                assert!(s.message.contains(field), "{field}: {}", s.message);
            }
            other => panic!("{field}: {other}"),
        }
    }
    let mut missing = base.clone();
    missing["metadata"] = json!({"name": "missing", "namespace": w.env.namespace()});
    if let Some(spec) = missing["spec"].as_object_mut() {
        spec.remove("product");
    }
    let missing: DynamicObject = serde_json::from_value(missing).expect("object");
    let err = api
        .create(&PostParams::default(), &missing)
        .await
        .expect_err("a missing product must be rejected");
    assert!(matches!(err, kube::Error::Api(s) if s.code == 422 && s.message.contains("product")));
    w.env.cleanup().await;
    let _ = std::fs::remove_dir_all(&w.dir);
}

/// The article's scenario: a KubernetesCluster deleted (its cluster orphaned) and re-applied
/// from git without status gets its status back from the vault and adopts the same cluster —
/// the provider saw exactly one create.
#[tokio::test]
async fn reapplied_from_git_the_status_comes_back_and_the_same_cluster_is_adopted() {
    let w = World::start("reapply").await;
    install_crd(&w.env.client(), StatusBackupPolicy::crd()).await;
    let provider = reference(ReferenceConfig::default()).await;
    let running = w.run_with(bank(&provider), true, w.env.client());
    let policies: Api<StatusBackupPolicy> = Api::all(w.env.client());
    let policy_name = format!("kc-{}", w.env.namespace().trim_start_matches("vigil-test-"));
    let policy: StatusBackupPolicy = serde_json::from_value(json!({
        "apiVersion": "vigil.dev/v1", "kind": "StatusBackupPolicy",
        "metadata": {"name": policy_name},
        "spec": {
            "resources": [{"group": "vigil.dev", "kind": "KubernetesCluster"}],
            "namespaces": [w.env.namespace()],
        },
    }))
    .expect("policy");
    policies
        .create(&PostParams::default(), &policy)
        .await
        .expect("create policy");
    w.env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<StatusBackupPolicy>(&()),
        &policy_name,
    );

    let mut orphan = on_bank();
    orphan["deletionPolicy"] = json!("Orphan");
    w.create("git", orphan.clone()).await;
    let first = w.wait_ready("git").await;
    let first_status = first.status.clone().expect("status");
    // The vault holds the Ready status.
    let vault = vigil_vault::Vault::open(
        &w.dir.join("vault").display().to_string(),
        vigil_vault::VaultOptions::default(),
    )
    .await
    .expect("open vault");
    let key = vigil_vault::ObjectKey::new(
        "vigil.dev",
        "KubernetesCluster",
        Some(w.env.namespace()),
        "git",
    );
    wait_for(
        "the vault to capture the Ready status",
        CLUSTER_TIMEOUT,
        || async {
            let history = vault.history(&key).await.map_err(|e| e.to_string())?;
            let last = history.into_iter().filter_map(Result::ok).next_back();
            match last {
                Some(r) if r.status["phase"] == "Ready" && r.status["clusterID"].is_string() => {
                    Ok(Some(()))
                }
                other => {
                    let p = policies
                        .get(&policy_name)
                        .await
                        .map_err(|e| e.to_string())?;
                    Err(format!(
                        "last record: {:?}; policy: {:?}",
                        other.map(|r| r.status),
                        p.status
                    ))
                }
            }
        },
    )
    .await
    .unwrap_or_else(|e| {
        panic!("{e}");
    });

    w.clusters()
        .delete("git", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone("git").await;
    assert_eq!(provider.clusters().len(), 1, "Orphan: the cluster stays");

    // Re-applied as from git: no status.
    w.create("git", orphan).await;
    let back = w.wait_ready("git").await;
    let status = back.status.clone().expect("status");
    assert_eq!(
        status.cluster_id, first_status.cluster_id,
        "the same cluster"
    );
    assert_eq!(status.api_server_url, first_status.api_server_url);
    // The vault writes the status, then its annotation: wait for both (a real server's
    // latency lets a reader see the first write alone).
    w.wait("git", "the restore to be annotated", CLUSTER_TIMEOUT, |c| {
        c.annotations()
            .contains_key("vigil.dev/status-restored-from")
    })
    .await;
    assert_eq!(
        provider.create_requests(&identity_key("git")),
        1,
        "exactly one create"
    );
    assert_eq!(provider.clusters_created(&identity_key("git")), 1);

    let _ = policies
        .delete(&policy_name, &DeleteParams::default())
        .await;
    // Orphaned again at the end, so delete the cluster at the provider by hand.
    w.patch_spec("git", json!({"deletionPolicy": "Delete"}))
        .await;
    w.finish(running).await;
    assert!(provider.clusters().is_empty());
    provider.shutdown().await;
}

/// The controller's requests through a provision, a kubeconfig Secret and a deletion are
/// exactly the permissions it declares (`vigil manifests` grants them).
#[tokio::test]
async fn the_controllers_requests_are_exactly_its_declared_permissions() {
    let w = World::start("rbac").await;
    let provider = reference(ReferenceConfig::default()).await;
    let (client, log) = w.env.recording_client().await.expect("recording client");
    let running = w.run_with(bank(&provider), false, client);
    w.create("r", on_bank()).await;
    w.wait_ready("r").await;
    // A deleted kubeconfig Secret is written again.
    let secrets: Api<Secret> = w.env.api();
    secrets
        .delete(&kubeconfig_secret_name("r"), &DeleteParams::default())
        .await
        .expect("delete secret");
    wait_for("the kubeconfig Secret back", CLUSTER_TIMEOUT, || async {
        secrets
            .get_opt(&kubeconfig_secret_name("r"))
            .await
            .map(|s| s.map(|_| ()))
            .map_err(|e| e.to_string())
    })
    .await
    .expect("secret restored");
    w.clusters()
        .delete("r", &DeleteParams::default())
        .await
        .expect("delete");
    w.wait_gone("r").await;
    let granted = permissions::granted(controller::PERMISSIONS)
        .map(|(group, resource, verb)| RbacAttributes::new(group, resource, verb));
    log.check_exactly(granted, &["patch events.k8s.io/events"])
        .expect("the ClusterRole is exactly what the code uses");
    w.finish(running).await;
    provider.shutdown().await;
}
