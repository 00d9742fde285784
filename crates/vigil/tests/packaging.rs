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

/// The dependency layer as the Dockerfile builds it, without Docker: its `COPY` lines before the
/// sources, then its stub crates (`src/lib.rs` everywhere, `src/main.rs` for `vigil`). Cargo
/// must load that workspace — every member's manifest there, every target path it names
/// resolvable — or the image build stops at its first `cargo build`.
#[test]
fn the_dockerfiles_stub_workspace_loads() {
    let dockerfile =
        std::fs::read_to_string(repo_root().join("Dockerfile")).expect("the Dockerfile");
    let layer = dockerfile
        .split("COPY crates ./crates")
        .next()
        .expect("text before the sources");
    let dir = std::env::temp_dir().join(format!("vigil-docker-stub-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for line in layer.lines().filter(|l| l.starts_with("COPY ")) {
        let words: Vec<&str> = line.split_whitespace().skip(1).collect();
        let Some((dest, sources)) = words.split_last() else {
            continue;
        };
        if sources.iter().any(|s| s.starts_with("--")) {
            continue;
        }
        // `./` is the build's working directory (create_dir_all refuses a path ending in `.`).
        let dest = dir.join(dest.trim_start_matches("./"));
        std::fs::create_dir_all(&dest).unwrap_or_else(|e| panic!("{}: {e}", dest.display()));
        for source in sources {
            let from = repo_root().join(source);
            if from.is_dir() {
                // `COPY dir ./dir` copies the directory's contents into the destination.
                copy_tree(&from, &dest);
            } else {
                let name = from.file_name().expect("a file name");
                std::fs::copy(&from, dest.join(name)).expect("copy as COPY does");
            }
        }
    }
    for entry in std::fs::read_dir(dir.join("crates"))
        .expect("crates copied")
        .flatten()
    {
        let src = entry.path().join("src");
        std::fs::create_dir_all(&src).expect("src");
        let stub = if entry.file_name() == "vigil" {
            "main.rs"
        } else {
            "lib.rs"
        };
        std::fs::write(src.join(stub), "").expect("stub");
    }
    let out = Command::new(env!("CARGO"))
        .args([
            "metadata",
            "--no-deps",
            "--offline",
            "--format-version",
            "1",
        ])
        .current_dir(&dir)
        .output()
        .expect("cargo metadata");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        out.status.success(),
        "the stub workspace does not load: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Copies the tree under `from` into `to`, as `COPY` does with a directory.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("destination");
    for entry in std::fs::read_dir(from).expect("a directory").flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy as COPY does");
        }
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
