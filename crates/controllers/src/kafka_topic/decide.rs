//! The pure half of the KafkaTopic controller: from a Topic and what the broker says about its
//! topic, the broker writes that bring Kafka to the declared state, the status to record, the
//! Events to emit, whether the finalizer goes and whether the reconcile fails. No I/O, no clock.
//!
//! A reconcile decides once per look at the broker: first on what Kafka holds, and — when that
//! decision wrote to the broker — once more on what Kafka holds after the writes
//! ([`Inputs::written`]), so the status records the result rather than the request. The second
//! decision never writes to the broker; what is still missing waits for a look soon after
//! ([`Plan::look_again`]).

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use vigil_apis::kafka_topic::{RETAIN_ANNOTATION, TopicStatus};
use vigil_kafka::{ConfigChange, TopicDescription};
use vigil_runtime::conditions::{self, NewCondition, Status};

pub use super::model::{
    BrokerOp, EventNote, Failure, Inputs, Observation, Observed, Plan, TopicView, Written,
};

/// Held while the topic may exist in Kafka; added before Vigil creates anything.
pub const FINALIZER: &str = "kafka.vigil.dev/topic";

/// Condition types this controller writes.
pub use vigil_runtime::conditions::{DEGRADED, READY};
pub const DELETING: &str = "Deleting";

pub const REASON_READY: &str = "TopicReady";
pub const REASON_AS_DECLARED: &str = "AsDeclared";
pub const REASON_CREATING: &str = "Creating";
pub const REASON_UPDATING: &str = "Updating";
pub const REASON_PARTITION_DECREASE: &str = "PartitionDecreaseRefused";
pub const REASON_REPLICATION_CHANGE: &str = "ReplicationFactorChangeRefused";
pub const REASON_NOT_OWNED: &str = "TopicNotOwned";
pub const REASON_NAME_IMMUTABLE: &str = "TopicNameImmutable";
pub const REASON_BROKER_UNREACHABLE: &str = "BrokerUnreachable";
pub const REASON_BROKER_REFUSED: &str = "BrokerRefused";
pub const REASON_CREDENTIALS: &str = "CredentialsUnavailable";
pub const REASON_TLS: &str = "TLSHandshakeFailed";
pub const REASON_DELETING_TOPIC: &str = "DeletingTopic";

/// Event reasons (beyond the condition reasons, which double as Warning Event reasons).
pub const EVENT_CREATED: &str = "TopicCreated";
pub const EVENT_UPDATED: &str = "TopicUpdated";
pub const EVENT_DRIFT: &str = "DriftReverted";
pub const EVENT_RECREATED: &str = "TopicRecreated";
pub const EVENT_ADOPTED: &str = "TopicAdopted";
pub const EVENT_DELETED: &str = "TopicDeleted";
pub const EVENT_RETAINED: &str = "TopicRetained";
pub const EVENT_LEFT: &str = "TopicLeftInKafka";

/// Topic configs that other tools legitimately set on the topic and that Vigil leaves alone even
/// when the spec does not declare them: the replication throttles that reassignment tools (Cruise
/// Control, `kafka-reassign-partitions`) set and clear while they move replicas.
pub const CONFIGS_OWNED_BY_OTHERS: [&str; 2] = [
    "leader.replication.throttled.replicas",
    "follower.replication.throttled.replicas",
];

/// A config set on the topic that the spec does not declare, and that is Vigil's to revert.
fn undeclared<'a>(
    declared: &'a BTreeMap<String, String>,
    set_on_topic: &'a BTreeSet<String>,
) -> impl Iterator<Item = &'a String> {
    set_on_topic
        .iter()
        .filter(|k| !declared.contains_key(*k) && !CONFIGS_OWNED_BY_OTHERS.contains(&k.as_str()))
}

fn note(warning: bool, reason: &str, note: String) -> EventNote {
    EventNote {
        warning,
        reason: reason.to_owned(),
        note,
        related: None,
    }
}

/// Whether the broker must be asked before deciding. Not for an object unchanged since a
/// reconcile left it as declared (`settled`: its event is the controller's own status write; the
/// drift poll watches the broker side), nor for a deletion that leaves Kafka alone: the topic is
/// retained, or Vigil never created nor adopted one (a wrong cluster reference then never holds
/// the deletion up).
pub fn asks_broker(view: &TopicView<'_>, settled: bool) -> bool {
    if !view.deleting {
        return !settled;
    }
    !view.retain
        && (view.status.topic_id.is_some()
            || view.status.creating == Some(true)
            || view.spec.adopt == Some(true))
}

/// One condition to set.
struct Cond<'a> {
    type_: &'a str,
    status: Status,
    reason: &'a str,
    message: String,
}

fn set_all(status: &mut TopicStatus, generation: Option<i64>, now: &Time, list: &[Cond<'_>]) {
    for c in list {
        conditions::set(
            &mut status.conditions,
            &NewCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: &c.message,
                observed_generation: generation,
            },
            now,
        );
    }
}

fn cond<'a>(type_: &'a str, status: Status, reason: &'a str, message: String) -> Cond<'a> {
    Cond {
        type_,
        status,
        reason,
        message,
    }
}

/// Whether the topic in Kafka is this object's to manage: the one Vigil recorded, the one it was
/// creating when it last stopped, or any topic of that name when the user asked for adoption.
pub fn owns(view: &TopicView<'_>, topic: &TopicDescription) -> bool {
    match &view.status.topic_id {
        Some(id) => *id == topic.id || view.spec.adopt == Some(true),
        None => view.status.creating == Some(true) || view.spec.adopt == Some(true),
    }
}

/// The decision for a Topic: broker writes, status, Events, finalizer, failure.
pub fn decide(inputs: &Inputs<'_>) -> Plan {
    let view = &inputs.topic;
    let mut plan = match inputs.observation {
        Observation::NotAsked => decide_unasked(view),
        Observation::Failed(failure) => decide_failed(view, failure, inputs.now),
        Observation::Broker(observed) => decide_observed(view, observed, inputs.now),
    };
    if let Some(written) = inputs.written {
        after_writes(view, inputs.observation, written, inputs.now, &mut plan);
    }
    plan
}

