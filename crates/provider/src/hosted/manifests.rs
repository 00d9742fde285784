//! The objects of a hosted control plane, as pure functions of what the provider decided: the
//! names, the settings, the versions each component runs and the Services' addresses. No
//! I/O; [`super::store`] applies them when their hash differs from what runs.
//!
//! Three components, each hardened for the `restricted` Pod Security Standard (non-root,
//! no privilege escalation, no capabilities, the runtime's seccomp profile, a read-only root):
//! - etcd: a StatefulSet of one member whose data is a PersistentVolumeClaim, so deleting every
//!   pod loses nothing; TLS between peers and for clients, its own CA.
//! - kube-apiserver: a Deployment of at least two replicas behind a Service, rolled one at a
//!   time with a surge and never below its replicas (`maxUnavailable: 0`); each replica keeps
//!   serving for `--shutdown-delay-duration` after it is told to stop, while its endpoint is
//!   withdrawn, so a roll fails no request. A PodDisruptionBudget keeps one serving through
//!   node drains.
//! - kube-controller-manager: a Deployment of one, with leader election (a surge never runs
//!   two active), signing the cluster's CSRs with its CA.
//!
//! Everything reaches everything by Service address, not name: a management cluster without
//! cluster DNS works the same.

use std::net::IpAddr;

use serde_json::{Value, json};

use super::config::{HostedConfig, VersionImages};
use super::names::{API_SERVER, CONTROLLER_MANAGER, ETCD, Names, VERSION_ANNOTATION};

/// etcd's ports.
pub const ETCD_CLIENT_PORT: u16 = 2379;
const ETCD_PEER_PORT: u16 = 2380;
const ETCD_METRICS_PORT: u16 = 2381;
/// The API server's port in its pods; its Service serves 443.
pub const API_SERVER_PORT: u16 = 6443;
pub const API_SERVER_SERVICE_PORT: u16 = 443;
const CONTROLLER_MANAGER_PORT: u16 = 10257;
/// The non-root user every container runs as (distroless's `nonroot`).
const USER: i64 = 65532;

/// Where the certificates are mounted in every container.
pub const PKI_DIR: &str = "/etc/kubernetes/pki";
/// The controller-manager's kubeconfig, beside its certificates.
pub const CONTROLLER_MANAGER_KUBECONFIG: &str = "controller-manager.kubeconfig";

/// The addresses of a control plane's Services, once the management cluster gave them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Addresses {
    pub etcd: IpAddr,
    pub api_server: IpAddr,
}

/// etcd's client Service: the API servers reach it at its ClusterIP.
pub fn etcd_service(names: &Names) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(names, &names.etcd(), ETCD),
        "spec": {
            "type": "ClusterIP",
            "selector": names.labels(Some(ETCD)),
            "ports": [{"name": "client", "port": ETCD_CLIENT_PORT, "targetPort": ETCD_CLIENT_PORT}],
        },
    })
}

/// etcd's headless Service: the StatefulSet's governing Service (stable pod identities).
pub fn etcd_peer_service(names: &Names) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(names, &names.etcd_peer(), ETCD),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": true,
            "selector": names.labels(Some(ETCD)),
            "ports": [{"name": "peer", "port": ETCD_PEER_PORT, "targetPort": ETCD_PEER_PORT}],
        },
    })
}

/// The API server's Service, of the type the settings give.
pub fn api_server_service(names: &Names, config: &HostedConfig) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata(names, &names.api_server(), API_SERVER),
        "spec": {
            "type": config.exposure.service_type(),
            "selector": names.labels(Some(API_SERVER)),
            "ports": [{
                "name": "https",
                "port": API_SERVER_SERVICE_PORT,
                "targetPort": API_SERVER_PORT,
            }],
        },
    })
}

