//! Helpers that set up and steer workloads the same way on the sandbox and on a real cluster:
//! a Service with ready pods, a pod turned NotReady, a pod deleted as the kubelet would.
//! They need the environment's simulated kubelet (`TestEnvOptions::with_kubelet()`).

use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::{STATE_ANNOTATION, TestEnv, WaitError, wait_for};

/// How long the helpers wait for the kubelet and controllers.
pub const SETTLE_TIMEOUT: Duration = Duration::from_secs(15);

/// Why a workload helper failed.
#[derive(Debug, thiserror::Error)]
pub enum WorkloadError {
    #[error(
        "this helper needs the simulated kubelet: start the env with TestEnvOptions::with_kubelet()"
    )]
    NoKubelet,
    #[error(transparent)]
    Api(#[from] kube::Error),
    #[error(transparent)]
    Wait(#[from] WaitError),
    #[error("building an object: {0}")]
    Json(#[from] serde_json::Error),
}

fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn describe(pod: &Pod) -> String {
    let phase = pod
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_else(|| "no phase".into());
    format!(
        "pod {} is {phase}, ready={}",
        pod.metadata.name.as_deref().unwrap_or("?"),
        is_ready(pod)
    )
}

impl TestEnv {
    fn require_kubelet(&self) -> Result<(), WorkloadError> {
        self.node_name().map(|_| ()).ok_or(WorkloadError::NoKubelet)
    }

    /// Creates Service `name` (selector `app: name`, port 80 → the pods' named port `http` 8080)
    /// and `replicas` pods `name-0..`, and waits until every pod is Running and Ready.
    pub async fn service_with_ready_pods(
        &self,
        name: &str,
        replicas: usize,
    ) -> Result<(Service, Vec<Pod>), WorkloadError> {
        self.require_kubelet()?;
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": name},
            "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}
        }))?;
        let service = self
            .api::<Service>()
            .create(&PostParams::default(), &service)
            .await?;
        for i in 0..replicas {
            self.create_pod(&format!("{name}-{i}"), name).await?;
        }
        let mut pods = Vec::with_capacity(replicas);
        for i in 0..replicas {
            pods.push(self.wait_pod(&format!("{name}-{i}"), true).await?);
        }
        Ok((service, pods))
    }

    /// Creates a pod labelled `app: app` with one container exposing `http` on 8080.
    pub async fn create_pod(&self, name: &str, app: &str) -> Result<Pod, WorkloadError> {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {"app": app}},
            "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0", "ports": [{"name": "http", "containerPort": 8080}]}]}
        }))?;
        Ok(self
            .api::<Pod>()
            .create(&PostParams::default(), &pod)
            .await?)
    }

    /// Waits until a pod's readiness is `ready` (and it is Running), returning it.
    pub async fn wait_pod(&self, name: &str, ready: bool) -> Result<Pod, WorkloadError> {
        let api = self.api::<Pod>();
        let what = format!(
            "pod {name} to be {}",
            if ready {
                "Ready"
            } else {
                "Running but not Ready"
            }
        );
        Ok(wait_for(&what, SETTLE_TIMEOUT, || {
            let api = api.clone();
            async move {
                let pod = api.get(name).await.map_err(|e| e.to_string())?;
                let running =
                    pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
                if running && is_ready(&pod) == ready {
                    Ok(Some(pod))
                } else {
                    Err(describe(&pod))
                }
            }
        })
        .await?)
    }

    /// Makes a pod NotReady (it keeps running and keeps its IP) and waits until it shows.
    pub async fn make_pod_not_ready(&self, name: &str) -> Result<Pod, WorkloadError> {
        self.set_pod_state(name, Some("NotReady")).await?;
        self.wait_pod(name, false).await
    }

    /// Lets a pod become Ready again and waits until it is.
    pub async fn make_pod_ready(&self, name: &str) -> Result<Pod, WorkloadError> {
        self.set_pod_state(name, None).await?;
        self.wait_pod(name, true).await
    }

    async fn set_pod_state(&self, name: &str, state: Option<&str>) -> Result<(), WorkloadError> {
        self.require_kubelet()?;
        let patch = json!({"metadata": {"annotations": {STATE_ANNOTATION: state}}});
        self.api::<Pod>()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        Ok(())
    }

    /// Deletes a pod gracefully, as a user or controller would, and waits until the kubelet has
    /// stopped it and it is gone.
    pub async fn delete_pod_as_kubelet_would(&self, name: &str) -> Result<(), WorkloadError> {
        self.require_kubelet()?;
        let api = self.api::<Pod>();
        api.delete(name, &DeleteParams::default()).await?;
        wait_for(&format!("pod {name} to be gone"), SETTLE_TIMEOUT, || {
            let api = api.clone();
            async move {
                match api.get_opt(name).await.map_err(|e| e.to_string())? {
                    None => Ok(Some(())),
                    Some(pod) => Err(format!(
                        "still there, deletionTimestamp={:?}",
                        pod.metadata.deletion_timestamp
                    )),
                }
            }
        })
        .await?;
        Ok(())
    }
}
