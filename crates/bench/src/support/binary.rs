//! Where the `vigil` binary the benchmarks drive is: `$VIGIL_BIN`, else beside this binary
//! (`cargo build --release -p vigil -p vigil-bench` puts both in `target/release`).

use std::path::PathBuf;

use anyhow::Context as _;

/// The `vigil` binary to run as `vigil sandbox`, `vigil run` or `vigil status`.
pub(crate) fn vigil() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("VIGIL_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe().context("locating vigil-bench")?;
    let beside = me.with_file_name(format!("vigil{}", std::env::consts::EXE_SUFFIX));
    anyhow::ensure!(
        beside.is_file(),
        "no vigil binary at {}: build it next to vigil-bench (cargo build --release -p vigil -p vigil-bench) or set VIGIL_BIN",
        beside.display()
    );
    Ok(beside)
}
