//! Reading and writing `metadata` on untyped objects, and the name/label rules of ObjectMeta.

use serde_json::{Map, Value, json};

use crate::field_error::{FieldError, child_path};
use crate::registry::resources::NameRule;

/// `metadata` as a map, created (and the object made a map) if absent.
pub fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    let root = object_mut(obj);
    object_mut(root.entry("metadata").or_insert_with(|| json!({})))
}

/// The value as a map, replacing it with an empty map when it is not one.
pub fn object_mut(v: &mut Value) -> &mut Map<String, Value> {
    if !v.is_object() {
        *v = Value::Object(Map::new());
    }
    match v {
        Value::Object(m) => m,
        _ => unreachable!("just made an object"),
    }
}

/// A string field of `metadata`, or "".
pub fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or("")
}

/// `metadata.name`.
pub fn name(obj: &Value) -> &str {
    meta_str(obj, "name")
}

/// `metadata.namespace`.
pub fn namespace(obj: &Value) -> &str {
    meta_str(obj, "namespace")
}

/// `metadata.labels` as a map, if set.
pub fn labels(obj: &Value) -> Option<&Map<String, Value>> {
    obj.get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
}

/// `metadata.finalizers` as strings.
pub fn finalizers(obj: &Value) -> Vec<String> {
    obj.get("metadata")
        .and_then(|m| m.get("finalizers"))
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `metadata.deletionTimestamp` is set.
pub fn is_deleting(obj: &Value) -> bool {
    obj.get("metadata")
        .and_then(|m| m.get("deletionTimestamp"))
        .is_some_and(|v| !v.is_null())
}

/// Sets or removes a metadata field (`Null` removes).
pub fn set_meta(obj: &mut Value, field: &str, value: Value) {
    let meta = meta_mut(obj);
    if value.is_null() {
        meta.remove(field);
    } else {
        meta.insert(field.to_owned(), value);
    }
}

/// Now, as metav1.Time prints it (second precision).
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A fresh random UID (UUID v4 text).
pub fn new_uid() -> String {
    let b: [u8; 16] = rand::random();
    let hex: String = b
        .iter()
        .enumerate()
        .map(|(i, byte)| match i {
            6 => (byte & 0x0f) | 0x40,
            8 => (byte & 0x3f) | 0x80,
            _ => *byte,
        })
        .map(|byte| format!("{byte:02x}"))
        .collect();
    format!(
        "{}-{}-{}-{}-{}",
        &hex[0..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..32]
    )
}

/// The 5-character suffix the server appends to `generateName`.
pub fn generate_name_suffix() -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..5)
        .map(|_| ALPHABET[rand::random_range(0..ALPHABET.len())] as char)
        .collect()
}

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";

