//! `vigil-bench status-vault`: the status vault's figures against a sandbox in a child process,
//! the controller in this process (so a hook sees each record the moment it is saved):
//!
//! - capture lag (API server acknowledged a status change → its record durable in the directory
//!   vault), p50/p99, for N objects each changing status M times, back to back;
//! - automatic restore latency: object re-created (create acknowledged) → its status restored,
//!   as a watch sees it;
//! - restore time of N deleted objects through the CLI (`vigil status backup`, delete,
//!   `vigil status restore`), as child processes;
//! - bytes stored per record, without and with encryption.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, ApiResource, DeleteParams, DynamicObject, GroupVersionKind, ListParams, Patch,
    PatchParams, PostParams,
};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, CustomResourceExt as _, ResourceExt as _};
use serde_json::json;
use tokio::sync::watch;
use vigil_apis::StatusBackupPolicy;
use vigil_controllers::status_vault::controller::SavedHook;
use vigil_controllers::status_vault::model::Settings;
use vigil_controllers::status_vault::{self, StatusVault};
use vigil_runtime::Manager;
use vigil_vault::{EncryptionKey, ObjectKey, Record, Saved, Vault, VaultOptions};

use crate::support::sandbox::spawn_sandbox;
use crate::support::stats::percentile;
use crate::support::temp::TempDir;

#[derive(Debug, clap::Args)]
pub struct StatusVaultBench {
    /// Objects whose status changes.
    #[arg(long, default_value_t = 1000)]
    objects: usize,
    /// Status changes per object.
    #[arg(long, default_value_t = 10)]
    changes: usize,
    /// Status writes in flight at once.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Objects deleted and re-created one after the other for the automatic restore latency.
    #[arg(long, default_value_t = 100)]
    restores: usize,
    /// The vault capture writes to: default a temporary directory; or
    /// `s3://bucket/prefix?endpoint=http://…` (e.g. the server `.ci/s3-server start` runs).
    #[arg(long)]
    vault: Option<String>,
}

const NS: &str = "bench-status-vault";
const GROUP: &str = "infra.example.com";
const KIND: &str = "KubernetesCluster";
const RESOURCE: &str = "kubernetesclusters.infra.example.com";
const TARGET_P99: Duration = Duration::from_secs(1);
const TIMEOUT: Duration = Duration::from_secs(180);

/// When each object's records were saved: name → (round, tombstone, when).
type SavedLog = Arc<Mutex<HashMap<String, Vec<(u64, bool, Instant)>>>>;

fn ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(GROUP, "v1alpha1", KIND),
        "kubernetesclusters",
    )
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

async fn wait_until<F, Fut>(what: &str, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let started = Instant::now();
    while !check().await {
        anyhow::ensure!(started.elapsed() < TIMEOUT, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

async fn setup(client: &Client, vault_location: &str) -> anyhow::Result<()> {
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": NS}}))?,
        )
        .await
        .context("namespace")?;
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    crds.create(&PostParams::default(), &StatusBackupPolicy::crd())
        .await
        .context("policy CRD")?;
    let clusters_crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": RESOURCE},
        "spec": {"group": GROUP, "scope": "Namespaced",
            "names": {"plural": "kubernetesclusters", "singular": "kubernetescluster", "kind": KIND},
            "versions": [{"name": "v1alpha1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]}
    });
    crds.create(
        &PostParams::default(),
        &serde_json::from_value(clusters_crd)?,
    )
    .await
    .context("KubernetesCluster CRD")?;
    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar());
    let policies: Api<StatusBackupPolicy> = Api::all(client.clone());
    wait_until("the CRDs to be served", || async {
        clusters.list(&ListParams::default()).await.is_ok()
            && policies.list(&ListParams::default()).await.is_ok()
    })
    .await?;
    let policy = json!({"apiVersion": "vigil.dev/v1", "kind": "StatusBackupPolicy",
        "metadata": {"name": "bench"},
        "spec": {"resources": [{"group": GROUP, "kind": KIND}], "namespaces": [NS],
            "backend": {"location": vault_location}, "retention": 100}});
    policies
        .create(&PostParams::default(), &serde_json::from_value(policy)?)
        .await
        .context("policy")?;
    Ok(())
}

fn manifest(name: &str) -> anyhow::Result<DynamicObject> {
    Ok(serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/v1alpha1"), "kind": KIND,
        "metadata": {"name": name},
        "spec": {"type": "iks", "env": "bench", "kubeVersion": "1.28"}
    }))?)
}

