//! CustomResourceDefinitions: validating and defaulting the CRD object, turning it into served
//! resources, and the status the real apiextensions server reports (NamesAccepted, Established).

use std::sync::Arc;

use serde_json::{Value, json};

use crate::field_error::FieldError;
use crate::registry::meta;
use crate::registry::resources::{CrdVersion, NameRule, Registry, ResourceInfo, StatusMode};
use crate::schema;

/// The finalizer the real server puts on every CRD so its objects are deleted first.
pub const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Fills in the defaults the server applies to a CRD (singular, listKind, conversion, finalizer).
pub fn apply_defaults(crd: &mut Value, creating: bool) {
    let kind = str_at(crd, "/spec/names/kind").to_owned();
    if let Some(Value::Object(names)) = crd.pointer_mut("/spec/names") {
        if names
            .get("singular")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("singular".into(), json!(kind.to_lowercase()));
        }
        if names
            .get("listKind")
            .and_then(Value::as_str)
            .is_none_or(str::is_empty)
        {
            names.insert("listKind".into(), json!(format!("{kind}List")));
        }
    }
    if let Some(Value::Object(spec)) = crd.get_mut("spec") {
        spec.entry("conversion")
            .or_insert_with(|| json!({"strategy": "None"}));
    }
    if creating {
        let mut finalizers = meta::finalizers(crd);
        if !finalizers.iter().any(|f| f == CLEANUP_FINALIZER) {
            finalizers.push(CLEANUP_FINALIZER.to_owned());
            meta::set_meta(crd, "finalizers", json!(finalizers));
        }
    }
}

