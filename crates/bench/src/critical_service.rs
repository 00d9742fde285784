//! `vigil-bench critical-service`: how fast Vigil's CriticalService controller reacts, measured
//! end to end with Vigil in its own process. `vigil sandbox` (with its simulated kubelet: pods
//! become Ready at once) and `vigil run` are both children of the bench; the bench is an ordinary
//! API client that watches pods in `bench` and timestamps every event as it arrives.
//!
//! 1. Reaction latency, one covered Service with one real pod, per trial: the real pod is deleted
//!    (gracefully; the kubelet finishes it), timed from the delete request to the fallback pod's
//!    ADDED event; then a new real pod is created, timed from the event showing it Ready to the
//!    event showing the fallback retired (deletionTimestamp set, or DELETED).
//! 2. Burst: many covered Services with several pods each; every pod is force-deleted (grace 0)
//!    from one client; per Service, the delay from its last pod's DELETED event to its fallback's
//!    ADDED event, and Vigil's reconcile counts (from its `/metrics`) over the burst.
//!
//! Figures only: nothing is asserted, but what Vigil did wrong (a fallback missing, early, late or
//! doubled) is listed under "anomalies".

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplate, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, CustomResourceExt as _};
use serde_json::json;
use tokio::sync::mpsc;
use vigil_apis::CriticalService;

use crate::support::client::in_parallel;
use crate::support::client::ok_if_exists;
use crate::support::fmt::diff;
use crate::support::fmt::fmt_count;
use crate::support::fmt::fmt_opt;
use crate::support::http::http_get;
use crate::support::metrics::Reconciles;
use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;
use crate::support::usage::{CLK_TCK, rss_mib};
use crate::support::vigil::{Vigil, spawn_vigil};

#[derive(Debug, clap::Args)]
pub struct CriticalServiceBench {
    /// Reaction-latency trials (real pod deleted → fallback; new real pod Ready → fallback retired).
    #[arg(long, default_value_t = 500)]
    trials: usize,
    /// Covered Services in the burst.
    #[arg(long, default_value_t = 50)]
    burst_services: usize,
    /// Pods per burst Service (all force-deleted in the burst).
    #[arg(long, default_value_t = 4)]
    burst_pods: usize,
    /// Requests in flight from the bench's one client while setting up and force-deleting.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

const NS: &str = "bench";
const TEMPLATE: &str = "critical-service-pod-template";
const CR_NAME: &str = "bench-critical";
/// `vigil run`'s default `--pod-name-prefix`.
const PREFIX: &str = "service-watcher";
/// Vigil's mark on the pods it creates.
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// Targets for the reaction latencies on the sandbox.
const TARGET_P50: Duration = Duration::from_millis(10);
const TARGET_P99: Duration = Duration::from_millis(20);
/// How long one step of a trial may take before it counts as an anomaly.
const STEP_TIMEOUT: Duration = Duration::from_secs(5);
/// Trials stop after this many anomalies (a broken Vigil must not make the bench run for hours).
const MAX_TRIAL_ANOMALIES: usize = 3;

pub async fn run(args: CriticalServiceBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.burst_pods > 0 && args.concurrency > 0,
        "need --burst-pods > 0 and --concurrency > 0"
    );
    let began = Instant::now();
    let sandbox = spawn_sandbox(&[]).await?;
    let sandbox_pid = sandbox.process.id().context("sandbox pid")?;
    let client = sandbox.client()?;

