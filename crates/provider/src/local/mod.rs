//! The `local` provider: each cluster is a real Kubernetes API server, a `vigil sandbox` process
//! on loopback with its own data directory, started detached so it outlives the operator.
//!
//! Layout: `<root>/<id>/` holds `cluster.json` (the record: identity, request, phase, port, pid,
//! token, versions, addons, timestamps), `data/` (the API server's state), `sandbox.log` and
//! `kubeconfig`. The id is derived from the identity (`c-` + 16 hex digits of its SHA-256), so a
//! retried create, or one whose answer was lost, lands on the same directory: there is no second
//! cluster to make. Everything the provider knows is on disk; a new `LocalProvider` on the same
//! root carries on where the last one stopped.
//!
//! Nothing blocks: `create` records the cluster and starts its process; each `get` moves it on
//! (a dead process is restarted on the same port and data; an answering one has its version read
//! and its addons converged; then it is `Running`). Stopping a process (upgrade, delete) sends
//! SIGTERM and waits a moment; what takes longer is finished by later calls, with SIGKILL after
//! the grace period. Every step is safe to repeat after a crash at any point.

mod lock;
mod process;
mod state;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use std::os::unix::fs::DirBuilderExt as _;

use sha2::Digest as _;

pub use state::Phase;
use state::Record;

use crate::contract::version_matches;
use crate::{
    Addon, AddonState, AddonStatus, ClusterIdentity, ClusterProvider, ClusterRequest, ClusterState,
    Deletion, ProviderCluster, ProviderError, ProviderResult, catalog,
};

/// A file in a cluster's directory that makes the provider refuse to delete it (its content, if
/// any, is the reason given).
pub const REFUSE_DELETE: &str = "refuse-delete";

/// The CA certificate `vigil sandbox --tls` keeps in its data directory (`vigil_sandbox::CA_CERT_FILE`;
/// this crate talks to sandboxes only as processes, so it names the file rather than link the crate).
const CA_FILE: &str = "ca.crt";

/// How the local provider runs clusters.
#[derive(Debug, Clone)]
pub struct LocalConfig {
    /// Where clusters live, one directory each (created when the first cluster is).
    pub root: PathBuf,
    /// The program that serves a cluster (the `vigil` binary).
    pub program: PathBuf,
    /// Its leading arguments, subcommand included; the provider appends `--listen`,
    /// `--data-dir`, `--kube-version`, `--kubeconfig-out` and `--tls` (the token goes in the environment,
    /// `VIGIL_SANDBOX_TOKEN`, to stay out of `ps`).
    pub args: Vec<String>,
    /// Extra environment for the processes (e.g. `RUST_LOG`).
    pub env: Vec<(String, String)>,
    /// Refuse every delete (the `refuse-delete` file does it for one cluster).
    pub refuse_deletes: bool,
    /// From SIGTERM until SIGKILL when stopping a process.
    pub stop_grace: Duration,
    /// How long a call waits for a stopping process before reporting "in progress".
    pub stop_wait: Duration,
    /// The most the API server may take to answer `/version` and each addon request.
    pub probe_timeout: Duration,
}

impl LocalConfig {
    /// `program sandbox …` for clusters under `root`, with the default timings.
    pub fn new(root: impl Into<PathBuf>, program: impl Into<PathBuf>) -> Self {
        Self {
            root: root.into(),
            program: program.into(),
            args: vec!["sandbox".to_owned()],
            env: Vec::new(),
            refuse_deletes: false,
            stop_grace: Duration::from_secs(10),
            stop_wait: Duration::from_millis(500),
            probe_timeout: Duration::from_millis(1_500),
        }
    }

    /// [`Self::new`] with this process's own executable as the program.
    pub fn with_current_exe(root: impl Into<PathBuf>) -> Result<Self, LocalError> {
        let program = std::env::current_exe().map_err(|e| LocalError::Config(e.to_string()))?;
        Ok(Self::new(root, program))
    }
}

/// Why a [`LocalConfig`] cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    #[error("local cluster provider: {0}")]
    Config(String),
}

/// What is on disk about one cluster, for tests and tools (`none duplicated, none orphaned`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalCluster {
    pub id: String,
    pub identity: ClusterIdentity,
    pub phase: Phase,
    pub port: u16,
    pub dir: PathBuf,
    /// Live sandbox processes serving its data directory (one when healthy).
    pub pids: Vec<u32>,
}

