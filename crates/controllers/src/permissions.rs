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

/// What recording Events takes: kube-runtime's `Recorder` creates events and patches them when
/// they repeat. Every controller records Events.
pub const RECORD_EVENTS: Permission = Permission {
    group: "events.k8s.io",
    resources: &["events"],
    verbs: &["create", "patch"],
};

/// Every (group, resource, verb) that `permissions` grant, one by one: what a test compares with
/// the requests a controller made.
pub fn granted(
    permissions: &[Permission],
) -> impl Iterator<Item = (&'static str, &'static str, &'static str)> + '_ {
    permissions.iter().flat_map(|p| {
        p.resources
            .iter()
            .flat_map(move |resource| p.verbs.iter().map(move |verb| (p.group, *resource, *verb)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granted_lists_each_verb_on_each_resource() {
        let rules = [
            Permission {
                group: "",
                resources: &["pods", "services"],
                verbs: &["list", "watch"],
            },
            Permission {
                group: "mycrd.com",
                resources: &["criticalservices/status"],
                verbs: &["patch"],
            },
        ];
        let all: Vec<_> = granted(&rules).collect();
        assert_eq!(
            all,
            [
                ("", "pods", "list"),
                ("", "pods", "watch"),
                ("", "services", "list"),
                ("", "services", "watch"),
                ("mycrd.com", "criticalservices/status", "patch"),
            ]
        );
    }
}
