//! The fallback pod: its name, the hash of what it is built from, and the pod itself.
//!
//! Everything here is pure and deterministic, so the same inputs always give the same pod, the
//! same name and the same hash (the decision compares hashes to know when to rebuild).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, ContainerPort, EnvVar, Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::Resource as _;
use vigil_apis::critical_service::CriticalService;

use super::model::{
    CRITICAL_SERVICE_LABEL, CriticalServiceView, FALLBACK_ROLE_LABEL, MANAGED_BY_LABEL,
    MANAGED_BY_VALUE, OWNED_ANNOTATION, OWNED_VALUE, ROLE_STANDBY, ROLE_STARTING, SERVICE_LABEL,
    ServicePortView, ServiceView, Settings, TEMPLATE_HASH_ANNOTATION, TemplateKey,
};

/// Annotation naming the PodTemplate (`namespace/name`) a fallback pod was built from, so an
/// operator looking at the pod knows where its spec came from.
pub const POD_TEMPLATE_ANNOTATION: &str = "vigil.dev/pod-template";

/// Environment variables every fallback container gets.
pub const ENV_SERVICE_NAME: &str = "VIGIL_SERVICE_NAME";
pub const ENV_SERVICE_NAMESPACE: &str = "VIGIL_SERVICE_NAMESPACE";
pub const ENV_SERVICE_PORTS: &str = "VIGIL_SERVICE_PORTS";
pub const ENV_MAINTENANCE_MESSAGE: &str = "VIGIL_MAINTENANCE_MESSAGE";

/// A pod name must be a DNS label here: the Service name it embeds is one, and keeping the pod
/// name one too keeps it usable as a hostname.
const MAX_NAME_LEN: usize = 63;
/// Hex digits of the hash that keeps truncated names distinct.
const NAME_HASH_LEN: usize = 8;
/// The protocol Kubernetes assumes when a port names none.
const DEFAULT_PROTOCOL: &str = "TCP";

/// The name of a Service's fallback pod: `{prefix}-{service}`, or, when that is longer than a DNS
/// label allows, its start plus `-` and 8 hex digits of a hash of the full name (so two long names
/// sharing a start still get different pods).
pub fn fallback_pod_name(prefix: &str, service: &str) -> String {
    let full = format!("{prefix}-{service}");
    if full.len() <= MAX_NAME_LEN {
        return full;
    }
    let suffix = format!("{:08x}", fnv1a32(full.as_bytes()));
    let kept = truncate_at_char(&full, MAX_NAME_LEN - 1 - NAME_HASH_LEN);
    // A label may not end in '-' (nor '.', which a sloppy prefix could bring).
    let kept = kept.trim_end_matches(['-', '.']);
    if kept.is_empty() {
        suffix
    } else {
        format!("{kept}-{suffix}")
    }
}

/// The two names a Service's warm standbys take turns at: a new standby is started under one
/// while the other, promoted, still answers (or is still being deleted).
pub fn standby_pod_names(prefix: &str, service: &str) -> [String; 2] {
    ["a", "b"].map(|slot| fallback_pod_name(prefix, &format!("{service}-standby-{slot}")))
}

/// A warm standby for `service` under `name`: the fallback pod, out of the Service's selector
/// (see [`unselected`]) with the standby role.
pub fn standby_pod(
    cr: &CriticalServiceView,
    service: &ServiceView,
    template: &PodTemplateSpec,
    template_key: &TemplateKey,
    settings: &Settings,
    name: &str,
) -> Pod {
    let mut pod = fallback_pod(cr, service, template, template_key, settings);
    pod.metadata.name = Some(name.to_owned());
    unselected(pod, service, ROLE_STANDBY)
}

/// A fallback as it is created: out of the Service's selector with the role `starting`, so that
/// the Service lists it only once it is Ready (one endpoint change instead of two; see
/// [`ROLE_STARTING`]).
pub fn starting_fallback_pod(
    cr: &CriticalServiceView,
    service: &ServiceView,
    template: &PodTemplateSpec,
    template_key: &TemplateKey,
    settings: &Settings,
) -> Pod {
    let pod = fallback_pod(cr, service, template, template_key, settings);
    unselected(pod, service, ROLE_STARTING)
}

