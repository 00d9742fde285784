//! Lean, indexed caches: the watch streams that fill kube-runtime reflectors with slimmed objects
//! (each controller strips what its decisions never read) and keep an [`Index`] in step.

use std::collections::BTreeSet;

use futures::{Stream, StreamExt as _, TryStreamExt as _};
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use kube::{Api, Client, Resource};

use crate::index::Index;

/// Watches a kind in every watched namespace (one watch each, merged so one reflector can hold
/// them all), or cluster-wide.
pub fn watch_in<K>(
    client: &Client,
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
        None => vec![(
            String::new(),
            watcher(Api::<K>::all(client.clone()), config).boxed(),
        )],
        Some(set) => set
            .iter()
            .map(|ns| {
                let api = Api::<K>::namespaced(client.clone(), ns);
                (ns.clone(), watcher(api, config.clone()).boxed())
            })
            .collect(),
    };
    crate::namespaces::merge(streams)
}

/// A watch stream slimmed by `slim` before it fills the cache behind `writer` and `index`,
/// backing off on errors on its own; yields the objects it touched, to trigger reconciles.
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
    reflector::reflector(writer, indexed)
        .default_backoff()
        .touched_objects()
}
