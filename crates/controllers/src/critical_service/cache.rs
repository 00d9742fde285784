//! What the CriticalService controller caches, and how. Pods are the bulk of a cluster, and a
//! k8s-openapi `Pod` reserves room for a whole `PodSpec` even when it is empty, so the caches do
//! not hold the API's types: they hold *cached kinds* — [`CachedPod`], [`CachedService`],
//! [`CachedSlice`], [`CachedReplicaSet`], [`CachedStatefulSet`] — that list and watch the same resources (kube's `Resource` derive inherits
//! the real kind's group, version and plural) but deserialize only the fields the decision
//! reads; the rest of each object is skipped by serde and never allocated. This module also
//! files them in indexes, builds the caches ([`Sources`]) and turns entries into the decision's
//! views.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::apps::v1::{ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplate, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt as _};
use serde::Deserialize;
use vigil_apis::CriticalService;
use vigil_runtime::Runtime;
use vigil_runtime::cache::{Cache, CompactCache, Source as _, Synced};

use super::model::{
    CRITICAL_SERVICE_LABEL, OWNED_ANNOTATION, PodView, RETIRING_SINCE_ANNOTATION,
    SLICE_HASH_ANNOTATION, SLICE_MANAGED_BY_LABEL, SLICE_MANAGER, ServicePortView, ServiceView,
    SliceView, StandbySliceView, TEMPLATE_HASH_ANNOTATION,
};

/// Labels (or a selector) as a cached object keeps them: a sorted boxed slice. A `BTreeMap`
/// allocates a node with room for eleven entries even for one label, which made label maps the
/// largest part of a cached pod.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Labels(Box<[(Box<str>, Box<str>)]>);

impl Labels {
    pub fn from_map(map: Option<BTreeMap<String, String>>) -> Self {
        Self(
            map.into_iter()
                .flatten()
                .map(|(k, v)| (k.into_boxed_str(), v.into_boxed_str()))
                .collect(),
        )
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0
            .binary_search_by(|(k, _)| (**k).cmp(key))
            .ok()
            .map(|i| &*self.0[i].1)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (&**k, &**v))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether every pair of `selector` is among these labels.
    pub fn selected_by<'a>(&self, mut selector: impl Iterator<Item = (&'a str, &'a str)>) -> bool {
        selector.all(|(k, v)| self.get(k) == Some(v))
    }

    pub fn to_map(&self) -> BTreeMap<String, String> {
        self.iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect()
    }
}

/// A pod as cached: metadata (its labels moved to `labels`), readiness and IP.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = Pod)]
pub struct CachedPod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedPodSpec>,
    #[serde(default)]
    pub status: Option<CachedPodStatus>,
    #[serde(skip)]
    pub labels: Labels,
}

/// The node a pod runs on (Vigil's EndpointSlices name it for its standbys).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedPodSpec {
    #[serde(default, rename = "nodeName")]
    pub node_name: Option<String>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedPodStatus {
    #[serde(default)]
    pub conditions: Option<Vec<CachedCondition>>,
    #[serde(default, rename = "podIP")]
    pub pod_ip: Option<String>,
    #[serde(default)]
    pub phase: Option<String>,
    /// Read only to tell a pod on its first start (see [`first_start`]), then dropped.
    #[serde(default, rename = "containerStatuses")]
    pub container_statuses: Option<Vec<CachedContainerStatus>>,
}

/// What says whether a container has ever run to an end or is stuck before starting.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedContainerStatus {
    #[serde(default, rename = "restartCount")]
    pub restart_count: i32,
    #[serde(default)]
    pub state: Option<CachedContainerState>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedContainerState {
    #[serde(default)]
    pub waiting: Option<CachedWaiting>,
    #[serde(default)]
    pub terminated: Option<serde_json::Value>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedWaiting {
    #[serde(default)]
    pub reason: Option<String>,
}

/// A condition's type and status (the pod's `Ready` one is all the decision reads).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

/// A Service as cached: metadata, selector, type and ports (labels and selector moved to
/// compact [`Labels`]).
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = Service)]
pub struct CachedService {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedServiceSpec>,
    #[serde(skip)]
    pub labels: Labels,
    #[serde(skip)]
    pub selector: Labels,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedServiceSpec {
    #[serde(default)]
    pub selector: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "type")]
    pub type_: Option<String>,
    #[serde(default)]
    pub ports: Option<Vec<ServicePort>>,
}

