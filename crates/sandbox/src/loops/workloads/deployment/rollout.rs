//! The arithmetic of a Deployment's rollout, transcribed from `pkg/controller/deployment`
//! (`util/deployment_util.go`, `rolling.go`, `sync.go`): fenceposts, how far the new
//! ReplicaSet may grow, how far old ones may shrink, proportional scaling and history cleanup.
//! Pure functions over [`Rs`] views; the caller writes the results.

use std::cmp::Ordering;

use serde_json::Value;

/// What the rollout reads of one ReplicaSet.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Rs {
    pub name: String,
    /// creationTimestamp as written (RFC 3339, second precision: sorts as text).
    pub created: String,
    /// spec.replicas
    pub replicas: i64,
    /// status.replicas
    pub status_replicas: i64,
    pub ready: i64,
    pub available: i64,
    /// `deployment.kubernetes.io/revision`
    pub revision: i64,
    /// `deployment.kubernetes.io/desired-replicas`
    pub desired: Option<i64>,
    /// `deployment.kubernetes.io/max-replicas`
    pub max: Option<i64>,
    pub generation: i64,
    pub observed_generation: i64,
    pub deleting: bool,
}

/// The Deployment's strategy, resolved against `spec.replicas`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Strategy {
    pub rolling: bool,
    pub max_surge: i64,
    pub max_unavailable: i64,
}

/// `intstr.GetScaledValueFromIntOrPercent`.
fn scaled(value: Option<&Value>, total: i64, round_up: bool) -> i64 {
    match value {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => match s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) {
            Some(pct) if round_up => (pct * total + 99) / 100,
            Some(pct) => pct * total / 100,
            None => s.parse().unwrap_or(0),
        },
        _ => 0,
    }
}

/// `ResolveFenceposts` plus `MaxUnavailable`/`MaxSurge`: surge rounds up, unavailability down,
/// both zero means one may be unavailable; unavailability never exceeds the replicas.
pub fn strategy(spec: &Value) -> Strategy {
    let replicas = spec.get("replicas").and_then(Value::as_i64).unwrap_or(1);
    let rolling = spec.pointer("/strategy/type").and_then(Value::as_str) != Some("Recreate");
    if !rolling {
        return Strategy {
            rolling,
            max_surge: 0,
            max_unavailable: 0,
        };
    }
    let ru = spec.pointer("/strategy/rollingUpdate");
    let surge = scaled(ru.and_then(|r| r.get("maxSurge")), replicas, true);
    let mut unavailable = scaled(ru.and_then(|r| r.get("maxUnavailable")), replicas, false);
    if surge == 0 && unavailable == 0 {
        unavailable = 1;
    }
    Strategy {
        rolling,
        max_surge: surge,
        max_unavailable: if replicas == 0 {
            0
        } else {
            unavailable.min(replicas)
        },
    }
}

pub fn by_creation(a: &Rs, b: &Rs) -> Ordering {
    a.created.cmp(&b.created).then_with(|| a.name.cmp(&b.name))
}

fn sum(rss: &[&Rs], f: impl Fn(&Rs) -> i64) -> i64 {
    rss.iter().map(|r| f(r)).sum()
}

/// `NewRSNewReplicas` for a rolling update: how big the new ReplicaSet may be now.
pub fn new_rs_replicas(replicas: i64, s: Strategy, all: &[&Rs], new: &Rs) -> i64 {
    if !s.rolling {
        return replicas;
    }
    let current = sum(all, |r| r.replicas);
    let max_total = replicas + s.max_surge;
    if current >= max_total {
        return new.replicas;
    }
    let up = (max_total - current).min(replicas - new.replicas);
    new.replicas + up
}

/// `reconcileOldReplicaSets`: new sizes of old ReplicaSets (oldest first), first shedding their
/// unavailable pods, then available ones as far as `maxUnavailable` allows.
pub fn scale_down_old(
    replicas: i64,
    s: Strategy,
    old: &[Rs],
    new: Option<&Rs>,
) -> Vec<(String, i64)> {
    let mut old: Vec<Rs> = old.to_vec();
    old.sort_by(by_creation);
    let old_count: i64 = old.iter().map(|r| r.replicas).sum();
    if old_count == 0 {
        return Vec::new();
    }
    let new_replicas = new.map_or(0, |n| n.replicas);
    let all_count = old_count + new_replicas;
    let min_available = replicas - s.max_unavailable;
    let new_unavailable = new.map_or(0, |n| n.replicas - n.available);
    let max_scaled_down = all_count - min_available - new_unavailable;
    if max_scaled_down <= 0 {
        return Vec::new();
    }
    let mut changes = Vec::new();
    // cleanupUnhealthyReplicas
    let mut cleaned = 0;
    for rs in old.iter_mut() {
        if cleaned >= max_scaled_down {
            break;
        }
        if rs.replicas == 0 || rs.replicas == rs.available {
            continue;
        }
        let down = (max_scaled_down - cleaned).min(rs.replicas - rs.available);
        rs.replicas -= down;
        cleaned += down;
        changes.push((rs.name.clone(), rs.replicas));
    }
    // scaleDownOldReplicaSetsForRollingUpdate
    let available = old.iter().map(|r| r.available).sum::<i64>() + new.map_or(0, |n| n.available);
    if available > min_available {
        let total = available - min_available;
        let mut done = 0;
        for rs in old.iter_mut() {
            if done >= total {
                break;
            }
            if rs.replicas == 0 {
                continue;
            }
            let down = rs.replicas.min(total - done);
            rs.replicas -= down;
            done += down;
            changes.retain(|(n, _)| n != &rs.name);
            changes.push((rs.name.clone(), rs.replicas));
        }
    }
    changes
}

