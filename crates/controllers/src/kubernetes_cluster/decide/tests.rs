//! Unit tests of the pure decisions.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use vigil_apis::kubernetes_cluster::{
    Addon as SpecAddon, DeletionPolicy, KubernetesClusterSpec, KubernetesClusterStatus, Phase,
    Product, ProductUuid,
};
use vigil_provider::{Addon, AddonState, AddonStatus, ClusterState, ProviderCluster};
use vigil_runtime::conditions;

use super::*;
use crate::kubernetes_cluster::model::{
    Answer, Answered, Call, ClusterView, DeleteAnswer, DeletionStep, DeletionTarget, Observed,
    Settings,
};

const UUID: &str = "aaa692e5-e6ce-4f19-ad20-6491ca74067c";

fn spec() -> KubernetesClusterSpec {
    KubernetesClusterSpec {
        type_: "iks".into(),
        env: "test".into(),
        kube_version: "1.28".into(),
        os_version: "UBUNTU_20_64".into(),
        product: Product {
            name: "this is my solo experiment".into(),
            short_name: "experiment".into(),
            uuid: ProductUuid { value: UUID.into() },
        },
        addons: vec![
            SpecAddon {
                name: "cluster-autoscaler".into(),
                version: "1.2.2".into(),
            },
            SpecAddon {
                name: "vpc-block-csi-driver".into(),
                version: "5.2".into(),
            },
        ],
        paused: None,
        deletion_policy: None,
        provider: None,
    }
}

fn view(status: Option<KubernetesClusterStatus>) -> ClusterView {
    ClusterView {
        namespace: "default".into(),
        name: "my-custom-cluster-for-backup".into(),
        generation: Some(1),
        spec: spec(),
        status,
        default_provider: "local".into(),
    }
}

fn running() -> ProviderCluster {
    ProviderCluster {
        id: "c-1".into(),
        identity: view(None).identity(),
        state: ClusterState::Running,
        progress: None,
        kube_version: "1.28".into(),
        master_version: Some("1.28.0".into()),
        api_server_url: Some("https://127.0.0.1:40001".into()),
        addons: vec![
            AddonStatus {
                name: "cluster-autoscaler".into(),
                version: "1.2.2".into(),
                state: AddonState::Installed,
                message: None,
            },
            AddonStatus {
                name: "vpc-block-csi-driver".into(),
                version: "5.2".into(),
                state: AddonState::Installed,
                message: None,
            },
        ],
        kubeconfig: Some("apiVersion: v1".into()),
        message: None,
        type_: "iks".into(),
        env: "test".into(),
        os_version: "UBUNTU_20_64".into(),
    }
}

fn settings() -> Settings {
    Settings {
        poll_interval: Duration::from_secs(2),
        resync_interval: Duration::from_secs(60),
    }
}

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("a valid time")
}

const PROVIDERS: &[String] = &[];

fn decide_at(view: &ClusterView, observed: Observed<'_>, now: i64) -> Plan {
    decide(&Inputs {
        cluster: view,
        observed,
        providers: PROVIDERS,
        answered: None,
        settings: &settings(),
        now: at(now),
    })
}

fn condition<'a>(status: &'a KubernetesClusterStatus, type_: &str) -> (&'a str, &'a str) {
    let c = conditions::find(&status.conditions, type_).expect("the condition is set");
    (c.status.as_str(), c.reason.as_str())
}

fn reasons(plan: &Plan) -> Vec<&str> {
    plan.events.iter().map(|e| e.reason.as_str()).collect()
}

/// Provisioned from scratch: Creating → Provisioning → Ready, as the provider reports.
fn ready_status() -> KubernetesClusterStatus {
    let v = view(None);
    let created = decide_at(&v, Observed::Absent, 100);
    let mut provisioning = running();
    provisioning.state = ClusterState::Provisioning;
    let mut with_id = created.status.clone();
    with_id.cluster_id = Some("c-1".into());
    let v = view(Some(with_id));
    let mid = decide_at(&v, Observed::Found(&provisioning), 101);
    let v = view(Some(mid.status));
    decide_at(&v, Observed::Found(&running()), 130).status
}

