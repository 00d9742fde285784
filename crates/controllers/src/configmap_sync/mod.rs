//! ConfigMapSync: keeps copies of one ConfigMap (or Secret) in other namespaces — updated when the
//! source changes, restored when edited or deleted, removed when no longer wanted — with the
//! consent of the source and of every destination namespace (see [`consent`]). Copies cannot be
//! owned across namespaces, so a finalizer deletes them before their ConfigMapSync goes.
//!
//! Files:
//! - `model.rs`: the views the decision reads, its [`model::Plan`], settings, labels and errors;
//! - `cache.rs`: what the lean caches keep of a ConfigMap, Secret or namespace (a content hash,
//!   never the data);
//! - `consent.rs`: who may read a source and write to a namespace;
//! - `decide.rs`: the pure decision (destinations, copies to write and delete, status, Events);
//! - `observe.rs`: cache look-ups that build the decision's inputs, and the trigger mappers;
//! - `reconcile.rs`: the reconcile: the finalizer, observe, decide, apply (or clean up);
//! - `apply.rs`: the writes a plan asks for;
//! - `metrics.rs`: `vigil_configmapsync_*` series;
//! - `controller.rs`: the wiring (caches, builder, metrics);
//! - `registration.rs`: its entry in the registry (flags, CRD, permissions, how it is added).

mod apply;
mod cache;
pub mod consent;
pub mod controller;
pub mod decide;
mod metrics;
pub mod model;
mod observe;
mod reconcile;
pub mod registration;

pub use controller::run_on;

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "configmapsync";

/// What this controller's code does with the API (kept in step with the calls in `apply.rs` and
/// the caches in `controller.rs`).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "apps.bixbite.io",
        resources: &["configmapsyncs"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "apps.bixbite.io",
        resources: &["configmapsyncs/status"],
        verbs: &["patch"],
    },
    // Every ConfigMap is watched (any may be a source); a source is read with one GET when a
    // copy must be written; copies are created, replaced (PUT) and deleted (uid precondition).
    crate::permissions::Permission {
        group: "",
        resources: &["configmaps"],
        verbs: &["get", "list", "watch", "create", "update", "delete"],
    },
    crate::permissions::Permission {
        group: "",
        resources: &["namespaces"],
        verbs: &["list", "watch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// What copying Secrets adds (`--configmapsync-secrets`; `vigil manifests
/// --configmapsync-secrets` grants it): the same verbs on Secrets.
pub const SECRET_PERMISSIONS: &[crate::permissions::Permission] =
    &[crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["get", "list", "watch", "create", "update", "delete"],
    }];
