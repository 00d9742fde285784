//! The seeded random workload: creates, updates and deletes of every kind Vigil serves, and hand
//! edits of what Vigil owns (fallback pods, ConfigMap copies, kubeconfig Secrets, Kafka topics
//! behind Vigil's back). Operations are attempts: one that fails (the API server or the broker
//! is down, an object is still being deleted) is counted and the workload goes on — nothing
//! downstream relies on what the workload meant to do, the invariants read the world.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use serde_json::{Value, json};
use vigil_apis::{ConfigMapSync, KubernetesCluster, Topic};
use vigil_kafka::{Admin, ConfigChange};

use super::invariants::{COPY_LABEL, FALLBACK_PREFIX, MANAGED_BY, Subject};

/// KubernetesCluster's finalizer (what Vigil holds an adopted or created object with).
const KUBERNETES_CLUSTER_FINALIZER: &str = "vigil.dev/kubernetescluster";

pub const SERVICES: usize = 6;
pub const SYNCS: usize = 3;
pub const TOPICS: usize = 5;
pub const CLUSTERS: usize = 2;
pub const MARKER: &str = "chaos-marker";
const KUBELET_STATE: &str = vigil_testenv::STATE_ANNOTATION;

/// What the workload did, for the report.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub done: BTreeMap<&'static str, usize>,
    pub failed: usize,
    pub while_down: usize,
}

/// One operation of the workload, done or attempted, for the failure report: when it started
/// and ended (from the run's start), what it was about, and how it went.
#[derive(Debug, Clone)]
pub struct Op {
    pub start: Duration,
    pub end: Duration,
    pub subject: Subject,
    pub what: &'static str,
    /// What exactly (a pod's name, a version, a patch); may be empty.
    pub detail: String,
    /// `Err`: the error, shortened.
    pub outcome: Result<(), String>,
    /// Made while no operator ran.
    pub while_down: bool,
}

/// A KubernetesCluster deleted with `Orphan` and to be applied again from "git".
#[derive(Debug, Clone)]
pub struct Orphaned {
    pub manifest: Value,
    pub id: String,
    pub marker: String,
}

/// The workload's handles and what it knows of its own manifests (its "git").
pub struct Workload {
    pub client: kube::Client,
    pub ns: String,
    pub destinations: Vec<String>,
    pub prefix: String,
    pub bootstrap: String,
    pub admin: Arc<Admin>,
    pub rng: StdRng,
    pub seed: u64,
    pub tally: Tally,
    /// Set while no operator runs.
    pub operators_down: Arc<AtomicBool>,
    /// The run's start: the schedule's times count from it.
    pub t0: Instant,
    /// Every operation done or attempted, in order.
    pub schedule: Vec<Op>,
    op_started: Duration,
    next_pod: usize,
    /// Each cluster's manifest as last applied (its kubeVersion moves forward only).
    cluster_versions: BTreeMap<String, u32>,
    topic_partitions: BTreeMap<String, i32>,
    pub orphaned: BTreeMap<String, Orphaned>,
    /// Orphaned clusters applied again (and not deleted since): name → (id, marker).
    pub reapplied: BTreeMap<String, Orphaned>,
}

/// An operation's error in a line: an API error as its code, reason and message (not the whole
/// Status), anything else shortened.
fn short_error(e: &anyhow::Error) -> String {
    if let Some(kube::Error::Api(s)) = e.downcast_ref::<kube::Error>() {
        return format!("{} {}: {}", s.code, s.reason, s.message);
    }
    let text = format!("{e:#}");
    match text.char_indices().nth(200) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text,
    }
}

fn obj<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).expect("a valid manifest")
}

pub fn kafka_name(prefix: &str, i: usize) -> String {
    format!("{prefix}.t{i}")
}

/// The KubernetesCluster `kc-{i}`'s manifest at `minor` (1.28 → 28).
pub fn cluster_manifest(ns: &str, i: usize, minor: u32) -> Value {
    json!({
        "apiVersion": "vigil.dev/v1alpha1", "kind": "KubernetesCluster",
        "metadata": {"name": format!("kc-{i}"), "namespace": ns},
        "spec": {"type": "iks", "env": "test", "kubeVersion": format!("1.{minor}"),
                 "osVersion": "UBUNTU_20_64",
                 "product": {"name": "chaos", "shortName": "chaos",
                             "uuid": {"value": format!("c4a05000-0000-4000-8000-00000000000{i}")}},
                 "addons": []}
    })
}