#[test]
fn absent_cluster_is_created_with_the_identity_and_the_spec() {
    let v = view(None);
    let plan = decide_at(&v, Observed::Absent, 100);
    let Some(Call::Create(request)) = &plan.call else {
        panic!("expected a create, got {:?}", plan.call);
    };
    assert_eq!(request.identity.uuid, UUID);
    assert_eq!(request.identity.name, "my-custom-cluster-for-backup");
    assert_eq!(request.kube_version, "1.28");
    assert_eq!(
        request.addons,
        vec![
            Addon {
                name: "cluster-autoscaler".into(),
                version: "1.2.2".into()
            },
            Addon {
                name: "vpc-block-csi-driver".into(),
                version: "5.2".into()
            }
        ]
    );
    assert_eq!(plan.status.phase, Some(Phase::Provisioning));
    assert_eq!(
        condition(&plan.status, PROVISIONING),
        ("True", REASON_CREATING)
    );
    assert_eq!(
        condition(&plan.status, READY),
        ("False", REASON_PROVISIONING)
    );
    assert_eq!(reasons(&plan), [REASON_CREATING]);
    assert_eq!(plan.requeue, Some(Duration::from_secs(2)));
}

#[test]
fn provisioning_reports_progress_and_polls_without_a_request() {
    let mut status = decide_at(&view(None), Observed::Absent, 100).status;
    status.cluster_id = Some("c-1".into());
    let mut cluster = running();
    cluster.state = ClusterState::Provisioning;
    cluster.progress = Some("starting the API server".into());
    let plan = decide_at(&view(Some(status)), Observed::Found(&cluster), 101);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.phase, Some(Phase::Provisioning));
    let c = conditions::find(&plan.status.conditions, PROVISIONING).expect("set");
    assert!(
        c.message.contains("starting the API server"),
        "{}",
        c.message
    );
    assert_eq!(plan.requeue, Some(Duration::from_secs(2)));
    assert!(plan.events.is_empty(), "no new Event while provisioning");
}

#[test]
fn running_cluster_becomes_ready_and_reports_the_provision_duration() {
    let status = ready_status();
    assert_eq!(status.phase, Some(Phase::Ready));
    assert_eq!(condition(&status, READY), ("True", REASON_CLUSTER_READY));
    assert_eq!(
        condition(&status, PROVISIONING),
        ("False", REASON_PROVISIONED)
    );
    assert_eq!(condition(&status, DEGRADED), ("False", REASON_AS_EXPECTED));
    assert_eq!(
        status.api_server_url.as_deref(),
        Some("https://127.0.0.1:40001")
    );
    assert_eq!(status.master_version.as_deref(), Some("1.28.0"));
    assert_eq!(status.cluster_id.as_deref(), Some("c-1"));
    assert_eq!(
        status.kubeconfig_secret.as_deref(),
        Some("my-custom-cluster-for-backup-kubeconfig")
    );
    assert_eq!(status.addons.len(), 2);
    assert!(status.addons.iter().all(|a| a.state == "Installed"));

    // The duration: from the Provisioning condition's transition (t=100) to Ready (t=130).
    let v = view(None);
    let mut with_id = decide_at(&v, Observed::Absent, 100).status;
    with_id.cluster_id = Some("c-1".into());
    let plan = decide_at(&view(Some(with_id)), Observed::Found(&running()), 130);
    assert_eq!(plan.finished, vec![("Create", 30.0)]);
    assert_eq!(reasons(&plan), [REASON_PROVISIONED]);
}

#[test]
fn every_condition_of_a_running_cluster_describes_the_current_generation() {
    // Provisioned at generation 1; the spec changes (generation 2) to what the cluster already
    // is: the Provisioning condition, untouched since, now holds for generation 2 too.
    let mut v = view(Some(ready_status()));
    v.generation = Some(2);
    let plan = decide_at(&v, Observed::Found(&running()), 500);
    assert_eq!(plan.status.observed_generation, Some(2));
    for c in &plan.status.conditions {
        assert_eq!(c.observed_generation, Some(2), "{}", c.type_);
    }
    assert_eq!(
        condition(&plan.status, PROVISIONING),
        ("False", REASON_PROVISIONED)
    );
}

