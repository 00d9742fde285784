//! The Endpoints and EndpointSlice controllers, as kube-controller-manager runs them: for every
//! Service with a selector, the selected pods that have an IP become addresses — ready pods as
//! ready, the others as not ready — with named and numbered `targetPort`s resolved against the
//! pods' container ports. Services without a selector are left alone.
//!
//! The desired objects come from pure functions ([`desired_endpoints`], [`desired_slices`]); the
//! pass compares them with what is stored and writes only differences, so a settled cluster sees
//! no writes.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::registry::meta;
use crate::registry::ops::{self, DeleteOptions, Target, WriteOptions};
use crate::registry::store::{Event, EventType, State, Store, Stored};

/// Label linking an EndpointSlice to its Service.
pub const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// Label naming the controller that manages a slice.
pub const MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";
const MANAGED_BY: &str = "endpointslice-controller.k8s.io";
/// The most endpoints one slice holds, as the real controller's default.
const MAX_ENDPOINTS_PER_SLICE: usize = 100;

const PODS: &str = "/pods";
const SERVICES: &str = "/services";
const ENDPOINTS: &str = "/endpoints";
const SLICES: &str = "discovery.k8s.io/endpointslices";

/// The controller's memory between passes, as the real controller keeps its informer-fed
/// selection: which pods each Service selects, and per namespace an index of Service selectors.
/// Both are updated from events, so a pass costs in proportion to what changed, not to the
/// number of pods.
#[derive(Default)]
pub struct EndpointsController {
    indexes: HashMap<String, SelectorIndex>,
    selected: HashMap<ServiceKey, BTreeSet<String>>,
}

impl EndpointsController {
    /// One pass: recompute the Services touched by `events` (all of them when `None`).
    pub fn pass(&mut self, store: &Store, events: Option<&[Event]>) {
        let writes = {
            let state = store.read();
            let affected = match events {
                Some(events) => self.absorb(&state, events),
                None => self.rebuild(&state),
            };
            let mut writes = Vec::new();
            for (ns, name) in &affected {
                let pods: Vec<Arc<Stored>> = self
                    .selected
                    .get(&(ns.clone(), name.clone()))
                    .into_iter()
                    .flatten()
                    .filter_map(|pod| state.get(PODS, ns, pod))
                    .collect();
                writes.extend(plan(&state, ns, name, &pods));
            }
            writes
        };
        if !writes.is_empty() {
            store.write(|state| writes.into_iter().for_each(|w| w.apply(state)));
        }
    }

    /// Forgets everything and recomputes every Service's selection (start, or the log was lost).
    fn rebuild(&mut self, state: &State) -> BTreeSet<ServiceKey> {
        self.indexes.clear();
        self.selected.clear();
        let namespaces: BTreeSet<String> = state
            .range(SERVICES, None, None)
            .map(|s| s.namespace().to_owned())
            .collect();
        for ns in &namespaces {
            self.reselect_namespace(state, ns);
        }
        state
            .range(SERVICES, None, None)
            .map(|s| (s.namespace().to_owned(), s.name().to_owned()))
            .collect()
    }

    /// Rebuilds a namespace's selector index and every selection in it from one scan of its pods.
    fn reselect_namespace(&mut self, state: &State, ns: &str) {
        let index = SelectorIndex::build(state, ns);
        self.selected.retain(|(n, _), _| n != ns);
        for svc in index.services() {
            self.selected
                .insert((ns.to_owned(), svc.to_owned()), BTreeSet::new());
        }
        for pod in state.range(PODS, Some(ns), None) {
            for svc in index.matching(&pod.value) {
                if let Some(set) = self.selected.get_mut(&(ns.to_owned(), svc.to_owned())) {
                    set.insert(pod.name().to_owned());
                }
            }
        }
        self.indexes.insert(ns.to_owned(), index);
    }

