//! How the status vault is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]). It hands its restorer to the controllers added after it
//! ([`Setup::shared`]): KubernetesCluster consults it.

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::StatusBackupPolicy;
use vigil_runtime::Manager;

use super::controller::{NAME, PERMISSIONS, StatusVault};
use super::model::Settings;
use crate::registry::{Registration, Setup, SetupError};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    chart_key: "statusVault",
    crds: || vec![StatusBackupPolicy::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
    add,
};

/// The status vault's flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// Status vault: where policies without a backend keep records — a directory or
    /// `s3://bucket/prefix`.
    #[arg(
        long,
        env = "VIGIL_STATUS_VAULT_LOCATION",
        default_value = "/var/lib/vigil/status-vault"
    )]
    status_vault_location: String,
    /// Status vault: file holding the AES-256-GCM key of that default backend (32 raw bytes or
    /// base64); absent: records are stored in clear.
    #[arg(long, env = "VIGIL_STATUS_VAULT_KEY_FILE")]
    status_vault_key_file: Option<String>,
}

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let settings = Settings {
        default_location: flags.status_vault_location,
        default_key_file: flags.status_vault_key_file,
    };
    let vault = StatusVault::on(manager.runtime(), settings);
    setup.shared.insert(vault.restorer());
    manager.add(NAME, move |rt| vault.run_on(rt));
    Ok(())
}