#[test]
fn a_status_restored_from_a_deleted_objects_tombstone_loses_its_deleting_condition() {
    // The vault restores the last status of an object deleted earlier to one re-applied under
    // its name (generation 1): that object is not being deleted, and names no cluster.
    let deleted = view(Some(ready_status()));
    let gone = deletion(
        &deleted,
        DeletionTarget::Cluster("c-1".into()),
        Some(&DeleteAnswer::Gone),
    );
    let v = view(Some(gone.status));
    let plan = decide_at(&v, Observed::Absent, 600);
    assert!(conditions::find(&plan.status.conditions, DELETING).is_none());
    assert!(
        matches!(plan.call, Some(Call::Create(_))),
        "provisions anew"
    );
    for c in &plan.status.conditions {
        assert_eq!(c.observed_generation, Some(1), "{}", c.type_);
    }
}

#[test]
fn a_settled_cluster_changes_nothing_and_records_nothing() {
    let status = ready_status();
    let v = view(Some(status.clone()));
    let plan = decide_at(&v, Observed::Found(&running()), 500);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status, status, "no status write in steady state");
    assert!(plan.events.is_empty());
    assert!(plan.finished.is_empty());
    assert_eq!(
        plan.requeue,
        Some(Duration::from_secs(60)),
        "resync for drift"
    );
}

#[test]
fn found_by_identity_without_status_is_adopted_not_created() {
    let plan = decide_at(&view(None), Observed::Found(&running()), 100);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.cluster_id.as_deref(), Some("c-1"));
    assert_eq!(plan.status.phase, Some(Phase::Ready));
    assert!(reasons(&plan).contains(&REASON_ADOPTED));
}

#[test]
fn a_higher_kube_version_upgrades_and_a_lower_one_is_refused() {
    let mut v = view(Some(ready_status()));
    v.spec.kube_version = "1.29".into();
    v.generation = Some(2);
    let plan = decide_at(&v, Observed::Found(&running()), 200);
    assert_eq!(
        plan.call,
        Some(Call::Upgrade {
            id: "c-1".into(),
            kube_version: "1.29".into()
        })
    );
    assert_eq!(plan.status.phase, Some(Phase::Upgrading));
    assert_eq!(
        condition(&plan.status, UPGRADING),
        ("True", REASON_UPGRADING)
    );
    assert!(reasons(&plan).contains(&REASON_UPGRADING));

    let mut v = view(Some(ready_status()));
    v.spec.kube_version = "1.27".into();
    v.generation = Some(2);
    let plan = decide_at(&v, Observed::Found(&running()), 200);
    assert_eq!(plan.call, None, "no request for a downgrade");
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_DOWNGRADE_REFUSED)
    );
    assert_eq!(
        condition(&plan.status, READY).0,
        "True",
        "the cluster still serves"
    );
    assert_eq!(reasons(&plan), [REASON_DOWNGRADE_REFUSED]);
    // Said once: the next pass records no new Event.
    let again = decide_at(
        &view_with(v.clone(), plan.status),
        Observed::Found(&running()),
        260,
    );
    assert!(again.events.is_empty());
}

fn view_with(mut v: ClusterView, status: KubernetesClusterStatus) -> ClusterView {
    v.status = Some(status);
    v
}

#[test]
fn an_upgrade_that_ends_reports_upgraded_with_its_duration() {
    let mut v = view(Some(ready_status()));
    v.spec.kube_version = "1.29".into();
    let started = decide_at(&v, Observed::Found(&running()), 200);
    let mut upgraded = running();
    upgraded.kube_version = "1.29".into();
    upgraded.master_version = Some("1.29.0".into());
    let plan = decide_at(
        &view_with(v, started.status),
        Observed::Found(&upgraded),
        260,
    );
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.phase, Some(Phase::Ready));
    assert_eq!(plan.status.master_version.as_deref(), Some("1.29.0"));
    assert_eq!(
        condition(&plan.status, UPGRADING),
        ("False", REASON_UP_TO_DATE)
    );
    assert_eq!(plan.finished, vec![("Upgrade", 60.0)]);
    assert!(reasons(&plan).contains(&REASON_UPGRADED));
}

