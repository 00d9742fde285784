//! Controller plumbing shared by every Vigil controller: leader election, per-key backoff,
//! metrics, health probes, conditions, events and graceful shutdown. It knows no controller.
//! The pieces arrive with the operator-runtime issue; the crate exists now so the workspace
//! shows the architecture's boundaries.
