//! The running KafkaTopic controller: a cache of Topics, one admin client per cluster, the
//! finalizer, the apply step that turns a [`Plan`] into broker writes and a status, and the drift
//! poll that notices changes made in Kafka behind Vigil's back.
//!
//! Broker traffic: a reconcile (on a Topic change, or when the drift poll flags the topic) reads
//! the topic with one `Metadata` and one `DescribeConfigs` request and writes only what differs.
//! The drift poll sends, per cluster and per `drift_interval`, one `Metadata` and one
//! `DescribeConfigs` for all of that cluster's topics together — whatever their number — and
//! reconciles only the topics that changed. Nothing else reaches the broker.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource as _, ResourceExt as _};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tokio::sync::mpsc;
use vigil_apis::HasConditions as _;
use vigil_apis::kafka_topic::{ClusterRef, SaslMechanism as ApiSasl, Topic, TopicStatus};
use vigil_kafka::{
    Admin, ClientConfig, RequestCounts, SaslConfig, SaslMechanism, ScramHash, TlsConfig,
};
use vigil_runtime::Runtime;
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::cache::{Cache, Source as _};
use vigil_runtime::finalizer;
use vigil_runtime::leader::Leadership;

use super::decide::{
    self, BrokerOp, EventNote, FINALIZER, Failure, Inputs, Observation, Observed, Plan, TopicView,
    Written, decide,
};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "kafkatopic";
/// Field manager of every write.
pub const FIELD_MANAGER: &str = "vigil-kafkatopic";
/// Topics reconciled at once.
const RECONCILE_CONCURRENCY: u16 = 8;

/// What this controller's code does with the API (kept in step with the calls below).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    // Watched through a reflector; patched to add and remove the finalizer.
    crate::permissions::Permission {
        group: "kafka.vigil.dev",
        resources: &["topics"],
        verbs: &["list", "watch", "patch"],
    },
    crate::permissions::Permission {
        group: "kafka.vigil.dev",
        resources: &["topics/status"],
        verbs: &["patch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// What reading TLS CAs and SASL credentials from Secrets adds (`vigil manifests
/// --kafka-topic-secrets` grants it): without it a Topic naming a Secret reports
/// `CredentialsUnavailable` (forbidden) and is retried.
pub const SECRET_PERMISSIONS: &[crate::permissions::Permission] =
    &[crate::permissions::Permission {
        group: "",
        resources: &["secrets"],
        verbs: &["get"],
    }];

/// How the controller talks to brokers.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Interval of the drift poll; zero turns it off (then nothing reaches a broker in steady
    /// state, and changes made in Kafka are noticed at the next change of the Topic).
    pub drift_interval: Duration,
    /// Longest wait between retries of a failing Topic (an unreachable broker, a refusal).
    pub retry_max: Duration,
    /// Bound on connecting to a broker and on each request.
    pub broker_timeout: Duration,
    /// Namespaces whose Topics are managed; `None`: all.
    pub namespaces: Option<BTreeSet<String>>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            drift_interval: Duration::from_secs(60),
            retry_max: Duration::from_secs(60),
            broker_timeout: Duration::from_secs(10),
            namespaces: None,
        }
    }
}

/// Why a reconcile failed (it is retried with backoff).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("{0}")]
    Broker(String),
    #[error("{0}")]
    Credentials(String),
    /// The topic is still going from Kafka. kube-runtime's finalizer helper releases the object
    /// on any successful cleanup, so a deletion under way waits as a failure: retried with the
    /// backoff, the finalizer kept until Kafka no longer shows the topic.
    #[error("topic {0} is still being deleted from Kafka")]
    DeletionPending(String),
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    api: &'static str,
    /// `ok`, `error` (the broker answered with an error) or `unavailable` (no answer): the
    /// ratio of `unavailable` is the broker availability the alerts watch.
    result: &'static str,
}

/// One admin client per cluster and credentials, shared by every Topic that names them.
#[derive(Default)]
struct Admins {
    clients: Mutex<HashMap<ClientConfig, Arc<Admin>>>,
    /// The configuration last built for a Topic namespace and cluster reference (what the drift
    /// poll uses, without reading Secrets).
    configs: Mutex<HashMap<(String, ClusterRef), ClientConfig>>,
}

