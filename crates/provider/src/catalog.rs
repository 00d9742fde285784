//! The addons the shipped providers know, and the checks every provider makes on a wanted set
//! (known names, each once, a version given) before it starts changing a cluster.

use crate::protocol::{Catalog, CatalogAddon};
use crate::{Addon, ProviderError};

/// `(name, description, default version)`.
const KNOWN: &[(&str, &str, &str)] = &[
    (
        "cluster-autoscaler",
        "Adds and removes worker nodes as pods need them",
        "1.2.3",
    ),
    (
        "vpc-block-csi-driver",
        "Block storage volumes for pods (CSI driver)",
        "5.2.0",
    ),
    (
        "metrics-server",
        "Resource metrics for autoscaling and kubectl top",
        "0.7.2",
    ),
    (
        "ingress-nginx",
        "An Ingress controller backed by NGINX",
        "1.11.3",
    ),
    (
        "cert-manager",
        "Issues and renews TLS certificates",
        "1.16.1",
    ),
    ("coredns", "Cluster DNS", "1.11.3"),
];

/// Every known addon, in a stable order.
pub fn catalog() -> Catalog {
    Catalog {
        addons: KNOWN
            .iter()
            .map(|(name, description, version)| CatalogAddon {
                name: (*name).to_owned(),
                description: (*description).to_owned(),
                default_version: (*version).to_owned(),
            })
            .collect(),
    }
}

/// Whether `name` is in the catalog.
pub fn is_known(name: &str) -> bool {
    KNOWN.iter().any(|(known, _, _)| *known == name)
}

/// The catalog's names, comma-separated, for messages.
pub fn names() -> String {
    KNOWN
        .iter()
        .map(|(name, _, _)| *name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Rejects a wanted set that names an unknown addon, names one twice, or leaves a version empty.
pub fn check(addons: &[Addon]) -> Result<(), ProviderError> {
    let mut seen = std::collections::BTreeSet::new();
    for addon in addons {
        if !is_known(&addon.name) {
            return Err(ProviderError::Rejected {
                reason: "UnknownAddon".into(),
                message: format!(
                    "addon {:?} is not in the catalog; known addons: {}",
                    addon.name,
                    names()
                ),
            });
        }
        if !seen.insert(addon.name.as_str()) {
            return Err(ProviderError::Rejected {
                reason: "DuplicateAddon".into(),
                message: format!("addon {:?} is listed more than once", addon.name),
            });
        }
        if addon.version.trim().is_empty() {
            return Err(ProviderError::Rejected {
                reason: "InvalidAddon".into(),
                message: format!("addon {:?} has no version", addon.name),
            });
        }
    }
    Ok(())
}

/// Rejects a `kubeVersion` that is not `major.minor[.patch]`.
pub fn check_kube_version(version: &str) -> Result<(), ProviderError> {
    match crate::parse_version(version) {
        Some(_) => Ok(()),
        None => Err(ProviderError::Rejected {
            reason: "UnsupportedVersion".into(),
            message: format!("kubeVersion {version:?} is not major.minor or major.minor.patch"),
        }),
    }
}

/// Checks a move from `current` to `wanted`: `Ok(true)` to upgrade, `Ok(false)` when it is the
/// same version, `DowngradeRefused` for a step back.
pub fn check_upgrade(current: &str, wanted: &str) -> Result<bool, ProviderError> {
    check_kube_version(wanted)?;
    match crate::compare_versions(wanted, current) {
        Some(std::cmp::Ordering::Greater) => Ok(true),
        Some(std::cmp::Ordering::Equal) => Ok(false),
        Some(std::cmp::Ordering::Less) => Err(ProviderError::Rejected {
            reason: "DowngradeRefused".into(),
            message: format!(
                "the cluster runs {current}; Kubernetes cannot be downgraded to {wanted}"
            ),
        }),
        // The current version came from an earlier request, so it parses; be safe anyway.
        None => Err(ProviderError::Rejected {
            reason: "UnsupportedVersion".into(),
            message: format!("cannot compare {current:?} with {wanted:?}"),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addon(name: &str, version: &str) -> Addon {
        Addon {
            name: name.into(),
            version: version.into(),
        }
    }

    #[test]
    fn an_unknown_addon_is_named_with_the_catalog() {
        let err = check(&[addon("coredns", "1"), addon("flux", "2")]).unwrap_err();
        let ProviderError::Rejected { reason, message } = err else {
            panic!("not rejected: {err:?}");
        };
        assert_eq!(reason, "UnknownAddon");
        assert!(message.contains("\"flux\"") && message.contains("cluster-autoscaler"));
        assert!(check(&[addon("coredns", "1"), addon("coredns", "2")]).is_err());
        assert!(check(&[addon("coredns", "1"), addon("cert-manager", "2")]).is_ok());
    }

    #[test]
    fn upgrades_go_forward_only() {
        assert_eq!(check_upgrade("1.28", "1.29"), Ok(true));
        assert_eq!(check_upgrade("1.28", "1.28.0"), Ok(false));
        assert!(matches!(
            check_upgrade("1.29", "1.28"),
            Err(ProviderError::Rejected { reason, .. }) if reason == "DowngradeRefused"
        ));
        assert!(check_upgrade("1.28", "latest").is_err());
    }
}
