//! REST semantics of the generic registry: what create, update, patch and delete do to stored
//! objects (preconditions, status subresource, finalizers, generation, graceful deletion), the way
//! kube-apiserver's `genericregistry.Store` and the kinds' strategies do it.
//!
//! Every operation runs under the store's write lock so that reading the live object, checking
//! preconditions and committing the result are one atomic step.

use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::field_error::{FieldError, FieldErrorKind};
use crate::patch::strategic_merge;
use crate::patch::{CUSTOM_RESOURCE_PATCH_MEDIA_TYPES, PatchType, apply};
use crate::registry::builtin;
use crate::registry::convert;
use crate::registry::crd;
use crate::registry::meta;
use crate::registry::resources::{ResourceInfo, StatusMode};
use crate::registry::store::{State, Stored};
use crate::schema;

/// `fieldValidation`: what to do with fields the schema does not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

/// Options shared by writes.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    pub dry_run: bool,
    pub field_manager: String,
    pub field_validation: FieldValidation,
}

/// Which part of the object a write targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    Main,
    Status,
    /// `namespaces/{name}/finalize`: only `spec.finalizers` changes.
    Finalize,
}

impl Target {
    fn subresource(self) -> Option<&'static str> {
        match self {
            Self::Main => None,
            Self::Status => Some("status"),
            Self::Finalize => Some("finalize"),
        }
    }
}

/// Outcome of a successful write.
#[derive(Debug)]
pub struct Written {
    /// The object in storage form.
    pub object: Arc<Stored>,
    /// `Warning` headers to send (unknown fields under fieldValidation=Warn).
    pub warnings: Vec<String>,
    /// Whether the write created the object (201 rather than 200).
    pub created: bool,
}

/// Outcome of a DELETE.
#[derive(Debug)]
pub enum Deleted {
    /// Gone now; the last state.
    Now(Arc<Stored>),
    /// Still there, with deletionTimestamp set (finalizers, graceful pod deletion, namespaces).
    Pending(Arc<Stored>),
}

/// DeleteOptions that change behaviour.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    pub dry_run: bool,
    pub grace_period_seconds: Option<i64>,
    pub propagation: Option<String>,
    pub precondition_uid: Option<String>,
    pub precondition_rv: Option<String>,
}

/// Who owns managedFields when a write is recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tracking {
    /// A plain write: the manager gets the fields it changed (operation Update).
    Update,
    /// Server-side apply already computed managedFields in the body.
    Applied,
}

const NAMESPACE_IMMORTAL: &[&str] = &["default", "kube-system", "kube-public"];
/// Finalizers the garbage collector acts on.
pub const ORPHAN_FINALIZER: &str = "orphan";
pub const FOREGROUND_FINALIZER: &str = "foregroundDeletion";

fn obj_ns(info: &ResourceInfo, ns: &str) -> String {
    if info.namespaced {
        ns.to_owned()
    } else {
        String::new()
    }
}