/// `pod` minus every label of the Service's selector (so the Service does not select it), plus
/// `role`. Vigil's own marks stay whatever the selector says: without them the pod is not Vigil's.
fn unselected(mut pod: Pod, service: &ServiceView, role: &str) -> Pod {
    let labels = pod.metadata.labels.get_or_insert_with(BTreeMap::new);
    let marks = [MANAGED_BY_LABEL, CRITICAL_SERVICE_LABEL, SERVICE_LABEL];
    for key in service
        .selector
        .keys()
        .filter(|k| !marks.contains(&k.as_str()))
    {
        labels.remove(key);
    }
    labels.insert(FALLBACK_ROLE_LABEL.into(), role.into());
    pod
}

/// A stable hex hash of everything the fallback pod is built from besides names: the template
/// (spec, labels, annotations), the maintenance message, and the Service's ports and selector
/// (ports become env vars and container ports, the selector becomes labels). A pod whose
/// `vigil.dev/template-hash` differs is out of date.
pub fn template_hash(
    template: &PodTemplateSpec,
    service: &ServiceView,
    maintenance_message: Option<&str>,
) -> String {
    let mut hash = Fnv1a64::new();
    // k8s-openapi serialises structs in field order and maps as BTreeMaps, so this JSON is stable.
    hash.part(&serde_json::to_string(&template.spec).unwrap_or_default());
    let meta = template.metadata.as_ref();
    hash.part(&serde_json::to_string(&meta.and_then(|m| m.labels.as_ref())).unwrap_or_default());
    hash.part(
        &serde_json::to_string(&meta.and_then(|m| m.annotations.as_ref())).unwrap_or_default(),
    );
    // A tag tells "no message" from "empty message".
    match maintenance_message {
        Some(message) => {
            hash.part("message");
            hash.part(message);
        }
        None => hash.part("no-message"),
    }
    hash.part(&service_ports_env(&service.ports));
    for (key, value) in &service.selector {
        hash.part(key);
        hash.part(value);
    }
    format!("{:016x}", hash.finish())
}

