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
use vigil_controllers::registry::{self, ControllerFlags, Registration, Setup, Shared};
use vigil_runtime::leader::{LeaderElectionConfig, unique_identity};
use vigil_runtime::{Manager, ShutdownSignals};

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// Kubeconfig to use; default: `KUBECONFIG`, `~/.kube/config`, then the in-cluster configuration.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Controllers to run, comma-separated (default: all of them).
    #[arg(long, value_delimiter = ',', default_values_t = registry::names().map(str::to_owned).collect::<Vec<_>>())]
    controllers: Vec<String>,
    /// Namespaces to watch, comma-separated; empty: all.
    #[arg(long, env = "NAMESPACES", value_delimiter = ',', default_value = "")]
    namespaces: Vec<String>,
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
    /// Each controller's own flags (declared in its module's `registration.rs`).
    #[command(flatten)]
    controller_flags: ControllerFlags,
    #[command(flatten)]
    providers: crate::cluster_providers::ProviderArgs,
    /// How long in-flight work may take to finish after SIGTERM.
    #[arg(long, default_value = "25s", value_parser = crate::parse_duration)]
    shutdown_timeout: Duration,
}

/// `vigil run`'s command for the controllers of `registry`: their flags, and `--controllers`
/// defaulting to them all.
pub fn with_controller_flags(command: clap::Command, registry: &[Registration]) -> clap::Command {
    let names: Vec<&'static str> = registry.iter().map(|c| c.name).collect();
    registry::with_flags(
        command.mut_arg("controllers", |arg| arg.default_values(names)),
        registry,
    )
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
    Ok(vigil_runtime::client::load_config(kubeconfig.map(PathBuf::as_path)).await?)
}

pub async fn run(args: RunArgs, registry: &[Registration]) -> anyhow::Result<()> {
    // First: a SIGTERM during start-up (a pod deleted as it starts) must end in a graceful
    // shutdown that releases the Lease, so the handlers are in place before `/readyz` serves
    // and before the Lease is campaigned for (see `vigil_runtime::signals`).
    let signals = ShutdownSignals::install().context("installing the signal handlers")?;
    // Checked before anything starts: unknown names, a controller without one it requires.
    let controllers = registry::start_order(registry, &args.controllers)?;
    let own_ns = own_namespace();
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
        .metrics_prefix("vigil")
        .missing_kind_hint(
            "install Vigil's CRDs: vigil manifests | kubectl apply --server-side -f -",
        )
        .reporting_instance(std::env::var("POD_NAME").ok())
        .signals(signals)
        .build()
        .await
        .context("starting the manager")?;
    if let Some(addr) = manager.metrics_addr() {
        tracing::info!(%addr, "metrics and probes serving");
    }

    let watched: BTreeSet<String> = args
        .namespaces
        .iter()
        .map(|n| n.trim().to_owned())
        .filter(|n| !n.is_empty())
        .collect();
    let mut shared = Shared::default();
    shared.insert(crate::cluster_providers::providers(
        &args.providers,
        manager.runtime().client(),
        in_cluster(),
        (!watched.is_empty()).then_some(&watched),
    )?);
    let mut setup = Setup {
        flags: &args.controller_flags.0,
        namespaces: (!watched.is_empty()).then_some(watched),
        own_namespace: own_ns,
        shared,
    };
    // In start order: each after the controllers it consults (the status vault before
    // KubernetesCluster).
    for controller in &controllers {
        (controller.add)(&mut manager, &mut setup)
            .map_err(|e| anyhow::anyhow!(e))
            .with_context(|| format!("starting controller {}", controller.name))?;
    }
    let names: Vec<&str> = controllers.iter().map(|c| c.name).collect();
    tracing::info!(controllers = ?names, "vigil running");
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
