//! How KubernetesCluster is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]). Its cluster providers are plug-ins of the binary, which puts them in
//! [`Setup::shared`]; the status vault, when it runs, left its restorer there.

use clap::{Args as _, FromArgMatches as _};
use vigil_provider::Providers;
use vigil_runtime::Manager;

use super::controller::{self, Config};
use super::model::Settings;
use super::{NAME, PERMISSIONS};
use crate::registry::{
    ChartValue, DURATION_SCHEMA, FlagKind, Install, Registration, Setup, SetupError, parse_duration,
};
use crate::status_vault::StatusRestorer;

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    summary: "KubernetesCluster (vigil.dev/v1): clusters provisioned through a provider.",
    chart_key: "kubernetesCluster",
    crds: || vec![vigil_apis::crds::kubernetes_cluster()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
    chart_values: &[
        ChartValue::flag(
            "pollInterval",
            "kubernetescluster-poll-interval",
            FlagKind::Duration,
        ),
        ChartValue::flag(
            "resyncInterval",
            "kubernetescluster-resync-interval",
            FlagKind::Duration,
        ),
        // The cluster providers are plug-ins of the binary, whose flags the chart's Deployment
        // template passes (with their token Secrets' volumes).
        ChartValue::chart(
            "providerTimeout",
            "\"\"",
            DURATION_SCHEMA,
            "Longest request to an external provider (`--cluster-provider-timeout`); empty: 10s.",
        ),
        ChartValue::chart(
            "providers",
            "[]",
            PROVIDERS_SCHEMA,
            "External providers speaking the cluster provider protocol: `[{name: bank, url: \"https://…\", tokenSecret: {name: bank-token, key: token}}]` (tokenSecret optional).",
        ),
    ],
    // The status vault's restorer, when it runs, is consulted before a cluster is provisioned.
    after: &[crate::status_vault::NAME],
    requires: &[],
    install: Install {
        // The `local` provider's clusters live under /var/lib/vigil.
        data_volume: true,
        status_worth_keeping: &["kubernetesclusters.vigil.dev"],
        ..Install::NOTHING
    },
    add,
};

/// The chart's `kubernetesCluster.providers`: each becomes `--cluster-provider NAME=URL` (and
/// `--cluster-provider-token-file` from its Secret).
const PROVIDERS_SCHEMA: &str = r#"{"type": "array", "description": "External cluster providers.", "items": {"type": "object", "additionalProperties": false, "required": ["name", "url"], "properties": {"name": {"type": "string", "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"}, "url": {"type": "string", "pattern": "^https?://"}, "tokenSecret": {"type": "object", "additionalProperties": false, "properties": {"name": {"type": "string", "minLength": 1}, "key": {"type": "string", "minLength": 1}}, "required": ["name"]}}}}"#;

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
        providers: setup.shared.require::<Providers>()?,
        restorer: setup.shared.get::<StatusRestorer>().cloned(),
    };
    manager.add(NAME, move |rt| controller::run_on(rt, config));
    Ok(())
}