#[test]
fn addons_converge_and_drift_is_reported() {
    // A declared addon changed: set the addons.
    let mut v = view(Some(ready_status()));
    v.spec.addons[1].version = "5.3".into();
    let plan = decide_at(&v, Observed::Found(&running()), 200);
    let Some(Call::SetAddons { addons, .. }) = &plan.call else {
        panic!("expected set addons, got {:?}", plan.call);
    };
    assert_eq!(addons[1].version, "5.3");
    assert!(reasons(&plan).contains(&REASON_CONVERGING_ADDONS));
    assert!(
        !reasons(&plan).contains(&REASON_DRIFT_DETECTED),
        "a spec change is no drift"
    );

    // An installed addon vanished at the provider: drift, restored.
    let mut cluster = running();
    cluster.addons.remove(0);
    let plan = decide_at(&view(Some(ready_status())), Observed::Found(&cluster), 200);
    assert!(matches!(plan.call, Some(Call::SetAddons { .. })));
    assert!(reasons(&plan).contains(&REASON_DRIFT_DETECTED));
}

#[test]
fn addons_ready_follows_what_the_provider_reports_of_each_addon() {
    let status = ready_status();
    assert_eq!(
        condition(&status, ADDONS_READY),
        ("True", REASON_ADDONS_READY)
    );
    let message = &conditions::find(&status.conditions, ADDONS_READY)
        .expect("set")
        .message;
    assert!(
        message.contains("cluster-autoscaler 1.2.2")
            && message.contains("vpc-block-csi-driver 5.2"),
        "{message}"
    );

    // An addon whose Deployment is not available yet: not ready, saying what it waits for;
    // the cluster itself stays Ready, and Vigil polls until the addon is.
    let mut rolling = running();
    rolling.addons[1].state = AddonState::Installing;
    rolling.addons[1].message = Some("0 of 1 replicas available".into());
    let plan = decide_at(&view(Some(status.clone())), Observed::Found(&rolling), 200);
    assert_eq!(
        condition(&plan.status, ADDONS_READY),
        ("False", REASON_ADDONS_PROGRESSING)
    );
    let message = &conditions::find(&plan.status.conditions, ADDONS_READY)
        .expect("set")
        .message;
    assert!(
        message.contains("vpc-block-csi-driver 5.2 installing (0 of 1 replicas available)"),
        "{message}"
    );
    assert_eq!(
        condition(&plan.status, READY),
        ("True", REASON_CLUSTER_READY)
    );
    assert_eq!(plan.call, None);
    assert_eq!(plan.requeue, Some(Duration::from_secs(2)));
    assert!(plan.events.is_empty());

    // Available again: ready, with an Event.
    let back = decide_at(&view(Some(plan.status)), Observed::Found(&running()), 210);
    assert_eq!(
        condition(&back.status, ADDONS_READY),
        ("True", REASON_ADDONS_READY)
    );
    assert_eq!(reasons(&back), [REASON_ADDONS_READY]);

    // A failed rollout: not ready and Degraded, both naming it.
    let mut failed = running();
    failed.addons[0].state = AddonState::Failed;
    failed.addons[0].message = Some("the rollout exceeded its progress deadline".into());
    let plan = decide_at(&view(Some(status.clone())), Observed::Found(&failed), 200);
    assert_eq!(
        condition(&plan.status, ADDONS_READY),
        ("False", REASON_ADDON_FAILED)
    );
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_ADDON_FAILED)
    );

    // Declared but absent, at another version, or not declared: not ready.
    let mut v = view(Some(status.clone()));
    v.spec.addons[0].version = "1.2.3".into();
    let mut extra = running();
    extra.addons.remove(1);
    extra.addons.push(AddonStatus {
        name: "metrics-server".into(),
        version: "0.7.2".into(),
        state: AddonState::Removing,
        message: None,
    });
    let plan = decide_at(&v, Observed::Found(&extra), 200);
    let message = &conditions::find(&plan.status.conditions, ADDONS_READY)
        .expect("set")
        .message;
    for part in [
        "cluster-autoscaler at 1.2.2, 1.2.3 declared",
        "vpc-block-csi-driver 5.2 not installed yet",
        "metrics-server 0.7.2 being removed",
    ] {
        assert!(message.contains(part), "{part}: {message}");
    }

    // No addons at all: ready.
    let mut v = view(None);
    v.spec.addons.clear();
    let mut bare = running();
    bare.addons.clear();
    let plan = decide_at(&v, Observed::Found(&bare), 200);
    assert_eq!(
        condition(&plan.status, ADDONS_READY),
        ("True", REASON_ADDONS_READY)
    );
}

