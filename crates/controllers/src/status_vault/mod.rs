//! Status vault: keeps the status of covered objects (any kind with a status subresource, named
//! by `StatusBackupPolicy` objects) in a vault outside the cluster, continuously, and writes it
//! back when an object is re-created with an empty status — before Vigil's own controllers act on
//! it ([`restore::StatusRestorer::ensure_restored`]).

pub mod capture;
pub mod controller;
pub mod decide;
pub mod model;
pub mod queue;
pub mod restore;

pub use controller::{NAME, PERMISSIONS, StatusVault, run};
pub use restore::{RestoreOutcome, StatusRestorer};