    // Setup: namespace, CRD, PodTemplate; Vigil starts once the CRD is served (so its
    // CriticalService watch does not start in backoff).
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    ok_if_exists(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
    )
    .context("creating namespace bench")?;
    ok_if_exists(
        Api::<CustomResourceDefinition>::all(client.clone())
            .create(&PostParams::default(), &CriticalService::crd())
            .await,
    )
    .context("creating the CriticalService CRD")?;
    let crs: Api<CriticalService> = Api::all(client.clone());
    wait_until("the CriticalService CRD to be served", || async {
        Ok(crs.list(&ListParams::default()).await.is_ok())
    })
    .await?;
    Api::<PodTemplate>::namespaced(client.clone(), NS)
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": TEMPLATE},
                "template": {
                    "metadata": {"name": "critical-service-pod"},
                    "spec": {"containers": [{"name": "nginx", "image": "nginx:1.7.9"}]}
                }
            }))?,
        )
        .await
        .context("creating the PodTemplate")?;

    let mut vigil = spawn_vigil(
        sandbox.kubeconfig(),
        &[
            "--controllers",
            "criticalservice",
            "--namespaces",
            NS,
            "--pod-template-ns",
            NS,
        ],
    )
    .await?;
    let vigil_started = Instant::now();
    wait_until("vigil run to report ready on /readyz", || async {
        Ok(matches!(
            http_get(&vigil.metrics_addr, "/readyz").await,
            Ok((200, _))
        ))
    })
    .await
    .with_context(|| vigil.exit_note())?;
    let ready_after = vigil_started.elapsed();

    // The bench's pod watch, on its own connection, from before anything exists in `bench`.
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let start_rv = pods
        .list_metadata(&ListParams::default())
        .await
        .context("listing pods")?
        .metadata
        .resource_version
        .unwrap_or_default();
    let (tx, rx) = mpsc::unbounded_channel();
    let watch_client = sandbox.client()?;
    let watch_task = tokio::spawn(watch_pods(Api::namespaced(watch_client, NS), start_rv, tx));
    let mut tracker = Tracker::new(rx);

    let cr = crs
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "apiVersion": "mycrd.com/v1", "kind": "CriticalService",
                "metadata": {"name": CR_NAME},
                "spec": {"namespace": NS, "matchLabels": [{"key": "tier", "value": "critical"}]}
            }))?,
        )
        .await
        .context("creating the CriticalService")?;
    let status_writes = Arc::new(AtomicUsize::new(0));
    let status_task = tokio::spawn(count_modified(
        crs.clone(),
        cr.metadata.resource_version.clone().unwrap_or_default(),
        status_writes.clone(),
    ));
    let cpu_setup = vigil.cpu_seconds();

    // 1. Reaction latency.
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let mut report = Report::default();
    let m0 = quiesce(&vigil).await?;
    tracker.drain()?;
    let w0 = (
        tracker.fallback_added,
        tracker.fallback_retired,
        status_writes.load(Ordering::Relaxed),
    );
    let trials_started = Instant::now();
    trials(
        &args,
        &pods,
        &services,
        &mut tracker,
        &mut vigil,
        &mut report,
    )
    .await?;
    let trials_took = trials_started.elapsed();
    let m1 = quiesce(&vigil).await?;
    tracker.drain()?;
    let trial_writes = Writes {
        creates: tracker.fallback_added - w0.0,
        deletes: tracker.fallback_retired - w0.1,
        status: status_writes.load(Ordering::Relaxed).saturating_sub(w0.2),
    };
    let cpu_trials = vigil.cpu_seconds();

    // 2. Burst.
    let burst = burst(
        &args,
        &client,
        &status_writes,
        &mut tracker,
        &mut vigil,
        &mut report,
    )
    .await?;
    let cpu_burst = vigil.cpu_seconds();
    let status = crs
        .get(CR_NAME)
        .await
        .context("reading the CriticalService")?
        .status;

    let (peak, now) = rss_mib(vigil.pid).unwrap_or((0.0, 0.0));
    let (sandbox_peak, _) = rss_mib(sandbox_pid).unwrap_or((0.0, 0.0));
    watch_task.abort();
    status_task.abort();

    // Summary.
    let trial_reconciles = m1.total() - m0.total();
    say!(
        "vigil-bench critical-service: `vigil run` (pid {}, own process) against `vigil sandbox` (pid {sandbox_pid}) with its simulated kubelet",
        vigil.pid
    );
    say!(
        "  setup:                namespace {NS}, CRD, PodTemplate {TEMPLATE}, CriticalService {CR_NAME} (tier=critical); vigil ready on /readyz {:.0} ms after start",
        ready_after.as_secs_f64() * 1000.0
    );
    say!(
        "  reaction latency:     {} trials done of {} in {:.2} s (one Service `svc`, one real pod; watch events timestamped on arrival)",
        report.trials_done,
        args.trials,
        trials_took.as_secs_f64()
    );
    print_latencies(
        "    real pod deleted → fallback ADDED:      ",
        &mut report.create,
        true,
    );
    print_latencies(
        "    new pod Ready → fallback retired:       ",
        &mut report.retire,
        true,
    );
    say!(
        "      (retired = deletionTimestamp set by Vigil's delete; Vigil retires only once the EndpointSlices list the new pod, so this includes the sandbox's EndpointSlice update)"
    );
    say!(
        "    reconciles:         {} ({:.1} per trial){}",
        fmt_count(trial_reconciles),
        trial_reconciles / report.trials_done.max(1) as f64,
        m1.breakdown_since(&m0)
    );
    let per = report.trials_done.max(1) as f64;
    say!(
        "    writes seen:        {} fallback creates, {} fallback deletes, {} CriticalService status writes ({:.2}, {:.2}, {:.2} per trial)",
        trial_writes.creates,
        trial_writes.deletes,
        trial_writes.status,
        trial_writes.creates as f64 / per,
        trial_writes.deletes as f64 / per,
        trial_writes.status as f64 / per
    );
    say!(
        "  burst:                {} Services × {} pods; {} force-deletes (grace 0) from one client, {} in flight, sent in {:.3} s",
        args.burst_services,
        args.burst_pods,
        args.burst_services * args.burst_pods,
        args.concurrency,
        burst.sent.as_secs_f64()
    );
    say!(
        "    fallbacks created:  {}/{}; the first {}, the last {} after the first delete was sent",
        burst.delays.len(),
        args.burst_services,
        burst.first_fallback.map_or_else(|| "never".to_owned(), ms),
        burst.last_fallback.map_or_else(|| "never".to_owned(), ms)
    );
    print_latencies(
        "    last pod DELETED → fallback ADDED:      ",
        &mut burst.delays.clone(),
        false,
    );
    say!(
        "    reconciles:         {}{} (from vigil's /metrics before and after; settled)",
        fmt_count(burst.after.total() - burst.before.total()),
        burst.after.breakdown_since(&burst.before)
    );
    say!(
        "    writes seen:        {} fallback creates, {} fallback deletes, {} CriticalService status writes",
        burst.writes.creates,
        burst.writes.deletes,
        burst.writes.status
    );
    say!(
        "    API requests:       {} (vigil's rest_client_requests_total before and after, by method; watches count when they start)",
        burst.after.requests_since(&burst.before)
    );
    match &status {
        Some(s) => say!(
            "    CriticalService:    status after the burst: covered {}, lame {}, fallbackActive {} (expected {} covered, {} fallbacks)",
            s.covered,
            s.lame,
            s.fallback_active,
            args.burst_services + 1,
            args.burst_services
        ),
        None => say!("    CriticalService:    no status written"),
    }
    say!(
        "  vigil run:            peak RSS {peak:.1} MiB (VmHWM), now {now:.1} MiB; CPU {} s (utime+stime at an assumed {CLK_TCK} ticks/s): start+setup {}, trials {}, burst {}",
        fmt_opt(cpu_burst),
        fmt_opt(cpu_setup),
        fmt_opt(diff(cpu_trials, cpu_setup)),
        fmt_opt(diff(cpu_burst, cpu_trials)),
    );
    let log = vigil.log_summary();
    say!("  vigil log:            {log}");
    say!("  sandbox:              peak RSS {sandbox_peak:.1} MiB");
    if report.anomalies.is_empty() {
        say!("  anomalies:            none");
    } else {
        say!("  anomalies:            {}", report.anomalies.len());
        for a in &report.anomalies {
            say!("    - {a}");
        }
    }
    say!(
        "  reproduce:            target/release/vigil-bench critical-service --trials {} --burst-services {} --burst-pods {} --concurrency {}",
        args.trials,
        args.burst_services,
        args.burst_pods,
        args.concurrency
    );
    say!(
        "  total runtime:        {:.1} s",
        began.elapsed().as_secs_f64()
    );
    // Vigil first, then the sandbox (both killed on drop, the sandbox's kubeconfig removed).
    drop(vigil);
    drop(sandbox);
    Ok(())
}

