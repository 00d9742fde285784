//! What the CriticalService controller observes (lean views built from its caches) and what its
//! pure decision returns. Views keep only the fields the decision reads, so caches stay small.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ObjectReference, Pod, PodTemplateSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use k8s_openapi::jiff::Timestamp;
use vigil_apis::critical_service::{CriticalServiceSpec, CriticalServiceStatus};

/// Label on everything Vigil creates.
pub const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
pub const MANAGED_BY_VALUE: &str = "vigil";
/// Labels naming the CriticalService and Service a fallback pod answers for.
pub const CRITICAL_SERVICE_LABEL: &str = "vigil.dev/critical-service";
pub const SERVICE_LABEL: &str = "vigil.dev/service";
/// The article's annotation marking pods its controller owns.
pub const OWNED_ANNOTATION: &str = "service-watcher";
pub const OWNED_VALUE: &str = "owned";
/// Hash of what the fallback pod was built from; a different hash means "rebuild it".
pub const TEMPLATE_HASH_ANNOTATION: &str = "vigil.dev/template-hash";
/// Label on a warm standby pod (`spec.warmStandby`): [`ROLE_STANDBY`] while it waits, unselected,
/// and [`ROLE_ACTIVE`] once promoted to answer for its Service.
pub const FALLBACK_ROLE_LABEL: &str = "vigil.dev/fallback-role";
pub const ROLE_STANDBY: &str = "standby";
pub const ROLE_ACTIVE: &str = "active";
/// Role of a fallback just created: outside its Service's selector until it is Ready, then
/// selected (the role removed). Each change of a Service's endpoints costs a kube-proxy sync,
/// which its rate limiter spaces by `minSyncPeriod` (1 s) after a burst of 2; a fallback selected
/// at creation is listed twice (not ready, then ready) and pushes its own ready endpoint, or a
/// returning real pod's, a second later. Selected once Ready, it is one change.
pub const ROLE_STARTING: &str = "starting";
/// Role of a fallback or promoted standby being drained (`spec.drainSeconds`): out of its
/// Service's selector, deleted once kube-proxy has stopped sending it connections.
pub const ROLE_RETIRING: &str = "retiring";
/// When a draining pod was taken out of its Service's endpoints (RFC 3339).
pub const RETIRING_SINCE_ANNOTATION: &str = "vigil.dev/retiring-since";
/// The label naming an EndpointSlice's manager. The EndpointSlice controller keeps only the
/// slices it manages in step with a Service's selector and leaves the others alone, while
/// kube-proxy merges every slice of the Service: Vigil's warm standbys are published through
/// slices of Vigil's own.
pub const SLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
pub const SLICE_MANAGER: &str = "criticalservice.vigil.dev";
/// Hash of what Vigil's EndpointSlice of a standby lists; a different hash means "rewrite it".
pub const SLICE_HASH_ANNOTATION: &str = "vigil.dev/slice-hash";

/// Operator settings the decision needs (from flags and the article's environment variables).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// `POD_NAME_PREFIX` (default `service-watcher`).
    pub pod_name_prefix: String,
    /// `POD_TEMPLATE_NS` / `POD_TEMPLATE`: the template used when a CriticalService names none.
    pub default_template: TemplateKey,
    /// `NAMESPACES`: the namespaces watched; `None` = all.
    pub watched_namespaces: Option<BTreeSet<String>>,
}

/// Namespace and name of a PodTemplate.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TemplateKey {
    pub namespace: String,
    pub name: String,
}

/// A CriticalService as the decision sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct CriticalServiceView {
    pub name: String,
    pub uid: String,
    pub generation: Option<i64>,
    pub spec: CriticalServiceSpec,
    pub status: Option<CriticalServiceStatus>,
}

/// A Service port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortView {
    pub name: Option<String>,
    pub port: i32,
    /// Absent means "same as port".
    pub target_port: Option<IntOrString>,
    pub protocol: String,
}

/// A Service as the lean cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// Empty: no selector (such Services are never covered).
    pub selector: BTreeMap<String, String>,
    pub external_name: bool,
    pub ports: Vec<ServicePortView>,
}

