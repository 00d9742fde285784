//! The HTTP front: authentication, body limits, routing a request to discovery, object verbs or a
//! watch, and rendering results and errors as the real API server does.

mod admin;
mod discovery;
mod jsonpath;
mod openapi;
pub mod request;
mod table;
mod watch;

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::Response;
use bytes::{BufMut, Bytes, BytesMut};
use http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use serde_json::{Value, json};
use tokio::sync::watch as signal;

use crate::error::ApiError;
use crate::faults::Faults;
use crate::query::{self, Filter, object_json};
use crate::registry::meta;
use crate::registry::ops::{self, DeleteOptions, Deleted, Target, WriteOptions, Written};
use crate::registry::resources::ResourceInfo;
use crate::registry::store::{Store, Stored};
use request::{Endpoint, Format, Query, ResourcePath};
use table::IncludeObject;

/// Request bodies above this are refused with 413, as kube-apiserver does (3 MiB).
pub const MAX_BODY_BYTES: usize = 3 * 1024 * 1024;

/// How much of a body beyond [`MAX_BODY_BYTES`] is read and dropped before refusing it.
const DISCARD_BYTES: usize = 256 * 1024;

/// Shared state of the HTTP front.
#[derive(Debug)]
pub struct App {
    pub store: Arc<Store>,
    /// Bearer token every request must carry, when set.
    pub token: Option<String>,
    /// `host:port` advertised in `/api`.
    pub server_address: String,
    /// Turns true when the server stops; open watches end.
    pub shutdown: signal::Receiver<bool>,
    /// Bumped to end every open watch (clients must reconnect).
    pub watch_epoch: signal::Sender<u64>,
    /// Whether the listener serves (false while a fault has stopped it). A level, not an edge:
    /// a watch that arrives while the listener is stopping ends too, or it would hold the
    /// graceful stop open forever.
    pub listening: signal::Sender<bool>,
    /// How often watches that asked for bookmarks get one.
    pub bookmark_interval: Duration,
    /// Injected failures and latency.
    pub faults: Arc<Faults>,
    /// Stops and restarts the listener (fault injection), served by the supervisor in `lib.rs`.
    pub control: tokio::sync::mpsc::Sender<crate::control::Control>,
    /// The `/version` document, built once from the configured Kubernetes version.
    pub version: Value,
    /// Requests received, answered or not (what a test reads to see a client's request rate).
    pub requests: std::sync::atomic::AtomicU64,
    /// What the server answers while it starts again after a restart.
    pub start_up: crate::startup::StartUp,
}

/// The axum router: everything goes through one handler, since Kubernetes paths are a grammar
/// of their own rather than a fixed route table.
pub fn router(app: Arc<App>) -> axum::Router {
    axum::Router::new().fallback(handle).with_state(app)
}

async fn handle(State(app): State<Arc<App>>, req: Request) -> Response {
    app.requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let (parts, body) = req.into_parts();
    if !authorized(&app, &parts.headers) && !public(&parts.method, parts.uri.path(), &parts.headers)
    {
        return error_response(&ApiError::unauthorized());
    }
    // A body over the limit is still read a little past it before the 413: answering at once and
    // closing on a client still sending makes it fail on a broken pipe (reliably over TLS) instead
    // of reading the 413. kube-apiserver reads up to its limit, and Go's server discards up to
    // 256 KiB more of an unread body before answering.
    let body = match axum::body::to_bytes(body, MAX_BODY_BYTES + DISCARD_BYTES).await {
        Ok(b) if b.len() <= MAX_BODY_BYTES => b,
        _ => return error_response(&ApiError::too_large(MAX_BODY_BYTES)),
    };
    let query = Query::parse(parts.uri.query());
    if let Some(response) =
        admin::handle(&app, &parts.method, parts.uri.path(), &query, &body).await
    {
        return response;
    }
    if let Some(response) = starting(&app, parts.uri.path()) {
        return response;
    }
    if let Some((verb, resource)) = verb_and_resource(&parts.method, parts.uri.path(), &query) {
        let decision = app.faults.decide(verb, &resource);
        if !decision.latency.is_zero() {
            app.faults.hold(verb, &resource, decision.latency).await;
        }
        if let Some(e) = decision.error {
            return error_response(&e);
        }
    }
    match dispatch(
        &app,
        &parts.method,
        parts.uri.path(),
        &query,
        &parts.headers,
        body,
    ) {
        Ok(response) => response,
        Err(e) => error_response(&e),
    }
}

