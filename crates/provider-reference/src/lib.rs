//! The reference implementation of the external provider protocol: an in-process HTTP server
//! that plays "the bank's system" for tests, benchmarks and the demo.
//!
//! Clusters are simulated: each operation takes a configured time measured from when it was
//! asked for (provisioning from the create, an upgrade from its request, …), and state is derived
//! from those timestamps when a request reads it, so nothing runs in the background and a server
//! restarted from its state file carries on where it left off.
//!
//! Faults are set at runtime through [`ReferenceProvider`] or `PUT /admin/faults` (so a test in
//! another process can use them too): latency, an outage, an error rate, hangs longer than a
//! client's timeout, create answers lost after the create happened, refused deletes. Counters say
//! what the server saw: requests per endpoint, create requests and clusters created per identity.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse as _, Response};
use bytes::Bytes;
use http::{Method, StatusCode, header};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use vigil_provider::protocol::{
    AddonsRequest, ClusterList, DeletionProgress, ErrorBody, IDEMPOTENCY_KEY, PREFIX,
    UpgradeRequest,
};
use vigil_provider::{
    Addon, AddonState, AddonStatus, ClusterRequest, ClusterState, ProviderCluster, ProviderError,
    catalog,
};

/// How to run a reference provider.
#[derive(Debug, Clone)]
pub struct ReferenceConfig {
    /// Where to listen; port 0 picks a free port.
    pub listen: SocketAddr,
    /// When set, every request must carry `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Keep the clusters in this JSON file (written atomically after every change) so they
    /// survive a restart of the server; `None` keeps them in memory only.
    pub state_file: Option<PathBuf>,
    /// From a create until the cluster is `Running`.
    pub provision_time: Duration,
    /// From an upgrade request until the cluster runs the new version.
    pub upgrade_time: Duration,
    /// From a `PUT …/addons` until each changed addon is installed or removed.
    pub addon_time: Duration,
    /// From the first `DELETE` until the cluster is gone.
    pub delete_time: Duration,
    /// The faults in effect from the start.
    pub faults: Faults,
}

impl Default for ReferenceConfig {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            state_file: None,
            provision_time: Duration::from_millis(200),
            upgrade_time: Duration::from_millis(200),
            addon_time: Duration::from_millis(100),
            delete_time: Duration::from_millis(100),
            faults: Faults::default(),
        }
    }
}

/// What goes wrong, on purpose. Also the JSON of `GET`/`PUT /admin/faults`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Faults {
    /// Added to every `/v1` request before it is handled.
    pub latency_ms: u64,
    /// Every `/v1` request fails this way while set.
    pub outage: Option<Outage>,
    /// The fraction (0–1) of `/v1` requests answered `500` without doing anything.
    pub error_rate: f64,
    /// Every `/v1` request waits this long before it is handled (set it above the client's
    /// timeout to simulate a server that stops answering; the request still happens afterwards).
    pub hang_ms: u64,
    /// The next this-many creates make their cluster, then lose the answer.
    pub lose_creates: u32,
    /// How a lost create answer is lost.
    pub lose_mode: LoseMode,
    /// Deletes of these cluster ids (`*`: every cluster) are refused with `409 DeleteRefused`.
    pub refuse_deletes: BTreeSet<String>,
    /// Creates ignore the identity and always make a new cluster: a provider that breaks the
    /// protocol's idempotency rule, so that only the client's own discipline (look up by
    /// identity before creating) keeps one cluster per identity.
    pub ignore_idempotency: bool,
}

/// How an outage shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Outage {
    /// `503 Unavailable` with a JSON error.
    Unavailable,
    /// New connections are closed at once and requests on open ones end without an answer.
    Reset,
}

/// How a create's answer is lost (the cluster is made either way).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum LoseMode {
    /// `500` with a JSON error, as a gateway that timed out behind the create would answer.
    #[default]
    Error,
    /// The connection closes in the middle of the answer.
    Drop,
}

