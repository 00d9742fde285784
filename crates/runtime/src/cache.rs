//! Caches as values: `runtime.cache::<K>().slim(f).index(keys).build()` is one typed
//! [`Cache`] holding a store of (slimmed) objects, an [`Index`] kept in step with it, its sync
//! state and a feed of the objects it touches, which the controller builder subscribes to as
//! triggers ([`crate::ControllerBuilder::watches`], [`crate::ControllerBuilder::owns`]).
//!
//! ```no_run
//! # fn demo(runtime: &vigil_runtime::Runtime) {
//! use k8s_openapi::api::apps::v1::Deployment;
//! fn no_status(d: &mut Deployment) { d.status = None; }
//! let deployments = runtime.cache::<Deployment>().slim(no_status).build();
//! # let _ = deployments;
//! # }
//! ```
//!
//! The Manager owns what a cache runs on: [`Cache`]'s watch starts when it is built (one shared
//! API watch per kind and scope, see [`crate::watches`]) and stops when the process shuts down.
//! Its sync state can be awaited by any number of tasks ([`Synced`]), unlike kube-runtime 5's
//! store, whose `wait_until_ready` wakes a single waiter; the controller builder waits for every
//! cache it is given, so no reconcile decides on a half-filled cache.
//!
//! Kinds a cluster has by the ten thousand (pods) fit a [`CompactCache`]: per object, only the
//! value a controller derives from it (see [`crate::compact`]).
//!
//! The feed is lossless: each subscriber has a bounded queue, and a full one makes the cache,
//! and through it the shared watch, wait (as kube-runtime's shared streams do). The streams
//! come from [`SharedWatches`], which backs off on errors itself, so a cache consumes its
//! stream as fast as it comes, with no backoff of its own.

use std::collections::BTreeSet;
use std::pin::pin;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use futures::{Stream, StreamExt as _, TryStreamExt as _};
use kube::Resource;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio::sync::{mpsc, watch};

use crate::compact::CompactStore;
use crate::index::{Index, KeysOf};
use crate::manager::Runtime;
use crate::watches::SharedWatches;

/// Objects a subscriber's queue holds before the cache waits for it.
const SUBSCRIBER_QUEUE: usize = 1024;

/// What a cache's kind must be: a statically typed resource it can decode, clone and print.
pub trait Cached:
    Resource<DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
    + Send
    + Sync
    + 'static
{
}

impl<K> Cached for K where
    K: Resource<DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static
{
}

/// A watch stream of `K`, as shared watches give it.
type Events<K> = BoxStream<'static, Result<watcher::Event<K>, watcher::Error>>;

/// Where a cache's events come from: the kind cluster-wide, or in each watched namespace.
type SourceFn<K> = fn(&SharedWatches, Option<&BTreeSet<String>>, &watcher::Config) -> Events<K>;

/// Whether a cache has synced (its first complete list is in): cheap to clone, and any number of
/// tasks may wait on it.
#[derive(Clone, Debug)]
pub struct Synced {
    synced: watch::Receiver<bool>,
    blocked: watch::Receiver<Option<String>>,
}

impl Synced {
    /// Resolves true once the cache has synced; false if it stopped first (shutdown).
    pub async fn wait(&self) -> bool {
        let mut synced = self.synced.clone();
        synced.wait_for(|s| *s).await.is_ok()
    }

    /// Whether the cache has synced by now.
    pub fn is_synced(&self) -> bool {
        *self.synced.borrow()
    }

    /// What keeps the cache from syncing, when something known does (the API does not serve its
    /// kind); `None` otherwise.
    pub fn blocked_by(&self) -> Option<String> {
        self.blocked.borrow().clone()
    }

    /// A `Synced` driven by hand: its synced and blocking senders, and itself.
    #[cfg(test)]
    pub(crate) fn for_test() -> (watch::Sender<bool>, watch::Sender<Option<String>>, Self) {
        let (synced_tx, synced) = watch::channel(false);
        let (blocked_tx, blocked) = watch::channel(None);
        (synced_tx, blocked_tx, Self { synced, blocked })
    }

    /// [`Self::blocked_by`], marking it seen: [`Self::blocked_changed`] then waits for the next
    /// change.
    pub fn blocked_now(&mut self) -> Option<String> {
        self.blocked.borrow_and_update().clone()
    }

    /// Resolves when what blocks the cache changes after it was last seen (see
    /// [`Self::blocked_now`]); false once the cache has stopped.
    pub async fn blocked_changed(&mut self) -> bool {
        self.blocked.changed().await.is_ok()
    }
}

