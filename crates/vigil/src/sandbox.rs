//! `vigil sandbox`: serve the embedded API server until SIGINT or SIGTERM.

use std::net::SocketAddr;
use std::path::PathBuf;

use anyhow::Context as _;
use vigil_sandbox::{Sandbox, SandboxConfig};

#[derive(Debug, clap::Args)]
pub struct SandboxArgs {
    /// Loopback address to listen on; port 0 picks a free port.
    #[arg(long, default_value = "127.0.0.1:6443", env = "VIGIL_SANDBOX_LISTEN")]
    listen: SocketAddr,
    /// Write a kubeconfig for kubectl and kube-rs to this file.
    #[arg(long, value_name = "FILE")]
    kubeconfig_out: Option<PathBuf>,
    /// Require this bearer token on every request (others get 401).
    #[arg(long, env = "VIGIL_SANDBOX_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Change events kept for watches to resume from; older resourceVersions get 410 Expired.
    #[arg(long, default_value_t = 100_000)]
    watch_window: usize,
}

pub async fn run(args: SandboxArgs) -> anyhow::Result<()> {
    let config = SandboxConfig {
        listen: args.listen,
        token: args.token,
        watch_window: args.watch_window,
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::start(config)
        .await
        .context("starting the sandbox")?;
    if let Some(path) = &args.kubeconfig_out {
        sandbox.write_kubeconfig(path)?;
    }
    match &args.kubeconfig_out {
        Some(path) => println!(
            "sandbox ready at {} (kubeconfig: {})",
            sandbox.url(),
            path.display()
        ),
        None => println!("sandbox ready at {}", sandbox.url()),
    }
    wait_for_signal().await?;
    tracing::info!("stopping the sandbox");
    sandbox.shutdown().await;
    Ok(())
}

async fn wait_for_signal() -> anyhow::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    tokio::select! {
        r = tokio::signal::ctrl_c() => r.context("waiting for SIGINT")?,
        _ = term.recv() => {}
    }
    Ok(())
}