/// What the two phases found.
#[derive(Default)]
struct Report {
    trials_done: usize,
    create: Vec<Duration>,
    retire: Vec<Duration>,
    anomalies: Vec<String>,
}

/// The reaction-latency trials on Service `svc`.
async fn trials(
    args: &CriticalServiceBench,
    pods: &Api<Pod>,
    services: &Api<Service>,
    tracker: &mut Tracker,
    vigil: &mut Vigil,
    report: &mut Report,
) -> anyhow::Result<()> {
    let fb = fallback_name("svc");
    let mut current = "real-0".to_owned();
    pods.create(&PostParams::default(), &real_pod(&current, "svc")?)
        .await
        .context("creating real-0")?;
    if !tracker
        .until_state(Duration::from_secs(10), |m| is_ready(m, &current))
        .await?
    {
        anyhow::bail!("real-0 did not become Ready in 10 s (is the kubelet running?)");
    }
    services
        .create(&PostParams::default(), &service("svc", "svc")?)
        .await
        .context("creating Service svc")?;
    let mut anomalies = 0;
    for i in 0..args.trials {
        let mut note = |report: &mut Report, text: String| {
            anomalies += 1;
            report.anomalies.push(format!("trial {i}: {text}"));
        };
        // The starting state: the real pod Ready, no fallback (a retired one fully gone).
        let start = tracker
            .until_state(Duration::from_secs(10), |m| {
                is_ready(m, &current) && !m.contains_key(&fb)
            })
            .await?;
        if !start {
            note(
                report,
                format!(
                    "the starting state (real pod {current} Ready, no {fb}) was not reached in 10 s: {}{}; trials stopped",
                    tracker.describe(&[&current, &fb]),
                    vigil.exited_note()
                ),
            );
            break;
        }
        let sent = Instant::now();
        pods.delete(&current, &DeleteParams::default())
            .await
            .with_context(|| format!("deleting {current}"))?;
        let added = tracker
            .until_event(STEP_TIMEOUT, |s| s.kind == Kind::Added && s.pod.name == fb)
            .await?;
        match added {
            Some(at) if at >= sent => report.create.push(at - sent),
            Some(_) => note(
                report,
                format!("{fb} was created before {current} was deleted"),
            ),
            None => note(
                report,
                format!(
                    "no {fb} ADDED within {STEP_TIMEOUT:?} of deleting {current}{}",
                    vigil.exited_note()
                ),
            ),
        }
        // The kubelet finishes the old pod; the fallback runs and becomes Ready.
        if !tracker
            .until_state(STEP_TIMEOUT, |m| {
                !m.contains_key(&current) && m.get(&fb).is_some_and(|p| p.ready)
            })
            .await?
        {
            note(
                report,
                format!(
                    "after deleting {current}: not ({current} gone and {fb} Ready) within {STEP_TIMEOUT:?}: {}",
                    tracker.describe(&[&current, &fb])
                ),
            );
        }
        let next = format!("real-{}", i + 1);
        pods.create(&PostParams::default(), &real_pod(&next, "svc")?)
            .await
            .with_context(|| format!("creating {next}"))?;
        let mut retired_early = false;
        let ready_at = tracker
            .until_event(STEP_TIMEOUT, |s| {
                if s.pod.name == fb && (s.kind == Kind::Deleted || s.pod.terminating) {
                    retired_early = true;
                }
                s.pod.name == next && s.pod.ready && !s.pod.terminating
            })
            .await?;
        match ready_at {
            _ if retired_early => note(report, format!("{fb} was retired before {next} was Ready")),
            None => note(report, format!("{next} not Ready within {STEP_TIMEOUT:?}")),
            Some(ready) => {
                let gone = tracker
                    .until_event(STEP_TIMEOUT, |s| {
                        s.pod.name == fb && (s.kind == Kind::Deleted || s.pod.terminating)
                    })
                    .await?;
                match gone {
                    Some(at) => report.retire.push(at.saturating_duration_since(ready)),
                    None => note(
                        report,
                        format!(
                            "{fb} not retired within {STEP_TIMEOUT:?} of {next} being Ready{}",
                            vigil.exited_note()
                        ),
                    ),
                }
            }
        }
        current = next;
        report.trials_done = i + 1;
        if anomalies >= MAX_TRIAL_ANOMALIES {
            report
                .anomalies
                .push(format!("trials stopped after {anomalies} anomalies"));
            break;
        }
    }
    Ok(())
}

