//! Vigil's custom resource types. CRDs are generated from them (`CustomResourceExt::crd()`), so
//! the Rust types, the schema the API server enforces and `vigil manifests` never disagree.
//! No I/O lives here.

pub mod critical_service;

pub use critical_service::{CriticalService, CriticalServiceSpec, CriticalServiceStatus};
