//! "Never worse than no controller", judged inside one run. A run with Vigil carries its own
//! control: the real pod (the Deployment's replacement, the restarted container, the re-created
//! bare pod) comes back as it would with no controller, and from the moment the EndpointSlice
//! lists it as ready again, kube-proxy's next sync ends the outage whoever else is there. So a
//! controller that helps ends the failures before that moment (its own pod answered first) and
//! one that stays out of the way ends them with it; failures that go on well past it are the
//! controller's doing (an endpoint of its own that does not answer, a retiring pod still sent
//! connections). The outage is over at the first answer after which every request is answered
//! for [`STEADY`]; a request lost later, among steady answers, is counted apart as isolated (in
//! case (a) with bare pods such losses come with no controller too: the node's, not the
//! controller's).
//!
//! Two independent runs cannot tell this apart at one run each: the kubelet's relist phase and
//! the race between a restarted container and kube-proxy's removal of its endpoint move the
//! outage of a run with no controller by more than a second from one run to the next.

use std::time::{Duration, Instant};

use super::probe::Sample;
use super::record::SliceSeen;

/// When a real pod was back as a ready endpoint after the outage: the first slice after `t0`
/// that lists one as ready, after one (also after `t0`) that lists none. `None` when the slices
/// never showed the outage or never the return. `is_real` tells a real pod's name from Vigil's.
pub(crate) fn real_back(
    slices: &[SliceSeen],
    t0: Instant,
    is_real: impl Fn(&str) -> bool,
) -> Option<Instant> {
    let any_real = |s: &SliceSeen| s.ready.iter().any(|name| is_real(name));
    let mut after = slices.iter().filter(|s| s.at >= t0);
    after.find(|s| !any_real(s))?;
    after.find(|s| any_real(s)).map(|s| s.at)
}

/// How long clients stay without answers after `back`, and the requests lost later: the outage
/// ends with the first answer after which every request is answered for [`STEADY`]; its last
/// failure after `back` gives the duration (zero when none failed after `back`). Failures after
/// that, among steady answers, are isolated ones (counted, not the outage).
pub(crate) fn outage_past(samples: &[Sample], back: Instant) -> (Duration, usize) {
    let after: Vec<&Sample> = samples.iter().filter(|s| s.sent > back).collect();
    let steady_from = (0..after.len()).find(|&i| {
        let start = after[i].sent;
        after[i].outcome.ok()
            && after[i..]
                .iter()
                .take_while(|s| s.sent.duration_since(start) < STEADY)
                .all(|s| s.outcome.ok())
            && after
                .last()
                .is_some_and(|last| last.sent.duration_since(start) >= STEADY)
    });
    let (outage, later) = after.split_at(steady_from.unwrap_or(after.len()));
    let past = outage
        .iter()
        .filter(|s| !s.outcome.ok())
        .map(|s| s.sent.duration_since(back))
        .max()
        .unwrap_or_default();
    (past, later.iter().filter(|s| !s.outcome.ok()).count())
}

/// How long requests must all be answered for the outage to count as over.
pub(crate) const STEADY: Duration = Duration::from_millis(500);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::support::probe::Outcome;

    fn slice(t0: Instant, ms: u64, ready: &[&str]) -> SliceSeen {
        SliceSeen {
            at: t0 + Duration::from_millis(ms),
            ready: ready.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    fn is_real(name: &str) -> bool {
        !name.starts_with("fallback")
    }

    #[test]
    fn the_real_pod_is_back_when_listed_ready_after_the_outage() {
        let t0 = Instant::now();
        let slices = [
            slice(t0, 0, &["web-1"]),
            slice(t0, 700, &[]),
            slice(t0, 1500, &["fallback-x"]),
            slice(t0, 1800, &["fallback-x", "web-1"]),
        ];
        assert_eq!(
            real_back(&slices, t0, is_real),
            Some(t0 + Duration::from_millis(1800))
        );
    }

    #[test]
    fn no_return_is_read_without_an_outage_in_the_slices() {
        let t0 = Instant::now();
        // Listed before the trigger only, then never without a real pod.
        let before = t0.checked_sub(Duration::from_millis(50)).unwrap_or(t0);
        let slices = [
            SliceSeen {
                at: before,
                ready: vec![],
            },
            slice(t0, 300, &["web-1"]),
        ];
        assert_eq!(real_back(&slices, t0, is_real), None);
        // An outage that never ended.
        let slices = [slice(t0, 300, &["fallback-x"])];
        assert_eq!(real_back(&slices, t0, is_real), None);
    }

    #[test]
    fn failures_past_the_return_are_measured_from_it() {
        let t0 = Instant::now();
        let back = t0 + Duration::from_millis(1000);
        let answered = |from: u64, to: u64| {
            (from..to)
                .step_by(10)
                .map(move |ms| (ms, Outcome::Answered("web-1".into())))
        };
        let sample = |(ms, outcome): (u64, Outcome)| Sample {
            sent: t0 + Duration::from_millis(ms),
            outcome,
        };
        // Failing until 1200 ms, then steady answers: 200 ms past the return.
        let samples: Vec<Sample> = [(500, Outcome::Refused), (1100, Outcome::Refused)]
            .into_iter()
            .chain(answered(1110, 1200))
            .chain([(1200, Outcome::Refused)])
            .chain(answered(1210, 2500))
            .map(sample)
            .collect();
        assert_eq!(outage_past(&samples, back), (Duration::from_millis(200), 0));
        // None failing after the return.
        assert_eq!(outage_past(&samples[..1], back), (Duration::ZERO, 0));
        // A request lost among steady answers long after is counted apart.
        let samples: Vec<Sample> = answered(1010, 3000)
            .chain([(3000, Outcome::Timeout)])
            .chain(answered(3010, 3600))
            .map(sample)
            .collect();
        assert_eq!(outage_past(&samples, back), (Duration::ZERO, 1));
    }
}
