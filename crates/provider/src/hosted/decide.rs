//! What a hosted control plane should run next and how it is doing: pure functions of what the
//! provider found in the management cluster. [`versions`] steps upgrades one minor at a time, API
//! servers first, then the controller-manager (Kubernetes' version-skew policy: a
//! controller-manager is never newer than the API servers); [`state`] reads the workloads into
//! the state and progress the provider reports.

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};

use super::config::{HostedConfig, VersionImages};
use super::names::VERSION_ANNOTATION;
use crate::rollout::{Rollout, rollout};
use crate::{ClusterState, ProviderError};

/// A component's Deployment as found: the catalog version it runs and whether its rollout is
/// done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deployed<'a> {
    pub version: &'a str,
    pub rolled_out: bool,
}

impl<'a> Deployed<'a> {
    pub fn of(deployment: &'a Deployment) -> Option<Self> {
        let version = deployment
            .metadata
            .annotations
            .as_ref()?
            .get(VERSION_ANNOTATION)?;
        Some(Self {
            version,
            rolled_out: rollout(deployment) == Rollout::Available,
        })
    }

    /// [`Self::of`], the roll done only once no pod of `component` runs another image,
    /// terminating or not: the roll of a Deployment counts a terminating pod as gone, while it
    /// still serves its shutdown delay to whoever is connected.
    pub fn among(deployment: &'a Deployment, pods: &[Pod], component: &str) -> Option<Self> {
        let mut deployed = Self::of(deployment)?;
        let image = image_of(deployment).unwrap_or_default();
        deployed.rolled_out &= lingering(pods, component, image) == 0;
        Some(deployed)
    }
}

/// The images each component should run now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Versions<'c> {
    pub api_server: &'c VersionImages,
    pub controller_manager: &'c VersionImages,
}

fn exact<'c>(config: &'c HostedConfig, version: &str) -> Result<&'c VersionImages, ProviderError> {
    config
        .versions
        .iter()
        .find(|v| v.version == version)
        .ok_or_else(|| ProviderError::Rejected {
            reason: "UnsupportedVersion".into(),
            message: format!(
                "the control plane runs {version}, which is no longer in the hosted provider's \
                 catalog ({}): put it back to manage this cluster",
                config.version_names()
            ),
        })
}

/// What each component should run, given the version asked for (`target`) and what runs.
/// One step per call: the API servers move to the next minor only once both components run
/// the current one, fully rolled out; the controller-manager follows once the API servers
/// are done.
pub fn versions<'c>(
    config: &'c HostedConfig,
    target: &str,
    api_server: Option<Deployed<'_>>,
    controller_manager: Option<Deployed<'_>>,
) -> Result<Versions<'c>, ProviderError> {
    let Some(api) = api_server else {
        let images = config.resolve(target)?;
        let controller_manager = match controller_manager {
            Some(kcm) => exact(config, kcm.version)?,
            None => images,
        };
        return Ok(Versions {
            api_server: images,
            controller_manager,
        });
    };
    let api_images = exact(config, api.version)?;
    let kcm = controller_manager.unwrap_or(Deployed {
        version: api.version,
        rolled_out: false,
    });
    if kcm.version != api.version {
        // The controller-manager lags one step: it follows once the API servers are done.
        let controller_manager = if api.rolled_out {
            api_images
        } else {
            exact(config, kcm.version)?
        };
        return Ok(Versions {
            api_server: api_images,
            controller_manager,
        });
    }
    let path = config.upgrade_path(api.version, target)?;
    let next = match path.first() {
        Some(next) if api.rolled_out && kcm.rolled_out => next,
        _ => api_images,
    };
    Ok(Versions {
        api_server: next,
        controller_manager: api_images,
    })
}

/// What the workloads say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Health {
    pub state: ClusterState,
    pub progress: Option<String>,
    pub message: Option<String>,
}

/// Container states that do not fix themselves.
const STUCK: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "ErrImageNeverPull",
    "InvalidImageName",
    "CreateContainerConfigError",
    "CreateContainerError",
];

/// The workloads of a control plane, as found.
#[derive(Debug, Clone, Copy)]
pub struct Found<'a> {
    pub etcd: Option<&'a StatefulSet>,
    pub api_server: Option<&'a Deployment>,
    pub controller_manager: Option<&'a Deployment>,
    pub pods: &'a [Pod],
    pub claims: &'a [PersistentVolumeClaim],
    /// Pods of the API servers or the controller-manager still running an image their
    /// Deployment no longer names (terminating after a roll: they serve out their shutdown
    /// delay, and a client may still be connected to one).
    pub lingering: usize,
}

/// How many pods of `component` run another image than `image` (terminating ones included).
pub fn lingering(pods: &[Pod], component: &str, image: &str) -> usize {
    pods.iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(super::names::COMPONENT_LABEL))
                .is_some_and(|c| c == component)
        })
        .filter(|p| {
            p.spec
                .as_ref()
                .and_then(|s| s.containers.first())
                .and_then(|c| c.image.as_deref())
                .is_some_and(|i| i != image)
        })
        .count()
}