/// The objects a cache touches, fanned out to every subscriber.
struct Feed<K> {
    subscribers: Arc<Mutex<Vec<mpsc::Sender<K>>>>,
    synced: watch::Receiver<bool>,
    blocked: watch::Receiver<Option<String>>,
}

impl<K> Clone for Feed<K> {
    fn clone(&self) -> Self {
        Self {
            subscribers: self.subscribers.clone(),
            synced: self.synced.clone(),
            blocked: self.blocked.clone(),
        }
    }
}

impl<K> Feed<K> {
    fn synced(&self) -> Synced {
        Synced {
            synced: self.synced.clone(),
            blocked: self.blocked.clone(),
        }
    }
}

impl<K: Clone + Send + 'static> Feed<K> {
    /// A new subscriber: every object the cache touches from now on.
    fn subscribe(&self) -> mpsc::Receiver<K> {
        let (tx, rx) = mpsc::channel(SUBSCRIBER_QUEUE);
        self.subscribers
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(tx);
        rx
    }

    /// Runs the cache: `events` (already applied to its store and index) reach the subscribers,
    /// and the first `InitDone` marks it synced. Stops at shutdown or when the stream ends.
    fn drive(
        runtime: &Runtime,
        kind: String,
        optional: bool,
        permission_optional: bool,
        events: impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static,
    ) -> Self {
        let (synced_tx, synced) = watch::channel(false);
        let (blocked_tx, blocked) = watch::channel(None);
        let feed = Self {
            subscribers: Arc::default(),
            synced,
            blocked,
        };
        let subscribers = feed.subscribers.clone();
        let shutdown = runtime.shutdown();
        let runtime = runtime.clone();
        tokio::spawn(async move {
            let mut events = pin!(events);
            let mut shutdown = pin!(shutdown);
            loop {
                let event = tokio::select! {
                    () = &mut shutdown => return,
                    event = events.next() => event,
                };
                match event {
                    None => return,
                    // An optional kind the API does not serve: synced, and empty until it is.
                    Some(Err(error)) if optional && is_not_served(&error) => {
                        if !synced_tx.send_replace(true) {
                            tracing::info!(%kind, "kind not served (CRD not installed?): its cache stays empty until it is");
                        }
                    }
                    // A kind the controller can do without, that it may not list (RBAC): synced,
                    // and empty until the permission is granted (the watch keeps retrying).
                    Some(Err(error)) if permission_optional && is_forbidden(&error) => {
                        if !synced_tx.send_replace(true) {
                            tracing::warn!(%kind, "no permission to list this kind: its cache stays empty until it is granted");
                        }
                    }
                    // A kind the controller cannot do without: a user must act, so say what
                    // (once per kind), and why the controller is not ready.
                    Some(Err(error)) if is_not_served(&error) => {
                        if blocked_tx.borrow().is_none() {
                            blocked_tx.send_replace(Some(runtime.kind_not_served(&kind)));
                        }
                    }
                    // The shared watch logs and backs off; a cache only notes it.
                    Some(Err(error)) => tracing::debug!(%kind, %error, "cache watch error"),
                    Some(Ok(event)) => {
                        if blocked_tx.borrow().is_some() {
                            blocked_tx.send_replace(None);
                        }
                        let touched = match event {
                            watcher::Event::Apply(obj)
                            | watcher::Event::InitApply(obj)
                            | watcher::Event::Delete(obj) => Some(obj),
                            watcher::Event::InitDone => {
                                synced_tx.send_replace(true);
                                None
                            }
                            watcher::Event::Init => None,
                        };
                        if let Some(obj) = touched {
                            publish(&subscribers, obj).await;
                        }
                    }
                }
            }
        });
        feed
    }
}

/// Whether a watch error says the controller may not list the kind (its list answered 403).
fn is_forbidden(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 403)
}

/// Whether a watch error says the API does not serve the kind (its list answered 404).
fn is_not_served(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::InitialListFailed(kube::Error::Api(status)) if status.code == 404)
}

