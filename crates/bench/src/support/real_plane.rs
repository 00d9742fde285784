//! The real control plane of `../shared/kube` for benchmarks that run a scenario on the sandbox
//! and beside it on upstream kube-apiserver and kube-controller-manager v1.28: started by its
//! `up.sh` on ports of the bench's own, stopped by its `down.sh`, and the processes it runs (for
//! their memory).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// A control plane started by `up.sh` on ports of its own; stopped by `down`.
pub struct RealControlPlane {
    kube_dir: PathBuf,
    work: PathBuf,
    pub kubeconfig: PathBuf,
}

impl RealControlPlane {
    /// Starts it with the API server on `port`; etcd on `port - 4064` (peer `- 4063`), the
    /// controller manager on `port + 14`.
    pub async fn up(kube_dir: &Path, work: &Path, port: u16) -> anyhow::Result<Self> {
        let up = kube_dir.join("up.sh");
        anyhow::ensure!(
            up.exists(),
            "no real control plane at {} (--kube-dir)",
            kube_dir.display()
        );
        let offset = |delta: i32| (i32::from(port) + delta).to_string();
        let status = tokio::process::Command::new(&up)
            .arg(work)
            .env("KUBE_APISERVER_PORT", port.to_string())
            .env("KUBE_ETCD_PORT", offset(-4064))
            .env("KUBE_ETCD_PEER_PORT", offset(-4063))
            .env("KUBE_KCM_PORT", offset(14))
            .stdout(std::process::Stdio::null())
            .status()
            .await
            .with_context(|| format!("running {}", up.display()))?;
        let plane = Self {
            kube_dir: kube_dir.to_owned(),
            work: work.to_owned(),
            kubeconfig: work.join("kubeconfig"),
        };
        if !status.success() {
            plane.down().await;
            anyhow::bail!("{} failed: {status}", up.display());
        }
        Ok(plane)
    }

    /// The pid `up.sh` recorded for one of its processes (`etcd`, `kube-apiserver`,
    /// `kube-controller-manager`).
    pub fn pid(&self, process: &str) -> Option<u32> {
        std::fs::read_to_string(self.work.join("run").join(format!("{process}.pid")))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    pub async fn down(self) {
        let _ = tokio::process::Command::new(self.kube_dir.join("down.sh"))
            .arg(&self.work)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .await;
    }
}

pub async fn client_from(path: &Path) -> anyhow::Result<Client> {
    Ok(Client::try_from(config_from(path).await?)?)
}

pub async fn config_from(path: &Path) -> anyhow::Result<Config> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("reading kubeconfig {}", path.display()))?;
    Ok(Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?)
}

pub fn tempdir(prefix: &str) -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("{prefix}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}
