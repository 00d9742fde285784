//! `vigil run`: the operator. Loads the cluster configuration, serves metrics and probes, joins
//! leader election, runs the chosen controllers, and shuts down gracefully on SIGTERM/SIGINT.
//! Configuration comes from flags or environment variables, including the article's names
//! (`NAMESPACES`, `POD_TEMPLATE`, `POD_TEMPLATE_NS`, `POD_NAME_PREFIX`, `LOG_LEVEL`) so its
//! ConfigMap works through `envFrom`.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use vigil_controllers::configmap_sync::{
    controller as configmap_sync, model::Settings as ConfigMapSyncSettings,
};
use vigil_controllers::critical_service::{
    controller as critical_service, model::Settings, model::TemplateKey,
};
use vigil_controllers::kafka_topic::controller::{
    self as kafka_topic, Settings as KafkaTopicSettings,
};
use vigil_controllers::kubernetes_cluster::{
    self as kubernetes_cluster, model::Settings as KubernetesClusterSettings,
};
use vigil_controllers::status_vault::{self, model::Settings as StatusVaultSettings};
use vigil_runtime::Manager;
use vigil_runtime::leader::{LeaderElectionConfig, unique_identity};

/// Controllers `vigil run` can host.
const CONTROLLERS: &[&str] = &[
    critical_service::NAME,
    configmap_sync::NAME,
    status_vault::NAME,
    kafka_topic::NAME,
    kubernetes_cluster::NAME,
];

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig to use; default: `KUBECONFIG`, `~/.kube/config`, then the in-cluster configuration.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Controllers to run, comma-separated (default: all ready ones).
    #[arg(long, value_delimiter = ',', default_values_t = CONTROLLERS.iter().map(|c| (*c).to_owned()).collect::<Vec<_>>())]
    controllers: Vec<String>,
    /// Namespaces to watch, comma-separated; empty: all.
    #[arg(long, env = "NAMESPACES", value_delimiter = ',', default_value = "")]
    namespaces: Vec<String>,
    /// PodTemplate of fallback pods when a CriticalService names none.
    #[arg(
        long,
        env = "POD_TEMPLATE",
        default_value = "critical-service-pod-template"
    )]
    pod_template: String,
    /// Namespace of that PodTemplate (default: the operator's own namespace).
    #[arg(long, env = "POD_TEMPLATE_NS")]
    pod_template_ns: Option<String>,
    /// Prefix of fallback pod names.
    #[arg(long, env = "POD_NAME_PREFIX", default_value = "service-watcher")]
    pod_name_prefix: String,
    /// Address of the metrics and probe server (/metrics, /healthz, /readyz).
    #[arg(long, env = "VIGIL_METRICS_ADDR", default_value = "0.0.0.0:8080")]
    metrics_addr: SocketAddr,
    /// Elect a leader on a Lease (default: on inside a cluster, off elsewhere).
    #[arg(long, env = "VIGIL_LEADER_ELECT")]
    leader_elect: Option<bool>,
    /// Name of the leader election Lease.
    #[arg(long, default_value = "vigil-leader")]
    lease_name: String,
    /// Namespace of the Lease (default: the operator's own namespace).
    #[arg(long)]
    lease_namespace: Option<String>,
    /// How long a Lease stays valid without renewal (what standbys wait out), e.g. `15s`.
    #[arg(long, default_value = "15s", value_parser = crate::parse_duration)]
    lease_duration: Duration,
    /// How long a leader keeps leading without a successful renewal (< lease duration).
    #[arg(long, default_value = "10s", value_parser = crate::parse_duration)]
    renew_deadline: Duration,
    /// Interval between renewals and acquisition attempts.
    #[arg(long, default_value = "2s", value_parser = crate::parse_duration)]
    retry_period: Duration,
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
    /// ConfigMapSync: trust every ConfigMapSync author, so sources and destinations outside a
    /// ConfigMapSync's namespace need no consent (for clusters where only administrators may
    /// create ConfigMapSyncs). See docs/configmap-sync.md.
    #[arg(long, env = "VIGIL_CONFIGMAPSYNC_TRUST_ALL")]
    configmapsync_trust_all: bool,
    /// ConfigMapSync: also copy Secrets (`kind: Secret`); needs Secret permissions
    /// (`vigil manifests --configmapsync-secrets` grants them).
    #[arg(long, env = "VIGIL_CONFIGMAPSYNC_SECRETS")]
    configmapsync_secrets: bool,
    /// KafkaTopic: how often to look for changes made in Kafka outside Vigil (one `Metadata` and
    /// one `DescribeConfigs` request per cluster, whatever the number of topics); `0s`: never.
    #[arg(long, env = "VIGIL_KAFKA_DRIFT_INTERVAL", default_value = "60s", value_parser = crate::parse_duration)]
    kafka_drift_interval: Duration,
    /// KafkaTopic: longest wait between retries of a Topic whose broker is down or refuses.
    #[arg(long, env = "VIGIL_KAFKA_RETRY_MAX", default_value = "60s", value_parser = crate::parse_duration)]
    kafka_retry_max: Duration,
    /// KafkaTopic: bound on connecting to a broker and on each request.
    #[arg(long, env = "VIGIL_KAFKA_BROKER_TIMEOUT", default_value = "10s", value_parser = crate::parse_duration)]
    kafka_broker_timeout: Duration,
    /// KubernetesCluster: how often a cluster in a long operation (provisioning, upgrade,
    /// deletion) is asked how far it got.
    #[arg(long, default_value = "2s", value_parser = crate::parse_duration)]
    kubernetescluster_poll_interval: Duration,
    /// KubernetesCluster: how often a settled cluster is compared with its provider (drift).
    #[arg(long, default_value = "60s", value_parser = crate::parse_duration)]
    kubernetescluster_resync_interval: Duration,
    #[command(flatten)]
    providers: crate::cluster_providers::ProviderArgs,
    /// How long in-flight work may take to finish after SIGTERM.
    #[arg(long, default_value = "25s", value_parser = crate::parse_duration)]
    shutdown_timeout: Duration,
}

