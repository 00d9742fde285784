//! `vigil-bench`: Vigil's benchmarks, which print figures (never assertions).
//!
//! They drive the `vigil` binary as a black box (`vigil sandbox`, `vigil run`, `vigil status`
//! child processes, found beside this binary or at `$VIGIL_BIN`, see [`support::binary`]), and
//! the libraries (sandbox, controllers, providers) in process where a bench needs to.
//! `cargo build --release -p vigil -p vigil-bench`, then `target/release/vigil-bench <bench>`.

// First: its `say!` macro is used by every module below.
#[macro_use]
mod output;

mod configmap_sync;
mod critical_service;
mod critical_service_clients;
mod critical_service_scale;
mod deployment;
mod endpoints;
mod fidelity;
mod hosted_clusters;
mod kafka_topic;
mod kubernetes_cluster;
mod sandbox;
mod status_restore;
mod status_vault;
mod support;
mod validation_rules;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "vigil-bench",
    version,
    about = "Vigil's benchmarks: each prints its figures"
)]
struct Cli {
    #[command(subcommand)]
    bench: Bench,
}

/// The benchmarks, one subcommand each (the names and flags `vigil-bench` had).
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Creates per second and watch-event delivery latency against a sandbox in a child process.
    Sandbox(crate::sandbox::SandboxBench),
    /// Endpoints settling time after a burst of pod readiness changes, pods × services.
    Endpoints(crate::endpoints::EndpointsBench),
    /// ConfigMapSync propagation latency to 100 namespaces, and 1,000 ConfigMapSyncs × 10 at scale.
    #[command(name = "configmap-sync")]
    ConfigMapSync(crate::configmap_sync::ConfigMapSyncBench),
    /// CriticalService reaction latency and a force-delete burst, Vigil in its own process.
    CriticalService(crate::critical_service::CriticalServiceBench),
    /// CriticalService judged by its clients on the real node: failed requests and failure windows, no controller vs Vigil vs Vigil + standby.
    CriticalServiceClients(crate::critical_service_clients::ClientsBench),
    /// CriticalServices at scale: start to steady state, writes and reconciles at rest, RSS.
    CriticalServiceScale(crate::critical_service_scale::ScaleBench),
    /// Status vault: capture lag, automatic and CLI restore times, bytes per record.
    StatusVault(crate::status_vault::StatusVaultBench),
    /// The article's restore at scale through the CLI: N LoadBalancer Services backed up, deleted, restored.
    StatusRestore(crate::status_restore::StatusRestoreBench),
    /// KubernetesClusters through the external reference provider: time to all Ready, provider and API requests per object, RSS.
    KubernetesCluster(crate::kubernetes_cluster::KubernetesClusterBench),
    /// Hosted control planes on the real node: apply to Ready, one control plane's memory, Vigil's per cluster, requests at rest, an upgrade's failed requests.
    HostedClusters(crate::hosted_clusters::HostedClustersBench),
    /// KafkaTopic: time to Ready for 500 topics, broker requests in steady state, deletion.
    KafkaTopic(crate::kafka_topic::KafkaTopicBench),
    /// The sandbox beside kube-apiserver 1.28 (../shared/kube): start to ready, one fixed workload.
    Fidelity(crate::fidelity::FidelityBench),
    /// A 1,000-replica Deployment on the sandbox: time to available, time to roll out a new template, RSS.
    Deployment(crate::deployment::DeploymentBench),
    /// What CRD validation rules (CEL) cost a create and an update on the sandbox, with and without.
    ValidationRules(crate::validation_rules::ValidationRulesBench),
}

async fn run(bench: Bench) -> anyhow::Result<()> {
    match bench {
        Bench::Sandbox(args) => crate::sandbox::run(args).await,
        Bench::Endpoints(args) => crate::endpoints::run(args).await,
        Bench::ConfigMapSync(args) => crate::configmap_sync::run(args).await,
        Bench::CriticalService(args) => crate::critical_service::run(args).await,
        Bench::CriticalServiceClients(args) => crate::critical_service_clients::run(args).await,
        Bench::CriticalServiceScale(args) => crate::critical_service_scale::run(args).await,
        Bench::StatusVault(args) => crate::status_vault::run(args).await,
        Bench::StatusRestore(args) => crate::status_restore::run(args).await,
        Bench::KubernetesCluster(args) => crate::kubernetes_cluster::run(args).await,
        Bench::HostedClusters(args) => crate::hosted_clusters::run(args).await,
        Bench::KafkaTopic(args) => crate::kafka_topic::run(args).await,
        Bench::Fidelity(args) => crate::fidelity::run(args).await,
        Bench::Deployment(args) => crate::deployment::run(args).await,
        Bench::ValidationRules(args) => crate::validation_rules::run(args).await,
    }
}

fn init_tracing() {
    // RUST_LOG wins; the article's LOG_LEVEL works too (as in `vigil`).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        let level = std::env::var("LOG_LEVEL")
            .map(|l| l.to_lowercase())
            .unwrap_or_else(|_| "info".into());
        tracing_subscriber::EnvFilter::try_new(&level)
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"))
    });
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .init();
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    init_tracing();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(run(cli.bench))
}