/// The broker was not asked: only a deletion has something to do — release the object (saying
/// so when the topic stays by the deletion policy).
fn decide_unasked(view: &TopicView<'_>) -> Plan {
    let mut plan = Plan::keep(view.status);
    if view.deleting {
        plan.remove_finalizer = true;
        if view.retain {
            plan.events.push(retained(&view.managed_name()));
        }
    }
    plan
}

/// The broker or the credentials failed: the status says so, a Warning Event when that is
/// news, and the reconcile fails (retried with backoff).
fn decide_failed(view: &TopicView<'_>, failure: &Failure, now: &Time) -> Plan {
    let mut plan = Plan::keep(view.status);
    mark_failure(
        &mut plan.status,
        view.generation,
        view.deleting,
        failure.reason,
        &failure.message,
        now,
    );
    let news = conditions::find(&view.status.conditions, DEGRADED)
        .is_none_or(|c| c.reason != failure.reason || c.status != "True");
    if plan.status != *view.status && news {
        plan.events
            .push(note(true, failure.reason, failure.message.clone()));
    }
    plan.failure = Some(failure.clone());
    plan
}

/// The decision on what Kafka holds after this reconcile's writes: their Events first; no
/// broker write (what is still missing waits for a look soon after); a failed write fails the
/// reconcile, reported in status and as a Warning Event, and keeps the finalizer.
///
/// When Kafka still differs from the spec, this look cannot tell a write Kafka applies
/// asynchronously from a change made outside Vigil meanwhile (the topic deleted behind its
/// back, a config changed): it decides neither. The status stays what the writes' decision
/// recorded (the topic id included) and the Events are only the writes' own; the look soon after
/// decides the difference — a change outside Vigil is then reported and counted as drift, once.
/// What it records are facts: the partitions and configs this look sees on the topic, when it
/// sees this object's topic (a config applied beside a refused partition raise shows at once,
/// not one backoff later).
fn after_writes(
    view: &TopicView<'_>,
    observation: &Observation,
    written: &Written,
    now: &Time,
    plan: &mut Plan,
) {
    plan.mark_creating = false;
    plan.drift = false;
    plan.look_again = !plan.ops.is_empty();
    if plan.look_again {
        plan.status = view.status.clone();
        if let Observation::Broker(observed) = observation
            && observed.topic.as_ref().is_some_and(|t| owns(view, t))
        {
            record_observed(view, observed, &mut plan.status);
        }
        plan.events.clear();
        plan.remove_finalizer = false;
    }
    plan.ops.clear();
    plan.events.splice(0..0, written.done.iter().cloned());
    if plan.failure.is_some() {
        return;
    }
    if let Some(failure) = &written.failure {
        mark_failure(
            &mut plan.status,
            view.generation,
            view.deleting,
            failure.reason,
            &failure.message,
            now,
        );
        plan.events
            .push(note(true, failure.reason, failure.message.clone()));
        plan.remove_finalizer = false;
        plan.failure = Some(failure.clone());
    }
}

/// What a successful broker write did, as a Normal Event (`created_id`: the id Kafka gave a
/// created topic). `None` for a create that found the topic already there (an earlier
/// attempt's answer was lost: the next look decides).
pub fn written_note(op: &BrokerOp, created_id: Option<&str>) -> Option<EventNote> {
    match op {
        BrokerOp::Create {
            name, partitions, ..
        } => created_id.map(|id| {
            note(
                false,
                EVENT_CREATED,
                format!("created topic {name} (id {id}) with {partitions} partitions"),
            )
        }),
        BrokerOp::AddPartitions { name, count } => Some(note(
            false,
            EVENT_UPDATED,
            format!("raised the partitions of topic {name} to {count}"),
        )),
        BrokerOp::AlterConfig { name, changes } => {
            let list: Vec<String> = changes
                .iter()
                .map(|c| match c {
                    ConfigChange::Set(k, v) => format!("{k}={v}"),
                    ConfigChange::Delete(k) => format!("{k} (default)"),
                })
                .collect();
            Some(note(
                false,
                EVENT_UPDATED,
                format!("set config of topic {name}: {}", list.join(", ")),
            ))
        }
        BrokerOp::Delete { name } => Some(note(
            false,
            EVENT_DELETED,
            format!("deleted topic {name} from Kafka"),
        )),
    }
}

impl BrokerOp {
    /// The write in words, for a failure message.
    pub fn describe(&self) -> String {
        match self {
            Self::Create { name, .. } => format!("creating topic {name}"),
            Self::AddPartitions { name, count } => {
                format!("raising the partitions of topic {name} to {count}")
            }
            Self::AlterConfig { name, .. } => format!("altering the config of topic {name}"),
            Self::Delete { name } => format!("deleting topic {name}"),
        }
    }
}

fn retained(name: &str) -> EventNote {
    note(
        false,
        EVENT_RETAINED,
        format!("topic {name} stays in Kafka (deletion policy Retain)"),
    )
}

/// The decision given the broker's view of the topic.
fn decide_observed(view: &TopicView<'_>, observed: &Observed, now: &Time) -> Plan {
    let mut plan = Plan::keep(view.status);
    plan.status.observed_generation = view.generation;
    let name = view.managed_name();
    if view.deleting {
        decide_deletion(view, observed, &name, now, &mut plan);
        return plan;
    }
    plan.status.topic_name = Some(name.clone());
    record_observed(view, observed, &mut plan.status);
    let declared = view.declared_name();
    if declared != name {
        decide_renamed(view, &name, &declared, now, &mut plan);
    } else if let Some(topic) = &observed.topic {
        if owns(view, topic) {
            decide_owned(view, observed, topic, &name, now, &mut plan);
        } else {
            decide_not_owned(view, topic, &name, now, &mut plan);
        }
    } else {
        decide_missing(view, &name, now, &mut plan);
    }
    plan
}

/// `spec.topicName` changed: Kafka cannot rename a topic, so nothing is written and the Topic is
/// degraded until the name is restored.
fn decide_renamed(view: &TopicView<'_>, name: &str, declared: &str, now: &Time, plan: &mut Plan) {
    let message = format!(
        "spec.topicName is {declared:?} but this object manages topic {name:?}; Kafka cannot \
         rename topics: restore the name, or create a new Topic object"
    );
    set_all(
        &mut plan.status,
        view.generation,
        now,
        &[
            cond(READY, Status::False, REASON_NAME_IMMUTABLE, message.clone()),
            cond(DEGRADED, Status::True, REASON_NAME_IMMUTABLE, message),
        ],
    );
}

