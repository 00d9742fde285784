//! Restoring a re-created object's status from the vault, and the API Vigil's own controllers
//! call before acting on an object: [`StatusRestorer::ensure_restored`].
//!
//! The status goes back through the `/status` subresource with a resourceVersion precondition,
//! so a status some controller wrote in the meantime is never overwritten; then the object is
//! annotated (`vigil.dev/status-restored-from`, and `vigil.dev/restore-status: done` when the
//! object carries that convention's annotation) and an Event says where the status came from.

use std::sync::Arc;

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Resource, ResourceExt as _};
use serde_json::json;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::events;
use vigil_runtime::leader::Leadership;
use vigil_vault::{ObjectKey, Record};

use super::capture;
use super::controller::{FIELD_MANAGER, Shared};
use super::decide::{self, Pick};
use super::model::{BackendRef, RESTORE_DONE, RESTORE_STATUS_ANNOTATION, RESTORED_FROM_ANNOTATION};

/// Event reasons.
pub const REASON_STATUS_RESTORED: &str = "StatusRestored";
pub const REASON_CORRUPT_RECORD: &str = "CorruptStatusRecord";

/// What [`StatusRestorer::ensure_restored`] found.
#[derive(Debug, Clone, PartialEq)]
pub enum RestoreOutcome {
    /// The object has a status, no `OnCreate` policy covers it, or the vault holds nothing for
    /// it: go ahead.
    NothingToRestore,
    /// Vigil just wrote the saved status: the caller's copy is stale. Do not act on it; the
    /// restored object arrives as the next watch event.
    Restored(Box<Record>),
    /// Not known yet — the policies are not loaded, the backend does not answer, captures of the
    /// previous object are still on their way, the object changed meanwhile, or its newest record
    /// is unreadable (a human restores it with `vigil status restore`). Do not act; retry later.
    Pending(String),
}

/// The handle Vigil's controllers consult before acting on an object whose status is empty.
#[derive(Clone)]
pub struct StatusRestorer {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for StatusRestorer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusRestorer").finish_non_exhaustive()
    }
}

impl StatusRestorer {
    /// Call at the start of a reconcile: acts only on [`RestoreOutcome::NothingToRestore`].
    ///
    /// ```ignore
    /// match restorer.ensure_restored(cluster.as_ref()).await {
    ///     RestoreOutcome::NothingToRestore => {}             // reconcile as usual
    ///     RestoreOutcome::Restored(_) => return Ok(Action::await_change()),
    ///     RestoreOutcome::Pending(_) => return Ok(Action::requeue(Duration::from_secs(1))),
    /// }
    /// ```
    pub async fn ensure_restored<K>(&self, obj: &K) -> RestoreOutcome
    where
        K: Resource<DynamicType = ()> + serde::Serialize,
    {
        let ar = ApiResource::erase::<K>(&());
        let dynamic = serde_json::to_value(obj).and_then(serde_json::from_value::<DynamicObject>);
        match dynamic {
            Ok(dynamic) => self.ensure_restored_dynamic(&ar, &dynamic).await,
            Err(e) => RestoreOutcome::Pending(format!("cannot read the object: {e}")),
        }
    }

    /// [`StatusRestorer::ensure_restored`] for dynamically typed objects.
    pub async fn ensure_restored_dynamic(
        &self,
        ar: &ApiResource,
        obj: &DynamicObject,
    ) -> RestoreOutcome {
        restore_once(&self.shared, ar, obj).await
    }
}

fn api_for(shared: &Shared, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(shared.client.clone(), ns, ar),
        None => Api::all_with(shared.client.clone(), ar),
    }
}

/// One attempt at restoring `obj`'s status.
pub async fn restore_once(
    shared: &Shared,
    ar: &ApiResource,
    obj: &DynamicObject,
) -> RestoreOutcome {
    let view = capture::view(obj);
    let annotation_pending = obj
        .annotations()
        .get(RESTORE_STATUS_ANNOTATION)
        .is_some_and(|v| v != RESTORE_DONE);
    if view.status_hash.is_some() {
        if annotation_pending {
            mark_done(shared, ar, obj, None).await;
        }
        return RestoreOutcome::NothingToRestore;
    }
    if !shared.policies_synced() {
        return RestoreOutcome::Pending("the status backup policies are not loaded yet".into());
    }
    let kind = ResourceKind {
        group: ar.group.clone(),
        kind: ar.kind.clone(),
    };
    let policies = shared.policies();
    let labels = |ns: &str| shared.namespace_labels(ns);
    let mut backends: Vec<BackendRef> = policies
        .iter()
        .filter(|p| {
            p.spec.restore_mode == vigil_apis::status_backup_policy::RestoreMode::OnCreate
                && decide::covers(p, &kind, &view, &labels)
        })
        .map(|p| decide::backend_of(p, &shared.settings))
        .collect();
    backends.sort();
    backends.dedup();
    if backends.is_empty() {
        return RestoreOutcome::NothingToRestore;
    }
    let key = ObjectKey::new(&ar.group, &ar.kind, view.namespace.as_deref(), &view.name);
    if shared.queue.has_pending(&key) {
        return RestoreOutcome::Pending(
            "records of the previous object are still on their way to the vault".into(),
        );
    }
    for backend in &backends {
        let vault = match shared.vault(backend).await {
            Ok(v) => v,
            Err(e) => return RestoreOutcome::Pending(e),
        };
        let history = match vault.history(&key).await {
            Ok(h) => h,
            Err(e) => {
                return RestoreOutcome::Pending(format!("{}: {e}", backend.location));
            }
        };
        match decide::pick_restore(&history, &view.uid) {
            Pick::Nothing => continue,
            Pick::Corrupt(reason) => {
                let message = format!(
                    "the newest status record of {key} in {} cannot be read ({reason}); nothing restored — restore it with `vigil status restore` once fixed",
                    backend.location
                );
                if shared.first_warning(&format!("corrupt/{}", view.uid)) {
                    tracing::warn!(object = %key, %reason, "corrupt status record: not restored");
                    publish(
                        shared,
                        ar,
                        obj,
                        EventType::Warning,
                        REASON_CORRUPT_RECORD,
                        &message,
                    )
                    .await;
                }
                return RestoreOutcome::Pending(message);
            }
            Pick::Restore(record) => return write_status(shared, ar, obj, *record).await,
        }
    }
    if annotation_pending {
        mark_done(shared, ar, obj, None).await;
    }
    RestoreOutcome::NothingToRestore
}

