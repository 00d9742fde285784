//! Understanding a request: which endpoint the path names, its query parameters, and its body.

use std::collections::HashMap;

use bytes::Bytes;
use http::HeaderMap;
use serde_json::Value;

use crate::error::ApiError;
use crate::patch::{PATCH_MEDIA_TYPES, PatchType};
use crate::registry::ops::FieldValidation;

/// The endpoint a path names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Endpoint {
    Version,
    Health,
    /// `/api`
    CoreVersions,
    /// `/apis`
    Groups,
    /// `/apis/{group}`
    Group(String),
    /// `/api/v1` or `/apis/{group}/{version}`
    GroupVersion {
        group: String,
        version: String,
    },
    /// `/openapi/v3`: the index of per-group-version documents.
    OpenApiV3,
    /// `/openapi/v3/api/v1`, `/openapi/v3/apis/{group}/{version}`.
    OpenApiV3GroupVersion {
        group: String,
        version: String,
    },
    Resource(ResourcePath),
    /// A path under a group's prefix that names nothing that group serves.
    UnknownInGroup(String),
    Unknown,
}

/// A path under a group version naming a resource, maybe an object and a subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    pub group: String,
    pub version: String,
    pub namespace: Option<String>,
    pub resource: String,
    pub name: Option<String>,
    pub subresource: Option<String>,
    /// The legacy `/watch/` path prefix.
    pub legacy_watch: bool,
}

/// Subresources of a namespace object, which the path grammar must not read as resources.
const NAMESPACE_SUBRESOURCES: &[&str] = &["status", "finalize"];

/// Parses a request path.
pub fn parse_path(path: &str) -> Endpoint {
    let parts: Vec<&str> = path
        .trim_matches('/')
        .split('/')
        .filter(|s| !s.is_empty())
        .collect();
    match parts.as_slice() {
        ["version"] => Endpoint::Version,
        ["healthz" | "livez" | "readyz", ..] => Endpoint::Health,
        ["openapi", "v3"] => Endpoint::OpenApiV3,
        ["openapi", "v3", "api", version] => Endpoint::OpenApiV3GroupVersion {
            group: String::new(),
            version: (*version).to_owned(),
        },
        ["openapi", "v3", "apis", group, version] => Endpoint::OpenApiV3GroupVersion {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        },
        ["api"] => Endpoint::CoreVersions,
        ["apis"] => Endpoint::Groups,
        ["apis", group] => Endpoint::Group((*group).to_owned()),
        ["api", version] => Endpoint::GroupVersion {
            group: String::new(),
            version: (*version).to_owned(),
        },
        ["apis", group, version] => Endpoint::GroupVersion {
            group: (*group).to_owned(),
            version: (*version).to_owned(),
        },
        ["api", version, rest @ ..] => resource_path("", version, rest),
        ["apis", group, version, rest @ ..] => resource_path(group, version, rest),
        _ => Endpoint::Unknown,
    }
}

fn resource_path(group: &str, version: &str, rest: &[&str]) -> Endpoint {
    let (legacy_watch, rest) = match rest {
        ["watch", tail @ ..] => (true, tail),
        _ => (false, rest),
    };
    let owned = |s: &&str| (*s).to_owned();
    let mut path = ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace: None,
        resource: String::new(),
        name: None,
        subresource: None,
        legacy_watch,
    };
    let tail: &[&str] = match rest {
        ["namespaces", ns, sub] if NAMESPACE_SUBRESOURCES.contains(sub) => {
            path.resource = "namespaces".into();
            path.name = Some((*ns).to_owned());
            path.subresource = Some((*sub).to_owned());
            return Endpoint::Resource(path);
        }
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => {
            path.namespace = Some((*ns).to_owned());
            tail
        }
        other => other,
    };
    match tail {
        [resource] => path.resource = owned(resource),
        [resource, name] => {
            path.resource = owned(resource);
            path.name = Some(owned(name));
        }
        [resource, name, sub] => {
            path.resource = owned(resource);
            path.name = Some(owned(name));
            path.subresource = Some(owned(sub));
        }
        _ => return Endpoint::UnknownInGroup(path.group),
    }
    Endpoint::Resource(path)
}

