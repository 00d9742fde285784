//! The `vigil sandbox` child most benchmarks run against.

use std::process::Stdio;
use std::time::Duration;

use anyhow::Context as _;
use tokio::io::AsyncBufReadExt as _;

/// A `vigil sandbox` child process, killed on drop.
pub(crate) struct Child {
    pub(crate) process: tokio::process::Child,
    pub(crate) url: String,
}

/// Starts `vigil sandbox` on a free port with extra arguments and waits for its ready line.
pub(crate) async fn spawn_sandbox(extra: &[&str]) -> anyhow::Result<Child> {
    let exe = super::binary::vigil()?;
    let mut process = tokio::process::Command::new(exe)
        .args(["sandbox", "--listen", "127.0.0.1:0"])
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
    Ok(Child { process, url })
}
