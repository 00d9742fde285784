//! The hosted provider's reads and writes on the management cluster: everything of one control
//! plane listed by its label, objects applied only when their manifest changed (the hash in
//! [`APPLIED_HASH`]: zero writes at rest), and everything deleted by label.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::NamespaceResourceScope;
use kube::{Resource, ResourceExt as _};
use serde::de::DeserializeOwned;
use serde_json::Value;
use sha2::Digest as _;

use super::names::{APPLIED_HASH, MANAGER, Names};
use crate::ProviderError;

/// Everything of one control plane in the management cluster.
#[derive(Debug, Default, Clone)]
pub struct Live {
    pub record: Option<ConfigMap>,
    pub services: Vec<Service>,
    pub secrets: Vec<Secret>,
    pub stateful_sets: Vec<StatefulSet>,
    pub deployments: Vec<Deployment>,
    pub budgets: Vec<PodDisruptionBudget>,
    pub claims: Vec<PersistentVolumeClaim>,
    pub pods: Vec<Pod>,
    pub config_maps: Vec<ConfigMap>,
}

impl Live {
    pub fn service(&self, name: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.name_any() == name)
    }
    pub fn secret(&self, name: &str) -> Option<&Secret> {
        self.secrets.iter().find(|s| s.name_any() == name)
    }
    pub fn deployment(&self, name: &str) -> Option<&Deployment> {
        self.deployments.iter().find(|s| s.name_any() == name)
    }
    pub fn stateful_set(&self, name: &str) -> Option<&StatefulSet> {
        self.stateful_sets.iter().find(|s| s.name_any() == name)
    }

    /// Whether nothing of the cluster is left but its record.
    pub fn only_the_record_is_left(&self) -> bool {
        self.services.is_empty()
            && self.secrets.is_empty()
            && self.stateful_sets.is_empty()
            && self.deployments.is_empty()
            && self.budgets.is_empty()
            && self.claims.is_empty()
            && self.pods.is_empty()
            && self.config_maps.iter().all(|c| {
                self.record
                    .as_ref()
                    .is_some_and(|r| r.name_any() == c.name_any())
            })
    }

    /// What is still there, for a deletion's progress.
    pub fn remaining(&self) -> String {
        let mut parts = Vec::new();
        let mut count = |n: usize, what: &str| {
            if n > 0 {
                parts.push(format!("{n} {what}"));
            }
        };
        count(self.pods.len(), "pod(s)");
        count(self.claims.len(), "claim(s)");
        count(
            self.deployments.len() + self.stateful_sets.len(),
            "workload(s)",
        );
        count(self.services.len(), "Service(s)");
        count(self.secrets.len(), "Secret(s)");
        count(self.budgets.len(), "PodDisruptionBudget(s)");
        if parts.is_empty() {
            "nothing but the record".into()
        } else {
            parts.join(", ")
        }
    }
}

pub fn unavailable(what: &str, e: impl std::fmt::Display) -> ProviderError {
    ProviderError::Unavailable(format!("hosted provider: {what}: {e}"))
}

/// The management cluster, seen by the hosted provider.
#[derive(Clone)]
pub struct Store {
    client: kube::Client,
}

impl Store {
    pub fn new(client: kube::Client) -> Self {
        Self { client }
    }