/// The topic is not in Kafka: create it (recording `status.creating` first), and say it was
/// recreated when it had been Vigil's.
fn decide_missing(view: &TopicView<'_>, name: &str, now: &Time, plan: &mut Plan) {
    if view.status.topic_id.is_some() {
        plan.drift = true;
        plan.events.push(note(
            true,
            EVENT_RECREATED,
            format!("topic {name} was deleted outside Vigil; creating it again"),
        ));
    }
    plan.status.topic_id = None;
    plan.status.creating = Some(true);
    plan.mark_creating = view.status.creating != Some(true);
    plan.ops.push(BrokerOp::Create {
        name: name.to_owned(),
        partitions: view.spec.partitions,
        replication_factor: view
            .spec
            .replication_factor
            .and_then(|r| i16::try_from(r).ok())
            .unwrap_or(-1),
        config: view.spec.config.clone(),
    });
    let message = format!("creating topic {name}");
    set_all(
        &mut plan.status,
        view.generation,
        now,
        &[cond(READY, Status::False, REASON_CREATING, message)],
    );
}

/// A topic of this name exists that this object did not create nor adopt: left alone, reported.
fn decide_not_owned(
    view: &TopicView<'_>,
    topic: &TopicDescription,
    name: &str,
    now: &Time,
    plan: &mut Plan,
) {
    let message = format!(
        "topic {name} exists in Kafka (id {}) and was not created by this object; set \
         spec.adopt: true to manage it (it is then also deleted with this object unless \
         deletionPolicy is Retain)",
        topic.id
    );
    if view.status.topic_id.is_some() {
        // It was ours and was replaced (deleted and created again) outside Vigil.
        plan.status.topic_id = None;
    }
    push_transition(view, plan, REASON_NOT_OWNED, &message);
    set_all(
        &mut plan.status,
        view.generation,
        now,
        &[
            cond(READY, Status::False, REASON_NOT_OWNED, message.clone()),
            cond(DEGRADED, Status::True, REASON_NOT_OWNED, message),
        ],
    );
}

/// The topic is this object's: record its id (an adoption says so), write what differs from
/// the spec, refuse what Kafka cannot do, and set the conditions.
fn decide_owned(
    view: &TopicView<'_>,
    observed: &Observed,
    topic: &TopicDescription,
    name: &str,
    now: &Time,
    plan: &mut Plan,
) {
    if view.status.topic_id.as_deref() != Some(topic.id.as_str())
        && view.status.creating != Some(true)
    {
        plan.events.push(note(
            false,
            EVENT_ADOPTED,
            format!("adopted existing topic {name} (id {})", topic.id),
        ));
    }
    let converged_before = view.status.topic_id.as_deref() == Some(topic.id.as_str())
        && view.status.observed_generation == view.generation;
    plan.status.topic_id = Some(topic.id.clone());
    plan.status.creating = None;
    let refused = align(view, observed, topic, name, plan);
    if !plan.ops.is_empty() {
        plan.drift = converged_before;
        let what = describe_ops(&plan.ops);
        if plan.drift {
            plan.events.push(note(
                true,
                EVENT_DRIFT,
                format!("topic {name} was changed outside Vigil; restoring: {what}"),
            ));
        }
        let message = format!("updating topic {name}: {what}");
        set_all(
            &mut plan.status,
            view.generation,
            now,
            &[cond(READY, Status::False, REASON_UPDATING, message)],
        );
    }
    if refused.is_empty() {
        if plan.ops.is_empty() {
            set_as_declared(view, topic, name, now, plan);
        }
    } else {
        refuse(view, &refused, now, plan);
    }
}

/// The writes that bring an owned topic to the spec (more partitions, configs), and what Kafka
/// cannot do (fewer partitions, another replication factor) as (reason, message).
fn align(
    view: &TopicView<'_>,
    observed: &Observed,
    topic: &TopicDescription,
    name: &str,
    plan: &mut Plan,
) -> Vec<(&'static str, String)> {
    let mut refused = Vec::new();
    let spec = view.spec;
    if spec.partitions > topic.partitions {
        plan.ops.push(BrokerOp::AddPartitions {
            name: name.to_owned(),
            count: spec.partitions,
        });
    } else if spec.partitions < topic.partitions {
        refused.push((
            REASON_PARTITION_DECREASE,
            format!(
                "spec.partitions is {} but topic {name} has {}: Kafka cannot remove partitions \
                 (nothing was changed; recreate the topic to shrink it)",
                spec.partitions, topic.partitions
            ),
        ));
    }
    if let Some(rf) = spec.replication_factor
        && rf != topic.replication_factor
    {
        refused.push((
            REASON_REPLICATION_CHANGE,
            format!(
                "spec.replicationFactor is {rf} but topic {name} has {}: Vigil does not \
                 reassign replicas (nothing was changed)",
                topic.replication_factor
            ),
        ));
    }
    let changes = config_changes(view, observed);
    if !changes.is_empty() {
        plan.ops.push(BrokerOp::AlterConfig {
            name: name.to_owned(),
            changes,
        });
    }
    refused
}

