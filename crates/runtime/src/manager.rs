//! The Manager: what every controller of a process shares, owned once — the API client (with
//! request metrics), shared watches, the metrics registry, `/metrics` `/healthz` `/readyz`,
//! leader election, the Event recorder and shutdown — and the controllers it runs.
//!
//! ```no_run
//! # async fn demo(config: kube::Config) -> std::io::Result<()> {
//! use vigil_runtime::manager::Manager;
//! let mut manager = Manager::builder("foo-operator", config)
//!     .metrics_addr("0.0.0.0:8080".parse().expect("an address"))
//!     .build()
//!     .await?;
//! manager.add("foo", |runtime| async move {
//!     // runtime.cache::<Foo>().build(), then runtime.controller(&cache).run(…).await
//!     # let _ = runtime;
//! });
//! manager.run().await // until SIGTERM or SIGINT, then drains
//! # }
//! ```
//!
//! Standbys (leader election on) run every controller too: their caches stay warm and their
//! reconciles write nothing (see `reconcile_guard`, inside the crate), so a handover needs no re-list, only a
//! pass over every object (the controller builder reconciles all on becoming leader).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::{Client, Resource};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::events::{EventNote, EventRecorder};
use crate::health::{self, Health};
use crate::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use crate::metrics::Metrics;
use crate::signals::ShutdownSignals;
use crate::watches::SharedWatches;

/// The `/readyz` check that holds readiness until [`Manager::run_until`] starts: the server is
/// bound at build, before the controllers are added, and a process whose controllers have not
/// registered their checks yet must not count as ready (controller-runtime starts its probe
/// server only in `Start` for the same reason).
pub const STARTED_CHECK: &str = "started";

/// Where controllers report their readiness, and why they are not ready: `/readyz`.
type ReadySink = Arc<dyn Fn(&str, bool, Option<String>) + Send + Sync>;

/// What a controller gets from the Manager. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    client: Client,
    watches: SharedWatches,
    metrics: Arc<Metrics>,
    leadership: watch::Receiver<Leadership>,
    recorder: EventRecorder,
    /// The product's name: prefix of field managers (`<name>-<controller>`).
    name: Arc<str>,
    /// The controller this handle serves ([`Manager::add`], [`Runtime::scoped`]); `None`: the
    /// Manager's own handle.
    controller: Option<Arc<str>>,
    ready: ReadySink,
    /// What to tell a user whose cluster lacks a kind a cache needs (see
    /// [`ManagerBuilder::missing_kind_hint`]), and the kinds already reported.
    missing_kinds: Arc<MissingKinds>,
    stopped: watch::Receiver<bool>,
    /// Keeps an always-leading channel open while any handle lives (no election).
    _leading: Option<Arc<watch::Sender<Leadership>>>,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("leadership", &*self.leadership.borrow())
            .field("stopped", &*self.stopped.borrow())
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// This handle, serving controller `controller`: what it builds, writes and reports is named
    /// after it ([`Manager::add`] hands each controller its own).
    pub fn scoped(&self, controller: &str) -> Runtime {
        Runtime {
            controller: Some(controller.into()),
            ..self.clone()
        }
    }

    /// The name of the controller this handle serves; the Manager's name for its own handle.
    pub fn name(&self) -> &str {
        self.controller.as_deref().unwrap_or(&self.name)
    }

    /// The API client (with request metrics when the Manager built it from a config).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// One API watch per resource, shared by every cache of that kind.
    pub fn watches(&self) -> &SharedWatches {
        &self.watches
    }

    /// The metrics registry `/metrics` serves; controllers may register their own series.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether this replica leads; controllers write only while it does.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    /// Records Events, reported as the Manager's name.
    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Reports controller `name`'s readiness (its caches synced) on `/readyz`.
    pub fn set_ready(&self, name: &str, ready: bool) {
        (self.ready)(name, ready, None);
    }

    /// Reports controller `name` not ready on `/readyz`, saying why.
    pub fn set_not_ready(&self, name: &str, reason: &str) {
        (self.ready)(name, false, Some(reason.to_owned()));
    }

    /// A cache of `kind` cannot fill because the API does not serve it (its list answered
    /// 404: a CRD not installed). Logs a warning naming the fix, once per kind and process;
    /// returns the one-line reason `/readyz` shows.
    pub(crate) fn kind_not_served(&self, kind: &str) -> String {
        let reason = match &self.missing_kinds.hint {
            Some(hint) => {
                format!("the API server does not serve {kind} (is its CRD installed? {hint})")
            }
            None => format!("the API server does not serve {kind} (is its CRD installed?)"),
        };
        let first = (self.missing_kinds.reported.lock())
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(kind.to_owned());
        if first {
            tracing::warn!(%kind, "{reason}; waiting for it");
        }
        reason
    }

    /// Records `note` about `obj` with `action` (best effort: see [`crate::events`]).
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        note: &EventNote,
        action: &str,
    ) {
        self.recorder
            .publish(&obj.object_ref(&()), note, action)
            .await;
    }

    /// Records each of `notes`, in order, about `obj` with `action` (best effort).
    pub async fn events<K: Resource<DynamicType = ()>>(
        &self,
        obj: &K,
        notes: &[EventNote],
        action: &str,
    ) {
        self.recorder
            .publish_all(&obj.object_ref(&()), notes, action)
            .await;
    }

    /// Writes `desired` as `obj`'s status if it differs from `current`, with this controller's
    /// field manager (see `status::write`, inside the crate); returns the new `resourceVersion`
    /// if it wrote. Every field `current` has and `desired` lacks is removed.
    pub async fn write_status<K, S>(
        &self,
        obj: &K,
        current: Option<&S>,
        desired: &S,
    ) -> Result<Option<String>, kube::Error>
    where
        K: Resource<DynamicType = ()>,
        S: serde::Serialize + PartialEq,
    {
        self.write_status_with_lists(obj, current, desired, &[])
            .await
    }

    /// [`Self::write_status`], for a status whose cached copy may not show a list the server
    /// still holds: each field named in `lists` that `desired` lacks is written as `[]`.
    pub async fn write_status_with_lists<K, S>(
        &self,
        obj: &K,
        current: Option<&S>,
        desired: &S,
        lists: &[&str],
    ) -> Result<Option<String>, kube::Error>
    where
        K: Resource<DynamicType = ()>,
        S: serde::Serialize + PartialEq,
    {
        let manager = self.field_manager();
        crate::status::write(&self.client, obj, current, desired, lists, &manager).await
    }

    /// The field manager of this controller's writes: `<manager name>-<controller>` (the
    /// Manager's name alone for its own handle).
    pub fn field_manager(&self) -> String {
        match &self.controller {
            Some(controller) => format!("{}-{controller}", self.name),
            None => self.name.to_string(),
        }
    }

    /// Runs `task` until it ends or the process shuts down, whichever comes first.
    pub fn spawn(&self, task: impl Future<Output = ()> + Send + 'static) {
        let shutdown = self.shutdown();
        tokio::spawn(async move {
            tokio::select! {
                () = task => {}
                () = shutdown => {}
            }
        });
    }

    /// Calls `tick` every `period` (the first time at once) until the process shuts down:
    /// periodic reports such as a gauge recomputed from the caches.
    pub fn every<F, Fut>(&self, period: Duration, mut tick: F)
    where
        F: FnMut() -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                tick().await;
            }
        });
    }

    /// Resolves when the process shuts down.
    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + Sync + 'static + use<> {
        let mut stopped = self.stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    }
}

