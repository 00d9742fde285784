//! KafkaTopic: Kafka topics declared as `Topic` objects (`kafka.vigil.dev`), created, kept as
//! declared and deleted in a real broker through the Kafka admin protocol (`vigil-kafka`).
//!
//! Crash safety: the finalizer is added before anything is created, and `status.creating` is
//! recorded before the create request goes out, so a topic found after a restart is known to be
//! Vigil's; the finalizer goes only once the broker confirms the topic is gone.

pub mod controller;
pub mod decide;
pub mod registration;

pub use controller::{NAME, PERMISSIONS};
