//! Two things about the `vigil` binary itself:
//! - stamps the commit it was built from into `vigil --version`: `VIGIL_GIT_COMMIT` when set (a
//!   Docker build, which has no `.git`), else `git rev-parse`, else "unknown" — a source tarball
//!   or a machine without git still builds;
//! - packs its relative relocations (`-z pack-relative-relocs`, DT_RELR) where the C library
//!   it will run on can read them (see [`pack_relative_relocations`]).

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// A position-independent Rust binary carries one 24-byte RELA entry per pointer in its
/// read-only data (vtables, string tables): 59,000 of them, 1.4 MB, which the loader reads at
/// every start and which then stay resident for the life of the process. DT_RELR packs them into
/// bitmaps (16 KB here): the binary is 1.4 MB smaller and `vigil run` about 1 MB lighter (see
/// `vigil-bench critical-service-scale`'s peak RSS). glibc reads DT_RELR from 2.36 (Debian 12,
/// the image's distroless/cc base; Fedora builds its packages this way): the linker then adds a
/// `GLIBC_ABI_DT_RELR` version need, so an older glibc refuses the binary at load with a clear
/// message instead of misrunning it. Hence: only for a native gnu/Linux build on glibc 2.36 or
/// later (a cross build cannot know its target's glibc); `VIGIL_RELR=0` turns it off, for a binary
/// to be copied to older systems.
fn pack_relative_relocations() {
    println!("cargo:rerun-if-env-changed=VIGIL_RELR");
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    let gnu_linux = var("CARGO_CFG_TARGET_OS") == "linux" && var("CARGO_CFG_TARGET_ENV") == "gnu";
    let native = var("TARGET") == var("HOST");
    if !gnu_linux || !native || var("VIGIL_RELR") == "0" {
        return;
    }
    let glibc = Command::new("getconf")
        .arg("GNU_LIBC_VERSION")
        .output()
        .ok()
        .and_then(|out| String::from_utf8(out.stdout).ok())
        .and_then(|text| glibc_version(&text));
    if glibc.is_some_and(|version| version >= (2, 36)) {
        println!("cargo:rustc-link-arg-bins=-Wl,-z,pack-relative-relocs");
    }
}

/// `getconf GNU_LIBC_VERSION`'s answer, e.g. "glibc 2.36", as (major, minor).
fn glibc_version(text: &str) -> Option<(u32, u32)> {
    let version = text.trim().strip_prefix("glibc ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

fn main() {
    pack_relative_relocations();
    println!("cargo:rerun-if-env-changed=VIGIL_GIT_COMMIT");
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let dir = Path::new(&dir);
    let from_env = std::env::var("VIGIL_GIT_COMMIT")
        .ok()
        .map(|c| c.trim().to_owned())
        .filter(|c| !c.is_empty());
    let commit = from_env.or_else(|| {
        let commit = git(dir, &["rev-parse", "--short=12", "HEAD"])?;
        // Rebuild the stamp when HEAD moves: HEAD itself (a checkout) and the branch's ref (a
        // commit), not every branch's. In a worktree HEAD lives in its own git dir, refs in
        // the common one.
        let branch = git(dir, &["rev-parse", "--symbolic-full-name", "HEAD"])
            .filter(|r| r.starts_with("refs/"));
        let mut watched = vec![("--git-dir", "HEAD".to_owned())];
        watched.push(("--git-common-dir", "packed-refs".to_owned()));
        if let Some(branch) = branch {
            watched.push(("--git-common-dir", branch));
        }
        for (flag, file) in watched {
            if let Some(git_dir) = git(dir, &["rev-parse", "--path-format=absolute", flag]) {
                let path = Path::new(&git_dir).join(file);
                if path.exists() {
                    println!("cargo:rerun-if-changed={}", path.display());
                }
            }
        }
        Some(commit)
    });
    println!(
        "cargo:rustc-env=VIGIL_COMMIT={}",
        commit.as_deref().unwrap_or("unknown")
    );
}
