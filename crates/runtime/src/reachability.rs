//! Knowing at once when the API server answers again after an outage.
//!
//! A watch that loses its server backs off (kube-runtime's default: 0.8 s doubling to 30 s), so
//! after an 8 s outage the next attempt may come 10 s after the server is back. Shortening the
//! back-off would hammer a server that is down, once per watch. Instead, while some watch fails
//! for want of an answer (connection refused, reset, timed out — not an API status, which is an
//! answer), one probe per process asks the server for `/version` every [`PROBE_INTERVAL`]: the
//! cheapest request there is, served without authentication by every API server. The first
//! answer bumps a generation number that every backing-off watch (and every controller, for the
//! objects whose reconciles failed meanwhile) waits on alongside its back-off: they retry
//! together, once, the moment the server is back — one probe during the outage, no storm.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;

/// How often the probe asks while the server does not answer.
pub const PROBE_INTERVAL: Duration = Duration::from_millis(250);

/// The probe and its signal. Cheap to clone; clones share them.
#[derive(Clone)]
pub struct Reachability {
    client: Client,
    probing: Arc<AtomicBool>,
    /// Bumped each time the server answers again after a failure.
    recovered: Arc<watch::Sender<u64>>,
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
        }
    }

    /// A receiver that changes each time the server answers again after [`Self::unreachable`].
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.recovered.subscribe()
    }

    /// A request went unanswered: probe until the server answers (one probe at a time).
    pub fn unreachable(&self) {
        if self.probing.swap(true, Ordering::AcqRel) {
            return;
        }
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

/// Whether a watch error means the server gave no answer (as opposed to an API status).
pub fn is_unanswered(error: &kube::runtime::watcher::Error) -> bool {
    use kube::runtime::watcher::Error;
    match error {
        Error::InitialListFailed(e) | Error::WatchStartFailed(e) | Error::WatchFailed(e) => {
            !matches!(e, kube::Error::Api(_) | kube::Error::SerdeError(_))
        }
        Error::WatchError(_) | Error::NoResourceVersion => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::runtime::watcher::Error;

    #[test]
    fn only_unanswered_requests_count_as_an_outage() {
        let status = kube::core::Status::failure("gone", "Expired").with_code(410);
        assert!(!is_unanswered(&Error::WatchError(Box::new(status.clone()))));
        assert!(!is_unanswered(&Error::InitialListFailed(kube::Error::Api(
            Box::new(status)
        ))));
        assert!(is_unanswered(&Error::WatchStartFailed(
            kube::Error::Service("connection refused".into())
        )));
    }
}
