//! Vigil's own rolling upgrade on a real node (CI's third stage): the chart installed with two
//! replicas, a CriticalService protecting a Service that has one real backend pod, then
//! `helm upgrade` to a new image tag (the same binary, tagged anew in the node's containerd), as
//! a platform team upgrades Vigil.
//!
//! What it measures, and how (printed, run with `--nocapture`; no duration is asserted):
//! - every handover of the Lease during the rollout, from the Lease's own records: the leaving
//!   leader's release record (its `renewTime`, written as it lets go) to the next holder's
//!   `acquireTime`. Both are written by pods of this one node, so by one clock;
//! - the leaderless gap as a user sees it: the Service's last backend pod is deleted the moment
//!   the host sees the first release, when the old leader has stopped acting. Only the new
//!   leader can bring the fallback, so release → fallback pod seen (by a watch on the host,
//!   the same clock) bounds from above the gap from the release to the new leader's first
//!   reconcile, which it runs on every object as it takes the Lease.
//!
//! What it asserts: the leaving leader releases the Lease, the fallback appears and serves the
//! Service's traffic, the rollout completes, and afterwards exactly one replica leads, one of the
//! new pods (by the Lease and by each pod's `leader_election_master_status`); then a drain's
//! evictions: the chart's default PodDisruptionBudget lets one replica go, not both.
//!
//! Needs a node (`../shared/kube/node-up.sh`), Vigil's image loaded into it (`.ci/image`,
//! `VIGIL_TEST_IMAGE`), the node's containerd socket (`KUBE_NODE_CONTAINERD_SOCK`, for the new
//! tag) and Helm (`VIGIL_HELM`); without them it prints a note and passes.

use crate::node_support;
use crate::support;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, EvictParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::{Client, Resource};
use node_support::{diagnose, http_get, http_get_path, logs, node, split_image};
use serde_json::json;
use support::{Helm, chart_dir};
use vigil_apis::CriticalService;
use vigil_testenv::{TestEnv, wait_for};

