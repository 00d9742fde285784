//! Stamps the commit the binary was built from into `vigil --version`: `VIGIL_GIT_COMMIT` when
//! set (a Docker build, which has no `.git`), else `git rev-parse`, else "unknown" — a source
//! tarball or a machine without git still builds.

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

fn main() {
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