/// etcd: one member, its data on a claim that outlives every pod.
pub fn etcd(names: &Names, config: &HostedConfig, addresses: &Addresses) -> Value {
    let pki = format!("{PKI_DIR}/etcd");
    let advertise = format!("https://{}:{ETCD_CLIENT_PORT}", url_host(addresses.etcd));
    let mut args = vec![
        "--name=$(POD_NAME)".to_owned(),
        // A directory of the volume: etcd wants its data directory 0700, which a volume's
        // root may not be.
        "--data-dir=/var/lib/etcd/data".to_owned(),
        format!("--listen-client-urls=https://0.0.0.0:{ETCD_CLIENT_PORT}"),
        format!("--advertise-client-urls={advertise}"),
        format!("--listen-peer-urls=https://0.0.0.0:{ETCD_PEER_PORT}"),
        // One member: its peer address is only ever its own.
        format!("--initial-advertise-peer-urls=https://127.0.0.1:{ETCD_PEER_PORT}"),
        format!("--initial-cluster=$(POD_NAME)=https://127.0.0.1:{ETCD_PEER_PORT}"),
        "--initial-cluster-state=new".to_owned(),
        format!("--initial-cluster-token={}", names.id()),
        format!("--listen-metrics-urls=http://0.0.0.0:{ETCD_METRICS_PORT}"),
        "--client-cert-auth=true".to_owned(),
        format!("--trusted-ca-file={pki}/ca.crt"),
        format!("--cert-file={pki}/server.crt"),
        format!("--key-file={pki}/server.key"),
        "--peer-client-cert-auth=true".to_owned(),
        format!("--peer-trusted-ca-file={pki}/ca.crt"),
        format!("--peer-cert-file={pki}/peer.crt"),
        format!("--peer-key-file={pki}/peer.key"),
        "--snapshot-count=10000".to_owned(),
        "--auto-compaction-retention=1".to_owned(),
        "--logger=zap".to_owned(),
        "--log-outputs=stderr".to_owned(),
    ];
    // Below the claim: a full database is a clean "database space exceeded" alarm, not a disk
    // that runs out under etcd.
    if let Some(quota) = quota_bytes(&config.etcd_storage) {
        args.push(format!("--quota-backend-bytes={quota}"));
    }
    let mut claim = json!({
        "metadata": {"name": "data", "labels": names.labels(Some(ETCD))},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": config.etcd_storage}},
        },
    });
    if let Some(class) = &config.storage_class {
        claim["spec"]["storageClassName"] = json!(class);
    }
    let container = json!({
        "name": ETCD,
        "image": config.etcd_image,
        "imagePullPolicy": config.image_pull_policy,
        "command": ["etcd"],
        "args": args,
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [
            {"name": "client", "containerPort": ETCD_CLIENT_PORT},
            {"name": "peer", "containerPort": ETCD_PEER_PORT},
            {"name": "metrics", "containerPort": ETCD_METRICS_PORT},
        ],
        "readinessProbe": http_probe("/health", ETCD_METRICS_PORT, "HTTP", 2, 3),
        "livenessProbe": http_probe("/health", ETCD_METRICS_PORT, "HTTP", 10, 6),
        "startupProbe": http_probe("/health", ETCD_METRICS_PORT, "HTTP", 1, 60),
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}},
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "data", "mountPath": "/var/lib/etcd"},
            {"name": "pki", "mountPath": pki, "readOnly": true},
        ],
    });
    json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": metadata(names, &names.etcd(), ETCD),
        "spec": {
            "replicas": 1,
            "serviceName": names.etcd_peer(),
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": names.labels(Some(ETCD))},
            // A StatefulSet keeps its claims by default; the provider deletes them by label
            // when the cluster is deleted.
            "volumeClaimTemplates": [claim],
            "template": {
                "metadata": {"labels": names.labels(Some(ETCD))},
                "spec": etcd_pod_spec(pod_spec(vec![container], vec![secret_volume("pki", &names.etcd_certs())], 30)),
            },
        },
    })
}