/// The kinds a cache found not served, each reported once, and the fix to name.
#[derive(Debug, Default)]
struct MissingKinds {
    hint: Option<String>,
    reported: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

/// What the Manager's client is made from.
enum ClientSource {
    /// A kubeconfig: the Manager builds the client, with request metrics.
    Config(Box<kube::Config>),
    /// A client made elsewhere (a test's): no request metrics.
    Client(Client),
}

/// How the Manager starts.
pub struct ManagerBuilder {
    name: String,
    client: ClientSource,
    metrics_addr: Option<SocketAddr>,
    leader_election: Option<LeaderElectionConfig>,
    leadership: Option<watch::Receiver<Leadership>>,
    metrics: Option<Arc<Metrics>>,
    shutdown_timeout: Duration,
    signals: Option<ShutdownSignals>,
    metrics_prefix: Option<String>,
    reporting_instance: Option<String>,
    missing_kind_hint: Option<String>,
}

impl ManagerBuilder {
    /// What a user should do when a cache's kind is not served (its CRD not installed): logged
    /// once per kind as a warning, and shown on `/readyz` beside the controller that waits
    /// (`vigil run` says `install them: vigil manifests | kubectl apply --server-side -f -`).
    /// Default: the warning and the reason, without a fix.
    pub fn missing_kind_hint(mut self, hint: &str) -> Self {
        self.missing_kind_hint = Some(hint.to_owned());
        self
    }

    /// The prefix of the series only this runtime defines (`<prefix>_quarantined_objects`,
    /// `<prefix>_shared_watch_*`, `<prefix>_rest_client_lists_total`…); controller-runtime's
    /// and client-go's series keep their own names. Default: the Manager's name, with what a
    /// metric name cannot hold turned into `_` (`foo-operator` → `foo_operator_…`). Ignored
    /// when [`Self::metrics`] hands in a registry, which has its prefix already.
    pub fn metrics_prefix(mut self, prefix: &str) -> Self {
        self.metrics_prefix = Some(prefix.to_owned());
        self
    }

