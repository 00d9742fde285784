//! What the process-level tests share: a child process killed when dropped, a `vigil sandbox`
//! child, and a client for its kubeconfig.

// Each test binary compiles this module and uses a different part of it.
#![allow(dead_code)]

use std::io::{BufRead as _, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// A child process killed (SIGKILL) when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `vigil sandbox` on a free port, its kubeconfig written to `kubeconfig`; returns once it serves.
pub fn spawn_sandbox(kubeconfig: &Path) -> Proc {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sandbox");
    let mut line = String::new();
    BufReader::new(child.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert!(line.contains("sandbox ready"), "{line}");
    Proc(child)
}

/// A client for the kubeconfig file at `kubeconfig`.
pub async fn client(kubeconfig: &Path) -> kube::Client {
    let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
    let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
        .await
        .expect("config");
    kube::Client::try_from(config).expect("client")
}

/// A client program for the tests that drive real clients (kubectl, helm): the path in the
/// environment variable `env_var` (CI installs them there), else `name` on PATH; None when neither.
pub fn client_program(env_var: &str, name: &str) -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os(env_var).filter(|p| !p.is_empty()) {
        let path = std::path::PathBuf::from(path);
        return path.is_file().then_some(path);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}
