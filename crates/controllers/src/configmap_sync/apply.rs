//! The writes a plan asks for: copies created, replaced, recreated or deleted (only what the
//! plan asks for), then the status (only what differs) and the Events.

use std::collections::BTreeMap;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, PostParams, Preconditions};
use kube::runtime::controller::Action;
use kube::{Resource as _, ResourceExt as _};
use vigil_apis::ConfigMapSync;
use vigil_apis::configmap_sync::SyncedKind;

use super::cache::Copied;
use super::decide::{self, AfterWrites, WriteOutcome};
use super::model::{
    CONTENT_HASH_ANNOTATION, COPY_LABEL, ConfigMapView, CopyRef, CopyWrite, Error,
    MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNER_ANNOTATION, Plan, SOURCE_ANNOTATION, SyncView,
    WriteKind,
};
use super::reconcile::Context;

/// Copies written at once for one ConfigMapSync (a fan-out to 100 namespaces overlaps them).
const WRITE_CONCURRENCY: usize = 16;

/// Writes what the plan asks for; then the status (only when it changed) and the Events that
/// [`decide::after_writes`] makes of the plan and the writes' outcomes.
pub(super) async fn apply(
    sync: &ConfigMapSync,
    ctx: &Context,
    plan: Plan,
) -> Result<Action, Error> {
    let mut written = Written::default();
    if !plan.writes.is_empty() {
        // The cache holds hashes only: read the source's content once for every copy.
        let all = match sync.spec.kind() {
            SyncedKind::ConfigMap => write_all::<ConfigMap>(sync, ctx, &plan.writes).await?,
            SyncedKind::Secret => write_all::<Secret>(sync, ctx, &plan.writes).await?,
        };
        let Some(all) = all else {
            // Deleted since the cache saw it: its deletion event brings a new pass.
            return Ok(Action::await_change());
        };
        written = all;
    }
    let kind = sync.spec.kind();
    let deletions: Vec<_> = plan
        .deletes
        .iter()
        .map(|d| delete_copy(ctx, kind, d))
        .collect();
    let deletions: Vec<_> = futures::stream::iter(deletions)
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    let delete_error = deletions.into_iter().find_map(Result::err);

    let now = Timestamp::now();
    let AfterWrites::Report {
        status,
        events,
        error,
    } = decide::after_writes(&plan, &written.outcomes, sync.metadata.generation, now)
    else {
        return Ok(Action::await_change());
    };
    ctx.runtime
        .write_status_with_lists(
            sync,
            sync.status.as_ref(),
            &status,
            &["destinations", "conditions"],
        )
        .await?;
    ctx.runtime
        .recorder()
        .publish_all(&sync.object_ref(&()), &events, "Sync")
        .await;
    if let (Some(message), Some(source)) = (error, written.first_error) {
        return Err(Error::Copies { message, source });
    }
    if let Some(e) = delete_error {
        return Err(e.into());
    }
    Ok(Action::await_change())
}

/// The outcomes of a plan's copy writes, by destination namespace, and the first failure.
#[derive(Default)]
struct Written {
    outcomes: BTreeMap<String, WriteOutcome>,
    first_error: Option<kube::Error>,
}

impl FromIterator<(String, Result<WriteOutcome, kube::Error>)> for Written {
    fn from_iter<I: IntoIterator<Item = (String, Result<WriteOutcome, kube::Error>)>>(
        iter: I,
    ) -> Self {
        let mut written = Written::default();
        for (namespace, result) in iter {
            let outcome = match result {
                Ok(outcome) => outcome,
                Err(e) => {
                    let outcome = WriteOutcome::Failed(e.to_string());
                    written.first_error.get_or_insert(e);
                    outcome
                }
            };
            written.outcomes.insert(namespace, outcome);
        }
        written
    }
}

/// Reads the source once and writes every planned copy (up to [`WRITE_CONCURRENCY`] at once);
/// `None` if the source is gone.
async fn write_all<K: Copied>(
    sync: &ConfigMapSync,
    ctx: &Context,
    writes: &[CopyWrite],
) -> Result<Option<Written>, kube::Error> {
    let sources: Api<K> =
        Api::namespaced(ctx.runtime.client().clone(), &sync.spec.source_namespace);
    let Some(source) = sources.get_opt(&sync.spec.config_map_name).await? else {
        return Ok(None);
    };
    // Collected first: a lazily mapped stream of borrowing futures trips the compiler's `Send`
    // inference for the controller's future.
    let futures: Vec<_> = writes
        .iter()
        .map(|w| {
            let copy = copy_of(sync, &source, w);
            async move { (w.namespace.clone(), write_copy(ctx, copy, w).await) }
        })
        .collect();
    let outcomes: Vec<_> = futures::stream::iter(futures)
        .buffer_unordered(WRITE_CONCURRENCY)
        .collect()
        .await;
    Ok(Some(outcomes.into_iter().collect()))
}

