//! Fuzz target `s3`: the status vault's S3 backend (`vigil_vault::S3Backend`) fed what an
//! S3-compatible server could answer — rusty-s3's `ListObjectsV2` XML parsing, the backend's own
//! paging and its reading of S3 error documents. (The module is `vault_s3`: the vault crate's own
//! S3 tests are its module `s3`.)
//!
//! An input is one byte choosing the call (`CALLS`), the answer's status code (two bytes, big
//! endian, sent as its last three decimal digits) and the answer's body. A fake server on loopback
//! answers every request of the call with them, in a well-formed HTTP/1.1 response (HTTP framing
//! is hyper's, fuzzed upstream). Besides never panicking, the backend keeps its contract on any
//! answer: a call returns within 5 s (a server repeating a listing's continuation token must not
//! hold it forever), an answer that is not a 2xx is never a success, and what `keys` and
//! `versions` return is only what the vault's layout allows, in order.
//!
//! The corpus is the project's moto S3 server's real answers to each call (`capture_corpus`).

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use vigil_fuzz::proptest::prelude::*;
use vigil_vault::{Backend, ObjectKey, S3Backend};

const TARGET: &str = "s3";
const CALLS: &[&str] = &["keys", "versions", "read", "check", "write", "remove"];
const BUCKET: &str = "vigil-fuzz";
const PREFIX: &str = "vault";

const XML_TOKENS: &[&[u8]] = &[
    b"<",
    b">",
    b"</",
    b"/>",
    b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>",
    b"<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">",
    b"</ListBucketResult>",
    b"<Contents>",
    b"</Contents>",
    b"<Key>",
    b"</Key>",
    b"<Size>",
    b"</Size>",
    b"<Size>18446744073709551615</Size>",
    b"<Size>-1</Size>",
    b"<LastModified>",
    b"<ETag>",
    b"<IsTruncated>true</IsTruncated>",
    b"<NextContinuationToken>",
    b"</NextContinuationToken>",
    b"<KeyCount>",
    b"<Error><Code>",
    b"</Code><Message>",
    b"</Message></Error>",
    b"NoSuchBucket",
    b"SlowDown",
    b"&amp;",
    b"&lt;",
    b"&#x0;",
    b"&#1114112;",
    b"<![CDATA[",
    b"]]>",
    b"<!DOCTYPE a [<!ENTITY b \"c\">]>",
    b"&b;",
    b"vault/infra.example.com/KubernetesCluster/team-a/db/",
    b"0000000001.json",
    b"/",
    b"%2F",
    b"\xc3\xa9",
    b"\xff",
];

fn object() -> ObjectKey {
    ObjectKey::new(
        "infra.example.com",
        "KubernetesCluster",
        Some("team-a"),
        "db",
    )
}

/// Makes call `which`; `Err` if the outcome breaks the contract.
async fn call(backend: &S3Backend, which: usize, status: u16) -> Result<String, String> {
    let success = (200..300).contains(&status);
    let outcome = match which {
        0 => backend.keys().await.map(|keys| {
            let mut sorted = keys.clone();
            sorted.sort();
            sorted.dedup();
            (sorted == keys)
                .then(|| format!("{} keys", keys.len()))
                .ok_or_else(|| format!("keys not sorted and unique: {keys:?}"))
        }),
        1 => backend.versions(&object()).await.map(|versions| {
            versions
                .windows(2)
                .all(|w| w[0].version <= w[1].version)
                .then(|| format!("{} versions", versions.len()))
                .ok_or_else(|| format!("versions out of order: {versions:?}"))
        }),
        2 => backend
            .read(&object(), 1)
            .await
            .map(|bytes| Ok(format!("{} bytes", bytes.len()))),
        3 => backend.check().await.map(|()| Ok("checked".into())),
        4 => backend
            .write(&object(), 1, b"{}".to_vec())
            .await
            .map(|()| Ok("written".into())),
        _ => backend
            .remove(&object(), 1)
            .await
            .map(|()| Ok("removed".into())),
    };
    match outcome {
        Ok(_) if !success => Err(format!(
            "{} answered {status} was taken as a success",
            CALLS[which]
        )),
        Ok(checked) => checked,
        Err(e) => Ok(e.to_string()),
    }
}

/// Reads one request (head and `Content-Length` body) from `socket`.
async fn read_request(socket: &mut tokio::net::TcpStream) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(buf);
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + length {
                return Ok(buf);
            }
        }
    }
}

fn location(addr: std::net::SocketAddr) -> String {
    format!("s3://{BUCKET}/{PREFIX}?endpoint=http://{addr}&region=us-east-1")
}

struct FakeS3 {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    backend: S3Backend,
}

