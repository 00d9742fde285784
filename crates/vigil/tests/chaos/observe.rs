//! Reads the [`World`] the invariants judge from what actually holds it: the API server (every
//! kind, through the test's client), the broker (the `vigil-kafka` client connected straight to
//! it, not through the proxy Vigil uses), the vault directory (`vigil-vault`), the local
//! provider's directory and live processes (`vigil-provider`), the clusters themselves (through
//! their kubeconfig Secrets), and the replicas' processes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, ListParams};
use serde_json::Value;
use vigil_apis::{ConfigMapSync, CriticalService, KubernetesCluster, StatusBackupPolicy, Topic};
use vigil_kafka::Admin;
use vigil_provider::local::{LocalConfig, LocalProvider};
use vigil_vault::{ObjectKey, Vault, VaultOptions};

use super::invariants::{self as inv, World};
use super::workload::{MARKER, Orphaned};

/// What the observer needs to find things.
pub struct Observer {
    pub client: kube::Client,
    pub ns: String,
    pub destinations: Vec<String>,
    pub prefix: String,
    pub foreign_prefix: String,
    pub critical_service: String,
    pub policy: String,
    pub admin: Admin,
    pub vault_dir: PathBuf,
    pub clusters_dir: PathBuf,
    pub foreign_before: BTreeMap<String, inv::BrokerTopic>,
}

/// A client for the kubeconfig a Secret holds (key `value`).
pub async fn client_from_secret(secret: &Secret) -> anyhow::Result<kube::Client> {
    let bytes = secret
        .data
        .as_ref()
        .and_then(|d| d.get("value"))
        .ok_or_else(|| anyhow::anyhow!("no kubeconfig in key value"))?;
    let kubeconfig = kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&bytes.0)?)?;
    let config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// The server the kubeconfig a Secret holds names.
pub fn server_of(secret: &Secret) -> Option<String> {
    let bytes = secret.data.as_ref()?.get("value")?;
    let kubeconfig =
        kube::config::Kubeconfig::from_yaml(std::str::from_utf8(&bytes.0).ok()?).ok()?;
    kubeconfig
        .clusters
        .into_iter()
        .find_map(|c| c.cluster.and_then(|c| c.server))
}

/// `Degraded` when True, else `Ready` when False, as `reason: message`.
fn not_ready_because(
    conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition],
) -> Option<String> {
    let find = |type_: &str, status: &str| {
        conditions
            .iter()
            .find(|c| c.type_ == type_ && c.status == status)
            .map(|c| format!("{} {}: {}", c.type_, c.reason, c.message))
    };
    find("Degraded", "True").or_else(|| find("Ready", "False"))
}

fn labels(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// The generation view of any object's JSON.
fn status_view(kind: &'static str, object: String, value: &Value) -> inv::StatusView {
    let status = &value["status"];
    inv::StatusView {
        kind,
        object,
        generation: value["metadata"]["generation"].as_i64(),
        observed_generation: status["observedGeneration"].as_i64(),
        conditions: status["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|c| {
                (
                    c["type"].as_str().unwrap_or_default().to_owned(),
                    c["status"].as_str().unwrap_or_default().to_owned(),
                    c["observedGeneration"].as_i64(),
                )
            })
            .collect(),
    }
}

