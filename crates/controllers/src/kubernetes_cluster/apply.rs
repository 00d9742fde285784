//! Turns decisions into writes — only what differs: the finalizer, the provider request, the
//! status (through the runtime's status writer), the kubeconfig Secret and the Events.

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource as _, ResourceExt as _};
use sha2::Digest as _;
use vigil_apis::KubernetesCluster;
use vigil_apis::kubernetes_cluster::KubernetesClusterStatus;
use vigil_provider::{ClusterProvider, ProviderCluster, ProviderError};

use super::model::{
    CLUSTER_NAME_LABEL, Call, KUBECONFIG_HASH_ANNOTATION, KUBECONFIG_KEY, KUBECONFIG_LABEL,
    KUBECONFIG_SECRET_TYPE, Plan, kubeconfig_secret_name,
};
use super::observe::cached_kubeconfig_hash;
use super::reconcile::{Context, Error};

/// The status lists a merge patch must send even when empty (the cache may lag the server).
const STATUS_LISTS: &[&str] = &["addons", "conditions"];

/// Finalizers set by a merge patch guarded by the resourceVersion (see
/// [`super::reconcile::reconcile`] for why not kube-runtime's helper).
pub(super) async fn set_finalizers(
    ctx: &Context,
    cluster: &KubernetesCluster,
    finalizers: Vec<String>,
) -> Result<(), kube::Error> {
    let api: Api<KubernetesCluster> = Api::namespaced(
        ctx.runtime.client().clone(),
        &cluster.namespace().unwrap_or_default(),
    );
    let patch = serde_json::json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": cluster.metadata.resource_version,
    }});
    let params = PatchParams {
        field_manager: Some(ctx.runtime.field_manager()),
        ..PatchParams::default()
    };
    api.patch(&cluster.name_any(), &params, &Patch::Merge(&patch))
        .await?;
    Ok(())
}

/// Makes the decided provider request, counted in the metrics.
pub(super) async fn execute(
    ctx: &Context,
    provider: &dyn ClusterProvider,
    provider_name: &str,
    call: &Call,
) -> Result<ProviderCluster, ProviderError> {
    let result = match call {
        Call::Create(request) => provider.create(request).await,
        Call::Upgrade { id, kube_version } => provider.upgrade(id, kube_version).await,
        Call::SetAddons { id, addons } => provider.set_addons(id, addons).await,
    };
    ctx.metrics.count(provider_name, call.operation(), &result);
    result
}

/// Executes a plan's writes: the finished operations' durations, the kubeconfig Secret and
/// the status where they differ, the Events. When the provider did not answer (`answered`
/// false), the status is best effort: the provider's error goes to the backoff.
pub(super) async fn write_plan(
    ctx: &Context,
    cluster: &KubernetesCluster,
    plan: &Plan,
    answered: bool,
) -> Result<(), Error> {
    for (operation, seconds) in &plan.finished {
        ctx.metrics.finished(operation, *seconds);
    }
    if let Some(kubeconfig) = &plan.kubeconfig {
        ensure_kubeconfig_secret(ctx, cluster, kubeconfig).await?;
    }
    write_status_best_effort(ctx, cluster, &plan.status, !answered).await?;
    ctx.runtime.events(cluster, &plan.events, "Reconcile").await;
    Ok(())
}

/// Writes the status where it differs; returns the object's new resourceVersion if it wrote.
pub(super) async fn write_status(
    ctx: &Context,
    cluster: &KubernetesCluster,
    status: &KubernetesClusterStatus,
) -> Result<Option<String>, kube::Error> {
    ctx.runtime
        .write_status_with_lists(cluster, cluster.status.as_ref(), status, STATUS_LISTS)
        .await
}

/// [`write_status`]; with `best_effort` (the provider did not answer, and its error goes to
/// the backoff) a failure is only logged.
pub(super) async fn write_status_best_effort(
    ctx: &Context,
    cluster: &KubernetesCluster,
    status: &KubernetesClusterStatus,
    best_effort: bool,
) -> Result<(), kube::Error> {
    match write_status(ctx, cluster, status).await {
        Ok(_) => Ok(()),
        Err(e) if best_effort => {
            tracing::debug!(error = %e, "could not report the provider's outage in status");
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// `sha256:` of the kubeconfig, as the Secret's hash annotation holds it.
fn kubeconfig_hash(kubeconfig: &str) -> String {
    let digest = sha2::Sha256::digest(kubeconfig.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// Writes `<name>-kubeconfig` when the cached one is missing or holds another kubeconfig.
async fn ensure_kubeconfig_secret(
    ctx: &Context,
    cluster: &KubernetesCluster,
    kubeconfig: &str,
) -> Result<(), kube::Error> {
    let namespace = cluster.namespace().unwrap_or_default();
    let name = kubeconfig_secret_name(&cluster.name_any());
    let hash = kubeconfig_hash(kubeconfig);
    if cached_kubeconfig_hash(&ctx.secrets, &namespace, &name).as_deref() == Some(hash.as_str()) {
        return Ok(());
    }
    let secret = kubeconfig_secret(cluster, &namespace, &name, hash, kubeconfig);
    let mut value = serde_json::to_value(&secret).map_err(kube::Error::SerdeError)?;
    value["apiVersion"] = "v1".into();
    value["kind"] = "Secret".into();
    let api: Api<Secret> = Api::namespaced(ctx.runtime.client().clone(), &namespace);
    api.patch(
        &name,
        &PatchParams::apply(&ctx.runtime.field_manager()).force(),
        &Patch::Apply(&value),
    )
    .await?;
    Ok(())
}

/// The kubeconfig Secret of `cluster`, owned by it (the garbage collector deletes it).
fn kubeconfig_secret(
    cluster: &KubernetesCluster,
    namespace: &str,
    name: &str,
    hash: String,
    kubeconfig: &str,
) -> Secret {
    let owner = OwnerReference {
        api_version: KubernetesCluster::api_version(&()).into_owned(),
        kind: KubernetesCluster::kind(&()).into_owned(),
        name: cluster.name_any(),
        uid: cluster.uid().unwrap_or_default(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(namespace.to_owned()),
            labels: Some(
                [
                    (CLUSTER_NAME_LABEL.to_owned(), cluster.name_any()),
                    (KUBECONFIG_LABEL.to_owned(), "true".to_owned()),
                    (
                        "app.kubernetes.io/managed-by".to_owned(),
                        "vigil".to_owned(),
                    ),
                ]
                .into(),
            ),
            annotations: Some([(KUBECONFIG_HASH_ANNOTATION.to_owned(), hash)].into()),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some(KUBECONFIG_SECRET_TYPE.to_owned()),
        data: Some(
            [(
                KUBECONFIG_KEY.to_owned(),
                ByteString(kubeconfig.as_bytes().to_vec()),
            )]
            .into(),
        ),
        ..Default::default()
    }
}