/// An EndpointSlice as cached: metadata (its labels reduced to the Service it belongs to), and
/// each endpoint's readiness and pod name.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = EndpointSlice)]
pub struct CachedSlice {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub endpoints: Option<Vec<CachedEndpoint>>,
    /// The `kubernetes.io/service-name` label.
    #[serde(skip)]
    pub service: Option<Box<str>>,
    /// Set on Vigil's own slices of warm standbys only.
    #[serde(skip)]
    pub standby: Option<Box<StandbyMarks>>,
}

/// What identifies one of Vigil's EndpointSlices of a warm standby: its name, the
/// CriticalService that wrote it and the hash of its content.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StandbyMarks {
    pub name: Box<str>,
    pub critical_service: Box<str>,
    pub hash: Box<str>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedEndpoint {
    #[serde(default)]
    pub conditions: Option<CachedEndpointConditions>,
    #[serde(default, rename = "targetRef")]
    pub target_ref: Option<CachedTargetRef>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedEndpointConditions {
    #[serde(default)]
    pub ready: Option<bool>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedTargetRef {
    #[serde(default)]
    pub name: Option<String>,
}

impl CachedSlice {
    /// Names of the pods behind the slice's ready endpoints.
    pub fn ready_pods(&self) -> impl Iterator<Item = &String> {
        self.endpoints.iter().flatten().filter_map(|e| {
            let ready = e.conditions.as_ref().and_then(|c| c.ready) == Some(true);
            let name = e.target_ref.as_ref()?.name.as_ref()?;
            ready.then_some(name)
        })
    }
}

/// A ReplicaSet as cached: its uid and how many pods it wants. A pod it deletes is not
/// replaced when it wants none (a Deployment scaled to zero), so no replacement is waited for.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = ReplicaSet)]
pub struct CachedReplicaSet {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedReplicas>,
}

/// A StatefulSet as cached: its uid and how many pods it wants (see [`CachedReplicaSet`]).
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = StatefulSet)]
pub struct CachedStatefulSet {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedReplicas>,
}

/// `spec.replicas` of a workload (absent means 1, as the API defaults it).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedReplicas {
    #[serde(default)]
    pub replicas: Option<i32>,
}

/// What the cache keeps of a workload: its uid (an owner reference names it by uid too) and
/// the replicas it wants.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadEntry {
    pub uid: Box<str>,
    pub replicas: i32,
}

/// The entry kept for a workload, from its metadata and `spec.replicas`.
fn workload_entry(metadata: &ObjectMeta, spec: Option<&CachedReplicas>) -> WorkloadEntry {
    WorkloadEntry {
        uid: metadata.uid.as_deref().unwrap_or_default().into(),
        replicas: spec.and_then(|s| s.replicas).unwrap_or(1),
    }
}

pub fn replica_set_entry(rs: &CachedReplicaSet) -> WorkloadEntry {
    workload_entry(&rs.metadata, rs.spec.as_ref())
}

pub fn stateful_set_entry(sts: &CachedStatefulSet) -> WorkloadEntry {
    workload_entry(&sts.metadata, sts.spec.as_ref())
}

/// Kinds of the workload controllers whose wanted replicas Vigil reads.
pub const REPLICA_SET: &str = "ReplicaSet";
pub const STATEFUL_SET: &str = "StatefulSet";

/// Label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Index key of Services selecting pods labelled `key=value` in `namespace`.
pub fn selector_key(namespace: &str, key: &str, value: &str) -> String {
    format!("sel:{namespace}/{key}={value}")
}

/// Index key of Services labelled `key=value`, in any namespace.
pub fn service_label_key(key: &str, value: &str) -> String {
    format!("lbl:{key}={value}")
}

