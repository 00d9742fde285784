//! The kinds the status vault watches: how each resolved through API discovery, and the objects
//! its watch has seen (lean views).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;
use vigil_apis::status_backup_policy::ResourceKind;

use super::model::{ObjectView, Resolution};

/// Key of a watched object within its kind: namespace and name.
pub type Name = (Option<String>, String);
/// Objects of a kind, by namespace and name.
pub type Objects = HashMap<Name, ObjectView>;

struct KindState {
    resolution: Resolution,
    objects: Objects,
}

impl KindState {
    fn new(resolution: Resolution) -> Self {
        Self {
            resolution,
            objects: Objects::new(),
        }
    }
}

/// Every wanted kind's state.
pub struct Kinds {
    kinds: Mutex<BTreeMap<ResourceKind, KindState>>,
    changed: Arc<Notify>,
}

impl Kinds {
    /// `changed` is notified when a kind's first list is done.
    pub fn new(changed: Arc<Notify>) -> Self {
        Self {
            kinds: Mutex::default(),
            changed,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<ResourceKind, KindState>> {
        super::lock(&self.kinds)
    }

    /// Runs `f` on a kind's objects.
    pub fn with_objects<T>(&self, kind: &ResourceKind, f: impl FnOnce(&mut Objects) -> T) -> T {
        let mut kinds = self.lock();
        let state = kinds
            .entry(kind.clone())
            .or_insert_with(|| KindState::new(Resolution::Failed("not resolved yet".into())));
        f(&mut state.objects)
    }

    /// A kind's watch listed every object: the policies' counts can be updated.
    pub fn listed(&self) {
        self.changed.notify_one();
    }

    pub fn set_resolution(&self, kind: &ResourceKind, resolution: Resolution) {
        let mut kinds = self.lock();
        match kinds.get_mut(kind) {
            Some(state) => state.resolution = resolution,
            None => {
                kinds.insert(kind.clone(), KindState::new(resolution));
            }
        }
    }

    /// A kind's watch restarts: forget the statuses seen, so its first list captures them again
    /// (the vault writes nothing for those it already holds).
    pub fn restart(&self, kind: &ResourceKind) {
        if let Some(state) = self.lock().get_mut(kind) {
            for o in state.objects.values_mut() {
                o.status_hash = None;
            }
        }
    }

    /// Forgets the kinds no longer wanted.
    pub fn retain(&self, wanted: &BTreeSet<ResourceKind>) {
        self.lock().retain(|k, _| wanted.contains(k));
    }

    pub fn resolutions(&self) -> BTreeMap<ResourceKind, Resolution> {
        self.lock()
            .iter()
            .map(|(k, s)| (k.clone(), s.resolution.clone()))
            .collect()
    }

    /// How many objects `count` accepts, over every kind.
    pub fn count(&self, count: impl Fn(&ResourceKind, &ObjectView) -> bool) -> usize {
        self.lock()
            .iter()
            .map(|(kind, s)| s.objects.values().filter(|o| count(kind, o)).count())
            .sum()
    }
}
