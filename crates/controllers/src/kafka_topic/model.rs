//! What the KafkaTopic decision reads (the Topic's view, the broker's, the writes already made)
//! and returns (a [`Plan`]), the controller's settings and its errors.

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use vigil_apis::kafka_topic::{TopicSpec, TopicStatus};
use vigil_kafka::{ConfigChange, ConfigValue, TopicDescription};

/// An Event to emit.
pub use vigil_runtime::events::EventNote;

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

/// Why a reconcile failed (it is retried with backoff). `message` is what the Topic's
/// conditions and Events say; the source is the error behind it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("API request failed")]
    Api(#[from] kube::Error),
    /// The broker could not be reached, or refused a request (`source`: the client's error,
    /// absent only for a failure the decision made of none).
    #[error("{message}")]
    Broker {
        message: String,
        #[source]
        source: Option<vigil_kafka::Error>,
    },
    /// The credentials or CA the cluster reference names could not be read.
    #[error("{message}")]
    Credentials {
        message: String,
        #[source]
        source: CredentialsError,
    },
    /// The topic is still going from Kafka. kube-runtime's finalizer helper releases the object
    /// on any successful cleanup, so a deletion under way waits as a failure: retried with the
    /// backoff, the finalizer kept until Kafka no longer shows the topic.
    #[error("topic {topic} is still being deleted from Kafka")]
    DeletionPending { topic: String },
}

/// Why the credentials of a cluster reference could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("reading Secret {name}")]
    Read {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("Secret {name} not found in namespace {namespace}")]
    NotFound { name: String, namespace: String },
    #[error("Secret {name} has no key {key:?}")]
    MissingKey { name: String, key: String },
    #[error("Secret {name}: {key} is not UTF-8")]
    NotUtf8 {
        name: String,
        key: &'static str,
        #[source]
        source: std::string::FromUtf8Error,
    },
}

impl CredentialsError {
    /// What the Topic's condition says: this error and what caused it, as before the cause was
    /// kept (`reading Secret s: <the API's answer>`).
    pub fn message(&self) -> String {
        match self {
            Self::Read { source, .. } => format!("{self}: {source}"),
            _ => self.to_string(),
        }
    }
}

/// The Topic object, as decisions read it.
#[derive(Debug, Clone)]
pub struct TopicView<'a> {
    /// `metadata.name`.
    pub name: &'a str,
    pub generation: Option<i64>,
    pub spec: &'a TopicSpec,
    pub status: &'a TopicStatus,
    pub deleting: bool,
    /// `deletionPolicy: Retain` or the retain annotation.
    pub retain: bool,
}

impl TopicView<'_> {
    /// The Kafka topic this object manages: the one recorded at creation, else the declared one.
    pub fn managed_name(&self) -> String {
        self.status
            .topic_name
            .clone()
            .unwrap_or_else(|| self.declared_name())
    }

    pub fn declared_name(&self) -> String {
        self.spec
            .topic_name
            .clone()
            .unwrap_or_else(|| self.name.to_owned())
    }
}

/// What the broker says about the topic.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Observed {
    pub topic: Option<TopicDescription>,
    /// The topic's configs (values; `None`: no value).
    pub config: BTreeMap<String, Option<String>>,
    /// The configs set on the topic itself (not inherited from the broker's defaults).
    pub set_on_topic: BTreeSet<String>,
}

impl Observed {
    /// The view of a topic from its description and its `DescribeConfigs` entries.
    pub fn from_broker(
        topic: Option<TopicDescription>,
        configs: BTreeMap<String, ConfigValue>,
    ) -> Self {
        let set_on_topic = configs
            .iter()
            .filter(|(_, v)| v.set_on_topic)
            .map(|(k, _)| k.clone())
            .collect();
        let config = configs.into_iter().map(|(k, v)| (k, v.value)).collect();
        Self {
            topic,
            config,
            set_on_topic,
        }
    }
}

/// A write to the broker.
#[derive(Debug, Clone, PartialEq)]
pub enum BrokerOp {
    Create {
        name: String,
        partitions: i32,
        /// -1: the broker's default.
        replication_factor: i16,
        config: BTreeMap<String, String>,
    },
    AddPartitions {
        name: String,
        count: i32,
    },
    AlterConfig {
        name: String,
        changes: Vec<ConfigChange>,
    },
    Delete {
        name: String,
    },
}

/// What to do.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Broker writes, in order.
    pub ops: Vec<BrokerOp>,
    /// The status to record (written only if it differs).
    pub status: TopicStatus,
    pub events: Vec<EventNote>,
    /// Record `status.creating` before the create goes out (crash safety: a topic found after a
    /// restart is then known to be Vigil's).
    pub mark_creating: bool,
    /// The finalizer may go: nothing of this object is left in Kafka to delete.
    pub remove_finalizer: bool,
    /// The topic differed from what Vigil last recorded without a spec change: changed outside
    /// Vigil.
    pub drift: bool,
    /// The reconcile fails with this once the status is recorded (retried with backoff).
    pub failure: Option<Failure>,
    /// Look at the broker again soon: Kafka applies some writes asynchronously (a delete, new
    /// partitions), so what they asked for may not show yet.
    pub look_again: bool,
}

impl Plan {
    /// Nothing to do: the status as it is.
    pub(super) fn keep(status: &TopicStatus) -> Self {
        Self {
            ops: Vec::new(),
            status: status.clone(),
            events: Vec::new(),
            mark_creating: false,
            remove_finalizer: false,
            drift: false,
            failure: None,
            look_again: false,
        }
    }
}

/// A failure of the broker or of the credentials to reach it: the condition reason, and what
/// happened in words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub reason: &'static str,
    pub message: String,
}

/// What the controller learnt of the broker side before deciding.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The broker was not asked ([`asks_broker`](super::decide::asks_broker) said the object alone decides).
    NotAsked,
    /// The topic as the broker describes it.
    Broker(Observed),
    /// Reading the credentials or describing the topic failed.
    Failed(Failure),
}

/// What the writes of a reconcile's first decision did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Written {
    /// What each successful write did, as Normal Events.
    pub done: Vec<EventNote>,
    /// The first write that failed (the others still went out).
    pub failure: Option<Failure>,
}

/// Everything one decision reads.
#[derive(Debug, Clone)]
pub struct Inputs<'a> {
    pub topic: TopicView<'a>,
    pub observation: &'a Observation,
    /// The broker writes this reconcile already made, whose result `observation` shows; `None`
    /// on a reconcile's first decision.
    pub written: Option<&'a Written>,
    pub now: &'a Time,
}
