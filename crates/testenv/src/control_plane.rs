//! Faults of the control plane that a real cluster lives through — an API server killed or
//! stopped for an upgrade, etcd frozen or restarted — played on the environment's cluster:
//! through `../shared/kube/fault.sh` on a cluster started by `up.sh` or `node-up.sh`, or with the
//! sandbox's own powers where it has an equivalent.
//!
//! A real cluster's faults need to know where it runs: `VIGIL_TEST_KUBE_WORKDIR` (the WORKDIR
//! given to `up.sh`) and, if not `../shared/kube` beside the workspace, `VIGIL_KUBE_DIR` (CI's
//! stage 2 sets both). Without them, [`TestEnv::can_inject`] says no and the test skips.

use std::path::PathBuf;
use std::time::Duration;

use crate::TestEnv;

/// The WORKDIR of the `up.sh` cluster that `VIGIL_TEST_KUBECONFIG` points at.
pub const KUBE_WORKDIR_ENV: &str = "VIGIL_TEST_KUBE_WORKDIR";
/// Where `up.sh` and `fault.sh` are (default: `../shared/kube` beside the workspace).
pub const KUBE_DIR_ENV: &str = "VIGIL_KUBE_DIR";

/// A fault of the control plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlPlaneFault {
    /// kube-apiserver killed (SIGKILL), then started again with the same flags.
    ApiServerKilled,
    /// kube-apiserver stopped gracefully (SIGTERM, as a rolling control-plane upgrade does),
    /// then started again.
    ApiServerStopped,
    /// etcd frozen (SIGSTOP, then SIGCONT): the API server stays up, its requests hang.
    EtcdFrozen,
    /// etcd killed and started again.
    EtcdRestarted,
}

impl ControlPlaneFault {
    /// Every fault, in the order a test plays them.
    pub const ALL: [Self; 4] = [
        Self::ApiServerKilled,
        Self::ApiServerStopped,
        Self::EtcdFrozen,
        Self::EtcdRestarted,
    ];

    /// What the fault is, for a test's report.
    pub fn describe(self) -> &'static str {
        match self {
            Self::ApiServerKilled => "kube-apiserver killed (SIGKILL)",
            Self::ApiServerStopped => "kube-apiserver stopped gracefully (SIGTERM)",
            Self::EtcdFrozen => "etcd frozen (SIGSTOP)",
            Self::EtcdRestarted => "etcd killed and restarted",
        }
    }

    /// `fault.sh`'s arguments after WORKDIR for this fault, down for `down`.
    fn script_args(self, down: Duration) -> Vec<String> {
        let secs = down.as_secs().max(1).to_string();
        let args: &[&str] = match self {
            Self::ApiServerKilled => &["restart", "kube-apiserver", &secs],
            Self::ApiServerStopped => &["restart", "kube-apiserver", &secs, "--term"],
            Self::EtcdFrozen => &["pause", "etcd", &secs],
            Self::EtcdRestarted => &["restart", "etcd", &secs],
        };
        args.iter().map(|a| (*a).to_owned()).collect()
    }
}

/// Where `fault.sh` runs, for a real cluster.
fn real_cluster() -> Option<(PathBuf, PathBuf)> {
    let workdir = std::env::var_os(KUBE_WORKDIR_ENV).filter(|v| !v.is_empty())?;
    let kube_dir = std::env::var_os(KUBE_DIR_ENV)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/kube"));
    let script = kube_dir.join("fault.sh");
    script.is_file().then(|| (PathBuf::from(workdir), script))
}

impl TestEnv {
    /// Whether [`TestEnv::inject`] can play `fault` here: on a real cluster when `fault.sh`
    /// and the cluster's WORKDIR are known; on the sandbox for the API server's faults (it has
    /// no etcd; a frozen store is what its latency fault plays, see `vigil_sandbox::Fault`).
    pub fn can_inject(&self, fault: ControlPlaneFault) -> bool {
        match self.sandbox() {
            Some(_) => matches!(
                fault,
                ControlPlaneFault::ApiServerKilled | ControlPlaneFault::ApiServerStopped
            ),
            None => real_cluster().is_some(),
        }
    }

    /// Plays `fault`, the component down (or frozen) for `down`, and returns once the API
    /// server's `/readyz` is `ok` again. On the sandbox, a restart goes through the start-up a
    /// restarted kube-apiserver does (see `vigil_sandbox::startup`).
    pub async fn inject(&self, fault: ControlPlaneFault, down: Duration) -> Result<(), String> {
        if !self.can_inject(fault) {
            return Err(format!(
                "{} cannot be played here (a real cluster needs {KUBE_WORKDIR_ENV})",
                fault.describe()
            ));
        }
        match self.sandbox() {
            Some(sandbox) => {
                sandbox.stop_serving().await;
                tokio::time::sleep(down).await;
                sandbox
                    .resume_serving()
                    .await
                    .map_err(|e| format!("the sandbox did not serve again: {e}"))?;
            }
            None => {
                let Some((workdir, script)) = real_cluster() else {
                    return Err(format!("{KUBE_WORKDIR_ENV} is not set"));
                };
                let out = tokio::process::Command::new(&script)
                    .arg(&workdir)
                    .args(fault.script_args(down))
                    .output()
                    .await
                    .map_err(|e| format!("running {}: {e}", script.display()))?;
                if !out.status.success() {
                    return Err(format!(
                        "{} failed ({}): {}",
                        script.display(),
                        out.status,
                        String::from_utf8_lossy(&out.stderr)
                    ));
                }
            }
        }
        self.wait_ready(Duration::from_secs(120)).await
    }

    /// Waits until the API server's `/readyz` answers `ok`.
    async fn wait_ready(&self, within: Duration) -> Result<(), String> {
        let client = self.client();
        crate::wait_for("/readyz to be ok", within, || {
            let client = client.clone();
            async move {
                let request = http::Request::get("/readyz")
                    .body(Vec::new())
                    .map_err(|e| e.to_string())?;
                Ok::<_, String>(
                    client
                        .request_text(request)
                        .await
                        .ok()
                        .filter(|body| body.trim() == "ok")
                        .map(|_| ()),
                )
            }
        })
        .await
        .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_fault_is_one_call_of_fault_sh() {
        let eight = Duration::from_secs(8);
        assert_eq!(
            ControlPlaneFault::ApiServerStopped.script_args(eight),
            ["restart", "kube-apiserver", "8", "--term"]
        );
        assert_eq!(
            ControlPlaneFault::EtcdFrozen.script_args(eight),
            ["pause", "etcd", "8"]
        );
    }
}
