//! A thin Kafka admin client: what an operator managing topics needs (describe topics and their
//! configs, create topics, add partitions, alter configs incrementally, delete topics), over the
//! [`kafka_protocol`] crate's message types, on tokio, with optional TLS (rustls) and SASL
//! (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512).
//!
//! One connection per [`Admin`], opened lazily to the first bootstrap server that answers,
//! versions negotiated with `ApiVersions`, dropped on any I/O or protocol error (the next call
//! reconnects). Every request is counted by API ([`Admin::requests`]) so callers can measure
//! how many requests reach the broker.

mod conn;
mod scram;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kafka_protocol::ResponseError;
use kafka_protocol::messages::create_partitions_request::CreatePartitionsTopic;
use kafka_protocol::messages::create_topics_request::{CreatableTopic, CreatableTopicConfig};
use kafka_protocol::messages::delete_topics_request::DeleteTopicState;
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    CreatePartitionsRequest, CreateTopicsRequest, DeleteTopicsRequest, DescribeConfigsRequest,
    IncrementalAlterConfigsRequest, MetadataRequest, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::sync::Mutex;

pub use conn::{SaslConfig, SaslMechanism, TlsConfig};
pub use scram::ScramHash;

/// Config resource type of a topic (`ConfigResource.Type.TOPIC`).
const RESOURCE_TOPIC: i8 = 2;
/// `config_source` of a config set on the topic itself (`DYNAMIC_TOPIC_CONFIG`).
const SOURCE_TOPIC: i8 = 1;
/// `config_source` `UNKNOWN`: sent by brokers that do not track sources and list only the configs
/// set on the topic.
const SOURCE_UNKNOWN: i8 = 0;
/// Error code of a topic that does not exist.
pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
/// Error code of a create for a topic that exists.
pub const TOPIC_ALREADY_EXISTS: i16 = 36;

/// How to reach a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ClientConfig {
    /// `host:port` of one or more brokers; the first that answers is used.
    pub bootstrap: Vec<String>,
    pub tls: Option<TlsConfig>,
    pub sasl: Option<SaslConfig>,
    /// Bound on connecting and on each request.
    pub timeout: Duration,
}