/// The flags of kube-apiserver.
fn api_server_args(config: &HostedConfig, addresses: &Addresses) -> Vec<String> {
    let pki = PKI_DIR;
    vec![
        format!("--secure-port={API_SERVER_PORT}"),
        "--bind-address=0.0.0.0".to_owned(),
        "--advertise-address=$(POD_IP)".to_owned(),
        format!(
            "--etcd-servers=https://{}:{ETCD_CLIENT_PORT}",
            url_host(addresses.etcd)
        ),
        format!("--etcd-cafile={pki}/etcd-ca.crt"),
        format!("--etcd-certfile={pki}/etcd-client.crt"),
        format!("--etcd-keyfile={pki}/etcd-client.key"),
        format!("--client-ca-file={pki}/ca.crt"),
        format!("--tls-cert-file={pki}/apiserver.crt"),
        format!("--tls-private-key-file={pki}/apiserver.key"),
        format!("--kubelet-client-certificate={pki}/kubelet-client.crt"),
        format!("--kubelet-client-key={pki}/kubelet-client.key"),
        "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname".to_owned(),
        "--service-account-issuer=https://kubernetes.default.svc".to_owned(),
        format!("--service-account-key-file={pki}/sa.pub"),
        format!("--service-account-signing-key-file={pki}/sa.key"),
        format!("--service-cluster-ip-range={}", config.service_cidr),
        "--authorization-mode=Node,RBAC".to_owned(),
        "--enable-admission-plugins=NodeRestriction".to_owned(),
        "--allow-privileged=true".to_owned(),
        "--enable-bootstrap-token-auth=true".to_owned(),
        format!("--requestheader-client-ca-file={pki}/front-proxy-ca.crt"),
        "--requestheader-allowed-names=front-proxy-client".to_owned(),
        "--requestheader-username-headers=X-Remote-User".to_owned(),
        "--requestheader-group-headers=X-Remote-Group".to_owned(),
        "--requestheader-extra-headers-prefix=X-Remote-Extra-".to_owned(),
        format!("--proxy-client-cert-file={pki}/front-proxy-client.crt"),
        format!("--proxy-client-key-file={pki}/front-proxy-client.key"),
        // Told to stop, a replica fails /readyz at once (its endpoint is withdrawn) and keeps
        // serving this long, until kube-proxy everywhere sends new connections elsewhere.
        format!(
            "--shutdown-delay-duration={}s",
            config.shutdown_delay.as_secs()
        ),
        "--profiling=false".to_owned(),
        // The hosted cluster's `kubernetes` Service lists the live replicas' pod addresses.
        "--endpoint-reconciler-type=lease".to_owned(),
    ]
}

/// kube-apiserver: at least two replicas, rolled with a surge and none taken down first.
pub fn api_server(
    names: &Names,
    config: &HostedConfig,
    addresses: &Addresses,
    images: &VersionImages,
) -> Value {
    let grace = config.shutdown_delay.as_secs() + 30;
    let container = json!({
        "name": "kube-apiserver",
        "image": images.api_server,
        "imagePullPolicy": config.image_pull_policy,
        "command": ["kube-apiserver"],
        "args": api_server_args(config, addresses),
        "env": [{"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
        "ports": [{"name": "https", "containerPort": API_SERVER_PORT}],
        "readinessProbe": http_probe("/readyz", API_SERVER_PORT, "HTTPS", 1, 1),
        "livenessProbe": http_probe("/livez", API_SERVER_PORT, "HTTPS", 10, 6),
        "startupProbe": http_probe("/livez", API_SERVER_PORT, "HTTPS", 1, 120),
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "pki", "mountPath": PKI_DIR, "readOnly": true},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    });
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": versioned(metadata(names, &names.api_server(), API_SERVER), images),
        "spec": {
            "replicas": config.api_server_replicas,
            "selector": {"matchLabels": names.labels(Some(API_SERVER))},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            // A new replica counts as available only once it has served for a moment.
            "minReadySeconds": 3,
            "template": {
                "metadata": {
                    "labels": names.labels(Some(API_SERVER)),
                    "annotations": {VERSION_ANNOTATION: images.version},
                },
                "spec": spread(pod_spec(
                    vec![container],
                    vec![secret_volume("pki", &names.api_server_certs()), empty_dir("tmp")],
                    grace,
                ), names),
            },
        },
    })
}

/// Keeps one API server serving through voluntary disruptions (drains).
pub fn api_server_budget(names: &Names) -> Value {
    json!({
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": metadata(names, &names.api_server(), API_SERVER),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": names.labels(Some(API_SERVER))},
        },
    })
}