#[test]
fn a_version_changed_outside_vigil_is_reported_as_drift() {
    let mut cluster = running();
    cluster.master_version = Some("1.28.9".into());
    let plan = decide_at(&view(Some(ready_status())), Observed::Found(&cluster), 300);
    assert_eq!(plan.call, None);
    assert_eq!(reasons(&plan), [REASON_DRIFT_DETECTED]);
    assert_eq!(plan.status.master_version.as_deref(), Some("1.28.9"));
    // An upgrade of Vigil's own is no drift.
    let mut v = view(Some(ready_status()));
    v.spec.kube_version = "1.29".into();
    let started = decide_at(&v, Observed::Found(&running()), 200);
    let mut upgraded = running();
    upgraded.kube_version = "1.29".into();
    upgraded.master_version = Some("1.29.0".into());
    let plan = decide_at(
        &view_with(v, started.status),
        Observed::Found(&upgraded),
        260,
    );
    assert!(!reasons(&plan).contains(&REASON_DRIFT_DETECTED));
}

#[test]
fn a_refused_request_is_a_condition_and_is_not_repeated_for_the_generation() {
    let mut v = view(Some(ready_status()));
    v.spec.addons.push(SpecAddon {
        name: "flux-capacitor".into(),
        version: "1.0".into(),
    });
    v.generation = Some(2);
    let first = decide_at(&v, Observed::Found(&running()), 200);
    assert!(matches!(first.call, Some(Call::SetAddons { .. })));
    let refused = decide(&Inputs {
        cluster: &v,
        observed: Observed::Found(&running()),
        providers: PROVIDERS,
        answered: Some(Answered {
            first: &first,
            answer: Answer::Rejected {
                reason: "UnknownAddon",
                message: "no addon flux-capacitor",
            },
        }),
        settings: &settings(),
        now: at(200),
    });
    assert_eq!(refused.call, None);
    assert_eq!(
        condition(&refused.status, DEGRADED),
        ("True", "UnknownAddon")
    );
    assert!(reasons(&refused).contains(&"UnknownAddon"));
    let rejection = refused.status.rejection.clone().expect("recorded");
    assert_eq!(rejection.observed_generation, Some(2));

    // Next pass, same generation: no request, the condition stays.
    let again = decide_at(
        &view_with(v.clone(), refused.status.clone()),
        Observed::Found(&running()),
        230,
    );
    assert_eq!(again.call, None);
    assert_eq!(condition(&again.status, DEGRADED), ("True", "UnknownAddon"));

    // The spec changes (generation 3): asked again.
    let mut fixed = view_with(v, refused.status);
    fixed.generation = Some(3);
    fixed.spec.addons.pop();
    fixed.spec.addons[0].version = "1.3.0".into();
    let plan = decide_at(&fixed, Observed::Found(&running()), 260);
    assert!(matches!(plan.call, Some(Call::SetAddons { .. })));
    assert_eq!(plan.status.rejection, None);
}

#[test]
fn a_vanished_cluster_is_reported_not_silently_recreated() {
    let plan = decide_at(&view(Some(ready_status())), Observed::Absent, 300);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_CLUSTER_NOT_FOUND)
    );
    assert_eq!(
        condition(&plan.status, READY),
        ("False", REASON_CLUSTER_NOT_FOUND)
    );
}

#[test]
fn paused_makes_no_request_and_says_so() {
    let mut v = view(None);
    v.spec.paused = Some(true);
    let plan = decide_at(&v, Observed::NotAsked, 100);
    assert_eq!(plan.call, None);
    assert_eq!(condition(&plan.status, PAUSED), ("True", REASON_PAUSED));
    assert_eq!(plan.status.phase, Some(Phase::Pending));
    // Unpaused: resumes and creates.
    let mut resumed = view_with(v, plan.status);
    resumed.spec.paused = Some(false);
    let plan = decide_at(&resumed, Observed::Absent, 110);
    assert!(matches!(plan.call, Some(Call::Create(_))));
    assert_eq!(condition(&plan.status, PAUSED), ("False", REASON_RESUMED));
}

