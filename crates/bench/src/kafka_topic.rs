//! `vigil-bench kafka-topic`: the KafkaTopic controller measured end to end, with `vigil sandbox`
//! and `vigil run --controllers kafkatopic` as children of the bench, against a Kafka-protocol
//! broker (`--bootstrap`, default `VIGIL_TEST_KAFKA_BOOTSTRAP`: `eval "$(.ci/kafka-broker
//! start)"` starts one).
//!
//! 1. Time to Ready: N Topics (default 500) created at once; per Topic, from its create request
//!    to the watch event showing `Ready=True`; and until all are Ready.
//! 2. Steady state: over a window with nothing changing, the requests Vigil sends to the broker
//!    (from its `vigil_kafka_broker_requests_total`, by API), its writes to the API (Topic
//!    watch events), and its CPU time and memory (RSS). Target: no broker write and no API write; broker reads only the drift poll's
//!    (one Metadata and one DescribeConfigs per cluster per `--drift-interval`; `0s` turns it off).
//! 3. Deletion: all N Topics deleted at once; time until every object is gone and the broker
//!    holds none of their topics.
//!
//! Figures only: nothing is asserted.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::runtime::watcher;
use serde_json::json;
use vigil_apis::Topic;
use vigil_kafka::{Admin, ClientConfig};

use crate::support::http::http_get;
use crate::support::metrics::samples;
use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;
use crate::support::usage::rss_mib;
use crate::support::vigil::spawn_vigil;

#[derive(Debug, clap::Args)]
pub struct KafkaTopicBench {
    /// The broker (`host:port`).
    #[arg(long, env = "VIGIL_TEST_KAFKA_BOOTSTRAP")]
    bootstrap: String,
    /// Topics created at once.
    #[arg(long, default_value_t = 500)]
    topics: usize,
    /// Seconds of steady state watched.
    #[arg(long, default_value_t = 30)]
    steady_seconds: u64,
    /// Vigil's drift poll interval (`--kafka-drift-interval`), e.g. `10s`; `0s`: off.
    #[arg(long, default_value = "10s")]
    drift_interval: String,
    /// Create and delete requests in flight from the bench.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

const NS: &str = "kafka-bench";
const TIMEOUT: Duration = Duration::from_secs(600);

/// The writes among broker APIs.
const BROKER_WRITES: &[&str] = &[
    "CreateTopics",
    "CreatePartitions",
    "IncrementalAlterConfigs",
    "DeleteTopics",
];

pub async fn run(args: KafkaTopicBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.topics > 0 && args.concurrency > 0,
        "need --topics and --concurrency > 0"
    );
    say!(
        "vigil-bench kafka-topic (sandbox and vigil run as child processes, broker at {}; the machine may be shared with other work)",
        args.bootstrap
    );
    let admin = Admin::new(ClientConfig::plaintext(args.bootstrap.clone()));
    admin
        .list_topics()
        .await
        .with_context(|| format!("the broker at {} does not answer", args.bootstrap))?;
    let sandbox = spawn_sandbox(&["--no-kubelet"]).await?;
    let client = sandbox.client()?;
    let topics = crate::support::kinds::install_kind::<Topic>(&client, NS).await?;
    let mut vigil = spawn_vigil(
        sandbox.kubeconfig(),
        &[
            "--controllers",
            "kafkatopic",
            "--namespaces",
            NS,
            "--kafka-drift-interval",
            &args.drift_interval,
        ],
    )
    .await?;

