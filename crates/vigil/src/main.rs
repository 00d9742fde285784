//! `vigil`: the operator binary. Subcommands: `run` (the operator), `demo`, `sandbox` (an
//! embedded API server for demos and tests), `manifests` (install manifests), `migrate-storage` (after
//! an upgrade), `status` (the status vault). Each command lives in `cli/`; the benchmarks are a binary of their own,
//! `vigil-bench` (`crates/bench`).

// First: its `say!` macro is used by every module below.
#[macro_use]
mod output;

mod cli;
mod cluster_providers;
#[cfg(test)]
mod hosting_tests;

use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand};
use vigil_controllers::registry::{self, Registration};

/// `println!` that returns the write's error instead of panicking, for output that is piped:
/// `vigil manifests | head -1` closes the pipe early, and [`main`] ends quietly on that.
#[macro_export]
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// True when the error comes from writing to a closed pipe (the reader is gone: not a failure).
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|e| e.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// `vigil --version`: the release and the commit it was built from (build.rs).
const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("VIGIL_COMMIT"),
    ")"
);

#[derive(Debug, Parser)]
#[command(
    name = "vigil",
    version = VERSION,
    about = "Vigil: a Kubernetes operator for platform teams"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator against the cluster of the current kubeconfig (or in-cluster).
    Run(Box<cli::run::RunArgs>),
    /// See Vigil work in seconds: the article's CriticalService scenario on an in-process sandbox.
    Demo(cli::demo::DemoArgs),
    /// Serve an embedded Kubernetes API server on loopback (for demos and tests).
    Sandbox(cli::sandbox::SandboxArgs),
    /// Print the CRDs, RBAC and Deployment that install Vigil.
    Manifests(cli::manifests::ManifestsArgs),
    /// After an upgrade: rewrite every object of Vigil's CRDs at their storage version and trim
    /// the CRDs' `status.storedVersions` (docs/upgrading.md).
    MigrateStorage(cli::migrate_storage::MigrateStorageArgs),
    /// The status vault: back up objects with their status, restore them, inspect the vault.
    #[command(subcommand)]
    Status(cli::status::StatusCommand),
}

/// Parses `250ms`, `2s` or `1m`: the durations of every flag.
pub(crate) use registry::parse_duration;

/// kube-client logs every request that got no answer at ERROR, whoever made it and whatever
/// follows. Those are waits Vigil expects and handles (an API server restarting, a provisioned
/// cluster's server starting), reported by Vigil itself at the level they deserve (the runtime's
/// reachability WARN, a cluster's `Provisioning` phase); ERROR is kept for what a user must act
/// on. `RUST_LOG` still shows them (`RUST_LOG=info,kube_client=debug`).
const QUIET_BY_DEFAULT: &str = "kube_client::client::builder=off";

fn init_tracing() {
    // RUST_LOG wins; the article's LOG_LEVEL works too.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let level = std::env::var("LOG_LEVEL")
            .map(|l| l.to_lowercase())
            .unwrap_or_else(|_| "info".into());
        tracing_subscriber::EnvFilter::try_new(format!("{level},{QUIET_BY_DEFAULT}"))
            .unwrap_or_else(|_| {
                tracing_subscriber::EnvFilter::new(format!("info,{QUIET_BY_DEFAULT}"))
            })
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

/// `vigil`'s command line for the controllers of `registry`: `run` gets their flags, `manifests`
/// their optional permission sets and install flags.
fn command(registry: &[Registration]) -> clap::Command {
    Cli::command()
        .mut_subcommand("run", |run| cli::run::with_controller_flags(run, registry))
        .mut_subcommand("manifests", |manifests| {
            cli::manifests::with_controller_flags(manifests, registry)
        })
}

fn main() -> anyhow::Result<()> {
    // The controllers this binary hosts: one list, read by every command.
    let hosted = registry::CONTROLLERS;
    let cli = Cli::from_arg_matches(&command(hosted).get_matches()).unwrap_or_else(|e| e.exit());
    init_tracing();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(args) => cli::run::run(*args, hosted).await,
            Command::Manifests(args) => cli::manifests::run(&args, hosted),
            Command::MigrateStorage(args) => cli::migrate_storage::run(args).await,
            Command::Sandbox(args) => cli::sandbox::run(args).await,
            Command::Demo(args) => cli::demo::run(args).await,
            Command::Status(command) => cli::status::run(command).await,
        }
    });
    match result {
        Err(error) if is_broken_pipe(&error) => Ok(()),
        other => other,
    }
}