/// Sends `obj` to every live subscriber, waiting for room (lossless), and forgets the gone.
/// Senders are taken one at a time (a cheap clone): no list is copied per object, and the lock
/// is never held across a wait.
async fn publish<K: Clone>(subscribers: &Mutex<Vec<mpsc::Sender<K>>>, obj: K) {
    let lock = || subscribers.lock().unwrap_or_else(PoisonError::into_inner);
    let mut gone = false;
    let mut next = 0;
    loop {
        let tx = lock().get(next).cloned();
        let Some(tx) = tx else { break };
        gone |= tx.send(obj.clone()).await.is_err();
        next += 1;
    }
    if gone {
        lock().retain(|tx| !tx.is_closed());
    }
}

/// A cache the controller builder can take as a trigger or wait for.
pub trait Source<K>: Send + Sync {
    /// Every object the cache touches from now on.
    fn subscribe(&self) -> BoxStream<'static, K>;

    /// The cache's sync state.
    fn synced(&self) -> Synced;
}

/// A cache of whole (slimmed) `K` objects, with an index. Cheap to clone.
pub struct Cache<K: Resource<DynamicType = ()> + 'static> {
    store: Store<K>,
    index: Index<K>,
    feed: Feed<K>,
}

impl<K: Resource<DynamicType = ()> + 'static> Clone for Cache<K> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            index: self.index.clone(),
            feed: self.feed.clone(),
        }
    }
}

impl<K: Cached> Cache<K> {
    /// The store: look-ups by name, or every object.
    pub fn store(&self) -> &Store<K> {
        &self.store
    }

    /// The object `key` names, if cached.
    pub fn get(&self, key: &ObjectRef<K>) -> Option<Arc<K>> {
        self.store.get(key)
    }

    /// Every cached object.
    pub fn state(&self) -> Vec<Arc<K>> {
        self.store.state()
    }

    /// The index given to the builder (none: an index that files nothing).
    pub fn index(&self) -> &Index<K> {
        &self.index
    }

    /// The cached objects the index files under `key`.
    pub fn indexed(&self, key: &str) -> Vec<Arc<K>> {
        self.index
            .get(key)
            .iter()
            .filter_map(|r| self.store.get(r))
            .collect()
    }

    /// Every object the cache touches from now on, after every object it holds already: what a
    /// controller's primary trigger needs, whenever it starts.
    pub(crate) fn subscribe_from_start(&self) -> BoxStream<'static, K> {
        let live = self.feed.subscribe();
        let held: Vec<K> = if *self.feed.synced.borrow() {
            self.store.state().iter().map(|o| K::clone(o)).collect()
        } else {
            Vec::new()
        };
        futures::stream::iter(held)
            .chain(tokio_stream(live))
            .boxed()
    }
}

impl<K: Cached> Source<K> for Cache<K> {
    fn subscribe(&self) -> BoxStream<'static, K> {
        tokio_stream(self.feed.subscribe()).boxed()
    }

    fn synced(&self) -> Synced {
        self.feed.synced()
    }
}

/// A cache of compact entries `V` derived from `K` objects (see [`crate::compact`]), with an
/// index of the objects. Cheap to clone.
pub struct CompactCache<K, V> {
    store: CompactStore<V>,
    index: Index<K>,
    feed: Feed<K>,
}

impl<K, V> Clone for CompactCache<K, V> {
    fn clone(&self) -> Self {
        Self {
            store: self.store.clone(),
            index: self.index.clone(),
            feed: self.feed.clone(),
        }
    }
}

impl<K, V> CompactCache<K, V> {
    /// The entries, by `namespace/name`.
    pub fn store(&self) -> &CompactStore<V> {
        &self.store
    }

    /// The index given to the builder.
    pub fn index(&self) -> &Index<K> {
        &self.index
    }
}

impl<K: Cached, V: Send + Sync + 'static> Source<K> for CompactCache<K, V> {
    fn subscribe(&self) -> BoxStream<'static, K> {
        tokio_stream(self.feed.subscribe()).boxed()
    }

    fn synced(&self) -> Synced {
        self.feed.synced()
    }
}

