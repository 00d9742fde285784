//! A simulated kubelet, written as an ordinary API client (like kwok) so it runs against the
//! sandbox and against a real cluster without nodes alike. It registers a Node and keeps its
//! Lease fresh, binds unscheduled pods to it, gives them an IP from 10.244.0.0/16, reports them
//! Running and Ready (after an optional delay), and finishes their graceful deletion.
//!
//! Tests steer a pod through the [`STATE_ANNOTATION`]: `Pending` keeps it pending, `NotReady`
//! keeps it running but not ready; removing the annotation lets it become Ready. The
//! [`EXIT_CODE_ANNOTATION`] makes a pod's containers exit with that code once it has run
//! ([`RUN_SECONDS_ANNOTATION`] seconds, default 0): `Succeeded` for 0, `Failed` otherwise.

mod decide;
pub mod node;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Client, ResourceExt as _};
use tokio::sync::watch;
use tokio::task::JoinHandle;

pub use decide::{
    Decision, EXIT_CODE_ANNOTATION, PodState, RUN_SECONDS_ANNOTATION, STATE_ANNOTATION, decide,
};

/// Field manager of every write the kubelet makes.
pub const FIELD_MANAGER: &str = "vigil-kubelet";

/// How the simulated kubelet behaves.
#[derive(Debug, Clone)]
pub struct KubeletConfig {
    /// Name of the Node it registers.
    pub node_name: String,
    /// Only pods in this namespace (None: every namespace). On a shared real cluster, scope it.
    pub namespace: Option<String>,
    /// How long a started pod takes to become Ready.
    pub ready_delay: Duration,
    /// How often the node's Lease is renewed.
    pub lease_renew_interval: Duration,
    /// Third octet base of pod IPs, so several kubelets on one cluster hand out distinct IPs.
    pub pod_subnet: u8,
}

impl Default for KubeletConfig {
    fn default() -> Self {
        Self {
            node_name: "vigil-node".into(),
            namespace: None,
            ready_delay: Duration::ZERO,
            lease_renew_interval: Duration::from_secs(10),
            pod_subnet: 0,
        }
    }
}

/// Why the kubelet could not start.
#[derive(Debug, thiserror::Error)]
pub enum KubeletError {
    #[error("registering node {node}: {source}")]
    Register { node: String, source: kube::Error },
}

/// How long `stop` lets in-flight work finish before cancelling it.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// A running simulated kubelet.
pub struct Kubelet {
    config: KubeletConfig,
    client: Client,
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

/// What reconciles share: the client, config, and when each pod started (for the ready delay).
struct Context {
    client: Client,
    config: KubeletConfig,
    started: Mutex<HashMap<String, Instant>>,
    ips: Mutex<IpPool>,
}

/// Hands out pod IPs in 10.244.0.0/16, skipping .0 and .255 of each /24.
#[derive(Debug)]
struct IpPool {
    next: u32,
    subnet: u8,
}

impl IpPool {
    fn allocate(&mut self) -> String {
        loop {
            let n = self.next;
            self.next = (self.next + 1) % (256 * 256);
            let (third, fourth) = ((n / 256) as u8, (n % 256) as u8);
            if fourth != 0 && fourth != 255 {
                return format!("10.244.{}.{fourth}", third.wrapping_add(self.subnet));
            }
        }
    }
}

impl std::fmt::Debug for Kubelet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kubelet")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Kubelet {
    /// Registers the node and starts running pods.
    pub async fn start(client: Client, config: KubeletConfig) -> Result<Self, KubeletError> {
        node::register(&client, &config.node_name)
            .await
            .map_err(|source| KubeletError::Register {
                node: config.node_name.clone(),
                source,
            })?;
        let (stop, stopped) = watch::channel(false);
        let ctx = Arc::new(Context {
            client: client.clone(),
            config: config.clone(),
            started: Mutex::new(HashMap::new()),
            ips: Mutex::new(IpPool {
                next: 2,
                subnet: config.pod_subnet,
            }),
        });
        let pods: Api<Pod> = match &config.namespace {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        };
        let mut stop_pods = stopped.clone();
        let controller = Controller::new(pods, watcher::Config::default())
            .graceful_shutdown_on(async move {
                let _ = stop_pods.wait_for(|s| *s).await;
            })
            .run(reconcile, error_policy, ctx)
            .for_each(|_| futures::future::ready(()));
        let lease = node::renew_lease_forever(
            client.clone(),
            config.node_name.clone(),
            config.lease_renew_interval,
            stopped,
        );
        let tasks = vec![tokio::spawn(controller), tokio::spawn(lease)];
        tracing::info!(node = %config.node_name, "simulated kubelet running");
        Ok(Self {
            config,
            client,
            stop,
            tasks,
        })
    }

