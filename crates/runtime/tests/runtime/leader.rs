//! Leader election end to end, on the sandbox (or the cluster of `VIGIL_TEST_KUBECONFIG`), with
//! timings short enough for tests: a 1 s lease, 600 ms renew deadline, 100 ms retry period.
//!
//! The property that matters is safety: two replicas never report `Leading` at once, and a
//! leader that cannot renew stops leading before its lease can be taken. Liveness comes second:
//! a released lease is taken over at once, an expired one soon after it expires.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use tokio::sync::watch;
use vigil_runtime::leader::{LEASE_VERBS, LeaderElectionConfig, LeaderElector, Leadership};
use vigil_testenv::vigil_sandbox::Fault;
use vigil_testenv::{RbacAttributes, TestEnv, wait_for};

const LEASE_NAME: &str = "vigil-leader";
const LEASE_DURATION: Duration = Duration::from_secs(1);
const RENEW_DEADLINE: Duration = Duration::from_millis(600);
const RETRY_PERIOD: Duration = Duration::from_millis(100);
/// How often the tests look at both replicas' leadership.
const SAMPLE: Duration = Duration::from_millis(20);
/// Slack for scheduling and request latency on a busy test machine.
const MARGIN: Duration = Duration::from_millis(250);

/// One campaigning replica.
struct Replica {
    identity: String,
    elector: LeaderElector,
    leadership: watch::Receiver<Leadership>,
}

impl Replica {
    fn start(env: &TestEnv, identity: &str) -> Self {
        let config = LeaderElectionConfig {
            lease_duration: LEASE_DURATION,
            renew_deadline: RENEW_DEADLINE,
            retry_period: RETRY_PERIOD,
            ..LeaderElectionConfig::new(env.namespace(), LEASE_NAME, identity)
        };
        let (elector, leadership) = LeaderElector::spawn(env.client(), config);
        Self {
            identity: identity.to_owned(),
            elector,
            leadership,
        }
    }

    fn leading(&self) -> bool {
        *self.leadership.borrow() == Leadership::Leading
    }
}

fn leaders(replicas: &[&Replica]) -> usize {
    replicas.iter().filter(|r| r.leading()).count()
}

/// Waits until exactly one replica leads; returns its index.
async fn single_leader(replicas: &[&Replica], timeout: Duration) -> usize {
    wait_for("exactly one leader", timeout, || {
        let leading: Vec<usize> = (0..replicas.len())
            .filter(|&i| replicas[i].leading())
            .collect();
        let result = match leading.as_slice() {
            [one] => Ok(Some(*one)),
            [] => Ok(None),
            many => Err(format!("{} leaders at once", many.len())),
        };
        async move { result }
    })
    .await
    .expect("a single leader")
}

/// Samples every [`SAMPLE`] until `done` holds, failing if two replicas ever lead at once;
/// returns when `done` was first seen.
async fn sample_until(
    replicas: &[&Replica],
    timeout: Duration,
    what: &str,
    done: impl Fn() -> bool,
) -> Instant {
    let started = Instant::now();
    loop {
        assert!(leaders(replicas) <= 1, "two leaders at once");
        if done() {
            return Instant::now();
        }
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        tokio::time::sleep(SAMPLE).await;
    }
}

async fn read_lease(env: &TestEnv) -> Lease {
    env.api::<Lease>()
        .get(LEASE_NAME)
        .await
        .expect("read the lease")
}

fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.holder_identity.as_deref())
}

fn transitions(lease: &Lease) -> i32 {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_transitions)
        .unwrap_or(0)
}

fn renew_time(lease: &Lease) -> Timestamp {
    lease
        .spec
        .as_ref()
        .and_then(|s| s.renew_time.as_ref())
        .map(|t| t.0)
        .expect("the lease has a renewTime")
}

fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).expect("a short duration")
}

