//! How KubernetesCluster is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]). Its cluster providers are plug-ins of the binary, which puts them in
//! [`Setup::shared`]; the status vault, when it runs, left its restorer there.

use clap::{Args as _, FromArgMatches as _};
use vigil_provider::Providers;
use vigil_runtime::Manager;

use super::controller::{self, Config};
use super::model::Settings;
use super::{INSTALLED_PERMISSIONS, NAME};
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
    permissions: INSTALLED_PERMISSIONS,
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
        ChartValue::chart(
            "defaultProvider",
            "\"\"",
            r#"{"type": "string", "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?)?$"}"#,
            "The provider of a KubernetesCluster whose spec names none (`--default-cluster-provider`); empty: `hosted`, a control plane as pods of this cluster.",
        ),
        ChartValue::chart(
            "hosted.versions",
            "[]",
            HOSTED_VERSIONS_SCHEMA,
            "The `hosted` provider's catalog: the images of each Kubernetes version it runs, as `[{version: \"1.28.0\", apiServerImage: …, controllerManagerImage: …}]` (`--hosted-apiserver-image`, `--hosted-controller-manager-image`); empty: upstream's registry.k8s.io images of 1.28.0 and 1.29.14. A KubernetesCluster's `kubeVersion` outside it is refused; upgrades step through every minor, so keep one version of each minor between the oldest and newest.",
        ),
        ChartValue::chart(
            "hosted.etcdImage",
            "\"\"",
            r#"{"type": "string"}"#,
            "etcd's image for `hosted` control planes (`--hosted-etcd-image`); empty: registry.k8s.io/etcd:3.5.15-0.",
        ),
        ChartValue::chart(
            "hosted.exposure",
            "\"\"",
            r#"{"type": "string", "enum": ["", "ClusterIP", "NodePort", "LoadBalancer"]}"#,
            "How clients reach a hosted API server (`--hosted-exposure`): `ClusterIP` (from this cluster's pods and nodes; empty means it), `NodePort` (a node's address), `LoadBalancer`. The kubeconfig Secret names that address, and the serving certificate covers it.",
        ),
        ChartValue::chart(
            "hosted.storageClass",
            "\"\"",
            r#"{"type": "string"}"#,
            "StorageClass of each hosted etcd's volume claim (`--hosted-storage-class`); empty: the cluster's default class.",
        ),
        ChartValue::chart(
            "hosted.etcdStorage",
            "\"\"",
            r#"{"type": "string"}"#,
            "Size of each hosted etcd's volume claim (`--hosted-etcd-storage`); empty: 1Gi.",
        ),
        ChartValue::chart(
            "hosted.imagePullPolicy",
            "\"\"",
            r#"{"type": "string", "enum": ["", "Always", "IfNotPresent", "Never"]}"#,
            "imagePullPolicy of the hosted control planes' containers (`--hosted-image-pull-policy`); empty: IfNotPresent.",
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

/// The chart's `kubernetesCluster.hosted.versions`.
const HOSTED_VERSIONS_SCHEMA: &str = r#"{"type": "array", "description": "The hosted provider's version catalog.", "items": {"type": "object", "additionalProperties": false, "required": ["version", "apiServerImage", "controllerManagerImage"], "properties": {"version": {"type": "string", "pattern": "^[0-9]+\\.[0-9]+\\.[0-9]+$"}, "apiServerImage": {"type": "string", "minLength": 1}, "controllerManagerImage": {"type": "string", "minLength": 1}}}}"#;

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