    fn api<K>(&self, names: &Names) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &names.namespace)
    }

    async fn list<K>(&self, names: &Names) -> Result<Vec<K>, ProviderError>
    where
        K: Resource<Scope = NamespaceResourceScope> + Clone + DeserializeOwned + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        let params = ListParams::default().labels(&names.selector());
        self.api::<K>(names)
            .list(&params)
            .await
            .map(|list| list.items)
            .map_err(|e| unavailable(&format!("listing {}", K::plural(&Default::default())), e))
    }

    /// The record alone (cheap: one GET).
    pub async fn record(&self, names: &Names) -> Result<Option<ConfigMap>, ProviderError> {
        self.api::<ConfigMap>(names)
            .get_opt(&names.record())
            .await
            .map_err(|e| unavailable("reading the record", e))
    }

    /// The records of `selector` in `namespaces` (`None`: every namespace).
    pub async fn records(
        &self,
        selector: &str,
        namespaces: Option<&[String]>,
    ) -> Result<Vec<ConfigMap>, ProviderError> {
        let params = ListParams::default().labels(selector);
        let Some(namespaces) = namespaces else {
            return Api::<ConfigMap>::all(self.client.clone())
                .list(&params)
                .await
                .map(|l| l.items)
                .map_err(|e| unavailable("finding the record", e));
        };
        let mut records = Vec::new();
        for namespace in namespaces {
            let found = Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                .list(&params)
                .await
                .map_err(|e| unavailable(&format!("finding the record in {namespace}"), e))?;
            records.extend(found.items);
        }
        Ok(records)
    }

    /// Creates the record: the record as created, or `None` when one exists already (another
    /// replica, a retry).
    pub async fn create_record(
        &self,
        names: &Names,
        record: &Value,
    ) -> Result<Option<ConfigMap>, ProviderError> {
        let object: ConfigMap = serde_json::from_value(record.clone())
            .map_err(|e| unavailable("building the record", e))?;
        let params = PostParams {
            field_manager: Some(MANAGER.into()),
            ..PostParams::default()
        };
        match self.api::<ConfigMap>(names).create(&params, &object).await {
            Ok(created) => Ok(Some(created)),
            Err(kube::Error::Api(s)) if s.code == 409 => Ok(None),
            Err(e) => Err(unavailable("creating the record", e)),
        }
    }

    /// Everything of the cluster.
    pub async fn live(&self, names: &Names) -> Result<Live, ProviderError> {
        let (services, secrets, stateful_sets, deployments, budgets, claims, pods, config_maps) = tokio::try_join!(
            self.list::<Service>(names),
            self.list::<Secret>(names),
            self.list::<StatefulSet>(names),
            self.list::<Deployment>(names),
            self.list::<PodDisruptionBudget>(names),
            self.list::<PersistentVolumeClaim>(names),
            self.list::<Pod>(names),
            self.list::<ConfigMap>(names),
        )?;
        let record = config_maps
            .iter()
            .find(|c| c.name_any() == names.record())
            .cloned();
        Ok(Live {
            record,
            services,
            secrets,
            stateful_sets,
            deployments,
            budgets,
            claims,
            pods,
            config_maps,
        })
    }

    /// Applies `desired` (server-side apply) unless `live` was applied from the same manifest;
    /// returns the object as it now is. The hash goes in an annotation of the object.
    pub async fn ensure<K>(
        &self,
        names: &Names,
        live: Option<&K>,
        mut desired: Value,
    ) -> Result<Option<K>, ProviderError>
    where
        K: Resource<Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + serde::Serialize
            + std::fmt::Debug,
        <K as Resource>::DynamicType: Default,
    {
        let hash = manifest_hash(&desired);
        if live.is_some_and(|l| l.annotations().get(APPLIED_HASH) == Some(&hash)) {
            return Ok(None);
        }
        let name = desired["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        desired["metadata"]["annotations"][APPLIED_HASH] = Value::String(hash);
        let params = PatchParams::apply(MANAGER).force();
        self.api::<K>(names)
            .patch(&name, &params, &Patch::Apply(&desired))
            .await
            .map(Some)
            .map_err(|e| {
                unavailable(
                    &format!("applying {} {name}", K::kind(&Default::default())),
                    e,
                )
            })
    }

    /// Merges `data` into the record.
    pub async fn update_record(
        &self,
        names: &Names,
        data: &BTreeMap<String, String>,
    ) -> Result<(), ProviderError> {
        let patch = serde_json::json!({"data": data});
        self.api::<ConfigMap>(names)
            .patch(
                &names.record(),
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(drop)
            .map_err(|e| unavailable("updating the record", e))
    }

    /// Deletes everything of the cluster but its record (what is already gone is fine).
    pub async fn delete_all_but_record(
        &self,
        names: &Names,
        live: &Live,
    ) -> Result<(), ProviderError> {
        let background = DeleteParams::background();
        macro_rules! delete_each {
            ($kind:ty, $items:expr) => {
                for item in $items
                    .iter()
                    .filter(|i| i.metadata.deletion_timestamp.is_none())
                {
                    match self
                        .api::<$kind>(names)
                        .delete(&item.name_any(), &background)
                        .await
                    {
                        Ok(_) => {}
                        Err(kube::Error::Api(s)) if s.code == 404 => {}
                        Err(e) => {
                            return Err(unavailable(&format!("deleting {}", item.name_any()), e));
                        }
                    }
                }
            };
        }
        delete_each!(Deployment, live.deployments);
        delete_each!(StatefulSet, live.stateful_sets);
        delete_each!(PodDisruptionBudget, live.budgets);
        delete_each!(Service, live.services);
        delete_each!(Pod, live.pods);
        delete_each!(PersistentVolumeClaim, live.claims);
        delete_each!(Secret, live.secrets);
        let others: Vec<&ConfigMap> = live
            .config_maps
            .iter()
            .filter(|c| c.name_any() != names.record())
            .collect();
        delete_each!(ConfigMap, others);
        Ok(())
    }

    /// Deletes the record: the cluster is gone.
    pub async fn delete_record(&self, names: &Names) -> Result<(), ProviderError> {
        match self
            .api::<ConfigMap>(names)
            .delete(&names.record(), &DeleteParams::default())
            .await
        {
            Ok(_) => Ok(()),
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(unavailable("deleting the record", e)),
        }
    }

    /// The InternalIPs of the management cluster's nodes (where a NodePort answers).
    pub async fn node_addresses(&self) -> Result<Vec<std::net::IpAddr>, ProviderError> {
        let nodes = Api::<k8s_openapi::api::core::v1::Node>::all(self.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(|e| unavailable("listing nodes", e))?;
        Ok(nodes
            .items
            .iter()
            .filter_map(|n| n.status.as_ref()?.addresses.as_ref())
            .flatten()
            .filter(|a| a.type_ == "InternalIP")
            .filter_map(|a| a.address.parse().ok())
            .collect())
    }
}

/// The hash of a manifest, as applied (16 hex digits of its JSON's SHA-256).
pub fn manifest_hash(manifest: &Value) -> String {
    let digest = sha2::Sha256::digest(manifest.to_string().as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}
