//! Shared watches: one API watch per resource and scope, however many controllers cache it.
//!
//! Two controllers often watch the same kind (the status vault backing up CriticalServices, or
//! Services, beside the CriticalService controller; namespaces for both the vault and
//! ConfigMapSync). Each keeps its own lean cache, of its own type — so what is shared is not a
//! store of whole objects (kube-runtime's shared reflector keeps every object whole, which is
//! what our caches avoid) but the watch itself: one LIST and one WATCH connection per resource,
//! namespace and selector, whose objects reach every subscriber as the raw JSON the API server
//! sent. Each subscriber then deserializes its own type from those bytes, skipping what it does
//! not keep, exactly as a watch of its own would — so a kind nobody else watches costs the same
//! as before, plus one copy of its bytes.
//!
//! Semantics a subscriber can rely on:
//! - its stream is a kube-runtime watcher stream (`Init`, `InitApply`…, `InitDone`, then
//!   `Apply`/`Delete`), so reflectors, indexes and the per-namespace merge take it as is;
//! - a subscriber that joins a running watch needs the current state: unless the watch's list
//!   has not answered yet (then it just joins, with an `Init` of its own), the watch relists,
//!   and the subscribers already there see an ordinary relist (their caches are level-based);
//! - the watch backs off on errors itself (kube-runtime's default backoff) and forwards each
//!   error, so subscribers log it but need no backoff of their own; when the server gave no
//!   answer, or answered "not now" (a 5xx, a 429), the back-off ends the moment it answers, or
//!   serves the failing request, again (see `reachability`, inside the crate);
//! - delivery is lossless: a subscriber's queue is bounded, and a full one makes the watch wait
//!   (as kube-runtime's shared streams do), so a subscriber must keep polling its stream;
//! - the watch stops when its last subscriber drops its stream.

use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ApiResource, ListParams, WatchParams};
use kube::core::DynamicResourceScope;
use kube::runtime::utils::Backoff as _;
use kube::runtime::watcher;
use kube::{Client, Resource};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::metrics::Metrics;
use crate::reachability::{Failure, Reachability, jittered, probe_interval};

/// Events a subscriber's queue holds before the shared watch waits for it.
const SUBSCRIBER_QUEUE: usize = 1024;

/// A watch relists at once after a 410 at most this often; a 410 sooner than that backs off
/// as any failure does (a relist is a whole LIST: a server that answered 410 to every watch
/// must not get one LIST after another).
const FREE_RELIST_EVERY: Duration = Duration::from_secs(5);

/// An object as the API server sent it: its raw JSON, plus the few metadata fields the watcher
/// itself reads (it resumes from the last object's resourceVersion).
#[derive(Clone, Debug)]
pub struct RawObject {
    metadata: ObjectMeta,
    json: Box<RawValue>,
}

impl RawObject {
    /// The object's JSON, as received.
    pub fn json(&self) -> &str {
        self.json.get()
    }

    /// Deserializes the object as `K`.
    pub fn decode<K: DeserializeOwned>(&self) -> Result<K, serde_json::Error> {
        serde_json::from_str(self.json.get())
    }
}

impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        /// The metadata the watcher reads; serde skips the rest of the object.
        #[derive(Deserialize)]
        struct Envelope {
            #[serde(default)]
            metadata: LightMeta,
        }
        #[derive(Default, Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct LightMeta {
            name: Option<String>,
            namespace: Option<String>,
            resource_version: Option<String>,
            uid: Option<String>,
        }
        // Capturing raw JSON needs serde_json's own deserializer, which kube's list and watch
        // decoding use (a watch event's `type` comes before its `object`, on a real API server
        // as on the sandbox, so serde reads the object in place).
        let json = Box::<RawValue>::deserialize(deserializer)?;
        let Envelope { metadata: meta } =
            serde_json::from_str(json.get()).map_err(D::Error::custom)?;
        Ok(Self {
            metadata: ObjectMeta {
                name: meta.name,
                namespace: meta.namespace,
                resource_version: meta.resource_version,
                uid: meta.uid,
                ..ObjectMeta::default()
            },
            json,
        })
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn api_version(dt: &ApiResource) -> Cow<'_, str> {
        dt.api_version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