impl Admins {
    fn get(&self, config: ClientConfig, counts: &Arc<RequestCounts>) -> Arc<Admin> {
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(config.clone())
            .or_insert_with(|| Arc::new(Admin::with_counts(config, counts.clone())))
            .clone()
    }

    fn remember(&self, namespace: &str, cluster: &ClusterRef, config: &ClientConfig) {
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((namespace.to_owned(), cluster.clone()), config.clone());
    }

    fn known(&self, namespace: &str, cluster: &ClusterRef) -> Option<ClientConfig> {
        self.configs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&(namespace.to_owned(), cluster.clone()))
            .cloned()
    }
}

/// Shared by reconciles.
struct Context {
    runtime: Runtime,
    settings: Settings,
    admins: Admins,
    /// Every broker request (`vigil_kafka_broker_requests_total{api,result}`).
    requests: Arc<RequestCounts>,
    /// `vigil_kafka_topic_drift_total`: changes made in Kafka outside Vigil, found and reverted.
    drift: Counter,
    /// The resourceVersion each Topic had when a reconcile last left it as declared: an event
    /// for that very version (this controller's own status write) needs no broker round trip.
    settled: Mutex<HashMap<ObjectRef<Topic>, String>>,
}

/// Runs the controller on a Manager's runtime until it shuts down.
pub async fn run_on(runtime: Runtime, settings: Settings) {
    let registry = runtime.metrics();
    let request_family = Family::<RequestLabels, Counter>::default();
    registry.register(
        "vigil_kafka_broker_requests",
        "Requests to Kafka brokers by API (Metadata, CreateTopics, …) and result (ok, error, unavailable)",
        request_family.clone(),
    );
    let drift = Counter::default();
    registry.register(
        "vigil_kafka_topic_drift",
        "Topics found changed in Kafka outside Vigil (and restored)",
        drift.clone(),
    );
    let requests = Arc::new(RequestCounts::with_hook(move |api, outcome| {
        request_family
            .get_or_create(&RequestLabels {
                api,
                result: outcome.as_str(),
            })
            .inc();
    }));
    let topics = runtime
        .cache::<Topic>()
        .namespaces(settings.namespaces.as_ref())
        .slim(slim_topic)
        .build();
    let retry_max = settings.retry_max;
    let ctx = Arc::new(Context {
        runtime: runtime.clone(),
        settings,
        admins: Admins::default(),
        requests,
        drift,
        settled: Mutex::default(),
    });

    let (drift_tx, drift_rx) = mpsc::channel::<ObjectRef<Topic>>(1024);
    if !ctx.settings.drift_interval.is_zero() {
        runtime.spawn(poll_drift(ctx.clone(), topics.clone(), drift_tx));
    }
    let drifted = futures::stream::unfold(drift_rx, |mut rx| async move {
        rx.recv().await.map(|r| (r, rx))
    });
    let forget_ctx = ctx.clone();
    runtime
        .controller(NAME, &topics)
        .concurrency(RECONCILE_CONCURRENCY)
        .triggers(drifted)
        // Becoming leader (again): look at everything, the broker included — another replica
        // may have acted meanwhile.
        .on_leadership(move |_| {
            forget_ctx
                .settled
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clear();
        })
        // Failures are mostly a broker's outages or refusals: slower to start, capped by
        // `retry_max`, and quarantined only after thirty.
        .backoff(BackoffPolicy {
            base: Duration::from_millis(100),
            max: retry_max,
            quarantine_after: 30,
            quarantine_interval: retry_max,
            ..BackoffPolicy::default()
        })
        .quarantine_condition(Topic::conditions)
        .field_manager(FIELD_MANAGER)
        .run(reconcile, ctx)
        .await;
}

/// What the cache keeps of a Topic: everything but managed fields.
fn slim_topic(topic: &mut Topic) {
    topic.metadata.managed_fields = None;
}

