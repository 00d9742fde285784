//! The generic registry: the served kinds (built-in table and CRDs), the store of objects and
//! its event log, and the REST semantics of writes (create, update, patch, delete), with the
//! defaults and validation of built-in kinds and CRDs and the conversions between versions.

pub mod builtin;
pub mod convert;
pub mod crd;
pub mod meta;
pub mod ops;
pub mod resources;
pub mod store;
