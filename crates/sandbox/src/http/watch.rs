//! `?watch=true`: a chunked stream of JSON lines, one watch event each.
//!
//! A watch replays current state (resourceVersion "" or "0", or sendInitialEvents) or resumes after
//! a given resourceVersion, then follows the store's event log from its own cursor. Events are
//! filtered per watcher; an object that stops matching a selector is sent as DELETED and one that
//! starts matching as ADDED, as the real watch cache does. A cursor older than the log ends the
//! watch with a 410 Expired ERROR event.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::App;
use super::request::Format;
use super::table::{self, IncludeObject};
use crate::error::ApiError;
use crate::query::{Filter, object_json};
use crate::registry::resources::ResourceInfo;
use crate::registry::store::{EventType, Stored};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Replay the current state as ADDED, then follow.
    Snapshot,
    /// Follow from after this resourceVersion.
    After(u64),
}

/// A parsed watch request.
#[derive(Debug, Clone)]
pub struct WatchRequest {
    pub start: Start,
    pub timeout: Duration,
    pub bookmarks: bool,
    /// `sendInitialEvents=true`: end the replay with an initial-events-end BOOKMARK.
    pub initial_events_end: bool,
    pub format: Format,
    pub include: IncludeObject,
}

/// Most events one wake-up sends, so one watcher cannot hold the lock for long.
const BATCH: usize = 2_000;

/// Starts streaming; the body ends on timeout, shutdown, a stopped listener, a closed-watches
/// fault, or expiry.
pub fn stream(app: Arc<App>, info: Arc<ResourceInfo>, filter: Filter, req: WatchRequest) -> Body {
    let (tx, rx) = mpsc::channel::<Bytes>(16);
    tokio::spawn(async move {
        // Levels, checked whatever the watch is doing (a stalled send included): a server that
        // stops waits for its open requests, so a watch must never outlive it.
        let mut shutdown = app.shutdown.clone();
        let mut listening = app.listening.subscribe();
        tokio::select! {
            _ = run(&app, &info, &filter, &req, &tx) => {}
            _ = shutdown.wait_for(|stop| *stop) => {}
            _ = listening.wait_for(|serving| !*serving) => {}
        }
    });
    let chunks = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<_, Infallible>(b), rx))
    });
    Body::from_stream(chunks)
}

/// Reports that the client went away.
struct Gone;

async fn run(
    app: &App,
    info: &ResourceInfo,
    filter: &Filter,
    req: &WatchRequest,
    tx: &mpsc::Sender<Bytes>,
) -> Result<(), Gone> {
    let mut changes = app.store.subscribe();
    let mut epoch = app.watch_epoch.subscribe();
    epoch.mark_unchanged();
    let deadline = tokio::time::Instant::now() + req.timeout;
    let mut cursor = match req.start {
        Start::After(rv) => rv,
        Start::Snapshot => {
            let (lines, rv) = {
                let state = app.store.read();
                let mut buf = BytesMut::new();
                for obj in state.range(&info.storage_key, filter.namespace.as_deref(), None) {
                    if filter.matches(&obj.value) {
                        write_event(&mut buf, "ADDED", info, obj, req);
                    }
                }
                (buf.freeze(), state.rv())
            };
            send_held(app, info, tx, lines).await?;
            rv
        }
    };
    if req.initial_events_end {
        send_held(app, info, tx, bookmark(info, cursor, true)).await?;
    }
    let mut bookmark_timer = tokio::time::interval(app.bookmark_interval);
    bookmark_timer.tick().await;
    loop {
        changes.mark_unchanged();
        let batch = next_batch(app, info, filter, req, cursor);
        match batch {
            Err(expired) => {
                let _ = send_held(app, info, tx, expired).await;
                return Ok(());
            }
            Ok((lines, next)) => {
                let had_more = next != cursor;
                cursor = next;
                if !lines.is_empty() {
                    send_held(app, info, tx, lines).await?;
                }
                if had_more {
                    continue;
                }
            }
        }
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return Ok(()) },
            _ = tokio::time::sleep_until(deadline) => return Ok(()),
            _ = epoch.changed() => return Ok(()),
            _ = tx.closed() => return Err(Gone),
            _ = bookmark_timer.tick(), if req.bookmarks => send_held(app, info, tx, bookmark(info, cursor, false)).await?,
        }
    }
}

