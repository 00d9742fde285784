//! What one reconcile observes: the caches (lean, indexed), the look-ups that gather a
//! CriticalService's decision inputs from them by index (never a scan of a whole cache), and the
//! trigger mappers from Service, pod, EndpointSlice, PodTemplate and workload (ReplicaSet,
//! StatefulSet) changes to the CriticalServices they concern.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use k8s_openapi::api::core::v1::PodTemplate;
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};
use vigil_apis::CriticalService;
use vigil_apis::critical_service::CriticalServiceStatus;
use vigil_runtime::compact::{self, CompactStore};
use vigil_runtime::index::Index;

use super::cache::{
    self, CachedPod, CachedService, CachedSlice, Labels, PodEntry, SliceEntry, Sources,
    WorkloadEntry,
};
use super::decide::{covers, decide};
use super::fallback::fallback_pod_name;
use super::model::{
    CRITICAL_SERVICE_LABEL, CriticalServiceView, Inputs, Plan, PodView, SERVICE_LABEL, ServiceView,
    Settings, SliceView, TemplateKey, TemplateLookup,
};

/// The caches every reconcile reads, with their indexes (see `cache` for the keys): reconciles
/// and event mappers look objects up by key, never scan a whole cache. Cheap to clone (shared
/// handles).
#[derive(Clone)]
pub(super) struct Caches {
    pub(super) crs: Store<CriticalService>,
    pub(super) services: Store<CachedService>,
    /// Pods are most of a cluster: kept as compact entries, not objects.
    pub(super) pods: CompactStore<PodEntry>,
    pub(super) slices: CompactStore<SliceEntry>,
    pub(super) templates: Store<PodTemplate>,
    pub(super) replica_sets: CompactStore<WorkloadEntry>,
    pub(super) stateful_sets: CompactStore<WorkloadEntry>,
    pub(super) cr_index: Index<CriticalService>,
    pub(super) service_index: Index<CachedService>,
    pub(super) pod_index: Index<CachedPod>,
    pub(super) slice_index: Index<CachedSlice>,
}

impl Caches {
    /// The look-up handles of the controller's caches.
    pub(super) fn new(sources: &Sources) -> Self {
        Self {
            crs: sources.crs.store().clone(),
            services: sources.services.store().clone(),
            pods: sources.pods.store().clone(),
            slices: sources.slices.store().clone(),
            templates: sources.templates.store().clone(),
            replica_sets: sources.replica_sets.store().clone(),
            stateful_sets: sources.stateful_sets.store().clone(),
            cr_index: sources.crs.index().clone(),
            service_index: sources.services.index().clone(),
            pod_index: sources.pods.index().clone(),
            slice_index: sources.slices.index().clone(),
        }
    }
}

/// Trigger mapper: a Service change concerns the CriticalServices covering it or listing it.
pub(super) fn for_service(
    caches: Caches,
    settings: Settings,
) -> impl Fn(CachedService) -> Vec<ObjectRef<CriticalService>> + Send + Sync + 'static {
    move |svc| crs_covering(&caches, &settings, &cache::service_view(&svc))
}

/// Trigger mapper for pods (see [`crs_for_pod`]).
pub(super) fn for_pod(
    caches: Caches,
    settings: Settings,
) -> impl Fn(CachedPod) -> Vec<ObjectRef<CriticalService>> + Send + Sync + 'static {
    move |pod| crs_for_pod(&caches, &settings, &pod)
}

/// Trigger mapper for EndpointSlices (see [`crs_for_slice`]).
pub(super) fn for_slice(
    caches: Caches,
    settings: Settings,
) -> impl Fn(CachedSlice) -> Vec<ObjectRef<CriticalService>> + Send + Sync + 'static {
    move |slice| crs_for_slice(&caches, &settings, &slice)
}

/// Trigger mapper for PodTemplates (see [`crs_using_template`]).
pub(super) fn for_template(
    caches: Caches,
    settings: Settings,
) -> impl Fn(PodTemplate) -> Vec<ObjectRef<CriticalService>> + Send + Sync + 'static {
    move |t| crs_using_template(&caches.crs, &settings, &t)
}

