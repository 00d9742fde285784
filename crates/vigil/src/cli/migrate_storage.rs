//! `vigil migrate-storage`: rewrites every object of Vigil's CRDs at the CRD's storage version,
//! then trims the CRD's `status.storedVersions` to that version alone, so that a later release
//! can stop serving the old versions (the API server refuses to drop a version still listed
//! there). Modelled on cert-manager's `cmctl upgrade migrate-api-version`.
//!
//! Why a command and not the leader at start: the new CRDs have to be applied by hand anyway
//! (`helm upgrade` never touches a chart's `crds/`), and trimming `storedVersions` needs write
//! access to CRDs, cluster-wide objects the operator has no business changing; the command runs
//! once per upgrade with the credentials of whoever applies the CRDs. See docs/upgrading.md.
//!
//! Each object is written back as read (a PUT carrying its resourceVersion): the API server
//! encodes every write at the storage version, and skips the write when the encoding is the
//! one already stored, so an object already at the storage version is left alone (same
//! resourceVersion, no watch event). The PUT changes nothing and is guarded by the
//! resourceVersion, so it can never undo a concurrent write of a running Vigil: on a conflict the
//! object is read again and written again.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, PostParams};
use kube::{Client, ResourceExt as _};
use vigil_controllers::registry;

use crate::outln;

/// The field manager of the command's writes.
const MANAGER: &str = "vigil-migrate-storage";
/// Objects written at once: enough to hide the round trips, few enough for a busy API server.
const IN_FLIGHT: usize = 8;
/// Attempts per object (a conflict, or an error worth retrying such as a timeout).
const ATTEMPTS: usize = 5;
/// A list page.
const PAGE: u32 = 500;

#[derive(Debug, clap::Args)]
pub struct MigrateStorageArgs {
    /// Kubeconfig to use; default: `KUBECONFIG`, `~/.kube/config`, then the in-cluster configuration.
    #[arg(long, env = "KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// CRDs to migrate, by name (`topics.kafka.vigil.dev`); default: all of Vigil's. A CRD that
    /// is not installed is skipped.
    #[arg(long = "crd", value_name = "NAME")]
    crds: Vec<String>,
}

/// What the migration did for one CRD.
#[derive(Debug, Default)]
struct Outcome {
    objects: usize,
    /// Written again by this command: they were stored at another version.
    rewritten: usize,
    /// Already at the storage version: the API server wrote nothing.
    unchanged: usize,
    /// Deleted while the command ran.
    gone: usize,
}

pub async fn run(args: MigrateStorageArgs) -> anyhow::Result<()> {
    let client = crate::cli::run::client(args.kubeconfig.as_ref()).await?;
    let ours: Vec<CustomResourceDefinition> = registry::CONTROLLERS
        .iter()
        .flat_map(|c| (c.crds)())
        .collect();
    let names: Vec<String> = if args.crds.is_empty() {
        ours.iter().map(|c| c.name_any()).collect()
    } else {
        args.crds.clone()
    };
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let started = Instant::now();
    let mut total = 0;
    for name in &names {
        let Some(live) = crds
            .get_opt(name)
            .await
            .context(format!("reading CRD {name}"))?
        else {
            outln!("{name}: not installed, skipped")?;
            continue;
        };
        let storage = storage_version(&live).context(format!("CRD {name}: no storage version"))?;
        if let Some(wanted) = ours.iter().find(|c| c.name_any() == *name)
            && let Some(wanted) = storage_version(wanted)
        {
            anyhow::ensure!(
                storage == wanted,
                "CRD {name} stores {storage}, this release stores {wanted}: apply this release's \
                 CRDs first (docs/upgrading.md)"
            );
        }
        let stored = stored_versions(&live);
        if stored == [storage.clone()] {
            outln!("{name}: storedVersions already [{storage}], nothing to migrate")?;
            continue;
        }
        let begun = Instant::now();
        let outcome = migrate_objects(&client, &live, &storage)
            .await
            .context(format!("migrating the objects of {name} to {storage}"))?;
        trim_stored_versions(&crds, name, &storage, &stored).await?;
        total += outcome.objects;
        outln!(
            "{name}: {} objects in {:.2} s: {} rewritten at {storage}, {} already at {storage}, \
             {} deleted meanwhile; storedVersions [{}] -> [{storage}]",
            outcome.objects,
            begun.elapsed().as_secs_f64(),
            outcome.rewritten,
            outcome.unchanged,
            outcome.gone,
            stored.join(", "),
        )?;
    }
    outln!(
        "migrated {total} objects in {:.2} s",
        started.elapsed().as_secs_f64()
    )?;
    Ok(())
}