/// What the server saw. Also the JSON of `GET /admin/stats`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Stats {
    /// `/v1` requests per endpoint: `find`, `list`, `create`, `get`, `upgrade`, `set_addons`,
    /// `delete`, `catalog`, `unknown` (counted before faults apply).
    pub requests: BTreeMap<String, u64>,
    /// Create requests per identity key, answered or not.
    pub create_requests: BTreeMap<String, u64>,
    /// Clusters actually made per identity key (more than one is a duplicate).
    pub clusters_created: BTreeMap<String, u64>,
}

/// Why the reference provider could not start.
#[derive(Debug, thiserror::Error)]
pub enum ReferenceError {
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot read the state file {path}: {reason}")]
    State { path: String, reason: String },
}

/// A running reference provider; [`Self::shutdown`] stops it (dropping it stops serving too).
#[derive(Debug)]
pub struct ReferenceProvider {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ReferenceProvider {
    /// Loads the state file (if any), binds and starts serving.
    pub async fn start(config: ReferenceConfig) -> Result<Self, ReferenceError> {
        let store = match &config.state_file {
            Some(path) => load(path)?,
            None => Store::default(),
        };
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| ReferenceError::Bind {
                addr: config.listen,
                source,
            })?;
        let addr = listener
            .local_addr()
            .map_err(|source| ReferenceError::Bind {
                addr: config.listen,
                source,
            })?;
        let (stop, stopped) = watch::channel(false);
        let shared = Arc::new(Shared {
            timings: Timings {
                provision: config.provision_time,
                upgrade: config.upgrade_time,
                addon: config.addon_time,
                delete: config.delete_time,
            },
            token: config.token,
            state_file: config.state_file,
            store: Mutex::new(store),
            faults: Mutex::new(config.faults),
            stats: Mutex::new(Stats::default()),
            stopped: stopped.clone(),
        });
        let router = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let listener = ResettingListener {
            inner: listener,
            shared: shared.clone(),
        };
        let mut until_stopped = stopped;
        let task = tokio::spawn(async move {
            let stopped = async move {
                let _ = until_stopped.wait_for(|stop| *stop).await;
            };
            if let Err(e) = axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::error!(error = %e, "reference provider server failed");
            }
        });
        tracing::debug!(%addr, "reference provider serving");
        Ok(Self {
            addr,
            shared,
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// `http://127.0.0.1:PORT`, the base URL for [`vigil_provider::external::ExternalConfig`].
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving: open requests (even hanging ones) end, the state file stays. Later calls
    /// do nothing.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = lock(&self.task).take();
        if let Some(task) = task {
            let abort = task.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), task)
                .await
                .is_err()
            {
                // Keep-alive connections can hold a graceful shutdown open; nothing is lost.
                abort.abort();
            }
        }
    }

    /// The faults in effect.
    pub fn faults(&self) -> Faults {
        lock(&self.shared.faults).clone()
    }

    /// Replaces every fault.
    pub fn set_faults(&self, faults: Faults) {
        *lock(&self.shared.faults) = faults;
    }

    /// Changes the faults in place.
    pub fn update_faults(&self, change: impl FnOnce(&mut Faults)) {
        change(&mut lock(&self.shared.faults));
    }

    /// Removes every fault.
    pub fn clear_faults(&self) {
        self.set_faults(Faults::default());
    }

    /// Every `/v1` request waits this long first.
    pub fn set_latency(&self, latency: Duration) {
        self.update_faults(|f| f.latency_ms = millis(latency));
    }

    /// Starts (`Some`) or ends (`None`) an outage.
    pub fn set_outage(&self, outage: Option<Outage>) {
        self.update_faults(|f| f.outage = outage);
    }

    /// Answers this fraction of requests with `500`.
    pub fn set_error_rate(&self, rate: f64) {
        self.update_faults(|f| f.error_rate = rate);
    }

    /// Every `/v1` request waits this long before it is handled (`Duration::ZERO` to stop).
    pub fn set_hang(&self, hang: Duration) {
        self.update_faults(|f| f.hang_ms = millis(hang));
    }

    /// The next `count` creates make their cluster and lose the answer, the `mode` way.
    pub fn lose_next_creates(&self, count: u32, mode: LoseMode) {
        self.update_faults(|f| {
            f.lose_creates = count;
            f.lose_mode = mode;
        });
    }

    /// Refuses deletes of cluster `id` (`*`: of every cluster).
    pub fn refuse_deletes(&self, id: &str) {
        self.update_faults(|f| {
            f.refuse_deletes.insert(id.to_owned());
        });
    }

    /// Allows deletes of cluster `id` again.
    pub fn allow_deletes(&self, id: &str) {
        self.update_faults(|f| {
            f.refuse_deletes.remove(id);
        });
    }

    /// Everything counted so far.
    pub fn stats(&self) -> Stats {
        lock(&self.shared.stats).clone()
    }

    /// Zeroes the counters.
    pub fn reset_stats(&self) {
        *lock(&self.shared.stats) = Stats::default();
    }

    /// Clusters made for this identity key (`<uuid>/<name>`) since the start or the last reset.
    pub fn clusters_created(&self, identity_key: &str) -> u64 {
        count(&lock(&self.shared.stats).clusters_created, identity_key)
    }

    /// Create requests for this identity key, answered or not.
    pub fn create_requests(&self, identity_key: &str) -> u64 {
        count(&lock(&self.shared.stats).create_requests, identity_key)
    }

    /// `/v1` requests to `endpoint` (`find`, `create`, `get`, …).
    pub fn requests(&self, endpoint: &str) -> u64 {
        count(&lock(&self.shared.stats).requests, endpoint)
    }

    /// `/v1` requests of every endpoint.
    pub fn total_requests(&self) -> u64 {
        lock(&self.shared.stats).requests.values().sum()
    }

    /// Every cluster the server has, as `GET` would report it now.
    pub fn clusters(&self) -> Vec<ProviderCluster> {
        let now = now_ms();
        let mut store = lock(&self.shared.store);
        self.shared.tidy(&mut store, now);
        store
            .clusters
            .values()
            .map(|record| self.shared.view(record, now))
            .collect()
    }
}

