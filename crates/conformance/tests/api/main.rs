//! Black-box conformance suite for the Kubernetes API: every test talks to a `kube::Client` (or
//! raw HTTP) and runs unchanged on the sandbox and, via `VIGIL_TEST_KUBECONFIG`, on a real
//! kube-apiserver. Tests that need sandbox-only powers call `require_sandbox!` and skip elsewhere.

mod support;

mod cel;
mod cluster;
mod crd;
mod crud;
mod discovery;
mod errors;
mod faults;
mod finalizers;
mod kubectl;
mod lifecycle;
mod list;
mod patch;
mod protobuf;
mod robustness;
mod status;
mod watch;
mod workloads;
