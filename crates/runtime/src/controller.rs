//! The controller builder: a kube-runtime `Controller` with everything every Vigil controller
//! wires around its reconcile, wired once.
//!
//! ```text
//! shared watch ─▶ lean cache (store) ─▶ trigger ─▶ queue ─▶ guarded reconcile ─▶ Ok / error policy
//!                                        ▲                     │ leader only, caches synced,
//!   secondary watches ─ mapper ──────────┤                     │ metrics, backoff reset
//!   owned objects ─ owner reference ─────┤                     ▼
//!   becoming leader ─ every object ──────┤      failures: per-object backoff with jitter;
//!   API server back ─ failed objects ────┘      quarantine ─▶ Degraded condition + Warning Event
//! ```
//!
//! - **triggers**: the primary stream, [`ControllerBuilder::watches`] (a mapper from another
//!   kind to the objects it concerns), [`ControllerBuilder::owns`] (owner references),
//!   [`ControllerBuilder::triggers`] (object references from anywhere: a poll of an outside
//!   system), every object when this replica's leadership changes (after the hooks given to
//!   [`ControllerBuilder::on_leadership`]), and the objects whose reconciles failed when the
//!   API server answers again after an outage (see `reachability`, inside the crate);
//! - **work-queue metrics** (`workqueue_*`, controller-runtime's names) for every trigger;
//! - **the guarded reconcile** (`reconcile_guard`, inside the crate): only the leader acts, nothing is decided
//!   before every cache given to the builder has synced (they also make the
//!   controller ready on `/readyz`), reconcile metrics, backoff reset on success;
//! - **the error policy**: per-object exponential backoff; after ten failures in a row the
//!   object is quarantined (retried every five minutes; [`ControllerBuilder::backoff`] sets
//!   other timings and threshold), counted in
//!   `<prefix>_quarantined_objects`, and reported once: a Warning Event `ReconcileFailing` and,
//!   with [`ControllerBuilder::quarantine_condition`], a `Degraded=True` condition.
//!
//! Shared watches back off on their own, so the controller's own trigger back-off is off.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};

use futures::{Stream, StreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::runtime::controller::{Action, Config, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt as _};
use tokio::sync::watch;

use crate::backoff::{BackoffPolicy, Backoffs, NoTriggerBackoff};
use crate::cache::{Cache, Cached, Source, Synced};
use crate::conditions;
use crate::events::EventNote;
use crate::leader::Leadership;
use crate::manager::Runtime;
use crate::metrics::ControllerMetrics;
use crate::queue::QueueTracker;
use crate::reconcile_guard::{Guard, guarded};

/// Reconciles running at once unless [`ControllerBuilder::concurrency`] says otherwise.
pub const DEFAULT_CONCURRENCY: u16 = 16;

/// Reads an object's status conditions, for the quarantine's `Degraded` condition.
pub type ConditionsOf<K> = for<'a> fn(&'a K) -> &'a [Condition];

/// Told of each change of leadership, before every object is reconciled for it.
type LeadershipHook = Box<dyn Fn(Leadership) + Send + Sync>;

/// A controller of `K` being wired; [`Self::run`] runs it.
pub struct ControllerBuilder<K>
where
    K: Resource<DynamicType = ()> + Clone + std::fmt::Debug + Send + Sync + 'static,
{
    name: String,
    runtime: Runtime,
    controller: Controller<K>,
    queue: QueueTracker<K>,
    metrics: ControllerMetrics,
    backoffs: Arc<Backoffs<ObjectRef<K>>>,
    readiness: Vec<Synced>,
    concurrency: u16,
    conditions: Option<ConditionsOf<K>>,
    field_manager: String,
    event_action: String,
    leadership_hooks: Vec<LeadershipHook>,
    filter: Arc<Mutex<TriggerFilter<K>>>,
}

/// What of an object must change for a change to it to trigger a reconcile: a hash of it, or
/// `None` for "always".
pub type Predicate<K> = fn(&K) -> Option<u64>;

