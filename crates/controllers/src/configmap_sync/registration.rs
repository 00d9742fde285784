//! How ConfigMapSync is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]).

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::ConfigMapSync;
use vigil_runtime::Manager;

use super::controller::{self, NAME, PERMISSIONS, SECRET_PERMISSIONS};
use super::model::Settings;
use crate::registry::{Registration, Setup, SetupError};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    chart_key: "configMapSync",
    crds: || vec![ConfigMapSync::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[("secrets", SECRET_PERMISSIONS)],
    flags: Flags::augment_args,
    add,
};

/// ConfigMapSync's flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// ConfigMapSync: trust every ConfigMapSync author, so sources and destinations outside a
    /// ConfigMapSync's namespace need no consent (for clusters where only administrators may
    /// create ConfigMapSyncs). See docs/configmap-sync.md.
    #[arg(long, env = "VIGIL_CONFIGMAPSYNC_TRUST_ALL")]
    configmapsync_trust_all: bool,
    /// ConfigMapSync: also copy Secrets (`kind: Secret`); needs Secret permissions
    /// (`vigil manifests --configmapsync-secrets` grants them).
    #[arg(long, env = "VIGIL_CONFIGMAPSYNC_SECRETS")]
    configmapsync_secrets: bool,
}

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let settings = Settings {
        trust_all: flags.configmapsync_trust_all,
        secrets: flags.configmapsync_secrets,
    };
    manager.add(NAME, move |rt| controller::run_on(rt, settings));
    Ok(())
}
