//! Fault injection: make chosen requests fail or slow down, so controllers can be tested against
//! the failures real clusters have. Rules match a verb and a resource; each can fail a number of
//! times, or with a probability, and/or add latency.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ApiError;

/// One fault rule.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Fault {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, `deletecollection`, or `*`.
    #[serde(default = "any")]
    pub verb: String,
    /// Plural resource name (`configmaps`, `pods/status`), or `*`.
    #[serde(default = "any")]
    pub resource: String,
    /// HTTP status to answer with; None injects latency only.
    #[serde(default)]
    pub code: Option<u16>,
    /// How many matching requests fail; None = every one (until cleared).
    #[serde(default)]
    pub count: Option<u64>,
    /// Chance (0..=1) that a matching request fails; None = always.
    #[serde(default)]
    pub probability: Option<f64>,
    /// Delay added to every matching request, in milliseconds.
    #[serde(default)]
    pub latency_ms: Option<u64>,
}

fn any() -> String {
    "*".to_owned()
}

impl Fault {
    /// Fails `verb` on `resource` with `code`, `count` times.
    pub fn fail(verb: &str, resource: &str, code: u16, count: u64) -> Self {
        Self {
            verb: verb.into(),
            resource: resource.into(),
            code: Some(code),
            count: Some(count),
            probability: None,
            latency_ms: None,
        }
    }

    /// Fails `verb` on `resource` with `code` with the given probability, until cleared.
    pub fn flaky(verb: &str, resource: &str, code: u16, probability: f64) -> Self {
        Self {
            probability: Some(probability),
            count: None,
            ..Self::fail(verb, resource, code, 0)
        }
    }

    /// Adds latency to `verb` on `resource`.
    pub fn slow(verb: &str, resource: &str, latency: Duration) -> Self {
        Self {
            verb: verb.into(),
            resource: resource.into(),
            code: None,
            count: None,
            probability: None,
            latency_ms: Some(u64::try_from(latency.as_millis()).unwrap_or(u64::MAX)),
        }
    }

    fn matches(&self, verb: &str, resource: &str) -> bool {
        (self.verb == "*" || self.verb == verb)
            && (self.resource == "*" || self.resource == resource)
    }
}

/// What the active rules decide for one request.
#[derive(Debug, Default)]
pub struct Decision {
    pub latency: Duration,
    pub error: Option<ApiError>,
}

/// The active rules.
#[derive(Debug, Default)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
}

impl Faults {
    pub fn add(&self, fault: Fault) {
        self.lock().push(fault);
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    pub fn list(&self) -> Vec<Fault> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Fault>> {
        self.rules.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies the rules to a request: sums latency, picks the first error that fires, and
    /// consumes one use of a counted rule.
    pub fn decide(&self, verb: &str, resource: &str) -> Decision {
        let mut rules = self.lock();
        if rules.is_empty() {
            return Decision::default();
        }
        let mut decision = Decision::default();
        for rule in rules.iter_mut().filter(|r| r.matches(verb, resource)) {
            decision.latency += Duration::from_millis(rule.latency_ms.unwrap_or(0));
            let Some(code) = rule.code else { continue };
            if decision.error.is_some() || rule.count == Some(0) {
                continue;
            }
            if rule.probability.is_some_and(|p| rand::random::<f64>() >= p) {
                continue;
            }
            if let Some(n) = rule.count.as_mut() {
                *n -= 1;
            }
            decision.error = Some(ApiError::with_code(
                code,
                format!("injected fault: {verb} {resource} fails with {code}"),
            ));
        }
        rules.retain(|r| r.count != Some(0) || r.latency_ms.is_some());
        decision
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_faults_fire_then_expire() {
        let faults = Faults::default();
        faults.add(Fault::fail("create", "configmaps", 500, 2));
        assert_eq!(
            faults.decide("create", "configmaps").error.map(|e| e.code),
            Some(500)
        );
        assert!(faults.decide("get", "configmaps").error.is_none());
        assert!(faults.decide("create", "secrets").error.is_none());
        assert!(faults.decide("create", "configmaps").error.is_some());
        assert!(faults.decide("create", "configmaps").error.is_none());
        assert!(faults.list().is_empty());
    }

    #[test]
    fn wildcards_probability_and_latency() {
        let faults = Faults::default();
        faults.add(Fault::flaky("*", "*", 503, 0.0));
        faults.add(Fault::slow("get", "*", Duration::from_millis(30)));
        let d = faults.decide("get", "pods");
        assert!(d.error.is_none(), "probability 0 never fires");
        assert_eq!(d.latency, Duration::from_millis(30));
        faults.clear();
        faults.add(Fault::flaky("*", "*", 503, 1.0));
        assert_eq!(
            faults.decide("list", "pods").error.map(|e| e.code),
            Some(503)
        );
        let parsed: Fault =
            serde_json::from_str(r#"{"verb":"patch","code":409,"count":1}"#).expect("json");
        assert_eq!(parsed.resource, "*");
    }
}