impl FakeS3 {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let backend = {
            let _guard = runtime.enter();
            S3Backend::new(&location(addr)).expect("backend")
        };
        Self {
            runtime,
            listener,
            backend,
        }
    }

    fn check(&self, input: &[u8]) -> Result<(), String> {
        let (Some(&first), Some(status)) = (input.first(), input.get(1..3)) else {
            return Ok(());
        };
        let which = usize::from(first) % CALLS.len();
        let status = u16::from_be_bytes([status[0], status[1]]) % 1000;
        let body = &input[3..];
        self.runtime.block_on(async {
            // Every request of the call gets the same answer, on a connection of its own.
            let serve = async {
                loop {
                    let Ok((mut socket, _)) = self.listener.accept().await else {
                        continue;
                    };
                    let Ok(request) = read_request(&mut socket).await else {
                        continue;
                    };
                    let head = format!(
                        "HTTP/1.1 {status:03} Fuzz\r\ncontent-type: application/xml\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    if !request.starts_with(b"HEAD ") {
                        let _ = socket.write_all(body).await;
                    }
                    let _ = socket.shutdown().await;
                }
            };
            let client = call(&self.backend, which, status);
            tokio::select! {
                outcome = tokio::time::timeout(Duration::from_secs(5), client) => match outcome {
                    Ok(outcome) => outcome.map(drop),
                    Err(_) => Err(format!("{} did not return within 5 s", CALLS[which])),
                },
                () = serve => unreachable!("the fake server serves until the call returns"),
            }
        })
    }
}

/// Recorded answers with the status changed to any code, the body kept.
fn any_status() -> BoxedStrategy<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = vigil_fuzz::corpus(TARGET)
        .into_iter()
        .map(|s| s.bytes)
        .filter(|b| b.len() >= 3)
        .collect();
    (0..seeds.len(), 100u16..600, any::<u8>())
        .prop_map(move |(index, status, call)| {
            let mut input = seeds[index].clone();
            input[0] = call;
            input[1..3].copy_from_slice(&status.to_be_bytes());
            input
        })
        .boxed()
}

#[test]
fn s3_answers_never_panic_and_keep_the_contract() {
    let fake = FakeS3::new();
    let generated = prop_oneof![
        4 => vigil_fuzz::corpus_and_random(TARGET, XML_TOKENS),
        1 => any_status(),
    ];
    vigil_fuzz::fuzz(TARGET, generated, |input| fake.check(input));
}