/// What the shared watch sends each subscriber.
type RawEvent = Result<watcher::Event<Arc<RawObject>>, Arc<watcher::Error>>;

/// What identifies a watch: the resource, the namespace (none: cluster-wide) and the selectors.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
struct WatchKey {
    group: String,
    version: String,
    plural: String,
    namespace: Option<String>,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

/// Labels of the shared-watch metrics.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WatchLabels {
    /// `plural.group` (`plural` for the core group).
    resource: String,
    /// Empty for a cluster-wide watch.
    namespace: String,
}

impl WatchKey {
    fn labels(&self) -> WatchLabels {
        WatchLabels {
            resource: if self.group.is_empty() {
                self.plural.clone()
            } else {
                format!("{}.{}", self.plural, self.group)
            },
            namespace: self.namespace.clone().unwrap_or_default(),
        }
    }
}

/// Messages to a shared watch's task.
enum Control {
    Join(u64, mpsc::Sender<RawEvent>),
    Leave(u64),
}

#[derive(Default)]
struct Registry {
    watches: HashMap<WatchKey, mpsc::UnboundedSender<Control>>,
    next_id: u64,
}

#[derive(Clone, Default)]
struct WatchMetrics {
    /// `vigil_shared_watch_subscribers{resource,namespace}`.
    subscribers: Family<WatchLabels, Gauge>,
    /// `vigil_shared_watch_starts_total{resource,namespace}`: each is a LIST then a WATCH.
    starts: Family<WatchLabels, Counter>,
}

/// The registry of shared watches. Cheap to clone; every clone shares the same watches.
#[derive(Clone)]
pub struct SharedWatches {
    client: Client,
    registry: Arc<Mutex<Registry>>,
    metrics: WatchMetrics,
    reachability: Reachability,
}

impl std::fmt::Debug for SharedWatches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedWatches").finish_non_exhaustive()
    }
}

impl SharedWatches {
    /// Watches made with `client`.
    pub fn new(client: Client) -> Self {
        Self {
            reachability: Reachability::new(client.clone()),
            client,
            registry: Arc::default(),
            metrics: WatchMetrics::default(),
        }
    }

    /// The probe that tells when the API server answers again after an outage.
    pub fn reachability(&self) -> &Reachability {
        &self.reachability
    }

    /// Exposes `<prefix>_shared_watch_subscribers` and `<prefix>_shared_watch_starts_total`.
    pub fn register_metrics(&self, metrics: &Metrics) {
        metrics.register(
            &metrics.product_name("shared_watch_subscribers"),
            "Caches fed by each shared watch (one API watch per resource and namespace)",
            self.metrics.subscribers.clone(),
        );
        metrics.register(
            &metrics.product_name("shared_watch_starts"),
            "Times each shared watch listed and started watching (first start and relists)",
            self.metrics.starts.clone(),
        );
    }