/// The `local` provider.
pub struct LocalProvider {
    config: LocalConfig,
    /// One operation at a time per cluster within this process (the controller already
    /// serialises per object; this guards direct callers and tests).
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// Clients of the clusters' API servers, by id.
    clients: Mutex<HashMap<String, CachedClient>>,
}

/// A client of one cluster's API server, with what it was made for: a restart on another port,
/// or the move from plain HTTP to TLS, needs a new one.
struct CachedClient {
    port: u16,
    token: String,
    ca: Option<String>,
    client: kube::Client,
}

impl std::fmt::Debug for LocalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalProvider")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

fn io(what: &str, e: impl std::fmt::Display) -> ProviderError {
    ProviderError::Unavailable(format!("local provider: {what}: {e}"))
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn rejected(reason: &str, message: String) -> ProviderError {
    ProviderError::Rejected {
        reason: reason.to_owned(),
        message,
    }
}

/// `1.28` for `v1.28.0`.
fn master_of(git_version: &str) -> String {
    git_version
        .strip_prefix('v')
        .unwrap_or(git_version)
        .to_owned()
}

/// What one step of a cluster's state machine reports besides the record.
#[derive(Default)]
struct Report {
    state: Option<ClusterState>,
    progress: Option<String>,
    message: Option<String>,
    serving: bool,
}

impl LocalProvider {
    /// Checks the configuration; touches nothing on disk (the root is created with the first
    /// cluster, so an operator that never uses `local` never needs its directory).
    pub fn new(config: LocalConfig) -> Result<Self, LocalError> {
        if config.program.as_os_str().is_empty() {
            return Err(LocalError::Config("no sandbox program given".into()));
        }
        if config.root.as_os_str().is_empty() {
            return Err(LocalError::Config("no root directory given".into()));
        }
        Ok(Self {
            config,
            locks: Mutex::default(),
            clients: Mutex::default(),
        })
    }

    pub fn config(&self) -> &LocalConfig {
        &self.config
    }

    /// The id a cluster of `identity` has: the same for every call, process and restart.
    pub fn id_for(identity: &ClusterIdentity) -> String {
        let digest = sha2::Sha256::digest(identity.key().as_bytes());
        let hex: String = digest.iter().take(8).map(|b| format!("{b:02x}")).collect();
        format!("c-{hex}")
    }

    /// The directory of cluster `id`.
    pub fn dir(&self, id: &str) -> PathBuf {
        self.config.root.join(id)
    }

    fn data_dir(&self, id: &str) -> PathBuf {
        self.dir(id).join("data")
    }

    /// Ids are ours (`c-` + hex): anything else could name a path outside the root.
    fn valid_id(id: &str) -> bool {
        id.strip_prefix("c-")
            .is_some_and(|hex| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()))
    }

    /// Every cluster with a record under the root, with its live processes.
    pub fn clusters(&self) -> std::io::Result<Vec<LocalCluster>> {
        let entries = match std::fs::read_dir(&self.config.root) {
            Ok(entries) => entries,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(e),
        };
        let processes = process::under(&self.config.root);
        let mut clusters = Vec::new();
        for entry in entries {
            let entry = entry?;
            let Some(id) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            if !Self::valid_id(&id) {
                continue;
            }
            let Some(record) = state::load(&entry.path())? else {
                continue;
            };
            let data = self.data_dir(&id);
            clusters.push(LocalCluster {
                pids: processes
                    .iter()
                    .filter(|(_, dir)| *dir == data)
                    .map(|(pid, _)| *pid)
                    .collect(),
                id,
                identity: record.identity,
                phase: record.phase,
                port: record.port,
                dir: entry.path(),
            });
        }
        clusters.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(clusters)
    }

    /// Sandbox processes serving a data directory under the root, whether or not a cluster
    /// record names them (a process of no cluster is an orphan).
    pub fn processes(&self) -> Vec<(u32, PathBuf)> {
        process::under(&self.config.root)
    }

    /// SIGKILLs every sandbox process under the root (for tests' cleanup); returns how many.
    pub fn kill_all(&self) -> usize {
        let processes = self.processes();
        for (pid, dir) in &processes {
            process::signal(*pid, dir, libc::SIGKILL);
        }
        processes.len()
    }

    /// Holds cluster `id` for one operation: first within this process (so callers queue
    /// instead of polling), then across processes.
    /// Refuses ids that are not ours before they name any path (`../x` would leave the root).
    async fn hold(&self, id: &str) -> ProviderResult<Held> {
        if !Self::valid_id(id) {
            return Err(ProviderError::NotFound(id.to_owned()));
        }
        let local = lock(&self.locks).entry(id.to_owned()).or_default().clone();
        let local = local.lock_owned().await;
        let file = lock::acquire(&self.config.root.join(".locks"), id, LOCK_PATIENCE)
            .await
            .map_err(|e| io(&format!("locking cluster {id}"), e))?;
        Ok(Held {
            _file: file,
            _local: local,
        })
    }

    fn load(&self, id: &str) -> ProviderResult<Option<Record>> {
        if !Self::valid_id(id) {
            return Ok(None);
        }
        state::load(&self.dir(id)).map_err(|e| io(&format!("reading cluster {id}"), e))
    }

    fn save(&self, record: &mut Record) -> ProviderResult<()> {
        state::save(&self.dir(&record.id), record)
            .map_err(|e| io(&format!("writing cluster {}", record.id), e))
    }

    /// The CA the cluster's API server serves TLS with: `ca.crt`, which `vigil sandbox --tls` keeps
    /// in its data directory. `None` before a TLS server first ran there, or for a cluster started
    /// by an older Vigil that served plain HTTP (it moves to TLS at its next restart).
    fn ca_pem(&self, id: &str) -> Option<String> {
        std::fs::read_to_string(self.data_dir(id).join(CA_FILE))
            .ok()
            .filter(|pem| pem.contains("BEGIN CERTIFICATE"))
    }

    /// The API server's URL: https once it has a CA.
    fn url(record: &Record, ca: Option<&str>) -> String {
        let scheme = if ca.is_some() { "https" } else { "http" };
        format!("{scheme}://127.0.0.1:{}", record.port)
    }

    fn kubeconfig(record: &Record, ca: Option<&str>) -> String {
        // The same document `vigil sandbox --kubeconfig-out` writes, so both copies agree.
        let quote = |s: &str| serde_json::Value::from(s).to_string();
        let ca_line = ca
            .map(|pem| {
                format!(
                    "\n    certificate-authority-data: {}",
                    quote(&base64::Engine::encode(
                        &base64::engine::general_purpose::STANDARD,
                        pem
                    ))
                )
            })
            .unwrap_or_default();
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: vigil-sandbox\n  cluster:\n    server: {}{ca_line}\nusers:\n- name: vigil-sandbox\n  user:\n    token: {}\ncontexts:\n- name: vigil-sandbox\n  context:\n    cluster: vigil-sandbox\n    user: vigil-sandbox\n    namespace: default\ncurrent-context: vigil-sandbox\n",
            quote(&Self::url(record, ca)),
            quote(&record.token)
        )
    }

    async fn client(&self, record: &Record) -> ProviderResult<kube::Client> {
        let ca = self.ca_pem(&record.id);
        if let Some(cached) = lock(&self.clients).get(&record.id)
            && cached.port == record.port
            && cached.token == record.token
            && cached.ca == ca
        {
            return Ok(cached.client.clone());
        }
        let kubeconfig =
            kube::config::Kubeconfig::from_yaml(&Self::kubeconfig(record, ca.as_deref()))
                .map_err(|e| io("kubeconfig", e))?;
        let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
            .await
            .map_err(|e| io("kubeconfig", e))?;
        config.connect_timeout = Some(self.config.probe_timeout);
        config.read_timeout = Some(self.config.probe_timeout);
        config.write_timeout = Some(self.config.probe_timeout);
        let client = kube::Client::try_from(config).map_err(|e| io("client", e))?;
        lock(&self.clients).insert(
            record.id.clone(),
            CachedClient {
                port: record.port,
                token: record.token.clone(),
                ca,
                client: client.clone(),
            },
        );
        Ok(client)
    }

    fn view(&self, record: &Record, report: Report) -> ProviderCluster {
        let ca = self.ca_pem(&record.id);
        let recorded = match record.phase {
            Phase::Provisioning => ClusterState::Provisioning,
            Phase::Running => ClusterState::Running,
            Phase::Upgrading => ClusterState::Upgrading,
            Phase::Deleting => ClusterState::Deleting,
        };
        let served = record.master_version.is_some();
        let addons = if report.serving || !record.observed_addons.is_empty() {
            record.observed_addons.clone()
        } else {
            record
                .addons
                .iter()
                .map(|a| AddonStatus {
                    name: a.name.clone(),
                    version: a.version.clone(),
                    state: AddonState::Installing,
                    message: None,
                })
                .collect()
        };
        ProviderCluster {
            id: record.id.clone(),
            identity: record.identity.clone(),
            state: report.state.unwrap_or(recorded),
            progress: report.progress,
            kube_version: record.kube_version.clone(),
            master_version: record.master_version.clone(),
            api_server_url: served.then(|| Self::url(record, ca.as_deref())),
            addons,
            kubeconfig: served.then(|| Self::kubeconfig(record, ca.as_deref())),
            message: report.message.or_else(|| record.note.clone()),
            type_: record.request.type_.clone(),
            env: record.request.env.clone(),
            os_version: record.request.os_version.clone(),
        }
    }

    /// Moves a cluster on by one step (see the module docs) and reports it. The caller holds the
    /// cluster's lock.
    async fn step(&self, mut record: Record) -> ProviderResult<ProviderCluster> {
        let before = record.clone();
        let report = self.advance(&mut record).await?;
        if record != before {
            self.save(&mut record)?;
        }
        Ok(self.view(&record, report))
    }

    async fn advance(&self, record: &mut Record) -> ProviderResult<Report> {
        if record.phase == Phase::Deleting {
            return Ok(Report {
                progress: Some("deleting".into()),
                ..Report::default()
            });
        }
        let data = self.data_dir(&record.id);
        // A stop asked for by an upgrade: finish it before starting the new version.
        if let Some(since) = record.stopping_since_ms {
            let forceful =
                state::now_ms().saturating_sub(since) >= duration_ms(self.config.stop_grace);
            let alive = process::stop(&data, record.pid, forceful, self.config.stop_wait).await;
            if !alive.is_empty() {
                return Ok(Report {
                    progress: Some(format!(
                        "stopping the API server to start {}{}",
                        record.kube_version,
                        if forceful { " (killing it)" } else { "" }
                    )),
                    ..Report::default()
                });
            }
            record.stopping_since_ms = None;
            record.pid = None;
        }
        let live = self.live_process(record);
        let Some(pid) = live else {
            return self.start(record);
        };
        record.pid = Some(pid);
        let client = self.client(record).await?;
        let version = tokio::time::timeout(self.config.probe_timeout, client.apiserver_version())
            .await
            .map_err(|_| format!("no answer within {:?}", self.config.probe_timeout))
            .and_then(|answer| answer.map_err(|e| e.to_string()));
        let info = match version {
            Ok(info) => info,
            Err(e) => {
                // A server this provider (re)started that has not answered since is not
                // Running yet, whatever phase the cluster had before its process died.
                let restarted = record.phase == Phase::Running && record.starts_without_answer > 0;
                return Ok(Report {
                    state: restarted.then_some(ClusterState::Provisioning),
                    progress: Some(if restarted {
                        "restarting the API server".into()
                    } else {
                        "waiting for the API server to answer".into()
                    }),
                    message: Some(format!("the API server does not answer yet: {e}")),
                    ..Report::default()
                });
            }
        };
        let master = master_of(&info.git_version);
        record.master_version = Some(master.clone());
        record.starts_without_answer = 0;
        record.note = None;
        if !version_matches(&record.kube_version, &master) {
            if record.process_kube_version.as_deref() != Some(record.kube_version.as_str()) {
                // Started with an older version (a crash came between recording an upgrade and
                // stopping the process): restart it now.
                record.stopping_since_ms = Some(state::now_ms());
                return Ok(Report {
                    progress: Some(format!(
                        "restarting the API server on {}",
                        record.kube_version
                    )),
                    ..Report::default()
                });
            }
            return Ok(Report {
                state: Some(ClusterState::Failed),
                message: Some(format!(
                    "the API server was started for {} but reports {master}",
                    record.kube_version
                )),
                serving: true,
                ..Report::default()
            });
        }
        match tokio::time::timeout(
            self.config.probe_timeout * 4,
            crate::addons::converge(&client, &record.addons),
        )
        .await
        {
            Ok(Ok(converged)) => {
                record.observed_addons = converged.addons;
                // Running once every addon is applied: their availability is reported per
                // addon (`Installing` until available), as managed clusters do.
                if converged.applied {
                    record.phase = Phase::Running;
                    return Ok(Report {
                        serving: true,
                        ..Report::default()
                    });
                }
                Ok(Report {
                    progress: Some("converging addons".into()),
                    serving: true,
                    ..Report::default()
                })
            }
            Ok(Err(e)) => Ok(Report {
                progress: Some("installing addons".into()),
                message: Some(format!("cannot list the addons: {e}")),
                serving: true,
                ..Report::default()
            }),
            Err(_) => Ok(Report {
                progress: Some("installing addons".into()),
                message: Some("the API server is slow to answer addon requests".into()),
                serving: true,
                ..Report::default()
            }),
        }
    }

    /// The live process of the cluster: the recorded pid if it still serves the data directory,
    /// else any process that does (one started just before a crash kept its pid from the
    /// record); when it has to look, extra processes on the same data are killed (the sandbox
    /// locks its data directory, so there should never be any).
    fn live_process(&self, record: &Record) -> Option<u32> {
        let data = self.data_dir(&record.id);
        // The common case costs one read of /proc/<pid>/cmdline, not a scan of /proc.
        if let Some(pid) = record.pid
            && process::is_serving(pid, &data)
        {
            return Some(pid);
        }
        let mut serving = process::serving(&data);
        let chosen = match record.pid {
            Some(pid) if serving.contains(&pid) => Some(pid),
            _ => serving.first().copied(),
        };
        serving.retain(|pid| Some(*pid) != chosen);
        for pid in serving {
            tracing::warn!(cluster = %record.id, pid, "a second sandbox on one data directory: killing it");
            process::signal(pid, &data, libc::SIGKILL);
        }
        chosen
    }

    /// Starts the cluster's process (on its port unless someone else took it).
    fn start(&self, record: &mut Record) -> ProviderResult<Report> {
        let dir = self.dir(&record.id);
        let data = self.data_dir(&record.id);
        std::fs::create_dir_all(&data).map_err(|e| io("creating the data directory", e))?;
        if !process::port_free(record.port) {
            let old = record.port;
            record.port = process::free_port().map_err(|e| io("choosing a port", e))?;
            record.master_version = None;
            record.note = Some(format!(
                "port {old} was taken by another program; the API server moved to {}",
                record.port
            ));
        }
        let log = dir.join("sandbox.log");
        let restart = record.pid.is_some() || record.master_version.is_some();
        let crash_loop = record.starts_without_answer >= 3;
        let pid = process::spawn(&process::Spawn {
            program: &self.config.program,
            args: &self.config.args,
            env: &self.config.env,
            port: record.port,
            data_dir: &data,
            kube_version: &record.kube_version,
            token: &record.token,
            kubeconfig: &dir.join("kubeconfig"),
            log: &log,
        })
        .map_err(|e| io(&format!("starting {}", self.config.program.display()), e))?;
        record.pid = Some(pid);
        record.process_kube_version = Some(record.kube_version.clone());
        record.starts_without_answer += 1;
        let (state, progress) = match record.phase {
            Phase::Upgrading => (
                ClusterState::Upgrading,
                format!("starting the API server on {}", record.kube_version),
            ),
            _ if restart => (
                ClusterState::Provisioning,
                "restarting the API server".to_owned(),
            ),
            _ => (
                ClusterState::Provisioning,
                "starting the API server".to_owned(),
            ),
        };
        let message = crash_loop.then(|| {
            format!(
                "the API server keeps exiting ({} starts without an answer); its log ends: {}",
                record.starts_without_answer,
                process::log_tail(&log, 3)
            )
        });
        Ok(Report {
            state: Some(if crash_loop {
                ClusterState::Failed
            } else {
                state
            }),
            progress: Some(progress),
            message,
            serving: false,
        })
    }

    fn refusal(&self, id: &str) -> Option<String> {
        if self.config.refuse_deletes {
            return Some(format!(
                "cluster {id}: this local provider is configured to refuse deletes"
            ));
        }
        let marker = self.dir(id).join(REFUSE_DELETE);
        let text = std::fs::read_to_string(&marker).ok()?;
        Some(match text.trim() {
            "" => format!(
                "cluster {id} is protected: remove {} to allow deleting it",
                marker.display()
            ),
            reason => format!("cluster {id} is protected: {reason}"),
        })
    }

    /// Removes a cluster's directory: renamed into `<root>/.trash` first (atomic), so a crash
    /// mid-removal never leaves a half cluster that `find` would see.
    async fn remove_dir(&self, id: &str) -> ProviderResult<()> {
        let dir = self.dir(id);
        let trash = self.config.root.join(".trash");
        std::fs::create_dir_all(&trash).map_err(|e| io("creating the trash", e))?;
        let target = trash.join(format!("{id}-{}", state::now_ms()));
        if let Err(e) = std::fs::rename(&dir, &target)
            && dir.exists()
        {
            return Err(io(&format!("removing {}", dir.display()), e));
        }
        lock(&self.clients).remove(id);
        let emptied = tokio::task::spawn_blocking(move || {
            let result = std::fs::remove_dir_all(&target);
            // Also what an earlier crash left in the trash (best effort: another delete may be
            // emptying the same entries).
            if let Ok(entries) = std::fs::read_dir(&trash) {
                for entry in entries.flatten() {
                    let _ = std::fs::remove_dir_all(entry.path());
                }
            }
            result
        })
        .await;
        match emptied {
            Ok(Err(e)) if e.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(cluster = id, error = %e, "cannot empty the local provider's trash; retried on the next delete");
            }
            _ => {}
        }
        Ok(())
    }
}

