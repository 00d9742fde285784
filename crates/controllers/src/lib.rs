//! Vigil's controllers, one module each: a pure `decide` step (what the world should look like,
//! from cached observations) and a thin `apply` step (the writes that get it there).

// Vigil's own crate, read as source: a module's documentation points at the private parts it
// is made of (`cargo doc --document-private-items` renders them).
#![allow(rustdoc::private_intra_doc_links)]

pub mod configmap_sync;
pub mod critical_service;
pub mod kafka_topic;
pub mod kubernetes_cluster;
pub mod permissions;
pub mod registry;
pub mod slim;
pub mod status_vault;