#[test]
fn an_unknown_provider_is_a_condition() {
    let mut v = view(None);
    v.spec.provider = Some(vigil_apis::kubernetes_cluster::ProviderRef {
        name: "nowhere".into(),
    });
    let known = ["local".to_owned()];
    let plan = decide(&Inputs {
        cluster: &v,
        observed: Observed::NotAsked,
        providers: &known,
        answered: None,
        settings: &settings(),
        now: at(100),
    });
    assert_eq!(plan.call, None);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_PROVIDER_UNKNOWN)
    );
    let message = &conditions::find(&plan.status.conditions, DEGRADED)
        .expect("set")
        .message;
    assert!(
        message.contains("nowhere") && message.contains("local"),
        "{message}"
    );
}

#[test]
fn immutable_fields_and_foreign_clusters_are_reported() {
    let mut v = view(Some(ready_status()));
    v.spec.env = "prod".into();
    let plan = decide_at(&v, Observed::Found(&running()), 200);
    assert_eq!(plan.call, None);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_IMMUTABLE_FIELD_CHANGED)
    );

    let mut foreign = running();
    foreign.identity.name = "someone-else".into();
    let plan = decide_at(&view(Some(ready_status())), Observed::Found(&foreign), 200);
    assert_eq!(plan.call, None);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_IDENTITY_MISMATCH)
    );
}

#[test]
fn the_provider_changed_in_spec_does_not_move_an_existing_cluster() {
    let mut v = view(Some(ready_status()));
    v.spec.provider = Some(vigil_apis::kubernetes_cluster::ProviderRef {
        name: "bank".into(),
    });
    assert_eq!(v.provider_name(), "local");
    assert_eq!(view(None).provider_name(), "local");
    let mut fresh = view(None);
    fresh.spec.provider = v.spec.provider.clone();
    assert_eq!(fresh.provider_name(), "bank");
}

/// In a cluster the operator's default is `hosted`: a new object without `spec.provider` gets
/// it, one that already has a cluster keeps the provider its status names.
#[test]
fn the_operator_default_applies_to_new_clusters_only() {
    let mut fresh = view(None);
    fresh.default_provider = "hosted".into();
    assert_eq!(fresh.provider_name(), "hosted");
    let mut existing = view(Some(ready_status()));
    existing.default_provider = "hosted".into();
    assert_eq!(existing.provider_name(), "local");
}

#[test]
fn provider_failures_and_outages_are_degraded() {
    let mut failed = running();
    failed.state = ClusterState::Failed;
    failed.message = Some("etcd lost quorum".into());
    let plan = decide_at(&view(Some(ready_status())), Observed::Found(&failed), 200);
    assert_eq!(plan.status.phase, Some(Phase::Failed));
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_CLUSTER_FAILED)
    );

    let (status, events) =
        provider_unavailable(&view(Some(ready_status())), "connection refused", at(200));
    assert_eq!(
        condition(&status, DEGRADED),
        ("True", REASON_PROVIDER_UNAVAILABLE)
    );
    assert_eq!(
        condition(&status, READY).0,
        "True",
        "the cluster itself may be fine"
    );
    assert_eq!(events.len(), 1);
    // Back: Degraded clears.
    let plan = decide_at(&view(Some(status)), Observed::Found(&running()), 260);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("False", REASON_AS_EXPECTED)
    );
}

/// A deletion's first decision, or — given the provider's answer to its delete — the second.
fn deletion(
    view: &ClusterView,
    target: DeletionTarget,
    answer: Option<&DeleteAnswer>,
) -> DeletionPlan {
    let settings = settings();
    let inputs = DeletionInputs {
        cluster: view,
        target,
        answered: None,
        settings: &settings,
        now: at(500),
    };
    let first = decide_deletion(&inputs);
    match answer {
        None => first,
        Some(answer) => decide_deletion(&DeletionInputs {
            answered: Some((&first, answer)),
            ..inputs
        }),
    }
}

