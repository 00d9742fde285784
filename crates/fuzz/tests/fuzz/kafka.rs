//! Fuzz target `kafka`: the Kafka admin client's framing and response decoding, fed what a broker
//! could send.
//!
//! An input is one byte choosing the call (`CALLS`, and SASL PLAIN or not), then the bytes a
//! broker sends on the connection: length-prefixed frames, each a response header (correlation
//! id) and body, starting with the `ApiVersions` answer. A fake broker on loopback writes them to
//! a fresh [`Admin`] making that call (a new connection numbers its requests from 1, so a recorded
//! conversation replays exactly) and closes. The client must return — a value or an error, never a
//! panic — within its own timeout.
//!
//! The corpus is real conversations recorded between the client and the brokers CI runs
//! (`capture_corpus`, below); the generators mutate them as bytes, and also mutate one frame's
//! body while keeping every length prefix and correlation id right, which takes the input past the
//! framing checks into the message decoders.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use vigil_fuzz::proptest::prelude::*;
use vigil_kafka::{Admin, ClientConfig, ConfigChange, SaslConfig, SaslMechanism};

const TARGET: &str = "kafka";
/// The topic every call names (the captures were made with it).
const TOPIC: &str = "vigil-fuzz-capture";
/// The admin calls, by the first byte of an input modulo their number.
const CALLS: &[&str] = &[
    "describe_topics",
    "list_topics",
    "describe_configs",
    "create_topic",
    "create_partitions",
    "alter_configs",
    "delete_topic",
];

/// Which call and whether with SASL PLAIN, from an input's first byte.
fn decode_selector(byte: u8) -> (usize, bool) {
    let calls = CALLS.len() as u8;
    (usize::from(byte % calls), (byte / calls) % 2 == 1)
}

fn selector(call: usize, plain: bool) -> u8 {
    call as u8 + if plain { CALLS.len() as u8 } else { 0 }
}

fn config(bootstrap: String, plain: bool) -> ClientConfig {
    ClientConfig {
        bootstrap: vec![bootstrap],
        tls: None,
        sasl: plain.then(|| SaslConfig {
            mechanism: SaslMechanism::Plain,
            username: "fuzz".into(),
            password: "fuzz".into(),
        }),
        timeout: Duration::from_secs(1),
    }
}

/// Makes call `call`; its result, reduced to a line.
async fn call(admin: &Admin, call: usize) -> String {
    let topic = vec![TOPIC.to_owned()];
    let result = match call {
        0 => admin
            .describe_topics(&topic)
            .await
            .map(|t| format!("{t:?}")),
        1 => admin.list_topics().await.map(|t| format!("{t:?}")),
        2 => admin
            .describe_configs(&topic)
            .await
            .map(|c| format!("{c:?}")),
        3 => {
            let configs = BTreeMap::from([("retention.ms".to_owned(), "3600000".to_owned())]);
            admin.create_topic(TOPIC, 2, 1, &configs).await
        }
        4 => admin
            .create_partitions(TOPIC, 3)
            .await
            .map(|()| "ok".into()),
        5 => admin
            .alter_configs(
                TOPIC,
                &[
                    ConfigChange::Set("retention.ms".into(), "7200000".into()),
                    ConfigChange::Delete("cleanup.policy".into()),
                ],
            )
            .await
            .map(|()| "ok".into()),
        _ => admin.delete_topic(TOPIC).await.map(|()| "ok".into()),
    };
    match result {
        Ok(v) => format!("ok: {v}"),
        Err(e) => format!("error: {e}"),
    }
}

struct FakeBroker {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
}

impl FakeBroker {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        Self { runtime, listener }
    }

    /// One input: the call it selects, answered with its bytes.
    fn check(&self, input: &[u8]) -> Result<(), String> {
        let Some((&first, stream)) = input.split_first() else {
            return Ok(());
        };
        let (which, plain) = decode_selector(first);
        let addr = self.listener.local_addr().map_err(|e| e.to_string())?;
        self.runtime.block_on(async {
            let stream = stream.to_vec();
            let serve = async {
                let (mut socket, _) = self.listener.accept().await?;
                // Everything at once, then the end of the stream: a client waiting for more
                // bytes than the input holds meets EOF rather than its timeout.
                let _ = socket.write_all(&stream).await;
                let _ = socket.shutdown().await;
                let mut sink = [0u8; 4096];
                while socket.read(&mut sink).await.unwrap_or(0) > 0 {}
                Ok::<_, std::io::Error>(())
            };
            let client = async {
                let admin = Admin::new(config(addr.to_string(), plain));
                let outcome = call(&admin, which).await;
                drop(admin);
                outcome
            };
            let both = async { tokio::join!(serve, client) };
            match tokio::time::timeout(Duration::from_secs(5), both).await {
                Ok((_, _outcome)) => Ok(()),
                Err(_) => Err(format!(
                    "{} did not return within 5 s (its timeout is 1 s)",
                    CALLS[which]
                )),
            }
        })
    }
}

