//! What every `vigil status` command shares: the client and vault flags, and finding the
//! resources a user names.

use std::path::PathBuf;

use anyhow::Context as _;
use kube::api::ApiResource;
use kube::discovery::{ApiCapabilities, Discovery};
use vigil_vault::{EncryptionKey, Vault, VaultOptions};

#[derive(Debug, clap::Args)]
pub struct CommonArgs {
    /// Kubeconfig to use; default: `KUBECONFIG`, `~/.kube/config`, then the in-cluster configuration.
    #[arg(long, env = "KUBECONFIG")]
    pub kubeconfig: Option<PathBuf>,
    /// File holding the vault's AES-256-GCM key (32 raw bytes or base64). Backups are encrypted
    /// with it; restores need it to read encrypted records.
    #[arg(long, env = "VIGIL_STATUS_VAULT_KEY_FILE")]
    pub encryption_key_file: Option<PathBuf>,
}

impl CommonArgs {
    pub async fn client(&self) -> anyhow::Result<kube::Client> {
        crate::cli::run::client(self.kubeconfig.as_ref()).await
    }

    pub fn key(&self) -> anyhow::Result<Option<EncryptionKey>> {
        self.encryption_key_file
            .as_ref()
            .map(EncryptionKey::from_file)
            .transpose()
            .context("loading the encryption key")
    }

    /// Opens a vault to write to (a missing directory is created).
    pub async fn open(&self, location: &str, retention: usize) -> anyhow::Result<Vault> {
        let vault = Vault::open(
            location,
            VaultOptions {
                retention,
                key: self.key()?,
            },
        )
        .await
        .with_context(|| format!("opening the vault {location}"))?;
        Ok(vault)
    }

    /// Opens a vault to read from: a directory must exist (a typo must not read as an empty
    /// vault).
    pub async fn open_existing(&self, location: &str) -> anyhow::Result<Vault> {
        if !location.contains("://") {
            anyhow::ensure!(
                std::path::Path::new(location).is_dir(),
                "no vault at {location}: the directory does not exist"
            );
        }
        self.open(location, 0).await
    }
}

/// What the cluster serves, as `(resource, capabilities)` pairs of each group's recommended
/// version.
pub async fn discover(
    client: &kube::Client,
) -> anyhow::Result<Vec<(ApiResource, ApiCapabilities)>> {
    let discovery = Discovery::new(client.clone())
        .run()
        .await
        .context("API discovery")?;
    Ok(discovery
        .groups()
        .flat_map(|g| g.recommended_resources())
        .collect())
}

/// Finds the resource a user means by `wanted`, as kubectl and Velero spell it: plural
/// (`services`), singular or Kind (`service`, `Service`), each optionally followed by `.group`.
/// Without a group, the core group wins over others that have a kind of the same name.
pub fn resolve<'a>(
    resources: &'a [(ApiResource, ApiCapabilities)],
    wanted: &str,
) -> Result<&'a (ApiResource, ApiCapabilities), String> {
    let wanted = wanted.trim();
    let names =
        |ar: &ApiResource, name: &str| name == ar.plural || name.eq_ignore_ascii_case(&ar.kind);
    let matches: Vec<&(ApiResource, ApiCapabilities)> = resources
        .iter()
        .filter(|(ar, _)| {
            names(ar, wanted)
                || (!ar.group.is_empty()
                    && wanted
                        .strip_suffix(&ar.group)
                        .and_then(|rest| rest.strip_suffix('.'))
                        .is_some_and(|name| names(ar, name)))
        })
        .collect();
    match matches.as_slice() {
        [] => Err(format!("the cluster serves no resource {wanted:?}")),
        [one] => Ok(one),
        several => {
            let core: Vec<_> = several
                .iter()
                .filter(|(ar, _)| ar.group.is_empty())
                .collect();
            if let [one] = core.as_slice() {
                return Ok(one);
            }
            Err(format!(
                "{wanted:?} is ambiguous: {}; name the group",
                several
                    .iter()
                    .map(|(ar, _)| format!("{}.{}", ar.plural, ar.group))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        }
    }
}
