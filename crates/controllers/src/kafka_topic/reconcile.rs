//! The reconcile: through the finalizer, observe (credentials, the broker's view), decide, and
//! apply — broker writes ([`super::apply`]), then a second look and decision so the status
//! records the result; the status written only where it differs, the Events, and the reconcile's
//! outcome.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use vigil_apis::kafka_topic::{Topic, TopicStatus};
use vigil_kafka::Admin;
use vigil_runtime::{Runtime, finalizer};

use super::apply::{write, write_status};
use super::decide::{self, FINALIZER, Failure, Inputs, Observation, Plan, TopicView, decide};
use super::metrics::Metrics;
use super::model::{CredentialsError, Error, Settings};
use super::observe::{self, Admins, view};

/// Per Topic, the resourceVersion and the generation read when a reconcile left it as declared.
type Settled = HashMap<ObjectRef<Topic>, (String, Option<i64>)>;

/// Shared by reconciles (and the drift poll).
pub(super) struct Context {
    pub runtime: Runtime,
    pub settings: Settings,
    pub admins: Admins,
    pub metrics: Metrics,
    /// The resourceVersion and generation each Topic had when a reconcile last left it as
    /// declared: an event for that very version (this controller's own status write) needs no
    /// broker round trip. The generation is the one the reconcile read: should the status
    /// write land on a newer spec, that version does not count as settled.
    settled: Mutex<Settled>,
}

impl Context {
    pub fn new(runtime: Runtime, settings: Settings, metrics: Metrics) -> Self {
        Self {
            runtime,
            settings,
            admins: Admins::default(),
            metrics,
            settled: Mutex::default(),
        }
    }

    fn settled(&self) -> std::sync::MutexGuard<'_, Settled> {
        self.settled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets every settled Topic (becoming leader again: another replica may have acted).
    pub fn forget_all_settled(&self) {
        self.settled().clear();
    }

    /// Forgets that a Topic was settled (the drift poll saw it change in Kafka).
    pub fn forget_settled(&self, reference: &ObjectRef<Topic>) {
        self.settled().remove(reference);
    }