/// Services filed by selector pair (to map a pod to the Services selecting it) and by label
/// (to find the Services a CriticalService's `matchLabels` may cover).
pub fn service_keys(service: &CachedService) -> Vec<String> {
    let ns = service.namespace().unwrap_or_default();
    service
        .selector
        .iter()
        .map(|(k, v)| selector_key(&ns, k, v))
        .chain(service.labels.iter().map(|(k, v)| service_label_key(k, v)))
        .collect()
}

/// Index key of pods labelled `key=value` in `namespace`.
pub fn pod_label_key(namespace: &str, key: &str, value: &str) -> String {
    format!("{namespace}/{key}={value}")
}

/// Index key of the fallback pods labelled with a CriticalService, in any namespace.
pub fn fallback_key(critical_service: &str) -> String {
    format!("cr:{critical_service}")
}

/// Index key of the pods being deleted under the workload `kind` `namespace/name`.
pub fn deleted_under_key(namespace: &str, kind: &str, name: &str) -> String {
    format!("del:{namespace}/{kind}/{name}")
}

/// The controlling owner of a pod being deleted (a workload controller's pod), as
/// (kind, name, uid); `None` for a pod not being deleted or with no controller.
fn deleted_under(meta: &ObjectMeta) -> Option<(&str, &str, &str)> {
    meta.deletion_timestamp.as_ref()?;
    (meta.owner_references.iter().flatten())
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.name.as_str(), o.uid.as_str()))
}

/// Pods filed by label, fallback pods by their CriticalService, and pods being deleted by
/// their workload (few at any time: a workload's change finds the Services they leave lame).
pub fn pod_keys(pod: &CachedPod) -> Vec<String> {
    let ns = pod.namespace().unwrap_or_default();
    let labels = &pod.labels;
    labels
        .iter()
        .map(|(k, v)| pod_label_key(&ns, k, v))
        .chain(labels.get(CRITICAL_SERVICE_LABEL).map(fallback_key))
        .chain(
            deleted_under(&pod.metadata).map(|(kind, name, _)| deleted_under_key(&ns, kind, name)),
        )
        .collect()
}

/// Index key of the EndpointSlices of a Service.
pub fn slice_key(namespace: &str, service: &str) -> String {
    format!("{namespace}/{service}")
}

/// EndpointSlices filed by their Service.
pub fn slice_keys(slice: &CachedSlice) -> Vec<String> {
    let ns = slice.namespace().unwrap_or_default();
    slice
        .service
        .as_deref()
        .map(|service| slice_key(&ns, service))
        .into_iter()
        .collect()
}

/// Index key of the CriticalServices with `key=value` among their `matchLabels`.
pub fn match_label_key(key: &str, value: &str) -> String {
    format!("match:{key}={value}")
}

/// Index key of the CriticalServices whose status lists a Service.
pub fn listed_key(namespace: &str, service: &str) -> String {
    format!("listed:{namespace}/{service}")
}

/// CriticalServices filed by their `matchLabels` pairs and by the Services their status lists
/// (which they may still have to retire a fallback for).
pub fn critical_service_keys(cr: &CriticalService) -> Vec<String> {
    cr.spec
        .match_labels
        .iter()
        .map(|m| match_label_key(&m.key, &m.value))
        .chain(
            cr.status
                .iter()
                .flat_map(|s| s.services.iter())
                .map(|s| listed_key(&s.namespace, &s.name)),
        )
        .collect()
}

/// Strips a pod to what the decision reads: labels, three annotations, owners, readiness,
/// deletion mark, IP, and the node of Vigil's own pods.
pub fn slim_pod(pod: &mut CachedPod) {
    pod.labels = Labels::from_map(pod.metadata.labels.take());
    if pod.labels.get(CRITICAL_SERVICE_LABEL).is_none() {
        pod.spec = None;
    }
    // The creation time is kept only while the pod is on its first start: it is all the
    // decision needs to let a workload controller's replacement win the race (and most pods,
    // running, keep nothing more).
    let created = pod
        .metadata
        .creation_timestamp
        .take()
        .filter(|_| first_start(pod));
    if let Some(status) = pod.status.as_mut() {
        status.container_statuses = None;
        status.phase = None;
    }
    crate::slim::meta(
        &mut pod.metadata,
        &[
            OWNED_ANNOTATION,
            TEMPLATE_HASH_ANNOTATION,
            RETIRING_SINCE_ANNOTATION,
        ],
    );
    pod.metadata.creation_timestamp = created;
    if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions.retain(|c| c.type_ == "Ready");
    }
}

