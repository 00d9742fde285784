//! Field-level validation errors, shaped like the API server's `field.Error`.
//!
//! A 422 `Invalid` Status lists these as `details.causes`; their `Display` is the
//! text the real server prints after the field path, so messages match.

use std::fmt;

/// Why a field was rejected; the string is the `reason` of a Status cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldErrorKind {
    /// `FieldValueInvalid`: the value is of the wrong type or out of bounds.
    Invalid,
    /// `FieldValueTypeInvalid`: the value is not of the schema's type (printed as "Invalid
    /// value" too; it is the error that keeps validation rules from running).
    TypeInvalid,
    /// `FieldValueRequired`: a required field is missing.
    Required,
    /// `FieldValueNotSupported`: the value is not one of the allowed ones.
    NotSupported,
    /// `FieldValueForbidden`: the field may not be set or changed.
    Forbidden,
    /// `FieldValueTooLong`: a string or list is longer than allowed.
    TooLong,
    /// `FieldValueTooMany`: a list has too many items.
    TooMany,
    /// `FieldValueDuplicate`: a list item that must be unique is repeated.
    Duplicate,
}

impl FieldErrorKind {
    /// The `reason` string of a Status cause.
    pub fn reason(self) -> &'static str {
        match self {
            Self::Invalid => "FieldValueInvalid",
            Self::TypeInvalid => "FieldValueTypeInvalid",
            Self::Required => "FieldValueRequired",
            Self::NotSupported => "FieldValueNotSupported",
            Self::Forbidden => "FieldValueForbidden",
            Self::TooLong => "FieldValueTooLong",
            Self::TooMany => "FieldValueTooMany",
            Self::Duplicate => "FieldValueDuplicate",
        }
    }
}

/// One rejected field, e.g. `spec.replicas: Invalid value: "x": spec.replicas in body must be of type integer: "string"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    pub kind: FieldErrorKind,
    /// Dotted path as the server prints it: `spec.containers[0].name`, `metadata.name`.
    pub field: String,
    /// Everything after `field: `, e.g. `Required value` or `Invalid value: 3: must be ...`.
    pub message: String,
}

impl FieldError {
    /// `Invalid value: <json value>: <detail>`, as `field.Invalid` prints it.
    pub fn invalid(field: impl Into<String>, value: &serde_json::Value, detail: &str) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            message: format!("Invalid value: {}: {detail}", render_value(value)),
        }
    }

    /// `Invalid value: <value>: <detail>` with the value already printed, for values the
    /// server prints as Go values rather than JSON (e.g. a CRD's validation rule).
    pub fn invalid_printed(field: impl Into<String>, printed: &str, detail: &str) -> Self {
        Self {
            kind: FieldErrorKind::Invalid,
            field: field.into(),
            message: format!("Invalid value: {printed}: {detail}"),
        }
    }

    /// `Invalid value: <json value>: <detail>` of `FieldValueTypeInvalid`: a value of the wrong
    /// type.
    pub fn type_invalid(field: impl Into<String>, value: &serde_json::Value, detail: &str) -> Self {
        Self {
            kind: FieldErrorKind::TypeInvalid,
            ..Self::invalid(field, value, detail)
        }
    }

    /// `Required value`, optionally followed by `: <detail>`.
    pub fn required(field: impl Into<String>, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_owned()
        } else {
            format!("Required value: {detail}")
        };
        Self {
            kind: FieldErrorKind::Required,
            field: field.into(),
            message,
        }
    }

    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn not_supported(
        field: impl Into<String>,
        value: &serde_json::Value,
        supported: &[serde_json::Value],
    ) -> Self {
        let list: Vec<String> = supported.iter().map(render_value).collect();
        Self {
            kind: FieldErrorKind::NotSupported,
            field: field.into(),
            message: format!(
                "Unsupported value: {}: supported values: {}",
                render_value(value),
                list.join(", ")
            ),
        }
    }

    /// `Forbidden: <detail>`.
    pub fn forbidden(field: impl Into<String>, detail: &str) -> Self {
        Self {
            kind: FieldErrorKind::Forbidden,
            field: field.into(),
            message: format!("Forbidden: {detail}"),
        }
    }

    /// `Too long: may not be more than N bytes` (strings) or `... items` (lists).
    pub fn too_long(field: impl Into<String>, detail: &str) -> Self {
        Self {
            kind: FieldErrorKind::TooLong,
            field: field.into(),
            message: format!("Too long: {detail}"),
        }
    }

    /// `Too many: N: must have at most M items`.
    pub fn too_many(field: impl Into<String>, actual: usize, max: u64) -> Self {
        Self {
            kind: FieldErrorKind::TooMany,
            field: field.into(),
            message: format!("Too many: {actual}: must have at most {max} items"),
        }
    }

    /// `Duplicate value: <value>`.
    pub fn duplicate(field: impl Into<String>, value: &serde_json::Value) -> Self {
        Self {
            kind: FieldErrorKind::Duplicate,
            field: field.into(),
            message: format!("Duplicate value: {}", render_value(value)),
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message)
    }
}

/// Values print as JSON (strings quoted), like Go's `%#v` on the decoded value.
pub fn render_value(value: &serde_json::Value) -> String {
    serde_json::to_string(value).unwrap_or_default()
}

/// Joins a parent path and a child key the way field paths print: `spec` + `replicas` → `spec.replicas`.
pub fn child_path(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_owned()
    } else {
        format!("{parent}.{key}")
    }
}

/// Appends a list index: `spec.items` + 3 → `spec.items[3]`.
pub fn index_path(parent: &str, index: usize) -> String {
    format!("{parent}[{index}]")
}
