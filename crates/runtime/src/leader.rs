//! Leader election on a `coordination.k8s.io/v1` Lease, after client-go's `leaderelection`.
//!
//! Every replica runs a [`LeaderElector`]; at most one of them reports [`Leadership::Leading`] at
//! a time, and controllers write to the cluster only while theirs does. The protocol is
//! client-go's, so Vigil can share a Lease with (or take one over from) a Go operator:
//!
//! - **Acquire.** Read the Lease (create it if missing). If another identity holds it and it has
//!   not expired, wait `retry_period` and look again — or less: a candidate also watches the one
//!   Lease, and tries at once when the watch shows it released or deleted, or when the record it
//!   last saw expires (a leaving leader's release is taken within a request's time, not a retry
//!   period's; the watch only ever wakes the loop, every decision is taken on a fresh read).
//!   Expiry is judged by the *local* clock: a record is considered expired
//!   `leaseDurationSeconds` after this replica *saw it change*, never by comparing the remote
//!   `renewTime` with our clock, so clock skew between nodes cannot make two replicas lead.
//!   Taking the Lease is an update carrying the `resourceVersion` that was read, so of two
//!   candidates only one can win (the other gets 409 Conflict).
//! - **Renew.** The leader rewrites `renewTime` every `retry_period`. If no renewal succeeds for
//!   `renew_deadline` (measured from the moment the last successful write was *sent*), it publishes
//!   [`Leadership::Following`] and campaigns again. Because `renew_deadline < lease_duration`, it
//!   stops leading before any other replica can consider its lease expired.
//! - **Release.** [`LeaderElector::shutdown`] first publishes `Following` (so controllers stop
//!   writing), then clears `holderIdentity` and sets `leaseDurationSeconds` to 1 (client-go's
//!   `ReleaseOnCancel`), so a standby takes over as soon as its watch shows the release (at its
//!   next retry at the latest) instead of after expiry.
//!
//! ```no_run
//! # async fn demo(client: kube::Client) {
//! use vigil_runtime::leader::{LeaderElectionConfig, LeaderElector, Leadership};
//! let config = LeaderElectionConfig::new("vigil-system", "vigil", "vigil-7d9f-abc12");
//! let (elector, mut leadership) = LeaderElector::spawn(client, config);
//! // A controller waits for leadership, and stops writing as soon as it is lost.
//! let _ = leadership.wait_for(|l| *l == Leadership::Leading).await;
//! // ...
//! elector.shutdown().await;
//! # }
//! ```

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::Instrument as _;

use lease_watch::{LeaseWatch, Seen};

mod lease_watch;

/// client-go's `JitterFactor`: a candidate waits `retry_period * (1 + rand * 1.2)` between
/// attempts to acquire, so replicas started together do not hit the API server in lockstep.
const JITTER_FACTOR: f64 = 1.2;

/// What the elector does with its Lease (`coordination.k8s.io/v1` `leases`): read it, create it
/// when missing, then take, renew and release it with updates (a resourceVersion-guarded PUT);
/// a candidate watches it (field selector `metadata.name`: that one Lease) to see a release at
/// once. `vigil manifests` grants exactly these verbs.
pub const LEASE_VERBS: &[&str] = &["get", "create", "update", lease_watch::WATCH_VERB];

/// `leaseDurationSeconds` written on release: the Lease is free, and any reader that ignores the
/// empty holder still sees it expire within a second.
const RELEASED_LEASE_SECONDS: i32 = 1;

