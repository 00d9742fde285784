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
    CLUSTERS,
    CLUSTER_STATUS,
    SECRETS,
    crate::permissions::RECORD_EVENTS,
];

/// What the installed operator is granted: the controller's own permissions and those of the
/// built-in `hosted` provider, which runs control planes as pods of this cluster (its calls
/// are in `vigil_provider::hosted::store`).
pub const INSTALLED_PERMISSIONS: &[crate::permissions::Permission] = &[
    CLUSTERS,
    CLUSTER_STATUS,
    SECRETS,
    crate::permissions::RECORD_EVENTS,
    // The record: read, created, merged, deleted; found by label in any namespace.
    crate::permissions::Permission {
        group: "",
        resources: &["configmaps"],
        verbs: &["get", "list", "create", "patch", "delete"],
    },
    // The Services and PKI Secrets of a control plane: listed by label, written by server-side
    // apply (`create` too, for objects that do not exist yet), deleted by label. (The Secrets'
    // list, create and patch are the controller's already.)
    crate::permissions::Permission {
        group: "",
        resources: &["services"],
        verbs: &["list", "create", "patch", "delete"],
    },
    crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["delete"],
    },
    crate::permissions::Permission {
        group: "apps",
        resources: &["deployments", "statefulsets"],
        verbs: &["list", "create", "patch", "delete"],
    },
    crate::permissions::Permission {
        group: "policy",
        resources: &["poddisruptionbudgets"],
        verbs: &["list", "create", "patch", "delete"],
    },
    // Pods and claims left after their workloads: read for the state, deleted with the cluster.
    crate::permissions::Permission {
        group: "",
        resources: &["pods", "persistentvolumeclaims"],
        verbs: &["list", "delete"],
    },
    // A NodePort API server is reached on the nodes' addresses.
    crate::permissions::Permission {
        group: "",
        resources: &["nodes"],
        verbs: &["list"],
    },
];

// Watched through a reflector; patched to add and remove the finalizer.
const CLUSTERS: crate::permissions::Permission = crate::permissions::Permission {
    group: "vigil.dev",
    resources: &["kubernetesclusters"],
    verbs: &["list", "watch", "patch"],
};
const CLUSTER_STATUS: crate::permissions::Permission = crate::permissions::Permission {
    group: "vigil.dev",
    resources: &["kubernetesclusters/status"],
    verbs: &["patch"],
};
// Kubeconfig Secrets: watched through a label selector (RBAC cannot narrow by label, hence
// list/watch), written by server-side apply (which needs `create` too for a Secret that does
// not exist yet: kube-apiserver authorizes both); deleted by the garbage collector through
// their ownerReference.
const SECRETS: crate::permissions::Permission = crate::permissions::Permission {
    group: "",
    resources: &["secrets"],
    verbs: &["list", "watch", "create", "patch"],
};
