//! The control plane's certificates and keys, kept in Secrets of its namespace: what each
//! Secret must hold, decided from what they hold now, the Services' addresses and the time.
//! Pure: given the same inputs it keeps every certificate that is still good, so the Secrets
//! are written only when something is missing, expiring, or names an address no longer right.
//!
//! Three CAs, as kubeadm makes them: the cluster's (clients and serving), etcd's (only the API
//! servers may talk to etcd) and the front proxy's (only the aggregation layer may assert
//! identities in headers). The CAs and the service-account key live in `<name>-pki`; each
//! component's Secret holds only what it needs. Components reload renewed files on their own
//! (kube-apiserver its serving and client CAs, etcd at each handshake, client-go its client
//! certificates), so a renewal restarts nothing.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::SystemTime;

use super::config::HostedConfig;
use super::manifests::{
    API_SERVER_SERVICE_PORT, Addresses, CONTROLLER_MANAGER_KUBECONFIG, PKI_DIR, url_host,
};
use super::names::{API_SERVER, CONTROLLER_MANAGER, ETCD, Names};
use super::pki::{self, CertPair, LeafSpec, PkiError, Usage};

/// A Secret's content: file name → text.
pub type Files = BTreeMap<String, String>;

/// Where clients reach the API server, besides its Service's ClusterIP.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoint {
    /// Extra addresses (node addresses of a NodePort, a load balancer's).
    pub ips: Vec<IpAddr>,
    /// Extra names (a load balancer's hostname).
    pub dns_names: Vec<String>,
}

