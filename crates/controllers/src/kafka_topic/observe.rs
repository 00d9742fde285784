//! What a reconcile reads before deciding: the Topic as the decision sees it, the credentials its
//! cluster reference names (from Secrets in its namespace), and the broker's description of the
//! topic — through one admin client per cluster. And the drift poll, which reads every managed
//! topic of a cluster at once and triggers the reconciles of those changed in Kafka.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt as _;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::mpsc;
use vigil_apis::kafka_topic::{ClusterRef, SaslMechanism as ApiSasl, Topic, TopicStatus};
use vigil_kafka::{
    Admin, ClientConfig, RequestCounts, SaslConfig, SaslMechanism, ScramHash, TlsConfig,
};
use vigil_runtime::cache::{Cache, Source as _};
use vigil_runtime::leader::Leadership;

use super::decide::{self, Failure, Observed, TopicView};
use super::model::CredentialsError;
use super::reconcile::Context;

/// One admin client per cluster and credentials, shared by every Topic that names them.
#[derive(Default)]
pub(super) struct Admins {
    clients: Mutex<HashMap<ClientConfig, Arc<Admin>>>,
    /// The configuration last built for a Topic namespace and cluster reference (what the drift
    /// poll uses, without reading Secrets).
    configs: Mutex<HashMap<(String, ClusterRef), ClientConfig>>,
}

impl Admins {
    pub fn get(&self, config: ClientConfig, counts: &Arc<RequestCounts>) -> Arc<Admin> {
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

/// The Topic as decisions read it.
pub(super) fn view(topic: &Topic) -> TopicView<'_> {
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

/// One key of a Secret in the Topic's namespace.
async fn secret_key(
    secrets: &Api<Secret>,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<Vec<u8>, CredentialsError> {
    let secret = secrets
        .get_opt(name)
        .await
        .map_err(|source| CredentialsError::Read {
            name: name.to_owned(),
            source,
        })?
        .ok_or_else(|| CredentialsError::NotFound {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        })?;
    secret
        .data
        .and_then(|mut d| d.remove(key))
        .map(|b| b.0)
        .ok_or_else(|| CredentialsError::MissingKey {
            name: name.to_owned(),
            key: key.to_owned(),
        })
}

/// The SASL configuration of a cluster reference, its username and password read from Secrets.
async fn sasl_config(
    secrets: &Api<Secret>,
    namespace: &str,
    sasl: &vigil_apis::kafka_topic::SaslSpec,
) -> Result<SaslConfig, CredentialsError> {
    let name = &sasl.secret_name;
    let text = |bytes: Vec<u8>, key: &'static str| {
        String::from_utf8(bytes).map_err(|source| CredentialsError::NotUtf8 {
            name: name.clone(),
            key,
            source,
        })
    };
    Ok(SaslConfig {
        mechanism: match sasl.mechanism {
            ApiSasl::Plain => SaslMechanism::Plain,
            ApiSasl::ScramSha256 => SaslMechanism::Scram(ScramHash::Sha256),
            ApiSasl::ScramSha512 => SaslMechanism::Scram(ScramHash::Sha512),
        },
        username: text(
            secret_key(secrets, namespace, name, "username").await?,
            "username",
        )?,
        password: text(
            secret_key(secrets, namespace, name, "password").await?,
            "password",
        )?,
    })
}

/// The client configuration of a Topic's cluster, with credentials read from Secrets in its
/// namespace.
pub(super) async fn client_config(
    ctx: &Context,
    topic: &Topic,
) -> Result<ClientConfig, CredentialsError> {
    let namespace = topic.namespace().unwrap_or_default();
    let cluster = &topic.spec.cluster;
    let secrets: Api<Secret> = Api::namespaced(ctx.runtime.client().clone(), &namespace);
    let tls = match &cluster.tls {
        None => None,
        Some(tls) => Some(TlsConfig {
            ca_pem: match &tls.ca_secret {
                None => None,
                Some(r) => {
                    let key = r.key.as_deref().unwrap_or("ca.crt");
                    Some(secret_key(&secrets, &namespace, &r.name, key).await?)
                }
            },
        }),
    };
    let sasl = match &cluster.sasl {
        None => None,
        Some(sasl) => Some(sasl_config(&secrets, &namespace, sasl).await?),
    };
    let config = ClientConfig {
        bootstrap: cluster.bootstrap_servers.clone(),
        tls,
        sasl,
        timeout: ctx.settings.broker_timeout,
    };
    ctx.admins.remember(&namespace, cluster, &config);
    Ok(config)
}

/// The broker's view of one topic: its description, and its configs if it exists.
pub(super) async fn look(admin: &Admin, name: &str) -> Result<Observed, vigil_kafka::Error> {
    let names = [name.to_owned()];
    let topic = admin.describe_topics(&names).await?.remove(name);
    let configs = match &topic {
        Some(_) => admin
            .describe_configs(&names)
            .await?
            .remove(name)
            .unwrap_or_default(),
        None => BTreeMap::new(),
    };
    Ok(Observed::from_broker(topic, configs))
}

/// The condition reason and message of a broker error.
pub(super) fn broker_failure(error: &vigil_kafka::Error, message: String) -> Failure {
    let reason = if error.is_connection() {
        decide::REASON_BROKER_UNREACHABLE
    } else if matches!(error, vigil_kafka::Error::Tls(_)) {
        decide::REASON_TLS
    } else {
        decide::REASON_BROKER_REFUSED
    };
    Failure { reason, message }
}

/// Every `drift_interval`, per cluster: one `Metadata` and one `DescribeConfigs` request for all
/// the Topics on it that Vigil manages; a topic that no longer matches its recorded status is
/// reconciled (which restores it and reports the drift).
pub(super) async fn poll_drift(
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
        for (config, members) in by_cluster(&ctx, &topics) {
            let admin = ctx.admins.get(config, &ctx.metrics.requests);
            poll_cluster(&ctx, &admin, members, &drifted).await;
        }
    }
}

/// The managed Topics (created, not being deleted), by the client configuration of their
/// cluster.
fn by_cluster(ctx: &Context, topics: &Cache<Topic>) -> HashMap<ClientConfig, Vec<Arc<Topic>>> {
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
    groups
}

/// One cluster's turn of the drift poll.
async fn poll_cluster(
    ctx: &Context,
    admin: &Admin,
    members: Vec<Arc<Topic>>,
    drifted: &mpsc::Sender<ObjectRef<Topic>>,
) {
    let names: Vec<String> = members
        .iter()
        .filter_map(|t| t.status.as_ref().and_then(|s| s.topic_name.clone()))
        .collect();
    let described = match admin.describe_topics(&names).await {
        Ok(d) => d,
        Err(e) => {
            tracing::debug!(error = %e, "drift poll: describing topics failed");
            return;
        }
    };
    let existing: Vec<String> = described.keys().cloned().collect();
    let mut configs = match admin.describe_configs(&existing).await {
        Ok(c) => c,
        Err(e) => {
            tracing::debug!(error = %e, "drift poll: describing configs failed");
            return;
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
            ctx.forget_settled(&reference);
            let _ = drifted.send(reference).await;
        }
    }
}
