//! CriticalService end to end: the controller runs in-process against a TestEnv (the sandbox
//! with its simulated kubelet by default). The article's section 5.4 scenario plays out with the
//! article's own manifests; the other tests cover the product issue's scenarios: readiness
//! transitions, rolling updates with and without an activation delay, several and overlapping
//! CriticalServices, edits and deletions, a missing template, API failures, lost watches, and
//! a settled world that sees no writes.
//!
//! Tests that only need the API run on a real cluster too (`VIGIL_TEST_KUBECONFIG`): their
//! CriticalServices (cluster-scoped) carry the test namespace's suffix, and the controllers of
//! such tests run one at a time (every controller reconciles every CriticalService, so two
//! running at once would overwrite each other's statuses). Tests needing sandbox powers (fault
//! injection, lost watches, loops switched off) skip there.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::ReplicaSet;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod, PodTemplate, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::api::events::v1::Event as EventV1;
use kube::api::{Api, ApiResource, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{CustomResourceExt as _, ResourceExt as _};
use serde_json::json;
use tokio::sync::oneshot;
use vigil_apis::CriticalService;
use vigil_apis::critical_service::{CriticalServiceStatus, ServiceState, StandbyState};
use vigil_controllers::critical_service::controller;
use vigil_controllers::critical_service::model::{Settings, TemplateKey};
use vigil_controllers::permissions;
use vigil_testenv::vigil_sandbox::{Fault, Loops, SandboxConfig};

use crate::support;
use vigil_testenv::{RbacAttributes, SETTLE_TIMEOUT, TestEnv, TestEnvOptions, wait_for};

/// The article's service.yaml.
const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: frontend
  labels:
    role: frontend
spec:
  selector:
    role: frontend
  type: NodePort
  ports:
    - port: 80
";

/// The article's critical-service-pod-template.yaml (its namespace is the test's).
const POD_TEMPLATE: &str = "apiVersion: v1
kind: PodTemplate
metadata:
  namespace: linux-mag
  name: critical-service-pod-template
template:
  metadata:
    name: critical-service-pod
  spec:
    containers:
      - name: nginx
        image: nginx:1.7.9
";

/// The article's critical-service.yaml (its namespace is the test's).
const CRITICAL_SERVICE: &str = "apiVersion: mycrd.com/v1
kind: CriticalService
metadata:
  name: frontend
spec:
  namespace: default
  matchLabels:
    - key: role
      value: frontend
";

/// The article's nginx-pod.yaml.
const NGINX_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: nginx
  labels:
    role: frontend
spec:
  containers:
    - name: nginx
      image: nginx:1.7.9
      ports:
        - containerPort: 80
";

fn parse<T: serde::de::DeserializeOwned>(yaml: &str, ns: &str) -> T {
    let yaml = yaml
        .replace("namespace: linux-mag", &format!("namespace: {ns}"))
        .replace("namespace: default", &format!("namespace: {ns}"));
    serde_saphyr::from_str(&yaml).expect("manifest")
}

/// Prefix of fallback pod names (the article's `POD_NAME_PREFIX` default).
const PREFIX: &str = "service-watcher";
/// Name of the default PodTemplate (the article's).
const TEMPLATE_NAME: &str = "critical-service-pod-template";
/// What "quickly" means for a reaction that needs no delay.
const QUICK: Duration = Duration::from_secs(5);
/// The label on everything Vigil creates, as a selector.
const VIGILS: &str = "app.kubernetes.io/managed-by=vigil";

use crate::support::CLUSTER_SERIAL;

/// A controller running for one test; dropping it stops the controller.
struct Running {
    controller: support::Running,
    _serial: Option<tokio::sync::MutexGuard<'static, ()>>,
}

impl Running {
    /// Stops the controller and waits until it has finished.
    async fn stop(self) {
        self.controller.stop().await;
    }
}

/// Creates the CRD (once) and waits until it is served.
async fn install_crd(env: &TestEnv) {
    vigil_testenv::install_crd(&env.client(), &CriticalService::crd())
        .await
        .expect("CriticalService CRD served");
}

/// Runs the controller for this test's namespace.
async fn start_controller(env: &TestEnv) -> Running {
    start_controller_in(env, BTreeSet::from([env.namespace().to_owned()])).await
}

/// Runs the controller watching `namespaces` (the article's `NAMESPACES`).
async fn start_controller_in(env: &TestEnv, namespaces: BTreeSet<String>) -> Running {
    start_controller_with(env, namespaces, env.client()).await
}

/// Runs the controller watching `namespaces`, with its own client.
async fn start_controller_with(
    env: &TestEnv,
    namespaces: BTreeSet<String>,
    client: kube::Client,
) -> Running {
    let serial = if env.is_sandbox() {
        None
    } else {
        Some(CLUSTER_SERIAL.lock().await)
    };
    install_crd(env).await;
    let settings = Settings {
        pod_name_prefix: PREFIX.into(),
        default_template: TemplateKey {
            namespace: env.namespace().into(),
            name: TEMPLATE_NAME.into(),
        },
        watched_namespaces: Some(namespaces),
    };
    let controller = support::Running::spawn(client, move |manager| {
        manager.add(controller::NAME, move |rt| controller::run_on(rt, settings));
    });
    Running {
        controller,
        _serial: serial,
    }
}

/// A name unique to this test (CriticalServices are cluster-scoped).
/// A CriticalService name unique to this test. The CriticalService is deleted with the test even
/// if the test panics: it is cluster-scoped and matches by labels alone, so one left on a real
/// cluster would cover (and fight over) the Services of every later test and run.
fn unique(env: &TestEnv, base: &str) -> String {
    let name = format!(
        "{base}-{}",
        env.namespace().trim_start_matches("vigil-test-")
    );
    env.delete_on_cleanup(&ApiResource::erase::<CriticalService>(&()), &name);
    name
}

fn fallback_name(service: &str) -> String {
    format!("{PREFIX}-{service}")
}

fn crs(env: &TestEnv) -> Api<CriticalService> {
    Api::all(env.client())
}

/// Creates the default PodTemplate (the article's).
async fn create_template(env: &TestEnv) {
    env.api::<PodTemplate>()
        .create(
            &PostParams::default(),
            &parse(POD_TEMPLATE, env.namespace()),
        )
        .await
        .expect("pod template");
}

/// Creates Service `name` with these labels, selecting `app: name` (the pods of
/// `TestEnv::create_pod(_, name)`), port 80 → the pods' named port `http`.
async fn create_service(env: &TestEnv, name: &str, labels: &[(&str, &str)]) -> Service {
    let labels: BTreeMap<&str, &str> = labels.iter().copied().collect();
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "selector": {"app": name},
            "ports": [{"name": "http", "port": 80, "targetPort": "http"}]
        }
    }))
    .expect("service");
    env.api::<Service>()
        .create(&PostParams::default(), &service)
        .await
        .expect("create service")
}

/// Creates pod `name` selected by Service `app` and waits until it is Ready.
async fn ready_pod(env: &TestEnv, name: &str, app: &str) -> Pod {
    env.create_pod(name, app).await.expect("create pod");
    env.wait_pod(name, true).await.expect("pod ready")
}

/// Creates a CriticalService covering this test's namespace.
async fn create_cr(
    env: &TestEnv,
    name: &str,
    match_labels: &[(&str, &str)],
    activation_delay_seconds: Option<u32>,
) -> CriticalService {
    let match_labels: Vec<_> = match_labels
        .iter()
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect();
    let cr: CriticalService = serde_json::from_value(json!({
        "apiVersion": "mycrd.com/v1",
        "kind": "CriticalService",
        "metadata": {"name": name},
        "spec": {
            "namespace": env.namespace(),
            "matchLabels": match_labels,
            "activationDelaySeconds": activation_delay_seconds,
        }
    }))
    .expect("critical service");
    crs(env)
        .create(&PostParams::default(), &cr)
        .await
        .expect("create critical service")
}