/// kube-controller-manager: one replica, leader-elected.
pub fn controller_manager(names: &Names, config: &HostedConfig, images: &VersionImages) -> Value {
    let pki = PKI_DIR;
    let kubeconfig = format!("{pki}/{CONTROLLER_MANAGER_KUBECONFIG}");
    let args = vec![
        format!("--kubeconfig={kubeconfig}"),
        format!("--authentication-kubeconfig={kubeconfig}"),
        format!("--authorization-kubeconfig={kubeconfig}"),
        "--bind-address=0.0.0.0".to_owned(),
        format!("--secure-port={CONTROLLER_MANAGER_PORT}"),
        "--leader-elect=true".to_owned(),
        "--use-service-account-credentials=true".to_owned(),
        "--controllers=*,bootstrapsigner,tokencleaner".to_owned(),
        format!("--root-ca-file={pki}/ca.crt"),
        format!("--service-account-private-key-file={pki}/sa.key"),
        format!("--cluster-signing-cert-file={pki}/ca.crt"),
        format!("--cluster-signing-key-file={pki}/ca.key"),
        format!("--requestheader-client-ca-file={pki}/front-proxy-ca.crt"),
        format!("--client-ca-file={pki}/ca.crt"),
        format!("--service-cluster-ip-range={}", config.service_cidr),
        format!("--cluster-name={}", names.cluster),
        "--profiling=false".to_owned(),
        // The default, /usr/libexec/…, is on the read-only root.
        "--flex-volume-plugin-dir=/tmp/volume-plugins".to_owned(),
    ];
    let container = json!({
        "name": "kube-controller-manager",
        "image": images.controller_manager,
        "imagePullPolicy": config.image_pull_policy,
        "command": ["kube-controller-manager"],
        "args": args,
        "ports": [{"name": "https", "containerPort": CONTROLLER_MANAGER_PORT}],
        "livenessProbe": http_probe("/healthz", CONTROLLER_MANAGER_PORT, "HTTPS", 10, 6),
        "startupProbe": http_probe("/healthz", CONTROLLER_MANAGER_PORT, "HTTPS", 2, 60),
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
        "securityContext": container_security(),
        "volumeMounts": [
            {"name": "pki", "mountPath": PKI_DIR, "readOnly": true},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    });
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": versioned(
            metadata(names, &names.controller_manager(), CONTROLLER_MANAGER),
            images,
        ),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": names.labels(Some(CONTROLLER_MANAGER))},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    "labels": names.labels(Some(CONTROLLER_MANAGER)),
                    "annotations": {VERSION_ANNOTATION: images.version},
                },
                "spec": pod_spec(
                    vec![container],
                    vec![secret_volume("pki", &names.controller_manager_certs()), empty_dir("tmp")],
                    30,
                ),
            },
        },
    })
}

/// A Secret of the cluster's PKI (`data`: file name → content).
pub fn secret(
    names: &Names,
    name: &str,
    component: &str,
    data: &std::collections::BTreeMap<String, String>,
) -> Value {
    let encoded: serde_json::Map<String, Value> = data
        .iter()
        .map(|(k, v)| {
            (
                k.clone(),
                json!(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    v.as_bytes()
                )),
            )
        })
        .collect();
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": metadata(names, name, component),
        "type": "Opaque",
        "data": encoded,
    })
}

/// The record of what the provider was asked for.
pub fn record(
    names: &Names,
    identity: &crate::ClusterIdentity,
    data: &std::collections::BTreeMap<String, String>,
) -> Value {
    let mut meta = metadata(names, &names.record(), "record");
    meta["labels"][super::names::UUID_LABEL] = json!(identity.uuid);
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": data,
    })
}

fn metadata(names: &Names, name: &str, component: &str) -> Value {
    json!({
        "name": name,
        "namespace": names.namespace,
        "labels": names.labels(Some(component)),
    })
}

fn versioned(mut meta: Value, images: &VersionImages) -> Value {
    meta["annotations"] = json!({VERSION_ANNOTATION: images.version});
    meta
}

/// Three quarters of a claim's size (`1Gi`, `512Mi`) in bytes; `None` for another form (etcd
/// keeps its own default then).
pub fn quota_bytes(size: &str) -> Option<u64> {
    let (number, unit) = size
        .find(|c: char| !c.is_ascii_digit())
        .map_or((size, ""), |i| size.split_at(i));
    let number: u64 = number.parse().ok()?;
    let scale: u64 = match unit {
        "Gi" => 1 << 30,
        "Mi" => 1 << 20,
        _ => return None,
    };
    Some(number.checked_mul(scale)? / 4 * 3)
}

/// An address as a URL's host (`[::1]` for IPv6).
pub fn url_host(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    }
}

fn http_probe(path: &str, port: u16, scheme: &str, period: u32, failures: u32) -> Value {
    json!({
        "httpGet": {"path": path, "port": port, "scheme": scheme},
        "periodSeconds": period,
        "timeoutSeconds": 3,
        "failureThreshold": failures,
    })
}

