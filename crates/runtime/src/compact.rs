//! A cache of compact entries for the kinds a cluster has by the ten thousand (pods above all).
//! kube-runtime's reflector `Store<K>` keeps whole `K` objects — with `ObjectMeta` alone 360
//! bytes before any string — keyed by an `ObjectRef` that copies name, namespace, uid and
//! resourceVersion again. A [`CompactStore`] keeps, per object, only the value a controller
//! derives from it (a few flags and strings) under a `namespace/name` key: about a quarter of
//! the memory for pods.
//!
//! It follows the reflector's semantics: a relist is buffered from `Init` to `InitDone` and then
//! replaces the content, and [`CompactStore::wait_until_ready`] resolves after the first
//! complete list — for any number of waiters (kube-runtime 5's store wakes only one).

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::watcher;
use tokio::sync::watch;

/// `namespace/name`, or `name` for a cluster-scoped object.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_owned(),
    }
}

/// Entries by `namespace/name`.
type Entries<V> = HashMap<Box<str>, Arc<V>>;

/// Entries of type `V`, derived from objects of one kind. Cheap to clone (shared state).
pub struct CompactStore<V> {
    entries: Arc<RwLock<Entries<V>>>,
    relist: Arc<RwLock<Option<Entries<V>>>>,
    ready: watch::Sender<bool>,
}

impl<V> Clone for CompactStore<V> {
    fn clone(&self) -> Self {
        Self {
            entries: self.entries.clone(),
            relist: self.relist.clone(),
            ready: self.ready.clone(),
        }
    }
}

impl<V> Default for CompactStore<V> {
    fn default() -> Self {
        Self {
            entries: Arc::default(),
            relist: Arc::default(),
            ready: watch::channel(false).0,
        }
    }
}

impl<V> CompactStore<V> {
    /// Follows one watcher event; `entry` derives the value kept for an object.
    pub fn apply<K: Resource>(&self, event: &watcher::Event<K>, entry: fn(&K) -> V) {
        let id = |obj: &K| -> Box<str> {
            let meta = obj.meta();
            key(
                meta.namespace.as_deref(),
                meta.name.as_deref().unwrap_or_default(),
            )
            .into()
        };
        match event {
            watcher::Event::Apply(obj) => {
                if let Ok(mut entries) = self.entries.write() {
                    entries.insert(id(obj), Arc::new(entry(obj)));
                }
            }
            watcher::Event::Delete(obj) => {
                if let Ok(mut entries) = self.entries.write() {
                    entries.remove(&id(obj));
                }
            }
            watcher::Event::Init => {
                if let Ok(mut relist) = self.relist.write() {
                    *relist = Some(HashMap::new());
                }
            }
            watcher::Event::InitApply(obj) => {
                if let Ok(mut relist) = self.relist.write() {
                    relist
                        .get_or_insert_with(HashMap::new)
                        .insert(id(obj), Arc::new(entry(obj)));
                }
            }
            watcher::Event::InitDone => {
                let listed = self
                    .relist
                    .write()
                    .ok()
                    .and_then(|mut r| r.take())
                    .unwrap_or_default();
                if let Ok(mut entries) = self.entries.write() {
                    *entries = listed;
                }
                self.ready.send_replace(true);
            }
        }
    }

    /// The entry of `namespace/name` (see [`key`]).
    pub fn get(&self, key: &str) -> Option<Arc<V>> {
        self.entries.read().ok()?.get(key).cloned()
    }

    /// Every entry, with its key.
    pub fn state(&self) -> Vec<(Box<str>, Arc<V>)> {
        self.entries.read().map_or_else(
            |_| Vec::new(),
            |e| e.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        )
    }

    /// How many entries it holds.
    pub fn len(&self) -> usize {
        self.entries.read().map_or(0, |e| e.len())
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Resolves once the first list completed; any number of tasks may wait.
    pub async fn wait_until_ready(&self) {
        let mut ready = self.ready.subscribe();
        let _ = ready.wait_for(|r| *r).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;

    fn cm(name: &str, value: &str) -> ConfigMap {
        ConfigMap {
            metadata: ObjectMeta {
                namespace: Some("ns".into()),
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            data: Some([("v".to_owned(), value.to_owned())].into()),
            ..ConfigMap::default()
        }
    }

    fn value(cm: &ConfigMap) -> String {
        cm.data
            .as_ref()
            .and_then(|d| d.get("v"))
            .cloned()
            .unwrap_or_default()
    }

    #[tokio::test]
    async fn follows_the_reflector_lifecycle() {
        let store = CompactStore::<String>::default();
        store.apply(&watcher::Event::Init, value);
        store.apply(&watcher::Event::InitApply(cm("a", "1")), value);
        assert!(store.is_empty(), "nothing shows before the list completes");
        let waiter = tokio::spawn({
            let store = store.clone();
            async move { store.wait_until_ready().await }
        });
        let second = tokio::spawn({
            let store = store.clone();
            async move { store.wait_until_ready().await }
        });
        store.apply(&watcher::Event::InitDone, value);
        waiter.await.expect("first waiter");
        second.await.expect("second waiter: every waiter wakes");
        assert_eq!(store.get("ns/a").as_deref().map(String::as_str), Some("1"));

        store.apply(&watcher::Event::Apply(cm("b", "2")), value);
        store.apply(&watcher::Event::Delete(cm("a", "1")), value);
        assert!(store.get("ns/a").is_none());

        // A relist replaces everything at its end.
        store.apply(&watcher::Event::Init, value);
        store.apply(&watcher::Event::InitApply(cm("c", "3")), value);
        assert_eq!(
            store.len(),
            1,
            "the old content stays until the relist ends"
        );
        store.apply(&watcher::Event::InitDone, value);
        assert!(store.get("ns/b").is_none());
        assert_eq!(store.get("ns/c").as_deref().map(String::as_str), Some("3"));
    }
}