/// Deletes the test's CriticalServices (cluster-scoped, so not removed with the namespace),
/// then the environment.
async fn finish(env: TestEnv, cr_names: &[&str]) {
    for name in cr_names {
        match crs(&env).delete(name, &DeleteParams::background()).await {
            Ok(_) | Err(kube::Error::Api(_)) => {}
            Err(e) => panic!("delete CriticalService {name}: {e}"),
        }
    }
    env.cleanup().await;
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn describe(pod: Option<&Pod>) -> String {
    match pod {
        None => "absent".into(),
        Some(p) => format!(
            "{} uid={} ready={} terminating={} labels={:?}",
            p.metadata.name.as_deref().unwrap_or("?"),
            p.metadata.uid.as_deref().unwrap_or("?"),
            is_ready(p),
            p.metadata.deletion_timestamp.is_some(),
            p.metadata.labels.clone().unwrap_or_default()
        ),
    }
}

async fn get_pod(env: &TestEnv, name: &str) -> Result<Option<Pod>, String> {
    env.api::<Pod>()
        .get_opt(name)
        .await
        .map_err(|e| e.to_string())
}

/// Vigil's pods in the test namespace, by name.
async fn vigils_pods(env: &TestEnv) -> Result<BTreeMap<String, Pod>, String> {
    let pods = env
        .api::<Pod>()
        .list(&ListParams::default().labels(VIGILS))
        .await
        .map_err(|e| e.to_string())?;
    Ok(pods
        .items
        .into_iter()
        .map(|p| (p.metadata.name.clone().unwrap_or_default(), p))
        .collect())
}

/// The pods the EndpointSlices of `service` list as ready endpoints.
async fn slice_ready_pods(env: &TestEnv, service: &str) -> Result<BTreeSet<String>, String> {
    let slices = env
        .api::<EndpointSlice>()
        .list(&ListParams::default().labels(&format!("kubernetes.io/service-name={service}")))
        .await
        .map_err(|e| e.to_string())?;
    Ok(slices
        .items
        .iter()
        .flat_map(|s| &s.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
        .filter_map(|e| e.target_ref.as_ref().and_then(|t| t.name.clone()))
        .collect())
}

/// Waits until Vigil's fallback for `service` runs, is Ready and is a ready endpoint of the
/// Service.
async fn wait_fallback_answers(env: &TestEnv, service: &str, timeout: Duration) -> Pod {
    let name = fallback_name(service);
    let what = format!("fallback {name} to answer for Service {service}");
    wait_for(&what, timeout, || async {
        // The slices first: a pod read after them is at least as new, so it carries the labels
        // that made the Service select it (a fallback joins the selector once Ready).
        let endpoints = slice_ready_pods(env, service).await?;
        let pod = get_pod(env, &name).await?;
        match pod {
            Some(p)
                if p.metadata.deletion_timestamp.is_none()
                    && is_ready(&p)
                    && endpoints.contains(&name) =>
            {
                Ok(Some(p))
            }
            p => Err(format!(
                "pod {}, ready endpoints {endpoints:?}",
                describe(p.as_ref())
            )),
        }
    })
    .await
    .expect(&what)
}

/// Waits until Vigil's fallback for `service` is gone.
async fn wait_fallback_gone(env: &TestEnv, service: &str) {
    let name = fallback_name(service);
    let what = format!("fallback {name} to be gone");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        match get_pod(env, &name).await? {
            None => Ok(Some(())),
            p => Err(format!("pod {}", describe(p.as_ref()))),
        }
    })
    .await
    .expect(&what);
}

/// (name, state, fallback pod) of every covered Service, in status order.
fn entries(status: &CriticalServiceStatus) -> Vec<(String, ServiceState, Option<String>)> {
    status
        .services
        .iter()
        .map(|s| (s.name.clone(), s.state, s.fallback_pod.clone()))
        .collect()
}

fn entry(
    name: &str,
    state: ServiceState,
    fallback: bool,
) -> (String, ServiceState, Option<String>) {
    (
        name.to_owned(),
        state,
        fallback.then(|| fallback_name(name)),
    )
}

/// (status, reason) of a condition.
fn condition(status: &CriticalServiceStatus, type_: &str) -> Option<(String, String)> {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone()))
}

fn is_condition(status: &CriticalServiceStatus, type_: &str, value: &str, reason: &str) -> bool {
    condition(status, type_) == Some((value.to_owned(), reason.to_owned()))
}

fn show(status: &CriticalServiceStatus) -> String {
    let conditions: Vec<_> = status
        .conditions
        .iter()
        .map(|c| format!("{}={} {}: {}", c.type_, c.status, c.reason, c.message))
        .collect();
    format!(
        "covered={} lame={} fallbackActive={} services={:?} conditions={conditions:?}",
        status.covered,
        status.lame,
        status.fallback_active,
        entries(status)
    )
}

/// Waits until the CriticalService's status satisfies `ok` and was computed from its current
/// generation, returning it.
async fn wait_status(
    env: &TestEnv,
    cr: &str,
    what: &str,
    ok: impl Fn(&CriticalServiceStatus) -> bool,
) -> CriticalServiceStatus {
    let what = format!("CriticalService {cr}: {what}");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        let current = crs(env).get(cr).await.map_err(|e| e.to_string())?;
        let status = current.status.unwrap_or_default();
        if ok(&status) && status.observed_generation == current.metadata.generation {
            Ok(Some(status))
        } else {
            Err(show(&status))
        }
    })
    .await
    .expect(&what)
}

/// Counts as expected: covered, lame, fallback active.
fn counts(status: &CriticalServiceStatus) -> (u32, u32, u32) {
    (status.covered, status.lame, status.fallback_active)
}

/// Waits until one covered Service is Healthy with no fallback, and checks no fallback is left.
async fn wait_healthy(env: &TestEnv, cr: &str, service: &str) -> CriticalServiceStatus {
    let status = wait_status(env, cr, &format!("{service} Healthy"), |s| {
        entries(s) == vec![entry(service, ServiceState::Healthy, false)]
            && counts(s) == (1, 0, 0)
            && is_condition(s, "Ready", "True", "AllServicesAnswering")
            && is_condition(s, "Degraded", "False", "AsExpected")
    })
    .await;
    wait_fallback_gone(env, service).await;
    status
}

/// Waits until one covered Service is answered by its fallback, per the status and the cluster.
async fn wait_fallback_active(env: &TestEnv, cr: &str, service: &str, timeout: Duration) -> Pod {
    let pod = wait_fallback_answers(env, service, timeout).await;
    wait_status(env, cr, &format!("{service} FallbackActive"), |s| {
        entries(s) == vec![entry(service, ServiceState::FallbackActive, true)]
            && counts(s) == (1, 0, 1)
            && is_condition(s, "Ready", "True", "AllServicesAnswering")
    })
    .await;
    pod
}

/// events.k8s.io/v1 Events about a cluster-scoped object (they are recorded in `default`).
async fn events_about(env: &TestEnv, name: &str) -> Result<Vec<EventV1>, String> {
    let events: Api<EventV1> = Api::namespaced(env.client(), "default");
    let list = events
        .list(&ListParams::default())
        .await
        .map_err(|e| e.to_string())?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                && e.regarding.as_ref().and_then(|r| r.kind.as_deref()) == Some("CriticalService")
        })
        .collect())
}

/// Waits for an Event with this reason about the CriticalService.
async fn wait_event(env: &TestEnv, cr: &str, reason: &str) -> EventV1 {
    let what = format!("a {reason} Event about CriticalService {cr}");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        let events = events_about(env, cr).await?;
        match events.iter().find(|e| e.reason.as_deref() == Some(reason)) {
            Some(e) => Ok(Some(e.clone())),
            None => Err(format!(
                "events: {:?}",
                events.iter().map(|e| &e.reason).collect::<Vec<_>>()
            )),
        }
    })
    .await
    .expect(&what)
}

/// The resourceVersions of a CriticalService, some pods, and the Events about the
/// CriticalService: what a write would change.
async fn versions(env: &TestEnv, cr: &str, pods: &[&str]) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    let current = crs(env).get(cr).await.expect("get CriticalService");
    out.insert(
        format!("criticalservice/{cr}"),
        current.metadata.resource_version,
    );
    for name in pods {
        let pod = get_pod(env, name).await.expect("get pod");
        out.insert(
            format!("pod/{name}"),
            pod.and_then(|p| p.metadata.resource_version),
        );
    }
    for event in events_about(env, cr).await.expect("list events") {
        out.insert(
            format!("event/{}", event.metadata.name.unwrap_or_default()),
            event.metadata.resource_version,
        );
    }
    out
}

/// Asserts a settled controller writes nothing for a while: the CriticalService, the given pods
/// and the Events about the CriticalService keep their resourceVersions.
async fn assert_no_writes(env: &TestEnv, cr: &str, pods: &[&str]) {
    let before = versions(env, cr, pods).await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let after = versions(env, cr, pods).await;
    assert_eq!(before, after, "a settled controller writes nothing");
}

/// Every Vigil pod that appears after [`Creations::start`], with when it was seen: a watch, so
/// a fallback created and deleted between two polls is still caught.
struct Creations {
    seen: Arc<Mutex<Vec<(Instant, String)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Creations {
    async fn start(env: &TestEnv) -> Self {
        let api = env.api::<Pod>();
        let seen: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
        let (synced_tx, synced) = oneshot::channel();
        let record = Arc::clone(&seen);
        let task = tokio::spawn(async move {
            let mut synced_tx = Some(synced_tx);
            let mut known = BTreeSet::new();
            let config = watcher::Config::default().labels(VIGILS);
            let mut events = watcher(api, config).default_backoff().boxed();
            while let Some(event) = events.next().await {
                let pod = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => pod,
                    _ => continue,
                };
                let uid = pod.metadata.uid.clone().unwrap_or_default();
                // Pods already there when the recording started are not creations.
                if known.insert(uid) && synced_tx.is_none() {
                    let name = pod.metadata.name.unwrap_or_default();
                    record
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .push((Instant::now(), name));
                }
            }
        });
        synced.await.expect("watch on Vigil's pods synced");
        Self { seen, task }
    }