/// How long a call waits for another process's operation on the same cluster.
const LOCK_PATIENCE: Duration = Duration::from_secs(5);

/// Both locks of one cluster.
struct Held {
    _file: lock::ClusterLock,
    _local: tokio::sync::OwnedMutexGuard<()>,
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[async_trait::async_trait]
impl ClusterProvider for LocalProvider {
    async fn find(&self, identity: &ClusterIdentity) -> ProviderResult<Option<ProviderCluster>> {
        let id = Self::id_for(identity);
        let _held = self.hold(&id).await?;
        match self.load(&id)? {
            Some(record) if record.identity == *identity => self.step(record).await.map(Some),
            _ => Ok(None),
        }
    }

    async fn create(&self, request: &ClusterRequest) -> ProviderResult<ProviderCluster> {
        if request.identity.uuid.is_empty() || request.identity.name.is_empty() {
            return Err(rejected(
                "InvalidIdentity",
                "identity.uuid and identity.name must not be empty".into(),
            ));
        }
        catalog::check_kube_version(&request.kube_version)?;
        catalog::check(&request.addons)?;
        let id = Self::id_for(&request.identity);
        let _held = self.hold(&id).await?;
        if let Some(record) = self.load(&id)? {
            if record.identity != request.identity {
                return Err(rejected(
                    "IdentityCollision",
                    format!(
                        "cluster {id} belongs to {}; {} hashes to the same id",
                        record.identity, request.identity
                    ),
                ));
            }
            return self.step(record).await;
        }
        let dir = self.dir(&id);
        // Owner only: the record and the kubeconfig hold the API server's token.
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir.join("data"))
            .map_err(|e| io(&format!("creating {}", dir.display()), e))?;
        let now = state::now_rfc3339();
        let mut record = Record {
            id: id.clone(),
            identity: request.identity.clone(),
            request: request.clone(),
            phase: Phase::Provisioning,
            port: process::free_port().map_err(|e| io("choosing a port", e))?,
            token: (0..24)
                .map(|_| format!("{:02x}", rand::random::<u8>()))
                .collect(),
            kube_version: request.kube_version.clone(),
            master_version: None,
            addons: request.addons.clone(),
            observed_addons: Vec::new(),
            pid: None,
            process_kube_version: None,
            stopping_since_ms: None,
            starts_without_answer: 0,
            note: None,
            created_at: now.clone(),
            updated_at: now,
        };
        // Recorded before anything runs: from here on, every later call finds this cluster.
        self.save(&mut record)?;
        self.step(record).await
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<ProviderCluster>> {
        if !Self::valid_id(id) {
            return Ok(None);
        }
        let _held = self.hold(id).await?;
        match self.load(id)? {
            Some(record) => self.step(record).await.map(Some),
            None => Ok(None),
        }
    }

