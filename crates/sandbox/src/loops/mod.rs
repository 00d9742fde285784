//! Control loops that a real cluster runs next to the API server (kube-controller-manager and
//! the apiserver's own finalizers), run in-process here so clients meet the same behaviour:
//! namespace lifecycle, CRD instance cleanup, garbage collection, Endpoints/EndpointSlices, and
//! the workload controllers (Deployments, ReplicaSets, StatefulSets, DaemonSets, Jobs).
//!
//! Each loop is a pass over the store, driven by [`drive`]: it wakes when the store changes,
//! lets a burst of writes land, and hands the pass the events since its previous run (or `None`
//! when the event log no longer reaches back, meaning "look at everything").

pub mod endpoints;
pub mod lifecycle;
pub mod workloads;

pub use lifecycle::PLAIN_HTTP_CA_PEM;

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

use crate::registry::store::{Event, Store};

/// Which built-in loops run; tests that drive a behaviour by hand switch one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Loops {
    /// Namespace termination and each namespace's default ServiceAccount and root CA ConfigMap.
    pub namespace_lifecycle: bool,
    /// The ownerReference garbage collector.
    pub garbage_collector: bool,
    /// Endpoints and EndpointSlices for Services with selectors.
    pub endpoints: bool,
    /// Deployments: ReplicaSets per template, rollouts, status.
    pub deployments: bool,
    /// ReplicaSets: pods to match `replicas`, adoption, status.
    pub replicasets: bool,
    /// Jobs: pods until `completions` succeed, back-off, status.
    pub jobs: bool,
    /// StatefulSets: ordinal pods, ordered or parallel, rolling updates, status.
    pub statefulsets: bool,
    /// DaemonSets: a pod per Ready node, rolling updates, status.
    pub daemonsets: bool,
}

impl Default for Loops {
    fn default() -> Self {
        Self {
            namespace_lifecycle: true,
            garbage_collector: true,
            endpoints: true,
            deployments: true,
            replicasets: true,
            jobs: true,
            statefulsets: true,
            daemonsets: true,
        }
    }
}

/// Starts every enabled loop; they end when `shutdown` turns true.
pub fn spawn(
    store: &Arc<Store>,
    loops: Loops,
    root_ca: Arc<str>,
    shutdown: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut dependents = lifecycle::Dependents::default();
    let mut tasks = vec![tokio::spawn(drive(
        store.clone(),
        shutdown.clone(),
        move |s, events| lifecycle::pass(s, loops, &root_ca, &mut dependents, events),
    ))];
    if loops.endpoints {
        let mut controller = endpoints::EndpointsController::default();
        tasks.push(tokio::spawn(drive(
            store.clone(),
            shutdown.clone(),
            move |s, events| controller.pass(s, events),
        )));
    }
    let enabled = workloads::Enabled {
        deployments: loops.deployments,
        replicasets: loops.replicasets,
        jobs: loops.jobs,
        statefulsets: loops.statefulsets,
        daemonsets: loops.daemonsets,
    };
    if enabled.any() {
        let mut controller = workloads::WorkloadsController::new(enabled);
        tasks.push(tokio::spawn(drive_timed(
            store.clone(),
            shutdown.clone(),
            move |s, events| controller.pass(s, events),
        )));
    }
    tasks
}

/// Runs `pass` once at start (over the whole log) and then after every burst of changes.
pub async fn drive(
    store: Arc<Store>,
    shutdown: watch::Receiver<bool>,
    mut pass: impl FnMut(&Store, Option<&[Event]>),
) {
    drive_timed(store, shutdown, move |s, events| {
        pass(s, events);
        None
    })
    .await
}

/// Like [`drive`], for a pass that may also ask to run again after a delay (a timer of its own,
/// e.g. `minReadySeconds`), even if nothing changes in the store meanwhile.
pub async fn drive_timed(
    store: Arc<Store>,
    mut shutdown: watch::Receiver<bool>,
    mut pass: impl FnMut(&Store, Option<&[Event]>) -> Option<Duration>,
) {
    let mut changes = store.subscribe();
    let mut cursor = 0;
    loop {
        changes.mark_unchanged();
        let (events, next) = {
            let state = store.read();
            (state.all_events_after(cursor).ok(), state.rv())
        };
        cursor = next;
        let again = pass(&store, events.as_deref());
        let timer = async {
            match again {
                Some(after) => tokio::time::sleep(after).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            _ = shutdown.changed() => return,
            () = timer => {}
        }
        // Let a burst of writes land before looking once at all of them.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