/// Trigger mapper for a workload of `kind` (see [`crs_for_workload`]).
pub(super) fn for_workload<K>(
    caches: Caches,
    settings: Settings,
    kind: &'static str,
) -> impl Fn(K) -> Vec<ObjectRef<CriticalService>> + Send + Sync + 'static
where
    K: kube::Resource,
{
    move |workload| crs_for_workload(&caches, &settings, kind, &workload)
}

/// A workload's change (a Deployment scaled to zero sets its ReplicaSet's replicas to 0)
/// concerns the CriticalServices covering the Services that select its pods being deleted: the
/// watch may bring the deletion before the change, and a Service then waiting for a
/// replacement learns that none is coming. Other workloads (most events) find no such pod.
pub(super) fn crs_for_workload<K: kube::Resource>(
    caches: &Caches,
    settings: &Settings,
    kind: &str,
    workload: &K,
) -> Vec<ObjectRef<CriticalService>> {
    let ns = workload.namespace().unwrap_or_default();
    let key = cache::deleted_under_key(&ns, kind, &workload.name_any());
    let mut out: HashSet<ObjectRef<CriticalService>> = HashSet::new();
    for r in caches.pod_index.get(&key) {
        if let Some(pod) = caches.pods.get(&compact::key(Some(&ns), &r.name)) {
            for svc in services_selecting(caches, &ns, &pod.labels) {
                out.extend(crs_covering(caches, settings, &cache::service_view(&svc)));
            }
        }
    }
    out.into_iter().collect()
}

/// The replicas the workload of a pod being deleted wants now, when Vigil caches that workload
/// (its uid checked: a workload re-created under the same name is another one).
fn controller_wants(caches: &Caches, namespace: &str, pod: &PodEntry) -> Option<i32> {
    let owner = pod.controller()?;
    let workloads = match &*owner.kind {
        cache::REPLICA_SET => &caches.replica_sets,
        cache::STATEFUL_SET => &caches.stateful_sets,
        _ => return None,
    };
    workloads
        .get(&compact::key(Some(namespace), &owner.name))
        .filter(|w| w.uid == owner.uid)
        .map(|w| w.replicas)
}

pub(super) fn view(cr: &CriticalService) -> CriticalServiceView {
    CriticalServiceView {
        name: cr.name_any(),
        uid: cr.uid().unwrap_or_default(),
        generation: cr.metadata.generation,
        spec: cr.spec.clone(),
        status: cr.status.clone(),
    }
}

/// The CriticalServices a change to `service` concerns: those covering it now, and those whose
/// status still lists it (it may just have stopped matching: they must retire its fallback).
pub(super) fn crs_covering(
    caches: &Caches,
    settings: &Settings,
    service: &ServiceView,
) -> Vec<ObjectRef<CriticalService>> {
    let mut candidates: HashSet<ObjectRef<CriticalService>> = service
        .labels
        .iter()
        .flat_map(|(k, v)| caches.cr_index.get(&cache::match_label_key(k, v)))
        .collect();
    let listed = caches
        .cr_index
        .get(&cache::listed_key(&service.namespace, &service.name));
    candidates.retain(|r| {
        caches
            .crs
            .get(r)
            .is_some_and(|cr| covers(&cr.spec, service, settings))
    });
    candidates.extend(listed);
    candidates.into_iter().collect()
}

/// The cached Services whose selector selects a pod with these labels.
fn services_selecting(
    caches: &Caches,
    namespace: &str,
    labels: &Labels,
) -> Vec<Arc<CachedService>> {
    let refs: HashSet<ObjectRef<CachedService>> = labels
        .iter()
        .flat_map(|(k, v)| {
            caches
                .service_index
                .get(&cache::selector_key(namespace, k, v))
        })
        .collect();
    refs.into_iter()
        .filter_map(|r| caches.services.get(&r))
        .filter(|svc| !svc.selector.is_empty() && labels.selected_by(svc.selector.iter()))
        .collect()
}

