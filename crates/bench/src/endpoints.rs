//! `vigil-bench endpoints`: one namespace with many pods behind many Services. After setup, a
//! burst flips every pod's readiness; the figure is how long the Endpoints take to reflect it.
//! Pod status is written directly (no kubelet), so only the API server and its controllers work.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::core::v1::{Endpoints, Namespace, Pod, Service};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::client::in_parallel;
use crate::support::sandbox::spawn_sandbox;
use crate::support::usage::rss_mib;

#[derive(Debug, clap::Args)]
pub struct EndpointsBench {
    /// Pods in the namespace.
    #[arg(long, default_value_t = 10_000)]
    pods: usize,
    /// Services selecting them (pods are spread evenly).
    #[arg(long, default_value_t = 1_000)]
    services: usize,
    /// Requests in flight while setting up and during the burst.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
}

const NS: &str = "bench";

fn pod_status(i: usize, ready: bool) -> serde_json::Value {
    let ip = format!("10.244.{}.{}", i / 250, i % 250 + 2);
    json!({"status": {
        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
        "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]
    }})
}

/// Waits until every Service's Endpoints hold `per_service` addresses, ready or not as asked.
async fn wait_settled(
    api: &Api<Endpoints>,
    services: usize,
    per_service: usize,
    ready: bool,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let list = api.list(&ListParams::default()).await?;
        let settled = list
            .items
            .iter()
            .filter(|ep| {
                let subsets = ep.subsets.as_deref().unwrap_or_default();
                let count = |f: fn(&k8s_openapi::api::core::v1::EndpointSubset) -> usize| {
                    subsets.iter().map(f).sum::<usize>()
                };
                let r = count(|s| s.addresses.as_ref().map_or(0, Vec::len));
                let n = count(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len));
                if ready {
                    (r, n) == (per_service, 0)
                } else {
                    (r, n) == (0, per_service)
                }
            })
            .count();
        if settled == services {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(300),
            "endpoints did not settle: {settled}/{services}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

pub async fn run(args: EndpointsBench) -> anyhow::Result<()> {
    anyhow::ensure!(
        args.services > 0 && args.pods >= args.services,
        "need pods >= services > 0"
    );
    let child = spawn_sandbox(&["--no-kubelet"]).await?;
    let pid = child.process.id().context("sandbox pid")?;
    let client = child.client()?;
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    let services: Api<Service> = Api::namespaced(client.clone(), NS);
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let endpoints: Api<Endpoints> = Api::namespaced(client.clone(), NS);
    let per_service = args.pods / args.services;
    let pods_total = per_service * args.services;

    let setup = Instant::now();
    in_parallel(args.services, args.concurrency, |i| {
        let services = services.clone();
        async move {
            let svc: Service = serde_json::from_value(json!({
                "metadata": {"name": format!("svc-{i}")},
                "spec": {"selector": {"app": format!("svc-{i}")}, "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}
            }))?;
            services.create(&PostParams::default(), &svc).await?;
            Ok(())
        }
    })
    .await?;
    in_parallel(pods_total, args.concurrency, |i| {
        let pods = pods.clone();
        let app = format!("svc-{}", i % args.services);
        async move {
            let name = format!("pod-{i}");
            let pod: Pod = serde_json::from_value(json!({
                "metadata": {"name": name, "labels": {"app": app}},
                "spec": {"nodeName": "bench-node", "containers": [{"name": "c", "image": "registry.example/app:1.0"}]}
            }))?;
            pods.create(&PostParams::default(), &pod).await?;
            pods.patch_status(&name, &PatchParams::default(), &Patch::Merge(pod_status(i, true))).await?;
            Ok(())
        }
    })
    .await?;
    let setup_done = setup.elapsed();
    let initial_settle = wait_settled(&endpoints, args.services, per_service, true).await?;

    // The burst: every pod turns NotReady.
    let burst = Instant::now();
    in_parallel(pods_total, args.concurrency, |i| {
        let pods = pods.clone();
        async move {
            pods.patch_status(
                &format!("pod-{i}"),
                &PatchParams::default(),
                &Patch::Merge(pod_status(i, false)),
            )
            .await?;
            Ok(())
        }
    })
    .await?;
    let burst_sent = burst.elapsed();
    let lag = wait_settled(&endpoints, args.services, per_service, false).await?;
    let total = burst.elapsed();
    let (peak, now) = rss_mib(pid).unwrap_or((0.0, 0.0));

    say!(
        "vigil-bench endpoints: {pods_total} pods, {} services ({per_service} pods each), one namespace",
        args.services
    );
    say!(
        "  setup:              {:.2} s to create services and ready pods, then {:.3} s for endpoints to settle",
        setup_done.as_secs_f64(),
        initial_settle.as_secs_f64()
    );
    say!(
        "  readiness burst:    {pods_total} status writes in {:.3} s",
        burst_sent.as_secs_f64()
    );
    say!(
        "  endpoints settled:  {:.3} s after the burst began, {:.3} s after its last write",
        total.as_secs_f64(),
        lag.as_secs_f64()
    );
    say!("  sandbox RSS:        peak {peak:.1} MiB, now {now:.1} MiB");
    Ok(())
}