    /// The client the watches use.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Watches `K` in `namespace` (`None`: cluster-wide, the only choice for a cluster-scoped
    /// kind), through the shared watch of its resource. `K` may be a lean type that inherits a
    /// real kind (kube's `#[resource(inherit = …)]`): what identifies the watch is the
    /// resource's group, version and plural.
    pub fn watch<K>(
        &self,
        namespace: Option<&str>,
        config: &watcher::Config,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
    where
        K: Resource + DeserializeOwned + Send + 'static,
        K::DynamicType: Default,
    {
        let ar = ApiResource::erase::<K>(&K::DynamicType::default());
        self.watch_resource(&ar, namespace, config)
    }

    /// Watches the resource `ar` (a kind known only at run time) as `K` — for instance
    /// kube's `DynamicObject`.
    pub fn watch_resource<K>(
        &self,
        ar: &ApiResource,
        namespace: Option<&str>,
        config: &watcher::Config,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
    where
        K: DeserializeOwned + Send + 'static,
    {
        let key = WatchKey {
            group: ar.group.clone(),
            version: ar.version.clone(),
            plural: ar.plural.clone(),
            namespace: namespace.map(str::to_owned),
            label_selector: config.label_selector.clone(),
            field_selector: config.field_selector.clone(),
        };
        let (tx, rx) = mpsc::channel(SUBSCRIBER_QUEUE);
        let leave = self.join(key, ar, config, tx);
        futures::stream::unfold((rx, leave), |(mut rx, leave)| async move {
            let event = rx.recv().await?;
            Some((decode::<K>(event), (rx, leave)))
        })
    }

    /// Adds a subscriber to the watch of `key`, starting the watch if none runs.
    fn join(
        &self,
        key: WatchKey,
        ar: &ApiResource,
        config: &watcher::Config,
        tx: mpsc::Sender<RawEvent>,
    ) -> LeaveGuard {
        let mut registry = self.registry.lock().unwrap_or_else(PoisonError::into_inner);
        registry.next_id += 1;
        let id = registry.next_id;
        // The Join is sent under the registry's lock: a watch retiring (which takes the lock
        // too) either sees it or has already left the registry, and then a new watch starts.
        let mut join = Control::Join(id, tx);
        if let Some(control) = registry.watches.get(&key) {
            match control.send(join) {
                Ok(()) => {
                    return LeaveGuard {
                        id,
                        control: control.clone(),
                    };
                }
                Err(mpsc::error::SendError(back)) => join = back,
            }
        }
        let (control, inbox) = mpsc::unbounded_channel();
        let _ = control.send(join);
        registry.watches.insert(key.clone(), control.clone());
        let task = WatchTask {
            client: self.client.clone(),
            ar: ar.clone(),
            config: config.clone(),
            key,
            inbox,
            registry: Arc::downgrade(&self.registry),
            metrics: self.metrics.clone(),
            reachability: self.reachability.clone(),
        };
        tokio::spawn(task.run());
        LeaveGuard { id, control }
    }
}

/// Tells the watch a subscriber is gone when its stream is dropped.
struct LeaveGuard {
    id: u64,
    control: mpsc::UnboundedSender<Control>,
}

impl Drop for LeaveGuard {
    fn drop(&mut self) {
        let _ = self.control.send(Control::Leave(self.id));
    }
}

/// A subscriber's view of a raw event: its own type, deserialized from the raw JSON. An object
/// that does not deserialize is reported as kube's watcher reports one (a failed watch event)
/// and skipped.
fn decode<K: DeserializeOwned>(event: RawEvent) -> Result<watcher::Event<K>, watcher::Error> {
    let parse = |raw: &RawObject| {
        raw.decode::<K>()
            .map_err(|e| watcher::Error::WatchFailed(kube::Error::SerdeError(e)))
    };
    Ok(match event.map_err(|e| share_error(&e))? {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(raw) => watcher::Event::InitApply(parse(&raw)?),
        watcher::Event::Apply(raw) => watcher::Event::Apply(parse(&raw)?),
        watcher::Event::Delete(raw) => watcher::Event::Delete(parse(&raw)?),
    })
}

/// A copy of a watch error for one subscriber (kube's errors are not `Clone`): API statuses
/// are kept whole, so subscribers can still tell a 403 or a 410 apart; other causes keep their
/// message.
fn share_error(error: &watcher::Error) -> watcher::Error {
    let client_error = |e: &kube::Error| match e {
        kube::Error::Api(status) => kube::Error::Api(status.clone()),
        other => kube::Error::Service(other.to_string().into()),
    };
    match error {
        watcher::Error::InitialListFailed(e) => watcher::Error::InitialListFailed(client_error(e)),
        watcher::Error::WatchStartFailed(e) => watcher::Error::WatchStartFailed(client_error(e)),
        watcher::Error::WatchError(status) => watcher::Error::WatchError(status.clone()),
        watcher::Error::WatchFailed(e) => watcher::Error::WatchFailed(client_error(e)),
        watcher::Error::NoResourceVersion => watcher::Error::NoResourceVersion,
    }
}

/// Wraps a watcher event's object in an `Arc`, to hand it to several subscribers.
fn shareable(event: watcher::Event<RawObject>) -> watcher::Event<Arc<RawObject>> {
    match event {
        watcher::Event::Init => watcher::Event::Init,
        watcher::Event::InitDone => watcher::Event::InitDone,
        watcher::Event::InitApply(o) => watcher::Event::InitApply(Arc::new(o)),
        watcher::Event::Apply(o) => watcher::Event::Apply(Arc::new(o)),
        watcher::Event::Delete(o) => watcher::Event::Delete(Arc::new(o)),
    }
}

/// What the current watcher stream has handed out, which decides what a newcomer needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Delivered {
    /// Nothing yet: a newcomer simply joins.
    Nothing,
    /// Only the relist's `Init`: a newcomer gets an `Init` of its own, then everything else.
    InitOnly,
    /// Objects or `InitDone`: a newcomer needs a relist.
    Objects,
}

/// One shared watch's task, as it is started: what to watch, its inbox of joins and leaves, and
/// the process-wide parts it reports to.
struct WatchTask {
    client: Client,
    ar: ApiResource,
    config: watcher::Config,
    key: WatchKey,
    inbox: mpsc::UnboundedReceiver<Control>,
    registry: Weak<Mutex<Registry>>,
    metrics: WatchMetrics,
    reachability: Reachability,
}

/// A watch's pause after a failure: a back-off sleep, and for a refusal a probe that ends it
/// once the failing request is served again.
#[derive(Default)]
struct Pause {
    /// Set while backing off: the watcher is not polled until it fires.
    waiting: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
    /// Set while backing off after a refusal: probes until the failing request is served.
    probing: Option<BoxFuture<'static, bool>>,
}

impl Pause {
    fn end(&mut self) {
        self.waiting = None;
        self.probing = None;
    }
}

/// How a watch backs off: kube-runtime's default back-off, except after a 410 (the server
/// serves: relist at once, at most once per [`FREE_RELIST_EVERY`]).
struct Backoff {
    backoff: watcher::DefaultBackoff,
    /// When a 410 last made the watch relist without backing off.
    last_free_relist: Option<tokio::time::Instant>,
}

impl Backoff {
    /// The pause after `error`, reporting to `reachability` what it says of the server.
    fn after(
        &mut self,
        error: &watcher::Error,
        probe: &Probe,
        reachability: &Reachability,
    ) -> Pause {
        let failure = Failure::of_watch(error);
        let relist_now = failure == Failure::Expired
            && self
                .last_free_relist
                .is_none_or(|at| at.elapsed() >= FREE_RELIST_EVERY);
        if relist_now {
            // A 410: the server serves, and the watcher relists on its own; it does so at once
            // (see `crate::reachability`), at most once per FREE_RELIST_EVERY, so a server that
            // keeps answering 410 gets the back-off like any other failure.
            self.last_free_relist = Some(tokio::time::Instant::now());
            return Pause::default();
        }
        let mut delay = self.backoff.next();
        let mut pause = Pause::default();
        match failure {
            Failure::Unanswered => reachability.unreachable(),
            Failure::Refused { retry_after } => {
                if let Some(wait) = retry_after {
                    delay = delay.map(|d| d.max(wait));
                    reachability.retry_after(wait);
                }
                if let Some(delay) = delay {
                    let list_failed = matches!(error, watcher::Error::InitialListFailed(_));
                    pause.probing = Some(Box::pin(probe.clone().until_served(
                        !list_failed,
                        probe_interval(delay),
                        reachability.clone(),
                    )));
                }
            }
            Failure::Expired | Failure::Other => {}
        }
        pause.waiting = delay.map(|delay| Box::pin(tokio::time::sleep(delay)));
        pause
    }
}

/// The subscribers of a watch, and what the current watcher stream has handed them.
struct Subscribers {
    list: Vec<(u64, mpsc::Sender<RawEvent>)>,
    delivered: Delivered,
}

impl Subscribers {
    /// Adds a subscriber; true when the watch must relist so that it gets the current state.
    async fn join(&mut self, id: u64, tx: mpsc::Sender<RawEvent>) -> bool {
        let relist = match self.delivered {
            Delivered::Nothing => false,
            // The list has not answered yet: the newcomer starts with its own `Init` and gets
            // every object with the others.
            Delivered::InitOnly => {
                let _ = tx.send(Ok(watcher::Event::Init)).await;
                false
            }
            // The newcomer needs the current state: relist for everyone.
            Delivered::Objects => true,
        };
        self.list.push((id, tx));
        relist
    }