impl Workload {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        client: kube::Client,
        ns: String,
        destinations: Vec<String>,
        prefix: String,
        bootstrap: String,
        admin: Arc<Admin>,
        seed: u64,
        operators_down: Arc<AtomicBool>,
        t0: Instant,
    ) -> Self {
        Self {
            client,
            ns,
            destinations,
            prefix,
            bootstrap,
            admin,
            rng: StdRng::seed_from_u64(seed),
            seed,
            tally: Tally::default(),
            operators_down,
            t0,
            schedule: Vec::new(),
            op_started: Duration::ZERO,
            next_pod: 0,
            cluster_versions: BTreeMap::new(),
            topic_partitions: BTreeMap::new(),
            orphaned: BTreeMap::new(),
            reapplied: BTreeMap::new(),
        }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), &self.ns)
    }

    /// Counts an operation on `subject` and records it in the schedule.
    fn count(&mut self, what: &'static str, subject: Subject, result: anyhow::Result<()>) {
        self.count_detail(what, subject, String::new(), result);
    }

    /// [`Self::count`], with what exactly was done (a pod's name, a version).
    fn count_detail(
        &mut self,
        what: &'static str,
        subject: Subject,
        detail: String,
        result: anyhow::Result<()>,
    ) {
        match &result {
            Ok(()) => {
                *self.tally.done.entry(what).or_default() += 1;
                if self.operators_down.load(Ordering::SeqCst) {
                    self.tally.while_down += 1;
                }
            }
            Err(_) => self.tally.failed += 1,
        }
        self.record(what, subject, detail, &result);
    }

    /// Records an operation in the schedule: from the step's start to now, with its outcome.
    fn record(
        &mut self,
        what: &'static str,
        subject: Subject,
        detail: String,
        result: &anyhow::Result<()>,
    ) {
        let end = self.t0.elapsed();
        self.schedule.push(Op {
            start: self.op_started.min(end),
            end,
            subject,
            what,
            detail,
            outcome: match result {
                Ok(()) => Ok(()),
                Err(e) => Err(short_error(e)),
            },
            while_down: self.operators_down.load(Ordering::SeqCst),
        });
    }

    /// One random operation.
    pub async fn step(&mut self) {
        self.op_started = self.t0.elapsed();
        let roll = self.rng.random_range(0..100);
        match roll {
            0..30 => self.service_step().await,
            30..50 => self.sync_step().await,
            50..75 => self.topic_step().await,
            75..81 => self.cluster_step().await,
            _ => self.hand_edit().await,
        }
    }

    async fn service_step(&mut self) {
        let i = self.rng.random_range(0..SERVICES);
        let name = format!("svc-{i}");
        let services: Api<Service> = self.api();
        let pods: Api<Pod> = self.api();
        match self.rng.random_range(0..6) {
            0 => {
                let tier = if self.rng.random_bool(0.6) {
                    "critical"
                } else {
                    "normal"
                };
                let svc = json!({"metadata": {"name": name, "labels": {"tier": tier}},
                    "spec": {"selector": {"app": name}, "ports": [{"port": 80}]}});
                let r = services.create(&PostParams::default(), &obj(svc)).await;
                self.count(
                    "service created",
                    Subject::new("Service", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            1 => {
                let r = services.delete(&name, &DeleteParams::default()).await;
                self.count(
                    "service deleted",
                    Subject::new("Service", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            2 => {
                let tier = if self.rng.random_bool(0.5) {
                    "critical"
                } else {
                    "normal"
                };
                let patch = json!({"metadata": {"labels": {"tier": tier}}});
                let r = services
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                self.count(
                    "service relabelled",
                    Subject::new("Service", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            3 => {
                self.next_pod += 1;
                let pod_name = format!("{name}-p{}", self.next_pod);
                let pod = json!({"metadata": {"name": pod_name, "labels": {"app": name}},
                    "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}});
                let r = pods.create(&PostParams::default(), &obj(pod)).await;
                self.count_detail(
                    "pod created",
                    Subject::new("Service", &name),
                    pod_name,
                    r.map(drop).map_err(Into::into),
                );
            }
            4 | 5 => {
                let Some(pod) = self.pick(&pods, &format!("app={name}")).await else {
                    return;
                };
                let delete = self.rng.random_bool(0.4);
                let mut detail = format!("{pod} deleted");
                let r = if delete {
                    pods.delete(&pod, &DeleteParams::default()).await.map(drop)
                } else {
                    let state = if self.rng.random_bool(0.5) {
                        Some("NotReady")
                    } else {
                        None
                    };
                    detail = format!("{pod} {}", state.unwrap_or("Ready"));
                    let patch = json!({"metadata": {"annotations": {KUBELET_STATE: state}}});
                    pods.patch(&pod, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                };
                self.count_detail(
                    "pod deleted or readiness toggled",
                    Subject::new("Service", &name),
                    detail,
                    r.map_err(Into::into),
                );
            }
            _ => unreachable!(),
        }
    }

    /// A random object of `api` matching `selector`.
    async fn pick<K>(&mut self, api: &Api<K>, selector: &str) -> Option<String>
    where
        K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let list = api
            .list(&ListParams::default().labels(selector))
            .await
            .ok()?;
        let names: Vec<String> = list
            .items
            .iter()
            .filter_map(|o| o.meta().name.clone())
            .collect();
        if names.is_empty() {
            return None;
        }
        Some(names[self.rng.random_range(0..names.len())].clone())
    }

    fn destination_set(&mut self) -> (String, Vec<String>) {
        let first = self.destinations[self.rng.random_range(0..self.destinations.len())].clone();
        let more: Vec<String> = self
            .destinations
            .iter()
            .filter(|d| **d != first && self.rng.random_bool(0.5))
            .cloned()
            .collect();
        (first, more)
    }

    async fn sync_step(&mut self) {
        let i = self.rng.random_range(0..SYNCS);
        let syncs: Api<ConfigMapSync> = self.api();
        let cms: Api<ConfigMap> = self.api();
        let name = format!("sync-{i}");
        match self.rng.random_range(0..5) {
            0 => {
                let (first, more) = self.destination_set();
                let sync = json!({"apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
                    "metadata": {"name": name},
                    "spec": {"sourceNamespace": self.ns, "configMapName": format!("cm-{i}"),
                             "destinationNamespace": first, "destinationNamespaces": more}});
                let r = syncs.create(&PostParams::default(), &obj(sync)).await;
                self.count(
                    "configmapsync created",
                    Subject::new("ConfigMapSync", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            1 => {
                let (first, more) = self.destination_set();
                let patch =
                    json!({"spec": {"destinationNamespace": first, "destinationNamespaces": more}});
                let r = syncs
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                self.count(
                    "configmapsync destinations changed",
                    Subject::new("ConfigMapSync", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            2 => {
                let r = syncs.delete(&name, &DeleteParams::default()).await;
                self.count(
                    "configmapsync deleted",
                    Subject::new("ConfigMapSync", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
            _ => {
                let value = self.rng.random_range(0..1_000_000u32).to_string();
                let extra = self.rng.random_bool(0.3).then(|| value.clone());
                let patch = json!({"data": {"v": value, "extra": extra}});
                let r = cms
                    .patch(
                        &format!("cm-{i}"),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await;
                self.count(
                    "source updated",
                    Subject::new("ConfigMapSync", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
        }
    }

    async fn topic_step(&mut self) {
        let i = self.rng.random_range(0..TOPICS);
        let topics: Api<Topic> = self.api();
        let name = format!("t{i}");
        match self.rng.random_range(0..5) {
            0 | 1 => {
                let partitions = self.rng.random_range(1..=3);
                let mut config = json!({"retention.ms": format!("{}", 60_000 + self.rng.random_range(0..1000) * 1000)});
                if self.rng.random_bool(0.4) {
                    config["cleanup.policy"] = json!("compact");
                }
                let detail = format!("{partitions} partitions, config {config}");
                let topic = json!({"apiVersion": "kafka.vigil.dev/v1alpha1", "kind": "Topic",
                    "metadata": {"name": name},
                    "spec": {"topicName": kafka_name(&self.prefix, i), "partitions": partitions,
                             "config": config, "cluster": {"bootstrapServers": [self.bootstrap]}}});
                let r = topics.create(&PostParams::default(), &obj(topic)).await;
                if r.is_ok() {
                    self.topic_partitions.insert(name.clone(), partitions);
                }
                self.count_detail(
                    "topic created",
                    Subject::new("Topic", &name),
                    detail,
                    r.map(drop).map_err(Into::into),
                );
            }
            2 => {
                let grow = self.rng.random_bool(0.3);
                let partitions = self.topic_partitions.get(&name).copied().unwrap_or(1);
                let patch = if grow && partitions < 4 {
                    json!({"spec": {"partitions": partitions + 1}})
                } else if self.rng.random_bool(0.5) {
                    json!({"spec": {"config": {"cleanup.policy": null}}})
                } else {
                    json!({"spec": {"config": {"retention.ms": format!("{}", 60_000 + self.rng.random_range(0..1000) * 1000)}}})
                };
                let r = topics
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                if r.is_ok() && grow && partitions < 4 {
                    self.topic_partitions.insert(name.clone(), partitions + 1);
                }
                self.count_detail(
                    "topic updated",
                    Subject::new("Topic", &name),
                    patch["spec"].to_string(),
                    r.map(drop).map_err(Into::into),
                );
            }
            _ => {
                let r = topics.delete(&name, &DeleteParams::default()).await;
                self.count(
                    "topic deleted",
                    Subject::new("Topic", &name),
                    r.map(drop).map_err(Into::into),
                );
            }
        }
    }

    async fn cluster_step(&mut self) {
        let i = self.rng.random_range(0..CLUSTERS);
        let name = format!("kc-{i}");
        let clusters: Api<KubernetesCluster> = self.api();
        if let Some(orphan) = self.orphaned.get(&name).cloned() {
            // Applied again from git, as it was.
            let r = clusters
                .create(&PostParams::default(), &obj(orphan.manifest.clone()))
                .await;
            let subject = Subject::new("KubernetesCluster", &name);
            let detail = format!(
                "kubeVersion {}, its cluster {}",
                orphan.manifest["spec"]["kubeVersion"], orphan.id
            );
            if r.is_ok() {
                self.orphaned.remove(&name);
                self.reapplied.insert(name, orphan);
            }
            self.count_detail(
                "orphaned cluster re-applied",
                subject,
                detail,
                r.map(drop).map_err(Into::into),
            );
            return;
        }
        match self.rng.random_range(0..5) {
            0 | 1 => {
                let minor = 28;
                let r = clusters
                    .create(
                        &PostParams::default(),
                        &obj(cluster_manifest(&self.ns, i, minor)),
                    )
                    .await;
                if r.is_ok() {
                    self.cluster_versions.insert(name.clone(), minor);
                    self.reapplied.remove(&name);
                }
                self.count_detail(
                    "cluster created",
                    Subject::new("KubernetesCluster", &name),
                    format!("kubeVersion 1.{minor}"),
                    r.map(drop).map_err(Into::into),
                );
            }
            2 => {
                let minor = self.cluster_versions.get(&name).copied().unwrap_or(28);
                if minor >= 29 {
                    return;
                }
                let patch = json!({"spec": {"kubeVersion": "1.29"}});
                let r = clusters
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                if r.is_ok() {
                    self.cluster_versions.insert(name.clone(), 29);
                }
                self.count_detail(
                    "cluster upgraded",
                    Subject::new("KubernetesCluster", &name),
                    "kubeVersion 1.29".to_owned(),
                    r.map(drop).map_err(Into::into),
                );
            }
            3 => {
                let r = self.delete_cluster(&name).await;
                self.count(
                    "cluster deleted",
                    Subject::new("KubernetesCluster", &name),
                    r,
                );
            }
            _ => {
                let r = self.orphan(i).await;
                self.count(
                    "cluster orphaned",
                    Subject::new("KubernetesCluster", &name),
                    r,
                );
            }
        }
    }

    /// Deletes `kc-{i}`. An orphan applied again from git that no Vigil has looked at yet (no
    /// finalizer: Vigil adds it only once the status vault has given the object its cluster
    /// back) goes without Vigil seeing it — no controller can act on an object it never saw,
    /// which is why Kubernetes has finalizers — so its cluster stays an orphan, to be applied
    /// again from git like any other. The deletion is conditional on the object as read, so a
    /// Vigil adopting it in between makes it fail (409) instead of leaving the workload wrong.
    async fn delete_cluster(&mut self, name: &str) -> anyhow::Result<()> {
        let clusters: Api<KubernetesCluster> = self.api();
        let Some(orphan) = self.reapplied.get(name).cloned() else {
            clusters.delete(name, &DeleteParams::default()).await?;
            return Ok(());
        };
        let live = clusters.get(name).await?;
        let adopted = live
            .metadata
            .finalizers
            .iter()
            .flatten()
            .any(|f| f == KUBERNETES_CLUSTER_FINALIZER);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                resource_version: live.metadata.resource_version.clone(),
                uid: live.metadata.uid.clone(),
            }),
            ..DeleteParams::default()
        };
        clusters.delete(name, &params).await?;
        self.reapplied.remove(name);
        if !adopted {
            self.orphaned.insert(name.to_owned(), orphan);
        }
        Ok(())
    }

    /// Marks the cluster's data, then deletes its object with `deletionPolicy: Orphan`.
    async fn orphan(&mut self, i: usize) -> anyhow::Result<()> {
        let name = format!("kc-{i}");
        let clusters: Api<KubernetesCluster> = self.api();
        let cluster = clusters.get(&name).await?;
        let status = cluster.status.clone().unwrap_or_default();
        anyhow::ensure!(
            cluster.metadata.deletion_timestamp.is_none()
                && status.observed_generation == cluster.metadata.generation
                && status.phase.map(|p| format!("{p:?}")).as_deref() == Some("Ready"),
            "not settled"
        );
        let id = status
            .cluster_id
            .clone()
            .ok_or_else(|| anyhow::anyhow!("no id"))?;
        let marker = format!("{}-{}", self.seed, self.rng.random_range(0..1_000_000u32));
        let secrets: Api<Secret> = self.api();
        let secret = secrets.get(&format!("{name}-kubeconfig")).await?;
        let inner = super::observe::client_from_secret(&secret).await?;
        let cms: Api<ConfigMap> = Api::namespaced(inner, "default");
        let body = json!({"metadata": {"name": MARKER}, "data": {"marker": marker}});
        tokio::time::timeout(Duration::from_secs(3), async {
            match cms.create(&PostParams::default(), &obj(body.clone())).await {
                Err(kube::Error::Api(s)) if s.code == 409 => cms
                    .replace(MARKER, &PostParams::default(), &{
                        let mut live = cms.get(MARKER).await?;
                        live.data = Some([("marker".to_owned(), marker.clone())].into());
                        live
                    })
                    .await
                    .map(drop),
                other => other.map(drop),
            }
        })
        .await??;
        let minor = self.cluster_versions.get(&name).copied().unwrap_or(28);
        let manifest = cluster_manifest(&self.ns, i, minor);
        let patch = json!({"spec": {"deletionPolicy": "Orphan"}});
        clusters
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await?;
        clusters.delete(&name, &DeleteParams::default()).await?;
        self.reapplied.remove(&name);
        self.orphaned.insert(
            name.clone(),
            Orphaned {
                manifest,
                id,
                marker,
            },
        );
        Ok(())
    }

    /// Edits of what Vigil owns, made by hand.
    async fn hand_edit(&mut self) {
        match self.rng.random_range(0..5) {
            0 => {
                let pods: Api<Pod> = self.api();
                let selector = format!("{MANAGED_BY}=vigil");
                let Some(pod) = self.pick(&pods, &selector).await else {
                    return;
                };
                debug_assert!(pod.starts_with(FALLBACK_PREFIX));
                let service = pod
                    .strip_prefix(&format!("{FALLBACK_PREFIX}-"))
                    .unwrap_or(&pod)
                    .to_owned();
                let r = pods.delete(&pod, &DeleteParams::default()).await;
                self.count_detail(
                    "fallback pod deleted by hand",
                    Subject::new("Service", service),
                    pod,
                    r.map(drop).map_err(Into::into),
                );
            }
            1 => {
                let dest =
                    self.destinations[self.rng.random_range(0..self.destinations.len())].clone();
                let cms: Api<ConfigMap> = Api::namespaced(self.client.clone(), &dest);
                let Some(copy) = self.pick(&cms, &format!("{COPY_LABEL}=true")).await else {
                    return;
                };
                let delete = self.rng.random_bool(0.5);
                let r = if delete {
                    cms.delete(&copy, &DeleteParams::default()).await.map(drop)
                } else {
                    let patch = json!({"data": {"v": "edited by hand"}});
                    cms.patch(&copy, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(drop)
                };
                // The copy of `cm-N` belongs to `sync-N`.
                let sync = format!("sync-{}", copy.strip_prefix("cm-").unwrap_or(&copy));
                self.count_detail(
                    "copy edited or deleted by hand",
                    Subject::new("ConfigMapSync", sync),
                    format!(
                        "{dest}/{copy} {}",
                        if delete { "deleted" } else { "edited" }
                    ),
                    r.map_err(Into::into),
                );
            }
            2 => {
                let i = self.rng.random_range(0..CLUSTERS);
                let secrets: Api<Secret> = self.api();
                let r = secrets
                    .delete(&format!("kc-{i}-kubeconfig"), &DeleteParams::default())
                    .await;
                self.count(
                    "kubeconfig Secret deleted by hand",
                    Subject::new("KubernetesCluster", format!("kc-{i}")),
                    r.map(drop).map_err(Into::into),
                );
            }
            3 => {
                let i = self.rng.random_range(0..TOPICS);
                let name = kafka_name(&self.prefix, i);
                let value = format!("{}", 1_000 + self.rng.random_range(0..1000));
                let detail = format!("{name} retention.ms={value}");
                let r = self
                    .admin
                    .alter_configs(&name, &[ConfigChange::Set("retention.ms".into(), value)])
                    .await;
                self.count_detail(
                    "topic config changed in Kafka",
                    Subject::new("Topic", format!("t{i}")),
                    detail,
                    r.map_err(Into::into),
                );
            }
            _ => {
                let i = self.rng.random_range(0..TOPICS);
                let name = kafka_name(&self.prefix, i);
                let exists = self
                    .admin
                    .describe_topics(std::slice::from_ref(&name))
                    .await
                    .is_ok_and(|t| t.contains_key(&name));
                if !exists {
                    return;
                }
                let r = self.admin.delete_topic(&name).await;
                self.count_detail(
                    "topic deleted in Kafka",
                    Subject::new("Topic", format!("t{i}")),
                    name,
                    r.map_err(Into::into),
                );
            }
        }
    }

    /// Git is applied one last time: every orphaned cluster comes back. Retries while its old
    /// object is still being deleted.
    pub async fn reapply_orphans(&mut self, within: Duration) {
        let clusters: Api<KubernetesCluster> = self.api();
        let started = std::time::Instant::now();
        while !self.orphaned.is_empty() && started.elapsed() < within {
            self.op_started = self.t0.elapsed();
            for (name, orphan) in std::mem::take(&mut self.orphaned) {
                match clusters
                    .create(&PostParams::default(), &obj(orphan.manifest.clone()))
                    .await
                {
                    Ok(_) => {
                        self.count_detail(
                            "orphaned cluster re-applied (last apply)",
                            Subject::new("KubernetesCluster", &name),
                            format!("its cluster {}", orphan.id),
                            Ok(()),
                        );
                        self.reapplied.insert(name, orphan);
                    }
                    Err(e) => {
                        // Retried (the old object may still be going): in the schedule only.
                        self.record(
                            "orphaned cluster re-applied (last apply)",
                            Subject::new("KubernetesCluster", &name),
                            format!("its cluster {}", orphan.id),
                            &Err(e.into()),
                        );
                        self.orphaned.insert(name, orphan);
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The names the workload's kinds use, for cleanup.
    pub fn topic_names(&self) -> BTreeSet<String> {
        (0..TOPICS).map(|i| kafka_name(&self.prefix, i)).collect()
    }
}
