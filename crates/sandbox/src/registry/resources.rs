//! What the server serves: one `ResourceInfo` per (group, version, resource), for the built-in kinds
//! and for every established CustomResourceDefinition. Discovery, routing and storage all read it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::Value;

/// How `metadata.name` is validated for a resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// RFC 1123 subdomain: most kinds.
    Subdomain,
    /// RFC 1123 label: namespaces.
    Label,
    /// RFC 1035 label: services.
    Label1035,
    /// Any path segment (no `/`, `%`, `.` or `..`): RBAC kinds.
    PathSegment,
}

/// How a resource treats `.status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatusMode {
    /// No status subresource: status (if any) is ordinary content.
    None,
    /// A `/status` subresource: main-resource writes ignore status; create drops it unless `keep_on_create`.
    Subresource { keep_on_create: bool },
}

/// What a CustomResourceDefinition adds to a served version.
#[derive(Debug, Clone, PartialEq)]
pub struct CrdVersion {
    /// The CRD's `metadata.name`.
    pub crd_name: String,
    /// `schema.openAPIV3Schema`, if any.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub printer_columns: Vec<Value>,
    /// Whether this version is the storage version.
    pub storage: bool,
    /// For a `deprecated` version: the `Warning` each request to it is answered with.
    pub deprecation_warning: Option<String>,
}

/// One served resource of one group version.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceInfo {
    pub group: String,
    pub version: String,
    /// Plural, lowercase: `configmaps`.
    pub resource: String,
    pub singular: String,
    pub kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status: StatusMode,
    pub name_rule: NameRule,
    /// Objects of every version of a resource live under one storage key (`group/resource`);
    /// core/v1 and events.k8s.io/v1 events share one.
    pub storage_key: Arc<str>,
    /// Extra subresources served besides `status` (e.g. `binding` for pods, `finalize` for namespaces).
    pub extra_subresources: &'static [&'static str],
    /// Whether an immediate DELETE answers with the deleted object rather than a Success Status.
    pub delete_returns_object: bool,
    /// Field-selector keys this resource supports besides `metadata.name` and `metadata.namespace`.
    pub field_selectors: &'static [&'static str],
    /// Whether a PUT of a missing object creates it.
    pub create_on_update: bool,
    /// Whether `metadata.generation` is maintained (kinds with a spec that controllers observe).
    pub tracks_generation: bool,
    /// `apiVersion` of stored objects (the storage version).
    pub storage_api_version: String,
    /// Set for custom resources.
    pub crd: Option<CrdVersion>,
}

impl ResourceInfo {
    /// `apps/v1` or `v1`.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// Whether `/status` is served.
    pub fn has_status_subresource(&self) -> bool {
        matches!(self.status, StatusMode::Subresource { .. })
    }

    /// The verbs advertised in discovery.
    pub fn verbs(&self) -> Vec<&'static str> {
        let mut verbs = vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        if self.resource == "namespaces" {
            verbs.retain(|v| *v != "deletecollection");
        }
        verbs
    }

    /// Whether `key` may be used in a field selector on this resource.
    pub fn supports_field_selector(&self, key: &str) -> bool {
        key == "metadata.name"
            || (self.namespaced && key == "metadata.namespace")
            || self.field_selectors.contains(&key)
    }
}

/// Declarative row of the built-in table.
struct Builtin {
    group: &'static str,
    version: &'static str,
    resource: &'static str,
    kind: &'static str,
    namespaced: bool,
    short: &'static [&'static str],
    categories: &'static [&'static str],
    status: StatusMode,
    name_rule: NameRule,
    storage: &'static str,
    extra: &'static [&'static str],
    fields: &'static [&'static str],
}

const ALL: &[&str] = &["all"];
const NONE: &[&str] = &[];
const DROP: StatusMode = StatusMode::Subresource {
    keep_on_create: false,
};
const POD_FIELDS: &[&str] = &[
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
];
const EVENT_FIELDS: &[&str] = &[
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
];
const EVENT_V1_FIELDS: &[&str] = &[
    "regarding.kind",
    "regarding.namespace",
    "regarding.name",
    "regarding.uid",
    "regarding.apiVersion",
    "regarding.resourceVersion",
    "regarding.fieldPath",
    "reason",
    "reportingController",
    "type",
];

