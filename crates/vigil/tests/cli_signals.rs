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
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            break child.wait().expect("wait");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
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
