//! The `vigil` binary as a user runs it: `vigil sandbox` serves, writes a kubeconfig, enforces its
//! token and stops cleanly on SIGTERM; subcommands that are not built yet fail loudly.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::Duration;

fn vigil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
}

/// Sends a bare HTTP/1.1 GET and returns the status line.
fn get_status_line(addr: &str, path: &str, token: Option<&str>) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the sandbox");
    stream
        .set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let auth = token
        .map(|t| format!("Authorization: Bearer {t}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{auth}Connection: close\r\n\r\n"
    )
    .expect("send");
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response);
    response.lines().next().unwrap_or("").to_owned()
}

#[test]
fn sandbox_serves_writes_kubeconfig_and_stops_on_sigterm() {
    let dir = std::env::temp_dir().join(format!("vigil-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let mut child = vigil()
        .args([
            "sandbox",
            "--listen",
            "127.0.0.1:0",
            "--token",
            "s3cret",
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil sandbox");
    let stdout = child.stdout.take().expect("stdout");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("ready line");
    assert!(
        line.contains("sandbox ready"),
        "unexpected first line: {line:?}"
    );
    let url = line
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("url in the ready line");
    let addr = url.trim_start_matches("http://");

    let written = std::fs::read_to_string(&kubeconfig).expect("kubeconfig written");
    assert!(
        written.contains(url),
        "kubeconfig names the server: {written}"
    );
    assert!(written.contains("s3cret"), "kubeconfig carries the token");

    assert!(
        get_status_line(addr, "/api", None).contains(" 401 "),
        "no token → 401"
    );
    assert!(
        get_status_line(addr, "/api", Some("wrong")).contains(" 401 "),
        "wrong token → 401"
    );
    assert!(
        get_status_line(addr, "/api", Some("s3cret")).contains(" 200 "),
        "token → 200"
    );

    let pid = child.id().to_string();
    let killed = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(killed.success());
    let status = child.wait().expect("wait");
    assert!(
        status.success(),
        "vigil sandbox exits 0 on SIGTERM, got {status}"
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn sandbox_refuses_non_loopback_addresses() {
    let out = vigil()
        .args(["sandbox", "--listen", "0.0.0.0:0"])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("loopback"));
}

#[test]
fn manifests_print_installable_yaml() {
    let out = vigil()
        .args(["manifests", "--namespace", "vigil-cli-test"])
        .output()
        .expect("run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8");
    let kinds: Vec<String> = text
        .split("---\n")
        .filter(|doc| !doc.trim().is_empty())
        .map(|doc| serde_saphyr::from_str::<serde_json::Value>(doc).expect("each document is YAML"))
        .map(|v| v["kind"].as_str().unwrap_or_default().to_owned())
        .collect();
    for kind in [
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "PodTemplate",
        "Deployment",
    ] {
        assert!(kinds.iter().any(|k| k == kind), "{kind} in {kinds:?}");
    }

    // They apply to an API server as they are (when kubectl is there to apply them).
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("skipped the apply step: kubectl not found");
        return;
    }
    let dir = std::env::temp_dir().join(format!("vigil-manifests-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (kubeconfig, manifests) = (dir.join("kubeconfig"), dir.join("vigil.yaml"));
    std::fs::write(&manifests, &text).expect("write manifests");
    let mut sandbox = vigil()
        .args([
            "sandbox",
            "--listen",
            "127.0.0.1:0",
            "--no-kubelet",
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sandbox");
    let mut line = String::new();
    BufReader::new(sandbox.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let applied = Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(["apply", "--server-side", "-f"])
        .arg(&manifests)
        .output()
        .expect("kubectl");
    let _ = sandbox.kill();
    let _ = sandbox.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        applied.status.success(),
        "kubectl apply: {}",
        String::from_utf8_lossy(&applied.stderr)
    );
}

#[test]
fn run_without_a_cluster_fails_clearly() {
    let out = vigil()
        .args([
            "run",
            "--kubeconfig",
            "/nonexistent/kubeconfig",
            "--metrics-addr",
            "127.0.0.1:0",
        ])
        .output()
        .expect("run");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("/nonexistent/kubeconfig"),
        "names the missing file"
    );
    let out = vigil()
        .args(["run", "--controllers", "nope"])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown controller"));
}

#[test]
fn demo_plays_the_articles_scenario() {
    let kubeconfig =
        std::env::temp_dir().join(format!("vigil-demo-{}.kubeconfig", std::process::id()));
    let cluster_kubeconfig = std::env::temp_dir().join(format!(
        "vigil-demo-cluster-{}.kubeconfig",
        std::process::id()
    ));
    let out = vigil()
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--exit",
            "--kubeconfig-out",
        ])
        .arg(&kubeconfig)
        .arg("--cluster-kubeconfig-out")
        .arg(&cluster_kubeconfig)
        .output()
        .expect("run");
    let _ = std::fs::remove_file(&kubeconfig);
    assert!(
        !cluster_kubeconfig.exists(),
        "the demo removes what it wrote"
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for step in [
        "sandbox ready",
        "started pod service-watcher-frontend",
        "retired its fallback pod",
        "started service-watcher-frontend again",
        "KubernetesCluster my-custom-cluster-for-backup applied",
        "Ready: API server at http",
        "masterVersion 1.28.0",
        "AddonsReady: addons available in the cluster: cluster-autoscaler 1.2.2, vpc-block-csi-driver 5.2",
        "the new cluster reports v1.28.0",
        "its API server stopped and its data removed first",
    ] {
        assert!(text.contains(step), "missing step {step:?} in:\n{text}");
    }
    // The happy path waits (a cluster's API server starting) but fails nothing: no line asks
    // the user to act.
    let log = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert!(errors.is_empty(), "the happy path logs errors: {errors:#?}");
}