/// What the burst measured.
struct Burst {
    sent: Duration,
    /// Per Service whose fallback came: its last pod's DELETED → its fallback's ADDED.
    delays: Vec<Duration>,
    /// From the first delete sent to the first and the last fallback ADDED.
    first_fallback: Option<Duration>,
    last_fallback: Option<Duration>,
    before: Reconciles,
    after: Reconciles,
    writes: Writes,
}

/// Vigil's writes as the bench's watches see them.
#[derive(Debug, Clone, Copy, Default)]
struct Writes {
    /// Fallback pods created.
    creates: usize,
    /// Fallback pods deleted (deletionTimestamp set by Vigil's graceful delete).
    deletes: usize,
    /// CriticalService status changes (MODIFIED events on the CriticalService).
    status: usize,
}

async fn burst(
    args: &CriticalServiceBench,
    client: &Client,
    status_writes: &AtomicUsize,
    tracker: &mut Tracker,
    vigil: &mut Vigil,
    report: &mut Report,
) -> anyhow::Result<Burst> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), NS);
    let (n, per) = (args.burst_services, args.burst_pods);
    let svc_name = |j: usize| format!("burst-{j:03}");
    let pod_name = |j: usize, k: usize| format!("burst-{j:03}-{k}");
    let mut service_of: HashMap<String, usize> = HashMap::new();
    let mut fallback_of: HashMap<String, usize> = HashMap::new();
    for j in 0..n {
        fallback_of.insert(fallback_name(&svc_name(j)), j);
        for k in 0..per {
            service_of.insert(pod_name(j, k), j);
        }
    }

    // Pods first, Ready, then the Services: no Service is ever lame, so no fallback is due.
    in_parallel(n * per, args.concurrency, |i| {
        let pods = pods.clone();
        let (j, k) = (i % n, i / n);
        let (name, app) = (pod_name(j, k), svc_name(j));
        async move {
            pods.create(&PostParams::default(), &real_pod(&name, &app)?)
                .await
                .with_context(|| format!("creating {name}"))?;
            Ok(())
        }
    })
    .await?;
    let all_ready = tracker
        .until_state(Duration::from_secs(60), |m| {
            service_of.keys().all(|p| is_ready(m, p))
        })
        .await?;
    anyhow::ensure!(all_ready, "burst pods not all Ready within 60 s");
    in_parallel(n, args.concurrency, |j| {
        let services = services.clone();
        let name = svc_name(j);
        async move {
            services
                .create(&PostParams::default(), &service(&name, &name)?)
                .await
                .with_context(|| format!("creating Service {name}"))?;
            Ok(())
        }
    })
    .await?;
    let wanted: Vec<String> = (0..n).map(svc_name).collect();
    wait_until(
        "the burst Services' EndpointSlices to list every pod ready",
        || async {
            let list = slices.list(&ListParams::default()).await?;
            let mut ready: HashMap<String, usize> = HashMap::new();
            for slice in &list.items {
                let Some(service) = slice
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("kubernetes.io/service-name"))
                else {
                    continue;
                };
                let count = slice
                    .endpoints
                    .iter()
                    .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                    .count();
                *ready.entry(service.clone()).or_default() += count;
            }
            Ok(wanted
                .iter()
                .all(|s| ready.get(s).copied().unwrap_or(0) == per))
        },
    )
    .await?;
    let before = quiesce(vigil).await?;
    tracker.drain()?;
    let early: Vec<&String> = fallback_of
        .keys()
        .filter(|f| tracker.pods.contains_key(*f))
        .collect();
    if !early.is_empty() {
        report.anomalies.push(format!(
            "burst setup: {} fallbacks created for Services whose pods were all Ready (e.g. {})",
            early.len(),
            early[0]
        ));
    }
    let (added_before, retired_before) = (tracker.fallback_added, tracker.fallback_retired);
    let status_before = status_writes.load(Ordering::Relaxed);

    // The burst: every pod force-deleted, pod k of every Service before pod k+1 of any.
    let started = Instant::now();
    in_parallel(n * per, args.concurrency, |i| {
        let pods = pods.clone();
        let name = pod_name(i % n, i / n);
        async move {
            pods.delete(
                &name,
                &DeleteParams {
                    grace_period_seconds: Some(0),
                    ..DeleteParams::default()
                },
            )
            .await
            .with_context(|| format!("force-deleting {name}"))?;
            Ok(())
        }
    })
    .await?;
    let sent = started.elapsed();

    let mut deleted: HashMap<usize, (usize, Instant)> = HashMap::new();
    let mut added: HashMap<usize, Instant> = HashMap::new();
    let mut doubled = 0;
    let mut too_early = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while added.len() < n {
        let Some(seen) = tracker.next(deadline).await? else {
            break;
        };
        if seen.kind == Kind::Deleted
            && let Some(&j) = service_of.get(&seen.pod.name)
        {
            let entry = deleted.entry(j).or_insert((0, seen.at));
            entry.0 += 1;
            entry.1 = entry.1.max(seen.at);
        }
        if seen.kind == Kind::Added
            && let Some(&j) = fallback_of.get(&seen.pod.name)
        {
            if added.insert(j, seen.at).is_some() {
                doubled += 1;
            }
            let gone = deleted.get(&j).map_or(0, |d| d.0);
            if gone < per {
                too_early.push(format!("{} (after {gone}/{per} pods)", seen.pod.name));
            }
        }
    }
    let first_fallback = added
        .values()
        .min()
        .map(|t| t.saturating_duration_since(started));
    let last_fallback = (added.len() == n)
        .then(|| {
            added
                .values()
                .max()
                .map(|t| t.saturating_duration_since(started))
        })
        .flatten();
    // Anything else Vigil does in the next second (it should create and delete nothing more).
    let settle = Instant::now() + Duration::from_secs(1);
    while let Some(seen) = tracker.next(settle).await? {
        if seen.kind == Kind::Added && fallback_of.contains_key(&seen.pod.name) {
            doubled += 1;
        }
    }
    let after = quiesce(vigil).await?;
    tracker.drain()?;
    let writes = Writes {
        creates: tracker.fallback_added - added_before,
        deletes: tracker.fallback_retired - retired_before,
        status: status_writes
            .load(Ordering::Relaxed)
            .saturating_sub(status_before),
    };

    let mut delays = Vec::new();
    for (j, at) in &added {
        if let Some((_, last)) = deleted.get(j) {
            delays.push(at.saturating_duration_since(*last));
        }
    }
    if added.len() < n {
        let missing: Vec<String> = (0..n)
            .filter(|j| !added.contains_key(j))
            .map(|j| fallback_name(&svc_name(j)))
            .take(5)
            .collect();
        report.anomalies.push(format!(
            "burst: {} of {n} fallbacks not created within 30 s (e.g. {}){}",
            n - added.len(),
            missing.join(", "),
            vigil.exited_note()
        ));
    }
    if !too_early.is_empty() {
        report.anomalies.push(format!(
            "burst: {} fallbacks created while real pods were still there: {}",
            too_early.len(),
            too_early.join(", ")
        ));
    }
    if doubled > 0 {
        report.anomalies.push(format!(
            "burst: {doubled} extra fallback ADDED events (a fallback created twice)"
        ));
    }
    if writes.deletes > 0 {
        report.anomalies.push(format!(
            "burst: {} fallbacks deleted although no real pod came back",
            writes.deletes
        ));
    }
    let other_fallbacks = writes.creates.saturating_sub(added.len() + doubled);
    if other_fallbacks > 0 {
        report.anomalies.push(format!(
            "burst: {other_fallbacks} fallbacks created for Services outside the burst"
        ));
    }
    Ok(Burst {
        sent,
        delays,
        first_fallback,
        last_fallback,
        before,
        after,
        writes,
    })
}

