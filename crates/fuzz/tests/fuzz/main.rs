//! The `fuzz` crate's integration tests, one module per subject, in one test binary.

mod kafka;
mod kubeconfig;
mod provider;
mod sandbox;
mod vault;
mod vault_s3;
