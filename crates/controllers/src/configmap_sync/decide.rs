//! The pure decision for one ConfigMapSync: which namespaces are destinations, what each one's
//! copy needs (nothing, a create, an update, a delete-and-create), which copies go, and the status
//! and events that say so.
//!
//! No clock, no randomness, no I/O: the same [`Inputs`] always give the same [`Plan`], and a world
//! that has not changed gives a plan with no writes and the previous status.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, Time};
use k8s_openapi::jiff::Timestamp;
use kube::core::{Selector, SelectorExt as _};
use vigil_apis::configmap_sync::{
    ConfigMapSyncSpec, ConfigMapSyncStatus, DestinationState, DestinationStatus,
    SourceDeletedPolicy, SyncedKind,
};
use vigil_runtime::conditions::{self, NewCondition, Status};

use super::consent;
use super::model::{
    ConfigMapView, CopyRef, CopyWrite, EventNote, Inputs, MAX_SOURCE_BYTES, NamespaceView, Plan,
    WriteKind,
};

/// Condition types this controller writes.
pub use vigil_runtime::conditions::{DEGRADED, READY};
/// Condition reasons.
pub const REASON_ALL_SYNCED: &str = "AllSynced";
pub const REASON_AS_EXPECTED: &str = "AsExpected";
pub const REASON_SOURCE_NOT_FOUND: &str = "SourceNotFound";
pub const REASON_CONSENT_MISSING: &str = "ConsentMissing";
pub const REASON_SOURCE_TOO_LARGE: &str = "SourceTooLarge";
pub const REASON_CONFLICT: &str = "Conflict";
pub const REASON_NAMESPACE_NOT_FOUND: &str = "NamespaceNotFound";
pub const REASON_INVALID_DESTINATION: &str = "InvalidDestination";
pub const REASON_INVALID_SELECTOR: &str = "InvalidSelector";
pub const REASON_SYNC_FAILED: &str = "SyncFailed";
pub const REASON_SECRETS_NOT_ENABLED: &str = "SecretsNotEnabled";
/// Event reasons.
pub const REASON_COPIES_WRITTEN: &str = "CopiesWritten";
pub const REASON_COPIES_DELETED: &str = "CopiesDeleted";

/// How many namespaces a message lists before summarising the rest.
const MESSAGE_LIST_LIMIT: usize = 10;

/// The namespace selector as a matcher; `Err` says why it is unusable.
pub fn selector(spec: &ConfigMapSyncSpec) -> Option<Result<Selector, String>> {
    spec.namespace_selector
        .clone()
        .map(|s: LabelSelector| Selector::try_from(s).map_err(|e| e.to_string()))
}

/// Every destination namespace: the tutorial's one, the listed ones, and the existing
/// namespaces (not being deleted) that the selector matches.
pub fn destinations(
    spec: &ConfigMapSyncSpec,
    namespaces: &BTreeMap<String, NamespaceView>,
) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = std::iter::once(spec.destination_namespace.clone())
        .chain(spec.destination_namespaces.iter().cloned())
        .collect();
    if let Some(Ok(selector)) = selector(spec) {
        out.extend(
            namespaces
                .values()
                .filter(|ns| !ns.terminating && selector.matches(&ns.labels))
                .map(|ns| ns.name.clone()),
        );
    }
    out
}

/// What can be done with the source.
enum Source<'a> {
    Usable(&'a ConfigMapView),
    NotFound,
    /// Foreign and not consenting (or not there: the two read alike).
    NotPermitted,
    TooLarge(usize),
    /// A Secret, and the operator does not copy Secrets.
    Disabled,
}

/// A list of names, cut after [`MESSAGE_LIST_LIMIT`].
fn list(names: &[&str]) -> String {
    if names.len() <= MESSAGE_LIST_LIMIT {
        names.join(", ")
    } else {
        format!(
            "{} and {} more",
            names[..MESSAGE_LIST_LIMIT].join(", "),
            names.len() - MESSAGE_LIST_LIMIT
        )
    }
}

/// The decision for one ConfigMapSync (not being deleted): each destination's state and write,
/// the copies no longer wanted, then the status and Events that say so.
pub fn decide(inputs: &Inputs<'_>) -> Plan {
    let sync = inputs.sync;
    let spec = &sync.spec;
    let previous = sync.status.clone().unwrap_or_default();
    let now = Time(inputs.now);
    let source = source_state(inputs);
    let wanted = destinations(spec, inputs.namespaces);
    let at = copies_by_namespace(inputs);

    let mut found = Findings::default();
    let mut entries = Vec::with_capacity(wanted.len());
    let mut writes = Vec::new();
    let mut deletes = Vec::new();
    for ns in &wanted {
        let before = previous.destinations.iter().find(|d| d.namespace == *ns);
        let outcome = destination(inputs, &source, ns, at.get(ns.as_str()).copied());
        let mut entry = DestinationStatus {
            namespace: ns.clone(),
            state: outcome.state,
            content_hash: before.and_then(|b| b.content_hash.clone()),
            last_sync_time: before.and_then(|b| b.last_sync_time.clone()),
            error: outcome.error,
        };
        match outcome.hash {
            HashUpdate::Keep => {}
            HashUpdate::Set(hash) => entry.content_hash = Some(hash),
            HashUpdate::Clear => entry.content_hash = None,
        }
        if outcome.write.is_some() && entry.state == DestinationState::Synced {
            entry.last_sync_time = Some(now.clone());
        }
        found.note(ns, outcome.problem);
        writes.extend(outcome.write);
        deletes.extend(outcome.delete);
        entries.push(entry);
    }
    deletes.extend(unwanted_copies(inputs, &wanted));

    let problems = problems(inputs, &source, &found);
    let status = status(
        inputs, &previous, &source, entries, &writes, &problems, &now,
    );
    let events = events(inputs, &previous, &problems, &writes, &deletes);
    Plan {
        status,
        writes,
        deletes,
        events,
    }
}

