//! What the CriticalService controller caches, and how. Pods are the bulk of a cluster, and a
//! k8s-openapi `Pod` reserves room for a whole `PodSpec` even when it is empty, so the caches do
//! not hold the API's types: they hold *cached kinds* — [`CachedPod`], [`CachedService`],
//! [`CachedSlice`] — that list and watch the same resources (kube's `Resource` derive inherits
//! the real kind's group, version and plural) but deserialize only the fields the decision
//! reads; the rest of each object is skipped by serde and never allocated. This module also
//! files them in indexes and turns them into the decision's views.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodTemplate, Service, ServicePort};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt as _};
use serde::Deserialize;
use vigil_apis::CriticalService;

use super::model::{
    CRITICAL_SERVICE_LABEL, OWNED_ANNOTATION, PodView, ServicePortView, ServiceView, SliceView,
    TEMPLATE_HASH_ANNOTATION,
};

/// A pod as cached: metadata, readiness and IP.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = Pod)]
pub struct CachedPod {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub status: Option<CachedPodStatus>,
}

#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedPodStatus {
    #[serde(default)]
    pub conditions: Option<Vec<CachedCondition>>,
    #[serde(default, rename = "podIP")]
    pub pod_ip: Option<String>,
}

/// A condition's type and status (the pod's `Ready` one is all the decision reads).
#[derive(Clone, Debug, Default, Deserialize)]
pub struct CachedCondition {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
}