    /// Folds a batch of events into the selection; returns the Services to recompute.
    fn absorb(&mut self, state: &State, events: &[Event]) -> BTreeSet<ServiceKey> {
        let mut affected = BTreeSet::new();
        // Services changed: their namespace's selections are rebuilt once for the whole batch.
        let changed_namespaces: BTreeSet<&str> = events
            .iter()
            .filter(|e| &*e.storage_key == SERVICES)
            .map(|e| e.object.namespace())
            .collect();
        for ns in &changed_namespaces {
            self.reselect_namespace(state, ns);
        }
        for e in events {
            let obj = &e.object;
            let ns = obj.namespace();
            match &*e.storage_key {
                SERVICES | ENDPOINTS => {
                    affected.insert((ns.to_owned(), obj.name().to_owned()));
                }
                SLICES => {
                    if let Some(svc) = meta::labels(&obj.value)
                        .and_then(|l| l.get(SERVICE_NAME_LABEL))
                        .and_then(Value::as_str)
                    {
                        affected.insert((ns.to_owned(), svc.to_owned()));
                    }
                }
                PODS if !changed_namespaces.contains(ns) => {
                    if !self.indexes.contains_key(ns) {
                        self.reselect_namespace(state, ns);
                    }
                    let Some(index) = self.indexes.get(ns) else {
                        continue;
                    };
                    let now: BTreeSet<&str> = if e.kind == EventType::Deleted {
                        BTreeSet::new()
                    } else {
                        index.matching(&obj.value).collect()
                    };
                    let before: BTreeSet<&str> = e
                        .previous
                        .as_ref()
                        .map(|p| index.matching(&p.value).collect())
                        .unwrap_or_default();
                    for svc in now.union(&before) {
                        let key = (ns.to_owned(), (*svc).to_owned());
                        if let Some(set) = self.selected.get_mut(&key) {
                            if now.contains(svc) {
                                set.insert(obj.name().to_owned());
                            } else {
                                set.remove(obj.name());
                            }
                        }
                        affected.insert(key);
                    }
                }
                PODS => {
                    // The namespace was just reselected from the live pods; only the Services
                    // this pod touches need recomputing.
                    if let Some(index) = self.indexes.get(ns) {
                        let touched = [Some(&obj.value), e.previous.as_ref().map(|p| &p.value)];
                        for pod in touched.into_iter().flatten() {
                            affected.extend(
                                index
                                    .matching(pod)
                                    .map(|svc| (ns.to_owned(), svc.to_owned())),
                            );
                        }
                    }
                }
                _ => {}
            }
        }
        affected
    }
}

type ServiceKey = (String, String);

/// The Services of one namespace that have selectors, indexed by one of their selector's
/// labels (key, then value): a pod can only match Services indexed under one of its own labels,
/// so matching a pod costs a few map lookups instead of a pass over every Service.
struct SelectorIndex {
    by_label: HashMap<String, HashMap<String, Vec<NamedSelector>>>,
}

/// A Service's name and selector.
type NamedSelector = (String, Map<String, Value>);

impl SelectorIndex {
    fn build(state: &State, ns: &str) -> Self {
        let mut by_label: HashMap<String, HashMap<String, Vec<NamedSelector>>> = HashMap::new();
        for svc in state.range(SERVICES, Some(ns), None) {
            let Some(sel) = selector(&svc.value) else {
                continue;
            };
            let Some((k, v)) = sel.iter().next() else {
                continue;
            };
            let value = v.as_str().unwrap_or_default().to_owned();
            by_label
                .entry(k.clone())
                .or_default()
                .entry(value)
                .or_default()
                .push((svc.name().to_owned(), sel.clone()));
        }
        Self { by_label }
    }

    /// Every indexed Service.
    fn services(&self) -> impl Iterator<Item = &str> {
        self.by_label
            .values()
            .flat_map(|by_value| by_value.values())
            .flatten()
            .map(|(name, _)| name.as_str())
    }

    /// Names of the Services whose selector matches a pod.
    fn matching<'a>(&'a self, pod: &'a Value) -> impl Iterator<Item = &'a str> + 'a {
        meta::labels(pod)
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| self.by_label.get(k)?.get(v.as_str()?))
            .flatten()
            .filter(move |(_, sel)| selects(sel, pod))
            .map(|(name, _)| name.as_str())
    }
}

/// A Service's selector, when it has a non-empty one.
fn selector(service: &Value) -> Option<&Map<String, Value>> {
    service
        .pointer("/spec/selector")
        .and_then(Value::as_object)
        .filter(|s| !s.is_empty())
}

fn selects(selector: &Map<String, Value>, pod: &Value) -> bool {
    let labels = meta::labels(pod);
    selector
        .iter()
        .all(|(k, v)| labels.and_then(|l| l.get(k)) == Some(v))
}

/// A pod as an endpoint: its address, readiness and the ports it resolves.
#[derive(Debug, Clone, PartialEq)]
struct Member {
    ip: String,
    ready: bool,
    serving: bool,
    terminating: bool,
    node: Option<String>,
    target: Value,
    /// Resolved ports, in the Service's port order.
    ports: Vec<Value>,
}

