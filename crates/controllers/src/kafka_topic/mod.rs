//! KafkaTopic: Kafka topics declared as `Topic` objects (`kafka.vigil.dev`), created, kept as
//! declared and deleted in a real broker through the Kafka admin protocol (`vigil-kafka`).
//!
//! Crash safety: the finalizer is added before anything is created, and `status.creating` is
//! recorded before the create request goes out, so a topic found after a restart is known to be
//! Vigil's; the finalizer goes only once the broker confirms the topic is gone.
//!
//! Files:
//! - `model.rs`: settings and errors;
//! - `decide.rs`: the pure decision (the views it reads, the broker writes, status and Events it
//!   returns);
//! - `observe.rs`: what is read before deciding — the Topic's view, credentials from Secrets, the
//!   broker's description of the topic — the admin clients, and the drift poll that triggers
//!   reconciles when Kafka changes behind Vigil's back;
//! - `reconcile.rs`: the reconcile: the finalizer, observe, decide, apply, look again, the
//!   status and Events;
//! - `apply.rs`: the writes: broker operations, the status;
//! - `metrics.rs`: `vigil_kafka_*` series;
//! - `controller.rs`: the wiring (cache, builder, drift poll);
//! - `registration.rs`: its entry in the registry (flags, CRD, permissions, how it is added).

mod apply;
pub mod controller;
pub mod decide;
mod metrics;
pub mod model;
mod observe;
mod reconcile;
pub mod registration;

pub use controller::run_on;

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "kafkatopic";

/// What this controller's code does with the API (kept in step with the calls in `apply.rs` and
/// `observe.rs`).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "kafka.vigil.dev",
        resources: &["topics"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "kafka.vigil.dev",
        resources: &["topics/status"],
        verbs: &["patch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// What reading TLS CAs and SASL credentials from Secrets adds (`vigil manifests
/// --kafka-topic-secrets` grants it): without it a Topic naming a Secret reports
/// `CredentialsUnavailable` (forbidden) and is retried.
pub const SECRET_PERMISSIONS: &[crate::permissions::Permission] =
    &[crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["get"],
    }];
