//! What the status vault covers: the StatusBackupPolicy cache (fed by [`watch_policies`]) and the
//! runtime's Namespace cache, read the way the pure decisions take them (policy views, namespace
//! labels), and the backends an object's records go to.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;
use k8s_openapi::api::core::v1::Namespace;
use kube::ResourceExt as _;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};
use kube::runtime::watcher;
use tokio::sync::Notify;
use vigil_apis::StatusBackupPolicy;
use vigil_apis::status_backup_policy::{ResourceKind, RestoreMode};
use vigil_runtime::Runtime;
use vigil_runtime::cache::{Cache, Source as _};
use vigil_runtime::shared::SharedWatches;

use super::decide;
use super::model::{BackendRef, ObjectView, PolicyView, Settings};

/// The policies and namespaces as the caches hold them, and the operator's settings.
pub struct Scope {
    settings: Settings,
    policies: Store<StatusBackupPolicy>,
    /// Namespaces, for their labels (`namespaceSelector`).
    namespaces: Cache<Namespace>,
    policies_synced: AtomicBool,
}

/// The writer that fills a [`Scope`]'s policy cache (fed by [`watch_policies`]).
pub struct ScopeWriters {
    pub policies: Writer<StatusBackupPolicy>,
}

impl Scope {
    /// The scope on `runtime`: its namespace cache starts now.
    pub fn new(runtime: &Runtime, settings: Settings) -> (Arc<Self>, ScopeWriters) {
        let (policies, policy_writer) = reflector::store();
        let namespaces = runtime.cache::<Namespace>().slim(slim_namespace).build();
        let scope = Self {
            settings,
            policies,
            namespaces,
            policies_synced: AtomicBool::new(false),
        };
        let writers = ScopeWriters {
            policies: policy_writer,
        };
        (Arc::new(scope), writers)
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
        self.policies_synced.load(Ordering::Acquire)
    }

    pub fn set_policies_synced(&self) {
        self.policies_synced.store(true, Ordering::Release);
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

/// Fills the policy cache; the controller looks again on each event.
pub async fn watch_policies(
    watches: SharedWatches,
    scope: Arc<Scope>,
    writer: reflector::store::Writer<StatusBackupPolicy>,
    changed: Arc<Notify>,
) {
    let stream = reflector::reflector(
        writer,
        watches.watch::<StatusBackupPolicy>(None, &watcher::Config::default()),
    );
    futures::pin_mut!(stream);
    let mut told = false;
    while let Some(event) = stream.next().await {
        match event {
            Ok(watcher::Event::InitDone) => scope.set_policies_synced(),
            // The CRD is not installed: no policy, nothing to do (the list is retried with
            // backoff, so installing the CRD later just works).
            Err(watcher::Error::InitialListFailed(kube::Error::Api(s))) if s.code == 404 => {
                if !told {
                    tracing::info!("no StatusBackupPolicy CRD installed: the status vault is idle");
                    told = true;
                }
                scope.set_policies_synced();
            }
            _ => {}
        }
        changed.notify_one();
    }
}

/// The supervisor looks again on each namespace event (labels, for `namespaceSelector`) and
/// once the namespace cache has synced.
pub async fn watch_namespaces(scope: Arc<Scope>, changed: Arc<Notify>) {
    let mut events = scope.namespaces.subscribe();
    // Side by side: the cache waits for its subscribers, so events are read while it syncs.
    let synced = async {
        if scope.namespaces.synced().wait().await {
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

/// The namespace cache keeps what the selectors read: metadata, without managed fields.
fn slim_namespace(namespace: &mut Namespace) {
    namespace.spec = None;
    namespace.status = None;
    namespace.metadata.managed_fields = None;
    namespace.metadata.annotations = None;
}