/// Container waiting reasons of a start in progress; any other (`ErrImagePull`,
/// `CrashLoopBackOff`, `CreateContainerConfigError`...) means the pod is stuck and will not be
/// Ready soon.
const STARTING_REASONS: [&str; 2] = ["ContainerCreating", "PodInitializing"];

/// Whether the pod is on its way to its first Ready: not one of Vigil's, not Ready, not being
/// deleted, not finished, and no container that has restarted, ended or is stuck. A pod whose
/// container crashed (restart count or a terminated state) is not: it was running and failed,
/// and nothing says its next start will be quicker than a fallback.
fn first_start(pod: &CachedPod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        // Not even scheduled yet: a fresh pod.
        return pod.labels.get(CRITICAL_SERVICE_LABEL).is_none()
            && pod.metadata.deletion_timestamp.is_none();
    };
    let ready =
        (status.conditions.iter().flatten()).any(|c| c.type_ == "Ready" && c.status == "True");
    let finished = matches!(status.phase.as_deref(), Some("Succeeded" | "Failed"));
    let containers_fresh = status.container_statuses.iter().flatten().all(|c| {
        let state = c.state.as_ref();
        c.restart_count == 0
            && state.is_none_or(|s| s.terminated.is_none())
            && state
                .and_then(|s| s.waiting.as_ref())
                .and_then(|w| w.reason.as_deref())
                .is_none_or(|reason| STARTING_REASONS.contains(&reason))
    });
    pod.labels.get(CRITICAL_SERVICE_LABEL).is_none()
        && pod.metadata.deletion_timestamp.is_none()
        && !ready
        && !finished
        && containers_fresh
}

/// Strips a Service's bookkeeping.
pub fn slim_service(service: &mut CachedService) {
    service.labels = Labels::from_map(service.metadata.labels.take());
    if let Some(spec) = service.spec.as_mut() {
        service.selector = Labels::from_map(spec.selector.take());
    }
    crate::slim::meta(&mut service.metadata, &[]);
}

/// Strips an EndpointSlice's bookkeeping (keeping what identifies Vigil's own).
pub fn slim_slice(slice: &mut CachedSlice) {
    let mut labels = slice.metadata.labels.take().unwrap_or_default();
    slice.service = labels
        .remove(SERVICE_NAME_LABEL)
        .map(String::into_boxed_str);
    if labels.get(SLICE_MANAGED_BY_LABEL).map(String::as_str) == Some(SLICE_MANAGER) {
        let hash = (slice.metadata.annotations.as_ref())
            .and_then(|a| a.get(SLICE_HASH_ANNOTATION))
            .cloned()
            .unwrap_or_default();
        slice.standby = Some(Box::new(StandbyMarks {
            name: slice.metadata.name.clone().unwrap_or_default().into(),
            critical_service: labels
                .remove(CRITICAL_SERVICE_LABEL)
                .unwrap_or_default()
                .into(),
            hash: hash.into(),
        }));
    }
    crate::slim::meta(&mut slice.metadata, &[]);
}

/// Strips a CriticalService's bookkeeping.
pub fn slim_critical_service(cr: &mut CriticalService) {
    cr.meta_mut().managed_fields = None;
}

/// Strips a PodTemplate's bookkeeping (its spec is what the fallback runs).
pub fn slim_template(template: &mut PodTemplate) {
    template.meta_mut().managed_fields = None;
}

/// What the cache keeps of a pod: what the decision reads, compactly (see
/// `vigil_runtime::compact`). A cluster's pods are mostly running pods of workloads, and what
/// only a few pods have (Vigil's marks, a first start, a deletion) is behind one pointer, so that
/// the entry of a running pod is 80 bytes (it was 168 with those fields inline: 4 MiB more for
/// 50,000 pods).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodEntry {
    pub uid: Box<str>,
    pub labels: Labels,
    pub owner_uids: Box<[Box<str>]>,
    pub ip: Option<Box<str>>,
    pub ready: bool,
    pub terminating: bool,
    /// `None` when none of its fields is set.
    pub rare: Option<Box<RarePodMarks>>,
}

