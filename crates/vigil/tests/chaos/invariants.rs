//! The chaos test's invariants: pure functions of a [`World`] — what the cluster, the broker,
//! the vault directory, the local provider's disk and the operator processes actually hold,
//! gathered by `observe.rs` — never of what the workload meant to do. Each returns the
//! violations it finds, each naming the object, what was expected and what was seen.
//!
//! The unit tests at the bottom are the self-check: a consistent world passes, and for every
//! invariant a world doctored to break it is caught, by that invariant.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

/// Labels and annotations of Vigil's fallback pods and ConfigMapSync copies.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const SERVICE_LABEL: &str = "vigil.dev/service";
pub const FALLBACK_PREFIX: &str = "service-watcher";
pub const COPY_LABEL: &str = "configmapsync.apps.bixbite.io/copy";
pub const COPY_OWNER: &str = "configmapsync.apps.bixbite.io/owner";

/// What a violation is about: an object of the run by kind and name (`KubernetesCluster kc-1`,
/// `Topic t3`, `Service svc-2`, `ConfigMapSync sync-0`, `Replica chaos-a`, `Lease vigil-leader`),
/// so a failure report can gather its conditions, Events and log lines.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Subject {
    pub kind: &'static str,
    pub name: String,
}

impl Subject {
    pub fn new(kind: &'static str, name: impl Into<String>) -> Self {
        Self {
            kind,
            name: name.into(),
        }
    }
}

impl fmt::Display for Subject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}", self.kind, self.name)
    }
}

/// One broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    /// The object the report looks into.
    pub subject: Subject,
    pub object: String,
    pub expected: String,
    pub seen: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[{}] {}: expected {}, seen {}",
            self.invariant, self.object, self.expected, self.seen
        )
    }
}

fn violation(
    invariant: &'static str,
    subject: Subject,
    object: impl Into<String>,
    expected: impl Into<String>,
    seen: impl Into<String>,
) -> Violation {
    Violation {
        invariant,
        subject,
        object: object.into(),
        expected: expected.into(),
        seen: seen.into(),
    }
}

pub const FALLBACKS: &str = "one fallback per lame covered Service";
pub const COPIES: &str = "copies equal their source";
pub const TOPICS: &str = "broker topics equal Topic objects";
pub const CLUSTERS: &str = "one cluster per KubernetesCluster";
pub const STATUSES: &str = "statuses describe the current generation";
pub const VAULT: &str = "the vault holds each covered status";
pub const PROCESSES: &str = "operator processes";

/// A Service as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub selector: BTreeMap<String, String>,
}

/// A pod as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub ready: bool,
    pub phase: Option<String>,
    pub terminating: bool,
}

impl Pod {
    fn vigils(&self) -> bool {
        self.labels.get(MANAGED_BY).map(String::as_str) == Some("vigil")
    }
}

/// A CriticalService's coverage: its namespace (None: every watched one) and label pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Coverage {
    pub name: String,
    pub namespace: Option<String>,
    pub match_labels: BTreeMap<String, String>,
}

/// A ConfigMapSync as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sync {
    pub namespace: String,
    pub name: String,
    pub source_namespace: String,
    pub config_map: String,
    /// `destinationNamespace` and `destinationNamespaces`.
    pub destinations: BTreeSet<String>,
    pub deleting: bool,
}

/// A ConfigMap as the cluster holds it (the namespaces the test uses).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigMap {
    pub namespace: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
    pub data: BTreeMap<String, String>,
}

/// A Topic object as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicObject {
    pub name: String,
    pub topic_name: String,
    pub partitions: i32,
    pub config: BTreeMap<String, String>,
    pub deleting: bool,
}

/// A topic as the broker holds it: partitions and the configs set on the topic itself.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct BrokerTopic {
    pub partitions: i32,
    pub config: BTreeMap<String, String>,
}

