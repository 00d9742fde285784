//! Restoring a re-created object's status from the vault, and the API Vigil's own controllers
//! call before acting on an object: [`StatusRestorer::ensure_restored`].
//!
//! The status goes back through the `/status` subresource with a resourceVersion precondition,
//! so a status some controller wrote in the meantime is never overwritten; then the object is
//! annotated (`vigil.dev/status-restored-from`, and `vigil.dev/restore-status: done` when the
//! object carries that convention's annotation) and an Event says where the status came from.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::runtime::events::EventType;
use kube::{Client, Resource, ResourceExt as _};
use serde_json::json;
use tokio::sync::watch;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::events::{EventNote, EventRecorder};
use vigil_runtime::leader::Leadership;
use vigil_vault::{ObjectKey, Record};

use super::backends::Backends;
use super::decide::{self, Pick, RestoreStart, Wait};
use super::error::{BackendError, Pending};
use super::model::{RESTORE_DONE, RESTORE_STATUS_ANNOTATION, RESTORED_FROM_ANNOTATION};
use super::queue::CaptureQueue;
use super::scope::Scope;

/// Event reasons.
pub const REASON_STATUS_RESTORED: &str = "StatusRestored";
pub const REASON_CORRUPT_RECORD: &str = "CorruptStatusRecord";

/// What [`StatusRestorer::ensure_restored`] found.
#[derive(Debug)]
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
    Pending(Pending),
}

/// What a restore reads and writes: the API, the policies, the backends and the captures still
/// on their way; and what it remembers: objects a background restore is under way for, and
/// corrupt records already reported.
pub struct Restorer {
    pub client: Client,
    pub scope: Arc<Scope>,
    pub backends: Arc<Backends>,
    pub queue: Arc<CaptureQueue>,
    pub recorder: EventRecorder,
    pub leadership: watch::Receiver<Leadership>,
    /// Field manager of the restore's writes (the vault's: `runtime.field_manager()`).
    pub field_manager: String,
    attempts: Mutex<HashSet<String>>,
    warned: Mutex<HashSet<String>>,
}

impl Restorer {
    pub fn new(
        client: Client,
        scope: Arc<Scope>,
        backends: Arc<Backends>,
        queue: Arc<CaptureQueue>,
        recorder: EventRecorder,
        leadership: watch::Receiver<Leadership>,
        field_manager: String,
    ) -> Self {
        Self {
            client,
            scope,
            backends,
            queue,
            recorder,
            leadership,
            field_manager,
            attempts: Mutex::default(),
            warned: Mutex::default(),
        }
    }

    /// Whether this is the first restore attempt for an object (uid) since it was last seen.
    pub fn first_attempt(&self, uid: &str) -> bool {
        super::lock(&self.attempts).insert(uid.to_owned())
    }

    /// The object is gone (or its restore ended unfinished): a later one starts afresh.
    pub fn forget_attempt(&self, uid: &str) {
        super::lock(&self.attempts).remove(uid);
    }

    /// Whether a warning (by key) is reported for the first time.
    fn first_warning(&self, key: &str) -> bool {
        super::lock(&self.warned).insert(key.to_owned())
    }
}

/// The handle Vigil's controllers consult before acting on an object whose status is empty.
#[derive(Clone)]
pub struct StatusRestorer {
    pub(super) inner: Arc<Restorer>,
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
            Err(e) => RestoreOutcome::Pending(Pending::Unreadable(e)),
        }
    }

    /// [`StatusRestorer::ensure_restored`] for dynamically typed objects.
    pub async fn ensure_restored_dynamic(
        &self,
        ar: &ApiResource,
        obj: &DynamicObject,
    ) -> RestoreOutcome {
        restore_once(&self.inner, ar, obj).await
    }
}

fn api_for(restorer: &Restorer, ar: &ApiResource, namespace: Option<&str>) -> Api<DynamicObject> {
    match namespace {
        Some(ns) => Api::namespaced_with(restorer.client.clone(), ns, ar),
        None => Api::all_with(restorer.client.clone(), ar),
    }
}

