//! The commands of `vigil`: the operator (`run`), the demo, the standalone sandbox, the install
//! manifests, the storage migration of an upgrade and the status vault's command line.

pub mod chart;
pub mod demo;
pub mod manifests;
pub mod migrate_storage;
pub mod run;
pub mod sandbox;
pub mod status;
