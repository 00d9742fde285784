//! Secondary indexes over reflector caches. kube-runtime's `Store` answers "the object with this
//! name"; a controller mapping a pod event to the Services that select it, or gathering the pods
//! of one Service, needs "the objects with this label" — without an index that is a scan of the
//! whole cache per event, O(cluster) work that turns a 50,000-pod initial sync into minutes.
//!
//! An [`Index`] is fed the same watcher events as the store (see [`Index::apply`]), keeps only
//! `key → names` (not objects), and follows the reflector's relist semantics: a relist is
//! buffered from `Init` to `InitDone` and then replaces the index, so it never holds objects the
//! store has dropped.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, RwLock};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

/// The keys an object is filed under (for example `namespace/label=value` pairs).
pub type KeysOf<K> = fn(&K) -> Vec<String>;

/// Objects of kind `K` filed under computed keys. Cheap to clone (shared state).
pub struct Index<K> {
    keys_of: KeysOf<K>,
    state: Arc<RwLock<State>>,
}

impl<K> Clone for Index<K> {
    fn clone(&self) -> Self {
        Self {
            keys_of: self.keys_of,
            state: self.state.clone(),
        }
    }
}

/// An object's id and its keys.
type Entry = (Box<str>, Vec<Box<str>>);

/// Each id and each key is stored once and shared (`Arc<str>`): an index of 50,000 pods holds
/// every pod's id in its `keys` and again in the set of each of its keys, and every key again
/// per pod filed under it; as separate strings those copies were most of its memory.
#[derive(Default)]
struct State {
    /// key → objects ("namespace/name", or "name" when cluster-scoped).
    by_key: HashMap<Arc<str>, HashSet<Arc<str>>>,
    /// object → its keys (the same strings as `by_key`'s), to unfile it when it changes or goes.
    keys: HashMap<Arc<str>, Box<[Arc<str>]>>,
    /// Objects of a relist in progress, with their keys.
    relist: Option<Vec<Entry>>,
}

impl State {
    fn unfile(&mut self, id: &str) {
        let Some(keys) = self.keys.remove(id) else {
            return;
        };
        for key in keys.iter() {
            if let Some(ids) = self.by_key.get_mut(&**key) {
                ids.remove(id);
                if ids.is_empty() {
                    self.by_key.remove(&**key);
                }
            }
        }
    }

    fn file(&mut self, id: Box<str>, keys: Vec<Box<str>>) {
        self.unfile(&id);
        if keys.is_empty() {
            return;
        }
        let id: Arc<str> = Arc::from(id);
        let keys: Box<[Arc<str>]> = keys
            .into_iter()
            .map(|key| {
                let key = match self.by_key.get_key_value(&*key) {
                    Some((shared, _)) => shared.clone(),
                    None => Arc::from(key),
                };
                self.by_key
                    .entry(key.clone())
                    .or_default()
                    .insert(id.clone());
                key
            })
            .collect();
        self.keys.insert(id, keys);
    }
}

/// "namespace/name", or "name" for a cluster-scoped object.
fn id_of(namespace: Option<&str>, name: &str) -> Box<str> {
    match namespace {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}").into(),
        _ => name.into(),
    }
}

