//! What the vault stores: one [`Record`] per captured status of one object, addressed by its
//! [`ObjectKey`] (group, kind, namespace, name — not the uid, so that a re-created object finds
//! the records of the one it replaces).

use serde::{Deserialize, Serialize};

/// Which object a record belongs to. The uid is not part of it: an object deleted and re-applied
/// from git gets a new uid, and its status is exactly what the vault is for.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ObjectKey {
    /// API group; `""` for the core group (`v1` Services, ConfigMaps, …).
    pub group: String,
    pub kind: String,
    /// `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    pub fn new(
        group: impl Into<String>,
        kind: impl Into<String>,
        namespace: Option<&str>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            group: group.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    /// `Kind` for the core group, `Kind.group` otherwise (kubectl's spelling).
    pub fn kind_and_group(&self) -> String {
        if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

impl std::fmt::Display for ObjectKey {
    /// `Service default/web`, `KubernetesCluster.infra.example.com my-cluster`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {}/{}", self.kind_and_group(), ns, self.name),
            None => write!(f, "{} {}", self.kind_and_group(), self.name),
        }
    }
}

/// One captured status of one object.
///
/// `object` is optional: the `vigil status backup` CLI also stores the object's manifest (minus
/// server-set fields) so that `vigil status restore` can re-create a missing object; continuous
/// capture may leave it out, and readers must cope with records without it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    pub api_version: String,
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    pub resource_version: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub generation: Option<i64>,
    pub status: serde_json::Value,
    /// When the status was captured, RFC 3339.
    pub time: String,
    /// A tombstone: the object was deleted. Its earlier versions stay in the history.
    #[serde(default)]
    pub deleted: bool,
    /// The object's manifest without server-set fields (metadata.uid, resourceVersion,
    /// managedFields, …, and status), for re-creating it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub object: Option<serde_json::Value>,
}

impl Record {
    /// The key this record is stored under; the group comes from `apiVersion` (`v1` → core).
    pub fn key(&self) -> ObjectKey {
        let group = match self.api_version.rsplit_once('/') {
            Some((group, _version)) => group.to_owned(),
            None => String::new(),
        };
        ObjectKey {
            group,
            kind: self.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }

    /// Whether saving `self` after `previous` would record nothing new: same object (uid), same
    /// status, same liveness, and no new manifest to keep.
    pub(crate) fn same_as(&self, previous: &Record) -> bool {
        self.uid == previous.uid
            && self.status == previous.status
            && self.deleted == previous.deleted
            && (self.object.is_none() || self.object == previous.object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(api_version: &str) -> Record {
        Record {
            api_version: api_version.into(),
            kind: "Thing".into(),
            namespace: Some("ns".into()),
            name: "a".into(),
            uid: "u1".into(),
            resource_version: "1".into(),
            generation: None,
            status: serde_json::json!({"x": 1}),
            time: "2026-01-01T00:00:00Z".into(),
            deleted: false,
            object: None,
        }
    }

    #[test]
    fn key_takes_the_group_from_api_version() {
        assert_eq!(record("v1").key().group, "");
        assert_eq!(
            record("infra.example.com/v1alpha1").key().group,
            "infra.example.com"
        );
        assert_eq!(
            record("infra.example.com/v1").key().to_string(),
            "Thing.infra.example.com ns/a"
        );
    }

    #[test]
    fn same_as_ignores_resource_version_and_time_but_not_uid_or_status() {
        let a = record("v1");
        let mut b = a.clone();
        b.resource_version = "7".into();
        b.time = "2026-01-02T00:00:00Z".into();
        assert!(b.same_as(&a));
        b.uid = "u2".into();
        assert!(!b.same_as(&a));
        let mut c = a.clone();
        c.status = serde_json::json!({"x": 2});
        assert!(!c.same_as(&a));
        let mut d = a.clone();
        d.deleted = true;
        assert!(!d.same_as(&a));
        let mut e = a.clone();
        e.object = Some(serde_json::json!({"spec": {}}));
        assert!(!e.same_as(&a), "a new manifest is worth a version");
    }

    #[test]
    fn json_uses_kubernetes_field_names() {
        let text = serde_json::to_string(&record("v1")).unwrap();
        assert!(text.contains("\"apiVersion\":\"v1\""), "{text}");
        assert!(text.contains("\"resourceVersion\":\"1\""), "{text}");
        assert!(
            !text.contains("object"),
            "absent manifest is left out: {text}"
        );
    }
}
