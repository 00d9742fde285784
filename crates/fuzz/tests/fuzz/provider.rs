//! Fuzz target `provider`: the external cluster provider's client (`vigil_provider::external`),
//! fed what a provider's HTTP server could answer.
//!
//! An input is one byte choosing the call (`CALLS`), the answer's status code (two bytes, big
//! endian, sent as its last three decimal digits) and the answer's body. A fake server on loopback
//! answers the client's request with them in a well-formed HTTP/1.1 response (HTTP framing itself
//! is hyper's, fuzzed upstream). Besides never panicking, the client keeps the protocol's
//! contract on any answer: `5xx`, `408` and `429` are `Unavailable` (retried), a `2xx` body that
//! is not the protocol's JSON is `Unavailable`, and `find` never returns a cluster of another
//! identity, whatever the server lists.
//!
//! The corpus is the reference provider's real answers to each call (`capture_corpus`).

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpListener;
use vigil_fuzz::proptest::prelude::*;
use vigil_provider::external::{ExternalConfig, ExternalProvider};
use vigil_provider::{Addon, ClusterIdentity, ClusterProvider, ClusterRequest, ProviderError};

const TARGET: &str = "provider";
const CALLS: &[&str] = &[
    "find",
    "create",
    "get",
    "upgrade",
    "set_addons",
    "delete",
    "catalog",
];

fn identity() -> ClusterIdentity {
    ClusterIdentity {
        uuid: "aaa692e5-e6ce-4f19-ad20-6491ca74067c".into(),
        name: "fuzz".into(),
    }
}

fn request() -> ClusterRequest {
    ClusterRequest {
        identity: identity(),
        type_: "iks".into(),
        env: "test".into(),
        kube_version: "1.28".into(),
        os_version: "UBUNTU_20_64".into(),
        product_name: "fuzz".into(),
        product_short_name: "fz".into(),
        addons: vec![Addon {
            name: "ingress-nginx".into(),
            version: "1.9.4".into(),
        }],
        labels: Default::default(),
    }
}

/// Makes call `which` with cluster id `id`; `Err` if the result breaks the contract.
async fn call(
    provider: &ExternalProvider,
    which: usize,
    id: &str,
    status: u16,
) -> Result<String, String> {
    let transient = (500..600).contains(&status) || status == 408 || status == 429;
    let outcome: Result<String, ProviderError> = match which {
        0 => {
            let found = provider.find(&identity()).await;
            if let Ok(Some(cluster)) = &found
                && cluster.identity != identity()
            {
                return Err(format!(
                    "find returned another identity's cluster: {cluster:?}"
                ));
            }
            found.map(|c| format!("{c:?}"))
        }
        1 => provider.create(&request()).await.map(|c| format!("{c:?}")),
        2 => provider.get(id).await.map(|c| format!("{c:?}")),
        3 => provider.upgrade(id, "1.29").await.map(|c| format!("{c:?}")),
        4 => provider
            .set_addons(
                id,
                &[Addon {
                    name: "metrics-server".into(),
                    version: "0.7.0".into(),
                }],
            )
            .await
            .map(|c| format!("{c:?}")),
        5 => provider.delete(id).await.map(|d| format!("{d:?}")),
        _ => provider.catalog().await.map(|c| format!("{c:?}")),
    };
    match outcome {
        Err(ProviderError::Unavailable(_)) => Ok("unavailable".into()),
        Err(e) if transient => Err(format!(
            "{} answered {status}: {e:?}, not Unavailable",
            CALLS[which]
        )),
        Ok(v) if transient => Err(format!(
            "{} answered {status} was taken as a success: {v}",
            CALLS[which]
        )),
        Ok(v) => Ok(v),
        Err(e) => Ok(format!("{e:?}")),
    }
}

/// Reads one request (head and `Content-Length` body) from `socket`.
async fn read_request(socket: &mut tokio::net::TcpStream) -> std::io::Result<()> {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let n = socket.read(&mut chunk).await?;
        if n == 0 {
            return Ok(());
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
                return Ok(());
            }
        }
    }
}

struct FakeProvider {
    runtime: tokio::runtime::Runtime,
    listener: TcpListener,
    client: ExternalProvider,
}

impl FakeProvider {
    fn new() -> Self {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let mut config = ExternalConfig::new(format!("http://{addr}"));
        config.timeout = Duration::from_secs(2);
        let client = {
            let _guard = runtime.enter();
            ExternalProvider::new(config).expect("client")
        };
        Self {
            runtime,
            listener,
            client,
        }
    }

