//! What the CriticalService controller caches: the slimming of each kind (only the fields the
//! decision reads), the index keys, and the conversion of cached objects into the decision's
//! views. Pods are the bulk of a cluster, so a cached pod
//! keeps its labels, two annotations, owners, readiness, deletion mark and IP — nothing else.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, PodStatus, PodTemplate, Service, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{Resource, ResourceExt as _};
use vigil_apis::CriticalService;

use super::model::{
    CRITICAL_SERVICE_LABEL, OWNED_ANNOTATION, PodView, ServicePortView, ServiceView, SliceView,
    TEMPLATE_HASH_ANNOTATION,
};

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
pub fn service_keys(service: &Service) -> Vec<String> {
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
pub fn pod_keys(pod: &Pod) -> Vec<String> {
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
pub fn slice_keys(slice: &EndpointSlice) -> Vec<String> {
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

/// Strips a pod to what the decision reads.
pub fn slim_pod(pod: &mut Pod) {
    let meta = pod.meta_mut();
    meta.managed_fields = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| k == OWNED_ANNOTATION || k == TEMPLATE_HASH_ANNOTATION);
    }
    pod.spec = None;
    pod.status = pod.status.take().map(|s| PodStatus {
        conditions: s
            .conditions
            .map(|c| c.into_iter().filter(|c| c.type_ == "Ready").collect()),
        pod_ip: s.pod_ip,
        ..PodStatus::default()
    });
}

/// Strips a Service to its labels, selector, type and ports.
pub fn slim_service(service: &mut Service) {
    service.meta_mut().managed_fields = None;
    service.meta_mut().annotations = None;
    service.status = None;
    service.spec = service.spec.take().map(|s| ServiceSpec {
        selector: s.selector,
        type_: s.type_,
        ports: s.ports,
        ..ServiceSpec::default()
    });
}

/// Strips an EndpointSlice to its labels and endpoints' readiness and pod names.
pub fn slim_slice(slice: &mut EndpointSlice) {
    slice.meta_mut().managed_fields = None;
    slice.meta_mut().annotations = None;
    for endpoint in &mut slice.endpoints {
        endpoint.hints = None;
        endpoint.zone = None;
        endpoint.deprecated_topology = None;
    }
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
pub fn pod_view(pod: &Pod) -> PodView {
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
pub fn service_view(service: &Service) -> ServiceView {
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
    slices: impl Iterator<Item = &'a EndpointSlice>,
) -> BTreeMap<(String, String), SliceView> {
    let mut out: BTreeMap<(String, String), SliceView> = BTreeMap::new();
    for slice in slices {
        let Some(service) = slice.labels().get(SERVICE_NAME_LABEL) else {
            continue;
        };
        let view = out
            .entry((slice.namespace().unwrap_or_default(), service.clone()))
            .or_default();
        for endpoint in &slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(false);
            if let (true, Some(target)) = (
                ready,
                endpoint.target_ref.as_ref().and_then(|t| t.name.clone()),
            ) {
                view.ready_pods.insert(target);
            }
        }
    }
    out
}
