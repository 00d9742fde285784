//! Helpers shared by the conformance tests.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

/// A ConfigMap named `name` with one data entry.
pub fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"key": "value"}
    }))
    .expect("valid ConfigMap")
}