/// How one replica campaigns for a Lease.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Namespace of the Lease.
    pub namespace: String,
    /// Name of the Lease all replicas campaign for.
    pub lease_name: String,
    /// This replica's identity (pod name + random suffix is typical, see [`unique_identity`]).
    /// It must differ between replicas, or two of them would both believe they hold the Lease.
    pub identity: String,
    /// How long a Lease stays valid after its holder was last seen renewing it; what standbys
    /// wait before taking over from a leader that vanished. Default 15 s.
    pub lease_duration: Duration,
    /// How long the leader keeps leading without a successful renewal; must be shorter than
    /// `lease_duration`, so it steps down before anyone else may take over. Default 10 s.
    pub renew_deadline: Duration,
    /// Interval between renewals, and between attempts to acquire. Default 2 s.
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// A config with client-go's (and controller-runtime's) default timings: 15 s / 10 s / 2 s.
    pub fn new(
        namespace: impl Into<String>,
        lease_name: impl Into<String>,
        identity: impl Into<String>,
    ) -> Self {
        Self {
            namespace: namespace.into(),
            lease_name: lease_name.into(),
            identity: identity.into(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// Checks the rules client-go's `NewLeaderElector` enforces; the safety of the election rests
    /// on `lease_duration > renew_deadline`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.identity.is_empty() {
            return Err(ConfigError::EmptyIdentity);
        }
        if self.lease_name.is_empty() || self.namespace.is_empty() {
            return Err(ConfigError::EmptyLease);
        }
        if self.retry_period.is_zero() {
            return Err(ConfigError::ZeroRetryPeriod);
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(ConfigError::LeaseNotLongerThanDeadline {
                lease_duration: self.lease_duration,
                renew_deadline: self.renew_deadline,
            });
        }
        if self.renew_deadline <= self.retry_period.mul_f64(JITTER_FACTOR) {
            return Err(ConfigError::DeadlineTooShort {
                renew_deadline: self.renew_deadline,
                retry_period: self.retry_period,
            });
        }
        Ok(())
    }

    /// A config that is safe to campaign with: unsafe timings are shrunk (never lengthened) and
    /// an empty identity replaced by a random one, with a logged error, because either could
    /// let two replicas lead at once.
    fn sanitized(mut self) -> Self {
        if let Err(e) = self.validate() {
            tracing::error!(error = %e, "invalid leader election config; adjusting the timings");
        }
        // An empty holder reads as "free", so a replica without identity could never be seen
        // leading: every such replica would lead at once.
        if self.identity.is_empty() {
            self.identity = unique_identity(&self.lease_name);
        }
        if self.lease_duration.is_zero() {
            self.lease_duration = Duration::from_secs(15);
        }
        if self.renew_deadline.is_zero() || self.renew_deadline >= self.lease_duration {
            self.renew_deadline = self.lease_duration.mul_f64(2.0 / 3.0);
        }
        if self.retry_period.is_zero()
            || self.retry_period.mul_f64(JITTER_FACTOR) >= self.renew_deadline
        {
            self.retry_period = self.renew_deadline / 5;
        }
        self
    }
}

/// A [`LeaderElectionConfig`] that breaks one of client-go's rules.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No identity: the replica could never be seen leading.
    #[error("the leader election identity is empty")]
    EmptyIdentity,
    /// No Lease to campaign for.
    #[error("the leader election lease namespace or name is empty")]
    EmptyLease,
    /// A zero retry period would hot-loop.
    #[error("the retry period is zero")]
    ZeroRetryPeriod,
    /// A leader could lose its Lease before it notices.
    #[error("lease duration {lease_duration:?} must exceed the renew deadline {renew_deadline:?}")]
    LeaseNotLongerThanDeadline {
        /// The Lease's validity.
        lease_duration: Duration,
        /// How long a leader keeps leading without renewing.
        renew_deadline: Duration,
    },
    /// Too few renewal attempts fit before the deadline.
    #[error(
        "renew deadline {renew_deadline:?} must exceed {JITTER_FACTOR} x retry {retry_period:?}"
    )]
    DeadlineTooShort {
        /// How long a leader keeps leading without renewing.
        renew_deadline: Duration,
        /// The interval between renewals.
        retry_period: Duration,
    },
}

/// `prefix` plus a random suffix, e.g. `vigil-7d9f-x_k3v9q2mz`: unique even when two replicas
/// share a pod name (a restarted pod must not inherit the lease of its predecessor silently).
pub fn unique_identity(prefix: &str) -> String {
    const ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let suffix: String = (0..10)
        .map(|_| char::from(ALPHABET[rand::random_range(0..ALPHABET.len())]))
        .collect();
    format!("{prefix}_{suffix}")
}

/// Leadership as observed by the rest of the operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Leadership {
    /// This replica holds the Lease: its controllers may write.
    Leading,
    /// Another replica (or nobody) holds the Lease: controllers must not write.
    Following,
}

/// A running campaign for a Lease. Dropping it without [`LeaderElector::shutdown`] also ends the
/// campaign (and releases the Lease) in the background.
#[derive(Debug)]
pub struct LeaderElector {
    identity: String,
    stop: watch::Sender<bool>,
    leadership: watch::Receiver<Leadership>,
    task: JoinHandle<()>,
}

impl LeaderElector {
    /// Starts campaigning in a background task. Returns the elector (to stop and release) and a
    /// receiver that controllers watch: they write only while it reads [`Leadership::Leading`].
    /// It starts as `Following`.
    ///
    /// A config that breaks [`LeaderElectionConfig::validate`] is made safe (logged): timings are
    /// shrunk, an empty identity is replaced by a random one (see [`Self::identity`]).
    ///
    /// # Panics
    /// Outside a Tokio runtime (as `tokio::spawn` does).
    pub fn spawn(
        client: kube::Client,
        config: LeaderElectionConfig,
    ) -> (Self, watch::Receiver<Leadership>) {
        Self::spawn_with_recovery(client, config, None)
    }

