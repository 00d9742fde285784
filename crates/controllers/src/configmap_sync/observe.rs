//! What a reconcile reads of the caches: the objects one decision needs (found through the
//! indexes, not by scanning the cluster's ConfigMaps), and the mappers that turn a ConfigMap,
//! Secret or namespace change into the ConfigMapSyncs it concerns.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::SyncedKind;
use vigil_runtime::cache::Cache;
use vigil_runtime::index::Index;

use super::cache::{self, Copied};
use super::model::{ConfigMapView, Inputs, NamespaceView, OWNER_ANNOTATION, Settings, SyncView};

/// The caches every reconcile reads.
#[derive(Clone)]
pub(super) struct Caches {
    pub syncs: Store<ConfigMapSync>,
    /// ConfigMapSyncs by the name of their ConfigMap.
    sync_index: Index<ConfigMapSync>,
    config_maps: Store<ConfigMap>,
    /// ConfigMaps by name and by owning ConfigMapSync.
    config_map_index: Index<ConfigMap>,
    /// Secrets by name and owner, when the operator copies Secrets.
    secrets: Option<(Store<Secret>, Index<Secret>)>,
    namespaces: Store<Namespace>,
}

impl Caches {
    pub fn new(
        syncs: &Cache<ConfigMapSync>,
        config_maps: &Cache<ConfigMap>,
        namespaces: &Cache<Namespace>,
        secrets: Option<&Cache<Secret>>,
    ) -> Self {
        Self {
            syncs: syncs.store().clone(),
            sync_index: syncs.index().clone(),
            config_maps: config_maps.store().clone(),
            config_map_index: config_maps.index().clone(),
            secrets: secrets.map(|s| (s.store().clone(), s.index().clone())),
            namespaces: namespaces.store().clone(),
        }
    }

    /// Whether Secrets are watched (`--configmapsync-secrets`).
    pub fn has_secrets(&self) -> bool {
        self.secrets.is_some()
    }

    /// The trigger mapper of a ConfigMap (or Secret): the ConfigMapSyncs naming it (as source, or
    /// as the name of their copies: a foreign object appearing at a destination), and the one
    /// owning it.
    pub fn mapper_for_object<K: kube::Resource>(
        &self,
    ) -> impl Fn(K) -> Vec<ObjectRef<ConfigMapSync>> + Send + Sync + 'static {
        let index = self.sync_index.clone();
        move |obj: K| syncs_for_object(&index, &obj)
    }

    /// The trigger mapper of a namespace (see [`syncs_for_namespace`]).
    pub fn mapper_for_namespace(
        &self,
    ) -> impl Fn(Namespace) -> Vec<ObjectRef<ConfigMapSync>> + Send + Sync + 'static {
        let syncs = self.syncs.clone();
        move |ns: Namespace| syncs_for_namespace(&syncs, &ns.name_any())
    }

    /// The cached objects a decision for `sync` reads: those named like its source, and its
    /// copies (from the index, not a scan) — ConfigMaps, or Secrets for `kind: Secret`.
    pub fn relevant(&self, sync: &SyncView) -> Vec<ConfigMapView> {
        match (sync.spec.kind(), &self.secrets) {
            (SyncedKind::ConfigMap, _) => gather(&self.config_maps, &self.config_map_index, sync),
            (SyncedKind::Secret, Some((store, index))) => gather(store, index, sync),
            // Secrets are not watched: the decision reports it.
            (SyncedKind::Secret, None) => Vec::new(),
        }
    }

    /// Everything one decision for `sync` reads, from the caches.
    pub fn observe(&self, sync: &ConfigMapSync) -> Observed {
        let this = view(sync);
        let config_maps = self.relevant(&this);
        let source = config_maps
            .iter()
            .find(|c| {
                c.namespace == this.spec.source_namespace && c.name == this.spec.config_map_name
            })
            .cloned();
        let namespaces = self
            .namespaces
            .state()
            .iter()
            .map(|n| (n.name_any(), cache::namespace_view(n)))
            .collect();
        // Whether the owners of the ConfigMaps found still exist (another's copy or an orphan).
        let live_syncs = config_maps
            .iter()
            .filter_map(|c| c.owner.as_deref())
            .filter(|owner| {
                owner.split_once('/').is_some_and(|(ns, name)| {
                    self.syncs.get(&ObjectRef::new(name).within(ns)).is_some()
                })
            })
            .map(str::to_owned)
            .collect();
        Observed {
            sync: this,
            source,
            namespaces,
            config_maps,
            live_syncs,
        }
    }
}

