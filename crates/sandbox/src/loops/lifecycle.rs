//! Control-plane loops that the API server itself (or kube-controller-manager) runs and that
//! clients rely on: namespace termination, CRD instance cleanup, and the ownerReference garbage
//! collector (background, foreground and orphan propagation).
//!
//! They run after writes, in the server process: a look under the read lock finds work, and only
//! then the write lock is taken, so a busy store with nothing to clean up is not slowed down. The
//! garbage collector keeps the graph of owners and dependents between passes ([`Dependents`]),
//! as kube-controller-manager's does, so a deletion costs a lookup of its dependents, not a scan
//! of the store: pods deleted by the hundred a second leave the server's latency alone.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Value, json};

use super::Loops;
use crate::registry::crd::CLEANUP_FINALIZER;
use crate::registry::meta;
use crate::registry::ops::{self, DeleteOptions, FOREGROUND_FINALIZER, ORPHAN_FINALIZER};
use crate::registry::resources::ResourceInfo;
use crate::registry::store::{Event, EventType, State, Store, Stored};

/// One pass of the lifecycle loops over the events since the previous one. `root_ca` is the PEM
/// bundle new namespaces get in their `kube-root-ca.crt` ConfigMap; `dependents` is the
/// garbage collector's graph, kept from pass to pass.
pub fn pass(
    store: &Store,
    loops: Loops,
    root_ca: &str,
    dependents: &mut Dependents,
    events: Option<&[Event]>,
) {
    match events {
        Some(events) if dependents.built => dependents.absorb(events),
        // The first pass, or the log no longer reaches back: built again from what is stored.
        _ => dependents.rebuild(&store.read()),
    }
    sweep(
        store,
        loops,
        root_ca,
        dependents,
        &Triggers::from_events(events),
    );
}

/// Which stored objects name each owner uid in their ownerReferences: the garbage collector's
/// dependency graph, updated from the store's events.
#[derive(Debug, Default)]
pub struct Dependents {
    by_owner: HashMap<String, HashSet<DependentKey>>,
    built: bool,
}

/// A dependent: storage key, namespace, name. Read back from the store when used, so an entry
/// a missed update left behind costs a lookup and decides nothing.
type DependentKey = (Arc<str>, String, String);

impl Dependents {
    fn rebuild(&mut self, state: &State) {
        self.by_owner.clear();
        for key in state.storage_keys() {
            for obj in state.range(&key, None, None) {
                self.add(&key, obj);
            }
        }
        self.built = true;
    }

    fn absorb(&mut self, events: &[Event]) {
        for e in events {
            if let Some(previous) = &e.previous {
                self.remove(&e.storage_key, previous);
            }
            match e.kind {
                EventType::Deleted => self.remove(&e.storage_key, &e.object),
                EventType::Added | EventType::Modified => self.add(&e.storage_key, &e.object),
            }
        }
    }

    fn add(&mut self, key: &Arc<str>, obj: &Stored) {
        for uid in owner_uids(&obj.value) {
            self.by_owner.entry(uid).or_default().insert((
                key.clone(),
                obj.namespace().to_owned(),
                obj.name().to_owned(),
            ));
        }
    }

    fn remove(&mut self, key: &Arc<str>, obj: &Stored) {
        for uid in owner_uids(&obj.value) {
            if let Entry::Occupied(mut entry) = self.by_owner.entry(uid) {
                entry.get_mut().remove(&(
                    key.clone(),
                    obj.namespace().to_owned(),
                    obj.name().to_owned(),
                ));
                if entry.get().is_empty() {
                    entry.remove();
                }
            }
        }
    }

    /// The stored objects that name `uid` as an owner.
    fn of(&self, uid: &str, state: &State) -> Vec<(Arc<str>, Arc<Stored>)> {
        self.by_owner
            .get(uid)
            .into_iter()
            .flatten()
            .filter_map(|(key, ns, name)| Some((key.clone(), state.get(key, ns, name)?)))
            .collect()
    }
}

/// What the events since the last pass call for.
#[derive(Debug, Default)]
pub struct Triggers {
    /// `None`: the log no longer reaches back, so the garbage collector looks at everything.
    gc: Option<GcTriggers>,
    /// Namespaces created since the last pass.
    new_namespaces: Vec<String>,
}

