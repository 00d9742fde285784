//! Where records live, the same in every backend: one folder (or key prefix) per object,
//! `<group>/<kind>/<namespace>/<name>/`, holding one entry per version named by a zero-padded
//! sequence number, `00000000000000000001.json`, so that names sort in version order.
//!
//! Each segment is percent-encoded except ASCII letters, digits, `-` and `.`; the core group is
//! `_core` and a cluster-scoped object's namespace `_cluster`. `_` is always encoded inside real
//! names, so these two can never collide with a real group or namespace, and `.`/`..` are encoded
//! so that no segment walks out of the vault.

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, percent_decode_str, utf8_percent_encode};

use crate::ObjectKey;

const KEEP: &AsciiSet = &NON_ALPHANUMERIC.remove(b'-').remove(b'.');
pub(crate) const CORE_GROUP: &str = "_core";
pub(crate) const CLUSTER_SCOPED: &str = "_cluster";
const VERSION_DIGITS: usize = 20;
const SUFFIX: &str = ".json";

fn encode(segment: &str) -> String {
    match segment {
        "" => "%00".into(),
        "." => "%2E".into(),
        ".." => "%2E%2E".into(),
        other => utf8_percent_encode(other, KEEP).to_string(),
    }
}

fn decode(segment: &str) -> Option<String> {
    if segment == "%00" {
        return Some(String::new());
    }
    percent_decode_str(segment)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The object's folder, relative to the vault's root, `/`-separated, without a trailing `/`.
pub(crate) fn key_path(key: &ObjectKey) -> String {
    let group = if key.group.is_empty() {
        CORE_GROUP.to_owned()
    } else {
        encode(&key.group)
    };
    let namespace = match &key.namespace {
        Some(ns) => encode(ns),
        None => CLUSTER_SCOPED.to_owned(),
    };
    format!(
        "{group}/{}/{namespace}/{}",
        encode(&key.kind),
        encode(&key.name)
    )
}

/// The key of a folder made by [`key_path`], from its four segments.
pub(crate) fn parse_key_segments(segments: [&str; 4]) -> Option<ObjectKey> {
    let [group, kind, namespace, name] = segments;
    Some(ObjectKey {
        group: if group == CORE_GROUP {
            String::new()
        } else {
            decode(group)?
        },
        kind: decode(kind)?,
        namespace: if namespace == CLUSTER_SCOPED {
            None
        } else {
            Some(decode(namespace)?)
        },
        name: decode(name)?,
    })
}

/// The file (object) name of a version.
pub(crate) fn version_name(version: u64) -> String {
    format!("{version:0width$}{SUFFIX}", width = VERSION_DIGITS)
}

/// The version a file name stands for; `None` for anything else (temporary files, strays).
pub(crate) fn parse_version_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SUFFIX)?;
    if digits.len() != VERSION_DIGITS || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_and_stay_inside_the_vault() {
        let keys = [
            ObjectKey::new("", "Service", Some("argocd"), "argocd-server"),
            ObjectKey::new("infra.example.com", "KubernetesCluster", None, "my-cluster"),
            ObjectKey::new("g", "K", Some(".."), "."),
            ObjectKey::new("_core", "K", Some("_cluster"), "a/b%c d"),
        ];
        for key in keys {
            let path = key_path(&key);
            let segments: Vec<&str> = path.split('/').collect();
            assert_eq!(segments.len(), 4, "{path}");
            assert!(segments.iter().all(|s| *s != "." && *s != ".."), "{path}");
            let back = parse_key_segments([segments[0], segments[1], segments[2], segments[3]]);
            assert_eq!(back.as_ref(), Some(&key), "{path}");
        }
        assert_eq!(
            key_path(&ObjectKey::new(
                "",
                "Service",
                Some("argocd"),
                "argocd-server"
            )),
            "_core/Service/argocd/argocd-server"
        );
    }

    #[test]
    fn version_names_sort_in_version_order() {
        assert_eq!(version_name(7), "00000000000000000007.json");
        assert!(version_name(9) < version_name(10));
        assert_eq!(parse_version_name(&version_name(42)), Some(42));
        assert_eq!(
            parse_version_name(".00000000000000000001.json.tmp-1-2"),
            None
        );
        assert_eq!(parse_version_name("1.json"), None);
    }
}