    fn seen(&self) -> Vec<(Instant, String)> {
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

impl Drop for Creations {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn endpoint_ips(env: &TestEnv, service: &str) -> Result<Vec<String>, String> {
    let ep = env
        .api::<Endpoints>()
        .get_opt(service)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ep
        .and_then(|e| e.subsets)
        .unwrap_or_default()
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect())
}

async fn pod_ip(env: &TestEnv, name: &str) -> Option<String> {
    env.api::<Pod>()
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status)
        .and_then(|s| s.pod_ip)
}

/// Section 5.4: a Service without endpoints becomes critical → the fallback pod answers; a real
/// pod arrives → the fallback goes; the real pod goes → the fallback comes back.
#[tokio::test]
async fn the_articles_scenario() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let _controller = start_controller(&env).await;

    env.api::<Service>()
        .create(&PostParams::default(), &parse(SERVICE, &ns))
        .await
        .expect("service.yaml");
    env.api::<PodTemplate>()
        .create(&PostParams::default(), &parse(POD_TEMPLATE, &ns))
        .await
        .expect("pod template");
    assert!(
        endpoint_ips(&env, "frontend")
            .await
            .unwrap_or_default()
            .is_empty(),
        "no endpoints yet"
    );

    let crs: Api<CriticalService> = Api::all(env.client());
    crs.create(&PostParams::default(), &parse(CRITICAL_SERVICE, &ns))
        .await
        .expect("critical-service.yaml");

    // The fallback pod runs and becomes the Service's endpoint.
    let fallback_ip = wait_for(
        "service-watcher-frontend to be the endpoint",
        SETTLE_TIMEOUT,
        || async {
            let ip = pod_ip(&env, "service-watcher-frontend").await;
            let ips = endpoint_ips(&env, "frontend").await?;
            match ip {
                Some(ip) if ips == vec![ip.clone()] => Ok(Some(ip)),
                _ => Err(format!("fallback ip {ip:?}, endpoints {ips:?}")),
            }
        },
    )
    .await
    .expect("fallback answers");
    let fallback = env
        .api::<Pod>()
        .get("service-watcher-frontend")
        .await
        .expect("fallback");
    let annotations = fallback.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("service-watcher").map(String::as_str),
        Some("owned"),
        "the article's annotation"
    );
    let owner = &fallback.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("CriticalService", "frontend")
    );

    // The real nginx pod arrives: the fallback goes, and nginx is the endpoint.
    env.api::<Pod>()
        .create(&PostParams::default(), &parse(NGINX_POD, &ns))
        .await
        .expect("nginx-pod.yaml");
    let nginx_ip = wait_for("nginx to replace the fallback", SETTLE_TIMEOUT, || async {
        let fallback_left = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        let ip = pod_ip(&env, "nginx").await;
        let ips = endpoint_ips(&env, "frontend").await?;
        match ip {
            Some(ip) if !fallback_left && ips == vec![ip.clone()] => Ok(Some(ip)),
            _ => Err(format!(
                "fallback still there: {fallback_left}, endpoints {ips:?}"
            )),
        }
    })
    .await
    .expect("fallback retired");
    assert_ne!(nginx_ip, fallback_ip);

    // The status tells the story.
    let cr = crs.get("frontend").await.expect("cr");
    let status = cr.status.expect("status written");
    assert_eq!((status.covered, status.fallback_active), (1, 0));

    // nginx goes away: the fallback comes back.
    env.delete_pod_as_kubelet_would("nginx")
        .await
        .expect("delete nginx");
    wait_for("the fallback to come back", SETTLE_TIMEOUT, || async {
        let ready = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        Ok(ready.then_some(()))
    })
    .await
    .expect("fallback again");

    // Deleting the CriticalService removes its fallback (garbage collection via ownerReference).
    crs.delete("frontend", &DeleteParams::background())
        .await
        .expect("delete CR");
    wait_for("the fallback to be collected", SETTLE_TIMEOUT, || async {
        let left = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?;
        Ok(left.is_none().then_some(()))
    })
    .await
    .expect("fallback collected");
    env.cleanup().await;
}

/// A pod Vigil did not create, with the fallback's name, is never touched.
#[tokio::test]
async fn a_foreign_pod_with_the_fallback_name_is_left_alone() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let _controller = start_controller(&env).await;
    env.api::<PodTemplate>()
        .create(&PostParams::default(), &parse(POD_TEMPLATE, &ns))
        .await
        .expect("pod template");
    // Not selected by the Service (other labels), but squatting the fallback's name.
    let squatter: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "service-watcher-frontend", "labels": {"app": "other"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    let squatter = env
        .api::<Pod>()
        .create(&PostParams::default(), &squatter)
        .await
        .expect("squatter");
    env.api::<Service>()
        .create(&PostParams::default(), &parse(SERVICE, &ns))
        .await
        .expect("service");
    let crs: Api<CriticalService> = Api::all(env.client());
    crs.create(&PostParams::default(), &parse(CRITICAL_SERVICE, &ns))
        .await
        .expect("cr");
    let degraded = wait_for(
        "the CriticalService to report Degraded",
        SETTLE_TIMEOUT,
        || async {
            let cr = crs.get("frontend").await.map_err(|e| e.to_string())?;
            let conditions = cr.status.map(|s| s.conditions).unwrap_or_default();
            let d = conditions
                .into_iter()
                .find(|c| c.type_ == "Degraded" && c.status == "True");
            Ok(d)
        },
    )
    .await
    .expect("degraded");
    assert_eq!(degraded.reason, "ForeignPodInTheWay");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = env
        .api::<Pod>()
        .get("service-watcher-frontend")
        .await
        .expect("still there");
    assert_eq!(
        still.metadata.uid, squatter.metadata.uid,
        "never deleted or replaced"
    );
    assert_eq!(
        still.metadata.labels, squatter.metadata.labels,
        "never modified"
    );
    crs.delete("frontend", &DeleteParams::background())
        .await
        .expect("delete CR");
    env.cleanup().await;
}

