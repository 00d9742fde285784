//! `vigil-bench critical-service-clients`: CriticalService judged by what its clients see, on the
//! real node of `../shared/kube/node-up.sh` (run under its exports). A client on the host probes
//! a covered Service's ClusterIP every 10 ms (new connection each time, short timeout) while the
//! Service's last pod goes, side by side with no controller, with Vigil (`vigil run` as a host
//! process on the node's admin kubeconfig), and with Vigil keeping a warm standby:
//!
//! - (a) the last pod deleted, its server exiting on SIGTERM (`EXIT_ON_TERM=1`);
//! - (b) the last pod's container killed with SIGKILL through containerd (what an OOM kill does:
//!   the pod stays, the kubelet finds out and restarts the container);
//! - (c) a real pod arriving while the fallback answers, until the fallback is gone;
//! - (d) the last pod deleted while it keeps serving through its grace period;
//! - (e) the workload scaled to zero (`kubectl scale --replicas=0`: nothing replaces the pod),
//!   and back to one replica [`BARE_RECREATE_AFTER`] later, as someone noticing would (with
//!   Deployment-backed pods only: with bare pods it is (a)).
//!
//! The real pods come from a one-replica Deployment (so a replacement is created at once, as in
//! production) or are bare pods (`--backings bare`: nothing replaces a deleted one; the bench
//! re-creates it [`BARE_RECREATE_AFTER`] after the trigger, as someone noticing would); the
//! fallback's PodTemplate runs the node's web image too, which serves
//! `pod=<name>`: every answer says which pod gave it. The fallback's server exits on SIGTERM, as
//! most servers do, so a fallback deleted while kube-proxy still sends it connections loses them
//! (what `drainSeconds` is for). Per run it prints the failed requests (no answer within the
//! timeout), the lost ones among them (no answer at all: refused, reset, or none within the
//! probe's patience; the rest were slow, on a loaded host), the failure window (first failed
//! request to the next answer), and where the time went: the
//! trigger → the API showing it → the fallback created (or the standby promoted) → scheduled →
//! running → Ready → a ready endpoint in the EndpointSlice → its first answer, from watch events
//! stamped on arrival and the probe; and kube-proxy's syncs and network-programming latency from
//! its metrics. Figures only; `--verify` (for the node scenario tests) fails on wrong outcomes
//! — a run that never settled, a fallback that never answered, a run with Vigil whose outage
//! went on well past a real pod's return (worse than no controller), and with
//! `--verify-lossless` a request lost in (c) or (d) — never on durations.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, PodTemplate, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Client, CustomResourceExt as _, ResourceExt as _};
use serde_json::json;
use vigil_apis::CriticalService;

use crate::support::client::ok_if_exists;
use crate::support::duration::parse_duration;
use crate::support::node::{Node, ProxyCounters};
use crate::support::paired::{STEADY, outage_past, real_back};
use crate::support::phase::{phase_of, wait_for_phase};
use crate::support::probe::{
    Outcome, PATIENCE, Prober, Sample, failures, lost as lost_of, probe_once,
};
use crate::support::real_plane::client_from;
use crate::support::record::{PodSeen, Recorder};
use crate::support::stats::percentile;
use crate::support::vigil::{Vigil, spawn_vigil};

#[derive(Debug, clap::Args)]
pub struct ClientsBench {
    /// Runs of each case in each mode (medians are over these).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Modes, comma-separated: `none` (no controller), `default` (the article's CriticalService,
    /// no optional field; `vigil` is the same), `standby` (Vigil with `warmStandby: true` and
    /// `drainSeconds: 2`).
    #[arg(long, value_delimiter = ',', default_value = "none,default,standby")]
    modes: Vec<String>,
    /// What runs the real pods, comma-separated: `deployment` (a one-replica Deployment) and
    /// `bare` (a bare pod, which nothing replaces).
    #[arg(long, value_delimiter = ',', default_value = "deployment,bare")]
    backings: Vec<String>,
    /// Cases, comma-separated: a, b, c, d, e (see the module documentation).
    #[arg(long, value_delimiter = ',', default_value = "a,b,c,d,e")]
    cases: Vec<String>,
    /// Time between two requests of the probe.
    #[arg(long, default_value = "10ms", value_parser = parse_duration)]
    interval: Duration,
    /// How long one request may take.
    #[arg(long, default_value = "100ms", value_parser = parse_duration)]
    timeout: Duration,
    /// Fail unless the outcomes hold: with Vigil the fallback answered the Service's traffic
    /// (in (c) before the real pod came; in (e); with bare pods in every case but (b); with the
    /// standby in every case); by default no request lost in (c) and (d); and in (a) and (b), in every
    /// run with Vigil (and in (e)), an outage over no later than [`REAL_PROGRAMMED`] after a real pod was back
    /// as a ready endpoint, which is when no controller's outage ends (judged inside each run: see
    /// [`crate::support::paired`]). Durations are never checked.
    #[arg(long)]
    verify: bool,
    /// With `--verify`, also fail when a request was lost in (c) or (d) with Vigil keeping a
    /// warm standby and draining its fallbacks (the `standby` mode), or with the default.
    #[arg(long)]
    verify_lossless: bool,
}

