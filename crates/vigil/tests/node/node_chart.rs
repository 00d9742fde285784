//! Vigil installed by its chart on a real node (CI's third stage): `helm install --wait` with two
//! replicas whose pods the kubelet runs from Vigil's own image and judges Ready through the
//! chart's probes, as uid 65532 with a read-only root, reaching the API server through the
//! `kubernetes` Service; one leads on the Lease; the article's CriticalService scenario with a
//! fallback container that really serves the Service's traffic; the leader's pod deleted hands
//! over; `helm upgrade`, `rollback` and `uninstall` leave nothing of the release behind.
//!
//! Needs a node (`../shared/kube/node-up.sh`), Vigil's image loaded into it (`.ci/image`,
//! `VIGIL_TEST_IMAGE`) and Helm (`VIGIL_HELM`); without them it prints a note and passes. It prints
//! what it measures (run with `--nocapture`): nothing here asserts a duration.

use crate::node_support;
use crate::support;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodTemplate, Secret, Service, ServiceAccount};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Client, Resource};
use node_support::{container_process, diagnose, http_get, logs, node, split_image};
use serde_json::json;
use support::{Helm, chart_dir};
use vigil_apis::CriticalService;
use vigil_testenv::{TestEnv, wait_for};

/// The binary's path in the image (the Dockerfile's COPY destination).
const VIGIL: &str = "/usr/local/bin/vigil";
/// The Lease `vigil run` elects its leader on (its `--lease-name` default).
const LEASE: &str = "vigil-leader";
/// The fallback pod the article's `frontend` Service gets (`service-watcher-<service>`).
const FALLBACK: &str = "service-watcher-frontend";
/// Bound on each wait for the cluster (a loaded CI machine is slow; nothing is timed by it).
const WAIT: Duration = Duration::from_secs(90);

