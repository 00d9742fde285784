//! The apply step: turns a [`Plan`] into writes — warm standby promotions, fallback pods,
//! deletions, the status (only when it differs, through the runtime's status writer) and Events
//! about the CriticalService. The runtime's guard stops a replica that does not lead from writing.

use std::collections::HashMap;
use std::sync::Mutex;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource as _, ResourceExt as _};
use vigil_apis::CriticalService;
use vigil_apis::critical_service::CriticalServiceStatus;
use vigil_runtime::Runtime;

use super::model::{Plan, PodRef, Relabel, SliceWrite};

/// Writes one reconcile makes at once (fallback pods, Events).
const WRITE_CONCURRENCY: usize = 16;
/// The status lists a merge patch must send even when empty: an emptied list would otherwise
/// stay in the stored status forever.
const STATUS_LISTS: &[&str] = &["services", "conditions"];
/// The `action` of this controller's Events.
const EVENT_ACTION: &str = "Reconcile";

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed")]
    Api(#[from] kube::Error),
}

/// Makes the writes of a plan, as this controller (its field manager), and remembers the
/// statuses it wrote until the cache shows them.
pub(super) struct Writer {
    runtime: Runtime,
    field_manager: String,
    written: StatusMemo,
}

impl Writer {
    pub(super) fn new(runtime: Runtime) -> Self {
        Self {
            field_manager: runtime.field_manager(),
            runtime,
            written: StatusMemo::default(),
        }
    }

    /// The status to decide from (see [`StatusMemo::effective`]).
    pub(super) fn status(&self, cr: &CriticalService) -> Option<CriticalServiceStatus> {
        self.written.effective(cr)
    }

    /// Writes what the plan asks for, and the status only when it changed. Standby promotions
    /// (what clients are waiting for), then fallback creates, then deletes, then Events, each go
    /// out [`WRITE_CONCURRENCY`] at a time: a CriticalService covering many Services that turn
    /// lame together gets all their fallbacks in a few round trips, and its next reconcile is not
    /// held up behind one round trip per pod and per Event.
    pub(super) async fn apply(&self, cr: &CriticalService, plan: Plan) -> Result<Action, Error> {
        // Collected first: a lazy iterator of futures borrowing `self` makes the reconcile future
        // not provably `Send`.
        let slices: Vec<_> = plan.slices.iter().map(|w| self.write_slice(w)).collect();
        bounded(slices).await?;
        let relabels: Vec<_> = plan.relabel.iter().map(|r| self.relabel(r)).collect();
        bounded(relabels).await?;
        let creates: Vec<_> = plan
            .create
            .iter()
            .map(|pod| self.create_fallback(pod))
            .collect();
        bounded(creates).await?;
        let deletes: Vec<_> = plan
            .delete
            .iter()
            .map(|t| self.delete_fallback(t))
            .collect();
        bounded(deletes).await?;
        let current = self.written.effective(cr);
        // The writer compares too; compared here first so that a reconcile at rest (most of them)
        // does not even build the field manager's name.
        if current.as_ref() != Some(&plan.status) {
            let wrote = (self.runtime)
                .write_status_with_lists(cr, current.as_ref(), &plan.status, STATUS_LISTS)
                .await?;
            if wrote.is_some() {
                self.written.remember(cr, &plan.status);
            }
        }
        if plan.events.is_empty() {
            return Ok(requeue(&plan));
        }
        let reference = cr.object_ref(&());
        let recorder = self.runtime.recorder();
        let events: Vec<_> = plan
            .events
            .iter()
            .map(|note| async {
                recorder.publish(&reference, note, EVENT_ACTION).await;
                Ok(())
            })
            .collect();
        bounded(events).await?;
        Ok(requeue(&plan))
    }

