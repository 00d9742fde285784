//! The status vault's pure decisions: which objects a policy covers, which kinds to watch (and
//! which watches to restart), which backend a policy writes to, what a new observation of an
//! object calls for (a record, a restore), where a restore stands, which record (if any) a
//! re-created object gets back, and what a policy's status says.
//!
//! No clock, no I/O: the same inputs always give the same answer.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{Hash as _, Hasher as _};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, LabelSelector, Time};
use kube::ResourceExt as _;
use kube::api::DynamicObject;
use kube::core::{Selector, SelectorExt as _};
use serde_json::Value;
use vigil_apis::status_backup_policy::{
    BackendStatus, ResourceKind, ResourceState, RestoreMode, StatusBackupPolicyStatus,
};
use vigil_runtime::conditions::{self, NewCondition, Status};
use vigil_vault::Record;

use super::model::{
    BackendHealth, BackendRef, DEFAULT_RETENTION, ObjectView, PolicyView, Resolution, Settings,
};

/// Condition types and reasons of a policy.
pub use vigil_runtime::conditions::{DEGRADED, READY};
pub const REASON_WATCHING: &str = "Watching";
pub const REASON_AS_EXPECTED: &str = "AsExpected";
pub const REASON_BACKEND_UNAVAILABLE: &str = "BackendUnavailable";
pub const REASON_INVALID_SELECTOR: &str = "InvalidSelector";
pub const REASON_RESOLVING: &str = "Resolving";

/// Whether a status carries nothing worth keeping: absent, null, or only empty objects and lists
/// (the API server gives a new Service `status: {loadBalancer: {}}`).
pub fn status_is_empty(status: Option<&Value>) -> bool {
    match status {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.values().all(|v| status_is_empty(Some(v))),
        Some(Value::Array(a)) => a.iter().all(|v| status_is_empty(Some(v))),
        Some(_) => false,
    }
}

/// A hash of a non-empty status, to tell a change from a resend without keeping the status.
pub fn status_hash(status: Option<&Value>) -> Option<u64> {
    if status_is_empty(status) {
        return None;
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    status.map(Value::to_string).hash(&mut hasher);
    Some(hasher.finish())
}

/// The lean view of a watched object: metadata and a hash of its status.
pub fn object_view(obj: &DynamicObject) -> ObjectView {
    ObjectView {
        namespace: obj.namespace(),
        name: obj.name_any(),
        uid: obj.uid().unwrap_or_default(),
        labels: obj.labels().clone(),
        status_hash: status_hash(obj.data.get("status")),
    }
}

/// Whether a new observation of an object is worth a record: a non-empty status that differs
/// from the last one seen for the same object (same uid). Empty statuses are never recorded: a
/// re-created object starts empty, and recording that would bury the status to restore.
pub fn worth_capturing(previous: Option<&ObjectView>, now: &ObjectView) -> bool {
    now.status_hash.is_some()
        && previous.is_none_or(|p| p.uid != now.uid || p.status_hash != now.status_hash)
}

/// The kinds a set of policies names, with the core group spelled `""`.
pub fn wanted_kinds<'a>(
    policies: impl IntoIterator<Item = &'a PolicyView>,
) -> BTreeSet<ResourceKind> {
    policies
        .into_iter()
        .flat_map(|p| p.spec.resources.iter())
        .map(|r| ResourceKind {
            group: r.group.trim().to_owned(),
            kind: r.kind.trim().to_owned(),
        })
        .collect()
}

/// Whether a policy names a kind.
pub fn names_kind(policy: &PolicyView, kind: &ResourceKind) -> bool {
    policy
        .spec
        .resources
        .iter()
        .any(|r| r.group.trim() == kind.group && r.kind.trim() == kind.kind)
}

fn selector_matches(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    // An invalid selector covers nothing (the policy's status says why).
    Selector::try_from(selector.clone()).is_ok_and(|s| s.matches(labels))
}

/// Why a policy's selectors cannot be used, if they cannot.
pub fn selector_error(policy: &PolicyView) -> Option<String> {
    let check = |what: &str, s: &Option<LabelSelector>| {
        s.as_ref()
            .and_then(|s| Selector::try_from(s.clone()).err())
            .map(|e| format!("{what}: {e}"))
    };
    check("selector", &policy.spec.selector)
        .or_else(|| check("namespaceSelector", &policy.spec.namespace_selector))
}

