//! What every controller's reconcile does around its own work: only the leader acts (standbys
//! keep warm caches and write nothing; becoming leader reconciles everything), nothing is
//! decided on half-filled caches, controller-runtime's reconcile metrics are kept, and a success
//! resets the key's backoff (logging a recovery from quarantine).

use std::future::Future;

use kube::Resource;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::watch;

use crate::backoff::Backoffs;
use crate::leader::Leadership;
use crate::metrics::{ControllerMetrics, ReconcileResult};

/// The parts of a controller's context [`guarded`] reads.
pub(crate) struct Guard<'a, K: Resource> {
    /// Where the reconcile is timed and counted.
    pub(crate) metrics: &'a ControllerMetrics,
    /// Whether this replica leads: a standby's reconcile writes nothing.
    pub(crate) leadership: &'a watch::Receiver<Leadership>,
    /// Turns true once the caches the decisions read have synced; `None`: nothing to wait for.
    pub(crate) synced: Option<&'a watch::Receiver<bool>>,
    /// Per-object backoff, reset by a success.
    pub(crate) backoffs: &'a Backoffs<ObjectRef<K>>,
}

/// Runs `work` for `key` under the rules of the module documentation.
pub(crate) async fn guarded<K, E>(
    key: ObjectRef<K>,
    guard: Guard<'_, K>,
    work: impl Future<Output = Result<Action, E>>,
) -> Result<Action, E>
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    let timer = guard.metrics.reconcile_started();
    if *guard.leadership.borrow() != Leadership::Leading {
        timer.finish(ReconcileResult::Success);
        return Ok(Action::await_change());
    }
    if let Some(synced) = guard.synced {
        let mut synced = synced.clone();
        if synced.wait_for(|s| *s).await.is_err() {
            timer.finish(ReconcileResult::Success);
            return Ok(Action::await_change());
        }
    }
    let result = work.await;
    match &result {
        Ok(action) => {
            if guard.backoffs.success(&key) {
                tracing::info!(object = %key, "recovered after quarantine");
            }
            timer.finish(if *action == Action::await_change() {
                ReconcileResult::Success
            } else {
                ReconcileResult::RequeueAfter
            });
        }
        Err(_) => timer.finish(ReconcileResult::Error),
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::BackoffPolicy;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn key() -> ObjectRef<ConfigMap> {
        ObjectRef::new("cm").within("ns")
    }

    #[tokio::test]
    async fn a_standby_does_no_work_and_a_success_resets_the_backoff() {
        let metrics = crate::metrics::Metrics::new("test").controller("test");
        let backoffs = Backoffs::new(BackoffPolicy::default());
        let (_tx, standby) = watch::channel(Leadership::Following);
        let ran = std::cell::Cell::new(false);
        let work = async {
            ran.set(true);
            Ok::<_, ()>(Action::requeue(std::time::Duration::from_secs(1)))
        };
        let guard = Guard {
            metrics: &metrics,
            leadership: &standby,
            synced: None,
            backoffs: &backoffs,
        };
        assert_eq!(
            guarded(key(), guard, work).await,
            Ok(Action::await_change())
        );
        assert!(!ran.get(), "a standby never runs the work");

        let (_tx, leading) = watch::channel(Leadership::Leading);
        backoffs.failure(&key());
        assert_eq!(backoffs.failures(&key()), 1);
        let guard = Guard {
            metrics: &metrics,
            leadership: &leading,
            synced: None,
            backoffs: &backoffs,
        };
        let done = guarded(key(), guard, async { Ok::<_, ()>(Action::await_change()) }).await;
        assert_eq!(done, Ok(Action::await_change()));
        assert_eq!(backoffs.failures(&key()), 0, "reset on success");
    }

    #[tokio::test]
    async fn nothing_is_decided_before_the_caches_sync() {
        let metrics = crate::metrics::Metrics::new("test").controller("test");
        let backoffs = Backoffs::new(BackoffPolicy::default());
        let (_tx, leading) = watch::channel(Leadership::Leading);
        let (synced_tx, synced) = watch::channel(false);
        drop(synced_tx); // never syncs: the caches stopped
        let guard = Guard {
            metrics: &metrics,
            leadership: &leading,
            synced: Some(&synced),
            backoffs: &backoffs,
        };
        let out = guarded(key(), guard, async { Err::<Action, _>("must not run") }).await;
        assert_eq!(out, Ok(Action::await_change()));
    }
}