/// A ready pod keeps the Service Healthy with no fallback; the pod turning NotReady brings the
/// fallback at once; the pod Ready again retires it, but only once the EndpointSlice lists the
/// real pod as a ready endpoint.
#[tokio::test]
async fn readiness_transitions_bring_and_retire_the_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;

    wait_healthy(&env, &cr, "web").await;
    assert_eq!(
        vigils_pods(&env).await.expect("list").len(),
        0,
        "no fallback for a healthy Service"
    );

    env.make_pod_not_ready("web-0").await.expect("not ready");
    let fallback = wait_fallback_active(&env, &cr, "web", QUICK).await;

    env.make_pod_ready("web-0").await.expect("ready again");
    // The fallback may only go once web-0 is a ready endpoint in the slices: when it is seen
    // going, the slices must already list web-0 (they never drop it again in this test).
    let slices_when_retired = wait_for(
        "the fallback to start going after web-0 is Ready again",
        SETTLE_TIMEOUT,
        || async {
            let pod = get_pod(&env, &fallback_name("web")).await?;
            match pod {
                Some(p)
                    if p.metadata.uid == fallback.metadata.uid
                        && p.metadata.deletion_timestamp.is_none() =>
                {
                    Err(format!("still answering: {}", describe(Some(&p))))
                }
                _ => Ok(Some(slice_ready_pods(&env, "web").await?)),
            }
        },
    )
    .await
    .expect("fallback retired");
    assert!(
        slices_when_retired.contains("web-0"),
        "the fallback went before web-0 was a ready endpoint: {slices_when_retired:?}"
    );
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// The same retirement rule, made deterministic with the sandbox's EndpointSlice loop switched
/// off and the slice written by hand: a Ready pod the slice does not list as ready (or a slice
/// listing only the fallback) keeps the fallback.
#[tokio::test]
async fn the_fallback_stays_until_the_slice_lists_a_real_ready_endpoint() {
    let env = TestEnv::start_with(TestEnvOptions {
        sandbox: SandboxConfig {
            loops: Loops {
                endpoints: false,
                ..Loops::default()
            },
            ..SandboxConfig::default()
        },
        ..TestEnvOptions::with_kubelet()
    })
    .await
    .expect("env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    let web0 = ready_pod(&env, "web-0", "web").await;
    let web0_ip = web0.status.and_then(|s| s.pod_ip).expect("web-0 ip");
    let slices = env.api::<EndpointSlice>();
    let write_slice = |endpoints: Vec<(String, String, bool)>| {
        let endpoints: Vec<_> = endpoints
            .into_iter()
            .map(|(pod, ip, ready)| {
                json!({
                    "addresses": [ip],
                    "conditions": {"ready": ready},
                    "targetRef": {"kind": "Pod", "namespace": ns, "name": pod}
                })
            })
            .collect();
        let slice = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": "web-by-hand", "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv4",
            "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]
        });
        let slices = slices.clone();
        async move {
            slices
                .patch(
                    "web-by-hand",
                    &PatchParams::apply("the-test").force(),
                    &Patch::Apply(&slice),
                )
                .await
                .expect("write the slice");
        }
    };
    write_slice(vec![("web-0".into(), web0_ip.clone(), true)]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    // This test writes the slices itself: a drained fallback would stay listed for ever.
    delete_at_once(&env, &cr).await;
    wait_healthy(&env, &cr, "web").await;

    env.make_pod_not_ready("web-0").await.expect("not ready");
    write_slice(vec![("web-0".into(), web0_ip.clone(), false)]).await;
    let name = fallback_name("web");
    let fallback = wait_for("the fallback to run", QUICK, || async {
        match get_pod(&env, &name).await? {
            Some(p) if is_ready(&p) => Ok(Some(p)),
            p => Err(describe(p.as_ref())),
        }
    })
    .await
    .expect("fallback");
    let fallback_ip = fallback
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .expect("fallback ip");
    // The slice lists the fallback as ready and web-0 as not ready; web-0 turns Ready.
    write_slice(vec![
        ("web-0".into(), web0_ip.clone(), false),
        (name.clone(), fallback_ip.clone(), true),
    ])
    .await;
    env.make_pod_ready("web-0").await.expect("ready again");
    let deadline = Instant::now() + Duration::from_millis(800);
    while Instant::now() < deadline {
        let pod = get_pod(&env, &name).await.expect("get fallback");
        assert!(
            pod.as_ref()
                .is_some_and(|p| p.metadata.uid == fallback.metadata.uid
                    && p.metadata.deletion_timestamp.is_none()),
            "the fallback must stay while the slice lists no real ready endpoint: {}",
            describe(pod.as_ref())
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = crs(&env)
        .get(&cr)
        .await
        .expect("cr")
        .status
        .expect("status");
    assert_eq!(
        entries(&status),
        vec![entry("web", ServiceState::FallbackActive, true)],
        "{}",
        show(&status)
    );

    // The slice catches up: the fallback goes.
    write_slice(vec![
        ("web-0".into(), web0_ip, true),
        (name, fallback_ip, true),
    ])
    .await;
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// Replacing the only pod without an activation delay: a fallback may stand in while no pod is
/// ready, and goes once the new pod is a ready endpoint.
#[tokio::test]
async fn a_rolling_update_without_activation_delay_ends_without_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;

    env.delete_pod_as_kubelet_would("web-0")
        .await
        .expect("delete web-0");
    ready_pod(&env, "web-1", "web").await;
    wait_for(
        "web-1 to be the only ready endpoint",
        SETTLE_TIMEOUT,
        || async {
            let ready = slice_ready_pods(&env, "web").await?;
            if ready == BTreeSet::from(["web-1".to_owned()]) {
                Ok(Some(()))
            } else {
                Err(format!("ready endpoints {ready:?}"))
            }
        },
    )
    .await
    .expect("web-1 answers alone");
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// With `activationDelaySeconds: 2`, replacing the pod quickly creates no fallback at all (a
/// watch on Vigil's pods sees none during the window); an outage longer than the delay gets one,
/// not before the delay is over.
#[tokio::test]
async fn an_activation_delay_rides_out_a_quick_replacement_but_not_an_outage() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], Some(2)).await;
    wait_healthy(&env, &cr, "web").await;
    let creations = Creations::start(&env).await;

    // A quick replacement: the old pod goes, the new one is ready well within 2 s.
    let outage = Instant::now();
    env.delete_pod_as_kubelet_would("web-0")
        .await
        .expect("delete web-0");
    ready_pod(&env, "web-1", "web").await;
    assert!(
        outage.elapsed() < Duration::from_millis(1500),
        "the replacement was not quick: {:?}",
        outage.elapsed()
    );
    wait_healthy(&env, &cr, "web").await;
    // Past the end of the delay, nothing was ever created.
    let window_end = outage + Duration::from_millis(2500);
    tokio::time::sleep_until(window_end.into()).await;
    assert_eq!(
        creations.seen(),
        vec![],
        "no fallback within the activation delay"
    );

    // A long outage: Lame for the delay, then the fallback.
    let outage = Instant::now();
    env.delete_pod_as_kubelet_would("web-1")
        .await
        .expect("delete web-1");
    wait_status(&env, &cr, "web Lame during the delay", |s| {
        entries(s) == vec![entry("web", ServiceState::Lame, false)]
            && counts(s) == (1, 1, 0)
            && is_condition(s, "Ready", "False", "ServicesLame")
    })
    .await;
    assert!(
        outage.elapsed() < Duration::from_secs(2),
        "Lame seen too late to tell: {:?}",
        outage.elapsed()
    );
    wait_fallback_active(&env, &cr, "web", Duration::from_secs(2) + QUICK).await;
    let seen = creations.seen();
    assert_eq!(
        seen.iter()
            .map(|(_, name)| name.as_str())
            .collect::<Vec<_>>(),
        vec![fallback_name("web").as_str()],
        "exactly one fallback"
    );
    let after = seen[0].0.duration_since(outage);
    assert!(
        after >= Duration::from_millis(1900),
        "the fallback came {after:?} into the outage, before the 2 s delay"
    );
    finish(env, &[&cr]).await;
}

/// Case (e): a workload scaled to zero. Its ReplicaSet wants no pod, adopts the Service's pod
/// and deletes it: nothing replaces that pod, so the fallback comes at once, without the wait
/// for a replacement a deletion under a controller gets otherwise. The pod is held terminating
/// by a finalizer, and the status never shows the Service `Lame` (waiting) on the way from
/// Healthy to FallbackActive. (The ReplicaSet wants zero before it deletes anything, so the
/// controller sees that before the deletion.) Runs on a real cluster too: the ReplicaSet
/// controller there is kube-controller-manager's.
#[tokio::test]
async fn a_workload_scaled_to_zero_gets_its_fallback_without_waiting() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "scaled");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    let finalizer = "vigil.dev/test-hold";
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web-0", "labels": {"app": "web"}, "finalizers": [finalizer]},
        "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0",
            "ports": [{"name": "http", "containerPort": 8080}]}]}
    }))
    .expect("pod");
    env.api::<Pod>()
        .create(&PostParams::default(), &pod)
        .await
        .expect("create web-0");
    env.wait_pod("web-0", true).await.expect("web-0 ready");
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;

    let states = StatesSeen::start(&env, &cr, "web").await;
    let replica_set: ReplicaSet = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]}}}
    }))
    .expect("replica set");
    env.api::<ReplicaSet>()
        .create(&PostParams::default(), &replica_set)
        .await
        .expect("create the ReplicaSet");
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;
    let held = get_pod(&env, "web-0").await.expect("get web-0");
    let owned = held.as_ref().is_some_and(|p| {
        p.metadata.deletion_timestamp.is_some()
            && p.owner_references()
                .iter()
                .any(|o| o.kind == "ReplicaSet" && o.controller == Some(true))
    });
    assert!(
        owned,
        "web-0 adopted and deleted by its ReplicaSet: {}",
        describe(held.as_ref())
    );
    let seen = states.stop();
    assert!(
        !seen.contains(&ServiceState::Lame),
        "no wait for a replacement that cannot come: {seen:?}"
    );
    env.api::<Pod>()
        .patch(
            "web-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release web-0");
    finish(env, &[&cr]).await;
}

/// The states a CriticalService's status gives one Service, in order, while it runs.
struct StatesSeen {
    seen: Arc<Mutex<Vec<ServiceState>>>,
    task: tokio::task::JoinHandle<()>,
}

impl StatesSeen {
    async fn start(env: &TestEnv, cr: &str, service: &str) -> Self {
        let config = watcher::Config::default().fields(&format!("metadata.name={cr}"));
        let mut events = watcher(crs(env), config).default_backoff().boxed();
        let seen: Arc<Mutex<Vec<ServiceState>>> = Arc::default();
        let (synced_tx, synced) = oneshot::channel();
        let (record, service) = (Arc::clone(&seen), service.to_owned());
        let task = tokio::spawn(async move {
            let mut synced_tx = Some(synced_tx);
            while let Some(event) = events.next().await {
                let cr = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced_tx.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(cr) | watcher::Event::InitApply(cr)) => cr,
                    _ => continue,
                };
                let state = (cr.status.iter().flat_map(|s| s.services.iter()))
                    .find(|s| s.name == service)
                    .map(|s| s.state);
                let mut seen = record.lock().unwrap_or_else(|e| e.into_inner());
                if let Some(state) = state
                    && seen.last() != Some(&state)
                {
                    seen.push(state);
                }
            }
        });
        synced.await.expect("watch on the CriticalService synced");
        Self { seen, task }
    }

    fn stop(self) -> Vec<ServiceState> {
        self.task.abort();
        self.seen.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

/// A controller starting on more Services than a cache feed's queue holds (1,024) comes up and
/// acts: nothing that subscribes to a feed (the lame-Services report) may hold its queue full
/// while the cache lists, or the cache never syncs. (The report once subscribed before the sync
/// and drained only after it: at 10,000 Services Vigil never made its first reconcile.)
#[tokio::test]
async fn a_controller_starting_on_thousands_of_services_comes_up() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let services = env.api::<Service>();
    let created = futures::stream::iter(0..1_100)
        .map(|i| {
            let services = services.clone();
            async move {
                let service: Service = serde_json::from_value(json!({
                    "metadata": {"name": format!("bulk-{i}")},
                    "spec": {"clusterIP": "None", "ports": [{"port": 80}]}
                }))
                .expect("service");
                services.create(&PostParams::default(), &service).await
            }
        })
        .buffer_unordered(16)
        .collect::<Vec<_>>()
        .await;
    assert!(created.iter().all(Result::is_ok), "1,100 Services created");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "bulk");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// One CriticalService matching several Services: each lame one gets exactly one fallback, the
