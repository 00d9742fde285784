//! How KafkaTopic is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]).

use clap::{Args as _, FromArgMatches as _};
use vigil_runtime::Manager;

use super::controller::{self, Settings};
use super::{NAME, PERMISSIONS, SECRET_PERMISSIONS};
use crate::registry::{
    ChartValue, FlagKind, Install, NarrowedBy, PermissionSet, Registration, Setup, SetupError,
    parse_duration,
};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    summary: "KafkaTopic (kafka.vigil.dev/v1): Kafka topics declared as Topic objects.",
    chart_key: "kafkaTopic",
    crds: || vec![vigil_apis::crds::topic()],
    permissions: PERMISSIONS,
    optional_permissions: &[PermissionSet {
        name: "secrets",
        permissions: SECRET_PERMISSIONS,
        value: "secrets.enabled",
        manifests_flag: "kafka-topic-secrets",
        help: "KafkaTopic: grant `get` on Secrets, for Topics whose cluster names TLS or SASL Secrets.",
        narrowed_by: Some(NarrowedBy {
            value: "secrets.names",
            help: "Only these Secret names (resourceNames); empty: any Secret.",
        }),
    }],
    flags: Flags::augment_args,
    chart_values: &[
        ChartValue::flag("driftInterval", "kafka-drift-interval", FlagKind::Duration),
        ChartValue::flag("retryMax", "kafka-retry-max", FlagKind::Duration),
        ChartValue::flag("brokerTimeout", "kafka-broker-timeout", FlagKind::Duration),
    ],
    after: &[],
    requires: &[],
    install: Install::NOTHING,
    add,
};

/// KafkaTopic's flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// KafkaTopic: how often to look for changes made in Kafka outside Vigil (one `Metadata` and
    /// one `DescribeConfigs` request per cluster, whatever the number of topics); `0s`: never.
    #[arg(long, env = "VIGIL_KAFKA_DRIFT_INTERVAL", default_value = "60s", value_parser = parse_duration)]
    kafka_drift_interval: std::time::Duration,
    /// KafkaTopic: longest wait between retries of a Topic whose broker is down or refuses.
    #[arg(long, env = "VIGIL_KAFKA_RETRY_MAX", default_value = "60s", value_parser = parse_duration)]
    kafka_retry_max: std::time::Duration,
    /// KafkaTopic: bound on connecting to a broker and on each request.
    #[arg(long, env = "VIGIL_KAFKA_BROKER_TIMEOUT", default_value = "10s", value_parser = parse_duration)]
    kafka_broker_timeout: std::time::Duration,
}

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let settings = Settings {
        drift_interval: flags.kafka_drift_interval,
        retry_max: flags.kafka_retry_max,
        broker_timeout: flags.kafka_broker_timeout,
        namespaces: setup.namespaces.clone(),
    };
    manager.add(NAME, move |rt| controller::run_on(rt, settings));
    Ok(())
}
