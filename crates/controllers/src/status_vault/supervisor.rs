//! The supervisor: the kind watches follow the policies (resolved through discovery, retried
//! with backoff, only while this replica leads), the policies' status is written where it
//! changed, and the backends are checked so an outage shows even without captures.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use vigil_apis::status_backup_policy::ResourceKind;
use vigil_runtime::Runtime;
use vigil_runtime::backoff::{BackoffPolicy, Backoffs};
use vigil_runtime::events::EventNote;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::ReconcileResult;

use super::NAME;
use super::capture::{self, Capture};
use super::decide::{self, Fingerprint, PolicyInputs};
use super::discovery::resolve;
use super::error::BackendError;
use super::model::BackendRef;

/// How often policies' status and kinds' resolution are looked at without a change.
const TICK: Duration = Duration::from_secs(1);
/// How often backends are checked for health.
const CHECK_INTERVAL: Duration = Duration::from_secs(5);
/// How kind resolution is retried (a CRD installed later is picked up).
const RESOLVE_RETRY: BackoffPolicy = BackoffPolicy {
    base: Duration::from_secs(1),
    max: Duration::from_secs(60),
    jitter: 0.1,
    quarantine_after: u32::MAX,
    quarantine_interval: Duration::from_secs(60),
};

/// A running kind watch.
struct KindWatch {
    handle: tokio::task::JoinHandle<()>,
    /// The policies it was started for: a change restarts it.
    fingerprint: Fingerprint,
}

/// The controller's loop state: the kind watches it runs, and when unresolved kinds are tried
/// again.
pub(super) struct Supervisor {
    runtime: Runtime,
    capture: Arc<Capture>,
    watches: HashMap<ResourceKind, KindWatch>,
    /// When an unresolved kind is tried again.
    retry_at: HashMap<ResourceKind, Instant>,
    backoffs: Backoffs<ResourceKind>,
}

impl Supervisor {
    pub(super) fn new(runtime: Runtime, capture: Arc<Capture>) -> Self {
        Self {
            runtime,
            capture,
            watches: HashMap::new(),
            retry_at: HashMap::new(),
            backoffs: Backoffs::new(RESOLVE_RETRY),
        }
    }

    /// Looks again on every change, leadership change and tick, until `runtime` shuts down
    /// (ready once the policies and namespaces are loaded); returns the kind watches, to be
    /// stopped once the queued captures had their chance.
    pub(super) async fn run(
        mut self,
        changed: Arc<Notify>,
        pending: Gauge<i64>,
    ) -> Vec<JoinHandle<()>> {
        let metrics = self.runtime.metrics().controller(NAME);
        let scope = self.capture.scope.clone();
        let mut reported_ready = false;
        let shutdown = self.runtime.shutdown();
        futures::pin_mut!(shutdown);
        let mut leadership = self.capture.leadership.clone();
        loop {
            tokio::select! {
                () = &mut shutdown => break,
                () = changed.notified() => {}
                _ = leadership.changed() => {}
                () = tokio::time::sleep(TICK) => {}
            }
            let synced = scope.synced();
            if synced && !reported_ready {
                self.runtime.set_ready(NAME, true);
                reported_ready = true;
            }
            if !synced {
                continue;
            }
            let timer = metrics.reconcile_started();
            self.sync_watches().await;
            let ok = self.update_policies().await;
            let queued = self.capture.queue.pending_for_all();
            pending.set(i64::try_from(queued).unwrap_or(i64::MAX));
            timer.finish(if ok {
                ReconcileResult::Success
            } else {
                ReconcileResult::Error
            });
        }
        self.watches.into_values().map(|w| w.handle).collect()
    }