/// healthy one and a Service it does not match get none, and the status lists all it covers.
#[tokio::test]
async fn one_critical_service_covers_several_services() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "shop");
    create_template(&env).await;
    for name in ["api", "cart", "web"] {
        create_service(&env, name, &[("critical", "true")]).await;
    }
    create_service(&env, "batch", &[("critical", "false")]).await;
    ready_pod(&env, "api-0", "api").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;

    wait_fallback_answers(&env, "cart", SETTLE_TIMEOUT).await;
    wait_fallback_answers(&env, "web", SETTLE_TIMEOUT).await;
    let status = wait_status(&env, &cr, "api Healthy, cart and web FallbackActive", |s| {
        entries(s)
            == vec![
                entry("api", ServiceState::Healthy, false),
                entry("cart", ServiceState::FallbackActive, true),
                entry("web", ServiceState::FallbackActive, true),
            ]
            && counts(s) == (3, 0, 2)
            && is_condition(s, "Ready", "True", "AllServicesAnswering")
    })
    .await;
    assert!(
        status
            .services
            .iter()
            .all(|s| s.namespace == env.namespace())
    );
    let pods = vigils_pods(&env).await.expect("list");
    let by_service: Vec<_> = pods
        .values()
        .map(|p| {
            let labels = p.metadata.labels.clone().unwrap_or_default();
            (
                p.metadata.name.clone().unwrap_or_default(),
                labels.get("vigil.dev/service").cloned().unwrap_or_default(),
                labels.get("app").cloned().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        by_service,
        vec![
            (fallback_name("cart"), "cart".into(), "cart".into()),
            (fallback_name("web"), "web".into(), "web".into()),
        ],
        "one fallback per lame covered Service, selected by it"
    );
    finish(env, &[&cr]).await;
}

/// Two CriticalServices covering one Service: a single fallback, owned by the one with the
/// smaller name; both statuses report it. Deleting the owner hands the Service to the other.
#[tokio::test]
async fn overlapping_critical_services_share_one_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let first = unique(&env, "a");
    let second = unique(&env, "b");
    create_template(&env).await;
    create_cr(&env, &second, &[("critical", "true")], None).await;
    create_cr(&env, &first, &[("team", "shop")], None).await;
    create_service(&env, "web", &[("critical", "true"), ("team", "shop")]).await;

    let fallback = wait_fallback_answers(&env, "web", SETTLE_TIMEOUT).await;
    for cr in [&first, &second] {
        wait_status(&env, cr, "web answered by its fallback", |s| {
            entries(s) == vec![entry("web", ServiceState::FallbackActive, true)]
                && counts(s) == (1, 0, 1)
        })
        .await;
    }
    let pods = vigils_pods(&env).await.expect("list");
    assert_eq!(pods.len(), 1, "one fallback: {:?}", pods.keys());
    let owner = |pod: &Pod| {
        let refs = pod.metadata.owner_references.clone().unwrap_or_default();
        let label = pod
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("vigil.dev/critical-service").cloned());
        (refs.into_iter().map(|r| r.name).collect::<Vec<_>>(), label)
    };
    assert_eq!(
        owner(&fallback),
        (vec![first.clone()], Some(first.clone())),
        "owned by the smaller name"
    );

    // The owner goes (its fallback with it): the other CriticalService takes over.
    crs(&env)
        .delete(&first, &DeleteParams::background())
        .await
        .expect("delete the owner");
    let what = format!("a fallback owned by {second}");
    let taken_over = wait_for(&what, SETTLE_TIMEOUT, || async {
        match get_pod(&env, &fallback_name("web")).await? {
            Some(p)
                if p.metadata.uid != fallback.metadata.uid
                    && owner(&p) == (vec![second.clone()], Some(second.clone())) =>
            {
                Ok(Some(p))
            }
            p => Err(describe(p.as_ref())),
        }
    })
    .await
    .expect(&what);
    assert!(taken_over.metadata.deletion_timestamp.is_none());
    wait_fallback_active(&env, &second, "web", SETTLE_TIMEOUT).await;
    assert_eq!(vigils_pods(&env).await.expect("list").len(), 1);
    finish(env, &[&first, &second]).await;
}

/// A CriticalService edited so it no longer matches the Service: its fallback goes.
#[tokio::test]
async fn a_critical_service_edited_to_stop_matching_deletes_its_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;

    let patch = json!({"spec": {"matchLabels": [{"key": "critical", "value": "no"}]}});
    crs(&env)
        .patch(&cr, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("edit matchLabels");
    wait_fallback_gone(&env, "web").await;
    // (The emptied `services` list itself: see `a_status_covering_nothing_lists_no_services`.)
    wait_status(&env, &cr, "nothing covered", |s| {
        counts(s) == (0, 0, 0) && is_condition(s, "Ready", "True", "AllServicesAnswering")
    })
    .await;
    assert!(vigils_pods(&env).await.expect("list").is_empty());
    finish(env, &[&cr]).await;
}

/// A covered Service relabelled out of coverage: its fallback goes at once (the change touches
/// only the Service, whose new labels no longer name the CriticalService).
#[tokio::test]
async fn a_service_relabelled_out_of_coverage_loses_its_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;

    let patch = json!({"metadata": {"labels": {"critical": "no"}}});
    env.api::<Service>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("relabel the service");
    wait_fallback_gone(&env, "web").await;
    wait_status(&env, &cr, "nothing covered", |s| counts(s) == (0, 0, 0)).await;
    finish(env, &[&cr]).await;
}

/// A covered Service deleted: its fallback goes.
#[tokio::test]
async fn deleting_the_service_deletes_its_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;

    env.api::<Service>()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the service");
    wait_fallback_gone(&env, "web").await;
    wait_status(&env, &cr, "nothing covered", |s| counts(s) == (0, 0, 0)).await;
    finish(env, &[&cr]).await;
}

/// A CriticalService that stops covering its last Service lists no Service in its status.
#[tokio::test]
async fn a_status_covering_nothing_lists_no_services() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;

    env.api::<Service>()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the service");
    wait_status(&env, &cr, "no Service listed", |s| {
        s.services.is_empty() && counts(s) == (0, 0, 0)
    })
    .await;
    finish(env, &[&cr]).await;
}

/// The Service's selector changes, so the old fallback is no longer selected: it is rebuilt with
/// the new selector's labels and answers again.
#[tokio::test]
async fn a_changed_service_selector_rebuilds_the_fallback() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    let old = wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;

    let patch = json!({"spec": {"selector": {"app": "web-v2"}}});
    env.api::<Service>()
        .patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("change the selector");
    let name = fallback_name("web");
    let rebuilt = wait_for(
        "the fallback to be rebuilt with app=web-v2 and answer",
        SETTLE_TIMEOUT,
        || async {
            let endpoints = slice_ready_pods(&env, "web").await?;
            let pod = get_pod(&env, &name).await?;
            match pod {
                Some(p)
                    if p.metadata.uid != old.metadata.uid
                        && p.metadata.deletion_timestamp.is_none()
                        && endpoints.contains(&name) =>
                {
                    Ok(Some(p))
                }
                p => Err(format!(
                    "pod {}, ready endpoints {endpoints:?}",
                    describe(p.as_ref())
                )),
            }
        },
    )
    .await
    .expect("rebuilt");
    let labels = rebuilt.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app").map(String::as_str), Some("web-v2"));
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;
    assert_eq!(vigils_pods(&env).await.expect("list").len(), 1);
    finish(env, &[&cr]).await;
}

/// No PodTemplate: the CriticalService is Degraded (PodTemplateNotFound) with a Warning Event,
/// and creates nothing; the template arriving brings the fallback and clears Degraded.
#[tokio::test]
async fn a_missing_pod_template_degrades_until_it_is_created() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;

    wait_status(&env, &cr, "Degraded PodTemplateNotFound, web Lame", |s| {
        is_condition(s, "Degraded", "True", "PodTemplateNotFound")
            && is_condition(s, "Ready", "False", "ServicesLame")
            && entries(s) == vec![entry("web", ServiceState::Lame, false)]
            && counts(s) == (1, 1, 0)
    })
    .await;
    let warning = wait_event(&env, &cr, "PodTemplateNotFound").await;
    assert_eq!(warning.type_.as_deref(), Some("Warning"));
    let note = warning.note.unwrap_or_default();
    assert!(note.contains(TEMPLATE_NAME), "{note}");
    assert!(vigils_pods(&env).await.expect("list").is_empty());

    create_template(&env).await;
    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;
    wait_status(&env, &cr, "Degraded False", |s| {
        is_condition(s, "Degraded", "False", "AsExpected")
    })
    .await;
    finish(env, &[&cr]).await;
}

/// Failing API calls (pod creation, the status write, pod deletion) are retried: the fallback
/// still comes and goes, and the world settles with no further writes.
#[tokio::test]
async fn injected_api_failures_are_retried() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    sandbox.inject(Fault::fail("create", "pods", 500, 3));
    sandbox.inject(Fault::fail("patch", "criticalservices/status", 500, 2));
    create_cr(&env, &cr, &[("critical", "true")], None).await;

    wait_fallback_active(&env, &cr, "web", SETTLE_TIMEOUT).await;
    assert_eq!(vigils_pods(&env).await.expect("list").len(), 1);
    assert_no_writes(&env, &cr, &[&fallback_name("web")]).await;

    // Deleting the fallback fails too, at first (only Vigil deletes pods here: the kubelet
    // finishes a deletion only once Vigil's has gone through).
    sandbox.inject(Fault::fail("delete", "pods", 500, 2));
    ready_pod(&env, "web-0", "web").await;
    wait_healthy(&env, &cr, "web").await;
    wait_event(&env, &cr, "FallbackDeleted").await;
    assert_no_writes(&env, &cr, &["web-0"]).await;
    finish(env, &[&cr]).await;
}

