//! How KubernetesCluster is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]). Its cluster providers are plug-ins of the binary, which puts them in
//! [`Setup::shared`]; the status vault, when it runs, left its restorer there.

use clap::{Args as _, FromArgMatches as _};
use vigil_provider::Providers;
use vigil_runtime::Manager;

use super::controller::{self, Config};
use super::model::Settings;
use super::{NAME, PERMISSIONS};
use crate::registry::{Registration, Setup, SetupError, parse_duration};
use crate::status_vault::StatusRestorer;

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    chart_key: "kubernetesCluster",
    crds: || vec![vigil_apis::crds::kubernetes_cluster()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
    add,
};

/// KubernetesCluster's flags of `vigil run` (its providers' are the binary's).
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// KubernetesCluster: how often a cluster in a long operation (provisioning, upgrade,
    /// deletion) is asked how far it got.
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    kubernetescluster_poll_interval: std::time::Duration,
    /// KubernetesCluster: how often a settled cluster is compared with its provider (drift).
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    kubernetescluster_resync_interval: std::time::Duration,
}

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let config = Config {
        settings: Settings {
            poll_interval: flags.kubernetescluster_poll_interval,
            resync_interval: flags.kubernetescluster_resync_interval,
        },
        providers: setup.shared.take::<Providers>().unwrap_or_default(),
        restorer: setup.shared.get::<StatusRestorer>().cloned(),
    };
    manager.add(NAME, move |rt| controller::run_on(rt, config));
    Ok(())
}
