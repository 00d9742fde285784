//! The controller's settings and errors (the decision's own types live with it in `decide.rs`).

use std::collections::BTreeSet;
use std::time::Duration;

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