/// What a server that is starting again answers instead of serving (see `crate::startup`): its
/// health endpoints fail, and custom resources are refused until their paths are installed.
fn starting(app: &App, path: &str) -> Option<Response> {
    match request::parse_path(path) {
        Endpoint::Health => {
            let endpoint = path
                .trim_start_matches('/')
                .split('/')
                .next()
                .unwrap_or("healthz");
            let body = app.start_up.failing_body(endpoint)?;
            let mut r = Response::new(Body::from(body));
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            Some(r)
        }
        Endpoint::Resource(rp) if app.start_up.custom_resources_pending() => {
            let custom = app
                .store
                .read()
                .registry
                .get(&rp.group, &rp.version, &rp.resource)
                .is_some_and(|info| info.crd.is_some());
            custom.then(|| error_response(&ApiError::paths_not_installed()))
        }
        _ => None,
    }
}

/// The Kubernetes verb and resource (`pods`, `pods/status`) of a resource request, for faults.
fn verb_and_resource(method: &Method, path: &str, query: &Query) -> Option<(&'static str, String)> {
    let Endpoint::Resource(rp) = request::parse_path(path) else {
        return None;
    };
    let watch = rp.legacy_watch || query.flag("watch");
    let verb = match (method.clone(), rp.name.is_some()) {
        (Method::GET, _) if watch => "watch",
        (Method::GET, true) => "get",
        (Method::GET, false) => "list",
        (Method::POST, _) => "create",
        (Method::PUT, _) => "update",
        (Method::PATCH, _) => "patch",
        (Method::DELETE, true) => "delete",
        (Method::DELETE, false) => "deletecollection",
        _ => return None,
    };
    let resource = match &rp.subresource {
        Some(sub) => format!("{}/{sub}", rp.resource),
        None => rp.resource,
    };
    Some((verb, resource))
}

fn authorized(app: &App, headers: &HeaderMap) -> bool {
    let Some(token) = &app.token else { return true };
    let given = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    given.is_some_and(|g| constant_time_eq(g.trim().as_bytes(), token.as_bytes()))
}

/// Paths a real cluster lets anyone read: the `system:public-info-viewer` ClusterRole, bound to
/// `system:unauthenticated`, grants `get` on exactly these (not `/healthz/ping`, not HEAD).
const PUBLIC_PATHS: &[&str] = &["/healthz", "/livez", "/readyz", "/version", "/version/"];

/// Whether an anonymous request may have `path`. Only a request with no credentials at all is
/// anonymous: a wrong token is refused with 401 even here, as kube-apiserver's authenticator does.
fn public(method: &Method, path: &str, headers: &HeaderMap) -> bool {
    method == Method::GET
        && !headers.contains_key(header::AUTHORIZATION)
        && PUBLIC_PATHS.contains(&path)
}

/// Compares secrets without leaking the matching prefix length through timing.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

