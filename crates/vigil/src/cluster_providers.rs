//! The cluster providers `vigil run` offers KubernetesClusters (`spec.provider.name`): `local`
//! (each cluster a `vigil sandbox` process of this binary, state under `--local-clusters-dir`)
//! and every external provider named by `--cluster-provider NAME=URL`.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use vigil_provider::Providers;
use vigil_provider::external::{ExternalConfig, ExternalProvider};
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

/// Builds the providers the flags name.
pub fn providers(args: &ProviderArgs) -> anyhow::Result<Providers> {
    let mut providers = Providers::new();
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
            name != vigil_apis::kubernetes_cluster::DEFAULT_PROVIDER,
            "--cluster-provider: {name} is the built-in provider's name"
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
    Ok(providers)
}

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