/// What the source allows.
fn source_state<'a>(inputs: &Inputs<'a>) -> Source<'a> {
    let sync = inputs.sync;
    let spec = &sync.spec;
    let settings = inputs.settings;
    match inputs.source {
        _ if spec.kind() == SyncedKind::Secret && !settings.secrets => Source::Disabled,
        Some(s) if !consent::source_consents(s, &sync.namespace, settings) => Source::NotPermitted,
        None if spec.source_namespace != sync.namespace && !settings.trust_all => {
            Source::NotPermitted
        }
        None => Source::NotFound,
        Some(s) if s.size > MAX_SOURCE_BYTES => Source::TooLarge(s.size),
        Some(s) => Source::Usable(s),
    }
}

/// The ConfigMaps named like the source, by namespace (the source's own excluded).
fn copies_by_namespace<'a>(inputs: &Inputs<'a>) -> BTreeMap<&'a str, &'a ConfigMapView> {
    let spec = &inputs.sync.spec;
    inputs
        .config_maps
        .iter()
        .filter(|c| c.name == spec.config_map_name && c.namespace != spec.source_namespace)
        .map(|c| (c.namespace.as_str(), c))
        .collect()
}

/// Why a destination is not synced, for the conditions (one kind per problem list).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Problem {
    None,
    Invalid,
    NamespaceMissing,
    NotPermitted,
    Conflict(String),
}

/// The destinations with each problem, in destination order.
#[derive(Default)]
struct Findings<'a> {
    invalid: Vec<&'a str>,
    missing_namespaces: Vec<&'a str>,
    not_permitted: Vec<&'a str>,
    conflicts: Vec<String>,
}

impl<'a> Findings<'a> {
    fn note(&mut self, ns: &'a str, problem: Problem) {
        match problem {
            Problem::None => {}
            Problem::Invalid => self.invalid.push(ns),
            Problem::NamespaceMissing => self.missing_namespaces.push(ns),
            Problem::NotPermitted => self.not_permitted.push(ns),
            Problem::Conflict(what) => self.conflicts.push(what),
        }
    }
}

/// What becomes of a destination's recorded content hash.
enum HashUpdate {
    Keep,
    Set(String),
    Clear,
}

/// One destination's decision.
struct DestinationOutcome {
    state: DestinationState,
    error: Option<String>,
    hash: HashUpdate,
    write: Option<CopyWrite>,
    delete: Option<CopyRef>,
    problem: Problem,
}

impl DestinationOutcome {
    fn synced() -> Self {
        Self {
            state: DestinationState::Synced,
            error: None,
            hash: HashUpdate::Keep,
            write: None,
            delete: None,
            problem: Problem::None,
        }
    }

    fn failing(state: DestinationState, error: impl Into<String>) -> Self {
        Self {
            state,
            error: Some(error.into()),
            ..Self::synced()
        }
    }
}

/// The decision for destination `ns`, where `existing` is the ConfigMap named like the source.
fn destination(
    inputs: &Inputs<'_>,
    source: &Source<'_>,
    ns: &str,
    existing: Option<&ConfigMapView>,
) -> DestinationOutcome {
    let sync = inputs.sync;
    let namespace = inputs.namespaces.get(ns);
    if ns == sync.spec.source_namespace {
        return DestinationOutcome {
            problem: Problem::Invalid,
            ..DestinationOutcome::failing(
                DestinationState::Invalid,
                "the destination is the source's own namespace",
            )
        };
    }
    let Some(namespace) = namespace.filter(|n| !n.terminating) else {
        // A namespace being deleted refuses new objects: no write, and no retry loop.
        return DestinationOutcome {
            problem: Problem::NamespaceMissing,
            ..DestinationOutcome::failing(
                DestinationState::NamespaceNotFound,
                format!("namespace {ns} does not exist or is being deleted"),
            )
        };
    };
    if !consent::namespace_accepts(namespace, &sync.namespace, inputs.settings) {
        return DestinationOutcome {
            problem: Problem::NotPermitted,
            ..DestinationOutcome::failing(
                DestinationState::NotPermitted,
                consent::missing_destination_consent(&[&namespace.name], &sync.namespace),
            )
        };
    }
    match source {
        Source::Usable(src) => copy_decision(inputs, src, ns, existing),
        Source::NotFound => source_gone(inputs, ns, existing),
        Source::NotPermitted => {
            DestinationOutcome::failing(DestinationState::Stale, "the source may not be read")
        }
        Source::TooLarge(_) => {
            DestinationOutcome::failing(DestinationState::Stale, "the source is over 1 MiB")
        }
        Source::Disabled => DestinationOutcome::failing(
            DestinationState::Stale,
            "this operator does not copy Secrets",
        ),
    }
}

/// Whether `cm` is this ConfigMapSync's copy.
fn owned_by_me(inputs: &Inputs<'_>, cm: &ConfigMapView) -> bool {
    cm.owner.as_deref() == Some(inputs.sync.key().as_str())
}