/// One attempt at restoring `obj`'s status.
pub async fn restore_once(
    restorer: &Restorer,
    ar: &ApiResource,
    obj: &DynamicObject,
) -> RestoreOutcome {
    let view = decide::object_view(obj);
    let annotation_pending = obj
        .annotations()
        .get(RESTORE_STATUS_ANNOTATION)
        .is_some_and(|v| v != RESTORE_DONE);
    let kind = ResourceKind {
        group: ar.group.clone(),
        kind: ar.kind.clone(),
    };
    let scope = &restorer.scope;
    let backends = scope.backends_covering(&scope.policies(), &kind, &view, true);
    let key = ObjectKey::new(&ar.group, &ar.kind, view.namespace.as_deref(), &view.name);
    let start = decide::restore_start(
        &view,
        annotation_pending,
        scope.policies_synced(),
        backends,
        restorer.queue.has_pending(&key),
    );
    let backends = match start {
        RestoreStart::Nothing { mark_done } => {
            if mark_done {
                mark_restored(restorer, ar, obj, None).await;
            }
            return RestoreOutcome::NothingToRestore;
        }
        RestoreStart::Pending(why) => {
            return RestoreOutcome::Pending(match why {
                Wait::PoliciesNotLoaded => Pending::PoliciesNotLoaded,
                Wait::CapturesOnTheirWay => Pending::CapturesOnTheirWay,
            });
        }
        RestoreStart::Search(backends) => backends,
    };
    for backend in &backends {
        let retention = scope.retention_of(backend);
        let vault = match restorer.backends.vault(backend, retention).await {
            Ok(v) => v,
            Err(e) => return RestoreOutcome::Pending(e.into()),
        };
        let history = match vault.history(&key).await {
            Ok(h) => h,
            Err(e) => {
                return RestoreOutcome::Pending(BackendError::vault(backend, e).into());
            }
        };
        match decide::pick_restore(&history, &view.uid) {
            Pick::Nothing => continue,
            Pick::Corrupt(reason) => {
                let pending = Pending::CorruptRecord {
                    object: key.to_string(),
                    location: backend.location.clone(),
                    reason: reason.to_string(),
                };
                let message = pending.to_string();
                if restorer.first_warning(&format!("corrupt/{}", view.uid)) {
                    tracing::warn!(object = %key, %reason, "corrupt status record: not restored");
                    publish(
                        restorer,
                        ar,
                        obj,
                        EventType::Warning,
                        REASON_CORRUPT_RECORD,
                        &message,
                    )
                    .await;
                }
                return RestoreOutcome::Pending(pending);
            }
            Pick::Restore(record) => return write_status(restorer, ar, obj, *record).await,
        }
    }
    if annotation_pending {
        mark_restored(restorer, ar, obj, None).await;
    }
    RestoreOutcome::NothingToRestore
}

/// Writes the saved status through `/status`, only if the object is still the one seen empty.
async fn write_status(
    restorer: &Restorer,
    ar: &ApiResource,
    obj: &DynamicObject,
    record: Record,
) -> RestoreOutcome {
    let api = api_for(restorer, ar, obj.namespace().as_deref());
    let Some(rv) = obj.resource_version() else {
        return RestoreOutcome::Pending(Pending::NoResourceVersion);
    };
    // The resourceVersion makes the patch conditional: if anyone wrote the object since it was
    // seen with an empty status (a controller filling it in), the API server refuses (409).
    let patch = json!({"metadata": {"resourceVersion": rv}, "status": record.status});
    let params = PatchParams {
        field_manager: Some(restorer.field_manager.clone()),
        ..PatchParams::default()
    };
    match api
        .patch_status(&obj.name_any(), &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {
            return RestoreOutcome::Pending(Pending::Changed);
        }
        Err(kube::Error::Api(s)) if s.code == 404 => return RestoreOutcome::NothingToRestore,
        Err(e) => return RestoreOutcome::Pending(Pending::Write(e)),
    }
    mark_restored(restorer, ar, obj, Some(&record.time)).await;
    let message = format!(
        "status restored from the vault record of {} (previous object uid {}, resourceVersion {})",
        record.time, record.uid, record.resource_version
    );
    tracing::info!(kind = %ar.kind, namespace = ?obj.namespace(), name = %obj.name_any(), from = %record.time, "status restored");
    publish(
        restorer,
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
pub async fn mark_restored(
    restorer: &Restorer,
    ar: &ApiResource,
    obj: &DynamicObject,
    from: Option<&str>,
) {
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
    let api = api_for(restorer, ar, obj.namespace().as_deref());
    let patch = json!({"metadata": {"annotations": annotations}});
    let params = PatchParams {
        field_manager: Some(restorer.field_manager.clone()),
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
    restorer: &Restorer,
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
    let note = EventNote {
        warning: matches!(type_, EventType::Warning),
        reason: reason.to_owned(),
        note: note.to_owned(),
        related: None,
    };
    restorer
        .recorder
        .publish(&reference, &note, "RestoreStatus")
        .await;
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
    restorer: Arc<Restorer>,
    ar: ApiResource,
    namespace: Option<String>,
    name: String,
    uid: String,
) {
    let api = api_for(&restorer, &ar, namespace.as_deref());
    let mut attempt = 0u32;
    loop {
        if *restorer.leadership.borrow() != Leadership::Leading {
            restorer.forget_attempt(&uid);
            return;
        }
        let outcome = match api.get_opt(&name).await {
            Ok(Some(obj)) if obj.uid().as_deref() == Some(uid.as_str()) => {
                restore_once(&restorer, &ar, &obj).await
            }
            // Gone, or another object under the name (its own watch event handles it).
            Ok(_) => return,
            Err(e) => RestoreOutcome::Pending(Pending::Read(e)),
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