/// Splits two replicas into (leader, follower).
fn by_role(replicas: [Replica; 2], leader: usize) -> (Replica, Replica) {
    let [a, b] = replicas;
    if leader == 0 { (a, b) } else { (b, a) }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exactly_one_of_two_leads_and_holds_the_lease() {
    let env = TestEnv::start().await.expect("test environment");
    let a = Replica::start(&env, "replica-a");
    let b = Replica::start(&env, "replica-b");
    let leader = single_leader(&[&a, &b], Duration::from_secs(2)).await;
    let leader = [&a, &b][leader];
    let lease = read_lease(&env).await;
    assert_eq!(holder(&lease), Some(leader.identity.as_str()));
    // And it stays that way while both keep campaigning for a few renewals.
    sample_until(&[&a, &b], Duration::from_secs(1), "a few renewals", {
        let until = Instant::now() + 5 * RETRY_PERIOD;
        move || Instant::now() >= until
    })
    .await;
    assert!(leader.leading(), "the leader kept leading");
    assert_eq!(leaders(&[&a, &b]), 1);
    a.elector.shutdown().await;
    b.elector.shutdown().await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_releases_and_the_standby_takes_over_at_once() {
    let env = TestEnv::start().await.expect("test environment");
    let replicas = [
        Replica::start(&env, "replica-a"),
        Replica::start(&env, "replica-b"),
    ];
    let leader = single_leader(&[&replicas[0], &replicas[1]], Duration::from_secs(2)).await;
    let (leader, standby) = by_role(replicas, leader);
    let before = transitions(&read_lease(&env).await);

    let released = Instant::now();
    leader.elector.shutdown().await;
    assert_eq!(
        *leader.leadership.borrow(),
        Leadership::Following,
        "a stopped elector reports Following"
    );
    sample_until(
        &[&standby],
        2 * LEASE_DURATION,
        "the standby to lead",
        || standby.leading(),
    )
    .await;
    let took = released.elapsed();
    assert!(
        took < LEASE_DURATION,
        "the standby took over after {took:?}: the lease was not released"
    );
    let lease = read_lease(&env).await;
    assert_eq!(holder(&lease), Some(standby.identity.as_str()));
    assert!(
        transitions(&lease) > before,
        "leaseTransitions went from {before} to {}",
        transitions(&lease)
    );
    standby.elector.shutdown().await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_steps_down_before_its_lease_expires() {
    let env = TestEnv::start().await.expect("test environment");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    let replicas = [
        Replica::start(&env, "replica-a"),
        Replica::start(&env, "replica-b"),
    ];
    let leader = single_leader(&[&replicas[0], &replicas[1]], Duration::from_secs(2)).await;
    let (leader, follower) = by_role(replicas, leader);
    let both = [&leader, &follower];

    // From now on no Lease update gets through, for either replica.
    sandbox.inject(Fault::fail("update", "leases", 500, 1000));
    let faulted = Instant::now();
    let stepped_down = sample_until(
        &both,
        RENEW_DEADLINE + 2 * MARGIN,
        "the leader to step down",
        || !leader.leading(),
    )
    .await;
    let stepped_down_at = Timestamp::now();
    let took = stepped_down - faulted;
    assert!(
        took <= RENEW_DEADLINE + MARGIN,
        "stepped down {took:?} after renewals started failing"
    );
    assert!(!follower.leading(), "nobody can write the lease");

    // The last renewal that got through: the lease expires LEASE_DURATION after it.
    let lease = read_lease(&env).await;
    assert_eq!(holder(&lease), Some(leader.identity.as_str()));
    let renewed = renew_time(&lease);
    let expires_ms = renewed.as_millisecond() + millis(LEASE_DURATION);
    assert!(
        stepped_down_at.as_millisecond() < expires_ms,
        "the leader still led at {stepped_down_at}, its lease renewed at {renewed} had expired"
    );

    // Stopping the old leader cannot release (updates still fail); once updates work again the
    // follower must still wait the lease out.
    let old_leadership = leader.leadership.clone();
    leader.elector.shutdown().await;
    sandbox.clear_faults();
    sample_until(
        &[&follower],
        LEASE_DURATION + 4 * MARGIN,
        "the follower to take over",
        || follower.leading(),
    )
    .await;
    assert_eq!(*old_leadership.borrow(), Leadership::Following);
    let took_over_at = Timestamp::now();
    assert!(
        took_over_at.as_millisecond() >= expires_ms,
        "the follower took over at {took_over_at}, before the lease renewed at {renewed} expired"
    );
    assert_eq!(
        holder(&read_lease(&env).await),
        Some(follower.identity.as_str())
    );
    follower.elector.shutdown().await;
    env.cleanup().await;
}

/// What the sampler of [`never_two_leaders_while_both_campaign`] saw.
#[derive(Debug, Default)]
struct Samples {
    taken: u32,
    with_leader: u32,
    changes: u32,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_two_leaders_while_both_campaign() {
    let env = TestEnv::start().await.expect("test environment");
    let a = Replica::start(&env, "replica-a");
    let b = Replica::start(&env, "replica-b");
    let (done_tx, done) = watch::channel(false);
    let sampler = async {
        let mut seen = Samples::default();
        let mut last = (false, false);
        while !*done.borrow() {
            let now = (a.leading(), b.leading());
            assert!(!(now.0 && now.1), "two leaders at once after {seen:?}");
            seen.taken += 1;
            seen.with_leader += u32::from(now.0 || now.1);
            seen.changes += u32::from(now != last);
            last = now;
            tokio::time::sleep(SAMPLE).await;
        }
        seen
    };
    let driver = async {
        single_leader(&[&a, &b], Duration::from_secs(2)).await;
        match env.sandbox() {
            Some(sandbox) => {
                // The sleeps pace the scenario; the sampler does the checking meanwhile.
                // Half of all Lease updates fail: renewals and takeovers are retried.
                sandbox.inject(Fault::flaky("update", "leases", 500, 0.5));
                tokio::time::sleep(Duration::from_millis(800)).await;
                // An outage longer than the lease: the leader must step down during it, and
                // afterwards both race for the lease it still names.
                sandbox.stop_serving().await;
                tokio::time::sleep(LEASE_DURATION + 2 * RETRY_PERIOD).await;
                sandbox.resume_serving().await.expect("serve again");
                sandbox.clear_faults();
            }
            None => tokio::time::sleep(Duration::from_secs(2)).await,
        }
        single_leader(&[&a, &b], 2 * LEASE_DURATION).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        let _ = done_tx.send(true);
    };
    let (seen, ()) = tokio::join!(sampler, driver);
    eprintln!("leadership samples: {seen:?}");
    assert!(seen.with_leader > 0, "nobody ever led");
    if env.is_sandbox() {
        // Leading before the outage, Following during it, someone leading again after it.
        assert!(seen.changes >= 3, "the outage changed nothing: {seen:?}");
    }
    a.elector.shutdown().await;
    b.elector.shutdown().await;
    env.cleanup().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rolling_replacement_hands_over_without_overlap() {
    let env = TestEnv::start().await.expect("test environment");
    // Every replica ever started is sampled: a stopped one must read Following forever.
    let sampled: Mutex<Vec<watch::Receiver<Leadership>>> = Mutex::new(Vec::new());
    let count_leaders = || {
        sampled
            .lock()
            .expect("sample list")
            .iter()
            .filter(|r| *r.borrow() == Leadership::Leading)
            .count()
    };
    let start = |identity: String| {
        let replica = Replica::start(&env, &identity);
        sampled
            .lock()
            .expect("sample list")
            .push(replica.leadership.clone());
        replica
    };
    let (done_tx, done) = watch::channel(false);
    let sampler = async {
        let mut max = 0;
        while !*done.borrow() {
            max = max.max(count_leaders());
            tokio::time::sleep(SAMPLE).await;
        }
        max
    };
    let driver = async {
        let mut replicas = vec![start("replica-0".into()), start("replica-1".into())];
        for generation in 2..5 {
            let refs: Vec<&Replica> = replicas.iter().collect();
            let leader = single_leader(&refs, 2 * LEASE_DURATION).await;
            let old = replicas.remove(leader);
            let released = Instant::now();
            old.elector.shutdown().await;
            replicas.push(start(format!("replica-{generation}")));
            let refs: Vec<&Replica> = replicas.iter().collect();
            single_leader(&refs, 2 * LEASE_DURATION).await;
            let took = released.elapsed();
            assert!(took < LEASE_DURATION, "handover {generation} took {took:?}");
        }
        let _ = done_tx.send(true);
        replicas
    };
    let (max, replicas) = tokio::join!(sampler, driver);
    assert_eq!(max, 1, "at most one leader at any sample, and one at some");
    for replica in replicas {
        replica.elector.shutdown().await;
    }
    env.cleanup().await;
}

/// A standby sees a release through its watch of the Lease, not at its next retry: with a 10 s
/// retry period (every attempt waits 10-22 s), the standby still leads well within it after the
/// leader releases — a rolling upgrade's leaderless gap is a request's time, not a retry's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_released_lease_is_taken_long_before_the_next_retry() {
    const SLOW_RETRY: Duration = Duration::from_secs(10);
    let env = TestEnv::start().await.expect("test environment");
    let start = |identity: &str| {
        let config = LeaderElectionConfig {
            lease_duration: Duration::from_secs(30),
            renew_deadline: Duration::from_secs(20),
            retry_period: SLOW_RETRY,
            ..LeaderElectionConfig::new(env.namespace(), LEASE_NAME, identity)
        };
        assert_eq!(config.validate(), Ok(()), "timings used as given");
        let (elector, leadership) = LeaderElector::spawn(env.client(), config);
        Replica {
            identity: identity.to_owned(),
            elector,
            leadership,
        }
    };
    let leader = start("replica-a");
    // Alone, it creates the Lease at its first attempt.
    sample_until(&[&leader], SLOW_RETRY, "the first replica to lead", || {
        leader.leading()
    })
    .await;
    let standby = start("replica-b");
    // The standby's first attempt finds the Lease held, and it settles into its 10 s+ wait.
    wait_for("the standby to find the lease held", SLOW_RETRY, || {
        let env = &env;
        async move {
            let lease = read_lease(env).await;
            Ok((holder(&lease) == Some("replica-a")).then_some(()))
        }
    })
    .await
    .expect("held by the first replica");
    tokio::time::sleep(MARGIN).await;
    assert!(!standby.leading(), "the standby waits");

    let released = Instant::now();
    let stopped = leader.leadership.clone();
    leader.elector.shutdown().await;
    assert_eq!(*stopped.borrow(), Leadership::Following);
    sample_until(&[&standby], SLOW_RETRY, "the standby to lead", || {
        standby.leading()
    })
    .await;
    let took = released.elapsed();
    eprintln!(
        "release -> the standby leads: {} ms (retry period {} ms)",
        millis(took),
        millis(SLOW_RETRY)
    );
    assert!(
        took < SLOW_RETRY / 2,
        "the standby took over after {took:?}: it waited for its retry, not for the watch"
    );
    assert_eq!(
        holder(&read_lease(&env).await),
        Some(standby.identity.as_str())
    );
    standby.elector.shutdown().await;
    env.cleanup().await;
}

/// A standby whose watch of the Lease fails retries it with a backoff, never in a hot loop, and
/// still takes over by its poll, as before the watch existed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_lease_watch_backs_off_and_the_poll_still_takes_over() {
    let env = TestEnv::start().await.expect("test environment");
    vigil_testenv::require_sandbox!(env);
    let sandbox = env.sandbox().expect("sandbox");
    sandbox.inject(Fault::fail("watch", "leases", 500, u64::MAX));
    let leader = Replica::start(&env, "replica-a");
    sample_until(&[&leader], 5 * LEASE_DURATION, "replica-a to lead", || {
        leader.leading()
    })
    .await;
    let (client, log) = env.recording_client().await.expect("recording client");
    let config = LeaderElectionConfig {
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
        ..LeaderElectionConfig::new(env.namespace(), LEASE_NAME, "replica-b")
    };
    let (elector, leadership) = LeaderElector::spawn(client, config);
    let standby = Replica {
        identity: "replica-b".to_owned(),
        elector,
        leadership,
    };
    let watching = Duration::from_secs(3);
    tokio::time::sleep(watching).await;
    let watches = log
        .requests()
        .iter()
        .filter(|(method, uri)| method == "GET" && uri.contains("watch=true"))
        .count();
    // Backoff from 0.5 s doubling: 3 attempts in 3 s (one would mean the fault missed it); a
    // hot loop would be hundreds.
    assert!(
        (2..=6).contains(&watches),
        "{watches} watch requests in {watching:?}"
    );
    assert!(!standby.leading());

    leader.elector.shutdown().await;
    sample_until(
        &[&standby],
        2 * LEASE_DURATION,
        "the standby to lead by its poll",
        || standby.leading(),
    )
    .await;
    standby.elector.shutdown().await;
    env.cleanup().await;
}

/// The elector's requests, through a whole term (the Lease created and taken, renewed, then
/// released on shutdown) and a standby's (which watches the Lease meanwhile), are exactly the
/// verbs `vigil manifests` grants on Leases.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_electors_requests_are_exactly_the_lease_verbs_granted() {
    let env = TestEnv::start().await.expect("test environment");
    let (client, log) = env.recording_client().await.expect("recording client");
    let config = LeaderElectionConfig {
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
        ..LeaderElectionConfig::new(env.namespace(), LEASE_NAME, "replica-a")
    };
    let (elector, leadership) = LeaderElector::spawn(client.clone(), config);
    wait_for("leadership", LEASE_DURATION * 5, || {
        let leading = *leadership.borrow() == Leadership::Leading;
        async move { Ok(leading.then_some(())) }
    })
    .await
    .expect("leads");
    let first = renew_time(&read_lease(&env).await);
    wait_for("a renewal", LEASE_DURATION * 5, || {
        let env = &env;
        async move { Ok((renew_time(&read_lease(env).await) > first).then_some(())) }
    })
    .await
    .expect("renewed");
    // A standby: it reads the Lease, finds it held, and watches it.
    let standby_config = LeaderElectionConfig {
        lease_duration: LEASE_DURATION,
        renew_deadline: RENEW_DEADLINE,
        retry_period: RETRY_PERIOD,
        ..LeaderElectionConfig::new(env.namespace(), LEASE_NAME, "replica-b")
    };
    let (standby, standby_leadership) = LeaderElector::spawn(client, standby_config);
    wait_for("the standby to watch the lease", LEASE_DURATION * 5, || {
        let watching = log
            .requests()
            .iter()
            .any(|(method, uri)| method == "GET" && uri.contains("watch=true"));
        async move { Ok(watching.then_some(())) }
    })
    .await
    .expect("watches");
    elector.shutdown().await;
    wait_for("the standby to lead", LEASE_DURATION * 5, || {
        let leading = *standby_leadership.borrow() == Leadership::Leading;
        async move { Ok(leading.then_some(())) }
    })
    .await
    .expect("the standby leads");
    standby.shutdown().await;
    let released = read_lease(&env).await;
    assert!(
        holder(&released).unwrap_or_default().is_empty(),
        "released: {released:?}"
    );
    let granted = LEASE_VERBS
        .iter()
        .map(|verb| RbacAttributes::new("coordination.k8s.io", "leases", verb));
    log.check_exactly(granted, &[])
        .expect("the Role is exactly what the elector uses");
    env.cleanup().await;
}