    /// Which replica records the Events (their `reportingInstance`): in a cluster, the pod's
    /// name, which the Downward API gives (`POD_NAME` in Vigil's chart). Default: none.
    pub fn reporting_instance(mut self, instance: Option<String>) -> Self {
        self.reporting_instance = instance;
        self
    }

    /// Serves `/metrics`, `/healthz` and `/readyz` on `addr` (port 0: any free port; see
    /// [`Manager::metrics_addr`]). Default: not served.
    pub fn metrics_addr(mut self, addr: SocketAddr) -> Self {
        self.metrics_addr = Some(addr);
        self
    }

    /// Campaigns for a Lease; controllers act only while this replica leads. Default: always
    /// leads (one replica).
    pub fn leader_election(mut self, config: Option<LeaderElectionConfig>) -> Self {
        self.leader_election = config;
        self
    }

    /// Registers every series in `metrics` instead of a registry of its own (a test that reads
    /// them before the Manager is built).
    pub fn metrics(mut self, metrics: Arc<Metrics>) -> Self {
        self.metrics = Some(metrics);
        self
    }

    /// Leads exactly while `leadership` says so, instead of campaigning: for tests that play
    /// a handover.
    pub fn leadership(mut self, leadership: watch::Receiver<Leadership>) -> Self {
        self.leadership = Some(leadership);
        self
    }

    /// How long in-flight reconciles may take to finish at shutdown. Default 25 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The SIGTERM and SIGINT handlers [`Manager::run`] waits on, installed by the caller
    /// before anything else it starts. Default: [`Self::build`] installs them first thing, on a
    /// Manager built from a kubeconfig ([`Manager::builder`]), so that a signal during start-up
    /// (before `/readyz` serves, before the Lease is taken) still ends in a graceful shutdown
    /// that releases the Lease; a Manager on a test's client ([`Manager::for_client`]) leaves
    /// the process's signals alone unless given these.
    pub fn signals(mut self, signals: ShutdownSignals) -> Self {
        self.signals = Some(signals);
        self
    }

    /// Builds the client, binds the metrics server and joins the election.
    pub async fn build(self) -> std::io::Result<Manager> {
        // Before anything can report this process ready (see `crate::signals`).
        let signals = match (self.signals, &self.client) {
            (Some(signals), _) => Some(signals),
            (None, ClientSource::Config(_)) => Some(ShutdownSignals::install()?),
            (None, ClientSource::Client(_)) => None,
        };
        let prefix = self.metrics_prefix.as_deref().unwrap_or(&self.name);
        let metrics = self.metrics.unwrap_or_else(|| Metrics::new(prefix));
        let client = match self.client {
            ClientSource::Config(config) => crate::client::instrumented(*config, &metrics)
                .map_err(|e| std::io::Error::other(format!("building the API client: {e}")))?,
            ClientSource::Client(client) => client,
        };
        let watches = SharedWatches::new(client.clone());
        watches.register_metrics(&metrics);
        let health = Health::new();
        health.set_not_ready(
            STARTED_CHECK,
            Some("the manager has not started its controllers yet".to_owned()),
        );
        let (stop, stopped) = watch::channel(false);
        let server = match self.metrics_addr {
            Some(addr) => {
                let mut stopped = stopped.clone();
                let (bound, task) =
                    health::serve(addr, metrics.clone(), health.clone(), async move {
                        let _ = stopped.wait_for(|s| *s).await;
                    })
                    .await?;
                Some((bound, task))
            }
            None => None,
        };
        let election = self
            .leader_election
            .as_ref()
            .map_or(self.name.as_str(), |config| config.lease_name.as_str());
        metrics.name_election(election);
        let (elector, leadership, leading) = match (self.leadership, self.leader_election) {
            (Some(rx), _) => (None, rx, None),
            (None, Some(config)) => {
                let (elector, rx) = LeaderElector::spawn_with_recovery(
                    client.clone(),
                    config,
                    Some(watches.reachability().subscribe()),
                );
                (Some(elector), rx, None)
            }
            (None, None) => {
                let (tx, rx) = watch::channel(Leadership::Leading);
                (None, rx, Some(Arc::new(tx)))
            }
        };
        report_leadership(leadership.clone(), metrics.clone(), health.clone());
        let ready_health = health.clone();
        let runtime = Runtime {
            recorder: EventRecorder::new(client.clone(), &self.name, self.reporting_instance),
            name: self.name.into(),
            controller: None,
            client,
            watches,
            metrics,
            leadership,
            ready: Arc::new(move |name, ok, reason| match (ok, reason) {
                (false, Some(reason)) => ready_health.set_not_ready(name, Some(reason)),
                (ok, _) => ready_health.set_ready(name, ok),
            }),
            missing_kinds: Arc::new(MissingKinds {
                hint: self.missing_kind_hint,
                reported: std::sync::Mutex::default(),
            }),
            stopped,
            _leading: leading,
        };
        Ok(Manager {
            runtime,
            health,
            stop,
            controllers: Vec::new(),
            elector,
            server,
            shutdown_timeout: self.shutdown_timeout,
            signals,
        })
    }
}

/// Owns the shared plumbing and runs controllers on it (see the module documentation).
pub struct Manager {
    runtime: Runtime,
    health: Health,
    stop: watch::Sender<bool>,
    controllers: Vec<(String, JoinHandle<()>)>,
    elector: Option<LeaderElector>,
    server: Option<(SocketAddr, JoinHandle<()>)>,
    shutdown_timeout: Duration,
    signals: Option<ShutdownSignals>,
}

impl Manager {
    /// A Manager named `name` for the cluster of `config`. The name is the product's, as the
    /// cluster sees it: the Events' reporting controller, the prefix of field managers and,
    /// unless [`ManagerBuilder::metrics_prefix`] says otherwise, of the runtime's own metrics.
    pub fn builder(name: &str, config: kube::Config) -> ManagerBuilder {
        Self::with_source(name, ClientSource::Config(Box::new(config)))
    }