    async fn create_fallback(&self, pod: &Pod) -> Result<(), Error> {
        let pods: Api<Pod> = Api::namespaced(
            self.runtime.client().clone(),
            &pod.namespace().unwrap_or_default(),
        );
        let params = PostParams {
            field_manager: Some(self.field_manager.clone()),
            ..PostParams::default()
        };
        match pods.create(&params, pod).await {
            Ok(_) => Ok(()),
            // Already there (a previous pass, or a restart in the middle): the caches catch up.
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    /// Writes one of Vigil's EndpointSlices for a warm standby: a server-side apply of the whole
    /// slice (creates or updates it in one request), or a delete.
    async fn write_slice(&self, write: &SliceWrite) -> Result<(), Error> {
        match write {
            SliceWrite::Apply(slice) => {
                let namespace = slice.metadata.namespace.clone().unwrap_or_default();
                let slices: Api<EndpointSlice> =
                    Api::namespaced(self.runtime.client().clone(), &namespace);
                let params = PatchParams::apply(&self.field_manager).force();
                let name = slice.metadata.name.clone().unwrap_or_default();
                // k8s-openapi writes apiVersion and kind itself.
                match slices.patch(&name, &params, &Patch::Apply(&**slice)).await {
                    Ok(_) => Ok(()),
                    // Its namespace is going away: the next pass decides again.
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
            SliceWrite::Delete { namespace, name } => {
                let slices: Api<EndpointSlice> =
                    Api::namespaced(self.runtime.client().clone(), namespace);
                match slices.delete(name, &DeleteParams::default()).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        }
    }

    /// Relabels one of Vigil's pods (a standby promoted, a fallback drained or selected again):
    /// one JSON merge patch of its labels and annotations. The uid in the patch is a precondition
    /// (the API server refuses a patch whose uid differs with 409), so a pod re-created under the
    /// name by someone else is never relabelled.
    async fn relabel(&self, relabel: &Relabel) -> Result<(), Error> {
        let target = &relabel.pod;
        let pods: Api<Pod> = Api::namespaced(self.runtime.client().clone(), &target.namespace);
        let mut metadata = serde_json::json!({"uid": target.uid, "labels": relabel.labels});
        if !relabel.annotations.is_empty() {
            metadata["annotations"] = serde_json::json!(relabel.annotations);
        }
        let patch = serde_json::json!({ "metadata": metadata });
        let params = PatchParams {
            field_manager: Some(self.field_manager.clone()),
            ..PatchParams::default()
        };
        match pods
            .patch(&target.name, &params, &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // Gone, or another pod under the name: the next pass decides again from the caches.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }

    async fn delete_fallback(&self, target: &PodRef) -> Result<(), Error> {
        let pods: Api<Pod> = Api::namespaced(self.runtime.client().clone(), &target.namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(target.uid.clone()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match pods.delete(&target.name, &params).await {
            Ok(_) => Ok(()),
            // Gone already, or a different pod now carries the name: nothing of ours to delete.
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// When to look again: when the plan says (an activation delay running out), else on a change.
fn requeue(plan: &Plan) -> Action {
    plan.requeue_after
        .map_or_else(Action::await_change, Action::requeue)
}

/// Runs `writes`, [`WRITE_CONCURRENCY`] at a time, to the end; then the first error, if any.
async fn bounded<F>(writes: Vec<F>) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<(), Error>>,
{
    let results: Vec<Result<(), Error>> = futures::stream::iter(writes)
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

/// The statuses this replica wrote, until the cache shows them. A reconcile triggered by a pod
/// or slice event between a status write and the watch event that brings it back would
/// otherwise decide from the status *before* the write and write again, with fresh `since`
/// and `lastTransitionTime` stamps; at startup, with a thousand CriticalServices, that doubled
/// the status writes.
#[derive(Default)]
struct StatusMemo(Mutex<HashMap<String, (String, CriticalServiceStatus)>>);

impl StatusMemo {
    /// The status to decide from: what this replica last wrote while the cached object is still
    /// the one that write was based on, else the cached status.
    fn effective(&self, cr: &CriticalService) -> Option<CriticalServiceStatus> {
        let Ok(mut written) = self.0.lock() else {
            return cr.status.clone();
        };
        let name = cr.name_any();
        match written.get(&name) {
            Some((based_on, status)) if cr.metadata.resource_version.as_ref() == Some(based_on) => {
                Some(status.clone())
            }
            Some(_) => {
                // The cache moved past that write.
                written.remove(&name);
                cr.status.clone()
            }
            None => cr.status.clone(),
        }
    }

    fn remember(&self, cr: &CriticalService, status: &CriticalServiceStatus) {
        if let (Ok(mut written), Some(rv)) = (self.0.lock(), cr.metadata.resource_version.clone()) {
            written.insert(cr.name_any(), (rv, status.clone()));
        }
    }
}
