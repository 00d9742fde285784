//! Kubernetes' sample-controller as an operator of its own, built outside Vigil's workspace on
//! `vigil-runtime` alone, as another team would write it (CI builds it so):
//!
//! ```text
//! kubectl apply -f examples/sample-controller/foo-crd.yaml
//! KUBECONFIG=FILE cargo run --manifest-path examples/sample-controller/Cargo.toml
//! ```

mod controller;

use vigil_runtime::Manager;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt().with_env_filter("info").init();
    let config = kube::Config::infer().await?; // KUBECONFIG, ~/.kube/config or in-cluster
    let manager = Manager::builder(controller::NAME, config)
        .metrics_addr("127.0.0.1:8080".parse()?) // /metrics, /healthz, /readyz
        .reporting_instance(std::env::var("POD_NAME").ok());
    let mut manager = manager.build().await?;
    controller::add(&mut manager);
    Ok(manager.run().await?)
}