/// `vigil run`'s default fallback pod name prefix: the answers of Vigil's pods start with it.
const PREFIX: &str = "service-watcher";
const SERVICE: &str = "web";
const DEPLOYMENT: &str = "real";
const TEMPLATE: &str = "clients-fallback";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const ROLE_LABEL: &str = "vigil.dev/fallback-role";
/// The real pods' and the fallback's web server port, and readiness probe period (the
/// shortest the kubelet allows).
const PORT: i32 = 8080;
/// Quiet time before each run, so kube-proxy's rate limiter (burst 2 per `minSyncPeriod`) is
/// full, as it is when an outage comes out of the blue.
const QUIET: Duration = Duration::from_millis(1500);
/// A run ends this long after its last failed request, once everything has settled.
const SETTLED_FOR: Duration = Duration::from_secs(1);
/// No run lasts longer (an outcome that never comes is reported, not waited for).
const RUN_CAP: Duration = Duration::from_secs(25);
const STEADY_TIMEOUT: Duration = Duration::from_secs(90);
/// `drainSeconds` of the standby mode: kube-proxy's `minSyncPeriod` (1 s) and a margin.
const DRAIN_SECONDS: u32 = 2;
/// With bare pods nothing replaces a deleted pod, and in (e) nothing replaces the pods scaled
/// away: the bench re-creates it (scales back to one) this long after the trigger (someone
/// noticing), so that every run ends.
const BARE_RECREATE_AFTER: Duration = Duration::from_secs(5);
/// `--verify`: in (a) and (b), a run with Vigil is "not worse" than no controller when its
/// outage ended at most this long after a real pod was back as a ready endpoint (see
/// [`crate::support::paired`]): with no controller, that is when kube-proxy's next sync ends the
/// outage. kube-proxy runs a sync at most `minSyncPeriod` (1 s) after the previous ones and one
/// takes 35-50 ms here; the rest is room for the watch events' delivery on a loaded node.
const REAL_PROGRAMMED: Duration = Duration::from_millis(1500);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    None,
    Vigil,
    Standby,
}

/// What runs the real pods.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backing {
    Deployment,
    Bare,
}

impl Backing {
    fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(match text {
            "deployment" => Self::Deployment,
            "bare" => Self::Bare,
            _ => anyhow::bail!("unknown backing {text:?}: deployment or bare"),
        })
    }

    fn key(self) -> &'static str {
        match self {
            Self::Deployment => "deploy",
            Self::Bare => "bare",
        }
    }
}

impl Mode {
    fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(match text {
            "none" => Self::None,
            "default" | "vigil" => Self::Vigil,
            "standby" => Self::Standby,
            _ => anyhow::bail!("unknown mode {text:?}: none, default or standby"),
        })
    }

    fn key(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Vigil => "default",
            Self::Standby => "standby",
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::None => "no controller",
            Self::Vigil => "Vigil default",
            Self::Standby => "standby + drain",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Case {
    Deleted,
    Killed,
    Arriving,
    Graceful,
    ScaledToZero,
}

impl Case {
    fn parse(text: &str) -> anyhow::Result<Self> {
        Ok(match text {
            "a" => Self::Deleted,
            "b" => Self::Killed,
            "c" => Self::Arriving,
            "d" => Self::Graceful,
            "e" => Self::ScaledToZero,
            _ => anyhow::bail!("unknown case {text:?}: a, b, c, d or e"),
        })
    }

    fn title(self) -> &'static str {
        match self {
            Self::Deleted => "(a) last pod deleted, server exits on SIGTERM",
            Self::Killed => "(b) last pod's container SIGKILLed (crash, OOM kill)",
            Self::Arriving => "(c) real pod arrives while the fallback answers",
            Self::Graceful => "(d) last pod deleted, serves through its grace period",
            Self::ScaledToZero => "(e) workload scaled to zero, server exits on SIGTERM",
        }
    }

    /// Whether the case is run with these real pods: (e) scales a Deployment (with bare pods
    /// it would be (a)).
    fn runs_with(self, backing: Backing) -> bool {
        self != Self::ScaledToZero || backing == Backing::Deployment
    }

    /// Whether the real pods' server exits on SIGTERM (else it serves until its grace period
    /// ends, as the web image does by default).
    fn exits_on_term(self) -> bool {
        self != Self::Graceful
    }

    fn lossless_target(self) -> bool {
        matches!(self, Self::Arriving | Self::Graceful)
    }
}

/// One mode's namespace, Service and CriticalService.
struct Stage {
    mode: Mode,
    backing: Backing,
    namespace: String,
    critical_service: Option<String>,
    cluster_ip: SocketAddr,
}

/// What one run measured.
#[derive(Debug, Clone, Default)]
struct RunResult {
    /// Requests not answered within the probe's timeout.
    failed: usize,
    /// Of those, the ones never answered (refused, reset, or no answer within the probe's
    /// patience): what a client loses. The rest were slow (the loaded host), not lost.
    lost: usize,
    /// Requests lost meanwhile by the same probe on the control Service, which nothing
    /// touches: what the node itself loses (a loaded host, kube-proxy's syncs), not the case.
    control_lost: usize,
    window: Duration,
    requests: usize,
    /// A pod of Vigil's answered the probe during the run (or, in (c), before the real pod came).
    fallback_answered: bool,
    /// How long the outage went on after a real pod was back as a ready endpoint (`None` when
    /// the EndpointSlice never showed the outage and the return): what a controller added to
    /// the outage no controller would have had in this run.
    past_real_return: Option<Duration>,
    /// Requests that failed after that outage was over (among steady answers, after a real pod
    /// was back): isolated ones, reported apart from the outage.
    isolated_failures: usize,
    /// Milestones after the trigger.
    timeline: BTreeMap<&'static str, Duration>,
    proxy: ProxyCounters,
    /// Something that did not happen as it should, for the report.
    note: Option<String>,
}

