//! Kubeconfigs from outside turned into a client configuration, without letting them act on this
//! machine.
//!
//! A cluster provider answers with a kubeconfig, which Vigil keeps in the KubernetesCluster's
//! `<name>-kubeconfig` Secret — where anyone allowed to edit Secrets in that namespace can change
//! it. kube-rs trusts a kubeconfig as a user trusts their own `~/.kube/config`: it runs the
//! `exec` plugin it names (any command, with Vigil's environment), runs or refreshes an
//! `auth-provider` (`gcp`'s `cmd-path` is a command too), and reads the files it names
//! (`tokenFile`: its content is sent to the kubeconfig's server as a bearer token — Vigil's own
//! ServiceAccount token, if the path says so; client certificate, key and CA files). A kubeconfig
//! from outside must carry what it needs inline (`token`, `*-data`, basic auth), so every such
//! field is refused here, before kube-rs sees it, with an error naming the user or cluster and
//! the field. [`client_config`] is what the product (`vigil demo`) and the `kubeconfig` fuzz
//! target both use.

use kube::config::{KubeConfigOptions, Kubeconfig, KubeconfigError};

/// Why a kubeconfig from outside is not turned into a client configuration.
#[derive(Debug, thiserror::Error)]
pub enum UntrustedKubeconfigError {
    #[error("not a kubeconfig: {0}")]
    Parse(#[source] KubeconfigError),
    #[error(
        "refused: {owner} has {field}, which would make Vigil {power}; a kubeconfig from a Secret or a provider must carry its credentials inline (token, client-certificate-data, client-key-data, certificate-authority-data)"
    )]
    Refused {
        /// `user "name"` or `cluster "name"`.
        owner: String,
        /// The kubeconfig field, as spelled in YAML.
        field: &'static str,
        /// What honouring it would do.
        power: &'static str,
    },
    #[error("no usable context: {0}")]
    Config(#[source] KubeconfigError),
}

/// Refuses a kubeconfig that would run a command or read a file of this machine: any user with
/// `exec`, `auth-provider`, `tokenFile`, `client-certificate` or `client-key`, any cluster with
/// `certificate-authority` (a path). Every user and cluster is checked, not only the current
/// context's: the kubeconfig is refused as a whole.
pub fn refuse_local_powers(kubeconfig: &Kubeconfig) -> Result<(), UntrustedKubeconfigError> {
    let refused = |owner: String, field, power| UntrustedKubeconfigError::Refused {
        owner,
        field,
        power,
    };
    for named in &kubeconfig.auth_infos {
        let Some(user) = &named.auth_info else {
            continue;
        };
        let owner = || format!("user {:?}", named.name);
        if user.exec.is_some() {
            return Err(refused(owner(), "exec", "run a command"));
        }
        if user.auth_provider.is_some() {
            return Err(refused(
                owner(),
                "auth-provider",
                "run a command or fetch tokens for it",
            ));
        }
        if user.token_file.is_some() {
            return Err(refused(
                owner(),
                "tokenFile",
                "send one of its own files as a token",
            ));
        }
        if user.client_certificate.is_some() {
            return Err(refused(owner(), "client-certificate", "read its own files"));
        }
        if user.client_key.is_some() {
            return Err(refused(owner(), "client-key", "read its own files"));
        }
    }
    for named in &kubeconfig.clusters {
        if named
            .cluster
            .as_ref()
            .is_some_and(|c| c.certificate_authority.is_some())
        {
            return Err(refused(
                format!("cluster {:?}", named.name),
                "certificate-authority",
                "read its own files",
            ));
        }
    }
    Ok(())
}

/// The client configuration of a kubeconfig from outside (its current context), after
/// [`refuse_local_powers`]. Makes no request and runs nothing.
pub async fn client_config(yaml: &str) -> Result<kube::Config, UntrustedKubeconfigError> {
    let kubeconfig = Kubeconfig::from_yaml(yaml).map_err(UntrustedKubeconfigError::Parse)?;
    refuse_local_powers(&kubeconfig)?;
    kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .map_err(UntrustedKubeconfigError::Config)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kubeconfig(user: &str, cluster_extra: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n{cluster_extra}users:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
        )
    }

    fn refusal(yaml: &str) -> Option<&'static str> {
        let parsed = Kubeconfig::from_yaml(yaml).expect("parses");
        match refuse_local_powers(&parsed) {
            Ok(()) => None,
            Err(UntrustedKubeconfigError::Refused { field, .. }) => Some(field),
            Err(other) => panic!("not a refusal: {other}"),
        }
    }

    #[test]
    fn inline_credentials_are_accepted() {
        for user in [
            "    token: abc\n",
            "    username: a\n    password: b\n",
            "    client-certificate-data: LS0t\n    client-key-data: LS0t\n",
        ] {
            assert_eq!(
                refusal(&kubeconfig(user, "    certificate-authority-data: LS0t\n")),
                None,
                "{user}"
            );
        }
    }

    #[test]
    fn commands_and_local_files_are_refused() {
        let cases = [
            (
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [/tmp/pwned]\n",
                "exec",
            ),
            (
                "    auth-provider:\n      name: gcp\n      config:\n        cmd-path: /bin/sh\n",
                "auth-provider",
            ),
            (
                "    tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token\n",
                "tokenFile",
            ),
            (
                "    client-certificate: /etc/ssl/cert.pem\n",
                "client-certificate",
            ),
            ("    client-key: /etc/ssl/key.pem\n", "client-key"),
        ];
        for (user, field) in cases {
            assert_eq!(refusal(&kubeconfig(user, "")), Some(field), "{user}");
        }
        assert_eq!(
            refusal(&kubeconfig(
                "    token: abc\n",
                "    certificate-authority: /etc/ssl/ca.pem\n"
            )),
            Some("certificate-authority")
        );
    }

    #[test]
    fn a_user_outside_the_current_context_is_refused_too() {
        let yaml = kubeconfig(
            "    token: abc\n- name: other\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: id\n",
            "",
        );
        assert_eq!(refusal(&yaml), Some("exec"));
    }

    #[tokio::test]
    async fn the_refusal_is_a_clear_error_and_nothing_runs() {
        let marker =
            std::env::temp_dir().join(format!("vigil-untrusted-kubeconfig-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        let yaml = kubeconfig(
            &format!(
                "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: touch\n      args: [{:?}]\n",
                marker.display().to_string()
            ),
            "",
        );
        let error = client_config(&yaml).await.expect_err("refused");
        let message = error.to_string();
        assert!(
            message.contains("user \"u\" has exec") && message.contains("run a command"),
            "{message}"
        );
        // Building the client is where kube-rs would run it: it was never reached.
        assert!(!marker.exists(), "the exec plugin ran");
    }

    #[tokio::test]
    async fn a_self_contained_kubeconfig_makes_a_configuration() {
        let config = client_config(&kubeconfig("    token: abc\n", ""))
            .await
            .expect("a configuration");
        assert_eq!(config.cluster_url.to_string(), "https://127.0.0.1:6443/");
        assert!(matches!(
            client_config("clusters: [").await,
            Err(UntrustedKubeconfigError::Parse(_))
        ));
    }
}