pub(crate) fn json_response(code: StatusCode, body: Bytes) -> Response {
    let mut r = Response::new(Body::from(body));
    *r.status_mut() = code;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn value_response(code: StatusCode, value: &Value) -> Response {
    json_response(
        code,
        Bytes::from(serde_json::to_vec(value).unwrap_or_default()),
    )
}

/// A Status body with the error's code; one whose details carry `retryAfterSeconds` (a 429 or
/// 503) also says so in a `Retry-After` header, as kube-apiserver does.
pub fn error_response(e: &ApiError) -> Response {
    let code = StatusCode::from_u16(e.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = value_response(code, &e.to_status());
    if let Some(seconds) = e
        .details
        .as_ref()
        .and_then(|d| d.get("retryAfterSeconds"))
        .and_then(Value::as_u64)
    {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}

fn dispatch(
    app: &Arc<App>,
    method: &Method,
    path: &str,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let endpoint = request::parse_path(path);
    if !matches!(endpoint, Endpoint::Resource(_)) && method != Method::GET {
        return Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        ));
    }
    match endpoint {
        Endpoint::Version => Ok(value_response(StatusCode::OK, &app.version)),
        Endpoint::Health => {
            let mut r = Response::new(Body::from("ok"));
            r.headers_mut()
                .insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain"));
            Ok(r)
        }
        Endpoint::CoreVersions => Ok(value_response(
            StatusCode::OK,
            &discovery::core_versions(&app.server_address),
        )),
        Endpoint::Groups => Ok(value_response(
            StatusCode::OK,
            &discovery::groups(&app.store.read().registry),
        )),
        Endpoint::Group(g) => match discovery::group(&app.store.read().registry, &g) {
            Some(doc) => Ok(value_response(StatusCode::OK, &doc)),
            None => Ok(page_not_found()),
        },
        Endpoint::GroupVersion { group, version } => {
            if !serves_group(app, &group) {
                return Ok(page_not_found());
            }
            let doc = discovery::resource_list(&app.store.read().registry, &group, &version)
                .ok_or_else(ApiError::unknown_resource)?;
            Ok(value_response(StatusCode::OK, &doc))
        }
        Endpoint::OpenApiV3 => Ok(value_response(
            StatusCode::OK,
            &openapi::root(&app.store.read().registry),
        )),
        Endpoint::OpenApiV3GroupVersion { group, version } => {
            let Some(mut doc) =
                openapi::group_version(&app.store.read().registry, &group, &version)
            else {
                // The real server's OpenAPI handler answers an unknown group version with an
                // empty 404.
                let mut r = Response::new(Body::empty());
                *r.status_mut() = StatusCode::NOT_FOUND;
                return Ok(r);
            };
            // The same version `/version` reports, so clients that read either agree.
            doc["info"]["version"] = app.version["gitVersion"].clone();
            Ok(value_response(StatusCode::OK, &doc))
        }
        Endpoint::Unknown => Ok(page_not_found()),
        Endpoint::UnknownInGroup(group) if !serves_group(app, &group) => Ok(page_not_found()),
        Endpoint::UnknownInGroup(_) => Err(ApiError::unknown_resource()),
        Endpoint::Resource(rp) if !serves_group(app, &rp.group) => Ok(page_not_found()),
        Endpoint::Resource(rp) => {
            let warning = deprecation_warning(app, &rp);
            let response = resource(app, method, &rp, query, headers, body)
                .unwrap_or_else(|e| error_response(&e));
            Ok(with_warning(response, warning.as_deref()))
        }
    }
}

/// The warning of a request to a deprecated version of a custom resource: kube-apiserver adds it
/// to every answer from that version, errors included.
fn deprecation_warning(app: &App, rp: &ResourcePath) -> Option<String> {
    let store = app.store.read();
    let info = store.registry.get(&rp.group, &rp.version, &rp.resource)?;
    info.crd.as_ref()?.deprecation_warning.clone()
}

/// `response` with `Warning: 299 - "<text>"` (RFC 7234's form, as the real server sends it).
fn with_warning(mut response: Response, warning: Option<&str>) -> Response {
    if let Some(text) = warning {
        let value = format!("299 - {}", serde_json::to_string(text).unwrap_or_default());
        if let Ok(v) = HeaderValue::from_str(&value) {
            response.headers_mut().append(header::WARNING, v);
        }
    }
    response
}

/// Whether `group` is served at all: the real server's API handlers exist per group, so a path
/// under a group it does not serve (a CRD's group once the CRD is gone) falls through to the
/// mux's plain-text `404 page not found`, while an unknown resource or version of a served group
/// is a `Status`.
fn serves_group(app: &App, group: &str) -> bool {
    group.is_empty() || app.store.read().registry.serves_group(group)
}

/// The plain-text 404 of the real server's HTTP mux, for paths no API handler serves.
fn page_not_found() -> Response {
    let mut r = Response::new(Body::from("404 page not found\n"));
    *r.status_mut() = StatusCode::NOT_FOUND;
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    r
}

fn lookup(app: &App, rp: &ResourcePath) -> Result<Arc<ResourceInfo>, ApiError> {
    let info = app
        .store
        .read()
        .registry
        .get(&rp.group, &rp.version, &rp.resource)
        .ok_or_else(ApiError::unknown_resource)?;
    if rp.namespace.is_some() && !info.namespaced {
        return Err(ApiError::unknown_resource());
    }
    if let Some(ns) = &rp.namespace
        && let Some(problem) = meta::namespace_name_problems(ns).into_iter().next()
    {
        return Err(ApiError::bad_request(format!(
            "invalid namespace {ns:?}: {problem}"
        )));
    }
    Ok(info)
}

fn write_options(query: &Query, headers: &HeaderMap) -> Result<WriteOptions, ApiError> {
    Ok(WriteOptions {
        dry_run: query.dry_run()?,
        field_manager: request::field_manager(query, headers),
        field_validation: query.field_validation()?,
    })
}

fn resource(
    app: &Arc<App>,
    method: &Method,
    rp: &ResourcePath,
    query: &Query,
    headers: &HeaderMap,
    body: Bytes,
) -> Result<Response, ApiError> {
    let info = lookup(app, rp)?;
    let ns = rp.namespace.as_deref().unwrap_or("");
    let format = request::format(headers);
    let include = IncludeObject::parse(query.get("includeObject"));
    let target = match rp.subresource.as_deref() {
        None => Target::Main,
        Some("status") if info.has_status_subresource() => Target::Status,
        Some("finalize") if info.extra_subresources.contains(&"finalize") => Target::Finalize,
        Some("binding")
            if info.extra_subresources.contains(&"binding") && *method == Method::POST =>
        {
            let name = rp.name.as_deref().unwrap_or("");
            return bind_pod(app, &info, ns, name, headers, &body, query);
        }
        Some(_) => return Err(ApiError::unknown_resource()),
    };
    let wants_watch = rp.legacy_watch || query.flag("watch");
    match (method.clone(), rp.name.as_deref()) {
        (Method::GET, None) if wants_watch => watch(app, info, rp, query, format, include),
        (Method::GET, None) => list(app, &info, rp, query, format, include),
        (Method::GET, Some(name)) if wants_watch => {
            // The legacy per-object watch path is a watch with a name field selector.
            let mut q = query.clone();
            q.set("fieldSelector", &format!("metadata.name={name}"));
            watch(app, info, rp, &q, format, include)
        }
        (Method::GET, Some(name)) => {
            let stored = app
                .store
                .read()
                .get(
                    &info.storage_key,
                    if info.namespaced { ns } else { "" },
                    name,
                )
                .ok_or_else(|| ApiError::not_found(&info.group, &info.resource, name))?;
            Ok(object_response(
                &info,
                &stored,
                StatusCode::OK,
                format,
                include,
                &[],
            ))
        }
        (Method::POST, None) if target == Target::Main => {
            if info.namespaced && rp.namespace.is_none() {
                return Err(ApiError::unknown_resource());
            }
            let obj = request::decode_object(headers, &body)?;
            request::check_type(&obj, &info.api_version(), &info.kind)?;
            let opts = write_options(query, headers)?;
            let written = app.store.write(|s| ops::create(s, &info, ns, obj, &opts))?;
            Ok(written_response(&info, &written, format, include))
        }
        (Method::PUT, Some(name)) => {
            let obj = request::decode_object(headers, &body)?;
            request::check_type(&obj, &info.api_version(), &info.kind)?;
            let opts = write_options(query, headers)?;
            let written = app
                .store
                .write(|s| ops::update(s, &info, ns, name, obj, &opts, target))?;
            Ok(written_response(&info, &written, format, include))
        }
        (Method::PATCH, Some(name)) if target != Target::Finalize => {
            let (patch_type, patch) = request::decode_patch(headers, &body, query.flag("force"))?;
            let mut opts = write_options(query, headers)?;
            if matches!(patch_type, crate::patch::PatchType::Apply { .. }) {
                opts.field_manager = query.str("fieldManager").to_owned();
            } else if query.get("force").is_some() {
                let e = crate::field_error::FieldError::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                );
                return Err(ApiError::invalid("meta.k8s.io", "PatchOptions", "", &[e]));
            }
            let written = app
                .store
                .write(|s| ops::patch(s, &info, ns, name, patch_type, patch, &opts, target))?;
            Ok(written_response(&info, &written, format, include))
        }
        (Method::DELETE, Some(name)) if target == Target::Main => {
            let opts = delete_options(query, headers, &body)?;
            let outcome = app
                .store
                .write(|s| ops::delete(s, &info, ns, name, &opts))?;
            Ok(delete_response(&info, outcome))
        }
        (Method::DELETE, None) if target == Target::Main => {
            if info.resource == "namespaces" && info.group.is_empty() {
                return Err(ApiError::method_not_allowed(
                    "the server does not allow this method on the requested resource",
                ));
            }
            delete_collection(app, &info, rp, query, headers, &body)
        }
        _ => Err(ApiError::method_not_allowed(
            "the server does not allow this method on the requested resource",
        )),
    }
}

