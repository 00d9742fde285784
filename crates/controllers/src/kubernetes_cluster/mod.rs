//! KubernetesCluster: provisions clusters through a provider plug-in ([`vigil_provider`]), never
//! twice and never lost. A pure [`decide`] step (one provider request at most per pass, the
//! status, the Events) and a thin apply that observes the provider, makes the decided request,
//! keeps the kubeconfig Secret and holds a finalizer until the cluster is gone.
//!
//! Before acting on an object whose status is empty, the controller waits for the status
//! vault's restore ([`crate::status_vault::StatusRestorer::ensure_restored`]): an object
//! re-applied from git gets its `clusterID` back and adopts its cluster instead of creating one.
//!
//! Files: `model.rs` (settings, the view of an object, plans), `decide.rs` (the pure
//! decisions, tested in `decide/tests.rs`), `observe.rs` (cache look-ups, the Secret trigger
//! mapper, the provider's report), `reconcile.rs` (one pass: restore, finalizer, observe,
//! decide, request, decide on the answer), `apply.rs` (the writes), `metrics.rs` (the
//! controller's own metrics), `controller.rs` (the wiring: caches, controller, context), `registration.rs` (its entry in
//! the registry: flags, CRD, permissions, how it is added).

mod apply;
pub mod controller;
pub mod decide;
mod metrics;
pub mod model;
mod observe;
mod reconcile;
pub mod registration;

pub use controller::{Config, run_on};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "kubernetescluster";

/// What this controller's code does with the API (kept in step with the calls it makes).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["kubernetesclusters"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["kubernetesclusters/status"],
        verbs: &["patch"],
    },
    // Kubeconfig Secrets: watched through a label selector (RBAC cannot narrow by label, hence
    // list/watch), written by server-side apply (which needs `create` too for a Secret that
    // does not exist yet: kube-apiserver authorizes both); deleted by the garbage collector
    // through their ownerReference.
    crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["list", "watch", "create", "patch"],
    },
    crate::permissions::RECORD_EVENTS,
];