/// Whether `policy` covers a namespace (`None`: a cluster-scoped object, always covered).
pub fn covers_namespace(
    policy: &PolicyView,
    namespace: Option<&str>,
    namespace_labels: &dyn Fn(&str) -> Option<BTreeMap<String, String>>,
) -> bool {
    let spec = &policy.spec;
    match namespace {
        None => true,
        Some(ns) => {
            (spec.namespaces.is_empty() && spec.namespace_selector.is_none())
                || spec.namespaces.iter().any(|n| n == ns)
                || spec.namespace_selector.as_ref().is_some_and(|s| {
                    namespace_labels(ns).is_some_and(|labels| selector_matches(s, &labels))
                })
        }
    }
}

/// Whether `policy` covers `object` of `kind`. `namespace_labels` gives a namespace's labels
/// (for `namespaceSelector`); cluster-scoped objects are covered whatever the namespaces say.
pub fn covers(
    policy: &PolicyView,
    kind: &ResourceKind,
    object: &ObjectView,
    namespace_labels: &dyn Fn(&str) -> Option<BTreeMap<String, String>>,
) -> bool {
    if !names_kind(policy, kind) {
        return false;
    }
    let spec = &policy.spec;
    covers_namespace(policy, object.namespace.as_deref(), namespace_labels)
        && spec
            .selector
            .as_ref()
            .is_none_or(|s| selector_matches(s, &object.labels))
}

/// The backend a policy writes to.
pub fn backend_of(policy: &PolicyView, settings: &Settings) -> BackendRef {
    match &policy.spec.backend {
        Some(b) => BackendRef {
            location: b.location.trim().to_owned(),
            key_file: b.encryption_key_file.clone(),
        },
        None => BackendRef {
            location: settings.default_location.clone(),
            key_file: settings.default_key_file.clone(),
        },
    }
}

/// Versions kept in a backend: the largest retention of the policies writing to it (one vault
/// per location, so policies sharing it never delete each other's versions).
pub fn retention_of<'a>(
    backend: &BackendRef,
    policies: impl IntoIterator<Item = &'a PolicyView>,
    settings: &Settings,
) -> u32 {
    policies
        .into_iter()
        .filter(|p| backend_of(p, settings) == *backend)
        .map(|p| p.spec.retention.unwrap_or(DEFAULT_RETENTION))
        .max()
        .unwrap_or(DEFAULT_RETENTION)
}

/// Whether Vigil restores `object` by itself: a policy in `OnCreate` mode covers it.
pub fn restores_on_create<'a>(
    policies: impl IntoIterator<Item = &'a PolicyView>,
    kind: &ResourceKind,
    object: &ObjectView,
    namespace_labels: &dyn Fn(&str) -> Option<BTreeMap<String, String>>,
) -> bool {
    policies.into_iter().any(|p| {
        p.spec.restore_mode == RestoreMode::OnCreate && covers(p, kind, object, namespace_labels)
    })
}

/// What a new observation of a watched object calls for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObservedPlan {
    /// Backends to queue a record of its status for.
    pub capture_to: Vec<BackendRef>,
    pub restore: RestoreStep,
}

/// The restore an observation calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestoreStep {
    None,
    /// Empty under an `OnCreate` policy: restore its status (once per object, in the background).
    Restore,
    /// It has its status but still says `vigil.dev/restore-status: pending`: say `done`, so other
    /// operators go ahead.
    MarkDone,
}

/// Decides on a new observation of an object: a record for each backend `covering` it when its
/// status changed, and a restore when a policy restoring on create covers it
/// (`restores_on_create`) and its status is empty — or the convention's annotation, still
/// pending (`annotation_pending`), once it is not.
pub fn on_observed(
    previous: Option<&ObjectView>,
    now: &ObjectView,
    covering: Vec<BackendRef>,
    restores_on_create: bool,
    annotation_pending: bool,
) -> ObservedPlan {
    let capture_to = if worth_capturing(previous, now) {
        covering
    } else {
        Vec::new()
    };
    let restore = match (restores_on_create, now.status_hash.is_none()) {
        (false, _) => RestoreStep::None,
        (true, true) => RestoreStep::Restore,
        (true, false) if annotation_pending => RestoreStep::MarkDone,
        (true, false) => RestoreStep::None,
    };
    ObservedPlan {
        capture_to,
        restore,
    }
}