/// The copy of `source` for a destination.
fn copy_of<K: Copied>(sync: &ConfigMapSync, source: &K, write: &CopyWrite) -> K {
    let mut labels = match &write.kind {
        WriteKind::Update { labels, .. } => labels.clone(),
        _ => BTreeMap::new(),
    };
    labels.insert(MANAGED_BY_LABEL.into(), MANAGED_BY_VALUE.into());
    labels.insert(COPY_LABEL.into(), "true".into());
    let owner = format!(
        "{}/{}",
        sync.namespace().unwrap_or_default(),
        sync.name_any()
    );
    let annotations = BTreeMap::from([
        (OWNER_ANNOTATION.to_owned(), owner),
        (
            SOURCE_ANNOTATION.to_owned(),
            format!(
                "{}/{}",
                sync.spec.source_namespace, sync.spec.config_map_name
            ),
        ),
        (CONTENT_HASH_ANNOTATION.to_owned(), source.hash()),
    ]);
    let mut copy = source.content();
    let meta = copy.meta_mut();
    meta.name = Some(sync.spec.config_map_name.clone());
    meta.namespace = Some(write.namespace.clone());
    meta.labels = Some(labels);
    meta.annotations = Some(annotations);
    if let WriteKind::Update {
        resource_version, ..
    } = &write.kind
    {
        meta.resource_version = resource_version.clone();
    }
    copy
}

fn post_params(ctx: &Context) -> PostParams {
    PostParams {
        field_manager: Some(ctx.runtime.field_manager()),
        ..PostParams::default()
    }
}

fn delete_params(uid: &str) -> DeleteParams {
    DeleteParams {
        preconditions: Some(Preconditions {
            uid: Some(uid.to_owned()),
            resource_version: None,
        }),
        ..DeleteParams::default()
    }
}

/// A 409 lost a race (see [`WriteOutcome::Raced`]); any other error failed the write.
fn outcome<T>(result: Result<T, kube::Error>) -> Result<WriteOutcome, kube::Error> {
    match result {
        Ok(_) => Ok(WriteOutcome::Done),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(WriteOutcome::Raced),
        Err(e) => Err(e),
    }
}

async fn write_copy<K: Copied>(
    ctx: &Context,
    copy: K,
    write: &CopyWrite,
) -> Result<WriteOutcome, kube::Error> {
    let api: Api<K> = Api::namespaced(ctx.runtime.client().clone(), &write.namespace);
    let name = copy.name_any();
    match &write.kind {
        WriteKind::Create => {
            ctx.metrics.wrote("create");
            outcome(api.create(&post_params(ctx), &copy).await)
        }
        WriteKind::Update { .. } => {
            ctx.metrics.wrote("update");
            outcome(api.replace(&name, &post_params(ctx), &copy).await)
        }
        WriteKind::Recreate { uid } => {
            ctx.metrics.wrote("delete");
            match api.delete(&name, &delete_params(uid)).await {
                Ok(_) => {}
                // Gone already, or replaced by someone: the create below (or the next pass) decides.
                Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => {}
                Err(e) => return Err(e),
            }
            ctx.metrics.wrote("create");
            outcome(api.create(&post_params(ctx), &copy).await)
        }
    }
}

pub(super) async fn delete_copy(
    ctx: &Context,
    kind: SyncedKind,
    target: &CopyRef,
) -> Result<(), kube::Error> {
    match kind {
        SyncedKind::ConfigMap => delete_object::<ConfigMap>(ctx, target).await,
        SyncedKind::Secret => delete_object::<Secret>(ctx, target).await,
    }
}

async fn delete_object<K: Copied>(ctx: &Context, target: &CopyRef) -> Result<(), kube::Error> {
    let api: Api<K> = Api::namespaced(ctx.runtime.client().clone(), &target.namespace);
    ctx.metrics.wrote("delete");
    match api.delete(&target.name, &delete_params(&target.uid)).await {
        Ok(_) => Ok(()),
        // Gone already, or someone else's object now carries the name: nothing of ours to delete.
        Err(kube::Error::Api(s)) if s.code == 404 || s.code == 409 => Ok(()),
        Err(e) => Err(e),
    }
}

/// Copies of this name in any namespace, asked of the API (not the cache).
pub(super) async fn list_copies<K: Copied>(
    ctx: &Context,
    sync: &SyncView,
) -> Result<Vec<ConfigMapView>, kube::Error> {
    let all: Api<K> = Api::all(ctx.runtime.client().clone());
    let params = ListParams::default()
        .labels(&format!("{COPY_LABEL}=true"))
        .fields(&format!("metadata.name={}", sync.spec.config_map_name));
    Ok(all
        .list(&params)
        .await?
        .items
        .into_iter()
        .map(|mut obj| {
            obj.slim();
            obj.view()
        })
        .collect())
}
