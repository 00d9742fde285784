//! The whole operator under faults, as production clusters fail (issue 25).
//!
//! Two `vigil run` replicas elect a leader and host all five controllers: CriticalService,
//! ConfigMapSync, the status vault (on a directory, covering KubernetesClusters),
//! KafkaTopic (on the test broker, through a proxy the test can cut) and KubernetesCluster (on
//! the `local` provider). A seeded random workload runs on every kind for `VIGIL_CHAOS_SECS`
//! (default 30): creates, updates, deletes, hand edits of what Vigil owns, and changes made while
//! no operator runs. Meanwhile, each in its own slot and in a seeded order: the leader is
//! SIGKILLed (and restarted), both replicas are SIGKILLed (and restarted a few seconds later),
//! the API server goes away (killed and started again: on kube-apiserver through
//! `../shared/kube/fault.sh`, on the sandbox as a restart, which loses its watch history and
//! answers as a starting kube-apiserver does), and the broker goes away (the proxy cut).
//!
//! Then the invariants (`invariants.rs`) are computed from what the cluster, the broker, the
//! vault directory, the local clusters and the processes hold (`observe.rs`) until they all
//! hold; the test prints how long that took after the last fault. A failure lists every
//! violation with the seed, the object, what was expected and what was seen.
//!
//! A failure also writes a report (`report.rs`): for each object a violation names, its
//! conditions and state (a KubernetesCluster's cluster at the provider and vault history too),
//! and its timeline — the workload's operations on it, the faults, its Events and the replicas'
//! log lines naming it, timed from the run's start — then the whole schedule of the workload
//! and the faults. It goes to `$VIGIL_CHAOS_REPORT_DIR/<seed>/report.txt` if that variable is
//! set, else `<target>/chaos-failures/<seed>/report.txt` (the Cargo target directory), with the
//! replicas' logs, and survives the test's cleanup; the panic message carries its main part
//! (the first objects' state and latest timeline lines), so CI's log alone explains the
//! failure. A run that passes prints nothing more.
//!
//! `VIGIL_CHAOS_SEED` replays a run (the seed is printed; random by default). Needs a
//! Kafka-protocol broker (`VIGIL_TEST_KAFKA_BOOTSTRAP`, from `.ci/kafka-broker start`): without
//! one it says so and passes. On a real cluster (`VIGIL_TEST_KUBECONFIG`) the API-server outage
//! needs the cluster's `up.sh` WORKDIR (`VIGIL_TEST_KUBE_WORKDIR`, set by CI's stage 2); without
//! it the outage is skipped, saying so.

mod invariants;
mod observe;
mod operators;
mod report;
mod workload;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodTemplate};
use kube::CustomResourceExt as _;
use kube::ResourceExt as _;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::json;
use vigil_apis::{ConfigMapSync, CriticalService, KubernetesCluster, StatusBackupPolicy, Topic};
use vigil_kafka::{Admin, ClientConfig};
use vigil_provider::local::{LocalConfig, LocalProvider};
use vigil_testenv::{ControlPlaneFault, TestEnv, TestEnvOptions};

use invariants::Violation;
use observe::Observer;
use operators::{BrokerProxy, Replica, ReplicaConfig};
use report::{Clock, FaultSpan};
use workload::Workload;

const DEFAULT_SECS: u64 = 30;
/// How long the world may take to satisfy every invariant after the workload and faults end.
const CONVERGE_TIMEOUT: Duration = Duration::from_secs(120);
/// How long the invariants must keep holding to count as converged.
const HOLD_FOR: Duration = Duration::from_secs(1);
const FOREIGN_TOPICS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    KillLeader,
    KillBoth,
    ApiOutage,
    BrokerOutage,
}

fn leader(holder: Option<&str>, replicas: &[Replica]) -> Option<usize> {
    let holder = holder?;
    replicas
        .iter()
        .position(|r| holder.starts_with(&format!("{}_", r.name)))
}

async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt("vigil-leader")
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

