//! `Topic` (`kafka.vigil.dev/v1`, namespaced, short name `kt`; `v1alpha1` is still served,
//! deprecated, with the same schema: see [`crate::crds`]): a Kafka topic declared in
//! Kubernetes — its name, partitions, replication factor and configs, and the cluster it lives
//! in. Vigil creates it, keeps it as declared (reverting changes made behind its back), reports
//! what Kafka cannot apply, and deletes it from Kafka when the object goes (unless
//! `deletionPolicy: Retain`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::core::{Reason, Rule};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A legal Kafka topic name.
pub const TOPIC_NAME_PATTERN: &str = "^[a-zA-Z0-9._-]+$";
/// A Secret or ConfigMap name.
pub const OBJECT_NAME_PATTERN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";

/// Desired state of a Kafka topic.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, KubeSchema)]
#[kube(
    group = "kafka.vigil.dev",
    version = "v1",
    kind = "Topic",
    plural = "topics",
    singular = "topic",
    shortname = "kt",
    namespaced,
    status = "TopicStatus",
    derive = "Default",
    printcolumn = r#"{"name":"Topic","type":"string","jsonPath":".status.topicName"}"#,
    printcolumn = r#"{"name":"Partitions","type":"integer","jsonPath":".status.partitions"}"#,
    printcolumn = r#"{"name":"Replicas","type":"integer","jsonPath":".status.replicationFactor"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].reason"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#,
    validation = no_partition_decrease(),
)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = topic_name_immutable())]
pub struct TopicSpec {
    /// The topic's name in Kafka; absent: the object's name. Changing it later is refused
    /// (reported, nothing renamed): Kafka cannot rename topics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 249), regex(pattern = TOPIC_NAME_PATTERN))]
    pub topic_name: Option<String>,
    /// Number of partitions. Kafka can only add partitions: a lower number is reported
    /// (`PartitionDecreaseRefused`) and nothing changes.
    #[schemars(range(min = 1, max = 100000))]
    pub partitions: i32,
    /// Replicas per partition; absent: the broker's default. Kafka cannot change it for an
    /// existing topic: a different number is reported (`ReplicationFactorChangeRefused`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 32767))]
    #[x_kube(validation = Rule::new("self == oldSelf").message(REPLICATION_FACTOR_CHANGE_MESSAGE))]
    pub replication_factor: Option<i32>,
    /// Topic configs (`retention.ms`, `cleanup.policy`, …), as Kafka spells them. Only these are
    /// managed; a config removed from here goes back to the broker's default.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
    /// The Kafka cluster.
    pub cluster: ClusterRef,
    /// What happens to the topic in Kafka when this object is deleted: `Delete` (default) or
    /// `Retain` (the topic stays). The annotation `kafka.vigil.dev/retain-on-delete: "true"`
    /// retains it too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deletion_policy: Option<DeletionPolicy>,
    /// Take over a topic that already exists in Kafka and that Vigil did not create. Default
    /// false: such a topic is reported (`TopicNotOwned`) and left alone, and never deleted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<bool>,
}

/// What `kubectl apply` prints when a Topic's partitions go below what the topic has (the
/// controller's `PartitionDecreaseRefused`, refused at the door).
pub const PARTITIONS_DECREASE_MESSAGE: &str = "partitions cannot decrease: Kafka can only add \
     partitions; set it back to at least the topic's current count, status.partitions \
     (PartitionDecreaseRefused)";

/// `spec.partitions` never goes below both its previous value and the partitions the topic has
/// in Kafka (`status.partitions`): lowering a raise the broker has not applied (or refused) is
/// allowed, taking partitions away from the topic is not. On the root, the only place that sees
/// the status; a status update leaves the spec as it was, so it always passes.
fn no_partition_decrease() -> Rule {
    Rule::new(
        "self.spec.partitions >= oldSelf.spec.partitions || (has(self.status) \
         && has(self.status.partitions) && self.spec.partitions >= self.status.partitions)",
    )
    .message(PARTITIONS_DECREASE_MESSAGE)
    .field_path(".spec.partitions")
}

/// What `kubectl apply` prints when a Topic's replication factor changes
/// (`ReplicationFactorChangeRefused`).
pub const REPLICATION_FACTOR_CHANGE_MESSAGE: &str = "replicationFactor cannot change: Kafka \
     cannot change it for an existing topic; set it back, or create a new Topic \
     (ReplicationFactorChangeRefused)";

/// `spec.topicName` is never set, changed or removed once the Topic exists
/// (`TopicNameImmutable`): Kafka cannot rename topics. On the spec rather than the root (which
/// would see the object's name and allow setting it to that name): kube-apiserver 1.28 reports
/// the rules after a failed one of the same node under that rule's fieldPath, and the root has
/// the partitions rule.
fn topic_name_immutable() -> Rule {
    const NEW: &str = "(has(self.topicName) ? self.topicName : '')";
    const OLD: &str = "(has(oldSelf.topicName) ? oldSelf.topicName : '')";
    Rule::new(format!("{NEW} == {OLD}"))
        .message(kube::core::Message::Expression(format!(
            "'spec.topicName cannot change: Kafka cannot rename topics; ' + ({OLD} == '' ? \
             'leave it unset (the topic is named after the object)' : 'set it back to ' + {OLD}) \
             + ', or create a new Topic (TopicNameImmutable)'"
        )))
        .field_path(".topicName")
        .reason(Reason::FieldValueForbidden)
}

