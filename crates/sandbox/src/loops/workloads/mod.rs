//! The workload controllers of kube-controller-manager v1.28, run in-process: Deployments
//! (`deployment/`), ReplicaSets (`replicaset.rs`), StatefulSets (`statefulset.rs`), DaemonSets
//! (`daemonset.rs`) and Jobs (`job.rs`).
//!
//! [`WorkloadsController::pass`] turns the events since the last pass into the set of objects
//! to sync (an object changed, or a pod or ReplicaSet it controls or could adopt changed) and
//! syncs each under the store's write lock, so every decision reads the live state and the
//! controllers need no informer expectations. Objects that asked to be looked at later
//! (minReadySeconds, progress deadlines) are synced when their time comes. With no workload
//! in the store a pass only walks the events.

mod apply;
mod claim;
pub mod daemonset;
pub mod deployment;
mod hash;
pub mod job;
mod pods;
pub mod replicaset;
mod selector;
pub mod statefulset;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::registry::meta;
use crate::registry::store::{Event, State, Store};

/// Which workload controllers run (each is a field of [`super::Loops`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Enabled {
    pub deployments: bool,
    pub replicasets: bool,
    pub jobs: bool,
    pub statefulsets: bool,
    pub daemonsets: bool,
}

impl Enabled {
    pub fn any(self) -> bool {
        self.deployments || self.replicasets || self.jobs || self.statefulsets || self.daemonsets
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Kind {
    ReplicaSet,
    Deployment,
    StatefulSet,
    DaemonSet,
    Job,
}

/// (kind, namespace, name) of an object to sync.
type Key = (Kind, String, String);

pub struct WorkloadsController {
    enabled: Enabled,
    /// Objects to look at again at a given time.
    timers: BTreeMap<Key, Instant>,
}

const PODS: &str = "/pods";

impl WorkloadsController {
    pub fn new(enabled: Enabled) -> Self {
        Self {
            enabled,
            timers: BTreeMap::new(),
        }
    }

    /// One pass; returns how long until the next timer, if any.
    pub fn pass(&mut self, store: &Store, events: Option<&[Event]>) -> Option<Duration> {
        let now = Instant::now();
        let mut dirty = {
            let state = store.read();
            match events {
                Some(events) => self.affected(&state, events),
                None => self.everything(&state),
            }
        };
        let due: Vec<Key> = self
            .timers
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            self.timers.remove(&key);
            dirty.insert(key);
        }
        // ReplicaSets first: a Deployment synced in the same pass then sees their pods counted.
        for key in dirty {
            let (kind, ns, name) = &key;
            let wall = chrono::Utc::now();
            let again = store.write(|state| match kind {
                Kind::ReplicaSet => replicaset::sync(state, ns, name, wall),
                Kind::Deployment => deployment::sync(state, ns, name, wall),
                Kind::StatefulSet => statefulset::sync(state, ns, name, wall),
                Kind::DaemonSet => daemonset::sync(state, ns, name, wall),
                Kind::Job => job::sync(state, ns, name, wall),
            });
            match again {
                Some(after) => {
                    self.timers.insert(key, now + after);
                }
                None => {
                    self.timers.remove(&key);
                }
            }
        }
        self.timers
            .values()
            .min()
            .map(|at| at.saturating_duration_since(Instant::now()))
    }

    fn enabled(&self, kind: Kind) -> bool {
        match kind {
            Kind::ReplicaSet => self.enabled.replicasets,
            Kind::Deployment => self.enabled.deployments,
            Kind::StatefulSet => self.enabled.statefulsets,
            Kind::DaemonSet => self.enabled.daemonsets,
            Kind::Job => self.enabled.jobs,
        }
    }

    fn storage(kind: Kind) -> &'static str {
        match kind {
            Kind::ReplicaSet => replicaset::STORAGE,
            Kind::Deployment => deployment::STORAGE,
            Kind::StatefulSet => statefulset::STORAGE,
            Kind::DaemonSet => daemonset::STORAGE,
            Kind::Job => job::STORAGE,
        }
    }