/// Query parameters, last value wins.
#[derive(Debug, Clone, Default)]
pub struct Query(HashMap<String, String>);

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        Self(
            form_urlencoded::parse(raw.unwrap_or("").as_bytes())
                .into_owned()
                .collect(),
        )
    }

    /// Overrides a parameter.
    pub fn set(&mut self, key: &str, value: &str) {
        self.0.insert(key.to_owned(), value.to_owned());
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn str(&self, key: &str) -> &str {
        self.get(key).unwrap_or("")
    }

    /// A boolean parameter as Go's strconv.ParseBool reads it.
    pub fn flag(&self, key: &str) -> bool {
        matches!(
            self.get(key),
            Some("true" | "1" | "t" | "T" | "TRUE" | "True")
        )
    }

    /// A numeric parameter; a malformed one is a 400.
    pub fn number(&self, key: &str) -> Result<Option<i64>, ApiError> {
        match self.get(key).filter(|v| !v.is_empty()) {
            None => Ok(None),
            Some(v) => v
                .parse::<i64>()
                .map(Some)
                .map_err(|_| ApiError::bad_request(format!("invalid value for {key}: {v:?}"))),
        }
    }

    /// `dryRun=All`; any other value is rejected like the real server does.
    pub fn dry_run(&self) -> Result<bool, ApiError> {
        match self.get("dryRun") {
            None | Some("") => Ok(false),
            Some("All") => Ok(true),
            Some(other) => Err(ApiError::bad_request(format!(
                "Invalid dry run option {other:?}: only All is supported"
            ))),
        }
    }

    /// `fieldValidation`: Ignore, Warn (the default) or Strict.
    pub fn field_validation(&self) -> Result<FieldValidation, ApiError> {
        match self.get("fieldValidation") {
            None | Some("") | Some("Warn") => Ok(FieldValidation::Warn),
            Some("Ignore") => Ok(FieldValidation::Ignore),
            Some("Strict") => Ok(FieldValidation::Strict),
            Some(other) => Err(ApiError::bad_request(format!(
                "fieldValidation must be one of Ignore, Warn or Strict, got {other:?}"
            ))),
        }
    }
}

/// The field manager of a non-apply write: the `fieldManager` parameter, else the user agent's
/// program name, as the real server derives it.
pub fn field_manager(query: &Query, headers: &HeaderMap) -> String {
    if let Some(m) = query.get("fieldManager").filter(|m| !m.is_empty()) {
        return m.to_owned();
    }
    let agent = headers
        .get(http::header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("unknown");
    agent.split('/').next().unwrap_or("unknown").to_owned()
}

fn content_type(headers: &HeaderMap) -> String {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            v.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
        .unwrap_or_default()
}

/// Media types of create and update bodies.
pub const OBJECT_MEDIA_TYPES: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

/// Decodes a create/update body (JSON, YAML or kubectl's protobuf) into an object.
pub fn decode_object(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    let ct = content_type(headers);
    let value = match ct.as_str() {
        "" | "application/json" | "*/*" => decode_json(body)?,
        "application/yaml" | "application/x-yaml" | "text/yaml" => decode_yaml(body)?,
        // kubectl's typed `create` generators send protobuf.
        "application/vnd.kubernetes.protobuf" => crate::wire::decode(body).map_err(|e| {
            if e.starts_with("unsupported protobuf kind") {
                ApiError::unsupported_media_type(&["application/json", "application/yaml"])
            } else {
                ApiError::bad_request(e)
            }
        })?,
        _ => return Err(ApiError::unsupported_media_type(OBJECT_MEDIA_TYPES)),
    };
    if !value.is_object() {
        return Err(ApiError::bad_request(
            "the body of the request must be an object",
        ));
    }
    Ok(value)
}

/// Decodes a DELETE / deletecollection body (DeleteOptions): JSON, or protobuf as client-go's typed
/// clients send it (Helm purging its release Secrets, for one). An empty body is no options.
pub fn decode_delete_options(headers: &HeaderMap, body: &Bytes) -> Result<Value, ApiError> {
    if body.is_empty() {
        return Ok(Value::Object(serde_json::Map::new()));
    }
    let undecodable =
        |e: String| ApiError::bad_request(format!("couldn't decode DeleteOptions: {e}"));
    if content_type(headers) == "application/vnd.kubernetes.protobuf" {
        let value = crate::wire::decode(body).map_err(undecodable)?;
        let kind = value.get("kind").and_then(Value::as_str).unwrap_or("");
        if kind != "DeleteOptions" {
            return Err(undecodable(format!(
                "expected kind DeleteOptions, got {kind:?}"
            )));
        }
        return Ok(value);
    }
    serde_json::from_slice(body).map_err(|e| undecodable(e.to_string()))
}

/// Decodes a PATCH body and tells its flavour from the Content-Type.
pub fn decode_patch(
    headers: &HeaderMap,
    body: &Bytes,
    force: bool,
) -> Result<(PatchType, Value), ApiError> {
    let ct = content_type(headers);
    let patch_type = match ct.as_str() {
        "application/json-patch+json" => PatchType::Json,
        "application/merge-patch+json" => PatchType::Merge,
        "application/strategic-merge-patch+json" => PatchType::Strategic,
        "application/apply-patch+yaml" | "application/apply-patch+json" => {
            PatchType::Apply { force }
        }
        _ => return Err(ApiError::unsupported_media_type(PATCH_MEDIA_TYPES)),
    };
    let value = if matches!(patch_type, PatchType::Apply { .. }) {
        decode_yaml(body)?
    } else {
        decode_json(body)?
    };
    let shape_ok = match patch_type {
        PatchType::Json => value.is_array(),
        _ => value.is_object(),
    };
    if !shape_ok {
        return Err(ApiError::bad_request(match patch_type {
            PatchType::Json => "json patch must be a list of operations",
            _ => "the patch must be a JSON object",
        }));
    }
    Ok((patch_type, value))
}

fn decode_json(body: &Bytes) -> Result<Value, ApiError> {
    serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })
}