/// What the `restricted` Pod Security Standard asks of a container, and a read-only root.
fn container_security() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "readOnlyRootFilesystem": true,
        "runAsNonRoot": true,
        "runAsUser": USER,
        "runAsGroup": USER,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

fn pod_spec(containers: Vec<Value>, volumes: Vec<Value>, grace: u64) -> Value {
    json!({
        "automountServiceAccountToken": false,
        "enableServiceLinks": false,
        "terminationGracePeriodSeconds": grace,
        "securityContext": {
            "runAsNonRoot": true,
            "runAsUser": USER,
            "runAsGroup": USER,
            // Secret files and a provisioned volume are the group's: readable and writable by
            // the non-root user.
            "fsGroup": USER,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": containers,
        "volumes": volumes,
    })
}

/// etcd's volume is chowned to the fsGroup once, not at every start (a large data directory
/// would slow each restart).
fn etcd_pod_spec(mut spec: Value) -> Value {
    spec["securityContext"]["fsGroupChangePolicy"] = json!("OnRootMismatch");
    spec
}

/// Spreads the API server replicas over nodes where there are several.
fn spread(mut spec: Value, names: &Names) -> Value {
    spec["topologySpreadConstraints"] = json!([{
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": names.labels(Some(API_SERVER))},
    }]);
    spec
}

fn secret_volume(name: &str, secret: &str) -> Value {
    // Group-readable: the files are root's, the group is the pod's fsGroup.
    json!({"name": name, "secret": {"secretName": secret, "defaultMode": 0o440}})
}

fn empty_dir(name: &str) -> Value {
    json!({"name": name, "emptyDir": {}})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture() -> (Names, HostedConfig, Addresses, VersionImages) {
        let images = VersionImages {
            version: "1.28.0".into(),
            api_server: "localhost/vigil/kube-apiserver:v1.28.0".into(),
            controller_manager: "localhost/vigil/kube-controller-manager:v1.28.0".into(),
        };
        (
            Names::new("team-a", "c1"),
            HostedConfig::new(vec![images.clone()], "localhost/vigil/etcd:3.4.23"),
            Addresses {
                etcd: "10.97.0.10".parse().expect("an address"),
                api_server: "10.97.0.11".parse().expect("an address"),
            },
            images,
        )
    }

    /// Every pod of the control plane passes the `restricted` standard's checks.
    #[test]
    fn pods_are_restricted_and_labelled() {
        let (names, config, addresses, images) = fixture();
        for object in [
            etcd(&names, &config, &addresses),
            api_server(&names, &config, &addresses, &images),
            controller_manager(&names, &config, &images),
        ] {
            let spec = &object["spec"]["template"]["spec"];
            assert_eq!(spec["securityContext"]["runAsNonRoot"], json!(true));
            for container in spec["containers"].as_array().expect("containers") {
                let security = &container["securityContext"];
                assert_eq!(security["allowPrivilegeEscalation"], json!(false));
                assert_eq!(security["capabilities"]["drop"], json!(["ALL"]));
                assert_eq!(security["seccompProfile"]["type"], json!("RuntimeDefault"));
                assert!(container["resources"]["requests"]["memory"].is_string());
            }
            assert_eq!(
                object["metadata"]["labels"]["vigil.dev/cluster"],
                json!("c1")
            );
            assert_eq!(object["metadata"]["namespace"], json!("team-a"));
        }
    }

    #[test]
    fn etcd_quota_stays_below_its_claim() {
        assert_eq!(quota_bytes("1Gi"), Some(805_306_368));
        assert_eq!(quota_bytes("512Mi"), Some(402_653_184));
        assert_eq!(quota_bytes("1G"), None);
        assert_eq!(quota_bytes("Gi"), None);
    }

    #[test]
    fn the_api_server_rolls_with_a_surge_and_reaches_etcd_by_address() {
        let (names, config, addresses, images) = fixture();
        let deployment = api_server(&names, &config, &addresses, &images);
        assert_eq!(deployment["spec"]["replicas"], json!(2));
        assert_eq!(
            deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"],
            json!(0)
        );
        let args = deployment["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(
            args.contains("--etcd-servers=https://10.97.0.10:2379"),
            "{args}"
        );
        assert!(args.contains("--shutdown-delay-duration=10s"), "{args}");
        assert_eq!(
            deployment["metadata"]["annotations"][VERSION_ANNOTATION],
            json!("1.28.0")
        );
    }
}
