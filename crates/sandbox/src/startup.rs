//! What a kube-apiserver answers in the seconds after it starts again, so that clients meet it
//! on the sandbox too.
//!
//! Seen on kube-apiserver 1.28 killed and started again by `../shared/kube/fault.sh` (4 runs,
//! SIGKILL and SIGTERM alike), from the moment it serves TLS:
//! - watches resumed from a resourceVersion of before the restart are accepted (200), then get
//!   one `ERROR` event, 410 Expired, `too old resource version: 372 (383)` (7 of 7 runs): its
//!   watch cache starts afresh at etcd's current revision, which its own writes at start (its
//!   identity Lease among them) have moved on. The sandbox does the same (`restart`): it
//!   renews its identity Lease in `kube-system`, then restarts its event window there;
//! - custom resources answer 503 ServiceUnavailable, `the request has been made before all known
//!   HTTP paths have been installed, please try again`, with `Retry-After: 5` and
//!   `details.retryAfterSeconds: 5`, for about 0.4 s; built-in kinds are served at once;
//! - `/readyz`, `/livez` and `/healthz` answer 500, listing the post-start hooks not done yet
//!   (`[-]poststarthook/rbac/bootstrap-roles failed: reason withheld`, then `readyz check
//!   failed`), for 1.0–1.3 s; then `ok`;
//! - `/version` answers 200 throughout.
//!
//! Only a restart ([`crate::Sandbox::restart`], [`crate::Sandbox::resume_serving`], the admin
//! endpoint's `restart`) goes through this phase: a sandbox's first start is awaited by
//! [`crate::Sandbox::start`], as a test waits for `/readyz` on a fresh cluster.

use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use serde_json::json;
use tokio::time::Instant;

use crate::patch::PatchType;
use crate::registry::ops::{self, Target, WriteOptions};
use crate::registry::store::Store;

/// The identity Lease a kube-apiserver keeps in `kube-system` (1.28 names it after a hash of its
/// host name, so a restart renews the same one).
const IDENTITY_LEASE: &str = "apiserver-vigil-sandbox";

/// What the store goes through when the listener comes back: the server's own writes at start,
/// then its watch cache starting afresh at the current revision, so that a watch resumed from
/// before gets 410 Expired.
pub(crate) fn restart(store: &Store) {
    store.write(|state| {
        let Some(info) = state.registry.get("coordination.k8s.io", "v1", "leases") else {
            return;
        };
        let now = chrono::Utc::now().format("%Y-%m-%dT%H:%M:%S%.6fZ").to_string();
        let lease = json!({
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": IDENTITY_LEASE, "namespace": "kube-system",
                "labels": {"apiserver.kubernetes.io/identity": "kube-apiserver"}},
            "spec": {"holderIdentity": IDENTITY_LEASE, "leaseDurationSeconds": 3600, "renewTime": now},
        });
        let opts = WriteOptions {
            field_manager: "vigil-sandbox".into(),
            ..WriteOptions::default()
        };
        let written = ops::patch(
            state,
            &info,
            "kube-system",
            IDENTITY_LEASE,
            PatchType::Apply { force: true },
            lease,
            &opts,
            Target::Main,
        );
        if let Err(e) = written {
            tracing::warn!(error = %e.message, "cannot renew the sandbox's identity Lease");
        }
        state.compact(0);
    });
}

/// How long each part of a restart's start-up lasts (see the module's documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartUpTiming {
    /// How long custom resources answer 503 after the listener is back.
    pub custom_resources: Duration,
    /// How long the health endpoints fail after the listener is back.
    pub health: Duration,
}

impl Default for StartUpTiming {
    /// kube-apiserver 1.28's figures on this machine: 0.4 s and 1.3 s.
    fn default() -> Self {
        Self {
            custom_resources: Duration::from_millis(400),
            health: Duration::from_millis(1300),
        }
    }
}

impl StartUpTiming {
    /// No start-up phase: a restarted sandbox serves everything at once.
    pub fn instant() -> Self {
        Self {
            custom_resources: Duration::ZERO,
            health: Duration::ZERO,
        }
    }
}

/// The post-start hooks a starting kube-apiserver lists as failing, in its order.
const PENDING_HOOKS: &[&str] = &[
    "poststarthook/start-apiextensions-controllers",
    "poststarthook/crd-informer-synced",
    "poststarthook/start-service-ip-repair-controllers",
    "poststarthook/rbac/bootstrap-roles",
    "poststarthook/scheduling/bootstrap-system-priority-classes",
    "poststarthook/priority-and-fairness-config-producer",
    "poststarthook/bootstrap-controller",
    "poststarthook/apiservice-registration-controller",
    "autoregister-completion",
];

