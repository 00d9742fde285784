//! What every controller's caches drop from the objects they keep: the fields no decision
//! reads (managed fields are most of a small object). One place, so caches of one kind in two
//! controllers keep the same thing.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// Drops the metadata no decision reads, keeping only the annotations named in
/// `keep_annotations`.
pub fn meta(meta: &mut ObjectMeta, keep_annotations: &[&str]) {
    meta.managed_fields = None;
    meta.self_link = None;
    meta.generate_name = None;
    meta.creation_timestamp = None;
    meta.finalizers = None;
    if let Some(annotations) = meta.annotations.as_mut() {
        annotations.retain(|k, _| keep_annotations.contains(&k.as_str()));
        if annotations.is_empty() {
            meta.annotations = None;
        }
    }
}

/// Strips a namespace to what selectors read: its name, labels and deletion mark.
pub fn namespace(ns: &mut Namespace) {
    meta(&mut ns.metadata, &[]);
    ns.spec = None;
    ns.status = None;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn a_namespace_keeps_its_name_labels_and_deletion_mark_only() {
        let mut ns: Namespace = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "team-a",
                "labels": {"env": "prod"},
                "annotations": {"note": "x"},
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "managedFields": [{"manager": "kubectl"}],
                "finalizers": ["kubernetes"],
            },
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Terminating"},
        }))
        .expect("a namespace");
        namespace(&mut ns);
        assert_eq!(ns.metadata.name.as_deref(), Some("team-a"));
        assert_eq!(
            ns.metadata.labels,
            Some(BTreeMap::from([("env".to_owned(), "prod".to_owned())]))
        );
        assert!(ns.metadata.deletion_timestamp.is_some());
        assert_eq!(ns.metadata.annotations, None);
        assert_eq!(ns.metadata.managed_fields, None);
        assert_eq!((ns.spec, ns.status), (None, None));
    }
}
