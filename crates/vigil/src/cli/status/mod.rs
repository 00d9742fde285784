//! `vigil status backup|restore|history|show`: the status vault from the command line, for
//! operators and disaster recovery, against any cluster through a kubeconfig. Velero's flag names
//! (`--include-namespaces`, `--include-resources`, `--status-include-resources`), so the article's
//! `velero backup create … / velero restore create … --status-include-resources Service` map one
//! to one. Restore itself lives in `restore.rs`, what every command shares in `common.rs`.

mod common;
mod restore;

use anyhow::Context as _;
use futures::StreamExt as _;
use kube::api::{ApiResource, DynamicObject, ListParams};
use kube::discovery::{Scope, verbs};
use vigil_vault::{ObjectKey, Record, Saved};

use common::{CommonArgs, discover, resolve};

/// Records saved at once by a backup.
const SAVE_CONCURRENCY: usize = 16;

/// Where `vigil run` keeps records by default, and so where `history` and `show` look.
const DEFAULT_VAULT: &str = "/var/lib/vigil/status-vault";

#[derive(Debug, clap::Subcommand)]
pub enum StatusCommand {
    /// Export objects with their status to a vault (like `velero backup create`).
    Backup(BackupArgs),
    /// Re-create missing objects, then restore their status through the /status subresource
    /// (like `velero restore create --status-include-resources`).
    Restore(restore::RestoreArgs),
    /// The recorded versions of one object: `vigil status history Service/argocd-server -n argocd`.
    History(HistoryArgs),
    /// What a vault holds: objects, versions, latest capture, tombstones, corrupt records.
    Show(ShowArgs),
}

/// Flags every `vigil status` command takes.
#[derive(Debug, clap::Args)]
pub struct BackupArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// Namespaces to export, comma-separated; default: all. Cluster-scoped kinds ignore it.
    #[arg(long, value_delimiter = ',')]
    pub include_namespaces: Vec<String>,
    /// Kinds to export, comma-separated: `services`, `Service`,
    /// `kubernetesclusters.infra.example.com`, `KubernetesCluster.infra.example.com`.
    #[arg(long, value_delimiter = ',', required = true)]
    pub include_resources: Vec<String>,
    /// Only objects matching this label selector.
    #[arg(long, short = 'l')]
    pub selector: Option<String>,
    /// The vault: a directory or `s3://bucket/prefix[?endpoint=http://…]`.
    #[arg(long)]
    pub to: String,
    /// Versions kept per object in the vault.
    #[arg(long, default_value_t = vigil_vault::DEFAULT_RETENTION)]
    pub retention: usize,
}

#[derive(Debug, clap::Args)]
pub struct HistoryArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// `KIND/NAME`: `Service/argocd-server`, `services/argocd-server`,
    /// `KubernetesCluster.infra.example.com/my-cluster`.
    pub object: String,
    /// Namespace of the object; default: any namespace.
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// The vault: a directory or `s3://bucket/prefix`.
    #[arg(long, env = "VIGIL_STATUS_VAULT_LOCATION", default_value = DEFAULT_VAULT)]
    pub vault: String,
}

#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The vault: a directory or `s3://bucket/prefix`.
    #[arg(long, env = "VIGIL_STATUS_VAULT_LOCATION", default_value = DEFAULT_VAULT)]
    pub vault: String,
}

pub async fn run(command: StatusCommand) -> anyhow::Result<()> {
    match command {
        StatusCommand::Backup(args) => {
            let report = backup(&args).await?;
            say!(
                "backed up {} objects to {}: {} new versions, {} unchanged",
                report.objects,
                args.to,
                report.written,
                report.unchanged
            );
            Ok(())
        }
        StatusCommand::Restore(args) => restore::run(args).await,
        StatusCommand::History(args) => history(&args).await,
        StatusCommand::Show(args) => show(&args).await,
    }
}

