//! The `apis` crate's integration tests, one module per subject, in one test binary.

mod configmap_sync_crd;
mod crd;
