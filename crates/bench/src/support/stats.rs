//! Summaries of measured latencies.

use std::time::Duration;

/// The `p`th percentile (0–100) of `sorted`, nearest rank; zero when there are no samples.
pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
