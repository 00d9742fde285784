//! What the benchmarks share: the `vigil` binary and its `sandbox` and `run` children, what a
//! process uses, a bare HTTP GET, the one Prometheus text parser, temp files, percentiles.

pub mod binary;
pub mod client;
pub mod duration;
pub mod fmt;
pub mod http;
pub mod kinds;
pub mod metrics;
pub mod node;
pub mod paired;
pub mod phase;
pub mod probe;
pub mod real_plane;
pub mod record;
pub mod sandbox;
pub mod stats;
pub mod temp;
pub mod usage;
pub mod vigil;
