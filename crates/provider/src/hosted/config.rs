//! How the `hosted` provider runs control planes: its version catalog (which images serve each
//! Kubernetes version), how clients reach the API servers, and the sizes and lifetimes it
//! gives them. Set by `vigil run`'s flags (the chart's `kubernetesCluster.hosted` values).

use std::time::Duration;

use crate::ProviderError;

/// The images of one Kubernetes version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionImages {
    /// The exact version the images run (`1.28.0`).
    pub version: String,
    pub api_server: String,
    pub controller_manager: String,
}

/// How clients reach a hosted API server (its Service's type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Exposure {
    /// A ClusterIP Service: reachable from the management cluster's pods and nodes.
    #[default]
    ClusterIp,
    /// A NodePort Service: also from anywhere that reaches a node's address.
    NodePort,
    /// A LoadBalancer Service: from wherever the load balancer's address is reachable.
    LoadBalancer,
}

impl Exposure {
    pub fn service_type(self) -> &'static str {
        match self {
            Self::ClusterIp => "ClusterIP",
            Self::NodePort => "NodePort",
            Self::LoadBalancer => "LoadBalancer",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ClusterIP" => Some(Self::ClusterIp),
            "NodePort" => Some(Self::NodePort),
            "LoadBalancer" => Some(Self::LoadBalancer),
            _ => None,
        }
    }
}

/// The hosted provider's settings.
#[derive(Debug, Clone)]
pub struct HostedConfig {
    /// The versions it can run, each with its images.
    pub versions: Vec<VersionImages>,
    /// etcd's image (the same etcd serves every version in the catalog).
    pub etcd_image: String,
    /// `imagePullPolicy` of every control-plane container.
    pub image_pull_policy: String,
    pub exposure: Exposure,
    /// The API server replicas (at least 2: one can roll or fail while the other serves).
    pub api_server_replicas: i32,
    /// The StorageClass of etcd's claim (`None`: the cluster's default class).
    pub storage_class: Option<String>,
    /// The size of etcd's claim (`1Gi`).
    pub etcd_storage: String,
    /// The hosted cluster's own Service range (virtual: it never meets the management network).
    pub service_cidr: String,
    /// The first address of `service_cidr`: the hosted `kubernetes` Service's, in the SANs.
    pub service_ip: std::net::IpAddr,
    /// How long the CAs live.
    pub ca_validity: Duration,
    /// How long leaf certificates live.
    pub leaf_validity: Duration,
    /// A leaf this close to its end is issued again.
    pub renew_before: Duration,
    /// The most a request to a hosted API server may take.
    pub probe_timeout: Duration,
    /// How long an API server keeps serving after it is told to stop, while its endpoint is
    /// withdrawn from the Service (`--shutdown-delay-duration`): what makes a roll lose no
    /// request.
    pub shutdown_delay: Duration,
    /// The namespace of a cluster whose request names none (the controller always names the
    /// KubernetesCluster's; other callers may not).
    pub default_namespace: Option<String>,
    /// The namespaces the operator may reach (`vigil run --namespaces`); `None`: all. A cluster
    /// is looked for by identity in these only, so a namespaced install needs no cluster-wide
    /// read.
    pub namespaces: Option<Vec<String>>,
}

impl HostedConfig {
    /// A provider with this catalog and etcd image, and the defaults for everything else.
    pub fn new(versions: Vec<VersionImages>, etcd_image: impl Into<String>) -> Self {
        Self {
            versions,
            etcd_image: etcd_image.into(),
            image_pull_policy: "IfNotPresent".into(),
            exposure: Exposure::ClusterIp,
            api_server_replicas: 2,
            storage_class: None,
            etcd_storage: "1Gi".into(),
            service_cidr: "10.96.0.0/16".into(),
            service_ip: std::net::IpAddr::V4(std::net::Ipv4Addr::new(10, 96, 0, 1)),
            ca_validity: Duration::from_secs(10 * 365 * 86_400),
            leaf_validity: Duration::from_secs(365 * 86_400),
            renew_before: Duration::from_secs(30 * 86_400),
            probe_timeout: Duration::from_secs(3),
            shutdown_delay: Duration::from_secs(10),
            default_namespace: None,
            namespaces: None,
        }
    }

    /// Refuses settings that cannot work: an empty or ambiguous catalog, one replica, a renewal
    /// window that would re-issue a fresh certificate at once (a restart loop).
    pub fn check(&self) -> Result<(), String> {
        if self.versions.is_empty() {
            return Err("the hosted provider's catalog has no version".into());
        }
        if self.etcd_image.trim().is_empty() {
            return Err("the hosted provider has no etcd image".into());
        }
        for (i, v) in self.versions.iter().enumerate() {
            let parsed = crate::parse_version(&v.version)
                .filter(|_| v.version.trim_start_matches('v').split('.').count() == 3);
            if parsed.is_none() {
                return Err(format!(
                    "catalog version {:?} is not major.minor.patch",
                    v.version
                ));
            }
            if v.api_server.trim().is_empty() || v.controller_manager.trim().is_empty() {
                return Err(format!("catalog version {} lacks an image", v.version));
            }
            if self.versions[..i].iter().any(|o| {
                crate::compare_versions(&o.version, &v.version) == Some(std::cmp::Ordering::Equal)
            }) {
                return Err(format!("catalog version {} is given twice", v.version));
            }
        }
        if self.api_server_replicas < 2 {
            return Err("the hosted API server needs at least 2 replicas".into());
        }
        if self.renew_before >= self.leaf_validity / 2 {
            return Err(format!(
                "renewing certificates {:?} before they end, when they live {:?}, would renew them again and again",
                self.renew_before, self.leaf_validity
            ));
        }
        Ok(())
    }