fn is_ready(pod: &Value) -> bool {
    pod.pointer("/status/conditions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .any(|c| {
            c.get("type").and_then(Value::as_str) == Some("Ready")
                && c.get("status").and_then(Value::as_str) == Some("True")
        })
}

/// Resolves a Service port's targetPort on a pod: a number as is, a name through the pod's
/// container ports (None when the pod has no such port).
fn resolve_port(service_port: &Value, pod: &Value) -> Option<i64> {
    let target = service_port
        .get("targetPort")
        .or_else(|| service_port.get("port"))?;
    if let Some(n) = target.as_i64() {
        return Some(n);
    }
    let name = target.as_str()?;
    if let Ok(n) = name.parse::<i64>() {
        return Some(n);
    }
    let protocol = service_port
        .get("protocol")
        .and_then(Value::as_str)
        .unwrap_or("TCP");
    pod.pointer("/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .flat_map(|c| {
            c.get("ports")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
        })
        .find(|p| {
            p.get("name").and_then(Value::as_str) == Some(name)
                && p.get("protocol").and_then(Value::as_str).unwrap_or("TCP") == protocol
        })
        .and_then(|p| p.get("containerPort").and_then(Value::as_i64))
}

fn member(service: &Value, pod: &Value) -> Option<Member> {
    let ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .filter(|ip| !ip.is_empty())?;
    if matches!(
        pod.pointer("/status/phase").and_then(Value::as_str),
        Some("Succeeded" | "Failed")
    ) {
        return None;
    }
    let publish_not_ready = service
        .pointer("/spec/publishNotReadyAddresses")
        .and_then(Value::as_bool)
        == Some(true);
    let pod_ready = is_ready(pod);
    let terminating = meta::is_deleting(pod);
    let ports = service
        .pointer("/spec/ports")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|sp| {
            let port = resolve_port(sp, pod)?;
            let mut p = json!({"port": port, "protocol": sp.get("protocol").and_then(Value::as_str).unwrap_or("TCP")});
            if let Some(name) = sp.get("name").and_then(Value::as_str).filter(|n| !n.is_empty()) {
                p["name"] = json!(name);
            }
            if let Some(app) = sp.get("appProtocol") {
                p["appProtocol"] = app.clone();
            }
            Some(p)
        })
        .collect();
    Some(Member {
        ip: ip.to_owned(),
        ready: (pod_ready || publish_not_ready) && !terminating,
        serving: pod_ready || publish_not_ready,
        terminating,
        node: pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
            .map(str::to_owned),
        target: json!({"kind": "Pod", "namespace": meta::namespace(pod), "name": meta::name(pod), "uid": meta::meta_str(pod, "uid")}),
        ports,
    })
}

fn members(service: &Value, pods: &[&Value]) -> Vec<Member> {
    let mut out: Vec<Member> = pods.iter().filter_map(|p| member(service, p)).collect();
    out.sort_by(|a, b| {
        a.ip.cmp(&b.ip)
            .then_with(|| a.target["name"].as_str().cmp(&b.target["name"].as_str()))
    });
    out
}

fn address(m: &Member) -> Value {
    let mut a = json!({"ip": m.ip, "targetRef": m.target});
    if let Some(node) = &m.node {
        a["nodeName"] = json!(node);
    }
    a
}

/// One Endpoints subset under construction.
#[derive(Debug, Default)]
struct Subset {
    ready: Vec<Value>,
    not_ready: Vec<Value>,
    ports: Vec<Value>,
}

impl Subset {
    fn into_json(self) -> Value {
        let mut subset = Map::new();
        for (key, list) in [
            ("addresses", self.ready),
            ("notReadyAddresses", self.not_ready),
            ("ports", self.ports),
        ] {
            if !list.is_empty() {
                subset.insert(key.into(), Value::Array(list));
            }
        }
        Value::Object(subset)
    }
}

/// The Endpoints object a Service with a selector should have (None without a selector).
pub fn desired_endpoints(service: &Value, pods: &[&Value]) -> Option<Value> {
    selector(service)?;
    // Pods are grouped by the ports they resolve: each group is one subset.
    let mut groups: BTreeMap<String, Subset> = BTreeMap::new();
    for m in members(service, pods).iter().filter(|m| !m.terminating) {
        let key = serde_json::to_string(&m.ports).unwrap_or_default();
        let group = groups.entry(key).or_insert_with(|| Subset {
            ports: m.ports.clone(),
            ..Subset::default()
        });
        if m.ready {
            group.ready.push(address(m))
        } else {
            group.not_ready.push(address(m))
        }
    }
    let subsets: Vec<Value> = groups.into_values().map(Subset::into_json).collect();
    let mut endpoints = json!({
        "apiVersion": "v1",
        "kind": "Endpoints",
        "metadata": {"name": meta::name(service), "namespace": meta::namespace(service), "labels": owned_labels(service)},
    });
    if !subsets.is_empty() {
        endpoints["subsets"] = Value::Array(subsets);
    }
    Some(endpoints)
}

