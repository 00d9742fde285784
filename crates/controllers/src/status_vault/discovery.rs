//! API discovery of the kinds policies name: the resource a kind is served as, and whether it
//! has the `/status` subresource a restore writes through.

use kube::Client;
use kube::api::ApiResource;
use vigil_apis::status_backup_policy::ResourceKind;

use super::model::Resolution;

/// Resolves a kind through API discovery: its resource, and whether it has `/status`.
pub async fn resolve(client: &Client, kind: &ResourceKind) -> (Resolution, Option<ApiResource>) {
    let group_label = if kind.group.is_empty() {
        "the core group".to_owned()
    } else {
        format!("group {}", kind.group)
    };
    let group = match kube::discovery::group(client, &kind.group).await {
        Ok(g) => g,
        Err(kube::Error::Discovery(kube::error::DiscoveryError::MissingApiGroup(_))) => {
            return (
                Resolution::NotFound(format!("the API server serves no {group_label}")),
                None,
            );
        }
        Err(kube::Error::Api(s)) if s.code == 404 => {
            return (
                Resolution::NotFound(format!("the API server serves no {group_label}")),
                None,
            );
        }
        Err(e) => return (Resolution::Failed(e.to_string()), None),
    };
    // The kind may live in any version the group serves: two CRDs of one group can serve
    // different versions (`vigil.dev/v1` StatusBackupPolicy, `vigil.dev/v1alpha1`
    // KubernetesCluster), and the group's preferred version is only one of them.
    let preferred = group.preferred_version_or_latest().to_owned();
    let versions: Vec<String> = std::iter::once(preferred.clone())
        .chain(
            group
                .versions()
                .filter(|v| **v != preferred)
                .map(str::to_owned),
        )
        .collect();
    let found = versions.iter().find_map(|version| {
        let resources = group.versioned_resources(version);
        resources
            .iter()
            .find(|(ar, _)| ar.kind == kind.kind)
            .or_else(|| {
                resources.iter().find(|(ar, _)| {
                    ar.kind.eq_ignore_ascii_case(&kind.kind)
                        || ar.plural.eq_ignore_ascii_case(&kind.kind)
                })
            })
            .cloned()
    });
    let Some((ar, caps)) = found else {
        return (
            Resolution::NotFound(format!(
                "no kind {} in {group_label} (versions {})",
                kind.kind,
                versions.join(", ")
            )),
            None,
        );
    };
    if !caps
        .subresources
        .iter()
        .any(|(sub, _)| sub.plural == "status")
    {
        return (
            Resolution::NoStatusSubresource {
                resource: ar.plural.clone(),
            },
            None,
        );
    }
    (
        Resolution::Watching {
            resource: ar.plural.clone(),
            api_version: ar.api_version.clone(),
            namespaced: caps.scope == kube::discovery::Scope::Namespaced,
        },
        Some(ar.clone()),
    )
}
