//! A client of a Service, as the benches that judge Vigil by its clients see it: a new HTTP
//! connection to the ClusterIP every interval (each request on its own, so a slow one never
//! delays the next), each with a short timeout, and which pod answered (the node's web image
//! answers `pod=<POD_NAME> ip=<POD_IP>`).
//!
//! A request not answered within the timeout has *failed* (the failure windows count it), but it
//! is kept waiting up to [`PATIENCE`] to tell a *slow* answer from a *lost* request. On a loaded
//! host a connection may wait a few hundred milliseconds for the CPU while its endpoint is
//! healthy; a request sent to a server that is gone is refused, reset, or never answered (its
//! SYN retransmissions follow the same conntrack entry to the same dead endpoint). Only the
//! latter is lost to a client that waits as long as real clients do.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::watch;
use tokio::task::JoinSet;

/// What one request got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// An HTTP 200 from this pod (the `pod=` of the body; empty if the body names none).
    Answered(String),
    /// Connection refused (no endpoint: kube-proxy rejects; or a pod whose server is gone).
    Refused,
    /// Connection reset, or closed before a full answer.
    Reset,
    /// An HTTP 200 from this pod, but after the timeout (within [`PATIENCE`]): failed for the
    /// failure window, not lost.
    Slow(String),
    /// No answer within [`PATIENCE`]: lost.
    Timeout,
    /// An answer that is not an HTTP 200.
    Bad,
}

impl Outcome {
    pub(crate) fn ok(&self) -> bool {
        matches!(self, Self::Answered(_))
    }

    /// Whether the request never got an answer: refused, reset, a bad answer, or none within
    /// [`PATIENCE`].
    pub(crate) fn lost(&self) -> bool {
        !matches!(self, Self::Answered(_) | Self::Slow(_))
    }

    /// The pod that answered, in time or late.
    pub(crate) fn pod(&self) -> Option<&str> {
        match self {
            Self::Answered(pod) | Self::Slow(pod) => Some(pod),
            _ => None,
        }
    }
}

/// One request: when it was sent and what it got.
#[derive(Debug, Clone)]
pub(crate) struct Sample {
    pub(crate) sent: Instant,
    pub(crate) outcome: Outcome,
}

/// How long a request that missed its timeout is still waited for, to tell a slow answer from a
/// lost request: long enough for one SYN retransmission (1 s) and a loaded host's stalls, short
/// enough that a run's in-flight requests finish soon after it stops.
pub(crate) const PATIENCE: Duration = Duration::from_secs(2);

/// Probes `addr` until stopped.
pub(crate) struct Prober {
    samples: Arc<Mutex<Vec<Sample>>>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Prober {
    pub(crate) fn start(addr: SocketAddr, interval: Duration, timeout: Duration) -> Self {
        let samples: Arc<Mutex<Vec<Sample>>> = Arc::default();
        let (stop, mut stopped) = watch::channel(false);
        let record = Arc::clone(&samples);
        let task = tokio::spawn(async move {
            let mut ticks = tokio::time::interval(interval);
            // A late tick is skipped, not bunched: the probe keeps its rate.
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let mut inflight = JoinSet::new();
            loop {
                tokio::select! {
                    _ = ticks.tick() => {
                        let record = Arc::clone(&record);
                        inflight.spawn(async move {
                            let sent = Instant::now();
                            let outcome = probe_once(addr, timeout, PATIENCE).await;
                            record
                                .lock()
                                .unwrap_or_else(PoisonError::into_inner)
                                .push(Sample { sent, outcome });
                        });
                    }
                    Some(_) = inflight.join_next(), if !inflight.is_empty() => {}
                    _ = stopped.changed() => break,
                }
            }
            while inflight.join_next().await.is_some() {}
        });
        Self {
            samples,
            stop,
            task,
        }
    }

    /// The samples so far, by send time.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        let mut out = self
            .samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        out.sort_by_key(|s| s.sent);
        out
    }

    /// Stops probing (requests in flight finish) and returns every sample, by send time.
    pub(crate) async fn stop(self) -> Vec<Sample> {
        let _ = self.stop.send(true);
        let Self { samples, task, .. } = self;
        let _ = task.await;
        let mut out = samples
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        out.sort_by_key(|s| s.sent);
        out
    }
}

/// One GET / over a new connection: an answer after `timeout` but within `patience` is
/// [`Outcome::Slow`].
pub(crate) async fn probe_once(addr: SocketAddr, timeout: Duration, patience: Duration) -> Outcome {
    let sent = Instant::now();
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: probe\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        std::io::Result::Ok(buf)
    };
    match tokio::time::timeout(patience.max(timeout), exchange).await {
        Err(_) => Outcome::Timeout,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Outcome::Refused,
        Ok(Err(_)) => Outcome::Reset,
        Ok(Ok(buf)) => match answered(&String::from_utf8_lossy(&buf)) {
            Outcome::Answered(pod) if sent.elapsed() > timeout => Outcome::Slow(pod),
            outcome => outcome,
        },
    }
}