    /// Hands `event` to every subscriber.
    async fn send(&mut self, event: watcher::Result<watcher::Event<RawObject>>) {
        match &event {
            Ok(watcher::Event::Init) => self.delivered = Delivered::InitOnly,
            Ok(_) => self.delivered = Delivered::Objects,
            // An error changes nothing delivered (a failed list starts again with Init).
            Err(_) => {}
        }
        let event: RawEvent = event.map(shareable).map_err(Arc::new);
        for (_, tx) in &self.list {
            // A closed queue is a subscriber leaving; its Leave follows.
            let _ = tx.send(event.clone()).await;
        }
    }
}

impl WatchTask {
    /// Runs kube-runtime's watcher for the subscribers until the last leaves.
    ///
    /// The watcher is polled without kube-runtime's `StreamBackoff`: this loop backs off itself
    /// (with the same default back-off, and never sooner than a 429's `Retry-After`), so that
    /// the wait can end early when the server answers again after an outage, or serves again
    /// after refusals (see `reachability`, inside the crate).
    async fn run(mut self) {
        let api: Api<RawObject> = match &self.key.namespace {
            Some(ns) => Api::namespaced_with(self.client.clone(), ns, &self.ar),
            None => Api::all_with(self.client.clone(), &self.ar),
        };
        let probe = Probe {
            api: api.clone(),
            label_selector: self.config.label_selector.clone(),
            field_selector: self.config.field_selector.clone(),
        };
        let labels = self.key.labels();
        let subscriber_gauge = self.metrics.subscribers.get_or_create(&labels).clone();
        let (metrics, config) = (self.metrics.clone(), self.config.clone());
        let start = || -> BoxStream<'static, watcher::Result<watcher::Event<RawObject>>> {
            metrics.starts.get_or_create(&labels).inc();
            watcher(api.clone(), config.clone()).boxed()
        };
        let mut subscribers = Subscribers {
            list: Vec::new(),
            delivered: Delivered::Nothing,
        };
        let mut stream = start();
        let mut backoff = Backoff {
            backoff: watcher::DefaultBackoff::default(),
            last_free_relist: None,
        };
        let mut recovered = self.reachability.subscribe();
        let mut pause = Pause::default();
        loop {
            tokio::select! {
                // Joins and leaves first, so a newcomer is in place before the next event.
                biased;
                control = self.inbox.recv() => match control {
                    Some(Control::Join(id, tx)) => {
                        if subscribers.join(id, tx).await {
                            stream = start();
                            subscribers.delivered = Delivered::Nothing;
                        }
                    }
                    Some(Control::Leave(id)) => subscribers.list.retain(|(i, _)| *i != id),
                    None => break,
                },
                // The server answers, or serves, again: stop waiting. The back-off starts
                // afresh only once the watch works again (if it still fails, it backs off
                // further).
                Ok(()) = recovered.changed(), if pause.waiting.is_some() => pause.end(),
                () = async { if let Some(sleep) = pause.waiting.as_mut() { sleep.await } }, if pause.waiting.is_some() => pause.end(),
                // The failing request is served again: retry now, and tell the others (unless
                // the probe got another answer, which only this watch's retry needs to see).
                served = async { match pause.probing.as_mut() { Some(probe) => probe.await, None => false } }, if pause.probing.is_some() => {
                    tracing::debug!(resource = %labels.resource, namespace = %labels.namespace, served, "the probe was answered; the watch retries now");
                    pause.end();
                    if served {
                        self.reachability.serves_again();
                    }
                }
                event = stream.next(), if pause.waiting.is_none() => {
                    let Some(event) = event else {
                        // kube's watcher never ends; if it did, start over.
                        stream = start();
                        subscribers.delivered = Delivered::Nothing;
                        continue;
                    };
                    match &event {
                        Ok(_) => backoff.backoff.reset(),
                        Err(error) => {
                            tracing::debug!(resource = %labels.resource, namespace = %labels.namespace, %error, "shared watch error; backing off");
                            // Recoveries seen so far came before this failure: only a later
                            // one ends its wait.
                            recovered.borrow_and_update();
                            pause = backoff.after(error, &probe, &self.reachability);
                        }
                    }
                    subscribers.send(event).await;
                }
            }
            subscriber_gauge.set(i64::try_from(subscribers.list.len()).unwrap_or(i64::MAX));
            if subscribers.list.is_empty()
                && retire(
                    &self.registry,
                    &self.key,
                    &mut self.inbox,
                    &mut subscribers.list,
                )
            {
                break;
            }
        }
        subscriber_gauge.set(0);
    }
}