pub async fn run(args: ClientsBench) -> anyhow::Result<()> {
    let node = Node::from_env()?;
    let modes = args
        .modes
        .iter()
        .map(|m| Mode::parse(m))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cases = args
        .cases
        .iter()
        .map(|c| Case::parse(c))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let backings = args
        .backings
        .iter()
        .map(|b| Backing::parse(b))
        .collect::<anyhow::Result<Vec<_>>>()?;
    anyhow::ensure!(
        args.runs > 0 && !modes.is_empty() && !backings.is_empty(),
        "need --runs > 0, a mode and a backing"
    );
    let client = client_from(&node.kubeconfig).await?;
    eprintln!(
        "vigil-bench: on node {} ({})",
        node.name,
        node.kubeconfig.display()
    );
    let started = Instant::now();
    install_crd(&client).await?;
    let tag = std::process::id();
    let control = Control::create(&client, &node, tag).await?;
    let mut stages = Vec::new();
    for backing in &backings {
        for mode in &modes {
            stages.push(Stage::create(&client, &node, *mode, *backing, tag).await?);
        }
    }
    let watched: Vec<&str> = stages
        .iter()
        .filter(|s| s.mode != Mode::None)
        .map(|s| s.namespace.as_str())
        .collect();
    let vigil = if watched.is_empty() {
        None
    } else {
        let namespaces = watched.join(",");
        Some(
            spawn_vigil(
                &node.kubeconfig,
                &[
                    "--controllers",
                    "criticalservice",
                    "--namespaces",
                    &namespaces,
                    "--pod-template-ns",
                    watched[0],
                ],
            )
            .await?,
        )
    };
    let outcome = measure(&client, &node, &args, &control, &stages, &cases).await;
    report_vigil(vigil);
    for stage in &stages {
        stage.delete(&client).await;
    }
    control.delete(&client).await;
    let results = outcome?;
    print_report(&args, &stages, &cases, &results, started.elapsed());
    if args.verify {
        verify(&stages, &cases, &results, args.verify_lossless)?;
    }
    Ok(())
}

fn report_vigil(vigil: Option<Vigil>) {
    if let Some(mut vigil) = vigil {
        say!("vigil run: {}{}", vigil.log_summary(), vigil.exited_note());
    }
}

type Results = BTreeMap<(usize, usize), Vec<RunResult>>;

/// Every case, in every mode, `runs` times, modes interleaved so they share the machine's mood.
async fn measure(
    client: &Client,
    node: &Node,
    args: &ClientsBench,
    control: &Control,
    stages: &[Stage],
    cases: &[Case],
) -> anyhow::Result<Results> {
    let mut results: Results = BTreeMap::new();
    for (c, case) in cases.iter().enumerate() {
        for stage in stages {
            apply_real(client, node, stage, *case).await?;
        }
        for run in 0..args.runs {
            for (s, stage) in stages.iter().enumerate() {
                if !case.runs_with(stage.backing) {
                    continue;
                }
                let result = run_once(client, node, args, control, stage, *case, run)
                    .await
                    .with_context(|| {
                        format!("{} with {}, run {}", case.title(), stage.title(), run + 1)
                    })?;
                eprintln!(
                    "vigil-bench: {} | {} | run {}: {} failed ({} lost; the control Service {} lost), window {} ms{}",
                    case.title(),
                    stage.title(),
                    run + 1,
                    result.failed,
                    result.lost,
                    result.control_lost,
                    result.window.as_millis(),
                    result
                        .note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                );
                results.entry((c, s)).or_default().push(result);
            }
        }
    }
    Ok(results)
}

/// The CRD as Vigil generates it (server-side apply: an older copy gains the new fields).
async fn install_crd(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = CriticalService::crd();
    let name = crd.name_any();
    crds.patch(
        &name,
        &PatchParams::apply("vigil-bench").force(),
        &Patch::Apply(&crd),
    )
    .await
    .context("applying the CriticalService CRD")?;
    wait_until("the CriticalService CRD to be Established", || async {
        let crd = crds.get(&name).await?;
        Ok(crd
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(()))
    })
    .await
}

/// A Service nothing touches, probed beside the case's: its lost requests are the node's own
/// (the probe and kube-proxy on a loaded host), which no controller causes or can prevent.
struct Control {
    namespace: String,
    cluster_ip: SocketAddr,
}

impl Control {
    /// Its namespace, one pod of the web image and its Service, answering.
    async fn create(client: &Client, node: &Node, tag: u32) -> anyhow::Result<Self> {
        let namespace = format!("clients-control-{tag}");
        create_namespace(client, &namespace).await?;
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "control", "labels": {"app": "control"}},
            "spec": pod_spec(node, false, 1),
        }))?;
        ok_if_exists(
            Api::<Pod>::namespaced(client.clone(), &namespace)
                .create(&PostParams::default(), &pod)
                .await,
        )?;
        let cluster_ip = create_service(client, &namespace, "control", json!({})).await?;
        wait_until("the control Service to answer", || async {
            let answer = probe_once(cluster_ip, PATIENCE, PATIENCE).await;
            Ok(answer.pod().is_some_and(|p| p == "control").then_some(()))
        })
        .await?;
        Ok(Self {
            namespace,
            cluster_ip,
        })
    }

    async fn delete(&self, client: &Client) {
        delete_namespace(client, &self.namespace).await;
    }
}

/// Creates the namespace (or keeps it, if it exists).
async fn create_namespace(client: &Client, name: &str) -> anyhow::Result<()> {
    let namespace: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    ok_if_exists(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
    )?;
    Ok(())
}

/// Deletes the namespace and everything in it, in the background.
async fn delete_namespace(client: &Client, name: &str) {
    let _ = Api::<Namespace>::all(client.clone())
        .delete(name, &DeleteParams::background())
        .await;
}

/// Creates Service `name` in `namespace`, with `labels`, selecting `app: name` on port 80
/// (to the web image's port), and returns its ClusterIP and port.
async fn create_service(
    client: &Client,
    namespace: &str,
    name: &str,
    labels: serde_json::Value,
) -> anyhow::Result<SocketAddr> {
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {"selector": {"app": name}, "ports": [{"port": 80, "targetPort": PORT}]}
    }))?;
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    ok_if_exists(services.create(&PostParams::default(), &service).await)?;
    let ip = services
        .get(name)
        .await?
        .spec
        .and_then(|s| s.cluster_ip)
        .with_context(|| format!("Service {namespace}/{name} has no ClusterIP"))?;
    format!("{ip}:80").parse().context("ClusterIP")
}