/// A KubernetesCluster as the cluster holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterObject {
    pub name: String,
    pub uid: String,
    pub cluster_id: Option<String>,
    pub api_server_url: Option<String>,
    pub phase: Option<String>,
    /// Why it is not Ready, when a condition says so: `Degraded` (else `Ready`) as
    /// `reason: message`, so a failure names the decision that made it so.
    pub why: Option<String>,
    pub deleting: bool,
    /// The server its kubeconfig Secret names, if the Secret exists.
    pub secret_server: Option<String>,
}

/// A cluster of the local provider, from its directory and the live processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderCluster {
    pub id: String,
    /// `metadata.name` of the identity it was created for.
    pub identity_name: String,
    pub port: u16,
    pub pids: usize,
}

/// A KubernetesCluster deleted with `deletionPolicy: Orphan` and applied again: the id it had,
/// and what the re-applied object and the cluster itself say now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reapplied {
    pub name: String,
    pub id_before: String,
    /// The marker ConfigMap the test wrote into the cluster before orphaning it: its value.
    pub marker_written: String,
    /// That marker, read again from the cluster the re-applied object's Secret names.
    pub marker_seen: Option<String>,
}

/// What a status says about generations, for any kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusView {
    pub kind: &'static str,
    pub object: String,
    pub generation: Option<i64>,
    pub observed_generation: Option<i64>,
    /// (type, status, observedGeneration) of each condition.
    pub conditions: Vec<(String, String, Option<i64>)>,
}

/// The newest vault record of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct VaultRecord {
    pub uid: String,
    pub deleted: bool,
    pub status: Value,
}

/// An operator replica.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    pub name: String,
    pub alive: bool,
}

/// Everything the invariants judge.
#[derive(Debug, Clone, Default)]
pub struct World {
    pub services: Vec<Service>,
    pub pods: Vec<Pod>,
    pub coverages: Vec<Coverage>,
    pub syncs: Vec<Sync>,
    pub config_maps: Vec<ConfigMap>,
    pub topics: Vec<TopicObject>,
    /// The broker's topics under the run's prefix, foreign ones excluded.
    pub broker: BTreeMap<String, BrokerTopic>,
    /// Foreign topics (created by the test outside Vigil): as first read, and as now.
    pub foreign_before: BTreeMap<String, BrokerTopic>,
    pub foreign_now: BTreeMap<String, BrokerTopic>,
    pub clusters: Vec<ClusterObject>,
    pub provider: Vec<ProviderCluster>,
    pub reapplied: Vec<Reapplied>,
    pub statuses: Vec<StatusView>,
    /// Newest vault record per KubernetesCluster name (the policy covers that kind).
    pub vault: BTreeMap<String, VaultRecord>,
    /// Live KubernetesClusters' statuses, by name, for the vault comparison.
    pub cluster_statuses: BTreeMap<String, (String, Value)>,
    pub replicas: Vec<Replica>,
    /// The Lease's holderIdentity.
    pub lease_holder: Option<String>,
}

/// Every violation, invariant by invariant.
pub fn check(world: &World) -> Vec<Violation> {
    let mut out = fallbacks(world);
    out.extend(copies(world));
    out.extend(topics(world));
    out.extend(clusters(world));
    out.extend(statuses(world));
    out.extend(vault(world));
    out.extend(processes(world));
    out
}

fn covered(service: &Service, coverages: &[Coverage]) -> bool {
    !service.selector.is_empty()
        && coverages.iter().any(|c| {
            c.namespace.as_ref().is_none_or(|n| *n == service.namespace)
                && !c.match_labels.is_empty()
                && c.match_labels
                    .iter()
                    .all(|(k, v)| service.labels.get(k) == Some(v))
        })
}