/// Writes the saved status through `/status`, only if the object is still the one seen empty.
async fn write_status(
    shared: &Shared,
    ar: &ApiResource,
    obj: &DynamicObject,
    record: Record,
) -> RestoreOutcome {
    let api = api_for(shared, ar, obj.namespace().as_deref());
    let Some(rv) = obj.resource_version() else {
        return RestoreOutcome::Pending("the object has no resourceVersion".into());
    };
    // The resourceVersion makes the patch conditional: if anyone wrote the object since it was
    // seen with an empty status (a controller filling it in), the API server refuses (409).
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": record.status});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match api
        .patch_status(&obj.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return RestoreOutcome::Pending(
                "the object changed since it was seen empty; look again".into(),
            );
        }
        Err(kube::Error::Api(s)) if s.code == 404 => return RestoreOutcome::NothingToRestore,
        Err(e) => return RestoreOutcome::Pending(format!("writing the status: {e}")),
    }
    mark_done(shared, ar, obj, Some(&record.time)).await;
    let message = format!(
        "status restored from the vault record of {} (previous object uid {}, resourceVersion {})",
        record.time, record.uid, record.resource_version
    );
    tracing::info!(kind = %ar.kind, namespace = ?obj.namespace(), name = %obj.name_any(), from = %record.time, "status restored");
    publish(
        shared,
        ar,
        obj,
        EventType::Normal,
        REASON_STATUS_RESTORED,
        &message,
    )
    .await;
    RestoreOutcome::Restored(Box::new(record))
}

/// Sets `vigil.dev/status-restored-from` (when a status was restored) and flips the
/// `vigil.dev/restore-status` convention annotation to `done` (when the object carries it).
/// Best effort: the status is what matters; the annotation is retried on the next event.
async fn mark_done(shared: &Shared, ar: &ApiResource, obj: &DynamicObject, from: Option<&str>) {
    let mut annotations = serde_json::Map::new();
    if let Some(time) = from {
        annotations.insert(RESTORED_FROM_ANNOTATION.into(), json!(time));
    }
    if obj.annotations().contains_key(RESTORE_STATUS_ANNOTATION) {
        annotations.insert(RESTORE_STATUS_ANNOTATION.into(), json!(RESTORE_DONE));
    }
    if annotations.is_empty() {
        return;
    }
    let api = api_for(shared, ar, obj.namespace().as_deref());
    let patch = json!({"metadata": {"annotations": annotations}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    if let Err(e) = api
        .patch(&obj.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        tracing::warn!(name = %obj.name_any(), error = %e, "could not annotate a restored object");
    }
}

async fn publish(
    shared: &Shared,
    ar: &ApiResource,
    obj: &DynamicObject,
    type_: EventType,
    reason: &str,
    note: &str,
) {
    let reference = k8s_openapi::api::core::v1::ObjectReference {
        api_version: Some(ar.api_version.clone()),
        kind: Some(ar.kind.clone()),
        name: Some(obj.name_any()),
        namespace: obj.namespace(),
        uid: obj.uid(),
        ..Default::default()
    };
    let warning = matches!(type_, EventType::Warning);
    let event = events::event(warning, reason, note, "RestoreStatus");
    events::record(&shared.recorder, &event, &reference).await;
}

/// How the controller retries a restore that is pending.
const RESTORE_RETRY: BackoffPolicy = BackoffPolicy {
    base: std::time::Duration::from_millis(50),
    max: std::time::Duration::from_secs(30),
    jitter: 0.2,
    quarantine_after: u32::MAX,
    quarantine_interval: std::time::Duration::from_secs(30),
};

/// The controller's automatic restore of an object that appeared with an empty status under an
/// `OnCreate` policy: retried with backoff while pending, until the object is restored, has a
/// status, is gone, or this replica stops leading.
pub async fn restore_in_background(
    shared: Arc<Shared>,
    ar: ApiResource,
    namespace: Option<String>,
    name: String,
    uid: String,
) {
    let api = api_for(&shared, &ar, namespace.as_deref());
    let mut attempt = 0u32;
    loop {
        if *shared.leadership.borrow() != Leadership::Leading {
            shared.forget_restore_attempt(&uid);
            return;
        }
        let outcome = match api.get_opt(&name).await {
            Ok(Some(obj)) if obj.uid().as_deref() == Some(uid.as_str()) => {
                restore_once(&shared, &ar, &obj).await
            }
            // Gone, or another object under the name (its own watch event handles it).
            Ok(_) => return,
            Err(e) => RestoreOutcome::Pending(format!("reading the object: {e}")),
        };
        match outcome {
            RestoreOutcome::NothingToRestore | RestoreOutcome::Restored(_) => return,
            RestoreOutcome::Pending(reason) => {
                attempt = attempt.saturating_add(1);
                let delay = RESTORE_RETRY.delay(attempt, 0.5).delay;
                tracing::debug!(%name, %reason, ?delay, "restore pending; retrying");
                tokio::time::sleep(delay).await;
            }
        }
    }
}