/// The primary trigger's filter (see [`ControllerBuilder::trigger_on`]).
struct TriggerFilter<K: Resource<DynamicType = ()>> {
    predicate: Option<Predicate<K>>,
    seen: HashMap<ObjectRef<K>, u64>,
}

impl<K: Resource<DynamicType = ()>> Default for TriggerFilter<K> {
    fn default() -> Self {
        Self {
            predicate: None,
            seen: HashMap::new(),
        }
    }
}

impl<K: Resource<DynamicType = ()>> TriggerFilter<K> {
    /// Whether a change to `obj` triggers: the first sight of it does, then only a change of
    /// its predicate's value.
    fn passes(&mut self, obj: &K) -> bool {
        let Some(value) = self.predicate.and_then(|predicate| predicate(obj)) else {
            return true;
        };
        self.seen.insert(ObjectRef::from_obj(obj), value) != Some(value)
    }
}

impl Runtime {
    /// A controller of the objects in `cache`, named after this handle's controller (metrics,
    /// logs, `/readyz`, field manager: see [`Runtime::scoped`]), triggered by each change to
    /// them, and by every object it holds when it starts.
    pub fn controller<K: Cached>(&self, cache: &Cache<K>) -> ControllerBuilder<K> {
        let name = self.name();
        let metrics = self.metrics().controller(name);
        let queue = QueueTracker::new(metrics.clone());
        let filter = Arc::new(Mutex::new(TriggerFilter::default()));
        let stream = cache
            .subscribe_from_start()
            .filter({
                let filter = filter.clone();
                move |obj| {
                    let passes = filter
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .passes(obj);
                    futures::future::ready(passes)
                }
            })
            .map({
                let queue = queue.clone();
                move |obj| {
                    queue.added(ObjectRef::from_obj(&obj));
                    Ok(obj)
                }
            });
        ControllerBuilder {
            name: name.to_owned(),
            runtime: self.clone(),
            controller: Controller::for_stream(stream, cache.store().clone())
                .trigger_backoff(NoTriggerBackoff),
            filter,
            queue,
            metrics,
            backoffs: Arc::new(Backoffs::new(BackoffPolicy::default())),
            readiness: vec![cache.synced()],
            concurrency: DEFAULT_CONCURRENCY,
            conditions: None,
            field_manager: self.field_manager(),
            event_action: "Reconcile".to_owned(),
            leadership_hooks: Vec::new(),
        }
    }
}

impl<K: Cached> ControllerBuilder<K> {
    /// Reconciles a changed object only when `predicate`'s value for it changed (as
    /// kube-runtime's `predicate_filter`): e.g. not for the controller's own status writes,
    /// when a requeue paces its passes. Other triggers are not filtered.
    pub fn trigger_on(self, predicate: Predicate<K>) -> Self {
        self.filter
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .predicate = Some(predicate);
        self
    }

    /// Reconciles running at once (default [`DEFAULT_CONCURRENCY`]).
    pub fn concurrency(mut self, concurrency: u16) -> Self {
        self.concurrency = concurrency;
        self
    }

    /// Reconciles the objects `mapper` names for each object `cache` touches, and decides
    /// nothing before `cache` has synced.
    pub fn watches<Other, I>(
        mut self,
        cache: &impl Source<Other>,
        mapper: impl Fn(Other) -> I + Send + Sync + 'static,
    ) -> Self
    where
        Other: Clone + Resource + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
        Other::DynamicType: Default + std::fmt::Debug + Clone,
        I: IntoIterator<Item = ObjectRef<K>> + 'static,
    {
        self.readiness.push(cache.synced());
        let queue = self.queue.clone();
        let stream = cache.subscribe().map(Ok);
        self.controller = self.controller.watches_stream(stream, move |other| {
            queue.added_all(mapper(other).into_iter().collect())
        });
        self
    }