    /// Starts watches for the kinds policies name (resolving them first), stops the others.
    async fn sync_watches(&mut self) {
        let leading = *self.capture.leadership.borrow() == Leadership::Leading;
        let policies = self.capture.scope.policies();
        let wanted = if leading {
            decide::wanted_kinds(&policies)
        } else {
            BTreeSet::new()
        };
        let kinds = &self.capture.kinds;
        let running = self.watches.iter().map(|(k, w)| (k, &w.fingerprint));
        for kind in decide::stale_watches(running, &wanted, &policies) {
            if let Some(watch) = self.watches.remove(&kind) {
                watch.handle.abort();
            }
            if wanted.contains(&kind) {
                kinds.restart(&kind);
            }
        }
        kinds.retain(&wanted);
        for kind in &wanted {
            if self.watches.contains_key(kind) {
                continue;
            }
            if self
                .retry_at
                .get(kind)
                .is_some_and(|at| Instant::now() < *at)
            {
                continue;
            }
            let (resolution, ar) = resolve(self.runtime.client(), kind).await;
            kinds.set_resolution(kind, resolution.clone());
            match ar {
                Some(ar) => {
                    self.backoffs.success(kind);
                    self.retry_at.remove(kind);
                    tracing::info!(group = %kind.group, kind = %kind.kind, resource = %ar.plural, "watching status");
                    let handle =
                        tokio::spawn(capture::watch_kind(self.capture.clone(), kind.clone(), ar));
                    let fingerprint = decide::fingerprint(&policies, kind);
                    self.watches.insert(
                        kind.clone(),
                        KindWatch {
                            handle,
                            fingerprint,
                        },
                    );
                }
                None => {
                    let retry = self.backoffs.failure(kind);
                    self.retry_at
                        .insert(kind.clone(), Instant::now() + retry.delay);
                    tracing::debug!(group = %kind.group, kind = %kind.kind, state = resolution.state(), delay = ?retry.delay, "kind not watched; retrying");
                }
            }
        }
    }

    /// Writes each policy's status where it changed, and Events for new problems. Returns
    /// whether every write succeeded.
    async fn update_policies(&mut self) -> bool {
        if *self.capture.leadership.borrow() != Leadership::Leading {
            return true;
        }
        let scope = &self.capture.scope;
        let policies = scope.policy_objects();
        let views = scope.policies();
        let resolutions = self.capture.kinds.resolutions();
        let labels = |ns: &str| scope.namespace_labels(ns);
        let covered: BTreeMap<String, u32> = views
            .iter()
            .map(|p| {
                let n = self
                    .capture
                    .kinds
                    .count(|kind, o| decide::covers(p, kind, o, &labels));
                (p.name.clone(), u32::try_from(n).unwrap_or(u32::MAX))
            })
            .collect();
        let now = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            k8s_openapi::jiff::Timestamp::now(),
        );
        let mut ok = true;
        for (policy, view) in policies.iter().zip(views.iter()) {
            let backend = scope.backend_of(view);
            let health = self
                .capture
                .backends
                .health_of(&backend, self.capture.queue.pending_for(&backend));
            let plan = decide::policy_status(&PolicyInputs {
                policy: view,
                previous: policy.status.as_ref(),
                resolutions: &resolutions,
                covered: covered.get(&view.name).copied().unwrap_or(0),
                backend: &backend,
                health: &health,
                now: &now,
            });
            // `resources` is sent even when empty (a merge patch leaves out what is absent).
            let written = self
                .runtime
                .write_status_with_lists(
                    policy.as_ref(),
                    policy.status.as_ref(),
                    &plan.status,
                    &["resources"],
                )
                .await;
            if let Err(e) = written {
                tracing::debug!(policy = %view.name, error = %e, "could not write the policy's status; retrying");
                ok = false;
                continue;
            }
            for (reason, message) in &plan.warnings {
                let note = EventNote::warning(reason, message.clone());
                self.runtime.event(policy.as_ref(), &note, "Watch").await;
            }
        }
        ok
    }
}

/// Checks the backends policies name, so an outage (and its end) shows even without captures.
pub(super) async fn check_backends(capture: Arc<Capture>) {
    let scope = &capture.scope;
    loop {
        tokio::time::sleep(CHECK_INTERVAL).await;
        if *capture.leadership.borrow() != Leadership::Leading || !scope.policies_synced() {
            continue;
        }
        let backends: BTreeSet<BackendRef> = scope
            .policies()
            .iter()
            .map(|p| scope.backend_of(p))
            .collect();
        for backend in backends {
            let retention = scope.retention_of(&backend);
            let result = match capture.backends.vault(&backend, retention).await {
                Ok(vault) => vault
                    .check()
                    .await
                    .map_err(|source| BackendError::vault(&backend, source)),
                Err(e) => Err(e),
            };
            match result {
                Ok(()) => capture.backends.succeeded(&backend, false),
                Err(e) => capture.backends.failed(&backend, &e.to_string()),
            }
        }
    }
}