fn status(name: &str, round: usize) -> serde_json::Value {
    json!({"apiServerURL": format!("https://{name}.example.tld"), "masterVersion": "1.28.23", "round": round})
}

/// Runs `vigil <args>` and returns how long it took, or why it failed.
async fn vigil_cli(args: &[&str]) -> Result<Duration, String> {
    let exe = crate::support::binary::vigil().map_err(|e| e.to_string())?;
    let started = Instant::now();
    let out = tokio::process::Command::new(exe)
        .args(args)
        .output()
        .await
        .map_err(|e| e.to_string())?;
    if out.status.success() {
        Ok(started.elapsed())
    } else {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Err(stderr.lines().last().unwrap_or("failed").to_owned())
    }
}

pub async fn run(args: StatusVaultBench) -> anyhow::Result<()> {
    anyhow::ensure!(args.objects > 0 && args.changes > 0 && args.concurrency > 0);
    let root = TempDir(
        std::env::temp_dir().join(format!("vigil-bench-status-vault-{}", std::process::id())),
    );
    std::fs::create_dir_all(&root.0)?;
    let vault_location = args
        .vault
        .clone()
        .unwrap_or_else(|| root.0.join("vault").display().to_string());
    let sandbox = spawn_sandbox(&[]).await?;
    let kubeconfig_arg = sandbox
        .kubeconfig()
        .to_str()
        .context("temp dir path is not UTF-8")?;
    let client = sandbox.client()?;
    setup(&client, &vault_location).await?;

    let saved: SavedLog = Arc::default();
    let log = saved.clone();
    let hook: SavedHook = Arc::new(move |record: &Record, outcome: Saved| {
        if matches!(outcome, Saved::Written { .. }) {
            let round = record
                .status
                .get("round")
                .and_then(serde_json::Value::as_u64)
                .unwrap_or(0);
            lock(&log).entry(record.name.clone()).or_default().push((
                round,
                record.deleted,
                Instant::now(),
            ));
        }
    });
    let mut manager = Manager::for_client("vigil", client.clone()).build().await?;
    let settings = Settings {
        default_location: vault_location.clone(),
        default_key_file: None,
    };
    let controller = StatusVault::on(manager.runtime(), settings).on_saved(hook);
    manager.add(status_vault::NAME, move |rt| controller.run_on(rt));
    let (stop, mut stopped) = watch::channel(false);
    let task = tokio::spawn(manager.run_until(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    let policies: Api<StatusBackupPolicy> = Api::all(client.clone());
    wait_until("the policy to be Ready", || async {
        policies.get("bench").await.ok().is_some_and(|p| {
            p.status
                .iter()
                .flat_map(|s| s.conditions.iter())
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
    })
    .await?;

    let clusters: Api<DynamicObject> = Api::namespaced_with(client.clone(), NS, &ar());
    let names: Vec<String> = (0..args.objects).map(|i| format!("c{i}")).collect();
    futures::stream::iter(names.clone())
        .map(|name| {
            let clusters = clusters.clone();
            async move {
                clusters
                    .create(&PostParams::default(), &manifest(&name)?)
                    .await
                    .map_err(anyhow::Error::from)
            }
        })
        .buffer_unordered(args.concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;

    // Capture lag: every object changes status `changes` times, back to back.
    let acks: Arc<Mutex<HashMap<(String, usize), Instant>>> = Arc::default();
    let writes: Vec<(String, usize)> = (1..=args.changes)
        .flat_map(|round| names.iter().map(move |n| (n.clone(), round)))
        .collect();
    let burst_started = Instant::now();
    futures::stream::iter(writes)
        .map(|(name, round)| {
            let clusters = clusters.clone();
            let acks = acks.clone();
            async move {
                clusters
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(&json!({"status": status(&name, round)})),
                    )
                    .await?;
                lock(&acks).insert((name, round), Instant::now());
                anyhow::Ok(())
            }
        })
        .buffer_unordered(args.concurrency)
        .collect::<Vec<_>>()
        .await
        .into_iter()
        .collect::<anyhow::Result<Vec<_>>>()?;
    let burst_took = burst_started.elapsed();
    let last_round = args.changes as u64;
    wait_until("every object's last status captured", || async {
        let log = lock(&saved);
        names.iter().all(|n| {
            log.get(n)
                .is_some_and(|v| v.iter().any(|(r, _, _)| *r == last_round))
        })
    })
    .await?;
    let mut lags = Vec::new();
    let records_written: usize = lock(&saved).values().map(Vec::len).sum();
    {
        let log = lock(&saved);
        for ((name, round), acked) in lock(&acks).iter() {
            let first_covering = log.get(name).and_then(|v| {
                v.iter()
                    .filter(|(r, _, _)| *r >= *round as u64)
                    .map(|(_, _, at)| *at)
                    .min()
            });
            if let Some(at) = first_covering {
                lags.push(at.saturating_duration_since(*acked));
            }
        }
    }
    lags.sort();

    // Bytes per record: the captured records, and the same records in a plain and an
    // encrypted vault.
    let vault = Vault::open(&vault_location, VaultOptions::default()).await?;
    let key = |name: &str| ObjectKey::new(GROUP, KIND, Some(NS), name);
    let (mut captured_bytes, mut captured_versions) = (0u64, 0usize);
    let mut latest = Vec::new();
    for name in &names {
        let size = vault.stored_size(&key(name)).await?;
        captured_bytes += size.bytes;
        captured_versions += size.versions;
        if let Some(r) = vault.latest(&key(name)).await? {
            latest.push(r);
        }
    }
    let plain_dir = root.0.join("plain");
    let sealed_dir = root.0.join("sealed");
    let plain = Vault::open(&plain_dir.display().to_string(), VaultOptions::default()).await?;
    let sealed = Vault::open(
        &sealed_dir.display().to_string(),
        VaultOptions {
            key: Some(EncryptionKey::from_bytes(&[7u8; 32])?),
            ..VaultOptions::default()
        },
    )
    .await?;
    let (mut plain_bytes, mut sealed_bytes) = (0u64, 0u64);
    for r in &latest {
        plain.save(r).await?;
        sealed.save(r).await?;
        plain_bytes += plain.stored_size(&r.key()).await?.bytes;
        sealed_bytes += sealed.stored_size(&r.key()).await?.bytes;
    }

    // Automatic restore latency: delete, wait for the tombstone, re-create, time until a watch
    // sees the status back.
    let seen_with_status: Arc<Mutex<HashMap<(String, String), Instant>>> = Arc::default();
    let seen = seen_with_status.clone();
    let watch_api = clusters.clone();
    let watch_task = tokio::spawn(async move {
        let mut events = watcher(watch_api, watcher::Config::default())
            .applied_objects()
            .boxed();
        while let Some(Ok(obj)) = events.next().await {
            if obj.data.get("status").is_some_and(|s| !s.is_null()) {
                lock(&seen)
                    .entry((obj.name_any(), obj.uid().unwrap_or_default()))
                    .or_insert_with(Instant::now);
            }
        }
    });
    let mut restore_lags = Vec::new();
    for name in names.iter().take(args.restores) {
        let tombstones = |log: &HashMap<String, Vec<(u64, bool, Instant)>>| {
            log.get(name)
                .map_or(0, |v| v.iter().filter(|(_, d, _)| *d).count())
        };
        let before = tombstones(&lock(&saved));
        clusters.delete(name, &DeleteParams::default()).await?;
        wait_until("the tombstone", || async {
            tombstones(&lock(&saved)) > before
        })
        .await?;
        let created = clusters
            .create(&PostParams::default(), &manifest(name)?)
            .await?;
        let acked = Instant::now();
        let id = (name.clone(), created.uid().unwrap_or_default());
        wait_until("the status restored", || async {
            lock(&seen_with_status).contains_key(&id)
        })
        .await?;
        let at = lock(&seen_with_status).get(&id).copied().unwrap_or(acked);
        restore_lags.push(at.saturating_duration_since(acked));
    }
    watch_task.abort();
    restore_lags.sort();
    let _ = stop.send(true);
    let _ = task.await;

    // Restore through the CLI: back up, delete everything, restore.
    let backup_dir = root.0.join("backup");
    let backup_arg = backup_dir.display().to_string();
    let cli = async {
        vigil_cli(&[
            "status",
            "backup",
            "--kubeconfig",
            kubeconfig_arg,
            "--include-namespaces",
            NS,
            "--include-resources",
            RESOURCE,
            "--to",
            &backup_arg,
        ])
        .await
        .map_err(|e| format!("backup: {e}"))?;
        futures::stream::iter(names.clone())
            .map(|name| {
                let clusters = clusters.clone();
                async move { clusters.delete(&name, &DeleteParams::default()).await }
            })
            .buffer_unordered(args.concurrency)
            .collect::<Vec<_>>()
            .await;
        let took = vigil_cli(&[
            "status",
            "restore",
            "--kubeconfig",
            kubeconfig_arg,
            "--from",
            &backup_arg,
            "--include-namespaces",
            NS,
            "--status-include-resources",
            RESOURCE,
        ])
        .await
        .map_err(|e| format!("restore: {e}"))?;
        let back = clusters
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?
            .items
            .iter()
            .filter(|o| o.data.get("status").is_some_and(|s| !s.is_null()))
            .count();
        Ok::<_, String>((took, back))
    }
    .await;

    let changes = args.objects * args.changes;
    let p99 = percentile(&lags, 99.0);
    let backend = if vault_location.starts_with("s3://") {
        "S3 vault"
    } else {
        "directory vault"
    };
    say!(
        "status vault ({} objects × {} status changes, {} in flight; sandbox in a child process, controller in-process, {backend}; machine shared with other work)",
        args.objects,
        args.changes,
        args.concurrency
    );
    say!(
        "  burst:                     {changes} status writes acknowledged in {:.2} s ({:.0}/s); {records_written} records written ({} merged by coalescing)",
        burst_took.as_secs_f64(),
        changes as f64 / burst_took.as_secs_f64().max(1e-9),
        changes.saturating_sub(records_written)
    );
    say!(
        "  capture lag (ack → durable record): p50 {}  p99 {}  max {}   target p99 < {}: {}",
        ms(percentile(&lags, 50.0)),
        ms(p99),
        ms(lags.last().copied().unwrap_or_default()),
        ms(TARGET_P99),
        if p99 < TARGET_P99 { "met" } else { "MISSED" }
    );
    say!(
        "  automatic restore ({} re-created objects, create ack → status seen): p50 {}  p99 {}  max {}",
        restore_lags.len(),
        ms(percentile(&restore_lags, 50.0)),
        ms(percentile(&restore_lags, 99.0)),
        ms(restore_lags.last().copied().unwrap_or_default())
    );
    match cli {
        Ok((took, back)) => say!(
            "  CLI restore of {} deleted objects (`vigil status restore`, re-create + status): {:.2} s ({back} back with status)",
            args.objects,
            took.as_secs_f64()
        ),
        Err(e) => say!("  CLI restore: n/a ({e})"),
    }
    let per = |bytes: u64, n: usize| bytes as f64 / n.max(1) as f64;
    say!(
        "  bytes per record: captured {:.0} B ({captured_versions} versions); same records plain {:.0} B, encrypted {:.0} B (+{:.0} B)",
        per(captured_bytes, captured_versions),
        per(plain_bytes, latest.len()),
        per(sealed_bytes, latest.len()),
        per(sealed_bytes, latest.len()) - per(plain_bytes, latest.len())
    );
    drop(sandbox);
    Ok(())
}