/// A Deployment's first container's image.
pub fn image_of(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// The state from the workloads, whether the API server answers (`master`: the version it
/// reports), the version asked for, and what the Service's address still waits for.
pub fn state(
    target: &str,
    found: Found<'_>,
    master: Option<&str>,
    waiting_for_address: Option<&str>,
) -> Health {
    let Found {
        etcd,
        api_server,
        controller_manager,
        pods,
        claims,
        lingering,
    } = found;
    let provisioning = |what: String| Health {
        state: ClusterState::Provisioning,
        progress: Some(what),
        message: None,
    };
    for pod in pods {
        let waiting = pod
            .status
            .iter()
            .flat_map(|s| s.container_statuses.iter().flatten())
            .filter_map(|c| c.state.as_ref()?.waiting.as_ref());
        for w in waiting {
            if let Some(reason) = w.reason.as_deref().filter(|r| STUCK.contains(r)) {
                return Health {
                    state: ClusterState::Failed,
                    progress: None,
                    message: Some(format!(
                        "pod {}: {reason}: {}",
                        pod.metadata.name.as_deref().unwrap_or_default(),
                        w.message.as_deref().unwrap_or("no message")
                    )),
                };
            }
        }
    }
    if let Some(claim) = claims
        .iter()
        .find(|c| c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Pending"))
    {
        return provisioning(format!(
            "etcd's volume claim {} is Pending: no PersistentVolume or provisioner serves its \
             StorageClass yet",
            claim.metadata.name.as_deref().unwrap_or_default()
        ));
    }
    let etcd_ready = etcd
        .and_then(|s| s.status.as_ref()?.ready_replicas)
        .unwrap_or(0);
    if etcd_ready < 1 {
        return provisioning("waiting for etcd to be ready".into());
    }
    let api_rollout = api_server.map(rollout);
    let kcm_rollout = controller_manager.map(rollout);
    let deployed_api = api_server.and_then(Deployed::of).map(|d| d.version);
    let deployed_kcm = controller_manager.and_then(Deployed::of).map(|d| d.version);
    let at_target =
        |v: Option<&str>| v.is_some_and(|v| crate::contract::version_matches(target, v));
    if let (Some(api), Some(kcm)) = (deployed_api, deployed_kcm)
        && master.is_some()
        && (!(at_target(Some(api))
            && at_target(Some(kcm))
            && api_rollout == Some(Rollout::Available))
            || lingering > 0)
    {
        let what = |r: &Option<Rollout>| match r {
            Some(Rollout::Available) | None => "rolled out".to_owned(),
            Some(Rollout::Progressing(why) | Rollout::Failed(why)) => why.clone(),
        };
        return Health {
            state: ClusterState::Upgrading,
            progress: Some(format!(
                "to {target}, one minor at a time: API servers at {api} ({}), controller-manager \
                 at {kcm} ({}), {lingering} pod(s) of the previous version still stopping",
                what(&api_rollout),
                what(&kcm_rollout)
            )),
            message: None,
        };
    }
    match &api_rollout {
        Some(Rollout::Available) => {}
        Some(Rollout::Failed(why)) => {
            return Health {
                state: ClusterState::Failed,
                progress: None,
                message: Some(format!("the API servers' rollout failed: {why}")),
            };
        }
        Some(Rollout::Progressing(why)) => return provisioning(format!("API servers: {why}")),
        None => return provisioning("creating the API servers".into()),
    }
    if master.is_none() {
        return provisioning("waiting for the API server to answer through its Service".into());
    }
    if let Some(what) = waiting_for_address {
        return provisioning(what.to_owned());
    }
    match &kcm_rollout {
        Some(Rollout::Available) => {}
        Some(Rollout::Progressing(why) | Rollout::Failed(why)) => {
            return provisioning(format!("controller-manager: {why}"));
        }
        None => return provisioning("creating the controller-manager".into()),
    }
    Health {
        state: ClusterState::Running,
        progress: None,
        message: None,
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
            vec![images("1.28.0"), images("1.29.14"), images("1.30.1")],
            "etcd",
        )
    }

    fn at(version: &str, rolled_out: bool) -> Option<Deployed<'_>> {
        Some(Deployed {
            version,
            rolled_out,
        })
    }

    fn pair(v: &Versions<'_>) -> (String, String) {
        (
            v.api_server.version.clone(),
            v.controller_manager.version.clone(),
        )
    }

    #[test]
    fn a_new_cluster_runs_the_version_asked_for() {
        let c = config();
        let v = versions(&c, "1.29", None, None).expect("versions");
        assert_eq!(pair(&v), ("1.29.14".into(), "1.29.14".into()));
        assert!(versions(&c, "1.31", None, None).is_err());
    }

    /// 1.28 → 1.30: API servers to 1.29, then the controller-manager, then API servers to 1.30,
    /// then the controller-manager; nothing moves while a rollout runs.
    #[test]
    fn upgrades_go_one_minor_and_one_component_at_a_time() {
        let c = config();
        let steps = [
            (
                at("1.28.0", true),
                at("1.28.0", true),
                ("1.29.14", "1.28.0"),
            ),
            (
                at("1.29.14", false),
                at("1.28.0", true),
                ("1.29.14", "1.28.0"),
            ),
            (
                at("1.29.14", true),
                at("1.28.0", true),
                ("1.29.14", "1.29.14"),
            ),
            (
                at("1.29.14", true),
                at("1.29.14", false),
                ("1.29.14", "1.29.14"),
            ),
            (
                at("1.29.14", true),
                at("1.29.14", true),
                ("1.30.1", "1.29.14"),
            ),
            (
                at("1.30.1", true),
                at("1.29.14", true),
                ("1.30.1", "1.30.1"),
            ),
            (at("1.30.1", true), at("1.30.1", true), ("1.30.1", "1.30.1")),
        ];
        for (api, kcm, (want_api, want_kcm)) in steps {
            let v = versions(&c, "1.30", api, kcm).expect("versions");
            assert_eq!(
                pair(&v),
                (want_api.to_owned(), want_kcm.to_owned()),
                "api {api:?}, kcm {kcm:?}"
            );
        }
    }

    fn deployment(version: &str, image: &str, rolled_out: bool) -> Deployment {
        let ready = if rolled_out { 2 } else { 1 };
        serde_json::from_value(serde_json::json!({
            "metadata": {"generation": 1, "annotations": {VERSION_ANNOTATION: version}},
            "spec": {
                "replicas": 2,
                "selector": {},
                "template": {"spec": {"containers": [{"name": "c", "image": image}]}},
            },
            "status": {
                "observedGeneration": 1,
                "replicas": 2,
                "updatedReplicas": ready,
                "availableReplicas": ready,
                "readyReplicas": ready,
            },
        }))
        .expect("a Deployment")
    }

    fn pod(component: &str, image: &str, waiting: Option<&str>) -> Pod {
        let mut pod = serde_json::json!({
            "metadata": {"name": "p", "labels": {super::super::names::COMPONENT_LABEL: component}},
            "spec": {"containers": [{"name": "c", "image": image}]},
        });
        if let Some(reason) = waiting {
            pod["status"] = serde_json::json!({"containerStatuses": [{
                "name": "c", "image": image, "imageID": "", "ready": false, "restartCount": 0,
                "state": {"waiting": {"reason": reason, "message": "not on the node"}},
            }]});
        }
        serde_json::from_value(pod).expect("a Pod")
    }

    fn etcd_ready() -> StatefulSet {
        serde_json::from_value(serde_json::json!({
            "spec": {"selector": {}, "serviceName": "e", "template": {}},
            "status": {"replicas": 1, "readyReplicas": 1},
        }))
        .expect("a StatefulSet")
    }

    /// A roll is not over while a pod of the previous image still stops: clients connected to it
    /// still get the old version.
    #[test]
    fn an_upgrade_lasts_until_the_old_pods_are_gone() {
        let etcd = etcd_ready();
        let api = deployment("1.29.14", "apiserver:1.29.14", true);
        let kcm = deployment("1.29.14", "kcm:1.29.14", true);
        let old = [pod("apiserver", "apiserver:1.28.0", None)];
        let found = |pods| Found {
            etcd: Some(&etcd),
            api_server: Some(&api),
            controller_manager: Some(&kcm),
            pods,
            claims: &[],
            lingering: lingering(pods, "apiserver", "apiserver:1.29.14"),
        };
        let health = state("1.29", found(&old), Some("1.29.14"), None);
        assert_eq!(health.state, ClusterState::Upgrading, "{health:?}");
        assert!(
            health
                .progress
                .as_deref()
                .is_some_and(|p| p.contains("1 pod(s) of the previous version")),
            "{health:?}"
        );
        assert!(Deployed::among(&api, &old, "apiserver").is_some_and(|d| !d.rolled_out));
        let health = state("1.29", found(&[]), Some("1.29.14"), None);
        assert_eq!(health.state, ClusterState::Running, "{health:?}");
    }

    /// An image the node cannot get does not fix itself: `Failed`, naming the pod and reason.
    #[test]
    fn an_image_that_cannot_be_pulled_fails_the_cluster() {
        let pods = [pod("etcd", "etcd:9", Some("ErrImageNeverPull"))];
        let found = Found {
            etcd: None,
            api_server: None,
            controller_manager: None,
            pods: &pods,
            claims: &[],
            lingering: 0,
        };
        let health = state("1.28", found, None, None);
        assert_eq!(health.state, ClusterState::Failed);
        assert!(
            health
                .message
                .as_deref()
                .is_some_and(|m| m.contains("ErrImageNeverPull")),
            "{health:?}"
        );
    }

    #[test]
    fn a_downgrade_moves_nothing() {
        let c = config();
        assert!(matches!(
            versions(&c, "1.28", at("1.29.14", true), at("1.29.14", true)),
            Err(ProviderError::Rejected { reason, .. }) if reason == "DowngradeRefused"
        ));
    }
}