    /// A Manager named `name` on a client made elsewhere (a test's): the same Manager, without
    /// the client's request metrics.
    pub fn for_client(name: &str, client: Client) -> ManagerBuilder {
        Self::with_source(name, ClientSource::Client(client))
    }

    fn with_source(name: &str, client: ClientSource) -> ManagerBuilder {
        ManagerBuilder {
            name: name.to_owned(),
            client,
            metrics_addr: None,
            leader_election: None,
            leadership: None,
            metrics: None,
            shutdown_timeout: Duration::from_secs(25),
            signals: None,
            metrics_prefix: None,
            reporting_instance: None,
            missing_kind_hint: None,
        }
    }

    /// What controllers share.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Where `/metrics`, `/healthz` and `/readyz` are served, if they are.
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.server.as_ref().map(|(addr, _)| *addr)
    }

    /// Starts controller `name`: `run` gets the runtime, scoped to `name` (its controller, field
    /// manager and status writes are named after it), and runs until its shutdown signal
    /// ([`Runtime::shutdown`]). `/readyz` lists `name`, not ready until the controller reports
    /// its caches synced.
    pub fn add<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(Runtime) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.health.register(name);
        let task = tokio::spawn(run(self.runtime.scoped(name)));
        self.controllers.push((name.to_owned(), task));
    }

    /// Runs until SIGTERM or SIGINT, then shuts down (see [`Self::run_until`]). A signal
    /// received since the handlers were installed (see [`ManagerBuilder::signals`]) ends it at
    /// once, gracefully.
    pub async fn run(mut self) -> std::io::Result<()> {
        let mut signals = match self.signals.take() {
            Some(signals) => signals,
            None => ShutdownSignals::install()?,
        };
        self.run_until(async move { signals.recv().await }).await;
        Ok(())
    }

    /// Runs until `signal` resolves; then stops the controllers (in-flight reconciles finish,
    /// within the shutdown timeout), releases the Lease and stops serving. Dropped before that
    /// (its task aborted), it ends its controllers at once, as a killed process would.
    pub async fn run_until(self, signal: impl Future<Output = ()>) {
        let names: Vec<&str> = self.controllers.iter().map(|(n, _)| n.as_str()).collect();
        tracing::info!(controllers = ?names, "running");
        // Every controller is added, so each one's check is registered: readiness is theirs now.
        self.health.set_ready(STARTED_CHECK, true);
        let mut controllers = AbortOnDrop(self.controllers);
        signal.await;
        tracing::info!("shutting down: finishing in-flight work");
        let _ = self.stop.send(true);
        let drain = futures::future::join_all(controllers.0.iter_mut().map(|(_, t)| t));
        if tokio::time::timeout(self.shutdown_timeout, drain)
            .await
            .is_err()
        {
            tracing::warn!("in-flight work did not finish in time");
        }
        if let Some(elector) = self.elector {
            elector.shutdown().await;
        }
        if let Some((_, server)) = self.server {
            let _ = server.await;
        }
    }
}

/// The controllers' tasks, aborted if the Manager is dropped while they run.
struct AbortOnDrop(Vec<(String, JoinHandle<()>)>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        for (_, task) in &self.0 {
            task.abort();
        }
    }
}

/// Mirrors leadership into the metric and the readiness report.
fn report_leadership(
    mut leadership: watch::Receiver<Leadership>,
    metrics: Arc<Metrics>,
    health: Health,
) {
    tokio::spawn(async move {
        loop {
            let leading = *leadership.borrow_and_update() == Leadership::Leading;
            metrics.set_leader(leading);
            health.set_leading(leading);
            if leadership.changed().await.is_err() {
                return;
            }
        }
    });
}
