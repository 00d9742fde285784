//! The `sandbox` crate's integration tests, one module per subject, in one test binary.

mod common;
mod data_dir;
mod tls;