/// Sets or checks the body's namespace against the request path.
fn normalize_namespace(info: &ResourceInfo, ns: &str, obj: &mut Value) -> Result<(), ApiError> {
    if !info.namespaced {
        if let Some(Value::Object(m)) = obj.get_mut("metadata") {
            m.remove("namespace");
        }
        return Ok(());
    }
    let body_ns = meta::namespace(obj);
    if body_ns.is_empty() {
        meta::set_meta(obj, "namespace", json!(ns));
    } else if body_ns != ns {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    Ok(())
}

/// Metadata the server owns; a client's values are ignored.
const SERVER_META: &[&str] = &[
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
];

fn check_namespace_usable(
    state: &State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    if !info.namespaced {
        return Ok(());
    }
    match state.get("/namespaces", "", ns) {
        None => Err(ApiError::not_found("", "namespaces", ns)),
        Some(n) if meta::is_deleting(&n.value) => {
            let mut e = ApiError::forbidden(
                &info.group,
                &info.resource,
                name,
                format!(
                    "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                    crate::error::qualified(&info.group, &info.resource),
                ),
            );
            if let Some(details) = e.details.as_mut() {
                details["causes"] = json!([{
                    "reason": "NamespaceTerminating",
                    "message": format!("namespace {ns} is being terminated"),
                    "field": "metadata.namespace",
                }]);
            }
            Err(e)
        }
        Some(_) => Ok(()),
    }
}

/// CRD pruning and defaulting of a body at the request's version. Unknown fields become warnings
/// or, under Strict, errors.
fn prune_and_default(
    info: &ResourceInfo,
    obj: &mut Value,
    opts: &WriteOptions,
    warnings: &mut Vec<String>,
) -> Result<(), ApiError> {
    let Some(schema) = info.crd.as_ref().and_then(|c| c.schema.as_ref()) else {
        return Ok(());
    };
    let pruned = schema::prune(schema, obj);
    match opts.field_validation {
        FieldValidation::Ignore => {}
        FieldValidation::Warn => {
            warnings.extend(pruned.iter().map(|f| format!("unknown field \"{f}\"")))
        }
        FieldValidation::Strict if !pruned.is_empty() => {
            let list: Vec<String> = pruned
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            return Err(ApiError::bad_request(format!(
                "strict decoding error: {}",
                list.join(", ")
            )));
        }
        FieldValidation::Strict => {}
    }
    schema::apply_defaults(schema, obj);
    Ok(())
}

fn is_crd_kind(info: &ResourceInfo) -> bool {
    info.group == "apiextensions.k8s.io" && info.resource == "customresourcedefinitions"
}

fn validate(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = meta::validate_object_meta(obj, info.name_rule, true);
    errors.extend(builtin::validate(info, obj, old));
    if let Some(schema) = info.crd.as_ref().and_then(|c| c.schema.as_ref()) {
        errors.extend(schema::validate(schema, obj));
        if schema::has_rules(schema) {
            errors.extend(validation_rules(schema, obj, old, &errors));
        }
    }
    if is_crd_kind(info) {
        errors.extend(crd::validate(obj, old));
    }
    errors
}

/// A custom resource's CEL validation rules, run as kube-apiserver runs them: only once the
/// object has no type or enum error, which would make the rules' view of it meaningless.
fn validation_rules(
    schema: &Value,
    obj: &Value,
    old: Option<&Value>,
    errors: &[FieldError],
) -> Vec<FieldError> {
    let blocking = errors.iter().any(|e| {
        matches!(
            e.kind,
            FieldErrorKind::TypeInvalid | FieldErrorKind::NotSupported
        )
    });
    if blocking {
        return vec![FieldError::invalid(
            "<nil>",
            // Go prints the nil value of this error as the string "null".
            &Value::from("null"),
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        )];
    }
    schema::validate_rules(schema, obj, old)
}

fn invalid(info: &ResourceInfo, obj: &Value, errors: &[FieldError]) -> ApiError {
    ApiError::invalid(&info.group, &info.kind, meta::name(obj), errors)
}

/// The part of an object whose change bumps `metadata.generation`: everything but metadata (and
/// status, when it is a subresource) — plus annotations for Deployments, whose strategy counts
/// them because rollout settings live there.
fn generation_content<'a>(info: &ResourceInfo, obj: &'a Value) -> Vec<(&'a str, &'a Value)> {
    let skip_status = info.has_status_subresource();
    let mut content: Vec<(&str, &Value)> = obj
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, _)| {
            !(matches!(k.as_str(), "metadata" | "apiVersion" | "kind")
                || (skip_status && *k == "status"))
        })
        .map(|(k, v)| (k.as_str(), v))
        .collect();
    if info.group == "apps" && info.resource == "deployments" {
        content.push((
            "annotations",
            obj.pointer("/metadata/annotations").unwrap_or(&Value::Null),
        ));
    }
    content
}

/// Whether two stored forms differ in anything but resourceVersion and managedFields.
fn differs(a: &Value, b: &Value) -> bool {
    // Compared in place: these objects can be large, and this runs on every write.
    let (Some(a), Some(b)) = (a.as_object(), b.as_object()) else {
        return a != b;
    };
    let volatile = |k: &String| k == "resourceVersion" || k == "managedFields";
    let meta_differs = |x: Option<&Value>, y: Option<&Value>| match (
        x.and_then(Value::as_object),
        y.and_then(Value::as_object),
    ) {
        (Some(x), Some(y)) => x
            .iter()
            .filter(|(k, _)| !volatile(k))
            .ne(y.iter().filter(|(k, _)| !volatile(k))),
        _ => x != y,
    };
    a.len() != b.len()
        || a.iter().zip(b.iter()).any(|((ka, va), (kb, vb))| {
            ka != kb
                || if ka == "metadata" {
                    meta_differs(Some(va), Some(vb))
                } else {
                    va != vb
                }
        })
}