/// What the garbage collector must look at, from the events since its last pass. Looking only
/// here keeps a busy store with ownerReferences (EndpointSlices, ReplicaSets…) from being
/// rescanned on every write.
#[derive(Debug, Default)]
struct GcTriggers {
    /// Objects whose ownerReferences are new or changed: are their owners there?
    new_refs: Vec<(Arc<str>, Arc<Stored>)>,
    /// Uids of deleted objects: their dependents may now be orphans.
    deleted_uids: HashSet<String>,
    /// Owner references of deleted objects: a foreground owner may now be free to go.
    deleted_dependents_owners: Vec<(String, Value)>,
    /// Objects being deleted with the foreground or orphan finalizer.
    propagating: Vec<(Arc<str>, Arc<Stored>)>,
}

fn has_gc_finalizer(obj: &Value) -> bool {
    meta::finalizers(obj)
        .iter()
        .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER)
}

impl Triggers {
    fn from_events(events: Option<&[Event]>) -> Self {
        let Some(events) = events else {
            return Self {
                gc: None,
                new_namespaces: Vec::new(),
            };
        };
        let mut gc = GcTriggers::default();
        for e in events {
            let obj = &e.object.value;
            let refs = obj.pointer("/metadata/ownerReferences");
            match e.kind {
                EventType::Deleted => {
                    gc.deleted_uids
                        .insert(meta::meta_str(obj, "uid").to_owned());
                    for r in refs.and_then(Value::as_array).into_iter().flatten() {
                        gc.deleted_dependents_owners
                            .push((e.object.namespace().to_owned(), r.clone()));
                    }
                }
                EventType::Added | EventType::Modified => {
                    let before = e
                        .previous
                        .as_ref()
                        .and_then(|p| p.value.pointer("/metadata/ownerReferences"));
                    if refs.is_some() && refs != before {
                        gc.new_refs.push((e.storage_key.clone(), e.object.clone()));
                    }
                    if meta::is_deleting(obj) && has_gc_finalizer(obj) {
                        gc.propagating
                            .push((e.storage_key.clone(), e.object.clone()));
                    }
                }
            }
        }
        let new_namespaces = events
            .iter()
            .filter(|e| e.kind == EventType::Added && &*e.storage_key == "/namespaces")
            .map(|e| e.object.name().to_owned())
            .collect();
        Self {
            gc: Some(gc),
            new_namespaces,
        }
    }
}

/// One pass over the store; returns whether it changed anything.
fn sweep(
    store: &Store,
    loops: Loops,
    root_ca: &str,
    dependents: &Dependents,
    triggers: &Triggers,
) -> bool {
    let work = find_work(&store.read(), loops, dependents, triggers);
    if work.is_empty() {
        return false;
    }
    store.write(|state| do_work(state, root_ca, &work));
    true
}

#[derive(Debug, Default)]
struct Work {
    /// New namespaces to give their `default` ServiceAccount and root CA ConfigMap.
    new_namespaces: Vec<String>,
    terminating_namespaces: Vec<String>,
    deleting_crds: Vec<Arc<Stored>>,
    /// Dependents to delete: every owner is gone.
    orphaned: Vec<(Arc<str>, Arc<Stored>)>,
    /// Dependents whose references to gone owners must be dropped (other owners remain).
    dangling: Vec<(Arc<str>, Arc<Stored>, HashSet<String>)>,
    /// Owners being deleted in the foreground or with orphaning, with their storage keys.
    propagating: Vec<(Arc<str>, Arc<Stored>)>,
}

impl Work {
    fn is_empty(&self) -> bool {
        self.new_namespaces.is_empty()
            && self.terminating_namespaces.is_empty()
            && self.deleting_crds.is_empty()
            && self.orphaned.is_empty()
            && self.dangling.is_empty()
            && self.propagating.is_empty()
    }
}

