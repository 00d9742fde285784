//! The sub-second phase of a run's trigger. The kubelet relists its containers once a second
//! (the generic PLEG), so where in that second a container dies or starts decides when the API
//! hears of it: up to a second later. Measured on the node, a Deployment's replacement in
//! case (a) was seen running 0.9 s or 1.5 s after the trigger depending on that phase alone,
//! and the later one missed kube-proxy's sync burst: a whole second more of failures. Runs of
//! two modes compared with each other must meet the same phase, or the comparison measures the
//! phase: every mode's run `i` is triggered at the same fraction of a wall-clock second (the
//! relist keeps its phase to within its own duration, a few ms a second, between the runs of
//! one round), and the runs spread their phases evenly over the second.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

const SECOND_NS: u64 = 1_000_000_000;

/// The phase of run `run` (0-based) within the wall-clock second: the golden-ratio sequence,
/// which spreads any number of runs evenly (0, 618, 236, 854, 472 ms…).
pub(crate) fn phase_of(run: usize) -> Duration {
    const GOLDEN_NS: u64 = 618_033_989;
    let ns = (run as u64).wrapping_mul(GOLDEN_NS) % SECOND_NS;
    Duration::from_nanos(ns)
}

/// How long from `now_ns` (nanoseconds into the current second) until the second is at `phase`.
fn until(now_ns: u64, phase: Duration) -> Duration {
    let target = u64::try_from(phase.as_nanos()).unwrap_or(0) % SECOND_NS;
    Duration::from_nanos((target + SECOND_NS - now_ns % SECOND_NS) % SECOND_NS)
}

/// Sleeps until the wall clock is at `phase` within its second (at most a second).
pub(crate) async fn wait_for_phase(phase: Duration) {
    let now_ns = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    tokio::time::sleep(until(now_ns, phase)).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_spread_over_the_second() {
        let ms: Vec<u128> = (0..5).map(|r| phase_of(r).as_millis()).collect();
        assert_eq!(ms, [0, 618, 236, 854, 472]);
    }

    #[test]
    fn the_wait_reaches_the_phase_within_a_second() {
        let ms = Duration::from_millis;
        assert_eq!(until(100_000_000, ms(300)), ms(200));
        assert_eq!(until(900_000_000, ms(300)), ms(400));
        assert_eq!(until(300_000_000, ms(300)), Duration::ZERO);
    }
}