/// Creates an object.
pub fn create(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    body: Value,
    opts: &WriteOptions,
) -> Result<Written, ApiError> {
    create_tracked(state, info, ns, body, opts, Tracking::Update)
}

fn create_tracked(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    mut obj: Value,
    opts: &WriteOptions,
    tracking: Tracking,
) -> Result<Written, ApiError> {
    let mut warnings = Vec::new();
    normalize_namespace(info, ns, &mut obj)?;
    if !meta::meta_str(&obj, "resourceVersion").is_empty() {
        return Err(ApiError::bad_request(
            "resourceVersion should not be set on objects to be created",
        ));
    }
    let applied_fields = obj.pointer("/metadata/managedFields").cloned();
    let meta_map = meta::meta_mut(&mut obj);
    for field in SERVER_META {
        meta_map.remove(*field);
    }
    prune_and_default(info, &mut obj, opts, &mut warnings)?;
    let mut obj = convert::to_storage(info, obj);
    if let (
        StatusMode::Subresource {
            keep_on_create: false,
        },
        Value::Object(m),
    ) = (info.status, &mut obj)
    {
        m.remove("status");
    }
    builtin::initial_status(info, &mut obj);
    builtin::apply_defaults(info, &mut obj, None, &mut || state.allocate_cluster_ip());
    if is_crd_kind(info) {
        crd::apply_defaults(&mut obj, true);
    }
    if meta::name(&obj).is_empty() {
        let prefix = meta::meta_str(&obj, "generateName").to_owned();
        if !prefix.is_empty() {
            let name = format!("{prefix}{}", meta::generate_name_suffix());
            meta::set_meta(&mut obj, "name", json!(name));
        }
    }
    let errors = validate(info, &obj, None);
    if !errors.is_empty() {
        return Err(invalid(info, &obj, &errors));
    }
    check_namespace_usable(state, info, ns, meta::name(&obj))?;
    let ns = obj_ns(info, ns);
    let name = meta::name(&obj).to_owned();
    if state.get(&info.storage_key, &ns, &name).is_some() {
        return Err(ApiError::already_exists(&info.group, &info.resource, &name));
    }
    let now = meta::now_rfc3339();
    meta::set_meta(&mut obj, "uid", json!(meta::new_uid()));
    meta::set_meta(&mut obj, "creationTimestamp", json!(now));
    builtin::label_with_uid(info, &mut obj);
    if info.tracks_generation {
        meta::set_meta(&mut obj, "generation", json!(1));
    }
    match (tracking, applied_fields) {
        (Tracking::Applied, Some(fields)) => meta::set_meta(&mut obj, "managedFields", fields),
        _ => apply::record_update(
            None,
            &mut obj,
            &opts.field_manager,
            &info.api_version(),
            &now,
            None,
        ),
    }
    if opts.dry_run {
        return Ok(Written {
            object: Stored::new(obj, 0),
            warnings,
            created: true,
        });
    }
    let stored = state.put(&info.storage_key, obj);
    let stored = after_write(state, info, stored);
    Ok(Written {
        object: stored,
        warnings,
        created: true,
    })
}

/// Side effects of a committed write: a CRD's resources are (re)registered and its status set.
fn after_write(state: &mut State, info: &ResourceInfo, stored: Arc<Stored>) -> Arc<Stored> {
    if !is_crd_kind(info) {
        return stored;
    }
    sync_crd(state, &stored.value).unwrap_or(stored)
}

/// Registers a CRD's served resources and writes its status; returns the updated CRD if it changed.
pub fn sync_crd(state: &mut State, crd_obj: &Value) -> Option<Arc<Stored>> {
    let name = meta::name(crd_obj).to_owned();
    let conflict = crd::names_conflict(&state.registry, crd_obj);
    let resources = if conflict.is_none() {
        crd::served_resources(crd_obj)
    } else {
        Vec::new()
    };
    state.registry.set_crd_resources(&name, resources);
    let status = crd::status(crd_obj, conflict.as_deref(), &meta::now_rfc3339());
    if crd_obj.get("status") == Some(&status) {
        return None;
    }
    let mut updated = crd_obj.clone();
    updated["status"] = status;
    Some(state.put("apiextensions.k8s.io/customresourcedefinitions", updated))
}