impl PodEntry {
    /// The controlling owner of a pod being deleted.
    pub fn controller(&self) -> Option<&ControllerRef> {
        self.rare.as_ref()?.controller.as_ref()
    }
}

/// What only a few pods have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RarePodMarks {
    /// Vigil's annotations (see [`OWNED_ANNOTATION`], [`TEMPLATE_HASH_ANNOTATION`]).
    pub owned_annotation: Option<Box<str>>,
    pub template_hash: Option<Box<str>>,
    /// Creation time (seconds) of a pod on its first start (see [`first_start`]).
    pub starting_since: Option<i64>,
    /// When a pod with a controlling owner (a workload controller's) was deleted, in seconds:
    /// its `deletionTimestamp` less its grace period.
    pub deleted_under_controller: Option<i64>,
    /// That owner, for a pod being deleted.
    pub controller: Option<ControllerRef>,
    /// Vigil's own pods only.
    pub own: Option<OwnPodMarks>,
}

/// The controlling owner of a pod being deleted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerRef {
    pub kind: Box<str>,
    pub name: Box<str>,
    pub uid: Box<str>,
}

/// What is kept only of Vigil's own pods.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnPodMarks {
    pub node_name: Option<Box<str>>,
    /// `vigil.dev/retiring-since`, as written.
    pub retiring_since: Option<Box<str>>,
}

/// The entry kept for a (slimmed) pod.
pub fn pod_entry(pod: &CachedPod) -> PodEntry {
    let meta = &pod.metadata;
    let annotation = |key: &str| {
        meta.annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(|v| v.as_str().into())
    };
    let rare = RarePodMarks {
        owned_annotation: annotation(OWNED_ANNOTATION),
        template_hash: annotation(TEMPLATE_HASH_ANNOTATION),
        starting_since: meta.creation_timestamp.as_ref().map(|t| t.0.as_second()),
        deleted_under_controller: meta
            .deletion_timestamp
            .as_ref()
            .filter(|_| {
                (meta.owner_references.iter().flatten()).any(|o| o.controller == Some(true))
            })
            .map(|t| t.0.as_second() - meta.deletion_grace_period_seconds.unwrap_or(0)),
        controller: deleted_under(meta).map(|(kind, name, uid)| ControllerRef {
            kind: kind.into(),
            name: name.into(),
            uid: uid.into(),
        }),
        own: pod.labels.get(CRITICAL_SERVICE_LABEL).map(|_| OwnPodMarks {
            node_name: (pod.spec.as_ref())
                .and_then(|s| s.node_name.as_deref())
                .map(Into::into),
            retiring_since: annotation(RETIRING_SINCE_ANNOTATION),
        }),
    };
    PodEntry {
        uid: meta.uid.as_deref().unwrap_or_default().into(),
        labels: pod.labels.clone(),
        owner_uids: meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.as_str().into())
            .collect(),
        ready: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        terminating: meta.deletion_timestamp.is_some(),
        ip: pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .map(Into::into),
        rare: (rare != RarePodMarks::default()).then(|| Box::new(rare)),
    }
}

/// A cached pod as the decision's view; `controller_wants`: the replicas its workload wants
/// now, for a pod being deleted whose workload is cached (see [`PodView::controller_wants`]).
pub fn pod_view(
    namespace: &str,
    name: &str,
    pod: &PodEntry,
    controller_wants: Option<i32>,
) -> PodView {
    let rare = pod.rare.as_deref();
    let own = rare.and_then(|r| r.own.as_ref());
    PodView {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        uid: pod.uid.to_string(),
        labels: pod.labels.to_map(),
        owned_annotation: rare.and_then(|r| r.owned_annotation.as_deref().map(str::to_owned)),
        template_hash: rare.and_then(|r| r.template_hash.as_deref().map(str::to_owned)),
        owner_uids: pod.owner_uids.iter().map(|u| u.to_string()).collect(),
        ready: pod.ready,
        terminating: pod.terminating,
        ip: pod.ip.as_deref().map(str::to_owned),
        starting_since: rare
            .and_then(|r| r.starting_since)
            .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok()),
        deleted_under_controller: rare
            .and_then(|r| r.deleted_under_controller)
            .and_then(|s| k8s_openapi::jiff::Timestamp::from_second(s).ok()),
        controller_wants,
        node_name: own.and_then(|o| o.node_name.as_deref()).map(str::to_owned),
        // A value that does not parse counts as absent: the drain is then over at once.
        retiring_since: own
            .and_then(|o| o.retiring_since.as_deref())
            .and_then(|t| t.parse().ok()),
    }
}