/// A pod concerns the CriticalServices covering the Services that select it, and the one whose
/// fallback it is.
pub(super) fn crs_for_pod(
    caches: &Caches,
    settings: &Settings,
    pod: &CachedPod,
) -> Vec<ObjectRef<CriticalService>> {
    let ns = pod.namespace().unwrap_or_default();
    let labels = &pod.labels;
    let mut out: HashSet<ObjectRef<CriticalService>> = HashSet::new();
    if let Some(owner) = labels.get(CRITICAL_SERVICE_LABEL) {
        out.insert(ObjectRef::new(owner));
    }
    for svc in services_selecting(caches, &ns, labels) {
        out.extend(crs_covering(caches, settings, &cache::service_view(&svc)));
    }
    out.into_iter().collect()
}

pub(super) fn crs_for_slice(
    caches: &Caches,
    settings: &Settings,
    slice: &CachedSlice,
) -> Vec<ObjectRef<CriticalService>> {
    let Some(name) = slice.service.as_deref() else {
        return Vec::new();
    };
    let ns = slice.namespace().unwrap_or_default();
    let key = ObjectRef::<CachedService>::new(name).within(&ns);
    caches
        .services
        .get(&key)
        .map(|svc| crs_covering(caches, settings, &cache::service_view(&svc)))
        .unwrap_or_default()
}

pub(super) fn template_key(cr: &CriticalService, settings: &Settings) -> TemplateKey {
    match &cr.spec.pod_template {
        Some(t) => TemplateKey {
            namespace: t
                .namespace
                .clone()
                .unwrap_or_else(|| settings.default_template.namespace.clone()),
            name: t.name.clone(),
        },
        None => settings.default_template.clone(),
    }
}

pub(super) fn crs_using_template(
    crs: &Store<CriticalService>,
    settings: &Settings,
    template: &PodTemplate,
) -> Vec<ObjectRef<CriticalService>> {
    let key = TemplateKey {
        namespace: template.namespace().unwrap_or_default(),
        name: template.name_any(),
    };
    crs.state()
        .iter()
        .filter(|cr| template_key(cr, settings) == key)
        .map(|cr| ObjectRef::from_obj(cr.as_ref()))
        .collect()
}

pub(super) fn lookup_template(
    caches: &Caches,
    settings: &Settings,
    key: &TemplateKey,
) -> TemplateLookup {
    if settings
        .watched_namespaces
        .as_ref()
        .is_some_and(|w| !w.contains(&key.namespace))
        && key.namespace != settings.default_template.namespace
    {
        return TemplateLookup::Forbidden(key.clone());
    }
    let reference = ObjectRef::<PodTemplate>::new(&key.name).within(&key.namespace);
    match caches
        .templates
        .get(&reference)
        .and_then(|t| t.template.clone())
    {
        Some(template) => TemplateLookup::Found {
            key: key.clone(),
            template: Box::new(template),
        },
        None => TemplateLookup::NotFound(key.clone()),
    }
}

/// Observes `cr`'s world in the caches (synced: the builder waits for them), deciding from
/// `status` (the status to start from, see `apply::StatusMemo`), and returns the decision.
pub(super) fn observe_and_decide(
    caches: &Caches,
    settings: &Settings,
    cr: &CriticalService,
    status: Option<CriticalServiceStatus>,
) -> Plan {
    let mut this = view(cr);
    this.status = status;
    let observed = observe(caches, settings, cr);
    let template = lookup_template(caches, settings, &template_key(cr, settings));
    decide(&Inputs {
        cr: &this,
        all_crs: &observed.crs,
        services: &observed.services,
        pods: &observed.pods,
        slices: &observed.slices,
        template: &template,
        now: k8s_openapi::jiff::Timestamp::now(),
        settings,
    })
}

/// What one CriticalService's decision reads, gathered through the indexes.
pub(super) struct Observed {
    pub(super) crs: Vec<CriticalServiceView>,
    pub(super) services: Vec<ServiceView>,
    pub(super) pods: Vec<PodView>,
    pub(super) slices: BTreeMap<(String, String), SliceView>,
}