/// A pod as the lean cache keeps it: labels, readiness, deletion, IP, and ownership marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodView {
    pub namespace: String,
    pub name: String,
    pub uid: String,
    pub labels: BTreeMap<String, String>,
    /// The `service-watcher` and `vigil.dev/template-hash` annotations, when present.
    pub owned_annotation: Option<String>,
    pub template_hash: Option<String>,
    /// Uids in `metadata.ownerReferences`.
    pub owner_uids: Vec<String>,
    /// Condition `Ready` is `True`.
    pub ready: bool,
    /// `deletionTimestamp` is set.
    pub terminating: bool,
    pub ip: Option<String>,
    /// When a pod on its first start was created (not Ready yet, never restarted, not stuck
    /// pulling its image or in a crash loop): a replacement a workload controller has started.
    pub starting_since: Option<Timestamp>,
    /// When a pod with a controlling owner (a workload controller: its replacement is on the
    /// way) was deleted, to the second: `deletionTimestamp` less the grace period.
    pub deleted_under_controller: Option<Timestamp>,
    /// For such a pod, the replicas its workload (ReplicaSet, StatefulSet) wants now, when
    /// Vigil caches it: `Some(0)` says the pod was scaled away and no replacement is coming.
    /// `None` for another owner, or a workload not (yet) seen.
    pub controller_wants: Option<i32>,
    /// `spec.nodeName` (kept for Vigil's own pods only, which its EndpointSlices list).
    pub node_name: Option<String>,
    /// When a draining pod of Vigil's left its Service's endpoints.
    pub retiring_since: Option<Timestamp>,
}

/// What the EndpointSlices of one Service say: the pods that are ready endpoints, and Vigil's
/// own slices for its warm standbys.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceView {
    pub ready_pods: BTreeSet<String>,
    /// Vigil's EndpointSlices of this Service, by name (the name of the standby pod they list).
    pub standby_slices: BTreeMap<String, StandbySliceView>,
}

/// One of Vigil's EndpointSlices for a warm standby, as cached.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandbySliceView {
    /// The CriticalService that wrote it.
    pub critical_service: String,
    /// Its `vigil.dev/slice-hash`.
    pub hash: String,
}

/// The PodTemplate a fallback is built from, or why it cannot be used.
#[derive(Debug, Clone, PartialEq)]
pub enum TemplateLookup {
    /// Boxed: a template is large and the other variants are small.
    Found {
        key: TemplateKey,
        template: Box<PodTemplateSpec>,
    },
    NotFound(TemplateKey),
    /// The namespace may not be read (RBAC / NAMESPACES).
    Forbidden(TemplateKey),
}

/// Everything one decision for one CriticalService reads.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub cr: &'a CriticalServiceView,
    /// Every CriticalService, so overlapping ones agree which owns a shared Service's fallback.
    pub all_crs: &'a [CriticalServiceView],
    /// Services in the watched namespaces (the decision picks the covered ones).
    pub services: &'a [ServiceView],
    /// Pods in the namespaces of those Services (selected pods and Vigil's fallback pods).
    pub pods: &'a [PodView],
    /// EndpointSlice readiness per (namespace, Service name).
    pub slices: &'a BTreeMap<(String, String), SliceView>,
    /// The template this CriticalService uses.
    pub template: &'a TemplateLookup,
    pub now: Timestamp,
    pub settings: &'a Settings,
}

/// The Events a decision asks for: the runtime's, about the CriticalService.
pub use vigil_runtime::events::EventNote;

/// A Normal Event about the pod `namespace/name`: the pod is recorded as the Event's `related`
/// object, which also keeps kube-runtime's Recorder from folding Events about different pods
/// into one series.
pub fn about_pod(reason: &str, namespace: &str, name: &str, note: String) -> EventNote {
    EventNote::normal(reason, note).related(ObjectReference {
        api_version: Some("v1".into()),
        kind: Some("Pod".into()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        ..ObjectReference::default()
    })
}

/// A pod to delete, with the uid it must still have (a precondition, so a pod re-created by
/// someone else under the same name is never deleted by mistake).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRef {
    pub namespace: String,
    pub name: String,
    pub uid: String,
}

/// One JSON merge patch of a pod of Vigil's labels and annotations (a `None` value removes the
/// key), made only while the pod still has `pod.uid`: a warm standby promoted (the Service's
/// selector and the active role added), a fallback drained (the selector removed) or selected
/// again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relabel {
    pub pod: PodRef,
    pub labels: BTreeMap<String, Option<String>>,
    pub annotations: BTreeMap<String, Option<String>>,
}

/// A write to one of Vigil's EndpointSlices for a warm standby.
#[derive(Debug, Clone, PartialEq)]
pub enum SliceWrite {
    /// Create or update it (server-side apply of the whole slice). Boxed: a slice is large.
    Apply(Box<EndpointSlice>),
    /// Delete it.
    Delete { namespace: String, name: String },
}

/// What to do for one CriticalService.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The full status to write (written only if it differs from the current one).
    pub status: CriticalServiceStatus,
    /// Vigil's EndpointSlices for warm standbys (written first: a standby made a ready endpoint
    /// here is what clients are waiting for).
    pub slices: Vec<SliceWrite>,
    /// Label patches of Vigil's pods: standbys promoted, fallbacks drained or selected again.
    pub relabel: Vec<Relabel>,
    /// Fallback pods to create.
    pub create: Vec<Pod>,
    /// Fallback pods to delete.
    pub delete: Vec<PodRef>,
    pub events: Vec<EventNote>,
    /// Look again after this long (an activation delay running out).
    pub requeue_after: Option<Duration>,
}
