//! The `vault` crate's integration tests, one module per subject, in one test binary.

mod common;
mod dir;
mod fixtures;
mod s3;