impl Drop for ReferenceProvider {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = lock(&self.task).take() {
            task.abort();
        }
    }
}

fn count(map: &BTreeMap<String, u64>, key: &str) -> u64 {
    map.get(key).copied().unwrap_or(0)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(millis)
        .unwrap_or(0)
}

/// A poisoned lock only means a handler panicked mid-update of plain data; keep serving.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[derive(Debug, Clone, Copy)]
struct Timings {
    provision: Duration,
    upgrade: Duration,
    addon: Duration,
    delete: Duration,
}

#[derive(Debug)]
struct Shared {
    timings: Timings,
    token: Option<String>,
    state_file: Option<PathBuf>,
    store: Mutex<Store>,
    faults: Mutex<Faults>,
    stats: Mutex<Stats>,
    stopped: watch::Receiver<bool>,
}

/// Everything that survives a restart.
#[derive(Debug, Default, Serialize, Deserialize)]
struct Store {
    clusters: BTreeMap<String, Record>,
}

/// One cluster: what was asked and when; its state is derived from these at read time.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Record {
    id: String,
    request: ClusterRequest,
    /// The version it runs or moves to.
    kube_version: String,
    token: String,
    created_ms: u64,
    /// An upgrade in flight: the version it comes from and when it started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    upgrade: Option<(String, u64)>,
    addons: Vec<AddonRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    deleting_since_ms: Option<u64>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
struct AddonRecord {
    name: String,
    version: String,
    since_ms: u64,
    #[serde(default)]
    removing: bool,
}

fn load(path: &Path) -> Result<Store, ReferenceError> {
    let fail = |reason: String| ReferenceError::State {
        path: path.display().to_string(),
        reason,
    };
    match std::fs::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| fail(e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Store::default()),
        Err(e) => Err(fail(e.to_string())),
    }
}