fn find_work(state: &State, loops: Loops, dependents: &Dependents, triggers: &Triggers) -> Work {
    let mut work = Work::default();
    if loops.namespace_lifecycle {
        work.new_namespaces = triggers
            .new_namespaces
            .iter()
            .filter(|ns| {
                state
                    .get("/namespaces", "", ns)
                    .is_some_and(|n| !meta::is_deleting(&n.value))
            })
            .filter(|ns| {
                state.get("/serviceaccounts", ns, "default").is_none()
                    || state.get("/configmaps", ns, ROOT_CA_CONFIGMAP).is_none()
            })
            .cloned()
            .collect();
        work.terminating_namespaces = state
            .range("/namespaces", None, None)
            .filter(|n| meta::is_deleting(&n.value))
            .map(|n| n.name().to_owned())
            .collect();
    }
    work.deleting_crds = state
        .range("apiextensions.k8s.io/customresourcedefinitions", None, None)
        .filter(|c| meta::is_deleting(&c.value))
        .cloned()
        .collect();
    if loops.garbage_collector {
        match &triggers.gc {
            None => find_all_gc_work(state, &mut work),
            Some(gc) => find_gc_work(state, dependents, gc, &mut work),
        }
    }
    work
}

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|o| o.get("uid").and_then(Value::as_str))
        .map(str::to_owned)
        .collect()
}

/// Resolves an ownerReference to the live owner's uid: `Some(true)` present, `Some(false)` gone,
/// `None` when its kind is not served (then nothing is decided, as the real collector does).
fn owner_present(state: &State, dependent_ns: &str, owner: &Value) -> Option<bool> {
    let api_version = owner.get("apiVersion").and_then(Value::as_str)?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let kind = owner.get("kind").and_then(Value::as_str)?;
    let info = state.registry.by_kind(group, version, kind)?;
    let ns = if info.namespaced { dependent_ns } else { "" };
    let name = owner.get("name").and_then(Value::as_str)?;
    let uid = owner.get("uid").and_then(Value::as_str)?;
    Some(
        state
            .get(&info.storage_key, ns, name)
            .is_some_and(|o| meta::meta_str(&o.value, "uid") == uid),
    )
}

/// Sorts a dependent into orphaned (every owner gone) or dangling (some gone).
fn classify(state: &State, key: &Arc<str>, obj: &Arc<Stored>, work: &mut Work) {
    let refs: Vec<&Value> = obj
        .value
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    if refs.is_empty() {
        return;
    }
    let gone: HashSet<String> = refs
        .iter()
        .filter(|r| owner_present(state, obj.namespace(), r) == Some(false))
        .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_owned))
        .collect();
    if gone.is_empty() {
        return;
    }
    if gone.len() == refs.len() {
        if !meta::is_deleting(&obj.value) {
            work.orphaned.push((key.clone(), obj.clone()));
        }
    } else {
        work.dangling.push((key.clone(), obj.clone(), gone));
    }
}

/// The garbage collector's work as the recent events call for it.
fn find_gc_work(state: &State, dependents: &Dependents, gc: &GcTriggers, work: &mut Work) {
    let live = |key: &Arc<str>, obj: &Stored| state.get(key, obj.namespace(), obj.name());
    for (key, obj) in &gc.new_refs {
        if let Some(current) = live(key, obj) {
            classify(state, key, &current, work);
        }
    }
    // Dependents of what was deleted, each once (it may have lost several owners).
    let mut seen = HashSet::new();
    for uid in &gc.deleted_uids {
        for (key, obj) in dependents.of(uid, state) {
            if seen.insert((
                key.clone(),
                obj.namespace().to_owned(),
                obj.name().to_owned(),
            )) {
                classify(state, &key, &obj, work);
            }
        }
    }
    for (key, obj) in &gc.propagating {
        if let Some(current) =
            live(key, obj).filter(|o| meta::is_deleting(&o.value) && has_gc_finalizer(&o.value))
        {
            work.propagating.push((key.clone(), current));
        }
    }
    // A dependent went away: its foreground owners may now be released.
    for (ns, owner) in &gc.deleted_dependents_owners {
        let Some((key, current)) = resolve_owner(state, ns, owner) else {
            continue;
        };
        if meta::is_deleting(&current.value) && has_gc_finalizer(&current.value) {
            work.propagating.push((key, current));
        }
    }
}