/// Every watch closed (an API server restart): the controller's watches resume without a
/// restart of the controller, and later transitions are still acted on.
#[tokio::test]
async fn closed_watches_resume_and_transitions_are_still_acted_on() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;

    sandbox.close_watches();
    env.make_pod_not_ready("web-0").await.expect("not ready");
    wait_fallback_active(&env, &cr, "web", QUICK).await;

    sandbox.close_watches();
    env.make_pod_ready("web-0").await.expect("ready again");
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// Every watch closed and the event log compacted (so every watch must list again): the caches
/// recover without a restart, and later transitions are still acted on within seconds.
#[tokio::test]
async fn a_compacted_event_log_does_not_blind_the_controller() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;

    sandbox.close_watches();
    sandbox.compact(0);
    env.make_pod_not_ready("web-0").await.expect("not ready");
    wait_fallback_active(&env, &cr, "web", QUICK).await;

    sandbox.close_watches();
    sandbox.compact(0);
    env.make_pod_ready("web-0").await.expect("ready again");
    wait_healthy(&env, &cr, "web").await;
    finish(env, &[&cr]).await;
}

/// A settled controller makes no writes: the CriticalService, the fallback, the real pod and
/// the Events about the CriticalService keep their resourceVersions.
#[tokio::test]
async fn a_settled_controller_makes_no_writes() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_service(&env, "api", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;

    wait_fallback_answers(&env, "api", SETTLE_TIMEOUT).await;
    wait_status(&env, &cr, "web Healthy, api FallbackActive", |s| {
        entries(s)
            == vec![
                entry("api", ServiceState::FallbackActive, true),
                entry("web", ServiceState::Healthy, false),
            ]
            && counts(s) == (2, 0, 1)
    })
    .await;
    // The apply step records its Events after the status: wait for them before measuring.
    wait_event(&env, &cr, "FallbackCreated").await;
    assert_no_writes(&env, &cr, &[&fallback_name("api"), "web-0"]).await;
    finish(env, &[&cr]).await;
}

/// A controller restarted (a new leader, a new version) into an unchanged world writes nothing,
/// even when its pod cache fills later than its CriticalService cache (a slow pod list).
#[tokio::test]
async fn a_restarted_controller_with_nothing_changed_writes_nothing() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let first = start_controller(&env).await;
    let cr = unique(&env, "frontend");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr(&env, &cr, &[("critical", "true")], None).await;
    wait_healthy(&env, &cr, "web").await;
    first.stop().await;

    let creations = Creations::start(&env).await;
    let before = versions(&env, &cr, &["web-0"]).await;
    sandbox.inject(Fault::slow("list", "pods", Duration::from_millis(400)));
    let _second = start_controller(&env).await;
    tokio::time::sleep(Duration::from_millis(1200)).await;
    sandbox.clear_faults();
    assert_eq!(
        creations.seen(),
        vec![],
        "no fallback for a healthy Service"
    );
    let status = crs(&env).get(&cr).await.expect("cr").status;
    assert_eq!(
        before,
        versions(&env, &cr, &["web-0"]).await,
        "nothing written; status now {}",
        show(&status.unwrap_or_default())
    );
    finish(env, &[&cr]).await;
}

/// A lame Service no CriticalService covers is counted in `vigil_lame_services`, and stops being
/// counted once it answers.
#[tokio::test]
async fn lame_uncovered_services_are_counted() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let controller = start_controller(&env).await;
    let svc: Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "plain"},
        "spec": {"selector": {"app": "plain"}, "ports": [{"port": 80}]}
    }))
    .expect("service");
    env.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("service");
    let gauge = |text: &str| {
        text.lines()
            .find(|l| l.starts_with("vigil_lame_services "))
            .map(str::to_owned)
    };
    let metrics = controller.controller.metrics.clone();
    wait_for(
        "vigil_lame_services to count the lame Service",
        SETTLE_TIMEOUT,
        || {
            let line = gauge(&metrics.encode());
            async move {
                if line.as_deref() == Some("vigil_lame_services 1") {
                    Ok(Some(()))
                } else {
                    Err(format!("{line:?}"))
                }
            }
        },
    )
    .await
    .expect("counted");
    env.create_pod("plain-0", "plain").await.expect("pod");
    wait_for(
        "vigil_lame_services to drop once it answers",
        SETTLE_TIMEOUT,
        || {
            let line = gauge(&metrics.encode());
            async move {
                if line.as_deref() == Some("vigil_lame_services 0") {
                    Ok(Some(()))
                } else {
                    Err(format!("{line:?}"))
                }
            }
        },
    )
    .await
    .expect("uncounted");
    controller.stop().await;
    env.cleanup().await;
}

/// `NAMESPACES` naming two namespaces: one watch per namespace, merged into one cache. A
/// CriticalService without `spec.namespace` covers the Services of both, and none of a third,
/// unwatched namespace. On the sandbox, both watches then expire (410) and relist; the cache
/// keeps both namespaces' objects (one namespace's relist must not drop the other's).
#[tokio::test]
async fn watched_namespaces_are_all_covered_and_only_they() {
    let env = TestEnv::start().await.expect("env");
    let ns = env.namespace().to_owned();
    let second = format!("{ns}-b");
    let unwatched = format!("{ns}-c");
    let namespaces: Api<Namespace> = Api::all(env.client());
    for name in [&second, &unwatched] {
        let namespace: Namespace =
            serde_json::from_value(json!({"metadata": {"name": name}})).expect("namespace");
        namespaces
            .create(&PostParams::default(), &namespace)
            .await
            .expect("create namespace");
        env.delete_on_cleanup(&ApiResource::erase::<Namespace>(&()), name);
    }
    let _controller = start_controller_in(&env, BTreeSet::from([ns.clone(), second.clone()])).await;
    create_template(&env).await;
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "web", "labels": {"critical": "true"}},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80}]}
    }))
    .expect("service");
    for namespace in [&ns, &second, &unwatched] {
        Api::<Service>::namespaced(env.client(), namespace)
            .create(&PostParams::default(), &service)
            .await
            .expect("create service");
    }
    let cr = unique(&env, "everywhere");
    let everywhere: CriticalService = serde_json::from_value(json!({
        "apiVersion": "mycrd.com/v1",
        "kind": "CriticalService",
        "metadata": {"name": cr},
        "spec": {"matchLabels": [{"key": "critical", "value": "true"}]}
    }))
    .expect("critical service");
    crs(&env)
        .create(&PostParams::default(), &everywhere)
        .await
        .expect("create critical service");

    let covered_in = |s: &CriticalServiceStatus| -> BTreeSet<String> {
        s.services
            .iter()
            .filter(|e| e.state == ServiceState::FallbackActive)
            .map(|e| e.namespace.clone())
            .collect()
    };
    let both = BTreeSet::from([ns.clone(), second.clone()]);
    wait_status(
        &env,
        &cr,
        "web FallbackActive in both watched namespaces",
        |s| covered_in(s) == both && counts(s) == (2, 0, 2),
    )
    .await;
    let fallbacks_in = |namespace: String| {
        let pods: Api<Pod> = Api::namespaced(env.client(), &namespace);
        async move {
            pods.list(&ListParams::default().labels(VIGILS))
                .await
                .map(|l| l.items.len())
                .map_err(|e| e.to_string())
        }
    };
    assert_eq!(fallbacks_in(ns.clone()).await, Ok(1));
    assert_eq!(fallbacks_in(second.clone()).await, Ok(1));
    assert_eq!(
        fallbacks_in(unwatched.clone()).await,
        Ok(0),
        "an unwatched namespace is not touched"
    );

    if let Some(sandbox) = env.sandbox() {
        sandbox.close_watches();
        sandbox.compact(0);
        // After both relists, a change in one namespace is seen, and the other's Service is
        // still known: deleting `second`'s Service leaves exactly the first one covered.
        Api::<Service>::namespaced(env.client(), &second)
            .delete("web", &DeleteParams::default())
            .await
            .expect("delete service");
        wait_status(
            &env,
            &cr,
            "web FallbackActive in the first namespace only",
            |s| covered_in(s) == BTreeSet::from([ns.clone()]) && counts(s) == (1, 0, 1),
        )
        .await;
        wait_for(
            "the second namespace's fallback to go",
            SETTLE_TIMEOUT,
            || {
                let count = fallbacks_in(second.clone());
                async move {
                    match count.await? {
                        0 => Ok(Some(())),
                        n => Err(format!("{n} fallback pods")),
                    }
                }
            },
        )
        .await
        .expect("fallback retired");
        assert_eq!(fallbacks_in(ns.clone()).await, Ok(1));
    }
    finish(env, &[&cr]).await;
}

