//! The operator killed and restarted at arbitrary points in a churn of 200 Services: afterwards
//! exactly one fallback pod per lame covered Service, none elsewhere.
//!
//! One `vigil sandbox` (with its simulated kubelet) and one `vigil run` at a time. A few tasks churn
//! 200 Services (created, deleted, re-created, relabelled critical <-> not) and their pods (added,
//! deleted, made not ready and ready again) in a deterministic pseudo-random order, while the
//! operator is SIGKILLed three times and SIGTERMed once at arbitrary moments and each time restarted
//! as a new process. Once the churn stops, the cluster must settle with the last operator running:
//! every existing Service labelled `tier: critical` without a ready real pod has exactly one Running
//! `service-watcher-<service>` pod of Vigil's, and Vigil has no pod for anything else.
//!
//! `VIGIL_CHURN_SEED` replays another mix (the failure message names the seed in use).

use crate::support;

use support::{Proc, client, critical_service_setup, json, spawn_sandbox};

use std::collections::{BTreeMap, BTreeSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use vigil_apis::CriticalService;

const NS: &str = "churn";
const SERVICES: usize = 200;
/// Concurrent churn tasks; task `w` owns the Services whose index is `w` modulo this.
const WORKERS: usize = 4;
/// Random operations per task after it has created its Services.
const OPS_PER_WORKER: usize = 110;
/// Longest pause between two operations of one task.
const MAX_PAUSE_MS: u64 = 35;
const DEFAULT_SEED: u64 = 0x5eed_c0ff_ee15_600d;
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const SERVICE_LABEL: &str = "vigil.dev/service";
const KUBELET_STATE: &str = "kubelet.vigil.dev/state";
const CHURN_TIMEOUT: Duration = Duration::from_secs(25);
const SETTLE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the settled state must hold unchanged.
const SETTLED_FOR: Duration = Duration::from_secs(1);
const SIGTERM_TIMEOUT: Duration = Duration::from_secs(10);

/// A seeded linear congruential generator (Knuth's MMIX constants): the same seed, the same churn.
struct Lcg(u64);

impl Lcg {
    fn new(seed: u64) -> Self {
        let mut lcg = Self(seed);
        lcg.next();
        lcg
    }

    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }

    /// Uniform enough in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
}

