//! Controller plumbing shared by every Vigil controller, on top of kube-runtime: what kube-rs
//! lacks for a production operator. It knows no controller.
//!
//! | module | job |
//! |---|---|
//! | [`cache`] | lean caches: slimmed watch streams for reflectors, kept in step with an index |
//! | [`backoff`] | per-key exponential backoff with jitter, reset on success, and quarantine |
//! | [`conditions`] | status conditions by the API conventions |
//! | [`events`] | Kubernetes Events, recorded best effort |
//! | [`leader`] | leader election on a `coordination.k8s.io/v1` Lease |
//! | [`metrics`] | Prometheus metrics with controller-runtime's names |
//! | [`reconcile`] | what every reconcile does around its work: leader only, synced caches, metrics, backoff reset |
//! | [`queue`] | work-queue metrics (adds, depth, wait) for a kube-runtime `Controller` |
//! | [`health`] | the HTTP server for `/metrics`, `/healthz` and `/readyz` |
//! | [`compact`] | a cache of compact per-object entries, for the kinds a cluster has by the ten thousand |
//! | [`index`] | secondary indexes (by label, by owner…) over reflector caches |
//! | [`namespaces`] | one watch per namespace, merged for one reflector |
//! | [`shared`] | one API watch per resource and scope, shared by every cache of that kind |

pub mod backoff;
pub mod cache;
pub mod compact;
pub mod conditions;
pub mod events;
pub mod health;
pub mod index;
pub mod leader;
pub mod metrics;
pub mod namespaces;
pub mod queue;
pub mod reconcile;
pub mod shared;
