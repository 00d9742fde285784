//! Lean, indexed caches: the watch streams that fill kube-runtime reflectors with slimmed objects
//! (each controller strips what its decisions never read) and keep an [`Index`] in step.
//!
//! The streams come from [`SharedWatches`], which backs off on errors itself: a cache consumes
//! its stream as fast as it comes, with no backoff of its own (that would only hold the shared
//! watch up for the other caches of the kind).

use std::collections::BTreeSet;

use futures::{Stream, StreamExt as _, TryStreamExt as _};
use kube::Resource;
use kube::runtime::{WatchStreamExt as _, reflector, watcher};

use crate::index::Index;
use crate::shared::SharedWatches;

/// Watches a kind in every watched namespace (one shared watch each, merged so one reflector
/// can hold them all), or cluster-wide.
pub fn watch_in<K>(
    watches: &SharedWatches,
    namespaces: Option<&BTreeSet<String>>,
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
    let config = watcher::Config::default();
    let streams: Vec<_> = match namespaces {
        None => vec![(String::new(), watches.watch::<K>(None, &config).boxed())],
        Some(set) => set
            .iter()
            .map(|ns| (ns.clone(), watches.watch::<K>(Some(ns), &config).boxed()))
            .collect(),
    };
    crate::namespaces::merge(streams)
}

/// Watches a kind cluster-wide (a cluster-scoped kind, or every namespace).
pub fn watch_all<K>(
    watches: &SharedWatches,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
where
    K: Resource + serde::de::DeserializeOwned + Send + 'static,
    K::DynamicType: Default,
{
    watches.watch::<K>(None, &watcher::Config::default())
}

/// A watch stream slimmed by `slim` before it fills the cache behind `writer` and `index`;
/// yields the objects it touched, to trigger reconciles (errors pass through, for the
/// controller to log).
/// The index is updated before the store, so a mapper that reads both never sees an object
/// in the store that the index misses.
pub fn lean_cache<K, S>(
    writer: reflector::store::Writer<K>,
    index: Index<K>,
    stream: S,
    slim: fn(&mut K),
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let indexed = stream
        .modify(slim)
        .inspect_ok(move |event| index.apply(event));
    reflector::reflector(writer, indexed).touched_objects()
}