/// Exactly one fallback per lame covered Service, and none anywhere else.
pub fn fallbacks(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut lame = BTreeSet::new();
    for service in &world.services {
        let answering = world.pods.iter().any(|p| {
            !p.vigils()
                && !p.terminating
                && p.ready
                && p.namespace == service.namespace
                && !service.selector.is_empty()
                && service
                    .selector
                    .iter()
                    .all(|(k, v)| p.labels.get(k) == Some(v))
        });
        if covered(service, &world.coverages) && !answering {
            lame.insert((service.namespace.clone(), service.name.clone()));
        }
    }
    let mut by_service: BTreeMap<(String, String), Vec<&Pod>> = BTreeMap::new();
    for pod in world.pods.iter().filter(|p| p.vigils() && !p.terminating) {
        let service = pod.labels.get(SERVICE_LABEL).cloned().unwrap_or_default();
        by_service
            .entry((pod.namespace.clone(), service))
            .or_default()
            .push(pod);
    }
    for (ns, name) in &lame {
        let want = format!("{FALLBACK_PREFIX}-{name}");
        let pods = by_service
            .get(&(ns.clone(), name.clone()))
            .cloned()
            .unwrap_or_default();
        let names: Vec<String> = pods
            .iter()
            .map(|p| format!("{} ({})", p.name, p.phase.as_deref().unwrap_or("no phase")))
            .collect();
        let right =
            pods.len() == 1 && pods[0].name == want && pods[0].phase.as_deref() == Some("Running");
        if !right {
            out.push(violation(
                FALLBACKS,
                Subject::new("Service", name),
                format!("Service {ns}/{name} (lame, covered)"),
                format!("one Running fallback pod {want}"),
                format!("{names:?}"),
            ));
        }
    }
    for ((ns, service), pods) in &by_service {
        if lame.contains(&(ns.clone(), service.clone())) {
            continue;
        }
        let why = match world
            .services
            .iter()
            .find(|s| s.namespace == *ns && s.name == *service)
        {
            None => "does not exist",
            Some(s) if !covered(s, &world.coverages) => "is not covered",
            Some(_) => "answers through a ready pod of its own",
        };
        let names: Vec<&str> = pods.iter().map(|p| p.name.as_str()).collect();
        out.push(violation(
            FALLBACKS,
            Subject::new("Service", service),
            format!("Service {ns}/{service} ({why})"),
            "no fallback pod",
            format!("{names:?}"),
        ));
    }
    out
}

/// Every copy equal to its source, and no copy where none belongs.
pub fn copies(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    let cm = |ns: &str, name: &str| {
        world
            .config_maps
            .iter()
            .find(|c| c.namespace == ns && c.name == name)
    };
    for sync in &world.syncs {
        let object = format!("ConfigMapSync {}/{}", sync.namespace, sync.name);
        let subject = Subject::new("ConfigMapSync", &sync.name);
        if sync.deleting {
            out.push(violation(
                COPIES,
                subject,
                object,
                "not stuck in deletion",
                "deleting",
            ));
            continue;
        }
        let Some(source) = cm(&sync.source_namespace, &sync.config_map) else {
            continue; // sourceDeletedPolicy Keep: copies keep their content
        };
        for dest in &sync.destinations {
            match cm(dest, &sync.config_map) {
                None => out.push(violation(
                    COPIES,
                    subject.clone(),
                    format!("{object}: copy {dest}/{}", sync.config_map),
                    format!("a copy of {:?}", source.data),
                    "no ConfigMap",
                )),
                Some(copy) if copy.data != source.data => out.push(violation(
                    COPIES,
                    subject.clone(),
                    format!("{object}: copy {dest}/{}", sync.config_map),
                    format!("the source's data {:?}", source.data),
                    format!("{:?}", copy.data),
                )),
                Some(_) => {}
            }
        }
    }
    for copy in world
        .config_maps
        .iter()
        .filter(|c| c.labels.get(COPY_LABEL).map(String::as_str) == Some("true"))
    {
        let owner = copy
            .annotations
            .get(COPY_OWNER)
            .cloned()
            .unwrap_or_default();
        let belongs = world.syncs.iter().any(|s| {
            format!("{}/{}", s.namespace, s.name) == owner
                && s.config_map == copy.name
                && s.destinations.contains(&copy.namespace)
        });
        if !belongs {
            // The owner annotation is `namespace/name` of the ConfigMapSync.
            let owner_name = owner.rsplit('/').next().unwrap_or_default();
            out.push(violation(
                COPIES,
                Subject::new("ConfigMapSync", owner_name),
                format!(
                    "ConfigMap {}/{} (a copy of {owner:?})",
                    copy.namespace, copy.name
                ),
                "no copy: no ConfigMapSync names this destination",
                "a copy",
            ));
        }
    }
    out
}