/// The next events after `cursor` as lines, and the new cursor; or the 410 ERROR line.
fn next_batch(
    app: &App,
    info: &ResourceInfo,
    filter: &Filter,
    req: &WatchRequest,
    cursor: u64,
) -> Result<(Bytes, u64), Bytes> {
    let state = app.store.read();
    let (events, next) = state
        .events_after(&info.storage_key, cursor, BATCH)
        .map_err(|e| {
            let status =
                ApiError::expired(format!("too old resource version: {cursor} ({})", e.oldest))
                    .to_status();
            line("ERROR", &serde_json::to_vec(&status).unwrap_or_default())
        })?;
    drop(state);
    let mut buf = BytesMut::new();
    for e in &events {
        let now = filter.matches(&e.object.value);
        let before = e
            .previous
            .as_ref()
            .is_some_and(|p| filter.matches(&p.value));
        let kind = match (e.kind, before, now) {
            (EventType::Added, _, true) => "ADDED",
            (EventType::Modified, true, true) => "MODIFIED",
            (EventType::Modified, false, true) => "ADDED",
            (EventType::Modified, true, false) => {
                // It left the selection: the watch cache reports its last matching state, at
                // the resourceVersion of the change.
                if let Some(previous) = &e.previous {
                    let mut last = previous.value.clone();
                    crate::registry::meta::set_meta(
                        &mut last,
                        "resourceVersion",
                        json!(e.rv.to_string()),
                    );
                    write_event(&mut buf, "DELETED", info, &Stored::new(last, e.rv), req);
                }
                continue;
            }
            (EventType::Deleted, true, _) => "DELETED",
            _ => continue,
        };
        write_event(&mut buf, kind, info, &e.object, req);
    }
    Ok((buf.freeze(), next))
}

/// [`send`], held back while a fault stalls this resource's watches (nothing is sent, nothing
/// closes; a client that gives up is still noticed).
async fn send_held(
    app: &App,
    info: &ResourceInfo,
    tx: &mpsc::Sender<Bytes>,
    bytes: Bytes,
) -> Result<(), Gone> {
    if app.faults.watches_stalled(&info.resource) {
        tokio::select! {
            _ = app.faults.wait_while_watches_stalled(&info.resource) => {}
            _ = tx.closed() => return Err(Gone),
        }
    }
    send(tx, bytes).await
}

async fn send(tx: &mpsc::Sender<Bytes>, bytes: Bytes) -> Result<(), Gone> {
    if bytes.is_empty() {
        return Ok(());
    }
    tx.send(bytes).await.map_err(|_| Gone)
}

fn line(kind: &str, object: &[u8]) -> Bytes {
    let mut buf = BytesMut::with_capacity(object.len() + 32);
    put_line(&mut buf, kind, object);
    buf.freeze()
}

fn put_line(buf: &mut BytesMut, kind: &str, object: &[u8]) {
    buf.put_slice(b"{\"type\":\"");
    buf.put_slice(kind.as_bytes());
    buf.put_slice(b"\",\"object\":");
    buf.put_slice(object);
    buf.put_slice(b"}\n");
}

fn write_event(
    buf: &mut BytesMut,
    kind: &str,
    info: &ResourceInfo,
    obj: &Stored,
    req: &WatchRequest,
) {
    match req.format {
        Format::Json => put_line(buf, kind, &object_json(info, obj)),
        Format::Table => {
            let rv = obj.rv.to_string();
            let t = table::table(info, &[obj], req.include, &rv, None);
            put_line(buf, kind, &serde_json::to_vec(&t).unwrap_or_default());
        }
    }
}

fn bookmark(info: &ResourceInfo, rv: u64, initial_events_end: bool) -> Bytes {
    let mut metadata = json!({"resourceVersion": rv.to_string(), "creationTimestamp": Value::Null});
    if initial_events_end {
        metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
    }
    let object = json!({"kind": info.kind, "apiVersion": info.api_version(), "metadata": metadata});
    line("BOOKMARK", &serde_json::to_vec(&object).unwrap_or_default())
}