    async fn upgrade(&self, id: &str, kube_version: &str) -> ProviderResult<ProviderCluster> {
        let _held = self.hold(id).await?;
        let Some(mut record) = self.load(id)? else {
            return Err(ProviderError::NotFound(id.to_owned()));
        };
        if record.phase == Phase::Deleting {
            return Err(rejected(
                "ClusterDeleting",
                format!("cluster {id} is being deleted"),
            ));
        }
        if catalog::check_upgrade(&record.kube_version, kube_version)? {
            record.kube_version = kube_version.to_owned();
            if record.phase == Phase::Running {
                record.phase = Phase::Upgrading;
            }
            record.stopping_since_ms = Some(state::now_ms());
            // Recorded before the process is touched: a crash now still upgrades.
            self.save(&mut record)?;
        }
        self.step(record).await
    }

    async fn set_addons(&self, id: &str, addons: &[Addon]) -> ProviderResult<ProviderCluster> {
        catalog::check(addons)?;
        let _held = self.hold(id).await?;
        let Some(mut record) = self.load(id)? else {
            return Err(ProviderError::NotFound(id.to_owned()));
        };
        if record.phase == Phase::Deleting {
            return Err(rejected(
                "ClusterDeleting",
                format!("cluster {id} is being deleted"),
            ));
        }
        if record.addons != addons {
            record.addons = addons.to_vec();
            self.save(&mut record)?;
        }
        self.step(record).await
    }