// ---------------------------------------------------------------------------------------------
// Objects.

fn fallback_name(service: &str) -> String {
    format!("{PREFIX}-{service}")
}

fn real_pod(name: &str, app: &str) -> anyhow::Result<Pod> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}
    }))?)
}

fn service(name: &str, app: &str) -> anyhow::Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": {"name": name, "labels": {"tier": "critical"}},
        "spec": {"selector": {"app": app}, "ports": [{"name": "http", "port": 80}]}
    }))?)
}

/// Polls `check` every 20 ms for up to 30 s.
async fn wait_until<F, Fut>(what: &str, check: F) -> anyhow::Result<()>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<bool>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut last_error = None;
    loop {
        match check().await {
            Ok(true) => return Ok(()),
            Ok(false) => {}
            Err(e) => last_error = Some(e),
        }
        if Instant::now() > deadline {
            return Err(match last_error {
                Some(e) => e.context(format!("waiting for {what}: timed out after 30 s")),
                None => anyhow::anyhow!("waiting for {what}: timed out after 30 s"),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

// ---------------------------------------------------------------------------------------------
// The bench's pod watch.

/// What the bench keeps of a pod.
#[derive(Debug, Clone)]
struct PodInfo {
    name: String,
    /// Carries Vigil's managed-by label.
    fallback: bool,
    ready: bool,
    terminating: bool,
}

fn pod_info(pod: &Pod) -> PodInfo {
    PodInfo {
        name: pod.metadata.name.clone().unwrap_or_default(),
        fallback: pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(MANAGED_BY))
            .is_some_and(|v| v == "vigil"),
        ready: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        terminating: pod.metadata.deletion_timestamp.is_some(),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Added,
    Modified,
    Deleted,
}

/// One watch event and when it arrived.
#[derive(Debug, Clone)]
struct Seen {
    at: Instant,
    kind: Kind,
    pod: PodInfo,
}

/// Watches pods from `rv`, timestamping each event on arrival; resumes when a watch ends.
async fn watch_pods(
    api: Api<Pod>,
    mut rv: String,
    tx: mpsc::UnboundedSender<Result<Seen, String>>,
) {
    let result: anyhow::Result<()> = async {
        loop {
            let stream = api
                .watch(&WatchParams::default().timeout(290), &rv)
                .await
                .context("starting the pod watch")?;
            let mut stream = stream.boxed();
            while let Some(event) = stream.try_next().await.context("pod watch")? {
                let at = Instant::now();
                let (kind, pod) = match event {
                    WatchEvent::Added(p) => (Kind::Added, p),
                    WatchEvent::Modified(p) => (Kind::Modified, p),
                    WatchEvent::Deleted(p) => (Kind::Deleted, p),
                    WatchEvent::Bookmark(b) => {
                        rv = b.metadata.resource_version;
                        continue;
                    }
                    WatchEvent::Error(s) => {
                        anyhow::bail!("pod watch error {}: {}", s.code, s.message)
                    }
                };
                if let Some(v) = &pod.metadata.resource_version {
                    rv.clone_from(v);
                }
                let seen = Seen {
                    at,
                    kind,
                    pod: pod_info(&pod),
                };
                if tx.send(Ok(seen)).is_err() {
                    return Ok(());
                }
            }
        }
    }
    .await;
    if let Err(e) = result {
        let _ = tx.send(Err(format!("{e:#}")));
    }
}

/// Counts MODIFIED events on CriticalServices (Vigil's status writes; the bench changes no spec).
async fn count_modified(api: Api<CriticalService>, mut rv: String, count: Arc<AtomicUsize>) {
    loop {
        let Ok(stream) = api.watch(&WatchParams::default().timeout(290), &rv).await else {
            return;
        };
        let mut stream = stream.boxed();
        while let Ok(Some(event)) = stream.try_next().await {
            match event {
                WatchEvent::Modified(cr) => {
                    count.fetch_add(1, Ordering::Relaxed);
                    if let Some(v) = cr.metadata.resource_version {
                        rv = v;
                    }
                }
                WatchEvent::Added(cr) | WatchEvent::Deleted(cr) => {
                    if let Some(v) = cr.metadata.resource_version {
                        rv = v;
                    }
                }
                WatchEvent::Bookmark(b) => rv = b.metadata.resource_version,
                WatchEvent::Error(_) => return,
            }
        }
    }
}

/// The pods in `bench` as the bench's watch has shown them so far.
struct Tracker {
    rx: mpsc::UnboundedReceiver<Result<Seen, String>>,
    pods: HashMap<String, PodInfo>,
    /// Fallback pods seen created.
    fallback_added: usize,
    /// Fallback pods seen starting to go (deletionTimestamp set, or DELETED without it).
    fallback_retired: usize,
}

impl Tracker {
    fn new(rx: mpsc::UnboundedReceiver<Result<Seen, String>>) -> Self {
        Self {
            rx,
            pods: HashMap::new(),
            fallback_added: 0,
            fallback_retired: 0,
        }
    }

    fn apply(&mut self, seen: &Seen) {
        let was_going = self.pods.get(&seen.pod.name).is_some_and(|p| p.terminating);
        let fallback = seen.pod.fallback;
        if fallback && seen.kind == Kind::Added {
            self.fallback_added += 1;
        }
        if fallback && !was_going && (seen.kind == Kind::Deleted || seen.pod.terminating) {
            self.fallback_retired += 1;
        }
        if seen.kind == Kind::Deleted {
            self.pods.remove(&seen.pod.name);
        } else {
            self.pods.insert(seen.pod.name.clone(), seen.pod.clone());
        }
    }

    /// The next event, or None once `deadline` passes.
    async fn next(&mut self, deadline: Instant) -> anyhow::Result<Option<Seen>> {
        match tokio::time::timeout_at(deadline.into(), self.rx.recv()).await {
            Err(_) => Ok(None),
            Ok(None) => anyhow::bail!("the bench's pod watch stopped"),
            Ok(Some(Err(e))) => anyhow::bail!("the bench's pod watch failed: {e}"),
            Ok(Some(Ok(seen))) => {
                self.apply(&seen);
                Ok(Some(seen))
            }
        }
    }

    /// Applies every event already received.
    fn drain(&mut self) -> anyhow::Result<()> {
        while let Ok(message) = self.rx.try_recv() {
            let seen = message.map_err(|e| anyhow::anyhow!("the bench's pod watch failed: {e}"))?;
            self.apply(&seen);
        }
        Ok(())
    }

    /// Waits until the pods seen satisfy `check`; false if they do not within `within`.
    async fn until_state(
        &mut self,
        within: Duration,
        check: impl Fn(&HashMap<String, PodInfo>) -> bool,
    ) -> anyhow::Result<bool> {
        let deadline = Instant::now() + within;
        self.drain()?;
        loop {
            if check(&self.pods) {
                return Ok(true);
            }
            if self.next(deadline).await?.is_none() {
                return Ok(false);
            }
        }
    }

    /// Waits for an event matching `check` and returns when it arrived; None after `within`.
    async fn until_event(
        &mut self,
        within: Duration,
        mut check: impl FnMut(&Seen) -> bool,
    ) -> anyhow::Result<Option<Instant>> {
        let deadline = Instant::now() + within;
        while let Some(seen) = self.next(deadline).await? {
            if check(&seen) {
                return Ok(Some(seen.at));
            }
        }
        Ok(None)
    }

    fn describe(&self, names: &[&str]) -> String {
        names
            .iter()
            .map(|n| match self.pods.get(*n) {
                None => format!("{n} absent"),
                Some(p) => format!(
                    "{n} ready={} terminating={} vigil's={}",
                    p.ready, p.terminating, p.fallback
                ),
            })
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn is_ready(pods: &HashMap<String, PodInfo>, name: &str) -> bool {
    pods.get(name).is_some_and(|p| p.ready && !p.terminating)
}

// ---------------------------------------------------------------------------------------------
async fn reconciles(vigil: &Vigil) -> anyhow::Result<Reconciles> {
    let (code, body) = http_get(&vigil.metrics_addr, "/metrics")
        .await
        .context("reading vigil's /metrics")?;
    anyhow::ensure!(code == 200, "vigil's /metrics answered {code}");
    Ok(Reconciles::parse(&body))
}

/// Vigil's counters once they stop moving (unchanged over 300 ms; at most 5 s).
async fn quiesce(vigil: &Vigil) -> anyhow::Result<Reconciles> {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut last = reconciles(vigil).await?;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = reconciles(vigil).await?;
        if now.total() == last.total() || Instant::now() > deadline {
            return Ok(now);
        }
        last = now;
    }
}

// ---------------------------------------------------------------------------------------------
// Figures.

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn print_latencies(label: &str, samples: &mut [Duration], with_target: bool) {
    if samples.is_empty() {
        say!("{label}no samples");
        return;
    }
    samples.sort_unstable();
    let (p50, p99) = (percentile(samples, 50.0), percentile(samples, 99.0));
    let max = samples.last().copied().unwrap_or_default();
    let target = if with_target {
        format!(
            "   target p50 < {} {}, p99 < {} {}",
            ms(TARGET_P50),
            if p50 < TARGET_P50 {
                "(met)"
            } else {
                "(MISSED)"
            },
            ms(TARGET_P99),
            if p99 < TARGET_P99 {
                "(met)"
            } else {
                "(MISSED)"
            },
        )
    } else {
        String::new()
    };
    say!(
        "{label}p50 {}, p99 {}, max {} ({} samples){target}",
        ms(p50),
        ms(p99),
        ms(max),
        samples.len()
    );
}
