//! A client of a Service, as the benches that judge Vigil by its clients see it: a new HTTP
//! connection to the ClusterIP every interval (each request on its own, so a slow one never
//! delays the next), each with a short timeout, and which pod answered (the node's web image
//! answers `pod=<POD_NAME> ip=<POD_IP>`).

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
    /// No answer within the timeout.
    Timeout,
    /// An answer that is not an HTTP 200.
    Bad,
}

impl Outcome {
    pub(crate) fn ok(&self) -> bool {
        matches!(self, Self::Answered(_))
    }

    pub(crate) fn pod(&self) -> Option<&str> {
        match self {
            Self::Answered(pod) => Some(pod),
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
                            let outcome = probe_once(addr, timeout).await;
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

/// One GET / over a new connection.
pub(crate) async fn probe_once(addr: SocketAddr, timeout: Duration) -> Outcome {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(b"GET / HTTP/1.0\r\nHost: probe\r\n\r\n")
            .await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        std::io::Result::Ok(buf)
    };
    match tokio::time::timeout(timeout, exchange).await {
        Err(_) => Outcome::Timeout,
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::ConnectionRefused => Outcome::Refused,
        Ok(Err(_)) => Outcome::Reset,
        Ok(Ok(buf)) => answered(&String::from_utf8_lossy(&buf)),
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
    }
}