/// A usable source and a consenting destination: create, update, re-create, or leave the copy.
fn copy_decision(
    inputs: &Inputs<'_>,
    src: &ConfigMapView,
    ns: &str,
    existing: Option<&ConfigMapView>,
) -> DestinationOutcome {
    let write = |kind| CopyWrite {
        namespace: ns.to_owned(),
        kind,
    };
    let mut outcome = match existing {
        None => DestinationOutcome {
            write: Some(write(WriteKind::Create)),
            ..DestinationOutcome::synced()
        },
        Some(cm) if !owned_by_me(inputs, cm) => {
            if let Some(conflict) = foreign_copy(inputs, ns, cm) {
                return conflict;
            }
            replace_copy(cm, write)
        }
        Some(cm) if cm.content_hash == src.content_hash => DestinationOutcome::synced(),
        Some(cm) => replace_copy(cm, write),
    };
    if outcome.state == DestinationState::Synced {
        outcome.hash = HashUpdate::Set(src.content_hash.clone());
    }
    outcome
}

/// A ConfigMap at the destination that is not this ConfigMapSync's: a conflict, unless it may
/// be adopted (`None`).
fn foreign_copy(inputs: &Inputs<'_>, ns: &str, cm: &ConfigMapView) -> Option<DestinationOutcome> {
    let owner_alive = cm
        .owner
        .as_ref()
        .is_some_and(|o| inputs.live_syncs.contains(o));
    if owner_alive {
        let owner = cm.owner.as_deref().unwrap_or_default();
        return Some(DestinationOutcome {
            problem: Problem::Conflict(format!("{ns} (ConfigMapSync {owner})")),
            ..DestinationOutcome::failing(
                DestinationState::Conflict,
                format!(
                    "ConfigMap {ns}/{} is the copy of ConfigMapSync {owner}",
                    cm.name
                ),
            )
        });
    }
    if inputs.sync.spec.adopt_existing() {
        return None;
    }
    let whose = match &cm.owner {
        Some(o) => format!("is an orphaned copy of ConfigMapSync {o}, which no longer exists"),
        None => "exists and Vigil does not manage it".to_owned(),
    };
    Some(DestinationOutcome {
        problem: Problem::Conflict(format!("{ns} (not managed by Vigil)")),
        ..DestinationOutcome::failing(
            DestinationState::Conflict,
            format!(
                "ConfigMap {ns}/{} {whose} (set spec.adoptExisting: true to take it over)",
                cm.name
            ),
        )
    })
}

/// Overwrites an existing ConfigMap with the source's content: an update, or (immutable) a
/// delete and create; not while it is being deleted.
fn replace_copy(cm: &ConfigMapView, write: impl Fn(WriteKind) -> CopyWrite) -> DestinationOutcome {
    if cm.terminating {
        return DestinationOutcome::failing(
            DestinationState::Failed,
            "the existing ConfigMap is being deleted",
        );
    }
    let kind = if cm.immutable {
        WriteKind::Recreate {
            uid: cm.uid.clone(),
        }
    } else {
        WriteKind::Update {
            resource_version: cm.resource_version.clone(),
            labels: cm.labels.clone(),
        }
    };
    DestinationOutcome {
        write: Some(write(kind)),
        ..DestinationOutcome::synced()
    }
}

/// The source is gone: the copy goes too under `sourceDeletedPolicy: Delete`, else it stays.
fn source_gone(
    inputs: &Inputs<'_>,
    ns: &str,
    existing: Option<&ConfigMapView>,
) -> DestinationOutcome {
    let owned = existing.is_some_and(|c| owned_by_me(inputs, c));
    if owned && inputs.sync.spec.source_deleted_policy() == SourceDeletedPolicy::Delete {
        return DestinationOutcome {
            hash: HashUpdate::Clear,
            delete: existing.map(|cm| CopyRef {
                namespace: ns.to_owned(),
                name: cm.name.clone(),
                uid: cm.uid.clone(),
            }),
            ..DestinationOutcome::failing(
                DestinationState::Stale,
                "the source does not exist; its copy was deleted",
            )
        };
    }
    DestinationOutcome::failing(
        DestinationState::Stale,
        "the source does not exist; an existing copy is kept",
    )
}

/// Copies this ConfigMapSync owns that are no longer wanted: another name (the spec was
/// edited), or a namespace no longer listed or matched. Never the source itself.
fn unwanted_copies(inputs: &Inputs<'_>, wanted: &BTreeSet<String>) -> Vec<CopyRef> {
    let spec = &inputs.sync.spec;
    inputs
        .config_maps
        .iter()
        .filter(|cm| {
            let is_source =
                cm.namespace == spec.source_namespace && cm.name == spec.config_map_name;
            owned_by_me(inputs, cm)
                && !is_source
                && !cm.terminating
                && (cm.name != spec.config_map_name || !wanted.contains(&cm.namespace))
        })
        .map(|cm| CopyRef {
            namespace: cm.namespace.clone(),
            name: cm.name.clone(),
            uid: cm.uid.clone(),
        })
        .collect()
}

