//! The sandbox's own admin endpoint, under `/vigil-sandbox/v1/` (a prefix no Kubernetes path
//! uses), for fault injection from outside the process:
//!
//! | request | effect |
//! |---|---|
//! | `GET faults` | the active rules |
//! | `POST faults` (body: a [`Fault`](crate::faults::Fault) as JSON) | adds a rule |
//! | `DELETE faults` | clears every rule |
//! | `POST close-watches` | ends every open watch |
//! | `POST compact?keep=N` | keeps only the newest N events (older watches get 410) |
//! | `POST restart?downMillis=N` | stops listening, waits N ms, listens again on the same address |
//!
//! It is behind the same bearer token as the API, and the sandbox only listens on loopback.

use std::time::Duration;

use axum::response::Response;
use bytes::Bytes;
use http::{Method, StatusCode};
use serde_json::json;

use super::{App, error_response, request::Query, value_response};
use crate::error::ApiError;
use crate::faults::Fault;

/// The admin path prefix.
pub const PREFIX: &str = "/vigil-sandbox/v1/";

/// Handles an admin request, or returns None for any other path.
pub async fn handle(
    app: &App,
    method: &Method,
    path: &str,
    query: &Query,
    body: &Bytes,
) -> Option<Response> {
    let action = path.strip_prefix(PREFIX)?;
    let ok = |what: &str| value_response(StatusCode::OK, &json!({"ok": what}));
    Some(match (method.clone(), action) {
        (Method::GET, "faults") => value_response(StatusCode::OK, &json!(app.faults.list())),
        (Method::POST, "faults") => match serde_json::from_slice::<Fault>(body) {
            Ok(fault) => {
                app.faults.add(fault);
                ok("fault added")
            }
            Err(e) => error_response(&ApiError::bad_request(format!("invalid fault: {e}"))),
        },
        (Method::DELETE, "faults") => {
            app.faults.clear();
            ok("faults cleared")
        }
        (Method::POST, "close-watches") => {
            app.watch_epoch.send_modify(|e| *e += 1);
            ok("watches closed")
        }
        (Method::POST, "compact") => match query.number("keep") {
            Ok(keep) => {
                let keep = keep.and_then(|k| usize::try_from(k).ok()).unwrap_or(0);
                app.store.write(|s| s.compact(keep));
                ok("event window compacted")
            }
            Err(e) => error_response(&e),
        },
        (Method::POST, "restart") => match query.number("downMillis") {
            Ok(down) => {
                let down =
                    Duration::from_millis(down.and_then(|d| u64::try_from(d).ok()).unwrap_or(0));
                let control = app.control.clone();
                // Answer first: the restart closes this very connection.
                tokio::spawn(async move { crate::control::restart_via(&control, down).await });
                value_response(StatusCode::ACCEPTED, &json!({"ok": "restarting"}))
            }
            Err(e) => error_response(&e),
        },
        _ => error_response(&ApiError::unknown_resource()),
    })
}
