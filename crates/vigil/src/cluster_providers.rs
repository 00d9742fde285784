//! The cluster providers `vigil run` offers KubernetesClusters (`spec.provider.name`): `hosted`
//! (each cluster an upstream control plane as pods of the cluster Vigil runs in, from the
//! `--hosted-*` catalog), `local` (each cluster a `vigil sandbox` process of this binary, state
//! under `--local-clusters-dir`) and every external provider named by
//! `--cluster-provider NAME=URL`. A KubernetesCluster without `spec.provider` gets
//! `--default-cluster-provider`: `hosted` when Vigil runs in a cluster, `local` elsewhere.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use vigil_provider::Providers;
use vigil_provider::external::{ExternalConfig, ExternalProvider};
use vigil_provider::hosted::{Exposure, HostedConfig, HostedProvider, VersionImages};
use vigil_provider::local::{LocalConfig, LocalProvider};

/// What the flags say about providers.
#[derive(Debug, Clone, clap::Args)]
pub struct ProviderArgs {
    /// KubernetesCluster: an external provider speaking Vigil's cluster provider protocol
    /// (docs/cluster-provider-protocol.md), as `NAME=URL`; repeat or comma-separate for more.
    #[arg(
        long = "cluster-provider",
        env = "VIGIL_CLUSTER_PROVIDERS",
        value_delimiter = ','
    )]
    pub cluster_providers: Vec<String>,
    /// KubernetesCluster: a file holding the bearer token of an external provider, as
    /// `NAME=FILE`; repeat or comma-separate for more.
    #[arg(long = "cluster-provider-token-file", value_delimiter = ',')]
    pub cluster_provider_token_files: Vec<String>,
    /// KubernetesCluster: the most one request to an external provider may take.
    #[arg(long, default_value = "10s", value_parser = crate::parse_duration)]
    pub cluster_provider_timeout: Duration,
    /// KubernetesCluster: where the `local` provider keeps its clusters (one `vigil sandbox`
    /// process and data directory each; they outlive the operator).
    #[arg(
        long,
        env = "VIGIL_LOCAL_CLUSTERS_DIR",
        default_value = "/var/lib/vigil/clusters"
    )]
    pub local_clusters_dir: PathBuf,
    /// KubernetesCluster: the provider of a cluster whose spec names none. Default: `hosted`
    /// when Vigil runs in a cluster (KUBERNETES_SERVICE_HOST is set), `local` elsewhere.
    #[arg(long, env = "VIGIL_DEFAULT_CLUSTER_PROVIDER")]
    pub default_cluster_provider: Option<String>,
    /// KubernetesCluster `hosted`: the kube-apiserver image of each version of its catalog, as
    /// `VERSION=IMAGE` (`1.28.0=registry.k8s.io/kube-apiserver:v1.28.0`); repeat or
    /// comma-separate. Each version needs a controller-manager image too.
    #[arg(
        long = "hosted-apiserver-image",
        value_delimiter = ',',
        default_value = "1.28.0=registry.k8s.io/kube-apiserver:v1.28.0,1.29.14=registry.k8s.io/kube-apiserver:v1.29.14"
    )]
    pub hosted_apiserver_images: Vec<String>,
    /// KubernetesCluster `hosted`: the kube-controller-manager image of each version, as
    /// `VERSION=IMAGE`.
    #[arg(
        long = "hosted-controller-manager-image",
        value_delimiter = ',',
        default_value = "1.28.0=registry.k8s.io/kube-controller-manager:v1.28.0,1.29.14=registry.k8s.io/kube-controller-manager:v1.29.14"
    )]
    pub hosted_controller_manager_images: Vec<String>,
    /// KubernetesCluster `hosted`: etcd's image (one etcd serves every version).
    #[arg(long, default_value = "registry.k8s.io/etcd:3.5.15-0")]
    pub hosted_etcd_image: String,
    /// KubernetesCluster `hosted`: how clients reach a hosted API server: `ClusterIP` (from the
    /// cluster's pods and nodes), `NodePort` (a node's address) or `LoadBalancer`.
    #[arg(long, default_value = "ClusterIP", value_parser = ["ClusterIP", "NodePort", "LoadBalancer"])]
    pub hosted_exposure: String,
    /// KubernetesCluster `hosted`: the StorageClass of etcd's volume claim (empty: the
    /// cluster's default class).
    #[arg(long, default_value = "")]
    pub hosted_storage_class: String,
    /// KubernetesCluster `hosted`: the size of etcd's volume claim.
    #[arg(long, default_value = "1Gi")]
    pub hosted_etcd_storage: String,
    /// KubernetesCluster `hosted`: the control-plane containers' imagePullPolicy.
    #[arg(long, default_value = "IfNotPresent", value_parser = ["Always", "IfNotPresent", "Never"])]
    pub hosted_image_pull_policy: String,
}