/// What is wrong with the source, if anything (the most fundamental problem).
fn source_problem(inputs: &Inputs<'_>, source: &Source<'_>) -> Option<(&'static str, String)> {
    let sync = inputs.sync;
    let spec = &sync.spec;
    let source_key = format!("{}/{}", spec.source_namespace, spec.config_map_name);
    match source {
        Source::Usable(_) => None,
        Source::NotPermitted => Some((
            REASON_CONSENT_MISSING,
            consent::missing_source_consent(
                &spec.source_namespace,
                &spec.config_map_name,
                &sync.namespace,
            ),
        )),
        Source::NotFound => Some((
            REASON_SOURCE_NOT_FOUND,
            format!(
                "source ConfigMap {source_key} not found; copies are {} (sourceDeletedPolicy: {:?})",
                match spec.source_deleted_policy() {
                    SourceDeletedPolicy::Keep => "kept",
                    SourceDeletedPolicy::Delete => "deleted",
                },
                spec.source_deleted_policy()
            ),
        )),
        Source::Disabled => Some((
            REASON_SECRETS_NOT_ENABLED,
            "copying Secrets is not enabled in this operator (vigil run --configmapsync-secrets)"
                .to_owned(),
        )),
        Source::TooLarge(size) => Some((
            REASON_SOURCE_TOO_LARGE,
            format!(
                "source ConfigMap {source_key} holds {size} bytes, over the {MAX_SOURCE_BYTES}-byte limit of a ConfigMap; not copied"
            ),
        )),
    }
}