/// The broker's topics equal the Topic objects, with their partitions and configs; foreign
/// topics untouched.
pub fn topics(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut declared = BTreeSet::new();
    for topic in &world.topics {
        let object = format!("Topic {} ({})", topic.name, topic.topic_name);
        let subject = Subject::new("Topic", &topic.name);
        if topic.deleting {
            out.push(violation(
                TOPICS,
                subject,
                object,
                "not stuck in deletion",
                "deleting",
            ));
            continue;
        }
        declared.insert(topic.topic_name.clone());
        let want = BrokerTopic {
            partitions: topic.partitions,
            config: topic.config.clone(),
        };
        match world.broker.get(&topic.topic_name) {
            None => out.push(violation(
                TOPICS,
                subject,
                object,
                format!("{want:?}"),
                "no topic",
            )),
            Some(seen) if *seen != want => out.push(violation(
                TOPICS,
                subject,
                object,
                format!("{want:?}"),
                format!("{seen:?}"),
            )),
            Some(_) => {}
        }
    }
    for (name, seen) in &world.broker {
        if !declared.contains(name) {
            // The workload's Topic `tN` names the broker topic `<prefix>.tN`.
            let topic = name.rsplit('.').next().unwrap_or(name);
            out.push(violation(
                TOPICS,
                Subject::new("Topic", topic),
                format!("broker topic {name}"),
                "no topic: no Topic object declares it",
                format!("{seen:?}"),
            ));
        }
    }
    for (name, before) in &world.foreign_before {
        let now = world.foreign_now.get(name);
        if now != Some(before) {
            out.push(violation(
                TOPICS,
                Subject::new("BrokerTopic", name),
                format!("foreign topic {name}"),
                format!("untouched: {before:?}"),
                format!("{now:?}"),
            ));
        }
    }
    out
}

