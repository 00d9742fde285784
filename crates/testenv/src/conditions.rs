//! Reading and awaiting the standard `status.conditions` of any object (Vigil's custom resources
//! and built-in kinds alike), so each test does not write its own poll loop per kind.
//!
//! Conditions are read from the object's JSON form, so one helper serves every type whatever
//! its Rust status struct looks like.

use std::fmt::Debug;
use std::time::Duration;

use kube::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::wait::{WaitError, wait_for};

/// One entry of `status.conditions`, the fields tests compare.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ConditionView {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// The condition `type_` of `object`'s `status.conditions`, if it has one.
pub fn condition(object: &impl Serialize, type_: &str) -> Option<ConditionView> {
    let json = serde_json::to_value(object).ok()?;
    let found = json
        .pointer("/status/conditions")?
        .as_array()?
        .iter()
        .find(|c| c.get("type").and_then(Value::as_str) == Some(type_))?;
    let text = |field: &str| {
        found
            .get(field)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Some(ConditionView {
        status: text("status"),
        reason: text("reason"),
        message: text("message"),
    })
}

/// Whether `object` has the condition `type_` with `status` (`"True"`, `"False"`, `"Unknown"`).
pub fn has_condition(object: &impl Serialize, type_: &str, status: &str) -> bool {
    condition(object, type_).is_some_and(|c| c.status == status)
}

/// Waits until the object `name` of `api` has the condition `type_` with `status`, and returns
/// that condition; the failure message shows the conditions last seen.
pub async fn wait_condition<K>(
    api: &Api<K>,
    name: &str,
    type_: &str,
    status: &str,
    timeout: Duration,
) -> Result<ConditionView, WaitError>
where
    K: Clone + Debug + DeserializeOwned + Serialize,
{
    wait_for(
        &format!("{name} to have {type_}={status}"),
        timeout,
        || async {
            let object = api.get(name).await.map_err(|e| e.to_string())?;
            match condition(&object, type_) {
                Some(c) if c.status == status => Ok(Some(c)),
                other => Err(format!("{type_}: {other:?}")),
            }
        },
    )
    .await
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn finds_a_condition_by_type() {
        let object = json!({"status": {"conditions": [
            {"type": "Ready", "status": "False", "reason": "Waiting", "message": "not yet"},
            {"type": "Degraded", "status": "True"},
        ]}});
        assert_eq!(
            condition(&object, "Ready"),
            Some(ConditionView {
                status: "False".into(),
                reason: "Waiting".into(),
                message: "not yet".into(),
            })
        );
        assert!(has_condition(&object, "Degraded", "True"));
        assert!(!has_condition(&object, "Ready", "True"));
        assert_eq!(condition(&object, "Stalled"), None);
        assert_eq!(condition(&json!({"status": {}}), "Ready"), None);
    }
}