impl Observer {
    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Reads everything; an error is a read that failed (the convergence loop tries again).
    pub async fn world(
        &self,
        reapplied: &BTreeMap<String, Orphaned>,
        replicas: &mut [super::operators::Replica],
    ) -> anyhow::Result<World> {
        let lp = ListParams::default();
        let mut world = World {
            foreign_before: self.foreign_before.clone(),
            ..World::default()
        };

        // CriticalService: our Services and pods, and our CriticalService's coverage.
        for s in self.api::<Service>().list(&lp).await?.items {
            let spec = s.spec.unwrap_or_default();
            world.services.push(inv::Service {
                namespace: self.ns.clone(),
                name: s.metadata.name.clone().unwrap_or_default(),
                labels: labels(&s.metadata),
                selector: spec.selector.unwrap_or_default(),
            });
        }
        for p in self.api::<Pod>().list(&lp).await?.items {
            let status = p.status.clone().unwrap_or_default();
            world.pods.push(inv::Pod {
                namespace: self.ns.clone(),
                name: p.metadata.name.clone().unwrap_or_default(),
                labels: labels(&p.metadata),
                ready: status
                    .conditions
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True"),
                phase: status.phase,
                terminating: p.metadata.deletion_timestamp.is_some(),
            });
        }
        let cs = Api::<CriticalService>::all(self.client.clone())
            .get(&self.critical_service)
            .await?;
        world.coverages.push(inv::Coverage {
            name: self.critical_service.clone(),
            namespace: cs.spec.namespace.clone(),
            match_labels: cs
                .spec
                .match_labels
                .iter()
                .map(|m| (m.key.clone(), m.value.clone()))
                .collect(),
        });
        world.statuses.push(status_view(
            "CriticalService",
            self.critical_service.clone(),
            &serde_json::to_value(&cs)?,
        ));

        // ConfigMapSync: the syncs, and the ConfigMaps of every namespace involved.
        for s in self.api::<ConfigMapSync>().list(&lp).await?.items {
            let name = s.metadata.name.clone().unwrap_or_default();
            let mut destinations: BTreeSet<String> =
                s.spec.destination_namespaces.iter().cloned().collect();
            destinations.insert(s.spec.destination_namespace.clone());
            world.statuses.push(status_view(
                "ConfigMapSync",
                format!("{}/{name}", self.ns),
                &serde_json::to_value(&s)?,
            ));
            world.syncs.push(inv::Sync {
                namespace: self.ns.clone(),
                name,
                source_namespace: s.spec.source_namespace.clone(),
                config_map: s.spec.config_map_name.clone(),
                destinations,
                deleting: s.metadata.deletion_timestamp.is_some(),
            });
        }
        for ns in std::iter::once(&self.ns).chain(&self.destinations) {
            for c in Api::<ConfigMap>::namespaced(self.client.clone(), ns)
                .list(&lp)
                .await?
                .items
            {
                let name = c.metadata.name.clone().unwrap_or_default();
                if name == "kube-root-ca.crt" {
                    continue;
                }
                world.config_maps.push(inv::ConfigMap {
                    namespace: ns.clone(),
                    name,
                    labels: labels(&c.metadata),
                    annotations: c.metadata.annotations.clone().unwrap_or_default(),
                    data: c.data.clone().unwrap_or_default(),
                });
            }
        }

        // KafkaTopic: the objects, and the broker read directly.
        for t in self.api::<Topic>().list(&lp).await?.items {
            let name = t.metadata.name.clone().unwrap_or_default();
            world.statuses.push(status_view(
                "Topic",
                format!("{}/{name}", self.ns),
                &serde_json::to_value(&t)?,
            ));
            world.topics.push(inv::TopicObject {
                topic_name: t.topic_name(),
                name,
                partitions: t.spec.partitions,
                config: t.spec.config.clone(),
                deleting: t.metadata.deletion_timestamp.is_some(),
            });
        }
        let listed = self.admin.list_topics().await?;
        let ours: Vec<String> = listed
            .keys()
            .filter(|n| n.starts_with(&format!("{}.", self.prefix)))
            .cloned()
            .collect();
        let foreign: Vec<String> = listed
            .keys()
            .filter(|n| n.starts_with(&self.foreign_prefix))
            .cloned()
            .collect();
        let configs = self
            .admin
            .describe_configs(&[ours.clone(), foreign.clone()].concat())
            .await?;
        let broker_topic = |name: &String| inv::BrokerTopic {
            partitions: listed.get(name).map_or(0, |t| t.partitions),
            config: configs
                .get(name)
                .into_iter()
                .flatten()
                .filter(|(_, v)| v.set_on_topic)
                .filter_map(|(k, v)| Some((k.clone(), v.value.clone()?)))
                .collect(),
        };
        world.broker = ours.iter().map(|n| (n.clone(), broker_topic(n))).collect();
        world.foreign_now = foreign
            .iter()
            .map(|n| (n.clone(), broker_topic(n)))
            .collect();

        // KubernetesCluster: the objects, their Secrets, the provider's disk and processes,
        // the re-applied clusters' own data, and the vault.
        let secrets = self.api::<Secret>();
        // The statuses as stored (the vault records them so; a typed round trip would drop
        // empty lists).
        let raw: BTreeMap<String, Value> = Api::<kube::api::DynamicObject>::namespaced_with(
            self.client.clone(),
            &self.ns,
            &kube::api::ApiResource::erase::<KubernetesCluster>(&()),
        )
        .list(&lp)
        .await?
        .items
        .into_iter()
        .map(|o| {
            let name = o.metadata.name.clone().unwrap_or_default();
            (name, o.data.get("status").cloned().unwrap_or(Value::Null))
        })
        .collect();
        for c in self.api::<KubernetesCluster>().list(&lp).await?.items {
            let name = c.metadata.name.clone().unwrap_or_default();
            let value = serde_json::to_value(&c)?;
            world.statuses.push(status_view(
                "KubernetesCluster",
                format!("{}/{name}", self.ns),
                &value,
            ));
            let status = c.status.clone().unwrap_or_default();
            let secret = secrets.get_opt(&format!("{name}-kubeconfig")).await?;
            let stored = raw.get(&name).cloned().unwrap_or(Value::Null);
            if !stored.is_null() && c.metadata.deletion_timestamp.is_none() {
                world.cluster_statuses.insert(
                    name.clone(),
                    (c.metadata.uid.clone().unwrap_or_default(), stored),
                );
            }
            if let (Some(orphan), Some(secret)) = (reapplied.get(&name), secret.as_ref()) {
                world.reapplied.push(inv::Reapplied {
                    name: name.clone(),
                    id_before: orphan.id.clone(),
                    marker_written: orphan.marker.clone(),
                    marker_seen: read_marker(secret).await,
                });
            } else if let Some(orphan) = reapplied.get(&name) {
                world.reapplied.push(inv::Reapplied {
                    name: name.clone(),
                    id_before: orphan.id.clone(),
                    marker_written: orphan.marker.clone(),
                    marker_seen: None,
                });
            }
            world.clusters.push(inv::ClusterObject {
                name,
                uid: c.metadata.uid.clone().unwrap_or_default(),
                cluster_id: status.cluster_id.clone(),
                api_server_url: status.api_server_url.clone(),
                phase: status.phase.map(|p| format!("{p:?}")),
                why: not_ready_because(&status.conditions),
                deleting: c.metadata.deletion_timestamp.is_some(),
                secret_server: secret.as_ref().and_then(server_of),
            });
        }
        let provider = LocalProvider::new(LocalConfig::new(
            &self.clusters_dir,
            env!("CARGO_BIN_EXE_vigil"),
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        for c in provider.clusters()? {
            world.provider.push(inv::ProviderCluster {
                id: c.id,
                identity_name: c.identity.name.clone(),
                port: c.port,
                pids: c.pids.len(),
            });
        }
        if self.vault_dir.exists() {
            let vault = Vault::open(
                self.vault_dir.to_str().unwrap_or_default(),
                VaultOptions::default(),
            )
            .await?;
            for key in vault.keys().await? {
                if key.kind != "KubernetesCluster" || key.namespace.as_deref() != Some(&self.ns) {
                    continue;
                }
                let key =
                    ObjectKey::new(&key.group, &key.kind, key.namespace.as_deref(), &key.name);
                if let Some(record) = vault.latest(&key).await? {
                    world.vault.insert(
                        key.name.clone(),
                        inv::VaultRecord {
                            uid: record.uid,
                            deleted: record.deleted,
                            status: record.status,
                        },
                    );
                }
            }
        }

        // The policy, and the processes.
        let policy = Api::<StatusBackupPolicy>::all(self.client.clone())
            .get(&self.policy)
            .await?;
        world.statuses.push(status_view(
            "StatusBackupPolicy",
            self.policy.clone(),
            &serde_json::to_value(&policy)?,
        ));
        for r in replicas.iter_mut() {
            world.replicas.push(inv::Replica {
                name: r.name.clone(),
                alive: r.alive(),
            });
        }
        world.lease_holder = self
            .api::<Lease>()
            .get_opt("vigil-leader")
            .await?
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity);
        Ok(world)
    }
}

/// The marker ConfigMap's value in the cluster `secret` names (None if unreachable or absent).
async fn read_marker(secret: &Secret) -> Option<String> {
    let client = client_from_secret(secret).await.ok()?;
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm = tokio::time::timeout(Duration::from_secs(3), cms.get_opt(MARKER))
        .await
        .ok()?
        .ok()??;
    cm.data?.get("marker").cloned()
}
