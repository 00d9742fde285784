//! A SIGTERM that arrives the moment a command says it is ready — a supervisor, a test or a
//! `kill` that stops what it has just seen start — ends it gracefully, never through the signal's
//! default action. The handlers are installed before anything reports ready (the sandbox's ready
//! line, the demo's first line, `vigil run`'s Lease), so there is no window in between. Each
//! test repeats its round under CPU load (a busy thread per core), which is what widened that
//! window enough to hit in CI.

use crate::support;

use support::{Proc, client, holder, spawn_sandbox};

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

fn vigil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
}

/// A busy thread per core until dropped: the load under which the window showed.
struct CpuLoad(Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>);

impl CpuLoad {
    fn start() -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let threads = (0..cores)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut x = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        x = std::hint::black_box(
                            x.wrapping_mul(6364136223846793005).wrapping_add(1),
                        );
                    }
                })
            })
            .collect();
        Self(stop, threads)
    }
}

impl Drop for CpuLoad {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
        for thread in self.1.drain(..) {
            let _ = thread.join();
        }
    }
}

fn sigterm(child: &Child) {
    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(status.success(), "kill -TERM {}", child.id());
}

/// Waits for `child` to exit; kills it after `limit` (so a hang fails the test, not the run).
fn wait_at_most(child: &mut Child, limit: Duration) -> Option<ExitStatus> {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("vigil-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `vigil sandbox` stopped right after its ready line exits 0, having saved its data directory
/// (its last snapshot is written only by a graceful stop) and released it.
#[test]
fn the_sandbox_stops_cleanly_on_sigterm_right_after_its_ready_line() {
    const ROUNDS: usize = 50;
    let dir = scratch("sigterm-sandbox");
    let _load = CpuLoad::start();
    for round in 0..ROUNDS {
        let data_dir = dir.join(format!("data-{round}"));
        let mut child = vigil()
            .args(["sandbox", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(&data_dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn vigil sandbox");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("ready line");
        sigterm(&child);
        assert!(line.contains("sandbox ready"), "round {round}: {line:?}");
        let status = wait_at_most(&mut child, Duration::from_secs(30));
        let mut stderr = String::new();
        if let Some(mut err) = child.stderr.take() {
            let _ = std::io::Read::read_to_string(&mut err, &mut stderr);
        }
        assert!(
            status.is_some_and(|s| s.success()),
            "round {round}: vigil sandbox exits 0 on SIGTERM right after its ready line, got {status:?}\n{stderr}"
        );
        let state = std::fs::read_to_string(data_dir.join("state.json")).unwrap_or_default();
        assert!(
            state.contains("kube-system"),
            "round {round}: the graceful stop saved the state (state.json: {} bytes)",
            state.len()
        );
        assert!(
            !data_dir.join("state.json.tmp").exists(),
            "round {round}: no half-written snapshot left"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `vigil demo` stopped right after its first line exits 0 and leaves nothing behind.
#[test]
fn the_demo_stops_cleanly_on_sigterm_right_after_its_first_line() {
    const ROUNDS: usize = 10;
    let tmp = scratch("sigterm-demo");
    let _load = CpuLoad::start();
    for round in 0..ROUNDS {
        let kubeconfig = tmp.join("demo.kubeconfig");
        let cluster_kubeconfig = tmp.join("cluster.kubeconfig");
        let mut child = vigil()
            .args(["demo", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
            .arg(&kubeconfig)
            .arg("--cluster-kubeconfig-out")
            .arg(&cluster_kubeconfig)
            .env("TMPDIR", &tmp)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn vigil demo");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("first line");
        sigterm(&child);
        assert!(line.contains("sandbox ready"), "round {round}: {line:?}");
        let status = wait_at_most(&mut child, Duration::from_secs(60));
        assert!(
            status.is_some_and(|s| s.success()),
            "round {round}: vigil demo exits 0 on SIGTERM right after its first line, got {status:?}"
        );
        let clusters = tmp.join(format!("vigil-demo-clusters-{}", child.id()));
        assert!(
            !clusters.exists(),
            "round {round}: {} left",
            clusters.display()
        );
        assert!(
            !cluster_kubeconfig.exists(),
            "round {round}: the cluster's kubeconfig left"
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}

fn spawn_run(kubeconfig: &Path, name: &str) -> Proc {
    let child = vigil()
        .env("POD_NAME", name)
        .env("POD_NAMESPACE", "default")
        .args([
            "run",
            "--metrics-addr",
            "127.0.0.1:0",
            "--leader-elect",
            "true",
            "--controllers",
            "configmapsync",
            "--retry-period",
            "100ms",
            "--kubeconfig",
        ])
        .arg(kubeconfig)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil run");
    Proc(child)
}

/// `vigil run` stopped the moment it has taken the Lease — a pod deleted while it starts — exits
/// 0 and releases the Lease, so the next replica need not wait out the lease duration.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vigil_run_releases_the_lease_on_sigterm_right_after_taking_it() {
    const ROUNDS: usize = 10;
    let dir = scratch("sigterm-run");
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = spawn_sandbox(&kubeconfig);
    let client = client(&kubeconfig).await;
    let leases: Api<Lease> = Api::namespaced(client, "default");
    let _load = CpuLoad::start();
    for round in 0..ROUNDS {
        let mut run = spawn_run(&kubeconfig, &format!("sigterm-{round}"));
        let started = Instant::now();
        while !holder(&leases)
            .await
            .is_some_and(|h| h.starts_with(&format!("sigterm-{round}")))
        {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "round {round}: vigil run never took the Lease"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        sigterm(&run.0);
        let status = wait_at_most(&mut run.0, Duration::from_secs(40));
        assert!(
            status.is_some_and(|s| s.success()),
            "round {round}: vigil run exits 0 on SIGTERM right after taking the Lease, got {status:?}"
        );
        assert_eq!(
            holder(&leases).await,
            None,
            "round {round}: the Lease is released"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
