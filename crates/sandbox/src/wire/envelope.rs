//! The outside of a Kubernetes protobuf body: the `k8s\0` magic and the `runtime.Unknown`
//! envelope naming the kind, whose raw bytes hold the typed message.

use serde_json::{Map, Value};

use super::decode::decode_message;
use super::kinds::lookup_kind;
use super::reader::{Reader, read_len, read_string, unknown_field};

/// Prefix of every Kubernetes protobuf payload.
pub(super) const MAGIC: &[u8] = b"k8s\0";

/// The only `contentType` accepted inside the envelope (an empty one means the same thing).
const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Decodes a Kubernetes protobuf request body (the "k8s\0" magic followed by a runtime.Unknown envelope whose
/// typeMeta gives apiVersion and kind and whose raw bytes are the typed message) into the object's JSON form,
/// including "apiVersion" and "kind". Errors (unknown kind, malformed bytes, unknown field number in a known message)
/// return a message the caller turns into 415/400.
///
/// An error for a kind this module has no schema for starts with `unsupported protobuf kind` (suited to
/// 415); every other error starts with `invalid protobuf body` (suited to 400).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body
        .strip_prefix(MAGIC)
        .ok_or_else(|| "invalid protobuf body: missing the k8s\\0 magic prefix".to_string())?;
    let envelope = parse_envelope(rest).map_err(|e| format!("invalid protobuf body: {e}"))?;
    let root = lookup_kind(&envelope.api_version, &envelope.kind).ok_or_else(|| {
        format!(
            "unsupported protobuf kind {:?} in apiVersion {:?}",
            envelope.kind, envelope.api_version
        )
    })?;
    let mut out = Map::new();
    out.insert(
        "apiVersion".to_string(),
        Value::String(envelope.api_version),
    );
    out.insert("kind".to_string(), Value::String(envelope.kind));
    decode_message(envelope.raw, root, 0, &mut out)
        .map_err(|e| format!("invalid protobuf body: {e}"))?;
    Ok(Value::Object(out))
}

/// The parts of `runtime.Unknown` the decoder needs.
pub(super) struct Envelope<'a> {
    pub(super) api_version: String,
    pub(super) kind: String,
    pub(super) raw: &'a [u8],
}

/// Parses `runtime.Unknown` {typeMeta = 1, raw = 2, contentEncoding = 3, contentType = 4}.
fn parse_envelope(bytes: &[u8]) -> Result<Envelope<'_>, String> {
    let mut env = Envelope {
        api_version: String::new(),
        kind: String::new(),
        raw: &[],
    };
    let mut reader = Reader::new(bytes);
    while let Some((field, wire)) = reader.key()? {
        match field {
            1 => parse_type_meta(read_len(&mut reader, wire)?, &mut env)?,
            2 => env.raw = read_len(&mut reader, wire)?,
            3 => {
                // A compressed payload would need a decompressor; clients never send one today.
                let encoding = read_string(&mut reader, wire)?;
                if !encoding.is_empty() {
                    return Err(format!("content encoding {encoding:?} is not supported"));
                }
            }
            4 => {
                let content_type = read_string(&mut reader, wire)?;
                if !content_type.is_empty() && content_type != PROTOBUF_CONTENT_TYPE {
                    return Err(format!(
                        "embedded content type {content_type:?} is not supported"
                    ));
                }
            }
            _ => return Err(unknown_field("runtime.Unknown", field)),
        }
    }
    Ok(env)
}

/// Parses `runtime.TypeMeta` {apiVersion = 1, kind = 2}.
fn parse_type_meta(bytes: &[u8], env: &mut Envelope<'_>) -> Result<(), String> {
    let mut reader = Reader::new(bytes);
    while let Some((field, wire)) = reader.key()? {
        match field {
            1 => env.api_version = read_string(&mut reader, wire)?,
            2 => env.kind = read_string(&mut reader, wire)?,
            _ => return Err(unknown_field("runtime.TypeMeta", field)),
        }
    }
    Ok(())
}
