//! The running CriticalService controller: shared lean caches, the mapping from Service, pod,
//! EndpointSlice and PodTemplate changes to the CriticalServices they concern, and the apply step
//! that turns a [`Plan`] into writes — only what differs, only while this replica leads.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplate};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource as _, ResourceExt as _};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use vigil_apis::critical_service::CriticalServiceStatus;
use vigil_apis::{CriticalService, HasConditions as _};
use vigil_runtime::Runtime;
use vigil_runtime::cache::{Source as _, Synced};
use vigil_runtime::compact::{self, CompactStore};
use vigil_runtime::events;
use vigil_runtime::index::Index;
use vigil_runtime::leader::Leadership;

use super::cache::{self, CachedPod, CachedService, CachedSlice, Labels, PodEntry, SliceEntry};
use super::decide::{covers, decide};
use super::fallback::fallback_pod_name;
use super::lame;
use super::model::{
    CRITICAL_SERVICE_LABEL, CriticalServiceView, EventNote, Inputs, Plan, PodRef, PodView,
    Promotion, SERVICE_LABEL, ServiceView, Settings, SliceView, TemplateKey, TemplateLookup,
};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "criticalservice";
/// Reconciles running at once. Unbounded, a start with a thousand CriticalServices ran a
/// thousand reconciles at once, each holding its own HTTP connection and buffers (most of the
/// operator's memory at that moment) for no gain in speed on a shared API server.
pub const MAX_CONCURRENT_RECONCILES: u16 = 16;
/// Writes one reconcile makes at once (fallback pods, Events).
const WRITE_CONCURRENCY: usize = 16;
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-criticalservice";

/// What this controller's code does with the API (kept in step with the calls below).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through reflectors: list + watch only.
    crate::permissions::Permission {
        group: "mycrd.com",
        resources: &["criticalservices"],
        verbs: &["list", "watch"],
    },
    crate::permissions::Permission {
        group: "mycrd.com",
        resources: &["criticalservices/status"],
        verbs: &["patch"],
    },
    crate::permissions::Permission {
        group: "",
        resources: &["services", "podtemplates"],
        verbs: &["list", "watch"],
    },
    // Fallback pods: created and deleted (with a uid precondition); warm standbys promoted by a
    // label patch (with a uid precondition too).
    crate::permissions::Permission {
        group: "",
        resources: &["pods"],
        verbs: &["list", "watch", "create", "delete", "patch"],
    },
    crate::permissions::Permission {
        group: "discovery.k8s.io",
        resources: &["endpointslices"],
        verbs: &["list", "watch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
}

/// The caches every reconcile reads, with their indexes (see `cache` for the keys): reconciles
/// and event mappers look objects up by key, never scan a whole cache.
#[derive(Clone)]
struct Caches {
    crs: Store<CriticalService>,
    services: Store<CachedService>,
    /// Pods are most of a cluster: kept as compact entries, not objects.
    pods: CompactStore<PodEntry>,
    slices: CompactStore<SliceEntry>,
    templates: Store<PodTemplate>,
    cr_index: Index<CriticalService>,
    service_index: Index<CachedService>,
    pod_index: Index<CachedPod>,
    slice_index: Index<CachedSlice>,
}

/// Shared by reconciles.
struct Context {
    runtime: Runtime,
    settings: Settings,
    caches: Caches,
    /// Statuses this replica wrote, by CriticalService, with the resourceVersion each write
    /// was based on (see [`StatusMemo`]).
    written: StatusMemo,
}

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let namespaces = settings.watched_namespaces.clone();
    let lame_gauge = Gauge::<i64>::default();
    runtime.metrics().register(
        "vigil_lame_services",
        "Services with a selector and no ready endpoint that no CriticalService covers",
        lame_gauge.clone(),
    );
    let crs = runtime
        .cache::<CriticalService>()
        .slim(cache::slim_critical_service)
        .index(cache::critical_service_keys)
        .build();
    let services = runtime
        .cache::<CachedService>()
        .namespaces(namespaces.as_ref())
        .slim(cache::slim_service)
        .index(cache::service_keys)
        .build();
    // Pods are most of a cluster: kept as compact entries, not objects.
    let pods = runtime
        .cache::<CachedPod>()
        .namespaces(namespaces.as_ref())
        .slim(cache::slim_pod)
        .index(cache::pod_keys)
        .build_compact(cache::pod_entry);
    let slices = runtime
        .cache::<CachedSlice>()
        .namespaces(namespaces.as_ref())
        .slim(cache::slim_slice)
        .index(cache::slice_keys)
        .build_compact(cache::slice_entry);
    // Templates may live outside the watched namespaces (POD_TEMPLATE_NS): watch them everywhere.
    let templates = runtime
        .cache::<PodTemplate>()
        .namespaces(None)
        .slim(cache::slim_template)
        .build();
    let caches = Caches {
        crs: crs.store().clone(),
        services: services.store().clone(),
        pods: pods.store().clone(),
        slices: slices.store().clone(),
        templates: templates.store().clone(),
        cr_index: crs.index().clone(),
        service_index: services.index().clone(),
        pod_index: pods.index().clone(),
        slice_index: slices.index().clone(),
    };

    let ctx = Arc::new(Context {
        runtime: runtime.clone(),
        settings,
        caches: caches.clone(),
        written: StatusMemo::default(),
    });

    let synced = vec![
        services.synced(),
        pods.synced(),
        slices.synced(),
        templates.synced(),
    ];
    runtime.spawn(report_lame_services(
        caches.clone(),
        ctx.settings.clone(),
        lame_gauge,
        runtime.leadership(),
        synced,
    ));

    let mapper_caches = caches.clone();
    let settings_for = ctx.settings.clone();
    let for_service = move |svc: CachedService| {
        crs_covering(&mapper_caches, &settings_for, &cache::service_view(&svc))
    };
    let pod_caches = caches.clone();
    let pod_settings = ctx.settings.clone();
    let for_pod = move |pod: CachedPod| crs_for_pod(&pod_caches, &pod_settings, &pod);
    let slice_caches = caches.clone();
    let slice_settings = ctx.settings.clone();
    let for_slice = move |slice: CachedSlice| crs_for_slice(&slice_caches, &slice_settings, &slice);
    let template_caches = caches.clone();
    let template_settings = ctx.settings.clone();
    let for_template =
        move |t: PodTemplate| crs_using_template(&template_caches.crs, &template_settings, &t);

    runtime
        .controller(NAME, &crs)
        .concurrency(MAX_CONCURRENT_RECONCILES)
        .watches(&services, for_service)
        .watches(&pods, for_pod)
        .watches(&slices, for_slice)
        .watches(&templates, for_template)
        .quarantine_condition(CriticalService::conditions)
        .field_manager(FIELD_MANAGER)
        .run(reconcile, ctx)
        .await;
}