/// What one pass decides for the PKI: every Secret's full content, by Secret name, with its
/// component label.
pub struct Planned {
    pub secrets: BTreeMap<String, (&'static str, Files)>,
}

/// Reads a pair out of a Secret's files.
fn pair(files: Option<&Files>, cert: &str, key: &str) -> Option<CertPair> {
    let files = files?;
    Some(CertPair {
        cert: files.get(cert)?.clone(),
        key: files.get(key)?.clone(),
    })
}

/// A CA: kept unless missing, unreadable or near its end.
fn ca(
    current: Option<CertPair>,
    common_name: &str,
    config: &HostedConfig,
    now: SystemTime,
) -> Result<CertPair, PkiError> {
    match pki::ca_renewal(current.as_ref(), now, config.renew_before) {
        None => current.ok_or_else(|| PkiError::Certificate("a CA vanished".into())),
        Some(_) => pki::new_ca(common_name, now, config.ca_validity),
    }
}

/// A leaf: kept unless [`pki::leaf_renewal`] has a reason to issue it again.
fn leaf(
    current: Option<CertPair>,
    ca: &CertPair,
    spec: &LeafSpec,
    config: &HostedConfig,
    now: SystemTime,
) -> Result<CertPair, PkiError> {
    match pki::leaf_renewal(current.as_ref(), ca, spec, now, config.renew_before) {
        None => current.ok_or_else(|| PkiError::Certificate("a certificate vanished".into())),
        Some(_) => pki::issue(ca, spec, now, config.leaf_validity),
    }
}

fn spec(common_name: &str, organizations: &[&str], usage: Usage) -> LeafSpec {
    LeafSpec {
        common_name: common_name.to_owned(),
        organizations: organizations.iter().map(|o| (*o).to_owned()).collect(),
        dns_names: Vec::new(),
        ips: Vec::new(),
        usage,
    }
}

/// The names a Service answers to in the management cluster.
fn service_names(names: &Names, service: &str) -> Vec<String> {
    let ns = &names.namespace;
    vec![
        service.to_owned(),
        format!("{service}.{ns}"),
        format!("{service}.{ns}.svc"),
        format!("{service}.{ns}.svc.cluster.local"),
    ]
}

/// The API server's serving certificate: every address a kubeconfig may name.
pub fn api_server_spec(
    names: &Names,
    config: &HostedConfig,
    addresses: &Addresses,
    endpoint: &Endpoint,
) -> LeafSpec {
    let mut dns_names = vec![
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
        "kubernetes.default.svc.cluster.local".to_owned(),
    ];
    dns_names.extend(service_names(names, &names.api_server()));
    dns_names.extend(endpoint.dns_names.iter().cloned());
    let mut ips = vec![
        addresses.api_server,
        config.service_ip,
        IpAddr::V4(std::net::Ipv4Addr::LOCALHOST),
    ];
    ips.extend(endpoint.ips.iter().copied());
    dedup(&mut dns_names);
    ips.sort();
    ips.dedup();
    LeafSpec {
        dns_names,
        ips,
        ..spec("kube-apiserver", &[], Usage::Server)
    }
}

fn dedup(v: &mut Vec<String>) {
    v.sort();
    v.dedup();
}

/// The whole PKI: keeps what is good in `current` (Secret name → files), issues the rest.
pub fn plan(
    names: &Names,
    config: &HostedConfig,
    addresses: &Addresses,
    endpoint: &Endpoint,
    current: &BTreeMap<String, Files>,
    now: SystemTime,
) -> Result<Planned, PkiError> {
    let root = current.get(&names.pki());
    let cluster_ca = ca(
        pair(root, "ca.crt", "ca.key"),
        &format!("{}-ca", names.cluster),
        config,
        now,
    )?;
    let etcd_ca = ca(
        pair(root, "etcd-ca.crt", "etcd-ca.key"),
        &format!("{}-etcd-ca", names.cluster),
        config,
        now,
    )?;
    let proxy_ca = ca(
        pair(root, "front-proxy-ca.crt", "front-proxy-ca.key"),
        &format!("{}-front-proxy-ca", names.cluster),
        config,
        now,
    )?;
    let (sa_key, sa_pub) =
        match root.and_then(|r| Some((r.get("sa.key")?.clone(), r.get("sa.pub")?.clone()))) {
            Some(keys) => keys,
            None => pki::service_account_key()?,
        };

    let etcd_files = current.get(&names.etcd_certs());
    let mut etcd_server_spec = spec(&names.etcd(), &[], Usage::ServerAndClient);
    etcd_server_spec.dns_names = service_names(names, &names.etcd());
    etcd_server_spec.dns_names.push("localhost".into());
    dedup(&mut etcd_server_spec.dns_names);
    etcd_server_spec.ips = vec![addresses.etcd, IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)];
    etcd_server_spec.ips.sort();
    let etcd_server = leaf(
        pair(etcd_files, "server.crt", "server.key"),
        &etcd_ca,
        &etcd_server_spec,
        config,
        now,
    )?;
    let mut peer_spec = spec(
        &format!("{}-peer", names.etcd()),
        &[],
        Usage::ServerAndClient,
    );
    peer_spec.dns_names = vec!["localhost".into()];
    peer_spec.ips = vec![IpAddr::V4(std::net::Ipv4Addr::LOCALHOST)];
    let etcd_peer = leaf(
        pair(etcd_files, "peer.crt", "peer.key"),
        &etcd_ca,
        &peer_spec,
        config,
        now,
    )?;

    let api_files = current.get(&names.api_server_certs());
    let serving = leaf(
        pair(api_files, "apiserver.crt", "apiserver.key"),
        &cluster_ca,
        &api_server_spec(names, config, addresses, endpoint),
        config,
        now,
    )?;
    let etcd_client = leaf(
        pair(api_files, "etcd-client.crt", "etcd-client.key"),
        &etcd_ca,
        &spec("kube-apiserver-etcd-client", &[], Usage::Client),
        config,
        now,
    )?;
    let proxy_client = leaf(
        pair(
            api_files,
            "front-proxy-client.crt",
            "front-proxy-client.key",
        ),
        &proxy_ca,
        &spec("front-proxy-client", &[], Usage::Client),
        config,
        now,
    )?;
    let kubelet_client = leaf(
        pair(api_files, "kubelet-client.crt", "kubelet-client.key"),
        &cluster_ca,
        &spec(
            "kube-apiserver-kubelet-client",
            &["system:masters"],
            Usage::Client,
        ),
        config,
        now,
    )?;

