//! The external provider (HTTP client) against the reference server: the provider contract, and
//! what only a remote provider has — outages, lost answers, hangs, latency, restarts.

use std::sync::Arc;
use std::time::{Duration, Instant};

use vigil_provider::contract::{self, ContractHooks, ContractTiming};
use vigil_provider::external::{ExternalConfig, ExternalProvider};
use vigil_provider::{ClusterProvider, ClusterState, Deletion, ProviderError};
use vigil_provider_reference::{Faults, LoseMode, Outage, ReferenceConfig, ReferenceProvider};

const UUID: &str = "aaa692e5-e6ce-4f19-ad20-6491ca74067c";

fn fast() -> ReferenceConfig {
    ReferenceConfig {
        provision_time: Duration::from_millis(150),
        upgrade_time: Duration::from_millis(150),
        addon_time: Duration::from_millis(50),
        delete_time: Duration::from_millis(50),
        ..ReferenceConfig::default()
    }
}

async fn start(config: ReferenceConfig) -> (Arc<ReferenceProvider>, ExternalProvider) {
    let token = config.token.clone();
    let reference = ReferenceProvider::start(config)
        .await
        .expect("reference provider starts");
    let mut client = ExternalConfig::new(reference.url());
    client.token = token;
    client.timeout = Duration::from_secs(2);
    let external = ExternalProvider::new(client).expect("client");
    (Arc::new(reference), external)
}

struct Hooks(Arc<ReferenceProvider>);

impl ContractHooks for Hooks {
    fn refuse_deletes(&self, id: &str) {
        self.0.refuse_deletes(id);
    }
    fn allow_deletes(&self, id: &str) {
        self.0.allow_deletes(id);
    }
}

#[tokio::test]
async fn the_external_provider_keeps_the_contract() {
    let (reference, external) = start(fast()).await;
    let hooks = Hooks(reference.clone());
    contract::run_all(
        &external,
        &hooks,
        UUID,
        "contract",
        ("1.28", "1.29.2"),
        ContractTiming::default(),
    )
    .await
    .expect("contract");
    assert_eq!(reference.clusters_created(&format!("{UUID}/contract")), 1);
    assert!(reference.clusters().is_empty());
    let catalog = external.catalog().await.expect("catalog");
    assert!(
        catalog
            .addons
            .iter()
            .any(|a| a.name == "vpc-block-csi-driver")
    );
}

#[tokio::test]
async fn an_outage_is_unavailable_and_the_provider_answers_again_after_it() {
    let (reference, external) = start(fast()).await;
    let request = contract::request(UUID, "outage", "1.30", &[]);
    let cluster = external.create(&request).await.expect("create");
    for outage in [Outage::Unavailable, Outage::Reset] {
        reference.set_outage(Some(outage));
        for result in [
            external.get(&cluster.id).await.map(|_| ()),
            external.create(&request).await.map(|_| ()),
            external.delete(&cluster.id).await.map(|_| ()),
        ] {
            assert!(
                matches!(result, Err(ProviderError::Unavailable(_))),
                "{outage:?}: {result:?}"
            );
        }
        reference.set_outage(None);
        let back = external.get(&cluster.id).await.expect("get after outage");
        assert_eq!(back.map(|c| c.id), Some(cluster.id.clone()));
    }
    reference.set_error_rate(1.0);
    assert!(matches!(
        external.find(&request.identity).await,
        Err(ProviderError::Unavailable(m)) if m.contains("500")
    ));
    reference.clear_faults();
    assert_eq!(reference.clusters_created(&request.identity.key()), 1);
}

#[tokio::test]
async fn a_lost_create_answer_is_unavailable_and_the_retry_finds_the_first_cluster() {
    let (reference, external) = start(fast()).await;
    for (name, mode) in [
        ("lost-error", LoseMode::Error),
        ("lost-drop", LoseMode::Drop),
    ] {
        let request = contract::request(UUID, name, "1.30", &[("coredns", "1.11.3")]);
        reference.lose_next_creates(1, mode);
        let lost = external.create(&request).await;
        assert!(
            matches!(lost, Err(ProviderError::Unavailable(_))),
            "{mode:?}: {lost:?}"
        );
        let found = external
            .find(&request.identity)
            .await
            .expect("find")
            .expect("the lost create made a cluster");
        let retried = external.create(&request).await.expect("retried create");
        assert_eq!(retried.id, found.id);
        let key = request.identity.key();
        assert_eq!(reference.create_requests(&key), 2, "{mode:?}");
        assert_eq!(reference.clusters_created(&key), 1, "{mode:?}");
    }
    assert_eq!(reference.clusters().len(), 2);
}

