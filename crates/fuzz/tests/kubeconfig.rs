//! Fuzz target `kubeconfig`: a kubeconfig read from a Secret (the KubernetesCluster's
//! `<name>-kubeconfig`, which anyone allowed to edit Secrets in its namespace can change), decoded
//! as Vigil decodes it (`vigil demo`, the local provider): UTF-8 text, kube-rs's
//! `Kubeconfig::from_yaml`, `Config::from_custom_kubeconfig`, then `Client::try_from`, which
//! parses the certificates and keys. Each step returns a value or an error, never a panic; no
//! request is made. A kubeconfig naming an exec plugin or auth provider is refused before the
//! client is built: kube-rs runs that command while building it (found here: the harness ran
//! `aws eks get-token` from the corpus), which a kubeconfig from outside must never do.
//!
//! The corpus: the kubeconfigs the sandbox (with and without TLS) and the local provider write,
//! one shaped as the real control plane's `up.sh` writes it (client certificate and key, throwaway
//! ones made for the corpus), and kubeconfigs with every other way kube-rs authenticates (exec,
//! token files, basic auth, proxies, several contexts).

use kube::config::{KubeConfigOptions, Kubeconfig};

const TARGET: &str = "kubeconfig";

const TOKENS: &[&[u8]] = &[
    b"\n",
    b": ",
    b"- ",
    b"  ",
    b"    ",
    b"clusters:\n",
    b"contexts:\n",
    b"users:\n",
    b"current-context: ",
    b"server: ",
    b"https://",
    b"http://",
    b"[::1]",
    b":0",
    b":65536",
    b"certificate-authority-data: ",
    b"client-certificate-data: ",
    b"client-key-data: ",
    b"insecure-skip-tls-verify: true\n",
    b"tls-server-name: ",
    b"proxy-url: socks5://",
    b"token: ",
    b"username: ",
    b"password: ",
    b"exec:\n",
    b"apiVersion: client.authentication.k8s.io/v1\n",
    b"auth-provider:\n",
    b"namespace: ",
    b"extensions:\n",
    b"LS0tLS1CRUdJTi",
    b"=",
    b"-----BEGIN CERTIFICATE-----\n",
    b"-----END CERTIFICATE-----\n",
    b"-----BEGIN EC PRIVATE KEY-----\n",
    b"-----BEGIN PRIVATE KEY-----\n",
    b"~",
    b"null",
    b"&a ",
    b"*a",
];

/// The decoding chain; `Ok` with how far it got.
async fn decode(input: &[u8]) -> Result<String, String> {
    let Ok(text) = std::str::from_utf8(input) else {
        return Ok("not UTF-8".into());
    };
    let kubeconfig = match Kubeconfig::from_yaml(text) {
        Ok(k) => k,
        Err(e) => return Ok(format!("not a kubeconfig: {e}")),
    };
    // kube-rs runs a user's exec plugin (any command the kubeconfig names) when it builds the
    // client: never with a kubeconfig from outside, and never in a fuzz run.
    let runs_a_command = kubeconfig.auth_infos.iter().any(|named| {
        named
            .auth_info
            .as_ref()
            .is_some_and(|a| a.exec.is_some() || a.auth_provider.is_some())
    });
    if runs_a_command {
        return Ok("refused: it would run a command".into());
    }
    let config =
        match kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await
        {
            Ok(c) => c,
            Err(e) => return Ok(format!("no usable context: {e}")),
        };
    match kube::Client::try_from(config) {
        Ok(_) => Ok("client".into()),
        Err(e) => Ok(format!("no client: {e}")),
    }
}

#[test]
fn kubeconfigs_never_panic() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    vigil_fuzz::fuzz(
        TARGET,
        vigil_fuzz::corpus_and_random(TARGET, TOKENS),
        |input| runtime.block_on(decode(input)).map(drop),
    );
}

/// The corpus reaches a client (the harness really gets past the parsers).
#[test]
fn every_corpus_kubeconfig_makes_a_client() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    for seed in vigil_fuzz::corpus(TARGET) {
        if seed.name.starts_with("crash-") {
            continue;
        }
        let got = runtime.block_on(decode(&seed.bytes));
        let want = if seed.name.starts_with("exec-") {
            "refused: it would run a command"
        } else {
            "client"
        };
        assert_eq!(got.as_deref(), Ok(want), "{}", seed.name);
    }
}
