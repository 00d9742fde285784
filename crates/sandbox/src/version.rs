//! The Kubernetes version the sandbox reports on `/version` (and in its OpenAPI index), so a
//! caller that provisions "a 1.28 cluster" gets one that says so to clients that check.

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

/// A Kubernetes release `major.minor.patch`, parsed from `1.28`, `1.28.3` or `v1.28.3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KubeVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

/// `gitVersion` when no version is configured: the release the sandbox's semantics follow, marked
/// as the sandbox so logs and `kubectl version` show what answered.
const DEFAULT_GIT_VERSION: &str = "v1.33.0-vigil-sandbox";
const DEFAULT_MAJOR: &str = "1";
const DEFAULT_MINOR: &str = "33";

/// Why a version string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid Kubernetes version {input:?}: expected MAJOR.MINOR or MAJOR.MINOR.PATCH, e.g. 1.28 or 1.28.3"
)]
pub struct InvalidKubeVersion {
    input: String,
}

impl FromStr for KubeVersion {
    type Err = InvalidKubeVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidKubeVersion {
            input: s.to_owned(),
        };
        let bare = s.strip_prefix('v').unwrap_or(s);
        // Digits only: `u32::from_str` would also take `+5`, and no release is spelled that way.
        let number = |part: &str| -> Result<u32, InvalidKubeVersion> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            part.parse().map_err(|_| invalid())
        };
        let parts: Vec<&str> = bare.split('.').collect();
        let (major, minor, patch) = match parts.as_slice() {
            [major, minor] => (number(major)?, number(minor)?, 0),
            [major, minor, patch] => (number(major)?, number(minor)?, number(patch)?),
            _ => return Err(invalid()),
        };
        if major == 0 {
            return Err(invalid());
        }
        Ok(Self {
            major,
            minor,
            patch,
        })
    }
}

impl fmt::Display for KubeVersion {
    /// `v1.28.3`, the `gitVersion` form.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// `gitVersion` for `configured`, or the sandbox's default.
pub(crate) fn git_version(configured: Option<KubeVersion>) -> String {
    configured.map_or_else(|| DEFAULT_GIT_VERSION.to_owned(), |v| v.to_string())
}

/// The `/version` document.
pub(crate) fn document(configured: Option<KubeVersion>) -> Value {
    let (major, minor) = match configured {
        Some(v) => (v.major.to_string(), v.minor.to_string()),
        None => (DEFAULT_MAJOR.to_owned(), DEFAULT_MINOR.to_owned()),
    };
    let arch = if cfg!(target_arch = "x86_64") {
        "amd64"
    } else {
        std::env::consts::ARCH
    };
    json!({
        "major": major,
        "minor": minor,
        "gitVersion": git_version(configured),
        "gitCommit": "",
        "gitTreeState": "clean",
        "buildDate": "2026-01-01T00:00:00Z",
        "goVersion": "rust",
        "compiler": "rustc",
        "platform": format!("{}/{arch}", std::env::consts::OS),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_minor_and_patch_forms() {
        let v: KubeVersion = "1.28".parse().expect("valid");
        assert_eq!((v.major, v.minor, v.patch), (1, 28, 0));
        assert_eq!(v.to_string(), "v1.28.0");
        let v: KubeVersion = "v1.28.3".parse().expect("valid");
        assert_eq!(v.to_string(), "v1.28.3");
        for bad in [
            "", "1", "1.", "1.x", "1.28.3.4", "+1.28", "1.+28", "0.9", "1.28-rc", " 1.28",
        ] {
            assert!(bad.parse::<KubeVersion>().is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn document_reports_the_configured_version_or_the_default() {
        let doc = document(Some(KubeVersion {
            major: 1,
            minor: 28,
            patch: 3,
        }));
        assert_eq!(doc["gitVersion"], "v1.28.3");
        assert_eq!(doc["major"], "1");
        assert_eq!(doc["minor"], "28");
        let default = document(None);
        assert_eq!(default["gitVersion"], "v1.33.0-vigil-sandbox");
        assert_eq!(default["minor"], "33");
    }
}
