//! Work-queue metrics for a kube-runtime `Controller`. Its scheduler is internal and exposes no
//! depth or wait time, so the controller reports what enters the queue (trigger mappers, the
//! main stream) and what leaves it (a reconcile starts), and this tracker derives
//! controller-runtime's `workqueue_adds_total`, `workqueue_depth` and
//! `workqueue_queue_duration_seconds` from them with client-go's semantics: an add of a key
//! already waiting is merged (not counted), and the wait runs from the first add.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

use crate::metrics::ControllerMetrics;

/// Keys waiting for a reconcile, with when they were first added. Cheap to clone.
pub struct QueueTracker<K: Resource> {
    waiting: Arc<Mutex<HashMap<ObjectRef<K>, Instant>>>,
    metrics: ControllerMetrics,
}

impl<K: Resource> Clone for QueueTracker<K> {
    fn clone(&self) -> Self {
        Self {
            waiting: self.waiting.clone(),
            metrics: self.metrics.clone(),
        }
    }
}

impl<K> QueueTracker<K>
where
    K: Resource,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    /// A tracker reporting to `metrics`.
    pub fn new(metrics: ControllerMetrics) -> Self {
        Self {
            waiting: Arc::default(),
            metrics,
        }
    }

    /// A trigger asked for `key` to be reconciled.
    pub fn added(&self, key: ObjectRef<K>) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        if let std::collections::hash_map::Entry::Vacant(slot) = waiting.entry(key.erase_extra()) {
            slot.insert(Instant::now());
            self.metrics.queue_add();
            self.metrics.queue_depth(depth(waiting.len()));
        }
    }

    /// Adds every key of a trigger mapper's answer, and passes the answer on.
    pub fn added_all(&self, keys: Vec<ObjectRef<K>>) -> Vec<ObjectRef<K>> {
        for key in &keys {
            self.added(key.clone());
        }
        keys
    }

    /// A reconcile of `key` starts: it leaves the queue.
    pub fn started(&self, key: &ObjectRef<K>) {
        let Ok(mut waiting) = self.waiting.lock() else {
            return;
        };
        if let Some(since) = waiting.remove(key) {
            self.metrics.queued_for(since.elapsed());
            self.metrics.queue_depth(depth(waiting.len()));
        }
    }

    /// Keys waiting now.
    #[cfg(test)]
    pub fn depth(&self) -> usize {
        self.waiting.lock().map_or(0, |w| w.len())
    }
}

fn depth(len: usize) -> i64 {
    i64::try_from(len).unwrap_or(i64::MAX)
}

/// Drops the resource version and uid a reference may carry, so keys compare by identity only
/// (kube-runtime's `ObjectRef` equality already ignores them; this also frees their memory).
trait EraseExtra {
    fn erase_extra(self) -> Self;
}

impl<K: Resource> EraseExtra for ObjectRef<K> {
    fn erase_extra(mut self) -> Self {
        self.extra = Default::default();
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;
    use k8s_openapi::api::core::v1::ConfigMap;

    #[test]
    fn adds_merge_until_the_reconcile_starts() {
        let registry = Metrics::new("test");
        let queue = QueueTracker::<ConfigMap>::new(registry.controller("q"));
        let a = ObjectRef::new("a").within("ns");
        queue.added(a.clone());
        queue.added(a.clone());
        queue.added(ObjectRef::new("b").within("ns"));
        assert_eq!(queue.depth(), 2);
        queue.started(&a);
        assert_eq!(queue.depth(), 1);
        queue.added(a);
        assert_eq!(queue.depth(), 2);

        let text = registry.encode();
        assert!(
            text.contains(r#"workqueue_adds_total{name="q"} 3"#),
            "{text}"
        );
        assert!(text.contains(r#"workqueue_depth{name="q"} 2"#), "{text}");
        assert!(
            text.contains(r#"workqueue_queue_duration_seconds_count{name="q"} 1"#),
            "{text}"
        );
    }
}
