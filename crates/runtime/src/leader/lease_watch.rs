//! A candidate's watch on its one Lease, so it sees a release the moment it happens.
//!
//! client-go's candidates only poll the Lease every retry period (2 s, plus up to 120 % jitter),
//! so even a leader that releases its Lease on SIGTERM leaves the operator leaderless for up to
//! 4.4 s on every rolling upgrade. A watch of the Lease alone (field selector `metadata.name`:
//! one object, one stream, a few bytes per renewal) tells the campaign as soon as the holder
//! clears it. The polling stays, unchanged, as the safety net: this only ever wakes the
//! campaign early, and every decision is still taken on a fresh read of the Lease.

use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{WatchEvent, WatchParams};
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use crate::backoff::BackoffPolicy;

/// The RBAC verb this needs on Leases, besides the elector's own (see `LEASE_VERBS`).
pub(super) const WATCH_VERB: &str = "watch";

/// A watch that lasted this long ended as watches do (the server's timeout, a restart): the next
/// one starts at once. A shorter one counts as a failure, to back off from.
const HEALTHY_WATCH: Duration = Duration::from_secs(1);

/// How long the server may keep one watch open (kube's and client-go's reflector default is a
/// random 5-10 min; a fixed bound is fine for a single object).
const WATCH_TIMEOUT_SECONDS: u32 = 290;

/// Restarting a watch that failed, or ended early: from half a second up to half a minute, never
/// a hot loop against a server that refuses, is down, or closes every watch at once (the
/// retry-period poll covers the gap meanwhile).
const RESTART: BackoffPolicy = BackoffPolicy {
    base: Duration::from_millis(500),
    max: Duration::from_secs(30),
    jitter: 0.2,
    quarantine_after: u32::MAX,
    quarantine_interval: Duration::from_secs(30),
};

/// What the watch last saw of the Lease.
#[derive(Debug, Clone)]
pub(super) enum Seen {
    /// The Lease as it is now.
    Present(Box<Lease>),
    /// The Lease was deleted (free: the next attempt creates it).
    Deleted,
}

/// A running watch of one Lease; dropping it stops the watch.
#[derive(Debug)]
pub(super) struct LeaseWatch {
    latest: watch::Receiver<Option<Seen>>,
    task: JoinHandle<()>,
}

impl Drop for LeaseWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl LeaseWatch {
    /// Starts watching the Lease `name`. `recovered` (see [`crate::reachability`]) cuts a
    /// restart's backoff short when the API server answers again.
    pub(super) fn spawn(
        api: Api<Lease>,
        name: &str,
        recovered: Option<watch::Receiver<u64>>,
    ) -> Self {
        let (tx, latest) = watch::channel(None);
        let task = tokio::spawn(run(api, name.to_owned(), tx, recovered).in_current_span());
        Self { latest, task }
    }

    /// Waits for the next change the watch saw and returns the Lease as it is now. Only the
    /// latest version is kept: a campaign busy with a request misses nothing it needs. Cancel
    /// safe. Never returns if the watch task is gone (the poll still runs).
    pub(super) async fn changed(&mut self) -> Seen {
        loop {
            if self.latest.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
            if let Some(seen) = self.latest.borrow_and_update().clone() {
                return seen;
            }
        }
    }
}

/// Watches until dropped: resumes from the last version seen after a watch ends, starts over
/// (from "0": the server first sends the Lease as it is) after an error, with a backoff.
async fn run(
    api: Api<Lease>,
    name: String,
    tx: watch::Sender<Option<Seen>>,
    mut recovered: Option<watch::Receiver<u64>>,
) {
    let params = WatchParams::default()
        .fields(&format!("metadata.name={name}"))
        .timeout(WATCH_TIMEOUT_SECONDS);
    let mut version = "0".to_owned();
    let mut failures: u32 = 0;
    loop {
        let started = tokio::time::Instant::now();
        let outcome = watch_once(&api, &params, &mut version, &tx).await;
        match outcome {
            Outcome::Ended if started.elapsed() >= HEALTHY_WATCH => {
                failures = 0;
                continue;
            }
            Outcome::Ended => {}
            Outcome::Failed(error) => {
                // Said once per streak: a Role without `watch` (an old RBAC) or an outage shows,
                // without a line every backoff.
                if failures == 0 {
                    tracing::warn!(%error, "cannot watch the lease; polling it only");
                } else {
                    tracing::debug!(%error, "cannot watch the lease");
                }
                version = "0".to_owned();
            }
        }
        failures = failures.saturating_add(1);
        let delay = RESTART.delay(failures, rand::random()).delay;
        if let Some(recovered) = recovered.as_mut() {
            recovered.borrow_and_update();
            tokio::select! {
                () = tokio::time::sleep(delay) => {}
                Ok(()) = recovered.changed() => {}
            }
        } else {
            tokio::time::sleep(delay).await;
        }
    }
}

/// How one watch request went.
enum Outcome {
    /// It ended normally: resume from the last version seen.
    Ended,
    /// It failed: back off, and start over from the current state.
    Failed(String),
}

/// One watch request, publishing every version of the Lease it delivers.
async fn watch_once(
    api: &Api<Lease>,
    params: &WatchParams,
    version: &mut String,
    tx: &watch::Sender<Option<Seen>>,
) -> Outcome {
    let stream = match api.watch(params, version).await {
        Ok(stream) => stream,
        Err(e) => return Outcome::Failed(e.to_string()),
    };
    let mut stream = std::pin::pin!(stream);
    while let Some(event) = stream.next().await {
        match event {
            Ok(WatchEvent::Added(lease) | WatchEvent::Modified(lease)) => {
                remember_version(version, &lease);
                tx.send_replace(Some(Seen::Present(Box::new(lease))));
            }
            Ok(WatchEvent::Deleted(lease)) => {
                remember_version(version, &lease);
                tx.send_replace(Some(Seen::Deleted));
            }
            Ok(WatchEvent::Bookmark(bookmark)) => {
                *version = bookmark.metadata.resource_version;
            }
            // 410 Gone (the version is too old) and its kin: start over from the current state.
            Ok(WatchEvent::Error(status)) => {
                return Outcome::Failed(format!("{} ({})", status.message, status.code));
            }
            Err(e) => return Outcome::Failed(e.to_string()),
        }
    }
    Outcome::Ended
}

fn remember_version(version: &mut String, lease: &Lease) {
    if let Some(v) = lease
        .metadata
        .resource_version
        .as_deref()
        .filter(|v| !v.is_empty())
    {
        v.clone_into(version);
    }
}
