//! `vigil status restore`: the article's two steps, in order, for every object in a vault —
//! re-create the object if it is missing (the API server drops `status` on create), then write
//! the saved status through the `/status` subresource — and a report of what was restored,
//! skipped and why.
//!
//! A status is written only where the live object has none: a status its controller already
//! wrote is never overwritten. A re-created object carries `vigil.dev/restore-status: pending`
//! until its status is back (the convention operators follow to wait for the restore); then it
//! says `done`, and `vigil.dev/status-restored-from` gives the capture time of the record used.

use std::collections::BTreeSet;

use anyhow::Context as _;
use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{ApiCapabilities, Scope};
use serde_json::{Value, json};
use vigil_controllers::status_vault::model::{
    RESTORE_DONE, RESTORE_PENDING, RESTORE_STATUS_ANNOTATION, RESTORED_FROM_ANNOTATION,
};
use vigil_vault::{Error as VaultError, ObjectKey, Record, Vault};

use super::common::{CommonArgs, discover, resolve};

/// Objects restored at once: enough to hide round trips, few enough to stay polite to the API.
const CONCURRENCY: usize = 16;
/// Attempts at a status write that meets a conflict (the object changed under us).
const STATUS_ATTEMPTS: usize = 3;

#[derive(Debug, clap::Args)]
pub struct RestoreArgs {
    #[command(flatten)]
    pub common: CommonArgs,
    /// The vault: a directory or `s3://bucket/prefix[?endpoint=http://…]`.
    #[arg(long)]
    pub from: String,
    /// Kinds whose status is restored, comma-separated (`Service`, `services`,
    /// `kubernetesclusters.infra.example.com`). Other kinds are only re-created.
    #[arg(long, value_delimiter = ',')]
    pub status_include_resources: Vec<String>,
    /// Kinds to restore at all; default: every kind in the vault.
    #[arg(long, value_delimiter = ',')]
    pub include_resources: Vec<String>,
    /// Namespaces to restore, comma-separated; default: all. Cluster-scoped objects are always
    /// included.
    #[arg(long, value_delimiter = ',')]
    pub include_namespaces: Vec<String>,
    /// Also restore objects whose last record is a tombstone (deleted while Vigil watched).
    #[arg(long)]
    pub include_deleted: bool,
    /// Report what would be done; change nothing.
    #[arg(long)]
    pub dry_run: bool,
}

/// What a restore does with one object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Create the object (when missing) and/or write its status.
    Act { create: bool, write_status: bool },
    /// Leave it; the reason is reported.
    Skip(String),
}

/// Whether the kind serves `/status` (discovery lists it as `<plural>/status`).
pub fn has_status_subresource(caps: &ApiCapabilities) -> bool {
    caps.subresources
        .iter()
        .any(|(sub, _)| sub.plural == "status")
}

/// Whether a status says nothing: absent, null, or only empty objects and lists
/// (`{"loadBalancer": {}}` is what the API server gives a new Service).
pub fn is_empty_status(status: Option<&Value>) -> bool {
    match status {
        None | Some(Value::Null) => true,
        Some(Value::Object(map)) => map.values().all(|v| is_empty_status(Some(v))),
        Some(Value::Array(items)) => items.is_empty(),
        Some(_) => false,
    }
}

/// The decision for one object, from its newest record, whether a manifest is at hand, and the
/// live object (None: missing).
pub fn decide(
    record: &Record,
    has_manifest: bool,
    live_status: Option<Option<&Value>>,
    restore_status: bool,
    include_deleted: bool,
) -> Decision {
    if record.deleted && !include_deleted {
        return Decision::Skip(format!(
            "deleted while watched (tombstone at {}); --include-deleted restores it",
            record.time
        ));
    }
    let has_status = !is_empty_status(Some(&record.status));
    match live_status {
        None if !has_manifest => Decision::Skip(
            "missing, and the vault holds no manifest to re-create it (back it up with `vigil status backup`)".into(),
        ),
        None => Decision::Act {
            create: true,
            write_status: restore_status && has_status,
        },
        Some(_) if !restore_status => {
            Decision::Skip("exists; its kind is not in --status-include-resources".into())
        }
        Some(_) if !has_status => Decision::Skip("exists; the record holds no status".into()),
        Some(live) if !is_empty_status(live) => {
            Decision::Skip("exists with a status already (kept: its controller's is newer)".into())
        }
        Some(_) => Decision::Act {
            create: false,
            write_status: true,
        },
    }
}

