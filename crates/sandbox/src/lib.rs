//! An embedded Kubernetes API server for tests, benchmarks and demos.
//!
//! It speaks the Kubernetes HTTP/JSON API on loopback — discovery, CRUD, watch, patch flavours,
//! server-side apply, status subresources, finalizers, CRDs with structural schemas — from an
//! in-memory store, so controllers can be tested end to end on machines without a cluster.
//! It knows nothing of Vigil's controllers. Where it approximates the real server, see
//! `docs/sandbox.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), vigil_sandbox::SandboxError> {
//! let sandbox = vigil_sandbox::Sandbox::start(vigil_sandbox::SandboxConfig::default()).await?;
//! println!("serving at {}", sandbox.url());
//! sandbox.shutdown().await;
//! # Ok(()) }
//! ```

mod control;
mod error;
pub mod faults;
mod field_error;
mod http;
mod loops;
mod patch;
mod persist;
mod query;
mod registry;
mod schema;
mod serve;
pub mod startup;
mod version;
mod wire;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

pub use faults::Fault;
pub use loops::Loops;
pub use persist::{FLUSH_INTERVAL, PersistError};
pub use serve::pki::{CA_CERT_FILE, CA_KEY_FILE, PkiError};
pub use startup::StartUpTiming;
pub use version::{InvalidKubeVersion, KubeVersion};

/// How to run a sandbox.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// Loopback address to listen on; port 0 picks a free port.
    pub listen: SocketAddr,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// How many change events are kept for watches to resume from; older resourceVersions get 410.
    pub watch_window: usize,
    /// How often watches that allow bookmarks receive one.
    pub bookmark_interval: Duration,
    /// Which built-in control loops run.
    pub loops: Loops,
    /// Where the state persists across restarts of the process (created if missing); `None` keeps
    /// everything in memory only. See `docs/sandbox.md` ("Data directory").
    pub data_dir: Option<PathBuf>,
    /// The version `/version` reports; `None` reports the sandbox's own `v1.33.0-vigil-sandbox`.
    pub kube_version: Option<KubeVersion>,
    /// Serve HTTPS with a self-signed CA (kept in `data_dir` when there is one) whose certificate
    /// the kubeconfig carries; client-go (kubectl, Helm) sends a bearer token only over TLS.
    /// Off by default: in-process tests and benchmarks talk plain HTTP on loopback.
    pub tls: bool,
    /// What a restart ([`Sandbox::restart`], [`Sandbox::resume_serving`]) goes through before
    /// it serves everything again, as a restarted kube-apiserver does (see [`startup`]).
    pub restart_start_up: StartUpTiming,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            watch_window: 10_000,
            bookmark_interval: Duration::from_secs(5),
            loops: Loops::default(),
            data_dir: None,
            kube_version: None,
            tls: false,
            restart_start_up: StartUpTiming::default(),
        }
    }
}