fn elapsed(since_ms: u64, now: u64, span: Duration) -> bool {
    now.saturating_sub(since_ms) >= millis(span)
}

fn percent(since_ms: u64, now: u64, span: Duration) -> u64 {
    let span = millis(span).max(1);
    (now.saturating_sub(since_ms) * 100 / span).min(99)
}

/// `1.28` → `1.28.0`: what a server of that version reports.
fn master_version(kube_version: &str) -> Option<String> {
    vigil_provider::parse_version(kube_version).map(|(a, b, c)| format!("{a}.{b}.{c}"))
}

impl Shared {
    /// Drops what finished going away (deleted clusters, removed addons) and ends finished
    /// upgrades; persists if anything changed.
    fn tidy(&self, store: &mut Store, now: u64) {
        let timings = self.timings;
        let before = store.clusters.len();
        store.clusters.retain(|_, r| match r.deleting_since_ms {
            Some(since) => !elapsed(since, now, timings.delete),
            None => true,
        });
        let mut changed = store.clusters.len() != before;
        for record in store.clusters.values_mut() {
            if let Some((_, since)) = &record.upgrade
                && elapsed(*since, now, timings.upgrade)
            {
                record.upgrade = None;
                changed = true;
            }
            let addons = record.addons.len();
            record
                .addons
                .retain(|a| !(a.removing && elapsed(a.since_ms, now, timings.addon)));
            changed |= record.addons.len() != addons;
        }
        if changed {
            self.persist(store);
        }
    }

    /// Writes the store atomically (temp file + rename), so a crash leaves the old or the new
    /// state whole. A failed write is logged: the server keeps serving from memory.
    fn persist(&self, store: &Store) {
        let Some(path) = &self.state_file else {
            return;
        };
        let write = || -> std::io::Result<()> {
            let bytes = serde_json::to_vec_pretty(store).map_err(std::io::Error::other)?;
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = write() {
            tracing::error!(path = %path.display(), error = %e, "cannot save the reference provider's state");
        }
    }

    fn view(&self, record: &Record, now: u64) -> ProviderCluster {
        let t = self.timings;
        let provisioned = elapsed(record.created_ms, now, t.provision);
        let (state, progress) = if let Some(since) = record.deleting_since_ms {
            (
                ClusterState::Deleting,
                Some(format!("deleting ({}%)", percent(since, now, t.delete))),
            )
        } else if !provisioned {
            (
                ClusterState::Provisioning,
                Some(format!(
                    "provisioning ({}%)",
                    percent(record.created_ms, now, t.provision)
                )),
            )
        } else if let Some((from, since)) = &record.upgrade {
            (
                ClusterState::Upgrading,
                Some(format!(
                    "upgrading from {from} to {} ({}%)",
                    record.kube_version,
                    percent(*since, now, t.upgrade)
                )),
            )
        } else {
            (ClusterState::Running, None)
        };
        let serving = provisioned;
        let running_version = match &record.upgrade {
            Some((from, _)) => from,
            None => &record.kube_version,
        };
        let url = format!("https://{}.clusters.example.test", record.id);
        let addons = record
            .addons
            .iter()
            .map(|a| {
                let done = serving && elapsed(a.since_ms, now, t.addon);
                let state = match (a.removing, done) {
                    (true, _) => AddonState::Removing,
                    (false, true) => AddonState::Installed,
                    (false, false) => AddonState::Installing,
                };
                AddonStatus {
                    name: a.name.clone(),
                    version: a.version.clone(),
                    state,
                    message: None,
                }
            })
            .collect();
        ProviderCluster {
            id: record.id.clone(),
            identity: record.request.identity.clone(),
            state,
            progress,
            kube_version: record.kube_version.clone(),
            master_version: serving.then(|| master_version(running_version)).flatten(),
            api_server_url: serving.then(|| url.clone()),
            addons,
            kubeconfig: serving.then(|| kubeconfig(&url, &record.token)),
            message: None,
            type_: record.request.type_.clone(),
            env: record.request.env.clone(),
            os_version: record.request.os_version.clone(),
        }
    }
}

fn kubeconfig(url: &str, token: &str) -> String {
    let quote = |s: &str| serde_json::Value::from(s).to_string();
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: cluster\n  cluster:\n    server: {}\nusers:\n- name: admin\n  user:\n    token: {}\ncontexts:\n- name: cluster\n  context:\n    cluster: cluster\n    user: admin\ncurrent-context: cluster\n",
        quote(url),
        quote(token)
    )
}

