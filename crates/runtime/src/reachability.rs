//! Knowing at once when the API server answers again after an outage, or serves again after a
//! storm of refusals.
//!
//! A watch that fails backs off (kube-runtime's default: 0.8 s doubling to 30 s, plus up to as
//! much again of jitter), so after an 8 s outage the next attempt may come 10 s after the server
//! is back. Shortening the back-off would hammer a server that is down or overloaded, once per
//! watch. Instead a failing watch (and every controller, for the objects whose reconciles failed
//! meanwhile) waits on a generation number alongside its back-off, bumped by cheap probes:
//!
//! - **no answer** (connection refused, reset, timed out): one probe per process asks the server
//!   for `/version` every [`PROBE_INTERVAL`] — the cheapest request there is, served without
//!   authentication by every API server. Its first answer bumps the generation.
//! - **an answer that says "not now"** (a 5xx, a 429): `/version` cannot tell when that ends,
//!   since it answers throughout (an overloaded server or a failing etcd still serves it). So the
//!   watch probes with a request of the kind that failed, of its own resource: a LIST of one
//!   object (limit=1, a quorum read that touches one object, not a whole list), and for a failed
//!   WATCH a WATCH from that LIST's resourceVersion (it sends nothing; it is dropped once the
//!   server accepts it). The first success ends the watch's wait and bumps the generation, so
//!   the other watches and failed reconciles retry too. These probes are paced per watch (its
//!   back-off delay ÷ [`PROBES_PER_BACKOFF`], at least [`PROBE_INTERVAL`], with jitter) and per
//!   process ([`Reachability::probe_turn`]: one probe per [`PROBE_INTERVAL`] however many watches
//!   fail, none before a 429's `Retry-After` has passed).
//!
//! A **410 Gone** (the resourceVersion a watch resumes from is no longer in the server's window)
//! is not a failure to wait out: the server serves, and the watcher relists on its own. It is
//! what every resumed watch gets from a kube-apiserver that has just restarted, whose watch
//! cache starts afresh at etcd's current revision ("too old resource version: 372 (383)"); a
//! watch that backed off on it waited out the back-off the outage had grown — 8 to 23 s after
//! `/readyz` was `ok`. So a watch relists at once after a 410, and backs off only if the relist
//! fails too.
//!
//! A **403 Forbidden** is probed like a refusal: a restarted kube-apiserver answers a service
//! account's requests 403 for up to 0.35 s, until its RBAC caches have synced (seen in 3 of 7
//! restarts of 1.28; `system:masters` never is), and a watch that backed off on it waited out
//! the grown back-off. A lasting 403 (a missing permission) then costs one cheap probe per watch
//! every few seconds, and the watch recovers as soon as the permission is granted.
//!
//! Other answers (404, an object that does not decode) end no wait early: retrying sooner would
//! get the same answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::time::Instant;

/// How often the `/version` probe asks while the server does not answer, and the least time
/// between two probes of refused requests in one process.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// A watch backing off after refusals probes at most this many times per back-off delay (every
/// 0.8 s delay × 2ⁿ ÷ 16, but never more often than [`PROBE_INTERVAL`]): the probes' rate falls as
/// the back-off's does, to one every 2–4 s per watch at the back-off's 30 s ceiling.
pub const PROBES_PER_BACKOFF: u32 = 16;

/// The longest `Retry-After` honoured: a server asking for more is retried at the back-off's own
/// ceiling anyway.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// What a failed request's outcome says about when to retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// No answer: the server is away (connection refused, reset, timed out).
    Unanswered,
    /// An answer saying "not now": a 5xx, or a 429 with the `Retry-After` it carries.
    Refused {
        /// How long a 429 asked to wait, if it said. (A 5xx's `Retry-After` is
        /// kube-apiserver's fixed start-up or shutdown hint, not a measure of load: probing
        /// sooner, at this module's pace, is what ends the wait as soon as it serves.)
        retry_after: Option<Duration>,
    },
    /// 410 Gone: the server serves, but no longer has the resourceVersion asked for; a watch
    /// relists (see the module's documentation).
    Expired,
    /// Any other answer: retrying sooner would get it again.
    Other,
}

impl Failure {
    /// Classifies a client error.
    pub fn of(error: &kube::Error) -> Self {
        match error {
            kube::Error::Api(status) => Self::of_status(status),
            // The server answered with something that does not decode: an answer.
            kube::Error::SerdeError(_) => Self::Other,
            _ => Self::Unanswered,
        }
    }

    /// Classifies an API status.
    pub fn of_status(status: &kube::core::Status) -> Self {
        match status.code {
            429 => Self::Refused {
                retry_after: status
                    .details
                    .as_ref()
                    .map(|d| d.retry_after_seconds)
                    .filter(|s| *s > 0)
                    .map(|s| Duration::from_secs(u64::from(s)).min(MAX_RETRY_AFTER)),
            },
            // 403: see the module's documentation (RBAC not yet synced after a restart).
            403 | 500..=599 => Self::Refused { retry_after: None },
            410 => Self::Expired,
            _ => Self::Other,
        }
    }