impl<K> Index<K>
where
    K: Resource,
    K::DynamicType: Default,
{
    /// An empty index filing each object under `keys_of(object)`.
    pub fn new(keys_of: KeysOf<K>) -> Self {
        Self {
            keys_of,
            state: Arc::default(),
        }
    }

    fn entry(&self, obj: &K) -> Entry {
        let meta = obj.meta();
        let id = id_of(
            meta.namespace.as_deref(),
            meta.name.as_deref().unwrap_or_default(),
        );
        let mut keys: Vec<Box<str>> = (self.keys_of)(obj).into_iter().map(Into::into).collect();
        keys.sort_unstable();
        keys.dedup();
        (id, keys)
    }

    /// Follows one watcher event, as the reflector's store does.
    pub fn apply(&self, event: &watcher::Event<K>) {
        let Ok(mut state) = self.state.write() else {
            return;
        };
        match event {
            watcher::Event::Apply(obj) => {
                let (id, keys) = self.entry(obj);
                state.file(id, keys);
            }
            watcher::Event::Delete(obj) => {
                let (id, _) = self.entry(obj);
                state.unfile(&id);
            }
            watcher::Event::Init => state.relist = Some(Vec::new()),
            watcher::Event::InitApply(obj) => {
                let entry = self.entry(obj);
                state.relist.get_or_insert_with(Vec::new).push(entry);
            }
            watcher::Event::InitDone => {
                let listed = state.relist.take().unwrap_or_default();
                state.by_key.clear();
                state.keys.clear();
                for (id, keys) in listed {
                    state.file(id, keys);
                }
                state.by_key.shrink_to_fit();
                state.keys.shrink_to_fit();
            }
        }
    }

    /// The objects filed under `key`.
    pub fn get(&self, key: &str) -> Vec<ObjectRef<K>> {
        let Ok(state) = self.state.read() else {
            return Vec::new();
        };
        state
            .by_key
            .get(key)
            .into_iter()
            .flatten()
            .map(|id| match id.split_once('/') {
                Some((ns, name)) => ObjectRef::new(name).within(ns),
                None => ObjectRef::new(id),
            })
            .collect()
    }

    /// How many keys are in use (for tests and diagnostics).
    pub fn key_count(&self) -> usize {
        self.state.read().map_or(0, |s| s.by_key.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Pod;
    use kube::api::ObjectMeta;

    fn pod(ns: &str, name: &str, app: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some(ns.into()),
                name: Some(name.into()),
                labels: Some([("app".to_owned(), app.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    fn by_app(pod: &Pod) -> Vec<String> {
        pod.metadata
            .labels
            .iter()
            .flatten()
            .map(|(k, v)| {
                format!(
                    "{}/{k}={v}",
                    pod.metadata.namespace.as_deref().unwrap_or("")
                )
            })
            .collect()
    }

    fn names(index: &Index<Pod>, key: &str) -> Vec<String> {
        let mut out: Vec<String> = index.get(key).into_iter().map(|r| r.name).collect();
        out.sort();
        out
    }

    #[test]
    fn files_moves_and_unfiles_objects() {
        let index = Index::new(by_app);
        index.apply(&watcher::Event::Apply(pod("a", "p1", "web")));
        index.apply(&watcher::Event::Apply(pod("a", "p2", "web")));
        index.apply(&watcher::Event::Apply(pod("b", "p3", "web")));
        assert_eq!(names(&index, "a/app=web"), ["p1", "p2"]);
        assert_eq!(index.get("b/app=web")[0].namespace.as_deref(), Some("b"));

        // A label change moves the pod; a delete unfiles it; empty keys disappear.
        index.apply(&watcher::Event::Apply(pod("a", "p2", "db")));
        assert_eq!(names(&index, "a/app=web"), ["p1"]);
        assert_eq!(names(&index, "a/app=db"), ["p2"]);
        index.apply(&watcher::Event::Delete(pod("a", "p2", "db")));
        assert!(index.get("a/app=db").is_empty());
        assert_eq!(index.key_count(), 2);
    }

    #[test]
    fn a_relist_replaces_the_index_when_it_completes() {
        let index = Index::new(by_app);
        index.apply(&watcher::Event::Apply(pod("a", "gone", "web")));
        index.apply(&watcher::Event::Init);
        index.apply(&watcher::Event::InitApply(pod("a", "kept", "web")));
        // Until the relist completes, the index still answers with what it had.
        assert_eq!(names(&index, "a/app=web"), ["gone"]);
        index.apply(&watcher::Event::InitDone);
        assert_eq!(names(&index, "a/app=web"), ["kept"]);
    }

    #[test]
    fn ids_and_keys_are_stored_once() {
        let index = Index::new(by_app);
        for name in ["p1", "p2", "p3"] {
            index.apply(&watcher::Event::Apply(pod("a", name, "web")));
        }
        // A change re-files the pod under the key already stored.
        index.apply(&watcher::Event::Apply(pod("a", "p2", "web")));
        let state = index.state.read().expect("the state");
        let (key, ids) = state.by_key.get_key_value("a/app=web").expect("filed");
        assert_eq!(state.keys.len(), 3);
        for (id, keys) in &state.keys {
            assert!(
                Arc::ptr_eq(&keys[0], key),
                "{id}: its key is the shared one"
            );
            let filed = ids.get(&**id).expect("filed under its key");
            assert!(Arc::ptr_eq(filed, id), "{id}: one copy of its id");
        }
    }

    #[test]
    fn cluster_scoped_objects_have_no_namespace() {
        use k8s_openapi::api::core::v1::Namespace;
        let index = Index::<Namespace>::new(|_| vec!["all".into()]);
        index.apply(&watcher::Event::Apply(Namespace {
            metadata: ObjectMeta {
                name: Some("shop".into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        }));
        let refs = index.get("all");
        assert_eq!(refs[0].name, "shop");
        assert_eq!(refs[0].namespace, None);
    }
}