    fn check(&self, input: &[u8]) -> Result<(), String> {
        let (Some(&first), Some(status)) = (input.first(), input.get(1..3)) else {
            return Ok(());
        };
        let which = usize::from(first) % CALLS.len();
        let status = u16::from_be_bytes([status[0], status[1]]) % 1000;
        let body = input[3..].to_vec();
        self.runtime.block_on(async {
            let serve = async {
                let (mut socket, _) = self.listener.accept().await?;
                read_request(&mut socket).await?;
                let head = format!(
                    "HTTP/1.1 {status:03} Fuzz\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                socket.write_all(head.as_bytes()).await?;
                socket.write_all(&body).await?;
                socket.shutdown().await?;
                Ok::<_, std::io::Error>(())
            };
            let client = call(&self.client, which, "c-0001", status);
            match tokio::time::timeout(Duration::from_secs(5), async {
                tokio::join!(serve, client)
            })
            .await
            {
                Ok((_, outcome)) => outcome.map(drop),
                Err(_) => Err(format!("{} did not return within 5 s", CALLS[which])),
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
fn provider_answers_never_panic_and_keep_the_contract() {
    let fake = FakeProvider::new();
    let generated = prop_oneof![
        4 => vigil_fuzz::corpus_and_random(TARGET, vigil_fuzz::JSON_TOKENS),
        1 => any_status(),
    ];
    vigil_fuzz::fuzz(TARGET, generated, |input| fake.check(input));
}

/// Records the corpus from the reference provider (`VIGIL_FUZZ_CAPTURE=1 cargo test -p
/// vigil-fuzz --test fuzz provider::capture_corpus -- --ignored`): each call's real answer, through a
/// proxy, as `<call>[-<what>].bin`.
#[test]
#[ignore = "records the corpus; see its doc"]
fn capture_corpus() {
    use vigil_provider_reference::{ReferenceConfig, ReferenceProvider};
    if std::env::var("VIGIL_FUZZ_CAPTURE").is_err() {
        eprintln!("set VIGIL_FUZZ_CAPTURE=1");
        return;
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let reference = ReferenceProvider::start(ReferenceConfig::default())
            .await
            .expect("reference");
        let upstream = reference.addr();
        let proxy = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", proxy.local_addr().expect("addr"));
        // One call through the proxy on a fresh client (so a fresh connection); the answer.
        let record = |which: usize, id: String, name: &'static str| {
            let proxy = &proxy;
            let url = url.clone();
            async move {
                let relay = async {
                    let (mut client, _) = proxy.accept().await.expect("accept");
                    let mut server = tokio::net::TcpStream::connect(upstream)
                        .await
                        .expect("reference");
                    let mut request = Vec::new();
                    let mut chunk = vec![0u8; 65536];
                    // The request: its head, then its body by Content-Length.
                    loop {
                        let n = client.read(&mut chunk).await.expect("read");
                        request.extend_from_slice(&chunk[..n]);
                        let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") else {
                            continue;
                        };
                        let head = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
                        let length: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .and_then(|v| v.trim().parse().ok())
                            .unwrap_or(0);
                        if request.len() >= end + 4 + length {
                            break;
                        }
                    }
                    server.write_all(&request).await.expect("relay");
                    let mut answer = Vec::new();
                    loop {
                        let n = server.read(&mut chunk).await.expect("read");
                        answer.extend_from_slice(&chunk[..n]);
                        if let Some(end) = answer.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&answer[..end]).to_ascii_lowercase();
                            let length: usize = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse().ok())
                                .expect("content-length");
                            if answer.len() >= end + 4 + length || n == 0 {
                                break;
                            }
                        }
                        if n == 0 {
                            break;
                        }
                    }
                    client.write_all(&answer).await.expect("relay");
                    answer
                };
                let client = async {
                    let provider = ExternalProvider::new(ExternalConfig::new(url)).expect("client");
                    call(&provider, which, &id, 200).await
                };
                let (answer, outcome) = tokio::join!(relay, client);
                eprintln!("{name}: {outcome:?}");
                let text = String::from_utf8_lossy(&answer);
                let status: u16 = text
                    .get(9..12)
                    .and_then(|s| s.parse().ok())
                    .expect("status");
                let end = answer
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .expect("head");
                let mut file = vec![which as u8];
                file.extend_from_slice(&status.to_be_bytes());
                file.extend_from_slice(&answer[end + 4..]);
                vigil_fuzz::save_to_corpus(TARGET, &format!("{name}.bin"), &file);
            }
        };
        record(6, String::new(), "catalog").await;
        record(0, String::new(), "find-none").await;
        record(1, String::new(), "create").await;
        let provider = ExternalProvider::new(ExternalConfig::new(reference.url())).expect("client");
        let id = provider
            .find(&identity())
            .await
            .expect("find")
            .expect("created")
            .id;
        record(0, String::new(), "find").await;
        record(2, id.clone(), "get-provisioning").await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        record(2, id.clone(), "get-running").await;
        record(3, id.clone(), "upgrade").await;
        record(4, id.clone(), "set_addons").await;
        record(2, "c-missing".into(), "get-missing").await;
        record(3, "c-missing".into(), "upgrade-missing").await;
        record(5, id.clone(), "delete").await;
        tokio::time::sleep(Duration::from_millis(600)).await;
        record(5, id.clone(), "delete-gone").await;
        reference.shutdown().await;
    });
}