/// The Lease `vigil run` elects its leader on (its `--lease-name` default).
const LEASE: &str = "vigil-leader";
/// The fallback pod the `frontend` Service gets (`service-watcher-<service>`).
const FALLBACK: &str = "service-watcher-frontend";
/// The Service's one real backend.
const BACKEND: &str = "backend";
/// Bound on each wait for the cluster (a loaded CI machine is slow; nothing is timed by it).
const WAIT: Duration = Duration::from_secs(90);
/// The port of `/metrics` in Vigil's pods (the chart's `metrics.port`).
const METRICS_PORT: u16 = 8080;

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn name<K: Resource>(object: &K) -> String {
    object.meta().name.clone().unwrap_or_default()
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn image(pod: &Pod) -> Option<&str> {
    pod.spec.as_ref()?.containers.first()?.image.as_deref()
}

/// Vigil's pods of the release that are not terminating.
async fn vigil_pods(pods: &Api<Pod>, release: &str) -> Vec<Pod> {
    pods.list(&ListParams::default().labels(&format!("app.kubernetes.io/instance={release}")))
        .await
        .map(|l| l.items)
        .unwrap_or_default()
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .collect()
}

/// Waits until the release has exactly two pods, all Ready and running `image`.
async fn ready_vigil_pods(pods: &Api<Pod>, release: &str, wanted: &str) -> Vec<Pod> {
    wait_for(&format!("2 Ready Vigil pods of {wanted}"), WAIT, || async {
        let all = vigil_pods(pods, release).await;
        let ready = all
            .iter()
            .filter(|p| is_ready(p) && image(p) == Some(wanted))
            .count();
        if all.len() == 2 && ready == 2 {
            Ok(Some(all))
        } else {
            Err(format!("{} pods, {ready} Ready with {wanted}", all.len()))
        }
    })
    .await
    .expect("Vigil's pods Ready")
}

fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// The pod among `pods` that holds the Lease (identities are `<pod name>_<random>`).
async fn wait_leader(leases: &Api<Lease>, pods: &[Pod]) -> String {
    wait_for("one of Vigil's pods to lead", WAIT, || async {
        let lease = leases.get_opt(LEASE).await.ok().flatten();
        let current = lease.as_ref().and_then(holder).map(str::to_owned);
        let leader = pods.iter().map(name).find(|p| {
            current
                .as_deref()
                .is_some_and(|h| h.starts_with(&format!("{p}_")))
        });
        match leader {
            Some(leader) => Ok(Some(leader)),
            None => Err(format!("holder {current:?}")),
        }
    })
    .await
    .expect("a leader")
}

/// Polls the Service's ClusterIP from the host until it answers as `pod` does (the web image
/// answers `pod=<name> ip=<ip>`).
async fn wait_answer(addr: SocketAddrV4, pod: &str) {
    let wanted = format!("pod={pod} ");
    wait_for(&format!("{addr} to answer as {pod}"), WAIT, || async {
        match http_get(addr).await {
            Some(body) if body.starts_with(&wanted) => Ok(Some(())),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .expect("the Service answers");
}

/// Tags the node's image `from` as `to` too, in the node's containerd (namespace `k8s.io`, the
/// kubelet's): the same binary under a new tag, as a release would be published. None (with
/// what went wrong) when the node's containerd cannot be reached.
fn tag_image(from: &str, to: &str) -> Result<(), String> {
    let socket = std::env::var("KUBE_NODE_CONTAINERD_SOCK")
        .map_err(|_| "KUBE_NODE_CONTAINERD_SOCK is unset".to_owned())?;
    let output = Command::new("ctr")
        .args(["--address", &socket, "--namespace", "k8s.io"])
        .args(["images", "tag", "--force", from, to])
        .output()
        .map_err(|e| format!("ctr: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ctr images tag: {}",
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A version of the Lease and when the host saw it.
#[derive(Clone)]
struct Seen {
    at: SystemTime,
    lease: Lease,
}

/// Records every version of the Lease the host sees, from now on, into `seen`; `released`
/// hears of each release record (empty holder) as it arrives.
fn record_lease(
    leases: Api<Lease>,
    seen: Arc<Mutex<Vec<Seen>>>,
    released: tokio::sync::mpsc::UnboundedSender<()>,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let params = WatchParams::default().fields(&format!("metadata.name={LEASE}"));
        let mut version = "0".to_owned();
        loop {
            let Ok(stream) = leases.watch(&params, &version).await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                let lease = match event {
                    Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease)) => lease,
                    Ok(WatchEvent::Bookmark(b)) => {
                        version = b.metadata.resource_version;
                        continue;
                    }
                    // Gone, or a broken stream: start again from the Lease as it is.
                    _ => {
                        version = "0".to_owned();
                        break;
                    }
                };
                let at = SystemTime::now();
                if let Some(v) = lease.metadata.resource_version.clone() {
                    version = v;
                }
                let release = holder(&lease).is_none();
                seen.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(Seen { at, lease });
                if release {
                    let _ = released.send(());
                }
            }
        }
    })
}

/// When the host first sees the pod `pod` of `namespace` (a watch: the host's clock, as soon as
/// the API server tells).
fn first_sight(client: Client, namespace: &str, pod: &str) -> tokio::task::JoinHandle<SystemTime> {
    let pods: Api<Pod> = Api::namespaced(client, namespace);
    let params = WatchParams::default().fields(&format!("metadata.name={pod}"));
    tokio::spawn(async move {
        loop {
            let Ok(stream) = pods.watch(&params, "0").await else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut stream = std::pin::pin!(stream);
            while let Some(event) = stream.next().await {
                if let Ok(WatchEvent::Added(_) | WatchEvent::Modified(_)) = event {
                    return SystemTime::now();
                }
            }
        }
    })
}

fn micros(t: &Timestamp) -> i64 {
    t.as_microsecond()
}

fn host_micros(t: SystemTime) -> i64 {
    Timestamp::try_from(t).map_or(0, |t| t.as_microsecond())
}

fn ms(micros: i64) -> String {
    // Micro- to milliseconds for printing; the precision lost is below what is measured.
    let ms = micros as f64 / 1000.0;
    format!("{ms:.0} ms")
}

/// One handover of the Lease, in µs since the epoch.
struct Handover {
    /// The release record's `renewTime`: when the leaving leader let go.
    released: i64,
    /// The next holder's pod.
    next: String,
    /// Its `acquireTime`.
    acquired: i64,
    /// When the host saw the release, then the next holder (its own watch).
    seen_released: i64,
    seen_acquired: i64,
}

/// Each release record followed by the next holder, from the Lease versions seen in order.
fn handovers(seen: &[Seen]) -> Vec<Handover> {
    let mut out = Vec::new();
    let mut release: Option<(i64, i64)> = None;
    for version in seen {
        let Some(spec) = version.lease.spec.as_ref() else {
            continue;
        };
        let at = host_micros(version.at);
        match holder(&version.lease) {
            None => release = spec.renew_time.as_ref().map(|t| (micros(&t.0), at)),
            Some(next) => {
                if let (Some((released, seen_released)), Some(acquired)) = (
                    release.take(),
                    spec.acquire_time.as_ref().map(|t| micros(&t.0)),
                ) {
                    out.push(Handover {
                        released,
                        // Identities are `<pod name>_<random>`.
                        next: next.split('_').next().unwrap_or_default().to_owned(),
                        acquired,
                        seen_released,
                        seen_acquired: at,
                    });
                }
            }
        }
    }
    out
}

/// Which of `pods` report leading on their own `/metrics` (from the host, by pod IP).
async fn self_reported_leaders(pods: &[Pod]) -> Result<Vec<String>, String> {
    let mut leading = Vec::new();
    for pod in pods {
        let ip: Ipv4Addr = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok())
            .ok_or_else(|| format!("{}: no pod IP", name(pod)))?;
        let metrics = http_get_path(SocketAddrV4::new(ip, METRICS_PORT), "/metrics")
            .await
            .ok_or_else(|| format!("{}: no /metrics", name(pod)))?;
        let status = metrics
            .lines()
            .find(|l| l.starts_with("leader_election_master_status"))
            .and_then(|l| l.split_whitespace().last())
            .ok_or_else(|| format!("{}: no leader_election_master_status", name(pod)))?;
        if status == "1" {
            leading.push(name(pod));
        }
    }
    Ok(leading)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_upgrade_hands_over_at_once_and_keeps_the_service() {
    let test = "a_rolling_upgrade_hands_over_at_once_and_keeps_the_service";
    let Some(node) = node(test) else { return };
    let home =
        std::env::temp_dir().join(format!("vigil-node-rolling-upgrade-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("helm home");
    let Some(helm) = Helm::find(&node.kubeconfig, &home) else {
        eprintln!("skipped {test}: no helm (set VIGIL_HELM or put helm on PATH)");
        return;
    };
    let (repository, tag) = split_image(&node.image);
    let next_tag = format!("{tag}-upgrade");
    let next_image = format!("{repository}:{next_tag}");
    if let Err(e) = tag_image(&node.image, &next_image) {
        eprintln!("skipped {test}: cannot tag {} anew: {e}", node.image);
        return;
    }
    let env = TestEnv::start().await.expect("the node's API server");
    let client: Client = env.client();
    let ns = env.namespace().to_owned();
    let suffix = ns.trim_start_matches("vigil-test-").to_owned();
    let release = format!("vigil-{suffix}");
    // Two replicas and the PodDisruptionBudget are the chart's defaults; the fallback is the
    // node's web server, a well-behaved one that exits on SIGTERM.
    let values = json!({
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "criticalService": {"podTemplate": {
            "image": node.web_image,
            "env": [{"name": "PORT", "value": "80"}, {"name": "EXIT_ON_TERM", "value": "1"}],
        }},
    });
    let values_file = home.join("values.yaml");
    std::fs::write(&values_file, values.to_string()).expect("values file");
    let values_file = values_file.to_string_lossy().into_owned();
    let chart = chart_dir();
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

    let install = helm.try_run(&[
        "install",
        &release,
        &chart,
        "-f",
        &values_file,
        "--namespace",
        &ns,
        "--wait",
        "--timeout",
        "180s",
    ]);
    if let Err(e) = install {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let old = ready_vigil_pods(&pods, &release, &node.image).await;
    let first_leader = wait_leader(&leases, &old).await;

    // A Service with one real backend, protected by a CriticalService: no fallback while the
    // backend serves.
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = services
        .create(
            &PostParams::default(),
            &parse(json!({
                "metadata": {"name": "frontend", "labels": {"role": "frontend"}},
                "spec": {"selector": {"role": "frontend"}, "ports": [{"port": 80}]},
            })),
        )
        .await
        .expect("the Service");
    let cluster_ip: Ipv4Addr = service
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("a ClusterIP");
    let addr = SocketAddrV4::new(cluster_ip, 80);
    pods.create(
        &PostParams::default(),
        &parse(json!({
            "metadata": {"name": BACKEND, "labels": {"role": "frontend"}},
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "web", "image": node.web_image, "imagePullPolicy": "Never",
                    "env": [{"name": "PORT", "value": "80"}, {"name": "EXIT_ON_TERM", "value": "1"}],
                    "ports": [{"containerPort": 80}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 1},
                }],
            },
        })),
    )
    .await
    .expect("the backend pod");
    wait_answer(addr, BACKEND).await;
    let critical = format!("frontend-{suffix}");
    let criticals: Api<CriticalService> = Api::all(client.clone());
    env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<CriticalService>(&()),
        &critical,
    );
    criticals
        .create(
            &PostParams::default(),
            &parse(json!({
                "apiVersion": "mycrd.com/v1", "kind": "CriticalService",
                "metadata": {"name": critical},
                "spec": {"namespace": ns, "matchLabels": [{"key": "role", "value": "frontend"}]},
            })),
        )
        .await
        .expect("the CriticalService");

    // The leader has seen the backend: no fallback (the one that comes later is the new
    // leader's doing).
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        pods.get_opt(FALLBACK).await.expect("get").is_none(),
        "no fallback while the backend serves"
    );

    // The upgrade: a new image tag, so a rolling update replaces both pods (one more first, then
    // one old one at a time: one or two handovers, as the old leader goes first or last).
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (released_tx, mut released) = tokio::sync::mpsc::unbounded_channel();
    let recorder = record_lease(leases.clone(), seen.clone(), released_tx);
    let fallback_seen = first_sight(client.clone(), &ns, FALLBACK);
    let upgrade = {
        let helm = Helm {
            bin: helm.bin.clone(),
            kubeconfig: helm.kubeconfig.clone(),
            home: helm.home.clone(),
        };
        let args: Vec<String> = [
            "upgrade",
            &release,
            &chart,
            "-f",
            &values_file,
            "--set",
            &format!("image.tag={next_tag}"),
            "--namespace",
            &ns,
            "--wait",
            "--timeout",
            "180s",
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        tokio::task::spawn_blocking(move || {
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            helm.try_run(&args)
        })
    };
    let started = Instant::now();
    // Skip releases seen before the upgrade began (none are expected: the leader renews).
    while released.try_recv().is_ok() {}
    let first_release = tokio::time::timeout(WAIT * 2, released.recv()).await;
    if !matches!(first_release, Ok(Some(()))) {
        panic!(
            "no release of the Lease seen during the upgrade\n{}\n{}",
            logs(&client, &ns, &first_leader).await,
            diagnose(&client, &ns).await
        );
    }
    // The old leader has let go (it stopped acting before it released): the last backend goes
    // now, so the fallback can only come from the new leader.
    let deleted_at = SystemTime::now();
    pods.delete(BACKEND, &DeleteParams::default().grace_period(0))
        .await
        .expect("delete the last backend pod");
    let fallback_at = match tokio::time::timeout(WAIT, fallback_seen).await {
        Ok(Ok(at)) => at,
        _ => {
            let mut said = String::new();
            for pod in vigil_pods(&pods, &release).await {
                said.push_str(&format!(
                    "{}:\n{}\n",
                    name(&pod),
                    logs(&client, &ns, &name(&pod)).await
                ));
            }
            panic!(
                "no fallback pod after the last backend went mid-upgrade\n{said}{}",
                diagnose(&client, &ns).await
            )
        }
    };
    let upgraded = upgrade.await.expect("helm upgrade ran");
    if let Err(e) = upgraded {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let rollout = started.elapsed();
    wait_answer(addr, FALLBACK).await;

    // After the rollout: both pods new, exactly one leading, by the Lease and by their own word.
    let deployment = deployments.get(&release).await.expect("the Deployment");
    let status = deployment.status.unwrap_or_default();
    assert_eq!(status.updated_replicas, Some(2), "{status:?}");
    let new = ready_vigil_pods(&pods, &release, &next_image).await;
    let leader = wait_leader(&leases, &new).await;
    let leaders = wait_for("exactly one pod to report leading", WAIT, || async {
        match self_reported_leaders(&new).await {
            Ok(leaders) if leaders.len() == 1 => Ok(Some(leaders)),
            Ok(leaders) => Err(format!("{leaders:?} lead by their metrics")),
            Err(e) => Err(e),
        }
    })
    .await
    .expect("one leader");
    assert_eq!(
        leaders.as_slice(),
        std::slice::from_ref(&leader),
        "the Lease's holder leads"
    );

    recorder.abort();
    let seen = seen
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let handovers = handovers(&seen);
    assert!(!handovers.is_empty(), "a handover took place");
    let first_release_at = handovers[0].released;
    let gaps: Vec<String> = handovers
        .iter()
        .map(|h| {
            format!(
                "{} to {} (as the host saw it: {})",
                ms(h.acquired - h.released),
                h.next,
                ms(h.seen_acquired - h.seen_released)
            )
        })
        .collect();
    eprintln!(
        "node_upgrade: helm upgrade --wait to {next_image}: {:.1} s; {} handover(s), release -> \
         the next holder's acquireTime: {}",
        rollout.as_secs_f64(),
        handovers.len(),
        gaps.join(", ")
    );
    eprintln!(
        "node_upgrade: leaderless gap, first release -> fallback pod seen (the new leader acting \
         on the last backend deleted at the release): {} (the host sent the deletion {} after the \
         release); {leader} leads after the rollout",
        ms(host_micros(fallback_at) - first_release_at),
        ms(host_micros(deleted_at) - first_release_at)
    );

    // A node drain keeps a replica: the chart's default PodDisruptionBudget lets one of the two
    // pods be evicted, and refuses the other until a replacement is Ready (seconds away: its
    // container must start and its caches sync).
    let budgets: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    wait_for("the budget to allow one disruption", WAIT, || async {
        let budget = budgets.get(&release).await.map_err(|e| e.to_string())?;
        let status = budget.status.unwrap_or_default();
        // Counted on the pods as they are now: both new ones Ready.
        if status.disruptions_allowed == 1 && status.current_healthy == 2 {
            Ok(Some(()))
        } else {
            Err(format!("{status:?}"))
        }
    })
    .await
    .expect("the chart's PodDisruptionBudget, by default");
    // A client that reports a refusal (429) instead of retrying it, as kube's does by default
    // (`kubectl drain` retries too; here the refusal itself is the outcome).
    let mut config = env.config().await.expect("the node's client config");
    config.default_retry = false;
    let evictions: Api<Pod> = Api::namespaced(Client::try_from(config).expect("a client"), &ns);
    let first_evicted = evictions
        .evict(&name(&new[0]), &EvictParams::default())
        .await;
    assert!(
        first_evicted.is_ok(),
        "the first eviction: {first_evicted:?}"
    );
    let second_evicted = evictions
        .evict(&name(&new[1]), &EvictParams::default())
        .await;
    if !matches!(&second_evicted, Err(kube::Error::Api(status)) if status.code == 429) {
        let budget = budgets.get(&release).await.map(|b| b.status);
        let states: Vec<String> = vigil_pods(&pods, &release)
            .await
            .iter()
            .map(|p| format!("{} ready={}", name(p), is_ready(p)))
            .collect();
        panic!(
            "the second eviction is not refused by the disruption budget: {second_evicted:?}; \
             budget {budget:?}; pods {states:?}"
        );
    }

    criticals
        .delete(&critical, &DeleteParams::default())
        .await
        .expect("delete the CriticalService");
    helm.try_run(&[
        "uninstall",
        &release,
        "--namespace",
        &ns,
        "--wait",
        "--timeout",
        "180s",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    env.cleanup().await;
    let _ = std::fs::remove_dir_all(&home);
}
