//! API errors, rendered as `kind: Status` objects with the code and reason the real server uses.

use serde_json::{Value, json};

use crate::field_error::FieldError;

/// A failed request: becomes a `Status` body with `code`, `reason`, `message` and `details`.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub code: u16,
    pub reason: &'static str,
    pub message: String,
    pub details: Option<Value>,
}

/// `details` of a Status: which object the error is about.
fn details(name: &str, group: &str, kind: &str) -> Value {
    let mut d = serde_json::Map::new();
    if !name.is_empty() {
        d.insert("name".into(), json!(name));
    }
    if !group.is_empty() {
        d.insert("group".into(), json!(group));
    }
    d.insert("kind".into(), json!(kind));
    Value::Object(d)
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason,
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, details: Value) -> Self {
        self.details = Some(details);
        self
    }

    /// 404: `configmaps "x" not found`.
    pub fn not_found(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(404, "NotFound", format!("{qualified} \"{name}\" not found"))
            .with_details(details(name, group, resource))
    }

    /// 404 for a path that names no resource the server knows.
    pub fn unknown_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
        .with_details(json!({}))
    }

    /// 409: `configmaps "x" already exists`.
    pub fn already_exists(group: &str, resource: &str, name: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            409,
            "AlreadyExists",
            format!("{qualified} \"{name}\" already exists"),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 Conflict on a stale resourceVersion or a failed precondition.
    pub fn conflict(group: &str, resource: &str, name: &str, why: &str) -> Self {
        let qualified = qualified(group, resource);
        Self::new(
            409,
            "Conflict",
            format!("Operation cannot be fulfilled on {qualified} \"{name}\": {why}"),
        )
        .with_details(details(name, group, resource))
    }

    /// 409 Conflict with a ready-made message (server-side apply conflicts).
    pub fn conflict_with_causes(
        group: &str,
        resource: &str,
        name: &str,
        message: String,
        causes: Vec<Value>,
    ) -> Self {
        let mut d = details(name, group, resource);
        d["causes"] = Value::Array(causes);
        Self::new(409, "Conflict", message).with_details(d)
    }

    /// The standard stale-write conflict.
    pub fn stale(group: &str, resource: &str, name: &str) -> Self {
        Self::conflict(
            group,
            resource,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 422 Invalid: `ConfigMap "x" is invalid: metadata.name: Invalid value: ...` with one cause per field.
    pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Self {
        let summary = match errors {
            [one] => one.to_string(),
            many => format!(
                "[{}]",
                many.iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        let causes: Vec<Value> = errors
            .iter()
            .map(|e| json!({"reason": e.kind.reason(), "message": e.message, "field": e.field}))
            .collect();
        let mut d = details(name, group, kind);
        d["causes"] = Value::Array(causes);
        let kind_text = if group.is_empty() {
            kind.to_owned()
        } else {
            format!("{kind}.{group}")
        };
        Self::new(
            422,
            "Invalid",
            format!("{kind_text} \"{name}\" is invalid: {summary}"),
        )
        .with_details(d)
    }

    /// 400 BadRequest.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    /// 410 Expired, for watches and continue tokens older than the retained window.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Self::new(405, "MethodNotAllowed", message)
    }

    /// 413 RequestEntityTooLarge.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    /// 415 for a body media type the endpoint does not take, listing those it does, as the
    /// real server words it.
    pub fn unsupported_media_type(accepted: &[&str]) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format - accepted media types include: {}",
                accepted.join(", ")
            ),
        )
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized")
    }

    /// 403 Forbidden with a message.
    pub fn forbidden(group: &str, resource: &str, name: &str, message: impl Into<String>) -> Self {
        Self::new(403, "Forbidden", message).with_details(details(name, group, resource))
    }

    /// 500, for failures the client cannot fix (never expected; never a panic).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// What a starting kube-apiserver answers for a custom resource (see `crate::startup`).
    pub fn paths_not_installed() -> Self {
        let mut e = Self::new(
            503,
            "ServiceUnavailable",
            crate::startup::PATHS_NOT_INSTALLED,
        );
        e.details = Some(json!({"retryAfterSeconds": crate::startup::PATHS_RETRY_AFTER}));
        e
    }

    /// An error with any code, used by fault injection.
    pub fn with_code(code: u16, message: impl Into<String>) -> Self {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Expired",
            422 => "Invalid",
            429 => "TooManyRequests",
            500 => "InternalError",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "",
        };
        Self::new(code, reason, message)
    }

    /// The `Status` object sent to clients.
    pub fn to_status(&self) -> Value {
        let mut status = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            status["details"] = d.clone();
        }
        status
    }
}

/// `configmaps` or `deployments.apps`, as the server names a resource in messages.
pub fn qualified(group: &str, resource: &str) -> String {
    if group.is_empty() {
        resource.to_owned()
    } else {
        format!("{resource}.{group}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_names_group_and_resource() {
        let e = ApiError::not_found("apps", "deployments", "web");
        assert_eq!(e.message, "deployments.apps \"web\" not found");
        let s = e.to_status();
        assert_eq!(s["code"], 404);
        assert_eq!(s["reason"], "NotFound");
        assert_eq!(s["details"]["kind"], "deployments");
    }

    #[test]
    fn invalid_lists_every_cause() {
        let errs = vec![
            FieldError::required("spec.a", ""),
            FieldError::invalid("spec.b", &json!(3), "must be even"),
        ];
        let e = ApiError::invalid("", "ConfigMap", "x", &errs);
        assert_eq!(e.code, 422);
        assert_eq!(
            e.message,
            "ConfigMap \"x\" is invalid: [spec.a: Required value, spec.b: Invalid value: 3: must be even]"
        );
        assert_eq!(e.to_status()["details"]["causes"][1]["field"], "spec.b");
    }
}
