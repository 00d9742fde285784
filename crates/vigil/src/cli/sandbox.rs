//! `vigil sandbox`: serve the embedded API server until SIGINT or SIGTERM (after which the data
//! directory, if any, holds the final state).

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use vigil_kubelet::{Kubelet, KubeletConfig};
use vigil_runtime::ShutdownSignals;
use vigil_sandbox::{KubeVersion, Sandbox, SandboxConfig};

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Loopback address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443", env = "VIGIL_SANDBOX_LISTEN")]
    listen: SocketAddr,
    /// Write a kubeconfig for kubectl and kube-rs to this file.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
    /// Require this bearer token on every request (others get 401), except the paths a real
    /// cluster serves anonymously: /version, /healthz, /livez and /readyz.
    #[arg(long, env = "VIGIL_SANDBOX_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Serve HTTPS with a self-signed CA (kept in --data-dir, so a restart keeps it); the
    /// kubeconfig carries the CA. kubectl, Helm and client-go send a token only over TLS.
    #[arg(long)]
    tls: bool,
    /// Change events kept for watches to resume from; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 10_000)]
    watch_window: usize,
    /// Do not run the simulated kubelet (pods then stay Pending, as on a cluster without nodes).
    #[arg(long)]
    no_kubelet: bool,
    /// How long pods take to become Ready on the simulated kubelet, e.g. `500ms`, `2s`.
    #[arg(long, default_value = "0s", value_parser = crate::parse_duration)]
    kubelet_ready_delay: std::time::Duration,
    /// Keep the state in this directory (created if missing): a sandbox restarted on it serves the
    /// same objects. Without it, everything lives in memory and ends with the process.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Kubernetes version reported on /version, e.g. `1.28` (→ v1.28.0) or `1.28.3`.
    #[arg(long, value_name = "X.Y[.Z]")]
    kube_version: Option<KubeVersion>,
}

pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    // First: a SIGTERM from the moment the ready line can be read must stop the sandbox
    // gracefully, not meet the default action (see `vigil_runtime::signals`).
    let mut signals = ShutdownSignals::install().context("installing the signal handlers")?;
    // A closed output stops the sandbox as SIGTERM does: its data directory is cleaned up.
    crate::output::stop_when_closed();
    let config = SandboxConfig {
        listen: args.listen,
        token: args.token,
        watch_window: args.watch_window,
        data_dir: args.data_dir,
        kube_version: args.kube_version,
        tls: args.tls,
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::start(config)
        .await
        .context("starting the sandbox")?;
    if let Some(path) = &args.kubeconfig_out {
        sandbox.write_kubeconfig(path)?;
    }
    let kubelet = if args.no_kubelet {
        None
    } else {
        let client = client_for(&sandbox).await?;
        let config = KubeletConfig {
            ready_delay: args.kubelet_ready_delay,
            ..KubeletConfig::default()
        };
        Some(
            Kubelet::start(client, config)
                .await
                .context("starting the simulated kubelet")?,
        )
    };
    match &args.kubeconfig_out {
        Some(path) => say!(
            "sandbox ready at {} (kubeconfig: {})",
            sandbox.url(),
            path.display()
        ),
        None => say!("sandbox ready at {}", sandbox.url()),
    }
    tokio::select! {
        () = signals.recv() => {}
        // The reader of our output went away (`vigil sandbox | head -1`): stop as on SIGTERM.
        () = crate::output::closed() => {}
    }
    tracing::info!("stopping the sandbox");
    if let Some(kubelet) = kubelet {
        kubelet.stop().await;
    }
    sandbox.shutdown().await;
    Ok(())
}

/// A client of the sandbox, through the same kubeconfig users get.
async fn client_for(sandbox: &Sandbox) -> anyhow::Result<kube::Client> {
    let kubeconfig = kube::config::Kubeconfig::from_yaml(&sandbox.kubeconfig())?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}
