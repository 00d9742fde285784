//! How Vigil is packaged: the Dockerfile builds dependencies in a layer of their own from every
//! crate's manifest, `vigil --version` names the commit, and the binary's relative relocations
//! are packed where glibc can read them.

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

/// `build.rs` links `vigil` with `-z pack-relative-relocs` on glibc 2.36 or later: the dynamic
/// section then has a RELR table and next to no RELA entries (1.4 MB of them without it).
#[test]
fn the_binary_packs_its_relative_relocations_on_glibc_2_36_or_later() {
    let glibc = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let minor = glibc
        .strip_prefix("glibc 2.")
        .and_then(|v| v.split('.').next()?.parse::<u32>().ok());
    if !cfg!(all(target_os = "linux", target_env = "gnu"))
        || minor.is_none_or(|m| m < 36)
        || std::env::var("VIGIL_RELR").as_deref() == Ok("0")
    {
        eprintln!("skipped: not a glibc 2.36+ build ({glibc:?}), so no DT_RELR is expected");
        return;
    }
    let Ok(out) = Command::new("readelf")
        .args(["-d", env!("CARGO_BIN_EXE_vigil")])
        .output()
    else {
        eprintln!("skipped: no readelf (binutils) to read the binary's dynamic section");
        return;
    };
    let dynamic = String::from_utf8_lossy(&out.stdout);
    assert!(
        dynamic.lines().any(|l| l.contains("(RELR)")),
        "no RELR table in vigil's dynamic section:\n{dynamic}"
    );
    let rela_bytes = dynamic
        .lines()
        .find(|l| l.contains("(RELASZ)"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse::<u64>().ok())
        .unwrap_or(0);
    assert!(
        rela_bytes < 64 * 1024,
        "{rela_bytes} bytes of RELA relocations left: the relative ones were not packed"
    );
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

/// What the Dockerfile's final stage declares: its base, the user, the exposed ports, the
/// entrypoint and command, and where the binary is copied.
struct FinalStage {
    base: String,
    user: String,
    expose: Vec<String>,
    entrypoint: serde_json::Value,
    cmd: serde_json::Value,
    binary_path: String,
}

fn final_stage(dockerfile: &str) -> FinalStage {
    let stage = dockerfile.rsplit("\nFROM ").next().expect("a final FROM");
    let mut lines = stage.lines();
    let base = lines.next().expect("the base").trim().to_owned();
    let mut user = None;
    let mut expose = Vec::new();
    let mut entrypoint = None;
    let mut cmd = None;
    let mut binary_path = None;
    for line in lines.map(str::trim).filter(|l| !l.starts_with('#')) {
        let (instruction, rest) = line.split_once(' ').unwrap_or((line, ""));
        match instruction {
            "USER" => user = Some(rest.trim().to_owned()),
            "EXPOSE" => expose.extend(rest.split_whitespace().map(str::to_owned)),
            "ENTRYPOINT" => entrypoint = Some(serde_json::from_str(rest).expect("exec form")),
            "CMD" => cmd = Some(serde_json::from_str(rest).expect("exec form")),
            "COPY" => {
                let dest = rest.split_whitespace().last().expect("a destination");
                assert!(
                    binary_path.replace(dest.to_owned()).is_none(),
                    "the final stage copies one file, the binary"
                );
            }
            "" => {}
            other => panic!("{other}: an instruction the image test does not know; teach it"),
        }
    }
    FinalStage {
        base,
        user: user.expect("USER"),
        expose,
        entrypoint: entrypoint.expect("ENTRYPOINT"),
        cmd: cmd.expect("CMD"),
        binary_path: binary_path.expect("COPY of the binary"),
    }
}

/// Every regular file and symlink under `root`, as image paths (`/etc/passwd`).
fn files_under(root: &Path, dir: &Path, out: &mut std::collections::BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("read the layer").flatten() {
        let path = entry.path();
        let kind = entry.file_type().expect("file type");
        if kind.is_dir() {
            files_under(root, &path, out);
        } else {
            let relative = path.strip_prefix(root).expect("under the root");
            out.insert(format!("/{}", relative.display()));
        }
    }
}

fn run_ok(command: &mut Command) -> String {
    let out = command.output().expect("the command runs");
    assert!(
        out.status.success(),
        "{command:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `.ci/image` (the daemonless build CI loads into the real node) makes the image the
/// Dockerfile's final stage describes: the same user, entrypoint, command and exposed port, the
/// binary where the Dockerfile copies it, and of the distroless base only what the binary uses —
/// its loader and libraries, the CA bundle, the nonroot account — nothing else. Built here from
/// this test's own binary; skipped with a note without `../shared/kube/images/mkimage.py`.
#[test]
fn the_image_is_what_the_dockerfiles_final_stage_builds() {
    let kube_dir = std::env::var_os("VIGIL_KUBE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join("../shared/kube"));
    if !kube_dir.join("images/mkimage.py").is_file() {
        eprintln!(
            "skipped: no {}/images/mkimage.py (set VIGIL_KUBE_DIR)",
            kube_dir.display()
        );
        return;
    }
    let dockerfile =
        std::fs::read_to_string(repo_root().join("Dockerfile")).expect("the Dockerfile");
    let stage = final_stage(&dockerfile);
    // .ci/image stands in for this base: a change of base must be mirrored there.
    assert_eq!(stage.base, "gcr.io/distroless/cc-debian12:nonroot");

    let dir = std::env::temp_dir().join(format!("vigil-image-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("oci")).expect("temp dir");
    let binary = env!("CARGO_BIN_EXE_vigil");
    let archive = dir.join("vigil.tar");
    let exports = run_ok(
        Command::new(repo_root().join(".ci/image"))
            .arg(&archive)
            .args([
                "--binary",
                binary,
                "--name",
                "localhost/vigil:packaging-test",
            ])
            .env("VIGIL_KUBE_DIR", &kube_dir),
    );
    assert!(
        exports.contains("VIGIL_TEST_IMAGE='localhost/vigil:packaging-test'"),
        "{exports}"
    );
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(&archive)
            .arg("-C")
            .arg(dir.join("oci")),
    );
    let blob = |digest: &serde_json::Value| -> Vec<u8> {
        let digest = digest.as_str().expect("a digest");
        let hex = digest.strip_prefix("sha256:").expect("sha256");
        std::fs::read(dir.join("oci/blobs/sha256").join(hex)).expect("the blob is in the archive")
    };
    let json =
        |bytes: Vec<u8>| -> serde_json::Value { serde_json::from_slice(&bytes).expect("JSON") };
    let index = json(std::fs::read(dir.join("oci/index.json")).expect("index.json"));
    let entry = &index["manifests"][0];
    assert_eq!(
        entry["annotations"]["io.containerd.image.name"], "localhost/vigil:packaging-test",
        "the name node-load-image.sh keeps"
    );
    let manifest = json(blob(&entry["digest"]));
    let config = json(blob(&manifest["config"]["digest"]));
    let layers = manifest["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "{manifest}");

    // The configuration: what the Dockerfile's final stage says.
    let c = &config["config"];
    assert_eq!(c["User"], stage.user.as_str(), "USER");
    assert_eq!(c["Entrypoint"], stage.entrypoint, "ENTRYPOINT");
    assert_eq!(c["Cmd"], stage.cmd, "CMD");
    let exposed: Vec<String> = c["ExposedPorts"]
        .as_object()
        .map(|ports| ports.keys().cloned().collect())
        .unwrap_or_default();
    let wanted: Vec<String> = stage.expose.iter().map(|p| format!("{p}/tcp")).collect();
    assert_eq!(exposed, wanted, "EXPOSE");
    assert_eq!(config["os"], "linux");

    // The files: the binary where COPY puts it, and what it needs of the base.
    let rootfs = dir.join("rootfs");
    std::fs::create_dir_all(&rootfs).expect("rootfs");
    std::fs::write(dir.join("layer.tar"), blob(&layers[0]["digest"])).expect("layer");
    run_ok(
        Command::new("tar")
            .arg("-xf")
            .arg(dir.join("layer.tar"))
            .arg("-C")
            .arg(&rootfs),
    );
    let mut files = std::collections::BTreeSet::new();
    files_under(&rootfs, &rootfs, &mut files);
    let mut expected: std::collections::BTreeSet<String> = [
        stage.binary_path.as_str(),
        "/etc/ssl/certs/ca-certificates.crt",
        "/etc/passwd",
        "/etc/group",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect();
    // The loader and the shared libraries the binary needs (glibc, libgcc_s: distroless/cc's).
    let ldd = run_ok(Command::new("ldd").arg(binary).env("LC_ALL", "C"));
    for line in ldd.lines() {
        let path = line
            .split_whitespace()
            .find(|word| word.starts_with('/'))
            .map(str::to_owned);
        expected.extend(path);
    }
    assert_eq!(files, expected, "the image holds exactly these files");
    assert_eq!(
        stage.entrypoint[0].as_str(),
        Some(stage.binary_path.as_str()),
        "the entrypoint is the binary"
    );
    let inside = |path: &str| rootfs.join(path.trim_start_matches('/'));
    assert_eq!(
        std::fs::read(inside(&stage.binary_path)).expect("the binary"),
        std::fs::read(binary).expect("the built binary"),
        "the binary is the one given"
    );
    use std::os::unix::fs::PermissionsExt as _;
    let mode = std::fs::metadata(inside(&stage.binary_path))
        .expect("the binary")
        .permissions()
        .mode();
    assert_eq!(mode & 0o555, 0o555, "anyone may run the binary: {mode:o}");
    assert!(
        std::fs::read_to_string(inside("/etc/passwd"))
            .expect("passwd")
            .contains("nonroot:x:65532:65532:"),
        "uid 65532 is distroless's nonroot"
    );
    assert!(
        std::fs::read_to_string(inside("/etc/group"))
            .expect("group")
            .contains("nonroot:x:65532:"),
    );
    let bundle = std::fs::read_to_string(inside("/etc/ssl/certs/ca-certificates.crt"))
        .expect("the CA bundle");
    assert!(
        bundle.matches("BEGIN CERTIFICATE").count() > 100,
        "a CA bundle"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