/// What Kafka cannot do is reported: `Degraded` (and `Ready` false when nothing else is under
/// way), with a Warning when that is news.
fn refuse(view: &TopicView<'_>, refused: &[(&'static str, String)], now: &Time, plan: &mut Plan) {
    let Some((reason, _)) = refused.first() else {
        return;
    };
    let message = refused
        .iter()
        .map(|(_, m)| m.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    push_transition(view, plan, reason, &message);
    let mut list = vec![cond(DEGRADED, Status::True, reason, message.clone())];
    if plan.ops.is_empty() {
        list.push(cond(READY, Status::False, reason, message));
    }
    set_all(&mut plan.status, view.generation, now, &list);
}

/// Nothing to write and nothing refused: `Ready`, not `Degraded`.
fn set_as_declared(
    view: &TopicView<'_>,
    topic: &TopicDescription,
    name: &str,
    now: &Time,
    plan: &mut Plan,
) {
    set_all(
        &mut plan.status,
        view.generation,
        now,
        &[
            cond(
                READY,
                Status::True,
                REASON_READY,
                format!(
                    "topic {name} exists with {} partitions and the declared config",
                    topic.partitions
                ),
            ),
            cond(
                DEGRADED,
                Status::False,
                REASON_AS_DECLARED,
                "nothing keeps the topic from its declared state".into(),
            ),
        ],
    );
}

/// A Warning Event for a refusal, when the status does not already report it (once per
/// transition, not once per reconcile).
fn push_transition(view: &TopicView<'_>, plan: &mut Plan, reason: &str, message: &str) {
    let already = conditions::find(&view.status.conditions, DEGRADED)
        .is_some_and(|c| c.status == "True" && c.reason == reason && c.message == message);
    if !already {
        plan.events.push(note(true, reason, message.to_owned()));
    }
}

/// The config writes: declared values that differ, and configs set on the topic that the spec
/// does not declare (back to the broker's default, as Strimzi's unidirectional mode does), except
/// [`CONFIGS_OWNED_BY_OTHERS`]. A config at its default is not written.
pub fn config_changes(view: &TopicView<'_>, observed: &Observed) -> Vec<ConfigChange> {
    let mut changes = Vec::new();
    for (key, value) in &view.spec.config {
        if observed.config.get(key).and_then(|v| v.as_deref()) != Some(value.as_str()) {
            changes.push(ConfigChange::Set(key.clone(), value.clone()));
        }
    }
    // Keys Vigil set that the spec no longer declares: reverted even on a broker that does not
    // report where a config comes from.
    let previously_declared = view
        .status
        .config
        .keys()
        .filter(|k| !view.spec.config.contains_key(*k));
    let reverted: BTreeSet<&String> = previously_declared
        .chain(undeclared(&view.spec.config, &observed.set_on_topic))
        .collect();
    changes.extend(
        reverted
            .into_iter()
            .map(|key| ConfigChange::Delete(key.clone())),
    );
    changes
}

fn describe_ops(ops: &[BrokerOp]) -> String {
    ops.iter()
        .map(|op| match op {
            BrokerOp::Create { partitions, .. } => format!("create with {partitions} partitions"),
            BrokerOp::AddPartitions { count, .. } => format!("partitions to {count}"),
            BrokerOp::AlterConfig { changes, .. } => changes
                .iter()
                .map(|c| match c {
                    ConfigChange::Set(k, v) => format!("{k}={v}"),
                    ConfigChange::Delete(k) => format!("{k} to its default"),
                })
                .collect::<Vec<_>>()
                .join(", "),
            BrokerOp::Delete { .. } => "delete".into(),
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// The real state into status: partitions, replication factor, and the managed configs (the
/// declared keys) as Kafka holds them.
fn record_observed(view: &TopicView<'_>, observed: &Observed, status: &mut TopicStatus) {
    match &observed.topic {
        Some(topic) if owns(view, topic) || view.status.topic_id.is_none() => {
            status.partitions = Some(topic.partitions);
            status.replication_factor = Some(topic.replication_factor);
            status.config = view
                .spec
                .config
                .keys()
                .filter_map(|k| {
                    observed
                        .config
                        .get(k)
                        .and_then(|v| v.clone())
                        .map(|v| (k.clone(), v))
                })
                .collect();
        }
        _ => {
            status.partitions = None;
            status.replication_factor = None;
            status.config = BTreeMap::new();
        }
    }
}

fn decide_deletion(
    view: &TopicView<'_>,
    observed: &Observed,
    name: &str,
    now: &Time,
    plan: &mut Plan,
) {
    let generation = view.generation;
    if view.retain {
        plan.remove_finalizer = true;
        plan.events.push(retained(name));
        return;
    }
    match &observed.topic {
        None => plan.remove_finalizer = true,
        Some(topic) if owns(view, topic) => {
            plan.ops.push(BrokerOp::Delete {
                name: name.to_owned(),
            });
            set_all(
                &mut plan.status,
                generation,
                now,
                &[cond(
                    DELETING,
                    Status::True,
                    REASON_DELETING_TOPIC,
                    format!("deleting topic {name} from Kafka"),
                )],
            );
        }
        Some(topic) => {
            plan.remove_finalizer = true;
            plan.events.push(note(
                false,
                EVENT_LEFT,
                format!(
                    "topic {name} (id {}) was not created by this object: left in Kafka",
                    topic.id
                ),
            ));
        }
    }
}

/// Conditions for a failure of the broker or of the credentials: `Ready` false (or `Deleting`
/// true with the reason, while deleting) and `Degraded` true. Returns whether anything changed.
pub fn mark_failure(
    status: &mut TopicStatus,
    generation: Option<i64>,
    deleting: bool,
    reason: &'static str,
    message: &str,
    now: &Time,
) -> bool {
    let mut list = vec![cond(DEGRADED, Status::True, reason, message.to_owned())];
    if deleting {
        list.push(cond(
            DELETING,
            Status::True,
            reason,
            format!(
                "waiting to delete the topic from Kafka: {message} (if this cluster is gone for \
                 good, annotate {RETAIN_ANNOTATION}=true to release the object and leave the topic)"
            ),
        ));
    } else {
        list.push(cond(READY, Status::False, reason, message.to_owned()));
    }
    let before = status.clone();
    set_all(status, generation, now, &list);
    *status != before
}

/// Whether what the broker shows differs from what the status last recorded (the drift poll):
/// the topic vanished or was replaced, or its partitions, replication factor or managed configs
/// changed. A topic that never became Vigil's (no `topicId`) is never drift.
pub fn drifted(status: &TopicStatus, observed: &Observed) -> bool {
    let Some(id) = &status.topic_id else {
        return false;
    };
    let Some(topic) = &observed.topic else {
        return true;
    };
    if topic.id != *id
        || status.partitions != Some(topic.partitions)
        || status.replication_factor != Some(topic.replication_factor)
    {
        return true;
    }
    let declared_changed = status
        .config
        .iter()
        .any(|(k, v)| observed.config.get(k).and_then(|o| o.as_deref()) != Some(v.as_str()));
    declared_changed
        || undeclared(&status.config, &observed.set_on_topic)
            .next()
            .is_some()
}

/// The condition of a type in a status, for callers that print it.
pub fn condition<'a>(status: &'a TopicStatus, type_: &str) -> Option<&'a Condition> {
    conditions::find(&status.conditions, type_)
}

#[cfg(test)]
mod tests {
    use super::*;
    use vigil_apis::kafka_topic::{ClusterRef, TopicSpec};

    /// A reconcile's first decision, on what the broker shows.
    fn decide(view: &TopicView<'_>, observed: &Observed, now: &Time) -> Plan {
        super::decide(&Inputs {
            topic: view.clone(),
            observation: &Observation::Broker(observed.clone()),
            written: None,
            now,
        })
    }

    /// The decision on what the broker shows after this reconcile's writes.
    fn decide_after(
        view: &TopicView<'_>,
        observation: &Observation,
        written: &Written,
        now: &Time,
    ) -> Plan {
        super::decide(&Inputs {
            topic: view.clone(),
            observation,
            written: Some(written),
            now,
        })
    }

    fn decide_without_broker(view: &TopicView<'_>, observation: &Observation) -> Plan {
        super::decide(&Inputs {
            topic: view.clone(),
            observation,
            written: None,
            now: &now(),
        })
    }

    fn spec(partitions: i32, config: &[(&str, &str)]) -> TopicSpec {
        TopicSpec {
            topic_name: None,
            partitions,
            replication_factor: Some(1),
            config: config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cluster: ClusterRef {
                bootstrap_servers: vec!["127.0.0.1:9092".into()],
                tls: None,
                sasl: None,
            },
            deletion_policy: None,
            adopt: None,
        }
    }

    fn now() -> Time {
        Time(k8s_openapi::jiff::Timestamp::from_second(1_000).expect("time"))
    }

    fn topic(id: &str, partitions: i32) -> TopicDescription {
        TopicDescription {
            name: "orders".into(),
            id: id.into(),
            partitions,
            replication_factor: 1,
        }
    }

    fn observed(id: &str, partitions: i32, config: &[(&str, &str)]) -> Observed {
        Observed {
            topic: Some(topic(id, partitions)),
            config: config
                .iter()
                .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
                .collect(),
            set_on_topic: BTreeSet::new(),
        }
    }

    /// `observed`, with these configs reported as set on the topic itself (the others are the
    /// broker's defaults).
    fn set_on_topic(mut observed: Observed, keys: &[&str]) -> Observed {
        observed.set_on_topic = keys.iter().map(|k| (*k).to_owned()).collect();
        observed
    }

    fn view<'a>(spec: &'a TopicSpec, status: &'a TopicStatus, generation: i64) -> TopicView<'a> {
        TopicView {
            name: "orders",
            generation: Some(generation),
            spec,
            status,
            deleting: false,
            retain: false,
        }
    }

    fn reason(plan: &Plan, type_: &str) -> String {
        condition(&plan.status, type_)
            .map(|c| format!("{}/{}", c.status, c.reason))
            .unwrap_or_default()
    }

    #[test]
    fn absent_topic_is_created_after_marking_it() {
        let spec = spec(3, &[("retention.ms", "1000")]);
        let status = TopicStatus::default();
        let plan = decide(&view(&spec, &status, 1), &Observed::default(), &now());
        assert!(plan.mark_creating);
        assert_eq!(plan.status.creating, Some(true));
        assert_eq!(
            plan.ops,
            vec![BrokerOp::Create {
                name: "orders".into(),
                partitions: 3,
                replication_factor: 1,
                config: spec.config.clone(),
            }]
        );
        assert_eq!(reason(&plan, READY), "False/Creating");
        assert!(!plan.drift);
    }

    #[test]
    fn a_topic_found_while_creating_is_ours_and_ready_when_as_declared() {
        let spec = spec(3, &[("retention.ms", "1000")]);
        let status = TopicStatus {
            creating: Some(true),
            ..TopicStatus::default()
        };
        let plan = decide(
            &view(&spec, &status, 1),
            &observed("id-1", 3, &[("retention.ms", "1000")]),
            &now(),
        );
        assert!(plan.ops.is_empty(), "{:?}", plan.ops);
        assert_eq!(plan.status.topic_id.as_deref(), Some("id-1"));
        assert_eq!(plan.status.creating, None);
        assert_eq!(plan.status.partitions, Some(3));
        assert_eq!(plan.status.config["retention.ms"], "1000");
        assert_eq!(reason(&plan, READY), "True/TopicReady");
        assert_eq!(reason(&plan, DEGRADED), "False/AsDeclared");
        assert!(plan.events.is_empty(), "{:?}", plan.events);
    }

    fn ready_status(spec: &TopicSpec, generation: i64, id: &str, partitions: i32) -> TopicStatus {
        let status = TopicStatus {
            creating: Some(true),
            ..TopicStatus::default()
        };
        let cfg: Vec<(&str, &str)> = spec
            .config
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        decide(
            &view(spec, &status, generation),
            &observed(id, partitions, &cfg),
            &now(),
        )
        .status
    }

    #[test]
    fn steady_state_plans_nothing_and_keeps_the_status() {
        let spec = spec(3, &[("retention.ms", "1000")]);
        let status = ready_status(&spec, 1, "id-1", 3);
        let plan = decide(
            &view(&spec, &status, 1),
            &observed("id-1", 3, &[("retention.ms", "1000"), ("other", "x")]),
            &now(),
        );
        assert!(plan.ops.is_empty());
        assert!(plan.events.is_empty());
        assert_eq!(plan.status, status, "no status write");
        assert!(!drifted(
            &status,
            &observed("id-1", 3, &[("retention.ms", "1000")])
        ));
    }

    #[test]
    fn spec_changes_raise_partitions_and_alter_only_differing_configs() {
        let old = spec(3, &[("retention.ms", "1000"), ("cleanup.policy", "delete")]);
        let status = ready_status(&old, 1, "id-1", 3);
        let new = spec(5, &[("retention.ms", "2000"), ("cleanup.policy", "delete")]);
        let plan = decide(
            &view(&new, &status, 2),
            &observed(
                "id-1",
                3,
                &[("retention.ms", "1000"), ("cleanup.policy", "delete")],
            ),
            &now(),
        );
        assert_eq!(
            plan.ops,
            vec![
                BrokerOp::AddPartitions {
                    name: "orders".into(),
                    count: 5
                },
                BrokerOp::AlterConfig {
                    name: "orders".into(),
                    changes: vec![ConfigChange::Set("retention.ms".into(), "2000".into())]
                }
            ]
        );
        assert!(!plan.drift, "a spec change is not drift");
        assert_eq!(reason(&plan, READY), "False/Updating");
    }

    #[test]
    fn a_config_removed_from_the_spec_goes_back_to_the_default() {
        let old = spec(1, &[("retention.ms", "1000")]);
        let status = ready_status(&old, 1, "id-1", 1);
        let new = spec(1, &[]);
        let plan = decide(
            &view(&new, &status, 2),
            &observed("id-1", 1, &[("retention.ms", "1000")]),
            &now(),
        );
        assert_eq!(
            plan.ops,
            vec![BrokerOp::AlterConfig {
                name: "orders".into(),
                changes: vec![ConfigChange::Delete("retention.ms".into())]
            }]
        );
        assert!(plan.status.config.is_empty());
    }

    #[test]
    fn lower_partitions_and_other_replication_are_refused_and_reported_once() {
        let old = spec(4, &[]);
        let status = ready_status(&old, 1, "id-1", 4);
        let mut new = spec(2, &[]);
        new.replication_factor = Some(3);
        let plan = decide(&view(&new, &status, 2), &observed("id-1", 4, &[]), &now());
        assert!(plan.ops.is_empty());
        assert_eq!(reason(&plan, READY), "False/PartitionDecreaseRefused");
        assert_eq!(reason(&plan, DEGRADED), "True/PartitionDecreaseRefused");
        let message = &condition(&plan.status, DEGRADED).expect("degraded").message;
        assert!(message.contains("cannot remove partitions"), "{message}");
        assert!(message.contains("replicationFactor is 3"), "{message}");
        assert_eq!(plan.events.len(), 1);
        assert!(plan.events[0].warning);
        let again = decide(
            &view(&new, &plan.status, 2),
            &observed("id-1", 4, &[]),
            &now(),
        );
        assert!(again.events.is_empty(), "reported once: {:?}", again.events);
        assert_eq!(again.status, plan.status);
    }

    #[test]
    fn changes_made_outside_vigil_are_drift_and_reverted() {
        let spec = spec(3, &[("retention.ms", "1000")]);
        let status = ready_status(&spec, 1, "id-1", 3);
        let outside = observed("id-1", 3, &[("retention.ms", "5")]);
        assert!(drifted(&status, &outside));
        let plan = decide(&view(&spec, &status, 1), &outside, &now());
        assert!(plan.drift);
        assert_eq!(
            plan.ops,
            vec![BrokerOp::AlterConfig {
                name: "orders".into(),
                changes: vec![ConfigChange::Set("retention.ms".into(), "1000".into())]
            }]
        );
        assert_eq!(plan.events[0].reason, EVENT_DRIFT);

        // Deleted outside: created again, reported.
        assert!(drifted(&status, &Observed::default()));
        let plan = decide(&view(&spec, &status, 1), &Observed::default(), &now());
        assert!(plan.drift && plan.mark_creating);
        assert!(matches!(plan.ops[0], BrokerOp::Create { .. }));
        assert_eq!(plan.events[0].reason, EVENT_RECREATED);
    }

    #[test]
    fn a_foreign_topic_is_left_alone_unless_adopted() {
        let mut spec = spec(3, &[]);
        let status = TopicStatus::default();
        let plan = decide(&view(&spec, &status, 1), &observed("x", 1, &[]), &now());
        assert!(plan.ops.is_empty());
        assert_eq!(reason(&plan, READY), "False/TopicNotOwned");
        assert_eq!(plan.status.topic_id, None);
        assert!(!drifted(&plan.status, &Observed::default()));

        spec.adopt = Some(true);
        let plan = decide(&view(&spec, &status, 2), &observed("x", 1, &[]), &now());
        assert_eq!(plan.status.topic_id.as_deref(), Some("x"));
        assert_eq!(
            plan.ops,
            vec![BrokerOp::AddPartitions {
                name: "orders".into(),
                count: 3
            }]
        );
        assert_eq!(plan.events[0].reason, EVENT_ADOPTED);
    }

    #[test]
    fn deletion_deletes_only_our_topic_and_honours_retain() {
        let spec = spec(1, &[]);
        let status = ready_status(&spec, 1, "id-1", 1);
        let mut v = view(&spec, &status, 1);
        v.deleting = true;
        let plan = decide(&v, &observed("id-1", 1, &[]), &now());
        assert_eq!(
            plan.ops,
            vec![BrokerOp::Delete {
                name: "orders".into()
            }]
        );
        assert!(!plan.remove_finalizer);
        assert_eq!(reason(&plan, DELETING), "True/DeletingTopic");

        let plan = decide(&v, &Observed::default(), &now());
        assert!(plan.ops.is_empty() && plan.remove_finalizer);

        let plan = decide(&v, &observed("someone-elses", 1, &[]), &now());
        assert!(plan.ops.is_empty() && plan.remove_finalizer);
        assert_eq!(plan.events[0].reason, EVENT_LEFT);

        v.retain = true;
        let plan = decide(&v, &observed("id-1", 1, &[]), &now());
        assert!(plan.ops.is_empty() && plan.remove_finalizer);
        assert_eq!(plan.events[0].reason, EVENT_RETAINED);
    }

    #[test]
    fn configs_set_on_the_topic_outside_the_spec_are_reverted_except_replication_throttles() {
        let spec = spec(3, &[("retention.ms", "1000")]);
        let status = ready_status(&spec, 1, "id-1", 3);
        let behind_our_back = set_on_topic(
            observed(
                "id-1",
                3,
                &[
                    ("retention.ms", "1000"),
                    ("cleanup.policy", "compact"),
                    ("leader.replication.throttled.replicas", "0:1"),
                    ("segment.ms", "604800000"),
                ],
            ),
            &[
                "retention.ms",
                "cleanup.policy",
                "leader.replication.throttled.replicas",
            ],
        );
        assert!(drifted(&status, &behind_our_back));
        let plan = decide(&view(&spec, &status, 1), &behind_our_back, &now());
        assert_eq!(
            plan.ops,
            vec![BrokerOp::AlterConfig {
                name: "orders".into(),
                changes: vec![ConfigChange::Delete("cleanup.policy".into())],
            }],
            "only the undeclared config set on the topic goes back to its default"
        );
        assert!(plan.drift);
        assert_eq!(plan.events[0].reason, EVENT_DRIFT);
        assert!(
            plan.events[0]
                .note
                .contains("cleanup.policy to its default")
        );

        // A throttle alone (a reassignment in progress) is neither drift nor reverted.
        let throttled = set_on_topic(
            observed(
                "id-1",
                3,
                &[
                    ("retention.ms", "1000"),
                    ("follower.replication.throttled.replicas", "0:2"),
                ],
            ),
            &["retention.ms", "follower.replication.throttled.replicas"],
        );
        assert!(!drifted(&status, &throttled));
        assert!(
            decide(&view(&spec, &status, 1), &throttled, &now())
                .ops
                .is_empty()
        );
    }

    #[test]
    fn a_key_dropped_from_the_spec_goes_back_to_its_default_once() {
        let old = spec(3, &[("retention.ms", "1000"), ("segment.ms", "60000")]);
        let status = ready_status(&old, 1, "id-1", 3);
        let new = spec(3, &[("retention.ms", "1000")]);
        // Known from the status and reported set on the topic: one Delete, not two.
        let seen = set_on_topic(
            observed(
                "id-1",
                3,
                &[("retention.ms", "1000"), ("segment.ms", "60000")],
            ),
            &["retention.ms", "segment.ms"],
        );
        let plan = decide(&view(&new, &status, 2), &seen, &now());
        assert_eq!(
            plan.ops,
            vec![BrokerOp::AlterConfig {
                name: "orders".into(),
                changes: vec![ConfigChange::Delete("segment.ms".into())],
            }]
        );
        assert!(!plan.drift, "a spec change is not drift");
    }

    #[test]
    fn renaming_is_refused() {
        let mut spec = spec(1, &[]);
        let status = ready_status(&spec, 1, "id-1", 1);
        spec.topic_name = Some("renamed".into());
        let plan = decide(&view(&spec, &status, 2), &observed("id-1", 1, &[]), &now());
        assert!(plan.ops.is_empty());
        assert_eq!(reason(&plan, READY), "False/TopicNameImmutable");
        assert_eq!(plan.status.topic_name.as_deref(), Some("orders"));
    }

    #[test]
    fn failures_set_ready_or_deleting() {
        let mut status = TopicStatus::default();
        assert!(mark_failure(
            &mut status,
            Some(1),
            true,
            REASON_BROKER_UNREACHABLE,
            "connection refused",
            &now()
        ));
        let deleting = condition(&status, DELETING).expect("deleting");
        assert_eq!(
            (deleting.status.as_str(), deleting.reason.as_str()),
            ("True", "BrokerUnreachable")
        );
        assert!(!mark_failure(
            &mut status,
            Some(1),
            true,
            REASON_BROKER_UNREACHABLE,
            "connection refused",
            &now()
        ));
    }

    #[test]
    fn the_broker_is_asked_unless_settled_or_a_deletion_leaves_kafka_alone() {
        let spec = spec(1, &[]);
        let empty = TopicStatus::default();
        let ready = ready_status(&spec, 1, "id-1", 1);
        assert!(asks_broker(&view(&spec, &empty, 1), false));
        assert!(!asks_broker(&view(&spec, &ready, 1), true), "settled");

        let mut deleting = view(&spec, &ready, 1);
        deleting.deleting = true;
        assert!(asks_broker(&deleting, true), "a deletion of our topic asks");
        deleting.retain = true;
        assert!(!asks_broker(&deleting, false), "retained");
        let mut never_created = view(&spec, &empty, 1);
        never_created.deleting = true;
        assert!(
            !asks_broker(&never_created, false),
            "nothing of ours in Kafka"
        );
        let adopting = TopicSpec {
            adopt: Some(true),
            ..spec.clone()
        };
        let mut adopted = view(&adopting, &empty, 1);
        adopted.deleting = true;
        assert!(asks_broker(&adopted, false));
    }

    #[test]
    fn without_the_broker_only_a_deletion_acts() {
        let spec = spec(1, &[]);
        let status = ready_status(&spec, 1, "id-1", 1);
        let settled = decide_without_broker(&view(&spec, &status, 1), &Observation::NotAsked);
        assert_eq!(settled, Plan::keep(&status), "settled: nothing at all");

        let mut v = view(&spec, &status, 1);
        v.deleting = true;
        v.retain = true;
        let plan = decide_without_broker(&v, &Observation::NotAsked);
        assert!(plan.remove_finalizer && plan.ops.is_empty());
        assert_eq!(plan.events[0].reason, EVENT_RETAINED);
        v.retain = false;
        let plan = decide_without_broker(&v, &Observation::NotAsked);
        assert!(plan.remove_finalizer && plan.events.is_empty());
    }

    #[test]
    fn a_failed_look_is_reported_once_and_fails_the_reconcile() {
        let spec = spec(1, &[]);
        let status = ready_status(&spec, 1, "id-1", 1);
        let failed = Observation::Failed(Failure {
            reason: REASON_BROKER_UNREACHABLE,
            message: "connection refused".into(),
        });
        let plan = decide_without_broker(&view(&spec, &status, 1), &failed);
        assert_eq!(reason(&plan, READY), "False/BrokerUnreachable");
        assert_eq!(reason(&plan, DEGRADED), "True/BrokerUnreachable");
        assert_eq!(plan.events.len(), 1);
        assert!(plan.events[0].warning);
        assert_eq!(
            plan.failure.as_ref().map(|f| f.reason),
            Some(REASON_BROKER_UNREACHABLE)
        );
        assert!(plan.ops.is_empty());

        let again = decide_without_broker(&view(&spec, &plan.status, 1), &failed);
        assert!(again.events.is_empty(), "not news: {:?}", again.events);
        assert_eq!(again.status, plan.status, "no status write");
        assert!(again.failure.is_some(), "still failing");
    }

    #[test]
    fn after_the_writes_the_status_records_kafka_and_nothing_more_is_written() {
        let old = spec(3, &[]);
        let status = ready_status(&old, 1, "id-1", 3);
        let new = spec(5, &[]);
        let first = decide(&view(&new, &status, 2), &observed("id-1", 3, &[]), &now());
        assert_eq!(first.ops.len(), 1);
        let raised = Written {
            done: written_note(&first.ops[0], None).into_iter().collect(),
            failure: None,
        };

        // Kafka shows the new partitions: ready, the write's Event first.
        let settled = view(&new, &first.status, 2);
        let done = decide_after(
            &settled,
            &Observation::Broker(observed("id-1", 5, &[])),
            &raised,
            &now(),
        );
        assert!(done.ops.is_empty() && !done.look_again && done.failure.is_none());
        assert_eq!(reason(&done, READY), "True/TopicReady");
        assert_eq!(done.status.partitions, Some(5));
        assert_eq!(done.events[0].reason, EVENT_UPDATED);

        // Not yet: no second write, a look soon.
        let pending = decide_after(
            &settled,
            &Observation::Broker(observed("id-1", 3, &[])),
            &raised,
            &now(),
        );
        assert!(pending.ops.is_empty() && pending.look_again);
        assert!(!pending.mark_creating && !pending.drift);
        assert_eq!(
            pending.status, first.status,
            "nothing decided before the next look"
        );
        assert_eq!(
            pending.events.len(),
            1,
            "only the write's Event: {:?}",
            pending.events
        );
    }

    #[test]
    fn a_config_applied_beside_a_refused_partition_raise_shows_in_the_same_status() {
        // The case a broker without CreatePartitions (Tansu) meets: both writes go out, the
        // config lands, the raise is refused. The status written then shows the new config.
        let old = spec(2, &[("retention.ms", "1000")]);
        let status = ready_status(&old, 1, "id-1", 2);
        let new = spec(4, &[("retention.ms", "2000")]);
        let first = decide(
            &view(&new, &status, 2),
            &observed("id-1", 2, &[("retention.ms", "1000")]),
            &now(),
        );
        assert_eq!(first.ops.len(), 2, "{:?}", first.ops);
        let written = Written {
            done: first
                .ops
                .iter()
                .filter(|op| matches!(op, BrokerOp::AlterConfig { .. }))
                .filter_map(|op| written_note(op, None))
                .collect(),
            failure: Some(Failure {
                reason: REASON_BROKER_REFUSED,
                message: "CreatePartitions: not supported".into(),
            }),
        };
        let after = decide_after(
            &view(&new, &first.status, 2),
            &Observation::Broker(observed("id-1", 2, &[("retention.ms", "2000")])),
            &written,
            &now(),
        );
        assert!(after.ops.is_empty() && after.failure.is_some());
        assert_eq!(after.status.config["retention.ms"], "2000");
        assert_eq!(after.status.partitions, Some(2), "the real partitions");
        assert_eq!(reason(&after, DEGRADED), "True/BrokerRefused");
    }

    #[test]
    fn a_topic_deleted_between_a_write_and_its_check_is_drift_for_the_next_look() {
        let declared = spec(3, &[("retention.ms", "86400000")]);
        let status = ready_status(&declared, 1, "id-1", 3);
        // A config changed outside Vigil: restored (drift).
        let first = decide(
            &view(&declared, &status, 1),
            &observed("id-1", 3, &[("retention.ms", "5")]),
            &now(),
        );
        assert!(first.drift && first.ops.len() == 1);
        let restored = Written {
            done: written_note(&first.ops[0], None).into_iter().collect(),
            failure: None,
        };
        // The check after the write finds the topic gone: nothing decided, no Event of it.
        let settled = view(&declared, &first.status, 1);
        let after = decide_after(
            &settled,
            &Observation::Broker(Observed::default()),
            &restored,
            &now(),
        );
        assert!(after.look_again && after.ops.is_empty() && !after.drift);
        assert_eq!(
            after.status.topic_id.as_deref(),
            Some("id-1"),
            "the id is kept"
        );
        assert!(
            after.events.iter().all(|e| e.reason != EVENT_RECREATED),
            "{:?}",
            after.events
        );
        // The next look: the deletion is drift, reported once, and the topic created again.
        let next = decide(
            &view(&declared, &after.status, 1),
            &Observed::default(),
            &now(),
        );
        assert!(next.drift);
        assert_eq!(next.events[0].reason, EVENT_RECREATED);
        assert!(matches!(next.ops[0], BrokerOp::Create { .. }));
    }

    #[test]
    fn a_failed_write_is_reported_fails_the_reconcile_and_keeps_the_finalizer() {
        let spec = spec(1, &[]);
        let status = ready_status(&spec, 1, "id-1", 1);
        let mut v = view(&spec, &status, 1);
        v.deleting = true;
        let first = decide(&v, &observed("id-1", 1, &[]), &now());
        let refused = Written {
            done: Vec::new(),
            failure: Some(Failure {
                reason: REASON_BROKER_REFUSED,
                message: format!("{}: not allowed", first.ops[0].describe()),
            }),
        };
        let settled = TopicView {
            status: &first.status,
            ..v.clone()
        };
        let plan = decide_after(
            &settled,
            &Observation::Broker(Observed::default()),
            &refused,
            &now(),
        );
        assert!(!plan.remove_finalizer, "the finalizer stays");
        assert_eq!(reason(&plan, DELETING), "True/BrokerRefused");
        assert_eq!(plan.failure, refused.failure);
        let last = plan.events.last().expect("an Event");
        assert!(last.warning && last.note.contains("deleting topic orders"));
    }

    #[test]
    fn writes_say_what_they_did() {
        let create = BrokerOp::Create {
            name: "orders".into(),
            partitions: 3,
            replication_factor: -1,
            config: BTreeMap::new(),
        };
        assert_eq!(
            written_note(&create, Some("id-9")).map(|n| n.note),
            Some("created topic orders (id id-9) with 3 partitions".to_owned())
        );
        assert_eq!(written_note(&create, None), None, "already there");
        let alter = BrokerOp::AlterConfig {
            name: "orders".into(),
            changes: vec![
                ConfigChange::Set("retention.ms".into(), "1".into()),
                ConfigChange::Delete("segment.ms".into()),
            ],
        };
        assert_eq!(
            written_note(&alter, None).map(|n| n.note),
            Some("set config of topic orders: retention.ms=1, segment.ms (default)".to_owned())
        );
    }
}