/// One `vigil run`, its log in `log`.
fn spawn_operator(kubeconfig: &Path, log: &Path) -> Proc {
    let log = File::create(log).expect("operator log file");
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("POD_NAME", "vigil-churn")
        .env("POD_NAMESPACE", NS)
        .args(["run", "--leader-elect", "false", "--namespaces", NS])
        .args(["--controllers", "criticalservice"])
        .args(["--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

/// SIGTERM, then the exit status, or `None` if the process is still running after
/// [`SIGTERM_TIMEOUT`] (in-flight work is milliseconds here; `vigil run` waits up to its
/// `--shutdown-timeout`, 25 s, for work that does not finish).
async fn terminate(proc: &mut Proc) -> Option<ExitStatus> {
    let pid = proc.0.id().to_string();
    let sent = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(sent.success(), "kill -TERM {pid}: {sent}");
    let started = Instant::now();
    loop {
        if let Some(status) = proc.0.try_wait().expect("try_wait") {
            return Some(status);
        }
        if started.elapsed() > SIGTERM_TIMEOUT {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn service_name(i: usize) -> String {
    format!("svc-{i}")
}

fn tier(critical: bool) -> &'static str {
    if critical { "critical" } else { "normal" }
}

/// What one churn task knows of the Services it owns (nobody else writes them).
struct Owned {
    index: usize,
    exists: bool,
    critical: bool,
    /// Its real pods that are not being deleted, and whether each is held NotReady.
    pods: Vec<(String, bool)>,
}

/// One churn task: its API handles, its generator and the shared operation counter.
struct Churner {
    services: Api<Service>,
    pods: Api<Pod>,
    rng: Lcg,
    ops: Arc<AtomicUsize>,
    next_pod: usize,
    worker: usize,
}

impl Churner {
    fn done(&self) {
        self.ops.fetch_add(1, Ordering::SeqCst);
    }

    async fn pause(&mut self) {
        let ms = self.rng.below(MAX_PAUSE_MS as usize + 1) as u64;
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }

    async fn create_service(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let name = service_name(svc.index);
        let body = serde_json::json!({"metadata": {"name": name, "labels": {"tier": tier(svc.critical)}},
            "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}});
        self.services
            .create(&PostParams::default(), &json(body))
            .await
            .with_context(|| format!("creating Service {name}"))?;
        svc.exists = true;
        self.done();
        Ok(())
    }

    async fn delete_service(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let name = service_name(svc.index);
        self.services
            .delete(&name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting Service {name}"))?;
        svc.exists = false;
        self.done();
        Ok(())
    }

    async fn flip_label(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let name = service_name(svc.index);
        let critical = !svc.critical;
        let patch = serde_json::json!({"metadata": {"labels": {"tier": tier(critical)}}});
        self.services
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("relabelling Service {name}"))?;
        svc.critical = critical;
        self.done();
        Ok(())
    }

    async fn add_pod(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let app = service_name(svc.index);
        let name = format!("{app}-w{}-p{}", self.worker, self.next_pod);
        self.next_pod += 1;
        let body = serde_json::json!({"metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}});
        self.pods
            .create(&PostParams::default(), &json(body))
            .await
            .with_context(|| format!("creating pod {name}"))?;
        svc.pods.push((name, false));
        self.done();
        Ok(())
    }

    async fn delete_pod(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let (name, _) = svc.pods.swap_remove(self.rng.below(svc.pods.len()));
        self.pods
            .delete(&name, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting pod {name}"))?;
        self.done();
        Ok(())
    }

    async fn toggle_readiness(&mut self, svc: &mut Owned) -> anyhow::Result<()> {
        let at = self.rng.below(svc.pods.len());
        let (name, held) = svc.pods[at].clone();
        let state = (!held).then_some("NotReady");
        let patch = serde_json::json!({"metadata": {"annotations": {KUBELET_STATE: state}}});
        self.pods
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("setting the readiness of pod {name}"))?;
        svc.pods[at].1 = !held;
        self.done();
        Ok(())
    }

    /// Creates the task's Services (and a ready pod for about half of them), then churns.
    async fn run(mut self, critical: BTreeSet<usize>) -> anyhow::Result<()> {
        let mut owned: Vec<Owned> = (self.worker..SERVICES)
            .step_by(WORKERS)
            .map(|index| Owned {
                index,
                exists: false,
                critical: critical.contains(&index),
                pods: Vec::new(),
            })
            .collect();
        for svc in &mut owned {
            self.create_service(svc).await?;
            if self.rng.chance(50) {
                self.add_pod(svc).await?;
            }
            self.pause().await;
        }
        for _ in 0..OPS_PER_WORKER {
            let at = self.rng.below(owned.len());
            let svc = &mut owned[at];
            let roll = self.rng.below(100);
            match roll {
                0..20 if svc.exists => self.flip_label(svc).await?,
                0..35 if svc.exists => self.delete_service(svc).await?,
                0..35 => {
                    if self.rng.chance(50) {
                        svc.critical = !svc.critical;
                    }
                    self.create_service(svc).await?;
                }
                65..85 if !svc.pods.is_empty() => self.delete_pod(svc).await?,
                85..100 if !svc.pods.is_empty() => self.toggle_readiness(svc).await?,
                _ => self.add_pod(svc).await?,
            }
            self.pause().await;
        }
        Ok(())
    }
}

/// How the operator is stopped at one moment of the churn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Kill,
    Term,
}

/// Stop the operator once this many operations are done, stay down a while, start a new one.
#[derive(Debug, Clone, Copy)]
struct Moment {
    after_ops: usize,
    stop: Stop,
    down: Duration,
}

/// Three SIGKILLs and one SIGTERM (in a random position), one in each quarter of the operations
/// every seed is sure to make (the task's Services and its random operations).
fn moments(rng: &mut Lcg) -> Vec<Moment> {
    let first = 20;
    let last = (SERVICES + WORKERS * OPS_PER_WORKER) * 9 / 10;
    let span = (last - first) / 4;
    let term_at = rng.below(4);
    (0..4)
        .map(|k| Moment {
            after_ops: first + k * span + rng.below(span),
            stop: if k == term_at { Stop::Term } else { Stop::Kill },
            down: Duration::from_millis(rng.below(400) as u64),
        })
        .collect()
}

/// Is the pod's `Ready` condition `True`?
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// What the cluster looks like against what it should look like.
#[derive(Debug, Default)]
struct Verdict {
    services: usize,
    critical: usize,
    /// Existing, labelled critical, no ready real pod: each wants exactly one fallback.
    lame_covered: BTreeSet<String>,
    fallbacks: usize,
    problems: Vec<String>,
}

impl Verdict {
    fn summary(&self) -> String {
        let shown: Vec<&str> = self.problems.iter().take(40).map(String::as_str).collect();
        format!(
            "{} Services exist, {} labelled critical, {} of those lame (want one fallback each), {} pods of Vigil's; {} problems:\n  {}{}",
            self.services,
            self.critical,
            self.lame_covered.len(),
            self.fallbacks,
            self.problems.len(),
            shown.join("\n  "),
            if self.problems.len() > shown.len() {
                "\n  ..."
            } else {
                ""
            }
        )
    }
}

async fn verdict(services: &Api<Service>, pods: &Api<Pod>) -> anyhow::Result<Verdict> {
    let services = services.list(&ListParams::default()).await?.items;
    let pods = pods.list(&ListParams::default()).await?.items;
    let mut verdict = Verdict {
        services: services.len(),
        ..Verdict::default()
    };
    // Why a Service wants no fallback, by name; the lame covered ones want one.
    let mut why_not: BTreeMap<String, &str> = (0..SERVICES)
        .map(|i| (service_name(i), "was deleted"))
        .collect();
    let label = |pod: &Pod, key: &str| {
        pod.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key).cloned())
    };
    let vigils = |pod: &Pod| label(pod, MANAGED_BY).as_deref() == Some("vigil");
    for svc in &services {
        let name = svc.metadata.name.clone().unwrap_or_default();
        let critical = svc
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("tier"))
            .is_some_and(|t| t == "critical");
        let real_ready = pods.iter().any(|p| {
            !vigils(p)
                && p.metadata.deletion_timestamp.is_none()
                && label(p, "app").as_deref() == Some(name.as_str())
                && is_ready(p)
        });
        match (critical, real_ready) {
            (true, false) => {
                why_not.remove(&name);
                verdict.lame_covered.insert(name);
            }
            (true, true) => {
                why_not.insert(name, "is healthy");
            }
            (false, _) => {
                why_not.insert(name, "is not critical");
            }
        }
        verdict.critical += usize::from(critical);
    }
    let mut by_service: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for pod in pods.iter().filter(|p| vigils(p)) {
        verdict.fallbacks += 1;
        let name = pod.metadata.name.clone().unwrap_or_default();
        let service = label(pod, SERVICE_LABEL).unwrap_or_default();
        by_service.entry(service).or_default().push(name);
    }
    for service in &verdict.lame_covered {
        let want = format!("service-watcher-{service}");
        let pod = pods
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(want.as_str()));
        match pod {
            None => verdict
                .problems
                .push(format!("{service} is lame and covered but has no {want}")),
            Some(pod) if !vigils(pod) => verdict
                .problems
                .push(format!("{want} is not labelled {MANAGED_BY}=vigil")),
            Some(pod) => {
                let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
                if phase.as_deref() != Some("Running") {
                    verdict
                        .problems
                        .push(format!("{want} is {phase:?}, not Running"));
                }
                if pod.metadata.deletion_timestamp.is_some() {
                    verdict.problems.push(format!("{want} is terminating"));
                }
            }
        }
        let others: Vec<&String> = by_service
            .get(service)
            .into_iter()
            .flatten()
            .filter(|n| **n != want)
            .collect();
        if !others.is_empty() {
            verdict
                .problems
                .push(format!("{service} has more pods of Vigil's: {others:?}"));
        }
    }
    for (service, names) in &by_service {
        if verdict.lame_covered.contains(service) {
            continue;
        }
        let why = why_not
            .get(service)
            .copied()
            .unwrap_or("is not one of ours");
        verdict.problems.push(format!(
            "Service {service:?} {why}, yet Vigil has {names:?}"
        ));
    }
    // A fallback-named pod that is not Vigil's (or lacks the Service label) for a Service that
    // wants none.
    for (service, why) in &why_not {
        let unwanted = format!("service-watcher-{service}");
        let listed = by_service.values().flatten().any(|n| *n == unwanted);
        if !listed
            && pods
                .iter()
                .any(|p| p.metadata.name.as_deref() == Some(&unwanted))
        {
            verdict
                .problems
                .push(format!("Service {service} {why}, yet {unwanted} exists"));
        }
    }
    Ok(verdict)
}

/// The CriticalService's status counts, for the failure message.
async fn status_line(client: &kube::Client) -> String {
    match Api::<CriticalService>::all(client.clone())
        .get("critical")
        .await
    {
        Ok(cr) => match cr.status {
            Some(s) => format!(
                "CriticalService status: covered {}, lame {}, fallbackActive {}",
                s.covered, s.lame, s.fallback_active
            ),
            None => "CriticalService has no status".to_owned(),
        },
        Err(e) => format!("CriticalService unreadable: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_restarts_in_a_churn_leave_one_fallback_per_lame_covered_service() {
    let seed = std::env::var("VIGIL_CHURN_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(DEFAULT_SEED);
    let started = Instant::now();
    let dir: PathBuf = std::env::temp_dir().join(format!("vigil-churn-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    critical_service_setup(&client, NS).await;

    let mut rng = Lcg::new(seed);
    let moments = moments(&mut rng);
    // Exactly half the Services start critical: the first half of a shuffled list.
    let mut order: Vec<usize> = (0..SERVICES).collect();
    for i in (1..order.len()).rev() {
        order.swap(i, rng.below(i + 1));
    }
    let critical: BTreeSet<usize> = order[..SERVICES / 2].iter().copied().collect();

    let mut generation = 0;
    let mut operator = spawn_operator(&kubeconfig, &dir.join("run-0.log"));
    let ops = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..WORKERS)
        .map(|worker| {
            let churner = Churner {
                services: Api::namespaced(client.clone(), NS),
                pods: Api::namespaced(client.clone(), NS),
                rng: Lcg::new(seed ^ (worker as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15)),
                ops: ops.clone(),
                next_pod: 0,
                worker,
            };
            tokio::spawn(tokio::time::timeout(
                CHURN_TIMEOUT,
                churner.run(critical.clone()),
            ))
        })
        .collect();

    // Stop and restart the operator at each moment, while the churn goes on.
    for moment in &moments {
        while ops.load(Ordering::SeqCst) < moment.after_ops {
            assert!(
                !workers.iter().all(|w| w.is_finished()),
                "the churn ended after {} operations, before the moment {moment:?} (seed {seed})",
                ops.load(Ordering::SeqCst)
            );
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        assert!(
            operator.0.try_wait().expect("try_wait").is_none(),
            "vigil run #{generation} exited by itself before {moment:?}; see {}",
            dir.display()
        );
        match moment.stop {
            Stop::Kill => {
                operator.0.kill().expect("SIGKILL");
                operator.0.wait().expect("wait");
            }
            Stop::Term => {
                let Some(status) = terminate(&mut operator).await else {
                    panic!(
                        "vigil run #{generation} still runs {SIGTERM_TIMEOUT:?} after SIGTERM: in-flight work does not finish (seed {seed}); see run-{generation}.log in {}",
                        dir.display()
                    );
                };
                assert!(
                    status.success(),
                    "vigil run #{generation} exits 0 on SIGTERM, got {status}; see {}",
                    dir.display()
                );
            }
        }
        tokio::time::sleep(moment.down).await;
        generation += 1;
        operator = spawn_operator(&kubeconfig, &dir.join(format!("run-{generation}.log")));
    }
    for (i, worker) in workers.into_iter().enumerate() {
        worker
            .await
            .expect("churn task panicked")
            .unwrap_or_else(|_| panic!("churn task {i} still running after {CHURN_TIMEOUT:?}"))
            .unwrap_or_else(|e| panic!("churn task {i} failed: {e:#}"));
    }
    let churned = started.elapsed();
    let total_ops = ops.load(Ordering::SeqCst);

    // Settle: the state must be right, and still right a moment later.
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let settle_start = Instant::now();
    let mut right_since: Option<Instant> = None;
    let last = loop {
        let verdict = verdict(&services, &pods)
            .await
            .expect("listing the cluster");
        if verdict.problems.is_empty() {
            let since = *right_since.get_or_insert_with(Instant::now);
            if since.elapsed() >= SETTLED_FOR {
                break verdict;
            }
        } else {
            right_since = None;
        }
        if settle_start.elapsed() > SETTLE_TIMEOUT {
            let status = status_line(&client).await;
            panic!(
                "not settled {SETTLE_TIMEOUT:?} after a churn of {total_ops} operations with {} operator stops {moments:?} (seed {seed}): {}\n{status}\noperator logs in {}",
                moments.len(),
                verdict.summary(),
                dir.display()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        operator.0.try_wait().expect("try_wait").is_none(),
        "the last vigil run exited; see {}",
        dir.display()
    );
    eprintln!(
        "churn: {total_ops} operations in {churned:?} with stops {moments:?}; settled in {:?}: {} Services, {} critical, {} lame with one fallback each",
        settle_start.elapsed(),
        last.services,
        last.critical,
        last.lame_covered.len()
    );
    drop(operator);
    let _ = std::fs::remove_dir_all(&dir);
}