fn resolve_owner(
    state: &State,
    dependent_ns: &str,
    owner: &Value,
) -> Option<(Arc<str>, Arc<Stored>)> {
    let api_version = owner.get("apiVersion").and_then(Value::as_str)?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    let info =
        state
            .registry
            .by_kind(group, version, owner.get("kind").and_then(Value::as_str)?)?;
    let ns = if info.namespaced { dependent_ns } else { "" };
    let obj = state.get(
        &info.storage_key,
        ns,
        owner.get("name").and_then(Value::as_str)?,
    )?;
    Some((info.storage_key.clone(), obj))
}

/// Every object checked: after the event log was compacted past this loop's cursor.
fn find_all_gc_work(state: &State, work: &mut Work) {
    // uid → namespace of every live object, to tell which owners exist.
    let mut alive: HashMap<String, String> = HashMap::new();
    let mut with_owners = Vec::new();
    for key in state.storage_keys() {
        for obj in state.range(&key, None, None) {
            alive.insert(
                meta::meta_str(&obj.value, "uid").to_owned(),
                obj.namespace().to_owned(),
            );
            if obj.value.pointer("/metadata/ownerReferences").is_some() {
                with_owners.push((key.clone(), obj.clone()));
            }
            let finalizers = meta::finalizers(&obj.value);
            if meta::is_deleting(&obj.value)
                && finalizers
                    .iter()
                    .any(|f| f == FOREGROUND_FINALIZER || f == ORPHAN_FINALIZER)
            {
                work.propagating.push((key.clone(), obj.clone()));
            }
        }
    }
    for (key, obj) in with_owners {
        let owners = owner_uids(&obj.value);
        // A namespaced owner only counts in the dependent's own namespace.
        let gone: HashSet<String> = owners
            .iter()
            .filter(|uid| {
                alive
                    .get(*uid)
                    .is_none_or(|ns| !ns.is_empty() && ns != obj.namespace())
            })
            .cloned()
            .collect();
        if gone.is_empty() {
            continue;
        }
        if gone.len() == owners.len() {
            if !meta::is_deleting(&obj.value) {
                work.orphaned.push((key, obj));
            }
        } else {
            work.dangling.push((key, obj, gone));
        }
    }
}

/// The served resource to act through for a storage key (its storage version).
fn info_for(state: &State, storage_key: &str) -> Option<Arc<ResourceInfo>> {
    let infos = state.registry.by_storage_key(storage_key);
    infos
        .iter()
        .find(|i| i.api_version() == i.storage_api_version)
        .or(infos.first())
        .cloned()
}

fn delete_quietly(state: &mut State, storage_key: &str, obj: &Stored) {
    if let Some(info) = info_for(state, storage_key) {
        // NotFound and Conflict just mean someone else got there first.
        let _ = ops::delete(
            state,
            &info,
            obj.namespace(),
            obj.name(),
            &DeleteOptions::default(),
        );
    }
}

fn do_work(state: &mut State, root_ca: &str, work: &Work) {
    for ns in &work.new_namespaces {
        populate_namespace(state, ns, root_ca);
    }
    for ns in &work.terminating_namespaces {
        terminate_namespace(state, ns);
    }
    for crd in &work.deleting_crds {
        clean_up_crd(state, crd);
    }
    for (key, obj) in &work.orphaned {
        delete_quietly(state, key, obj);
    }
    for (key, obj, gone) in &work.dangling {
        drop_owner_refs(state, key, obj, gone);
    }
    for (key, owner) in &work.propagating {
        propagate(state, key, owner);
    }
}

/// The ConfigMap holding the cluster's CA bundle, published into every namespace.
pub const ROOT_CA_CONFIGMAP: &str = "kube-root-ca.crt";

/// What kube-controller-manager puts in every new namespace: a `default` ServiceAccount and the
/// root CA ConfigMap. Clients see them on real clusters, so tests must see them here too.
fn populate_namespace(state: &mut State, ns: &str, root_ca: &str) {
    let opts = ops::WriteOptions {
        field_manager: "kube-controller-manager".into(),
        ..Default::default()
    };
    let objects = [
        (
            "serviceaccounts",
            json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": ns}}),
        ),
        (
            "configmaps",
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": ROOT_CA_CONFIGMAP, "namespace": ns},
                   "data": {"ca.crt": root_ca}}),
        ),
    ];
    for (resource, body) in objects {
        if let Some(info) = state.registry.get("", "v1", resource) {
            // AlreadyExists just means it was made before.
            let _ = ops::create(state, &info, ns, body, &opts);
        }
    }
}