    // Watch: first Ready=True per Topic, and every event (API writes) with its time.
    let ready_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let events: Arc<Mutex<Vec<Instant>>> = Arc::default();
    let watch = {
        let (ready_at, events) = (ready_at.clone(), events.clone());
        let api = topics.clone();
        tokio::spawn(async move {
            let mut stream = watcher(api, watcher::Config::default()).boxed();
            while let Some(Ok(event)) = stream.next().await {
                let watcher::Event::Apply(topic) = event else {
                    continue;
                };
                let now = Instant::now();
                events.lock().unwrap_or_else(|e| e.into_inner()).push(now);
                let ready = topic.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                });
                if ready {
                    ready_at
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(topic.metadata.name.clone().unwrap_or_default())
                        .or_insert(now);
                }
            }
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    // Part 1: time to Ready.
    let prefix = format!("vigil-bench-{}", std::process::id());
    let sent: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let started = Instant::now();
    futures::stream::iter(0..args.topics)
        .map(|i| {
            let (topics, sent, prefix, bootstrap) = (
                topics.clone(),
                sent.clone(),
                prefix.clone(),
                args.bootstrap.clone(),
            );
            async move {
                let name = format!("t{i:04}");
                let topic: Topic = serde_json::from_value(json!({
                    "apiVersion": "kafka.vigil.dev/v1alpha1", "kind": "Topic",
                    "metadata": {"name": name},
                    "spec": {"topicName": format!("{prefix}.{name}"), "partitions": 3,
                             "config": {"retention.ms": "86400000", "cleanup.policy": "delete"},
                             "cluster": {"bootstrapServers": [bootstrap]}},
                }))?;
                sent.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .insert(name.clone(), Instant::now());
                topics.create(&PostParams::default(), &topic).await?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    let created = started.elapsed();
    loop {
        let done = ready_at.lock().unwrap_or_else(|e| e.into_inner()).len();
        if done >= args.topics {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < TIMEOUT,
            "only {done} of {} Topics Ready after {TIMEOUT:?}{}",
            args.topics,
            vigil.exit_note()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all_ready = started.elapsed();
    let mut latencies: Vec<Duration> = {
        let sent = sent.lock().unwrap_or_else(|e| e.into_inner());
        let ready = ready_at.lock().unwrap_or_else(|e| e.into_inner());
        sent.iter()
            .filter_map(|(name, t0)| ready.get(name).map(|t1| t1.saturating_duration_since(*t0)))
            .collect()
    };
    latencies.sort_unstable();
    let in_kafka = topics_in_kafka(&admin, &prefix).await?;
    say!(
        "\n1. time to Ready, {} Topics created at once ({} in flight):",
        args.topics,
        args.concurrency
    );
    say!("   creates sent in            {:>10.1} ms", ms(created));
    say!(
        "   all Ready after            {:>10.1} ms  ({:.0} topics/s)",
        ms(all_ready),
        args.topics as f64 / all_ready.as_secs_f64()
    );
    say!(
        "   per Topic: p50 {:.1} ms, p90 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        ms(percentile(&latencies, 50.0)),
        ms(percentile(&latencies, 90.0)),
        ms(percentile(&latencies, 99.0)),
        ms(latencies.last().copied().unwrap_or_default())
    );
    say!("   topics in the broker       {in_kafka:>10}");
    let (_, creation_requests) = broker_requests(&vigil.metrics_addr).await?;
    say!(
        "   broker requests to get there: {}",
        show(&creation_requests)
    );

    // Part 2: steady state.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (_, before) = broker_requests(&vigil.metrics_addr).await?;
    let events_before = events.lock().unwrap_or_else(|e| e.into_inner()).len();
    let window = Duration::from_secs(args.steady_seconds);
    tokio::time::sleep(window).await;
    let (_, after) = broker_requests(&vigil.metrics_addr).await?;
    let events_after = events.lock().unwrap_or_else(|e| e.into_inner()).len();
    let delta: BTreeMap<String, u64> = after
        .iter()
        .map(|(api, n)| {
            (
                api.clone(),
                n.saturating_sub(before.get(api).copied().unwrap_or(0)),
            )
        })
        .filter(|(_, n)| *n > 0)
        .collect();
    let writes: u64 = delta
        .iter()
        .filter(|(api, _)| BROKER_WRITES.contains(&api.as_str()))
        .map(|(_, n)| n)
        .sum();
    let reads: u64 = delta.values().sum::<u64>() - writes;
    say!(
        "\n2. steady state, {} s with nothing changing ({} Topics, drift poll every {}):",
        args.steady_seconds,
        args.topics,
        args.drift_interval
    );
    say!(
        "   broker writes              {writes:>10}  (target 0) {}",
        met(writes == 0)
    );
    say!(
        "   broker reads               {reads:>10}  ({:.2} per topic per minute; the drift poll: Metadata + DescribeConfigs per cluster per interval, 0 with --drift-interval 0s)",
        reads as f64 / args.topics as f64 * 60.0 / window.as_secs_f64()
    );
    say!(
        "   by API                     {}",
        if delta.is_empty() {
            "none".to_owned()
        } else {
            show(&delta)
        }
    );
    say!(
        "   API writes (Topic events)  {:>10}  (target 0) {}",
        events_after - events_before,
        met(events_after == events_before)
    );
    if let Some(cpu) = vigil.cpu_seconds() {
        say!("   vigil CPU so far           {cpu:>10.2} s");
    }
    if let Some((peak, now)) = rss_mib(vigil.pid) {
        say!(
            "   vigil RSS                  {now:>10.1} MiB  (peak {peak:.1} MiB, {} Topics cached)",
            args.topics
        );
    }

    // Part 3: deletion.
    let started = Instant::now();
    futures::stream::iter(0..args.topics)
        .map(|i| {
            let topics = topics.clone();
            async move {
                match topics
                    .delete(&format!("t{i:04}"), &DeleteParams::default())
                    .await
                {
                    Ok(_) => anyhow::Ok(()),
                    Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
                    Err(e) => Err(e.into()),
                }
            }
        })
        .buffer_unordered(args.concurrency)
        .try_collect::<Vec<()>>()
        .await?;
    loop {
        let left = topics.list(&ListParams::default()).await?.items.len();
        let in_kafka = topics_in_kafka(&admin, &prefix).await?;
        if left == 0 && in_kafka == 0 {
            break;
        }
        anyhow::ensure!(
            started.elapsed() < TIMEOUT,
            "{left} Topics and {in_kafka} topics left after {TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let deleted = started.elapsed();
    say!("\n3. deletion of all {} Topics:", args.topics);
    say!(
        "   objects and topics gone in {:>10.1} ms  ({:.0} topics/s)",
        ms(deleted),
        args.topics as f64 / deleted.as_secs_f64()
    );
    say!("\n{}", vigil.log_summary());
    watch.abort();
    drop(vigil);
    drop(sandbox);
    Ok(())
}

/// The broker's topics of this run.
async fn topics_in_kafka(admin: &Admin, prefix: &str) -> anyhow::Result<usize> {
    let prefix = format!("{prefix}.");
    Ok(admin
        .list_topics()
        .await?
        .into_keys()
        .filter(|n| n.starts_with(&prefix))
        .count())
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn met(ok: bool) -> &'static str {
    if ok { "(met)" } else { "(MISSED)" }
}

fn show(counts: &BTreeMap<String, u64>) -> String {
    counts
        .iter()
        .map(|(api, n)| format!("{api} {n}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// `vigil_kafka_broker_requests_total` from Vigil's /metrics: the total and by API.
async fn broker_requests(addr: &str) -> anyhow::Result<(u64, BTreeMap<String, u64>)> {
    let (_, body) = http_get(addr, "/metrics").await?;
    let mut by_api = BTreeMap::new();
    for sample in samples(&body).filter(|s| s.name == "vigil_kafka_broker_requests_total") {
        // One sample per API and result (ok, error, unavailable): summed per API.
        if let Some(api) = sample.label("api") {
            *by_api.entry(api.to_owned()).or_default() += sample.value as u64;
        }
    }
    Ok((by_api.values().sum(), by_api))
}