    async fn delete(&self, id: &str) -> ProviderResult<Deletion> {
        if !Self::valid_id(id) {
            return Ok(Deletion::Gone);
        }
        let _held = self.hold(id).await?;
        let data = self.data_dir(id);
        let record = self.load(id)?;
        if !self.dir(id).exists() {
            return Ok(Deletion::Gone);
        }
        if let Some(message) = self.refusal(id) {
            return Err(rejected("DeleteRefused", message));
        }
        let (pid, forceful) = match record {
            Some(mut record) => {
                let first = record.phase != Phase::Deleting || record.stopping_since_ms.is_none();
                if first {
                    record.phase = Phase::Deleting;
                    record.stopping_since_ms = Some(state::now_ms());
                    self.save(&mut record)?;
                }
                let since = record.stopping_since_ms.unwrap_or_default();
                let forceful =
                    state::now_ms().saturating_sub(since) >= duration_ms(self.config.stop_grace);
                (record.pid, forceful)
            }
            // A directory without a record: a create that crashed before recording it. Nothing
            // in it is worth a graceful stop.
            None => (None, true),
        };
        let alive = process::stop(&data, pid, forceful, self.config.stop_wait).await;
        if !alive.is_empty() {
            return Ok(Deletion::InProgress(Some(format!(
                "stopping the API server (pid {}){}",
                alive
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                if forceful { ", killing it" } else { "" }
            ))));
        }
        self.remove_dir(id).await?;
        Ok(Deletion::Gone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_derived_from_the_identity_and_only_ours_are_accepted() {
        let a = ClusterIdentity {
            uuid: "u".into(),
            name: "a".into(),
        };
        let id = LocalProvider::id_for(&a);
        assert_eq!(id, LocalProvider::id_for(&a.clone()));
        assert_eq!(id.len(), 2 + 16);
        assert!(LocalProvider::valid_id(&id));
        let b = ClusterIdentity {
            name: "b".into(),
            ..a
        };
        assert_ne!(id, LocalProvider::id_for(&b));
        for bad in ["", "c-", "../etc", "c-../x", "x-00", "c-zz"] {
            assert!(!LocalProvider::valid_id(bad), "{bad}");
        }
    }

    #[test]
    fn master_version_is_git_version_without_the_v() {
        assert_eq!(master_of("v1.28.3"), "1.28.3");
        assert_eq!(master_of("1.29.0"), "1.29.0");
    }
}