    /// [`Self::spawn`], retrying a failed attempt at once (instead of after the retry period)
    /// when `recovered` changes: the API server answers, or serves, again after an outage or a
    /// storm of refusals (see `reachability`, inside the crate). A candidate that lost the Lease to a
    /// storm then leads again the moment the storm ends.
    pub fn spawn_with_recovery(
        client: kube::Client,
        config: LeaderElectionConfig,
        recovered: Option<watch::Receiver<u64>>,
    ) -> (Self, watch::Receiver<Leadership>) {
        let config = config.sanitized();
        let (leadership_tx, leadership) = watch::channel(Leadership::Following);
        let (stop, stop_rx) = watch::channel(false);
        let identity = config.identity.clone();
        let campaign = Campaign {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            leadership: leadership_tx,
            stop: stop_rx,
            recovered,
        };
        // Every log line of the campaign names the lease and this replica.
        let span = tracing::info_span!(
            "leader_election",
            lease = %format!("{}/{}", campaign.config.namespace, campaign.config.lease_name),
            identity = %campaign.config.identity,
        );
        let task = tokio::spawn(campaign.run().instrument(span));
        let elector = Self {
            identity,
            stop,
            leadership: leadership.clone(),
            task,
        };
        (elector, leadership)
    }

    /// Whether this replica leads right now (for the `leader_election_master_status` metric).
    pub fn is_leader(&self) -> bool {
        *self.leadership.borrow() == Leadership::Leading
    }

    /// The identity this replica campaigns as.
    pub fn identity(&self) -> &str {
        &self.identity
    }

    /// Another receiver of the leadership, for one more consumer.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Stops campaigning. If this replica leads, it first publishes `Following`, then releases
    /// the Lease so a standby takes over at once. Returns when the campaign task has ended; an
    /// API request in flight is finished first (bounded by the renew deadline), because
    /// abandoning a write could leave the Lease held by nobody renewing it.
    pub async fn shutdown(self) {
        // Sending fails only if the task already ended, which is what we want anyway.
        let _ = self.stop.send(true);
        if let Err(e) = self.task.await {
            tracing::error!(error = %e, "the leader election task failed");
        }
    }
}

/// Whether `me` may take the Lease now, by client-go's rule: it is free if there is no record,
/// no holder, or we hold it ourselves; otherwise it is free once its duration has passed since
/// `observed_at`, the local instant at which this replica first saw the record in its current
/// form. The duration is the record's own `leaseDurationSeconds` (what its holder promised to
/// honour), or `lease_duration` if the record lacks one.
pub fn can_acquire(
    record: Option<&LeaseSpec>,
    me: &str,
    observed_at: Instant,
    now: Instant,
    lease_duration: Duration,
) -> bool {
    let Some(record) = record else { return true };
    match holder(record) {
        None => true,
        Some(holder) if holder == me => true,
        Some(_) => now >= observed_at + record_duration(record, lease_duration),
    }
}

/// The record's holder, treating an empty identity (a released Lease) as none.
fn holder(record: &LeaseSpec) -> Option<&str> {
    record.holder_identity.as_deref().filter(|h| !h.is_empty())
}

/// The duration the record's holder declared, or `fallback` when it declared none (or nonsense).
fn record_duration(record: &LeaseSpec, fallback: Duration) -> Duration {
    match record
        .lease_duration_seconds
        .and_then(|s| u64::try_from(s).ok())
    {
        Some(seconds) if seconds > 0 => Duration::from_secs(seconds),
        _ => fallback,
    }
}

/// `leaseDurationSeconds` for a duration: rounded up, so readers never see a shorter lease than
/// the one we honour, and at least one second.
fn lease_seconds(duration: Duration) -> i32 {
    let seconds = duration
        .as_secs()
        .saturating_add(u64::from(duration.subsec_nanos() > 0));
    i32::try_from(seconds.max(1)).unwrap_or(i32::MAX)
}