/// `isScalingEvent`: an active ReplicaSet was sized for a different `spec.replicas`.
pub fn is_scaling_event(replicas: i64, all: &[&Rs]) -> bool {
    all.iter()
        .filter(|r| r.replicas > 0)
        .any(|r| r.desired.is_some_and(|d| d != replicas))
}

/// `scale`: the sizes every ReplicaSet should have after a scaling event (or while paused):
/// the only active (or newest) one takes everything; otherwise the difference is spread in
/// proportion to their sizes. Returns (name, new size) for every ReplicaSet that changes.
pub fn scale(
    replicas: i64,
    s: Strategy,
    status_replicas: i64,
    new: Option<&Rs>,
    old: &[Rs],
) -> Vec<(String, i64)> {
    let mut old_sorted: Vec<&Rs> = old.iter().collect();
    // Newest first, as FindActiveOrLatest wants.
    old_sorted.sort_by(|a, b| by_creation(b, a));
    let mut all: Vec<&Rs> = old_sorted.clone();
    all.extend(new);
    let active: Vec<&Rs> = all.iter().copied().filter(|r| r.replicas > 0).collect();
    let only = match active.len() {
        0 => new.or(old_sorted.first().copied()),
        1 => Some(active[0]),
        _ => None,
    };
    if let Some(rs) = only {
        return if rs.replicas == replicas {
            Vec::new()
        } else {
            vec![(rs.name.clone(), replicas)]
        };
    }
    // IsSaturated: the new ReplicaSet holds everything; old active ones go to zero.
    if let Some(n) = new
        && n.replicas == replicas
        && n.desired == Some(replicas)
        && n.available == replicas
    {
        return active
            .iter()
            .filter(|r| r.name != n.name)
            .map(|r| (r.name.clone(), 0))
            .collect();
    }
    if !s.rolling {
        return Vec::new();
    }
    let current: i64 = active.iter().map(|r| r.replicas).sum();
    let allowed = if replicas > 0 {
        replicas + s.max_surge
    } else {
        0
    };
    let to_add = allowed - current;
    let mut sorted = active.clone();
    // Biggest first; ties newest first when growing, oldest first when shrinking.
    sorted.sort_by(|a, b| {
        b.replicas.cmp(&a.replicas).then_with(|| {
            if to_add > 0 {
                by_creation(b, a)
            } else {
                by_creation(a, b)
            }
        })
    });
    let mut added = 0;
    let mut sizes: Vec<(String, i64)> = Vec::new();
    for rs in &sorted {
        let proportion = if to_add == 0 || rs.replicas == 0 || to_add == added {
            0
        } else {
            let fraction = if replicas == 0 {
                -rs.replicas
            } else {
                let target = replicas + s.max_surge;
                let annotated = rs.max.unwrap_or(status_replicas).max(1);
                ((rs.replicas * target) as f64 / annotated as f64).round() as i64 - rs.replicas
            };
            let allowed_left = to_add - added;
            if to_add > 0 {
                fraction.min(allowed_left)
            } else {
                fraction.max(allowed_left)
            }
        };
        added += proportion;
        sizes.push((rs.name.clone(), rs.replicas + proportion));
    }
    if added != to_add
        && let Some(first) = sizes.first_mut()
    {
        first.1 = (first.1 + to_add - added).max(0);
    }
    sizes
        .into_iter()
        .filter(|(name, size)| {
            sorted
                .iter()
                .any(|r| &r.name == name && r.replicas != *size)
        })
        .collect()
}