/// The corpus gets past the parsers: the captured listings list what the capture stored.
#[test]
fn captured_listings_are_read_whole() {
    let fake = FakeS3::new();
    for seed in vigil_fuzz::corpus(TARGET) {
        let Some(expected) = seed
            .name
            .strip_prefix("keys-")
            .or_else(|| seed.name.strip_prefix("versions-"))
            .and_then(|rest| rest.split('-').next())
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let status = u16::from_be_bytes([seed.bytes[1], seed.bytes[2]]);
        let which = usize::from(seed.bytes[0]) % CALLS.len();
        let got = fake.runtime.block_on(async {
            let serve = async {
                loop {
                    let (mut socket, _) = fake.listener.accept().await.expect("accept");
                    read_request(&mut socket).await.expect("request");
                    let body = &seed.bytes[3..];
                    let head = format!(
                        "HTTP/1.1 {status:03} OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    socket.write_all(head.as_bytes()).await.expect("head");
                    socket.write_all(body).await.expect("body");
                    let _ = socket.shutdown().await;
                }
            };
            tokio::select! {
                got = call(&fake.backend, which, status) => got,
                () = serve => unreachable!(),
            }
        });
        let noun = if which == 0 { "keys" } else { "versions" };
        assert_eq!(got, Ok(format!("{expected} {noun}")), "{}", seed.name);
    }
}

/// A server that repeats a listing's continuation token would page forever: the listing is
/// refused instead (found by this target; the input is in the corpus as
/// `crash-repeated-continuation-token.bin`).
#[test]
fn a_repeated_continuation_token_ends_the_listing() {
    let fake = FakeS3::new();
    let input = vigil_fuzz::corpus_file(TARGET, "crash-repeated-continuation-token.bin");
    fake.check(&input).expect("returns, with an error");
}

/// Records the corpus from the project's moto server (`eval "$(.ci/s3-server start)"`, then
/// `VIGIL_FUZZ_CAPTURE=1 cargo test -p vigil-fuzz --test fuzz vault_s3::capture_corpus -- --ignored`): a
/// vault's real calls through a recording proxy, each answer as
/// `<call>[-<count>]-<what>-<n>.bin`.
#[test]
#[ignore = "records the corpus; see its doc"]
fn capture_corpus() {
    use std::sync::{Arc, Mutex};
    if std::env::var("VIGIL_FUZZ_CAPTURE").is_err() {
        eprintln!("set VIGIL_FUZZ_CAPTURE=1");
        return;
    }
    let endpoint = std::env::var("VIGIL_TEST_S3_ENDPOINT").expect("VIGIL_TEST_S3_ENDPOINT");
    let bucket = std::env::var("VIGIL_TEST_S3_BUCKET").unwrap_or_else(|_| "vigil-test".into());
    let upstream = endpoint
        .trim_start_matches("http://")
        .trim_end_matches('/')
        .to_owned();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = proxy.local_addr().expect("addr");
        /// Status and body of each answer, in order.
        type Answers = Arc<Mutex<Vec<(u16, Vec<u8>)>>>;
        let answers: Answers = Arc::default();
        let recorded = answers.clone();
        // One request per connection, relayed with `connection: close`; each answer recorded.
        tokio::spawn(async move {
            loop {
                let (mut client, _) = proxy.accept().await.expect("accept");
                let request = read_request(&mut client).await.expect("request");
                let end = request
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .expect("head");
                let head = String::from_utf8_lossy(&request[..end]);
                let mut relayed: String = head
                    .lines()
                    .filter(|l| !l.to_ascii_lowercase().starts_with("connection:"))
                    .map(|l| format!("{l}\r\n"))
                    .collect();
                relayed.push_str("connection: close\r\n\r\n");
                let mut server = tokio::net::TcpStream::connect(&upstream)
                    .await
                    .expect("moto");
                server.write_all(relayed.as_bytes()).await.expect("relay");
                server.write_all(&request[end + 4..]).await.expect("relay");
                let mut answer = Vec::new();
                server.read_to_end(&mut answer).await.expect("answer");
                client.write_all(&answer).await.expect("relay");
                let _ = client.shutdown().await;
                let text = String::from_utf8_lossy(&answer);
                let status: u16 = text
                    .get(9..12)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
                let split = answer
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .expect("head");
                // moto answers in one piece (Content-Length), so the body is what follows.
                recorded
                    .lock()
                    .expect("lock")
                    .push((status, answer[split + 4..].to_vec()));
            }
        });
        // The fuzz target's prefix, so that captured listings name what its backend looks for
        // (a fresh moto server holds nothing else under it).
        let location = |bucket: &str| {
            format!("s3://{bucket}/{PREFIX}?endpoint=http://{addr}&region=us-east-1")
        };
        let backend = S3Backend::new(&location(&bucket)).expect("backend");
        let take = |which: usize, what: &str| {
            let taken: Vec<(u16, Vec<u8>)> = std::mem::take(&mut *answers.lock().expect("lock"));
            for (n, (status, body)) in taken.into_iter().enumerate() {
                let mut file = vec![which as u8];
                file.extend_from_slice(&status.to_be_bytes());
                file.extend_from_slice(&body);
                vigil_fuzz::save_to_corpus(
                    TARGET,
                    &format!("{}-{what}-{n}.bin", CALLS[which]),
                    &file,
                );
            }
        };
        backend.check().await.expect("check");
        take(3, "ok");
        let other = ObjectKey::new("apps.bixbite.io", "ConfigMapSync", Some("ns"), "sync");
        for version in 1..=3 {
            backend
                .write(
                    &object(),
                    version,
                    format!("{{\"v\":{version}}}").into_bytes(),
                )
                .await
                .expect("write");
        }
        backend
            .write(&other, 1, b"{}".to_vec())
            .await
            .expect("write");
        take(4, "ok");
        let keys = backend.keys().await.expect("keys");
        take(0, &format!("{}-listing", keys.len()));
        let versions = backend.versions(&object()).await.expect("versions");
        take(1, &format!("{}-listing", versions.len()));
        let none = backend
            .versions(&ObjectKey::new("g", "K", None, "absent"))
            .await
            .expect("versions");
        take(1, &format!("{}-empty", none.len()));
        backend.read(&object(), 2).await.expect("read");
        take(2, "ok");
        let missing = backend.read(&object(), 9).await;
        assert!(missing.is_err(), "{missing:?}");
        take(2, "missing");
        for version in 1..=3 {
            backend.remove(&object(), version).await.expect("remove");
        }
        backend.remove(&other, 1).await.expect("remove");
        take(5, "ok");
        let gone = S3Backend::new(&location("no-such-bucket-vigil")).expect("backend");
        let error = gone.check().await.expect_err("no bucket");
        eprintln!("no bucket: {error}");
        take(3, "no-bucket");
        let error = gone.keys().await.expect_err("no bucket");
        eprintln!("no bucket: {error}");
        take(0, "no-bucket");
    });
}
