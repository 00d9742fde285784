//! The `kafka` crate's integration tests, one module per subject, in one test binary.

mod broker;
mod outcomes;