/// The Service's own labels, which the controllers copy onto what they create.
fn owned_labels(service: &Value) -> Value {
    let mut labels = meta::labels(service).cloned().unwrap_or_default();
    if service.pointer("/spec/clusterIP").and_then(Value::as_str) == Some("None") {
        labels.insert("service.kubernetes.io/headless".into(), json!(""));
    }
    Value::Object(labels)
}

/// The content of one desired EndpointSlice: its ports and endpoints.
#[derive(Debug, Clone, PartialEq)]
pub struct SliceContent {
    pub ports: Value,
    pub endpoints: Value,
}

/// The EndpointSlices a Service with a selector should have: one per distinct port set, at most
/// 100 endpoints each, or a single empty placeholder when no pod qualifies.
pub fn desired_slices(service: &Value, pods: &[&Value]) -> Option<Vec<SliceContent>> {
    selector(service)?;
    let mut groups: BTreeMap<String, (Value, Vec<Value>)> = BTreeMap::new();
    for m in members(service, pods) {
        let ports: Vec<Value> = m
            .ports
            .iter()
            .map(|p| {
                let mut p = p.clone();
                if p.get("name").is_none() {
                    p["name"] = json!("");
                }
                p
            })
            .collect();
        let key = serde_json::to_string(&ports).unwrap_or_default();
        let mut endpoint = json!({
            "addresses": [m.ip],
            "conditions": {"ready": m.ready, "serving": m.serving, "terminating": m.terminating},
            "targetRef": m.target,
        });
        if let Some(node) = &m.node {
            endpoint["nodeName"] = json!(node);
        }
        groups
            .entry(key)
            .or_insert_with(|| (Value::Array(ports), Vec::new()))
            .1
            .push(endpoint);
    }
    if groups.is_empty() {
        return Some(vec![SliceContent {
            ports: json!([]),
            endpoints: json!([]),
        }]);
    }
    Some(
        groups
            .into_values()
            .flat_map(|(ports, endpoints)| {
                endpoints
                    .chunks(MAX_ENDPOINTS_PER_SLICE)
                    .map(|chunk| SliceContent {
                        ports: ports.clone(),
                        endpoints: Value::Array(chunk.to_vec()),
                    })
                    .collect::<Vec<_>>()
            })
            .collect(),
    )
}

/// One write the pass decided on.
#[derive(Debug)]
enum Write {
    Create {
        resource: &'static str,
        ns: String,
        body: Value,
    },
    Update {
        resource: &'static str,
        ns: String,
        name: String,
        body: Value,
    },
    Delete {
        resource: &'static str,
        ns: String,
        name: String,
    },
}

impl Write {
    fn apply(self, state: &mut State) {
        let (resource, group) = match &self {
            Write::Create { resource, .. }
            | Write::Update { resource, .. }
            | Write::Delete { resource, .. } => (
                *resource,
                if *resource == "endpointslices" {
                    "discovery.k8s.io"
                } else {
                    ""
                },
            ),
        };
        let Some(info) = state.registry.get(group, "v1", resource) else {
            return;
        };
        let manager = if resource == "endpoints" {
            "endpoint-controller"
        } else {
            "endpointslice-controller"
        };
        let opts = WriteOptions {
            field_manager: manager.into(),
            ..Default::default()
        };
        // Conflicts and NotFound mean the world moved on; the next pass recomputes.
        let _ = match self {
            Write::Create { ns, body, .. } => {
                ops::create(state, &info, &ns, body, &opts).map(|_| ())
            }
            Write::Update { ns, name, body, .. } => {
                ops::update(state, &info, &ns, &name, body, &opts, Target::Main).map(|_| ())
            }
            Write::Delete { ns, name, .. } => {
                ops::delete(state, &info, &ns, &name, &DeleteOptions::default()).map(|_| ())
            }
        };
    }
}

