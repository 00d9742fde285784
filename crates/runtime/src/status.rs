//! Writing an object's status: only when it differs from what is there, through the `/status`
//! subresource, as a JSON merge patch that also clears what the new status leaves out.
//!
//! The status itself is computed by the controller's pure decision — conditions with
//! [`crate::conditions::set`] (whose `lastTransitionTime` moves only when the condition's status
//! does) and `observedGeneration` from the object's `metadata.generation` — so at rest the
//! decided status equals the current one and [`write`] sends nothing: zero writes at rest.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams};
use kube::{Client, Resource, ResourceExt as _};
use serde::Serialize;
use serde_json::Value;

/// Writes `desired` as `obj`'s status if it differs from `current` (the status the decision
/// started from); returns the object's new `resourceVersion` if it wrote, `None` if there was
/// nothing to write.
///
/// A merge patch leaves alone what it does not mention, and a status type usually skips empty
/// lists and `None`s when it serializes: so every field `current` has and `desired` lacks is
/// sent as `null` (removed), and every field named in `lists` that `desired` lacks is sent as
/// `[]` (for a cache that may not show a list the server still holds).
pub async fn write<K, S>(
    client: &Client,
    obj: &K,
    current: Option<&S>,
    desired: &S,
    lists: &[&str],
    field_manager: &str,
) -> Result<Option<String>, kube::Error>
where
    K: Resource<DynamicType = ()>,
    S: Serialize + PartialEq,
{
    if current == Some(desired) {
        return Ok(None);
    }
    let patch = merge_patch(current, desired, lists).map_err(kube::Error::SerdeError)?;
    patch_status(client, obj, &patch, field_manager)
        .await
        .map(Some)
}

/// Sends `{"status": status}` as a merge patch to `obj`'s `/status` (for a partial write, such as
/// the quarantine's `Degraded` condition); returns the object's new `resourceVersion`.
pub async fn patch_status<K>(
    client: &Client,
    obj: &K,
    status: &Value,
    field_manager: &str,
) -> Result<String, kube::Error>
where
    K: Resource<DynamicType = ()>,
{
    let api = dynamic_api(client, obj);
    let patch = serde_json::json!({ "status": status });
    let written = api
        .patch_status(
            &obj.name_any(),
            &PatchParams::apply(field_manager),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(written.resource_version().unwrap_or_default())
}

/// An API for `obj`'s resource in `obj`'s namespace (or cluster-wide), whatever its scope.
pub(crate) fn dynamic_api<K: Resource<DynamicType = ()>>(
    client: &Client,
    obj: &K,
) -> Api<DynamicObject> {
    let resource = ApiResource::erase::<K>(&());
    match obj.namespace() {
        Some(ns) => Api::namespaced_with(client.clone(), &ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Sets to `null` what `old` has and `new` lacks, in nested objects too (a map such as a status's
/// `config` merges key by key: a key it no longer has must be sent as `null` to go).
fn clear_missing(old: &serde_json::Map<String, Value>, new: &mut serde_json::Map<String, Value>) {
    for (key, old_value) in old {
        match (new.get_mut(key), old_value) {
            (None, _) => {
                new.insert(key.clone(), Value::Null);
            }
            (Some(Value::Object(new_object)), Value::Object(old_object)) => {
                clear_missing(old_object, new_object);
            }
            (Some(_), _) => {}
        }
    }
}

/// The status part of the merge patch from `current` to `desired` (see [`write`]).
pub fn merge_patch<S: Serialize>(
    current: Option<&S>,
    desired: &S,
    lists: &[&str],
) -> Result<Value, serde_json::Error> {
    let mut patch = serde_json::to_value(desired)?;
    let Value::Object(fields) = &mut patch else {
        return Ok(patch);
    };
    if let Some(Value::Object(old)) = current.map(serde_json::to_value).transpose()? {
        clear_missing(&old, fields);
    }
    for list in lists {
        match fields.get(*list) {
            None | Some(Value::Null) => {
                fields.insert((*list).to_owned(), Value::Array(Vec::new()));
            }
            Some(_) => {}
        }
    }
    Ok(patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Serialize, PartialEq, Default)]
    struct Status {
        #[serde(skip_serializing_if = "Vec::is_empty")]
        items: Vec<String>,
        #[serde(skip_serializing_if = "Option::is_none")]
        message: Option<String>,
        count: u32,
    }

    #[test]
    fn what_the_new_status_leaves_out_is_cleared() {
        let old = Status {
            items: vec!["a".into()],
            message: Some("m".into()),
            count: 1,
        };
        let new = Status {
            count: 2,
            ..Status::default()
        };
        let patch = merge_patch(Some(&old), &new, &[]).expect("serializable");
        assert_eq!(
            patch,
            serde_json::json!({"items": null, "message": null, "count": 2})
        );
    }

    #[test]
    fn keys_gone_from_a_nested_map_are_cleared() {
        let old = serde_json::json!({"config": {"a": "1", "b": "2"}, "n": 1});
        let new = serde_json::json!({"config": {"a": "1"}, "n": 1});
        let patch = merge_patch(Some(&old), &new, &[]).expect("serializable");
        assert_eq!(
            patch,
            serde_json::json!({"config": {"a": "1", "b": null}, "n": 1})
        );
    }

    #[test]
    fn named_lists_are_always_sent() {
        let patch = merge_patch(None, &Status::default(), &["items"]).expect("serializable");
        assert_eq!(patch, serde_json::json!({"items": [], "count": 0}));
    }
}
