//! The cluster's addons: converging them to the spec, their readiness, and drift made behind
//! Vigil's back.

use super::*;

/// Addons that differ from the spec: set them (unless refused), only once no other request is
/// on its way this pass (`call`); a change made outside Vigil is reported as drift.
pub(super) fn converge_addons(
    report: &mut Report,
    view: &ClusterView,
    cluster: &ProviderCluster,
    problems: &mut Vec<(String, String)>,
    call: &mut Option<Call>,
) {
    let desired = view.desired_addons();
    let actual: BTreeMap<&str, &str> = cluster
        .addons
        .iter()
        .filter(|a| a.state != AddonState::Removing)
        .map(|a| (a.name.as_str(), a.version.as_str()))
        .collect();
    let wanted: BTreeMap<&str, &str> = desired
        .iter()
        .map(|a| (a.name.as_str(), a.version.as_str()))
        .collect();
    if actual == wanted {
        return;
    }
    let drift = drifted_addons(view, cluster);
    if !drift.is_empty() {
        report.event(EventNote::warning(
            REASON_DRIFT_DETECTED,
            format!(
                "addons changed outside Vigil: {}; restoring the declared ones",
                drift.join(", ")
            ),
        ));
    }
    match rejection_for(&report.status, OP_SET_ADDONS) {
        Some(r) => problems.push((r.reason.clone(), r.message.clone())),
        None if call.is_none() => {
            report.event(EventNote::normal(
                REASON_CONVERGING_ADDONS,
                describe_addon_changes(&actual, &wanted),
            ));
            *call = Some(Call::SetAddons {
                id: cluster.id.clone(),
                addons: desired.clone(),
            });
        }
        // The upgrade goes first; the addons follow on a later pass.
        None => {}
    }
}

/// `AddonsReady`: true when every declared addon is reported `Installed` at its declared version
/// and no other addon is left; otherwise why not — a failed addon first, then the first one still
/// on its way, with the provider's message (what its rollout waits for).
pub(super) fn addons_readiness(
    view: &ClusterView,
    cluster: &ProviderCluster,
) -> (Status, &'static str, String) {
    if let Some(failed) = cluster
        .addons
        .iter()
        .find(|a| a.state == AddonState::Failed)
    {
        return (
            Status::False,
            REASON_ADDON_FAILED,
            format!(
                "addon {} {} failed: {}",
                failed.name,
                failed.version,
                failed.message.as_deref().unwrap_or("no reason given")
            ),
        );
    }
    let mut waiting = Vec::new();
    for declared in &view.spec.addons {
        let found = cluster.addons.iter().find(|a| a.name == declared.name);
        match found {
            Some(a) if a.version == declared.version && a.state == AddonState::Installed => {}
            Some(a) if a.version == declared.version => waiting.push(format!(
                "{} {} {}{}",
                a.name,
                a.version,
                addon_state(a.state).to_lowercase(),
                a.message
                    .as_deref()
                    .map(|m| format!(" ({m})"))
                    .unwrap_or_default()
            )),
            Some(a) => waiting.push(format!(
                "{} at {}, {} declared",
                a.name, a.version, declared.version
            )),
            None => waiting.push(format!(
                "{} {} not installed yet",
                declared.name, declared.version
            )),
        }
    }
    for extra in cluster
        .addons
        .iter()
        .filter(|a| !view.spec.addons.iter().any(|d| d.name == a.name))
    {
        waiting.push(format!("{} {} being removed", extra.name, extra.version));
    }
    if !waiting.is_empty() {
        return (
            Status::False,
            REASON_ADDONS_PROGRESSING,
            format!("addons not ready: {}", waiting.join("; ")),
        );
    }
    let message = if view.spec.addons.is_empty() {
        "no addons declared".to_owned()
    } else {
        format!(
            "addons available in the cluster: {}",
            view.spec
                .addons
                .iter()
                .map(|a| format!("{} {}", a.name, a.version))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    (Status::True, REASON_ADDONS_READY, message)
}

/// Addons the last status showed installed as declared, which the provider now reports missing
/// or at another version: changed behind Vigil's back.
pub(super) fn drifted_addons(view: &ClusterView, cluster: &ProviderCluster) -> Vec<String> {
    let Some(previous) = &view.status else {
        return Vec::new();
    };
    previous
        .addons
        .iter()
        .filter(|a| a.state == "Installed")
        .filter(|a| {
            view.spec
                .addons
                .iter()
                .any(|d| d.name == a.name && d.version == a.version)
        })
        .filter_map(|a| match cluster.addons.iter().find(|c| c.name == a.name) {
            None => Some(format!("{} removed", a.name)),
            Some(c) if c.version != a.version => {
                Some(format!("{} changed to {}", a.name, c.version))
            }
            Some(_) => None,
        })
        .collect()
}

pub(super) fn describe_addon_changes(
    actual: &BTreeMap<&str, &str>,
    wanted: &BTreeMap<&str, &str>,
) -> String {
    let mut parts = Vec::new();
    for (name, version) in wanted {
        match actual.get(name) {
            None => parts.push(format!("installing {name} {version}")),
            Some(v) if v != version => parts.push(format!("moving {name} from {v} to {version}")),
            Some(_) => {}
        }
    }
    for name in actual.keys().filter(|n| !wanted.contains_key(*n)) {
        parts.push(format!("removing {name}"));
    }
    format!("converging addons: {}", parts.join(", "))
}

pub(super) fn addon_state(state: AddonState) -> &'static str {
    match state {
        AddonState::Installing => "Installing",
        AddonState::Installed => "Installed",
        AddonState::Removing => "Removing",
        AddonState::Failed => "Failed",
    }
}