/// Validates a CRD as the apiextensions server does (the parts clients hit in practice).
pub fn validate(crd: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let group = str_at(crd, "/spec/group");
    let plural = str_at(crd, "/spec/names/plural");
    let kind = str_at(crd, "/spec/names/kind");
    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else if !group.contains('.') {
        errors.push(FieldError::invalid(
            "spec.group",
            &json!(group),
            "should be a domain with at least one dot",
        ));
    }
    if plural.is_empty() {
        errors.push(FieldError::required("spec.names.plural", ""));
    } else if !meta::name_problems(plural, NameRule::Label).is_empty() {
        errors.push(FieldError::invalid(
            "spec.names.plural",
            &json!(plural),
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        ));
    }
    if kind.is_empty() {
        errors.push(FieldError::required("spec.names.kind", ""));
    }
    let expected = format!("{plural}.{group}");
    if meta::name(crd) != expected {
        errors.push(FieldError::invalid(
            "metadata.name",
            &json!(meta::name(crd)),
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    let scope = str_at(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        errors.push(FieldError::not_supported(
            "spec.scope",
            &json!(scope),
            &[json!("Cluster"), json!("Namespaced")],
        ));
    }
    validate_versions(crd, &mut errors);
    if let Some(old) = old {
        validate_stored_versions(crd, old, &mut errors);
        for (field, pointer) in [
            ("spec.group", "/spec/group"),
            ("spec.names.plural", "/spec/names/plural"),
            ("spec.scope", "/spec/scope"),
        ] {
            if crd.pointer(pointer) != old.pointer(pointer) {
                errors.push(FieldError::invalid(
                    field,
                    crd.pointer(pointer).unwrap_or(&Value::Null),
                    "field is immutable",
                ));
            }
        }
    }
    errors
}

fn string_list(v: &Value, pointer: &str) -> Vec<String> {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .map(str::to_owned)
        .collect()
}

/// `status.storedVersions` on an update, as the apiextensions server checks it: never empty, the
/// storage version among them, and each still in `spec.versions` — so a version cannot leave
/// the CRD while objects may be stored at it (until a storage migration trims the list). A
/// spec update is checked against the list as the server's strategy leaves it (the old one plus
/// the new storage version); a status update against the list it sends.
fn validate_stored_versions(crd: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    let pointer = "/status/storedVersions";
    let spec_versions: Vec<&Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .map(|v| v.iter().collect())
        .unwrap_or_default();
    let storage = spec_versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let mut stored = string_list(crd, pointer);
    let status_write = crd.pointer(pointer) != old.pointer(pointer);
    if !status_write {
        if stored.is_empty() {
            // Never written yet (an object restored without status): nothing to hold to.
            return;
        }
        if !storage.is_empty() && !stored.iter().any(|v| v == storage) {
            stored.push(storage.to_owned());
        }
    }
    let field = "status.storedVersions";
    if stored.is_empty() {
        errors.push(FieldError::invalid(
            field,
            &json!([]),
            "must have at least one stored version",
        ));
        return;
    }
    if !storage.is_empty() && !stored.iter().any(|v| v == storage) {
        errors.push(FieldError::invalid(
            field,
            &json!(stored),
            &format!("must have the storage version {storage}"),
        ));
    }
    for (i, v) in stored.iter().enumerate() {
        let in_spec = spec_versions
            .iter()
            .any(|s| s.get("name").and_then(Value::as_str) == Some(v.as_str()));
        if !in_spec {
            errors.push(FieldError::invalid(
                format!("{field}[{i}]"),
                &json!(v),
                "must appear in spec.versions",
            ));
        }
    }
}

fn validate_versions(crd: &Value, errors: &mut Vec<FieldError>) {
    let versions = crd.pointer("/spec/versions").and_then(Value::as_array);
    let Some(versions) = versions.filter(|v| !v.is_empty()) else {
        errors.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    };
    let storage = versions
        .iter()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .count();
    if storage != 1 {
        errors.push(FieldError::invalid(
            "spec.versions",
            &json!("array"),
            "must have exactly one version marked as storage version",
        ));
    }
    let mut names = Vec::new();
    // Schemas whose validation rules are checked once they are known to be structural.
    let mut rule_checks: Vec<(usize, &Value)> = Vec::new();
    for (i, v) in versions.iter().enumerate() {
        let name = v.get("name").and_then(Value::as_str).unwrap_or("");
        let field = format!("spec.versions[{i}]");
        if name.is_empty() {
            errors.push(FieldError::required(format!("{field}.name"), ""));
        } else if names.contains(&name) {
            errors.push(FieldError::duplicate(format!("{field}.name"), &json!(name)));
        } else if !meta::name_problems(name, NameRule::Label1035).is_empty() {
            errors.push(FieldError::invalid(
                format!("{field}.name"),
                &json!(name),
                "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
            ));
        }
        names.push(name);
        match v.pointer("/schema/openAPIV3Schema") {
            Some(s) => {
                let structural =
                    schema::check_structural(s, &format!("{field}.schema.openAPIV3Schema"));
                if structural.is_empty() {
                    rule_checks.push((i, s));
                }
                errors.extend(structural);
            }
            None => errors.push(FieldError::required(
                format!("{field}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
    }
    // The server validates a schema every version shares once, as `spec.validation`'s (the
    // internal form it converts such a CRD to), and per version otherwise.
    let shared = versions.iter().all(|v| {
        v.pointer("/schema/openAPIV3Schema") == versions[0].pointer("/schema/openAPIV3Schema")
    });
    for (i, s) in rule_checks {
        if shared && i > 0 {
            break;
        }
        let prefix = if shared {
            "spec.validation.openAPIV3Schema".to_owned()
        } else {
            format!("spec.versions[{i}].schema.openAPIV3Schema")
        };
        errors.extend(schema::check_rules(s, &prefix));
    }
}

/// The resources a CRD serves (one per served version); empty while it has no established names.
pub fn served_resources(crd: &Value) -> Vec<ResourceInfo> {
    let group = str_at(crd, "/spec/group").to_owned();
    let plural = str_at(crd, "/spec/names/plural").to_owned();
    let kind = str_at(crd, "/spec/names/kind").to_owned();
    let singular = str_at(crd, "/spec/names/singular");
    let singular = if singular.is_empty() {
        kind.to_lowercase()
    } else {
        singular.to_owned()
    };
    let strings = |pointer: &str| -> Vec<String> {
        crd.pointer(pointer)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let storage_version = versions
        .iter()
        .find(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .and_then(|v| v.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    let storage_key: Arc<str> = Arc::from(format!("{group}/{plural}"));
    versions
        .iter()
        .filter(|v| v.get("served").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| {
            let version = v.get("name").and_then(Value::as_str)?.to_owned();
            Some(ResourceInfo {
                group: group.clone(),
                version: version.clone(),
                resource: plural.clone(),
                singular: singular.clone(),
                kind: kind.clone(),
                namespaced: str_at(crd, "/spec/scope") == "Namespaced",
                short_names: strings("/spec/names/shortNames"),
                categories: strings("/spec/names/categories"),
                status: if v.pointer("/subresources/status").is_some() {
                    StatusMode::Subresource {
                        keep_on_create: false,
                    }
                } else {
                    StatusMode::None
                },
                name_rule: NameRule::Subdomain,
                storage_key: storage_key.clone(),
                extra_subresources: &[],
                delete_returns_object: true,
                field_selectors: &[],
                create_on_update: false,
                tracks_generation: true,
                storage_api_version: format!("{group}/{storage_version}"),
                crd: Some(CrdVersion {
                    crd_name: meta::name(crd).to_owned(),
                    schema: v.pointer("/schema/openAPIV3Schema").cloned(),
                    printer_columns: v
                        .get("additionalPrinterColumns")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default(),
                    storage: version == storage_version,
                    deprecation_warning: deprecation_warning(crd, v, &version, &versions),
                }),
            })
        })
        .collect()
}

/// The warning for a request to a `deprecated` version: its `deprecationWarning`, else
/// kube-apiserver's default, `<group>/<version> <Kind> is deprecated; use <group>/<newer> <Kind>`
/// naming the highest-priority served version that is not deprecated and ranks above it.
fn deprecation_warning(
    crd: &Value,
    version: &Value,
    name: &str,
    versions: &[Value],
) -> Option<String> {
    if version.get("deprecated").and_then(Value::as_bool) != Some(true) {
        return None;
    }
    if let Some(warning) = version.get("deprecationWarning").and_then(Value::as_str) {
        return Some(warning.to_owned());
    }
    let group = str_at(crd, "/spec/group");
    let kind = str_at(crd, "/spec/names/kind");
    let mut msg = format!("{group}/{name} {kind} is deprecated");
    let newer = versions
        .iter()
        .filter(|v| {
            v.get("served").and_then(Value::as_bool) == Some(true)
                && v.get("deprecated").and_then(Value::as_bool) != Some(true)
        })
        .filter_map(|v| v.get("name").and_then(Value::as_str))
        .filter(|v| version_priority(v) > version_priority(name))
        .max_by_key(|v| version_priority(v));
    if let Some(newer) = newer {
        msg.push_str(&format!("; use {group}/{newer} {kind}"));
    }
    Some(msg)
}

/// Kubernetes' version order (apimachinery's `CompareKubeAwareVersionStrings`): GA above beta
/// above alpha, then by major and minor number; any other name ranks below them all.
fn version_priority(version: &str) -> (u8, u64, u64) {
    let parse = || -> Option<(u8, u64, u64)> {
        let rest = version.strip_prefix('v')?;
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let major: u64 = rest[..digits].parse().ok()?;
        let (stage, minor) = match &rest[digits..] {
            "" => return Some((3, major, 0)),
            tail => {
                let (rank, number) = if let Some(n) = tail.strip_prefix("beta") {
                    (2, n)
                } else {
                    (1, tail.strip_prefix("alpha")?)
                };
                (rank, number.parse::<u64>().ok()?)
            }
        };
        Some((stage, major, minor))
    };
    parse().unwrap_or((0, 0, 0))
}

/// Whether the CRD's names clash with another served resource.
pub fn names_conflict(registry: &Registry, crd: &Value) -> Option<String> {
    let group = str_at(crd, "/spec/group");
    let plural = str_at(crd, "/spec/names/plural");
    registry
        .plural_taken(group, plural, meta::name(crd))
        .then(|| format!("\"{plural}\" is already in use"))
}

/// The status the server reports once names are accepted: Established and NamesAccepted.
pub fn status(crd: &Value, conflict: Option<&str>, now: &str) -> Value {
    let old_conditions = crd
        .pointer("/status/conditions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let condition = |type_: &str, ok: bool, reason: &str, message: &str| {
        let status = if ok { "True" } else { "False" };
        let since = old_conditions
            .iter()
            .find(|c| {
                c.get("type").and_then(Value::as_str) == Some(type_)
                    && c.get("status").and_then(Value::as_str) == Some(status)
            })
            .and_then(|c| c.get("lastTransitionTime").cloned())
            .unwrap_or_else(|| json!(now));
        json!({"type": type_, "status": status, "lastTransitionTime": since, "reason": reason, "message": message})
    };
    let mut conditions = match conflict {
        None => vec![
            condition("NamesAccepted", true, "NoConflicts", "no conflicts found"),
            condition(
                "Established",
                true,
                "InitialNamesAccepted",
                "the initial names have been accepted",
            ),
        ],
        Some(why) => vec![
            condition("NamesAccepted", false, "AllNamesConflict", why),
            condition(
                "Established",
                false,
                "NotAccepted",
                "not all names are accepted",
            ),
        ],
    };
    if meta::is_deleting(crd) {
        conditions.push(condition(
            "Terminating",
            true,
            "InstanceDeletionInProgress",
            "CustomResource deletion is in progress",
        ));
    }
    let storage: Vec<Value> = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|v| v.get("storage").and_then(Value::as_bool) == Some(true))
        .filter_map(|v| v.get("name").cloned())
        .collect();
    let mut stored: Vec<Value> = crd
        .pointer("/status/storedVersions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for v in storage {
        if !stored.contains(&v) {
            stored.push(v);
        }
    }
    let accepted = if conflict.is_none() {
        crd.pointer("/spec/names").cloned().unwrap_or(json!({}))
    } else {
        json!({"plural": "", "kind": ""})
    };
    json!({"acceptedNames": accepted, "conditions": conditions, "storedVersions": stored})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
                "versions": [
                    {"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                     "schema": {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}},
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}
                ]}
        })
    }

    #[test]
    fn deprecated_versions_warn_with_their_message_or_the_default() {
        let mut c = crd();
        c["spec"]["versions"][1]["deprecated"] = json!(true);
        let warning = |c: &Value| {
            served_resources(c)
                .into_iter()
                .map(|r| r.crd.and_then(|v| v.deprecation_warning))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            warning(&c),
            [
                None,
                Some("example.com/v1beta1 Widget is deprecated; use example.com/v1 Widget".into())
            ]
        );
        c["spec"]["versions"][1]["deprecationWarning"] = json!("use v1");
        assert_eq!(warning(&c), [None, Some("use v1".into())]);
    }

    #[test]
    fn a_stored_version_cannot_leave_the_crd_until_trimmed() {
        let mut old = crd();
        old["status"] = json!({"storedVersions": ["v1beta1", "v1"]});
        let mut dropped = old.clone();
        if let Some(Value::Array(versions)) = dropped.pointer_mut("/spec/versions") {
            versions.truncate(1);
        }
        let errors = validate(&dropped, Some(&old));
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert_eq!(errors[0].field, "status.storedVersions[0]");
        let mut trimmed = old.clone();
        trimmed["status"]["storedVersions"] = json!(["v1"]);
        assert!(validate(&trimmed, Some(&old)).is_empty());
        let mut without_storage = old.clone();
        without_storage["status"]["storedVersions"] = json!(["v1beta1"]);
        assert_eq!(validate(&without_storage, Some(&old)).len(), 1);
        dropped["status"] = trimmed["status"].clone();
        assert!(validate(&dropped, Some(&trimmed)).is_empty());
    }

    #[test]
    fn kube_aware_version_order() {
        let mut versions = [
            "v1alpha1",
            "v2",
            "v1beta2",
            "v1",
            "v10beta1",
            "foo",
            "v11alpha2",
        ];
        versions.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
        assert_eq!(
            versions,
            [
                "v2",
                "v1",
                "v10beta1",
                "v1beta2",
                "v11alpha2",
                "v1alpha1",
                "foo"
            ]
        );
    }

    #[test]
    fn valid_crd_serves_every_served_version() {
        let mut c = crd();
        apply_defaults(&mut c, true);
        assert!(validate(&c, None).is_empty(), "{:?}", validate(&c, None));
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        let served = served_resources(&c);
        assert_eq!(served.len(), 2);
        assert!(served[0].has_status_subresource());
        assert!(!served[1].has_status_subresource());
        assert_eq!(served[1].storage_api_version, "example.com/v1");
        let status = status(&c, None, "2026-01-01T00:00:00Z");
        assert_eq!(status["conditions"][1]["type"], "Established");
        assert_eq!(status["storedVersions"], json!(["v1"]));
    }

    #[test]
    fn invalid_crd_names_fields() {
        let mut c = crd();
        c["metadata"]["name"] = json!("wrong");
        c["spec"]["group"] = json!("nodot");
        c["spec"]["versions"][1]["storage"] = json!(true);
        let fields: Vec<String> = validate(&c, None).into_iter().map(|e| e.field).collect();
        assert!(fields.contains(&"spec.group".to_owned()));
        assert!(fields.contains(&"metadata.name".to_owned()));
        assert!(fields.contains(&"spec.versions".to_owned()));
    }
}