/// The Services `cr` may cover (those carrying its first label), those its status still lists,
/// and those its own fallback pods name, sorted by (namespace, name).
fn services_concerned(
    caches: &Caches,
    cr: &CriticalService,
    own_pods: &[((String, String), Arc<PodEntry>)],
) -> Vec<ServiceView> {
    let mut service_refs: HashSet<ObjectRef<CachedService>> = HashSet::new();
    if let Some(first) = cr.spec.match_labels.first() {
        service_refs.extend(
            caches
                .service_index
                .get(&cache::service_label_key(&first.key, &first.value)),
        );
    }
    for listed in cr.status.iter().flat_map(|s| s.services.iter()) {
        service_refs.insert(ObjectRef::new(&listed.name).within(&listed.namespace));
    }
    for ((ns, _), pod) in own_pods {
        if let Some(service) = pod.labels.get(SERVICE_LABEL) {
            service_refs.insert(ObjectRef::new(service).within(ns));
        }
    }
    let mut services: Vec<ServiceView> = service_refs
        .iter()
        .filter_map(|r| caches.services.get(r))
        .map(|s| cache::service_view(&s))
        .collect();
    services.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    services
}

/// Gathers, by index lookups, everything `decide` reads for `cr`: the Services it may cover or
/// still lists (and those its fallback pods name), the pods those Services select plus anything
/// at their fallback names and this CriticalService's own pods, their EndpointSlices, and the
/// CriticalServices that cover the same Services (to agree on who owns a shared fallback). The
/// decision sees exactly what a whole-cache view would show it for this CriticalService.
pub(super) fn observe(caches: &Caches, settings: &Settings, cr: &CriticalService) -> Observed {
    let name = cr.name_any();
    let pod = |namespace: &str, name: &str| {
        let entry = caches.pods.get(&compact::key(Some(namespace), name))?;
        Some(((namespace.to_owned(), name.to_owned()), entry))
    };
    let own_pods: Vec<((String, String), Arc<PodEntry>)> = caches
        .pod_index
        .get(&cache::fallback_key(&name))
        .iter()
        .filter_map(|r| pod(r.namespace.as_deref().unwrap_or_default(), &r.name))
        .collect();

    let services = services_concerned(caches, cr, &own_pods);
    let mut pods: BTreeMap<(String, String), Arc<PodEntry>> = own_pods.into_iter().collect();
    let mut slices = Vec::new();
    let mut crs: BTreeMap<String, CriticalServiceView> = BTreeMap::new();
    for service in &services {
        let ns = &service.namespace;
        if let Some((k, v)) = service.selector.iter().next() {
            for r in caches.pod_index.get(&cache::pod_label_key(ns, k, v)) {
                if let Some((key, entry)) = pod(ns, &r.name) {
                    let selector = service
                        .selector
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.as_str()));
                    if entry.labels.selected_by(selector) {
                        pods.insert(key, entry);
                    }
                }
            }
        }
        let fallback = fallback_pod_name(&settings.pod_name_prefix, &service.name);
        if let Some((key, entry)) = pod(ns, &fallback) {
            pods.insert(key, entry);
        }
        slices.extend(
            caches
                .slice_index
                .get(&cache::slice_key(ns, &service.name))
                .iter()
                .filter_map(|r| {
                    let key = compact::key(r.namespace.as_deref(), &r.name);
                    caches.slices.get(&key)
                }),
        );
        if covers(&cr.spec, service, settings) {
            for other in crs_covering(caches, settings, service) {
                if let (false, Some(other)) =
                    (crs.contains_key(&other.name), caches.crs.get(&other))
                {
                    crs.insert(other.name_any(), view(&other));
                }
            }
        }
    }
    crs.entry(name).or_insert_with(|| view(cr));
    Observed {
        crs: crs.into_values().collect(),
        services,
        pods: pods
            .iter()
            .map(|((ns, name), entry)| {
                cache::pod_view(ns, name, entry, controller_wants(caches, ns, entry))
            })
            .collect(),
        slices: cache::slice_views(slices.iter().map(|s| s.as_ref())),
    }
}
