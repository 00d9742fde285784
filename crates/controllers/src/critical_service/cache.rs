//! Lean caches: watch streams that keep only the fields the decision reads, and the conversion
//! of cached objects into the decision's views. Pods are the bulk of a cluster, so a cached pod
//! keeps its labels, two annotations, owners, readiness, deletion mark and IP — nothing else.

use std::collections::{BTreeMap, BTreeSet};

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{Pod, PodStatus, PodTemplate, Service, ServiceSpec};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::{WatchStreamExt as _, reflector, watcher};
use kube::{Api, Client, Resource, ResourceExt as _};

use super::model::{
    OWNED_ANNOTATION, PodView, ServicePortView, ServiceView, SliceView, TEMPLATE_HASH_ANNOTATION,
};

/// Label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Watches a kind in every watched namespace (one watch each), or cluster-wide.
pub fn watch_in<K>(
    client: &Client,
    namespaces: Option<&BTreeSet<String>>,
) -> impl Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send + use<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default,
{
    let config = watcher::Config::default();
    let streams: Vec<_> = match namespaces {
        None => vec![watcher(Api::<K>::all(client.clone()), config).boxed()],
        Some(set) => set
            .iter()
            .map(|ns| watcher(Api::<K>::namespaced(client.clone(), ns), config.clone()).boxed())
            .collect(),
    };
    futures::stream::select_all(streams)
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

/// Strips a PodTemplate's bookkeeping (its spec is what the fallback runs).
pub fn slim_template(template: &mut PodTemplate) {
    template.meta_mut().managed_fields = None;
}

/// A watch stream slimmed by `slim` before it fills the cache behind `writer`, backing off on
/// errors on its own; yields the objects it touched, to trigger reconciles.
pub fn lean_cache<K, S>(
    writer: reflector::store::Writer<K>,
    stream: S,
    slim: fn(&mut K),
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Clone + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    reflector::reflector(writer, stream.modify(slim))
        .default_backoff()
        .touched_objects()
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