/// The spec that claims (or renews) the Lease for `me`; `previous` is None when the Lease does
/// not exist yet. Renewing keeps `acquireTime` and `leaseTransitions`; taking it from anyone else
/// (nobody after a release included, as client-go does) counts a transition and restarts
/// `acquireTime`.
fn claimed_spec(
    previous: Option<&LeaseSpec>,
    me: &str,
    lease_duration: Duration,
    now: MicroTime,
) -> LeaseSpec {
    let renewing = previous.and_then(holder) == Some(me);
    let (acquire_time, lease_transitions) = match previous {
        None => (now.clone(), 0),
        Some(previous) if renewing => (
            previous.acquire_time.clone().unwrap_or_else(|| now.clone()),
            previous.lease_transitions.unwrap_or(0),
        ),
        Some(previous) => (
            now.clone(),
            previous.lease_transitions.unwrap_or(0).saturating_add(1),
        ),
    };
    LeaseSpec {
        holder_identity: Some(me.to_owned()),
        lease_duration_seconds: Some(lease_seconds(lease_duration)),
        acquire_time: Some(acquire_time),
        renew_time: Some(now),
        lease_transitions: Some(lease_transitions),
        // Coordinated leader election's fields belong to whoever set them: keep them.
        ..previous.cloned().unwrap_or_default()
    }
}

/// The spec that gives the Lease up: client-go's release record (empty holder, 1 s duration).
fn released_spec(previous: &LeaseSpec, now: MicroTime) -> LeaseSpec {
    LeaseSpec {
        holder_identity: Some(String::new()),
        lease_duration_seconds: Some(RELEASED_LEASE_SECONDS),
        acquire_time: Some(now.clone()),
        renew_time: Some(now),
        ..previous.clone()
    }
}

/// `base` stretched by a random fraction of up to `factor` (client-go's `wait.Jitter`).
fn jittered(base: Duration, factor: f64, unit: f64) -> Duration {
    base.mul_f64(1.0 + factor * unit.clamp(0.0, 1.0))
}

/// The wall-clock time written into `renewTime`/`acquireTime`. Only humans and other tools read
/// it; the election itself never compares it with a clock.
fn now_micro() -> MicroTime {
    MicroTime(k8s_openapi::jiff::Timestamp::now())
}

/// The last version of the Lease this replica read or wrote.
#[derive(Debug)]
struct Observed {
    lease: Lease,
    /// Local instant at which the spec first took its current value, as far as we saw.
    changed_at: Instant,
}

/// What one attempt to acquire or renew found.
#[derive(Debug, PartialEq, Eq)]
enum Attempt {
    /// We hold the Lease: our write succeeded.
    Held,
    /// Another identity holds an unexpired Lease.
    HeldByOther(String),
    /// The attempt failed (API error, conflict, timeout): try again later.
    Failed,
}

/// Why leading ended.
#[derive(Debug, PartialEq, Eq)]
enum LeadEnd {
    Stopped,
    SteppedDown,
}

/// The background task's state.
struct Campaign {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    observed: Option<Observed>,
    leadership: watch::Sender<Leadership>,
    stop: watch::Receiver<bool>,
    /// Changes when the API server answers or serves again (see [`LeaderElector::spawn_with_recovery`]).
    recovered: Option<watch::Receiver<u64>>,
}

impl Campaign {
    /// Campaigns, leads, and campaigns again after stepping down, until told to stop; then
    /// releases the Lease if we still hold it.
    async fn run(mut self) {
        tracing::info!("campaigning for leadership");
        while let Some(valid_until) = self.acquire().await {
            self.publish(Leadership::Leading);
            tracing::info!("became the leader");
            let end = self.lead(valid_until).await;
            // Followers first, lease second: controllers must stop writing before anyone else
            // can be handed the Lease.
            self.publish(Leadership::Following);
            if end == LeadEnd::Stopped {
                break;
            }
            tracing::warn!("stopped leading; campaigning again");
        }
        self.release().await;
    }

    /// Retries until we hold the Lease (returning until when we may lead without renewing) or
    /// are told to stop (None).
    async fn acquire(&mut self) -> Option<Instant> {
        // Only a candidate watches: a leader learns what it needs from its own renewals. The
        // watch stops when this returns.
        let mut lease_watch = LeaseWatch::spawn(
            self.api.clone(),
            &self.config.lease_name,
            self.recovered.clone(),
        );
        loop {
            if self.stop_requested() {
                return None;
            }
            let started = Instant::now();
            let valid_until = started + self.config.renew_deadline;
            self.mark_recoveries_seen();
            let attempt = self.bounded_attempt(false, valid_until).await;
            // A write that only completed after the deadline is no lease to lead on: the next
            // attempt will renew it (we hold it) before we publish anything.
            if attempt == Attempt::Held && Instant::now() < valid_until {
                return Some(valid_until);
            }
            let wait = jittered(self.config.retry_period, JITTER_FACTOR, rand::random());
            // A failure (not a Lease held by another) is retried as soon as the server is back.
            let early = attempt == Attempt::Failed;
            if !self
                .pause_for_lease(Instant::now() + wait, early, &mut lease_watch)
                .await
            {
                return None;
            }
        }
    }