/// Where a restore stands before the vault is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RestoreStart {
    /// Nothing to restore; `mark_done`: flip the object's restore-status annotation to `done`.
    Nothing { mark_done: bool },
    /// Not known yet: why.
    Pending(Wait),
    /// Read these backends' history of the object, in order.
    Search(Vec<BackendRef>),
}

/// Why a restore waits before reading the vault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wait {
    /// The policies are not loaded yet.
    PoliciesNotLoaded,
    /// Records of the previous object are still on their way to the vault.
    CapturesOnTheirWay,
}

/// Decides whether a restore of `object` reads the vault: not when it has a status, nor when
/// no policy restoring on create covers it (`backends` is empty); not yet while the policies
/// are not loaded or records of the previous object are still on their way
/// (`captures_pending`) — restoring then could hand back a stale status.
pub fn restore_start(
    object: &ObjectView,
    annotation_pending: bool,
    policies_synced: bool,
    backends: Vec<BackendRef>,
    captures_pending: bool,
) -> RestoreStart {
    if object.status_hash.is_some() {
        return RestoreStart::Nothing {
            mark_done: annotation_pending,
        };
    }
    if !policies_synced {
        return RestoreStart::Pending(Wait::PoliciesNotLoaded);
    }
    if backends.is_empty() {
        return RestoreStart::Nothing { mark_done: false };
    }
    if captures_pending {
        return RestoreStart::Pending(Wait::CapturesOnTheirWay);
    }
    RestoreStart::Search(backends)
}

/// What a watch of a kind depends on: the policies (name, generation) naming it. When it
/// changes the watch restarts, so objects an edited policy newly covers are captured.
pub type Fingerprint = Vec<(String, Option<i64>)>;

pub fn fingerprint(policies: &[PolicyView], kind: &ResourceKind) -> Fingerprint {
    let mut f: Fingerprint = policies
        .iter()
        .filter(|p| names_kind(p, kind))
        .map(|p| (p.name.clone(), p.generation))
        .collect();
    f.sort();
    f
}

/// The running watches to stop: kinds no longer wanted, and kinds whose policies changed (they
/// start again when still wanted).
pub fn stale_watches<'a>(
    running: impl IntoIterator<Item = (&'a ResourceKind, &'a Fingerprint)>,
    wanted: &BTreeSet<ResourceKind>,
    policies: &[PolicyView],
) -> Vec<ResourceKind> {
    running
        .into_iter()
        .filter(|(kind, f)| !wanted.contains(*kind) || **f != fingerprint(policies, kind))
        .map(|(kind, _)| kind.clone())
        .collect()
}

/// What a re-created object gets back.
#[derive(Debug, Clone, PartialEq)]
pub enum Pick {
    /// The status to restore: the newest record of another object (uid) with a non-empty status.
    Restore(Box<Record>),
    /// Nothing to restore: no record, or the object (this uid) has records of its own — its
    /// status was emptied after it was captured, which is not Vigil's to undo.
    Nothing,
    /// The newest record is corrupt (or unreadable with this key): restoring an older one could
    /// hand a controller stale state, so nothing is restored and a human decides.
    Corrupt(String),
}

/// Picks the record to restore from an object's history (oldest first, as the vault lists it).
/// Tombstones carry the object's last status, so a status changed just before a deletion is
/// never lost to coalescing; they are candidates like any record.
pub fn pick_restore<E: std::fmt::Display>(
    history_oldest_first: &[Result<Record, E>],
    current_uid: &str,
) -> Pick {
    for entry in history_oldest_first.iter().rev() {
        match entry {
            Err(e) => return Pick::Corrupt(e.to_string()),
            Ok(record) if record.uid == current_uid => return Pick::Nothing,
            Ok(record) if status_is_empty(Some(&record.status)) => continue,
            Ok(record) => return Pick::Restore(Box::new(record.clone())),
        }
    }
    Pick::Nothing
}

/// What a policy's status should be.
pub struct PolicyInputs<'a> {
    pub policy: &'a PolicyView,
    pub previous: Option<&'a StatusBackupPolicyStatus>,
    /// How each of its kinds resolved; a kind missing here is still being resolved.
    pub resolutions: &'a BTreeMap<ResourceKind, Resolution>,
    pub covered: u32,
    pub backend: &'a BackendRef,
    pub health: &'a BackendHealth,
    pub now: &'a Time,
}