/// The object's manifest as `kubectl apply` could re-create it: without status and without the
/// fields the API server sets (uid, resourceVersion, managedFields, …). Owner references go too:
/// their uids would be stale, and the garbage collector would delete the re-created object.
/// A Service also loses its cluster IPs (the new one gets free ones), as Velero does.
pub fn clean_manifest(object: &serde_json::Value) -> serde_json::Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
        if let Some(meta) = map.get_mut("metadata").and_then(|m| m.as_object_mut()) {
            for field in [
                "uid",
                "resourceVersion",
                "generation",
                "creationTimestamp",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
                "managedFields",
                "selfLink",
                "ownerReferences",
            ] {
                meta.remove(field);
            }
        }
        let is_service = map.get("apiVersion").and_then(|v| v.as_str()) == Some("v1")
            && map.get("kind").and_then(|v| v.as_str()) == Some("Service");
        if is_service && let Some(spec) = map.get_mut("spec").and_then(|s| s.as_object_mut()) {
            let headless = spec.get("clusterIP").and_then(|v| v.as_str()) == Some("None");
            if !headless {
                spec.remove("clusterIP");
                spec.remove("clusterIPs");
            }
            spec.remove("healthCheckNodePort");
        }
    }
    object
}

/// The record of one live object, with its cleaned manifest.
pub fn record_of(ar: &ApiResource, object: &DynamicObject, time: &str) -> anyhow::Result<Record> {
    let json = serde_json::to_value(object)?;
    Ok(Record {
        api_version: ar.api_version.clone(),
        kind: ar.kind.clone(),
        namespace: object.metadata.namespace.clone(),
        name: object.metadata.name.clone().unwrap_or_default(),
        uid: object.metadata.uid.clone().unwrap_or_default(),
        resource_version: object.metadata.resource_version.clone().unwrap_or_default(),
        generation: object.metadata.generation,
        status: object
            .data
            .get("status")
            .cloned()
            .unwrap_or(serde_json::Value::Null),
        time: time.to_owned(),
        deleted: false,
        object: Some(clean_manifest(&json)),
    })
}

pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BackupReport {
    pub objects: usize,
    pub written: usize,
    pub unchanged: usize,
}

/// Lists the chosen kinds in the chosen namespaces and saves a record of each object.
pub async fn backup(args: &BackupArgs) -> anyhow::Result<BackupReport> {
    let client = args.common.client().await?;
    let vault = args.common.open(&args.to, args.retention).await?;
    vault
        .check()
        .await
        .with_context(|| format!("the vault {} is not usable", args.to))?;
    let resources = discover(&client).await?;
    let namespaces: Vec<&str> = args
        .include_namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    let time = now_rfc3339();
    let mut report = BackupReport::default();
    for wanted in &args.include_resources {
        let (ar, caps) = resolve(&resources, wanted).map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            caps.supports_operation(verbs::LIST),
            "{} cannot be listed",
            ar.plural
        );
        let apis: Vec<kube::Api<DynamicObject>> = match (&caps.scope, namespaces.is_empty()) {
            (Scope::Namespaced, false) => namespaces
                .iter()
                .map(|ns| kube::Api::namespaced_with(client.clone(), ns, ar))
                .collect(),
            _ => vec![kube::Api::all_with(client.clone(), ar)],
        };
        let mut params = ListParams::default();
        if let Some(selector) = &args.selector {
            params = params.labels(selector);
        }
        for api in apis {
            let list = api
                .list(&params)
                .await
                .with_context(|| format!("listing {}", ar.plural))?;
            // Saves of different objects are independent: overlap their fsyncs / round trips.
            let records = list
                .items
                .iter()
                .map(|object| record_of(ar, object, &time))
                .collect::<anyhow::Result<Vec<_>>>()?;
            let saved: Vec<anyhow::Result<Saved>> = futures::stream::iter(records)
                .map(|record| {
                    let vault = vault.clone();
                    async move {
                        vault
                            .save(&record)
                            .await
                            .with_context(|| format!("saving {}", record.key()))
                    }
                })
                .buffer_unordered(SAVE_CONCURRENCY)
                .collect()
                .await;
            for outcome in saved {
                match outcome? {
                    Saved::Written { .. } => report.written += 1,
                    Saved::Unchanged => report.unchanged += 1,
                }
                report.objects += 1;
            }
        }
    }
    Ok(report)
}

