//! Per-key retry timing: exponential backoff with jitter that resets on success, and quarantine.
//!
//! The shape is client-go's item rate limiter (5 ms doubling up to 1000 s), plus jitter so keys
//! that failed together do not retry together, plus a quarantine: after `quarantine_after`
//! consecutive failures a key is retried only every `quarantine_interval`, and the caller is told
//! once (to set a Degraded condition and emit a Warning Event). A failing key never hot-loops.

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// How retries are timed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct BackoffPolicy {
    /// Delay after the first failure.
    pub base: Duration,
    /// Longest delay outside quarantine.
    pub max: Duration,
    /// Extra random delay, as a fraction of the delay (0.1 = up to +10 %).
    pub jitter: f64,
    /// Consecutive failures after which a key is quarantined.
    pub quarantine_after: u32,
    /// Retry interval of a quarantined key.
    pub quarantine_interval: Duration,
}

impl Default for BackoffPolicy {
    fn default() -> Self {
        Self {
            base: Duration::from_millis(5),
            max: Duration::from_secs(1000),
            jitter: 0.1,
            quarantine_after: 10,
            quarantine_interval: Duration::from_secs(300),
        }
    }
}

/// When to retry a key after a failure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Retry {
    /// Consecutive failures so far, this one included.
    pub attempt: u32,
    /// How long to wait before the retry.
    pub delay: Duration,
    /// The key is quarantined (retried only every `quarantine_interval`).
    pub quarantined: bool,
    /// This failure put it in quarantine: report it (condition, Warning Event) now, once.
    pub newly_quarantined: bool,
}

impl BackoffPolicy {
    /// The delay after `attempt` consecutive failures; `unit` in [0, 1) draws the jitter.
    pub fn delay(&self, attempt: u32, unit: f64) -> Retry {
        let attempt = attempt.max(1);
        let quarantined = attempt >= self.quarantine_after;
        let base = if quarantined {
            self.quarantine_interval
        } else {
            // 2^(attempt-1) without overflow: past 2^31 the cap applies anyway.
            let factor = 1u64
                .checked_shl(attempt.saturating_sub(1).min(31))
                .unwrap_or(u64::MAX);
            let millis = (self.base.as_millis() as u64).saturating_mul(factor);
            Duration::from_millis(millis).min(self.max)
        };
        let jitter = base.mul_f64(self.jitter.max(0.0) * unit.clamp(0.0, 1.0));
        Retry {
            attempt,
            delay: base + jitter,
            quarantined,
            newly_quarantined: attempt == self.quarantine_after,
        }
    }
}

/// Failure counts per key (an object reference, typically).
#[derive(Debug)]
pub struct Backoffs<K> {
    policy: BackoffPolicy,
    failures: Mutex<HashMap<K, u32>>,
}

impl<K: Hash + Eq + Clone> Backoffs<K> {
    /// No key failing yet, retries timed by `policy`.
    pub fn new(policy: BackoffPolicy) -> Self {
        Self {
            policy,
            failures: Mutex::new(HashMap::new()),
        }
    }

    fn counts(&self) -> std::sync::MutexGuard<'_, HashMap<K, u32>> {
        // The map holds plain counters: a panic elsewhere cannot leave it inconsistent.
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records a failure of `key` and says when to retry it.
    pub fn failure(&self, key: &K) -> Retry {
        let attempt = {
            let mut counts = self.counts();
            let n = counts.entry(key.clone()).or_insert(0);
            *n = n.saturating_add(1);
            *n
        };
        self.policy.delay(attempt, rand::random::<f64>())
    }

    /// Records a success: the key's next failure starts from the base delay again. Returns whether
    /// it was quarantined (so the caller can clear its Degraded condition).
    pub fn success(&self, key: &K) -> bool {
        self.counts()
            .remove(key)
            .is_some_and(|n| n >= self.policy.quarantine_after)
    }

    /// Consecutive failures of `key`.
    pub fn failures(&self, key: &K) -> u32 {
        self.counts().get(key).copied().unwrap_or(0)
    }

    /// Number of keys in quarantine now.
    pub fn quarantined(&self) -> usize {
        self.counts()
            .values()
            .filter(|n| **n >= self.policy.quarantine_after)
            .count()
    }

    /// Every key with failures now (to retry them at once when the API server is back).
    pub fn failing(&self) -> Vec<K> {
        self.counts().keys().cloned().collect()
    }

    /// Drops a key that no longer exists.
    pub fn forget(&self, key: &K) {
        self.counts().remove(key);
    }

    /// What every controller's error policy does first: records the failure of `key` (`object`
    /// names it in logs), counts the retry in `metrics`, logs, and says when to retry — and,
    /// once, when this failure quarantines the key, the message for its Degraded condition and
    /// Warning Event.
    pub fn reconcile_failed(
        &self,
        key: &K,
        object: &str,
        error: &dyn std::fmt::Display,
        metrics: &crate::metrics::ControllerMetrics,
    ) -> Failed {
        let retry = self.failure(key);
        metrics.retry();
        let quarantine = retry.newly_quarantined.then(|| {
            tracing::warn!(%object, %error, attempts = retry.attempt, "quarantined: retrying slowly");
            format!(
                "{} consecutive failures, now retrying every {:?}: {error}",
                retry.attempt, retry.delay
            )
        });
        if quarantine.is_none() {
            tracing::debug!(%object, %error, delay = ?retry.delay, "reconcile failed; retrying");
        }
        Failed {
            // Never a zero delay, whatever the policy: a hot loop is what backoff prevents.
            retry_after: retry.delay.max(Duration::from_millis(5)),
            quarantine,
        }
    }

