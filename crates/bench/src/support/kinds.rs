//! Installing one of Vigil's own kinds at the start of a bench.

use std::time::Duration;

use anyhow::Context as _;

/// Creates namespace `ns` and the CRD of `K`, and waits (at most 10 s) until `K` is served in
/// `ns`: the start of every bench of one of Vigil's own kinds.
pub(crate) async fn install_kind<K>(client: &kube::Client, ns: &str) -> anyhow::Result<kube::Api<K>>
where
    K: kube::CustomResourceExt
        + kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned,
{
    use k8s_openapi::api::core::v1::Namespace;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::api::{ListParams, PostParams};

    kube::Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(serde_json::json!({"metadata": {"name": ns}}))?,
        )
        .await
        .context("namespace")?;
    kube::Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &K::crd())
        .await
        .with_context(|| format!("the {} CRD", K::crd_name()))?;
    let api: kube::Api<K> = kube::Api::namespaced(client.clone(), ns);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while api.list(&ListParams::default().limit(1)).await.is_err() {
        anyhow::ensure!(
            std::time::Instant::now() < deadline,
            "the {} CRD is not served",
            K::crd_name()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(api)
}