/// Whether a vault key is the `KIND` the user typed (`Service`, `services`, `service`,
/// `KubernetesCluster.infra.example.com`, `kubernetesclusters.infra.example.com`), judged from
/// the vault alone so that `history` works without a cluster.
fn kind_matches(key: &ObjectKey, wanted: &str) -> bool {
    let (name, group) = match wanted.split_once('.') {
        Some((name, group)) => (name, Some(group)),
        None => (wanted, None),
    };
    if group.is_some_and(|g| g != key.group) {
        return false;
    }
    let kind = key.kind.to_lowercase();
    let name = name.to_lowercase();
    name == kind || name == format!("{kind}s") || name == format!("{kind}es")
}

async fn history(args: &HistoryArgs) -> anyhow::Result<()> {
    let (kind, name) = args
        .object
        .split_once('/')
        .context("expected KIND/NAME, e.g. Service/argocd-server")?;
    let vault = args.common.open_existing(&args.vault).await?;
    let keys: Vec<ObjectKey> = vault
        .keys()
        .await?
        .into_iter()
        .filter(|k| {
            k.name == name
                && kind_matches(k, kind)
                && args
                    .namespace
                    .as_deref()
                    .is_none_or(|ns| k.namespace.as_deref() == Some(ns))
        })
        .collect();
    anyhow::ensure!(
        !keys.is_empty(),
        "the vault {} holds no records of {}{}",
        vault.location(),
        args.object,
        args.namespace
            .as_deref()
            .map(|ns| format!(" in namespace {ns}"))
            .unwrap_or_default()
    );
    for key in keys {
        crate::outln!("{key}")?;
        crate::outln!(
            "  {:>8}  {:<24}  {:<36}  {:>15}  STATUS",
            "VERSION",
            "TIME",
            "UID",
            "RESOURCEVERSION"
        )?;
        let versions = vault.versions(&key).await?;
        for (stored, entry) in versions.iter().zip(vault.history(&key).await?) {
            match entry {
                Ok(record) => crate::outln!(
                    "  {:>8}  {:<24}  {:<36}  {:>15}  {}{}",
                    stored.version,
                    record.time,
                    record.uid,
                    record.resource_version,
                    if record.deleted { "(deleted) " } else { "" },
                    serde_json::to_string(&record.status)?
                )?,
                Err(error) => crate::outln!("  {:>8}  unreadable: {error}", stored.version)?,
            }
        }
    }
    Ok(())
}

