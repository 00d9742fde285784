//! Fuzz target `kubeconfig`: a kubeconfig read from a Secret (the KubernetesCluster's
//! `<name>-kubeconfig`, which anyone allowed to edit Secrets in its namespace can change), decoded
//! as Vigil decodes it (`vigil demo`, the local provider): UTF-8 text, kube-rs's
//! `Kubeconfig::from_yaml`, `Config::from_custom_kubeconfig`, then `Client::try_from`, which
//! parses the certificates and keys. Each step returns a value or an error, never a panic; no
//! request is made. The decoding is the product's own, `vigil_provider::kubeconfig::client_config`:
//! a kubeconfig naming an exec plugin or auth provider is refused before the client is built
//! (kube-rs runs that command while building it — found here: the harness ran `aws eks
//! get-token` from the corpus), and so is one naming a file of this machine (`tokenFile`,
//! certificate, key or CA paths), which a kubeconfig from outside must never do either.
//!
//! The corpus: the kubeconfigs the sandbox (with and without TLS) and the local provider write,
//! one shaped as the real control plane's `up.sh` writes it (client certificate and key, throwaway
//! ones made for the corpus), and kubeconfigs with every other way kube-rs authenticates (exec,
//! token files, basic auth, proxies, several contexts). `refused-<field>-*` files must be
//! refused for that field.

use vigil_provider::kubeconfig::{UntrustedKubeconfigError, client_config};

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
    b"tokenFile: ",
    b"client-key: ",
    b"client-certificate: ",
    b"certificate-authority: ",
    b"/var/run/secrets/kubernetes.io/serviceaccount/token",
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
    // What the product does with a kubeconfig from a Secret: kube-rs would run a user's exec
    // plugin (any command the kubeconfig names) when it builds the client, and read the files it
    // names; the shared refusal keeps both from happening, here as in `vigil demo`.
    let config = match client_config(text).await {
        Ok(c) => c,
        Err(UntrustedKubeconfigError::Refused { field, .. }) => {
            return Ok(format!("refused: {field}"));
        }
        Err(e) => return Ok(e.to_string()),
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
        // `refused-<field>-…`: a kubeconfig the product must refuse, and for that field.
        match seed.name.strip_prefix("refused-") {
            Some(rest) => {
                let got = got.unwrap_or_default();
                let field = got.strip_prefix("refused: ").unwrap_or_default();
                assert!(
                    !field.is_empty() && rest.starts_with(field),
                    "{}: {got}",
                    seed.name
                );
            }
            None => assert_eq!(got.as_deref(), Ok("client"), "{}", seed.name),
        }
    }
}
