//! `metav1.LabelSelector` objects (`matchLabels` + `matchExpressions`), as workload specs carry
//! them, matched against an object's labels the way `metav1.LabelSelectorAsSelector` does.

use serde_json::{Map, Value};

/// Whether `labels` satisfy `selector`. A missing or empty selector selects nothing, as the
/// workload controllers treat it (they refuse to act on everything in a namespace).
pub fn matches(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> bool {
    let Some(selector) = selector.and_then(Value::as_object) else {
        return false;
    };
    let match_labels = selector.get("matchLabels").and_then(Value::as_object);
    let expressions = selector.get("matchExpressions").and_then(Value::as_array);
    if match_labels.is_none_or(Map::is_empty) && expressions.is_none_or(Vec::is_empty) {
        return false;
    }
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let labels_ok = match_labels
        .into_iter()
        .flatten()
        .all(|(k, v)| label(k) == v.as_str());
    labels_ok
        && expressions.into_iter().flatten().all(|e| {
            let key = e.get("key").and_then(Value::as_str).unwrap_or_default();
            let values: Vec<&str> = e
                .get("values")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            match e.get("operator").and_then(Value::as_str) {
                Some("In") => label(key).is_some_and(|v| values.contains(&v)),
                Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
                Some("Exists") => label(key).is_some(),
                Some("DoesNotExist") => label(key).is_none(),
                // An operator the API server would have rejected: select nothing.
                _ => false,
            }
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn match_labels_and_expressions() {
        let sel = json!({"matchLabels": {"app": "web"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a", "b"]},
                                 {"key": "legacy", "operator": "DoesNotExist"}]});
        assert!(matches(
            Some(&sel),
            Some(&labels(json!({"app": "web", "tier": "a"})))
        ));
        assert!(!matches(
            Some(&sel),
            Some(&labels(json!({"app": "web", "tier": "c"})))
        ));
        assert!(!matches(
            Some(&sel),
            Some(&labels(json!({"app": "web", "tier": "a", "legacy": "1"})))
        ));
        assert!(!matches(Some(&sel), None));
    }

    #[test]
    fn empty_selector_selects_nothing() {
        assert!(!matches(Some(&json!({})), Some(&labels(json!({"a": "b"})))));
        assert!(!matches(None, Some(&labels(json!({"a": "b"})))));
    }
}
