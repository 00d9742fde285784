//! `vigil-bench validation-rules`: what CRD validation rules (CEL) cost a write on the sandbox.
//! The Topic CRD (three rules, two of them transition rules) and the same CRD stripped of its
//! rules (another group) serve the same objects; each gets N creates, then N updates that raise
//! `spec.partitions` (where the transition rules run), one request at a time, and the per-write
//! latencies are printed side by side.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};

use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;

const NS: &str = "default";

#[derive(Debug, clap::Args)]
pub struct ValidationRulesBench {
    /// Objects per CRD (each created, then updated once).
    #[arg(long, default_value_t = 2_000)]
    objects: usize,
}

/// The Topic CRD, or the same under group `plain.vigil.dev` with every rule removed.
fn crd(with_rules: bool) -> anyhow::Result<(Value, String)> {
    let mut crd = serde_json::to_value(vigil_apis::crds::topic())?;
    let group = if with_rules {
        "kafka.vigil.dev"
    } else {
        crd["metadata"]["name"] = json!("topics.plain.vigil.dev");
        crd["spec"]["group"] = json!("plain.vigil.dev");
        strip_rules(&mut crd);
        "plain.vigil.dev"
    };
    Ok((crd, group.to_owned()))
}

fn strip_rules(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(strip_rules);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_rules),
        _ => {}
    }
}

fn topic(group: &str, i: usize, partitions: u32) -> Value {
    json!({
        "apiVersion": format!("{group}/v1"), "kind": "Topic",
        "metadata": {"name": format!("t-{i:06}")},
        "spec": {"partitions": partitions, "replicationFactor": 3, "topicName": format!("orders-{i}"),
                 "config": {"retention.ms": "604800000"},
                 "cluster": {"bootstrapServers": ["kafka-0.kafka:9092"]}},
    })
}

/// Sorted per-request latencies of `creates` then `updates`.
async fn writes(
    client: &Client,
    group: &str,
    objects: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let gvk = GroupVersionKind::gvk(group, "v1", "Topic");
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        NS,
        &ApiResource::from_gvk_with_plural(&gvk, "topics"),
    );
    let mut creates = Vec::with_capacity(objects);
    for i in 0..objects {
        let obj: DynamicObject = serde_json::from_value(topic(group, i, 6))?;
        let started = Instant::now();
        api.create(&PostParams::default(), &obj)
            .await
            .context("create")?;
        creates.push(started.elapsed());
    }
    let mut updates = Vec::with_capacity(objects);
    for i in 0..objects {
        let patch = Patch::Merge(json!({"spec": {"partitions": 8}}));
        let started = Instant::now();
        api.patch(&format!("t-{i:06}"), &PatchParams::default(), &patch)
            .await
            .context("update")?;
        updates.push(started.elapsed());
    }
    creates.sort_unstable();
    updates.sort_unstable();
    Ok((creates, updates))
}

fn summary(latencies: &[Duration]) -> String {
    let mean = latencies.iter().sum::<Duration>() / latencies.len().max(1) as u32;
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!(
        "mean {:.3} ms, p50 {:.3} ms, p99 {:.3} ms",
        ms(mean),
        ms(percentile(latencies, 50.0)),
        ms(percentile(latencies, 99.0))
    )
}

pub async fn run(args: ValidationRulesBench) -> anyhow::Result<()> {
    let child = spawn_sandbox(&["--no-kubelet"]).await?;
    let client = child.client()?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut results = Vec::new();
    for with_rules in [false, true] {
        let (crd, group) = crd(with_rules)?;
        crds.create(&PostParams::default(), &serde_json::from_value(crd)?)
            .await
            .context("CRD")?;
        // Served at once by the sandbox; one list makes sure.
        let gvk = GroupVersionKind::gvk(&group, "v1", "Topic");
        let api: Api<DynamicObject> = Api::namespaced_with(
            client.clone(),
            NS,
            &ApiResource::from_gvk_with_plural(&gvk, "topics"),
        );
        api.list(&Default::default()).await.context("served")?;
        results.push((with_rules, writes(&client, &group, args.objects).await?));
    }
    say!(
        "validation rules: {} Topics per CRD, one write at a time",
        args.objects
    );
    for (with_rules, (creates, updates)) in &results {
        let name = if *with_rules {
            "with rules   "
        } else {
            "without rules"
        };
        say!("  {name} create: {}", summary(creates));
        say!("  {name} update: {}", summary(updates));
    }
    Ok(())
}