fn is_dns1123_label(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

fn is_dns1123_subdomain(s: &str) -> bool {
    s.len() <= 253 && s.split('.').all(is_dns1123_label)
}

fn is_dns1035_label(s: &str) -> bool {
    is_dns1123_label(s) && s.as_bytes()[0].is_ascii_lowercase()
}

/// Problems with a name under a rule, as messages (empty when valid).
pub fn name_problems(name: &str, rule: NameRule) -> Vec<String> {
    let mut out = Vec::new();
    match rule {
        NameRule::Subdomain => {
            if name.len() > 253 {
                out.push("must be no more than 253 characters".to_owned());
            }
            if !is_dns1123_subdomain(name) {
                out.push(DNS1123_SUBDOMAIN_MSG.to_owned());
            }
        }
        NameRule::Label | NameRule::Label1035 => {
            if name.len() > 63 {
                out.push("must be no more than 63 characters".to_owned());
            }
            let (ok, msg) = if rule == NameRule::Label {
                (is_dns1123_label(name), DNS1123_LABEL_MSG)
            } else {
                (is_dns1035_label(name), DNS1035_LABEL_MSG)
            };
            if !ok && name.len() <= 63 {
                out.push(msg.to_owned());
            }
        }
        NameRule::PathSegment => {
            if name == "." || name == ".." {
                out.push(format!("may not be '{name}'"));
            }
            for bad in ["/", "%"] {
                if name.contains(bad) {
                    out.push(format!("may not contain '{bad}'"));
                }
            }
        }
    }
    out
}

/// Validates a namespace name used in a request path (a DNS label).
pub fn namespace_name_problems(ns: &str) -> Vec<String> {
    name_problems(ns, NameRule::Label)
}

fn qualified_name_problems(key: &str) -> Vec<String> {
    let (prefix, name) = match key.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    let mut out = Vec::new();
    if let Some(p) = prefix {
        if p.is_empty() {
            out.push("prefix part must be non-empty".to_owned());
        } else if !is_dns1123_subdomain(p) {
            out.push(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
        }
    }
    if name.is_empty() {
        out.push("name part must be non-empty".to_owned());
    } else if name.len() > 63 {
        out.push("name part must be no more than 63 characters".to_owned());
    } else if !is_label_value(name) {
        out.push("name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_owned());
    }
    out
}

fn is_label_value(v: &str) -> bool {
    let b = v.as_bytes();
    b.is_empty()
        || (b.len() <= 63
            && b.iter()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
            && b[0].is_ascii_alphanumeric()
            && b[b.len() - 1].is_ascii_alphanumeric())
}

/// Validates `metadata` of an object being written: name (when `check_name`), labels, annotations,
/// finalizers and ownerReferences, with the server's field paths and messages.
pub fn validate_object_meta(obj: &Value, rule: NameRule, check_name: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let Some(meta) = obj.get("metadata").and_then(Value::as_object) else {
        return vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
    };
    let name = meta.get("name").and_then(Value::as_str).unwrap_or("");
    if check_name {
        if name.is_empty() {
            errors.push(FieldError::required(
                "metadata.name",
                "name or generateName is required",
            ));
        } else {
            for problem in name_problems(name, rule) {
                errors.push(FieldError::invalid("metadata.name", &json!(name), &problem));
            }
        }
    }
    if let Some(labels) = meta.get("labels") {
        validate_labels(labels, &mut errors);
    }
    if let Some(annotations) = meta.get("annotations") {
        validate_annotations(annotations, &mut errors);
    }
    if let Some(finalizers) = meta.get("finalizers").and_then(Value::as_array) {
        for (i, f) in finalizers.iter().enumerate() {
            let text = f.as_str().unwrap_or("");
            let field = format!("metadata.finalizers[{i}]");
            for problem in qualified_name_problems(text) {
                errors.push(FieldError::invalid(&field, f, &problem));
            }
        }
    }
    if let Some(owners) = meta.get("ownerReferences").and_then(Value::as_array) {
        for (i, owner) in owners.iter().enumerate() {
            for field in ["apiVersion", "kind", "name", "uid"] {
                if owner
                    .get(field)
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    let path = format!("metadata.ownerReferences[{i}].{field}");
                    let msg = if field == "uid" {
                        "uid must not be empty"
                    } else {
                        ""
                    };
                    errors.push(if field == "uid" {
                        FieldError::invalid(path, &json!(""), msg)
                    } else {
                        FieldError::invalid(path, &json!(""), &format!("{field} must not be empty"))
                    });
                }
            }
        }
        let controllers = owners
            .iter()
            .filter(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
            .count();
        if controllers > 1 {
            errors.push(FieldError::invalid(
                "metadata.ownerReferences",
                &json!("object"),
                "Only one reference can have Controller set to true",
            ));
        }
    }
    errors
}

fn validate_labels(labels: &Value, errors: &mut Vec<FieldError>) {
    let Some(map) = labels.as_object() else {
        errors.push(FieldError::invalid(
            "metadata.labels",
            labels,
            "must be a map of strings",
        ));
        return;
    };
    for (key, value) in map {
        for problem in qualified_name_problems(key) {
            errors.push(FieldError::invalid(
                "metadata.labels",
                &json!(key),
                &problem,
            ));
        }
        match value.as_str() {
            Some(v) if is_label_value(v) => {}
            Some(v) => errors.push(FieldError::invalid(
                "metadata.labels",
                &json!(v),
                "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')",
            )),
            None => errors.push(FieldError::invalid(child_path("metadata.labels", key), value, "must be a string")),
        }
    }
}

/// The server caps the total size of annotations at 256 KiB.
const ANNOTATIONS_MAX_BYTES: usize = 256 * 1024;

fn validate_annotations(annotations: &Value, errors: &mut Vec<FieldError>) {
    let Some(map) = annotations.as_object() else {
        errors.push(FieldError::invalid(
            "metadata.annotations",
            annotations,
            "must be a map of strings",
        ));
        return;
    };
    let mut total = 0;
    for (key, value) in map {
        for problem in qualified_name_problems(&key.to_lowercase()) {
            errors.push(FieldError::invalid(
                "metadata.annotations",
                &json!(key),
                &problem,
            ));
        }
        total += key.len() + value.as_str().map_or(0, str::len);
        if !value.is_string() {
            errors.push(FieldError::invalid(
                child_path("metadata.annotations", key),
                value,
                "must be a string",
            ));
        }
    }
    if total > ANNOTATIONS_MAX_BYTES {
        errors.push(FieldError::too_long(
            "metadata.annotations",
            "must have at most 262144 bytes",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_follow_their_rule() {
        assert!(name_problems("web-1.example", NameRule::Subdomain).is_empty());
        assert!(!name_problems("Web", NameRule::Subdomain).is_empty());
        assert!(!name_problems("a.b", NameRule::Label).is_empty());
        assert!(!name_problems("1abc", NameRule::Label1035).is_empty());
        assert!(name_problems("1abc", NameRule::Label).is_empty());
        assert!(name_problems("system:admin", NameRule::PathSegment).is_empty());
        assert!(!name_problems("a/b", NameRule::PathSegment).is_empty());
    }

    #[test]
    fn meta_validation_reports_fields() {
        let obj = json!({"metadata": {"name": "Bad_Name", "labels": {"ok": "yes", "bad key": "v", "k": "-x"}}});
        let errs = validate_object_meta(&obj, NameRule::Subdomain, true);
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(
            fields,
            vec!["metadata.name", "metadata.labels", "metadata.labels"]
        );
        let missing = validate_object_meta(&json!({"metadata": {}}), NameRule::Subdomain, true);
        assert_eq!(
            missing[0].to_string(),
            "metadata.name: Required value: name or generateName is required"
        );
    }

    #[test]
    fn uid_is_uuid_v4_shaped() {
        let uid = new_uid();
        assert_eq!(uid.len(), 36);
        assert_eq!(&uid[14..15], "4");
        assert_ne!(uid, new_uid());
        assert_eq!(generate_name_suffix().len(), 5);
    }
}