    /// Renews every `retry_period` while leading; steps down when `valid_until` (the last
    /// successful write's send time + renew deadline) passes or another holder shows up.
    async fn lead(&mut self, mut valid_until: Instant) -> LeadEnd {
        let mut failed = false;
        loop {
            let next = (Instant::now() + self.config.retry_period).min(valid_until);
            if !self.pause_until_or_recovery(next, failed).await {
                return LeadEnd::Stopped;
            }
            self.mark_recoveries_seen();
            let started = Instant::now();
            if started >= valid_until {
                tracing::warn!(
                    deadline = ?self.config.renew_deadline,
                    "could not renew the lease within the renew deadline"
                );
                return LeadEnd::SteppedDown;
            }
            let attempt = self.bounded_attempt(true, valid_until).await;
            failed = attempt == Attempt::Failed;
            match attempt {
                Attempt::Held => valid_until = started + self.config.renew_deadline,
                Attempt::HeldByOther(holder) => {
                    tracing::warn!(%holder, "the lease is held by another replica");
                    return LeadEnd::SteppedDown;
                }
                // Retried after retry_period, until valid_until runs out.
                Attempt::Failed => {}
            }
        }
    }

    /// One attempt, abandoned at `deadline`: past it a leader must not rely on the answer.
    async fn bounded_attempt(&mut self, leading: bool, deadline: Instant) -> Attempt {
        match tokio::time::timeout_at(deadline.into(), self.try_acquire_or_renew(leading)).await {
            Ok(attempt) => attempt,
            Err(_) => {
                tracing::warn!("lease request timed out");
                Attempt::Failed
            }
        }
    }