/// The namespace this process runs in: `POD_NAMESPACE`, the service account's namespace file,
/// or `default`.
fn own_namespace() -> String {
    std::env::var("POD_NAMESPACE")
        .ok()
        .filter(|n| !n.is_empty())
        .or_else(|| {
            std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace").ok()
        })
        .map(|n| n.trim().to_owned())
        .unwrap_or_else(|| "default".into())
}

fn in_cluster() -> bool {
    std::env::var_os("KUBERNETES_SERVICE_HOST").is_some()
}

/// A client (without request metrics) for the CLI's one-off commands.
pub(crate) async fn client(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Client> {
    Ok(kube::Client::try_from(config(kubeconfig).await?)?)
}

/// The client configuration: the kubeconfig given, else the inferred one.
pub(crate) async fn config(kubeconfig: Option<&PathBuf>) -> anyhow::Result<kube::Config> {
    Ok(match kubeconfig {
        Some(path) => {
            let file = kube::config::Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(file, &Default::default()).await?
        }
        None => kube::Config::infer()
            .await
            .context("no kubeconfig and not running in a cluster")?,
    })
}

pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    for name in &args.controllers {
        anyhow::ensure!(
            CONTROLLERS.contains(&name.as_str()),
            "unknown controller {name:?}; available: {}",
            CONTROLLERS.join(", ")
        );
    }
    let own_ns = own_namespace();
    let watched: BTreeSet<String> = args
        .namespaces
        .iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    let settings = Settings {
        pod_name_prefix: args.pod_name_prefix.clone(),
        default_template: TemplateKey {
            namespace: args
                .pod_template_ns
                .clone()
                .unwrap_or_else(|| own_ns.clone()),
            name: args.pod_template.clone(),
        },
        watched_namespaces: (!watched.is_empty()).then_some(watched),
    };

    let election = args.leader_elect.unwrap_or_else(in_cluster).then(|| {
        let mut config = LeaderElectionConfig::new(
            args.lease_namespace
                .clone()
                .unwrap_or_else(|| own_ns.clone()),
            &args.lease_name,
            unique_identity(&std::env::var("POD_NAME").unwrap_or_else(|_| "vigil".into())),
        );
        config.lease_duration = args.lease_duration;
        config.renew_deadline = args.renew_deadline;
        config.retry_period = args.retry_period;
        config
    });
    let mut manager = Manager::builder("vigil", config(args.kubeconfig.as_ref()).await?)
        .metrics_addr(args.metrics_addr)
        .leader_election(election)
        .shutdown_timeout(args.shutdown_timeout)
        .build()
        .await
        .context("starting the manager")?;
    if let Some(addr) = manager.metrics_addr() {
        tracing::info!(%addr, "metrics and probes serving");
    }
    let enabled = |name: &str| args.controllers.iter().any(|c| c == name);

    let mut restorer = None;
    if enabled(status_vault::NAME) {
        // Made before it runs: KubernetesCluster consults its restore.
        let vault = status_vault::StatusVault::on(
            manager.runtime(),
            StatusVaultSettings {
                default_location: args.status_vault_location.clone(),
                default_key_file: args.status_vault_key_file.clone(),
            },
        );
        restorer = Some(vault.restorer());
        manager.add(status_vault::NAME, move |rt| vault.run_on(rt));
    }
    if enabled(configmap_sync::NAME) {
        let settings = ConfigMapSyncSettings {
            trust_all: args.configmapsync_trust_all,
            secrets: args.configmapsync_secrets,
        };
        manager.add(configmap_sync::NAME, move |rt| {
            configmap_sync::run_on(rt, settings)
        });
    }
    if enabled(kubernetes_cluster::NAME) {
        let config = kubernetes_cluster::controller::Config {
            settings: KubernetesClusterSettings {
                poll_interval: args.kubernetescluster_poll_interval,
                resync_interval: args.kubernetescluster_resync_interval,
            },
            providers: crate::cluster_providers::providers(&args.providers)?,
            restorer,
        };
        manager.add(kubernetes_cluster::NAME, move |rt| {
            kubernetes_cluster::run_on(rt, config)
        });
    }
    if enabled(kafka_topic::NAME) {
        let settings = KafkaTopicSettings {
            drift_interval: args.kafka_drift_interval,
            retry_max: args.kafka_retry_max,
            broker_timeout: args.kafka_broker_timeout,
            namespaces: settings.watched_namespaces.clone(),
        };
        manager.add(kafka_topic::NAME, move |rt| {
            kafka_topic::run_on(rt, settings)
        });
    }
    if enabled(critical_service::NAME) {
        manager.add(critical_service::NAME, move |rt| {
            critical_service::run_on(rt, settings)
        });
    }
    tracing::info!(controllers = ?args.controllers, "vigil running");
    manager
        .run()
        .await
        .context("waiting for SIGTERM or SIGINT")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    /// Real API servers (and the in-cluster `https://kubernetes.default.svc`) speak TLS only: the
    /// client must be built with a TLS stack, or `vigil run` could talk to nothing but the sandbox.
    #[tokio::test]
    async fn the_client_speaks_tls() {
        let config = kube::Config::new("https://127.0.0.1:6443".parse().expect("a valid URL"));
        kube::Client::try_from(config).expect("a client for an https API server");
    }
}
