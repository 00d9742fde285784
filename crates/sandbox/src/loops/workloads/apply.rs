//! The writes the workload controllers make, through the same REST operations clients use, as
//! `kube-controller-manager`. Errors (Conflict, NotFound, AlreadyExists) mean the world moved
//! on: the next pass looks again, so they are returned for the caller to decide, never panicked on.

use serde_json::Value;

use crate::error::ApiError;
use crate::registry::ops::{self, DeleteOptions, Target, WriteOptions};
use crate::registry::store::State;

const FIELD_MANAGER: &str = "kube-controller-manager";

fn opts() -> WriteOptions {
    WriteOptions {
        field_manager: FIELD_MANAGER.into(),
        ..Default::default()
    }
}

fn info(
    state: &State,
    group: &str,
    resource: &str,
) -> Result<std::sync::Arc<crate::registry::resources::ResourceInfo>, ApiError> {
    state
        .registry
        .get(group, "v1", resource)
        .ok_or_else(ApiError::unknown_resource)
}

/// Creates an object; returns it as stored.
pub fn create(
    state: &mut State,
    group: &str,
    resource: &str,
    ns: &str,
    body: Value,
) -> Result<Value, ApiError> {
    let info = info(state, group, resource)?;
    ops::create(state, &info, ns, body, &opts()).map(|w| w.object.value.clone())
}

/// Replaces an object's spec and metadata (not its status); a no-op write changes nothing.
pub fn update(
    state: &mut State,
    group: &str,
    resource: &str,
    body: Value,
) -> Result<Value, ApiError> {
    replace(state, group, resource, body, Target::Main)
}

/// Replaces an object's status.
pub fn update_status(
    state: &mut State,
    group: &str,
    resource: &str,
    body: Value,
) -> Result<Value, ApiError> {
    replace(state, group, resource, body, Target::Status)
}

/// A PUT of `body` to its own name and namespace, on the main resource or `/status`.
fn replace(
    state: &mut State,
    group: &str,
    resource: &str,
    body: Value,
    target: Target,
) -> Result<Value, ApiError> {
    let info = info(state, group, resource)?;
    let ns = crate::registry::meta::namespace(&body).to_owned();
    let name = crate::registry::meta::name(&body).to_owned();
    ops::update(state, &info, &ns, &name, body, &opts(), target).map(|w| w.object.value.clone())
}

/// Deletes an object (pods on a node gracefully, for the kubelet to finish), background
/// propagation as the controllers ask for.
pub fn delete(
    state: &mut State,
    group: &str,
    resource: &str,
    ns: &str,
    name: &str,
) -> Result<(), ApiError> {
    let info = info(state, group, resource)?;
    let options = DeleteOptions {
        propagation: Some("Background".into()),
        ..DeleteOptions::default()
    };
    ops::delete(state, &info, ns, name, &options).map(|_| ())
}

/// Sets an object's annotations the way a Deployment's `/status` write may (its status strategy
/// keeps annotations from the request), so the change does not bump `metadata.generation` as a
/// main-resource write of annotations would.
pub fn set_annotations_via_status(
    state: &mut State,
    storage_key: &str,
    obj: &Value,
    annotations: Value,
) -> Option<Value> {
    let live = state.get(
        storage_key,
        crate::registry::meta::namespace(obj),
        crate::registry::meta::name(obj),
    )?;
    let mut value = live.value.clone();
    crate::registry::meta::set_meta(&mut value, "annotations", annotations);
    if value == live.value {
        return Some(value);
    }
    Some(state.put(storage_key, value).value.clone())
}