    /// Whether the Topic is unchanged since a reconcile left it as declared; forgets that
    /// record otherwise (the next reconcile that settles records it again).
    fn unchanged_since_settled(&self, topic: &Topic, deleting: bool) -> bool {
        let reference = ObjectRef::from_obj(topic);
        let mut settled = self.settled();
        if !deleting
            && let Some(version) = &topic.metadata.resource_version
            && settled.get(&reference) == Some(&(version.clone(), topic.metadata.generation))
        {
            return true;
        }
        settled.remove(&reference);
        false
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The finalizer comes first (the update brings the next pass), so that no topic is ever created
/// for an object that could vanish without Vigil seeing it go; a deletion releases the object
/// once the topic is gone from Kafka (or retained).
pub(super) async fn reconcile(
    topic: Arc<Topic>,
    ctx: Arc<Context>,
) -> Result<Action, finalizer::Error<Error>> {
    let api: Api<Topic> = Api::namespaced(
        ctx.runtime.client().clone(),
        &topic.namespace().unwrap_or_default(),
    );
    let ctx = ctx.as_ref();
    finalizer::finalized(
        &api,
        FINALIZER,
        topic,
        |topic| async move { apply_topic(&topic, ctx).await },
        |topic| async move { apply_topic(&topic, ctx).await },
    )
    .await
}

/// The error behind a decision's [`Failure`], kept as the reconcile error's source.
pub(super) enum Cause {
    Broker(vigil_kafka::Error),
    Credentials(CredentialsError),
}

/// The broker's view as the decision reads it, and the error behind a failure.
async fn observe_broker(admin: &Admin, name: &str) -> (Observation, Option<Cause>) {
    match observe::look(admin, name).await {
        Ok(observed) => (Observation::Broker(observed), None),
        Err(e) => {
            let failure = observe::broker_failure(&e, e.to_string());
            (Observation::Failed(failure), Some(Cause::Broker(e)))
        }
    }
}

/// The Topic's status as this reconcile last read or wrote it, and its resourceVersion then: a
/// status write sends what differs from it.
struct Current<'a> {
    status: Option<&'a TopicStatus>,
    version: Option<String>,
}

impl<'a> Current<'a> {
    fn read(topic: &'a Topic) -> Self {
        Self {
            status: topic.status.as_ref(),
            version: topic.metadata.resource_version.clone(),
        }
    }
}

/// Observes, decides, writes — and when the decision wrote to the broker, looks again and
/// decides on what Kafka holds now, so the status records the result.
async fn apply_topic(topic: &Topic, ctx: &Context) -> Result<Action, Error> {
    let view = view(topic);
    let now = now();
    let decide_on = |observation: &Observation| {
        decide(&Inputs {
            topic: view.clone(),
            observation,
            written: None,
            now: &now,
        })
    };
    if !decide::asks_broker(&view, ctx.unchanged_since_settled(topic, view.deleting)) {
        let plan = decide_on(&Observation::NotAsked);
        return finish(ctx, topic, Current::read(topic), plan, None).await;
    }
    let config = match observe::client_config(ctx, topic).await {
        Ok(config) => config,
        Err(e) => {
            let failure = Failure {
                reason: decide::REASON_CREDENTIALS,
                message: e.message(),
            };
            let plan = decide_on(&Observation::Failed(failure));
            let cause = Some(Cause::Credentials(e));
            return finish(ctx, topic, Current::read(topic), plan, cause).await;
        }
    };
    let admin = ctx.admins.get(config, &ctx.metrics.requests);
    let name = view.managed_name();
    let (observation, cause) = observe_broker(&admin, &name).await;
    let plan = decide_on(&observation);
    if plan.ops.is_empty() {
        return finish(ctx, topic, Current::read(topic), plan, cause).await;
    }
    let mut current = Current::read(topic);
    if plan.mark_creating {
        // Recorded before the create goes out: after a crash, the topic is known to be ours.
        current.version = write_status(ctx, topic, current.status, &plan.status).await?;
        current.status = Some(&plan.status);
    }
    let (written, write_cause) = write(ctx, topic, &admin, &plan).await?;
    let (observation, cause) = observe_broker(&admin, &name).await;
    let after = decide(&Inputs {
        topic: TopicView {
            status: &plan.status,
            ..view.clone()
        },
        observation: &observation,
        written: Some(&written),
        now: &self::now(),
    });
    // The decision reports the look's failure first, else the first failed write.
    finish(ctx, topic, current, after, cause.or(write_cause)).await
}

/// Executes the rest of a plan: its Events, the status where it differs, and the reconcile's
/// outcome (for a deletion, success releases the object: the finalizer helper removes the
/// finalizer). `cause` is the error behind the plan's failure.
async fn finish(
    ctx: &Context,
    topic: &Topic,
    current: Current<'_>,
    plan: Plan,
    cause: Option<Cause>,
) -> Result<Action, Error> {
    ctx.runtime.events(topic, &plan.events, "Reconcile").await;
    if plan.remove_finalizer && plan.failure.is_none() {
        ctx.forget_settled(&ObjectRef::from_obj(topic));
        return Ok(Action::await_change());
    }
    let mut version = current.version;
    if current.status != Some(&plan.status) {
        version = write_status(ctx, topic, current.status, &plan.status).await?;
    }
    if let Some(failure) = plan.failure {
        return Err(failed(failure, cause));
    }
    if topic.metadata.deletion_timestamp.is_some() {
        let topic = view(topic).managed_name();
        return Err(Error::DeletionPending { topic });
    }
    if plan.look_again {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    if let Some(version) = version {
        let settled = (version, topic.metadata.generation);
        ctx.settled().insert(ObjectRef::from_obj(topic), settled);
    }
    Ok(Action::await_change())
}

/// The reconcile error of a decision's failure, its message the condition's, with its cause.
fn failed(failure: Failure, cause: Option<Cause>) -> Error {
    let message = failure.message;
    match cause {
        Some(Cause::Credentials(source)) => Error::Credentials { message, source },
        Some(Cause::Broker(source)) => Error::Broker {
            message,
            source: Some(source),
        },
        // Every failure comes from a look or a write, which keep their error.
        None => Error::Broker {
            message,
            source: None,
        },
    }
}