/// Every problem, most fundamental first, as (reason, message).
fn problems(
    inputs: &Inputs<'_>,
    source: &Source<'_>,
    found: &Findings<'_>,
) -> Vec<(&'static str, String)> {
    let sync = inputs.sync;
    let spec = &sync.spec;
    let mut problems: Vec<(&'static str, String)> =
        source_problem(inputs, source).into_iter().collect();
    if !found.not_permitted.is_empty() {
        problems.push((
            REASON_CONSENT_MISSING,
            consent::missing_destination_consent(&found.not_permitted, &sync.namespace),
        ));
    }
    if !found.conflicts.is_empty() {
        let refs: Vec<&str> = found.conflicts.iter().map(String::as_str).collect();
        problems.push((
            REASON_CONFLICT,
            format!(
                "ConfigMap {} already exists in {}",
                spec.config_map_name,
                list(&refs)
            ),
        ));
    }
    if !found.missing_namespaces.is_empty() {
        problems.push((
            REASON_NAMESPACE_NOT_FOUND,
            format!(
                "destination namespaces not found: {}",
                list(&found.missing_namespaces)
            ),
        ));
    }
    if !found.invalid.is_empty() {
        problems.push((
            REASON_INVALID_DESTINATION,
            format!(
                "the source's own namespace {} cannot be a destination",
                list(&found.invalid)
            ),
        ));
    }
    if let Some(Err(e)) = selector(spec) {
        problems.push((
            REASON_INVALID_SELECTOR,
            format!("namespaceSelector is invalid and matches nothing: {e}"),
        ));
    }
    problems
}

/// The problems' messages, joined: the `Degraded` condition's message and the Warning's note.
fn degraded_message(problems: &[(&str, String)]) -> String {
    problems
        .iter()
        .map(|(_, m)| m.as_str())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The full status: counts, hashes, times, and the `Ready` and `Degraded` conditions.
fn status(
    inputs: &Inputs<'_>,
    previous: &ConfigMapSyncStatus,
    source: &Source<'_>,
    entries: Vec<DestinationStatus>,
    writes: &[CopyWrite],
    problems: &[(&str, String)],
    now: &Time,
) -> ConfigMapSyncStatus {
    let synced = entries
        .iter()
        .filter(|e| e.state == DestinationState::Synced)
        .count();
    let mut status = ConfigMapSyncStatus {
        last_sync_time: if writes.is_empty() {
            previous.last_sync_time.clone()
        } else {
            Some(now.clone())
        },
        observed_generation: inputs.sync.generation,
        conditions: previous.conditions.clone(),
        source_hash: match source {
            Source::Usable(s) => Some(s.content_hash.clone()),
            _ => previous.source_hash.clone(),
        },
        destination_count: u32::try_from(entries.len()).unwrap_or(u32::MAX),
        synced: u32::try_from(synced).unwrap_or(u32::MAX),
        destinations: entries,
    };
    set_conditions(&mut status, inputs.sync.generation, synced, problems, now);
    status
}

/// Sets `Ready` and `Degraded`: degraded by the first problem, ready when every destination is
/// synced.
fn set_conditions(
    status: &mut ConfigMapSyncStatus,
    generation: Option<i64>,
    synced: usize,
    problems: &[(&str, String)],
    now: &Time,
) {
    let message = degraded_message(problems);
    let sync_failed = format!(
        "{synced} of {} destinations synced",
        status.destinations.len()
    );
    let (degraded, ready) = match problems.first() {
        None => {
            let all = synced == status.destinations.len();
            (
                NewCondition {
                    type_: DEGRADED,
                    status: Status::False,
                    reason: REASON_AS_EXPECTED,
                    message: "every destination can be synced",
                    observed_generation: generation,
                },
                NewCondition {
                    type_: READY,
                    status: if all { Status::True } else { Status::False },
                    reason: if all {
                        REASON_ALL_SYNCED
                    } else {
                        REASON_SYNC_FAILED
                    },
                    message: if all {
                        "every destination holds an up-to-date copy"
                    } else {
                        &sync_failed
                    },
                    observed_generation: generation,
                },
            )
        }
        Some((reason, _)) => {
            let failing = |type_| NewCondition {
                type_,
                status: if type_ == DEGRADED {
                    Status::True
                } else {
                    Status::False
                },
                reason,
                message: &message,
                observed_generation: generation,
            };
            (failing(DEGRADED), failing(READY))
        }
    };
    conditions::set(&mut status.conditions, &ready, now);
    conditions::set(&mut status.conditions, &degraded, now);
}

/// A Warning when the problems changed, and a note of the copies written and deleted.
fn events(
    inputs: &Inputs<'_>,
    previous: &ConfigMapSyncStatus,
    problems: &[(&str, String)],
    writes: &[CopyWrite],
    deletes: &[CopyRef],
) -> Vec<EventNote> {
    let spec = &inputs.sync.spec;
    let source_key = format!("{}/{}", spec.source_namespace, spec.config_map_name);
    let message = degraded_message(problems);
    let mut events = Vec::new();
    let was_degraded = conditions::find(&previous.conditions, DEGRADED)
        .map(|c| (c.status.as_str(), c.reason.as_str(), c.message.as_str()));
    if let Some((reason, _)) = problems.first()
        && was_degraded != Some(("True", reason, message.as_str()))
    {
        events.push(EventNote::warning(reason, message.clone()));
    }
    if !writes.is_empty() {
        let names: Vec<&str> = writes.iter().map(|w| w.namespace.as_str()).collect();
        events.push(EventNote::normal(
            REASON_COPIES_WRITTEN,
            format!(
                "copied {source_key} to {} namespace(s): {}",
                names.len(),
                list(&names)
            ),
        ));
    }
    if !deletes.is_empty() {
        let names: Vec<String> = deletes
            .iter()
            .map(|d| format!("{}/{}", d.namespace, d.name))
            .collect();
        let refs: Vec<&str> = names.iter().map(String::as_str).collect();
        events.push(EventNote::normal(
            REASON_COPIES_DELETED,
            format!("deleted copies no longer wanted: {}", list(&refs)),
        ));
    }
    events
}

/// How the copy writes of a plan ended, by destination namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteOutcome {
    Done,
    /// Lost a race (409: the object changed, appeared, or is still being deleted). Not a
    /// failure and not retried at once: that change reaches the cache as a watch event, which
    /// triggers the next pass — retrying before it arrives would only repeat the 409.
    Raced,
    Failed(String),
}

/// What the plan's status and Events become once its writes are done.
#[derive(Debug, Clone, PartialEq)]
pub enum AfterWrites {
    /// Every write raced: the cache is behind. Writing the status now (a new lastSyncTime)
    /// would trigger another pass on the same stale cache; the watch events will come.
    Wait,
    /// Write this status and record these Events; then fail with `error` if some write failed.
    Report {
        status: ConfigMapSyncStatus,
        events: Vec<EventNote>,
        error: Option<String>,
    },
}

/// Settles `plan` with the outcomes of its writes: destinations whose write failed become
/// `Failed` with the error, `Ready` turns false, and no `CopiesWritten` is recorded.
pub fn after_writes(
    plan: &Plan,
    outcomes: &BTreeMap<String, WriteOutcome>,
    generation: Option<i64>,
    now: Timestamp,
) -> AfterWrites {
    let done = outcomes.values().any(|o| *o == WriteOutcome::Done);
    let failed: BTreeMap<&str, &str> = outcomes
        .iter()
        .filter_map(|(ns, o)| match o {
            WriteOutcome::Failed(e) => Some((ns.as_str(), e.as_str())),
            _ => None,
        })
        .collect();
    if !plan.writes.is_empty() && !done && failed.is_empty() && plan.deletes.is_empty() {
        return AfterWrites::Wait;
    }
    let mut status = plan.status.clone();
    let mut events = plan.events.clone();
    if failed.is_empty() {
        return AfterWrites::Report {
            status,
            events,
            error: None,
        };
    }
    for entry in &mut status.destinations {
        if let Some(error) = failed.get(entry.namespace.as_str()) {
            entry.state = DestinationState::Failed;
            entry.error = Some((*error).to_owned());
        }
    }
    status.synced = status
        .destinations
        .iter()
        .filter(|d| d.state == DestinationState::Synced)
        .count()
        .try_into()
        .unwrap_or(u32::MAX);
    let namespaces: Vec<&str> = failed.keys().copied().collect();
    let message = format!(
        "writing the copy failed in {}; retrying",
        namespaces.join(", ")
    );
    conditions::set(
        &mut status.conditions,
        &NewCondition {
            type_: READY,
            status: Status::False,
            reason: REASON_SYNC_FAILED,
            message: &message,
            observed_generation: generation,
        },
        &Time(now),
    );
    events.retain(|e| e.reason != REASON_COPIES_WRITTEN);
    let list: Vec<String> = failed.iter().map(|(ns, e)| format!("{ns}: {e}")).collect();
    AfterWrites::Report {
        status,
        events,
        error: Some(format!("writing copies failed: {}", list.join("; "))),
    }
}

/// The copies to delete when the ConfigMapSync is deleted: every copy it owns (whatever the
/// namespace's consent: they are Vigil's own objects), or none under `deletionPolicy: Orphan`.
pub fn cleanup(inputs: &Inputs<'_>) -> Vec<CopyRef> {
    use vigil_apis::configmap_sync::DeletionPolicy;
    let sync = inputs.sync;
    if sync.spec.deletion_policy() == DeletionPolicy::Orphan {
        return Vec::new();
    }
    let me = sync.key();
    inputs
        .config_maps
        .iter()
        .filter(|cm| {
            cm.owner.as_deref() == Some(me.as_str())
                && !(cm.namespace == sync.spec.source_namespace
                    && cm.name == sync.spec.config_map_name)
        })
        .map(|cm| CopyRef {
            namespace: cm.namespace.clone(),
            name: cm.name.clone(),
            uid: cm.uid.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::configmap_sync::consent::accept_label;
    use crate::configmap_sync::model::{Settings, SyncView};
    use k8s_openapi::jiff::Timestamp;
    use vigil_apis::configmap_sync::DeletionPolicy;

    const HASH: &str = "sha256:aaaa";

    struct World {
        sync: SyncView,
        source: Option<ConfigMapView>,
        namespaces: BTreeMap<String, NamespaceView>,
        config_maps: Vec<ConfigMapView>,
        live: BTreeSet<String>,
        settings: Settings,
    }

    fn spec() -> ConfigMapSyncSpec {
        ConfigMapSyncSpec {
            source_namespace: "src".into(),
            destination_namespace: "dst".into(),
            config_map_name: "app".into(),
            destination_namespaces: vec![],
            namespace_selector: None,
            deletion_policy: None,
            source_deleted_policy: None,
            adopt_existing: None,
            kind: None,
        }
    }

    fn cm(ns: &str, hash: &str, owner: Option<&str>) -> ConfigMapView {
        ConfigMapView {
            namespace: ns.into(),
            name: "app".into(),
            uid: format!("uid-{ns}"),
            resource_version: Some("7".into()),
            labels: BTreeMap::new(),
            owner: owner.map(Into::into),
            content_hash: hash.into(),
            size: 10,
            immutable: false,
            shareable_with: None,
            terminating: false,
        }
    }

    fn ns(name: &str, labels: &[(&str, &str)]) -> (String, NamespaceView) {
        (
            name.to_owned(),
            NamespaceView {
                name: name.into(),
                labels: labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
                terminating: false,
            },
        )
    }

    /// The tutorial's example: a ConfigMapSync in `team` copying src/app to dst, trusted.
    fn world() -> World {
        World {
            sync: SyncView {
                namespace: "team".into(),
                name: "sync".into(),
                generation: Some(1),
                spec: spec(),
                status: None,
            },
            source: Some(cm("src", HASH, None)),
            namespaces: [ns("team", &[]), ns("src", &[]), ns("dst", &[])]
                .into_iter()
                .collect(),
            config_maps: vec![],
            live: BTreeSet::from(["team/sync".to_owned()]),
            settings: Settings {
                trust_all: true,
                secrets: false,
            },
        }
    }

    fn run(w: &World) -> Plan {
        let mut all = w.config_maps.clone();
        all.extend(w.source.clone());
        decide(&Inputs {
            sync: &w.sync,
            source: w.source.as_ref(),
            namespaces: &w.namespaces,
            config_maps: &all,
            live_syncs: &w.live,
            now: Timestamp::from_second(1_000).expect("time"),
            settings: &w.settings,
        })
    }

    /// Applies a plan's status, as the API would after the writes.
    fn settle(w: &mut World, plan: &Plan) {
        w.sync.status = Some(plan.status.clone());
        for write in &plan.writes {
            w.config_maps.retain(|c| c.namespace != write.namespace);
            let mut copy = cm(&write.namespace, HASH, Some("team/sync"));
            copy.content_hash = w
                .source
                .as_ref()
                .map(|s| s.content_hash.clone())
                .unwrap_or_default();
            w.config_maps.push(copy);
        }
        for d in &plan.deletes {
            w.config_maps.retain(|c| c.namespace != d.namespace);
        }
    }

    fn states(plan: &Plan) -> Vec<(String, DestinationState)> {
        plan.status
            .destinations
            .iter()
            .map(|d| (d.namespace.clone(), d.state))
            .collect()
    }

    fn condition(plan: &Plan, type_: &str) -> (String, String, String) {
        let c = conditions::find(&plan.status.conditions, type_).expect("condition");
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    #[test]
    fn a_missing_copy_is_created_then_nothing_is_written() {
        let mut w = world();
        let plan = run(&w);
        assert_eq!(
            plan.writes,
            vec![CopyWrite {
                namespace: "dst".into(),
                kind: WriteKind::Create
            }]
        );
        assert_eq!(
            states(&plan),
            vec![("dst".into(), DestinationState::Synced)]
        );
        assert_eq!(condition(&plan, READY).0, "True");
        assert_eq!(condition(&plan, DEGRADED).0, "False");
        assert!(plan.status.last_sync_time.is_some());
        assert_eq!(plan.events[0].reason, REASON_COPIES_WRITTEN);
        settle(&mut w, &plan);
        let again = run(&w);
        assert!(again.writes.is_empty() && again.deletes.is_empty() && again.events.is_empty());
        assert_eq!(
            Some(&again.status),
            w.sync.status.as_ref(),
            "no status write at rest"
        );
    }

    #[test]
    fn a_changed_source_or_edited_copy_is_updated_and_an_immutable_one_recreated() {
        let mut w = world();
        w.config_maps
            .push(cm("dst", "sha256:old", Some("team/sync")));
        let plan = run(&w);
        assert!(matches!(plan.writes[0].kind, WriteKind::Update { .. }));
        w.config_maps[0].immutable = true;
        let plan = run(&w);
        assert_eq!(
            plan.writes[0].kind,
            WriteKind::Recreate {
                uid: "uid-dst".into()
            }
        );
    }

    #[test]
    fn an_unmanaged_configmap_is_a_conflict_unless_adoption_is_allowed() {
        let mut w = world();
        w.config_maps.push(cm("dst", HASH, None));
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        assert_eq!(
            states(&plan),
            vec![("dst".into(), DestinationState::Conflict)]
        );
        let (status, reason, message) = condition(&plan, DEGRADED);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", REASON_CONFLICT)
        );
        assert!(message.contains("not managed by Vigil"), "{message}");
        assert!(
            plan.events
                .iter()
                .any(|e| e.warning && e.reason == REASON_CONFLICT)
        );
        // The same content still gets adopted (labels and annotations need writing).
        w.sync.spec.adopt_existing = Some(true);
        let plan = run(&w);
        assert!(matches!(plan.writes[0].kind, WriteKind::Update { .. }));
    }

    #[test]
    fn another_live_syncs_copy_is_a_conflict_even_with_adoption_but_an_orphan_is_adoptable() {
        let mut w = world();
        w.sync.spec.adopt_existing = Some(true);
        w.config_maps.push(cm("dst", HASH, Some("team/other")));
        w.live.insert("team/other".into());
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        assert_eq!(
            states(&plan),
            vec![("dst".into(), DestinationState::Conflict)]
        );
        assert!(
            condition(&plan, DEGRADED)
                .2
                .contains("ConfigMapSync team/other")
        );
        w.live.remove("team/other");
        assert_eq!(run(&w).writes.len(), 1, "the orphan is adopted");
    }

    #[test]
    fn without_trust_the_tutorials_example_says_which_consent_is_missing() {
        let mut w = world();
        w.settings = Settings::default();
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        let (status, reason, message) = condition(&plan, DEGRADED);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", REASON_CONSENT_MISSING)
        );
        assert_eq!(
            message,
            "source ConfigMap src/app does not exist or does not consent to be read by ConfigMapSyncs in namespace team (annotation configmapsync.apps.bixbite.io/shareable-with: \"team\" missing); namespace dst does not consent to copies from ConfigMapSyncs in namespace team (label accept-from.configmapsync.apps.bixbite.io/team=true missing)"
        );
        assert_eq!(
            states(&plan),
            vec![("dst".into(), DestinationState::NotPermitted)]
        );
        // Both consents given: synced.
        w.source.as_mut().expect("source").shareable_with = Some("team".into());
        let label = accept_label("team");
        w.namespaces
            .insert("dst".into(), ns("dst", &[(&label, "true")]).1);
        let plan = run(&w);
        assert_eq!(plan.writes.len(), 1);
        assert_eq!(condition(&plan, DEGRADED).0, "False");
    }

    #[test]
    fn a_missing_foreign_source_reads_like_a_refusal_without_trust() {
        let mut w = world();
        w.settings = Settings::default();
        w.source = None;
        assert_eq!(condition(&run(&w), DEGRADED).1, REASON_CONSENT_MISSING);
        w.settings.trust_all = true;
        assert_eq!(condition(&run(&w), DEGRADED).1, REASON_SOURCE_NOT_FOUND);
    }

    #[test]
    fn a_deleted_source_keeps_copies_or_deletes_them_per_policy() {
        let mut w = world();
        w.config_maps.push(cm("dst", HASH, Some("team/sync")));
        w.source = None;
        let plan = run(&w);
        assert!(plan.deletes.is_empty() && plan.writes.is_empty());
        assert_eq!(states(&plan), vec![("dst".into(), DestinationState::Stale)]);
        assert_eq!(condition(&plan, DEGRADED).1, REASON_SOURCE_NOT_FOUND);
        w.sync.spec.source_deleted_policy = Some(SourceDeletedPolicy::Delete);
        let plan = run(&w);
        assert_eq!(plan.deletes.len(), 1);
        assert_eq!(plan.deletes[0].uid, "uid-dst");
    }

    #[test]
    fn the_selector_adds_namespaces_and_copies_outside_it_go() {
        let mut w = world();
        let selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("env".to_owned(), "prod".to_owned())])),
            ..LabelSelector::default()
        };
        w.sync.spec.namespace_selector = Some(selector);
        w.namespaces
            .extend([ns("a", &[("env", "prod")]), ns("b", &[("env", "dev")])]);
        w.config_maps.push(cm("b", HASH, Some("team/sync")));
        let plan = run(&w);
        let written: Vec<&str> = plan.writes.iter().map(|w| w.namespace.as_str()).collect();
        assert_eq!(written, vec!["a", "dst"]);
        assert_eq!(plan.deletes.len(), 1);
        assert_eq!(plan.deletes[0].namespace, "b");
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == REASON_COPIES_DELETED)
        );
    }

    #[test]
    fn a_renamed_source_deletes_the_old_copies_never_the_source() {
        let mut w = world();
        w.sync.spec.config_map_name = "renamed".into();
        w.config_maps.push(cm("dst", HASH, Some("team/sync")));
        // A copy of the source lies in the source namespace itself, under the new name.
        let mut odd = cm("src", HASH, Some("team/sync"));
        odd.name = "renamed".into();
        w.config_maps.push(odd);
        w.source = None;
        let plan = run(&w);
        assert_eq!(
            plan.deletes,
            vec![CopyRef {
                namespace: "dst".into(),
                name: "app".into(),
                uid: "uid-dst".into()
            }]
        );
    }

    #[test]
    fn bad_destinations_are_reported_not_written() {
        let mut w = world();
        w.sync.spec.destination_namespaces = vec!["src".into(), "nowhere".into()];
        let plan = run(&w);
        let expected = vec![
            ("dst".into(), DestinationState::Synced),
            ("nowhere".into(), DestinationState::NamespaceNotFound),
            ("src".into(), DestinationState::Invalid),
        ];
        assert_eq!(states(&plan), expected);
        assert_eq!(plan.writes.len(), 1);
        assert_eq!(condition(&plan, DEGRADED).1, REASON_NAMESPACE_NOT_FOUND);
        assert_eq!(plan.status.synced, 1);
        assert_eq!(plan.status.destination_count, 3);
        // A namespace being deleted gets no write either.
        w.namespaces.get_mut("dst").expect("dst").terminating = true;
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        assert_eq!(
            plan.status.destinations[0].state,
            DestinationState::NamespaceNotFound
        );
    }

    /// The second line behind the CRD's rules (objects stored before them): the source's own
    /// namespace as a destination and an unusable selector are conditions, not crashes.
    #[test]
    fn the_source_as_destination_and_a_bad_selector_are_degraded() {
        let mut w = world();
        w.sync.spec.destination_namespaces = vec!["src".into()];
        let plan = run(&w);
        assert_eq!(condition(&plan, DEGRADED).1, REASON_INVALID_DESTINATION);
        assert_eq!(plan.writes.len(), 1, "dst is still written");
        w.sync.spec.destination_namespaces = Vec::new();
        w.sync.spec.namespace_selector = Some(LabelSelector {
            match_expressions: Some(vec![
                k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelectorRequirement {
                    key: "env".into(),
                    operator: "In".into(),
                    values: None,
                },
            ]),
            ..LabelSelector::default()
        });
        let plan = run(&w);
        assert_eq!(condition(&plan, DEGRADED).1, REASON_INVALID_SELECTOR);
    }

    #[test]
    fn an_oversized_source_is_not_copied() {
        let mut w = world();
        w.source.as_mut().expect("source").size = MAX_SOURCE_BYTES + 1;
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        assert_eq!(condition(&plan, DEGRADED).1, REASON_SOURCE_TOO_LARGE);
        assert!(
            plan.events
                .iter()
                .any(|e| e.reason == REASON_SOURCE_TOO_LARGE)
        );
        // Reported once: the same problem again records no new Event.
        w.sync.status = Some(plan.status.clone());
        assert!(run(&w).events.is_empty());
    }

    #[test]
    fn secrets_are_copied_only_when_enabled() {
        let mut w = world();
        w.sync.spec.kind = Some(SyncedKind::Secret);
        let plan = run(&w);
        assert!(plan.writes.is_empty());
        assert_eq!(condition(&plan, DEGRADED).1, REASON_SECRETS_NOT_ENABLED);
        w.settings.secrets = true;
        assert_eq!(run(&w).writes.len(), 1);
    }

    #[test]
    fn cleanup_deletes_owned_copies_unless_orphaned() {
        let mut w = world();
        w.config_maps.push(cm("dst", HASH, Some("team/sync")));
        w.config_maps.push(cm("other", HASH, None));
        let all = w.config_maps.clone();
        let inputs = |w: &World| {
            cleanup(&Inputs {
                sync: &w.sync,
                source: None,
                namespaces: &w.namespaces,
                config_maps: &all,
                live_syncs: &w.live,
                now: Timestamp::from_second(1).expect("time"),
                settings: &w.settings,
            })
        };
        assert_eq!(inputs(&w).len(), 1);
        w.sync.spec.deletion_policy = Some(DeletionPolicy::Orphan);
        assert!(inputs(&w).is_empty());
    }

    #[test]
    fn failed_writes_turn_the_destination_failed_and_raced_ones_wait_for_the_cache() {
        let w = world();
        let plan = run(&w);
        assert_eq!(plan.writes.len(), 1);
        let now = Timestamp::from_second(2).expect("time");
        let outcomes = |o: WriteOutcome| BTreeMap::from([("dst".to_owned(), o)]);

        assert_eq!(
            after_writes(&plan, &outcomes(WriteOutcome::Raced), Some(1), now),
            AfterWrites::Wait,
            "every write raced: no status, no Events"
        );
        let AfterWrites::Report {
            status,
            events,
            error,
        } = after_writes(&plan, &outcomes(WriteOutcome::Done), Some(1), now)
        else {
            panic!("a done write is reported");
        };
        assert_eq!(
            (status, events, error),
            (plan.status.clone(), plan.events.clone(), None)
        );

        let failed = outcomes(WriteOutcome::Failed("boom".into()));
        let AfterWrites::Report {
            status,
            events,
            error,
        } = after_writes(&plan, &failed, Some(1), now)
        else {
            panic!("a failed write is reported");
        };
        assert_eq!(status.destinations[0].state, DestinationState::Failed);
        assert_eq!(status.destinations[0].error.as_deref(), Some("boom"));
        assert_eq!(status.synced, 0);
        let ready = conditions::find(&status.conditions, READY).expect("Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", REASON_SYNC_FAILED)
        );
        assert!(events.iter().all(|e| e.reason != REASON_COPIES_WRITTEN));
        assert_eq!(error.as_deref(), Some("writing copies failed: dst: boom"));
    }
}