/// Why a sandbox could not start.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("the sandbox only listens on loopback addresses; {0} is not one")]
    NotLoopback(SocketAddr),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("the sandbox is shut down")]
    Stopped,
    #[error(transparent)]
    DataDir(#[from] PersistError),
    #[error(transparent)]
    Pki(#[from] PkiError),
    #[error("cannot configure TLS: {0}")]
    Tls(#[from] rustls::Error),
    #[error("cannot write kubeconfig {path}: {source}")]
    Kubeconfig {
        path: String,
        source: std::io::Error,
    },
}

/// A running sandbox API server.
#[derive(Debug)]
pub struct Sandbox {
    addr: SocketAddr,
    token: Option<String>,
    /// With TLS: the CA certificate (PEM) clients trust.
    ca_pem: Option<String>,
    app: Arc<http::App>,
    shutdown: watch::Sender<bool>,
    control: mpsc::Sender<control::Control>,
    tasks: Vec<JoinHandle<()>>,
    /// With a data directory: the flusher and its stop signal (dropping the sender stops it too).
    persister: Option<(oneshot::Sender<()>, JoinHandle<()>)>,
}

/// Namespaces every cluster starts with.
const INITIAL_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "kube-node-lease"];

impl Sandbox {
    /// Binds, loads the data directory (if any) or seeds the initial namespaces, and starts serving.
    pub async fn start(config: SandboxConfig) -> Result<Self, SandboxError> {
        if !config.listen.ip().is_loopback() {
            return Err(SandboxError::NotLoopback(config.listen));
        }
        // Before binding, so a damaged or busy directory fails the start without taking the port.
        let data_dir = config
            .data_dir
            .as_deref()
            .map(persist::DataDir::open)
            .transpose()?;
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| SandboxError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener.local_addr().map_err(|source| SandboxError::Bind {
            addr: config.listen,
            source,
        })?;
        let store = Arc::new(registry::store::Store::new(config.watch_window));
        let data_dir = match data_dir {
            Some((dir, Some(snapshot))) => {
                persist::restore(&store, snapshot);
                tracing::debug!(rv = store.read().rv(), "sandbox state restored");
                Some(dir)
            }
            Some((dir, None)) => {
                seed(&store);
                // A fresh directory holds a complete state at once, not only after the first change.
                dir.write(&store.read().snapshot())?;
                Some(dir)
            }
            None => {
                seed(&store);
                None
            }
        };
        let (tls, ca_pem) = if config.tls {
            let pki = serve::pki::Pki::new(data_dir.as_ref().map(|d| d.path()), addr.ip())?;
            (Some(serve::tls::server_config(&pki)?), Some(pki.ca_pem))
        } else {
            (None, None)
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        let (control, control_rx) = mpsc::channel(4);
        let app = Arc::new(http::App {
            store: store.clone(),
            token: config.token.clone(),
            server_address: addr.to_string(),
            shutdown: shutdown_rx.clone(),
            watch_epoch: watch::Sender::new(0),
            listening: watch::Sender::new(true),
            bookmark_interval: config.bookmark_interval,
            faults: Arc::new(faults::Faults::default()),
            control: control.clone(),
            version: version::document(config.kube_version),
            requests: std::sync::atomic::AtomicU64::new(0),
            start_up: startup::StartUp::new(config.restart_start_up),
        });
        let supervisor = serve::Supervisor {
            addr,
            app: app.clone(),
            control: control_rx,
            shutdown: shutdown_rx.clone(),
            tls,
        };
        // New namespaces' `kube-root-ca.crt` holds the CA clients trust, as on a real cluster.
        let root_ca: Arc<str> = ca_pem.as_deref().unwrap_or(loops::PLAIN_HTTP_CA_PEM).into();
        let mut tasks = loops::spawn(&store, config.loops, root_ca, &shutdown_rx);
        tasks.push(tokio::spawn(supervisor.run(listener)));
        let persister = data_dir.map(|dir| {
            let (stop, stopped) = oneshot::channel();
            (
                stop,
                tokio::spawn(persist::run(dir, store.clone(), stopped)),
            )
        });
        tracing::debug!(%addr, "sandbox serving");
        Ok(Self {
            addr,
            token: config.token,
            ca_pem,
            app,
            shutdown,
            control,
            tasks,
            persister,
        })
    }

    /// The address served.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT`, or `https://…` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.ca_pem.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}", self.addr)
    }

    /// With TLS, the CA certificate (PEM) that signed the serving certificate.
    pub fn ca_pem(&self) -> Option<&str> {
        self.ca_pem.as_deref()
    }

    /// The bearer token clients must send, if any.
    pub fn token(&self) -> Option<&str> {
        self.token.as_deref()
    }

    /// A kubeconfig for kubectl and kube-rs, with `namespace` as the context's default namespace.
    pub fn kubeconfig(&self) -> String {
        let quote = |s: &str| json!(s).to_string();
        let user = match &self.token {
            Some(t) => format!("\n    token: {}", quote(t)),
            None => " {}".to_owned(),
        };
        let ca = match &self.ca_pem {
            Some(pem) => format!(
                "\n    certificate-authority-data: {}",
                quote(&base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    pem
                ))
            ),
            None => String::new(),
        };
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: vigil-sandbox\n  cluster:\n    server: {}{ca}\nusers:\n- name: vigil-sandbox\n  user:{user}\ncontexts:\n- name: vigil-sandbox\n  context:\n    cluster: vigil-sandbox\n    user: vigil-sandbox\n    namespace: default\ncurrent-context: vigil-sandbox\n",
            quote(&self.url())
        )
    }

    /// Writes [`Self::kubeconfig`] to a file (mode 0600: it may hold the token).
    pub fn write_kubeconfig(&self, path: &std::path::Path) -> Result<(), SandboxError> {
        let fail = |source| SandboxError::Kubeconfig {
            path: path.display().to_string(),
            source,
        };
        std::fs::write(path, self.kubeconfig()).map_err(fail)?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).map_err(fail)?;
        }
        Ok(())
    }

    /// Ends every open watch; clients must reconnect (fault injection).
    pub fn close_watches(&self) {
        self.app.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Keeps only the newest `keep` events, so watches from older resourceVersions get 410 Expired.
    pub fn compact(&self, keep: usize) {
        self.app.store.write(|s| s.compact(keep));
    }

    /// Changes how many events are retained for watches.
    pub fn set_watch_window(&self, events: usize) {
        self.app.store.write(|s| s.set_window(events));
    }

    /// How many requests the server has received so far (faulted ones included), for tests
    /// that bound a client's request rate.
    pub fn requests_received(&self) -> u64 {
        self.app.requests.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Adds a fault rule (see [`Fault`]).
    pub fn inject(&self, fault: Fault) {
        self.app.faults.add(fault);
    }

    /// Removes every fault rule.
    pub fn clear_faults(&self) {
        self.app.faults.clear();
    }

    /// Stops listening (connections are refused, open watches end) while keeping all state.
    pub async fn stop_serving(&self) {
        let (ack, done) = oneshot::channel();
        if self.control.send(control::Control::Stop(ack)).await.is_ok() {
            let _ = done.await;
        }
    }

    /// Listens again on the same address after [`Self::stop_serving`].
    pub async fn resume_serving(&self) -> Result<(), SandboxError> {
        let (ack, done) = oneshot::channel();
        self.control
            .send(control::Control::Start(ack))
            .await
            .map_err(|_| SandboxError::Stopped)?;
        match done.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(source)) => Err(SandboxError::Bind {
                addr: self.addr,
                source,
            }),
            Err(_) => Err(SandboxError::Stopped),
        }
    }

    /// Stops serving for `down`, then serves again on the same address with the same state.
    pub async fn restart(&self, down: Duration) -> Result<(), SandboxError> {
        self.stop_serving().await;
        tokio::time::sleep(down).await;
        self.resume_serving().await
    }

    /// Stops serving: open watches end, in-flight requests finish, background loops stop; then
    /// the data directory (if any) gets its last snapshot and is unlocked.
    pub async fn shutdown(mut self) {
        self.stop().await;
    }

    async fn stop(&mut self) {
        let _ = self.shutdown.send(true);
        for task in self.tasks.drain(..) {
            let _ = task.await;
        }
        // Last, so the final snapshot includes the writes of requests that were in flight.
        if let Some((stop, task)) = self.persister.take() {
            let _ = stop.send(());
            let _ = task.await;
        }
    }
}

impl Drop for Sandbox {
    /// Without [`Sandbox::shutdown`], the tasks end on their own; dropping the persister's stop
    /// sender makes it write a last snapshot and release the data directory shortly after.
    fn drop(&mut self) {
        let _ = self.shutdown.send(true);
    }
}

fn seed(store: &registry::store::Store) {
    let Some(info) = store.read().registry.get("", "v1", "namespaces") else {
        return;
    };
    let opts = registry::ops::WriteOptions {
        field_manager: "vigil-sandbox".into(),
        ..Default::default()
    };
    for ns in INITIAL_NAMESPACES {
        let body = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
        if let Err(e) = store.write(|s| registry::ops::create(s, &info, "", body, &opts)) {
            tracing::error!(namespace = ns, error = %e.message, "cannot seed namespace");
        }
    }
}
