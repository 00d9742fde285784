//! `vigil-bench deployment`: a Deployment of many replicas on a sandbox in a child process, its
//! simulated kubelet running the pods. Figures: time until every replica is available, then
//! time for a rolling update (new image) to complete, and the sandbox's memory.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

use crate::support::sandbox::spawn_sandbox;
use crate::support::usage::rss_mib;

#[derive(Debug, clap::Args)]
pub struct DeploymentBench {
    /// Replicas of the Deployment.
    #[arg(long, default_value_t = 1_000)]
    replicas: i32,
    /// maxSurge and maxUnavailable of the rolling update (percent).
    #[arg(long, default_value_t = 25)]
    percent: u32,
}

const NS: &str = "bench";

/// Waits until the current generation is rolled out: every replica updated and available.
async fn wait_rolled_out(api: &Api<Deployment>, replicas: i32) -> anyhow::Result<Duration> {
    let started = Instant::now();
    loop {
        let d = api.get("web").await?;
        let s = d.status.clone().unwrap_or_default();
        let done = s.observed_generation == d.metadata.generation
            && s.replicas == Some(replicas)
            && s.updated_replicas == Some(replicas)
            && s.available_replicas == Some(replicas);
        if done {
            return Ok(started.elapsed());
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the rollout did not complete in 10 min: {s:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

pub async fn run(args: DeploymentBench) -> anyhow::Result<()> {
    let child = spawn_sandbox(&[]).await?;
    let pid = child.process.id().context("sandbox pid")?;
    let client = Client::try_from(kube::Config::new(child.url.parse()?))?;
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await?;
    let api: Api<Deployment> = Api::namespaced(client, NS);
    let percent = format!("{}%", args.percent);
    let body: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "web"},
        "spec": {
            "replicas": args.replicas,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": percent, "maxUnavailable": percent}},
            "template": {"metadata": {"labels": {"app": "web"}},
                         "spec": {"containers": [{"name": "app", "image": "registry.example/app:1"}]}},
        },
    }))?;
    api.create(&PostParams::default(), &body).await?;
    let first = wait_rolled_out(&api, args.replicas).await?;
    let (peak_after_create, _) = rss_mib(pid).unwrap_or((0.0, 0.0));
    let patch = json!({"spec": {"template": {"spec": {"containers": [{"name": "app", "image": "registry.example/app:2"}]}}}});
    api.patch("web", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let rollout = wait_rolled_out(&api, args.replicas).await?;
    let (peak, now) = rss_mib(pid).unwrap_or((0.0, 0.0));
    say!(
        "vigil-bench deployment: {} replicas, maxSurge = maxUnavailable = {percent}, simulated kubelet",
        args.replicas
    );
    say!(
        "  create:          all available {:.2} s after the Deployment was created",
        first.as_secs_f64()
    );
    say!(
        "  rolling update:  all updated and available {:.2} s after the new template",
        rollout.as_secs_f64()
    );
    say!(
        "  sandbox RSS:     peak {peak:.1} MiB ({peak_after_create:.1} MiB after the first rollout), now {now:.1} MiB"
    );
    Ok(())
}