    /// client-go's `tryAcquireOrRenew`: a leader first renews its last-written Lease directly;
    /// otherwise (or if that fails) read the Lease, and take or renew it if allowed.
    async fn try_acquire_or_renew(&mut self, leading: bool) -> Attempt {
        // If the fast path fails, fall through: reading tells us whether it was a conflict or
        // someone took over.
        if leading
            && let Some(lease) = self.own_lease()
            && self.claim(lease).await
        {
            return Attempt::Held;
        }
        let current = match self.api.get_opt(&self.config.lease_name).await {
            Ok(current) => current,
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the lease");
                return Attempt::Failed;
            }
        };
        let Some(current) = current else {
            return self.create().await;
        };
        let changed_at = self.observe(current.clone());
        let record = current.spec.as_ref();
        let me = &self.config.identity;
        if !can_acquire(
            record,
            me,
            changed_at,
            Instant::now(),
            self.config.lease_duration,
        ) {
            let holder = record.and_then(holder).unwrap_or_default().to_owned();
            tracing::debug!(%holder, "the lease is held by another replica");
            return Attempt::HeldByOther(holder);
        }
        if self.claim(current).await {
            Attempt::Held
        } else {
            Attempt::Failed
        }
    }

    /// The last Lease we saw, if it names us as holder.
    fn own_lease(&self) -> Option<Lease> {
        let observed = self.observed.as_ref()?;
        let record = observed.lease.spec.as_ref()?;
        (holder(record) == Some(self.config.identity.as_str())).then(|| observed.lease.clone())
    }

    /// Writes a claim on `lease` (optimistic concurrency: its `resourceVersion` goes along).
    async fn claim(&mut self, mut lease: Lease) -> bool {
        // The Lease exists, so even an empty spec is a previous record (a transition counts).
        let previous = lease.spec.take().unwrap_or_default();
        lease.spec = Some(claimed_spec(
            Some(&previous),
            &self.config.identity,
            self.config.lease_duration,
            now_micro(),
        ));
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(written) => {
                self.observe(written);
                true
            }
            Err(e) if is_conflict(&e) => {
                tracing::debug!("lost a race for the lease");
                false
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot write the lease");
                false
            }
        }
    }

    /// Creates the missing Lease, held by us.
    async fn create(&mut self) -> Attempt {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.lease_name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..ObjectMeta::default()
            },
            spec: Some(claimed_spec(
                None,
                &self.config.identity,
                self.config.lease_duration,
                now_micro(),
            )),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(created) => {
                self.observe(created);
                Attempt::Held
            }
            Err(e) if is_already_exists(&e) => {
                tracing::debug!("another replica created the lease first");
                Attempt::Failed
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot create the lease");
                Attempt::Failed
            }
        }
    }

    /// Gives the Lease up if our last view of it names us, with the `resourceVersion` we last
    /// saw: if it changed since, someone else has it and there is nothing to release.
    async fn release(&mut self) {
        let Some(mut lease) = self.own_lease() else {
            return;
        };
        let previous = lease.spec.clone().unwrap_or_default();
        lease.spec = Some(released_spec(&previous, now_micro()));
        let params = PostParams::default();
        let write = self.api.replace(&self.config.lease_name, &params, &lease);
        match tokio::time::timeout(self.config.renew_deadline, write).await {
            Ok(Ok(_)) => {
                tracing::info!("released the lease");
            }
            Ok(Err(e)) if is_conflict(&e) => {
                tracing::debug!("the lease changed before release; not ours to release");
            }
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "cannot release the lease; it will expire");
            }
            Err(_) => {
                tracing::warn!("releasing the lease timed out; it will expire");
            }
        }
    }

    /// Remembers `lease` as the latest version; returns the local instant its spec took its
    /// current value (now, unless the spec is the one we saw last).
    fn observe(&mut self, lease: Lease) -> Instant {
        let changed_at = match &self.observed {
            Some(seen) if seen.lease.spec == lease.spec => seen.changed_at,
            _ => Instant::now(),
        };
        self.observed = Some(Observed { lease, changed_at });
        changed_at
    }

    /// Publishes `leadership`, waking consumers only on a change.
    fn publish(&self, leadership: Leadership) {
        self.leadership.send_if_modified(|current| {
            let changed = *current != leadership;
            *current = leadership;
            changed
        });
    }

    /// Sleeps until `at`; false if told to stop meanwhile (or the elector was dropped).
    async fn pause_until(&mut self, at: Instant) -> bool {
        let slept = tokio::select! {
            () = tokio::time::sleep_until(at.into()) => true,
            _ = self.stop.wait_for(|stop| *stop) => false,
        };
        slept && !self.stop_requested()
    }

    /// Sleeps until `at`, or (with `early`) until the API server answers or serves again;
    /// false when told to stop.
    async fn pause_until_or_recovery(&mut self, at: Instant, early: bool) -> bool {
        let Some(mut recovered) = self.recovered.clone().filter(|_| early) else {
            return self.pause_until(at).await;
        };
        let slept = tokio::select! {
            () = tokio::time::sleep_until(at.into()) => true,
            Ok(()) = recovered.changed() => {
                tracing::debug!("the API server is back: retrying the lease now");
                true
            }
            _ = self.stop.wait_for(|stop| *stop) => false,
        };
        slept && !self.stop_requested()
    }

    /// A candidate's pause: sleeps until `retry_at`, or less when the Lease may be taken sooner —
    /// the watch shows it released or deleted, or the record of another holder last seen
    /// expires — or (with `early`) when the API server answers again; false when told to stop.
    /// Only a change seen by the watch, or a deadline still ahead, ends it early: a Lease that
    /// looked free but could not be claimed (a failed write) waits for the retry, no hot loop.
    async fn pause_for_lease(
        &mut self,
        retry_at: Instant,
        early: bool,
        lease_watch: &mut LeaseWatch,
    ) -> bool {
        enum Woken {
            Deadline,
            Recovered,
            Watch(Seen),
            Stop,
        }
        let mut recovered = self.recovered.clone().filter(|_| early);
        loop {
            let wake_at = self
                .expiry()
                .map_or(retry_at, |expiry| expiry.min(retry_at));
            let woken = tokio::select! {
                () = tokio::time::sleep_until(wake_at.into()) => Woken::Deadline,
                Some(()) = recovery(recovered.as_mut()) => Woken::Recovered,
                seen = lease_watch.changed() => Woken::Watch(seen),
                _ = self.stop.wait_for(|stop| *stop) => Woken::Stop,
            };
            match woken {
                Woken::Deadline => break,
                Woken::Recovered => {
                    tracing::debug!("the API server is back: retrying the lease now");
                    break;
                }
                Woken::Watch(seen) => {
                    if self.saw(seen) {
                        tracing::debug!("the lease is free: trying it now");
                        break;
                    }
                }
                Woken::Stop => return false,
            }
        }
        !self.stop_requested()
    }

    /// Takes in what the watch saw; whether the Lease may be taken now. The record goes
    /// through [`Self::observe`] like a read's, so its expiry counts from when it was first seen.
    fn saw(&mut self, seen: Seen) -> bool {
        match seen {
            Seen::Deleted => true,
            Seen::Present(lease) => {
                let changed_at = self.observe(*lease);
                let record = self.observed.as_ref().and_then(|o| o.lease.spec.as_ref());
                can_acquire(
                    record,
                    &self.config.identity,
                    changed_at,
                    Instant::now(),
                    self.config.lease_duration,
                )
            }
        }
    }

    /// When the Lease last seen, held by another, expires — if that is still ahead (a Lease
    /// already free or expired has been tried, and is retried after the retry period).
    fn expiry(&self) -> Option<Instant> {
        let observed = self.observed.as_ref()?;
        let record = observed.lease.spec.as_ref()?;
        let holder = holder(record)?;
        if holder == self.config.identity {
            return None;
        }
        let expiry = observed.changed_at + record_duration(record, self.config.lease_duration);
        (expiry > Instant::now()).then_some(expiry)
    }

    /// Recoveries so far came before the coming attempt: only a later one cuts its wait short.
    fn mark_recoveries_seen(&mut self) {
        if let Some(recovered) = self.recovered.as_mut() {
            recovered.borrow_and_update();
        }
    }

    fn stop_requested(&self) -> bool {
        *self.stop.borrow() || self.stop.has_changed().is_err()
    }
}