fn parse<T: serde::de::DeserializeOwned>(value: serde_json::Value) -> T {
    serde_json::from_value(value).expect("a valid object")
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn name(pod: &Pod) -> String {
    pod.metadata.name.clone().unwrap_or_default()
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

/// Waits until the release has exactly `count` pods, all Ready, and returns them.
async fn ready_vigil_pods(pods: &Api<Pod>, release: &str, count: usize) -> Vec<Pod> {
    wait_for(&format!("{count} Ready Vigil pods"), WAIT, || async {
        let all = vigil_pods(pods, release).await;
        let ready = all.iter().filter(|p| is_ready(p)).count();
        if all.len() == count && ready == count {
            Ok(Some(all))
        } else {
            Err(format!("{} pods, {ready} Ready", all.len()))
        }
    })
    .await
    .expect("Vigil's pods Ready")
}

/// The Lease's holder, if any (a released Lease has an empty one).
async fn holder(leases: &Api<Lease>) -> Option<String> {
    leases
        .get_opt(LEASE)
        .await
        .ok()
        .flatten()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

/// The pod among `pods` that holds the Lease (identities are `<pod name>_<random>`).
async fn wait_leader(leases: &Api<Lease>, pods: &[Pod]) -> String {
    wait_for("one of Vigil's pods to lead", WAIT, || async {
        let holder = holder(leases).await;
        let leader = pods.iter().map(name).find(|p| {
            holder
                .as_deref()
                .is_some_and(|h| h.starts_with(&format!("{p}_")))
        });
        match leader {
            Some(leader) => Ok(Some(leader)),
            None => Err(format!("holder {holder:?}")),
        }
    })
    .await
    .expect("a leader")
}

/// Polls the Service's ClusterIP from the host until it answers as `pod` does (the web image
/// answers `pod=<name> ip=<ip>`); returns how long that took.
async fn wait_answer(addr: SocketAddrV4, pod: &str) -> Duration {
    let started = Instant::now();
    let wanted = format!("pod={pod} ");
    wait_for(&format!("{addr} to answer as {pod}"), WAIT, || async {
        match http_get(addr).await {
            Some(body) if body.starts_with(&wanted) => Ok(Some(())),
            other => Err(format!("{other:?}")),
        }
    })
    .await
    .expect("the Service answers");
    started.elapsed()
}

/// The Vigil pod's process as the host sees it: uid and gid 65532, a read-only root, and a
/// connection to the API server through the `kubernetes` Service (the address the kubelet put in
/// `KUBERNETES_SERVICE_HOST`: an IP, so no cluster DNS is needed).
fn check_process(pod: &str) {
    let process = container_process(VIGIL, pod)
        .unwrap_or_else(|| panic!("no {VIGIL} process with POD_NAME={pod} on the host"));
    assert!(
        process.uids.len() == 4 && process.uids.iter().all(|u| *u == 65532),
        "{pod}: uids {:?}",
        process.uids
    );
    assert!(
        process.gids.len() == 4 && process.gids.iter().all(|g| *g == 65532),
        "{pod}: gids {:?}",
        process.gids
    );
    assert!(
        process.root_mount_options.split(',').any(|o| o == "ro"),
        "{pod}: / is mounted {}",
        process.root_mount_options
    );
    let host: Ipv4Addr = process
        .env
        .get("KUBERNETES_SERVICE_HOST")
        .and_then(|h| h.parse().ok())
        .unwrap_or_else(|| panic!("{pod}: KUBERNETES_SERVICE_HOST {:?}", process.env));
    let port: u16 = process
        .env
        .get("KUBERNETES_SERVICE_PORT")
        .and_then(|p| p.parse().ok())
        .expect("KUBERNETES_SERVICE_PORT");
    let api = SocketAddrV4::new(host, port);
    assert!(
        process.peers.contains(&api),
        "{pod}: no connection to the kubernetes Service {api}; connected to {:?}",
        process.peers
    );
}

/// Deployment's pod template environment variable `name`.
fn template_env(deployment: &Deployment, name: &str) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

/// Waits for the Deployment's rollout to settle on `replicas` updated, Ready replicas.
async fn rolled_out(deployments: &Api<Deployment>, release: &str, replicas: i32) -> Deployment {
    wait_for("the rollout", WAIT, || async {
        let d = deployments.get(release).await.map_err(|e| e.to_string())?;
        let s = d.status.clone().unwrap_or_default();
        let observed = s.observed_generation == d.metadata.generation;
        if observed
            && s.updated_replicas == Some(replicas)
            && s.ready_replicas == Some(replicas)
            && s.replicas == Some(replicas)
        {
            Ok(Some(d))
        } else {
            Err(format!("{s:?}"))
        }
    })
    .await
    .expect("rolled out")
}

async fn count<K>(api: &Api<K>, labels: &str) -> usize
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.list(&ListParams::default().labels(labels))
        .await
        .map_or(usize::MAX, |l| l.items.len())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chart_runs_vigil_on_a_real_node() {
    let test = "the_chart_runs_vigil_on_a_real_node";
    let Some(node) = node(test) else { return };
    let home = std::env::temp_dir().join(format!("vigil-node-chart-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("helm home");
    let Some(helm) = Helm::find(&node.kubeconfig, &home) else {
        eprintln!("skipped {test}: no helm (set VIGIL_HELM or put helm on PATH)");
        return;
    };
    let env = TestEnv::start().await.expect("the node's API server");
    let client: Client = env.client();
    let ns = env.namespace().to_owned();
    let suffix = ns.trim_start_matches("vigil-test-").to_owned();
    let release = format!("vigil-{suffix}");
    let (repository, tag) = split_image(&node.image);
    // The article's fallback template, with the node's web server in nginx's place: it serves
    // `pod=<name>` on $PORT, and the article's Service sends to port 80.
    let values = json!({
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "podDisruptionBudget": {"enabled": true},
        "criticalService": {"podTemplate": {
            "image": node.web_image,
            // A well-behaved server: it exits on SIGTERM rather than serving out its grace period.
            "env": [{"name": "PORT", "value": "80"}, {"name": "EXIT_ON_TERM", "value": "1"}],
        }},
    });
    let values_file = home.join("values.yaml");
    std::fs::write(&values_file, values.to_string()).expect("values file");
    let values_file = values_file.to_string_lossy().into_owned();
    let chart = chart_dir();
    let helm_ns = |args: &[&str]| -> Vec<String> {
        let mut all: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
        all.extend(["--namespace".to_owned(), ns.clone()]);
        all
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        helm.try_run(&args)
    };
    let pods: Api<Pod> = Api::namespaced(client.clone(), &ns);
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);
    let leases: Api<Lease> = Api::namespaced(client.clone(), &ns);

    // Install, waiting for the Deployment: both replicas Ready through the kubelet's probes.
    let started = Instant::now();
    let install = run(helm_ns(&[
        "install",
        &release,
        &chart,
        "-f",
        &values_file,
        "--wait",
        "--timeout",
        "180s",
    ]));
    if let Err(e) = install {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let install_time = started.elapsed();
    let first = ready_vigil_pods(&pods, &release, 2).await;
    let all_ready = started.elapsed();
    for pod in &first {
        let spec = pod.spec.as_ref().expect("spec");
        let container = &spec.containers[0];
        assert_eq!(container.image.as_deref(), Some(node.image.as_str()));
        assert!(container.readiness_probe.is_some() && container.liveness_probe.is_some());
        assert!(spec.host_network != Some(true), "on the pod network");
        let status = pod.status.as_ref().expect("status");
        let restarts: i32 = status
            .container_statuses
            .iter()
            .flatten()
            .map(|c| c.restart_count)
            .sum();
        assert_eq!(
            restarts,
            0,
            "{}: restarted\n{}",
            name(pod),
            logs(&client, &ns, &name(pod)).await
        );
        check_process(&name(pod));
    }
    let leader = wait_leader(&leases, &first).await;
    eprintln!(
        "node_chart: helm install --wait returned after {:.1} s; both pods Ready at {:.1} s; {leader} leads",
        install_time.as_secs_f64(),
        all_ready.as_secs_f64()
    );

    // The article's scenario: a critical Service with no pod gets a fallback pod from the
    // PodTemplate, which serves the Service's traffic; a real pod arriving replaces it.
    let services: Api<Service> = Api::namespaced(client.clone(), &ns);
    let service = services
        .create(
            &PostParams::default(),
            &parse(json!({
                "metadata": {"name": "frontend", "labels": {"role": "frontend"}},
                "spec": {"selector": {"role": "frontend"}, "type": "NodePort", "ports": [{"port": 80}]},
            })),
        )
        .await
        .expect("the article's Service");
    let cluster_ip: Ipv4Addr = service
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .expect("a ClusterIP");
    let addr = SocketAddrV4::new(cluster_ip, 80);
    let critical = format!("frontend-{suffix}");
    let criticals: Api<CriticalService> = Api::all(client.clone());
    env.delete_on_cleanup(
        &kube::api::ApiResource::erase::<CriticalService>(&()),
        &critical,
    );
    let started = Instant::now();
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
        .expect("the article's CriticalService");
    wait_answer(addr, FALLBACK).await;
    let fallback_answers = started.elapsed();
    eprintln!(
        "node_chart: CriticalService created -> its fallback pod answers on the ClusterIP: {:.2} s",
        fallback_answers.as_secs_f64()
    );
    let fallback = pods.get(FALLBACK).await.expect("the fallback pod");
    let template = fallback
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get("vigil.dev/pod-template"))
        .cloned();
    assert_eq!(
        template.as_deref(),
        Some(format!("{ns}/critical-service-pod-template").as_str()),
        "built from the chart's PodTemplate"
    );

    let started = Instant::now();
    pods.create(
        &PostParams::default(),
        &parse(json!({
            "metadata": {"name": "nginx", "labels": {"role": "frontend"}},
            "spec": {
                "terminationGracePeriodSeconds": 2,
                "containers": [{
                    "name": "nginx", "image": node.web_image, "imagePullPolicy": "Never",
                    "env": [{"name": "PORT", "value": "80"}],
                    "ports": [{"containerPort": 80}],
                    "readinessProbe": {"httpGet": {"path": "/healthz", "port": 80}, "periodSeconds": 1},
                }],
            },
        })),
    )
    .await
    .expect("the article's real pod");
    wait_for("the fallback pod to be deleted", WAIT, || async {
        match pods.get_opt(FALLBACK).await {
            Ok(None) => Ok(Some(())),
            Ok(Some(p)) if p.metadata.deletion_timestamp.is_some() => Ok(Some(())),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await
    .expect("the fallback goes once the real pod is Ready");
    let fallback_deleted = started.elapsed();
    wait_answer(addr, "nginx").await;
    let real_answers = started.elapsed();
    wait_for("the fallback pod to be gone", WAIT, || async {
        match pods.get_opt(FALLBACK).await {
            Ok(None) => Ok(Some(())),
            other => Err(format!("{:?}", other.map(|p| p.is_some()))),
        }
    })
    .await
    .expect("the fallback pod goes");
    eprintln!(
        "node_chart: real pod created -> fallback deleted {:.2} s, the real pod answers {:.2} s, \
         fallback pod gone {:.2} s",
        fallback_deleted.as_secs_f64(),
        real_answers.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );

    // The leader's pod deleted: the other replica takes the Lease (the leaving one releases it).
    let other = first
        .iter()
        .map(name)
        .find(|p| *p != leader)
        .expect("the other replica");
    let started = Instant::now();
    pods.delete(&leader, &DeleteParams::default())
        .await
        .expect("delete the leader's pod");
    // The standby usually wins; the Deployment's replacement pod may start in time to win the
    // released Lease instead. Either is a handover to a live replica.
    let handed = wait_for("another replica to lead", WAIT, || async {
        let holder = holder(&leases).await;
        let live = vigil_pods(&pods, &release).await;
        let new_leader = live.iter().map(name).filter(|p| *p != leader).find(|p| {
            holder
                .as_deref()
                .is_some_and(|h| h.starts_with(&format!("{p}_")))
        });
        match new_leader {
            Some(p) => Ok(Some(p)),
            None => Err(format!("holder {holder:?}")),
        }
    })
    .await;
    let new_leader = match handed {
        Ok(p) => p,
        Err(e) => panic!("{e}\n{}", diagnose(&client, &ns).await),
    };
    let standby = if new_leader == other {
        "the standby"
    } else {
        "the replacement pod"
    };
    let handover = started.elapsed();
    // The new leader acts: the real pod gone, it brings the fallback back.
    pods.delete("nginx", &DeleteParams::default().grace_period(0))
        .await
        .expect("delete the real pod");
    let back = wait_answer(addr, FALLBACK).await;
    let second = ready_vigil_pods(&pods, &release, 2).await;
    eprintln!(
        "node_chart: leader's pod deleted -> {new_leader} ({standby}) leads after {:.2} s; real pod deleted -> \
         fallback answers after {:.2} s; 2 pods Ready again after {:.1} s",
        handover.as_secs_f64(),
        back.as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    for pod in &second {
        check_process(&name(pod));
    }

    // Upgrade (a new pod template: a rolling update under the PodDisruptionBudget), rollback.
    let pdbs: Api<PodDisruptionBudget> = Api::namespaced(client.clone(), &ns);
    assert!(
        pdbs.get_opt(&release).await.expect("get").is_some(),
        "the PDB"
    );
    let started = Instant::now();
    run(helm_ns(&[
        "upgrade",
        &release,
        &chart,
        "-f",
        &values_file,
        "--set",
        "logLevel=debug",
        "--wait",
        "--timeout",
        "180s",
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    let upgraded = rolled_out(&deployments, &release, 2).await;
    assert_eq!(
        template_env(&upgraded, "LOG_LEVEL").as_deref(),
        Some("debug")
    );
    let upgrade_time = started.elapsed();
    let third = ready_vigil_pods(&pods, &release, 2).await;
    wait_leader(&leases, &third).await;
    let started = Instant::now();
    run(helm_ns(&[
        "rollback",
        &release,
        "1",
        "--wait",
        "--timeout",
        "180s",
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    let rolled_back = rolled_out(&deployments, &release, 2).await;
    assert_eq!(
        template_env(&rolled_back, "LOG_LEVEL").as_deref(),
        Some("info")
    );
    let rollback_time = started.elapsed();
    let fourth = ready_vigil_pods(&pods, &release, 2).await;
    wait_leader(&leases, &fourth).await;
    for pod in &fourth {
        check_process(&name(pod));
    }
    eprintln!(
        "node_chart: helm upgrade --wait (a rolling update) {:.1} s, helm rollback --wait {:.1} s; \
         a replica leads after each",
        upgrade_time.as_secs_f64(),
        rollback_time.as_secs_f64()
    );

    // The scenario's objects go first (the fallback with its CriticalService), then the release.
    criticals
        .delete(&critical, &DeleteParams::default())
        .await
        .expect("delete the CriticalService");
    services
        .delete("frontend", &DeleteParams::default())
        .await
        .expect("delete the Service");
    wait_for(
        "the fallback to go with its CriticalService",
        WAIT,
        || async {
            match pods.get_opt(FALLBACK).await {
                Ok(None) => Ok(Some(())),
                other => Err(format!("{:?}", other.map(|p| p.is_some()))),
            }
        },
    )
    .await
    .expect("garbage-collected");
    // What the replicas say about their Lease as they are stopped (printed after the uninstall).
    let mut followers = Vec::new();
    for pod in vigil_pods(&pods, &release).await {
        let pods = pods.clone();
        followers.push(tokio::spawn(async move {
            use futures::{AsyncBufReadExt as _, TryStreamExt as _};
            let params = kube::api::LogParams {
                follow: true,
                since_seconds: Some(1),
                ..Default::default()
            };
            let Ok(stream) = pods.log_stream(&name(&pod), &params).await else {
                return Vec::new();
            };
            let lines: Vec<String> = stream.lines().try_collect().await.unwrap_or_default();
            lines
                .into_iter()
                .filter(|l| l.contains("lease") || l.contains("shutting") || l.contains("SIGTERM"))
                .map(|l| format!("{}: {l}", name(&pod)))
                .collect::<Vec<_>>()
        }));
    }
    let started = Instant::now();
    let out = run(helm_ns(&[
        "uninstall",
        &release,
        "--wait",
        "--timeout",
        "180s",
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.contains("uninstalled"), "{out}");
    let instance = format!("app.kubernetes.io/instance={release}");
    let left = || async {
        let mut left = Vec::new();
        let mut add = |kind: &str, n: usize| {
            if n > 0 {
                left.push(format!("{n} {kind}"));
            }
        };
        add("Pods", count(&pods, &instance).await);
        add("Deployments", count(&deployments, &instance).await);
        let replica_sets: Api<ReplicaSet> = Api::namespaced(client.clone(), &ns);
        add("ReplicaSets", count(&replica_sets, &instance).await);
        let service_accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &ns);
        add("ServiceAccounts", count(&service_accounts, &instance).await);
        let roles: Api<Role> = Api::namespaced(client.clone(), &ns);
        add("Roles", count(&roles, &instance).await);
        let role_bindings: Api<RoleBinding> = Api::namespaced(client.clone(), &ns);
        add("RoleBindings", count(&role_bindings, &instance).await);
        let templates: Api<PodTemplate> = Api::namespaced(client.clone(), &ns);
        add("PodTemplates", count(&templates, &instance).await);
        add("PodDisruptionBudgets", count(&pdbs, &instance).await);
        add("Services", count(&services, &instance).await);
        let config_maps: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
        add("ConfigMaps", count(&config_maps, &instance).await);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &ns);
        add(
            "Helm release Secrets",
            count(&secrets, &format!("owner=helm,name={release}")).await,
        );
        let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
        add("ClusterRoles", count(&cluster_roles, &instance).await);
        let cluster_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
        add(
            "ClusterRoleBindings",
            count(&cluster_bindings, &instance).await,
        );
        left
    };
    wait_for("nothing of the release left", WAIT, || async {
        let left = left().await;
        if left.is_empty() {
            Ok(Some(()))
        } else {
            Err(left.join(", "))
        }
    })
    .await
    .expect("helm uninstall leaves nothing of the release");
    let uninstall_time = started.elapsed();
    // Left by design: the CRDs (Helm installs crds/ once and never deletes them: deleting a CRD
    // deletes every object of its kind) and the Lease, which Vigil, not Helm, writes, as every
    // client-go operator's. The last replica cannot release it: Helm deletes the ServiceAccount
    // and the Role with the Deployment, so its token no longer works when SIGTERM comes; the
    // Lease simply expires (a new install takes it over). Both go with the namespace.
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in [
        "configmapsyncs.apps.bixbite.io",
        "criticalservices.mycrd.com",
        "kubernetesclusters.vigil.dev",
        "statusbackuppolicies.vigil.dev",
        "topics.kafka.vigil.dev",
    ] {
        assert!(
            crds.get_opt(crd).await.expect("get").is_some(),
            "{crd} kept"
        );
    }
    for follower in followers {
        if let Ok(Ok(lines)) = tokio::time::timeout(Duration::from_secs(5), follower).await {
            for line in lines {
                eprintln!("node_chart: {line}");
            }
        }
    }
    let last_holder = holder(&leases).await;
    let remaining: Vec<String> = leases
        .list(&ListParams::default())
        .await
        .expect("list Leases")
        .items
        .into_iter()
        .filter_map(|l| l.metadata.name)
        .collect();
    eprintln!(
        "node_chart: helm uninstall --wait and everything of the release gone: {:.1} s; left by \
         design: the 5 CRDs (Helm keeps crds/), Leases {remaining:?} (Vigil's; last holder \
         {last_holder:?})",
        uninstall_time.as_secs_f64()
    );
    assert_eq!(remaining, [LEASE], "Vigil writes no other Lease");
    env.cleanup().await;
    let _ = std::fs::remove_dir_all(&home);
}