/// A Service as cached: metadata, selector, type and ports.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = Service)]
pub struct CachedService {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub spec: Option<CachedServiceSpec>,
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

/// An EndpointSlice as cached: metadata, and each endpoint's readiness and pod name.
#[derive(Resource, Clone, Debug, Default, Deserialize)]
#[resource(inherit = EndpointSlice)]
pub struct CachedSlice {
    pub metadata: ObjectMeta,
    #[serde(default)]
    pub endpoints: Option<Vec<CachedEndpoint>>,
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
    let selector = service.spec.as_ref().and_then(|s| s.selector.as_ref());
    selector
        .into_iter()
        .flatten()
        .map(|(k, v)| selector_key(&ns, k, v))
        .chain(
            service
                .labels()
                .iter()
                .map(|(k, v)| service_label_key(k, v)),
        )
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

/// Pods filed by label, and fallback pods by their CriticalService.
pub fn pod_keys(pod: &CachedPod) -> Vec<String> {
    let ns = pod.namespace().unwrap_or_default();
    let labels = pod.labels();
    labels
        .iter()
        .map(|(k, v)| pod_label_key(&ns, k, v))
        .chain(
            labels
                .get(CRITICAL_SERVICE_LABEL)
                .map(|cr| fallback_key(cr)),
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
        .labels()
        .get(SERVICE_NAME_LABEL)
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

/// Drops the metadata the decision never reads (managed fields are most of a small object).
fn slim_meta(meta: &mut ObjectMeta, keep_annotations: &[&str]) {
    meta.managed_fields = None;
    meta.self_link = None;
    meta.generate_name = None;
    meta.creation_timestamp = None;
    meta.finalizers = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| keep_annotations.contains(&k.as_str()));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Strips a pod to what the decision reads: labels, two annotations, owners, readiness,
/// deletion mark and IP.
pub fn slim_pod(pod: &mut CachedPod) {
    slim_meta(
        &mut pod.metadata,
        &[OWNED_ANNOTATION, TEMPLATE_HASH_ANNOTATION],
    );
    if let Some(conditions) = pod.status.as_mut().and_then(|s| s.conditions.as_mut()) {
        conditions.retain(|c| c.type_ == "Ready");
    }
}

/// Strips a Service's bookkeeping.
pub fn slim_service(service: &mut CachedService) {
    slim_meta(&mut service.metadata, &[]);
}

/// Strips an EndpointSlice's bookkeeping.
pub fn slim_slice(slice: &mut CachedSlice) {
    slim_meta(&mut slice.metadata, &[]);
}

/// Strips a CriticalService's bookkeeping.
pub fn slim_critical_service(cr: &mut CriticalService) {
    cr.meta_mut().managed_fields = None;
}

/// Strips a PodTemplate's bookkeeping (its spec is what the fallback runs).
pub fn slim_template(template: &mut PodTemplate) {
    template.meta_mut().managed_fields = None;
}

/// A cached pod as the decision's view.
pub fn pod_view(pod: &CachedPod) -> PodView {
    let meta = &pod.metadata;
    let annotation = |key: &str| meta.annotations.as_ref().and_then(|a| a.get(key)).cloned();
    PodView {
        namespace: pod.namespace().unwrap_or_default(),
        name: pod.name_any(),
        uid: meta.uid.clone().unwrap_or_default(),
        labels: meta.labels.clone().unwrap_or_default(),
        owned_annotation: annotation(OWNED_ANNOTATION),
        template_hash: annotation(TEMPLATE_HASH_ANNOTATION),
        owner_uids: meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect(),
        ready: pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .into_iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        terminating: meta.deletion_timestamp.is_some(),
        ip: pod.status.as_ref().and_then(|s| s.pod_ip.clone()),
    }
}

/// A cached Service as the decision's view.
pub fn service_view(service: &CachedService) -> ServiceView {
    let spec = service.spec.clone().unwrap_or_default();
    ServiceView {
        namespace: service.namespace().unwrap_or_default(),
        name: service.name_any(),
        uid: service.metadata.uid.clone().unwrap_or_default(),
        labels: service.metadata.labels.clone().unwrap_or_default(),
        selector: spec.selector.unwrap_or_default(),
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

/// EndpointSlice readiness per (namespace, Service).
pub fn slice_views<'a>(
    slices: impl Iterator<Item = &'a CachedSlice>,
) -> BTreeMap<(String, String), SliceView> {
    let mut out: BTreeMap<(String, String), SliceView> = BTreeMap::new();
    for slice in slices {
        let Some(service) = slice.labels().get(SERVICE_NAME_LABEL) else {
            continue;
        };
        let view = out
            .entry((slice.namespace().unwrap_or_default(), service.clone()))
            .or_default();
        view.ready_pods.extend(slice.ready_pods().cloned());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_kinds_read_only_what_they_keep_from_api_objects() {
        let pod: CachedPod = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "namespace": "ns", "labels": {"app": "web"},
                "annotations": {"service-watcher": "owned", "big": "x"},
                "managedFields": [{"manager": "kubectl"}]},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
            "status": {"podIP": "10.0.0.1", "conditions": [
                {"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}]},
        }))
        .expect("a pod");
        let mut pod = pod;
        slim_pod(&mut pod);
        let view = pod_view(&pod);
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

        let slice: CachedSlice = serde_json::from_value(serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": "web-x", "namespace": "ns", "labels": {SERVICE_NAME_LABEL: "web"}},
            "endpoints": [
                {"addresses": ["10.0.0.1"], "conditions": {"ready": true}, "targetRef": {"kind": "Pod", "name": "a"}},
                {"addresses": ["10.0.0.2"], "conditions": {"ready": false}, "targetRef": {"kind": "Pod", "name": "b"}},
            ],
        }))
        .expect("a slice");
        let views = slice_views(std::iter::once(&slice));
        let ready = &views[&("ns".to_owned(), "web".to_owned())].ready_pods;
        assert_eq!(ready.iter().collect::<Vec<_>>(), ["a"]);
        assert_eq!(CachedSlice::group(&()), "discovery.k8s.io");

        let service: CachedService = serde_json::from_value(serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "web", "namespace": "ns"},
            "spec": {"selector": {"app": "web"}, "type": "ClusterIP",
                "ports": [{"port": 80, "targetPort": "http"}], "clusterIP": "10.96.0.1"},
        }))
        .expect("a service");
        let view = service_view(&service);
        assert_eq!(view.selector.get("app").map(String::as_str), Some("web"));
        assert_eq!(view.ports[0].protocol, "TCP");
    }
}
