//! What the tests and the benchmark of the `hosted` provider need on a real node
//! (`../shared/kube/node-up.sh`): the catalog of the control-plane images `.ci/control-plane-images`
//! loaded there, and storage for etcd — the node has no provisioner, so a test makes a hostPath
//! PersistentVolume, as an administrator of such a cluster would.

use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;

use k8s_openapi::api::core::v1::PersistentVolume;
use kube::api::{Api, PostParams};
use serde_json::json;

/// The user the control-plane containers run as (distroless's `nonroot`).
const NONROOT: u32 = 65532;

/// One version of the catalog: its API server and controller-manager images.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogVersion {
    pub version: String,
    pub api_server: String,
    pub controller_manager: String,
}

/// The chart values `.ci/control-plane-images` writes (`kubernetesCluster.hosted`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControlPlaneImages {
    pub etcd: String,
    pub versions: Vec<CatalogVersion>,
}

impl ControlPlaneImages {
    /// Reads the values file at `path`.
    pub fn read(path: &Path) -> Result<Self, String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let doc: serde_json::Value = serde_saphyr::from_str(&text)
            .map_err(|e| format!("{}: not YAML: {e}", path.display()))?;
        let hosted = &doc["kubernetesCluster"]["hosted"];
        let text_of = |v: &serde_json::Value, key: &str| {
            v[key]
                .as_str()
                .map(str::to_owned)
                .ok_or_else(|| format!("{}: no kubernetesCluster.hosted {key}", path.display()))
        };
        let versions = hosted["versions"]
            .as_array()
            .ok_or_else(|| format!("{}: no kubernetesCluster.hosted.versions", path.display()))?
            .iter()
            .map(|v| {
                Ok(CatalogVersion {
                    version: text_of(v, "version")?,
                    api_server: text_of(v, "apiServerImage")?,
                    controller_manager: text_of(v, "controllerManagerImage")?,
                })
            })
            .collect::<Result<_, String>>()?;
        Ok(Self {
            etcd: text_of(hosted, "etcdImage")?,
            versions,
        })
    }
}

/// A hostPath PersistentVolume `name` of class `class` (1Gi, kept when released) on the
/// directory `dir`, made here and owned by the non-root user etcd runs as, with mode 0700: the
/// kubelet gives a hostPath volume no fsGroup, and etcd wants its data private. Pinned to
/// `KUBE_NODE_NAME` when it is set. Needs root, as the node does.
pub async fn host_path_volume(
    client: &kube::Client,
    name: &str,
    dir: &Path,
    class: &str,
) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    std::os::unix::fs::chown(dir, Some(NONROOT), Some(NONROOT))
        .map_err(|e| format!("chown {} (needs root): {e}", dir.display()))?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
        .map_err(|e| format!("chmod {}: {e}", dir.display()))?;
    let mut volume = json!({
        "metadata": {"name": name},
        "spec": {
            "storageClassName": class,
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "hostPath": {"path": dir.to_string_lossy(), "type": "Directory"},
        },
    });
    if let Some(node) = std::env::var("KUBE_NODE_NAME")
        .ok()
        .filter(|n| !n.is_empty())
    {
        volume["spec"]["nodeAffinity"] = json!({"required": {"nodeSelectorTerms": [{
            "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}],
        }]}});
    }
    let volume: PersistentVolume =
        serde_json::from_value(volume).map_err(|e| format!("a PersistentVolume: {e}"))?;
    Api::<PersistentVolume>::all(client.clone())
        .create(&PostParams::default(), &volume)
        .await
        .map(drop)
        .map_err(|e| format!("creating PersistentVolume {name}: {e}"))
}
