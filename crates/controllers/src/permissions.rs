//! The API permissions each controller's code uses, declared next to that code, from which
//! `vigil manifests` builds a least-privilege ClusterRole (no wildcards).

/// One RBAC rule: verbs on resources of an API group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Permission {
    /// API group ("" for core).
    pub group: &'static str,
    /// Resources, with subresources as `resource/subresource`.
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
}