    /// The catalog's versions, sorted, for messages.
    pub fn version_names(&self) -> String {
        let mut versions: Vec<&VersionImages> = self.versions.iter().collect();
        versions.sort_by(|a, b| {
            crate::compare_versions(&a.version, &b.version).unwrap_or(std::cmp::Ordering::Equal)
        });
        versions
            .iter()
            .map(|v| v.version.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The catalog entry serving a requested `kubeVersion`: `1.28` takes the newest 1.28 patch,
    /// `1.28.0` only 1.28.0.
    pub fn resolve(&self, wanted: &str) -> Result<&VersionImages, ProviderError> {
        crate::catalog::check_kube_version(wanted)?;
        self.versions
            .iter()
            .filter(|v| crate::contract::version_matches(wanted, &v.version))
            .max_by(|a, b| {
                crate::compare_versions(&a.version, &b.version).unwrap_or(std::cmp::Ordering::Equal)
            })
            .ok_or_else(|| ProviderError::Rejected {
                reason: "UnsupportedVersion".into(),
                message: format!(
                    "kubeVersion {wanted} is not in the hosted provider's catalog; it has {}",
                    self.version_names()
                ),
            })
    }

    /// The versions an upgrade from `from` (a catalog version) to `to` (as requested) runs
    /// through, one minor at a time as Kubernetes' version-skew policy requires, the last being
    /// `to`'s. Empty when `from` already serves `to`.
    pub fn upgrade_path(&self, from: &str, to: &str) -> Result<Vec<&VersionImages>, ProviderError> {
        let target = self.resolve(to)?;
        let (Some(start), Some(end)) = (
            crate::parse_version(from),
            crate::parse_version(&target.version),
        ) else {
            return Err(ProviderError::Rejected {
                reason: "UnsupportedVersion".into(),
                message: format!("cannot compare {from:?} with {to:?}"),
            });
        };
        if crate::contract::version_matches(to, from) || start >= end {
            return match start.cmp(&end) {
                std::cmp::Ordering::Greater if !crate::contract::version_matches(to, from) => {
                    Err(ProviderError::Rejected {
                        reason: "DowngradeRefused".into(),
                        message: format!(
                            "the cluster runs {from}; Kubernetes cannot be downgraded to {to}"
                        ),
                    })
                }
                _ => Ok(Vec::new()),
            };
        }
        if start.0 != end.0 {
            return Err(ProviderError::Rejected {
                reason: "UnsupportedVersion".into(),
                message: format!("cannot upgrade across major versions ({from} to {to})"),
            });
        }
        let mut path = Vec::new();
        for minor in start.1 + 1..end.1 {
            let step = format!("{}.{minor}", start.0);
            let images = self.resolve(&step).map_err(|_| ProviderError::Rejected {
                reason: "UnsupportedVersion".into(),
                message: format!(
                    "upgrading from {from} to {to} goes through {step} (one minor at a time), \
                     which the hosted provider's catalog does not have; it has {}",
                    self.version_names()
                ),
            })?;
            path.push(images);
        }
        path.push(target);
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn images(version: &str) -> VersionImages {
        VersionImages {
            version: version.into(),
            api_server: format!("apiserver:{version}"),
            controller_manager: format!("kcm:{version}"),
        }
    }

    fn config() -> HostedConfig {
        HostedConfig::new(
            vec![
                images("1.28.0"),
                images("1.29.14"),
                images("1.30.2"),
                images("1.28.5"),
            ],
            "etcd:3.4",
        )
    }

    #[test]
    fn a_minor_takes_its_newest_patch_and_a_patch_only_itself() {
        let c = config();
        assert_eq!(c.resolve("1.28").map(|v| v.version.as_str()), Ok("1.28.5"));
        assert_eq!(
            c.resolve("1.28.0").map(|v| v.version.as_str()),
            Ok("1.28.0")
        );
        let Err(ProviderError::Rejected { reason, message }) = c.resolve("1.31") else {
            panic!("1.31 resolved");
        };
        assert_eq!(reason, "UnsupportedVersion");
        assert!(
            message.contains("1.28.0, 1.28.5, 1.29.14, 1.30.2"),
            "{message}"
        );
    }

    #[test]
    fn upgrades_step_through_every_minor() {
        let c = config();
        let path: Vec<&str> = c
            .upgrade_path("1.28.0", "1.30")
            .expect("a path")
            .iter()
            .map(|v| v.version.as_str())
            .collect();
        assert_eq!(path, ["1.29.14", "1.30.2"]);
        assert_eq!(c.upgrade_path("1.28.0", "1.28").map(|p| p.len()), Ok(0));
        assert!(matches!(
            c.upgrade_path("1.29.14", "1.28"),
            Err(ProviderError::Rejected { reason, .. }) if reason == "DowngradeRefused"
        ));
        let gap = HostedConfig::new(vec![images("1.28.0"), images("1.30.2")], "etcd");
        let Err(ProviderError::Rejected { message, .. }) = gap.upgrade_path("1.28.0", "1.30")
        else {
            panic!("a gap in the catalog was crossed");
        };
        assert!(message.contains("goes through 1.29"), "{message}");
    }

    #[test]
    fn settings_that_cannot_work_are_refused() {
        assert!(config().check().is_ok());
        let mut c = config();
        c.renew_before = c.leaf_validity;
        assert!(c.check().is_err());
        let mut c = config();
        c.api_server_replicas = 1;
        assert!(c.check().is_err());
        let mut c = config();
        c.versions.push(images("1.29"));
        assert!(c.check().is_err());
    }
}