#[rustfmt::skip]
const BUILTINS: &[Builtin] = &[
    Builtin { group: "", version: "v1", resource: "namespaces", kind: "Namespace", namespaced: false, short: &["ns"], categories: NONE, status: DROP, name_rule: NameRule::Label, storage: "/namespaces", extra: &["finalize"], fields: &["status.phase"] },
    Builtin { group: "", version: "v1", resource: "pods", kind: "Pod", namespaced: true, short: &["po"], categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "/pods", extra: &["binding"], fields: POD_FIELDS },
    Builtin { group: "", version: "v1", resource: "services", kind: "Service", namespaced: true, short: &["svc"], categories: ALL, status: DROP, name_rule: NameRule::Label1035, storage: "/services", extra: NONE, fields: NONE },
    Builtin { group: "", version: "v1", resource: "endpoints", kind: "Endpoints", namespaced: true, short: &["ep"], categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/endpoints", extra: NONE, fields: NONE },
    Builtin { group: "", version: "v1", resource: "configmaps", kind: "ConfigMap", namespaced: true, short: &["cm"], categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/configmaps", extra: NONE, fields: NONE },
    Builtin { group: "", version: "v1", resource: "secrets", kind: "Secret", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/secrets", extra: NONE, fields: &["type"] },
    Builtin { group: "", version: "v1", resource: "serviceaccounts", kind: "ServiceAccount", namespaced: true, short: &["sa"], categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/serviceaccounts", extra: NONE, fields: NONE },
    Builtin { group: "", version: "v1", resource: "podtemplates", kind: "PodTemplate", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/podtemplates", extra: NONE, fields: NONE },
    Builtin { group: "", version: "v1", resource: "nodes", kind: "Node", namespaced: false, short: &["no"], categories: NONE, status: StatusMode::Subresource { keep_on_create: true }, name_rule: NameRule::Subdomain, storage: "/nodes", extra: NONE, fields: &["spec.unschedulable"] },
    Builtin { group: "", version: "v1", resource: "events", kind: "Event", namespaced: true, short: &["ev"], categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/events", extra: NONE, fields: EVENT_FIELDS },
    Builtin { group: "events.k8s.io", version: "v1", resource: "events", kind: "Event", namespaced: true, short: &["ev"], categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "/events", extra: NONE, fields: EVENT_V1_FIELDS },
    Builtin { group: "discovery.k8s.io", version: "v1", resource: "endpointslices", kind: "EndpointSlice", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "discovery.k8s.io/endpointslices", extra: NONE, fields: NONE },
    Builtin { group: "coordination.k8s.io", version: "v1", resource: "leases", kind: "Lease", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "coordination.k8s.io/leases", extra: NONE, fields: NONE },
    Builtin { group: "apps", version: "v1", resource: "deployments", kind: "Deployment", namespaced: true, short: &["deploy"], categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "apps/deployments", extra: &["scale"], fields: NONE },
    Builtin { group: "apps", version: "v1", resource: "replicasets", kind: "ReplicaSet", namespaced: true, short: &["rs"], categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "apps/replicasets", extra: &["scale"], fields: NONE },
    Builtin { group: "apps", version: "v1", resource: "statefulsets", kind: "StatefulSet", namespaced: true, short: &["sts"], categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "apps/statefulsets", extra: NONE, fields: NONE },
    Builtin { group: "apps", version: "v1", resource: "controllerrevisions", kind: "ControllerRevision", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::Subdomain, storage: "apps/controllerrevisions", extra: NONE, fields: NONE },
    Builtin { group: "apps", version: "v1", resource: "daemonsets", kind: "DaemonSet", namespaced: true, short: &["ds"], categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "apps/daemonsets", extra: NONE, fields: NONE },
    // Served so that what installs on a cluster installs here too (the chart's default budget,
    // `vigil manifests`); nothing evicts on the sandbox, so no controller maintains its status.
    Builtin { group: "policy", version: "v1", resource: "poddisruptionbudgets", kind: "PodDisruptionBudget", namespaced: true, short: &["pdb"], categories: NONE, status: DROP, name_rule: NameRule::Subdomain, storage: "policy/poddisruptionbudgets", extra: NONE, fields: NONE },
    Builtin { group: "batch", version: "v1", resource: "jobs", kind: "Job", namespaced: true, short: NONE, categories: ALL, status: DROP, name_rule: NameRule::Subdomain, storage: "batch/jobs", extra: NONE, fields: NONE },
    Builtin { group: "apiextensions.k8s.io", version: "v1", resource: "customresourcedefinitions", kind: "CustomResourceDefinition", namespaced: false, short: &["crd", "crds"], categories: &["api-extensions"], status: DROP, name_rule: NameRule::Subdomain, storage: "apiextensions.k8s.io/customresourcedefinitions", extra: NONE, fields: NONE },
    Builtin { group: "rbac.authorization.k8s.io", version: "v1", resource: "roles", kind: "Role", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::PathSegment, storage: "rbac.authorization.k8s.io/roles", extra: NONE, fields: NONE },
    Builtin { group: "rbac.authorization.k8s.io", version: "v1", resource: "rolebindings", kind: "RoleBinding", namespaced: true, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::PathSegment, storage: "rbac.authorization.k8s.io/rolebindings", extra: NONE, fields: NONE },
    Builtin { group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterroles", kind: "ClusterRole", namespaced: false, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::PathSegment, storage: "rbac.authorization.k8s.io/clusterroles", extra: NONE, fields: NONE },
    Builtin { group: "rbac.authorization.k8s.io", version: "v1", resource: "clusterrolebindings", kind: "ClusterRoleBinding", namespaced: false, short: NONE, categories: NONE, status: StatusMode::None, name_rule: NameRule::PathSegment, storage: "rbac.authorization.k8s.io/clusterrolebindings", extra: NONE, fields: NONE },
];

/// Kinds whose immediate DELETE answers with the deleted object (the others answer with a Success Status).
const DELETE_RETURNS_OBJECT: &[&str] = &["pods", "services", "namespaces"];
/// Built-in kinds whose strategy maintains `metadata.generation`.
const TRACKS_GENERATION: &[&str] = &[
    "deployments",
    "poddisruptionbudgets",
    "replicasets",
    "statefulsets",
    "daemonsets",
    "jobs",
    "customresourcedefinitions",
];
/// Kinds where PUT of a missing object creates it.
const CREATE_ON_UPDATE: &[&str] = &["endpoints", "events", "leases"];

fn builtin_info(b: &Builtin) -> ResourceInfo {
    ResourceInfo {
        group: b.group.into(),
        version: b.version.into(),
        resource: b.resource.into(),
        singular: b.kind.to_lowercase(),
        kind: b.kind.into(),
        namespaced: b.namespaced,
        short_names: b.short.iter().map(|s| (*s).to_owned()).collect(),
        categories: b.categories.iter().map(|s| (*s).to_owned()).collect(),
        status: b.status,
        name_rule: b.name_rule,
        storage_key: Arc::from(b.storage),
        extra_subresources: b.extra,
        delete_returns_object: DELETE_RETURNS_OBJECT.contains(&b.resource),
        field_selectors: b.fields,
        create_on_update: CREATE_ON_UPDATE.contains(&b.resource),
        tracks_generation: TRACKS_GENERATION.contains(&b.resource),
        // Both Event APIs store core/v1 events.
        storage_api_version: if b.storage == "/events" {
            "v1".to_owned()
        } else if b.group.is_empty() {
            b.version.to_owned()
        } else {
            format!("{}/{}", b.group, b.version)
        },
        crd: None,
    }
}

/// A served group and its versions, in preference order.
#[derive(Debug, Clone, PartialEq)]
pub struct GroupInfo {
    pub name: String,
    pub versions: Vec<String>,
}

/// Every served resource, keyed by (group, version, plural).
#[derive(Debug, Clone)]
pub struct Registry {
    by_gvr: BTreeMap<(String, String, String), Arc<ResourceInfo>>,
    /// Group order as discovery lists it: built-ins first, then CRD groups by first registration.
    group_order: Vec<String>,
}

impl Registry {
    /// The registry of built-in kinds.
    pub fn builtin() -> Self {
        let mut registry = Self {
            by_gvr: BTreeMap::new(),
            group_order: Vec::new(),
        };
        for b in BUILTINS {
            registry.insert(builtin_info(b));
        }
        registry
    }

    fn insert(&mut self, info: ResourceInfo) {
        if !self.group_order.contains(&info.group) {
            self.group_order.push(info.group.clone());
        }
        let key = (
            info.group.clone(),
            info.version.clone(),
            info.resource.clone(),
        );
        self.by_gvr.insert(key, Arc::new(info));
    }

    /// The resource served at `group/version/resource`.
    pub fn get(&self, group: &str, version: &str, resource: &str) -> Option<Arc<ResourceInfo>> {
        self.by_gvr
            .get(&(group.to_owned(), version.to_owned(), resource.to_owned()))
            .cloned()
    }

    /// Whether any version of `group` is served (the core group is "").
    pub fn serves_group(&self, group: &str) -> bool {
        self.by_gvr.keys().any(|(g, _, _)| g == group)
    }

    /// The resources of one group version, sorted by name.
    pub fn resources_of(&self, group: &str, version: &str) -> Vec<Arc<ResourceInfo>> {
        self.by_gvr
            .iter()
            .filter(|((g, v, _), _)| g == group && v == version)
            .map(|(_, info)| info.clone())
            .collect()
    }

    /// The resource serving `kind` in a group version (to resolve ownerReferences).
    pub fn by_kind(&self, group: &str, version: &str, kind: &str) -> Option<Arc<ResourceInfo>> {
        self.by_gvr
            .values()
            .find(|i| i.group == group && i.version == version && i.kind == kind)
            .cloned()
    }

    /// Every resource stored under a storage key (all versions).
    pub fn by_storage_key(&self, storage_key: &str) -> Vec<Arc<ResourceInfo>> {
        self.by_gvr
            .values()
            .filter(|i| &*i.storage_key == storage_key)
            .cloned()
            .collect()
    }

    /// The groups served, each with its versions (preferred first). The core group is named "".
    pub fn groups(&self) -> Vec<GroupInfo> {
        self.group_order
            .iter()
            .filter_map(|group| {
                let mut versions: Vec<String> = Vec::new();
                for (g, v, _) in self.by_gvr.keys() {
                    if g == group && !versions.contains(v) {
                        versions.push(v.clone());
                    }
                }
                if versions.is_empty() {
                    return None;
                }
                versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
                Some(GroupInfo {
                    name: group.clone(),
                    versions,
                })
            })
            .collect()
    }

    /// Replaces the resources a CRD serves with `infos` (empty to unregister it).
    pub fn set_crd_resources(&mut self, crd_name: &str, infos: Vec<ResourceInfo>) {
        self.by_gvr
            .retain(|_, i| i.crd.as_ref().is_none_or(|c| c.crd_name != crd_name));
        for info in infos {
            self.insert(info);
        }
    }

    /// Whether a built-in or another CRD already serves `group/resource`.
    pub fn plural_taken(&self, group: &str, resource: &str, crd_name: &str) -> bool {
        self.by_gvr.values().any(|i| {
            i.group == group
                && i.resource == resource
                && i.crd.as_ref().is_none_or(|c| c.crd_name != crd_name)
        })
    }
}

/// Kubernetes version ordering for discovery: GA > beta > alpha, then by number (v2 > v1, v1beta2 > v1beta1).
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let Some(rest) = v.strip_prefix('v') else {
        return (0, 0, 0);
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let Ok(major) = digits.parse::<u32>() else {
        return (0, 0, 0);
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (stage, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match num.parse::<u32>() {
        Ok(n) => (stage, major, n),
        Err(_) => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_are_served() {
        let r = Registry::builtin();
        let pods = r.get("", "v1", "pods").expect("pods");
        assert!(pods.namespaced);
        assert!(pods.has_status_subresource());
        assert_eq!(
            r.get("events.k8s.io", "v1", "events")
                .map(|i| i.storage_key.clone()),
            Some(Arc::from("/events"))
        );
        assert!(r.get("", "v1", "nothing").is_none());
        let groups: Vec<String> = r.groups().into_iter().map(|g| g.name).collect();
        assert_eq!(groups[0], "");
        assert!(groups.contains(&"apps".to_owned()));
    }

    #[test]
    fn versions_sort_like_kubernetes() {
        let mut v = vec!["v1alpha1", "v1beta1", "v2", "v1", "v1beta2", "foo"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha1", "foo"]);
    }
}