fn object_response(
    info: &ResourceInfo,
    stored: &Stored,
    code: StatusCode,
    format: Format,
    include: IncludeObject,
    warnings: &[String],
) -> Response {
    let mut r = match format {
        Format::Json => json_response(code, object_json(info, stored)),
        Format::Table => value_response(
            code,
            &table::table(info, &[stored], include, &stored.rv.to_string(), None),
        ),
    };
    for w in warnings {
        let text = format!("299 - {}", serde_json::to_string(w).unwrap_or_default());
        if let Ok(v) = HeaderValue::from_str(&text) {
            r.headers_mut().append(header::WARNING, v);
        }
    }
    r
}

fn written_response(
    info: &ResourceInfo,
    written: &Written,
    format: Format,
    include: IncludeObject,
) -> Response {
    let code = if written.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    object_response(
        info,
        &written.object,
        code,
        format,
        include,
        &written.warnings,
    )
}

fn delete_response(info: &ResourceInfo, outcome: Deleted) -> Response {
    match outcome {
        Deleted::Pending(obj) => json_response(StatusCode::OK, object_json(info, &obj)),
        Deleted::Now(obj) if info.delete_returns_object => {
            json_response(StatusCode::OK, object_json(info, &obj))
        }
        Deleted::Now(obj) => {
            let mut details = json!({"name": obj.name(), "kind": info.resource, "uid": meta::meta_str(&obj.value, "uid")});
            if !info.group.is_empty() {
                details["group"] = json!(info.group);
            }
            value_response(
                StatusCode::OK,
                &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}),
            )
        }
    }
}