    /// Every controller's error policy: [`Self::reconcile_failed`], then `report` (once, when
    /// this failure quarantines the key) with the message for the Degraded condition and the
    /// Warning Event; returns when to retry.
    pub fn retry_after_failure(
        &self,
        key: &K,
        object: &str,
        error: &dyn std::fmt::Display,
        metrics: &crate::metrics::ControllerMetrics,
        report: impl FnOnce(String),
    ) -> kube::runtime::controller::Action {
        let failed = self.reconcile_failed(key, object, error, metrics);
        if let Some(message) = failed.quarantine {
            report(message);
        }
        kube::runtime::controller::Action::requeue(failed.retry_after)
    }
}

/// A kube-runtime trigger backoff that never delays: for controllers fed by shared watches,
/// which back off on their own (see `crate::watches`); the controller's trigger backoff would
/// stall every watch of the controller when one errs.
pub struct NoTriggerBackoff;

impl Iterator for NoTriggerBackoff {
    type Item = Duration;
    fn next(&mut self) -> Option<Duration> {
        Some(Duration::ZERO)
    }
}

impl kube::runtime::utils::Backoff for NoTriggerBackoff {
    fn reset(&mut self) {}
}

/// What [`Backoffs::reconcile_failed`] decided.
#[derive(Debug, Clone, PartialEq)]
pub struct Failed {
    /// When to reconcile the key again.
    pub retry_after: Duration,
    /// Set once, when this failure quarantined the key: report it (condition, Warning Event).
    pub quarantine: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reconcile_failed_reports_quarantine_once_with_the_error() {
        let backoffs = Backoffs::new(BackoffPolicy {
            jitter: 0.0,
            quarantine_after: 3,
            ..BackoffPolicy::default()
        });
        let metrics = crate::metrics::Metrics::new("test").controller("test");
        let fail = || backoffs.reconcile_failed(&"key", "ns/name", &"boom", &metrics);
        let first = fail();
        assert_eq!(first.retry_after, Duration::from_millis(5));
        assert_eq!(first.quarantine, None);
        assert_eq!(fail().quarantine, None);
        let third = fail();
        assert_eq!(
            third.quarantine.as_deref(),
            Some("3 consecutive failures, now retrying every 300s: boom")
        );
        assert_eq!(third.retry_after, Duration::from_secs(300));
        assert_eq!(fail().quarantine, None, "reported once");
    }

    #[test]
    fn retry_after_failure_reports_quarantine_once() {
        let backoffs = Backoffs::new(BackoffPolicy {
            jitter: 0.0,
            quarantine_after: 2,
            quarantine_interval: Duration::from_secs(7),
            ..BackoffPolicy::default()
        });
        let metrics = crate::metrics::Metrics::new("test").controller("test");
        let mut reports = Vec::new();
        let mut fail = || {
            backoffs.retry_after_failure(&"key", "ns/name", &"boom", &metrics, |m| reports.push(m))
        };
        assert_eq!(
            fail(),
            kube::runtime::controller::Action::requeue(Duration::from_millis(5))
        );
        assert_eq!(
            fail(),
            kube::runtime::controller::Action::requeue(Duration::from_secs(7))
        );
        fail();
        assert_eq!(reports.len(), 1, "reported once: {reports:?}");
    }

    #[test]
    fn doubles_from_five_ms_and_caps() {
        let p = BackoffPolicy {
            jitter: 0.0,
            quarantine_after: u32::MAX,
            ..BackoffPolicy::default()
        };
        let delays: Vec<u128> = (1..=5).map(|a| p.delay(a, 0.0).delay.as_millis()).collect();
        assert_eq!(delays, vec![5, 10, 20, 40, 80]);
        assert_eq!(p.delay(30, 0.0).delay, Duration::from_secs(1000));
        assert_eq!(
            p.delay(u32::MAX - 1, 0.0).delay,
            Duration::from_secs(1000),
            "no overflow"
        );
    }

    #[test]
    fn jitter_only_adds_up_to_its_fraction() {
        let p = BackoffPolicy {
            jitter: 0.5,
            ..BackoffPolicy::default()
        };
        assert_eq!(p.delay(3, 0.0).delay, Duration::from_millis(20));
        assert_eq!(p.delay(3, 0.999_999).delay.as_millis(), 29);
    }

    #[test]
    fn quarantine_after_n_failures_is_reported_once_and_success_resets() {
        let policy = BackoffPolicy {
            quarantine_after: 3,
            quarantine_interval: Duration::from_secs(60),
            ..BackoffPolicy::default()
        };
        let backoffs = Backoffs::new(policy);
        let key = "ns/name".to_owned();
        assert!(!backoffs.failure(&key).quarantined);
        assert!(!backoffs.failure(&key).quarantined);
        let third = backoffs.failure(&key);
        assert!(third.quarantined && third.newly_quarantined);
        assert!(third.delay >= Duration::from_secs(60));
        let fourth = backoffs.failure(&key);
        assert!(
            fourth.quarantined && !fourth.newly_quarantined,
            "reported once"
        );
        assert_eq!(backoffs.quarantined(), 1);
        assert!(backoffs.success(&key), "it was quarantined");
        assert_eq!(backoffs.failures(&key), 0);
        assert_eq!(
            backoffs.failure(&key).attempt,
            1,
            "backoff starts over after a success"
        );
    }
}
