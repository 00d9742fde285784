//! The EndpointSlice Vigil keeps for a warm standby (`spec.warmStandby`): one slice per standby
//! pod, named after it, owned by it, labelled with the Service it stands for.
//!
//! Why a slice of Vigil's own: kube-proxy (1.26 and later) routes a Service's traffic to its
//! ready endpoints, and when it has none, to its endpoints that are *serving and terminating*
//! (KEP-1669, kept so connections survive a rolling update). A standby listed as serving and
//! terminating therefore costs the Service nothing while it is healthy, and takes its traffic in
//! kube-proxy's very next sync after the last ready endpoint goes: no write by Vigil on that
//! path. Once promoted, the same slice lists it as ready, which makes it the only endpoint
//! kube-proxy uses even while a dying pod is still listed as serving. The EndpointSlice
//! controller manages only slices whose `endpointslice.kubernetes.io/managed-by` is its own, so
//! it leaves these alone; kube-proxy merges all slices labelled `kubernetes.io/service-name`.
//!
//! Pure and deterministic, like `fallback.rs`: the same inputs give the same slice and hash.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ObjectReference, PodTemplateSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::fallback::{Fnv1a64, protocol};
use super::model::{
    CRITICAL_SERVICE_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, PodView, SERVICE_LABEL,
    SLICE_HASH_ANNOTATION, SLICE_MANAGED_BY_LABEL, SLICE_MANAGER, ServicePortView, ServiceView,
};

/// Label linking an EndpointSlice to its Service (what kube-proxy groups slices by).
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// How a standby is listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listing {
    /// Waiting: serving and terminating, used by kube-proxy only when no endpoint is ready.
    Armed,
    /// Promoted: a ready endpoint.
    Ready,
}

/// The slice listing `pod` for `service` on behalf of the CriticalService `critical_service`,
/// and its hash. `None` when the pod has no IP yet or no Service port can be mapped to it.
/// `template` resolves named target ports the way the pod was built (see `fallback.rs`).
pub fn standby_slice(
    critical_service: &str,
    service: &ServiceView,
    pod: &PodView,
    template: Option<&PodTemplateSpec>,
    listing: Listing,
) -> Option<(EndpointSlice, String)> {
    let ip = pod.ip.clone()?;
    let ports: Vec<EndpointPort> = service
        .ports
        .iter()
        .map(|port| EndpointPort {
            name: Some(port.name.clone().unwrap_or_default()),
            port: Some(target_port(port, template)),
            protocol: Some(protocol(port).to_owned()),
            app_protocol: None,
        })
        .collect();
    if ports.is_empty() {
        return None;
    }
    let ready = listing == Listing::Ready;
    let address_type = if ip.contains(':') { "IPv6" } else { "IPv4" };
    let endpoint = Endpoint {
        addresses: vec![ip],
        conditions: Some(EndpointConditions {
            ready: Some(ready),
            serving: Some(true),
            terminating: Some(!ready),
        }),
        node_name: pod.node_name.clone(),
        target_ref: Some(ObjectReference {
            kind: Some("Pod".into()),
            namespace: Some(pod.namespace.clone()),
            name: Some(pod.name.clone()),
            uid: Some(pod.uid.clone()),
            ..ObjectReference::default()
        }),
        ..Endpoint::default()
    };
    let labels = BTreeMap::from([
        (SERVICE_NAME_LABEL.to_owned(), service.name.clone()),
        (SLICE_MANAGED_BY_LABEL.to_owned(), SLICE_MANAGER.to_owned()),
        (MANAGED_BY_LABEL.to_owned(), MANAGED_BY_VALUE.to_owned()),
        (
            CRITICAL_SERVICE_LABEL.to_owned(),
            critical_service.to_owned(),
        ),
        (SERVICE_LABEL.to_owned(), service.name.clone()),
    ]);
    let mut slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some(pod.name.clone()),
            namespace: Some(pod.namespace.clone()),
            labels: Some(labels),
            // Owned by the pod it lists: if Vigil is not there to delete the slice with its pod,
            // the garbage collector does.
            owner_references: Some(vec![OwnerReference {
                api_version: "v1".into(),
                kind: "Pod".into(),
                name: pod.name.clone(),
                uid: pod.uid.clone(),
                controller: Some(false),
                block_owner_deletion: None,
            }]),
            ..ObjectMeta::default()
        },
        address_type: address_type.into(),
        endpoints: vec![endpoint],
        ports: Some(ports),
    };
    let hash = slice_hash(&slice);
    slice
        .metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(SLICE_HASH_ANNOTATION.into(), hash.clone());
    Some((slice, hash))
}

/// The container port a Service port reaches on a pod built from `template`: a number as is, a
/// name as the template's containers declare it, else the Service port (what `fallback.rs`
/// declares for a name the template lacks).
fn target_port(port: &ServicePortView, template: Option<&PodTemplateSpec>) -> i32 {
    match &port.target_port {
        Some(IntOrString::Int(n)) => *n,
        None => port.port,
        Some(IntOrString::String(name)) => template
            .and_then(|t| t.spec.as_ref())
            .into_iter()
            .flat_map(|spec| spec.containers.iter())
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_ref() == Some(name))
            .map_or(port.port, |p| p.container_port),
    }
}