fn filter_for(info: &ResourceInfo, rp: &ResourcePath, query: &Query) -> Result<Filter, ApiError> {
    Filter::new(
        info,
        rp.namespace.as_deref(),
        query.str("labelSelector"),
        query.str("fieldSelector"),
    )
}

fn list(
    app: &App,
    info: &ResourceInfo,
    rp: &ResourcePath,
    query: &Query,
    format: Format,
    include: IncludeObject,
) -> Result<Response, ApiError> {
    let filter = filter_for(info, rp, query)?;
    let limit = query.number("limit")?.and_then(|l| usize::try_from(l).ok());
    let page = query::list(
        &app.store.read(),
        info,
        &filter,
        limit,
        query.get("continue"),
    )?;
    let rv = page.resource_version.to_string();
    if format == Format::Table {
        let items: Vec<&Stored> = page.items.iter().map(AsRef::as_ref).collect();
        return Ok(value_response(
            StatusCode::OK,
            &table::table(info, &items, include, &rv, page.continue_token.as_deref()),
        ));
    }
    let mut metadata = json!({"resourceVersion": rv});
    if let Some(token) = &page.continue_token {
        metadata["continue"] = json!(token);
    }
    if let Some(remaining) = page.remaining {
        metadata["remainingItemCount"] = json!(remaining);
    }
    let head = json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": metadata});
    // Splice the cached item bytes into the list instead of re-serializing every object.
    let head = serde_json::to_vec(&head).unwrap_or_default();
    let mut buf = BytesMut::with_capacity(
        head.len() + page.items.iter().map(|i| i.json.len() + 1).sum::<usize>() + 16,
    );
    buf.put_slice(&head[..head.len().saturating_sub(1)]);
    buf.put_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            buf.put_u8(b',');
        }
        buf.put_slice(&object_json(info, item));
    }
    buf.put_slice(b"]}");
    Ok(json_response(StatusCode::OK, buf.freeze()))
}

fn watch(
    app: &Arc<App>,
    info: Arc<ResourceInfo>,
    rp: &ResourcePath,
    query: &Query,
    format: Format,
    include: IncludeObject,
) -> Result<Response, ApiError> {
    let filter = filter_for(&info, rp, query)?;
    let send_initial = query.flag("sendInitialEvents");
    let start = match query.str("resourceVersion") {
        _ if send_initial => watch::Start::Snapshot,
        "" | "0" => watch::Start::Snapshot,
        rv => watch::Start::After(
            rv.parse::<u64>()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv:?}")))?,
        ),
    };
    let timeout = query
        .number("timeoutSeconds")?
        .filter(|t| *t > 0)
        .map_or(Duration::from_secs(1800), |t| {
            Duration::from_secs(t.unsigned_abs())
        });
    let req = watch::WatchRequest {
        start,
        timeout,
        bookmarks: query.flag("allowWatchBookmarks"),
        initial_events_end: send_initial,
        format,
        include,
    };
    let mut r = Response::new(watch::stream(app.clone(), info, filter, req));
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r.headers_mut().insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    Ok(r)
}