    /// Reconciles the owner (of kind `K`, by owner reference) of each object `cache` touches.
    pub fn owns<Child>(self, cache: &impl Source<Child>) -> Self
    where
        Child: Clone + Resource + serde::de::DeserializeOwned + std::fmt::Debug + Send + 'static,
        Child::DynamicType: Default + std::fmt::Debug + Clone,
    {
        self.watches(cache, |child: Child| {
            let namespace = child.namespace();
            child
                .owner_references()
                .iter()
                .filter_map(|owner| ObjectRef::from_owner_ref(namespace.as_deref(), owner, ()))
                .collect::<Vec<_>>()
        })
    }

    /// Decides nothing before `cache` has synced, without triggers from it: a cache the
    /// reconcile only reads.
    pub fn reads<Other>(mut self, cache: &impl Source<Other>) -> Self {
        self.readiness.push(cache.synced());
        self
    }

    /// Also reconciles each object `stream` names: changes the API server does not see, such
    /// as a poll of an outside system finding an object's counterpart changed there.
    pub fn triggers(mut self, stream: impl Stream<Item = ObjectRef<K>> + Send + 'static) -> Self {
        let queue = self.queue.clone();
        self.controller = self
            .controller
            .reconcile_on(stream.inspect(move |key| queue.added(key.clone())));
        self
    }

    /// Times retries and the quarantine by `policy` instead of [`BackoffPolicy::default`]
    /// (for a controller whose failures are another system's outages, say).
    pub fn backoff(mut self, policy: BackoffPolicy) -> Self {
        self.backoffs = Arc::new(Backoffs::new(policy));
        self
    }

    /// Calls `hook` with the new leadership each time it changes, before every object is
    /// reconciled for the change: to drop what the controller remembers of its own past work
    /// (another replica may have acted meanwhile). Call once per hook.
    pub fn on_leadership(mut self, hook: impl Fn(Leadership) + Send + Sync + 'static) -> Self {
        self.leadership_hooks.push(Box::new(hook));
        self
    }

    /// Where a quarantined object's conditions are: the quarantine then also sets
    /// `Degraded=True` (reason `ReconcileFailing`) in its status.
    pub fn quarantine_condition(mut self, conditions: ConditionsOf<K>) -> Self {
        self.conditions = Some(conditions);
        self
    }

    /// Field manager of the quarantine's status write (default [`Runtime::field_manager`]).
    pub fn field_manager(mut self, field_manager: &str) -> Self {
        self.field_manager = field_manager.to_owned();
        self
    }

    /// The `action` of the quarantine's Warning Event (default `Reconcile`).
    pub fn event_action(mut self, action: &str) -> Self {
        self.event_action = action.to_owned();
        self
    }

    /// Runs the controller until the runtime shuts down: `reconcile(object, context)` for every
    /// trigger, as the module documentation describes.
    pub async fn run<C, E, F, Fut>(self, reconcile: F, context: Arc<C>)
    where
        C: Send + Sync + 'static,
        E: std::error::Error + Send + Sync + 'static,
        F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
    {
        let (synced_tx, synced) = watch::channel(false);
        // Every cache synced, once: what reconciles and `/readyz` wait for. Until then `/readyz`
        // says what blocks a cache, when something known does (its kind not served).
        let runtime = self.runtime.clone();
        let name = self.name.clone();
        let caches = self.readiness;
        tokio::spawn(async move {
            let ok = track_readiness(caches, |ready, reason| match reason {
                Some(reason) => runtime.set_not_ready(&name, &reason),
                None => runtime.set_ready(&name, ready),
            })
            .await;
            let _ = synced_tx.send(ok);
        });

        let hooks = self.leadership_hooks;
        let on_leadership = futures::stream::unfold(self.runtime.leadership(), |mut rx| async {
            rx.changed().await.ok()?;
            let now = *rx.borrow_and_update();
            Some((now, rx))
        })
        .map(move |now| {
            for hook in &hooks {
                hook(now);
            }
        });
        let backoffs = self.backoffs.clone();
        let on_recovery = futures::stream::unfold(
            self.runtime.watches().reachability().subscribe(),
            |mut rx| async {
                rx.changed().await.ok()?;
                Some(((), rx))
            },
        )
        .flat_map(move |()| futures::stream::iter(backoffs.failing()));

        let inner = Arc::new(Inner {
            object: format!("{}/", self.name),
            reconcile,
            context,
            queue: self.queue,
            metrics: self.metrics,
            backoffs: self.backoffs,
            leadership: self.runtime.leadership(),
            synced,
            conditions: self.conditions,
            field_manager: self.field_manager,
            event_action: self.event_action,
            runtime: self.runtime.clone(),
        });
        self.controller
            .with_config(Config::default().concurrency(self.concurrency))
            .reconcile_all_on(on_leadership)
            .reconcile_on(on_recovery)
            .graceful_shutdown_on(self.runtime.shutdown())
            .run(guarded_reconcile, error_policy, inner)
            .for_each(|_| futures::future::ready(()))
            .await;
    }
}