fn decode_yaml(body: &Bytes) -> Result<Value, ApiError> {
    let text = std::str::from_utf8(body)
        .map_err(|_| ApiError::bad_request("the body is not valid UTF-8"))?;
    serde_saphyr::from_str::<Value>(text)
        .map_err(|e| ApiError::bad_request(format!("error converting YAML to JSON: {e}")))
}

/// Checks a create/update body's apiVersion and kind against the endpoint.
pub fn check_type(body: &Value, api_version: &str, kind: &str) -> Result<(), ApiError> {
    let body_kind = body.get("kind").and_then(Value::as_str).unwrap_or("");
    let body_version = body.get("apiVersion").and_then(Value::as_str).unwrap_or("");
    if body_kind.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Object 'Kind' is missing in '{body}'"
        )));
    }
    if body_version.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Object 'apiVersion' is missing in '{body}'"
        )));
    }
    if body_version != api_version {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({body_version}) does not match the expected API version ({api_version})"
        )));
    }
    if body_kind != kind {
        let version = api_version.rsplit('/').next().unwrap_or(api_version);
        return Err(ApiError::bad_request(format!(
            "{body_kind} in version \"{version}\" cannot be handled as a {kind}: converting ({version}.{body_kind}) to ({version}.{kind}): unknown conversion"
        )));
    }
    Ok(())
}

/// What the client wants back: plain JSON or a server-side Table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Json,
    Table,
}

/// Picks the response format from the Accept header (kubectl asks for Tables).
pub fn format(headers: &HeaderMap) -> Format {
    let accept = headers
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let first = accept.split(',').next().unwrap_or("");
    if first.contains("as=Table") {
        Format::Table
    } else {
        Format::Json
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(p: &str) -> ResourcePath {
        match parse_path(p) {
            Endpoint::Resource(r) => r,
            other => panic!("{p}: {other:?}"),
        }
    }

    #[test]
    fn paths_parse_like_the_request_info_factory() {
        let r = res("/api/v1/namespaces/default/pods/web/status");
        assert_eq!(
            (
                r.namespace.as_deref(),
                r.resource.as_str(),
                r.name.as_deref(),
                r.subresource.as_deref()
            ),
            (Some("default"), "pods", Some("web"), Some("status"))
        );
        let r = res("/api/v1/namespaces/team");
        assert_eq!(
            (r.namespace, r.resource.as_str(), r.name.as_deref()),
            (None, "namespaces", Some("team"))
        );
        let r = res("/api/v1/namespaces/team/finalize");
        assert_eq!(
            (r.resource.as_str(), r.subresource.as_deref()),
            ("namespaces", Some("finalize"))
        );
        let r = res("/apis/apps/v1/deployments");
        assert_eq!((r.group.as_str(), r.namespace), ("apps", None));
        let r = res("/api/v1/watch/namespaces/a/configmaps");
        assert!(r.legacy_watch);
        assert_eq!(parse_path("/apis/apps"), Endpoint::Group("apps".into()));
        assert_eq!(
            parse_path("/api/v1/a/b/c/d"),
            Endpoint::UnknownInGroup(String::new())
        );
        assert_eq!(parse_path("/metrics/x"), Endpoint::Unknown);
    }

    #[test]
    fn type_checks_name_the_problem() {
        let body = serde_json::json!({"apiVersion": "v2", "kind": "ConfigMap"});
        let e = check_type(&body, "v1", "ConfigMap").expect_err("mismatch");
        assert!(
            e.message
                .contains("does not match the expected API version (v1)")
        );
    }
}
