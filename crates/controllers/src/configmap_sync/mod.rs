//! ConfigMapSync: keeps copies of one ConfigMap in other namespaces — updated when the source
//! changes, restored when edited or deleted, removed when no longer wanted — with the consent of
//! the source and of every destination namespace (see `consent`).

mod cache;
pub mod consent;
pub mod controller;
pub mod decide;
pub mod model;
pub mod registration;

pub use controller::{NAME, PERMISSIONS};