#[test]
fn deletion_deletes_at_the_provider_then_releases() {
    let v = view(Some(ready_status()));
    let first = deletion(&v, DeletionTarget::Cluster("c-1".into()), None);
    assert_eq!(first.step, DeletionStep::Delete("c-1".into()));
    assert_eq!(
        condition(&first.status, DELETING),
        ("True", REASON_DELETING)
    );

    let progress = DeleteAnswer::InProgress(Some("stopping the API server".into()));
    let waiting = deletion(&v, DeletionTarget::Cluster("c-1".into()), Some(&progress));
    assert_eq!(waiting.step, DeletionStep::Wait);

    let gone = deletion(
        &v,
        DeletionTarget::Cluster("c-1".into()),
        Some(&DeleteAnswer::Gone),
    );
    assert_eq!(gone.step, DeletionStep::Release);
    assert!(gone.events.iter().any(|e| e.reason == REASON_DELETED));
    // The last status (which the status vault keeps in the tombstone, and restores to an
    // object re-applied under the same name) names no deleted cluster: re-applied, the object
    // provisions anew instead of failing as ClusterNotFound.
    assert_eq!(gone.status.cluster_id, None);
    assert_eq!(gone.status.api_server_url, None);
    assert_eq!(gone.status.master_version, None);

    // A lost create answer left a cluster that the id does not name: found by identity.
    let absent = deletion(&view(None), DeletionTarget::Absent, None);
    assert_eq!(absent.step, DeletionStep::Release);
}

#[test]
fn a_refused_delete_keeps_the_finalizer_and_says_why() {
    let v = view(Some(ready_status()));
    let refused = DeleteAnswer::Refused("DeleteRefused".into(), "cluster is protected".into());
    let plan = deletion(&v, DeletionTarget::Cluster("c-1".into()), Some(&refused));
    assert_eq!(plan.step, DeletionStep::Wait);
    assert_eq!(condition(&plan.status, DELETING), ("True", "DeleteRefused"));
    assert_eq!(condition(&plan.status, DEGRADED), ("True", "DeleteRefused"));
    let message = &conditions::find(&plan.status.conditions, DELETING)
        .expect("set")
        .message;
    assert!(message.contains("cluster is protected"), "{message}");
}

#[test]
fn orphan_and_paused_deletions_make_no_provider_call() {
    let mut v = view(Some(ready_status()));
    v.spec.deletion_policy = Some(DeletionPolicy::Orphan);
    let plan = deletion(&v, DeletionTarget::ProviderUnknown, None);
    assert_eq!(plan.step, DeletionStep::Release);
    assert!(plan.events.iter().any(|e| e.reason == REASON_ORPHANED));
    assert_eq!(
        plan.status.cluster_id.as_deref(),
        Some("c-1"),
        "an orphaned cluster's id stays, for the object re-applied to adopt it"
    );

    let mut v = view(Some(ready_status()));
    v.spec.paused = Some(true);
    let plan = deletion(&v, DeletionTarget::ProviderUnknown, None);
    assert_eq!(plan.step, DeletionStep::Wait);
    assert_eq!(
        condition(&plan.status, DELETING),
        ("True", REASON_DELETE_WAITS)
    );

    let v = view(Some(ready_status()));
    let plan = deletion(&v, DeletionTarget::ProviderUnknown, None);
    assert_eq!(plan.step, DeletionStep::Wait);
    assert_eq!(
        condition(&plan.status, DELETING),
        ("True", REASON_PROVIDER_UNKNOWN)
    );
}

/// The decision on the provider's answer to `first`'s request.
fn decide_answer(view: &ClusterView, first: &Plan, answer: Answer<'_>, now: i64) -> Plan {
    decide(&Inputs {
        cluster: view,
        observed: Observed::Absent,
        providers: PROVIDERS,
        answered: Some(Answered { first, answer }),
        settings: &settings(),
        now: at(now),
    })
}

#[test]
fn an_accepted_create_records_the_new_id_at_once_and_asks_nothing_more() {
    let v = view(None);
    let first = decide_at(&v, Observed::Absent, 100);
    assert!(matches!(first.call, Some(Call::Create(_))));
    let mut provisioning = running();
    provisioning.state = ClusterState::Provisioning;
    provisioning.kubeconfig = None;
    let plan = decide_answer(&v, &first, Answer::Accepted(&provisioning), 101);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.cluster_id.as_deref(), Some("c-1"));
    assert_eq!(plan.status.phase, Some(Phase::Provisioning));
    assert_eq!(
        reasons(&plan),
        vec![REASON_CREATING],
        "the first decision's Events, and no adoption"
    );
    assert_eq!(plan.requeue, Some(settings().poll_interval));
    assert_eq!(plan.kubeconfig, None);

    // A provider that creates at once: ready, with the kubeconfig for the Secret.
    let plan = decide_answer(&v, &first, Answer::Accepted(&running()), 101);
    assert_eq!(plan.call, None, "the addons wait for the next pass");
    assert_eq!(plan.status.phase, Some(Phase::Ready));
    assert_eq!(plan.kubeconfig.as_deref(), Some("apiVersion: v1"));
    assert!(reasons(&plan).contains(&REASON_PROVISIONED));
}