/// Waits until every cache has synced (true) or one stopped first (false), reporting as it
/// goes: `report(false, reason)` each time what blocks a cache changes (a kind not served),
/// then `report(ok, None)` at the end. Each change is reported once.
async fn track_readiness(mut caches: Vec<Synced>, report: impl Fn(bool, Option<String>)) -> bool {
    let readiness = futures::future::join_all(
        caches
            .iter()
            .cloned()
            .map(|s| async move { s.wait().await }),
    );
    let mut readiness = std::pin::pin!(readiness);
    let ok = loop {
        // Read (and mark seen) what blocks each cache, then wait for the next change: a
        // change not marked seen would wake the wait at once, for ever.
        let blocked = caches
            .iter_mut()
            .map(Synced::blocked_now)
            .collect::<Vec<_>>()
            .into_iter()
            .flatten()
            .next();
        report(false, blocked);
        let changed = async {
            if caches.is_empty() {
                return std::future::pending().await;
            }
            let changes = caches.iter_mut().map(|s| Box::pin(s.blocked_changed()));
            // A stopped cache changes nothing more: only the readiness can end then.
            match futures::future::select_all(changes).await {
                (true, _, _) => {}
                (false, _, _) => std::future::pending().await,
            }
        };
        tokio::select! {
            done = &mut readiness => break done.into_iter().all(|ok| ok),
            () = changed => {}
        }
    };
    report(ok, None);
    ok
}

/// What the wrapped reconcile and the error policy share.
struct Inner<K: Resource, C, F> {
    /// `<controller>/`, the prefix of objects in logs.
    object: String,
    reconcile: F,
    context: Arc<C>,
    queue: QueueTracker<K>,
    metrics: ControllerMetrics,
    backoffs: Arc<Backoffs<ObjectRef<K>>>,
    leadership: watch::Receiver<Leadership>,
    synced: watch::Receiver<bool>,
    conditions: Option<ConditionsOf<K>>,
    field_manager: String,
    event_action: String,
    runtime: Runtime,
}

// Not an `async fn`: the explicit `Send + 'static` is what kube-runtime requires of it.
#[allow(clippy::manual_async_fn)]
fn guarded_reconcile<K, C, E, F, Fut>(
    obj: Arc<K>,
    inner: Arc<Inner<K, C, F>>,
) -> impl Future<Output = Result<Action, E>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: Send + 'static,
    F: Fn(Arc<K>, Arc<C>) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<Action, E>> + Send + 'static,
{
    async move {
        let key = ObjectRef::from_obj(obj.as_ref());
        inner.queue.started(&key);
        // A shutdown before the caches synced stops feeding them: a reconcile waiting for them
        // would then hold the graceful shutdown forever.
        let mut synced = inner.synced.clone();
        tokio::select! {
            _ = synced.wait_for(|s| *s) => {}
            () = inner.runtime.shutdown() => return Ok(Action::await_change()),
        }
        let guard = Guard {
            metrics: &inner.metrics,
            leadership: &inner.leadership,
            synced: Some(&inner.synced),
            backoffs: &inner.backoffs,
        };
        let work = (inner.reconcile)(obj, inner.context.clone());
        let result = guarded(key, guard, work).await;
        inner.metrics.set_quarantined(inner.backoffs.quarantined());
        result
    }
}