fn tokio_stream<K>(mut rx: mpsc::Receiver<K>) -> impl Stream<Item = K> + Send + 'static
where
    K: Send + 'static,
{
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// How a cache is made; see the module documentation.
pub struct CacheBuilder<K> {
    runtime: Runtime,
    source: SourceFn<K>,
    namespaces: Option<BTreeSet<String>>,
    config: watcher::Config,
    slim: fn(&mut K),
    keys: KeysOf<K>,
    optional: bool,
    permission_optional: bool,
}

impl Runtime {
    /// A cache of `K`, cluster-wide unless [`CacheBuilder::namespaces`] says otherwise.
    pub fn cache<K: Cached>(&self) -> CacheBuilder<K>
    where
        K::DynamicType: Default,
    {
        CacheBuilder {
            runtime: self.clone(),
            source: |watches, _, config| watches.watch::<K>(None, config).boxed(),
            namespaces: None,
            config: watcher::Config::default(),
            slim: |_| {},
            keys: |_| Vec::new(),
            optional: false,
            permission_optional: false,
        }
    }
}

impl<K: Cached> CacheBuilder<K> {
    /// Strips what the controller never reads, before anything is kept.
    pub fn slim(mut self, slim: fn(&mut K)) -> Self {
        self.slim = slim;
        self
    }

    /// Caches only the objects with these labels (a label selector, e.g. `app=web,tier`).
    pub fn labels(mut self, selector: &str) -> Self {
        self.config = self.config.labels(selector);
        self
    }

    /// Files each object under `keys(object)`, for [`Cache::indexed`] look-ups.
    pub fn index(mut self, keys: KeysOf<K>) -> Self {
        self.keys = keys;
        self
    }

    /// For a kind the API may not serve (a CRD not installed yet): while its list answers 404,
    /// the cache counts as synced and empty instead of never syncing. Its watch keeps retrying
    /// with backoff, so installing the CRD later fills it.
    pub fn optional(mut self) -> Self {
        self.optional = true;
        self
    }

    /// For a kind the controller can do without (it only sharpens a decision): while its list
    /// answers 403 (the installed RBAC does not grant it yet, e.g. an older chart running a
    /// newer image), the cache counts as synced and empty, with a warning, instead of keeping
    /// the controller unready. Its watch keeps retrying with backoff, so granting the
    /// permission later fills it.
    pub fn permission_optional(mut self) -> Self {
        self.permission_optional = true;
        self
    }

    /// Starts the cache (its watch starts now) and returns it.
    pub fn build(self) -> Cache<K> {
        let (store, writer) = reflector::store();
        let index = Index::new(self.keys);
        let events = self.events(&index);
        let feed = Feed::drive(
            &self.runtime,
            format!("{} ({})", K::kind(&()), K::api_version(&())),
            self.optional,
            self.permission_optional,
            reflector::reflector(writer, events),
        );
        Cache { store, index, feed }
    }

    /// Starts a cache keeping only `entry(object)` per object (see [`crate::compact`]).
    pub fn build_compact<V: Send + Sync + 'static>(self, entry: fn(&K) -> V) -> CompactCache<K, V> {
        let store = CompactStore::default();
        let index = Index::new(self.keys);
        let filled = store.clone();
        let events = self
            .events(&index)
            .inspect_ok(move |event| filled.apply(event, entry));
        let feed = Feed::drive(
            &self.runtime,
            format!("{} ({})", K::kind(&()), K::api_version(&())),
            self.optional,
            self.permission_optional,
            events,
        );
        CompactCache { store, index, feed }
    }

    /// The slimmed watch events, filed in `index` before anyone else sees them: a mapper that
    /// reads both the index and the store never sees an object the index misses.
    fn events(
        &self,
        index: &Index<K>,
    ) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + 'static {
        let index = index.clone();
        (self.source)(
            self.runtime.watches(),
            self.namespaces.as_ref(),
            &self.config,
        )
        .modify(self.slim)
        .inspect_ok(move |event| index.apply(event))
    }
}

impl<K> CacheBuilder<K>
where
    K: Cached + Resource<Scope = k8s_openapi::NamespaceResourceScope> + Default,
{
    /// Watches only `namespaces` (one shared watch each, merged), or every namespace (`None`).
    pub fn namespaces(mut self, namespaces: Option<&BTreeSet<String>>) -> Self {
        self.namespaces = namespaces.cloned();
        self.source =
            |watches, namespaces, config| watch_in::<K>(watches, namespaces, config).boxed();
        self
    }
}

/// Watches a kind in every watched namespace (one shared watch each, merged so one reflector
/// can hold them all), or cluster-wide.
fn watch_in<K>(
    watches: &SharedWatches,
    namespaces: Option<&BTreeSet<String>>,
    config: &watcher::Config,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Default
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    let streams: Vec<_> = match namespaces {
        None => vec![(String::new(), watches.watch::<K>(None, config).boxed())],
        Some(set) => set
            .iter()
            .map(|ns| (ns.clone(), watches.watch::<K>(Some(ns), config).boxed()))
            .collect(),
    };
    crate::namespaces::merge(streams)
}
