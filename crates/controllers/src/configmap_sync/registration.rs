//! How ConfigMapSync is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]).

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::ConfigMapSync;
use vigil_runtime::Manager;

use super::controller;
use super::model::Settings;
use super::{NAME, PERMISSIONS, SECRET_PERMISSIONS};
use crate::registry::{
    ChartValue, FlagKind, Install, PermissionSet, Registration, Setup, SetupError,
};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    summary: "ConfigMapSync (apps.bixbite.io/v1): ConfigMaps (and Secrets) kept in sync across namespaces.",
    chart_key: "configMapSync",
    crds: || vec![ConfigMapSync::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[PermissionSet {
        name: "secrets",
        permissions: SECRET_PERMISSIONS,
        value: "secrets",
        manifests_flag: "configmapsync-secrets",
        help: "ConfigMapSync: also copy Secrets — grants get/list/watch/create/update/delete on Secrets and passes `--configmapsync-secrets` to `vigil run`.",
        narrowed_by: None,
    }],
    flags: Flags::augment_args,
    chart_values: &[
        ChartValue::flag("trustAll", "configmapsync-trust-all", FlagKind::Switch),
        ChartValue::flag("secrets", "configmapsync-secrets", FlagKind::Switch),
    ],
    after: &[],
    requires: &[],
    install: Install::NOTHING,
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