/// One line of the report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub key: ObjectKey,
    pub result: OutcomeKind,
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum OutcomeKind {
    /// Re-created and its status restored.
    RecreatedWithStatus,
    /// Re-created (its kind's status not requested, or no status recorded).
    Recreated,
    /// Existing object, status restored.
    StatusRestored,
    Skipped,
    Failed,
}

impl OutcomeKind {
    fn label(self, dry_run: bool) -> &'static str {
        match (self, dry_run) {
            (OutcomeKind::RecreatedWithStatus, false) => "re-created, status restored",
            (OutcomeKind::RecreatedWithStatus, true) => "would re-create and restore status",
            (OutcomeKind::Recreated, false) => "re-created",
            (OutcomeKind::Recreated, true) => "would re-create",
            (OutcomeKind::StatusRestored, false) => "status restored",
            (OutcomeKind::StatusRestored, true) => "would restore status",
            (OutcomeKind::Skipped, _) => "skipped",
            (OutcomeKind::Failed, _) => "FAILED",
        }
    }
}

/// What a restore did (or, with `--dry-run`, would do).
#[derive(Debug, Clone, Default)]
pub struct RestoreReport {
    pub outcomes: Vec<Outcome>,
    pub dry_run: bool,
}

impl RestoreReport {
    pub fn count(&self, kind: OutcomeKind) -> usize {
        self.outcomes.iter().filter(|o| o.result == kind).count()
    }

    pub fn print(&self) {
        for o in &self.outcomes {
            let detail = if o.detail.is_empty() {
                String::new()
            } else {
                format!(": {}", o.detail)
            };
            say!(
                "{:<40} {}{detail}",
                o.key.to_string(),
                o.result.label(self.dry_run)
            );
        }
        say!(
            "{}{} re-created with status, {} re-created, {} status restored, {} skipped, {} failed",
            if self.dry_run {
                "dry run, nothing changed: would be "
            } else {
                ""
            },
            self.count(OutcomeKind::RecreatedWithStatus),
            self.count(OutcomeKind::Recreated),
            self.count(OutcomeKind::StatusRestored),
            self.count(OutcomeKind::Skipped),
            self.count(OutcomeKind::Failed),
        );
    }
}

pub async fn run(args: RestoreArgs) -> anyhow::Result<()> {
    let client = args.common.client().await?;
    let vault = args.common.open_existing(&args.from).await?;
    let report = restore(&client, &vault, &args).await?;
    report.print();
    anyhow::ensure!(
        report.count(OutcomeKind::Failed) == 0,
        "{} objects could not be restored",
        report.count(OutcomeKind::Failed)
    );
    Ok(())
}