/// A stable hex hash of the slice (k8s-openapi serialises fields in order and maps sorted).
fn slice_hash(slice: &EndpointSlice) -> String {
    let mut hash = Fnv1a64::new();
    hash.part(&serde_json::to_string(slice).unwrap_or_default());
    format!("{:016x}", hash.finish())
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};

    fn service() -> ServiceView {
        ServiceView {
            namespace: "shop".into(),
            name: "web".into(),
            uid: "svc-uid".into(),
            labels: BTreeMap::new(),
            selector: BTreeMap::from([("app".into(), "web".into())]),
            external_name: false,
            ports: vec![
                ServicePortView {
                    name: Some("http".into()),
                    port: 80,
                    target_port: Some(IntOrString::String("http".into())),
                    protocol: "TCP".into(),
                },
                ServicePortView {
                    name: Some("metrics".into()),
                    port: 9090,
                    target_port: None,
                    protocol: String::new(),
                },
            ],
        }
    }

    fn pod(ip: Option<&str>) -> PodView {
        PodView {
            namespace: "shop".into(),
            name: "service-watcher-web-standby-a".into(),
            uid: "pod-uid".into(),
            labels: BTreeMap::new(),
            owned_annotation: None,
            template_hash: None,
            owner_uids: vec![],
            ready: true,
            terminating: false,
            ip: ip.map(str::to_owned),
            node_name: Some("node-1".into()),
            retiring_since: None,
            starting_since: None,
            deleted_under_controller: None,
            controller_wants: None,
        }
    }

    fn template() -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "page".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
                        ..ContainerPort::default()
                    }]),
                    ..Container::default()
                }],
                ..PodSpec::default()
            }),
        }
    }

    #[test]
    fn an_armed_standby_is_serving_and_terminating_and_a_promoted_one_ready() {
        let t = template();
        let (armed, armed_hash) = standby_slice(
            "cs",
            &service(),
            &pod(Some("10.1.0.7")),
            Some(&t),
            Listing::Armed,
        )
        .expect("a slice");
        let conditions = armed.endpoints[0].conditions.clone().expect("conditions");
        assert_eq!(
            (conditions.ready, conditions.serving, conditions.terminating),
            (Some(false), Some(true), Some(true))
        );
        let labels = armed.metadata.labels.clone().expect("labels");
        assert_eq!(labels[SERVICE_NAME_LABEL], "web");
        assert_eq!(labels[SLICE_MANAGED_BY_LABEL], SLICE_MANAGER);
        assert_eq!(armed.address_type, "IPv4");
        assert_eq!(armed.endpoints[0].node_name.as_deref(), Some("node-1"));
        let ports: Vec<_> = armed
            .ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.name.clone().unwrap_or_default(),
                    p.port,
                    p.protocol.clone(),
                )
            })
            .collect();
        assert_eq!(
            ports,
            vec![
                ("http".into(), Some(8080), Some("TCP".into())),
                ("metrics".into(), Some(9090), Some("TCP".into())),
            ]
        );
        let (ready, ready_hash) = standby_slice(
            "cs",
            &service(),
            &pod(Some("10.1.0.7")),
            Some(&t),
            Listing::Ready,
        )
        .expect("a slice");
        let conditions = ready.endpoints[0].conditions.clone().expect("conditions");
        assert_eq!(
            (conditions.ready, conditions.terminating),
            (Some(true), Some(false))
        );
        assert_ne!(armed_hash, ready_hash);
        assert_eq!(
            ready.metadata.annotations.expect("annotations")[SLICE_HASH_ANNOTATION],
            ready_hash
        );
    }

    #[test]
    fn a_pod_without_an_ip_or_a_service_without_ports_gets_no_slice() {
        assert!(standby_slice("cs", &service(), &pod(None), None, Listing::Armed).is_none());
        let mut no_ports = service();
        no_ports.ports.clear();
        assert!(
            standby_slice(
                "cs",
                &no_ports,
                &pod(Some("10.1.0.7")),
                None,
                Listing::Armed
            )
            .is_none()
        );
    }

    #[test]
    fn a_name_the_template_lacks_maps_to_the_service_port_and_ipv6_is_told_apart() {
        let (slice, _) = standby_slice(
            "cs",
            &service(),
            &pod(Some("fd00::7")),
            None,
            Listing::Armed,
        )
        .expect("a slice");
        assert_eq!(slice.address_type, "IPv6");
        assert_eq!(slice.ports.expect("ports")[0].port, Some(80));
    }

    #[test]
    fn the_hash_is_stable() {
        let a = standby_slice(
            "cs",
            &service(),
            &pod(Some("10.1.0.7")),
            None,
            Listing::Armed,
        );
        let b = standby_slice(
            "cs",
            &service(),
            &pod(Some("10.1.0.7")),
            None,
            Listing::Armed,
        );
        assert_eq!(a.map(|(_, h)| h), b.map(|(_, h)| h));
    }
}
