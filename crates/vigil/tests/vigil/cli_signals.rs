//! The binary's manners as a command-line tool: a closed output pipe ends it quietly, and
//! `vigil demo` stopped with SIGTERM cleans up what it provisioned exactly as Ctrl-C does.

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn vigil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
}

/// `vigil manifests | head -1`: the reader goes away; Vigil stops writing without a panic.
/// The pipe's reading end is closed before Vigil starts, so its first write meets EPIPE
/// whatever the pipe's buffer holds (the manifests would fit in a Linux pipe's 64 KiB).
#[test]
fn a_closed_pipe_ends_manifests_quietly() {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = vigil()
        .arg("manifests")
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("run vigil manifests");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(stderr.is_empty(), "quietly: {stderr}");
}

/// Waits for `child` to exit; kills it after `limit` (so a hang fails the test, not the run).
fn wait_at_most(child: &mut std::process::Child, limit: Duration) -> std::process::ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            return child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Processes whose command line mentions `needle` (Linux's /proc).
fn processes_mentioning(needle: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|raw| String::from_utf8_lossy(&raw).replace('\0', " "))
        .filter(|cmd| cmd.contains(needle))
        .collect()
}

#[test]
fn demo_stopped_with_sigterm_deletes_its_cluster() {
    if !Path::new("/proc/self/cmdline").exists() {
        eprintln!("skipped: needs /proc to find the demo's cluster processes");
        return;
    }
    // The demo keeps its clusters under the temporary directory: give it one of its own.
    let tmp = std::env::temp_dir().join(format!("vigil-demo-term-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let cluster_kubeconfig = tmp.join("cluster.kubeconfig");
    let mut child = vigil()
        .args(["demo", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(tmp.join("demo.kubeconfig"))
        .arg("--cluster-kubeconfig-out")
        .arg(&cluster_kubeconfig)
        .env("TMPDIR", &tmp)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil demo");
    let stdout = child.stdout.take().expect("stdout");
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut transcript = String::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            transcript.push_str(&line);
            transcript.push('\n');
            if line.starts_with("explore:") {
                let _ = ready_tx.send(());
            }
        }
        transcript
    });
    let ready = ready_rx.recv_timeout(Duration::from_secs(180));
    let data_dir = tmp.join(format!("vigil-demo-clusters-{}", child.id()));
    let tmp_text = tmp.to_string_lossy().into_owned();
    let running_clusters = processes_mentioning(&tmp_text)
        .into_iter()
        .filter(|cmd| cmd.contains(" sandbox "))
        .count();
    let kill = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(kill.success());
    let status = wait_at_most(&mut child, Duration::from_secs(90));
    let transcript = reader.join().unwrap_or_default();
    assert!(ready.is_ok(), "the demo never got ready:\n{transcript}");
    assert!(
        running_clusters >= 1,
        "the demo's cluster ran (a `vigil sandbox` under {tmp_text})"
    );
    assert!(status.success(), "{status:?}\n{transcript}");
    assert!(
        transcript.contains("KubernetesCluster deleted"),
        "deleted through Vigil, as on Ctrl-C:\n{transcript}"
    );
    let left: Vec<String> = processes_mentioning(&tmp_text)
        .into_iter()
        .filter(|cmd| cmd.contains(" sandbox "))
        .collect();
    assert!(left.is_empty(), "cluster processes left: {left:?}");
    assert!(!data_dir.exists(), "{} left", data_dir.display());
    assert!(
        !cluster_kubeconfig.exists(),
        "the cluster's kubeconfig left"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// Runs `vigil ARGS` with its standard output already closed, under TMPDIR=`tmp`; returns its
/// exit status and standard error. Gives up (and kills it) after `limit`.
fn run_with_closed_stdout(
    args: &[&str],
    tmp: &Path,
    limit: Duration,
) -> (std::process::ExitStatus, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let mut child = vigil()
        .args(args)
        .env("TMPDIR", tmp)
        .stdout(writer)
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn vigil");
    let stderr = child.stderr.take().expect("stderr");
    let collect = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut text);
        text
    });
    let status = wait_at_most(&mut child, limit);
    (status, collect.join().unwrap_or_default())
}

/// `vigil sandbox | head -0`: the ready line meets a closed pipe, and the sandbox stops as on
/// SIGTERM — quietly, successfully, its temporary data directory removed.
#[test]
fn a_closed_pipe_stops_the_sandbox_as_sigterm_does() {
    let tmp = std::env::temp_dir().join(format!("vigil-sandbox-epipe-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let (status, stderr) = run_with_closed_stdout(
        &["sandbox", "--listen", "127.0.0.1:0"],
        &tmp,
        Duration::from_secs(60),
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{status:?}: {stderr}");
    let left: Vec<_> = std::fs::read_dir(&tmp)
        .expect("read temp dir")
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        left.is_empty(),
        "the sandbox left {left:?} in {}",
        tmp.display()
    );
    let _ = std::fs::remove_dir_all(&tmp);
}

/// `vigil demo | head -1`: the reader is gone before the demo's first line. The demo still
/// provisions, then deletes what it provisioned exactly as on SIGTERM, and ends quietly.
#[test]
fn a_closed_pipe_ends_the_demo_after_it_cleaned_up() {
    if !Path::new("/proc/self/cmdline").exists() {
        eprintln!("skipped: needs /proc to find the demo's cluster processes");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("vigil-demo-epipe-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).expect("temp dir");
    let kubeconfig = tmp.join("demo.kubeconfig");
    let cluster_kubeconfig = tmp.join("cluster.kubeconfig");
    let (status, stderr) = run_with_closed_stdout(
        &[
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--kubeconfig-out",
            &kubeconfig.to_string_lossy(),
            "--cluster-kubeconfig-out",
            &cluster_kubeconfig.to_string_lossy(),
        ],
        &tmp,
        Duration::from_secs(180),
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(status.success(), "{status:?}: {stderr}");
    let tmp_text = tmp.to_string_lossy().into_owned();
    let left: Vec<String> = processes_mentioning(&tmp_text)
        .into_iter()
        .filter(|cmd| cmd.contains(" sandbox "))
        .collect();
    assert!(left.is_empty(), "cluster processes left: {left:?}");
    let clusters: Vec<_> = std::fs::read_dir(&tmp)
        .expect("read temp dir")
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("vigil-demo-clusters-")
        })
        .map(|e| e.path())
        .collect();
    assert!(clusters.is_empty(), "left: {clusters:?}");
    assert!(
        !cluster_kubeconfig.exists(),
        "the cluster's kubeconfig left"
    );
    let _ = std::fs::remove_dir_all(&tmp);
}