/// What to write so that one Service's Endpoints and EndpointSlices match its pods.
fn plan(state: &State, ns: &str, name: &str, selected: &[Arc<Stored>]) -> Vec<Write> {
    let service = state.get(SERVICES, ns, name);
    let pod_values: Vec<&Value> = match &service {
        Some(svc) if selector(&svc.value).is_some() => selected.iter().map(|p| &p.value).collect(),
        _ => Vec::new(),
    };
    let mut writes = plan_endpoints(state, ns, name, service.as_deref(), &pod_values);
    writes.extend(plan_slices(
        state,
        ns,
        name,
        service.as_deref(),
        &pod_values,
    ));
    writes
}

fn plan_endpoints(
    state: &State,
    ns: &str,
    name: &str,
    service: Option<&Stored>,
    pods: &[&Value],
) -> Vec<Write> {
    let current = state.get(ENDPOINTS, ns, name);
    let desired = service.and_then(|s| desired_endpoints(&s.value, pods));
    match (desired, current) {
        (None, Some(_)) if service.is_none() => {
            vec![Write::Delete {
                resource: "endpoints",
                ns: ns.into(),
                name: name.into(),
            }]
        }
        (None, _) => Vec::new(),
        (Some(body), None) => vec![Write::Create {
            resource: "endpoints",
            ns: ns.into(),
            body,
        }],
        (Some(body), Some(current)) => {
            let same = current.value.get("subsets") == body.get("subsets")
                && meta::labels(&current.value).cloned().unwrap_or_default()
                    == body["metadata"]["labels"]
                        .as_object()
                        .cloned()
                        .unwrap_or_default();
            if same {
                return Vec::new();
            }
            let mut updated = current.value.clone();
            updated["subsets"] = body.get("subsets").cloned().unwrap_or(Value::Null);
            if updated["subsets"].is_null() {
                meta::object_mut(&mut updated).remove("subsets");
            }
            meta::set_meta(&mut updated, "labels", body["metadata"]["labels"].clone());
            vec![Write::Update {
                resource: "endpoints",
                ns: ns.into(),
                name: name.into(),
                body: updated,
            }]
        }
    }
}