async fn show(args: &ShowArgs) -> anyhow::Result<()> {
    let vault = args.common.open_existing(&args.vault).await?;
    let keys = vault.keys().await?;
    crate::outln!(
        "vault {} ({}): {} objects",
        vault.location(),
        if vault.encrypted() {
            "encrypted"
        } else {
            "plain"
        },
        keys.len()
    )?;
    if keys.is_empty() {
        return Ok(());
    }
    crate::outln!(
        "{:<40}  {:<40}  {:>8}  {:<24}  STATE",
        "KIND",
        "OBJECT",
        "VERSIONS",
        "LATEST"
    )?;
    for key in keys {
        let history = vault.history(&key).await?;
        let corrupt = history.iter().filter(|h| h.is_err()).count();
        let latest = history.iter().rev().find_map(|h| h.as_ref().ok());
        let object = match &key.namespace {
            Some(ns) => format!("{ns}/{}", key.name),
            None => key.name.clone(),
        };
        let key_problem = history.iter().find_map(|h| match h {
            Err(vigil_vault::Error::KeyRequired { .. }) => {
                Some("encrypted: give --encryption-key-file")
            }
            Err(vigil_vault::Error::WrongKey { .. }) => Some("encrypted with another key"),
            _ => None,
        });
        let mut state = match (latest, key_problem) {
            (Some(r), _) if r.deleted => "deleted (tombstone)".to_owned(),
            (Some(_), _) => "live".to_owned(),
            (None, Some(problem)) => format!("no readable record ({problem})"),
            (None, None) => "no readable record".to_owned(),
        };
        if corrupt > 0 {
            state.push_str(&format!(", {corrupt} unreadable"));
        }
        crate::outln!(
            "{:<40}  {:<40}  {:>8}  {:<24}  {state}",
            key.kind_and_group(),
            object,
            history.len(),
            latest.map(|r| r.time.as_str()).unwrap_or("-")
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kube::discovery::ApiCapabilities;

    use super::*;
    use serde_json::json;

    fn resource(group: &str, kind: &str, plural: &str) -> (ApiResource, ApiCapabilities) {
        let version = "v1";
        (
            ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: if group.is_empty() {
                    version.into()
                } else {
                    format!("{group}/{version}")
                },
                kind: kind.into(),
                plural: plural.into(),
            },
            ApiCapabilities {
                scope: Scope::Namespaced,
                subresources: vec![],
                operations: vec![],
            },
        )
    }

    #[test]
    fn resources_resolve_by_plural_kind_and_group() {
        let all = vec![
            resource("", "Service", "services"),
            resource("serving.knative.dev", "Service", "services"),
            resource(
                "infra.example.com",
                "KubernetesCluster",
                "kubernetesclusters",
            ),
        ];
        for (wanted, group) in [
            ("services", ""),
            ("Service", ""),
            ("service", ""),
            ("services.serving.knative.dev", "serving.knative.dev"),
            ("kubernetesclusters.infra.example.com", "infra.example.com"),
            ("KubernetesCluster.infra.example.com", "infra.example.com"),
            ("KubernetesCluster", "infra.example.com"),
        ] {
            let (ar, _) = resolve(&all, wanted).unwrap_or_else(|e| panic!("{wanted}: {e}"));
            assert_eq!(ar.group, group, "{wanted}");
        }
        assert!(
            resolve(&all, "widgets")
                .unwrap_err()
                .contains("no resource")
        );
        let twice = vec![
            resource("a.example.com", "Widget", "widgets"),
            resource("b.example.com", "Widget", "widgets"),
        ];
        assert!(resolve(&twice, "Widget").unwrap_err().contains("ambiguous"));
    }

    #[test]
    fn manifests_lose_server_set_fields_status_owners_and_cluster_ips() {
        let live = json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "argocd-server", "namespace": "argocd", "uid": "u",
                "resourceVersion": "7", "creationTimestamp": "t", "managedFields": [],
                "ownerReferences": [{"uid": "x"}], "labels": {"app": "argocd"},
                "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]},
            "spec": {"type": "LoadBalancer", "clusterIP": "10.96.0.7", "clusterIPs": ["10.96.0.7"],
                "ports": [{"port": 80}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "172.18.0.7"}]}}
        });
        let clean = clean_manifest(&live);
        assert_eq!(
            clean,
            json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": "argocd-server", "namespace": "argocd",
                    "labels": {"app": "argocd"},
                    "finalizers": ["service.kubernetes.io/load-balancer-cleanup"]},
                "spec": {"type": "LoadBalancer", "ports": [{"port": 80}]}
            })
        );
        let headless = json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "h"},
            "spec": {"clusterIP": "None"}});
        assert_eq!(clean_manifest(&headless), headless);
    }

    #[test]
    fn history_kinds_match_like_kubectl() {
        let svc = ObjectKey::new("", "Service", Some("ns"), "web");
        let cluster = ObjectKey::new("infra.example.com", "KubernetesCluster", None, "c");
        assert!(kind_matches(&svc, "Service"));
        assert!(kind_matches(&svc, "services"));
        assert!(kind_matches(&svc, "service"));
        assert!(!kind_matches(&svc, "Pod"));
        assert!(kind_matches(
            &cluster,
            "KubernetesCluster.infra.example.com"
        ));
        assert!(kind_matches(
            &cluster,
            "kubernetesclusters.infra.example.com"
        ));
        assert!(kind_matches(&cluster, "kubernetescluster"));
        assert!(!kind_matches(
            &cluster,
            "kubernetesclusters.other.example.com"
        ));
    }
}