/// Reads an HTTP/1.0 answer: 200 with the `pod=` of its body, or what went wrong.
fn answered(text: &str) -> Outcome {
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Outcome::Reset;
    };
    if head.split_whitespace().nth(1) != Some("200") {
        return Outcome::Bad;
    }
    let pod = body
        .split_whitespace()
        .find_map(|word| word.strip_prefix("pod="))
        .unwrap_or_default();
    Outcome::Answered(pod.to_owned())
}

/// Requests that got no answer at all (see [`Outcome::lost`]).
pub(crate) fn lost(samples: &[Sample]) -> usize {
    samples.iter().filter(|s| s.outcome.lost()).count()
}

/// Failed requests and the failure window of a run: from the first failed request to the first
/// answer after the last failed one (zero when none failed; to the last sample when none came).
pub(crate) fn failures(samples: &[Sample]) -> (usize, Duration) {
    let failed: Vec<&Sample> = samples.iter().filter(|s| !s.outcome.ok()).collect();
    let (Some(first), Some(last)) = (failed.first(), failed.last()) else {
        return (0, Duration::ZERO);
    };
    let end = samples
        .iter()
        .find(|s| s.sent > last.sent && s.outcome.ok())
        .or(samples.last())
        .map_or(last.sent, |s| s.sent);
    (failed.len(), end.saturating_duration_since(first.sent))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_name_their_pod() {
        assert_eq!(
            answered("HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\npod=web-1 ip=10.88.0.4\n"),
            Outcome::Answered("web-1".into())
        );
        assert_eq!(answered("HTTP/1.0 404 Not Found\r\n\r\n"), Outcome::Bad);
        assert_eq!(answered("HTTP/1.0 200"), Outcome::Reset);
    }

    #[test]
    fn the_window_runs_from_the_first_failure_to_the_next_answer() {
        let t0 = Instant::now();
        let at = |ms: u64, ok: bool| Sample {
            sent: t0 + Duration::from_millis(ms),
            outcome: if ok {
                Outcome::Answered("p".into())
            } else {
                Outcome::Refused
            },
        };
        let samples = [
            at(0, true),
            at(10, false),
            at(20, false),
            at(30, true),
            at(40, false),
            at(50, true),
        ];
        assert_eq!(failures(&samples), (3, Duration::from_millis(40)));
        assert_eq!(failures(&samples[..1]), (0, Duration::ZERO));
        assert_eq!(lost(&samples), 3);
    }

    #[test]
    fn a_slow_answer_fails_but_is_not_lost() {
        let t0 = Instant::now();
        let samples = [
            Sample {
                sent: t0,
                outcome: Outcome::Slow("p".into()),
            },
            Sample {
                sent: t0 + Duration::from_millis(10),
                outcome: Outcome::Timeout,
            },
        ];
        assert_eq!(failures(&samples).0, 2);
        assert_eq!(lost(&samples), 1);
        assert_eq!(samples[0].outcome.pod(), Some("p"));
    }

    /// A server on loopback that answers after `delay`.
    async fn server(delay: Duration) -> SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("address");
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let mut request = [0u8; 256];
                    let _ = stream.read(&mut request).await;
                    tokio::time::sleep(delay).await;
                    let _ = stream
                        .write_all(b"HTTP/1.0 200 OK\r\n\r\npod=web-1 ip=127.0.0.1\n")
                        .await;
                });
            }
        });
        addr
    }

    #[tokio::test]
    async fn answers_in_time_late_and_never_are_told_apart() {
        let timeout = Duration::from_millis(100);
        let patience = Duration::from_millis(600);
        let quick = server(Duration::ZERO).await;
        assert_eq!(
            probe_once(quick, timeout, patience).await,
            Outcome::Answered("web-1".into())
        );
        let slow = server(Duration::from_millis(300)).await;
        assert_eq!(
            probe_once(slow, timeout, patience).await,
            Outcome::Slow("web-1".into())
        );
        let silent = server(Duration::from_secs(60)).await;
        assert_eq!(
            probe_once(silent, timeout, patience).await,
            Outcome::Timeout
        );
        let closed = {
            let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
            listener.local_addr().expect("address")
        };
        assert_eq!(
            probe_once(closed, timeout, patience).await,
            Outcome::Refused
        );
    }
}