/// A cached Service as the decision's view.
pub fn service_view(service: &CachedService) -> ServiceView {
    let spec = service.spec.clone().unwrap_or_default();
    ServiceView {
        namespace: service.namespace().unwrap_or_default(),
        name: service.name_any(),
        uid: service.metadata.uid.clone().unwrap_or_default(),
        labels: service.labels.to_map(),
        selector: service.selector.to_map(),
        external_name: spec.type_.as_deref() == Some("ExternalName"),
        ports: spec
            .ports
            .unwrap_or_default()
            .into_iter()
            .map(|p| ServicePortView {
                name: p.name,
                port: p.port,
                target_port: p.target_port,
                protocol: p.protocol.unwrap_or_else(|| "TCP".into()),
            })
            .collect(),
    }
}

/// What the cache keeps of an EndpointSlice: its Service and the pods behind its ready
/// endpoints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceEntry {
    pub namespace: Box<str>,
    pub service: Option<Box<str>>,
    pub ready_pods: Box<[Box<str>]>,
    pub standby: Option<Box<StandbyMarks>>,
}

/// The entry kept for a (slimmed) EndpointSlice.
pub fn slice_entry(slice: &CachedSlice) -> SliceEntry {
    SliceEntry {
        namespace: slice
            .metadata
            .namespace
            .as_deref()
            .unwrap_or_default()
            .into(),
        service: slice.service.clone(),
        ready_pods: slice.ready_pods().map(|p| p.as_str().into()).collect(),
        standby: slice.standby.clone(),
    }
}

/// EndpointSlice readiness per (namespace, Service).
pub fn slice_views<'a>(
    slices: impl Iterator<Item = &'a SliceEntry>,
) -> BTreeMap<(String, String), SliceView> {
    let mut out: BTreeMap<(String, String), SliceView> = BTreeMap::new();
    for slice in slices {
        let Some(service) = slice.service.as_deref() else {
            continue;
        };
        let view = out
            .entry((slice.namespace.to_string(), service.to_owned()))
            .or_default();
        view.ready_pods
            .extend(slice.ready_pods.iter().map(|p| p.to_string()));
        if let Some(standby) = &slice.standby {
            view.standby_slices.insert(
                standby.name.to_string(),
                StandbySliceView {
                    critical_service: standby.critical_service.to_string(),
                    hash: standby.hash.to_string(),
                },
            );
        }
    }
    out
}

/// The controller's caches as the controller builder takes them (see `observe::Caches` for
/// their look-up handles).
pub struct Sources {
    pub crs: Cache<CriticalService>,
    pub services: Cache<CachedService>,
    /// Pods are most of a cluster: kept as compact entries, not objects.
    pub pods: CompactCache<CachedPod, PodEntry>,
    pub slices: CompactCache<CachedSlice, SliceEntry>,
    pub templates: Cache<PodTemplate>,
    /// The workloads whose pods are replaced: how many they want tells a pod scaled away from
    /// one that is coming back.
    pub replica_sets: CompactCache<CachedReplicaSet, WorkloadEntry>,
    pub stateful_sets: CompactCache<CachedStatefulSet, WorkloadEntry>,
}