    /// Every workload object (start, or the event log no longer reaches back).
    fn everything(&self, state: &State) -> BTreeSet<Key> {
        [
            Kind::ReplicaSet,
            Kind::Deployment,
            Kind::StatefulSet,
            Kind::Job,
        ]
        .into_iter()
        .filter(|k| self.enabled(*k))
        .flat_map(|kind| {
            state
                .range(Self::storage(kind), None, None)
                .map(move |o| (kind, o.namespace().to_owned(), o.name().to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
    }

    /// Every object of `kind` in a namespace: those that could adopt an orphan.
    fn all_in(&self, state: &State, kind: Kind, ns: &str, out: &mut BTreeSet<Key>) {
        if self.enabled(kind) {
            out.extend(
                state
                    .range(Self::storage(kind), Some(ns), None)
                    .map(|o| (kind, ns.to_owned(), o.name().to_owned())),
            );
        }
    }

    /// The controller of `obj` as a key, if it is a kind handled here and enabled.
    fn owner_key(&self, obj: &Value) -> Option<Key> {
        let owner = pods::controller_of(obj)?;
        let kind = match (
            owner.get("apiVersion").and_then(Value::as_str)?,
            owner.get("kind").and_then(Value::as_str)?,
        ) {
            ("apps/v1", "ReplicaSet") => Kind::ReplicaSet,
            ("apps/v1", "Deployment") => Kind::Deployment,
            ("apps/v1", "StatefulSet") => Kind::StatefulSet,
            ("apps/v1", "DaemonSet") => Kind::DaemonSet,
            ("batch/v1", "Job") => Kind::Job,
            _ => return None,
        };
        let name = owner.get("name").and_then(Value::as_str)?;
        self.enabled(kind)
            .then(|| (kind, meta::namespace(obj).to_owned(), name.to_owned()))
    }

    fn affected(&self, state: &State, events: &[Event]) -> BTreeSet<Key> {
        let mut out = BTreeSet::new();
        for e in events {
            let versions = [Some(&e.object.value), e.previous.as_ref().map(|p| &p.value)];
            let ns = e.object.namespace();
            let own = |kind: Kind| (kind, ns.to_owned(), e.object.name().to_owned());
            match &*e.storage_key {
                deployment::STORAGE if self.enabled.deployments => {
                    out.insert(own(Kind::Deployment));
                }
                job::STORAGE if self.enabled.jobs => {
                    out.insert(own(Kind::Job));
                }
                statefulset::STORAGE if self.enabled.statefulsets => {
                    out.insert(own(Kind::StatefulSet));
                }
                daemonset::STORAGE if self.enabled.daemonsets => {
                    out.insert(own(Kind::DaemonSet));
                }
                // A node came, went or changed readiness: every DaemonSet looks again.
                "/nodes" if self.enabled.daemonsets => {
                    out.extend(state.range(daemonset::STORAGE, None, None).map(|d| {
                        (
                            Kind::DaemonSet,
                            d.namespace().to_owned(),
                            d.name().to_owned(),
                        )
                    }));
                }
                replicaset::STORAGE => {
                    if self.enabled.replicasets {
                        out.insert(own(Kind::ReplicaSet));
                    }
                    for v in versions.into_iter().flatten() {
                        match self.owner_key(v) {
                            Some(k) => {
                                out.insert(k);
                            }
                            None if pods::controller_of(v).is_none() => {
                                self.all_in(state, Kind::Deployment, ns, &mut out)
                            }
                            None => {}
                        }
                    }
                }
                PODS => {
                    for v in versions.into_iter().flatten() {
                        match self.owner_key(v) {
                            Some(k) => {
                                // A Deployment waits for its old ReplicaSets' pods to finish
                                // (Recreate): their changes concern it too.
                                if k.0 == Kind::ReplicaSet
                                    && let Some(rs) = state.get(replicaset::STORAGE, &k.1, &k.2)
                                    && let Some(d) = self.owner_key(&rs.value)
                                {
                                    out.insert(d);
                                }
                                out.insert(k);
                            }
                            None if pods::controller_of(v).is_none() => {
                                self.all_in(state, Kind::ReplicaSet, ns, &mut out);
                                self.all_in(state, Kind::Job, ns, &mut out);
                                self.all_in(state, Kind::StatefulSet, ns, &mut out);
                            }
                            None => {}
                        }
                    }
                }
                _ => {}
            }
        }
        out
    }
}