    /// The node this kubelet runs pods on.
    pub fn node_name(&self) -> &str {
        &self.config.node_name
    }

    /// Stops the kubelet; the Node stays registered.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        for mut task in self.tasks.drain(..) {
            // kube-runtime's graceful shutdown lets in-flight reconciles finish, but it first
            // waits for the pod cache's initial list — which a shutdown cuts short. A kubelet
            // stopped before that list arrived (at once after start, on a real API server slower
            // than the sandbox) would wait forever, so the grace is bounded.
            if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }
    }

    /// Deletes a kubelet's Node and Lease (best effort), e.g. after a test that could not stop it.
    pub async fn deregister(client: &Client, node_name: &str) {
        node::deregister(client, node_name).await;
    }

    /// Stops the kubelet and deletes its Node and Lease (cleanup on a shared cluster).
    pub async fn stop_and_deregister(self) {
        let client = self.client.clone();
        let node = self.config.node_name.clone();
        self.stop().await;
        node::deregister(&client, &node).await;
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

/// Errors are API failures: retry the pod shortly (the controller backs off per pod too).
fn error_policy(_pod: Arc<Pod>, error: &kube::Error, _ctx: Arc<Context>) -> Action {
    tracing::debug!(%error, "kubelet reconcile failed; retrying");
    Action::requeue(Duration::from_millis(200))
}

async fn reconcile(pod: Arc<Pod>, ctx: Arc<Context>) -> Result<Action, kube::Error> {
    let uid = pod.uid().unwrap_or_default();
    let started = ctx.started.lock().ok().and_then(|m| m.get(&uid).copied());
    let decision = decide(
        &pod,
        &ctx.config.node_name,
        started,
        ctx.config.ready_delay,
        Instant::now(),
    );
    let ns = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(ctx.client.clone(), &ns);
    match decision {
        Decision::Ignore | Decision::Nothing => Ok(Action::await_change()),
        Decision::Bind => {
            let binding = serde_json::json!({
                "apiVersion": "v1", "kind": "Binding",
                "metadata": {"name": name, "namespace": ns},
                "target": {"apiVersion": "v1", "kind": "Node", "name": ctx.config.node_name},
            });
            match api
                .create_subresource::<serde_json::Value, serde_json::Value>(
                    "binding",
                    &name,
                    &PostParams::default(),
                    &binding,
                )
                .await
            {
                // Bound by someone else in the meantime: the next event shows it.
                Ok(_) | Err(kube::Error::Api(_)) => Ok(Action::await_change()),
                Err(e) => Err(e),
            }
        }
        Decision::Finish => {
            if let Ok(mut m) = ctx.started.lock() {
                m.remove(&uid);
            }
            let params = DeleteParams {
                grace_period_seconds: Some(0),
                preconditions: Some(Preconditions {
                    uid: Some(uid),
                    resource_version: None,
                }),
                ..DeleteParams::default()
            };
            match api.delete(&name, &params).await {
                Ok(_) | Err(kube::Error::Api(_)) => Ok(Action::await_change()),
                Err(e) => Err(e),
            }
        }
        Decision::Report {
            state,
            requeue_after,
        } => {
            if state != PodState::Pending
                && let Ok(mut m) = ctx.started.lock()
            {
                m.entry(uid).or_insert_with(Instant::now);
            }
            let ip = match pod.status.as_ref().and_then(|s| s.pod_ip.clone()) {
                Some(ip) => ip,
                None => ctx
                    .ips
                    .lock()
                    .map(|mut p| p.allocate())
                    .unwrap_or_else(|_| "10.244.255.254".into()),
            };
            let status = decide::status(
                &pod,
                state,
                &ip,
                &node::host_ip(&ctx.config.node_name),
                chrono::Utc::now(),
            );
            let patch = Patch::Merge(serde_json::json!({"status": status}));
            api.patch_status(&name, &PatchParams::apply(FIELD_MANAGER), &patch)
                .await?;
            Ok(match requeue_after {
                Some(after) => Action::requeue(after),
                None => Action::await_change(),
            })
        }
    }
}