/// The ClusterRole `vigil manifests` generates from the controller's declared permissions is
/// exactly what its code uses: every request it makes through a whole lifecycle (a fallback
/// created, reported, retired; a warm standby created, promoted, retired) is granted, and every
/// granted verb is used but one that only an Event repeating needs. Requests are recorded on
/// the client side (the sandbox does not enforce RBAC), so this holds on a real cluster too.
#[tokio::test]
async fn the_controllers_requests_are_exactly_its_declared_permissions() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let (client, log) = env.recording_client().await.expect("recording client");
    let controller =
        start_controller_with(&env, BTreeSet::from([env.namespace().to_owned()]), client).await;
    let cr = unique(&env, "rbac");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr_with_standby(&env, &cr, &[("critical", "true")]).await;
    wait_fallback_answers(&env, "web", SETTLE_TIMEOUT).await;
    ready_pod(&env, "web-0", "web").await;
    wait_healthy(&env, &cr, "web").await;
    let [first, _] = standby_names("web");
    let standby = wait_standby_waiting(&env, &cr, "web", &first).await;
    env.make_pod_not_ready("web-0").await.expect("not ready");
    wait_promoted(&env, &cr, "web", &standby).await;
    // Recovery retires the promoted standby, and deletes its EndpointSlice with it.
    env.make_pod_ready("web-0").await.expect("ready again");
    wait_standby_slice(&env, &first, None).await;
    controller.stop().await;

    let granted = permissions::granted(controller::PERMISSIONS)
        .map(|(group, resource, verb)| RbacAttributes::new(group, resource, verb));
    log.check_exactly(granted, &["patch events.k8s.io/events"])
        .expect("the ClusterRole is exactly what the code uses");
    finish(env, &[&cr]).await;
}

// ---- warm standby (`spec.warmStandby`) ----

/// The names a Service's warm standbys take turns at.
fn standby_names(service: &str) -> [String; 2] {
    [
        format!("{PREFIX}-{service}-standby-a"),
        format!("{PREFIX}-{service}-standby-b"),
    ]
}

/// Creates a CriticalService covering this test's namespace with a warm standby.
/// Pins today's immediate delete of a retiring fallback (`drainSeconds: 0`; the default drains).
async fn delete_at_once(env: &TestEnv, name: &str) {
    crs(env)
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"drainSeconds": 0}})),
        )
        .await
        .expect("drainSeconds: 0");
}

async fn create_cr_with_standby(env: &TestEnv, name: &str, match_labels: &[(&str, &str)]) {
    let match_labels: Vec<_> = match_labels
        .iter()
        .map(|(key, value)| json!({"key": key, "value": value}))
        .collect();
    let cr: CriticalService = serde_json::from_value(json!({
        "apiVersion": "mycrd.com/v1",
        "kind": "CriticalService",
        "metadata": {"name": name},
        "spec": {
            "namespace": env.namespace(),
            "matchLabels": match_labels,
            "warmStandby": true,
        }
    }))
    .expect("critical service");
    crs(env)
        .create(&PostParams::default(), &cr)
        .await
        .expect("create critical service");
}

/// (state, fallback pod, standby pod, standby state) of a covered Service in the status.
type StandbyEntry = (
    ServiceState,
    Option<String>,
    Option<String>,
    Option<StandbyState>,
);

fn standby_entry(status: &CriticalServiceStatus, service: &str) -> Option<StandbyEntry> {
    status.services.iter().find(|s| s.name == service).map(|s| {
        (
            s.state,
            s.fallback_pod.clone(),
            s.standby_pod.clone(),
            s.standby,
        )
    })
}

/// Waits until `service` is Healthy with a Ready standby `standby` that runs, is Ready, and is
/// not an endpoint of the Service (nor labelled to be one); returns the standby pod.
async fn wait_standby_waiting(env: &TestEnv, cr: &str, service: &str, standby: &str) -> Pod {
    wait_status(
        env,
        cr,
        &format!("{service} Healthy with standby {standby} Ready"),
        |s| {
            standby_entry(s, service)
                == Some((
                    ServiceState::Healthy,
                    None,
                    Some(standby.to_owned()),
                    Some(StandbyState::Ready),
                ))
                && s.standby_ready == Some(1)
                && is_condition(s, "StandbyReady", "True", "StandbysReady")
        },
    )
    .await;
    let pod = get_pod(env, standby)
        .await
        .expect("get standby")
        .expect("the standby exists");
    assert!(is_ready(&pod), "standby Ready: {}", describe(Some(&pod)));
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app"), None, "not selected by the Service");
    assert_eq!(
        labels.get("vigil.dev/fallback-role").map(String::as_str),
        Some("standby")
    );
    let endpoints = slice_ready_pods(env, service).await.expect("slices");
    assert!(
        !endpoints.contains(standby),
        "a waiting standby is no endpoint: {endpoints:?}"
    );
    pod
}

/// Waits until `promoted` (the same pod, by uid) answers for `service`: Ready, selected, a ready
/// endpoint in the slices, and named as the fallback in the status.
async fn wait_promoted(env: &TestEnv, cr: &str, service: &str, promoted: &Pod) {
    let name = promoted.metadata.name.clone().unwrap_or_default();
    let what = format!("standby {name} to answer for Service {service}");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        let pod = get_pod(env, &name).await?;
        let endpoints = slice_ready_pods(env, service).await?;
        match pod {
            Some(p)
                if p.metadata.uid == promoted.metadata.uid
                    && is_ready(&p)
                    && endpoints.contains(&name) =>
            {
                Ok(Some(()))
            }
            p => Err(format!(
                "pod {}, ready endpoints {endpoints:?}",
                describe(p.as_ref())
            )),
        }
    })
    .await
    .expect(&what);
    wait_status(env, cr, &format!("{service} answered by {name}"), |s| {
        standby_entry(s, service).is_some_and(|(state, fallback, _, _)| {
            state == ServiceState::FallbackActive && fallback.as_deref() == Some(name.as_str())
        })
    })
    .await;
}

/// The PATCH requests on pods a recording client sent.
fn pod_patches(log: &vigil_testenv::RequestLog) -> Vec<String> {
    log.requests()
        .into_iter()
        .filter(|(method, uri)| method == "PATCH" && uri.contains("/pods/"))
        .map(|(_, uri)| uri)
        .collect()
}

/// The warm standby's lifecycle: created Ready but not selected; promoted by exactly one write
/// (the same pod, now an endpoint) when the Service turns lame, with an Event; a new standby
/// started under the other name; the promoted one retired once the Service recovers, the new
/// standby kept, and nothing created from scratch along the way.
#[tokio::test]
async fn a_warm_standby_is_promoted_in_one_write_and_replaced() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let (client, log) = env.recording_client().await.expect("recording client");
    let _controller =
        start_controller_with(&env, BTreeSet::from([env.namespace().to_owned()]), client).await;
    let cr = unique(&env, "standby");
    let [first, second] = standby_names("web");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr_with_standby(&env, &cr, &[("critical", "true")]).await;
    // One pod write in all: the promotion (a drain would add the retiring patch).
    delete_at_once(&env, &cr).await;
    let standby = wait_standby_waiting(&env, &cr, "web", &first).await;
    assert!(pod_patches(&log).is_empty(), "{:?}", pod_patches(&log));
    let creations = Creations::start(&env).await;

    env.make_pod_not_ready("web-0").await.expect("not ready");
    wait_promoted(&env, &cr, "web", &standby).await;
    wait_event(&env, &cr, "StandbyPromoted").await;
    let patches = pod_patches(&log);
    assert_eq!(patches.len(), 1, "one write promotes: {patches:?}");
    assert!(patches[0].contains(&first), "{patches:?}");
    // A new standby under the other name, never a fallback from scratch.
    wait_status(&env, &cr, "a new standby Ready", |s| {
        standby_entry(s, "web").is_some_and(|(_, _, pod, state)| {
            pod.as_deref() == Some(second.as_str()) && state == Some(StandbyState::Ready)
        })
    })
    .await;
    let created: Vec<String> = creations.seen().into_iter().map(|(_, n)| n).collect();
    assert_eq!(created, vec![second.clone()]);

    env.make_pod_ready("web-0").await.expect("ready again");
    wait_for("the promoted standby to go", SETTLE_TIMEOUT, || async {
        match get_pod(&env, &first).await? {
            None => Ok(Some(())),
            p => Err(describe(p.as_ref())),
        }
    })
    .await
    .expect("promoted standby retired");
    wait_standby_waiting(&env, &cr, "web", &second).await;
    assert_eq!(pod_patches(&log).len(), 1, "no other pod write");
    finish(env, &[&cr]).await;
}

