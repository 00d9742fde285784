//! Installing a CRD for a test, the way a real API server needs it: create it (or find it from
//! an earlier test on a shared cluster), then wait until it is `Established` and every served
//! version answers a list. A real server serves a new CRD a moment after the create returns; a
//! test that creates objects at once sees `404 page not found`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use kube::{Client, ResourceExt as _};

use crate::wait::{WaitError, wait_for};
use crate::workloads::SETTLE_TIMEOUT;

/// Why a CRD could not be installed.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    #[error("creating CRD {name}: {source}")]
    Create { name: String, source: kube::Error },
    #[error(transparent)]
    Wait(#[from] WaitError),
}

/// Creates `crd` (an existing one of that name is kept) and waits until it is served.
pub async fn install_crd(client: &Client, crd: &CustomResourceDefinition) -> Result<(), CrdError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    match crds.create(&PostParams::default(), crd).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(source) => return Err(CrdError::Create { name, source }),
    }
    wait_until_served(client, crd).await
}

/// Waits until the CRD is `Established` and each of its served versions answers a list.
pub async fn wait_until_served(
    client: &Client,
    crd: &CustomResourceDefinition,
) -> Result<(), CrdError> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = crd.name_any();
    wait_for(
        &format!("CRD {name} to be Established"),
        SETTLE_TIMEOUT,
        || async {
            let live = crds.get(&name).await.map_err(|e| e.to_string())?;
            let established = live
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(established.then_some(()))
        },
    )
    .await?;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let gvk = GroupVersionKind::gvk(&crd.spec.group, &version.name, &crd.spec.names.kind);
        let resource = ApiResource::from_gvk_with_plural(&gvk, &crd.spec.names.plural);
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        wait_for(
            &format!("{}/{} to be served", resource.api_version, resource.plural),
            SETTLE_TIMEOUT,
            || async {
                api.list(&Default::default())
                    .await
                    .map(|_| Some(()))
                    .map_err(|e| e.to_string())
            },
        )
        .await?;
    }
    Ok(())
}