impl Stage {
    /// A namespace with the fallback's PodTemplate and the covered Service, and (with Vigil)
    /// the CriticalService covering it.
    async fn create(
        client: &Client,
        node: &Node,
        mode: Mode,
        backing: Backing,
        tag: u32,
    ) -> anyhow::Result<Self> {
        let namespace = format!("clients-{}-{}-{tag}", mode.key(), backing.key());
        create_namespace(client, &namespace).await?;
        let template: PodTemplate = serde_json::from_value(json!({
            "metadata": {"name": TEMPLATE},
            "template": {
                "metadata": {"labels": {"role": "fallback"}},
                "spec": pod_spec(node, true, 2),
            }
        }))?;
        ok_if_exists(
            Api::<PodTemplate>::namespaced(client.clone(), &namespace)
                .create(&PostParams::default(), &template)
                .await,
        )?;
        let cluster_ip =
            create_service(client, &namespace, SERVICE, json!({"critical": "true"})).await?;
        let critical_service = if mode == Mode::None {
            None
        } else {
            let name = namespace.clone();
            let cr: CriticalService = serde_json::from_value(json!({
                "apiVersion": "mycrd.com/v1",
                "kind": "CriticalService",
                "metadata": {"name": name},
                "spec": {
                    "namespace": namespace,
                    "matchLabels": [{"key": "critical", "value": "true"}],
                    "podTemplate": {"name": TEMPLATE, "namespace": namespace},
                    "warmStandby": (mode == Mode::Standby).then_some(true),
                    "drainSeconds": (mode == Mode::Standby).then_some(DRAIN_SECONDS),
                }
            }))?;
            ok_if_exists(
                Api::<CriticalService>::all(client.clone())
                    .create(&PostParams::default(), &cr)
                    .await,
            )?;
            Some(name)
        };
        Ok(Self {
            mode,
            backing,
            namespace,
            critical_service,
            cluster_ip,
        })
    }

    async fn delete(&self, client: &Client) {
        if let Some(name) = &self.critical_service {
            let _ = Api::<CriticalService>::all(client.clone())
                .delete(name, &DeleteParams::background())
                .await;
        }
        delete_namespace(client, &self.namespace).await;
    }

    fn pods(&self, client: &Client) -> Api<Pod> {
        Api::namespaced(client.clone(), &self.namespace)
    }

    fn title(&self) -> String {
        let backing = match self.backing {
            Backing::Deployment => "deploy",
            Backing::Bare => "bare",
        };
        format!("{}, {backing}", self.mode.title())
    }
}

/// The web image's pod: `POD_NAME` and `POD_IP` from the downward API (so answers name their
/// pod), readiness on `/healthz` every second, and either exit at once on SIGTERM or serve
/// through the grace period.
fn pod_spec(node: &Node, exit_on_term: bool, grace_seconds: i64) -> serde_json::Value {
    let mut env = vec![
        json!({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}),
    ];
    if exit_on_term {
        env.push(json!({"name": "EXIT_ON_TERM", "value": "1"}));
    }
    json!({
        "terminationGracePeriodSeconds": grace_seconds,
        "containers": [{
            "name": "web",
            "image": node.image_web,
            "imagePullPolicy": "Never",
            "ports": [{"containerPort": PORT}],
            "env": env,
            "readinessProbe": {"httpGet": {"path": "/healthz", "port": PORT}, "periodSeconds": 1},
        }]
    })
}

/// The real pods of a case: one replica, its server exiting on SIGTERM or not.
async fn apply_real(client: &Client, node: &Node, stage: &Stage, case: Case) -> anyhow::Result<()> {
    if stage.backing == Backing::Bare {
        // A new case may change the pod's spec: start from a fresh pod.
        let pods = stage.pods(client);
        for pod in pods.list(&ListParams::default()).await?.items {
            if !is_vigils(&pod) {
                pods.delete(&pod.name_any(), &DeleteParams::default())
                    .await?;
            }
        }
        return create_bare(client, node, stage, case).await;
    }
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": DEPLOYMENT},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": SERVICE}},
            "template": {
                "metadata": {"labels": {"app": SERVICE}},
                "spec": pod_spec(node, case.exits_on_term(), 3),
            }
        }
    }))?;
    Api::<Deployment>::namespaced(client.clone(), &stage.namespace)
        .patch(
            DEPLOYMENT,
            &PatchParams::apply("vigil-bench").force(),
            &Patch::Apply(&deployment),
        )
        .await
        .context("applying the Deployment")?;
    Ok(())
}

/// One bare real pod (no owner: nothing replaces it).
async fn create_bare(
    client: &Client,
    node: &Node,
    stage: &Stage,
    case: Case,
) -> anyhow::Result<()> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"generateName": format!("{DEPLOYMENT}-"), "labels": {"app": SERVICE}},
        "spec": pod_spec(node, case.exits_on_term(), 3),
    }))?;
    stage
        .pods(client)
        .create(&PostParams::default(), &pod)
        .await
        .context("creating a bare pod")?;
    Ok(())
}

/// Whether a real pod (not Vigil's, not being deleted) is there.
fn has_live_real(pods: &[Pod]) -> bool {
    pods.iter()
        .any(|p| !is_vigils(p) && p.metadata.deletion_timestamp.is_none())
}

async fn scale(
    client: &Client,
    node: &Node,
    stage: &Stage,
    case: Case,
    replicas: i32,
) -> anyhow::Result<()> {
    if stage.backing == Backing::Bare {
        let pods = stage.pods(client);
        let list = pods.list(&ListParams::default()).await?.items;
        if replicas == 0 {
            for pod in list.iter().filter(|p| !is_vigils(p)) {
                pods.delete(&pod.name_any(), &DeleteParams::default())
                    .await?;
            }
        } else if !has_live_real(&list) {
            create_bare(client, node, stage, case).await?;
        }
        return Ok(());
    }
    Api::<Deployment>::namespaced(client.clone(), &stage.namespace)
        .patch(
            DEPLOYMENT,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": replicas}})),
        )
        .await?;
    Ok(())
}