impl Sources {
    /// Builds the caches: Services, pods, EndpointSlices, ReplicaSets and StatefulSets in the
    /// watched namespaces (`None`: all), CriticalServices (cluster-scoped) and PodTemplates everywhere (a template
    /// may live outside the watched namespaces, in `POD_TEMPLATE_NS`).
    pub fn new(runtime: &Runtime, namespaces: Option<&BTreeSet<String>>) -> Self {
        Self {
            crs: (runtime.cache::<CriticalService>())
                .slim(slim_critical_service)
                .index(critical_service_keys)
                .build(),
            services: (runtime.cache::<CachedService>().namespaces(namespaces))
                .slim(slim_service)
                .index(service_keys)
                .build(),
            pods: (runtime.cache::<CachedPod>().namespaces(namespaces))
                .slim(slim_pod)
                .index(pod_keys)
                .build_compact(pod_entry),
            slices: (runtime.cache::<CachedSlice>().namespaces(namespaces))
                .slim(slim_slice)
                .index(slice_keys)
                .build_compact(slice_entry),
            templates: (runtime.cache::<PodTemplate>().namespaces(None))
                .slim(slim_template)
                .build(),
            // Without them (RBAC not granted yet: an older chart's rules), a pod scaled away is
            // waited for as any other: the controller stays ready.
            replica_sets: (runtime.cache::<CachedReplicaSet>().namespaces(namespaces))
                .permission_optional()
                .build_compact(replica_set_entry),
            stateful_sets: (runtime.cache::<CachedStatefulSet>().namespaces(namespaces))
                .permission_optional()
                .build_compact(stateful_set_entry),
        }
    }

    /// The sync state of the caches besides the CriticalServices'.
    pub fn synced(&self) -> Vec<Synced> {
        vec![
            self.services.synced(),
            self.pods.synced(),
            self.slices.synced(),
            self.templates.synced(),
            self.replica_sets.synced(),
            self.stateful_sets.synced(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_kinds_read_only_what_they_keep_from_api_objects() {
        let mut pod: CachedPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"},
                "annotations": {"service-watcher": "owned", "big": "x"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": {"podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]},
        }))
        .expect("a pod");
        slim_pod(&mut pod);
        let view = pod_view("ns", "p", &pod_entry(&pod), None);
        assert!(view.ready);
        assert_eq!(view.ip.as_deref(), Some("10.0.0.1"));
        assert_eq!(view.owned_annotation.as_deref(), Some("owned"));
        assert!(pod.metadata.managed_fields.is_none());
        assert_eq!(pod.metadata.annotations.map(|a| a.len()), Some(1));
        assert_eq!(
            CachedPod::plural(&()),
            "pods",
            "lists and watches the real resource"
        );