/// Replaces an object (PUT), or its status or finalizers.
pub fn update(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    body: Value,
    opts: &WriteOptions,
    target: Target,
) -> Result<Written, ApiError> {
    update_tracked(state, info, ns, name, body, opts, target, Tracking::Update)
}

#[allow(clippy::too_many_arguments)]
fn update_tracked(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    mut body: Value,
    opts: &WriteOptions,
    target: Target,
    tracking: Tracking,
) -> Result<Written, ApiError> {
    let mut warnings = Vec::new();
    let body_name = meta::name(&body);
    if body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    normalize_namespace(info, ns, &mut body)?;
    let ns = obj_ns(info, ns);
    let Some(old) = state.get(&info.storage_key, &ns, name) else {
        if info.create_on_update && target == Target::Main {
            return create_tracked(state, info, &ns, strip_rv(body), opts, tracking);
        }
        return Err(ApiError::not_found(&info.group, &info.resource, name));
    };
    let body_rv = meta::meta_str(&body, "resourceVersion");
    if !body_rv.is_empty() && body_rv != old.rv.to_string() {
        return Err(ApiError::stale(&info.group, &info.resource, name));
    }
    let applied_fields = body.pointer("/metadata/managedFields").cloned();
    if target == Target::Main {
        prune_and_default(info, &mut body, opts, &mut warnings)?;
    }
    let body = convert::to_storage(info, body);
    let mut new = merge_into_old(info, &old.value, body, target);
    builtin::apply_defaults(info, &mut new, Some(&old.value), &mut || {
        state.allocate_cluster_ip()
    });
    if is_crd_kind(info) {
        crd::apply_defaults(&mut new, false);
    }
    if meta::is_deleting(&old.value) {
        let old_finalizers = meta::finalizers(&old.value);
        let added: Vec<String> = meta::finalizers(&new)
            .into_iter()
            .filter(|f| !old_finalizers.contains(f))
            .collect();
        if !added.is_empty() {
            let list = added
                .iter()
                .map(|f| format!("{f:?}"))
                .collect::<Vec<_>>()
                .join(", ");
            let e = FieldError::forbidden(
                "metadata.finalizers",
                &format!(
                    "no new finalizers can be added if the object is being deleted, found new finalizers []string{{{list}}}"
                ),
            );
            return Err(invalid(info, &new, &[e]));
        }
    }
    let errors = validate(info, &new, Some(&old.value));
    if !errors.is_empty() {
        return Err(invalid(info, &new, &errors));
    }
    let old_generation = old
        .value
        .pointer("/metadata/generation")
        .and_then(Value::as_i64)
        .unwrap_or(1);
    if info.tracks_generation {
        let changed = generation_content(info, &new) != generation_content(info, &old.value);
        let generation = if changed {
            old_generation + 1
        } else {
            old_generation
        };
        meta::set_meta(&mut new, "generation", json!(generation));
    }
    // An apply that changes only ownership (a second manager sharing a field) is still a
    // write; any other write that changes nothing is skipped, as the real server does.
    let ownership_changed = tracking == Tracking::Applied
        && applied_fields.as_ref() != old.value.pointer("/metadata/managedFields");
    if !differs(&new, &old.value) && !ownership_changed {
        return Ok(Written {
            object: old,
            warnings,
            created: false,
        });
    }
    let now = meta::now_rfc3339();
    match (tracking, applied_fields) {
        (Tracking::Applied, Some(fields)) => meta::set_meta(&mut new, "managedFields", fields),
        _ => apply::record_update(
            Some(&old.value),
            &mut new,
            &opts.field_manager,
            &info.api_version(),
            &now,
            target.subresource(),
        ),
    }
    if opts.dry_run {
        return Ok(Written {
            object: Stored::new(new, old.rv),
            warnings,
            created: false,
        });
    }
    // A graceful deletion still running (a pod the kubelet is stopping) is finished by its
    // kubelet, not by the last finalizer going away.
    let grace_pending = new
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0)
        > 0;
    if meta::is_deleting(&new)
        && meta::finalizers(&new).is_empty()
        && !is_namespace(info)
        && !grace_pending
    {
        // The last finalizer is gone: the object goes away now.
        let gone = state.remove_as(&info.storage_key, &ns, name, Some(new));
        return gone
            .map(|object| Written {
                object,
                warnings,
                created: false,
            })
            .ok_or_else(|| ApiError::internal("object vanished"));
    }
    let stored = state.put(&info.storage_key, new);
    let stored = after_write(state, info, stored);
    Ok(Written {
        object: stored,
        warnings,
        created: false,
    })
}