fn is_vigils(pod: &Pod) -> bool {
    pod.labels().get(MANAGED_BY).map(String::as_str) == Some("vigil")
}

fn is_waiting_standby(pod: &Pod) -> bool {
    pod.labels().get(ROLE_LABEL).map(String::as_str) == Some("standby")
        && pod.metadata.deletion_timestamp.is_none()
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .map_or(0, |cs| cs.iter().map(|c| c.restart_count).sum())
}

/// Whether a pod name (an answer's or a slice endpoint's) is one of Vigil's.
fn is_fallback(name: &str) -> bool {
    name.starts_with(PREFIX)
}

/// Waits until the stage is at rest: one real pod, Ready, never restarted, answering through
/// the ClusterIP; no pod of Vigil's but a waiting standby (Ready, in standby mode). Returns the
/// real pod.
async fn wait_steady(
    client: &Client,
    node: &Node,
    args: &ClientsBench,
    stage: &Stage,
    case: Case,
) -> anyhow::Result<Pod> {
    let pods = stage.pods(client);
    let mut replaced = String::new();
    let deadline = Instant::now() + STEADY_TIMEOUT;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &stage.namespace);
    loop {
        // A case that changes the real pods' template rolls the Deployment: its one pod is
        // replaced, and the pod a run triggers on must not be the one the rollout removes.
        let rolled_out = stage.backing == Backing::Bare
            || deployments.get(DEPLOYMENT).await.is_ok_and(|d| {
                let status = d.status.unwrap_or_default();
                status.observed_generation >= d.metadata.generation
                    && status.updated_replicas == Some(1)
                    && status.replicas == Some(1)
            });
        let list = pods.list(&ListParams::default()).await?.items;
        if stage.backing == Backing::Bare && !has_live_real(&list) {
            create_bare(client, node, stage, case).await?;
        }
        let (vigils, real): (Vec<&Pod>, Vec<&Pod>) = list.iter().partition(|p| is_vigils(p));
        let standby_ok = match stage.mode {
            Mode::Standby => {
                vigils.len() == 1 && is_waiting_standby(vigils[0]) && is_ready(vigils[0])
            }
            Mode::None | Mode::Vigil => vigils.is_empty(),
        };
        if let [pod] = real.as_slice() {
            // A restarted container would start its next crash in the kubelet's back-off: a
            // fresh pod keeps (b)'s runs alike.
            if restarts(pod) > 0 && pod.metadata.deletion_timestamp.is_none() {
                let name = pod.name_any();
                if replaced != name {
                    pods.delete(&name, &DeleteParams::default()).await?;
                    replaced = name;
                }
            } else if rolled_out
                && is_ready(pod)
                && pod.metadata.deletion_timestamp.is_none()
                && standby_ok
            {
                let name = pod.name_any();
                let mut answered = 0;
                for _ in 0..3 {
                    if probe_once(stage.cluster_ip, args.timeout, args.timeout)
                        .await
                        .pod()
                        == Some(&name)
                    {
                        answered += 1;
                    }
                }
                if answered == 3 {
                    return Ok((*pod).clone());
                }
            }
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: not at rest after {} s (real pods {:?}, Vigil's {:?})",
            stage.namespace,
            STEADY_TIMEOUT.as_secs(),
            real.iter().map(|p| p.name_any()).collect::<Vec<_>>(),
            vigils.iter().map(|p| p.name_any()).collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// For (c): the real pods gone and, with Vigil, the fallback answering the probe.
async fn wait_fallback_serving(
    client: &Client,
    node: &Node,
    args: &ClientsBench,
    stage: &Stage,
    case: Case,
) -> anyhow::Result<()> {
    scale(client, node, stage, case, 0).await?;
    let pods = stage.pods(client);
    let deadline = Instant::now() + STEADY_TIMEOUT;
    loop {
        let list = pods.list(&ListParams::default()).await?.items;
        let real_left = list.iter().any(|p| !is_vigils(p));
        let serving = match stage.mode {
            Mode::None => true,
            Mode::Vigil | Mode::Standby => {
                let mut answered = 0;
                for _ in 0..3 {
                    if probe_once(stage.cluster_ip, args.timeout, args.timeout)
                        .await
                        .pod()
                        .is_some_and(is_fallback)
                    {
                        answered += 1;
                    }
                }
                answered == 3
            }
        };
        if !real_left && serving {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "{}: the fallback did not take over",
            stage.namespace
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// One run of a case in a stage.
async fn run_once(
    client: &Client,
    node: &Node,
    args: &ClientsBench,
    control: &Control,
    stage: &Stage,
    case: Case,
    run: usize,
) -> anyhow::Result<RunResult> {
    let old = wait_steady(client, node, args, stage, case).await?;
    let mut before_answers = Vec::new();
    if case == Case::Arriving {
        let pre = Prober::start(stage.cluster_ip, args.interval, args.timeout);
        wait_fallback_serving(client, node, args, stage, case).await?;
        tokio::time::sleep(QUIET).await;
        before_answers = pre.stop().await;
    } else {
        tokio::time::sleep(QUIET).await;
    }
    let recorder = Recorder::start(client, &stage.namespace).await;
    let proxy_before = node.proxy_counters().await;
    node.forget_connections(stage.cluster_ip.ip()).await?;
    node.forget_connections(control.cluster_ip.ip()).await?;
    let prober = Prober::start(stage.cluster_ip, args.interval, args.timeout);
    let control_prober = Prober::start(control.cluster_ip, args.interval, args.timeout);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pods = stage.pods(client);
    let old_name = old.name_any();
    let old_uid = old.uid().unwrap_or_default();
    // Every mode's run `run` meets the kubelet's relist at the same phase (see `phase`).
    wait_for_phase(phase_of(run)).await;
    let t0 = Instant::now();
    match case {
        Case::Deleted | Case::Graceful => {
            pods.delete(&old_name, &DeleteParams::default()).await?;
        }
        Case::Killed => {
            let id = old
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.container_id.clone())
                .context("the real pod has no container id")?;
            node.kill_container(&id).await?;
        }
        Case::Arriving => scale(client, node, stage, case, 1).await?,
        Case::ScaledToZero => scale(client, node, stage, case, 0).await?,
    }
    let mut note = None;
    let mut recreated = false;
    loop {
        tokio::time::sleep(Duration::from_millis(100)).await;
        let list = pods.list(&ListParams::default()).await?.items;
        let nothing_replaces = case == Case::ScaledToZero
            || (stage.backing == Backing::Bare && matches!(case, Case::Deleted | Case::Graceful));
        if nothing_replaces && !recreated && t0.elapsed() >= BARE_RECREATE_AFTER {
            scale(client, node, stage, case, 1).await?;
            recreated = true;
        }
        let old_gone = match case {
            Case::Deleted | Case::Graceful | Case::ScaledToZero => {
                !list.iter().any(|p| p.uid() == Some(old_uid.clone()))
            }
            Case::Killed | Case::Arriving => true,
        };
        let real_ready: Vec<String> = list
            .iter()
            .filter(|p| !is_vigils(p) && is_ready(p) && p.metadata.deletion_timestamp.is_none())
            .filter(|p| case != Case::Killed || restarts(p) > 0)
            .map(|p| p.name_any())
            .collect();
        let fallbacks_gone = list.iter().filter(|p| is_vigils(p)).all(is_waiting_standby);
        let samples = prober.samples();
        let after: Vec<&Sample> = samples.iter().filter(|s| s.sent >= t0).collect();
        let real_answered = after.iter().any(|s| {
            s.outcome
                .pod()
                .is_some_and(|p| real_ready.iter().any(|r| r == p))
        });
        let last_failure = after
            .iter()
            .filter(|s| !s.outcome.ok())
            .map(|s| s.sent)
            .max()
            .unwrap_or(t0);
        if old_gone && real_answered && fallbacks_gone && last_failure.elapsed() >= SETTLED_FOR {
            break;
        }
        if t0.elapsed() > RUN_CAP {
            note = Some(format!(
                "not settled after {} s: old pod gone {old_gone}, real pod answered {real_answered}, fallbacks gone {fallbacks_gone}",
                RUN_CAP.as_secs()
            ));
            break;
        }
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let samples: Vec<Sample> = prober
        .stop()
        .await
        .into_iter()
        .filter(|s| s.sent >= t0)
        .collect();
    let control_samples: Vec<Sample> = control_prober
        .stop()
        .await
        .into_iter()
        .filter(|s| s.sent >= t0)
        .collect();
    let proxy = proxy_before.delta(&node.proxy_counters().await);
    let (failed, window) = failures(&samples);
    let lost = lost_of(&samples);
    let control_lost = lost_of(&control_samples);
    let fallback_answered = samples
        .iter()
        .chain(before_answers.iter())
        .any(|s| s.outcome.pod().is_some_and(is_fallback));
    let timeline = timeline(case, t0, &old_uid, &recorder, &samples);
    let past = real_back(&recorder.slices(), t0, |name| !is_fallback(name))
        .map(|back| outage_past(&samples, back));
    let past_real_return = past.map(|(outage, _)| outage);
    let isolated_failures = past.map_or(0, |(_, isolated)| isolated);
    if std::env::var_os("VIGIL_BENCH_TRACE").is_some() {
        trace(stage, case, t0, &recorder, &samples);
    }
    Ok(RunResult {
        failed,
        lost,
        control_lost,
        window,
        requests: samples.len(),
        fallback_answered,
        past_real_return,
        isolated_failures,
        timeline,
        proxy,
        note,
    })
}

/// `VIGIL_BENCH_TRACE=1`: what one run saw, on stderr, in ms after the trigger: the pods'
/// changes (ready, terminating, gone, role), the Service's ready endpoints, and the probe's
/// outcomes whenever they changed.
fn trace(stage: &Stage, case: Case, t0: Instant, recorder: &Recorder, samples: &[Sample]) {
    let at = |i: Instant| {
        i.checked_duration_since(t0)
            .map_or(-1, |d| d.as_millis() as i64)
    };
    let mut lines: Vec<(i64, String)> = Vec::new();
    for p in recorder.pods() {
        let role = p.labels.get(ROLE_LABEL).cloned().unwrap_or_default();
        lines.push((
            at(p.at),
            format!(
                "pod {} sched={} run={} ready={} term={} gone={} role={role}",
                p.name, p.scheduled, p.running, p.ready, p.terminating, p.gone
            ),
        ));
    }
    for s in recorder.slices() {
        lines.push((at(s.at), format!("slice ready={:?}", s.ready)));
    }
    let mut last = String::new();
    let mut count = 0;
    for s in samples {
        let what = match &s.outcome {
            Outcome::Answered(pod) => format!("answer {pod}"),
            other => format!("{other:?}"),
        };
        if what != last {
            if count > 0 {
                lines.push((at(s.sent), format!("  (x{count} {last})")));
            }
            lines.push((at(s.sent), format!("probe {what}")));
            last = what;
            count = 0;
        }
        count += 1;
    }
    lines.sort_by_key(|(t, _)| *t);
    // The trigger's wall-clock time, to line the trace up with the node's logs (kube-proxy's
    // syncs, the kubelet's).
    let wall = std::time::SystemTime::now()
        .checked_sub(t0.elapsed())
        .and_then(|t| k8s_openapi::jiff::Timestamp::try_from(t).ok())
        .map(|t| t.to_string())
        .unwrap_or_default();
    eprintln!(
        "--- trace {} {} (trigger at {wall})",
        case.title(),
        stage.title()
    );
    for (t, line) in lines {
        eprintln!("{t:>7} {line}");
    }
}

/// The milestones of a run, after the trigger: when the API showed the old pod going (or not
/// ready, for a crash), and for the pod that answered first after the trigger — Vigil's, else the
/// real replacement — when it was created (or promoted), scheduled, running, Ready, a ready
/// endpoint in the slice, and first answered.
fn timeline(
    case: Case,
    t0: Instant,
    old_uid: &str,
    recorder: &Recorder,
    samples: &[Sample],
) -> BTreeMap<&'static str, Duration> {
    let pods = recorder.pods();
    let slices = recorder.slices();
    let after = |at: Instant| at.checked_duration_since(t0);
    let mut out = BTreeMap::new();
    let noticed = pods.iter().find(|p| {
        p.at >= t0
            && p.uid == old_uid
            && match case {
                Case::Deleted | Case::Graceful | Case::ScaledToZero => p.terminating || p.gone,
                Case::Killed => !p.ready,
                Case::Arriving => false,
            }
    });
    if let Some(d) = noticed.and_then(|p| after(p.at)) {
        out.insert("1 API shows it", d);
    }
    // The first pod to answer after the last failure, or the first at all if none failed.
    let last_failure = samples.iter().rfind(|s| !s.outcome.ok()).map(|s| s.sent);
    let answering = samples
        .iter()
        .filter(|s| last_failure.is_none_or(|f| s.sent > f))
        .find_map(|s| match &s.outcome {
            Outcome::Answered(pod) if !pod.is_empty() => Some(pod.clone()),
            _ => None,
        });
    let Some(name) = answering else {
        return out;
    };
    let events: Vec<&PodSeen> = pods
        .iter()
        .filter(|p| p.name == name && p.at >= t0 && !p.gone)
        .collect();
    let first =
        |pred: &dyn Fn(&PodSeen) -> bool| events.iter().find(|p| pred(p)).and_then(|p| after(p.at));
    let promoted = |p: &PodSeen| p.labels.get(ROLE_LABEL).map(String::as_str) != Some("standby");
    if let Some(d) = first(&promoted) {
        out.insert("2 created/promoted", d);
    }
    if let Some(d) = first(&|p| promoted(p) && p.scheduled) {
        out.insert("3 scheduled", d);
    }
    if let Some(d) = first(&|p| promoted(p) && p.running) {
        out.insert("4 running", d);
    }
    if let Some(d) = first(&|p| promoted(p) && p.ready) {
        out.insert("5 ready", d);
    }
    // A promoted standby is in the slice once the slice lists it; a restarted pod once it is
    // listed again after the trigger.
    if let Some(d) = slices
        .iter()
        .filter(|s| s.at >= t0 && s.ready.contains(&name))
        .find(|_| !matches!(case, Case::Killed) || out.contains_key("5 ready"))
        .and_then(|s| after(s.at))
    {
        out.insert("6 in EndpointSlice", d);
    }
    if let Some(d) = samples
        .iter()
        .filter(|s| last_failure.is_none_or(|f| s.sent > f))
        .find(|s| s.outcome.pod() == Some(&name))
        .and_then(|s| after(s.sent))
    {
        out.insert("7 first answer", d);
    }
    out
}

fn ms(d: Duration) -> String {
    format!("{}", d.as_millis())
}

fn median_of(values: &[Duration]) -> Option<Duration> {
    let mut sorted = values.to_vec();
    sorted.sort();
    (!sorted.is_empty()).then(|| percentile(&sorted, 50.0))
}

fn print_report(
    args: &ClientsBench,
    stages: &[Stage],
    cases: &[Case],
    results: &Results,
    took: Duration,
) {
    say!(
        "CriticalService judged by its clients: a new connection to the ClusterIP every {} ms (failed: no answer within {} ms; lost: none within {} ms), {} run(s) per cell; {} s in all",
        args.interval.as_millis(),
        args.timeout.as_millis(),
        PATIENCE.as_millis(),
        args.runs,
        took.as_secs()
    );
    say!(
        "{:<54} {:<26} {:>22} {:>18} {:>26} {:>9} {:>19}",
        "case",
        "mode",
        "failed: median (range)",
        "lost: med. (range)",
        "window ms: median (range)",
        "fallback",
        "past real's return"
    );
    for (c, case) in cases.iter().enumerate() {
        for (s, stage) in stages.iter().enumerate() {
            let Some(runs) = results.get(&(c, s)) else {
                continue;
            };
            let mut failed: Vec<usize> = runs.iter().map(|r| r.failed).collect();
            failed.sort_unstable();
            let mut lost: Vec<usize> = runs.iter().map(|r| r.lost).collect();
            lost.sort_unstable();
            let windows: Vec<Duration> = runs.iter().map(|r| r.window).collect();
            let mut sorted = windows.clone();
            sorted.sort();
            let answered = runs.iter().filter(|r| r.fallback_answered).count();
            let isolated: usize = runs.iter().map(|r| r.isolated_failures).sum();
            let past = runs
                .iter()
                .filter_map(|r| r.past_real_return)
                .max()
                .map_or_else(|| "-".into(), |d| format!("{} ms", d.as_millis()))
                + &if isolated > 0 {
                    format!(" +{isolated} isol.")
                } else {
                    String::new()
                };
            say!(
                "{:<54} {:<26} {:>22} {:>18} {:>26} {:>9} {:>19}",
                case.title(),
                stage.title(),
                format!(
                    "{} ({}–{})",
                    failed[failed.len() / 2],
                    failed[0],
                    failed[failed.len() - 1]
                ),
                format!(
                    "{} ({}–{})",
                    lost[lost.len() / 2],
                    lost[0],
                    lost[lost.len() - 1]
                ),
                format!(
                    "{} ({}–{})",
                    ms(median_of(&windows).unwrap_or_default()),
                    ms(sorted[0]),
                    ms(sorted[sorted.len() - 1])
                ),
                format!("{answered}/{}", runs.len()),
                past
            );
        }
    }
    say!();
    say!(
        "Where the time goes (median ms after the trigger, for the pod that answered after the failures: Vigil's, else the real replacement); kube-proxy per run: syncs, mean sync ms, mean network-programming ms"
    );
    let steps = [
        "1 API shows it",
        "2 created/promoted",
        "3 scheduled",
        "4 running",
        "5 ready",
        "6 in EndpointSlice",
        "7 first answer",
    ];
    say!(
        "{:<54} {:<26} {:>8} {:>9} {:>9} {:>8} {:>7} {:>7} {:>7} {:>14} {:>6} {:>7} {:>8}",
        "case",
        "mode",
        "API saw",
        "created",
        "schedul.",
        "running",
        "ready",
        "slice",
        "answer",
        "slice→answer",
        "syncs",
        "sync",
        "program"
    );
    for (c, case) in cases.iter().enumerate() {
        for (s, stage) in stages.iter().enumerate() {
            let Some(runs) = results.get(&(c, s)) else {
                continue;
            };
            let cell = |step: &str| {
                let values: Vec<Duration> = runs
                    .iter()
                    .filter_map(|r| r.timeline.get(step).copied())
                    .collect();
                median_of(&values).map_or_else(|| "-".into(), ms)
            };
            let share: Vec<Duration> = runs
                .iter()
                .filter_map(|r| {
                    let slice = r.timeline.get("6 in EndpointSlice")?;
                    let answer = r.timeline.get("7 first answer")?;
                    Some(answer.saturating_sub(*slice))
                })
                .collect();
            let mut proxy = ProxyCounters::default();
            for r in runs {
                proxy.add(&r.proxy);
            }
            let n = runs.len() as f64;
            let mean_ms = |sum: f64, count: f64| {
                if count > 0.0 {
                    format!("{:.0}", sum / count * 1000.0)
                } else {
                    "-".into()
                }
            };
            let mut row = vec![case.title().to_owned(), stage.title()];
            row.extend(steps.iter().map(|s| cell(s)));
            say!(
                "{:<54} {:<26} {:>8} {:>9} {:>9} {:>8} {:>7} {:>7} {:>7} {:>14} {:>6.1} {:>7} {:>8}",
                row[0],
                row[1],
                row[2],
                row[3],
                row[4],
                row[5],
                row[6],
                row[7],
                row[8],
                median_of(&share).map_or_else(|| "-".into(), ms),
                proxy.syncs / n,
                mean_ms(proxy.sync_sum, proxy.syncs),
                mean_ms(proxy.programming_sum, proxy.programmed)
            );
        }
    }
    let notes: Vec<String> = results
        .values()
        .flatten()
        .filter_map(|r| r.note.clone())
        .collect();
    if !notes.is_empty() {
        say!();
        say!("notes:");
        for note in notes {
            say!("  {note}");
        }
    }
    say!();
    let control_lost: usize = results.values().flatten().map(|r| r.control_lost).sum();
    let runs: usize = results.values().map(Vec::len).sum();
    say!(
        "The control Service (a pod nothing touches, probed beside every run): {control_lost} requests lost in {runs} runs."
    );
    say!(
        "\"past real's return\": the longest, over the runs, that the outage went on after a real pod was back as a ready endpoint (with no controller, kube-proxy's next sync ends it then); \"+N isol.\": requests that failed later, among {} ms or more of steady answers (counted in the failed requests and the window above, not in the outage).",
        STEADY.as_millis()
    );
    say!(
        "Targets (issues 27, 35): 0 requests lost in (c) and (d) by default and with the standby; in (a) and (b) never worse than no controller by default (no failure past the real pod's return by more than {} ms), a median window ≤ 150 ms with the standby.",
        REAL_PROGRAMMED.as_millis()
    );
}

/// The outcomes `--verify` holds the runs to, never durations: every run settled; with Vigil,
/// the fallback answered the Service's traffic in (c), and with the standby in every case; in
/// (a) and (b) no run with Vigil worse than no controller (judged inside the run); with
/// `--verify-lossless`, no request lost in (c) and (d) by default and with the standby.
fn verify(
    stages: &[Stage],
    cases: &[Case],
    results: &Results,
    verify_lossless: bool,
) -> anyhow::Result<()> {
    let mut wrong = Vec::new();
    for ((c, s), runs) in results {
        let (case, stage) = (cases[*c], &stages[*s]);
        let mode = stage.mode;
        for (i, run) in runs.iter().enumerate() {
            let what = format!("{} with {}, run {}", case.title(), stage.title(), i + 1);
            if let Some(note) = &run.note {
                wrong.push(format!("{what}: {note}"));
            }
            let must_answer = match mode {
                Mode::None => false,
                // Bare pods: nothing else comes back, so the fallback must answer (but in (b),
                // where the kubelet may restart the container before it is Ready).
                // (e): nothing replaces the pods scaled away either.
                Mode::Vigil => {
                    matches!(case, Case::Arriving | Case::ScaledToZero)
                        || (stage.backing == Backing::Bare && case != Case::Killed)
                }
                Mode::Standby => true,
            };
            if must_answer && !run.fallback_answered {
                wrong.push(format!("{what}: no answer came from a pod of Vigil's"));
            }
            if mode != Mode::None
                && matches!(case, Case::Deleted | Case::Killed | Case::ScaledToZero)
                && let Some(past) = run.past_real_return
                && past > REAL_PROGRAMMED
            {
                wrong.push(format!(
                    "{what}: the outage went on {} ms after a real pod was back as a ready endpoint (no controller's clients wait for kube-proxy's next sync only: worse than no controller)",
                    past.as_millis()
                ));
            }
            if verify_lossless && mode != Mode::None && case.lossless_target() && run.lost > 0 {
                wrong.push(format!(
                    "{what}: {} of {} requests lost ({} failed in all)",
                    run.lost, run.requests, run.failed
                ));
            }
        }
    }
    anyhow::ensure!(
        wrong.is_empty(),
        "outcomes not met:\n  {}",
        wrong.join("\n  ")
    );
    Ok(())
}

async fn wait_until<F, Fut, T>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(value) = check().await? {
            return Ok(value);
        }
        anyhow::ensure!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