/// A policy's new status and the Events that announce new problems.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyPlan {
    pub status: StatusBackupPolicyStatus,
    /// `(reason, message)` of Warning Events: a problem that was not reported before.
    pub warnings: Vec<(String, String)>,
}

/// Computes a policy's status. The first problem found names the Ready/Degraded reason; the
/// resources list says how every kind is doing.
pub fn policy_status(inputs: &PolicyInputs<'_>) -> PolicyPlan {
    let policy = inputs.policy;
    let (resources, kind_problem, resolving) = resource_states(policy, inputs.resolutions);
    let problem = kind_problem.or_else(|| policy_problem(inputs));

    let previous = inputs.previous.cloned().unwrap_or_default();
    let generation = policy.generation;
    let conditions = policy_conditions(
        &previous,
        generation,
        problem.as_ref(),
        resolving,
        inputs.now,
    );

    let was_reported = conditions::find(&previous.conditions, DEGRADED).is_some_and(|c| {
        c.status == "True" && problem.as_ref().is_some_and(|(r, _)| *r == c.reason)
    });
    let warnings = match &problem {
        Some(p) if !was_reported => vec![p.clone()],
        _ => Vec::new(),
    };

    let last_capture = inputs
        .health
        .last_capture
        .as_deref()
        .and_then(|t| t.parse().ok())
        .map(Time)
        .or(previous.last_capture);
    let status = StatusBackupPolicyStatus {
        observed_generation: generation,
        conditions,
        objects_covered: inputs.covered,
        last_capture,
        pending_captures: u32::try_from(inputs.health.pending).unwrap_or(u32::MAX),
        backend: Some(BackendStatus {
            location: inputs.backend.location.clone(),
            state: if inputs.health.error.is_some() {
                "Unavailable".into()
            } else {
                "Available".into()
            },
            message: inputs.health.error.clone(),
        }),
        resources,
    };
    PolicyPlan { status, warnings }
}

/// How each kind the policy names is doing; the first kind's problem (`(reason, message)`), and
/// whether a kind is still being resolved.
fn resource_states(
    policy: &PolicyView,
    resolutions: &BTreeMap<ResourceKind, Resolution>,
) -> (Vec<ResourceState>, Option<(String, String)>, bool) {
    let mut resources = Vec::new();
    let mut problem: Option<(String, String)> = None;
    let mut resolving = false;
    for kind in wanted_kinds([policy]) {
        let label = if kind.group.is_empty() {
            kind.kind.clone()
        } else {
            format!("{}.{}", kind.kind, kind.group)
        };
        let (resource, message) = match resolutions.get(&kind) {
            None => {
                resolving = true;
                resources.push(ResourceState {
                    group: kind.group.clone(),
                    kind: kind.kind.clone(),
                    resource: None,
                    state: REASON_RESOLVING.into(),
                    message: None,
                });
                continue;
            }
            Some(Resolution::Watching { resource, .. }) => (Some(resource.clone()), None),
            Some(Resolution::NotFound(m)) => (None, Some(format!("{label}: {m}"))),
            Some(Resolution::NoStatusSubresource { resource }) => (
                Some(resource.clone()),
                Some(format!(
                    "{label} ({resource}) has no status subresource: its status cannot be restored"
                )),
            ),
            Some(Resolution::Failed(m)) => (None, Some(format!("{label}: discovery failed: {m}"))),
        };
        let state = resolutions.get(&kind).map_or("", Resolution::state);
        if let (None, Some(m)) = (&problem, &message) {
            problem = Some((state.to_owned(), m.clone()));
        }
        resources.push(ResourceState {
            group: kind.group,
            kind: kind.kind,
            resource,
            state: state.to_owned(),
            message,
        });
    }
    (resources, problem, resolving)
}

/// A problem of the policy beyond its kinds: an invalid selector, then an unavailable backend.
fn policy_problem(inputs: &PolicyInputs<'_>) -> Option<(String, String)> {
    if let Some(e) = selector_error(inputs.policy) {
        return Some((REASON_INVALID_SELECTOR.into(), e));
    }
    let e = inputs.health.error.as_ref()?;
    Some((
        REASON_BACKEND_UNAVAILABLE.into(),
        format!(
            "{}: {e}; {} capture(s) pending, retried with backoff",
            inputs.backend.location, inputs.health.pending
        ),
    ))
}