/// The message of the 503 a starting kube-apiserver gives custom resources.
pub const PATHS_NOT_INSTALLED: &str =
    "the request has been made before all known HTTP paths have been installed, please try again";

/// The `Retry-After` (seconds) that 503 carries.
pub const PATHS_RETRY_AFTER: u32 = 5;

/// When the listener last came back, and how long its start-up lasts.
#[derive(Debug)]
pub struct StartUp {
    timing: StartUpTiming,
    since: Mutex<Option<Instant>>,
}

impl StartUp {
    /// A server that has not restarted yet: everything is served.
    pub fn new(timing: StartUpTiming) -> Self {
        Self {
            timing,
            since: Mutex::new(None),
        }
    }

    /// The listener is back: the start-up phase begins now.
    pub fn restarted(&self) {
        self.restarted_at(Instant::now());
    }

    /// The start-up phase began at `since` (a test's way to be some time into it).
    fn restarted_at(&self, since: Instant) {
        *self.since.lock().unwrap_or_else(PoisonError::into_inner) = Some(since);
    }

    fn elapsed(&self) -> Option<Duration> {
        self.since
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|since| since.elapsed())
    }

    /// Whether custom resources are still refused with [`PATHS_NOT_INSTALLED`].
    pub fn custom_resources_pending(&self) -> bool {
        self.elapsed()
            .is_some_and(|e| e < self.timing.custom_resources)
    }

    /// The health checks still failing, in the order kube-apiserver lists them (empty: healthy).
    /// They complete one after another over [`StartUpTiming::health`], the bootstrap roles last.
    pub fn failing_checks(&self) -> &'static [&'static str] {
        let Some(elapsed) = self.elapsed() else {
            return &[];
        };
        if elapsed >= self.timing.health {
            return &[];
        }
        let done = elapsed.as_secs_f64() / self.timing.health.as_secs_f64();
        // Whole hooks done so far (the fraction is below 1, so at least the last one remains).
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let finished = ((done * PENDING_HOOKS.len() as f64) as usize).min(PENDING_HOOKS.len() - 1);
        // Completed hooks are those before rbac's in kube-apiserver's list, then the rest.
        let rbac = 3;
        if finished < rbac {
            &PENDING_HOOKS[finished..]
        } else {
            &PENDING_HOOKS[rbac..rbac + 1]
        }
    }

    /// The body of a failing `/readyz` (or `/livez`, `/healthz`): `check` is the endpoint's name.
    pub fn failing_body(&self, endpoint: &str) -> Option<String> {
        let failing = self.failing_checks();
        if failing.is_empty() {
            return None;
        }
        let mut body = String::from("[+]ping ok\n[+]log ok\n[+]etcd ok\n");
        for check in failing {
            body.push_str(&format!("[-]{check} failed: reason withheld\n"));
        }
        body.push_str(&format!("{endpoint} check failed\n"));
        Some(body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Restarted `ago` before now (real time: a test runs well within the phases' margins).
    fn into_start_up(startup: &StartUp, ago: Duration) {
        let now = Instant::now();
        startup.restarted_at(now.checked_sub(ago).unwrap_or(now));
    }

    #[test]
    fn a_restart_refuses_custom_resources_then_fails_health_then_serves() {
        let startup = StartUp::new(StartUpTiming::default());
        assert!(!startup.custom_resources_pending(), "never restarted");
        assert!(startup.failing_body("readyz").is_none());

        startup.restarted();
        assert!(startup.custom_resources_pending());
        let body = startup.failing_body("readyz").expect("failing");
        assert!(body.contains("[-]poststarthook/rbac/bootstrap-roles failed: reason withheld"));
        assert!(body.ends_with("readyz check failed\n"), "{body}");

        into_start_up(&startup, Duration::from_millis(550));
        assert!(!startup.custom_resources_pending(), "paths installed");
        assert!(
            startup.failing_body("livez").is_some(),
            "hooks still running"
        );

        into_start_up(&startup, Duration::from_millis(1150));
        assert_eq!(
            startup.failing_checks(),
            &["poststarthook/rbac/bootstrap-roles"],
            "the bootstrap roles finish last"
        );
        into_start_up(&startup, Duration::from_millis(1450));
        assert!(startup.failing_body("readyz").is_none(), "ready");
    }

    #[test]
    fn an_instant_timing_has_no_start_up() {
        let startup = StartUp::new(StartUpTiming::instant());
        startup.restarted();
        assert!(!startup.custom_resources_pending());
        assert!(startup.failing_body("readyz").is_none());
    }
}
