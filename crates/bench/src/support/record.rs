//! What the API said during a bench run, as a client sees it: every pod and EndpointSlice event
//! of a namespace, stamped with when it arrived, reduced to the facts a timeline needs.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Api, Client, ResourceExt as _};
use tokio::sync::oneshot;

/// A pod as one event showed it.
#[derive(Debug, Clone)]
pub(crate) struct PodSeen {
    pub(crate) at: Instant,
    pub(crate) name: String,
    pub(crate) uid: String,
    pub(crate) labels: std::collections::BTreeMap<String, String>,
    pub(crate) scheduled: bool,
    pub(crate) running: bool,
    pub(crate) ready: bool,
    pub(crate) terminating: bool,
    pub(crate) gone: bool,
}

/// The pods an EndpointSlice of the namespace lists as ready endpoints, as one event showed it.
#[derive(Debug, Clone)]
pub(crate) struct SliceSeen {
    pub(crate) at: Instant,
    pub(crate) ready: Vec<String>,
}

/// Records pod and EndpointSlice events in a namespace until dropped.
pub(crate) struct Recorder {
    pods: Arc<Mutex<Vec<PodSeen>>>,
    slices: Arc<Mutex<Vec<SliceSeen>>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Recorder {
    /// Starts watching; returns once both watches have listed what exists.
    pub(crate) async fn start(client: &Client, namespace: &str) -> Self {
        let pods: Arc<Mutex<Vec<PodSeen>>> = Arc::default();
        let slices: Arc<Mutex<Vec<SliceSeen>>> = Arc::default();
        let (pods_synced, pods_ready) = oneshot::channel();
        let (slices_synced, slices_ready) = oneshot::channel();
        let pod_api: Api<Pod> = Api::namespaced(client.clone(), namespace);
        let slice_api: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
        let record = Arc::clone(&pods);
        let pod_task = tokio::spawn(async move {
            let mut synced = Some(pods_synced);
            let mut events = watcher(pod_api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let at = Instant::now();
                let (pod, gone) = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod)) => (pod, false),
                    Ok(watcher::Event::Delete(pod)) => (pod, true),
                    _ => continue,
                };
                let seen = pod_seen(at, &pod, gone);
                record
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(seen);
            }
        });
        let record = Arc::clone(&slices);
        let slice_task = tokio::spawn(async move {
            let mut synced = Some(slices_synced);
            let mut events = watcher(slice_api, watcher::Config::default())
                .default_backoff()
                .boxed();
            while let Some(event) = events.next().await {
                let at = Instant::now();
                let (slice, gone) = match event {
                    Ok(watcher::Event::InitDone) => {
                        if let Some(tx) = synced.take() {
                            let _ = tx.send(());
                        }
                        continue;
                    }
                    Ok(watcher::Event::Apply(s) | watcher::Event::InitApply(s)) => (s, false),
                    Ok(watcher::Event::Delete(s)) => (s, true),
                    _ => continue,
                };
                let ready = if gone {
                    Vec::new()
                } else {
                    slice
                        .endpoints
                        .iter()
                        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true))
                        .filter_map(|e| e.target_ref.as_ref().and_then(|t| t.name.clone()))
                        .collect()
                };
                record
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(SliceSeen { at, ready });
            }
        });
        let _ = tokio::join!(pods_ready, slices_ready);
        Self {
            pods,
            slices,
            tasks: vec![pod_task, slice_task],
        }
    }

    pub(crate) fn pods(&self) -> Vec<PodSeen> {
        self.pods
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn slices(&self) -> Vec<SliceSeen> {
        self.slices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for Recorder {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn pod_seen(at: Instant, pod: &Pod, gone: bool) -> PodSeen {
    let status = pod.status.as_ref();
    PodSeen {
        at,
        name: pod.name_any(),
        uid: pod.uid().unwrap_or_default(),
        labels: pod.labels().clone(),
        scheduled: pod
            .spec
            .as_ref()
            .is_some_and(|s| s.node_name.as_deref().is_some_and(|n| !n.is_empty())),
        running: status
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                !cs.is_empty()
                    && cs
                        .iter()
                        .all(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            }),
        ready: status
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True")),
        terminating: pod.metadata.deletion_timestamp.is_some(),
        gone,
    }
}
