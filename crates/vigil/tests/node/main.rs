//! The `vigil` crate's tests that need a real node (`../shared/kube/node-up.sh`): Vigil's image and
//! chart on a kubelet, containerd and kube-proxy. CI's stage 3 runs every crate's `node` target;
//! elsewhere each test skips itself, saying so.

#[path = "../support/mod.rs"]
mod support;

mod node_chart;
mod node_chart_upgrade;
mod node_hosted;
mod node_image;
mod node_support;
mod node_upgrade;