impl ClientConfig {
    pub fn plaintext(bootstrap: impl Into<String>) -> Self {
        Self {
            bootstrap: vec![bootstrap.into()],
            tls: None,
            sasl: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot reach the broker: {0}")]
    Unreachable(String),
    #[error("broker connection failed: {0}")]
    Io(#[from] std::io::Error),
    #[error("Kafka protocol error: {0}")]
    Protocol(String),
    #[error("the broker does not support {0}")]
    Unsupported(&'static str),
    #[error("SASL authentication failed: {0}")]
    Auth(String),
    #[error("TLS handshake failed: {0}")]
    Tls(String),
    #[error("the broker answered {name} ({code}){}", message.as_deref().map(|m| format!(": {m}")).unwrap_or_default())]
    Broker {
        code: i16,
        name: String,
        message: Option<String>,
    },
}

impl Error {
    fn broker(code: i16, message: Option<&StrBytes>) -> Self {
        let name = ResponseError::try_from_code(code)
            .map(|e| format!("{e:?}"))
            .unwrap_or_else(|| "NONE".into());
        Self::Broker {
            code,
            name,
            message: message.map(|m| m.to_string()).filter(|m| !m.is_empty()),
        }
    }

    /// The broker's error code, if the broker refused the call.
    pub fn code(&self) -> Option<i16> {
        match self {
            Self::Broker { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// Whether the broker could not be reached or the connection broke (retry later), as opposed
    /// to a refusal.
    pub fn is_connection(&self) -> bool {
        matches!(self, Self::Unreachable(_) | Self::Io(_) | Self::Protocol(_))
    }
}

fn check(code: i16, message: Option<&StrBytes>) -> Result<(), Error> {
    if code == 0 {
        Ok(())
    } else {
        Err(Error::broker(code, message))
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A topic as the broker describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicDescription {
    pub name: String,
    /// The topic ID (a UUID), which changes when a topic is deleted and created again.
    pub id: String,
    pub partitions: i32,
    /// Replicas of the first partition.
    pub replication_factor: i32,
}

/// One config of a topic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue {
    pub value: Option<String>,
    /// Set on the topic itself (not inherited from the broker or its default).
    pub set_on_topic: bool,
    /// The broker's `config_source`.
    pub source: i8,
}

/// A change to one topic config.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConfigChange {
    Set(String, String),
    /// Back to the inherited value.
    Delete(String),
}

/// How a request to a broker ended, for a metric that tells a broker that answers with errors
/// from one that does not answer at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The broker answered (error codes inside an answer are the caller's to judge).
    Ok,
    /// The broker is up but the request failed: an unsupported request or version, a refused
    /// SASL authentication or TLS handshake, an error code: the request or configuration is at
    /// fault, not the broker's availability.
    Error,
    /// No answer: the connection could not be made, broke, or the request timed out. A request
    /// that could not be sent because no bootstrap server answered counts here, under its API.
    Unavailable,
}

impl Outcome {
    /// The outcome a request's result shows.
    pub fn of<T>(result: &Result<T>) -> Self {
        match result {
            Ok(_) => Self::Ok,
            Err(Error::Unreachable(_) | Error::Io(_) | Error::Protocol(_)) => Self::Unavailable,
            Err(Error::Unsupported(_) | Error::Auth(_) | Error::Tls(_) | Error::Broker { .. }) => {
                Self::Error
            }
        }
    }

    /// The metric label's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Unavailable => "unavailable",
        }
    }
}

/// A callback told of every request's end (API name and outcome), e.g. to count it in a metric.
pub type RequestHook = Box<dyn Fn(&'static str, Outcome) + Send + Sync>;

/// Requests sent, by API name.
#[derive(Default)]
pub struct RequestCounts {
    counts: std::sync::Mutex<BTreeMap<&'static str, u64>>,
    total: AtomicU64,
    hook: std::sync::OnceLock<RequestHook>,
}

impl std::fmt::Debug for RequestCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestCounts")
            .field("total", &self.total())
            .finish()
    }
}

impl RequestCounts {
    /// Counts that also tell `hook` how each request ended.
    pub fn with_hook(hook: impl Fn(&'static str, Outcome) + Send + Sync + 'static) -> Self {
        let counts = Self::default();
        let _ = counts.hook.set(Box::new(hook));
        counts
    }

    /// A request is being sent.
    fn add(&self, api: &'static str) {
        self.total.fetch_add(1, Ordering::Relaxed);
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(api)
            .or_default() += 1;
    }

    /// A request ended (or could not be sent): tells the hook.
    fn ended<T>(&self, api: &'static str, result: &Result<T>) {
        if let Some(hook) = self.hook.get() {
            hook(api, Outcome::of(result));
        }
    }

    /// Requests sent so far, all APIs.
    pub fn total(&self) -> u64 {
        self.total.load(Ordering::Relaxed)
    }

    /// Requests sent so far, by API.
    pub fn by_api(&self) -> BTreeMap<&'static str, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

/// An admin client of one cluster.
pub struct Admin {
    config: ClientConfig,
    conn: Mutex<Option<conn::Conn>>,
    counts: Arc<RequestCounts>,
}

impl std::fmt::Debug for Admin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Admin")
            .field("bootstrap", &self.config.bootstrap)
            .finish()
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_owned()))
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_owned())
}

impl Admin {
    pub fn new(config: ClientConfig) -> Self {
        Self::with_counts(config, Arc::default())
    }