/// The probe of a watch refused by the server (see `reachability`, inside the crate): a request of the
/// kind that failed, on the watch's own resource, namespace and selectors (so also the same
/// permissions).
#[derive(Clone)]
struct Probe {
    api: Api<RawObject>,
    label_selector: Option<String>,
    field_selector: Option<String>,
}

impl Probe {
    /// Returns true once the server serves the probe (false once it answers with anything but a
    /// refusal, which a retry would get too), probing every `interval` (with jitter) at most, in this
    /// process's probe turns. `watch`: the WATCH failed, so the probe watches too (from the
    /// LIST's resourceVersion: nothing to send, dropped once accepted).
    async fn until_served(
        self,
        watch: bool,
        interval: Duration,
        reachability: Reachability,
    ) -> bool {
        loop {
            tokio::time::sleep(jittered(interval)).await;
            reachability.probe_turn().await;
            let failure = match self.once(watch).await {
                Ok(()) => return true,
                Err(error) => Failure::of(&error),
            };
            match failure {
                Failure::Refused { retry_after } => {
                    if let Some(wait) = retry_after {
                        reachability.retry_after(wait);
                    }
                }
                Failure::Unanswered => reachability.unreachable(),
                Failure::Expired | Failure::Other => return false,
            }
        }
    }