/// One cluster per KubernetesCluster, none leaked, each serving with its kubeconfig Secret; an
/// orphaned one re-applied keeps its identity.
pub fn clusters(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut claimed: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for cluster in &world.clusters {
        let object = format!("KubernetesCluster {}", cluster.name);
        let subject = Subject::new("KubernetesCluster", &cluster.name);
        if cluster.deleting {
            out.push(violation(
                CLUSTERS,
                subject,
                object,
                "not stuck in deletion",
                "deleting",
            ));
            continue;
        }
        let Some(id) = &cluster.cluster_id else {
            out.push(violation(
                CLUSTERS,
                subject,
                object,
                "status.clusterID",
                "none",
            ));
            continue;
        };
        claimed.entry(id.clone()).or_default().push(&cluster.name);
        match world.provider.iter().find(|p| p.id == *id) {
            None => out.push(violation(
                CLUSTERS,
                subject.clone(),
                object.clone(),
                format!("cluster {id} at the provider"),
                "no such cluster",
            )),
            Some(p) => {
                if p.identity_name != cluster.name {
                    out.push(violation(
                        CLUSTERS,
                        subject.clone(),
                        object.clone(),
                        format!("cluster {id} made for {}", cluster.name),
                        format!("made for {}", p.identity_name),
                    ));
                }
                if p.pids != 1 {
                    out.push(violation(
                        CLUSTERS,
                        subject.clone(),
                        object.clone(),
                        format!("one API server process for {id}"),
                        format!("{} processes", p.pids),
                    ));
                }
                let url = format!("127.0.0.1:{}", p.port);
                if !cluster
                    .api_server_url
                    .as_deref()
                    .is_some_and(|u| u.ends_with(&url))
                {
                    out.push(violation(
                        CLUSTERS,
                        subject.clone(),
                        object.clone(),
                        format!("apiServerURL at {url}"),
                        format!("{:?}", cluster.api_server_url),
                    ));
                }
            }
        }
        if cluster.phase.as_deref() != Some("Ready") {
            out.push(violation(
                CLUSTERS,
                subject.clone(),
                object.clone(),
                "phase Ready",
                match &cluster.why {
                    Some(why) => format!("{:?} ({why})", cluster.phase),
                    None => format!("{:?}", cluster.phase),
                },
            ));
        }
        if cluster.secret_server.is_none() || cluster.secret_server != cluster.api_server_url {
            out.push(violation(
                CLUSTERS,
                subject,
                format!("{object}: Secret {}-kubeconfig", cluster.name),
                format!("a kubeconfig for {:?}", cluster.api_server_url),
                format!("{:?}", cluster.secret_server),
            ));
        }
    }
    for (id, names) in &claimed {
        if names.len() > 1 {
            out.push(violation(
                CLUSTERS,
                Subject::new("KubernetesCluster", names[0]),
                format!("cluster {id}"),
                "one KubernetesCluster",
                format!("{names:?}"),
            ));
        }
    }
    for p in &world.provider {
        if !claimed.contains_key(&p.id) {
            out.push(violation(
                CLUSTERS,
                Subject::new("KubernetesCluster", &p.identity_name),
                format!("cluster {} (made for {})", p.id, p.identity_name),
                "no cluster: no KubernetesCluster claims it (leaked)",
                format!("a cluster with {} processes", p.pids),
            ));
        }
    }
    for r in &world.reapplied {
        let object = format!("KubernetesCluster {} (orphaned, then re-applied)", r.name);
        let subject = Subject::new("KubernetesCluster", &r.name);
        let now = world
            .clusters
            .iter()
            .find(|c| c.name == r.name)
            .and_then(|c| c.cluster_id.clone());
        if now.as_deref() != Some(r.id_before.as_str()) {
            out.push(violation(
                CLUSTERS,
                subject.clone(),
                object.clone(),
                format!("its cluster {}", r.id_before),
                format!("{now:?}"),
            ));
        }
        if r.marker_seen.as_deref() != Some(r.marker_written.as_str()) {
            out.push(violation(
                CLUSTERS,
                subject,
                object,
                format!("the data written before: marker {:?}", r.marker_written),
                format!("{:?}", r.marker_seen),
            ));
        }
    }
    out
}

/// Every status describes its object's current generation (and says Ready).
pub fn statuses(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    for s in &world.statuses {
        let object = format!("{} {}", s.kind, s.object);
        // `namespace/name`, or the name of a cluster-scoped object.
        let subject = Subject::new(s.kind, s.object.rsplit('/').next().unwrap_or_default());
        let Some(generation) = s.generation else {
            continue;
        };
        if s.observed_generation != Some(generation) {
            out.push(violation(
                STATUSES,
                subject.clone(),
                object.clone(),
                format!("observedGeneration {generation}"),
                format!("{:?}", s.observed_generation),
            ));
        }
        for (type_, _, observed) in &s.conditions {
            if observed.is_some_and(|o| o != generation) {
                out.push(violation(
                    STATUSES,
                    subject.clone(),
                    format!("{object} condition {type_}"),
                    format!("observedGeneration {generation}"),
                    format!("{observed:?}"),
                ));
            }
        }
        let ready = s
            .conditions
            .iter()
            .find(|(t, _, _)| t == "Ready")
            .map(|(_, status, _)| status.as_str());
        if ready != Some("True") {
            out.push(violation(
                STATUSES,
                subject,
                object,
                "Ready=True",
                format!("Ready={ready:?}"),
            ));
        }
    }
    out
}