/// Acting on termination: the last ready endpoint, deleted but held by a finalizer (still Ready
/// and listed until the endpoint controllers see the deletion), promotes the standby while it
/// still exists — not only once it is gone.
#[tokio::test]
async fn a_terminating_last_endpoint_promotes_the_standby() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "terminating");
    let [first, _] = standby_names("web");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr_with_standby(&env, &cr, &[("critical", "true")]).await;
    let standby = wait_standby_waiting(&env, &cr, "web", &first).await;

    let finalizer = "vigil.dev/test-hold";
    env.api::<Pod>()
        .patch(
            "web-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [finalizer]}})),
        )
        .await
        .expect("hold web-0");
    env.api::<Pod>()
        .delete("web-0", &DeleteParams::default())
        .await
        .expect("delete web-0");
    wait_promoted(&env, &cr, "web", &standby).await;
    let held = get_pod(&env, "web-0").await.expect("get web-0");
    assert!(
        held.as_ref()
            .is_some_and(|p| p.metadata.deletion_timestamp.is_some()),
        "promoted while web-0 terminates: {}",
        describe(held.as_ref())
    );
    env.api::<Pod>()
        .patch(
            "web-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("release web-0");
    finish(env, &[&cr]).await;
}

/// The standby goes with its Service, comes back with it, and goes with its CriticalService
/// (owner reference: the garbage collector deletes it).
#[tokio::test]
async fn the_standby_goes_with_its_service_and_its_critical_service() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "standby-gone");
    let [first, _] = standby_names("web");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr_with_standby(&env, &cr, &[("critical", "true")]).await;
    wait_standby_waiting(&env, &cr, "web", &first).await;

    let no_vigil_pods = |what: &'static str| {
        let env = &env;
        async move {
            wait_for(what, SETTLE_TIMEOUT, || async {
                match vigils_pods(env).await? {
                    pods if pods.is_empty() => Ok(Some(())),
                    pods => Err(format!("{:?}", pods.keys().collect::<Vec<_>>())),
                }
            })
            .await
            .expect(what);
        }
    };
    env.api::<Service>()
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete the service");
    no_vigil_pods("the standby to go with its Service").await;
    wait_status(&env, &cr, "nothing covered", |s| counts(s) == (0, 0, 0)).await;

    create_service(&env, "web", &[("critical", "true")]).await;
    wait_standby_waiting(&env, &cr, "web", &first).await;
    crs(&env)
        .delete(&cr, &DeleteParams::background())
        .await
        .expect("delete the CriticalService");
    no_vigil_pods("the standby to go with its CriticalService").await;
    finish(env, &[&cr]).await;
}

// ---- Vigil's EndpointSlices of warm standbys, and draining (`spec.drainSeconds`) ----

/// An endpoint's (ready, serving, terminating) conditions.
type Listed = (Option<bool>, Option<bool>, Option<bool>);
/// A waiting standby: used by kube-proxy only while the Service has no ready endpoint.
const ARMED: Listed = (Some(false), Some(true), Some(true));
const LISTED_READY: Listed = (Some(true), Some(true), Some(false));

/// Waits until Vigil's EndpointSlice for the standby `pod` lists it with `listed` (or, with
/// `None`, until there is no such slice); returns it.
async fn wait_standby_slice(
    env: &TestEnv,
    pod: &str,
    listed: Option<Listed>,
) -> Option<EndpointSlice> {
    let what = format!("the EndpointSlice of standby {pod} to list it as {listed:?}");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        let slice = env
            .api::<EndpointSlice>()
            .get_opt(pod)
            .await
            .map_err(|e| e.to_string())?;
        let seen = slice.as_ref().map(|s| {
            let c = s
                .endpoints
                .first()
                .and_then(|e| e.conditions.clone())
                .unwrap_or_default();
            (c.ready, c.serving, c.terminating)
        });
        if seen == listed {
            Ok(Some(slice))
        } else {
            Err(format!("{seen:?}"))
        }
    })
    .await
    .expect(&what)
}

/// A Ready warm standby is listed in an EndpointSlice of Vigil's own as serving and terminating
/// (what kube-proxy sends traffic to only when no endpoint is ready), labelled for the Service and
/// owned by the pod; on promotion the same slice lists it as ready; on recovery the slice goes
/// with the promoted pod, and the next standby is armed. The endpoint controllers leave Vigil's
/// slices alone throughout.
#[tokio::test]
async fn a_waiting_standby_is_armed_in_an_endpoint_slice_of_vigils_own() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "armed");
    let [first, second] = standby_names("web");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    ready_pod(&env, "web-0", "web").await;
    create_cr_with_standby(&env, &cr, &[("critical", "true")]).await;
    let standby = wait_standby_waiting(&env, &cr, "web", &first).await;
    let slice = wait_standby_slice(&env, &first, Some(ARMED))
        .await
        .expect("a slice");
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        labels.get("kubernetes.io/service-name").map(String::as_str),
        Some("web")
    );
    assert_eq!(
        labels
            .get("endpointslice.kubernetes.io/managed-by")
            .map(String::as_str),
        Some("criticalservice.vigil.dev")
    );
    let ip = standby.status.as_ref().and_then(|s| s.pod_ip.clone());
    assert!(ip.is_some(), "the standby has an IP");
    assert_eq!(
        slice.endpoints[0].addresses,
        ip.into_iter().collect::<Vec<_>>()
    );
    let owner = slice.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(
        owner.iter().map(|o| o.uid.clone()).collect::<Vec<_>>(),
        vec![standby.metadata.uid.clone().unwrap_or_default()]
    );
    let ports: Vec<_> = slice
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone(), p.port))
        .collect();
    assert_eq!(ports, vec![(Some("http".to_owned()), Some(80))]);

    env.make_pod_not_ready("web-0").await.expect("not ready");
    wait_standby_slice(&env, &first, Some(LISTED_READY)).await;
    wait_promoted(&env, &cr, "web", &standby).await;
    wait_standby_slice(&env, &second, Some(ARMED)).await;

    env.make_pod_ready("web-0").await.expect("ready again");
    wait_standby_slice(&env, &first, None).await;
    wait_standby_waiting(&env, &cr, "web", &second).await;
    wait_standby_slice(&env, &second, Some(ARMED)).await;
    finish(env, &[&cr]).await;
}

/// Creates a CriticalService covering this test's namespace that drains its fallbacks.
async fn create_cr_draining(env: &TestEnv, name: &str, drain_seconds: u32) {
    let cr: CriticalService = serde_json::from_value(json!({
        "apiVersion": "mycrd.com/v1",
        "kind": "CriticalService",
        "metadata": {"name": name},
        "spec": {
            "namespace": env.namespace(),
            "matchLabels": [{"key": "critical", "value": "true"}],
            "drainSeconds": drain_seconds,
        }
    }))
    .expect("critical service");
    crs(env)
        .create(&PostParams::default(), &cr)
        .await
        .expect("create critical service");
}

/// Waits until the fallback of `service` is draining: out of the selector, role `retiring`,
/// not yet deleted, and no longer a ready endpoint.
async fn wait_draining(env: &TestEnv, service: &str) -> Pod {
    let name = fallback_name(service);
    let what = format!("fallback {name} to drain");
    wait_for(&what, SETTLE_TIMEOUT, || async {
        let pod = get_pod(env, &name).await?;
        let endpoints = slice_ready_pods(env, service).await?;
        match pod {
            Some(p)
                if p.metadata.deletion_timestamp.is_none()
                    && p.labels()
                        .get("vigil.dev/fallback-role")
                        .map(String::as_str)
                        == Some("retiring")
                    && !p.labels().contains_key("app")
                    && !endpoints.contains(&name) =>
            {
                Ok(Some(p))
            }
            p => Err(format!(
                "pod {}, ready endpoints {endpoints:?}",
                describe(p.as_ref())
            )),
        }
    })
    .await
    .expect(&what)
}

/// `drainSeconds`: on recovery the fallback leaves the Service's endpoints first and is deleted
/// only after the drain; an outage during the drain selects the same pod again.
#[tokio::test]
async fn a_retiring_fallback_is_drained_before_it_is_deleted() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let _controller = start_controller(&env).await;
    let cr = unique(&env, "drain");
    create_template(&env).await;
    create_service(&env, "web", &[("critical", "true")]).await;
    create_cr_draining(&env, &cr, 300).await;
    let fallback = wait_fallback_answers(&env, "web", SETTLE_TIMEOUT).await;

    ready_pod(&env, "web-0", "web").await;
    let draining = wait_draining(&env, "web").await;
    assert_eq!(draining.metadata.uid, fallback.metadata.uid);
    wait_event(&env, &cr, "FallbackDraining").await;
    // Healthy while it drains: the draining pod no longer answers for the Service.
    wait_status(&env, &cr, "web Healthy, draining", |s| {
        entries(s) == vec![entry("web", ServiceState::Healthy, false)]
    })
    .await;
    assert!(
        get_pod(&env, &fallback_name("web"))
            .await
            .expect("get")
            .is_some(),
        "a 300 s drain keeps the pod"
    );

    // Lame again while it drains: the same pod answers again.
    env.make_pod_not_ready("web-0").await.expect("not ready");
    let back = wait_fallback_answers(&env, "web", SETTLE_TIMEOUT).await;
    assert_eq!(back.metadata.uid, fallback.metadata.uid, "the same pod");
    wait_event(&env, &cr, "FallbackReselected").await;

    // A short drain: retired, then deleted.
    crs(&env)
        .patch(
            &cr,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"drainSeconds": 1}})),
        )
        .await
        .expect("shorter drain");
    env.make_pod_ready("web-0").await.expect("ready again");
    wait_fallback_gone(&env, "web").await;
    finish(env, &[&cr]).await;
}
