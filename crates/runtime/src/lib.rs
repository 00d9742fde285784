//! A runtime for Kubernetes controllers on top of kube-runtime: what kube-rs lacks for a
//! production operator. It knows no controller.
//!
//! Start at [`Manager`] (client, caches, metrics, probes, election, Events, shutdown), [`Cache`]
//! (a typed cache: `runtime.cache::<K>()…build()`) and [`ControllerBuilder`]
//! (`runtime.controller(name, &cache).owns(&other)…run(reconcile, context)`);
//! `docs/runtime.md` walks through a whole controller, `examples/sample_controller.rs` is one.
//!
//! | module | job |
//! |---|---|
//! | [`manager`] | the Manager, and the [`manager::Runtime`] handle every controller gets |
//! | [`controller`] | the controller builder: triggers, queue metrics, guarded reconcile, error policy, quarantine |
//! | [`finalizer`] | cleanup before deletion, through kube-runtime's finalizer helper |
//! | [`status`] | status writes: only what differs, clearing what the new status leaves out |
//! | [`client`] | the API client with client-go's request metrics |
//! | [`reachability`] | knowing at once when the API server answers, or serves, again after an outage or a storm of refusals |
//! | [`cache`] | caches as typed values: store, index, sync state and trigger feed, on shared watches |
//! | [`backoff`] | per-key exponential backoff with jitter, reset on success, and quarantine |
//! | [`conditions`] | status conditions by the API conventions |
//! | [`events`] | Kubernetes Events, recorded best effort |
//! | [`leader`] | leader election on a `coordination.k8s.io/v1` Lease |
//! | [`metrics`] | Prometheus metrics with controller-runtime's names |
//! | [`reconcile`] | what every reconcile does around its work: leader only, synced caches, metrics, backoff reset |
//! | [`retry`] | retrying inside the client only what the server asked to retry (`Retry-After`), as client-go does |
//! | [`queue`] | work-queue metrics (adds, depth, wait) for a kube-runtime `Controller` |
//! | [`health`] | the HTTP server for `/metrics`, `/healthz` and `/readyz` |
//! | [`compact`] | a cache of compact per-object entries, for the kinds a cluster has by the ten thousand |
//! | [`index`] | secondary indexes (by label, by owner…) over reflector caches |
//! | [`namespaces`] | one watch per namespace, merged for one reflector |
//! | [`shared`] | one API watch per resource and scope, shared by every cache of that kind |
//! | [`signals`] | SIGTERM and SIGINT, listened for from the process's start, so no signal meets the default action |

#![warn(missing_docs)]

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
pub mod namespaces;
pub mod queue;
pub mod reachability;
pub mod reconcile;
pub mod retry;
pub mod shared;
pub mod signals;
pub mod status;

pub use backoff::BackoffPolicy;
pub use cache::{Cache, CacheBuilder, CompactCache, Synced};
pub use controller::ControllerBuilder;
pub use events::EventNote;
pub use leader::{LeaderElectionConfig, Leadership};
pub use manager::{Manager, ManagerBuilder, Runtime};
pub use metrics::Metrics;
pub use signals::ShutdownSignals;