    /// Classifies a watcher error.
    pub fn of_watch(error: &kube::runtime::watcher::Error) -> Self {
        use kube::runtime::watcher::Error;
        match error {
            Error::InitialListFailed(e) | Error::WatchStartFailed(e) | Error::WatchFailed(e) => {
                Self::of(e)
            }
            Error::WatchError(status) => Self::of_status(status),
            Error::NoResourceVersion => Self::Other,
        }
    }
}

/// How long a watch waits between two probes while its back-off delay is `delay`, before jitter.
pub fn probe_interval(delay: Duration) -> Duration {
    (delay / PROBES_PER_BACKOFF).max(PROBE_INTERVAL)
}

/// `interval` with ±20 % of jitter, so that watches failing together do not probe in step.
pub fn jittered(interval: Duration) -> Duration {
    interval.mul_f64(0.8 + 0.4 * rand::random::<f64>())
}

/// A probe asked for at `now` while the next free turn is `next`: its turn, and the next free
/// turn after it (turns go [`PROBE_INTERVAL`] apart, in order of asking).
fn take_turn(next: Instant, now: Instant) -> (Instant, Instant) {
    let turn = next.max(now);
    (turn, turn + PROBE_INTERVAL)
}

/// The next free turn once the server asked, at `now`, to wait `wait`: not before it has passed
/// (at most [`MAX_RETRY_AFTER`]), nor before a turn already handed out.
fn not_before_retry_after(next: Instant, now: Instant, wait: Duration) -> Instant {
    next.max(now + wait.min(MAX_RETRY_AFTER))
}

/// The probe and its signal. Cheap to clone; clones share them.
#[derive(Clone)]
pub struct Reachability {
    client: Client,
    probing: Arc<AtomicBool>,
    /// Bumped each time the server answers (or serves) again after a failure.
    recovered: Arc<watch::Sender<u64>>,
    /// When this process's next probe of a refused request may go.
    next_probe: Arc<Mutex<Instant>>,
}

impl std::fmt::Debug for Reachability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reachability")
            .field("probing", &self.probing.load(Ordering::Relaxed))
            .field("recoveries", &*self.recovered.borrow())
            .finish()
    }
}

impl Reachability {
    /// Probes the API server of `client` when asked (see [`Reachability::unreachable`]).
    pub fn new(client: Client) -> Self {
        Self {
            client,
            probing: Arc::default(),
            recovered: Arc::new(watch::channel(0).0),
            next_probe: Arc::new(Mutex::new(Instant::now())),
        }
    }

