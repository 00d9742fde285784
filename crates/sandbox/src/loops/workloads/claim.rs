//! `ControllerRefManager`'s claiming: which objects a controller owns given its selector —
//! it adopts matching orphans and releases owned objects that stopped matching. Used by the
//! ReplicaSet controller for pods and by the Deployment controller for ReplicaSets.

use serde_json::Value;

use super::{pods, selector};
use crate::registry::meta;

/// What claiming does with the candidates of a namespace (pods, or ReplicaSets for a Deployment).
#[derive(Debug, Default, PartialEq)]
pub struct Claim<'a> {
    /// Pods this ReplicaSet controls and that match it (after adoption).
    pub owned: Vec<&'a Value>,
    /// Orphans to adopt (they are part of `owned` too).
    pub adopt: Vec<&'a Value>,
    /// Controlled pods that no longer match.
    pub release: Vec<&'a Value>,
}

/// `ClaimPods` / `ClaimReplicaSets`: adoption and release, as `ControllerRefManager` does them. A ReplicaSet being
/// deleted adopts nothing; objects being deleted are never adopted.
pub fn claim<'a>(
    owner: &Value,
    candidates: &[&'a Value],
    spec_selector: Option<&Value>,
) -> Claim<'a> {
    let uid = meta::meta_str(owner, "uid");
    let owner_deleting = meta::is_deleting(owner);
    let mut out = Claim::default();
    for pod in candidates {
        let matches = selector::matches(spec_selector, meta::labels(pod));
        match pods::controller_uid(pod) {
            Some(u) if u == uid => {
                if matches {
                    out.owned.push(pod);
                } else if !owner_deleting {
                    out.release.push(pod);
                }
            }
            Some(_) => {}
            None => {
                if matches && !owner_deleting && !meta::is_deleting(pod) {
                    out.adopt.push(pod);
                    out.owned.push(pod);
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn pod(name: &str, labels: Value, owner: Option<&str>) -> Value {
        let mut p = json!({"metadata": {"name": name, "labels": labels}});
        if let Some(uid) = owner {
            p["metadata"]["ownerReferences"] = json!([{"uid": uid, "controller": true}]);
        }
        p
    }

    #[test]
    fn orphans_matching_are_adopted_and_non_matching_owned_pods_released() {
        let owner = json!({"metadata": {"name": "rs", "uid": "u-rs"}, "spec": {"selector": {"matchLabels": {"app": "web"}}}});
        let orphan = pod("a", json!({"app": "web"}), None);
        let mine = pod("b", json!({"app": "web"}), Some("u-rs"));
        let strayed = pod("c", json!({"app": "other"}), Some("u-rs"));
        let foreign = pod("d", json!({"app": "web"}), Some("u-other"));
        let all = [&orphan, &mine, &strayed, &foreign];
        let c = claim(&owner, &all, owner.pointer("/spec/selector"));
        assert_eq!(c.owned, vec![&orphan, &mine]);
        assert_eq!(c.adopt, vec![&orphan]);
        assert_eq!(c.release, vec![&strayed]);
    }
}