/// The CA bundle of a sandbox serving plain HTTP: a placeholder, since no client verifies it.
pub const PLAIN_HTTP_CA_PEM: &str = "-----BEGIN CERTIFICATE-----\nvigil-sandbox serves plain HTTP on loopback; no CA is used\n-----END CERTIFICATE-----\n";

fn namespaced_keys(state: &State) -> Vec<Arc<str>> {
    state
        .storage_keys()
        .into_iter()
        .filter(|k| info_for(state, k).is_some_and(|i| i.namespaced))
        .collect()
}

fn terminate_namespace(state: &mut State, ns: &str) {
    let mut remaining = 0;
    for key in namespaced_keys(state) {
        let objects: Vec<Arc<Stored>> = state.range(&key, Some(ns), None).cloned().collect();
        remaining += objects.len();
        for obj in objects.iter().filter(|o| !meta::is_deleting(&o.value)) {
            delete_quietly(state, &key, obj);
        }
    }
    if remaining > 0 {
        return;
    }
    let Some(namespace) = state.get("/namespaces", "", ns) else {
        return;
    };
    let mut obj = namespace.value.clone();
    if let Some(Value::Object(spec)) = obj.get_mut("spec") {
        spec.remove("finalizers");
    }
    if meta::finalizers(&obj).is_empty() {
        state.remove_as("/namespaces", "", ns, Some(obj));
    } else if obj != namespace.value {
        state.put("/namespaces", obj);
    }
}

fn clean_up_crd(state: &mut State, crd: &Stored) {
    let group = crd
        .value
        .pointer("/spec/group")
        .and_then(Value::as_str)
        .unwrap_or("");
    let plural = crd
        .value
        .pointer("/spec/names/plural")
        .and_then(Value::as_str)
        .unwrap_or("");
    let key = format!("{group}/{plural}");
    let objects: Vec<Arc<Stored>> = state.range(&key, None, None).cloned().collect();
    for obj in objects.iter().filter(|o| !meta::is_deleting(&o.value)) {
        delete_quietly(state, &key, obj);
    }
    let Some(live) = state.get(
        "apiextensions.k8s.io/customresourcedefinitions",
        "",
        crd.name(),
    ) else {
        return;
    };
    if !objects.is_empty() {
        // Report the Terminating condition while instances remain.
        ops::sync_crd(state, &live.value);
        return;
    }
    let rest: Vec<String> = meta::finalizers(&live.value)
        .into_iter()
        .filter(|f| f != CLEANUP_FINALIZER)
        .collect();
    if rest.is_empty() {
        state.remove(
            "apiextensions.k8s.io/customresourcedefinitions",
            "",
            crd.name(),
        );
        state.registry.set_crd_resources(crd.name(), Vec::new());
    } else if rest.len() != meta::finalizers(&live.value).len() {
        let mut obj = live.value.clone();
        meta::set_meta(&mut obj, "finalizers", json!(rest));
        state.put("apiextensions.k8s.io/customresourcedefinitions", obj);
    }
}

fn drop_owner_refs(state: &mut State, key: &str, obj: &Stored, gone: &HashSet<String>) {
    let Some(live) = state.get(key, obj.namespace(), obj.name()) else {
        return;
    };
    let mut value = live.value.clone();
    if let Some(Value::Array(refs)) = value.pointer_mut("/metadata/ownerReferences") {
        refs.retain(|r| {
            r.get("uid")
                .and_then(Value::as_str)
                .is_none_or(|u| !gone.contains(u))
        });
    }
    if value != live.value {
        state.put(key, value);
    }
}

/// Dependents of an owner: objects whose ownerReferences name its uid.
fn dependents_of(state: &State, owner: &Stored) -> Vec<(Arc<str>, Arc<Stored>)> {
    let uid = meta::meta_str(&owner.value, "uid");
    let ns = owner.namespace();
    let mut out = Vec::new();
    for key in state.storage_keys() {
        let scope = if ns.is_empty() { None } else { Some(ns) };
        for obj in state.range(&key, scope, None) {
            if owner_uids(&obj.value).iter().any(|u| u == uid) {
                out.push((key.clone(), obj.clone()));
            }
        }
    }
    out
}

