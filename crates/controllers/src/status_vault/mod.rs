//! Status vault: keeps the status of covered objects (any kind with a status subresource, named
//! by `StatusBackupPolicy` objects) in a vault outside the cluster, continuously, and writes it
//! back when an object is re-created with an empty status — before Vigil's own controllers act on
//! it ([`restore::StatusRestorer::ensure_restored`]).
//!
//! Modules depend one way, from the pure to the running: [`model`] and [`decide`] (no I/O);
//! the state each part owns — [`scope`] (policies, namespaces), [`kinds`] (watched objects),
//! [`backends`] (open vaults and their health), [`queue`] (captures waiting for a backend);
//! [`restore`] (reads the vault, writes a status back); [`capture`] (kind watches and capture
//! workers, handing empty objects to the restore); [`controller`] (wires them, runs the kind
//! watches as policies change, writes the policies' status).

pub mod backends;
pub mod capture;
pub mod controller;
pub mod decide;
pub mod discovery;
pub mod kinds;
pub mod model;
pub mod queue;
pub mod registration;
pub mod restore;
pub mod scope;

pub use controller::{NAME, PERMISSIONS, StatusVault};
pub use restore::{RestoreOutcome, StatusRestorer};
