//! `vigil-bench status-restore`: the article's disaster recovery at scale, through the CLI as an
//! operator runs it — N `LoadBalancer` Services whose `status.loadBalancer.ingress` was set through
//! `/status` are backed up (`vigil status backup`), all deleted, and restored
//! (`vigil status restore --status-include-resources Service`: re-created, then status written
//! back). Prints backup, dry-run and restore times, how many came back with their status, and the
//! bytes stored per record. Against a sandbox in a child process; the vault is a temporary
//! directory, or `--vault s3://…` (e.g. the server of `.ci/s3-server`), optionally encrypted.
//!
//! [`measure`] is the reusable part (`vigil-bench status-vault` may call it with its own cluster).

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{Namespace, Service};
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::json;
use vigil_vault::{EncryptionKey, Vault, VaultOptions};

use crate::support::sandbox::spawn_sandbox;
use crate::support::temp::TempDir;

#[derive(Debug, clap::Args)]
pub struct StatusRestoreBench {
    /// LoadBalancer Services to back up, delete and restore.
    #[arg(long, default_value_t = 1000)]
    services: usize,
    /// The vault: default a temporary directory; or `s3://bucket/prefix?endpoint=http://…`.
    #[arg(long)]
    vault: Option<String>,
    /// Encrypt the vault (a random key in a temporary file).
    #[arg(long)]
    encrypt: bool,
}

const NS: &str = "bench-status-restore";
const CONCURRENCY: usize = 16;
const TIMEOUT: Duration = Duration::from_secs(300);

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct RestoreFigures {
    pub objects: usize,
    pub backup: Duration,
    pub dry_run: Duration,
    pub restore: Duration,
    /// Objects that came back with their load balancer status.
    pub back_with_status: usize,
    /// Mean bytes stored per record (envelope included when encrypted).
    pub bytes_per_record: f64,
}

fn ingress(i: usize) -> String {
    format!("172.18.{}.{}", i / 250, i % 250 + 1)
}

/// Runs `vigil <args>` as a child process; how long it took, or its last error line.
async fn vigil(args: &[&str]) -> anyhow::Result<Duration> {
    let exe = crate::support::binary::vigil()?;
    let started = Instant::now();
    let out = tokio::process::Command::new(exe)
        .args(args)
        .env("RUST_LOG", "warn")
        .output()
        .await
        .context("running vigil")?;
    let took = started.elapsed();
    anyhow::ensure!(
        out.status.success(),
        "vigil {}: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or(""),
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .last()
            .unwrap_or("")
    );
    Ok(took)
}