fn obj<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid manifest")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_operator_converges_after_faults() {
    let Ok(bootstrap) = std::env::var("VIGIL_TEST_KAFKA_BOOTSTRAP") else {
        eprintln!(
            "note: VIGIL_TEST_KAFKA_BOOTSTRAP not set; skipping the chaos test (eval \"$(.ci/kafka-broker start)\")"
        );
        return;
    };
    let seed = std::env::var("VIGIL_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(rand::random::<u64>);
    let secs = std::env::var("VIGIL_CHAOS_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SECS);
    eprintln!("chaos: seed {seed} (VIGIL_CHAOS_SEED={seed} replays it), workload {secs} s");
    let mut env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("test environment");
    let client = env.client();
    let ns = env.namespace().to_owned();
    let api_outage = env.can_inject(ControlPlaneFault::ApiServerKilled);
    if !api_outage {
        eprintln!(
            "chaos: the API-server outage is skipped (a real cluster needs VIGIL_TEST_KUBE_WORKDIR, its up.sh WORKDIR); every other fault runs"
        );
    }
    let dir = std::env::temp_dir().join(format!("vigil-chaos-{ns}"));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = env.kubeconfig_path().expect("kubeconfig").to_owned();

    // The kinds, the namespaces, and what the workload starts from.
    for crd in [
        CriticalService::crd(),
        ConfigMapSync::crd(),
        StatusBackupPolicy::crd(),
        vigil_apis::crds::topic(),
        vigil_apis::crds::kubernetes_cluster(),
    ] {
        vigil_testenv::install_crd(&client, &crd)
            .await
            .expect("CRD served");
    }
    let destinations: Vec<String> = (1..=3).map(|i| format!("{ns}-d{i}")).collect();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    for d in &destinations {
        namespaces
            .create(
                &PostParams::default(),
                &obj(
                    json!({"metadata": {"name": d, "labels": {vigil_testenv::TEST_LABEL: "true"}}}),
                ),
            )
            .await
            .expect("destination namespace");
    }
    Api::<PodTemplate>::namespaced(client.clone(), &ns)
        .create(
            &PostParams::default(),
            &obj(json!({"metadata": {"name": "critical-service-pod-template"},
                "template": {"spec": {"containers": [{"name": "fallback", "image": "nginx:1.27"}]}}})),
        )
        .await
        .expect("pod template");
    let cs_name = format!("chaos-{ns}");
    Api::<CriticalService>::all(client.clone())
        .create(
            &PostParams::default(),
            &obj(
                json!({"apiVersion": "mycrd.com/v1", "kind": "CriticalService",
                "metadata": {"name": cs_name},
                "spec": {"namespace": ns, "matchLabels": [{"key": "tier", "value": "critical"}]}}),
            ),
        )
        .await
        .expect("CriticalService");
    env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<CriticalService>(&()),
        &cs_name,
    );
    let policy = format!("chaos-{ns}");
    Api::<StatusBackupPolicy>::all(client.clone())
        .create(
            &PostParams::default(),
            &obj(
                json!({"apiVersion": "vigil.dev/v1", "kind": "StatusBackupPolicy",
                "metadata": {"name": policy},
                "spec": {"resources": [{"group": "vigil.dev", "kind": "KubernetesCluster"}],
                         "namespaces": [ns]}}),
            ),
        )
        .await
        .expect("StatusBackupPolicy");
    env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<StatusBackupPolicy>(&()),
        &policy,
    );
    for i in 0..workload::SYNCS {
        Api::<ConfigMap>::namespaced(client.clone(), &ns)
            .create(
                &PostParams::default(),
                &obj(json!({"metadata": {"name": format!("cm-{i}")}, "data": {"v": "0"}})),
            )
            .await
            .expect("source ConfigMap");
    }
    let prefix = ns.clone();
    let foreign_prefix = format!("{ns}-foreign.");
    let admin = Arc::new(Admin::new(ClientConfig::plaintext(bootstrap.clone())));
    for i in 0..FOREIGN_TOPICS {
        let config: BTreeMap<String, String> =
            [("retention.ms".to_owned(), format!("{}", 100_000 + i))].into();
        admin
            .create_topic(&format!("{foreign_prefix}f{i}"), 1 + i as i32, 1, &config)
            .await
            .expect("a topic Vigil does not manage");
    }

    let mut proxy = BrokerProxy::start(bootstrap.clone()).await;
    let config = ReplicaConfig {
        kubeconfig: kubeconfig.clone(),
        namespace: ns.clone(),
        watched: std::iter::once(ns.clone())
            .chain(destinations.iter().cloned())
            .collect(),
        vault_dir: dir.join("vault"),
        clusters_dir: dir.join("clusters"),
        logs: dir.clone(),
    };
    let observer = Observer {
        client: client.clone(),
        ns: ns.clone(),
        destinations: destinations.clone(),
        prefix: prefix.clone(),
        foreign_prefix: foreign_prefix.clone(),
        critical_service: cs_name.clone(),
        policy: policy.clone(),
        admin: Admin::new(ClientConfig::plaintext(bootstrap.clone())),
        vault_dir: config.vault_dir.clone(),
        clusters_dir: config.clusters_dir.clone(),
        foreign_before: BTreeMap::new(),
    };
    let foreign_before = observer
        .world(&BTreeMap::new(), &mut [])
        .await
        .map(|w| w.foreign_now)
        .unwrap_or_default();
    assert_eq!(
        foreign_before.len(),
        FOREIGN_TOPICS,
        "the foreign topics, as the broker holds them"
    );
    let observer = Observer {
        foreign_before: foreign_before.clone(),
        ..observer
    };

    let mut replicas = vec![Replica::new("chaos-a"), Replica::new("chaos-b")];
    for r in &mut replicas {
        r.start(&config);
    }
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);
    let started = Instant::now();
    while holder(&leases).await.is_none() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no replica took the Lease within 30 s (seed {seed}); logs in {}",
            dir.display()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The workload, in a task of its own, while this task brings the faults.
    let clock = Clock::start();
    let operators_down = Arc::new(AtomicBool::new(false));
    let mut work = Workload::new(
        client.clone(),
        ns.clone(),
        destinations.clone(),
        prefix.clone(),
        proxy.addr.to_string(),
        admin.clone(),
        seed,
        operators_down.clone(),
        clock.t0,
    );
    let deadline = Instant::now() + Duration::from_secs(secs);
    let workload = tokio::spawn(async move {
        while Instant::now() < deadline {
            work.step().await;
            let pause = work.rng.random_range(10..60);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
        work
    });

    let mut rng = StdRng::seed_from_u64(seed ^ 0xfa17);
    let mut faults = vec![Fault::KillLeader, Fault::KillBoth, Fault::BrokerOutage];
    if api_outage {
        faults.push(Fault::ApiOutage);
    }
    for i in (1..faults.len()).rev() {
        faults.swap(i, rng.random_range(0..=i));
    }
    let slot = Duration::from_secs(secs) / faults.len() as u32;
    let run_started = clock.t0;
    let mut survived = Vec::new();
    let mut played: Vec<FaultSpan> = Vec::new();
    let mut last_fault_end = Instant::now();
    for (k, fault) in faults.iter().enumerate() {
        let at = slot * k as u32 + slot.mul_f64(rng.random_range(0.1..0.4));
        tokio::time::sleep_until((run_started + at).into()).await;
        let down = Duration::from_millis(rng.random_range(2_000..4_000));
        let fault_started = run_started.elapsed();
        match fault {
            Fault::KillLeader => {
                let holder = holder(&leases).await;
                let Some(i) = leader(holder.as_deref(), &replicas) else {
                    panic!(
                        "no replica leads before the leader kill (holder {holder:?}, seed {seed})"
                    );
                };
                replicas[i].kill();
                let dead = replicas[i].name.clone();
                tokio::time::sleep(down / 2).await;
                replicas[i].start(&config);
                survived.push(format!("SIGKILL of the leader {dead}"));
            }
            Fault::KillBoth => {
                operators_down.store(true, Ordering::SeqCst);
                for r in &mut replicas {
                    r.kill();
                }
                tokio::time::sleep(down).await;
                for r in &mut replicas {
                    r.start(&config);
                }
                operators_down.store(false, Ordering::SeqCst);
                survived.push(format!(
                    "SIGKILL of both replicas, {down:?} without an operator"
                ));
            }
            Fault::ApiOutage => {
                // A restarted API server has lost its watch history (resuming watches get 410)
                // and answers 503s and failing health checks while it starts.
                env.inject(ControlPlaneFault::ApiServerKilled, down)
                    .await
                    .unwrap_or_else(|e| panic!("the API-server outage (seed {seed}): {e}"));
                survived.push(format!(
                    "API server killed for {down:?}, started again (watch history lost)"
                ));
            }
            Fault::BrokerOutage => {
                proxy.cut();
                tokio::time::sleep(down).await;
                proxy.restore().await;
                survived.push(format!("broker outage of {down:?}"));
            }
        }
        last_fault_end = Instant::now();
        played.push(FaultSpan {
            start: fault_started,
            end: run_started.elapsed(),
            what: survived.last().cloned().unwrap_or_default(),
        });
    }
    let mut work = workload.await.expect("the workload task");
    work.reapply_orphans(Duration::from_secs(30)).await;
    let workload_end = Instant::now();

    // Converge: every invariant holds, and keeps holding.
    let mut held_since: Option<Instant> = None;
    let mut last: Vec<Violation> = Vec::new();
    let mut read_error = String::new();
    let converged = loop {
        match observer.world(&work.reapplied, &mut replicas).await {
            Ok(world) => {
                last = invariants::check(&world);
                read_error.clear();
            }
            Err(e) => read_error = format!("{e:#}"),
        }
        if last.is_empty() && read_error.is_empty() {
            let since = *held_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= HOLD_FOR {
                break true;
            }
        } else {
            held_since = None;
        }
        if workload_end.elapsed() > CONVERGE_TIMEOUT {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let held_from = held_since.unwrap_or_else(Instant::now);
    let summary = format!(
        "seed {seed}: {} operations ({:?}), {} failed while something was down, {} made while no operator ran; faults survived: {survived:?}",
        work.tally.done.values().sum::<usize>(),
        work.tally.done,
        work.tally.failed,
        work.tally.while_down,
    );
    // What explains a failure, read before the cleanup deletes it.
    let failure = if converged {
        None
    } else {
        let inputs = report::Inputs {
            seed,
            client: &client,
            ns: &ns,
            clock,
            summary: &summary,
            violations: &last,
            read_error: &read_error,
            schedule: &work.schedule,
            faults: &played,
            replica_logs: replicas
                .iter()
                .map(|r| (r.name.clone(), r.log(&config)))
                .collect(),
            clusters_dir: &config.clusters_dir,
            vault_dir: &config.vault_dir,
            run_dir: &dir,
        };
        Some(report::write(&inputs).await)
    };
    if converged {
        eprintln!(
            "chaos: {summary}\nchaos: every invariant holds {:?} after the last fault ended, {:?} after the workload's last change (replica starts: {})",
            held_from.duration_since(last_fault_end),
            held_from.duration_since(workload_end),
            replicas
                .iter()
                .map(|r| format!("{} {}", r.name, r.starts))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    // Clean up with the operators still running: finalizers need them.
    let cleaning = Instant::now();
    cleanup(&client, &ns, &work, &admin, &foreign_prefix).await;
    eprintln!(
        "chaos: objects and topics cleaned up in {:?}",
        cleaning.elapsed()
    );
    for r in &mut replicas {
        r.kill();
    }
    let provider = LocalProvider::new(LocalConfig::new(
        &config.clusters_dir,
        env!("CARGO_BIN_EXE_vigil"),
    ))
    .expect("local provider");
    provider.kill_all();
    if let Some((_, explained)) = failure {
        let tails: Vec<String> = replicas
            .iter()
            .map(|r| format!("{} (last lines):\n    {}", r.name, r.tail(&config, 15)))
            .collect();
        for d in &destinations {
            let _ = namespaces.delete(d, &DeleteParams::background()).await;
        }
        env.cleanup().await;
        panic!(
            "chaos: not converged {CONVERGE_TIMEOUT:?} after the workload (seed {seed}); {} violations\n{explained}\n{}\nlogs in {}",
            last.len(),
            tails.join("\n"),
            dir.display()
        );
    }
    for d in &destinations {
        let _ = namespaces.delete(d, &DeleteParams::background()).await;
    }
    env.cleanup().await;
    eprintln!("chaos: all cleaned up in {:?}", cleaning.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// Deletes what has finalizers while the operators still run, then the test's topics.
async fn cleanup(client: &kube::Client, ns: &str, work: &Workload, admin: &Admin, foreign: &str) {
    let lp = ListParams::default();
    let dp = DeleteParams::default();
    let clusters: Api<KubernetesCluster> = Api::namespaced(client.clone(), ns);
    let topics: Api<Topic> = Api::namespaced(client.clone(), ns);
    let syncs: Api<ConfigMapSync> = Api::namespaced(client.clone(), ns);
    let _ = clusters.delete_collection(&dp, &lp).await;
    let _ = topics.delete_collection(&dp, &lp).await;
    let _ = syncs.delete_collection(&dp, &lp).await;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(60) {
        let left = clusters.list(&lp).await.map_or(1, |l| l.items.len())
            + topics.list(&lp).await.map_or(1, |l| l.items.len())
            + syncs.list(&lp).await.map_or(1, |l| l.items.len());
        if left == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    for name in work.topic_names() {
        let _ = admin.delete_topic(&name).await;
    }
    for i in 0..FOREIGN_TOPICS {
        let _ = admin.delete_topic(&format!("{foreign}f{i}")).await;
    }
    // Whatever still holds a finalizer (nothing, when the operators did their work) must not
    // keep the namespace from going on a shared cluster.
    strip_finalizers(&clusters).await;
    strip_finalizers(&topics).await;
    strip_finalizers(&syncs).await;
}

async fn strip_finalizers<K>(api: &Api<K>)
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let items = api
        .list(&ListParams::default())
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for name in items.iter().map(|o| o.name_any()) {
        let patch = json!({"metadata": {"finalizers": null}});
        let _ = api
            .patch(
                &name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await;
    }
}
