//! The `vigil run` child of the benchmarks that run Vigil in its own process: spawned on a
//! sandbox's kubeconfig, its metrics address read from its log, its CPU and log notes.

use std::collections::VecDeque;
use std::path::Path;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::oneshot;

use super::usage::cpu_seconds;

/// `vigil run` as a child process (killed on drop), its metrics address and what it logged.
pub(crate) struct Vigil {
    pub(crate) process: tokio::process::Child,
    pub(crate) pid: u32,
    pub(crate) metrics_addr: String,
    log: Arc<Mutex<LogNotes>>,
}

/// What the child's log said, in counts and a few lines.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogNotes {
    pub(crate) warnings: usize,
    pub(crate) errors: usize,
    /// Lines from kube-runtime's watcher (each a watch or list error, or an idle re-watch; seen
    /// only when the child's filter enables them).
    pub(crate) watcher_lines: usize,
    /// The first few WARN/ERROR and watcher lines.
    pub(crate) first: Vec<String>,
    /// The last lines, for when Vigil dies.
    pub(crate) tail: VecDeque<String>,
}

/// How the child logs: its `RUST_LOG` filter, and a file to copy every line to.
pub(crate) struct ChildLog {
    pub(crate) rust_log: String,
    pub(crate) copy: Option<std::fs::File>,
}

impl ChildLog {
    /// `VIGIL_BENCH_LOG` sets the filter (e.g. `info,kube_runtime=debug`, default `info`) when a
    /// bench needs a closer look; `VIGIL_BENCH_LOG_FILE` gets every line appended.
    pub(crate) fn from_env() -> Self {
        Self {
            rust_log: std::env::var("VIGIL_BENCH_LOG").unwrap_or_else(|_| "info".into()),
            copy: std::env::var_os("VIGIL_BENCH_LOG_FILE").and_then(|path| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .ok()
            }),
        }
    }
}

/// Starts `vigil run` on `kubeconfig` with metrics on a free loopback port, leader election off,
/// and `args` (which controllers, namespaces, flags); waits until it logs its metrics address.
pub(crate) async fn spawn_vigil(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Vigil> {
    spawn_vigil_with(kubeconfig, args, ChildLog::from_env()).await
}

/// Like [`spawn_vigil`], logging as `log` says.
pub(crate) async fn spawn_vigil_with(
    kubeconfig: &Path,
    args: &[&str],
    log: ChildLog,
) -> anyhow::Result<Vigil> {
    let exe = super::binary::vigil()?;
    let mut process = tokio::process::Command::new(exe)
        .arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0", "--leader-elect", "false"])
        .args(args)
        // The metrics address is read from an info-level log line, whatever the filter adds.
        .env("RUST_LOG", &log.rust_log)
        .env("NO_COLOR", "1")
        .env_remove("POD_NAME_PREFIX")
        .env_remove("POD_TEMPLATE")
        .env_remove("NAMESPACES")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .context("starting vigil run")?;
    let pid = process.id().context("vigil run pid")?;
    let stderr = process.stderr.take().context("vigil run stderr")?;
    let notes = Arc::new(Mutex::new(LogNotes::default()));
    let (addr_tx, addr_rx) = oneshot::channel::<String>();
    tokio::spawn(read_log(stderr, log.copy, notes.clone(), addr_tx));
    let mut vigil = Vigil {
        process,
        pid,
        metrics_addr: String::new(),
        log: notes,
    };
    match tokio::time::timeout(Duration::from_secs(15), addr_rx).await {
        Ok(Ok(addr)) => vigil.metrics_addr = addr,
        Ok(Err(_)) => anyhow::bail!(
            "vigil run exited before logging its metrics address{}",
            vigil.exit_note()
        ),
        Err(_) => anyhow::bail!(
            "vigil run did not log its metrics address within 15 s{}",
            vigil.exit_note()
        ),
    }
    Ok(vigil)
}

/// Reads the child's log: copies each line, sends the metrics address once, keeps notes.
async fn read_log(
    stderr: tokio::process::ChildStderr,
    mut copy: Option<std::fs::File>,
    notes: Arc<Mutex<LogNotes>>,
    addr_tx: oneshot::Sender<String>,
) {
    let mut addr_tx = Some(addr_tx);
    let mut lines = tokio::io::BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let line = strip_ansi(&line);
        // Small blocking writes to a local file: acceptable in a bench.
        if let Some(file) = copy.as_mut() {
            use std::io::Write as _;
            if writeln!(file, "{line}").is_err() {
                copy = None;
            }
        }
        if line.contains("metrics and probes serving")
            && let Some(addr) = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix("addr="))
            && let Some(tx) = addr_tx.take()
        {
            let _ = tx.send(addr.to_owned());
        }
        if let Ok(mut notes) = notes.lock() {
            let mut words = line.split_whitespace();
            let level = words.nth(1).unwrap_or("");
            let watcher = words
                .next()
                .is_some_and(|target| target.starts_with("kube_runtime::watcher"));
            match level {
                "WARN" => notes.warnings += 1,
                "ERROR" => notes.errors += 1,
                _ => {}
            }
            if watcher {
                notes.watcher_lines += 1;
            }
            if (watcher || level == "WARN" || level == "ERROR") && notes.first.len() < 8 {
                notes.first.push(line.clone());
            }
            notes.tail.push_back(line);
            if notes.tail.len() > 20 {
                notes.tail.pop_front();
            }
        }
    }
}

impl Vigil {
    /// utime + stime so far, in seconds.
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        cpu_seconds(self.pid)
    }

    /// ", vigil run exited (status)" when it has, else "".
    pub(crate) fn exited_note(&mut self) -> String {
        match self.process.try_wait() {
            Ok(Some(status)) => format!("; vigil run exited ({status})"),
            _ => String::new(),
        }
    }

    /// The exit note plus Vigil's last log lines.
    pub(crate) fn exit_note(&mut self) -> String {
        let exited = self.exited_note();
        let tail = self
            .log
            .lock()
            .map(|n| n.tail.iter().cloned().collect::<Vec<_>>().join("\n    "))
            .unwrap_or_default();
        format!("{exited}; its last log lines:\n    {tail}")
    }

    pub(crate) fn log_notes(&self) -> LogNotes {
        self.log.lock().map(|n| n.clone()).unwrap_or_default()
    }

    pub(crate) fn log_summary(&self) -> String {
        let Ok(notes) = self.log.lock() else {
            return "unavailable".into();
        };
        let mut out = format!("{} WARN, {} ERROR lines", notes.warnings, notes.errors);
        for line in &notes.first {
            out.push_str("\n    ");
            out.push_str(line);
        }
        out
    }
}

/// Removes ANSI escape sequences (colours), in case the log has them.
pub(crate) fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // ESC [ … final byte in @..~
            for d in chars.by_ref() {
                if ('@'..='~').contains(&d) && d != '[' {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}