fn strip_rv(mut obj: Value) -> Value {
    if let Some(Value::Object(m)) = obj.get_mut("metadata") {
        m.remove("resourceVersion");
    }
    obj
}

fn is_namespace(info: &ResourceInfo) -> bool {
    info.group.is_empty() && info.resource == "namespaces"
}

/// Builds the new stored object from the live one and a request body, per target.
fn merge_into_old(info: &ResourceInfo, old: &Value, body: Value, target: Target) -> Value {
    match target {
        Target::Main => {
            let mut new = body;
            for field in SERVER_META.iter().chain(["name", "namespace"].iter()) {
                let value = old
                    .pointer(&format!("/metadata/{field}"))
                    .cloned()
                    .unwrap_or(Value::Null);
                meta::set_meta(&mut new, field, value);
            }
            if let (true, Value::Object(m)) = (info.has_status_subresource(), &mut new) {
                match old.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            new
        }
        Target::Status => {
            let mut new = old.clone();
            if let Value::Object(m) = &mut new {
                match body.get("status") {
                    Some(s) => m.insert("status".into(), s.clone()),
                    None => m.remove("status"),
                };
            }
            new
        }
        Target::Finalize => {
            let mut new = old.clone();
            let finalizers = body
                .pointer("/spec/finalizers")
                .cloned()
                .unwrap_or(json!([]));
            meta::object_mut(&mut new["spec"]).insert("finalizers".into(), finalizers);
            new
        }
    }
}

/// Patches an object (or its status); server-side apply may create it.
#[allow(clippy::too_many_arguments)]
pub fn patch(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    patch_type: PatchType,
    patch: Value,
    opts: &WriteOptions,
    target: Target,
) -> Result<Written, ApiError> {
    let ns = obj_ns(info, ns);
    let live = state.get(&info.storage_key, &ns, name);
    let current = live
        .as_ref()
        .map(|s| convert::from_storage(info, &s.value).into_owned());
    if let PatchType::Apply { force } = patch_type {
        return server_side_apply(state, info, &ns, name, current, patch, opts, target, force);
    }
    let Some(mut current) = current else {
        return Err(ApiError::not_found(&info.group, &info.resource, name));
    };
    match patch_type {
        PatchType::Merge => json_patch::merge(&mut current, &patch),
        PatchType::Json => {
            let ops: json_patch::Patch = serde_json::from_value(patch)
                .map_err(|e| ApiError::bad_request(format!("error decoding patch: {e}")))?;
            for op in &ops.0 {
                // Like the API server's JSON patch library, a `test` for null passes on a
                // path that does not exist (kube-runtime's finalizer helper relies on it).
                if let json_patch::PatchOperation::Test(test) = op
                    && test.value.is_null()
                    && current.pointer(&test.path.to_string()).is_none()
                {
                    continue;
                }
                json_patch::patch(&mut current, std::slice::from_ref(op)).map_err(|e| {
                    ApiError::with_code(
                        422,
                        format!(
                            "the server rejected our request due to an error in our request: {e}"
                        ),
                    )
                })?;
            }
        }
        PatchType::Strategic => {
            if info.crd.is_some() {
                return Err(ApiError::unsupported_media_type(
                    CUSTOM_RESOURCE_PATCH_MEDIA_TYPES,
                ));
            }
            current = strategic_merge::apply_patch(&info.kind, &current, &patch)
                .map_err(ApiError::bad_request)?;
        }
        PatchType::Apply { .. } => {}
    }
    if !current.is_object() {
        return Err(ApiError::bad_request("the patched object is not an object"));
    }
    update(state, info, &ns, name, current, opts, target)
}

#[allow(clippy::too_many_arguments)]
fn server_side_apply(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    current: Option<Value>,
    mut applied: Value,
    opts: &WriteOptions,
    target: Target,
    force: bool,
) -> Result<Written, ApiError> {
    if opts.field_manager.is_empty() {
        let e = FieldError::required("fieldManager", "is required for apply patch");
        return Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", &[e]));
    }
    let applied_name = meta::name(&applied);
    if !applied_name.is_empty() && applied_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({applied_name}) does not match the name on the URL ({name})"
        )));
    }
    if applied.pointer("/metadata/managedFields").is_some() {
        return Err(ApiError::bad_request("metadata.managedFields must be nil"));
    }
    meta::set_meta(&mut applied, "name", json!(name));
    restrict_to_target(info, &mut applied, target);
    let api_version = info.api_version();
    let now = meta::now_rfc3339();
    let req = apply::ApplyRequest {
        kind: &info.kind,
        api_version: &api_version,
        manager: &opts.field_manager,
        force,
        now: &now,
        subresource: target.subresource(),
    };
    let merged = apply::server_side_apply(current.as_ref(), &applied, &req).map_err(|conflicts| {
        let causes = conflicts
            .iter()
            .map(|c| json!({"reason": "FieldManagerConflict", "message": c.cause_message(&api_version), "field": c.field}))
            .collect();
        ApiError::conflict_with_causes(&info.group, &info.resource, name, apply::conflict_message(&conflicts, &api_version), causes)
    })?;
    match current {
        None => create_tracked(state, info, ns, strip_rv(merged), opts, Tracking::Applied),
        Some(_) => update_tracked(
            state,
            info,
            ns,
            name,
            merged,
            opts,
            target,
            Tracking::Applied,
        ),
    }
}

