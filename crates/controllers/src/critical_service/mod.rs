//! CriticalService: keeps critical Services answering. When a covered Service has no ready
//! endpoint of its own, one fallback pod from a PodTemplate answers for it (or a warm standby,
//! `spec.warmStandby`, is promoted), and goes as soon as a real endpoint is ready again.
//!
//! Files:
//! - `model.rs`: settings, the views the decision reads, the [`model::Plan`] it returns;
//! - `decide.rs`: the pure decision (no clock, no I/O), the policy top to bottom, with a page per
//!   concern under `decide/`: what one Service looks like (`look.rs`), the waits before a fallback
//!   (`replacement.rs`), a fallback's life (`lifecycle.rs`), warm standbys (`standby.rs`), the
//!   drain (`drain.rs`), Vigil's EndpointSlices of standbys (`slices.rs`), the writes gathered
//!   (`actions.rs`), the status (`status.rs`), its unit tests (`tests.rs`); with `fallback.rs` (how a fallback or standby pod is built from its template),
//!   `standby_slice.rs` (the EndpointSlice listing a standby) and `lame.rs` (which uncovered
//!   Services are lame);
//! - `cache.rs`: the shape of the lean caches (slim objects, compact entries, index keys), pods,
//!   Services, EndpointSlices and the ReplicaSets and StatefulSets whose wanted replicas say
//!   whether a deleted pod comes back;
//! - `observe.rs`: look-ups in the caches that gather a decision's inputs, and the trigger
//!   mappers;
//! - `apply.rs`: the writes a plan asks for (pods, status, Events), only what differs;
//! - `metrics.rs`: the `vigil_lame_services` gauge and its report;
//! - `reconcile.rs`: the reconcile (observe, decide, apply);
//! - `controller.rs`: the wiring (caches, builder, [`controller::run_on`]);
//! - `registration.rs`: its entry in the registry (flags, how it is added to a Manager).

use crate::permissions;

mod apply;
mod cache;
pub mod controller;
pub mod decide;
pub mod fallback;
pub mod lame;
mod metrics;
pub mod model;
mod observe;
mod reconcile;
pub mod registration;
pub mod standby_slice;

pub use apply::Error;

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "criticalservice";

/// What this controller's code does with the API (kept in step with the caches of
/// `controller.rs` and the writes of `apply.rs`).
pub const PERMISSIONS: &[permissions::Permission] = &[
    // Watched through reflectors: list + watch only.
    permissions::Permission {
        group: "mycrd.com",
        resources: &["criticalservices"],
        verbs: &["list", "watch"],
    },
    permissions::Permission {
        group: "mycrd.com",
        resources: &["criticalservices/status"],
        verbs: &["patch"],
    },
    permissions::Permission {
        group: "",
        resources: &["services", "podtemplates"],
        verbs: &["list", "watch"],
    },
    // Workloads: how many pods they want tells a pod scaled away (nothing replaces it) from
    // one that is coming back.
    permissions::Permission {
        group: "apps",
        resources: &["replicasets", "statefulsets"],
        verbs: &["list", "watch"],
    },
    // Fallback pods: created and deleted (with a uid precondition); warm standbys promoted by a
    // label patch (with a uid precondition too).
    permissions::Permission {
        group: "",
        resources: &["pods"],
        verbs: &["list", "watch", "create", "delete", "patch"],
    },
    // EndpointSlices: watched; Vigil's own slices of warm standbys written by server-side apply
    // (which needs `create` too for a slice that does not exist yet) and deleted
    // (`standby_slice.rs`).
    permissions::Permission {
        group: "discovery.k8s.io",
        resources: &["endpointslices"],
        verbs: &["list", "watch", "create", "patch", "delete"],
    },
    permissions::RECORD_EVENTS,
];