#[test]
fn an_upgrade_answered_done_reports_upgraded() {
    let mut v = view(Some(ready_status()));
    v.spec.kube_version = "1.29".into();
    v.generation = Some(2);
    let first = decide_at(&v, Observed::Found(&running()), 100);
    assert!(matches!(first.call, Some(Call::Upgrade { .. })));
    let mut upgraded = running();
    upgraded.kube_version = "1.29".into();
    upgraded.master_version = Some("1.29.0".into());
    let plan = decide_answer(&v, &first, Answer::Accepted(&upgraded), 130);
    assert_eq!(
        reasons(&plan),
        vec![REASON_UPGRADING, REASON_UPGRADED],
        "the upgrade the first decision started is seen to end"
    );
    assert_eq!(plan.finished, vec![(OP_UPGRADE, 30.0)]);
    assert_eq!(
        condition(&plan.status, UPGRADING),
        ("False", REASON_UP_TO_DATE)
    );
}

#[test]
fn no_answer_or_no_look_is_degraded_and_keeps_the_rest() {
    let v = view(Some(ready_status()));
    let plan = decide_at(&v, Observed::Unavailable("connection refused"), 100);
    assert_eq!(plan.call, None);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_PROVIDER_UNAVAILABLE)
    );
    assert_eq!(plan.status.phase, ready_status().phase);
    assert_eq!(plan.kubeconfig, None);
    assert_eq!(reasons(&plan), vec![REASON_PROVIDER_UNAVAILABLE]);

    let fresh = view(None);
    let first = decide_at(&fresh, Observed::Absent, 100);
    let plan = decide_answer(&fresh, &first, Answer::Unavailable("timed out"), 101);
    assert_eq!(plan.call, None);
    assert_eq!(plan.status.cluster_id, None);
    assert_eq!(
        reasons(&plan),
        vec![REASON_CREATING, REASON_PROVIDER_UNAVAILABLE]
    );
}

#[test]
fn a_deletion_asks_the_provider_only_when_it_deletes_and_polls_while_it_holds_the_cluster() {
    let v = view(Some(ready_status()));
    assert_eq!(
        deletion_lookup(&v, true),
        DeletionLookup::Known(DeletionTarget::Cluster("c-1".into()))
    );
    assert_eq!(
        deletion_lookup(&v, false),
        DeletionLookup::Known(DeletionTarget::ProviderUnknown)
    );
    assert_eq!(
        deletion_lookup(&view(None), true),
        DeletionLookup::FindByIdentity
    );
    let mut orphan = view(None);
    orphan.spec.deletion_policy = Some(DeletionPolicy::Orphan);
    assert_eq!(
        deletion_lookup(&orphan, true),
        DeletionLookup::Known(DeletionTarget::ProviderUnknown)
    );

    let progress = DeleteAnswer::InProgress(None);
    let waiting = deletion(&v, DeletionTarget::Cluster("c-1".into()), Some(&progress));
    assert_eq!(waiting.requeue, Some(settings().poll_interval));
    assert_eq!(reasons_of(&waiting.events), vec![REASON_DELETING]);
    let unknown = deletion(&v, DeletionTarget::ProviderUnknown, None);
    assert_eq!(unknown.requeue, None, "nothing to poll");

    let silent = DeleteAnswer::Unavailable("connection refused".into());
    let plan = deletion(&v, DeletionTarget::Cluster("c-1".into()), Some(&silent));
    assert_eq!(plan.step, DeletionStep::Wait);
    assert_eq!(
        condition(&plan.status, DEGRADED),
        ("True", REASON_PROVIDER_UNAVAILABLE)
    );
    let lost = deletion(
        &view(None),
        DeletionTarget::Unavailable("down".into()),
        None,
    );
    assert_eq!(lost.step, DeletionStep::Wait);
    assert_eq!(
        condition(&lost.status, DEGRADED),
        ("True", REASON_PROVIDER_UNAVAILABLE)
    );
}

fn reasons_of(events: &[EventNote]) -> Vec<&str> {
    events.iter().map(|e| e.reason.as_str()).collect()
}