/// The fallback pod for `service`, built from `template` on behalf of `cr`.
pub fn fallback_pod(
    cr: &CriticalServiceView,
    service: &ServiceView,
    template: &PodTemplateSpec,
    template_key: &TemplateKey,
    settings: &Settings,
) -> Pod {
    let message = cr.spec.maintenance_message.as_deref();
    let mut spec = template.spec.clone().unwrap_or_default();
    let env = service_env(service, message);
    for container in spec
        .containers
        .iter_mut()
        .chain(spec.init_containers.iter_mut().flatten())
    {
        set_env(container, &env);
    }
    add_service_ports(&mut spec.containers, &service.ports);
    Pod {
        metadata: ObjectMeta {
            name: Some(fallback_pod_name(&settings.pod_name_prefix, &service.name)),
            namespace: Some(service.namespace.clone()),
            labels: Some(pod_labels(cr, service, template)),
            annotations: Some(pod_annotations(
                template,
                template_key,
                template_hash(template, service, message),
            )),
            owner_references: Some(vec![owner_reference(cr)]),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    }
}

/// The template's labels, then the Service's selector (so the Service selects the pod), then
/// Vigil's own marks; later ones win, because the pod is useless if the Service misses it.
fn pod_labels(
    cr: &CriticalServiceView,
    service: &ServiceView,
    template: &PodTemplateSpec,
) -> BTreeMap<String, String> {
    let mut labels = template
        .metadata
        .as_ref()
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    labels.extend(service.selector.clone());
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    labels.insert(CRITICAL_SERVICE_LABEL.into(), cr.name.clone());
    labels.insert(SERVICE_LABEL.into(), service.name.clone());
    labels
}

/// The template's annotations plus the ownership mark, the build hash and the template's name.
fn pod_annotations(
    template: &PodTemplateSpec,
    template_key: &TemplateKey,
    hash: String,
) -> BTreeMap<String, String> {
    let mut annotations = template
        .metadata
        .as_ref()
        .and_then(|m| m.annotations.clone())
        .unwrap_or_default();
    annotations.insert(OWNED_ANNOTATION.into(), OWNED_VALUE.into());
    annotations.insert(TEMPLATE_HASH_ANNOTATION.into(), hash);
    annotations.insert(
        POD_TEMPLATE_ANNOTATION.into(),
        format!("{}/{}", template_key.namespace, template_key.name),
    );
    annotations
}

/// The CriticalService as controlling owner: deleting it garbage-collects its fallbacks. A
/// cluster-scoped owner of a namespaced pod is allowed.
fn owner_reference(cr: &CriticalServiceView) -> OwnerReference {
    OwnerReference {
        api_version: CriticalService::api_version(&()).into_owned(),
        kind: CriticalService::kind(&()).into_owned(),
        name: cr.name.clone(),
        uid: cr.uid.clone(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The environment telling the fallback which Service it answers for.
fn service_env(service: &ServiceView, maintenance_message: Option<&str>) -> Vec<(String, String)> {
    let mut env = vec![
        (ENV_SERVICE_NAME.to_owned(), service.name.clone()),
        (ENV_SERVICE_NAMESPACE.to_owned(), service.namespace.clone()),
        (
            ENV_SERVICE_PORTS.to_owned(),
            service_ports_env(&service.ports),
        ),
    ];
    if let Some(message) = maintenance_message {
        env.push((ENV_MAINTENANCE_MESSAGE.to_owned(), message.to_owned()));
    }
    env
}

/// `VIGIL_SERVICE_PORTS`: `name:port/protocol->target` per port, comma-separated, e.g.
/// `http:80/TCP->http,metrics:9090/TCP->9090` (unnamed ports omit `name:`).
pub fn service_ports_env(ports: &[ServicePortView]) -> String {
    ports
        .iter()
        .map(|p| {
            let name = p
                .name
                .as_deref()
                .map(|n| format!("{n}:"))
                .unwrap_or_default();
            let target = match &p.target_port {
                Some(IntOrString::Int(n)) => n.to_string(),
                Some(IntOrString::String(s)) => s.clone(),
                None => p.port.to_string(),
            };
            format!("{name}{}/{}->{target}", p.port, protocol(p))
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Sets Vigil's variables on a container. A variable the template already defines is overwritten
/// in place rather than duplicated: the template cannot know which Service it will answer for,
/// so Vigil's value is the true one.
fn set_env(container: &mut Container, vars: &[(String, String)]) {
    let env = container.env.get_or_insert_with(Vec::new);
    for (name, value) in vars {
        match env.iter_mut().find(|e| e.name == *name) {
            Some(existing) => {
                existing.value = Some(value.clone());
                existing.value_from = None;
            }
            None => env.push(EnvVar {
                name: name.clone(),
                value: Some(value.clone()),
                value_from: None,
            }),
        }
    }
}

/// Declares on the first container every port the Service targets that no container declares
/// yet, so numeric and named targetPorts both reach the fallback.
fn add_service_ports(containers: &mut [Container], ports: &[ServicePortView]) {
    for wanted in ports.iter().map(container_port_for) {
        if declares(containers, &wanted) {
            continue;
        }
        if let Some(first) = containers.first_mut() {
            first.ports.get_or_insert_with(Vec::new).push(wanted);
        }
    }
}

/// The container port a Service port sends traffic to. A named targetPort gets the Service port
/// number, since the fallback has no better one and the Service resolves the name per pod.
fn container_port_for(port: &ServicePortView) -> ContainerPort {
    let (name, number) = match &port.target_port {
        Some(IntOrString::Int(n)) => (None, *n),
        Some(IntOrString::String(name)) => (Some(name.clone()), port.port),
        None => (None, port.port),
    };
    ContainerPort {
        name,
        container_port: number,
        protocol: Some(protocol(port).to_owned()),
        ..ContainerPort::default()
    }
}

/// Whether some container already declares the port: by name for a named port (names are unique
/// in a pod), by number and protocol otherwise.
fn declares(containers: &[Container], wanted: &ContainerPort) -> bool {
    let wanted_protocol = wanted.protocol.as_deref().unwrap_or(DEFAULT_PROTOCOL);
    containers
        .iter()
        .flat_map(|c| c.ports.iter().flatten())
        .any(|p| match &wanted.name {
            Some(name) => p.name.as_ref() == Some(name),
            None => {
                p.container_port == wanted.container_port
                    && p.protocol.as_deref().unwrap_or(DEFAULT_PROTOCOL) == wanted_protocol
            }
        })
}

/// A Service port's protocol, `TCP` when unset.
pub(super) fn protocol(port: &ServicePortView) -> &str {
    if port.protocol.is_empty() {
        DEFAULT_PROTOCOL
    } else {
        &port.protocol
    }
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary (names are
/// ASCII in practice, but a bad prefix must not make this panic).
fn truncate_at_char(s: &str, max: usize) -> &str {
    let end = s
        .char_indices()
        .map(|(i, c)| i + c.len_utf8())
        .take_while(|end| *end <= max)
        .last()
        .unwrap_or(0);
    &s[..end]
}

/// 32-bit FNV-1a: tiny, stable across Rust versions and platforms (unlike `DefaultHasher`).
fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// 64-bit FNV-1a over length-prefixed parts, so `("ab", "c")` and `("a", "bc")` differ.
pub(super) struct Fnv1a64(u64);

impl Fnv1a64 {
    pub(super) fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    fn bytes(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub(super) fn part(&mut self, part: &str) {
        self.bytes(&(part.len() as u64).to_le_bytes());
        self.bytes(part.as_bytes());
    }

    pub(super) fn finish(&self) -> u64 {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::PodSpec;
    use vigil_apis::critical_service::{CriticalServiceSpec, LabelMatch};

    fn port(name: Option<&str>, port: i32, target: Option<IntOrString>) -> ServicePortView {
        ServicePortView {
            name: name.map(str::to_owned),
            port,
            target_port: target,
            protocol: "TCP".into(),
        }
    }

    fn service(ports: Vec<ServicePortView>) -> ServiceView {
        ServiceView {
            namespace: "shop".into(),
            name: "web".into(),
            uid: "svc-uid".into(),
            labels: BTreeMap::new(),
            selector: BTreeMap::from([("app".to_owned(), "web".to_owned())]),
            external_name: false,
            ports,
        }
    }

    fn cr(message: Option<&str>) -> CriticalServiceView {
        CriticalServiceView {
            name: "frontend".into(),
            uid: "cr-uid".into(),
            generation: Some(1),
            spec: CriticalServiceSpec {
                namespace: None,
                match_labels: vec![LabelMatch {
                    key: "role".into(),
                    value: "frontend".into(),
                }],
                pod_template: None,
                activation_delay_seconds: None,
                maintenance_message: message.map(str::to_owned),
                warm_standby: None,
                drain_seconds: None,
            },
            status: None,
        }
    }

    fn template(containers: Vec<Container>) -> PodTemplateSpec {
        PodTemplateSpec {
            metadata: Some(ObjectMeta {
                labels: Some(BTreeMap::from([("tier".to_owned(), "fallback".to_owned())])),
                annotations: Some(BTreeMap::from([("note".to_owned(), "x".to_owned())])),
                ..ObjectMeta::default()
            }),
            spec: Some(PodSpec {
                containers,
                ..PodSpec::default()
            }),
        }
    }

    fn container(name: &str) -> Container {
        Container {
            name: name.into(),
            ..Container::default()
        }
    }

    fn settings() -> Settings {
        Settings {
            pod_name_prefix: "service-watcher".into(),
            default_template: key(),
            watched_namespaces: None,
        }
    }

    fn key() -> TemplateKey {
        TemplateKey {
            namespace: "vigil".into(),
            name: "maintenance".into(),
        }
    }

    fn build(ports: Vec<ServicePortView>, containers: Vec<Container>) -> Pod {
        fallback_pod(
            &cr(Some("back soon")),
            &service(ports),
            &template(containers),
            &key(),
            &settings(),
        )
    }

    fn is_dns_label(s: &str) -> bool {
        !s.is_empty()
            && s.len() <= 63
            && s.bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !s.starts_with('-')
            && !s.ends_with('-')
    }

    fn env_of(container: &Container) -> BTreeMap<String, String> {
        container
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect()
    }

    #[test]
    fn short_names_are_prefix_dash_service() {
        assert_eq!(
            fallback_pod_name("service-watcher", "web"),
            "service-watcher-web"
        );
    }

    #[test]
    fn long_names_are_truncated_with_a_stable_hash() {
        let long = "a".repeat(60);
        let name = fallback_pod_name("service-watcher", &long);
        assert!(is_dns_label(&name), "{name}");
        assert_eq!(name, fallback_pod_name("service-watcher", &long), "stable");
        let other = fallback_pod_name("service-watcher", &format!("{}b", "a".repeat(59)));
        assert_ne!(name, other, "names sharing a start still differ");
        // Truncation landing on a '-' must not leave "--" or a trailing dash before the hash.
        let dashy = format!("{}-{}", "b".repeat(38), "c".repeat(30));
        let name = fallback_pod_name("service-watcher", &dashy);
        assert!(is_dns_label(&name) && !name.contains("--"), "{name}");
        // Exactly 63 is kept whole.
        let fits = "d".repeat(63 - "service-watcher-".len());
        assert_eq!(
            fallback_pod_name("service-watcher", &fits).len(),
            MAX_NAME_LEN
        );
    }

    #[test]
    fn odd_prefixes_never_panic() {
        let name = fallback_pod_name(&"é".repeat(40), "web");
        assert!(name.len() <= MAX_NAME_LEN);
        assert!(!fallback_pod_name(&"-".repeat(70), "x").ends_with('-'));
    }

    #[test]
    fn pod_has_names_labels_annotations_and_owner() {
        let pod = build(vec![port(Some("http"), 80, None)], vec![container("page")]);
        let meta = &pod.metadata;
        assert_eq!(meta.name.as_deref(), Some("service-watcher-web"));
        assert_eq!(meta.namespace.as_deref(), Some("shop"));
        let labels = meta.labels.clone().unwrap_or_default();
        for (k, v) in [
            ("tier", "fallback"),
            ("app", "web"),
            (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
            (CRITICAL_SERVICE_LABEL, "frontend"),
            (SERVICE_LABEL, "web"),
        ] {
            assert_eq!(labels.get(k).map(String::as_str), Some(v), "label {k}");
        }
        let annotations = meta.annotations.clone().unwrap_or_default();
        assert_eq!(annotations.get("note").map(String::as_str), Some("x"));
        assert_eq!(
            annotations.get(OWNED_ANNOTATION).map(String::as_str),
            Some(OWNED_VALUE)
        );
        assert_eq!(
            annotations.get(TEMPLATE_HASH_ANNOTATION),
            Some(&template_hash(
                &template(vec![container("page")]),
                &service(vec![port(Some("http"), 80, None)]),
                Some("back soon")
            ))
        );
        assert_eq!(
            annotations.get(POD_TEMPLATE_ANNOTATION).map(String::as_str),
            Some("vigil/maintenance")
        );
        assert_eq!(
            meta.owner_references,
            Some(vec![OwnerReference {
                api_version: "mycrd.com/v1".into(),
                kind: "CriticalService".into(),
                name: "frontend".into(),
                uid: "cr-uid".into(),
                controller: Some(true),
                block_owner_deletion: Some(true),
            }])
        );
    }

    #[test]
    fn every_container_gets_the_env_without_duplicates() {
        let mut sidecar = container("sidecar");
        sidecar.env = Some(vec![EnvVar {
            name: ENV_SERVICE_NAME.into(),
            value: Some("placeholder".into()),
            value_from: None,
        }]);
        let ports = vec![
            port(Some("http"), 80, Some(IntOrString::String("http".into()))),
            port(Some("metrics"), 9090, None),
        ];
        let pod = build(ports, vec![container("page"), sidecar]);
        let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
        assert_eq!(containers.len(), 2);
        for c in &containers {
            let env = env_of(c);
            assert_eq!(env.get(ENV_SERVICE_NAME).map(String::as_str), Some("web"));
            assert_eq!(
                env.get(ENV_SERVICE_NAMESPACE).map(String::as_str),
                Some("shop")
            );
            assert_eq!(
                env.get(ENV_SERVICE_PORTS).map(String::as_str),
                Some("http:80/TCP->http,metrics:9090/TCP->9090")
            );
            assert_eq!(
                env.get(ENV_MAINTENANCE_MESSAGE).map(String::as_str),
                Some("back soon")
            );
            let names: Vec<_> = c.env.iter().flatten().map(|e| &e.name).collect();
            assert_eq!(names.len(), env.len(), "no duplicate names in {}", c.name);
        }
    }

    #[test]
    fn no_message_no_message_variable() {
        let pod = fallback_pod(
            &cr(None),
            &service(vec![]),
            &template(vec![container("page")]),
            &key(),
            &settings(),
        );
        let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
        assert!(!env_of(&containers[0]).contains_key(ENV_MAINTENANCE_MESSAGE));
    }

    #[test]
    fn target_ports_become_container_ports_on_the_first_container() {
        let ports = vec![
            port(Some("num"), 80, Some(IntOrString::Int(8080))),
            port(Some("named"), 81, Some(IntOrString::String("http".into()))),
            port(Some("absent"), 9090, None),
        ];
        let pod = build(ports, vec![container("page"), container("sidecar")]);
        let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
        let declared: Vec<_> = containers[0]
            .ports
            .iter()
            .flatten()
            .map(|p| (p.name.clone(), p.container_port, p.protocol.clone()))
            .collect();
        let tcp = Some("TCP".to_owned());
        assert_eq!(
            declared,
            vec![
                (None, 8080, tcp.clone()),
                (Some("http".into()), 81, tcp.clone()),
                (None, 9090, tcp),
            ]
        );
        assert_eq!(containers[1].ports, None, "only the first container");
    }

    #[test]
    fn ports_declared_anywhere_are_not_added_again() {
        let mut sidecar = container("sidecar");
        sidecar.ports = Some(vec![
            ContainerPort {
                name: Some("http".into()),
                container_port: 8000,
                ..ContainerPort::default()
            },
            ContainerPort {
                container_port: 8080,
                ..ContainerPort::default()
            },
        ]);
        let ports = vec![
            port(None, 80, Some(IntOrString::String("http".into()))),
            port(None, 81, Some(IntOrString::Int(8080))),
            port(None, 82, Some(IntOrString::Int(8080))),
        ];
        let pod = build(ports, vec![container("page"), sidecar]);
        let containers = pod.spec.map(|s| s.containers).unwrap_or_default();
        assert_eq!(containers[0].ports, None);
    }

    #[test]
    fn hash_changes_with_what_the_pod_is_built_from() {
        let base = template_hash(
            &template(vec![container("page")]),
            &service(vec![port(None, 80, None)]),
            None,
        );
        let same = template_hash(
            &template(vec![container("page")]),
            &service(vec![port(None, 80, None)]),
            None,
        );
        assert_eq!(base, same);
        assert_eq!(base.len(), 16);
        for other in [
            template_hash(
                &template(vec![container("other")]),
                &service(vec![port(None, 80, None)]),
                None,
            ),
            template_hash(
                &template(vec![container("page")]),
                &service(vec![port(None, 81, None)]),
                None,
            ),
            template_hash(
                &template(vec![container("page")]),
                &service(vec![port(None, 80, None)]),
                Some(""),
            ),
        ] {
            assert_ne!(base, other);
        }
    }
}
