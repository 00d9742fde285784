//! The sandbox processes of local clusters: spawning them detached, finding them again by their
//! data directory, and stopping them. Linux only (`/proc`).
//!
//! A process is recognised by its command line (`--data-dir <dir>`), never by a recorded pid
//! alone: after a reboot or a long time a pid may belong to anything, and signalling it would
//! hit a stranger. Finding processes by data directory also covers a crash between spawning and
//! recording the pid.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

/// Logs bigger than this are moved aside (one old generation kept) when a process starts.
const LOG_LIMIT: u64 = 4 << 20;

/// How to start one sandbox.
#[derive(Debug, Clone)]
pub struct Spawn<'a> {
    pub program: &'a Path,
    /// Leading arguments, the subcommand included (`["sandbox"]`).
    pub args: &'a [String],
    pub env: &'a [(String, String)],
    pub port: u16,
    pub data_dir: &'a Path,
    pub kube_version: &'a str,
    pub token: &'a str,
    pub kubeconfig: &'a Path,
    pub log: &'a Path,
}

/// Starts the sandbox detached: its own process group (a terminal's Ctrl-C to the operator does
/// not reach it), stdin closed, output to the log. The `Child` is dropped, not killed: tokio
/// reaps it in the background if it exits while this process lives.
pub fn spawn(spec: &Spawn<'_>) -> std::io::Result<u32> {
    rotate(spec.log);
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(spec.log)?;
    let mut command = tokio::process::Command::new(spec.program);
    command
        .args(spec.args)
        .arg("--listen")
        .arg(format!("127.0.0.1:{}", spec.port))
        .arg("--data-dir")
        .arg(spec.data_dir)
        .arg("--kube-version")
        .arg(spec.kube_version)
        .arg("--kubeconfig-out")
        .arg(spec.kubeconfig)
        // TLS, as a real API server: client-go (kubectl, Helm) sends the token only over TLS.
        .arg("--tls")
        // The token goes through the environment: a command line is readable by every user.
        .env("VIGIL_SANDBOX_TOKEN", spec.token)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .process_group(0)
        .kill_on_drop(false);
    let child = command.spawn()?;
    child
        .id()
        .ok_or_else(|| std::io::Error::other("the sandbox exited before its pid was read"))
}

fn rotate(log: &Path) {
    if std::fs::metadata(log).is_ok_and(|m| m.len() > LOG_LIMIT) {
        let _ = std::fs::rename(log, log.with_extension("log.1"));
    }
}

/// The last `lines` lines of a log, for messages ("why did it exit?").
pub fn log_tail(log: &Path, lines: usize) -> String {
    let text = std::fs::read(log).unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let all: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join(" | ")
}

/// A process's arguments, or `None` if it is gone, a zombie, or not readable.
fn cmdline(pid: u32) -> Option<Vec<OsString>> {
    let bytes = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
    if bytes.is_empty() {
        return None;
    }
    Some(
        bytes
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .map(|a| OsString::from_vec(a.to_vec()))
            .collect(),
    )
}

/// The `--data-dir` a process was started with.
fn data_dir_of(args: &[OsString]) -> Option<PathBuf> {
    args.windows(2)
        .find(|w| w[0] == "--data-dir")
        .map(|w| PathBuf::from(&w[1]))
}

/// Whether `pid` is a live sandbox serving `data_dir`.
pub fn is_serving(pid: u32, data_dir: &Path) -> bool {
    cmdline(pid)
        .and_then(|args| data_dir_of(&args))
        .is_some_and(|dir| dir == data_dir)
}

/// Every live process whose `--data-dir` is under `root` (itself included), with that directory.
pub fn under(root: &Path) -> Vec<(u32, PathBuf)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let me = std::process::id();
    let mut found: Vec<(u32, PathBuf)> = entries
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let dir = data_dir_of(&cmdline(pid)?)?;
            dir.starts_with(root).then_some((pid, dir))
        })
        .collect();
    found.sort();
    found
}

/// Live processes serving exactly `data_dir`.
pub fn serving(data_dir: &Path) -> Vec<u32> {
    under(data_dir)
        .into_iter()
        .filter(|(_, dir)| dir == data_dir)
        .map(|(pid, _)| pid)
        .collect()
}

/// Sends `signal` to `pid` if it still serves `data_dir` (so a reused pid is never hit).
#[expect(
    unsafe_code,
    reason = "kill(2) on a pid that is not our child has no safe std equivalent"
)]
pub fn signal(pid: u32, data_dir: &Path, signal: libc::c_int) {
    let Ok(raw) = libc::pid_t::try_from(pid) else {
        return;
    };
    if raw <= 1 || !is_serving(pid, data_dir) {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; the pid was just
    // checked to be the sandbox of this data directory.
    unsafe {
        libc::kill(raw, signal);
    }
}

/// Asks every process serving `data_dir` to stop: SIGTERM, or SIGKILL once `forceful`. Waits at
/// most `wait` for them to exit; returns those still alive.
pub async fn stop(data_dir: &Path, extra: Option<u32>, forceful: bool, wait: Duration) -> Vec<u32> {
    let mut pids = serving(data_dir);
    if let Some(pid) = extra
        && !pids.contains(&pid)
        && is_serving(pid, data_dir)
    {
        pids.push(pid);
    }
    let sig = if forceful {
        libc::SIGKILL
    } else {
        libc::SIGTERM
    };
    for pid in &pids {
        signal(*pid, data_dir, sig);
    }
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        pids.retain(|pid| is_serving(*pid, data_dir));
        if pids.is_empty() || tokio::time::Instant::now() >= deadline {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A loopback port free right now (bound, read, released). The sandbox binds it moments later;
/// should someone else take it first, the next spawn notices and picks another.
pub fn free_port() -> std::io::Result<u16> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0))?;
    Ok(listener.local_addr()?.port())
}

/// Whether `port` can be bound on loopback now (nobody listens on it).
pub fn port_free(port: u16) -> bool {
    std::net::TcpListener::bind(("127.0.0.1", port)).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_dir_is_read_from_the_arguments() {
        let args: Vec<OsString> = ["vigil", "sandbox", "--data-dir", "/x/c-1/data", "--listen"]
            .into_iter()
            .map(OsString::from)
            .collect();
        assert_eq!(data_dir_of(&args), Some(PathBuf::from("/x/c-1/data")));
        assert_eq!(data_dir_of(&args[..2]), None);
    }

    #[test]
    fn this_process_is_not_a_sandbox() {
        assert!(!is_serving(std::process::id(), Path::new("/")));
        assert!(under(Path::new("/nonexistent-root")).is_empty());
    }
}
