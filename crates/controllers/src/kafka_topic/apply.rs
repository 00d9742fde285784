//! The writes a decision asks for: the broker operations (every one goes out, the first
//! failure kept), and the status where it differs.

use vigil_apis::kafka_topic::{Topic, TopicStatus};
use vigil_kafka::Admin;

use super::decide::{self, BrokerOp, Plan, Written};
use super::model::Error;
use super::observe;
use super::reconcile::{Cause, Context};

/// Executes a plan's broker writes and publishes its Events. Every write goes out even when one fails (a refused partition
/// increase must not hold a config change back); the first failure's error comes back too.
pub(super) async fn write(
    ctx: &Context,
    topic: &Topic,
    admin: &Admin,
    plan: &Plan,
) -> Result<(Written, Option<Cause>), Error> {
    if plan.drift {
        ctx.metrics.drift.inc();
    }
    let mut written = Written::default();
    let mut cause = None;
    for op in &plan.ops {
        match execute(admin, op).await {
            Ok(created_id) => written
                .done
                .extend(decide::written_note(op, created_id.as_deref())),
            Err(e) => {
                if written.failure.is_none() {
                    let message = format!("{}: {e}", op.describe());
                    written.failure = Some(observe::broker_failure(&e, message));
                    cause = Some(Cause::Broker(e));
                }
            }
        }
    }
    ctx.runtime.events(topic, &plan.events, "Reconcile").await;
    Ok((written, cause))
}

/// Runs one broker write; for a create, the id Kafka gave the topic (`None`: it was already
/// there, created by an earlier attempt whose answer was lost — the next look decides).
async fn execute(admin: &Admin, op: &BrokerOp) -> vigil_kafka::Result<Option<String>> {
    match op {
        BrokerOp::Create {
            name,
            partitions,
            replication_factor,
            config,
        } => match admin
            .create_topic(name, *partitions, *replication_factor, config)
            .await
        {
            Ok(id) => Ok(Some(id.to_string())),
            Err(e) if e.code() == Some(vigil_kafka::TOPIC_ALREADY_EXISTS) => Ok(None),
            Err(e) => Err(e),
        },
        BrokerOp::AddPartitions { name, count } => {
            admin.create_partitions(name, *count).await?;
            Ok(None)
        }
        BrokerOp::AlterConfig { name, changes } => {
            admin.alter_configs(name, changes).await?;
            Ok(None)
        }
        BrokerOp::Delete { name } => {
            admin.delete_topic(name).await?;
            Ok(None)
        }
    }
}

/// Writes the status where it differs from `current` (through the runtime's status writer);
/// returns the object's new resourceVersion — `None` when the object is gone.
pub(super) async fn write_status(
    ctx: &Context,
    topic: &Topic,
    current: Option<&TopicStatus>,
    status: &TopicStatus,
) -> Result<Option<String>, Error> {
    let lists = ["conditions"];
    let base = assume_set(current);
    match ctx
        .runtime
        .write_status_with_lists(topic, Some(&base), status, &lists)
        .await
    {
        Ok(version) => Ok(version),
        // Gone: nothing to report on.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// `current` with every optional field set: the writer then clears each one the new status
/// leaves out, even when `current` (the object as last read, maybe behind the object's latest
/// status) does not show it.
fn assume_set(current: Option<&TopicStatus>) -> TopicStatus {
    let mut base = current.cloned().unwrap_or_default();
    base.observed_generation.get_or_insert(0);
    base.topic_name.get_or_insert_default();
    base.topic_id.get_or_insert_default();
    base.creating.get_or_insert(false);
    base.partitions.get_or_insert(0);
    base.replication_factor.get_or_insert(0);
    base
}
