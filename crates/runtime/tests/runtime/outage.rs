//! End-to-end, sandbox only (it stops the API server): after an 8 s outage, a controller on the
//! Manager watches and acts again at once — not after its watches' back-off (0.8 s doubling,
//! about 10 s after an 8 s outage) — and `/healthz` answers throughout.

#![allow(clippy::disallowed_names)] // upstream's kind is `Foo`

use crate::example as sample_controller;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Api;
use kube::api::PostParams;
use sample_controller::{Foo, FooSpec};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;
use vigil_runtime::Manager;
use vigil_testenv::{TestEnv, require_sandbox, wait_for};

/// How long the API server is down.
const OUTAGE: Duration = Duration::from_secs(8);
/// Well under the ~10 s the watches' back-off alone would take after such an outage.
const AFTER_OUTAGE: Duration = Duration::from_secs(4);
const SETTLE: Duration = Duration::from_secs(30);

/// GET `path` on `addr`; the status line.
async fn get(addr: SocketAddr, path: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(addr)
        .await
        .expect("probe server reachable");
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.expect("sent");
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .await
        .expect("answered");
    response.lines().next().unwrap_or_default().to_owned()
}

async fn create_foo(foos: &Api<Foo>, name: &str) {
    let foo = Foo::new(
        name,
        FooSpec {
            deployment_name: format!("{name}-deployment"),
            replicas: Some(1),
        },
    );
    foos.create(&PostParams::default(), &foo)
        .await
        .expect("Foo created");
}

async fn deployment_appears(deployments: &Api<Deployment>, name: &str, within: Duration) {
    wait_for(&format!("Deployment {name}"), within, || async {
        deployments.get_opt(name).await.map_err(|e| e.to_string())
    })
    .await
    .expect("the controller acted");
}

#[tokio::test]
async fn after_an_outage_controllers_act_again_at_once_and_healthz_stays_healthy() {
    let env = TestEnv::start().await.expect("test environment");
    require_sandbox!(env);
    let crd: CustomResourceDefinition = serde_saphyr::from_str(include_str!(
        "../../../../examples/sample-controller/foo-crd.yaml"
    ))
    .expect("upstream CRD");
    vigil_testenv::install_crd(&env.client(), &crd)
        .await
        .expect("Foo CRD served");
    let config = env.config().await.expect("configuration");
    let mut manager = Manager::builder(sample_controller::NAME, config)
        .metrics_addr("127.0.0.1:0".parse().expect("an address"))
        .build()
        .await
        .expect("manager");
    let probes = manager.metrics_addr().expect("serving probes");
    sample_controller::add(&mut manager);
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));

    let foos: Api<Foo> = env.api();
    let deployments: Api<Deployment> = env.api();
    create_foo(&foos, "before").await;
    deployment_appears(&deployments, "before-deployment", SETTLE).await;

    let sandbox = env.sandbox().expect("a sandbox");
    sandbox.stop_serving().await;
    tokio::time::sleep(OUTAGE / 2).await;
    assert!(
        get(probes, "/healthz").await.contains("200"),
        "/healthz during the outage"
    );
    tokio::time::sleep(OUTAGE / 2).await;
    sandbox.resume_serving().await.expect("serving again");

    let back = Instant::now();
    create_foo(&foos, "after").await;
    deployment_appears(&deployments, "after-deployment", AFTER_OUTAGE).await;
    eprintln!(
        "after an {OUTAGE:?} outage: the controller acted {:?} after the server was back",
        back.elapsed()
    );
    assert!(get(probes, "/healthz").await.contains("200"));

    let _ = stop.send(());
    running.await.expect("manager stopped");
    env.cleanup().await;
}