fn storage_version(crd: &CustomResourceDefinition) -> Option<String> {
    crd.spec
        .versions
        .iter()
        .find(|v| v.storage)
        .map(|v| v.name.clone())
}

fn stored_versions(crd: &CustomResourceDefinition) -> Vec<String> {
    crd.status
        .as_ref()
        .and_then(|s| s.stored_versions.clone())
        .unwrap_or_default()
}

/// Lists every object of the CRD (all namespaces, page by page) and writes each back.
async fn migrate_objects(
    client: &Client,
    crd: &CustomResourceDefinition,
    storage: &str,
) -> anyhow::Result<Outcome> {
    let gvk = GroupVersionKind::gvk(&crd.spec.group, storage, &crd.spec.names.kind);
    let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
    let all: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
    let mut outcome = Outcome::default();
    let mut params = ListParams::default().limit(PAGE);
    loop {
        let page = all.list(&params).await?;
        outcome.objects += page.items.len();
        let results: Vec<Written> = futures::stream::iter(page.items)
            .map(|obj| rewrite(client, &resource, obj))
            .buffer_unordered(IN_FLIGHT)
            .try_collect()
            .await?;
        for written in results {
            match written {
                Written::Rewritten => outcome.rewritten += 1,
                Written::Unchanged => outcome.unchanged += 1,
                Written::Gone => outcome.gone += 1,
            }
        }
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(outcome),
        }
    }
}

enum Written {
    Rewritten,
    Unchanged,
    Gone,
}

/// Writes `obj` back as read; on a conflict (someone wrote it since), reads it and tries again.
async fn rewrite(
    client: &Client,
    resource: &ApiResource,
    mut obj: DynamicObject,
) -> anyhow::Result<Written> {
    let name = obj.name_any();
    let api: Api<DynamicObject> = match obj.namespace() {
        Some(ns) => Api::namespaced_with(client.clone(), &ns, resource),
        None => Api::all_with(client.clone(), resource),
    };
    let params = PostParams {
        field_manager: Some(MANAGER.to_owned()),
        ..PostParams::default()
    };
    let mut attempt = 0;
    loop {
        attempt += 1;
        let before = obj.resource_version();
        let error = match api.replace(&name, &params, &obj).await {
            Ok(written) if written.resource_version() == before => return Ok(Written::Unchanged),
            Ok(_) => return Ok(Written::Rewritten),
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(Written::Gone),
            Err(e) => e,
        };
        let conflict = matches!(&error, kube::Error::Api(s) if s.code == 409);
        if attempt >= ATTEMPTS || !(conflict || retryable(&error)) {
            return Err(error).context(format!("writing {name}"));
        }
        if !conflict {
            tokio::time::sleep(Duration::from_millis(200 * attempt as u64)).await;
        }
        match api.get_opt(&name).await? {
            Some(fresh) => obj = fresh,
            None => return Ok(Written::Gone),
        }
    }
}

/// Errors a second attempt may not meet: the server busy or restarting, the connection lost.
fn retryable(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(s) => s.code == 429 || s.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// Sets `status.storedVersions` to `[storage]` — unless the CRD changed while the objects were
/// migrated (another storage version, or a version stored meanwhile that is not `storage`):
/// objects may then be stored at a version this run did not write, so it must run again.
async fn trim_stored_versions(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
    storage: &str,
    before: &[String],
) -> anyhow::Result<()> {
    for _ in 0..ATTEMPTS {
        let mut fresh = crds.get(name).await?;
        let added: Vec<String> = stored_versions(&fresh)
            .into_iter()
            .filter(|v| !before.contains(v) && v != storage)
            .collect();
        anyhow::ensure!(
            storage_version(&fresh).as_deref() == Some(storage) && added.is_empty(),
            "CRD {name} changed during the migration (storage version or stored versions): \
             run vigil migrate-storage again once nothing is changing the CRDs"
        );
        if let Some(status) = fresh.status.as_mut() {
            status.stored_versions = Some(vec![storage.to_owned()]);
        }
        match crds
            .replace_status(name, &PostParams::default(), &fresh)
            .await
        {
            Ok(_) => return Ok(()),
            // The CRD's status moved (its conditions): read it again.
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(e).context(format!("setting the storedVersions of {name}")),
        }
    }
    anyhow::bail!("CRD {name} kept changing: run vigil migrate-storage again")
}