fn random_hex(bytes: usize) -> String {
    (0..bytes)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect()
}

/// Closes new connections at once during an `Outage::Reset`.
struct ResettingListener {
    inner: tokio::net::TcpListener,
    shared: Arc<Shared>,
}

impl axum::serve::Listener for ResettingListener {
    type Io = tokio::net::TcpStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            let (stream, addr) = axum::serve::Listener::accept(&mut self.inner).await;
            if lock(&self.shared.faults).outage == Some(Outage::Reset) {
                drop(stream);
                continue;
            }
            let _ = stream.set_nodelay(true);
            return (stream, addr);
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

// ---- responses ----

fn json<T: Serialize>(status: StatusCode, body: &T) -> Response {
    match serde_json::to_vec(body) {
        Ok(bytes) => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            Bytes::from(bytes),
        )
            .into_response(),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "InternalError",
            e.to_string(),
        ),
    }
}

fn error(status: StatusCode, reason: &str, message: impl Into<String>) -> Response {
    let body = ErrorBody {
        reason: reason.to_owned(),
        message: message.into(),
    };
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        Bytes::from(bytes),
    )
        .into_response()
}

fn rejected(e: ProviderError) -> Response {
    match e {
        ProviderError::Rejected { reason, message } => {
            error(StatusCode::UNPROCESSABLE_ENTITY, &reason, message)
        }
        ProviderError::NotFound(id) => not_found(&id),
        ProviderError::Unavailable(message) => {
            error(StatusCode::SERVICE_UNAVAILABLE, "Unavailable", message)
        }
    }
}

fn not_found(id: &str) -> Response {
    error(
        StatusCode::NOT_FOUND,
        "NotFound",
        format!("no cluster {id}"),
    )
}

/// A response whose body breaks off: the client sees the connection end without an answer.
fn dropped() -> Response {
    let broken = futures::stream::iter([Err::<Bytes, _>(std::io::Error::other(
        "connection dropped on purpose",
    ))]);
    Response::new(Body::from_stream(broken))
}

fn parse<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| e.to_string())
}

fn bad_request(message: String) -> Response {
    error(StatusCode::BAD_REQUEST, "BadRequest", message)
}

// ---- routing ----

/// The endpoints, by method and path shape.
enum Route {
    Find(Option<String>),
    Create,
    Get(String),
    Upgrade(String),
    SetAddons(String),
    Delete(String),
    Catalog,
    GetFaults,
    PutFaults,
    GetStats,
    Unknown,
}

impl Route {
    fn of(method: &Method, uri: &http::Uri) -> Self {
        let path = uri.path();
        if let Some(rest) = path.strip_prefix("/admin/") {
            return match (method, rest) {
                (&Method::GET, "faults") => Self::GetFaults,
                (&Method::PUT, "faults") => Self::PutFaults,
                (&Method::GET, "stats") => Self::GetStats,
                _ => Self::Unknown,
            };
        }
        let Some(rest) = path.strip_prefix(PREFIX) else {
            return Self::Unknown;
        };
        let segments: Vec<String> = rest
            .trim_start_matches('/')
            .split('/')
            .map(|s| {
                percent_encoding::percent_decode_str(s)
                    .decode_utf8_lossy()
                    .into_owned()
            })
            .collect();
        let segments: Vec<&str> = segments.iter().map(String::as_str).collect();
        match (method, segments.as_slice()) {
            (&Method::GET, ["clusters"]) => Self::Find(
                form_urlencoded::parse(uri.query().unwrap_or("").as_bytes())
                    .find(|(k, _)| k == "identity")
                    .map(|(_, v)| v.into_owned()),
            ),
            (&Method::POST, ["clusters"]) => Self::Create,
            (&Method::GET, ["clusters", id]) => Self::Get((*id).to_owned()),
            (&Method::DELETE, ["clusters", id]) => Self::Delete((*id).to_owned()),
            (&Method::POST, ["clusters", id, "upgrade"]) => Self::Upgrade((*id).to_owned()),
            (&Method::PUT, ["clusters", id, "addons"]) => Self::SetAddons((*id).to_owned()),
            (&Method::GET, ["addons"]) => Self::Catalog,
            _ => Self::Unknown,
        }
    }

