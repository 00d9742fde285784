//! What the benchmarks that run Vigil in its own process share: the `vigil run` child (spawned
//! on a sandbox's kubeconfig, its metrics address read from its log, its CPU and log notes), a
//! bare HTTP GET for its /metrics and probes, a temp file removed on drop, and percentiles.
//! Moved here from `bench_critical_service.rs` so each benchmark does not carry its own copy.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::oneshot;

/// Clock ticks per second of /proc/<pid>/stat's utime and stime: assumed to be 100 (USER_HZ on
/// Linux everywhere in practice) rather than read through sysconf.
pub(crate) const CLK_TCK: f64 = 100.0;

/// `vigil run` as a child process (killed on drop), its metrics address and what it logged.
pub(crate) struct Vigil {
    pub(crate) process: tokio::process::Child,
    pub(crate) pid: u32,
    pub(crate) metrics_addr: String,
    log: Arc<Mutex<LogNotes>>,
}

#[derive(Default)]
struct LogNotes {
    warnings: usize,
    errors: usize,
    /// The first few WARN/ERROR lines.
    first: Vec<String>,
    /// The last lines, for when Vigil dies.
    tail: VecDeque<String>,
}

/// Starts `vigil run` on `kubeconfig` with metrics on a free loopback port, leader election off,
/// and `args` (which controllers, namespaces, flags); waits until it logs its metrics address.
pub(crate) async fn spawn_vigil(kubeconfig: &Path, args: &[&str]) -> anyhow::Result<Vigil> {
    let exe = std::env::current_exe().context("locating the vigil binary")?;
    let mut process = tokio::process::Command::new(exe)
        .arg("run")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--metrics-addr", "127.0.0.1:0", "--leader-elect", "false"])
        .args(args)
        // The metrics address is read from the info-level log line; other settings stay defaults.
        // `VIGIL_BENCH_LOG` sets the child's filter (e.g. `info,kube_runtime=debug`) when a
        // bench needs a closer look; the metrics address is read from an info line either way.
        .env(
            "RUST_LOG",
            std::env::var("VIGIL_BENCH_LOG").unwrap_or_else(|_| "info".into()),
        )
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
    let log = Arc::new(Mutex::new(LogNotes::default()));
    let (addr_tx, addr_rx) = oneshot::channel::<String>();
    let notes = log.clone();
    tokio::spawn(async move {
        let mut addr_tx = Some(addr_tx);
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        // `VIGIL_BENCH_LOG_FILE`: every line of the child's log is also appended there.
        let mut copy = std::env::var_os("VIGIL_BENCH_LOG_FILE").and_then(|path| {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .ok()
        });
        while let Ok(Some(line)) = lines.next_line().await {
            let line = strip_ansi(&line);
            if let Some(file) = copy.as_mut() {
                use std::io::Write as _;
                let _ = writeln!(file, "{line}");
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
                let level = line.split_whitespace().nth(1).unwrap_or("");
                if level == "WARN" || level == "ERROR" {
                    if level == "WARN" {
                        notes.warnings += 1;
                    } else {
                        notes.errors += 1;
                    }
                    if notes.first.len() < 5 {
                        notes.first.push(line.clone());
                    }
                }
                notes.tail.push_back(line);
                if notes.tail.len() > 20 {
                    notes.tail.pop_front();
                }
            }
        }
    });
    let mut vigil = Vigil {
        process,
        pid,
        metrics_addr: String::new(),
        log,
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

impl Vigil {
    /// utime + stime so far, in seconds.
    pub(crate) fn cpu_seconds(&self) -> Option<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid)).ok()?;
        // Fields after the command (which may hold spaces) start at field 3, `state`.
        let rest = stat.rsplit_once(')')?.1;
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let utime: f64 = fields.get(11)?.parse().ok()?;
        let stime: f64 = fields.get(12)?.parse().ok()?;
        Some((utime + stime) / CLK_TCK)
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

/// How long [`http_get`] waits for an answer.
pub(crate) const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// A GET over HTTP/1.0 (so the body is neither chunked nor kept alive): status and body.
pub(crate) async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(HTTP_TIMEOUT, exchange)
        .await
        .with_context(|| format!("GET {path} on {addr} timed out"))??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status code")?;
    Ok((code, body.to_owned()))
}

/// A file removed on drop.
pub(crate) struct TempFile(pub(crate) PathBuf);

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

pub(crate) fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