/// Creates `n` LoadBalancer Services in `namespace` with their status set through `/status`,
/// backs them up to `location`, deletes them, restores them through the CLI; returns the figures.
pub async fn measure(
    client: &Client,
    kubeconfig: &Path,
    namespace: &str,
    n: usize,
    location: &str,
    key_file: Option<&Path>,
) -> anyhow::Result<RestoreFigures> {
    let services: Api<Service> = Api::namespaced(client.clone(), namespace);
    let names: Vec<String> = (0..n).map(|i| format!("lb-{i:05}")).collect();
    let created: Vec<anyhow::Result<()>> = futures::stream::iter(names.iter().enumerate())
        .map(|(i, name)| {
            let services = services.clone();
            async move {
                let svc: Service = serde_json::from_value(json!({
                    "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "bench"}},
                    "spec": {"type": "LoadBalancer", "selector": {"app": name},
                        "ports": [{"name": "http", "port": 80}, {"name": "https", "port": 443}]}
                }))?;
                services.create(&PostParams::default(), &svc).await?;
                let status = json!({"status": {"loadBalancer": {"ingress": [
                    {"ip": ingress(i), "ipMode": "Proxy"}]}}});
                services
                    .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
                    .await?;
                Ok(())
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    created.into_iter().collect::<anyhow::Result<Vec<()>>>()?;

    let kubeconfig = kubeconfig
        .to_str()
        .context("kubeconfig path is not UTF-8")?;
    let key_file = key_file
        .map(|p| p.to_str().context("key file path is not UTF-8"))
        .transpose()?;
    let with_key = |mut args: Vec<&'static str>, extra: Vec<String>| -> Vec<String> {
        let mut all: Vec<String> = args.drain(..).map(str::to_owned).collect();
        all.extend(extra);
        all.extend(["--kubeconfig".to_owned(), kubeconfig.to_owned()]);
        if let Some(k) = key_file {
            all.extend(["--encryption-key-file".to_owned(), k.to_owned()]);
        }
        all
    };
    let call = |args: Vec<String>| async move {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        vigil(&refs).await
    };
    let backup = call(with_key(
        vec!["status", "backup", "--include-resources", "services"],
        vec![
            "--include-namespaces".into(),
            namespace.into(),
            "--to".into(),
            location.into(),
        ],
    ))
    .await?;

    futures::stream::iter(names.iter())
        .map(|name| {
            let services = services.clone();
            async move { services.delete(name, &DeleteParams::default()).await }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    let started = Instant::now();
    while !services
        .list(&ListParams::default())
        .await?
        .items
        .is_empty()
    {
        anyhow::ensure!(started.elapsed() < TIMEOUT, "Services not deleted in time");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let restore_args = vec![
        "--from".to_owned(),
        location.to_owned(),
        "--include-namespaces".into(),
        namespace.into(),
        "--status-include-resources".into(),
        "Service".into(),
    ];
    let mut dry = restore_args.clone();
    dry.push("--dry-run".into());
    let dry_run = call(with_key(vec!["status", "restore"], dry)).await?;
    let restore = call(with_key(vec!["status", "restore"], restore_args)).await?;

    let listed = services.list(&ListParams::default()).await?;
    let back_with_status = listed
        .items
        .iter()
        .filter(|s| {
            let name = s.metadata.name.as_deref().unwrap_or("");
            let i: usize = name.trim_start_matches("lb-").parse().unwrap_or(usize::MAX);
            s.status
                .as_ref()
                .and_then(|st| st.load_balancer.as_ref())
                .and_then(|lb| lb.ingress.as_ref())
                .and_then(|ing| ing.first())
                .and_then(|ing| ing.ip.as_deref())
                == Some(ingress(i).as_str())
        })
        .count();

    let key = key_file.map(EncryptionKey::from_file).transpose()?;
    let vault = Vault::open(location, VaultOptions { retention: 0, key }).await?;
    let (mut versions, mut bytes) = (0usize, 0u64);
    for key in vault.keys().await? {
        if key.namespace.as_deref() == Some(namespace) {
            let size = vault.stored_size(&key).await?;
            versions += size.versions;
            bytes += size.bytes;
        }
    }
    Ok(RestoreFigures {
        objects: n,
        backup,
        dry_run,
        restore,
        back_with_status,
        bytes_per_record: bytes as f64 / versions.max(1) as f64,
    })
}

pub async fn run(args: StatusRestoreBench) -> anyhow::Result<()> {
    anyhow::ensure!(args.services > 0, "--services must be positive");
    let root = TempDir(
        std::env::temp_dir().join(format!("vigil-bench-status-restore-{}", std::process::id())),
    );
    std::fs::create_dir_all(&root.0)?;
    let sandbox = spawn_sandbox(&[]).await?;
    let client = sandbox.client()?;
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await?;
    let location = match &args.vault {
        Some(location) => location.clone(),
        None => root.0.join("vault").display().to_string(),
    };
    let key_file = if args.encrypt {
        let path = root.0.join("vault.key");
        let mut key = [0u8; 32];
        rand_bytes(&mut key);
        std::fs::write(&path, key)?;
        Some(path)
    } else {
        None
    };
    let f = measure(
        &client,
        sandbox.kubeconfig(),
        NS,
        args.services,
        &location,
        key_file.as_deref(),
    )
    .await?;
    say!(
        "status restore through the CLI ({} LoadBalancer Services, vault {}{}; sandbox in a child process; machine shared with other work)",
        f.objects,
        if args.vault.is_some() {
            &location
        } else {
            "in a temporary directory"
        },
        if args.encrypt { ", encrypted" } else { "" }
    );
    say!(
        "  vigil status backup:            {:.2} s ({:.0} objects/s)",
        f.backup.as_secs_f64(),
        f.objects as f64 / f.backup.as_secs_f64().max(1e-9)
    );
    say!(
        "  vigil status restore --dry-run: {:.2} s",
        f.dry_run.as_secs_f64()
    );
    say!(
        "  vigil status restore:           {:.2} s ({:.0} objects/s): re-create + status through /status + annotation; {} of {} back with their status",
        f.restore.as_secs_f64(),
        f.objects as f64 / f.restore.as_secs_f64().max(1e-9),
        f.back_with_status,
        f.objects
    );
    say!(
        "  bytes per record (status + cleaned manifest{}): {:.0} B",
        if args.encrypt { ", encrypted" } else { "" },
        f.bytes_per_record
    );
    drop(sandbox);
    Ok(())
}

/// A random key for the bench (the OS-seeded generator `rand` uses everywhere else).
fn rand_bytes(out: &mut [u8]) {
    use rand::RngCore as _;
    rand::rng().fill_bytes(out);
}