/// The vault holds every covered object's current status under its uid.
pub fn vault(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    for (name, (uid, status)) in &world.cluster_statuses {
        let object = format!("vault record of KubernetesCluster {name}");
        let subject = Subject::new("KubernetesCluster", name);
        match world.vault.get(name) {
            None => out.push(violation(
                VAULT,
                subject,
                object,
                format!("uid {uid}"),
                "no record",
            )),
            Some(r) if r.uid != *uid || r.deleted || r.status != *status => out.push(violation(
                VAULT,
                subject,
                object,
                format!("uid {uid}, alive, status {status}"),
                format!("uid {}, deleted {}, status {}", r.uid, r.deleted, r.status),
            )),
            Some(_) => {}
        }
    }
    for (name, r) in &world.vault {
        if !world.cluster_statuses.contains_key(name) && !r.deleted {
            out.push(violation(
                VAULT,
                Subject::new("KubernetesCluster", name),
                format!("vault record of KubernetesCluster {name} (the object is gone)"),
                "a tombstone",
                format!("a live record of uid {}", r.uid),
            ));
        }
    }
    out
}

/// Both replicas run, and one of them holds the Lease.
pub fn processes(world: &World) -> Vec<Violation> {
    let mut out = Vec::new();
    for r in world.replicas.iter().filter(|r| !r.alive) {
        out.push(violation(
            PROCESSES,
            Subject::new("Replica", &r.name),
            format!("replica {}", r.name),
            "running",
            "exited",
        ));
    }
    let holder = world.lease_holder.as_deref().unwrap_or("");
    let held_by_live = world
        .replicas
        .iter()
        .any(|r| r.alive && holder.starts_with(&format!("{}_", r.name)));
    if !held_by_live {
        out.push(violation(
            PROCESSES,
            Subject::new("Lease", "vigil-leader"),
            "Lease vigil-leader",
            "held by a running replica",
            format!("holder {holder:?}"),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    /// A world where everything holds: a lame covered Service with its fallback, a healthy one,
    /// a copy, a topic, a foreign topic, a cluster re-applied after an orphaning, its vault
    /// record, two replicas.
    fn good() -> World {
        let svc = |name: &str, tier: &str| Service {
            namespace: "ns".into(),
            name: name.into(),
            labels: map(&[("tier", tier)]),
            selector: map(&[("app", name)]),
        };
        let status = json!({"clusterID": "c-1", "phase": "Ready"});
        World {
            services: vec![
                svc("lame", "critical"),
                svc("fine", "critical"),
                svc("other", "normal"),
            ],
            pods: vec![
                Pod {
                    namespace: "ns".into(),
                    name: "service-watcher-lame".into(),
                    labels: map(&[(MANAGED_BY, "vigil"), (SERVICE_LABEL, "lame")]),
                    ready: true,
                    phase: Some("Running".into()),
                    terminating: false,
                },
                Pod {
                    namespace: "ns".into(),
                    name: "fine-1".into(),
                    labels: map(&[("app", "fine")]),
                    ready: true,
                    phase: Some("Running".into()),
                    terminating: false,
                },
            ],
            coverages: vec![Coverage {
                name: "critical".into(),
                namespace: Some("ns".into()),
                match_labels: map(&[("tier", "critical")]),
            }],
            syncs: vec![Sync {
                namespace: "ns".into(),
                name: "s".into(),
                source_namespace: "ns".into(),
                config_map: "cm".into(),
                destinations: ["d1".to_owned()].into(),
                deleting: false,
            }],
            config_maps: vec![
                ConfigMap {
                    namespace: "ns".into(),
                    name: "cm".into(),
                    labels: BTreeMap::new(),
                    annotations: BTreeMap::new(),
                    data: map(&[("k", "v")]),
                },
                ConfigMap {
                    namespace: "d1".into(),
                    name: "cm".into(),
                    labels: map(&[(COPY_LABEL, "true")]),
                    annotations: map(&[(COPY_OWNER, "ns/s")]),
                    data: map(&[("k", "v")]),
                },
            ],
            topics: vec![TopicObject {
                name: "t".into(),
                topic_name: "p.t".into(),
                partitions: 2,
                config: map(&[("retention.ms", "1000")]),
                deleting: false,
            }],
            broker: [(
                "p.t".to_owned(),
                BrokerTopic {
                    partitions: 2,
                    config: map(&[("retention.ms", "1000")]),
                },
            )]
            .into(),
            foreign_before: [("p-foreign.f".to_owned(), BrokerTopic::default())].into(),
            foreign_now: [("p-foreign.f".to_owned(), BrokerTopic::default())].into(),
            clusters: vec![ClusterObject {
                name: "kc".into(),
                uid: "u".into(),
                cluster_id: Some("c-1".into()),
                api_server_url: Some("https://127.0.0.1:4000".into()),
                phase: Some("Ready".into()),
                why: None,
                deleting: false,
                secret_server: Some("https://127.0.0.1:4000".into()),
            }],
            provider: vec![ProviderCluster {
                id: "c-1".into(),
                identity_name: "kc".into(),
                port: 4000,
                pids: 1,
            }],
            reapplied: vec![Reapplied {
                name: "kc".into(),
                id_before: "c-1".into(),
                marker_written: "m".into(),
                marker_seen: Some("m".into()),
            }],
            statuses: vec![StatusView {
                kind: "Topic",
                object: "ns/t".into(),
                generation: Some(3),
                observed_generation: Some(3),
                conditions: vec![("Ready".into(), "True".into(), Some(3))],
            }],
            vault: [(
                "kc".to_owned(),
                VaultRecord {
                    uid: "u".into(),
                    deleted: false,
                    status: status.clone(),
                },
            )]
            .into(),
            cluster_statuses: [("kc".to_owned(), ("u".to_owned(), status))].into(),
            replicas: vec![
                Replica {
                    name: "a".into(),
                    alive: true,
                },
                Replica {
                    name: "b".into(),
                    alive: true,
                },
            ],
            lease_holder: Some("b_1234".into()),
        }
    }

    /// The doctored world breaks exactly `invariant` (and is caught by it).
    fn caught(world: World, invariant: &str) {
        let found = check(&world);
        assert!(
            !found.is_empty() && found.iter().all(|v| v.invariant == invariant),
            "expected violations of {invariant:?} only, found {found:#?}"
        );
        for v in &found {
            assert!(!v.object.is_empty() && !v.expected.is_empty() && !v.seen.is_empty());
            assert!(
                !v.subject.name.is_empty(),
                "every violation names its subject: {v:?}"
            );
        }
    }

    #[test]
    fn a_consistent_world_passes() {
        assert_eq!(check(&good()), Vec::<Violation>::new());
    }

    #[test]
    fn a_missing_duplicate_or_stray_fallback_is_caught() {
        let mut w = good();
        w.pods.retain(|p| p.name != "service-watcher-lame");
        caught(w, FALLBACKS);
        let mut w = good();
        let mut twin = w.pods[0].clone();
        twin.name = "service-watcher-lame-2".into();
        w.pods.push(twin);
        caught(w, FALLBACKS);
        let mut w = good();
        w.pods[0].phase = Some("Pending".into());
        caught(w, FALLBACKS);
        // The Service answers through its own pod now: the fallback must go.
        let mut w = good();
        w.pods.push(Pod {
            name: "lame-1".into(),
            labels: map(&[("app", "lame")]),
            ..w.pods[1].clone()
        });
        caught(w, FALLBACKS);
        // A fallback for a Service that is not covered.
        let mut w = good();
        w.pods[0]
            .labels
            .insert(SERVICE_LABEL.into(), "other".into());
        w.pods[0].name = "service-watcher-other".into();
        let found = check(&w);
        assert!(found.len() == 2 && found.iter().all(|v| v.invariant == FALLBACKS));
    }

    #[test]
    fn a_stale_missing_or_stray_copy_is_caught() {
        let mut w = good();
        w.config_maps[1].data = map(&[("k", "edited")]);
        caught(w, COPIES);
        let mut w = good();
        w.config_maps.pop();
        caught(w, COPIES);
        let mut w = good();
        w.syncs[0].destinations = ["d2".to_owned()].into();
        let found = check(&w);
        assert_eq!(
            found.len(),
            2,
            "d2 lacks its copy, d1 keeps one: {found:#?}"
        );
        let mut w = good();
        w.syncs[0].deleting = true;
        caught(w, COPIES);
    }

    #[test]
    fn a_topic_that_differs_leaks_or_is_missing_and_a_touched_foreign_one_are_caught() {
        let mut w = good();
        w.broker.get_mut("p.t").expect("topic").partitions = 1;
        caught(w, TOPICS);
        let mut w = good();
        w.broker
            .get_mut("p.t")
            .expect("topic")
            .config
            .insert("cleanup.policy".into(), "compact".into());
        caught(w, TOPICS);
        let mut w = good();
        w.broker.insert("p.leaked".into(), BrokerTopic::default());
        caught(w, TOPICS);
        let mut w = good();
        w.broker.clear();
        caught(w, TOPICS);
        let mut w = good();
        w.foreign_now.clear();
        caught(w, TOPICS);
        let mut w = good();
        w.topics[0].deleting = true;
        w.broker.clear();
        caught(w, TOPICS);
    }

    #[test]
    fn a_leaked_duplicated_or_replaced_cluster_is_caught() {
        let mut w = good();
        w.provider.push(ProviderCluster {
            id: "c-2".into(),
            identity_name: "gone".into(),
            port: 4001,
            pids: 1,
        });
        caught(w, CLUSTERS);
        let mut w = good();
        w.provider[0].pids = 2;
        caught(w, CLUSTERS);
        let mut w = good();
        w.provider.clear();
        caught(w, CLUSTERS);
        // Re-applied, it got a blank new cluster instead of its own.
        let mut w = good();
        w.reapplied[0].marker_seen = None;
        caught(w, CLUSTERS);
        let mut w = good();
        w.reapplied[0].id_before = "c-0".into();
        caught(w, CLUSTERS);
        let mut w = good();
        w.clusters[0].secret_server = None;
        caught(w, CLUSTERS);
    }

    #[test]
    fn a_status_of_an_older_generation_is_caught() {
        let mut w = good();
        w.statuses[0].observed_generation = Some(2);
        caught(w, STATUSES);
        let mut w = good();
        w.statuses[0].conditions[0].2 = Some(2);
        caught(w, STATUSES);
        let mut w = good();
        w.statuses[0].conditions[0].1 = "False".into();
        caught(w, STATUSES);
    }

    #[test]
    fn a_vault_behind_its_object_is_caught() {
        let mut w = good();
        w.vault.get_mut("kc").expect("record").status = json!({"phase": "Provisioning"});
        caught(w, VAULT);
        let mut w = good();
        w.vault.insert(
            "gone".into(),
            VaultRecord {
                uid: "x".into(),
                deleted: false,
                status: json!({}),
            },
        );
        caught(w, VAULT);
    }

    #[test]
    fn a_dead_replica_or_a_lease_held_by_none_is_caught() {
        let mut w = good();
        w.replicas[0].alive = false;
        caught(w, PROCESSES);
        let mut w = good();
        w.lease_holder = Some("c_1".into());
        caught(w, PROCESSES);
    }
}
