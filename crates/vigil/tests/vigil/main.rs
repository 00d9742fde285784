//! The `vigil` crate's integration tests, one module per subject, in one test binary.

mod chart;
mod churn;
mod cli;
mod cli_signals;
mod explain;
mod helm;
mod kafka_burst;
mod kubernetes_cluster_crash;
mod kubernetes_cluster_local;
mod local_provider;
mod observability;
mod packaging;
mod refused;
mod replicas;
mod sandbox_data_dir;
mod signals_at_start;
mod slow_api;
mod status_cli;
mod status_vault;
mod storage_migration;
#[path = "../support/mod.rs"]
mod support;
