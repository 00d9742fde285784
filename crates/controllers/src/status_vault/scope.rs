//! What the status vault covers: the runtime's StatusBackupPolicy and Namespace caches, read the
//! way the pure decisions take them (policy views, namespace labels), and the backends an
//! object's records go to.

use std::collections::BTreeMap;
use std::sync::Arc;

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt as _;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;
use vigil_apis::StatusBackupPolicy;
use vigil_apis::status_backup_policy::{ResourceKind, RestoreMode};
use vigil_runtime::Runtime;
use vigil_runtime::cache::{Cache, Source};

use super::decide;
use super::model::{BackendRef, ObjectView, PolicyView, Settings};

/// The policies and namespaces as the caches hold them, and the operator's settings.
pub struct Scope {
    settings: Settings,
    /// Optional: without the StatusBackupPolicy CRD the vault is idle, not stuck unsynced.
    policies: Cache<StatusBackupPolicy>,
    /// Namespaces, for their labels (`namespaceSelector`).
    namespaces: Cache<Namespace>,
}

impl Scope {
    /// The scope on `runtime`: its caches start now.
    pub fn new(runtime: &Runtime, settings: Settings) -> Arc<Self> {
        let policies = runtime
            .cache::<StatusBackupPolicy>()
            .slim(slim_policy)
            .optional()
            .build();
        let namespaces = runtime
            .cache::<Namespace>()
            .slim(crate::slim::namespace)
            .build();
        Arc::new(Self {
            settings,
            policies,
            namespaces,
        })
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// The cached policy objects (their status is what the controller compares with).
    pub fn policy_objects(&self) -> Vec<Arc<StatusBackupPolicy>> {
        self.policies.state()
    }

    /// The cached policies, as the decisions see them.
    pub fn policies(&self) -> Vec<PolicyView> {
        self.policies.state().iter().map(|p| view(p)).collect()
    }

    pub fn policies_synced(&self) -> bool {
        self.policies.synced().is_synced()
    }

    /// Both caches listed: the policies and namespaces decisions read are complete.
    pub fn synced(&self) -> bool {
        self.policies_synced() && self.namespaces.synced().is_synced()
    }

    pub fn namespace_labels(&self, ns: &str) -> Option<BTreeMap<String, String>> {
        self.namespaces
            .get(&ObjectRef::new(ns))
            .map(|n| n.labels().clone())
    }

    pub fn backend_of(&self, policy: &PolicyView) -> BackendRef {
        decide::backend_of(policy, &self.settings)
    }

    /// Versions a backend keeps (see [`decide::retention_of`]).
    pub fn retention_of(&self, backend: &BackendRef) -> u32 {
        decide::retention_of(backend, &self.policies(), &self.settings)
    }

    /// The backends of the policies covering an object (each once, however many policies);
    /// with `on_create_only`, only those of policies that restore it by themselves.
    pub fn backends_covering(
        &self,
        policies: &[PolicyView],
        kind: &ResourceKind,
        object: &ObjectView,
        on_create_only: bool,
    ) -> Vec<BackendRef> {
        let labels = |ns: &str| self.namespace_labels(ns);
        let mut out: Vec<BackendRef> = policies
            .iter()
            .filter(|p| !on_create_only || p.spec.restore_mode == RestoreMode::OnCreate)
            .filter(|p| decide::covers(p, kind, object, &labels))
            .map(|p| self.backend_of(p))
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

fn view(policy: &StatusBackupPolicy) -> PolicyView {
    PolicyView {
        name: policy.name_any(),
        generation: policy.metadata.generation,
        spec: policy.spec.clone(),
    }
}

/// The supervisor looks again on each policy and namespace event (labels, for
/// `namespaceSelector`), and once both caches have synced.
pub async fn watch_scope(scope: Arc<Scope>, changed: Arc<Notify>) {
    tokio::join!(
        watch_cache(&scope.policies, &changed),
        watch_cache(&scope.namespaces, &changed)
    );
}

/// Notifies `changed` on each object `cache` touches and once it has synced.
async fn watch_cache<K>(cache: &impl Source<K>, changed: &Notify) {
    let mut events = cache.subscribe();
    // Side by side: the cache waits for its subscribers, so events are read while it syncs.
    let synced = async {
        if cache.synced().wait().await {
            changed.notify_one();
        }
    };
    let touched = async {
        while events.next().await.is_some() {
            changed.notify_one();
        }
    };
    tokio::join!(synced, touched);
}

/// The policy cache keeps spec and status, without managed fields.
fn slim_policy(policy: &mut StatusBackupPolicy) {
    policy.metadata.managed_fields = None;
}
