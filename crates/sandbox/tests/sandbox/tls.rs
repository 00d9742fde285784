//! `SandboxConfig::tls` and anonymous access, through real kube-rs clients: the kubeconfig's CA
//! verifies the sandbox's certificate, `/version` and the health endpoints answer anyone (as the
//! `system:public-info-viewer` ClusterRole allows on a real cluster), everything else needs the
//! token, new namespaces' `kube-root-ca.crt` holds the CA, and a sandbox restarted on its data
//! directory keeps its CA.

use crate::common;
use common::TempDir;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ListParams, PostParams};
use vigil_sandbox::{CA_CERT_FILE, CA_KEY_FILE, Sandbox, SandboxConfig};

const TOKEN: &str = "vigil-tls-test-token";

async fn start(data_dir: Option<PathBuf>) -> Sandbox {
    Sandbox::start(SandboxConfig {
        token: Some(TOKEN.into()),
        tls: true,
        data_dir,
        ..SandboxConfig::default()
    })
    .await
    .expect("sandbox starts")
}

/// The kubeconfig's configuration, as kubectl would read it.
async fn config(sandbox: &Sandbox) -> kube::Config {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sandbox.kubeconfig()).expect("yaml");
    kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config")
}

/// GET `path` with an optional Authorization header: (status code, body).
async fn get(client: &kube::Client, path: &str, authorization: Option<&str>) -> (u16, String) {
    let mut builder = http::Request::get(path);
    if let Some(value) = authorization {
        builder = builder.header(http::header::AUTHORIZATION, value);
    }
    let request = builder
        .body(kube::client::Body::from(Vec::new()))
        .expect("request");
    let response = client.send(request).await.expect("send");
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await.expect("body");
    (code, String::from_utf8_lossy(&bytes).into_owned())
}

#[tokio::test]
async fn the_kubeconfig_reaches_a_tls_sandbox_and_public_paths_need_no_token() {
    let sandbox = start(None).await;
    assert!(sandbox.url().starts_with("https://"), "{}", sandbox.url());
    let ca = sandbox.ca_pem().expect("a TLS sandbox has a CA");
    assert!(ca.starts_with("-----BEGIN CERTIFICATE-----"), "{ca}");
    assert!(
        sandbox.kubeconfig().contains("certificate-authority-data"),
        "{}",
        sandbox.kubeconfig()
    );

    // The kubeconfig as written: its CA verifies the serving certificate, its token is accepted.
    let client = kube::Client::try_from(config(&sandbox).await).expect("client");
    let version = client.apiserver_version().await.expect("version over TLS");
    assert_eq!(version.major, "1");
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .list(&ListParams::default())
        .await
        .expect("namespaces over TLS with the token");

    // As on a real cluster, every new namespace gets the CA in `kube-root-ca.crt`.
    let ns: Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": "tls-ca"}})).expect("ns");
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    let root_ca = Api::<ConfigMap>::namespaced(client, "tls-ca");
    let mut published = None;
    for _ in 0..100 {
        if let Some(cm) = root_ca.get_opt("kube-root-ca.crt").await.expect("get") {
            published = cm.data.and_then(|d| d.get("ca.crt").cloned());
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        published.as_deref(),
        Some(ca),
        "kube-root-ca.crt holds the CA"
    );

    // The same CA, no credentials: what anyone may read, and what they may not.
    let mut anonymous = config(&sandbox).await;
    anonymous.auth_info = Default::default();
    let anonymous = kube::Client::try_from(anonymous).expect("anonymous client");
    for path in ["/version", "/version/", "/healthz", "/livez", "/readyz"] {
        let (code, body) = get(&anonymous, path, None).await;
        assert_eq!(code, 200, "{path} is public: {body}");
    }
    for path in [
        "/api",
        "/apis",
        "/api/v1/namespaces",
        "/healthz/ping",
        "/openapi/v3",
    ] {
        let (code, body) = get(&anonymous, path, None).await;
        assert_eq!(code, 401, "{path} needs the token: {body}");
    }
    // A wrong token is refused everywhere, public paths included, as kube-apiserver does.
    let (code, body) = get(&anonymous, "/version", Some("Bearer wrong")).await;
    assert_eq!(code, 401, "a wrong token on /version: {body}");
    let (code, body) = get(&anonymous, "/api", Some(&format!("Bearer {TOKEN}"))).await;
    assert_eq!(code, 200, "the token opens /api: {body}");

    // A client that does not trust this CA is refused by its own verification.
    let mut stranger = config(&sandbox).await;
    stranger.root_cert = None;
    let stranger = kube::Client::try_from(stranger).expect("client without the CA");
    assert!(
        stranger.apiserver_version().await.is_err(),
        "the certificate is not trusted without the kubeconfig's CA"
    );

    // Stopping and resuming the listener (fault injection) serves TLS again on the same address.
    sandbox
        .restart(Duration::from_millis(50))
        .await
        .expect("restart");
    let (code, body) = get(&anonymous, "/version", None).await;
    assert_eq!(code, 200, "TLS after a restart: {body}");
    sandbox.shutdown().await;
}

#[tokio::test]
async fn a_restarted_sandbox_keeps_its_ca() {
    let dir = TempDir::new("tls");
    let first = start(Some(dir.0.clone())).await;
    let ca = first.ca_pem().expect("CA").to_owned();
    let old_kubeconfig = first.kubeconfig();
    first.shutdown().await;
    assert!(dir.0.join(CA_CERT_FILE).exists() && dir.0.join(CA_KEY_FILE).exists());

    let second = start(Some(dir.0.clone())).await;
    assert_eq!(
        second.ca_pem(),
        Some(ca.as_str()),
        "the same CA after a restart"
    );
    // A kubeconfig handed out before the restart (other port) still verifies the new server.
    let moved = old_kubeconfig.replace(
        &format!("https://{}", first_addr(&old_kubeconfig)),
        &second.url(),
    );
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&moved).expect("yaml");
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .expect("config");
    let client = kube::Client::try_from(config).expect("client");
    client
        .apiserver_version()
        .await
        .expect("the old CA verifies the restarted server");
    second.shutdown().await;
}

/// The `host:port` of the kubeconfig's server.
fn first_addr(kubeconfig: &str) -> String {
    kubeconfig
        .split("https://")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("server in the kubeconfig")
        .to_owned()
}