fn view(topic: &Topic) -> TopicView<'_> {
    static EMPTY: std::sync::OnceLock<TopicStatus> = std::sync::OnceLock::new();
    TopicView {
        name: topic.metadata.name.as_deref().unwrap_or_default(),
        generation: topic.metadata.generation,
        spec: &topic.spec,
        status: topic
            .status
            .as_ref()
            .unwrap_or_else(|| EMPTY.get_or_init(TopicStatus::default)),
        deleting: topic.metadata.deletion_timestamp.is_some(),
        retain: topic.retain_on_delete(),
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The finalizer comes first (the update brings the next pass), so that no topic is ever created
/// for an object that could vanish without Vigil seeing it go; a deletion releases the object
/// once the topic is gone from Kafka (or retained).
async fn reconcile(
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

/// The client configuration of a Topic's cluster, with credentials read from Secrets in its
/// namespace.
async fn client_config(ctx: &Context, topic: &Topic) -> Result<ClientConfig, String> {
    let namespace = topic.namespace().unwrap_or_default();
    let cluster = &topic.spec.cluster;
    let secrets: Api<Secret> = Api::namespaced(ctx.runtime.client().clone(), &namespace);
    let read = |name: String, key: String| {
        let secrets = secrets.clone();
        let namespace = namespace.clone();
        async move {
            let secret = secrets
                .get_opt(&name)
                .await
                .map_err(|e| format!("reading Secret {name}: {e}"))?
                .ok_or_else(|| format!("Secret {name} not found in namespace {namespace}"))?;
            secret
                .data
                .and_then(|mut d| d.remove(&key))
                .map(|b| b.0)
                .ok_or_else(|| format!("Secret {name} has no key {key:?}"))
        }
    };
    let tls = match &cluster.tls {
        None => None,
        Some(tls) => Some(TlsConfig {
            ca_pem: match &tls.ca_secret {
                None => None,
                Some(r) => Some(
                    read(
                        r.name.clone(),
                        r.key.clone().unwrap_or_else(|| "ca.crt".into()),
                    )
                    .await?,
                ),
            },
        }),
    };
    let sasl = match &cluster.sasl {
        None => None,
        Some(sasl) => {
            let text = |bytes: Vec<u8>, key: &str| {
                String::from_utf8(bytes)
                    .map_err(|_| format!("Secret {}: {key} is not UTF-8", sasl.secret_name))
            };
            Some(SaslConfig {
                mechanism: match sasl.mechanism {
                    ApiSasl::Plain => SaslMechanism::Plain,
                    ApiSasl::ScramSha256 => SaslMechanism::Scram(ScramHash::Sha256),
                    ApiSasl::ScramSha512 => SaslMechanism::Scram(ScramHash::Sha512),
                },
                username: text(
                    read(sasl.secret_name.clone(), "username".into()).await?,
                    "username",
                )?,
                password: text(
                    read(sasl.secret_name.clone(), "password".into()).await?,
                    "password",
                )?,
            })
        }
    };
    let config = ClientConfig {
        bootstrap: cluster.bootstrap_servers.clone(),
        tls,
        sasl,
        timeout: ctx.settings.broker_timeout,
    };
    ctx.admins
        .remember(&topic.namespace().unwrap_or_default(), cluster, &config);
    Ok(config)
}

/// The broker's view of one topic: its description, and its configs if it exists.
async fn look(admin: &Admin, name: &str) -> Observation {
    let names = [name.to_owned()];
    let described = async {
        let topic = admin.describe_topics(&names).await?.remove(name);
        let configs = match &topic {
            Some(_) => admin
                .describe_configs(&names)
                .await?
                .remove(name)
                .unwrap_or_default(),
            None => BTreeMap::new(),
        };
        Ok::<_, vigil_kafka::Error>(Observed::from_broker(topic, configs))
    };
    match described.await {
        Ok(observed) => Observation::Broker(observed),
        Err(e) => Observation::Failed(broker_failure(&e, e.to_string())),
    }
}

fn broker_failure(error: &vigil_kafka::Error, message: String) -> Failure {
    let reason = if error.is_connection() {
        decide::REASON_BROKER_UNREACHABLE
    } else if matches!(error, vigil_kafka::Error::Tls(_)) {
        decide::REASON_TLS
    } else {
        decide::REASON_BROKER_REFUSED
    };
    Failure { reason, message }
}

impl Context {
    /// Whether the Topic is unchanged since a reconcile left it as declared; forgets that
    /// record otherwise (the next reconcile that settles records it again).
    fn unchanged_since_settled(&self, topic: &Topic, deleting: bool) -> bool {
        let reference = ObjectRef::from_obj(topic);
        let mut settled = self.settled.lock().unwrap_or_else(|e| e.into_inner());
        if !deleting
            && topic.metadata.resource_version.is_some()
            && settled.get(&reference) == topic.metadata.resource_version.as_ref()
        {
            return true;
        }
        settled.remove(&reference);
        false
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
        return finish(ctx, topic, decide_on(&Observation::NotAsked)).await;
    }
    let config = match client_config(ctx, topic).await {
        Ok(config) => config,
        Err(message) => {
            let failure = Failure {
                reason: decide::REASON_CREDENTIALS,
                message,
            };
            return finish(ctx, topic, decide_on(&Observation::Failed(failure))).await;
        }
    };
    let admin = ctx.admins.get(config, &ctx.requests);
    let name = view.managed_name();
    let plan = decide_on(&look(&admin, &name).await);
    if plan.ops.is_empty() {
        return finish(ctx, topic, plan).await;
    }
    let written = write(ctx, topic, &admin, &plan).await?;
    let after = decide(&Inputs {
        topic: TopicView {
            status: &plan.status,
            ..view.clone()
        },
        observation: &look(&admin, &name).await,
        written: Some(&written),
        now: &self::now(),
    });
    finish(ctx, topic, after).await
}

/// Executes a plan's broker writes (after recording `status.creating` when it says so) and
/// publishes its Events. Every write goes out even when one fails (a refused partition
/// increase must not hold a config change back).
async fn write(ctx: &Context, topic: &Topic, admin: &Admin, plan: &Plan) -> Result<Written, Error> {
    if plan.drift {
        ctx.drift.inc();
    }
    if plan.mark_creating {
        // Recorded before the create goes out: after a crash, the topic is known to be ours.
        patch_status(ctx, topic, &plan.status).await?;
    }
    let mut written = Written::default();
    for op in &plan.ops {
        match execute(admin, op).await {
            Ok(created_id) => written
                .done
                .extend(decide::written_note(op, created_id.as_deref())),
            Err(e) => {
                if written.failure.is_none() {
                    written.failure = Some(broker_failure(&e, format!("{}: {e}", op.describe())));
                }
            }
        }
    }
    publish(ctx, topic, &plan.events).await;
    Ok(written)
}

/// Executes the rest of a plan: its Events, the status where it differs, and the reconcile's
/// outcome (for a deletion, success releases the object: the finalizer helper removes the
/// finalizer).
async fn finish(ctx: &Context, topic: &Topic, plan: Plan) -> Result<Action, Error> {
    publish(ctx, topic, &plan.events).await;
    if plan.remove_finalizer && plan.failure.is_none() {
        ctx.settled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ObjectRef::from_obj(topic));
        return Ok(Action::await_change());
    }
    let mut version = topic.metadata.resource_version.clone();
    if topic.status.as_ref() != Some(&plan.status) {
        version = patch_status(ctx, topic, &plan.status).await?;
    }
    if let Some(failure) = plan.failure {
        return Err(match failure.reason {
            decide::REASON_CREDENTIALS => Error::Credentials(failure.message),
            _ => Error::Broker(failure.message),
        });
    }
    if topic.metadata.deletion_timestamp.is_some() {
        return Err(Error::DeletionPending(view(topic).managed_name()));
    }
    if plan.look_again {
        return Ok(Action::requeue(Duration::from_millis(500)));
    }
    if let Some(version) = version {
        ctx.settled
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ObjectRef::from_obj(topic), version);
    }
    Ok(Action::await_change())
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

/// Writes the status; returns the object's new resourceVersion — `None` when the object is gone,
/// or when its spec changed since `topic` was read: the write (a merge patch, unconditional)
/// landed on the newer object, and that version must not count as settled, or the spec change
/// would never be applied.
async fn patch_status(
    ctx: &Context,
    topic: &Topic,
    status: &TopicStatus,
) -> Result<Option<String>, Error> {
    let api: Api<Topic> = Api::namespaced(
        ctx.runtime.client().clone(),
        &topic.namespace().unwrap_or_default(),
    );
    let patch = status_patch(topic.status.as_ref(), status);
    match api
        .patch_status(
            &topic.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(updated) if updated.metadata.generation == topic.metadata.generation => {
            Ok(updated.metadata.resource_version)
        }
        Ok(_) => Ok(None),
        // Gone: nothing to report on.
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// The merge patch from `old` to `new`: a merge patch leaves out what serializes as absent, so
/// cleared fields and config keys are sent as `null` explicitly, and lists whole.
fn status_patch(old: Option<&TopicStatus>, new: &TopicStatus) -> serde_json::Value {
    let mut patch = serde_json::json!({ "status": new });
    let body = &mut patch["status"];
    for field in [
        "observedGeneration",
        "topicId",
        "creating",
        "partitions",
        "replicationFactor",
        "topicName",
    ] {
        if body.get(field).is_none() {
            body[field] = serde_json::Value::Null;
        }
    }
    body["conditions"] = serde_json::json!(new.conditions);
    let mut config = serde_json::json!(new.config);
    for key in old.iter().flat_map(|o| o.config.keys()) {
        if !new.config.contains_key(key) {
            config[key] = serde_json::Value::Null;
        }
    }
    body["config"] = config;
    patch
}

async fn publish(ctx: &Context, topic: &Topic, notes: &[EventNote]) {
    ctx.runtime
        .recorder()
        .publish_all(&topic.object_ref(&()), notes, "Reconcile")
        .await;
}

/// Every `drift_interval`, per cluster: one `Metadata` and one `DescribeConfigs` request for all
/// the Topics on it that Vigil manages; a topic that no longer matches its recorded status is
/// reconciled (which restores it and reports the drift).
async fn poll_drift(
    ctx: Arc<Context>,
    topics: Cache<Topic>,
    drifted: mpsc::Sender<ObjectRef<Topic>>,
) {
    if !topics.synced().wait().await {
        return;
    }
    let mut tick = tokio::time::interval(ctx.settings.drift_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tick.tick().await;
    loop {
        tick.tick().await;
        if *ctx.runtime.leadership().borrow() != Leadership::Leading {
            continue;
        }
        let mut groups: HashMap<ClientConfig, Vec<Arc<Topic>>> = HashMap::new();
        for topic in topics.state() {
            let managed = topic.metadata.deletion_timestamp.is_none()
                && topic.status.as_ref().is_some_and(|s| s.topic_id.is_some());
            if !managed {
                continue;
            }
            let namespace = topic.namespace().unwrap_or_default();
            if let Some(config) = ctx.admins.known(&namespace, &topic.spec.cluster) {
                groups.entry(config).or_default().push(topic);
            }
        }
        for (config, members) in groups {
            let admin = ctx.admins.get(config, &ctx.requests);
            let names: Vec<String> = members
                .iter()
                .filter_map(|t| t.status.as_ref().and_then(|s| s.topic_name.clone()))
                .collect();
            let described = match admin.describe_topics(&names).await {
                Ok(d) => d,
                Err(e) => {
                    tracing::debug!(error = %e, "drift poll: describing topics failed");
                    continue;
                }
            };
            let existing: Vec<String> = described.keys().cloned().collect();
            let mut configs = match admin.describe_configs(&existing).await {
                Ok(c) => c,
                Err(e) => {
                    tracing::debug!(error = %e, "drift poll: describing configs failed");
                    continue;
                }
            };
            for topic in members {
                let Some(status) = &topic.status else {
                    continue;
                };
                let name = status.topic_name.clone().unwrap_or_default();
                let observed = Observed::from_broker(
                    described.get(&name).cloned(),
                    configs.remove(&name).unwrap_or_default(),
                );
                if decide::drifted(status, &observed) {
                    tracing::info!(topic = %name, "changed in Kafka outside Vigil");
                    let reference = ObjectRef::from_obj(topic.as_ref());
                    ctx.settled
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .remove(&reference);
                    let _ = drifted.send(reference).await;
                }
            }
        }
    }
}
