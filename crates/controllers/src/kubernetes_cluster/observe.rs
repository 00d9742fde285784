//! What a pass reads before deciding: the slimmed caches, the object's view, the kubeconfig
//! Secret's cached hash, the trigger mapper from Secrets, and the provider's report of the
//! object's cluster.

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::runtime::reflector::{ObjectRef, Store};
use vigil_apis::KubernetesCluster;
use vigil_provider::{ClusterProvider, ProviderCluster, ProviderError};

use super::metrics::ClusterMetrics;
use super::model::{CLUSTER_NAME_LABEL, ClusterView, KUBECONFIG_HASH_ANNOTATION};

/// The cache keeps what decisions read: no managed fields, no last-applied annotation.
pub(super) fn slim_cluster(cluster: &mut KubernetesCluster) {
    cluster.metadata.managed_fields = None;
    if let Some(annotations) = cluster.metadata.annotations.as_mut() {
        annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// A kubeconfig Secret is cached without its data: the hash annotation says what it holds.
pub(super) fn slim_secret(secret: &mut Secret) {
    secret.data = None;
    secret.string_data = None;
    secret.metadata.managed_fields = None;
}

/// A kubeconfig Secret concerns the cluster it is labelled with.
pub(super) fn cluster_of_secret(secret: Secret) -> Option<ObjectRef<KubernetesCluster>> {
    let name = secret.labels().get(CLUSTER_NAME_LABEL).cloned();
    let namespace = secret.namespace();
    name.zip(namespace)
        .map(|(name, ns)| ObjectRef::<KubernetesCluster>::new(&name).within(&ns))
}

/// What the decisions read of the object (`default_provider`: the operator's, for a spec that
/// names none).
pub(super) fn view(cluster: &KubernetesCluster, default_provider: &str) -> ClusterView {
    ClusterView {
        default_provider: default_provider.to_owned(),
        namespace: cluster.namespace().unwrap_or_default(),
        name: cluster.name_any(),
        generation: cluster.metadata.generation,
        spec: cluster.spec.clone(),
        status: cluster.status.clone(),
    }
}

/// The hash annotation of the cached Secret `namespace/name`: what kubeconfig it holds.
pub(super) fn cached_kubeconfig_hash(
    secrets: &Store<Secret>,
    namespace: &str,
    name: &str,
) -> Option<String> {
    secrets
        .get(&ObjectRef::new(name).within(namespace))
        .and_then(|s| s.annotations().get(KUBECONFIG_HASH_ANNOTATION).cloned())
}

/// The cluster of this object at its provider: by id once known, else by identity (a create
/// whose answer was lost, or an object re-applied without status).
pub(super) async fn observe(
    metrics: &ClusterMetrics,
    provider: &dyn ClusterProvider,
    view: &ClusterView,
) -> Result<Option<ProviderCluster>, ProviderError> {
    let name = view.provider_name();
    match view.cluster_id() {
        Some(id) => {
            let result = match provider.get(id).await {
                Err(ProviderError::NotFound(_)) => Ok(None),
                other => other,
            };
            metrics.count(name, "Get", &result);
            result
        }
        None => {
            let result = provider.find(&view.identity()).await;
            metrics.count(name, "Find", &result);
            result
        }
    }
}