fn plan_slices(
    state: &State,
    ns: &str,
    name: &str,
    service: Option<&Stored>,
    pods: &[&Value],
) -> Vec<Write> {
    // The controller names its slices `{service}-{suffix}`, so only that stretch of the sorted
    // store needs reading, not every slice in the namespace.
    let prefix = format!("{name}-");
    let current: Vec<Arc<Stored>> = state
        .range(SLICES, Some(ns), Some(&(ns.to_owned(), prefix.clone())))
        .take_while(|s| s.name().starts_with(&prefix))
        .filter(|s| {
            let labels = meta::labels(&s.value);
            let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
            label(SERVICE_NAME_LABEL) == Some(name) && label(MANAGED_BY_LABEL) == Some(MANAGED_BY)
        })
        .cloned()
        .collect();
    let Some(service) = service else {
        return current
            .iter()
            .map(|s| Write::Delete {
                resource: "endpointslices",
                ns: ns.into(),
                name: s.name().into(),
            })
            .collect();
    };
    let Some(desired) = desired_slices(&service.value, pods) else {
        // The Service lost its selector: its managed slices go.
        return current
            .iter()
            .map(|s| Write::Delete {
                resource: "endpointslices",
                ns: ns.into(),
                name: s.name().into(),
            })
            .collect();
    };
    let mut labels = owned_labels(&service.value);
    labels[SERVICE_NAME_LABEL] = json!(name);
    labels[MANAGED_BY_LABEL] = json!(MANAGED_BY);
    let mut unused: Vec<&Arc<Stored>> = current.iter().collect();
    let mut writes = Vec::new();
    for want in desired {
        let content_of = |s: &Stored| SliceContent {
            ports: s.value.get("ports").cloned().unwrap_or(json!([])),
            endpoints: s.value.get("endpoints").cloned().unwrap_or(json!([])),
        };
        // Reuse an existing slice: an identical one first, else one with the same ports, else any.
        let pick = unused
            .iter()
            .position(|s| content_of(s) == want)
            .or_else(|| {
                unused
                    .iter()
                    .position(|s| content_of(s).ports == want.ports)
            })
            .or(if unused.is_empty() { None } else { Some(0) });
        match pick.map(|i| unused.remove(i)) {
            Some(existing)
                if content_of(existing) == want
                    && meta::labels(&existing.value).map(|l| Value::Object(l.clone()))
                        == Some(labels.clone()) => {}
            Some(existing) => {
                let mut body = existing.value.clone();
                body["ports"] = want.ports;
                body["endpoints"] = want.endpoints;
                meta::set_meta(&mut body, "labels", labels.clone());
                writes.push(Write::Update {
                    resource: "endpointslices",
                    ns: ns.into(),
                    name: existing.name().into(),
                    body,
                });
            }
            None => {
                let body = json!({
                    "apiVersion": "discovery.k8s.io/v1",
                    "kind": "EndpointSlice",
                    "metadata": {
                        "generateName": format!("{name}-"),
                        "namespace": ns,
                        "labels": labels,
                        "ownerReferences": [{
                            "apiVersion": "v1", "kind": "Service", "name": name,
                            "uid": meta::meta_str(&service.value, "uid"), "controller": true, "blockOwnerDeletion": true,
                        }],
                    },
                    "addressType": "IPv4",
                    "ports": want.ports,
                    "endpoints": want.endpoints,
                });
                writes.push(Write::Create {
                    resource: "endpointslices",
                    ns: ns.into(),
                    body,
                });
            }
        }
    }
    writes.extend(unused.into_iter().map(|s| Write::Delete {
        resource: "endpointslices",
        ns: ns.into(),
        name: s.name().into(),
    }));
    writes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn svc(target: Value) -> Value {
        json!({"metadata": {"name": "web", "namespace": "a", "uid": "s1", "labels": {"tier": "front"}},
               "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": 80, "targetPort": target, "protocol": "TCP"}]}})
    }

    fn pod(name: &str, ip: &str, ready: bool) -> Value {
        json!({"metadata": {"name": name, "namespace": "a", "uid": format!("u-{name}"), "labels": {"app": "web"}},
               "spec": {"nodeName": "n1", "containers": [{"name": "c", "ports": [{"name": "web", "containerPort": 8080}]}]},
               "status": {"podIP": ip, "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
    }

    #[test]
    fn ready_and_not_ready_addresses_with_named_ports() {
        let (a, b) = (pod("a", "10.244.0.2", true), pod("b", "10.244.0.1", false));
        let ep = desired_endpoints(&svc(json!("web")), &[&a, &b]).expect("selector");
        let subset = &ep["subsets"][0];
        assert_eq!(subset["addresses"][0]["ip"], "10.244.0.2");
        assert_eq!(subset["notReadyAddresses"][0]["ip"], "10.244.0.1");
        assert_eq!(
            subset["ports"][0],
            json!({"name": "http", "port": 8080, "protocol": "TCP"})
        );
        assert_eq!(ep["metadata"]["labels"]["tier"], "front");
    }

    #[test]
    fn pods_without_ip_or_port_or_that_are_terminal_are_left_out() {
        let mut no_ip = pod("n", "", true);
        no_ip["status"]["podIP"] = Value::Null;
        let mut done = pod("d", "10.244.0.9", true);
        done["status"]["phase"] = json!("Succeeded");
        let ep = desired_endpoints(&svc(json!(8080)), &[&no_ip, &done]).expect("selector");
        assert!(ep.get("subsets").is_none());
        // A named port the pod lacks drops the port, not the address.
        let p = pod("p", "10.244.0.3", true);
        let ep = desired_endpoints(&svc(json!("missing")), &[&p]).expect("selector");
        assert!(ep["subsets"][0].get("ports").is_none());
    }

    #[test]
    fn services_without_selector_are_left_alone() {
        let mut s = svc(json!(80));
        s["spec"]["selector"] = json!({});
        assert!(desired_endpoints(&s, &[]).is_none());
        assert!(desired_slices(&s, &[]).is_none());
    }

    #[test]
    fn slices_carry_conditions_and_split_at_100() {
        let pods: Vec<Value> = (0..150)
            .map(|i| pod(&format!("p{i}"), &format!("10.244.1.{i}"), i % 2 == 0))
            .collect();
        let refs: Vec<&Value> = pods.iter().collect();
        let slices = desired_slices(&svc(json!(8080)), &refs).expect("selector");
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[0].endpoints.as_array().map(Vec::len), Some(100));
        let mut terminating = pod("t", "10.244.2.1", true);
        terminating["metadata"]["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        let one = desired_slices(&svc(json!(8080)), &[&terminating]).expect("selector");
        assert_eq!(
            one[0].endpoints[0]["conditions"],
            json!({"ready": false, "serving": true, "terminating": true})
        );
        let empty = desired_slices(&svc(json!(8080)), &[]).expect("selector");
        assert_eq!(
            empty,
            vec![SliceContent {
                ports: json!([]),
                endpoints: json!([])
            }]
        );
    }
}
