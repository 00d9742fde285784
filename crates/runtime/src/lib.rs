//! A runtime for Kubernetes controllers on top of kube-runtime: what kube-rs lacks for a
//! production operator. It knows no controller.
//!
//! Start at [`Manager`] (client, caches, metrics, probes, election, Events, shutdown), [`Cache`]
//! (a typed cache: `runtime.cache::<K>()…build()`) and [`ControllerBuilder`]
//! (`runtime.controller(&cache).owns(&other)…run(reconcile, context)`);
//! `docs/runtime.md` walks through a whole controller, `examples/sample-controller` (an operator outside this workspace) is one.
//!
//! | module | job |
//! |---|---|
//! | [`manager`] | the Manager, and the [`manager::Runtime`] handle every controller gets |
//! | [`controller`] | the controller builder: triggers, queue metrics, guarded reconcile, error policy, quarantine |
//! | [`finalizer`] | cleanup before deletion, through kube-runtime's finalizer helper |
//! | [`cache`] | caches as typed values: store, index, sync state and trigger feed, on shared watches |
//! | [`compact`] | a cache of compact per-object entries, for the kinds a cluster has by the ten thousand |
//! | [`index`] | secondary indexes (by label, by owner…) over reflector caches |
//! | [`watches`] | one API watch per resource and scope, shared by every cache of that kind |
//! | [`conditions`] | status conditions by the API conventions |
//! | [`events`] | Kubernetes Events, recorded best effort |
//! | [`backoff`] | per-key exponential backoff with jitter, reset on success, and quarantine |
//! | [`leader`] | leader election on a `coordination.k8s.io/v1` Lease |
//! | [`client`] | the API client with client-go's request metrics |
//! | [`metrics`] | Prometheus metrics with controller-runtime's names, and the process's |
//! | [`health`] | the HTTP server for `/metrics`, `/healthz` and `/readyz` |
//! | [`signals`] | SIGTERM and SIGINT, listened for from the process's start, so no signal meets the default action |
//!
//! Inside, not part of the interface: `reconcile_guard` (what every reconcile does around its
//! work: leader only, synced caches, metrics, backoff reset), `status` (status writes, through
//! [`Runtime::write_status`]), `reachability` (knowing at once when the API server answers
//! again after an outage), `retry` (retrying in the client what the server asked to retry),
//! `queue` (work-queue metrics), `namespaces` (one watch per namespace, merged) and `process`
//! (the `process_*` metrics).

#![deny(missing_docs)]

pub mod backoff;
pub mod cache;
pub mod client;
pub mod compact;
pub mod conditions;
pub mod controller;
pub mod events;
pub mod finalizer;
pub mod health;
pub mod index;
pub mod leader;
pub mod manager;
pub mod metrics;
mod namespaces;
mod process;
mod queue;
mod reachability;
mod reconcile_guard;
mod retry;
pub mod signals;
mod status;
pub mod watches;

pub use backoff::BackoffPolicy;
pub use cache::{Cache, CacheBuilder, CompactCache, Synced};
pub use controller::ControllerBuilder;
pub use events::EventNote;
pub use leader::{LeaderElectionConfig, Leadership};
pub use manager::{Manager, ManagerBuilder, Runtime};
pub use metrics::Metrics;
pub use signals::ShutdownSignals;
pub use watches::SharedWatches;