/// Splits a broker stream into its frames' bodies; `None` unless it is exactly whole frames.
fn frames(stream: &[u8]) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    let mut rest = stream;
    while !rest.is_empty() {
        let len = u32::from_be_bytes(rest.get(..4)?.try_into().ok()?) as usize;
        out.push(rest.get(4..4 + len)?.to_vec());
        rest = &rest[4 + len..];
    }
    Some(out)
}

fn reframe(selector: u8, frames: &[Vec<u8>]) -> Vec<u8> {
    let mut out = vec![selector];
    for body in frames {
        out.extend_from_slice(&(body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
    }
    out
}

/// Recorded conversations with one frame's body (after its correlation id) mutated, every
/// length prefix and correlation id kept right.
fn framed_mutations() -> BoxedStrategy<Vec<u8>> {
    let conversations: Vec<(u8, Vec<Vec<u8>>)> = vigil_fuzz::corpus(TARGET)
        .into_iter()
        .filter_map(|seed| {
            let (&first, stream) = seed.bytes.split_first()?;
            Some((first, frames(stream)?))
        })
        .collect();
    assert!(
        !conversations.is_empty(),
        "no well-framed conversation in the corpus"
    );
    let bodies: Vec<Vec<u8>> = conversations.iter().flat_map(|(_, f)| f.clone()).collect();
    (
        0..conversations.len(),
        any::<usize>(),
        vigil_fuzz::mutations(),
    )
        .prop_map(move |(index, frame, mutations)| {
            let (selector, mut frames) = conversations[index].clone();
            let frame = frame % frames.len().max(1);
            if let Some(body) = frames.get_mut(frame)
                && body.len() >= 4
            {
                let mut tail = body.split_off(4);
                mutations.apply(&mut tail, &bodies, &[]);
                body.extend_from_slice(&tail);
            }
            reframe(selector, &frames)
        })
        .boxed()
}

#[test]
fn kafka_responses_never_panic_the_client() {
    let broker = FakeBroker::new();
    let generated = prop_oneof![
        3 => vigil_fuzz::corpus_and_random(TARGET, &[]),
        5 => framed_mutations(),
    ];
    vigil_fuzz::fuzz(TARGET, generated, |input| broker.check(input));
}

/// Every call's recorded conversation decodes to a success (the corpus really is what a broker
/// answers, and the replay harness really reaches the decoders).
#[test]
fn recorded_conversations_replay_to_the_recorded_outcome() {
    let broker = FakeBroker::new();
    let mut calls_seen = std::collections::BTreeSet::new();
    for seed in vigil_fuzz::corpus(TARGET) {
        if seed.name.starts_with("crash-") {
            continue;
        }
        let (which, plain) = decode_selector(seed.bytes[0]);
        let addr = broker.listener.local_addr().expect("addr");
        let outcome = broker.runtime.block_on(async {
            let stream = seed.bytes[1..].to_vec();
            let serve = async {
                let (mut socket, _) = broker.listener.accept().await.expect("accept");
                socket.write_all(&stream).await.expect("write");
                let _ = socket.shutdown().await;
                let mut sink = [0u8; 4096];
                while socket.read(&mut sink).await.unwrap_or(0) > 0 {}
            };
            let client = async {
                let admin = Admin::new(config(addr.to_string(), plain));
                call(&admin, which).await
            };
            tokio::join!(serve, client).1
        });
        let expected_error = seed.name.contains("-error-");
        assert_eq!(
            outcome.starts_with("error"),
            expected_error,
            "{}: {outcome}",
            seed.name
        );
        calls_seen.insert(CALLS[which]);
    }
    assert_eq!(
        calls_seen.len(),
        CALLS.len(),
        "calls recorded: {calls_seen:?}"
    );
}

/// Found by this target: an `ApiVersions` answer declaring 2^31 - 1 API keys made kafka-protocol
/// ask for a 64 GiB `Vec` before decoding one, and the failed allocation aborted the process. It
/// is a protocol error now (the patched copy in vendor/kafka-protocol).
#[test]
fn an_array_of_two_billion_elements_is_refused_not_allocated() {
    let broker = FakeBroker::new();
    let input = vigil_fuzz::corpus_file(TARGET, "crash-array-length-2-31.bin");
    broker.check(&input).expect("answered");
    let (which, plain) = decode_selector(input[0]);
    let addr = broker.listener.local_addr().expect("addr");
    let outcome = broker.runtime.block_on(async {
        let serve = async {
            let (mut socket, _) = broker.listener.accept().await.expect("accept");
            socket.write_all(&input[1..]).await.expect("write");
            let _ = socket.shutdown().await;
            let mut sink = [0u8; 4096];
            while socket.read(&mut sink).await.unwrap_or(0) > 0 {}
        };
        let client = async { call(&Admin::new(config(addr.to_string(), plain)), which).await };
        tokio::join!(serve, client).1
    });
    assert!(
        outcome.starts_with("error") && outcome.contains("Array length 2147483646 exceeds"),
        "{outcome}"
    );
}

/// Records the corpus from a real broker: `VIGIL_FUZZ_CAPTURE=1` with a broker from
/// `.ci/kafka-broker start` (`VIGIL_TEST_KAFKA_BOOTSTRAP`, `VIGIL_TEST_KAFKA_BROKER`), then
/// `cargo test -p vigil-fuzz --test fuzz kafka::capture_corpus -- --ignored`. A proxy between a fresh
/// client and the broker keeps what the broker sent, one file per call:
/// `<broker>-<call>[-plain][-error-<what>].bin`.
#[test]
#[ignore = "records the corpus from a real broker; see its doc"]
fn capture_corpus() {
    let (Ok(bootstrap), Ok(_)) = (
        std::env::var("VIGIL_TEST_KAFKA_BOOTSTRAP"),
        std::env::var("VIGIL_FUZZ_CAPTURE"),
    ) else {
        eprintln!("set VIGIL_FUZZ_CAPTURE=1 and VIGIL_TEST_KAFKA_BOOTSTRAP");
        return;
    };
    let broker = std::env::var("VIGIL_TEST_KAFKA_BROKER").unwrap_or_else(|_| "broker".into());
    let plain_too = std::env::var("VIGIL_TEST_KAFKA_SASL").is_ok_and(|s| s.contains("PLAIN"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = proxy.local_addr().expect("addr").to_string();
        let record = |which: usize, plain: bool, name: String| {
            let proxy = &proxy;
            let bootstrap = bootstrap.clone();
            let addr = addr.clone();
            async move {
                let relay = async {
                    let (mut client, _) = proxy.accept().await.expect("accept");
                    let mut upstream = tokio::net::TcpStream::connect(&bootstrap)
                        .await
                        .expect("broker");
                    let mut recorded = Vec::new();
                    let mut from_client = vec![0u8; 65536];
                    let mut from_broker = vec![0u8; 65536];
                    loop {
                        tokio::select! {
                            n = client.read(&mut from_client) => match n {
                                Ok(0) | Err(_) => break,
                                Ok(n) => upstream.write_all(&from_client[..n]).await.expect("relay"),
                            },
                            n = upstream.read(&mut from_broker) => match n {
                                Ok(0) | Err(_) => break,
                                Ok(n) => {
                                    recorded.extend_from_slice(&from_broker[..n]);
                                    client.write_all(&from_broker[..n]).await.expect("relay");
                                }
                            },
                        }
                    }
                    recorded
                };
                let client = async {
                    let admin = Admin::new(config(addr, plain));
                    let outcome = call(&admin, which).await;
                    drop(admin);
                    outcome
                };
                let (recorded, outcome) = tokio::join!(relay, client);
                eprintln!("{name}: {outcome}");
                // Refusals are named so (the replay test expects an error from them).
                let name = if outcome.starts_with("error") && !name.contains("-error-") {
                    name.replace(".bin", "-error-refused.bin")
                } else {
                    name
                };
                let mut file = vec![selector(which, plain)];
                file.extend_from_slice(&recorded);
                vigil_fuzz::save_to_corpus(TARGET, &name, &file);
            }
        };
        // A lifecycle, so that each call meets the topic in the state it expects; then the
        // refusals a broker answers with error codes.
        let _ = Admin::new(ClientConfig::plaintext(bootstrap.clone()))
            .delete_topic(TOPIC)
            .await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        record(6, false, format!("{broker}-delete_topic-absent.bin")).await;
        record(0, false, format!("{broker}-describe_topics-absent.bin")).await;
        record(3, false, format!("{broker}-create_topic.bin")).await;
        record(3, false, format!("{broker}-create_topic-error-exists.bin")).await;
        record(0, false, format!("{broker}-describe_topics.bin")).await;
        record(1, false, format!("{broker}-list_topics.bin")).await;
        record(2, false, format!("{broker}-describe_configs.bin")).await;
        record(5, false, format!("{broker}-alter_configs.bin")).await;
        record(4, false, format!("{broker}-create_partitions.bin")).await;
        if plain_too {
            record(0, true, format!("{broker}-describe_topics-plain.bin")).await;
        }
        record(6, false, format!("{broker}-delete_topic.bin")).await;
    });
}