/// Foreground: delete dependents, then release the owner. Orphan: detach dependents, then release.
fn propagate(state: &mut State, key: &str, owner: &Stored) {
    let Some(live) = state.get(key, owner.namespace(), owner.name()) else {
        return;
    };
    let finalizers = meta::finalizers(&live.value);
    let uid = meta::meta_str(&live.value, "uid").to_owned();
    let dependents = dependents_of(state, &live);
    let mut release = Vec::new();
    if finalizers.iter().any(|f| f == ORPHAN_FINALIZER) {
        let only_this: HashSet<String> = [uid.clone()].into_iter().collect();
        for (dkey, dep) in &dependents {
            drop_owner_refs(state, dkey, dep, &only_this);
        }
        release.push(ORPHAN_FINALIZER);
    }
    if finalizers.iter().any(|f| f == FOREGROUND_FINALIZER) {
        for (dkey, dep) in dependents
            .iter()
            .filter(|(_, d)| !meta::is_deleting(&d.value))
        {
            delete_quietly(state, dkey, dep);
        }
        if dependents_of(state, &live).is_empty() {
            release.push(FOREGROUND_FINALIZER);
        }
    }
    if release.is_empty() {
        return;
    }
    let Some(live) = state.get(key, owner.namespace(), owner.name()) else {
        return;
    };
    let rest: Vec<String> = meta::finalizers(&live.value)
        .into_iter()
        .filter(|f| !release.contains(&f.as_str()))
        .collect();
    let mut value = live.value.clone();
    meta::set_meta(
        &mut value,
        "finalizers",
        if rest.is_empty() {
            Value::Null
        } else {
            json!(rest)
        },
    );
    if rest.is_empty() && meta::is_deleting(&value) {
        state.remove_as(key, owner.namespace(), owner.name(), Some(value));
    } else {
        state.put(key, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// ConfigMap `name` in namespace `ns`, owned by the ConfigMaps `owners`.
    fn cm(name: &str, owners: &[&str]) -> Value {
        let refs: Vec<Value> = owners
            .iter()
            .map(|o| json!({"apiVersion": "v1", "kind": "ConfigMap", "name": o, "uid": format!("uid-{o}")}))
            .collect();
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "namespace": "ns", "name": name, "uid": format!("uid-{name}"), "ownerReferences": refs
        }})
    }

    fn names(dependents: &Dependents, uid: &str, store: &Store) -> Vec<String> {
        let mut names: Vec<String> = dependents
            .of(uid, &store.read())
            .iter()
            .map(|(_, o)| o.name().to_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn the_dependency_graph_follows_the_stores_events() {
        let store = Store::new(100);
        store.write(|s| {
            s.put("/configmaps", cm("a", &[]));
            s.put("/configmaps", cm("b", &["a"]));
        });
        let mut dependents = Dependents::default();
        dependents.rebuild(&store.read());
        assert_eq!(names(&dependents, "uid-a", &store), ["b"]);

        // b changes owner, c and d are new: an owner's dependents are what names it now.
        let cursor = store.read().rv();
        store.write(|s| {
            s.put("/configmaps", cm("b", &["x"]));
            s.put("/configmaps", cm("c", &["a", "x"]));
            s.put("/configmaps", cm("d", &["a"]));
        });
        let events = store.read().all_events_after(cursor).expect("in window");
        dependents.absorb(&events);
        assert_eq!(names(&dependents, "uid-a", &store), ["c", "d"]);
        assert_eq!(names(&dependents, "uid-x", &store), ["b", "c"]);

        // Deleted dependents leave the graph, and an owner with none leaves no entry behind.
        let cursor = store.read().rv();
        store.write(|s| {
            s.remove("/configmaps", "ns", "c");
            s.remove("/configmaps", "ns", "d");
        });
        let events = store.read().all_events_after(cursor).expect("in window");
        dependents.absorb(&events);
        assert!(names(&dependents, "uid-a", &store).is_empty());
        assert!(!dependents.by_owner.contains_key("uid-a"));
        assert_eq!(names(&dependents, "uid-x", &store), ["b"]);
    }
}
