//! The Manager: what every controller of a process shares, owned once — the API client (with
//! request metrics), shared watches, the metrics registry, `/metrics` `/healthz` `/readyz`,
//! leader election, the Event recorder and shutdown — and the controllers it runs.
//!
//! ```no_run
//! # async fn demo(config: kube::Config) -> std::io::Result<()> {
//! use vigil_runtime::manager::Manager;
//! let mut manager = Manager::builder(config)
//!     .metrics_addr("0.0.0.0:8080".parse().expect("an address"))
//!     .build()
//!     .await?;
//! manager.add("foo", |runtime| async move {
//!     // build caches from runtime.watches(), then runtime.controller(…).run(…).await
//!     # let _ = runtime;
//! });
//! manager.run().await // until SIGTERM or SIGINT, then drains
//! # }
//! ```
//!
//! Standbys (leader election on) run every controller too: their caches stay warm and their
//! reconciles write nothing (see [`crate::reconcile`]), so a handover needs no re-list, only a
//! pass over every object (the controller builder reconciles all on becoming leader).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use kube::Client;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::events::EventRecorder;
use crate::health::{self, Health};
use crate::leader::{LeaderElectionConfig, LeaderElector, Leadership};
use crate::metrics::Metrics;
use crate::shared::SharedWatches;

/// Reporting controller of Events unless the builder names another.
pub const DEFAULT_REPORTER: &str = "vigil";

/// Where controllers report their readiness: `/readyz`, or a caller's closure.
type ReadySink = Arc<dyn Fn(&str, bool) + Send + Sync>;

/// What a controller gets from the Manager. Cheap to clone.
#[derive(Clone)]
pub struct Runtime {
    client: Client,
    watches: SharedWatches,
    metrics: Arc<Metrics>,
    leadership: watch::Receiver<Leadership>,
    recorder: EventRecorder,
    ready: ReadySink,
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
    /// A runtime from parts made elsewhere (a test harness, or a controller's `run` kept for
    /// callers that predate the Manager): `ready` is told when the controller's caches synced,
    /// `shutdown` resolving stops it. Events are reported as [`DEFAULT_REPORTER`].
    pub fn from_parts(
        client: Client,
        watches: SharedWatches,
        leadership: watch::Receiver<Leadership>,
        metrics: Arc<Metrics>,
        ready: impl Fn(bool) + Send + Sync + 'static,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> Self {
        let (stop, stopped) = watch::channel(false);
        tokio::spawn(async move {
            shutdown.await;
            let _ = stop.send(true);
        });
        Self {
            recorder: EventRecorder::new(client.clone(), DEFAULT_REPORTER),
            client,
            watches,
            metrics,
            leadership,
            ready: Arc::new(move |_, ok| ready(ok)),
            stopped,
            _leading: None,
        }
    }

    pub fn client(&self) -> &Client {
        &self.client
    }

    /// One API watch per resource, shared by every cache of that kind.
    pub fn watches(&self) -> &SharedWatches {
        &self.watches
    }

    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Whether this replica leads; controllers write only while it does.
    pub fn leadership(&self) -> watch::Receiver<Leadership> {
        self.leadership.clone()
    }

    pub fn recorder(&self) -> &EventRecorder {
        &self.recorder
    }

    /// Reports controller `name`'s readiness (its caches synced) on `/readyz`.
    pub fn set_ready(&self, name: &str, ready: bool) {
        (self.ready)(name, ready);
    }

    /// A closure reporting `name`'s readiness, for a controller `run` that takes one.
    pub fn ready_fn(&self, name: &str) -> impl Fn(bool) + Send + Sync + 'static + use<> {
        let ready = self.ready.clone();
        let name = name.to_owned();
        move |ok| ready(&name, ok)
    }

    /// Resolves when the process shuts down.
    pub fn shutdown(&self) -> impl Future<Output = ()> + Send + Sync + 'static + use<> {
        let mut stopped = self.stopped.clone();
        async move {
            let _ = stopped.wait_for(|s| *s).await;
        }
    }
}

/// How the Manager starts.
pub struct ManagerBuilder {
    config: kube::Config,
    metrics_addr: Option<SocketAddr>,
    leader_election: Option<LeaderElectionConfig>,
    shutdown_timeout: Duration,
    reporter: String,
}

impl ManagerBuilder {
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

    /// How long in-flight reconciles may take to finish at shutdown. Default 25 s.
    pub fn shutdown_timeout(mut self, timeout: Duration) -> Self {
        self.shutdown_timeout = timeout;
        self
    }

    /// The `reportingController` of the Events recorded. Default [`DEFAULT_REPORTER`].
    pub fn reporter(mut self, name: &str) -> Self {
        self.reporter = name.to_owned();
        self
    }

    /// Builds the client, binds the metrics server and joins the election.
    pub async fn build(self) -> std::io::Result<Manager> {
        let metrics = Metrics::new();
        let client = crate::client::instrumented(self.config, &metrics)
            .map_err(|e| std::io::Error::other(format!("building the API client: {e}")))?;
        let watches = SharedWatches::new(client.clone());
        watches.register_metrics(&metrics);
        let health = Health::new();
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
        let (elector, leadership, leading) = match self.leader_election {
            Some(config) => {
                let (elector, rx) = LeaderElector::spawn_with_recovery(
                    client.clone(),
                    config,
                    Some(watches.reachability().subscribe()),
                );
                (Some(elector), rx, None)
            }
            None => {
                let (tx, rx) = watch::channel(Leadership::Leading);
                (None, rx, Some(Arc::new(tx)))
            }
        };
        report_leadership(leadership.clone(), metrics.clone(), health.clone());
        let ready_health = health.clone();
        let runtime = Runtime {
            recorder: EventRecorder::new(client.clone(), &self.reporter),
            client,
            watches,
            metrics,
            leadership,
            ready: Arc::new(move |name, ok| ready_health.set_ready(name, ok)),
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
}

impl Manager {
    /// A Manager for the cluster of `config`.
    pub fn builder(config: kube::Config) -> ManagerBuilder {
        ManagerBuilder {
            config,
            metrics_addr: None,
            leader_election: None,
            shutdown_timeout: Duration::from_secs(25),
            reporter: DEFAULT_REPORTER.to_owned(),
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

    /// Starts controller `name`: `run` gets the runtime and runs until its shutdown signal
    /// ([`Runtime::shutdown`]). `/readyz` lists `name`, not ready until the controller reports
    /// its caches synced.
    pub fn add<F, Fut>(&mut self, name: &str, run: F)
    where
        F: FnOnce(Runtime) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.health.register(name);
        let task = tokio::spawn(run(self.runtime.clone()));
        self.controllers.push((name.to_owned(), task));
    }

    /// Runs until SIGTERM or SIGINT, then shuts down (see [`Self::run_until`]).
    pub async fn run(self) -> std::io::Result<()> {
        use tokio::signal::unix::{SignalKind, signal};
        let mut term = signal(SignalKind::terminate())?;
        let signalled = async move {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        };
        self.run_until(signalled).await;
        Ok(())
    }

    /// Runs until `signal` resolves; then stops the controllers (in-flight reconciles finish,
    /// within the shutdown timeout), releases the Lease and stops serving.
    pub async fn run_until(self, signal: impl Future<Output = ()>) {
        let names: Vec<&str> = self.controllers.iter().map(|(n, _)| n.as_str()).collect();
        tracing::info!(controllers = ?names, "running");
        signal.await;
        tracing::info!("shutting down: finishing in-flight work");
        let _ = self.stop.send(true);
        let drain = futures::future::join_all(self.controllers.into_iter().map(|(_, t)| t));
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
