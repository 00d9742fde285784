//! Fault injection: make chosen requests fail or slow down, so controllers can be tested against
//! the failures real clusters have. Rules match a verb and a resource; each can fail a number of
//! times, or with a probability (a 429 or 503 may carry `Retry-After`), and/or add latency; a
//! rule on watches can also stall them: open watches and new ones stop sending anything (no
//! events, no bookmarks) without closing, until the rule is cleared — then what was held back
//! flows on, as after a network stall.
//!
//! Latency models a server that is slow for a while and then heals: a request waits out its
//! delay, or less if the rules that slowed it are cleared first. A real API server recovering
//! from overload (requests queued by API Priority and Fairness, writes waiting on a slow etcd)
//! serves what it held as soon as it can, not after a delay fixed when each request arrived.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::sync::watch;

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
    /// With `code`: the `Retry-After` header (and the Status's `details.retryAfterSeconds`)
    /// the failure carries, as kube-apiserver's 429s do.
    #[serde(default)]
    pub retry_after_seconds: Option<u64>,
    /// On `watch` (or `*`): matching watches, open or new, send nothing until the rule goes.
    #[serde(default)]
    pub stall_watches: bool,
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
            retry_after_seconds: None,
            stall_watches: false,
        }
    }

    /// Fails `verb` on `resource` with 429 TooManyRequests and `Retry-After: retry_after`
    /// (whole seconds, at least 1), until cleared.
    pub fn throttled(verb: &str, resource: &str, retry_after: Duration) -> Self {
        Self {
            count: None,
            retry_after_seconds: Some(retry_after.as_secs().max(1)),
            ..Self::fail(verb, resource, 429, 0)
        }
    }

    /// Stalls every watch of `resource` (`*`: all), open or new, until cleared.
    pub fn stall_watches(resource: &str) -> Self {
        Self {
            stall_watches: true,
            ..Self::slow("watch", resource, Duration::ZERO)
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
            retry_after_seconds: None,
            stall_watches: false,
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
#[derive(Debug)]
pub struct Faults {
    rules: Mutex<Vec<Fault>>,
    /// Bumped whenever the rules change, so stalled watches look again.
    changed: watch::Sender<u64>,
}

impl Default for Faults {
    fn default() -> Self {
        Self {
            rules: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }
}

impl Faults {
    pub fn add(&self, fault: Fault) {
        self.lock().push(fault);
        self.changed.send_modify(|n| *n += 1);
    }

    pub fn clear(&self) {
        self.lock().clear();
        self.changed.send_modify(|n| *n += 1);
    }

    /// Whether a rule stalls the watches of `resource`.
    pub fn watches_stalled(&self, resource: &str) -> bool {
        self.lock()
            .iter()
            .any(|r| r.stall_watches && r.matches("watch", resource))
    }

    /// Returns once no rule stalls the watches of `resource` (at once when none does).
    pub async fn wait_while_watches_stalled(&self, resource: &str) {
        let mut changed = self.changed.subscribe();
        while self.watches_stalled(resource) {
            if changed.changed().await.is_err() {
                return;
            }
        }
    }

    /// The latency the rules add to `verb` on `resource` now.
    fn latency(&self, verb: &str, resource: &str) -> Duration {
        self.lock()
            .iter()
            .filter(|r| r.matches(verb, resource))
            .map(|r| Duration::from_millis(r.latency_ms.unwrap_or(0)))
            .sum()
    }

    /// Holds a request for `latency` (what [`Faults::decide`] gave it), or until no rule slows
    /// `verb` on `resource` any more, whichever comes first.
    pub async fn hold(&self, verb: &str, resource: &str, latency: Duration) {
        let mut changed = self.changed.subscribe();
        tokio::select! {
            () = tokio::time::sleep(latency) => {}
            _ = changed.wait_for(|_| self.latency(verb, resource).is_zero()) => {}
        }
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
            let mut error = ApiError::with_code(
                code,
                format!("injected fault: {verb} {resource} fails with {code}"),
            );
            if let Some(seconds) = rule.retry_after_seconds {
                error.details = Some(serde_json::json!({"retryAfterSeconds": seconds}));
            }
            decision.error = Some(error);
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

    #[tokio::test]
    async fn a_slowed_request_is_released_when_its_rule_is_cleared() {
        let faults = std::sync::Arc::new(Faults::default());
        faults.add(Fault::slow("*", "*", Duration::from_secs(30)));
        let latency = faults.decide("get", "pods").latency;
        assert_eq!(latency, Duration::from_secs(30));
        let held = tokio::spawn({
            let faults = faults.clone();
            async move { faults.hold("get", "pods", latency).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!held.is_finished(), "held while the rule stands");
        faults.add(Fault::flaky("*", "*", 503, 0.0));
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(
            !held.is_finished(),
            "another rule changing does not release it"
        );
        faults.clear();
        tokio::time::timeout(Duration::from_secs(5), held)
            .await
            .expect("released when cleared, long before its 30 s")
            .expect("task");
        let started = std::time::Instant::now();
        faults.hold("get", "pods", Duration::from_millis(10)).await;
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "no rule: no wait"
        );
    }

    #[tokio::test]
    async fn a_slowed_request_waits_out_its_delay_while_the_rule_stands() {
        let faults = Faults::default();
        faults.add(Fault::slow("*", "*", Duration::from_millis(50)));
        let started = std::time::Instant::now();
        faults.hold("get", "pods", Duration::from_millis(50)).await;
        assert!(started.elapsed() >= Duration::from_millis(50));
    }

    #[test]
    fn throttling_carries_retry_after() {
        let faults = Faults::default();
        faults.add(Fault::throttled("list", "*", Duration::from_millis(1_500)));
        let error = faults.decide("list", "pods").error.expect("throttled");
        assert_eq!(error.code, 429);
        assert_eq!(error.reason, "TooManyRequests");
        assert_eq!(
            error.details,
            Some(serde_json::json!({"retryAfterSeconds": 1}))
        );
        assert!(
            faults.decide("list", "pods").error.is_some(),
            "until cleared"
        );
        assert!(faults.decide("get", "pods").error.is_none());
    }

    #[tokio::test]
    async fn stalled_watches_wait_until_the_rule_goes() {
        let faults = std::sync::Arc::new(Faults::default());
        faults.add(Fault::stall_watches("configmaps"));
        assert!(faults.watches_stalled("configmaps"));
        assert!(!faults.watches_stalled("pods"));
        faults.wait_while_watches_stalled("pods").await;
        let d = faults.decide("watch", "configmaps");
        assert!(d.error.is_none() && d.latency.is_zero(), "the watch starts");
        assert_eq!(faults.list().len(), 1, "a stall rule stays until cleared");
        let waiting = tokio::spawn({
            let faults = faults.clone();
            async move { faults.wait_while_watches_stalled("configmaps").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "held while the rule stands");
        faults.clear();
        tokio::time::timeout(Duration::from_secs(5), waiting)
            .await
            .expect("released when cleared")
            .expect("task");
    }
}