    let kcm_files = current.get(&names.controller_manager_certs());
    let kcm_client = leaf(
        pair(
            kcm_files,
            "controller-manager.crt",
            "controller-manager.key",
        ),
        &cluster_ca,
        &spec("system:kube-controller-manager", &[], Usage::Client),
        config,
        now,
    )?;
    let admin_files = current.get(&names.admin());
    let admin = leaf(
        pair(admin_files, "admin.crt", "admin.key"),
        &cluster_ca,
        &spec("vigil-admin", &["system:masters"], Usage::Client),
        config,
        now,
    )?;

    let files = |entries: &[(&str, &str)]| -> Files {
        entries
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    let mut secrets = BTreeMap::new();
    secrets.insert(
        names.pki(),
        (
            "pki",
            files(&[
                ("ca.crt", &cluster_ca.cert),
                ("ca.key", &cluster_ca.key),
                ("etcd-ca.crt", &etcd_ca.cert),
                ("etcd-ca.key", &etcd_ca.key),
                ("front-proxy-ca.crt", &proxy_ca.cert),
                ("front-proxy-ca.key", &proxy_ca.key),
                ("sa.key", &sa_key),
                ("sa.pub", &sa_pub),
            ]),
        ),
    );
    secrets.insert(
        names.etcd_certs(),
        (
            ETCD,
            files(&[
                ("ca.crt", &etcd_ca.cert),
                ("server.crt", &etcd_server.cert),
                ("server.key", &etcd_server.key),
                ("peer.crt", &etcd_peer.cert),
                ("peer.key", &etcd_peer.key),
            ]),
        ),
    );
    secrets.insert(
        names.api_server_certs(),
        (
            API_SERVER,
            files(&[
                ("ca.crt", &cluster_ca.cert),
                ("apiserver.crt", &serving.cert),
                ("apiserver.key", &serving.key),
                ("etcd-ca.crt", &etcd_ca.cert),
                ("etcd-client.crt", &etcd_client.cert),
                ("etcd-client.key", &etcd_client.key),
                ("front-proxy-ca.crt", &proxy_ca.cert),
                ("front-proxy-client.crt", &proxy_client.cert),
                ("front-proxy-client.key", &proxy_client.key),
                ("kubelet-client.crt", &kubelet_client.cert),
                ("kubelet-client.key", &kubelet_client.key),
                ("sa.key", &sa_key),
                ("sa.pub", &sa_pub),
            ]),
        ),
    );
    let kcm_kubeconfig = component_kubeconfig(
        &names.cluster,
        &format!(
            "https://{}:{API_SERVER_SERVICE_PORT}",
            url_host(addresses.api_server)
        ),
        "controller-manager",
    );
    secrets.insert(
        names.controller_manager_certs(),
        (
            CONTROLLER_MANAGER,
            files(&[
                ("ca.crt", &cluster_ca.cert),
                ("ca.key", &cluster_ca.key),
                ("front-proxy-ca.crt", &proxy_ca.cert),
                ("sa.key", &sa_key),
                ("controller-manager.crt", &kcm_client.cert),
                ("controller-manager.key", &kcm_client.key),
                (CONTROLLER_MANAGER_KUBECONFIG, &kcm_kubeconfig),
            ]),
        ),
    );
    secrets.insert(
        names.admin(),
        (
            "admin",
            files(&[
                ("ca.crt", &cluster_ca.cert),
                ("admin.crt", &admin.cert),
                ("admin.key", &admin.key),
            ]),
        ),
    );
    Ok(Planned { secrets })
}

/// A kubeconfig naming the files of [`PKI_DIR`] (client-go reloads them when renewed).
fn component_kubeconfig(cluster: &str, server: &str, user: &str) -> String {
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {c}\n  cluster:\n    server: {server}\n    certificate-authority: {pki}/ca.crt\nusers:\n- name: {user}\n  user:\n    client-certificate: {pki}/{user}.crt\n    client-key: {pki}/{user}.key\ncontexts:\n- name: {c}\n  context:\n    cluster: {c}\n    user: {user}\ncurrent-context: {c}\n",
        c = quote(cluster),
        server = quote(server),
        pki = PKI_DIR,
        user = user,
    )
}