/// How to reach a Kafka cluster. Credentials come from Secrets in the Topic's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterRef {
    /// `host:port` of one or more brokers.
    #[schemars(length(min = 1, max = 32), inner(length(min = 3, max = 261)))]
    pub bootstrap_servers: Vec<String>,
    /// TLS to the brokers; absent: plaintext.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// SASL authentication (PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sasl: Option<SaslSpec>,
}

/// TLS settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsSpec {
    /// A Secret holding the CA certificate(s) to trust under `ca.crt` (PEM); absent: the
    /// system's roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_secret: Option<SecretKeyRef>,
}

/// SASL settings.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SaslSpec {
    /// The mechanism: `PLAIN`, `SCRAM-SHA-256` or `SCRAM-SHA-512`.
    pub mechanism: SaslMechanism,
    /// A Secret with keys `username` and `password`.
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub secret_name: String,
}

/// SASL mechanisms.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum SaslMechanism {
    #[serde(rename = "PLAIN")]
    Plain,
    #[serde(rename = "SCRAM-SHA-256")]
    ScramSha256,
    #[serde(rename = "SCRAM-SHA-512")]
    ScramSha512,
}

/// A key of a Secret in the Topic's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub name: String,
    /// The key; absent: `ca.crt`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// What happens to the Kafka topic when the Topic object is deleted.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum DeletionPolicy {
    /// The topic is deleted from Kafka, then the object goes.
    #[default]
    Delete,
    /// The topic stays in Kafka.
    Retain,
}

/// Annotation that keeps the topic in Kafka when the object is deleted (`"true"`).
pub const RETAIN_ANNOTATION: &str = "kafka.vigil.dev/retain-on-delete";

impl Topic {
    /// The topic's name in Kafka.
    pub fn topic_name(&self) -> String {
        self.spec
            .topic_name
            .clone()
            .unwrap_or_else(|| self.metadata.name.clone().unwrap_or_default())
    }

    /// Whether deleting the object leaves the topic in Kafka.
    pub fn retain_on_delete(&self) -> bool {
        self.spec.deletion_policy == Some(DeletionPolicy::Retain)
            || self
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(RETAIN_ANNOTATION))
                .is_some_and(|v| v == "true")
    }
}

/// Observed state of a Topic.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TopicStatus {
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (the topic exists as declared), `Degraded` (something Vigil cannot fix: a change
    /// Kafka cannot apply, an unowned topic, an unreachable broker) and `Deleting` (the object is
    /// being deleted and waits for the broker).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// The Kafka topic this object manages (fixed at creation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_name: Option<String>,
    /// The topic's ID in Kafka, recorded when Vigil created or adopted it: Vigil's proof of
    /// ownership.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic_id: Option<String>,
    /// Set before Vigil asks Kafka to create the topic: a topic found with this name after a
    /// crash is Vigil's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creating: Option<bool>,
    /// Partitions in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partitions: Option<i32>,
    /// Replication factor in Kafka.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replication_factor: Option<i32>,
    /// The managed configs as Kafka holds them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub config: BTreeMap<String, String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    const EXAMPLE: &str = "apiVersion: kafka.vigil.dev/v1alpha1
kind: Topic
metadata:
  name: orders
  annotations:
    kafka.vigil.dev/retain-on-delete: \"true\"
spec:
  partitions: 6
  config:
    retention.ms: \"604800000\"
  cluster:
    bootstrapServers: [\"kafka-0.kafka:9092\"]
    sasl: {mechanism: PLAIN, secretName: kafka-user}
";

    #[test]
    fn crd_names_scope_and_schema_checks() {
        let crd = Topic::crd();
        assert_eq!(crd.metadata.name.as_deref(), Some("topics.kafka.vigil.dev"));
        assert_eq!(crd.spec.scope, "Namespaced");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["kt".to_owned()][..])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(version.name, "v1");
        let schema = serde_json::to_value(&version.schema).expect("schema json");
        let spec = &schema["openAPIV3Schema"]["properties"]["spec"];
        assert_eq!(
            spec["required"],
            serde_json::json!(["cluster", "partitions"])
        );
        assert_eq!(spec["properties"]["partitions"]["minimum"], 1.0);
        assert_eq!(
            spec["properties"]["topicName"]["pattern"],
            TOPIC_NAME_PATTERN
        );
        assert_eq!(
            spec["properties"]["cluster"]["properties"]["bootstrapServers"]["minItems"],
            1
        );
    }

    #[test]
    fn the_example_parses_with_defaults() {
        let topic: Topic = serde_saphyr::from_str(EXAMPLE).expect("example");
        assert_eq!(
            topic.topic_name(),
            "orders",
            "defaults to the object's name"
        );
        assert!(topic.retain_on_delete(), "the annotation retains");
        assert_eq!(topic.spec.replication_factor, None);
        assert_eq!(topic.spec.config["retention.ms"], "604800000");
        let sasl = topic.spec.cluster.sasl.expect("sasl");
        assert_eq!(sasl.mechanism, SaslMechanism::Plain);
    }
}