fn delete_options(
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<DeleteOptions, ApiError> {
    let from_body = request::decode_delete_options(headers, body)?;
    let text = |field: &str| {
        from_body
            .get(field)
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let dry_run = query.dry_run()?
        || from_body
            .get("dryRun")
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(|v| v == "All"));
    let propagation = query
        .get("propagationPolicy")
        .map(str::to_owned)
        .or_else(|| text("propagationPolicy"));
    if let Some(p) = propagation.as_deref()
        && !matches!(p, "Orphan" | "Background" | "Foreground")
    {
        let supported = [
            json!("Foreground"),
            json!("Background"),
            json!("Orphan"),
            json!("nil"),
        ];
        let cause = crate::field_error::FieldError::not_supported(
            "propagationPolicy",
            &json!(p),
            &supported,
        );
        return Err(ApiError::invalid("", "DeleteOptions", "", &[cause]));
    }
    let orphan_flag = from_body.get("orphanDependents").and_then(Value::as_bool);
    Ok(DeleteOptions {
        dry_run,
        grace_period_seconds: query
            .number("gracePeriodSeconds")?
            .or_else(|| from_body.get("gracePeriodSeconds").and_then(Value::as_i64)),
        propagation: propagation.or_else(|| {
            orphan_flag.map(|o| {
                if o {
                    "Orphan".into()
                } else {
                    "Background".into()
                }
            })
        }),
        precondition_uid: from_body
            .pointer("/preconditions/uid")
            .and_then(Value::as_str)
            .map(str::to_owned),
        precondition_rv: from_body
            .pointer("/preconditions/resourceVersion")
            .and_then(Value::as_str)
            .map(str::to_owned),
    })
}

fn delete_collection(
    app: &App,
    info: &ResourceInfo,
    rp: &ResourcePath,
    query: &Query,
    headers: &HeaderMap,
    body: &Bytes,
) -> Result<Response, ApiError> {
    let filter = filter_for(info, rp, query)?;
    let opts = delete_options(query, headers, body)?;
    let items = app.store.write(|state| {
        let page = query::list(state, info, &filter, None, None)?;
        let mut out = Vec::new();
        for obj in page.items {
            match ops::delete(state, info, obj.namespace(), obj.name(), &opts) {
                Ok(Deleted::Now(o) | Deleted::Pending(o)) => out.push(o),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok::<_, ApiError>((out, state.rv()))
    })?;
    let (items, rv) = items;
    let values: Vec<Value> = items
        .iter()
        .map(|o| crate::registry::convert::from_storage(info, &o.value).into_owned())
        .collect();
    Ok(value_response(
        StatusCode::OK,
        &json!({"kind": format!("{}List", info.kind), "apiVersion": info.api_version(), "metadata": {"resourceVersion": rv.to_string()}, "items": values}),
    ))
}

/// `pods/{name}/binding`: assigns a pod to a node, once.
fn bind_pod(
    app: &App,
    info: &ResourceInfo,
    ns: &str,
    name: &str,
    headers: &HeaderMap,
    body: &Bytes,
    query: &Query,
) -> Result<Response, ApiError> {
    let binding = request::decode_object(headers, body)?;
    let node = binding
        .pointer("/target/name")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    if node.is_empty() {
        return Err(ApiError::invalid(
            "",
            "Binding",
            name,
            &[crate::field_error::FieldError::required("target.name", "")],
        ));
    }
    let opts = write_options(query, headers)?;
    app.store.write(|state| {
        let pod = state
            .get(&info.storage_key, ns, name)
            .ok_or_else(|| ApiError::not_found("", "pods", name))?;
        if let Some(current) = pod
            .value
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .filter(|n| !n.is_empty())
        {
            return Err(ApiError::conflict(
                "",
                "pods",
                name,
                &format!("pod {name} is already assigned to node {current:?}"),
            ));
        }
        let mut updated = pod.value.clone();
        meta::object_mut(&mut updated["spec"]).insert("nodeName".into(), json!(node));
        ops::update(state, info, ns, name, updated, &opts, Target::Main)
    })?;
    Ok(value_response(
        StatusCode::CREATED,
        &json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
    ))
}
