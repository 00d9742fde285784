//! End-to-end: `health::serve` on a real socket, probed with hand-written HTTP/1.1 requests.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio::time::timeout;
use vigil_runtime::health::{self, Health};
use vigil_runtime::metrics::{Metrics, ReconcileResult};

/// Bounds every network step so a hung server fails the test instead of stalling it.
const STEP: Duration = Duration::from_secs(2);

/// A running server and the handles a test drives it with.
struct Server {
    addr: SocketAddr,
    metrics: Arc<Metrics>,
    health: Health,
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

async fn start() -> Server {
    let metrics = Metrics::new("test");
    let health = Health::new();
    let (stop, stopped) = oneshot::channel::<()>();
    let shutdown = async {
        // A dropped sender also stops the server, so a failed test leaks nothing.
        let _ = stopped.await;
    };
    let addr = "127.0.0.1:0".parse().expect("valid literal address");
    let (addr, task) = health::serve(addr, metrics.clone(), health.clone(), shutdown)
        .await
        .expect("bind 127.0.0.1:0");
    Server {
        addr,
        metrics,
        health,
        stop,
        task,
    }
}

/// A response reduced to what the tests check.
#[derive(Debug)]
struct Response {
    status: u16,
    head: String,
    body: String,
}

/// GETs `path` with `Connection: close` so the body is simply everything until EOF.
async fn get(addr: SocketAddr, path: &str) -> Response {
    let exchange = async {
        let mut stream = TcpStream::connect(addr).await.expect("connect");
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.expect("send");
        let mut raw = String::new();
        stream.read_to_string(&mut raw).await.expect("read");
        raw
    };
    let raw = timeout(STEP, exchange).await.expect("response in time");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head and body");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .expect("status code");
    Response {
        status,
        head: head.to_ascii_lowercase(),
        body: body.to_owned(),
    }
}

#[tokio::test]
async fn healthz_answers_ok() {
    let server = start().await;
    let response = get(server.addr, "/healthz").await;
    assert_eq!(response.status, 200);
    assert_eq!(response.body, "ok");
}

#[tokio::test]
async fn readyz_waits_for_every_check() {
    let server = start().await;
    server.health.register("crisvc");

    let response = get(server.addr, "/readyz").await;
    assert_eq!(response.status, 503);
    assert!(
        response.body.contains("[-]crisvc not ready"),
        "{response:?}"
    );

    server.health.set_ready("crisvc", true);
    let response = get(server.addr, "/readyz").await;
    assert_eq!(response.status, 200);
    assert!(response.body.contains("[+]crisvc ok"), "{response:?}");
}

#[tokio::test]
async fn readyz_reports_leadership_without_requiring_it() {
    let server = start().await;
    let response = get(server.addr, "/readyz").await;
    assert_eq!(response.status, 200);
    assert!(response.body.contains("leader: false"), "{response:?}");

    server.health.set_leading(true);
    let response = get(server.addr, "/readyz").await;
    assert_eq!(response.status, 200);
    assert!(response.body.contains("leader: true"), "{response:?}");
}

#[tokio::test]
async fn metrics_expose_controller_runtime_names() {
    let server = start().await;
    let crisvc = server.metrics.controller("crisvc");
    crisvc.queue_add();
    crisvc.reconcile_started().finish(ReconcileResult::Success);
    server.metrics.set_leader(true);

    let response = get(server.addr, "/metrics").await;
    assert_eq!(response.status, 200);
    assert!(
        response
            .head
            .contains("content-type: application/openmetrics-text"),
        "{response:?}"
    );
    for expected in [
        r#"controller_runtime_reconcile_total{controller="crisvc",result="success"} 1"#,
        r#"controller_runtime_reconcile_time_seconds_count{controller="crisvc"} 1"#,
        r#"workqueue_adds_total{name="crisvc"} 1"#,
        r#"leader_election_master_status{name="leader"} 1"#,
    ] {
        assert!(
            response.body.contains(expected),
            "missing {expected}:\n{}",
            response.body
        );
    }
}

#[tokio::test]
async fn unknown_path_is_404() {
    let server = start().await;
    assert_eq!(get(server.addr, "/nope").await.status, 404);
}

#[tokio::test]
async fn server_stops_when_shutdown_resolves() {
    let server = start().await;
    assert_eq!(get(server.addr, "/healthz").await.status, 200);

    server.stop.send(()).expect("server still listening");
    timeout(STEP, server.task)
        .await
        .expect("server stopped in time")
        .expect("server task did not panic");
    assert!(
        TcpStream::connect(server.addr).await.is_err(),
        "listener closed"
    );
}

/// The Manager binds its probe server when it is built, before its controllers are added: until
/// it runs them, `/readyz` must not pass, even when no controller has registered a check yet or
/// every registered one is already ready.
#[tokio::test]
async fn readyz_fails_until_the_manager_runs_its_controllers() {
    // Nothing here reaches the API server: no cache is built.
    let nowhere = kube::Config::new("http://127.0.0.1:9".parse().expect("a URL"));
    let client = kube::Client::try_from(nowhere).expect("a client");
    let mut manager = vigil_runtime::Manager::for_client("test", client)
        .metrics_addr("127.0.0.1:0".parse().expect("an address"))
        .build()
        .await
        .expect("a manager");
    let addr = manager.metrics_addr().expect("probes served");

    let before = get(addr, "/readyz").await;
    assert_eq!(before.status, 503, "{before:?}");
    assert!(
        before
            .body
            .contains("[-]started not ready: the manager has not started its controllers yet"),
        "{before:?}"
    );

    manager.add("quick", |rt| async move {
        rt.set_ready("quick", true);
        rt.shutdown().await;
    });
    // The controller is ready at once; the manager still has not run it.
    tokio::time::sleep(Duration::from_millis(50)).await;
    let added = get(addr, "/readyz").await;
    assert_eq!(added.status, 503, "{added:?}");
    assert!(added.body.contains("[+]quick ok"), "{added:?}");

    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));
    let deadline = tokio::time::Instant::now() + STEP;
    let running_now = loop {
        let now = get(addr, "/readyz").await;
        if now.status == 200 || tokio::time::Instant::now() > deadline {
            break now;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(running_now.status, 200, "{running_now:?}");
    assert!(
        running_now.body.contains("[+]started ok\n[+]quick ok\n"),
        "{running_now:?}"
    );
    let _ = stop.send(());
    timeout(STEP, running)
        .await
        .expect("the manager stops")
        .expect("the manager's task");
}