/// Restores every object of `vault` that `args` selects; the report says what happened to each.
/// Errors only when nothing can be done at all (vault or discovery unusable, a flag naming an
/// unknown kind).
pub async fn restore(
    client: &kube::Client,
    vault: &Vault,
    args: &RestoreArgs,
) -> anyhow::Result<RestoreReport> {
    let resources = discover(client).await?;
    let kinds = |names: &[String]| -> anyhow::Result<BTreeSet<(String, String)>> {
        names
            .iter()
            .filter(|n| !n.trim().is_empty())
            .map(|n| {
                resolve(&resources, n)
                    .map(|(ar, _)| (ar.group.clone(), ar.kind.clone()))
                    .map_err(anyhow::Error::msg)
            })
            .collect()
    };
    for wanted in args
        .status_include_resources
        .iter()
        .filter(|n| !n.trim().is_empty())
    {
        let (ar, caps) = resolve(&resources, wanted).map_err(anyhow::Error::msg)?;
        anyhow::ensure!(
            has_status_subresource(caps),
            "{} has no status subresource: its status cannot be written back (leave it out of --status-include-resources)",
            ar.kind
        );
    }
    let status_kinds = kinds(&args.status_include_resources)?;
    let included_kinds = kinds(&args.include_resources)?;
    let namespaces: BTreeSet<&str> = args
        .include_namespaces
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    let keys: Vec<ObjectKey> = vault
        .keys()
        .await
        .with_context(|| format!("listing {}", vault.location()))?
        .into_iter()
        .filter(|k| {
            included_kinds.is_empty() || included_kinds.contains(&(k.group.clone(), k.kind.clone()))
        })
        .filter(|k| {
            namespaces.is_empty()
                || k.namespace
                    .as_deref()
                    .is_none_or(|ns| namespaces.contains(ns))
        })
        .collect();
    let outcomes: Vec<Outcome> = futures::stream::iter(keys)
        .map(|key| {
            let resource = resources
                .iter()
                .find(|(ar, _)| ar.group == key.group && ar.kind == key.kind);
            let restore_status = status_kinds.contains(&(key.group.clone(), key.kind.clone()));
            async move {
                let (result, detail) = match resource {
                    None => (
                        OutcomeKind::Skipped,
                        format!("the cluster serves no kind {}", key.kind_and_group()),
                    ),
                    Some(resource) => {
                        restore_one(client, vault, &key, resource, restore_status, args).await
                    }
                };
                Outcome {
                    key,
                    result,
                    detail,
                }
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let mut outcomes = outcomes;
    outcomes.sort_by(|a, b| a.key.cmp(&b.key));
    Ok(RestoreReport {
        outcomes,
        dry_run: args.dry_run,
    })
}

fn api(
    client: &kube::Client,
    (ar, caps): &(ApiResource, ApiCapabilities),
    key: &ObjectKey,
) -> kube::Api<DynamicObject> {
    match (&caps.scope, &key.namespace) {
        (Scope::Namespaced, Some(ns)) => kube::Api::namespaced_with(client.clone(), ns, ar),
        _ => kube::Api::all_with(client.clone(), ar),
    }
}

/// Reads the object's records, decides, acts; returns the report line.
async fn restore_one(
    client: &kube::Client,
    vault: &Vault,
    key: &ObjectKey,
    resource: &(ApiResource, ApiCapabilities),
    restore_status: bool,
    args: &RestoreArgs,
) -> (OutcomeKind, String) {
    let failed =
        |what: &str, e: &dyn std::fmt::Display| (OutcomeKind::Failed, format!("{what}: {e}"));
    let api = api(client, resource, key);
    let live = match api.get_opt(&key.name).await {
        Ok(live) => live,
        Err(e) => return failed("reading the live object", &e),
    };
    let versions = match vault.versions(key).await {
        Ok(versions) => versions,
        Err(e) => return failed("reading the vault", &e),
    };
    // Newest first: the newest readable record gives the status (unreadable newer ones are
    // reported, never applied); for a missing object, the newest record with a manifest gives
    // the object to re-create. Reads stop as soon as both are known.
    let mut notes = Vec::new();
    let mut record: Option<Record> = None;
    let mut manifest: Option<Value> = None;
    for stored in versions.iter().rev() {
        match vault.record(key, stored.version).await {
            Ok(r) => {
                if manifest.is_none() {
                    manifest = r.object.clone();
                }
                if record.is_none() {
                    record = Some(r);
                }
                if live.is_some() || manifest.is_some() {
                    break;
                }
            }
            Err(e @ VaultError::Corrupt { .. }) => {
                notes.push(format!("corrupt record skipped ({e})"))
            }
            Err(e) => return failed("reading the vault", &e),
        }
    }
    let Some(record) = record.as_ref() else {
        return (
            OutcomeKind::Skipped,
            format!("no readable record: {}", notes.join("; ")),
        );
    };
    let decision = decide(
        record,
        manifest.is_some(),
        live.as_ref().map(|o| o.data.get("status")),
        restore_status,
        args.include_deleted,
    );
    let (create, write_status) = match decision {
        Decision::Skip(reason) => return (OutcomeKind::Skipped, joined(reason, &notes)),
        Decision::Act {
            create,
            write_status,
        } => (create, write_status),
    };
    let kind = match (create, write_status) {
        (true, true) => OutcomeKind::RecreatedWithStatus,
        (true, false) => OutcomeKind::Recreated,
        _ => OutcomeKind::StatusRestored,
    };
    let from = format!("record of {}", record.time);
    if args.dry_run {
        return (kind, joined(from, &notes));
    }
    let live = match (live, create, manifest) {
        (Some(live), _, _) => live,
        (None, true, Some(manifest)) => {
            match create_object(client, &api, key, manifest, write_status).await {
                Ok((created, namespace_created)) => {
                    if namespace_created {
                        notes.push(format!(
                            "namespace {} re-created",
                            key.namespace.as_deref().unwrap_or_default()
                        ));
                    }
                    created
                }
                Err(e) => return failed("re-creating", &e),
            }
        }
        (None, _, _) => return failed("re-creating", &"no manifest"),
    };
    if write_status {
        match write_saved_status(&api, key, live, &record.status).await {
            Ok(Some(0)) => {}
            Ok(Some(conflicts)) => notes.push(format!(
                "written after {conflicts} conflict(s): the object changed meanwhile, its status stayed empty"
            )),
            Ok(None) => {
                return (
                    OutcomeKind::Skipped,
                    joined("a controller wrote a status while restoring (kept)".into(), &notes),
                );
            }
            Err(e) => return failed("writing the status", &e),
        }
        if let Err(e) = annotate_restored(&api, key, &record.time).await {
            return failed("annotating", &e);
        }
    }
    (kind, joined(from, &notes))
}

/// The report's detail: the main fact first, then the notes gathered on the way.
fn joined(detail: String, notes: &[String]) -> String {
    let mut all = Vec::with_capacity(notes.len() + 1);
    if !detail.is_empty() {
        all.push(detail);
    }
    all.extend(notes.iter().cloned());
    all.join("; ")
}

/// Creates the object from its saved manifest; marked `restore-status: pending` when its status
/// follows, so that operators following the convention wait for it.
/// A missing namespace (a rebuilt cluster) is created first, as Velero does; the bool says whether
/// it had to be.
async fn create_object(
    client: &kube::Client,
    api: &kube::Api<DynamicObject>,
    key: &ObjectKey,
    mut manifest: Value,
    status_follows: bool,
) -> Result<(DynamicObject, bool), kube::Error> {
    if status_follows
        && let Some(meta) = manifest.get_mut("metadata").and_then(Value::as_object_mut)
    {
        let annotations = meta.entry("annotations").or_insert_with(|| json!({}));
        if let Some(map) = annotations.as_object_mut() {
            map.insert(RESTORE_STATUS_ANNOTATION.into(), RESTORE_PENDING.into());
        }
    }
    let object: DynamicObject =
        serde_json::from_value(manifest).map_err(kube::Error::SerdeError)?;
    let mut namespace_created = false;
    loop {
        match api.create(&PostParams::default(), &object).await {
            Ok(created) => return Ok((created, namespace_created)),
            // Someone re-applied it meanwhile (say, from git): restore onto theirs.
            Err(kube::Error::Api(status)) if status.code == 409 => {
                return Ok((api.get(&key.name).await?, namespace_created));
            }
            Err(kube::Error::Api(status)) if status.code == 404 && !namespace_created => {
                let Some(ns) = key.namespace.as_deref() else {
                    return Err(kube::Error::Api(status));
                };
                let namespaces: kube::Api<Namespace> = kube::Api::all(client.clone());
                if namespaces.get_opt(ns).await?.is_some() {
                    return Err(kube::Error::Api(status));
                }
                let namespace: Namespace =
                    serde_json::from_value(json!({"metadata": {"name": ns}}))
                        .map_err(kube::Error::SerdeError)?;
                match namespaces.create(&PostParams::default(), &namespace).await {
                    // Another object of the same namespace may have created it first.
                    Ok(_) => {}
                    Err(kube::Error::Api(s)) if s.code == 409 => {}
                    Err(e) => return Err(e),
                }
                namespace_created = true;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Writes `status` through `/status` with the live object's resourceVersion as precondition, so
/// that a status written meanwhile by a controller wins. Returns the conflicts met on the way, or
/// None when a controller's status won; an error when the object kept changing under us (its
/// status still empty) for every attempt.
async fn write_saved_status(
    api: &kube::Api<DynamicObject>,
    key: &ObjectKey,
    mut live: DynamicObject,
    status: &Value,
) -> anyhow::Result<Option<usize>> {
    for conflicts in 0..STATUS_ATTEMPTS {
        if !is_empty_status(live.data.get("status")) {
            return Ok(None);
        }
        let mut desired = live.clone();
        if let Some(map) = desired.data.as_object_mut() {
            map.insert("status".into(), status.clone());
        }
        match api
            .replace_status(&key.name, &PostParams::default(), &desired)
            .await
        {
            Ok(_) => return Ok(Some(conflicts)),
            Err(kube::Error::Api(s)) if s.code == 409 => {
                live = api.get(&key.name).await?;
            }
            Err(e) => return Err(e.into()),
        }
    }
    anyhow::bail!("the object changed under every one of {STATUS_ATTEMPTS} attempts")
}

async fn annotate_restored(
    api: &kube::Api<DynamicObject>,
    key: &ObjectKey,
    record_time: &str,
) -> Result<(), kube::Error> {
    let patch = json!({"metadata": {"annotations": {
        RESTORED_FROM_ANNOTATION: record_time,
        RESTORE_STATUS_ANNOTATION: RESTORE_DONE,
    }}});
    api.patch(&key.name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(status: Value, deleted: bool) -> Record {
        Record {
            api_version: "v1".into(),
            kind: "Service".into(),
            namespace: Some("argocd".into()),
            name: "argocd-server".into(),
            uid: "u1".into(),
            resource_version: "7".into(),
            generation: None,
            status,
            time: "2026-11-22T10:00:00.000Z".into(),
            deleted,
            object: None,
        }
    }

    fn lb() -> Value {
        json!({"loadBalancer": {"ingress": [{"ip": "172.18.0.7"}]}})
    }

    #[test]
    fn empty_statuses() {
        assert!(is_empty_status(None));
        assert!(is_empty_status(Some(&Value::Null)));
        assert!(is_empty_status(Some(&json!({"loadBalancer": {}}))));
        assert!(is_empty_status(Some(&json!({"conditions": []}))));
        assert!(!is_empty_status(Some(&lb())));
        assert!(!is_empty_status(Some(&json!({"observedGeneration": 0}))));
        assert!(!is_empty_status(Some(&json!({"ready": false}))));
    }

    #[test]
    fn a_missing_object_is_re_created_then_its_status_restored() {
        let r = record(lb(), false);
        assert_eq!(
            decide(&r, true, None, true, false),
            Decision::Act {
                create: true,
                write_status: true
            }
        );
        assert_eq!(
            decide(&r, true, None, false, false),
            Decision::Act {
                create: true,
                write_status: false
            },
            "kinds outside --status-include-resources come back without status, as with Velero"
        );
        assert!(
            matches!(decide(&r, false, None, true, false), Decision::Skip(reason) if reason.contains("no manifest"))
        );
    }

    #[test]
    fn an_existing_status_is_never_overwritten() {
        let r = record(lb(), false);
        let theirs = json!({"loadBalancer": {"ingress": [{"ip": "10.0.0.1"}]}});
        assert!(
            matches!(decide(&r, true, Some(Some(&theirs)), true, false), Decision::Skip(reason) if reason.contains("status already"))
        );
        let fresh = json!({"loadBalancer": {}});
        assert_eq!(
            decide(&r, true, Some(Some(&fresh)), true, false),
            Decision::Act {
                create: false,
                write_status: true
            }
        );
        assert!(matches!(
            decide(&r, true, Some(None), false, false),
            Decision::Skip(_)
        ));
        let empty = record(json!({}), false);
        assert!(
            matches!(decide(&empty, true, Some(None), true, false), Decision::Skip(reason) if reason.contains("no status"))
        );
    }

    #[test]
    fn tombstones_are_skipped_unless_asked() {
        let r = record(lb(), true);
        assert!(
            matches!(decide(&r, true, None, true, false), Decision::Skip(reason) if reason.contains("tombstone"))
        );
        assert_eq!(
            decide(&r, true, None, true, true),
            Decision::Act {
                create: true,
                write_status: true
            }
        );
    }
}