fn view(cr: &CriticalService) -> CriticalServiceView {
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
fn crs_covering(
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
fn crs_for_pod(
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

fn crs_for_slice(
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

fn template_key(cr: &CriticalService, settings: &Settings) -> TemplateKey {
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

fn crs_using_template(
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

fn lookup_template(caches: &Caches, settings: &Settings, key: &TemplateKey) -> TemplateLookup {
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

/// Decides from the caches (synced: the builder waits for them) and applies the plan.
async fn reconcile(cr: Arc<CriticalService>, ctx: Arc<Context>) -> Result<Action, Error> {
    let plan = {
        let caches = &ctx.caches;
        let mut this = view(&cr);
        this.status = ctx.written.effective(&cr);
        let observed = observe(caches, &ctx.settings, &cr);
        let template = lookup_template(caches, &ctx.settings, &template_key(&cr, &ctx.settings));
        let inputs = Inputs {
            cr: &this,
            all_crs: &observed.crs,
            services: &observed.services,
            pods: &observed.pods,
            slices: &observed.slices,
            template: &template,
            now: k8s_openapi::jiff::Timestamp::now(),
            settings: &ctx.settings,
        };
        decide(&inputs)
    };
    apply(&cr, &ctx, plan).await
}

/// How often lame, uncovered Services are looked for.
const LAME_REPORT_INTERVAL: Duration = Duration::from_secs(2);

/// Logs Services that turn lame or answer again while no CriticalService covers them, and keeps
/// `vigil_lame_services` current, as the article's first scripts did. Read-only: from the caches.
async fn report_lame_services(
    caches: Caches,
    settings: Settings,
    gauge: Gauge<i64>,
    leadership: watch::Receiver<Leadership>,
    synced: Vec<Synced>,
) {
    for cache in synced {
        if !cache.wait().await {
            return;
        }
    }
    let mut known = BTreeSet::new();
    let mut tick = tokio::time::interval(LAME_REPORT_INTERVAL);
    loop {
        tick.tick().await;
        // Only Services without a ready endpoint can be lame: look at those alone (a handful),
        // not at every Service of the cluster every two seconds.
        let answering: HashSet<(String, String)> = caches
            .slices
            .state()
            .iter()
            .filter(|(_, s)| !s.ready_pods.is_empty())
            .filter_map(|(_, s)| Some((s.namespace.to_string(), s.service.as_deref()?.to_owned())))
            .collect();
        let services: Vec<_> = caches
            .services
            .state()
            .iter()
            .filter(|s| !answering.contains(&(s.namespace().unwrap_or_default(), s.name_any())))
            .map(|s| cache::service_view(s))
            .collect();
        let mut crs: Vec<CriticalServiceView> = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        for service in &services {
            for r in crs_covering(&caches, &settings, service) {
                if let (true, Some(cr)) = (seen.insert(r.name.clone()), caches.crs.get(&r)) {
                    crs.push(view(&cr));
                }
            }
        }
        let slices = cache::slice_views(
            caches
                .slices
                .state()
                .iter()
                .map(|(_, s)| s.as_ref())
                .filter(|s| {
                    s.service.as_deref().is_some_and(|svc| {
                        !answering.contains(&(s.namespace.to_string(), svc.to_owned()))
                    })
                }),
        );
        let now = lame::lame_uncovered(&services, &slices, &crs, &settings);
        gauge.set(i64::try_from(now.len()).unwrap_or(i64::MAX));
        // Only the leader logs, so a pair of replicas does not report everything twice.
        if *leadership.borrow() == Leadership::Leading {
            let (lame, answering) = lame::changes(&known, &now);
            for (ns, name) in lame {
                tracing::warn!(service = %format!("{ns}/{name}"), "Service is lame: no ready endpoint, and no CriticalService covers it");
            }
            for (ns, name) in answering {
                tracing::info!(service = %format!("{ns}/{name}"), "Service answers again");
            }
        }
        known = now;
    }
}

/// The statuses this replica wrote, until the cache shows them. A reconcile triggered by a pod
/// or slice event between a status write and the watch event that brings it back would
/// otherwise decide from the status *before* the write and write again, with fresh `since`
/// and `lastTransitionTime` stamps; at startup, with a thousand CriticalServices, that doubled
/// the status writes.
#[derive(Default)]
struct StatusMemo(
    std::sync::Mutex<std::collections::HashMap<String, (String, CriticalServiceStatus)>>,
);

impl StatusMemo {
    /// The status to decide from: what this replica last wrote while the cached object is still
    /// the one that write was based on, else the cached status.
    fn effective(&self, cr: &CriticalService) -> Option<CriticalServiceStatus> {
        let Ok(mut written) = self.0.lock() else {
            return cr.status.clone();
        };
        let name = cr.name_any();
        match written.get(&name) {
            Some((based_on, status)) if cr.metadata.resource_version.as_ref() == Some(based_on) => {
                Some(status.clone())
            }
            Some(_) => {
                // The cache moved past that write.
                written.remove(&name);
                cr.status.clone()
            }
            None => cr.status.clone(),
        }
    }

    fn remember(&self, cr: &CriticalService, status: &CriticalServiceStatus) {
        if let (Ok(mut written), Some(rv)) = (self.0.lock(), cr.metadata.resource_version.clone()) {
            written.insert(cr.name_any(), (rv, status.clone()));
        }
    }
}

/// What one CriticalService's decision reads, gathered through the indexes.
struct Observed {
    crs: Vec<CriticalServiceView>,
    services: Vec<ServiceView>,
    pods: Vec<PodView>,
    slices: BTreeMap<(String, String), SliceView>,
}

/// Gathers, by index lookups, everything `decide` reads for `cr`: the Services it may cover or
/// still lists (and those its fallback pods name), the pods those Services select plus anything
/// at their fallback names and this CriticalService's own pods, their EndpointSlices, and the
/// CriticalServices that cover the same Services (to agree on who owns a shared fallback). The
/// decision sees exactly what a whole-cache view would show it for this CriticalService.
fn observe(caches: &Caches, settings: &Settings, cr: &CriticalService) -> Observed {
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
    for ((ns, _), pod) in &own_pods {
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
            .map(|((ns, name), entry)| cache::pod_view(ns, name, entry))
            .collect(),
        slices: cache::slice_views(slices.iter().map(|s| s.as_ref())),
    }
}

/// Writes what the plan asks for, and the status only when it changed. Standby promotions (what
/// clients are waiting for), then fallback creates, then deletes, then Events, each go out
/// [`WRITE_CONCURRENCY`] at a time: a CriticalService covering many Services that turn lame
/// together gets all their fallbacks in a few round trips, and its next reconcile is not held up
/// behind one round trip per pod and per Event.
async fn apply(cr: &CriticalService, ctx: &Context, plan: Plan) -> Result<Action, Error> {
    let promotions: Vec<_> = plan
        .promote
        .iter()
        .map(|promotion| promote_standby(ctx, promotion))
        .collect();
    bounded(promotions).await?;
    let creates: Vec<_> = plan
        .create
        .iter()
        .map(|pod| create_fallback(ctx, pod))
        .collect();
    bounded(creates).await?;
    let deletes: Vec<_> = plan
        .delete
        .iter()
        .map(|target| delete_fallback(ctx, target))
        .collect();
    bounded(deletes).await?;
    if ctx.written.effective(cr).as_ref() != Some(&plan.status) {
        let api: Api<CriticalService> = Api::all(ctx.runtime.client().clone());
        // A merge patch leaves out what serializes as absent: send the lists that may have been
        // emptied explicitly, or an emptied list would stay in the stored status forever.
        let mut patch = serde_json::json!({"status": plan.status});
        patch["status"]["services"] = serde_json::json!(plan.status.services);
        patch["status"]["conditions"] = serde_json::json!(plan.status.conditions);
        api.patch_status(
            &cr.name_any(),
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&patch),
        )
        .await?;
        ctx.written.remember(cr, &plan.status);
    }
    let reference = cr.object_ref(&());
    let events: Vec<_> = plan
        .events
        .iter()
        .map(|note| async {
            publish(ctx, &reference, note).await;
            Ok(())
        })
        .collect();
    bounded(events).await?;
    Ok(plan
        .requeue_after
        .map_or_else(Action::await_change, Action::requeue))
}

/// Runs `writes`, [`WRITE_CONCURRENCY`] at a time, to the end; then the first error, if any.
async fn bounded<F>(writes: Vec<F>) -> Result<(), Error>
where
    F: std::future::Future<Output = Result<(), Error>>,
{
    let results: Vec<Result<(), Error>> = futures::stream::iter(writes)
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    results.into_iter().collect()
}

async fn create_fallback(ctx: &Context, pod: &Pod) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(
        ctx.runtime.client().clone(),
        &pod.namespace().unwrap_or_default(),
    );
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PostParams::default()
    };
    match pods.create(&params, pod).await {
        Ok(_) => Ok(()),
        // Already there (a previous pass, or a restart in the middle): the caches catch up.
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Promotes a warm standby: one JSON merge patch of its labels. The uid in the patch is a
/// precondition (the API server refuses a patch whose uid differs with 409), so a pod re-created
/// under the name by someone else is never relabelled.
async fn promote_standby(ctx: &Context, promotion: &Promotion) -> Result<(), Error> {
    let target = &promotion.pod;
    let pods: Api<Pod> = Api::namespaced(ctx.runtime.client().clone(), &target.namespace);
    let patch = serde_json::json!({
        "metadata": {"uid": target.uid, "labels": promotion.labels}
    });
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..PatchParams::default()
    };
    match pods
        .patch(&target.name, &params, &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // Gone, or another pod under the name: the next pass decides again from the caches.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

async fn delete_fallback(ctx: &Context, target: &PodRef) -> Result<(), Error> {
    let pods: Api<Pod> = Api::namespaced(ctx.runtime.client().clone(), &target.namespace);
    let params = DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(target.uid.clone()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    match pods.delete(&target.name, &params).await {
        Ok(_) => Ok(()),
        // Gone already, or a different pod now carries the name: nothing of ours to delete.
        Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Records an Event about the CriticalService (best effort: a failure is only logged).
async fn publish(ctx: &Context, reference: &ObjectReference, note: &EventNote) {
    let mut event = events::event(note.warning, &note.reason, &note.note, "Reconcile");
    event.secondary = note.pod.as_ref().map(|(namespace, name)| ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.clone()),
        name: Some(name.clone()),
        ..ObjectReference::default()
    });
    events::record(ctx.runtime.recorder().inner(), &event, reference).await;
}

/// Condition reason of a quarantined CriticalService (the controller builder reports it).
pub use vigil_runtime::conditions::REASON_RECONCILE_FAILING;