#[tokio::test]
async fn a_hanging_provider_is_unavailable_within_the_client_timeout() {
    let reference = ReferenceProvider::start(fast()).await.expect("start");
    let mut config = ExternalConfig::new(reference.url());
    config.timeout = Duration::from_millis(300);
    let external = ExternalProvider::new(config).expect("client");
    reference.set_hang(Duration::from_secs(30));
    let started = Instant::now();
    let result = external.get("rc-anything").await;
    let took = started.elapsed();
    assert!(
        matches!(&result, Err(ProviderError::Unavailable(m)) if m.contains("no answer within")),
        "{result:?}"
    );
    assert!(took < Duration::from_millis(1_500), "took {took:?}");
    // A hanging request must not hold the server's shutdown.
    let stopping = Instant::now();
    reference.shutdown().await;
    assert!(stopping.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn latency_is_added_to_every_request_and_counted_per_endpoint() {
    let (reference, external) = start(fast()).await;
    reference.set_latency(Duration::from_millis(100));
    let request = contract::request(UUID, "slow", "1.30", &[]);
    let started = Instant::now();
    let cluster = external.create(&request).await.expect("create");
    external.get(&cluster.id).await.expect("get");
    external.find(&request.identity).await.expect("find");
    assert!(started.elapsed() >= Duration::from_millis(300));
    assert_eq!(reference.requests("create"), 1);
    assert_eq!(reference.requests("get"), 1);
    assert_eq!(reference.requests("find"), 1);
    assert_eq!(reference.total_requests(), 3);
    reference.reset_stats();
    assert_eq!(reference.total_requests(), 0);
}

#[tokio::test]
async fn a_token_is_required_when_configured() {
    let config = ReferenceConfig {
        token: Some("s3cret".into()),
        ..fast()
    };
    let (reference, external) = start(config).await;
    let request = contract::request(UUID, "authed", "1.30", &[]);
    external
        .create(&request)
        .await
        .expect("create with the token");
    let mut anonymous = ExternalConfig::new(reference.url());
    anonymous.token = Some("wrong".into());
    let anonymous = ExternalProvider::new(anonymous).expect("client");
    assert!(matches!(
        anonymous.find(&request.identity).await,
        Err(ProviderError::Rejected { reason, .. }) if reason == "Unauthorized"
    ));
}

#[tokio::test]
async fn clusters_survive_a_restart_of_the_reference_server_from_its_state_file() {
    let dir = std::env::temp_dir().join(format!("vigil-reference-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let state_file = dir.join("state.json");
    let config = ReferenceConfig {
        state_file: Some(state_file.clone()),
        ..fast()
    };
    let (reference, external) = start(config.clone()).await;
    let request = contract::request(UUID, "durable", "1.30", &[]);
    let cluster = external.create(&request).await.expect("create");
    drop(external);
    reference.shutdown().await;
    let (reference, external) = start(config).await;
    let running = contract::wait_for(
        &external,
        &cluster.id,
        ContractTiming::default(),
        "Running",
        |c| c.state == ClusterState::Running,
    )
    .await
    .expect("the cluster is back");
    assert_eq!(running.identity, request.identity);
    assert_eq!(
        external.create(&request).await.expect("create again").id,
        cluster.id
    );
    assert_eq!(reference.clusters_created(&request.identity.key()), 0);
    contract::delete_until_gone(&external, &cluster.id, ContractTiming::default())
        .await
        .expect("delete");
    assert_eq!(
        external.delete(&cluster.id).await.expect("delete again"),
        Deletion::Gone
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// One HTTP/1.1 request on a fresh connection, the way a test in another process would.
async fn raw(addr: std::net::SocketAddr, method: &str, path: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut stream = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: test\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.expect("write");
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.expect("read");
    answer
}

#[tokio::test]
async fn faults_and_stats_are_reachable_over_http_for_other_processes() {
    let (reference, external) = start(fast()).await;
    let answer = raw(
        reference.addr(),
        "PUT",
        "/admin/faults",
        r#"{"outage":"unavailable","refuseDeletes":["*"]}"#,
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert_eq!(reference.faults().outage, Some(Outage::Unavailable));
    assert!(matches!(
        external.get("rc-x").await,
        Err(ProviderError::Unavailable(_))
    ));
    let stats = raw(reference.addr(), "GET", "/admin/stats", "").await;
    assert!(stats.contains(r#""get":1"#), "{stats}");
    reference.set_faults(Faults::default());
    let faults = raw(reference.addr(), "GET", "/admin/faults", "").await;
    assert!(faults.contains(r#""outage":null"#), "{faults}");
}
