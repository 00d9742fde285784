//! The `vigil sandbox` child most benchmarks run against, with the kubeconfig it writes for
//! the `vigil run` children and clients pointed at it.

use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use anyhow::Context as _;
use kube::Client;
use tokio::io::AsyncBufReadExt as _;

use super::temp::TempFile;

/// A `vigil sandbox` child process, killed on drop, then its kubeconfig removed.
pub(crate) struct Child {
    pub(crate) process: tokio::process::Child,
    pub(crate) url: String,
    /// Written by the sandbox (`--kubeconfig-out`) before its ready line.
    kubeconfig: TempFile,
}

impl Child {
    /// The kubeconfig naming this sandbox, for `vigil run` and other children.
    pub(crate) fn kubeconfig(&self) -> &Path {
        &self.kubeconfig.0
    }

    /// A client of the bench's own for this sandbox, with a connection pool of its own.
    pub(crate) fn client(&self) -> anyhow::Result<Client> {
        super::client::own_client(&self.url)
    }
}

/// Starts `vigil sandbox` on a free port with extra arguments and waits for its ready line.
pub(crate) async fn spawn_sandbox(extra: &[&str]) -> anyhow::Result<Child> {
    // Several sandboxes may run at once in one bench (and several benches at once).
    static STARTED: AtomicUsize = AtomicUsize::new(0);
    let kubeconfig = TempFile(std::env::temp_dir().join(format!(
        "vigil-bench-{}-{}.kubeconfig",
        std::process::id(),
        STARTED.fetch_add(1, Ordering::Relaxed)
    )));
    let exe = super::binary::vigil()?;
    let mut process = tokio::process::Command::new(exe)
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig.0)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .context("starting the sandbox")?;
    let stdout = process.stdout.take().context("sandbox stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let ready = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
        .await
        .context("the sandbox did not get ready in 10 s")??
        .context("the sandbox exited before getting ready")?;
    let url = ready
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .context("no URL in the ready line")?
        .to_owned();
    Ok(Child {
        process,
        url,
        kubeconfig,
    })
}