/// `Ready` and `Degraded` from the problem found (or the kinds still resolving).
fn policy_conditions(
    previous: &StatusBackupPolicyStatus,
    generation: Option<i64>,
    problem: Option<&(String, String)>,
    resolving: bool,
    now: &Time,
) -> Vec<Condition> {
    let mut conditions = previous.conditions.clone();
    let condition = |type_, status, reason, message| NewCondition {
        type_,
        status,
        reason,
        message,
        observed_generation: generation,
    };
    let not_degraded = condition(DEGRADED, Status::False, REASON_AS_EXPECTED, "");
    let (ready, degraded) = match problem {
        Some((reason, message)) => (
            condition(READY, Status::False, reason, message),
            condition(DEGRADED, Status::True, reason, message),
        ),
        None if resolving => (
            condition(
                READY,
                Status::Unknown,
                REASON_RESOLVING,
                "resolving the kinds through API discovery",
            ),
            not_degraded,
        ),
        None => (
            condition(
                READY,
                Status::True,
                REASON_WATCHING,
                "every kind is watched and the backend answers",
            ),
            not_degraded,
        ),
    };
    conditions::set(&mut conditions, &ready, now);
    conditions::set(&mut conditions, &degraded, now);
    conditions
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use vigil_apis::status_backup_policy::StatusBackupPolicySpec;

    fn policy(spec: Value) -> PolicyView {
        PolicyView {
            name: "p".into(),
            generation: Some(3),
            spec: serde_json::from_value::<StatusBackupPolicySpec>(spec).expect("spec"),
        }
    }

    fn clusters() -> ResourceKind {
        ResourceKind {
            group: "infra.example.com".into(),
            kind: "KubernetesCluster".into(),
        }
    }

    fn object(ns: Option<&str>, labels: &[(&str, &str)], hash: Option<u64>) -> ObjectView {
        ObjectView {
            namespace: ns.map(str::to_owned),
            name: "c1".into(),
            uid: "u1".into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            status_hash: hash,
        }
    }

    fn no_labels(_: &str) -> Option<BTreeMap<String, String>> {
        None
    }

    fn record(uid: &str, status: Value, deleted: bool) -> Record {
        Record {
            api_version: "infra.example.com/v1".into(),
            kind: "KubernetesCluster".into(),
            namespace: Some("ns".into()),
            name: "c1".into(),
            uid: uid.into(),
            resource_version: "1".into(),
            generation: Some(1),
            status,
            time: "2026-01-01T00:00:00Z".into(),
            deleted,
            object: None,
        }
    }

    #[test]
    fn empty_statuses_are_empty_and_never_captured() {
        assert!(status_is_empty(None));
        assert!(status_is_empty(Some(&json!(null))));
        assert!(status_is_empty(Some(&json!({}))));
        assert!(!status_is_empty(Some(&json!({"a": 1}))));
        assert!(
            status_is_empty(Some(&json!({"loadBalancer": {}}))),
            "a new Service"
        );
        assert!(!status_is_empty(Some(
            &json!({"loadBalancer": {"ingress": [{"ip": "172.18.0.7"}]}})
        )));
        assert!(!status_is_empty(Some(&json!({"ready": false}))));
        assert_eq!(status_hash(Some(&json!({}))), None);
        let empty = object(Some("ns"), &[], None);
        assert!(!worth_capturing(None, &empty));
    }

    #[test]
    fn only_a_changed_status_or_a_new_object_is_worth_a_record() {
        let h1 = status_hash(Some(&json!({"url": "a"})));
        let h2 = status_hash(Some(&json!({"url": "b"})));
        assert_ne!(h1, h2);
        let before = object(Some("ns"), &[], h1);
        assert!(worth_capturing(None, &before));
        assert!(!worth_capturing(Some(&before), &before.clone()), "resend");
        let changed = object(Some("ns"), &[], h2);
        assert!(worth_capturing(Some(&before), &changed));
        let mut recreated = before.clone();
        recreated.uid = "u2".into();
        assert!(worth_capturing(Some(&before), &recreated));
    }

    #[test]
    fn covers_by_kind_namespace_and_labels() {
        let p = policy(json!({
            "resources": [{"group": "infra.example.com", "kind": "KubernetesCluster"}],
            "namespaces": ["team-a"],
            "namespaceSelector": {"matchLabels": {"tier": "prod"}},
            "selector": {"matchExpressions": [{"key": "backup", "operator": "NotIn", "values": ["no"]}]},
        }));
        let labels = |ns: &str| {
            (ns == "team-b").then(|| BTreeMap::from([("tier".to_owned(), "prod".to_owned())]))
        };
        assert!(covers(
            &p,
            &clusters(),
            &object(Some("team-a"), &[], None),
            &labels
        ));
        assert!(covers(
            &p,
            &clusters(),
            &object(Some("team-b"), &[], None),
            &labels
        ));
        assert!(!covers(
            &p,
            &clusters(),
            &object(Some("team-c"), &[], None),
            &labels
        ));
        assert!(
            !covers(
                &p,
                &clusters(),
                &object(Some("team-a"), &[("backup", "no")], None),
                &labels
            ),
            "label selector"
        );
        assert!(
            covers(&p, &clusters(), &object(None, &[], None), &labels),
            "cluster-scoped"
        );
        let services = ResourceKind {
            group: String::new(),
            kind: "Service".into(),
        };
        assert!(!covers(
            &p,
            &services,
            &object(Some("team-a"), &[], None),
            &labels
        ));
    }

    #[test]
    fn no_namespaces_means_every_namespace_and_a_bad_selector_covers_nothing() {
        let all = policy(json!({"resources": [{"kind": "Service"}]}));
        let svc = ResourceKind {
            group: String::new(),
            kind: "Service".into(),
        };
        assert!(covers(
            &all,
            &svc,
            &object(Some("x"), &[], None),
            &no_labels
        ));
        let bad = policy(json!({"resources": [{"kind": "Service"}],
            "selector": {"matchExpressions": [{"key": "a", "operator": "In"}]}}));
        assert!(!covers(
            &bad,
            &svc,
            &object(Some("x"), &[], None),
            &no_labels
        ));
        assert!(selector_error(&bad).is_some());
        assert!(selector_error(&all).is_none());
    }

    #[test]
    fn backends_default_to_the_operators_and_share_the_largest_retention() {
        let settings = Settings {
            default_location: "/var/lib/vigil/status-vault".into(),
            default_key_file: None,
        };
        let a = policy(json!({"resources": [{"kind": "Service"}], "retention": 5}));
        let b = policy(json!({"resources": [{"kind": "Service"}], "retention": 50}));
        let c = policy(
            json!({"resources": [{"kind": "Service"}], "backend": {"location": "s3://b/p"}}),
        );
        let default = backend_of(&a, &settings);
        assert_eq!(default.location, "/var/lib/vigil/status-vault");
        assert_eq!(retention_of(&default, [&a, &b, &c], &settings), 50);
        let s3 = backend_of(&c, &settings);
        assert_eq!(s3.location, "s3://b/p");
        assert_eq!(
            retention_of(&s3, [&a, &b, &c], &settings),
            DEFAULT_RETENTION
        );
    }

    #[test]
    fn manual_mode_never_restores_by_itself() {
        let manual = policy(
            json!({"resources": [{"group": "infra.example.com", "kind": "KubernetesCluster"}], "restoreMode": "Manual"}),
        );
        let on_create = policy(
            json!({"resources": [{"group": "infra.example.com", "kind": "KubernetesCluster"}]}),
        );
        let obj = object(Some("ns"), &[], None);
        assert!(!restores_on_create(
            [&manual],
            &clusters(),
            &obj,
            &no_labels
        ));
        assert!(restores_on_create(
            [&manual, &on_create],
            &clusters(),
            &obj,
            &no_labels
        ));
    }

    #[test]
    fn restore_picks_the_newest_status_of_another_uid_tombstones_included() {
        let history: Vec<Result<Record, String>> = vec![
            Ok(record("old", json!({"url": "v1"}), false)),
            Ok(record("old", json!({"url": "v2"}), false)),
            Ok(record("old", json!({"url": "v2"}), true)),
        ];
        match pick_restore(&history, "new") {
            Pick::Restore(r) => assert_eq!(r.status, json!({"url": "v2"})),
            other => panic!("{other:?}"),
        }
        assert_eq!(pick_restore::<String>(&[], "new"), Pick::Nothing);
    }

    #[test]
    fn restore_leaves_an_object_with_its_own_records_alone() {
        let history: Vec<Result<Record, String>> = vec![
            Ok(record("old", json!({"url": "v1"}), true)),
            Ok(record("new", json!({"url": "mine"}), false)),
        ];
        assert_eq!(pick_restore(&history, "new"), Pick::Nothing);
    }

    #[test]
    fn a_corrupt_newest_record_is_never_applied_nor_an_older_one() {
        let history: Vec<Result<Record, String>> = vec![
            Ok(record("old", json!({"url": "v1"}), false)),
            Err("version 2: authentication failed".into()),
        ];
        assert!(
            matches!(pick_restore(&history, "new"), Pick::Corrupt(m) if m.contains("version 2"))
        );
        let skipped_empty: Vec<Result<Record, String>> = vec![
            Ok(record("old", json!({"url": "v1"}), false)),
            Ok(record("old", json!({}), true)),
        ];
        assert!(
            matches!(pick_restore(&skipped_empty, "new"), Pick::Restore(r) if r.status == json!({"url": "v1"}))
        );
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_000).expect("time"))
    }

    #[test]
    fn policy_status_reports_a_missing_kind_once_and_recovers() {
        let p = policy(
            json!({"resources": [{"group": "infra.example.com", "kind": "KubernetesCluster"}, {"kind": "Service"}]}),
        );
        let backend = BackendRef {
            location: "/v".into(),
            key_file: None,
        };
        let health = BackendHealth::default();
        let mut resolutions = BTreeMap::from([(
            clusters(),
            Resolution::NotFound("no kind KubernetesCluster in group infra.example.com".into()),
        )]);
        resolutions.insert(
            ResourceKind {
                group: String::new(),
                kind: "Service".into(),
            },
            Resolution::Watching {
                resource: "services".into(),
                api_version: "v1".into(),
                namespaced: true,
            },
        );
        let t = now();
        let first = policy_status(&PolicyInputs {
            policy: &p,
            previous: None,
            resolutions: &resolutions,
            covered: 2,
            backend: &backend,
            health: &health,
            now: &t,
        });
        let ready = conditions::find(&first.status.conditions, READY).expect("ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "KindNotFound")
        );
        assert_eq!(ready.observed_generation, Some(3));
        assert!(conditions::is_true(&first.status.conditions, DEGRADED));
        assert_eq!(first.warnings.len(), 1);
        assert_eq!(first.status.objects_covered, 2);
        let again = policy_status(&PolicyInputs {
            previous: Some(&first.status),
            ..PolicyInputs {
                policy: &p,
                previous: None,
                resolutions: &resolutions,
                covered: 2,
                backend: &backend,
                health: &health,
                now: &t,
            }
        });
        assert_eq!(again.status, first.status, "steady state: same status");
        assert!(again.warnings.is_empty(), "reported once");

        resolutions.insert(
            clusters(),
            Resolution::Watching {
                resource: "kubernetesclusters".into(),
                api_version: "infra.example.com/v1".into(),
                namespaced: true,
            },
        );
        let fixed = policy_status(&PolicyInputs {
            policy: &p,
            previous: Some(&first.status),
            resolutions: &resolutions,
            covered: 2,
            backend: &backend,
            health: &health,
            now: &t,
        });
        assert!(conditions::is_true(&fixed.status.conditions, READY));
        assert!(!conditions::is_true(&fixed.status.conditions, DEGRADED));
    }

    #[test]
    fn backend_outage_degrades_the_policy() {
        let p = policy(json!({"resources": [{"kind": "Service"}]}));
        let backend = BackendRef {
            location: "s3://b".into(),
            key_file: None,
        };
        let health = BackendHealth {
            error: Some("connection refused".into()),
            last_capture: Some("2026-01-01T00:00:00Z".into()),
            pending: 4,
        };
        let resolutions = BTreeMap::from([(
            ResourceKind {
                group: String::new(),
                kind: "Service".into(),
            },
            Resolution::NoStatusSubresource {
                resource: "services".into(),
            },
        )]);
        let t = now();
        let mut inputs = PolicyInputs {
            policy: &p,
            previous: None,
            resolutions: &resolutions,
            covered: 0,
            backend: &backend,
            health: &health,
            now: &t,
        };
        let plan = policy_status(&inputs);
        let degraded = conditions::find(&plan.status.conditions, DEGRADED).expect("degraded");
        assert_eq!(degraded.reason, "NoStatusSubresource", "kinds first");
        let ok = BTreeMap::from([(
            ResourceKind {
                group: String::new(),
                kind: "Service".into(),
            },
            Resolution::Watching {
                resource: "services".into(),
                api_version: "v1".into(),
                namespaced: true,
            },
        )]);
        inputs.resolutions = &ok;
        let plan = policy_status(&inputs);
        let degraded = conditions::find(&plan.status.conditions, DEGRADED).expect("degraded");
        assert_eq!(degraded.reason, REASON_BACKEND_UNAVAILABLE);
        assert!(degraded.message.contains("4 capture(s) pending"));
        assert_eq!(plan.status.pending_captures, 4);
        assert_eq!(
            plan.status.backend.as_ref().map(|b| b.state.as_str()),
            Some("Unavailable")
        );
        assert!(plan.status.last_capture.is_some());
    }

    fn backend(location: &str) -> BackendRef {
        BackendRef {
            location: location.into(),
            key_file: None,
        }
    }

    #[test]
    fn an_observation_is_captured_when_its_status_changed_and_restored_when_empty() {
        let seen = object(Some("ns"), &[], Some(1));
        let to = vec![backend("dir:/a")];
        let same = on_observed(Some(&seen), &seen, to.clone(), false, false);
        assert_eq!(same.capture_to, Vec::<BackendRef>::new(), "a resend");
        assert_eq!(same.restore, RestoreStep::None);

        let changed = object(Some("ns"), &[], Some(2));
        let plan = on_observed(Some(&seen), &changed, to.clone(), true, false);
        assert_eq!(plan.capture_to, to);
        assert_eq!(plan.restore, RestoreStep::None);
        let plan = on_observed(Some(&seen), &changed, to.clone(), true, true);
        assert_eq!(
            plan.restore,
            RestoreStep::MarkDone,
            "the convention's annotation"
        );

        let empty = object(Some("ns"), &[], None);
        let plan = on_observed(None, &empty, to.clone(), true, true);
        assert!(
            plan.capture_to.is_empty(),
            "an empty status is never recorded"
        );
        assert_eq!(plan.restore, RestoreStep::Restore);
        assert_eq!(
            on_observed(None, &empty, to, false, true).restore,
            RestoreStep::None,
            "no OnCreate policy"
        );
    }

    #[test]
    fn a_restore_reads_the_vault_only_for_an_empty_covered_object_once_captures_are_in() {
        let to = vec![backend("dir:/a")];
        let kept = object(Some("ns"), &[], Some(1));
        assert_eq!(
            restore_start(&kept, true, true, to.clone(), false),
            RestoreStart::Nothing { mark_done: true }
        );
        let empty = object(Some("ns"), &[], None);
        assert!(matches!(
            restore_start(&empty, false, false, to.clone(), false),
            RestoreStart::Pending(Wait::PoliciesNotLoaded)
        ));
        assert_eq!(
            restore_start(&empty, true, true, Vec::new(), false),
            RestoreStart::Nothing { mark_done: false }
        );
        assert!(matches!(
            restore_start(&empty, false, true, to.clone(), true),
            RestoreStart::Pending(Wait::CapturesOnTheirWay)
        ));
        assert_eq!(
            restore_start(&empty, false, true, to.clone(), false),
            RestoreStart::Search(to)
        );
    }

    #[test]
    fn watches_restart_when_their_policies_change_and_stop_when_unwanted() {
        let p = policy(
            json!({"resources": [{"group": "infra.example.com", "kind": "KubernetesCluster"}]}),
        );
        let policies = vec![p.clone()];
        let kind = clusters();
        let current = fingerprint(&policies, &kind);
        assert_eq!(current, vec![("p".to_owned(), Some(3))]);
        let wanted = wanted_kinds(&policies);
        let running = BTreeMap::from([(kind.clone(), current.clone())]);
        assert!(stale_watches(&running, &wanted, &policies).is_empty());

        let edited = vec![PolicyView {
            generation: Some(4),
            ..p
        }];
        assert_eq!(
            stale_watches(&running, &wanted, &edited),
            vec![kind.clone()]
        );
        assert_eq!(
            stale_watches(&running, &BTreeSet::new(), &policies),
            vec![kind]
        );
    }
}