/// What [`Caches::observe`] found: the owned data an [`Inputs`] borrows.
pub(super) struct Observed {
    pub sync: SyncView,
    pub source: Option<ConfigMapView>,
    pub namespaces: BTreeMap<String, NamespaceView>,
    pub config_maps: Vec<ConfigMapView>,
    pub live_syncs: BTreeSet<String>,
}

impl Observed {
    /// A ConfigMapSync being deleted: only its own copies (plus `listed`, found by the API)
    /// matter.
    pub fn for_cleanup(sync: SyncView, config_maps: Vec<ConfigMapView>) -> Self {
        Self {
            sync,
            source: None,
            namespaces: BTreeMap::new(),
            config_maps,
            live_syncs: BTreeSet::new(),
        }
    }

    /// The decision's inputs, at `now`.
    pub fn inputs<'a>(&'a self, settings: &'a Settings, now: Timestamp) -> Inputs<'a> {
        Inputs {
            sync: &self.sync,
            source: self.source.as_ref(),
            namespaces: &self.namespaces,
            config_maps: &self.config_maps,
            live_syncs: &self.live_syncs,
            now,
            settings,
        }
    }
}

/// A ConfigMapSync as the decision sees it.
pub(super) fn view(sync: &ConfigMapSync) -> SyncView {
    SyncView {
        namespace: sync.namespace().unwrap_or_default(),
        name: sync.name_any(),
        generation: sync.metadata.generation,
        spec: sync.spec.clone(),
        status: sync.status.clone(),
    }
}

fn gather<K: Copied>(store: &Store<K>, index: &Index<K>, sync: &SyncView) -> Vec<ConfigMapView> {
    let mut refs = index.get(&cache::name_key(&sync.spec.config_map_name));
    for copy in index.get(&cache::owner_key(&sync.key())) {
        if !refs.contains(&copy) {
            refs.push(copy);
        }
    }
    refs.iter()
        .filter_map(|r| store.get(r))
        .map(|obj| obj.view())
        .collect()
}

/// A ConfigMap concerns the ConfigMapSyncs naming it (as source, or as the name of their copies:
/// a foreign ConfigMap appearing at a destination), and the one owning it.
fn syncs_for_object<K: kube::Resource>(
    index: &Index<ConfigMapSync>,
    cm: &K,
) -> Vec<ObjectRef<ConfigMapSync>> {
    let mut out = index.get(&cache::name_key(&cm.name_any()));
    if let Some((ns, name)) = cm
        .annotations()
        .get(OWNER_ANNOTATION)
        .and_then(|o| o.split_once('/'))
    {
        let owner = ObjectRef::new(name).within(ns);
        if !out.contains(&owner) {
            out.push(owner);
        }
    }
    out
}

/// A namespace concerns the ConfigMapSyncs naming it, selecting namespaces, or listing it in
/// their status (it may just have stopped matching), and those living in it.
fn syncs_for_namespace(syncs: &Store<ConfigMapSync>, ns: &str) -> Vec<ObjectRef<ConfigMapSync>> {
    syncs
        .state()
        .iter()
        .filter(|s| {
            let spec = &s.spec;
            spec.namespace_selector.is_some()
                || spec.source_namespace == ns
                || spec.destination_namespace == ns
                || spec.destination_namespaces.iter().any(|d| d == ns)
                || s.namespace().as_deref() == Some(ns)
                || s.status
                    .iter()
                    .flat_map(|st| st.destinations.iter())
                    .any(|d| d.namespace == ns)
        })
        .map(|s| ObjectRef::from_obj(s.as_ref()))
        .collect()
}
