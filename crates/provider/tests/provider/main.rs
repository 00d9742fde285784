//! The `provider` crate's integration tests, one module per subject, in one test binary.

mod external;
mod local;