    /// The counters' name for it.
    fn endpoint(&self) -> &'static str {
        match self {
            Self::Find(Some(_)) => "find",
            Self::Find(None) => "list",
            Self::Create => "create",
            Self::Get(_) => "get",
            Self::Upgrade(_) => "upgrade",
            Self::SetAddons(_) => "set_addons",
            Self::Delete(_) => "delete",
            Self::Catalog => "catalog",
            Self::GetFaults | Self::PutFaults | Self::GetStats => "admin",
            Self::Unknown => "unknown",
        }
    }
}

/// Bodies larger than this are refused (a create with every addon is a few KiB).
const BODY_LIMIT: usize = 1 << 20;

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let route = Route::of(&parts.method, &parts.uri);
    if let Some(token) = &shared.token {
        let expected = format!("Bearer {token}");
        let given = parts.headers.get(header::AUTHORIZATION);
        if given.and_then(|v| v.to_str().ok()) != Some(expected.as_str()) {
            return error(
                StatusCode::UNAUTHORIZED,
                "Unauthorized",
                "a valid bearer token is required",
            );
        }
    }
    let body = match axum::body::to_bytes(body, BODY_LIMIT).await {
        Ok(body) => body,
        Err(e) => return error(StatusCode::BAD_REQUEST, "BadRequest", e.to_string()),
    };
    // The admin endpoints are the test's own line: faults never touch them.
    match route {
        Route::GetFaults => return json(StatusCode::OK, &*lock(&shared.faults)),
        Route::PutFaults => {
            return match parse::<Faults>(&body) {
                Ok(faults) => {
                    *lock(&shared.faults) = faults.clone();
                    json(StatusCode::OK, &faults)
                }
                Err(message) => bad_request(message),
            };
        }
        Route::GetStats => return json(StatusCode::OK, &*lock(&shared.stats)),
        _ => {}
    }
    *lock(&shared.stats)
        .requests
        .entry(route.endpoint().to_owned())
        .or_default() += 1;
    if let Some(response) = shared.inject_faults().await {
        return response;
    }
    let now = now_ms();
    match route {
        Route::Find(identity) => shared.find(identity, now),
        Route::Create => shared.create(&parts.headers, &body, now),
        Route::Get(id) => shared.get(&id, now),
        Route::Upgrade(id) => shared.upgrade(&id, &body, now),
        Route::SetAddons(id) => shared.set_addons(&id, &body, now),
        Route::Delete(id) => shared.delete(&id, now),
        Route::Catalog => json(StatusCode::OK, &catalog::catalog()),
        _ => error(
            StatusCode::NOT_FOUND,
            "NotFound",
            format!("no endpoint {} {}", parts.method, parts.uri.path()),
        ),
    }
}