    async fn once(&self, watch: bool) -> Result<(), kube::Error> {
        let mut list = ListParams::default().limit(1);
        list.label_selector.clone_from(&self.label_selector);
        list.field_selector.clone_from(&self.field_selector);
        let listed = self.api.list(&list).await?;
        if !watch {
            return Ok(());
        }
        let Some(version) = listed.metadata.resource_version else {
            return Ok(());
        };
        let mut params = WatchParams::default().timeout(1);
        params.label_selector.clone_from(&self.label_selector);
        params.field_selector.clone_from(&self.field_selector);
        // Accepted once the server sends its headers; the stream itself is not read.
        self.api.watch(&params, &version).await.map(drop)
    }
}

/// Leaves the registry when no subscriber remains — unless one is joining, which is then added.
fn retire(
    registry: &Weak<Mutex<Registry>>,
    key: &WatchKey,
    inbox: &mut mpsc::UnboundedReceiver<Control>,
    subscribers: &mut Vec<(u64, mpsc::Sender<RawEvent>)>,
) -> bool {
    let Some(registry) = registry.upgrade() else {
        return true;
    };
    let mut registry = registry.lock().unwrap_or_else(PoisonError::into_inner);
    // Joins are sent under this lock, so none can arrive between this drain and the removal.
    while let Ok(control) = inbox.try_recv() {
        match control {
            Control::Join(id, tx) => subscribers.push((id, tx)),
            Control::Leave(id) => subscribers.retain(|(i, _)| *i != id),
        }
    }
    if subscribers.is_empty() {
        registry.watches.remove(key);
        true
    } else {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::core::{ObjectList, WatchEvent};

    const CM: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","resourceVersion":"7","uid":"u","labels":{"x":"y"},"managedFields":[{"manager":"m"}]},"data":{"k":"v"}}"#;

    #[test]
    fn a_raw_object_keeps_the_json_and_reads_the_watchers_metadata() {
        let raw: RawObject = serde_json::from_str(CM).expect("raw");
        assert_eq!(raw.json(), CM);
        assert_eq!(raw.meta().name.as_deref(), Some("a"));
        assert_eq!(raw.meta().namespace.as_deref(), Some("ns"));
        assert_eq!(raw.meta().resource_version.as_deref(), Some("7"));
        assert_eq!(
            raw.meta().labels,
            None,
            "the rest of the metadata is not parsed"
        );
        let cm: ConfigMap = raw.decode().expect("typed");
        assert_eq!(
            cm.data.and_then(|d| d.get("k").cloned()).as_deref(),
            Some("v")
        );
    }

    #[test]
    fn raw_objects_decode_from_kubes_list_and_watch_envelopes() {
        let list = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMapList","metadata":{{"resourceVersion":"9"}},"items":[{CM},{CM}]}}"#
        );
        let list: ObjectList<RawObject> = serde_json::from_str(&list).expect("list");
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[1].json(), CM);

        let event = format!(r#"{{"type":"MODIFIED","object":{CM}}}"#);
        let event: WatchEvent<RawObject> = serde_json::from_str(&event).expect("event");
        let WatchEvent::Modified(raw) = event else {
            panic!("not a MODIFIED event: {event:?}");
        };
        assert_eq!(raw.json(), CM);
    }

    #[test]
    fn subscribers_see_their_own_type_and_errors_keep_their_status() {
        let raw: Arc<RawObject> = Arc::new(serde_json::from_str(CM).expect("raw"));
        let event = decode::<ConfigMap>(Ok(watcher::Event::Apply(raw))).expect("decoded");
        let watcher::Event::Apply(cm) = event else {
            panic!("not an Apply");
        };
        assert_eq!(cm.metadata.name.as_deref(), Some("a"));

        let status = kube::core::Status::failure("gone", "Expired").with_code(410);
        let error = watcher::Error::WatchError(Box::new(status));
        let copied = decode::<ConfigMap>(Err(Arc::new(error))).expect_err("an error");
        assert!(
            matches!(&copied, watcher::Error::WatchError(s) if s.code == 410),
            "{copied:?}"
        );
    }

    #[test]
    fn an_object_that_does_not_decode_is_an_error_not_a_panic() {
        #[derive(Debug, Deserialize)]
        struct Strict {
            #[allow(dead_code)]
            spec: String,
        }
        let raw: Arc<RawObject> = Arc::new(serde_json::from_str(CM).expect("raw"));
        let error = decode::<Strict>(Ok(watcher::Event::Apply(raw))).expect_err("no spec");
        assert!(matches!(error, watcher::Error::WatchFailed(_)), "{error:?}");
    }
}
