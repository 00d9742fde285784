//! The `runtime` crate's integration tests, one module per subject, in one test binary.

/// The sample-controller example's controller (`examples/sample-controller`), which `outage` and
/// `sample_controller` run on a Manager.
#[path = "../../../../examples/sample-controller/src/controller.rs"]
#[allow(dead_code)] // what only the example's own main uses
mod example;

mod controller_builder;
mod health;
mod leader;
mod optional_cache;
mod outage;
mod sample_controller;
mod shared_watches;
mod watched_namespaces;