/// `cleanupDeployment`: old ReplicaSets to delete beyond `revisionHistoryLimit`, lowest
/// revision first, never one that still has pods or has not been observed at its generation.
pub fn history_to_delete(limit: i64, old: &[Rs]) -> Vec<String> {
    let mut alive: Vec<&Rs> = old.iter().filter(|r| !r.deleting).collect();
    let excess = alive.len() as i64 - limit;
    if excess <= 0 {
        return Vec::new();
    }
    alive.sort_by(|a, b| a.revision.cmp(&b.revision).then_with(|| by_creation(a, b)));
    alive
        .into_iter()
        .take(excess as usize)
        .filter(|r| {
            r.status_replicas == 0 && r.replicas == 0 && r.generation <= r.observed_generation
        })
        .map(|r| r.name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rs(name: &str, created: &str, replicas: i64, available: i64) -> Rs {
        Rs {
            name: name.into(),
            created: created.into(),
            replicas,
            status_replicas: replicas,
            ready: available,
            available,
            ..Rs::default()
        }
    }

    fn rolling(replicas: i64, surge: Value, unavailable: Value) -> Strategy {
        strategy(
            &json!({"replicas": replicas, "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}}}),
        )
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailability_down() {
        let s = rolling(10, json!("25%"), json!("25%"));
        assert_eq!((s.max_surge, s.max_unavailable), (3, 2));
        let s = rolling(1, json!("25%"), json!("25%"));
        assert_eq!((s.max_surge, s.max_unavailable), (1, 0));
        let s = rolling(3, json!(0), json!(0));
        assert_eq!((s.max_surge, s.max_unavailable), (0, 1));
        let s = strategy(&json!({"replicas": 3, "strategy": {"type": "Recreate"}}));
        assert!(!s.rolling);
    }

    #[test]
    fn new_replica_set_grows_within_surge() {
        let s = rolling(4, json!(1), json!(0));
        let old = rs("old", "t1", 4, 4);
        let new = rs("new", "t2", 0, 0);
        assert_eq!(new_rs_replicas(4, s, &[&old, &new], &new), 1);
        let new = rs("new", "t2", 1, 0);
        assert_eq!(
            new_rs_replicas(4, s, &[&old, &new], &new),
            1,
            "at the surge limit"
        );
    }

    #[test]
    fn old_replica_sets_shrink_within_max_unavailable() {
        let s = rolling(4, json!(1), json!(0));
        let old = [rs("old", "t1", 4, 4)];
        // The new pod is not available yet: nothing may go.
        assert!(scale_down_old(4, s, &old, Some(&rs("new", "t2", 1, 0))).is_empty());
        // Once it is, one old pod goes.
        assert_eq!(
            scale_down_old(4, s, &old, Some(&rs("new", "t2", 1, 1))),
            vec![("old".to_owned(), 3)]
        );
        // Unavailable old pods go first, whatever the budget of available ones.
        let old = [rs("old", "t1", 4, 2)];
        assert_eq!(
            scale_down_old(
                4,
                rolling(4, json!(1), json!(1)),
                &old,
                Some(&rs("new", "t2", 1, 0))
            ),
            vec![("old".to_owned(), 3)]
        );
    }

    #[test]
    fn scaling_goes_to_the_only_active_set_or_proportionally() {
        let s = rolling(10, json!(3), json!(2));
        let mut new = rs("new", "t2", 5, 5);
        new.desired = Some(5);
        assert_eq!(
            scale(10, s, 5, Some(&new), &[]),
            vec![("new".to_owned(), 10)]
        );
        let mut old = rs("old", "t1", 6, 6);
        old.max = Some(8);
        let mut new = rs("new", "t2", 2, 0);
        new.max = Some(8);
        // From 5 (+3 surge = 8 total) to 10 (+3 = 13): five more, spread 6:2.
        let out = scale(10, s, 8, Some(&new), std::slice::from_ref(&old));
        let size = |n: &str| out.iter().find(|(name, _)| name == n).map(|(_, s)| *s);
        assert_eq!(size("old").unwrap_or(6) + size("new").unwrap_or(2), 13);
        assert_eq!(size("old"), Some(10));
    }

    #[test]
    fn history_keeps_the_limit_and_never_deletes_sets_with_pods() {
        let mut a = rs("a", "t1", 0, 0);
        a.revision = 1;
        let mut b = rs("b", "t2", 0, 0);
        b.revision = 2;
        let mut c = rs("c", "t3", 1, 1);
        c.revision = 3;
        // Three old sets, a limit of one: the two lowest revisions go.
        assert_eq!(
            history_to_delete(1, &[b.clone(), a.clone(), c.clone()]),
            vec!["a".to_owned(), "b".to_owned()]
        );
        // One set still has pods: it is kept even beyond the limit.
        assert_eq!(
            history_to_delete(0, &[a.clone(), c.clone()]),
            vec!["a".to_owned()]
        );
        assert!(history_to_delete(0, std::slice::from_ref(&c)).is_empty());
        assert!(history_to_delete(3, &[a, b, c]).is_empty());
    }
}