    /// A receiver that changes each time the server answers again after [`Self::unreachable`],
    /// or serves again after refusals ([`Self::serves_again`]).
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.recovered.subscribe()
    }

    /// Waits for this process's next turn to probe a refused request: probes go at least
    /// [`PROBE_INTERVAL`] apart however many watches fail, and none before a `Retry-After`
    /// ([`Self::retry_after`]) has passed. Turns are handed out in order of asking.
    pub async fn probe_turn(&self) {
        let turn = {
            let mut next = self
                .next_probe
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            let (turn, after) = take_turn(*next, Instant::now());
            *next = after;
            turn
        };
        tokio::time::sleep_until(turn).await;
    }

    /// The server asked to wait `wait` (a 429's `Retry-After`, at most [`MAX_RETRY_AFTER`]):
    /// no probe goes before.
    pub fn retry_after(&self, wait: Duration) {
        let mut next = self
            .next_probe
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *next = not_before_retry_after(*next, Instant::now(), wait);
    }

    /// A probe of a refused request succeeded: every watch still backing off, and every failed
    /// reconcile, retries now.
    pub fn serves_again(&self) {
        tracing::info!("the API server serves again: watches and failed reconciles retry now");
        self.recovered.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// A request went unanswered: probe until the server answers (one probe at a time).
    pub fn unreachable(&self) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
        tracing::warn!(
            "the API server does not answer: watches and reconciles wait, probing it every {PROBE_INTERVAL:?}"
        );
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(PROBE_INTERVAL).await;
                match this.client.apiserver_version().await {
                    Ok(_) => break,
                    // Any API status is an answer too: the server is there.
                    Err(kube::Error::Api(_)) => break,
                    Err(_) => {}
                }
                if this.recovered.is_closed() && Arc::strong_count(&this.probing) <= 1 {
                    // Nobody can hear the answer any more.
                    return;
                }
            }
            tracing::info!("the API server answers again: watches and failed reconciles retry now");
            this.probing.store(false, Ordering::Release);
            this.recovered.send_modify(|n| *n = n.wrapping_add(1));
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unanswered(error: &kube::runtime::watcher::Error) -> bool {
        Failure::of_watch(error) == Failure::Unanswered
    }
    use kube::runtime::watcher::Error;

    #[test]
    fn a_410_is_a_relist_not_a_failure() {
        // What kube-apiserver 1.28 sends a watch resumed across its restart.
        let expired = kube::core::Status::failure("too old resource version: 372 (383)", "Expired")
            .with_code(410);
        assert_eq!(
            Failure::of_watch(&Error::WatchError(Box::new(expired.clone()))),
            Failure::Expired
        );
        assert_eq!(
            Failure::of_watch(&Error::WatchStartFailed(kube::Error::Api(Box::new(
                expired
            )))),
            Failure::Expired
        );
    }

    #[test]
    fn only_unanswered_requests_count_as_an_outage() {
        let status = kube::core::Status::failure("gone", "Expired").with_code(410);
        assert!(!unanswered(&Error::WatchError(Box::new(status.clone()))));
        assert!(!unanswered(&Error::InitialListFailed(kube::Error::Api(
            Box::new(status)
        ))));
        assert!(unanswered(&Error::WatchStartFailed(kube::Error::Service(
            "connection refused".into()
        ))));
    }

    #[test]
    fn refusals_are_5xx_and_429_with_their_retry_after() {
        let mut throttled =
            kube::core::Status::failure("slow down", "TooManyRequests").with_code(429);
        throttled.details = Some(
            serde_json::from_value(serde_json::json!({"retryAfterSeconds": 2})).expect("details"),
        );
        assert_eq!(
            Failure::of_watch(&Error::WatchStartFailed(kube::Error::Api(Box::new(
                throttled
            )))),
            Failure::Refused {
                retry_after: Some(Duration::from_secs(2))
            }
        );
        let storm = kube::core::Status::failure("unavailable", "ServiceUnavailable").with_code(503);
        assert_eq!(
            Failure::of_watch(&Error::InitialListFailed(kube::Error::Api(Box::new(storm)))),
            Failure::Refused { retry_after: None }
        );
        // kube-apiserver starting: a fixed Retry-After that says nothing of when it will serve.
        let mut starting = kube::core::Status::failure(
            "the request has been made before all known HTTP paths have been installed, please try again",
            "ServiceUnavailable",
        )
        .with_code(503);
        starting.details = Some(
            serde_json::from_value(serde_json::json!({"retryAfterSeconds": 5})).expect("details"),
        );
        assert_eq!(
            Failure::of_status(&starting),
            Failure::Refused { retry_after: None }
        );
        let forbidden = kube::core::Status::failure("no", "Forbidden").with_code(403);
        assert_eq!(
            Failure::of_status(&forbidden),
            Failure::Refused { retry_after: None },
            "RBAC not yet synced after a restart"
        );
        let missing = kube::core::Status::failure("no such kind", "NotFound").with_code(404);
        assert_eq!(Failure::of_status(&missing), Failure::Other);
    }

    #[test]
    fn probes_slow_down_with_the_back_off() {
        assert_eq!(probe_interval(Duration::from_millis(800)), PROBE_INTERVAL);
        assert_eq!(
            probe_interval(Duration::from_secs(8)),
            Duration::from_millis(500)
        );
        assert_eq!(
            probe_interval(Duration::from_secs(32)),
            Duration::from_secs(2)
        );
        for _ in 0..100 {
            let j = jittered(Duration::from_secs(1));
            assert!(
                j >= Duration::from_millis(800) && j <= Duration::from_millis(1200),
                "{j:?}"
            );
        }
    }

    #[test]
    fn probe_turns_are_paced_process_wide_and_wait_out_retry_after() {
        let start = Instant::now();
        let mut next = start;
        let turns: Vec<Duration> = (0..4)
            .map(|_| {
                let (turn, after) = take_turn(next, start);
                next = after;
                turn - start
            })
            .collect();
        assert_eq!(
            turns,
            [0, 1, 2, 3].map(|i| PROBE_INTERVAL * i),
            "one probe per interval, in order of asking"
        );

        let asked = start + PROBE_INTERVAL * 4;
        next = not_before_retry_after(next, asked, Duration::from_secs(5));
        let (turn, _) = take_turn(next, asked);
        assert_eq!(
            turn - asked,
            Duration::from_secs(5),
            "none before Retry-After"
        );
        let far = not_before_retry_after(next, asked, Duration::from_secs(3600));
        assert_eq!(
            far - asked,
            MAX_RETRY_AFTER,
            "a Retry-After is waited at most MAX_RETRY_AFTER"
        );
        assert_eq!(
            not_before_retry_after(far, asked, Duration::from_secs(1)),
            far,
            "a shorter Retry-After never brings a turn forward"
        );
    }
}
