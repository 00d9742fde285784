//! Addons of a provisioned cluster, shared by the `local` and `hosted` providers: each one a
//! Deployment named after it in the cluster's `kube-system` namespace, its version in an
//! annotation (and, where it fits, a label and the image tag). Converging applies the missing
//! and changed ones and deletes the unwanted ones; what is reported is what was found in the
//! cluster, so an addon someone deleted by hand shows up (and comes back).
//!
//! An addon is `Installed` only once its Deployment is available in the cluster, judged as
//! `kubectl rollout status` judges it ([`crate::rollout`]): on a `local` cluster the sandbox
//! runs the Deployment and ReplicaSet loops and a simulated kubelet, on a `hosted` one the
//! cluster's own controller manager and its nodes do. Until then it is `Installing` (the
//! message says what the rollout waits for); a rollout past its progress deadline is `Failed`.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use serde_json::json;

use crate::rollout::{Rollout, rollout};
use crate::{Addon, AddonState, AddonStatus};

pub const NAMESPACE: &str = "kube-system";
const MANAGER: &str = "vigil-local-provider";
const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
const VERSION_ANNOTATION: &str = "vigil.dev/addon-version";

/// The result of one pass: every addon wanted or found, and whether every wanted one's
/// Deployment is there at its version and nothing else is left (available or not yet).
pub struct Converged {
    pub addons: Vec<AddonStatus>,
    pub applied: bool,
}

/// One pass: list what is there, apply what is missing or at another version, delete what is
/// not wanted. A failure of one addon is reported on it (`Failed`); listing failing is an error.
pub async fn converge(client: &kube::Client, wanted: &[Addon]) -> Result<Converged, kube::Error> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), NAMESPACE);
    let listed = api
        .list(&ListParams::default().labels(&format!("{MANAGED_BY}={MANAGER}")))
        .await?;
    let found: BTreeMap<String, (String, &Deployment)> = listed
        .items
        .iter()
        .filter_map(|d| {
            let name = d.metadata.name.clone()?;
            let version = d
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(VERSION_ANNOTATION))
                .cloned()
                .unwrap_or_default();
            Some((name, (version, d)))
        })
        .collect();
    let mut addons = Vec::new();
    let mut applied = true;
    for addon in wanted {
        let status = |state, message: Option<String>| AddonStatus {
            name: addon.name.clone(),
            version: addon.version.clone(),
            state,
            message,
        };
        if let Some((version, deployment)) = found.get(&addon.name)
            && *version == addon.version
        {
            addons.push(match rollout(deployment) {
                Rollout::Available => status(AddonState::Installed, None),
                Rollout::Progressing(why) => status(AddonState::Installing, Some(why)),
                Rollout::Failed(why) => status(AddonState::Failed, Some(why)),
            });
            continue;
        }
        let why = match found.get(&addon.name) {
            Some((old, _)) => format!("upgrading from {old}"),
            None => "not found in the cluster; installing".to_owned(),
        };
        match api
            .patch(
                &addon.name,
                &PatchParams::apply(MANAGER).force(),
                &Patch::Apply(deployment(addon)),
            )
            .await
        {
            // Applied now: its pods are yet to run.
            Ok(_) => addons.push(status(
                AddonState::Installing,
                Some(format!(
                    "{why}: Deployment applied, waiting for it to be available"
                )),
            )),
            Err(e) => {
                applied = false;
                addons.push(status(AddonState::Failed, Some(format!("{why}: {e}"))));
            }
        }
    }
    for (name, (version, _)) in &found {
        if wanted.iter().any(|a| &a.name == name) {
            continue;
        }
        applied = false;
        let message = match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => None,
            Err(kube::Error::Api(s)) if s.code == 404 => None,
            Err(e) => Some(format!("removing: {e}")),
        };
        addons.push(AddonStatus {
            name: name.clone(),
            version: version.clone(),
            state: AddonState::Removing,
            message,
        });
    }
    addons.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(Converged { addons, applied })
}

fn deployment(addon: &Addon) -> serde_json::Value {
    let name = &addon.name;
    let version = &addon.version;
    let mut labels = json!({
        "app.kubernetes.io/name": name,
        MANAGED_BY: MANAGER,
        "app.kubernetes.io/part-of": "vigil-addons",
    });
    // A label value is at most 63 characters of [A-Za-z0-9._-]; the annotation always has it.
    if version.len() <= 63
        && version
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        labels["app.kubernetes.io/version"] = json!(version);
    }
    json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": labels,
            "annotations": {VERSION_ANNOTATION: version},
        },
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": name}},
            "template": {
                "metadata": {"labels": {"app.kubernetes.io/name": name}},
                "spec": {"containers": [{
                    "name": name,
                    "image": format!("registry.example.test/addons/{name}:v{version}"),
                }]},
            },
        },
    })
}