impl Shared {
    /// Applies latency, outages, errors and hangs; `Some` is the answer instead of the real one.
    async fn inject_faults(&self) -> Option<Response> {
        let faults = lock(&self.faults).clone();
        let mut stopped = self.stopped.clone();
        let wait = |ms: u64| {
            let mut stopped = stopped.clone();
            async move {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(ms)) => false,
                    _ = stopped.wait_for(|stop| *stop) => true,
                }
            }
        };
        if faults.latency_ms > 0 && wait(faults.latency_ms).await {
            return Some(dropped());
        }
        match faults.outage {
            Some(Outage::Unavailable) => {
                return Some(error(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "Unavailable",
                    "the provider is down for maintenance (injected outage)",
                ));
            }
            Some(Outage::Reset) => return Some(dropped()),
            None => {}
        }
        if faults.error_rate > 0.0 && rand::random::<f64>() < faults.error_rate {
            return Some(error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "injected error",
            ));
        }
        if faults.hang_ms > 0 && wait(faults.hang_ms).await {
            return Some(dropped());
        }
        // The server may have been stopped while this request waited: do not act on it then.
        if *stopped.borrow_and_update() {
            return Some(dropped());
        }
        None
    }

    fn find(&self, identity: Option<String>, now: u64) -> Response {
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        let items = store
            .clusters
            .values()
            .filter(|r| {
                identity
                    .as_deref()
                    .is_none_or(|key| r.request.identity.key() == key)
            })
            .map(|r| self.view(r, now))
            .collect();
        json(StatusCode::OK, &ClusterList { items })
    }

    fn create(&self, headers: &http::HeaderMap, body: &[u8], now: u64) -> Response {
        let request: ClusterRequest = match parse(body) {
            Ok(request) => request,
            Err(message) => return bad_request(message),
        };
        let key = request.identity.key();
        *lock(&self.stats)
            .create_requests
            .entry(key.clone())
            .or_default() += 1;
        match headers.get(IDEMPOTENCY_KEY).map(|v| v.to_str()) {
            Some(Ok(given)) if given == key => {}
            Some(_) => {
                return error(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "IdempotencyKeyMismatch",
                    format!("the Idempotency-Key header must be the identity {key:?}"),
                );
            }
            None => {
                return error(
                    StatusCode::BAD_REQUEST,
                    "MissingIdempotencyKey",
                    "creates need an Idempotency-Key header: the identity <uuid>/<name>",
                );
            }
        }
        if request.identity.uuid.is_empty() || request.identity.name.is_empty() {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "InvalidIdentity",
                "identity.uuid and identity.name must not be empty",
            );
        }
        if let Err(e) = catalog::check_kube_version(&request.kube_version)
            .and_then(|()| catalog::check(&request.addons))
        {
            return rejected(e);
        }
        let ignore_idempotency = lock(&self.faults).ignore_idempotency;
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        if let Some(existing) = store
            .clusters
            .values()
            .find(|r| !ignore_idempotency && r.request.identity.key() == key)
        {
            return json(StatusCode::OK, &self.view(existing, now));
        }
        let id = loop {
            let id = format!("rc-{}", random_hex(6));
            if !store.clusters.contains_key(&id) {
                break id;
            }
        };
        let record = Record {
            id: id.clone(),
            kube_version: request.kube_version.clone(),
            token: random_hex(16),
            created_ms: now,
            upgrade: None,
            addons: request
                .addons
                .iter()
                .map(|a| AddonRecord {
                    name: a.name.clone(),
                    version: a.version.clone(),
                    since_ms: now,
                    removing: false,
                })
                .collect(),
            deleting_since_ms: None,
            request,
        };
        let view = self.view(&record, now);
        store.clusters.insert(id, record);
        self.persist(&store);
        drop(store);
        *lock(&self.stats).clusters_created.entry(key).or_default() += 1;
        let lose = {
            let mut faults = lock(&self.faults);
            let lose = faults.lose_creates > 0;
            faults.lose_creates = faults.lose_creates.saturating_sub(1);
            lose.then_some(faults.lose_mode)
        };
        match lose {
            Some(LoseMode::Error) => error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "InternalError",
                "the create's answer was lost (injected)",
            ),
            Some(LoseMode::Drop) => dropped(),
            None => json(StatusCode::CREATED, &view),
        }
    }

    fn get(&self, id: &str, now: u64) -> Response {
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        match store.clusters.get(id) {
            Some(record) => json(StatusCode::OK, &self.view(record, now)),
            None => not_found(id),
        }
    }

    fn upgrade(&self, id: &str, body: &[u8], now: u64) -> Response {
        let request: UpgradeRequest = match parse(body) {
            Ok(request) => request,
            Err(message) => return bad_request(message),
        };
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        let Some(record) = store.clusters.get_mut(id) else {
            return not_found(id);
        };
        if record.deleting_since_ms.is_some() {
            return error(
                StatusCode::CONFLICT,
                "ClusterDeleting",
                format!("cluster {id} is being deleted"),
            );
        }
        match catalog::check_upgrade(&record.kube_version, &request.kube_version) {
            Err(e) => return rejected(e),
            Ok(false) => {}
            Ok(true) => {
                let from = record.kube_version.clone();
                // An upgrade of a cluster still provisioning starts when provisioning ends.
                let start = now.max(record.created_ms + millis(self.timings.provision));
                let from = match &record.upgrade {
                    Some((earlier, _)) => earlier.clone(),
                    None => from,
                };
                record.upgrade = Some((from, start));
                record.kube_version = request.kube_version;
            }
        }
        let view = self.view(record, now);
        self.persist(&store);
        json(StatusCode::OK, &view)
    }

    fn set_addons(&self, id: &str, body: &[u8], now: u64) -> Response {
        let request: AddonsRequest = match parse(body) {
            Ok(request) => request,
            Err(message) => return bad_request(message),
        };
        if let Err(e) = catalog::check(&request.addons) {
            return rejected(e);
        }
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        let Some(record) = store.clusters.get_mut(id) else {
            return not_found(id);
        };
        if record.deleting_since_ms.is_some() {
            return error(
                StatusCode::CONFLICT,
                "ClusterDeleting",
                format!("cluster {id} is being deleted"),
            );
        }
        let wanted: BTreeMap<&str, &Addon> = request
            .addons
            .iter()
            .map(|a| (a.name.as_str(), a))
            .collect();
        let mut changed = false;
        for current in &mut record.addons {
            match wanted.get(current.name.as_str()) {
                Some(addon) if !current.removing && current.version == addon.version => {}
                Some(addon) => {
                    current.version = addon.version.clone();
                    current.removing = false;
                    current.since_ms = now;
                    changed = true;
                }
                None if current.removing => {}
                None => {
                    current.removing = true;
                    current.since_ms = now;
                    changed = true;
                }
            }
        }
        for addon in &request.addons {
            if !record.addons.iter().any(|a| a.name == addon.name) {
                record.addons.push(AddonRecord {
                    name: addon.name.clone(),
                    version: addon.version.clone(),
                    since_ms: now,
                    removing: false,
                });
                changed = true;
            }
        }
        let view = self.view(record, now);
        if changed {
            self.persist(&store);
        }
        json(StatusCode::OK, &view)
    }

    fn delete(&self, id: &str, now: u64) -> Response {
        let refused = {
            let faults = lock(&self.faults);
            faults.refuse_deletes.contains(id) || faults.refuse_deletes.contains("*")
        };
        let mut store = lock(&self.store);
        self.tidy(&mut store, now);
        let Some(record) = store.clusters.get_mut(id) else {
            return not_found(id);
        };
        if refused {
            return error(
                StatusCode::CONFLICT,
                "DeleteRefused",
                format!("cluster {id} is protected: deletes are refused (ask the platform team)"),
            );
        }
        let started = record.deleting_since_ms.is_none();
        let since = *record.deleting_since_ms.get_or_insert(now);
        if elapsed(since, now, self.timings.delete) {
            store.clusters.remove(id);
            self.persist(&store);
            return StatusCode::NO_CONTENT.into_response();
        }
        if started {
            self.persist(&store);
        }
        json(
            StatusCode::ACCEPTED,
            &DeletionProgress {
                progress: Some(format!(
                    "deleting ({}%)",
                    percent(since, now, self.timings.delete)
                )),
            },
        )
    }
}