        let mut slice: CachedSlice = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "web-x", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "web"}},
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "a"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "b"}},
            ],
        }))
        .expect("a slice");
        slim_slice(&mut slice);
        let views = slice_views(std::iter::once(&slice_entry(&slice)));
        let ready = &views[&("ns".to_owned(), "web".to_owned())].ready_pods;
        assert_eq!(ready.iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(CachedSlice::group(&()), "discovery.k8s.io");

        let mut service: CachedService = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "type": "ClusterIP",
                "ports": [{"port": 80, "targetPort": "http"}], "clusterIP": "10.96.0.1"},
        }))
        .expect("a service");
        slim_service(&mut service);
        let view = service_view(&service);
        assert_eq!(service.selector.get("app"), Some("web"));
        assert!(service.metadata.labels.is_none());
        assert_eq!(view.selector.get("app").map(String::as_str), Some("web"));
        assert_eq!(view.ports[0].protocol, "TCP");
    }

    #[test]
    fn a_deleted_pod_under_a_controller_keeps_when_it_was_deleted() {
        let pod = |owners: serde_json::Value| {
            let mut pod: CachedPod = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"},
                    "ownerReferences": owners,
                    "deletionTimestamp": "2026-01-01T00:00:30Z",
                    "deletionGracePeriodSeconds": 30},
            }))
            .expect("a pod");
            slim_pod(&mut pod);
            pod_view("ns", "p", &pod_entry(&pod), None).deleted_under_controller
        };
        let rs = |controller: bool| {
            serde_json::json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "rs",
                "uid": "rs-uid", "controller": controller}])
        };
        assert_eq!(
            pod(rs(true)),
            Some("2026-01-01T00:00:00Z".parse().expect("a time"))
        );
        assert_eq!(pod(rs(false)), None, "an owner that is not its controller");
        assert_eq!(pod(serde_json::json!([])), None, "a bare pod");
    }

    #[test]
    fn a_pod_being_deleted_is_filed_by_its_workload_and_names_it() {
        let pod = |deleting: bool| {
            let mut metadata = serde_json::json!({"name": "p", "namespace": "ns",
                "labels": {"app": "web"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Other", "name": "o", "uid": "o-uid"},
                    {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9",
                        "uid": "rs-uid", "controller": true}]});
            if deleting {
                metadata["deletionTimestamp"] = "2026-01-01T00:00:30Z".into();
            }
            let mut pod: CachedPod =
                serde_json::from_value(serde_json::json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": metadata}))
                .expect("a pod");
            slim_pod(&mut pod);
            pod
        };
        let deleting = pod(true);
        let key = deleted_under_key("ns", REPLICA_SET, "web-5d9");
        assert!(
            pod_keys(&deleting).contains(&key),
            "{:?}",
            pod_keys(&deleting)
        );
        let entry = pod_entry(&deleting);
        let owner = entry.controller().expect("its controller");
        assert_eq!(
            (&*owner.kind, &*owner.name, &*owner.uid),
            ("ReplicaSet", "web-5d9", "rs-uid")
        );
        assert_eq!(
            pod_view("ns", "p", &entry, Some(0)).controller_wants,
            Some(0)
        );
        // A running pod costs neither an index key nor an owner record.
        let running = pod(false);
        assert!(!pod_keys(&running).contains(&key));
        assert_eq!(pod_entry(&running).controller(), None);
        assert_eq!(pod_entry(&running).rare, None, "nothing rare to keep");
        // What 50,000 running pods cost, entry by entry (see `PodEntry`).
        assert!(size_of::<PodEntry>() <= 80, "{}", size_of::<PodEntry>());
    }

    #[test]
    fn a_workload_keeps_its_uid_and_wanted_replicas() {
        let rs: CachedReplicaSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-5d9", "namespace": "ns", "uid": "rs-uid"},
            "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": []}}},
        }))
        .expect("a ReplicaSet");
        assert_eq!(
            replica_set_entry(&rs),
            WorkloadEntry {
                uid: "rs-uid".into(),
                replicas: 0
            }
        );
        let sts: CachedStatefulSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "ns", "uid": "sts-uid"},
            "spec": {"serviceName": "db", "selector": {}, "template": {}},
        }))
        .expect("a StatefulSet");
        assert_eq!(stateful_set_entry(&sts).replicas, 1, "the API's default");
        assert_eq!(CachedStatefulSet::plural(&()), "statefulsets");
        assert_eq!(CachedReplicaSet::group(&()), "apps");
    }

    #[test]
    fn only_a_pod_on_its_first_start_keeps_its_creation_time() {
        let pod = |status: serde_json::Value| {
            let mut pod: CachedPod = serde_json::from_value(serde_json::json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"},
                    "creationTimestamp": "2026-01-01T00:00:00Z"},
                "status": status,
            }))
            .expect("a pod");
            slim_pod(&mut pod);
            pod_view("ns", "p", &pod_entry(&pod), None).starting_since
        };
        let waiting = |reason: &str, restarts: i32| {
            serde_json::json!({"phase": "Pending", "containerStatuses": [
                {"restartCount": restarts, "state": {"waiting": {"reason": reason}}}]})
        };
        assert!(pod(serde_json::json!({"phase": "Pending"})).is_some());
        assert!(pod(waiting("ContainerCreating", 0)).is_some());
        assert!(pod(waiting("ImagePullBackOff", 0)).is_none(), "stuck");
        assert!(pod(waiting("CrashLoopBackOff", 1)).is_none(), "crashed");
        assert!(
            pod(
                serde_json::json!({"phase": "Running", "containerStatuses": [
                {"restartCount": 0, "state": {"terminated": {"exitCode": 137}}}]})
            )
            .is_none(),
            "its container died"
        );
        assert!(
            pod(serde_json::json!({"phase": "Running",
                "conditions": [{"type": "Ready", "status": "True"}]}))
            .is_none(),
            "ready"
        );
    }
}