/// The `hosted` provider's catalog and settings, from the flags.
pub fn hosted_config(args: &ProviderArgs) -> anyhow::Result<HostedConfig> {
    let api = pairs(&args.hosted_apiserver_images, "--hosted-apiserver-image")?;
    let kcm = pairs(
        &args.hosted_controller_manager_images,
        "--hosted-controller-manager-image",
    )?;
    for version in kcm.keys() {
        anyhow::ensure!(
            api.contains_key(version),
            "--hosted-controller-manager-image names {version}, which has no --hosted-apiserver-image"
        );
    }
    let mut versions = Vec::new();
    for (version, api_server) in api {
        let controller_manager = kcm.get(&version).cloned().with_context(|| {
            format!("--hosted-apiserver-image names {version}, which has no --hosted-controller-manager-image")
        })?;
        versions.push(VersionImages {
            version,
            api_server,
            controller_manager,
        });
    }
    let mut config = HostedConfig::new(versions, args.hosted_etcd_image.trim());
    config.exposure = Exposure::parse(&args.hosted_exposure)
        .with_context(|| format!("--hosted-exposure {:?}", args.hosted_exposure))?;
    config.storage_class =
        Some(args.hosted_storage_class.trim().to_owned()).filter(|c| !c.is_empty());
    config.etcd_storage = args.hosted_etcd_storage.trim().to_owned();
    config.image_pull_policy = args.hosted_image_pull_policy.clone();
    config
        .check()
        .map_err(|e| anyhow::anyhow!("--hosted-*: {e}"))?;
    Ok(config)
}

/// Splits `NAME=VALUE` entries into a map, refusing duplicates and empty parts.
fn pairs(entries: &[String], flag: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for entry in entries.iter().map(|e| e.trim()).filter(|e| !e.is_empty()) {
        let (name, value) = entry
            .split_once('=')
            .filter(|(n, v)| !n.is_empty() && !v.is_empty())
            .with_context(|| format!("{flag} {entry:?}: expected NAME=VALUE"))?;
        anyhow::ensure!(
            out.insert(name.to_owned(), value.to_owned()).is_none(),
            "{flag}: {name} given twice"
        );
    }
    Ok(out)
}

/// Builds the providers the flags name; `hosted` works through `client`, the cluster Vigil
/// runs in.
pub fn providers(
    args: &ProviderArgs,
    client: &kube::Client,
    in_cluster: bool,
    namespaces: Option<&std::collections::BTreeSet<String>>,
) -> anyhow::Result<Providers> {
    let mut providers = Providers::new();
    let mut hosted = hosted_config(args)?;
    hosted.namespaces = namespaces.map(|n| n.iter().cloned().collect());
    let hosted = HostedProvider::new(client.clone(), hosted)
        .map_err(|e| anyhow::anyhow!("the hosted cluster provider: {e}"))?;
    providers.insert(HOSTED, Arc::new(hosted));
    let program = std::env::current_exe().context("locating the vigil binary for `local`")?;
    let local = LocalProvider::new(LocalConfig::new(&args.local_clusters_dir, program))
        .context("the local cluster provider")?;
    providers.insert(
        vigil_apis::kubernetes_cluster::DEFAULT_PROVIDER,
        Arc::new(local),
    );
    let tokens = pairs(
        &args.cluster_provider_token_files,
        "--cluster-provider-token-file",
    )?;
    let externals = pairs(&args.cluster_providers, "--cluster-provider")?;
    for name in tokens.keys() {
        anyhow::ensure!(
            externals.contains_key(name),
            "--cluster-provider-token-file names {name}, which no --cluster-provider defines"
        );
    }
    for (name, url) in externals {
        anyhow::ensure!(
            name != vigil_apis::kubernetes_cluster::DEFAULT_PROVIDER && name != HOSTED,
            "--cluster-provider: {name} is a built-in provider's name"
        );
        let token = match tokens.get(&name) {
            Some(file) => Some(
                std::fs::read_to_string(file)
                    .with_context(|| format!("reading the token of provider {name} from {file}"))?
                    .trim()
                    .to_owned(),
            ),
            None => None,
        };
        let config = ExternalConfig {
            url,
            token,
            timeout: args.cluster_provider_timeout,
        };
        let provider = ExternalProvider::new(config)?;
        providers.insert(name, Arc::new(provider));
    }
    let default = match &args.default_cluster_provider {
        Some(name) => name.trim().to_owned(),
        None if in_cluster => HOSTED.to_owned(),
        None => vigil_apis::kubernetes_cluster::DEFAULT_PROVIDER.to_owned(),
    };
    anyhow::ensure!(
        providers.get(&default).is_some(),
        "--default-cluster-provider {default}: no such provider (there are {})",
        providers.names().collect::<Vec<_>>().join(", ")
    );
    providers.set_default(default);
    Ok(providers)
}

/// The built-in provider of control planes as pods.
pub const HOSTED: &str = "hosted";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_parse_and_refuse_bad_entries() {
        let ok = pairs(&["bank=http://x".into(), " ".into()], "--f").expect("parses");
        assert_eq!(ok.get("bank").map(String::as_str), Some("http://x"));
        assert!(pairs(&["bank".into()], "--f").is_err());
        assert!(pairs(&["=http://x".into()], "--f").is_err());
        assert!(pairs(&["a=1".into(), "a=2".into()], "--f").is_err());
    }
}
