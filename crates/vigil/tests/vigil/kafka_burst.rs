//! `vigil run` SIGKILLed twice during a burst of 200 Topic creates and deletes: after the last
//! restart the broker holds exactly the topics whose objects exist — none leaked by a create the
//! crash interrupted, none missing — and every deleted object is gone.
//!
//! Needs a Kafka-protocol broker (`VIGIL_TEST_KAFKA_BOOTSTRAP`, from `.ci/kafka-broker start`);
//! without one it says so and passes. Topics carry a prefix unique to the run.

use crate::support;

use support::{Proc, client, spawn_sandbox};

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use vigil_apis::Topic;
use vigil_kafka::{Admin, ClientConfig};

const NS: &str = "kafkaburst";
const TOPICS: usize = 200;
const WORKERS: usize = 4;
/// Operations (creates and deletes) after which the operator is killed, and restarted.
const KILL_AT: [usize; 2] = [90, 200];
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// Until the operators' shared log shows `count` starts (`vigil running`).
async fn wait_started(log: &Path, count: usize) {
    let started = Instant::now();
    loop {
        let starts = std::fs::read_to_string(log)
            .unwrap_or_default()
            .matches("vigil running")
            .count();
        if starts >= count {
            return;
        }
        assert!(
            started.elapsed() < SETTLE_TIMEOUT,
            "operator start {count} not logged within {SETTLE_TIMEOUT:?}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn spawn_operator(kubeconfig: &Path, log: &Path) -> Proc {
    let log = File::options()
        .create(true)
        .append(true)
        .open(log)
        .expect("operator log file");
    let child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .env("POD_NAME", "vigil-kafka-burst")
        .env("POD_NAMESPACE", NS)
        .args(["run", "--leader-elect", "false", "--namespaces", NS])
        .args(["--controllers", "kafkatopic", "--kafka-retry-max", "2s"])
        .args(["--metrics-addr", "127.0.0.1:0", "--kubeconfig"])
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

fn kafka_name(prefix: &str, i: usize) -> String {
    format!("{prefix}.t{i}")
}

/// Whether topic `i` is deleted again in the burst (a deterministic third of them, some at once
/// after their create, some later).
fn deleted(i: usize) -> bool {
    i % 3 == 1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_during_a_burst_leaves_exactly_the_declared_topics() {
    let Ok(bootstrap) = std::env::var("VIGIL_TEST_KAFKA_BOOTSTRAP") else {
        eprintln!(
            "note: VIGIL_TEST_KAFKA_BOOTSTRAP not set; skipping (eval \"$(.ci/kafka-broker start)\")"
        );
        return;
    };
    let dir = tempfile_dir();
    let kubeconfig = dir.join("kubeconfig");
    let log = dir.join("operator.log");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    let prefix = dir
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("vigil-kafka-burst")
        .to_owned();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).expect("ns"),
        )
        .await
        .expect("namespace");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &vigil_apis::crds::topic())
        .await
        .expect("crd");
    let topics: Api<Topic> = Api::namespaced(client.clone(), NS);
    let started = Instant::now();
    while topics.list(&ListParams::default()).await.is_err() {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "CRD not served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let mut operator = spawn_operator(&kubeconfig, &log);
    let ops = Arc::new(AtomicUsize::new(0));
    let mut workers = Vec::new();
    for w in 0..WORKERS {
        let topics = topics.clone();
        let ops = ops.clone();
        let prefix = prefix.clone();
        let bootstrap = bootstrap.clone();
        workers.push(tokio::spawn(async move {
            let mut later = Vec::new();
            for i in (w..TOPICS).step_by(WORKERS) {
                let topic: Topic = serde_json::from_value(serde_json::json!({
                    "apiVersion": "kafka.vigil.dev/v1alpha1", "kind": "Topic",
                    "metadata": {"name": format!("t{i}")},
                    "spec": {"topicName": kafka_name(&prefix, i), "partitions": 1 + (i % 3) as i32,
                             "config": {"retention.ms": format!("{}", 60_000 + i)},
                             "cluster": {"bootstrapServers": [bootstrap]}},
                }))
                .expect("topic");
                topics
                    .create(&PostParams::default(), &topic)
                    .await
                    .expect("create Topic");
                ops.fetch_add(1, Ordering::SeqCst);
                if deleted(i) {
                    if i % 2 == 0 {
                        later.push(i);
                    } else {
                        // Soon after the create, often while it is in flight.
                        tokio::time::sleep(Duration::from_millis(5 * (i % 7) as u64)).await;
                        delete(&topics, i).await;
                        ops.fetch_add(1, Ordering::SeqCst);
                    }
                }
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
            for i in later {
                delete(&topics, i).await;
                ops.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(3)).await;
            }
        }));
    }
    for (kills, kill_at) in KILL_AT.into_iter().enumerate() {
        while ops.load(Ordering::SeqCst) < kill_at && !workers.iter().all(|w| w.is_finished()) {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        // The kill must hit a running operator: on a loaded machine the one started after the
        // previous kill may not be up yet when the burst reaches the next kill point.
        wait_started(&log, kills + 1).await;
        drop(operator); // SIGKILL
        tokio::time::sleep(Duration::from_millis(100)).await;
        operator = spawn_operator(&kubeconfig, &log);
    }
    for w in workers {
        w.await.expect("worker");
    }

    let expected: BTreeSet<String> = (0..TOPICS)
        .filter(|i| !deleted(*i))
        .map(|i| kafka_name(&prefix, i))
        .collect();
    let admin = Admin::new(ClientConfig::plaintext(bootstrap.clone()));
    let started = Instant::now();
    loop {
        let objects = topics.list(&ListParams::default()).await.expect("list");
        let names: BTreeSet<String> = objects.items.iter().map(|t| t.topic_name()).collect();
        let ready = objects
            .items
            .iter()
            .filter(|t| {
                t.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Ready" && c.status == "True")
                })
            })
            .count();
        let in_kafka: BTreeSet<String> = admin
            .list_topics()
            .await
            .expect("list topics")
            .into_keys()
            .filter(|n| n.starts_with(&format!("{prefix}.")))
            .collect();
        if names == expected && in_kafka == expected && ready == expected.len() {
            eprintln!(
                "settled {:?} after the burst: {} objects, all Ready; the broker holds exactly their {} topics",
                started.elapsed(),
                names.len(),
                in_kafka.len()
            );
            break;
        }
        let leaked: Vec<_> = in_kafka.difference(&expected).collect();
        let missing: Vec<_> = expected.difference(&in_kafka).collect();
        let last = format!(
            "{} objects ({} expected, {ready} ready); broker: {} topics, leaked {leaked:?}, missing {missing:?}",
            names.len(),
            expected.len(),
            in_kafka.len()
        );
        if started.elapsed() > SETTLE_TIMEOUT {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            panic!(
                "did not settle: {last}\noperator log (last lines, newest first):\n{}",
                tail.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    drop(operator);
    let starts = std::fs::read_to_string(&log)
        .unwrap_or_default()
        .matches("vigil running")
        .count();
    assert_eq!(
        starts,
        1 + KILL_AT.len(),
        "the operator was killed and restarted"
    );
    for name in expected {
        let _ = admin.delete_topic(&name).await;
    }
    // Kept on failure (the panics above), for the log; removed on success.
    let _ = std::fs::remove_dir_all(&dir);
}

async fn delete(topics: &Api<Topic>, i: usize) {
    match topics
        .delete(&format!("t{i}"), &DeleteParams::default())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => {}
        Err(e) => panic!("delete Topic t{i}: {e}"),
    }
}

/// A fresh directory under the system's temporary directory.
fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "vigil-kafka-burst-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}
