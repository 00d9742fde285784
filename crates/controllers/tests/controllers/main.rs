//! The `controllers` crate's integration tests, one module per subject, in one test binary.

mod configmap_sync;
mod critical_service;
mod kafka_topic;
mod kubernetes_cluster;
mod kubernetes_cluster_world;
mod status_vault;
mod support;
