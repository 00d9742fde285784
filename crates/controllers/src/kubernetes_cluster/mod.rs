//! KubernetesCluster: provisions clusters through a provider plug-in ([`vigil_provider`]), never
//! twice and never lost. A pure [`decide`] step (one provider request at most per pass, the
//! status, the Events) and a thin [`controller`] that observes the provider, applies the
//! decision, keeps the kubeconfig Secret and holds a finalizer until the cluster is gone.
//!
//! Before acting on an object whose status is empty, the controller waits for the status
//! vault's restore ([`crate::status_vault::StatusRestorer::ensure_restored`]): an object
//! re-applied from git gets its `clusterID` back and adopts its cluster instead of creating one.

pub mod controller;
pub mod decide;
pub mod model;
pub mod registration;

pub use controller::{NAME, PERMISSIONS, run_on};
