//! Vigil's controllers, one module each: a pure `decide` step (what the world should look like,
//! from cached observations) and a thin `apply` step (the writes that get it there).

pub mod configmap_sync;
pub mod critical_service;
pub mod kafka_topic;
pub mod kubernetes_cluster;
pub mod permissions;
pub mod registry;
pub mod status_vault;
