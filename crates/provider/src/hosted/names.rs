//! The names and labels of a hosted control plane's objects. Every object lives in the
//! KubernetesCluster's namespace and carries `vigil.dev/cluster: <name>`: that label is how the
//! provider finds them all again (after a restart of Vigil, on another replica, when deleting).

use std::collections::BTreeMap;

use crate::ClusterIdentity;

/// On every object of a control plane: the KubernetesCluster's name.
pub const CLUSTER_LABEL: &str = "vigil.dev/cluster";
/// On every object: which part of the control plane it belongs to.
pub const COMPONENT_LABEL: &str = "vigil.dev/component";
/// On the record: the identity's uuid (`product.uuid.value`), so the same name with another
/// product is another cluster.
pub const UUID_LABEL: &str = "vigil.dev/cluster-uuid";
/// The managed-by label, with the field manager's name.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The field manager of every write, and the managed-by value.
pub const MANAGER: &str = "vigil-hosted";
/// The hash of the manifest an object was last applied from: an object whose annotation
/// matches is left alone (no write at rest).
pub const APPLIED_HASH: &str = "vigil.dev/applied-hash";
/// On the record: while set, the cluster is not deleted (`DeleteRefused`, the value as the
/// reason given) — a guard against deleting a control plane by mistake.
pub const REFUSE_DELETE: &str = "vigil.dev/refuse-delete";
/// On the API server's and controller-manager's Deployments: the catalog version they run.
pub const VERSION_ANNOTATION: &str = "vigil.dev/kube-version";

/// The longest cluster name the provider takes: `<name>-controller-manager` must stay a
/// 63-character DNS label (Service and label values have that limit too).
pub const MAX_NAME: usize = 40;

pub const ETCD: &str = "etcd";
pub const API_SERVER: &str = "apiserver";
pub const CONTROLLER_MANAGER: &str = "controller-manager";

/// The objects of one control plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Names {
    pub namespace: String,
    pub cluster: String,
}

impl Names {
    pub fn new(namespace: &str, cluster: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            cluster: cluster.to_owned(),
        }
    }

    /// The provider's id of the cluster: `<namespace>/<name>` (both are needed to find it, and a
    /// namespace never holds a `/`).
    pub fn id(&self) -> String {
        format!("{}/{}", self.namespace, self.cluster)
    }

    /// The names an id stands for; `None` for an id that is not one of ours.
    pub fn from_id(id: &str) -> Option<Self> {
        let (namespace, cluster) = id.split_once('/')?;
        (is_dns_label(namespace, 63) && check_name(cluster).is_ok())
            .then(|| Self::new(namespace, cluster))
    }

    fn of(&self, part: &str) -> String {
        format!("{}-{part}", self.cluster)
    }

    /// The ConfigMap holding what the provider was asked for (identity, version, addons).
    pub fn record(&self) -> String {
        self.of("control-plane")
    }
    pub fn etcd(&self) -> String {
        self.of(ETCD)
    }
    /// etcd's headless Service, the StatefulSet's `serviceName`.
    pub fn etcd_peer(&self) -> String {
        self.of("etcd-peer")
    }
    pub fn api_server(&self) -> String {
        self.of(API_SERVER)
    }
    pub fn controller_manager(&self) -> String {
        self.of(CONTROLLER_MANAGER)
    }
    /// The CAs and the service-account key: the root of the cluster's trust.
    pub fn pki(&self) -> String {
        self.of("pki")
    }
    pub fn etcd_certs(&self) -> String {
        self.of("etcd-certs")
    }
    pub fn api_server_certs(&self) -> String {
        self.of("apiserver-certs")
    }
    pub fn controller_manager_certs(&self) -> String {
        self.of("controller-manager-certs")
    }
    /// The administrator's client certificate (`system:masters`).
    pub fn admin(&self) -> String {
        self.of("admin")
    }

    /// The labels every object of the cluster carries (`component`: its part, if any).
    pub fn labels(&self, component: Option<&str>) -> BTreeMap<String, String> {
        let mut labels = BTreeMap::from([
            (CLUSTER_LABEL.to_owned(), self.cluster.clone()),
            (MANAGED_BY.to_owned(), MANAGER.to_owned()),
        ]);
        if let Some(component) = component {
            labels.insert(COMPONENT_LABEL.to_owned(), component.to_owned());
        }
        labels
    }

    /// The label selector of every object of the cluster.
    pub fn selector(&self) -> String {
        format!("{CLUSTER_LABEL}={},{MANAGED_BY}={MANAGER}", self.cluster)
    }
}

/// The selector of a record of `identity`, in whatever namespace.
pub fn record_selector(identity: &ClusterIdentity) -> String {
    format!(
        "{CLUSTER_LABEL}={},{UUID_LABEL}={},{MANAGED_BY}={MANAGER},{COMPONENT_LABEL}=record",
        identity.name, identity.uuid
    )
}

/// A name the provider can build every object's name from: a DNS label of at most
/// [`MAX_NAME`] characters.
pub fn check_name(name: &str) -> Result<(), String> {
    if is_dns_label(name, MAX_NAME) && name.starts_with(|c: char| c.is_ascii_lowercase()) {
        Ok(())
    } else {
        Err(format!(
            "{name:?} cannot name a hosted control plane's objects: at most {MAX_NAME} lowercase \
             letters, digits and '-', starting with a letter"
        ))
    }
}

/// A DNS label (RFC 1123) of at most `max` characters.
fn is_dns_label(name: &str, max: usize) -> bool {
    !name.is_empty()
        && name.len() <= max
        && !name.starts_with('-')
        && !name.ends_with('-')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Whether a uuid can be a label value (what the record is found by).
pub fn check_uuid(uuid: &str) -> Result<(), String> {
    let ok = !uuid.is_empty()
        && uuid.len() <= 63
        && uuid.starts_with(|c: char| c.is_ascii_alphanumeric())
        && uuid.ends_with(|c: char| c.is_ascii_alphanumeric())
        && uuid
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "product.uuid.value {uuid:?} must be at most 63 letters, digits, '-', '_' or '.' for \
             the hosted provider"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_foreign_ids_are_refused() {
        let names = Names::new("team-a", "my-custom-cluster-for-backup");
        assert_eq!(names.id(), "team-a/my-custom-cluster-for-backup");
        assert_eq!(Names::from_id(&names.id()), Some(names));
        assert_eq!(Names::from_id("c-0123"), None);
        assert_eq!(Names::from_id("a/../b"), None);
        assert!(check_name("my.cluster").is_err());
        assert!(check_name(&"a".repeat(MAX_NAME + 1)).is_err());
        assert!(check_uuid("aaa692e5-e6ce-4f19-ad20-6491ca74067c").is_ok());
    }
}