/// The administrator's kubeconfig, everything inline: what `<name>-kubeconfig` carries.
pub fn admin_kubeconfig(cluster: &str, server: &str, admin: &Files) -> Option<String> {
    use base64::Engine as _;
    let b64 = |key: &str| {
        admin
            .get(key)
            .map(|v| base64::engine::general_purpose::STANDARD.encode(v.as_bytes()))
    };
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    Some(format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: {c}\n  cluster:\n    server: {server}\n    certificate-authority-data: {ca}\nusers:\n- name: {u}\n  user:\n    client-certificate-data: {crt}\n    client-key-data: {key}\ncontexts:\n- name: {c}\n  context:\n    cluster: {c}\n    user: {u}\ncurrent-context: {c}\n",
        c = quote(cluster),
        u = quote(&format!("{cluster}-admin")),
        server = quote(server),
        ca = b64("ca.crt")?,
        crt = b64("admin.crt")?,
        key = b64("admin.key")?,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn fixture() -> (Names, HostedConfig, Addresses) {
        (
            Names::new("team-a", "c1"),
            HostedConfig::new(Vec::new(), "etcd"),
            Addresses {
                etcd: "10.97.0.10".parse().expect("an address"),
                api_server: "10.97.0.11".parse().expect("an address"),
            },
        )
    }

    fn files_of(planned: &Planned) -> BTreeMap<String, Files> {
        planned
            .secrets
            .iter()
            .map(|(name, (_, files))| (name.clone(), files.clone()))
            .collect()
    }

    /// A second pass over the Secrets the first one made changes nothing: no write at rest, no
    /// restart loop.
    #[test]
    fn a_settled_pki_is_kept_as_it_is() {
        let (names, config, addresses) = fixture();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let first = plan(
            &names,
            &config,
            &addresses,
            &Endpoint::default(),
            &BTreeMap::new(),
            now,
        )
        .expect("a PKI");
        let current = files_of(&first);
        let later = now + Duration::from_secs(86_400);
        let second = plan(
            &names,
            &config,
            &addresses,
            &Endpoint::default(),
            &current,
            later,
        )
        .expect("a PKI");
        assert_eq!(files_of(&second), current);
    }

    /// A new endpoint re-issues the serving certificate alone, with the new address in it.
    #[test]
    fn the_serving_certificate_follows_the_endpoint() {
        let (names, config, addresses) = fixture();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let first = files_of(
            &plan(
                &names,
                &config,
                &addresses,
                &Endpoint::default(),
                &BTreeMap::new(),
                now,
            )
            .expect("a PKI"),
        );
        let endpoint = Endpoint {
            ips: vec!["192.0.2.7".parse().expect("an address")],
            dns_names: Vec::new(),
        };
        let second =
            files_of(&plan(&names, &config, &addresses, &endpoint, &first, now).expect("a PKI"));
        let api = &names.api_server_certs();
        assert_ne!(first[api]["apiserver.crt"], second[api]["apiserver.crt"]);
        assert_eq!(
            first[api]["etcd-client.crt"],
            second[api]["etcd-client.crt"]
        );
        assert_eq!(first[&names.pki()], second[&names.pki()]);
        let facts = pki::inspect(&second[api]["apiserver.crt"]).expect("a certificate");
        assert!(
            facts
                .ips
                .contains(&"192.0.2.7".parse().expect("an address"))
        );
        assert!(facts.ips.contains(&addresses.api_server));
    }

    /// Leaves close to their end are issued again; the CAs, far from theirs, are kept.
    #[test]
    fn expiring_leaves_are_renewed() {
        let (names, config, addresses) = fixture();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let first = files_of(
            &plan(
                &names,
                &config,
                &addresses,
                &Endpoint::default(),
                &BTreeMap::new(),
                now,
            )
            .expect("a PKI"),
        );
        let near_the_end = now + config.leaf_validity - config.renew_before / 2;
        let second = files_of(
            &plan(
                &names,
                &config,
                &addresses,
                &Endpoint::default(),
                &first,
                near_the_end,
            )
            .expect("a PKI"),
        );
        assert_eq!(first[&names.pki()], second[&names.pki()]);
        let admin = &names.admin();
        assert_ne!(first[admin]["admin.crt"], second[admin]["admin.crt"]);
    }
}