/// Keeps only what the endpoint may change: a main-resource apply cannot set status, a `/status`
/// apply sets nothing but status.
fn restrict_to_target(info: &ResourceInfo, applied: &mut Value, target: Target) {
    let Value::Object(map) = applied else { return };
    match target {
        Target::Main if info.has_status_subresource() => {
            map.remove("status");
        }
        Target::Status => {
            map.retain(|k, _| matches!(k.as_str(), "apiVersion" | "kind" | "metadata" | "status"))
        }
        _ => {}
    }
}

/// Deletes an object: at once, or by marking it (finalizers, graceful pods, namespaces).
pub fn delete(
    state: &mut State,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    opts: &DeleteOptions,
) -> Result<Deleted, ApiError> {
    let ns = obj_ns(info, ns);
    let Some(old) = state.get(&info.storage_key, &ns, name) else {
        return Err(ApiError::not_found(&info.group, &info.resource, name));
    };
    check_preconditions(info, &old, opts)?;
    if is_namespace(info) && NAMESPACE_IMMORTAL.contains(&name) {
        return Err(ApiError::forbidden(
            "",
            "namespaces",
            name,
            format!("namespaces \"{name}\" is forbidden: this namespace may not be deleted"),
        ));
    }
    let mut obj = old.value.clone();
    let already_deleting = meta::is_deleting(&obj);
    let mut finalizers = meta::finalizers(&obj);
    if !already_deleting {
        match opts.propagation.as_deref() {
            Some("Orphan") => push_unique(&mut finalizers, ORPHAN_FINALIZER),
            Some("Foreground") => push_unique(&mut finalizers, FOREGROUND_FINALIZER),
            _ => {}
        }
    }
    let grace = pod_grace_period(info, &obj, opts);
    if is_namespace(info) {
        if already_deleting {
            return Ok(Deleted::Pending(old));
        }
        meta::set_meta(&mut obj, "deletionTimestamp", json!(meta::now_rfc3339()));
        meta::set_meta(&mut obj, "deletionGracePeriodSeconds", json!(0));
        obj["status"] = json!({"phase": "Terminating"});
        return Ok(Deleted::Pending(commit_marked(state, info, obj, opts)));
    }
    let pending_grace = obj
        .pointer("/metadata/deletionGracePeriodSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if let Some(grace) = grace.filter(|g| *g > 0) {
        // A pod on a node gets time to stop; the kubelet removes it.
        if already_deleting {
            // Only a shorter grace period may be asked for.
            if grace < pending_grace {
                shorten_grace(&mut obj, pending_grace, grace);
                return Ok(Deleted::Pending(commit_marked(state, info, obj, opts)));
            }
            return Ok(Deleted::Pending(old));
        }
        let at = chrono::Utc::now() + chrono::Duration::seconds(grace);
        meta::set_meta(
            &mut obj,
            "deletionTimestamp",
            json!(at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
        meta::set_meta(&mut obj, "deletionGracePeriodSeconds", json!(grace));
        meta::set_meta(
            &mut obj,
            "finalizers",
            if finalizers.is_empty() {
                Value::Null
            } else {
                json!(finalizers)
            },
        );
        return Ok(Deleted::Pending(commit_marked(state, info, obj, opts)));
    }
    if !finalizers.is_empty() {
        if already_deleting && grace == Some(0) && pending_grace > 0 {
            // The kubelet has stopped the pod: only the finalizers hold it now.
            shorten_grace(&mut obj, pending_grace, 0);
            return Ok(Deleted::Pending(commit_marked(state, info, obj, opts)));
        }
        if already_deleting {
            return Ok(Deleted::Pending(old));
        }
        meta::set_meta(&mut obj, "deletionTimestamp", json!(meta::now_rfc3339()));
        meta::set_meta(&mut obj, "deletionGracePeriodSeconds", json!(0));
        meta::set_meta(&mut obj, "finalizers", json!(finalizers));
        return Ok(Deleted::Pending(commit_marked(state, info, obj, opts)));
    }
    if opts.dry_run {
        return Ok(Deleted::Now(old));
    }
    match state.remove(&info.storage_key, &ns, name) {
        Some(gone) => Ok(Deleted::Now(gone)),
        None => Err(ApiError::not_found(&info.group, &info.resource, name)),
    }
}

/// A graceful deletion cut short, as kube-apiserver does it (`rest.BeforeDelete`): the grace
/// period becomes `grace` and `deletionTimestamp` moves by the difference, so that
/// `deletionTimestamp` less the grace period stays the time the deletion was asked for (what
/// clients read it as: a pod's deletion under its controller, for one).
fn shorten_grace(obj: &mut Value, pending: i64, grace: i64) {
    let at = obj
        .pointer("/metadata/deletionTimestamp")
        .and_then(Value::as_str)
        .and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok())
        .map(|t| t.with_timezone(&chrono::Utc));
    if let Some(at) = at {
        let moved = at - chrono::Duration::seconds(pending) + chrono::Duration::seconds(grace);
        meta::set_meta(
            obj,
            "deletionTimestamp",
            json!(moved.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)),
        );
    }
    meta::set_meta(obj, "deletionGracePeriodSeconds", json!(grace));
}

