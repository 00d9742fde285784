//! How Vigil is packaged: the Dockerfile builds dependencies in a layer of their own from every
//! crate's manifest, and `vigil --version` names the commit.

use std::path::Path;
use std::process::Command;

fn repo_root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// The dependency layer copies each workspace crate's Cargo.toml by name: a crate added later
/// must be added there too, or the stub build fails to resolve the workspace.
#[test]
fn the_dockerfile_copies_every_crates_manifest_before_the_sources() {
    let dockerfile =
        std::fs::read_to_string(repo_root().join("Dockerfile")).expect("the Dockerfile");
    let sources_at = dockerfile
        .find("COPY crates ./crates")
        .expect("the sources are copied");
    let crates = std::fs::read_dir(repo_root().join("crates")).expect("crates/");
    for entry in crates.flatten() {
        if !entry.path().join("Cargo.toml").exists() {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        let line = format!("COPY crates/{name}/Cargo.toml crates/{name}/");
        let at = dockerfile
            .find(&line)
            .unwrap_or_else(|| panic!("the Dockerfile lacks `{line}`"));
        assert!(at < sources_at, "{line} must come before the sources");
    }
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("--version")
        .output()
        .expect("vigil --version");
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.starts_with(concat!("vigil ", env!("CARGO_PKG_VERSION"), " (commit ")),
        "{text}"
    );
    // Built from a git checkout, it is the checkout's commit (HEAD may have moved since, so
    // only the form is checked: 12 hex digits, or "unknown" without git).
    let commit = text
        .trim()
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .trim_end_matches(')');
    assert!(
        commit == "unknown"
            || (commit.len() == 12 && commit.chars().all(|c| c.is_ascii_hexdigit())),
        "{text}"
    );
}