fn error_policy<K, C, E, F>(obj: Arc<K>, error: &E, inner: Arc<Inner<K, C, F>>) -> Action
where
    K: Resource<DynamicType = ()> + Send + Sync + 'static,
    C: Send + Sync + 'static,
    E: std::error::Error,
    F: Send + Sync + 'static,
{
    let key = ObjectRef::from_obj(obj.as_ref());
    let object = format!(
        "{}{}{}",
        inner.object,
        obj.namespace().map(|ns| ns + "/").unwrap_or_default(),
        obj.name_any()
    );
    // The causes too: an error such as "API request failed" keeps the API's answer as its source.
    let error = with_causes(error);
    let action =
        inner
            .backoffs
            .retry_after_failure(&key, &object, &error, &inner.metrics, |message| {
                tokio::spawn(report_quarantine(obj.clone(), inner.clone(), message));
            });
    inner.metrics.set_quarantined(inner.backoffs.quarantined());
    action
}

/// `error`, then each of its sources: `API request failed: connection refused`.
fn with_causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        // Errors that print their source themselves (`#[error("…: {0}")]`) are not repeated.
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A quarantined object is reported once: `Degraded=True` in its status (if the controller
/// said where its conditions are) and a Warning Event. Best effort: failures are only logged.
async fn report_quarantine<K, C, F>(obj: Arc<K>, inner: Arc<Inner<K, C, F>>, message: String)
where
    K: Resource<DynamicType = ()>,
{
    if let Some(conditions_of) = inner.conditions {
        let mut conditions = conditions_of(&obj).to_vec();
        if conditions::set_reconcile_failing(&mut conditions, &message, obj.meta().generation) {
            let status = serde_json::json!({ "conditions": conditions });
            if let Err(error) = crate::status::patch_status(
                inner.runtime.client(),
                obj.as_ref(),
                &status,
                &inner.field_manager,
            )
            .await
            {
                tracing::debug!(%error, "could not report the quarantine in status");
            }
        }
    }
    let note = EventNote::warning(conditions::REASON_RECONCILE_FAILING, message);
    inner
        .runtime
        .recorder()
        .publish(&obj.object_ref(&()), &note, &inner.event_action)
        .await;
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Synced, track_readiness, with_causes};

    #[tokio::test]
    async fn readiness_reports_each_blocking_change_once_then_the_verdict() {
        let (synced_tx, blocked_tx, cache) = Synced::for_test();
        let reports = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = reports.clone();
        let tracker = tokio::spawn(track_readiness(vec![cache], move |ok, reason| {
            seen.lock().expect("reports").push((ok, reason));
        }));
        let settle = || async {
            for _ in 0..100 {
                tokio::task::yield_now().await;
            }
        };
        settle().await;
        blocked_tx.send_replace(Some("kind not served".to_owned()));
        settle().await;
        blocked_tx.send_replace(None);
        settle().await;
        synced_tx.send_replace(true);
        assert!(tracker.await.expect("the tracker"));
        let reason = Some("kind not served".to_owned());
        assert_eq!(
            *reports.lock().expect("reports"),
            [(false, None), (false, reason), (false, None), (true, None)],
            "one report per change: a change left unseen would report in a loop"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("API request failed")]
    struct Outer(#[source] Inner);

    #[derive(Debug, thiserror::Error)]
    #[error("connection refused")]
    struct Inner;

    #[derive(Debug, thiserror::Error)]
    #[error("API request failed: {0}")]
    struct Printing(#[source] Inner);

    #[test]
    fn a_failure_reads_with_its_causes_once() {
        assert_eq!(
            with_causes(&Outer(Inner)),
            "API request failed: connection refused"
        );
        assert_eq!(
            with_causes(&Printing(Inner)),
            "API request failed: connection refused",
            "a source the error already prints is not repeated"
        );
    }
}