fn commit_marked(
    state: &mut State,
    info: &ResourceInfo,
    obj: Value,
    opts: &DeleteOptions,
) -> Arc<Stored> {
    if opts.dry_run {
        Stored::new(obj, 0)
    } else {
        state.put(&info.storage_key, obj)
    }
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|f| f == item) {
        list.push(item.to_owned());
    }
}

/// A bound pod is deleted gracefully: the period from the request, else its spec, else 30 s.
fn pod_grace_period(info: &ResourceInfo, pod: &Value, opts: &DeleteOptions) -> Option<i64> {
    if !(info.group.is_empty() && info.resource == "pods") {
        return None;
    }
    let bound = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .is_some_and(|n| !n.is_empty());
    let finished = matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    );
    if !bound || finished {
        return Some(0);
    }
    Some(
        opts.grace_period_seconds
            .or_else(|| {
                pod.pointer("/spec/terminationGracePeriodSeconds")
                    .and_then(Value::as_i64)
            })
            .unwrap_or(30),
    )
}

/// Delete preconditions, checked as the real server's `rest.BeforeDelete` does: its conflict
/// names the kind, not the resource (`Operation cannot be fulfilled on ConfigMap "x"`).
fn check_preconditions(
    info: &ResourceInfo,
    old: &Stored,
    opts: &DeleteOptions,
) -> Result<(), ApiError> {
    let name = old.name();
    if let Some(uid) = opts.precondition_uid.as_deref() {
        let actual = meta::meta_str(&old.value, "uid");
        if uid != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.kind,
                name,
                &format!(
                    "the UID in the precondition ({uid}) does not match the UID in record \
                     ({actual}). The object might have been deleted and then recreated"
                ),
            ));
        }
    }
    if let Some(rv) = opts.precondition_rv.as_deref() {
        let actual = old.rv.to_string();
        if rv != actual {
            return Err(ApiError::conflict(
                &info.group,
                &info.kind,
                name,
                &format!(
                    "the ResourceVersion in the precondition ({rv}) does not match the \
                     ResourceVersion in record ({actual}). The object might have been modified"
                ),
            ));
        }
    }
    Ok(())
}