/// Resolves when `recovered` changes (None: the API server went away for good, or nothing to
/// wait for); never without a receiver.
async fn recovery(recovered: Option<&mut watch::Receiver<u64>>) -> Option<()> {
    match recovered {
        Some(recovered) => recovered.changed().await.ok(),
        None => std::future::pending().await,
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.is_conflict())
}

fn is_already_exists(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(status) if status.is_already_exists() || status.code == 409)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "me";
    const LEASE: Duration = Duration::from_secs(15);

    fn spec(holder: Option<&str>, seconds: Option<i32>, transitions: Option<i32>) -> LeaseSpec {
        LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: seconds,
            lease_transitions: transitions,
            ..LeaseSpec::default()
        }
    }

    fn micro(seconds: i64) -> MicroTime {
        MicroTime(k8s_openapi::jiff::Timestamp::from_second(seconds).expect("valid timestamp"))
    }

    #[test]
    fn free_leases_can_be_taken_at_once() {
        let t = Instant::now();
        assert!(can_acquire(None, ME, t, t, LEASE), "no lease yet");
        let released = spec(Some(""), Some(1), Some(3));
        assert!(can_acquire(Some(&released), ME, t, t, LEASE), "released");
        let unheld = spec(None, Some(15), None);
        assert!(can_acquire(Some(&unheld), ME, t, t, LEASE), "no holder");
        let mine = spec(Some(ME), Some(15), Some(0));
        assert!(can_acquire(Some(&mine), ME, t, t, LEASE), "held by us");
    }

    #[test]
    fn another_holder_is_waited_out_from_when_the_record_was_observed() {
        let observed = Instant::now();
        let theirs = spec(Some("other"), Some(15), Some(0));
        let at = |secs: u64| observed + Duration::from_secs(secs);
        assert!(!can_acquire(Some(&theirs), ME, observed, observed, LEASE));
        assert!(!can_acquire(Some(&theirs), ME, observed, at(14), LEASE));
        assert!(can_acquire(Some(&theirs), ME, observed, at(15), LEASE));
    }

    #[test]
    fn the_holders_declared_duration_wins_over_ours() {
        let observed = Instant::now();
        let at = |secs: u64| observed + Duration::from_secs(secs);
        let long = spec(Some("other"), Some(60), None);
        assert!(!can_acquire(Some(&long), ME, observed, at(30), LEASE));
        assert!(can_acquire(Some(&long), ME, observed, at(60), LEASE));
        // Missing or nonsensical durations fall back to ours.
        for seconds in [None, Some(0), Some(-5)] {
            let record = spec(Some("other"), seconds, None);
            assert!(!can_acquire(Some(&record), ME, observed, at(14), LEASE));
            assert!(can_acquire(Some(&record), ME, observed, at(15), LEASE));
        }
    }

    #[test]
    fn creating_starts_at_zero_transitions() {
        let created = claimed_spec(None, ME, Duration::from_millis(1500), micro(100));
        assert_eq!(created.holder_identity.as_deref(), Some(ME));
        assert_eq!(created.lease_duration_seconds, Some(2), "rounded up");
        assert_eq!(created.lease_transitions, Some(0));
        assert_eq!(created.acquire_time, Some(micro(100)));
        assert_eq!(created.renew_time, Some(micro(100)));
    }

    #[test]
    fn renewing_keeps_acquire_time_and_transitions() {
        let mut held = claimed_spec(None, ME, LEASE, micro(100));
        held.lease_transitions = Some(4);
        held.preferred_holder = Some("someone".into());
        let renewed = claimed_spec(Some(&held), ME, LEASE, micro(102));
        assert_eq!(renewed.acquire_time, Some(micro(100)));
        assert_eq!(renewed.renew_time, Some(micro(102)));
        assert_eq!(renewed.lease_transitions, Some(4));
        assert_eq!(renewed.preferred_holder.as_deref(), Some("someone"));
    }

    #[test]
    fn taking_over_counts_a_transition() {
        let theirs = LeaseSpec {
            acquire_time: Some(micro(1)),
            ..spec(Some("other"), Some(15), Some(2))
        };
        let taken = claimed_spec(Some(&theirs), ME, LEASE, micro(50));
        assert_eq!(taken.holder_identity.as_deref(), Some(ME));
        assert_eq!(taken.acquire_time, Some(micro(50)));
        assert_eq!(taken.lease_transitions, Some(3));
        // After a release (empty holder) too, as client-go counts it.
        let released = released_spec(&taken, micro(60));
        let retaken = claimed_spec(Some(&released), "third", LEASE, micro(61));
        assert_eq!(retaken.lease_transitions, Some(4));
        // An existing record without a count (or without anything) counts from 0 as well.
        let uncounted = spec(Some("other"), Some(15), None);
        let taken = claimed_spec(Some(&uncounted), ME, LEASE, micro(70));
        assert_eq!(taken.lease_transitions, Some(1));
        let empty = LeaseSpec::default();
        let taken = claimed_spec(Some(&empty), ME, LEASE, micro(80));
        assert_eq!(taken.lease_transitions, Some(1));
    }

    #[test]
    fn releasing_clears_the_holder_and_shortens_the_lease() {
        let held = claimed_spec(None, ME, LEASE, micro(10));
        let released = released_spec(&held, micro(20));
        assert_eq!(released.holder_identity.as_deref(), Some(""));
        assert_eq!(released.lease_duration_seconds, Some(1));
        assert_eq!(released.lease_transitions, held.lease_transitions);
        assert_eq!(released.renew_time, Some(micro(20)));
        assert!(holder(&released).is_none());
    }

    #[test]
    fn lease_seconds_round_up_and_saturate() {
        assert_eq!(lease_seconds(Duration::ZERO), 1);
        assert_eq!(lease_seconds(Duration::from_millis(1)), 1);
        assert_eq!(lease_seconds(Duration::from_secs(15)), 15);
        assert_eq!(lease_seconds(Duration::from_millis(15_001)), 16);
        assert_eq!(lease_seconds(Duration::MAX), i32::MAX);
    }

    #[test]
    fn jitter_stays_within_client_gos_factor() {
        let base = Duration::from_millis(100);
        assert_eq!(jittered(base, JITTER_FACTOR, 0.0), base);
        assert_eq!(
            jittered(base, JITTER_FACTOR, 1.0),
            Duration::from_millis(220)
        );
        assert_eq!(
            jittered(base, JITTER_FACTOR, 7.0),
            Duration::from_millis(220)
        );
    }

    #[test]
    fn config_defaults_and_validation() {
        let config = LeaderElectionConfig::new("ns", "lease", ME);
        assert_eq!(config.lease_duration, Duration::from_secs(15));
        assert_eq!(config.renew_deadline, Duration::from_secs(10));
        assert_eq!(config.retry_period, Duration::from_secs(2));
        assert_eq!(config.validate(), Ok(()));
        let mut bad = config.clone();
        bad.renew_deadline = Duration::from_secs(15);
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::LeaseNotLongerThanDeadline { .. })
        ));
        let fixed = bad.sanitized();
        assert_eq!(fixed.validate(), Ok(()));
        assert_eq!(fixed.renew_deadline, Duration::from_secs(10));
        let mut bad = config.clone();
        bad.retry_period = Duration::from_secs(9);
        assert!(matches!(
            bad.validate(),
            Err(ConfigError::DeadlineTooShort { .. })
        ));
        assert_eq!(bad.sanitized().validate(), Ok(()));
        let mut bad = config.clone();
        bad.identity.clear();
        assert_eq!(bad.validate(), Err(ConfigError::EmptyIdentity));
        let lease = format!("{}_", bad.lease_name);
        assert!(
            bad.sanitized().identity.starts_with(&lease),
            "named after the Lease"
        );
    }

    #[test]
    fn identities_are_unique() {
        let a = unique_identity("pod");
        let b = unique_identity("pod");
        assert!(a.starts_with("pod_"), "{a}");
        assert_ne!(a, b);
    }
}