    /// An admin client counting its requests into `counts` (shared by several clients).
    pub fn with_counts(config: ClientConfig, counts: Arc<RequestCounts>) -> Self {
        Self {
            config,
            conn: Mutex::new(None),
            counts,
        }
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Requests this client sent (connection set-up included).
    pub fn requests(&self) -> &Arc<RequestCounts> {
        &self.counts
    }

    async fn call<R>(&self, api: &'static str, request: &R, wanted: i16) -> Result<R::Response>
    where
        R: kafka_protocol::protocol::Request,
    {
        let mut guard = self.conn.lock().await;
        if guard.is_none() {
            match conn::Conn::open(&self.config, &self.counts).await {
                Ok(conn) => *guard = Some(conn),
                Err(e) => {
                    let failed = Err(e);
                    self.counts.ended(api, &failed);
                    return failed;
                }
            }
        }
        let Some(conn) = guard.as_mut() else {
            return Err(Error::Unreachable("no connection".into()));
        };
        self.counts.add(api);
        let result = tokio::time::timeout(self.config.timeout, conn.request(api, request, wanted))
            .await
            .unwrap_or_else(|_| Err(Error::Protocol(format!("{api} timed out"))));
        self.counts.ended(api, &result);
        if let Err(e) = &result
            && !matches!(e, Error::Broker { .. } | Error::Unsupported(_))
        {
            // The stream may be mid-frame: never reuse it.
            *guard = None;
        }
        result
    }

    /// Describes these topics; a topic that does not exist is absent from the result.
    pub async fn describe_topics(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<String, TopicDescription>> {
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut request = MetadataRequest::default();
        request.topics = Some(
            names
                .iter()
                .map(|n| {
                    let mut t = MetadataRequestTopic::default();
                    t.name = Some(topic_name(n));
                    t
                })
                .collect(),
        );
        request.allow_auto_topic_creation = false;
        self.metadata(request).await
    }

    /// Every topic of the cluster.
    pub async fn list_topics(&self) -> Result<BTreeMap<String, TopicDescription>> {
        let mut request = MetadataRequest::default();
        request.topics = None;
        request.allow_auto_topic_creation = false;
        self.metadata(request).await
    }

    async fn metadata(
        &self,
        request: MetadataRequest,
    ) -> Result<BTreeMap<String, TopicDescription>> {
        let response = self.call("Metadata", &request, 12).await?;
        let mut out = BTreeMap::new();
        for topic in response.topics {
            let Some(name) = topic.name.map(|n| n.0.to_string()) else {
                continue;
            };
            if topic.error_code == UNKNOWN_TOPIC_OR_PARTITION {
                continue;
            }
            check(topic.error_code, None)?;
            let replication_factor = topic
                .partitions
                .iter()
                .map(|p| p.replica_nodes.len())
                .max()
                .unwrap_or(0);
            out.insert(
                name.clone(),
                TopicDescription {
                    name,
                    id: topic.topic_id.to_string(),
                    partitions: i32::try_from(topic.partitions.len()).unwrap_or(i32::MAX),
                    replication_factor: i32::try_from(replication_factor).unwrap_or(i32::MAX),
                },
            );
        }
        Ok(out)
    }

    /// The configs of these topics, in one request. A topic that does not exist is absent.
    pub async fn describe_configs(
        &self,
        names: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, ConfigValue>>> {
        if names.is_empty() {
            return Ok(BTreeMap::new());
        }
        let mut request = DescribeConfigsRequest::default();
        request.resources = names
            .iter()
            .map(|n| {
                let mut r = DescribeConfigsResource::default();
                r.resource_type = RESOURCE_TOPIC;
                r.resource_name = text(n);
                r.configuration_keys = None;
                r
            })
            .collect();
        let response = self.call("DescribeConfigs", &request, 4).await?;
        let mut out = BTreeMap::new();
        for result in response.results {
            if result.error_code == UNKNOWN_TOPIC_OR_PARTITION {
                continue;
            }
            check(result.error_code, result.error_message.as_ref())?;
            let configs = result
                .configs
                .into_iter()
                .map(|c| {
                    (
                        c.name.to_string(),
                        ConfigValue {
                            value: c.value.map(|v| v.to_string()),
                            set_on_topic: c.config_source == SOURCE_TOPIC
                                || c.config_source == SOURCE_UNKNOWN,
                            source: c.config_source,
                        },
                    )
                })
                .collect();
            out.insert(result.resource_name.to_string(), configs);
        }
        Ok(out)
    }

    /// Creates a topic; returns its ID. `replication_factor` -1 takes the broker's default.
    pub async fn create_topic(
        &self,
        name: &str,
        partitions: i32,
        replication_factor: i16,
        configs: &BTreeMap<String, String>,
    ) -> Result<String> {
        let mut topic = CreatableTopic::default();
        topic.name = topic_name(name);
        topic.num_partitions = partitions;
        topic.replication_factor = replication_factor;
        topic.configs = configs
            .iter()
            .map(|(k, v)| {
                let mut c = CreatableTopicConfig::default();
                c.name = text(k);
                c.value = Some(text(v));
                c
            })
            .collect();
        let mut request = CreateTopicsRequest::default();
        request.topics = vec![topic];
        request.timeout_ms = self.timeout_ms();
        let response = self.call("CreateTopics", &request, 7).await?;
        let result = response
            .topics
            .into_iter()
            .find(|t| t.name.0.as_str() == name)
            .ok_or_else(|| Error::Protocol(format!("CreateTopics: no result for {name}")))?;
        check(result.error_code, result.error_message.as_ref())?;
        Ok(result.topic_id.to_string())
    }

    /// Raises a topic's partition count to `count`.
    pub async fn create_partitions(&self, name: &str, count: i32) -> Result<()> {
        let mut topic = CreatePartitionsTopic::default();
        topic.name = topic_name(name);
        topic.count = count;
        topic.assignments = None;
        let mut request = CreatePartitionsRequest::default();
        request.topics = vec![topic];
        request.timeout_ms = self.timeout_ms();
        let response = self.call("CreatePartitions", &request, 3).await?;
        for result in response.results {
            check(result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }

    /// Sets and deletes topic configs, leaving the others alone.
    pub async fn alter_configs(&self, name: &str, changes: &[ConfigChange]) -> Result<()> {
        if changes.is_empty() {
            return Ok(());
        }
        let mut resource = AlterConfigsResource::default();
        resource.resource_type = RESOURCE_TOPIC;
        resource.resource_name = text(name);
        resource.configs = changes
            .iter()
            .map(|change| {
                let mut c = AlterableConfig::default();
                match change {
                    ConfigChange::Set(k, v) => {
                        c.name = text(k);
                        c.config_operation = 0;
                        c.value = Some(text(v));
                    }
                    ConfigChange::Delete(k) => {
                        c.name = text(k);
                        c.config_operation = 1;
                        c.value = None;
                    }
                }
                c
            })
            .collect();
        let mut request = IncrementalAlterConfigsRequest::default();
        request.resources = vec![resource];
        let response = self.call("IncrementalAlterConfigs", &request, 1).await?;
        for result in response.responses {
            check(result.error_code, result.error_message.as_ref())?;
        }
        Ok(())
    }

    /// Deletes a topic. A topic that does not exist is not an error.
    pub async fn delete_topic(&self, name: &str) -> Result<()> {
        let mut request = DeleteTopicsRequest::default();
        let mut state = DeleteTopicState::default();
        state.name = Some(topic_name(name));
        request.topics = vec![state];
        request.timeout_ms = self.timeout_ms();
        let response = self.call("DeleteTopics", &request, 6).await?;
        for result in response.responses {
            if result.error_code != UNKNOWN_TOPIC_OR_PARTITION {
                check(result.error_code, result.error_message.as_ref())?;
            }
        }
        Ok(())
    }

    fn timeout_ms(&self) -> i32 {
        i32::try_from(self.config.timeout.as_millis()).unwrap_or(i32::MAX)
    }
}
