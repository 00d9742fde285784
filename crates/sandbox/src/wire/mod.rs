//! Decoding of Kubernetes protobuf request bodies into the JSON the sandbox stores.
//!
//! kubectl's typed generators (`kubectl create deployment`, `kubectl run`, ...) POST built-in objects as
//! `application/vnd.kubernetes.protobuf`: the 4-byte magic `k8s\0` followed by a `runtime.Unknown`
//! envelope whose `typeMeta` names the kind and whose `raw` bytes hold the typed message. The store
//! only understands JSON, so [`decode`] turns those bytes into exactly the JSON object Go's
//! `encoding/json` would produce for the same value.
//!
//! The decoder is driven by static schema tables: one [`Message`] per protobuf message, listing
//! (field number, JSON name, shape). Field numbers come from the upstream `generated.proto` files
//! (kubernetes/api and kubernetes/apimachinery); JSON names and presence rules come from the Go
//! `json` tags. A field number missing from a table is an error naming the message and number, so a
//! gap shows up as a clear rejection instead of silently dropped data.
//!
//! Presence needs care. gogo-generated marshalers write every non-pointer field unconditionally (an
//! empty `Name` is still on the wire), so wire presence alone does not say what Go's JSON would
//! contain. Each scalar field therefore records whether its Go type is a non-pointer with
//! `omitempty` (zero values are dropped, as Go would) or not (pointers and tag-without-`omitempty`
//! fields keep whatever value is on the wire, zero included). Nested messages are always emitted when
//! present because `omitempty` never omits a Go struct (hence `"spec": {}` and `"status": {}`).

use base64::Engine as _;
use chrono::Datelike as _;
use serde_json::{Map, Value};

/// Prefix of every Kubernetes protobuf payload.
const MAGIC: &[u8] = b"k8s\0";

/// The only `contentType` accepted inside the envelope (an empty one means the same thing).
const PROTOBUF_CONTENT_TYPE: &str = "application/vnd.kubernetes.protobuf";

/// Bound on message nesting. The schema is acyclic (deepest path is about a dozen levels), so this
/// only guards against a corrupted table ever turning into unbounded recursion.
const MAX_DEPTH: usize = 32;

/// Wire type of varint-encoded scalars (int32, int64, bool).
const WIRE_VARINT: u8 = 0;
/// Wire type of length-delimited values (strings, bytes, messages, packed repeated scalars).
const WIRE_LEN: u8 = 2;

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

// ---------------------------------------------------------------------------------------------
// Wire format
// ---------------------------------------------------------------------------------------------

/// A cursor over protobuf wire-format bytes. Every read is bounds-checked and reports truncation as
/// an error, so arbitrary input can never panic.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Self { buf, pos: 0 }
    }

    fn at_end(&self) -> bool {
        self.pos >= self.buf.len()
    }

    fn byte(&mut self) -> Result<u8, String> {
        let b = *self.buf.get(self.pos).ok_or("truncated varint")?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads a base-128 varint of at most 10 bytes (the most a u64 can need).
    fn varint(&mut self) -> Result<u64, String> {
        let mut value = 0u64;
        for i in 0..10 {
            let b = self.byte()?;
            // The 10th byte may only carry the top bit of a u64; anything more overflows.
            if i == 9 && b > 1 {
                return Err("varint overflows 64 bits".to_string());
            }
            value |= u64::from(b & 0x7f) << (7 * i);
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err("varint longer than 10 bytes".to_string())
    }

    /// Reads the next field key, or `None` at the end of the buffer.
    fn key(&mut self) -> Result<Option<(u32, u8)>, String> {
        if self.at_end() {
            return Ok(None);
        }
        let key = self.varint()?;
        let field = u32::try_from(key >> 3)
            .map_err(|_| format!("field number {} out of range", key >> 3))?;
        if field == 0 {
            return Err("field number 0 is invalid".to_string());
        }
        // Masked to three bits, so the conversion cannot fail.
        let wire = u8::try_from(key & 7).unwrap_or(u8::MAX);
        Ok(Some((field, wire)))
    }

    /// Reads a length prefix and returns that many bytes.
    fn len_bytes(&mut self) -> Result<&'a [u8], String> {
        let len = self.varint()?;
        let len = usize::try_from(len).map_err(|_| format!("length {len} out of range"))?;
        let end = self.pos.checked_add(len).ok_or("length overflows")?;
        let bytes = self.buf.get(self.pos..end).ok_or_else(|| {
            format!(
                "length {len} runs past the end of the message ({} bytes left)",
                self.buf.len().saturating_sub(self.pos)
            )
        })?;
        self.pos = end;
        Ok(bytes)
    }
}

/// Reads a varint after checking the key announced one.
fn read_varint(reader: &mut Reader<'_>, wire: u8) -> Result<u64, String> {
    expect_wire(wire, WIRE_VARINT)?;
    reader.varint()
}

/// Reads length-delimited bytes after checking the key announced them.
fn read_len<'a>(reader: &mut Reader<'a>, wire: u8) -> Result<&'a [u8], String> {
    expect_wire(wire, WIRE_LEN)?;
    reader.len_bytes()
}

/// Reads a string field. Go strings may hold any bytes and Go's JSON encoder replaces invalid UTF-8
/// with U+FFFD, which is exactly what a lossy conversion does.
fn read_string(reader: &mut Reader<'_>, wire: u8) -> Result<String, String> {
    Ok(String::from_utf8_lossy(read_len(reader, wire)?).into_owned())
}

fn expect_wire(actual: u8, expected: u8) -> Result<(), String> {
    if actual == expected {
        Ok(())
    } else {
        Err(format!("wire type {actual}, expected {expected}"))
    }
}

fn unknown_field(message: &str, field: u32) -> String {
    format!("field {field} of {message} is not supported")
}

/// Go's int32 decoding keeps the low 32 bits of the varint (negatives are sign-extended on the wire).
fn as_i32(v: u64) -> i32 {
    v as i32
}

/// int64 is the varint reinterpreted as two's complement.
fn as_i64(v: u64) -> i64 {
    v as i64
}

// ---------------------------------------------------------------------------------------------
// Envelope
// ---------------------------------------------------------------------------------------------

/// The parts of `runtime.Unknown` the decoder needs.
struct Envelope<'a> {
    api_version: String,
    kind: String,
    raw: &'a [u8],
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

// ---------------------------------------------------------------------------------------------
// Schema model
// ---------------------------------------------------------------------------------------------

/// The type of a single value on the wire and how it maps to JSON.
#[derive(Clone, Copy)]
enum Ty {
    /// `string` → JSON string.
    Str,
    /// `bytes` → base64 JSON string (Go marshals `[]byte` that way).
    Bytes,
    /// `bool` varint → JSON bool.
    Bool,
    /// `int32` varint → JSON number.
    I32,
    /// `int64` varint → JSON number.
    I64,
    /// `metav1.Time` {seconds = 1, nanos = 2} → RFC 3339 string; an empty message is the zero time.
    Time,
    /// `metav1.MicroTime`: the same message, rendered with microseconds (Leases, events.k8s.io).
    MicroTime,
    /// `resource.Quantity` {string = 1} → JSON string.
    Quantity,
    /// `intstr.IntOrString` {type = 1, intVal = 2, strVal = 3} → JSON number or string.
    IntOrString,
    /// A nested message → JSON object.
    Msg(&'static Message),
}

/// How a field's values are laid out on the wire and merged into the parent JSON object.
#[derive(Clone, Copy)]
enum Shape {
    /// One value. `omit_zero` is true for non-pointer Go fields tagged `omitempty`, whose zero values
    /// Go's JSON encoder drops even though the protobuf marshaler always writes them.
    Single { ty: Ty, omit_zero: bool },
    /// `repeated` → JSON array, present only when the wire has elements (as with `omitempty`).
    /// `null_if_absent` marks Go slices tagged without `omitempty`: Go decodes a list with no
    /// elements as nil and encodes nil as `null`, so an absent list becomes `null`.
    Repeated { ty: Ty, null_if_absent: bool },
    /// `map<string, V>` (repeated entry message {key = 1, value = 2}) → JSON object.
    Map(Ty),
    /// An embedded Go struct tagged `json:",inline"`: its fields land in the parent object.
    Inline(&'static Message),
}

/// One field of a message table.
struct Field {
    num: u32,
    /// JSON name (also used in error paths for inline fields).
    name: &'static str,
    shape: Shape,
}

/// A message table: the protobuf message name (for errors) and its supported fields.
struct Message {
    name: &'static str,
    fields: &'static [Field],
}

/// Non-pointer field with `omitempty`: zero values are omitted.
const fn opt(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: true,
        },
    }
}

/// Non-pointer field without `omitempty`: emitted as found, zero included.
const fn req(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: false,
        },
    }
}

/// Pointer field: only on the wire when non-nil, and then emitted even when it points at zero.
const fn ptr(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: false,
        },
    }
}

/// Nested struct or pointer-to-struct: emitted whenever present (Go never omits structs).
const fn msg(num: u32, name: &'static str, message: &'static Message) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::Msg(message),
            omit_zero: false,
        },
    }
}

/// `metav1.Time` (struct or pointer): the zero time is an empty message and is omitted.
const fn time(num: u32, name: &'static str) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::Time,
            omit_zero: false,
        },
    }
}

/// `metav1.MicroTime` pointer: omitted when unset, microseconds otherwise.
const fn micro_time(num: u32, name: &'static str) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::MicroTime,
            omit_zero: false,
        },
    }
}

/// Repeated field with `omitempty`: absent when it has no elements.
const fn rep(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Repeated {
            ty,
            null_if_absent: false,
        },
    }
}

/// Repeated field without `omitempty`: `null` when it has no elements.
const fn rep_null(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Repeated {
            ty,
            null_if_absent: true,
        },
    }
}

const fn map(num: u32, name: &'static str, value: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Map(value),
    }
}

const fn inline(num: u32, name: &'static str, message: &'static Message) -> Field {
    Field {
        num,
        name,
        shape: Shape::Inline(message),
    }
}

use Ty::{Bool, Bytes, I32, I64, IntOrString, Quantity, Str};

/// Shorthand for a nested-message value type (repeated or map values).
const fn m(message: &'static Message) -> Ty {
    Ty::Msg(message)
}

// ---------------------------------------------------------------------------------------------
// Decoding
// ---------------------------------------------------------------------------------------------

/// Decodes `bytes` as `message`, merging its fields into `out` (merging is also how protobuf treats
/// a repeated occurrence of a singular message field).
fn decode_message(
    bytes: &[u8],
    message: &Message,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "{} nested deeper than {MAX_DEPTH} levels",
            message.name
        ));
    }
    let mut reader = Reader::new(bytes);
    while let Some((num, wire)) = reader.key().map_err(|e| format!("{}: {e}", message.name))? {
        let field = message
            .fields
            .iter()
            .find(|f| f.num == num)
            .ok_or_else(|| unknown_field(message.name, num))?;
        decode_field(&mut reader, field, wire, depth, out)
            .map_err(|e| format!("{}.{}: {e}", message.name, field.name))?;
    }
    for field in message.fields {
        if let Shape::Repeated {
            null_if_absent: true,
            ..
        } = field.shape
        {
            out.entry(field.name).or_insert(Value::Null);
        }
    }
    Ok(())
}

fn decode_field(
    reader: &mut Reader<'_>,
    field: &Field,
    wire: u8,
    depth: usize,
    out: &mut Map<String, Value>,
) -> Result<(), String> {
    match field.shape {
        Shape::Inline(message) => decode_message(read_len(reader, wire)?, message, depth + 1, out),
        Shape::Single {
            ty: Ty::Msg(message),
            ..
        } => {
            let slot = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            match slot {
                Value::Object(inner) => {
                    decode_message(read_len(reader, wire)?, message, depth + 1, inner)
                }
                _ => Ok(()),
            }
        }
        Shape::Single { ty, omit_zero } => {
            match decode_value(reader, ty, wire, depth)? {
                Some(value) if !(omit_zero && is_zero(&value)) => {
                    out.insert(field.name.to_string(), value);
                }
                // Last occurrence wins in protobuf, so a later zero clears an earlier value.
                _ => {
                    out.remove(field.name);
                }
            }
            Ok(())
        }
        Shape::Repeated { ty, .. } => {
            let values = decode_repeated(reader, ty, wire, depth)?;
            push_all(out, field.name, values);
            Ok(())
        }
        Shape::Map(ty) => {
            let (key, value) = decode_map_entry(read_len(reader, wire)?, ty, depth)?;
            let slot = out
                .entry(field.name)
                .or_insert_with(|| Value::Object(Map::new()));
            if !slot.is_object() {
                *slot = Value::Object(Map::new());
            }
            if let Value::Object(entries) = slot {
                entries.insert(key, value);
            }
            Ok(())
        }
    }
}

/// Decodes one occurrence of a repeated field. Varint scalars may arrive packed (one
/// length-delimited run) even though proto2 encoders normally write them one by one.
fn decode_repeated(
    reader: &mut Reader<'_>,
    ty: Ty,
    wire: u8,
    depth: usize,
) -> Result<Vec<Value>, String> {
    if matches!(ty, Bool | I32 | I64) && wire == WIRE_LEN {
        let mut packed = Reader::new(reader.len_bytes()?);
        let mut values = Vec::new();
        while !packed.at_end() {
            values.push(scalar_json(ty, packed.varint()?));
        }
        return Ok(values);
    }
    Ok(vec![
        decode_value(reader, ty, wire, depth)?.unwrap_or(Value::Null),
    ])
}

fn push_all(out: &mut Map<String, Value>, name: &str, values: Vec<Value>) {
    let slot = out.entry(name).or_insert_with(|| Value::Array(Vec::new()));
    if !slot.is_array() {
        *slot = Value::Array(Vec::new());
    }
    if let Value::Array(items) = slot {
        items.extend(values);
    }
}

/// Decodes a map entry message {key = 1, value = 2}. A missing value is the Go zero value.
fn decode_map_entry(bytes: &[u8], ty: Ty, depth: usize) -> Result<(String, Value), String> {
    let mut reader = Reader::new(bytes);
    let mut key = String::new();
    let mut value = None;
    while let Some((num, wire)) = reader.key()? {
        match num {
            1 => key = read_string(&mut reader, wire)?,
            // A zero Time inside a map marshals as JSON null.
            2 => value = Some(decode_value(&mut reader, ty, wire, depth)?.unwrap_or(Value::Null)),
            _ => return Err(unknown_field("map entry", num)),
        }
    }
    Ok((key, value.unwrap_or_else(|| zero_value(ty))))
}

/// Decodes a single value of type `ty`. `None` means "the zero Time", which Go renders as null and
/// the sandbox simply omits.
fn decode_value(
    reader: &mut Reader<'_>,
    ty: Ty,
    wire: u8,
    depth: usize,
) -> Result<Option<Value>, String> {
    let value = match ty {
        Str => Value::String(read_string(reader, wire)?),
        Bytes => {
            Value::String(base64::engine::general_purpose::STANDARD.encode(read_len(reader, wire)?))
        }
        Bool | I32 | I64 => scalar_json(ty, read_varint(reader, wire)?),
        Ty::Time => {
            return decode_time(read_len(reader, wire)?, false).map(|t| t.map(Value::String));
        }
        Ty::MicroTime => {
            return decode_time(read_len(reader, wire)?, true).map(|t| t.map(Value::String));
        }
        Quantity => Value::String(decode_quantity(read_len(reader, wire)?)?),
        IntOrString => decode_int_or_string(read_len(reader, wire)?)?,
        Ty::Msg(message) => {
            let mut inner = Map::new();
            decode_message(read_len(reader, wire)?, message, depth + 1, &mut inner)?;
            Value::Object(inner)
        }
    };
    Ok(Some(value))
}

/// Converts a raw varint to JSON for the varint-encoded types.
fn scalar_json(ty: Ty, raw: u64) -> Value {
    match ty {
        Bool => Value::Bool(raw != 0),
        I32 => Value::from(as_i32(raw)),
        _ => Value::from(as_i64(raw)),
    }
}

/// The JSON of a Go zero value, used for map entries whose value is absent.
fn zero_value(ty: Ty) -> Value {
    match ty {
        Str | Bytes => Value::String(String::new()),
        Bool => Value::Bool(false),
        I32 | I64 | IntOrString => Value::from(0),
        Ty::Time | Ty::MicroTime => Value::Null,
        Quantity => Value::String("0".to_string()),
        Ty::Msg(_) => Value::Object(Map::new()),
    }
}

/// Whether Go's `omitempty` would drop this scalar.
fn is_zero(value: &Value) -> bool {
    match value {
        Value::String(s) => s.is_empty(),
        Value::Number(n) => n.as_i64() == Some(0),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// Decodes `metav1.Time` or `metav1.MicroTime` {seconds int64 = 1, nanos int32 = 2}. Both marshal
/// the zero time as an empty message, so empty bytes mean "unset".
fn decode_time(bytes: &[u8], micro: bool) -> Result<Option<String>, String> {
    if bytes.is_empty() {
        return Ok(None);
    }
    let mut reader = Reader::new(bytes);
    let (mut seconds, mut nanos) = (0i64, 0i32);
    while let Some((num, wire)) = reader.key()? {
        match num {
            1 => seconds = as_i64(read_varint(&mut reader, wire)?),
            2 => nanos = as_i32(read_varint(&mut reader, wire)?),
            _ => return Err(unknown_field("Time", num)),
        }
    }
    format_time(seconds, nanos, micro).map(Some)
}

/// Formats like Go's `metav1.Time` JSON: UTC, RFC 3339, whole seconds (fractions are truncated);
/// or, for `metav1.MicroTime`, with six fractional digits (RFC3339Micro).
fn format_time(seconds: i64, nanos: i32, micro: bool) -> Result<String, String> {
    // Go's time.Unix normalises nanos outside [0, 1e9) into the seconds; do the same.
    let nanos = i64::from(nanos);
    let seconds = seconds
        .checked_add(nanos.div_euclid(1_000_000_000))
        .ok_or("timestamp out of range")?;
    let subsec =
        u32::try_from(nanos.rem_euclid(1_000_000_000)).map_err(|_| "timestamp out of range")?;
    let at = chrono::DateTime::from_timestamp(seconds, subsec).ok_or("timestamp out of range")?;
    // RFC 3339 has four-digit years only.
    if !(0..=9999).contains(&at.year()) {
        return Err(format!("timestamp year {} outside 0..=9999", at.year()));
    }
    let layout = if micro {
        "%Y-%m-%dT%H:%M:%S%.6fZ"
    } else {
        "%Y-%m-%dT%H:%M:%SZ"
    };
    Ok(at.format(layout).to_string())
}

/// Decodes `resource.Quantity` {string = 1}. Go parses the string on decode and rejects an empty one;
/// the sender already marshals the canonical form, so the string is passed through unchanged.
fn decode_quantity(bytes: &[u8]) -> Result<String, String> {
    let mut reader = Reader::new(bytes);
    let mut text = String::new();
    while let Some((num, wire)) = reader.key()? {
        match num {
            1 => text = read_string(&mut reader, wire)?,
            _ => return Err(unknown_field("Quantity", num)),
        }
    }
    if text.is_empty() {
        return Err("empty quantity".to_string());
    }
    Ok(text)
}

/// Decodes `intstr.IntOrString` {type int64 = 1, intVal int32 = 2, strVal string = 3}: type 0 is the
/// integer form, type 1 the string form.
fn decode_int_or_string(bytes: &[u8]) -> Result<Value, String> {
    let mut reader = Reader::new(bytes);
    let (mut kind, mut int_val, mut str_val) = (0i64, 0i32, String::new());
    while let Some((num, wire)) = reader.key()? {
        match num {
            1 => kind = as_i64(read_varint(&mut reader, wire)?),
            2 => int_val = as_i32(read_varint(&mut reader, wire)?),
            3 => str_val = read_string(&mut reader, wire)?,
            _ => return Err(unknown_field("IntOrString", num)),
        }
    }
    match kind {
        0 => Ok(Value::from(int_val)),
        1 => Ok(Value::String(str_val)),
        other => Err(format!(
            "IntOrString type {other} is neither 0 (int) nor 1 (string)"
        )),
    }
}

// ---------------------------------------------------------------------------------------------
// Kinds
// ---------------------------------------------------------------------------------------------

/// The kinds client-go's typed clients send that the sandbox serves or kubectl's generators create,
/// by (apiVersion, kind).
static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
    ("v1", "ResourceQuota", &RESOURCE_QUOTA),
    ("v1", "PodTemplate", &POD_TEMPLATE),
    ("v1", "Binding", &BINDING),
    ("apps/v1", "ReplicaSet", &REPLICA_SET),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("batch/v1", "Job", &JOB),
    ("batch/v1", "CronJob", &CRON_JOB),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &CLUSTER_ROLE_BINDING,
    ),
    ("scheduling.k8s.io/v1", "PriorityClass", &PRIORITY_CLASS),
    ("policy/v1", "PodDisruptionBudget", &POD_DISRUPTION_BUDGET),
];

fn lookup_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    // meta/v1 DeleteOptions is registered in every group version, so a typed client of any group
    // (or the generic `meta.k8s.io/v1`) may name it; the message is the same everywhere.
    if kind == "DeleteOptions" {
        return Some(&DELETE_OPTIONS);
    }
    KINDS
        .iter()
        .find(|(version, name, _)| *version == api_version && *name == kind)
        .map(|(_, _, message)| *message)
}

// ---------------------------------------------------------------------------------------------
// meta/v1 (k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto)
// ---------------------------------------------------------------------------------------------

static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        opt(1, "name", Str),
        opt(2, "generateName", Str),
        opt(3, "namespace", Str),
        opt(4, "selfLink", Str),
        opt(5, "uid", Str),
        opt(6, "resourceVersion", Str),
        opt(7, "generation", I64),
        // Go renders the zero creationTimestamp as null; omitting it is equivalent for the store.
        time(8, "creationTimestamp"),
        time(9, "deletionTimestamp"),
        ptr(10, "deletionGracePeriodSeconds", I64),
        map(11, "labels", Str),
        map(12, "annotations", Str),
        rep(13, "ownerReferences", m(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
        // Removed upstream, but clients older than 1.25 still write it (always, even when empty).
        opt(15, "clusterName", Str),
    ],
};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        req(5, "apiVersion", Str),
        req(1, "kind", Str),
        req(3, "name", Str),
        req(4, "uid", Str),
        ptr(6, "controller", Bool),
        ptr(7, "blockOwnerDeletion", Bool),
    ],
};

static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        map(1, "matchLabels", Str),
        rep(2, "matchExpressions", m(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        req(1, "key", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

/// The body client-go sends with DELETE and deletecollection (Helm's release-Secret purge, `kubectl
/// drain --disable-eviction`, every typed `Delete`/`DeleteCollection` call).
static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        ptr(1, "gracePeriodSeconds", I64),
        msg(2, "preconditions", &PRECONDITIONS),
        ptr(3, "orphanDependents", Bool),
        ptr(4, "propagationPolicy", Str),
        rep(5, "dryRun", Str),
        ptr(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
    ],
};

static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[ptr(1, "uid", Str), ptr(2, "resourceVersion", Str)],
};

static CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        opt(3, "observedGeneration", I64),
        time(4, "lastTransitionTime"),
        req(5, "reason", Str),
        req(6, "message", Str),
    ],
};

// ---------------------------------------------------------------------------------------------
// core/v1 (k8s.io/api/core/v1/generated.proto)
// ---------------------------------------------------------------------------------------------

static NAMESPACE: Message = Message {
    name: "Namespace",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &NAMESPACE_SPEC),
        msg(3, "status", &NAMESPACE_STATUS),
    ],
};

static NAMESPACE_SPEC: Message = Message {
    name: "NamespaceSpec",
    fields: &[rep(1, "finalizers", Str)],
};

static NAMESPACE_STATUS: Message = Message {
    name: "NamespaceStatus",
    fields: &[
        opt(1, "phase", Str),
        rep(2, "conditions", m(&NAMESPACE_CONDITION)),
    ],
};

static NAMESPACE_CONDITION: Message = Message {
    name: "NamespaceCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(4, "lastTransitionTime"),
        opt(5, "reason", Str),
        opt(6, "message", Str),
    ],
};

static CONFIG_MAP: Message = Message {
    name: "ConfigMap",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        ptr(4, "immutable", Bool),
        map(2, "data", Str),
        map(3, "binaryData", Bytes),
    ],
};

static SECRET: Message = Message {
    name: "Secret",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        ptr(5, "immutable", Bool),
        map(2, "data", Bytes),
        map(4, "stringData", Str),
        opt(3, "type", Str),
    ],
};

static SERVICE_ACCOUNT: Message = Message {
    name: "ServiceAccount",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "secrets", m(&OBJECT_REFERENCE)),
        rep(3, "imagePullSecrets", m(&LOCAL_OBJECT_REFERENCE)),
        ptr(4, "automountServiceAccountToken", Bool),
    ],
};

static OBJECT_REFERENCE: Message = Message {
    name: "ObjectReference",
    fields: &[
        opt(1, "kind", Str),
        opt(2, "namespace", Str),
        opt(3, "name", Str),
        opt(4, "uid", Str),
        opt(5, "apiVersion", Str),
        opt(6, "resourceVersion", Str),
        opt(7, "fieldPath", Str),
    ],
};

static LOCAL_OBJECT_REFERENCE: Message = Message {
    name: "LocalObjectReference",
    fields: &[opt(1, "name", Str)],
};

static SERVICE: Message = Message {
    name: "Service",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &SERVICE_SPEC),
        msg(3, "status", &SERVICE_STATUS),
    ],
};

static SERVICE_SPEC: Message = Message {
    name: "ServiceSpec",
    fields: &[
        rep(1, "ports", m(&SERVICE_PORT)),
        map(2, "selector", Str),
        opt(3, "clusterIP", Str),
        rep(18, "clusterIPs", Str),
        opt(4, "type", Str),
        rep(5, "externalIPs", Str),
        opt(7, "sessionAffinity", Str),
        opt(8, "loadBalancerIP", Str),
        rep(9, "loadBalancerSourceRanges", Str),
        opt(10, "externalName", Str),
        opt(11, "externalTrafficPolicy", Str),
        opt(12, "healthCheckNodePort", I32),
        opt(13, "publishNotReadyAddresses", Bool),
        msg(14, "sessionAffinityConfig", &SESSION_AFFINITY_CONFIG),
        rep(19, "ipFamilies", Str),
        ptr(17, "ipFamilyPolicy", Str),
        ptr(20, "allocateLoadBalancerNodePorts", Bool),
        ptr(21, "loadBalancerClass", Str),
        ptr(22, "internalTrafficPolicy", Str),
        ptr(23, "trafficDistribution", Str),
    ],
};

static SERVICE_PORT: Message = Message {
    name: "ServicePort",
    fields: &[
        opt(1, "name", Str),
        opt(2, "protocol", Str),
        ptr(6, "appProtocol", Str),
        req(3, "port", I32),
        // A non-pointer struct: always written and always emitted (0 when unset).
        req(4, "targetPort", IntOrString),
        opt(5, "nodePort", I32),
    ],
};

static SESSION_AFFINITY_CONFIG: Message = Message {
    name: "SessionAffinityConfig",
    fields: &[msg(1, "clientIP", &CLIENT_IP_CONFIG)],
};

static CLIENT_IP_CONFIG: Message = Message {
    name: "ClientIPConfig",
    fields: &[ptr(1, "timeoutSeconds", I32)],
};

static SERVICE_STATUS: Message = Message {
    name: "ServiceStatus",
    fields: &[
        msg(1, "loadBalancer", &LOAD_BALANCER_STATUS),
        rep(2, "conditions", m(&CONDITION)),
    ],
};

static LOAD_BALANCER_STATUS: Message = Message {
    name: "LoadBalancerStatus",
    fields: &[rep(1, "ingress", m(&LOAD_BALANCER_INGRESS))],
};

static LOAD_BALANCER_INGRESS: Message = Message {
    name: "LoadBalancerIngress",
    fields: &[
        opt(1, "ip", Str),
        opt(2, "hostname", Str),
        ptr(3, "ipMode", Str),
        rep(4, "ports", m(&PORT_STATUS)),
    ],
};

static PORT_STATUS: Message = Message {
    name: "PortStatus",
    fields: &[
        req(1, "port", I32),
        req(2, "protocol", Str),
        ptr(3, "error", Str),
    ],
};

static POD: Message = Message {
    name: "Pod",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_SPEC),
        msg(3, "status", &POD_STATUS),
    ],
};

static POD_TEMPLATE_SPEC: Message = Message {
    name: "PodTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &POD_SPEC)],
};

/// Unsupported (error if present): ephemeralContainers (34), workloadRef (42).
static POD_SPEC: Message = Message {
    name: "PodSpec",
    fields: &[
        rep(1, "volumes", m(&VOLUME)),
        rep(20, "initContainers", m(&CONTAINER)),
        rep_null(2, "containers", m(&CONTAINER)),
        opt(3, "restartPolicy", Str),
        ptr(4, "terminationGracePeriodSeconds", I64),
        ptr(5, "activeDeadlineSeconds", I64),
        opt(6, "dnsPolicy", Str),
        map(7, "nodeSelector", Str),
        opt(8, "serviceAccountName", Str),
        opt(9, "serviceAccount", Str),
        ptr(21, "automountServiceAccountToken", Bool),
        opt(10, "nodeName", Str),
        opt(11, "hostNetwork", Bool),
        opt(12, "hostPID", Bool),
        opt(13, "hostIPC", Bool),
        ptr(27, "shareProcessNamespace", Bool),
        msg(14, "securityContext", &POD_SECURITY_CONTEXT),
        rep(15, "imagePullSecrets", m(&LOCAL_OBJECT_REFERENCE)),
        opt(16, "hostname", Str),
        opt(17, "subdomain", Str),
        msg(18, "affinity", &AFFINITY),
        opt(19, "schedulerName", Str),
        rep(22, "tolerations", m(&TOLERATION)),
        rep(23, "hostAliases", m(&HOST_ALIAS)),
        msg(26, "dnsConfig", &POD_DNS_CONFIG),
        rep(
            33,
            "topologySpreadConstraints",
            m(&TOPOLOGY_SPREAD_CONSTRAINT),
        ),
        opt(24, "priorityClassName", Str),
        ptr(25, "priority", I32),
        rep(28, "readinessGates", m(&POD_READINESS_GATE)),
        ptr(29, "runtimeClassName", Str),
        ptr(30, "enableServiceLinks", Bool),
        ptr(31, "preemptionPolicy", Str),
        map(32, "overhead", Quantity),
        ptr(35, "setHostnameAsFQDN", Bool),
        msg(36, "os", &POD_OS),
        ptr(37, "hostUsers", Bool),
        rep(38, "schedulingGates", m(&POD_SCHEDULING_GATE)),
        rep(39, "resourceClaims", m(&POD_RESOURCE_CLAIM)),
        msg(40, "resources", &RESOURCE_REQUIREMENTS),
        ptr(41, "hostnameOverride", Str),
    ],
};

/// Unsupported (error if present): windowsOptions (8).
static POD_SECURITY_CONTEXT: Message = Message {
    name: "PodSecurityContext",
    fields: &[
        msg(1, "seLinuxOptions", &SELINUX_OPTIONS),
        ptr(2, "runAsUser", I64),
        ptr(6, "runAsGroup", I64),
        ptr(3, "runAsNonRoot", Bool),
        rep(4, "supplementalGroups", I64),
        ptr(12, "supplementalGroupsPolicy", Str),
        ptr(5, "fsGroup", I64),
        rep(7, "sysctls", m(&SYSCTL)),
        ptr(9, "fsGroupChangePolicy", Str),
        msg(10, "seccompProfile", &SECCOMP_PROFILE),
        msg(11, "appArmorProfile", &APP_ARMOR_PROFILE),
        ptr(13, "seLinuxChangePolicy", Str),
    ],
};

static SELINUX_OPTIONS: Message = Message {
    name: "SELinuxOptions",
    fields: &[
        opt(1, "user", Str),
        opt(2, "role", Str),
        opt(3, "type", Str),
        opt(4, "level", Str),
    ],
};

static SYSCTL: Message = Message {
    name: "Sysctl",
    fields: &[req(1, "name", Str), req(2, "value", Str)],
};

static SECCOMP_PROFILE: Message = Message {
    name: "SeccompProfile",
    fields: &[req(1, "type", Str), ptr(2, "localhostProfile", Str)],
};

static APP_ARMOR_PROFILE: Message = Message {
    name: "AppArmorProfile",
    fields: &[req(1, "type", Str), ptr(2, "localhostProfile", Str)],
};

static TOLERATION: Message = Message {
    name: "Toleration",
    fields: &[
        opt(1, "key", Str),
        opt(2, "operator", Str),
        opt(3, "value", Str),
        opt(4, "effect", Str),
        ptr(5, "tolerationSeconds", I64),
    ],
};

static POD_READINESS_GATE: Message = Message {
    name: "PodReadinessGate",
    fields: &[req(1, "conditionType", Str)],
};

static POD_SCHEDULING_GATE: Message = Message {
    name: "PodSchedulingGate",
    fields: &[req(1, "name", Str)],
};

static POD_OS: Message = Message {
    name: "PodOS",
    fields: &[req(1, "name", Str)],
};

static POD_RESOURCE_CLAIM: Message = Message {
    name: "PodResourceClaim",
    fields: &[
        req(1, "name", Str),
        ptr(3, "resourceClaimName", Str),
        ptr(4, "resourceClaimTemplateName", Str),
    ],
};

/// Only the scalar fields a client-built status carries; the lists are controller-populated.
static POD_STATUS: Message = Message {
    name: "PodStatus",
    fields: &[
        opt(17, "observedGeneration", I64),
        opt(1, "phase", Str),
        opt(3, "message", Str),
        opt(4, "reason", Str),
        opt(11, "nominatedNodeName", Str),
        opt(5, "hostIP", Str),
        opt(6, "podIP", Str),
        time(7, "startTime"),
        opt(9, "qosClass", Str),
        opt(14, "resize", Str),
    ],
};

/// Unsupported (error if present): restartPolicyRules (25).
static CONTAINER: Message = Message {
    name: "Container",
    fields: &[
        req(1, "name", Str),
        opt(2, "image", Str),
        rep(3, "command", Str),
        rep(4, "args", Str),
        opt(5, "workingDir", Str),
        rep(6, "ports", m(&CONTAINER_PORT)),
        rep(19, "envFrom", m(&ENV_FROM_SOURCE)),
        rep(7, "env", m(&ENV_VAR)),
        // A non-pointer struct, so Go always emits it (`"resources": {}`).
        msg(8, "resources", &RESOURCE_REQUIREMENTS),
        rep(23, "resizePolicy", m(&CONTAINER_RESIZE_POLICY)),
        ptr(24, "restartPolicy", Str),
        rep(9, "volumeMounts", m(&VOLUME_MOUNT)),
        rep(21, "volumeDevices", m(&VOLUME_DEVICE)),
        msg(10, "livenessProbe", &PROBE),
        msg(11, "readinessProbe", &PROBE),
        msg(22, "startupProbe", &PROBE),
        msg(12, "lifecycle", &LIFECYCLE),
        opt(13, "terminationMessagePath", Str),
        opt(20, "terminationMessagePolicy", Str),
        opt(14, "imagePullPolicy", Str),
        msg(15, "securityContext", &SECURITY_CONTEXT),
        opt(16, "stdin", Bool),
        opt(17, "stdinOnce", Bool),
        opt(18, "tty", Bool),
    ],
};

static CONTAINER_PORT: Message = Message {
    name: "ContainerPort",
    fields: &[
        opt(1, "name", Str),
        opt(2, "hostPort", I32),
        req(3, "containerPort", I32),
        opt(4, "protocol", Str),
        opt(5, "hostIP", Str),
    ],
};

static CONTAINER_RESIZE_POLICY: Message = Message {
    name: "ContainerResizePolicy",
    fields: &[req(1, "resourceName", Str), req(2, "restartPolicy", Str)],
};

static ENV_VAR: Message = Message {
    name: "EnvVar",
    fields: &[
        req(1, "name", Str),
        opt(2, "value", Str),
        msg(3, "valueFrom", &ENV_VAR_SOURCE),
    ],
};

/// Unsupported (error if present): fileKeyRef (5).
static ENV_VAR_SOURCE: Message = Message {
    name: "EnvVarSource",
    fields: &[
        msg(1, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg(2, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        msg(3, "configMapKeyRef", &CONFIG_MAP_KEY_SELECTOR),
        msg(4, "secretKeyRef", &SECRET_KEY_SELECTOR),
    ],
};

static OBJECT_FIELD_SELECTOR: Message = Message {
    name: "ObjectFieldSelector",
    fields: &[opt(1, "apiVersion", Str), req(2, "fieldPath", Str)],
};

static RESOURCE_FIELD_SELECTOR: Message = Message {
    name: "ResourceFieldSelector",
    fields: &[
        opt(1, "containerName", Str),
        req(2, "resource", Str),
        req(3, "divisor", Quantity),
    ],
};

static CONFIG_MAP_KEY_SELECTOR: Message = Message {
    name: "ConfigMapKeySelector",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static SECRET_KEY_SELECTOR: Message = Message {
    name: "SecretKeySelector",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        req(2, "key", Str),
        ptr(3, "optional", Bool),
    ],
};

static ENV_FROM_SOURCE: Message = Message {
    name: "EnvFromSource",
    fields: &[
        opt(1, "prefix", Str),
        msg(2, "configMapRef", &CONFIG_MAP_ENV_SOURCE),
        msg(3, "secretRef", &SECRET_ENV_SOURCE),
    ],
};

static CONFIG_MAP_ENV_SOURCE: Message = Message {
    name: "ConfigMapEnvSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", Bool),
    ],
};

static SECRET_ENV_SOURCE: Message = Message {
    name: "SecretEnvSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        ptr(2, "optional", Bool),
    ],
};

static RESOURCE_REQUIREMENTS: Message = Message {
    name: "ResourceRequirements",
    fields: &[
        map(1, "limits", Quantity),
        map(2, "requests", Quantity),
        rep(3, "claims", m(&RESOURCE_CLAIM)),
    ],
};

static RESOURCE_CLAIM: Message = Message {
    name: "ResourceClaim",
    fields: &[req(1, "name", Str), opt(2, "request", Str)],
};

static VOLUME_MOUNT: Message = Message {
    name: "VolumeMount",
    fields: &[
        req(1, "name", Str),
        opt(2, "readOnly", Bool),
        ptr(7, "recursiveReadOnly", Str),
        req(3, "mountPath", Str),
        opt(4, "subPath", Str),
        ptr(5, "mountPropagation", Str),
        opt(6, "subPathExpr", Str),
    ],
};

/// Unsupported (error if present): windowsOptions (10), ulimits (13).
static SECURITY_CONTEXT: Message = Message {
    name: "SecurityContext",
    fields: &[
        msg(1, "capabilities", &CAPABILITIES),
        ptr(2, "privileged", Bool),
        msg(3, "seLinuxOptions", &SELINUX_OPTIONS),
        ptr(4, "runAsUser", I64),
        ptr(8, "runAsGroup", I64),
        ptr(5, "runAsNonRoot", Bool),
        ptr(6, "readOnlyRootFilesystem", Bool),
        ptr(7, "allowPrivilegeEscalation", Bool),
        ptr(9, "procMount", Str),
        msg(11, "seccompProfile", &SECCOMP_PROFILE),
        msg(12, "appArmorProfile", &APP_ARMOR_PROFILE),
    ],
};

static CAPABILITIES: Message = Message {
    name: "Capabilities",
    fields: &[rep(1, "add", Str), rep(2, "drop", Str)],
};

static VOLUME_DEVICE: Message = Message {
    name: "VolumeDevice",
    fields: &[req(1, "name", Str), req(2, "devicePath", Str)],
};

static PROBE: Message = Message {
    name: "Probe",
    fields: &[
        inline(1, "handler", &PROBE_HANDLER),
        opt(2, "initialDelaySeconds", I32),
        opt(3, "timeoutSeconds", I32),
        opt(4, "periodSeconds", I32),
        opt(5, "successThreshold", I32),
        opt(6, "failureThreshold", I32),
        ptr(7, "terminationGracePeriodSeconds", I64),
    ],
};

static PROBE_HANDLER: Message = Message {
    name: "ProbeHandler",
    fields: &[
        msg(1, "exec", &EXEC_ACTION),
        msg(2, "httpGet", &HTTP_GET_ACTION),
        msg(3, "tcpSocket", &TCP_SOCKET_ACTION),
        msg(4, "grpc", &GRPC_ACTION),
    ],
};

static EXEC_ACTION: Message = Message {
    name: "ExecAction",
    fields: &[rep(1, "command", Str)],
};

static HTTP_GET_ACTION: Message = Message {
    name: "HTTPGetAction",
    fields: &[
        opt(1, "path", Str),
        req(2, "port", IntOrString),
        opt(3, "host", Str),
        opt(4, "scheme", Str),
        rep(5, "httpHeaders", m(&HTTP_HEADER)),
    ],
};

static HTTP_HEADER: Message = Message {
    name: "HTTPHeader",
    fields: &[req(1, "name", Str), req(2, "value", Str)],
};

static TCP_SOCKET_ACTION: Message = Message {
    name: "TCPSocketAction",
    fields: &[req(1, "port", IntOrString), opt(2, "host", Str)],
};

static GRPC_ACTION: Message = Message {
    name: "GRPCAction",
    fields: &[req(1, "port", I32), ptr(2, "service", Str)],
};

static LIFECYCLE: Message = Message {
    name: "Lifecycle",
    fields: &[
        msg(1, "postStart", &LIFECYCLE_HANDLER),
        msg(2, "preStop", &LIFECYCLE_HANDLER),
        ptr(3, "stopSignal", Str),
    ],
};

static LIFECYCLE_HANDLER: Message = Message {
    name: "LifecycleHandler",
    fields: &[
        msg(1, "exec", &EXEC_ACTION),
        msg(2, "httpGet", &HTTP_GET_ACTION),
        msg(3, "tcpSocket", &TCP_SOCKET_ACTION),
        msg(4, "sleep", &SLEEP_ACTION),
    ],
};

static SLEEP_ACTION: Message = Message {
    name: "SleepAction",
    fields: &[req(1, "seconds", I64)],
};

static VOLUME: Message = Message {
    name: "Volume",
    fields: &[
        req(1, "name", Str),
        inline(2, "volumeSource", &VOLUME_SOURCE),
    ],
};

/// The volume sources pods commonly use; the cloud- and vendor-specific ones (gcePersistentDisk,
/// awsElasticBlockStore, gitRepo, iscsi, rbd, ... and ephemeral, image) are unsupported (error if
/// present).
static VOLUME_SOURCE: Message = Message {
    name: "VolumeSource",
    fields: &[
        msg(1, "hostPath", &HOST_PATH_VOLUME_SOURCE),
        msg(2, "emptyDir", &EMPTY_DIR_VOLUME_SOURCE),
        msg(6, "secret", &SECRET_VOLUME_SOURCE),
        msg(7, "nfs", &NFS_VOLUME_SOURCE),
        msg(10, "persistentVolumeClaim", &PVC_VOLUME_SOURCE),
        msg(16, "downwardAPI", &DOWNWARD_API_VOLUME_SOURCE),
        msg(19, "configMap", &CONFIG_MAP_VOLUME_SOURCE),
        msg(26, "projected", &PROJECTED_VOLUME_SOURCE),
        msg(28, "csi", &CSI_VOLUME_SOURCE),
    ],
};

static HOST_PATH_VOLUME_SOURCE: Message = Message {
    name: "HostPathVolumeSource",
    fields: &[req(1, "path", Str), ptr(2, "type", Str)],
};

static EMPTY_DIR_VOLUME_SOURCE: Message = Message {
    name: "EmptyDirVolumeSource",
    fields: &[opt(1, "medium", Str), ptr(2, "sizeLimit", Quantity)],
};

static SECRET_VOLUME_SOURCE: Message = Message {
    name: "SecretVolumeSource",
    fields: &[
        opt(1, "secretName", Str),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", Bool),
    ],
};

static KEY_TO_PATH: Message = Message {
    name: "KeyToPath",
    fields: &[req(1, "key", Str), req(2, "path", Str), ptr(3, "mode", I32)],
};

static NFS_VOLUME_SOURCE: Message = Message {
    name: "NFSVolumeSource",
    fields: &[
        req(1, "server", Str),
        req(2, "path", Str),
        opt(3, "readOnly", Bool),
    ],
};

static PVC_VOLUME_SOURCE: Message = Message {
    name: "PersistentVolumeClaimVolumeSource",
    fields: &[req(1, "claimName", Str), opt(2, "readOnly", Bool)],
};

static DOWNWARD_API_VOLUME_SOURCE: Message = Message {
    name: "DownwardAPIVolumeSource",
    fields: &[
        rep(1, "items", m(&DOWNWARD_API_VOLUME_FILE)),
        ptr(2, "defaultMode", I32),
    ],
};

static DOWNWARD_API_VOLUME_FILE: Message = Message {
    name: "DownwardAPIVolumeFile",
    fields: &[
        req(1, "path", Str),
        msg(2, "fieldRef", &OBJECT_FIELD_SELECTOR),
        msg(3, "resourceFieldRef", &RESOURCE_FIELD_SELECTOR),
        ptr(4, "mode", I32),
    ],
};

static CONFIG_MAP_VOLUME_SOURCE: Message = Message {
    name: "ConfigMapVolumeSource",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(3, "defaultMode", I32),
        ptr(4, "optional", Bool),
    ],
};

/// `sources` has no `omitempty` upstream, hence `null` when empty.
static PROJECTED_VOLUME_SOURCE: Message = Message {
    name: "ProjectedVolumeSource",
    fields: &[
        rep_null(1, "sources", m(&VOLUME_PROJECTION)),
        ptr(2, "defaultMode", I32),
    ],
};

/// Unsupported (error if present): clusterTrustBundle (5), podCertificate (6).
static VOLUME_PROJECTION: Message = Message {
    name: "VolumeProjection",
    fields: &[
        msg(1, "secret", &SECRET_PROJECTION),
        msg(2, "downwardAPI", &DOWNWARD_API_PROJECTION),
        msg(3, "configMap", &CONFIG_MAP_PROJECTION),
        msg(4, "serviceAccountToken", &SERVICE_ACCOUNT_TOKEN_PROJECTION),
    ],
};

static SECRET_PROJECTION: Message = Message {
    name: "SecretProjection",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(4, "optional", Bool),
    ],
};

static CONFIG_MAP_PROJECTION: Message = Message {
    name: "ConfigMapProjection",
    fields: &[
        inline(1, "localObjectReference", &LOCAL_OBJECT_REFERENCE),
        rep(2, "items", m(&KEY_TO_PATH)),
        ptr(4, "optional", Bool),
    ],
};

static DOWNWARD_API_PROJECTION: Message = Message {
    name: "DownwardAPIProjection",
    fields: &[rep(1, "items", m(&DOWNWARD_API_VOLUME_FILE))],
};

static SERVICE_ACCOUNT_TOKEN_PROJECTION: Message = Message {
    name: "ServiceAccountTokenProjection",
    fields: &[
        opt(1, "audience", Str),
        ptr(2, "expirationSeconds", I64),
        req(3, "path", Str),
    ],
};

static CSI_VOLUME_SOURCE: Message = Message {
    name: "CSIVolumeSource",
    fields: &[
        req(1, "driver", Str),
        ptr(2, "readOnly", Bool),
        ptr(3, "fsType", Str),
        map(4, "volumeAttributes", Str),
        msg(5, "nodePublishSecretRef", &LOCAL_OBJECT_REFERENCE),
    ],
};

static AFFINITY: Message = Message {
    name: "Affinity",
    fields: &[
        msg(1, "nodeAffinity", &NODE_AFFINITY),
        msg(2, "podAffinity", &POD_AFFINITY),
        msg(3, "podAntiAffinity", &POD_ANTI_AFFINITY),
    ],
};

static NODE_AFFINITY: Message = Message {
    name: "NodeAffinity",
    fields: &[
        msg(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            &NODE_SELECTOR,
        ),
        rep(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            m(&PREFERRED_SCHEDULING_TERM),
        ),
    ],
};

/// `nodeSelectorTerms` has no `omitempty` upstream, hence `null` when empty.
static NODE_SELECTOR: Message = Message {
    name: "NodeSelector",
    fields: &[rep_null(1, "nodeSelectorTerms", m(&NODE_SELECTOR_TERM))],
};

static NODE_SELECTOR_TERM: Message = Message {
    name: "NodeSelectorTerm",
    fields: &[
        rep(1, "matchExpressions", m(&NODE_SELECTOR_REQUIREMENT)),
        rep(2, "matchFields", m(&NODE_SELECTOR_REQUIREMENT)),
    ],
};

static NODE_SELECTOR_REQUIREMENT: Message = Message {
    name: "NodeSelectorRequirement",
    fields: &[
        req(1, "key", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

static PREFERRED_SCHEDULING_TERM: Message = Message {
    name: "PreferredSchedulingTerm",
    fields: &[
        req(1, "weight", I32),
        msg(2, "preference", &NODE_SELECTOR_TERM),
    ],
};

static POD_AFFINITY: Message = Message {
    name: "PodAffinity",
    fields: &[
        rep(
            1,
            "requiredDuringSchedulingIgnoredDuringExecution",
            m(&POD_AFFINITY_TERM),
        ),
        rep(
            2,
            "preferredDuringSchedulingIgnoredDuringExecution",
            m(&WEIGHTED_POD_AFFINITY_TERM),
        ),
    ],
};

static POD_ANTI_AFFINITY: Message = Message {
    name: "PodAntiAffinity",
    fields: POD_AFFINITY.fields,
};

static POD_AFFINITY_TERM: Message = Message {
    name: "PodAffinityTerm",
    fields: &[
        msg(1, "labelSelector", &LABEL_SELECTOR),
        rep(2, "namespaces", Str),
        req(3, "topologyKey", Str),
        msg(4, "namespaceSelector", &LABEL_SELECTOR),
        rep(5, "matchLabelKeys", Str),
        rep(6, "mismatchLabelKeys", Str),
    ],
};

static WEIGHTED_POD_AFFINITY_TERM: Message = Message {
    name: "WeightedPodAffinityTerm",
    fields: &[
        req(1, "weight", I32),
        msg(2, "podAffinityTerm", &POD_AFFINITY_TERM),
    ],
};

static HOST_ALIAS: Message = Message {
    name: "HostAlias",
    fields: &[req(1, "ip", Str), rep(2, "hostnames", Str)],
};

static POD_DNS_CONFIG: Message = Message {
    name: "PodDNSConfig",
    fields: &[
        rep(1, "nameservers", Str),
        rep(2, "searches", Str),
        rep(3, "options", m(&POD_DNS_CONFIG_OPTION)),
    ],
};

static POD_DNS_CONFIG_OPTION: Message = Message {
    name: "PodDNSConfigOption",
    fields: &[opt(1, "name", Str), ptr(2, "value", Str)],
};

static TOPOLOGY_SPREAD_CONSTRAINT: Message = Message {
    name: "TopologySpreadConstraint",
    fields: &[
        req(1, "maxSkew", I32),
        req(2, "topologyKey", Str),
        req(3, "whenUnsatisfiable", Str),
        msg(4, "labelSelector", &LABEL_SELECTOR),
        ptr(5, "minDomains", I32),
        ptr(6, "nodeAffinityPolicy", Str),
        ptr(7, "nodeTaintsPolicy", Str),
        rep(8, "matchLabelKeys", Str),
    ],
};

static POD_TEMPLATE: Message = Message {
    name: "PodTemplate",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "template", &POD_TEMPLATE_SPEC),
    ],
};

/// What a scheduler POSTs to `pods/{name}/binding`.
static BINDING: Message = Message {
    name: "Binding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "target", &OBJECT_REFERENCE),
    ],
};

static RESOURCE_QUOTA: Message = Message {
    name: "ResourceQuota",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &RESOURCE_QUOTA_SPEC),
        msg(3, "status", &RESOURCE_QUOTA_STATUS),
    ],
};

static RESOURCE_QUOTA_SPEC: Message = Message {
    name: "ResourceQuotaSpec",
    fields: &[
        map(1, "hard", Quantity),
        rep(2, "scopes", Str),
        msg(3, "scopeSelector", &SCOPE_SELECTOR),
    ],
};

static SCOPE_SELECTOR: Message = Message {
    name: "ScopeSelector",
    fields: &[rep(
        1,
        "matchExpressions",
        m(&SCOPED_RESOURCE_SELECTOR_REQUIREMENT),
    )],
};

static SCOPED_RESOURCE_SELECTOR_REQUIREMENT: Message = Message {
    name: "ScopedResourceSelectorRequirement",
    fields: &[
        req(1, "scopeName", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

static RESOURCE_QUOTA_STATUS: Message = Message {
    name: "ResourceQuotaStatus",
    fields: &[map(1, "hard", Quantity), map(2, "used", Quantity)],
};

// ---------------------------------------------------------------------------------------------
// apps/v1 (k8s.io/api/apps/v1/generated.proto)
// ---------------------------------------------------------------------------------------------

static REPLICA_SET: Message = Message {
    name: "ReplicaSet",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &REPLICA_SET_SPEC),
        msg(3, "status", &REPLICA_SET_STATUS),
    ],
};

static REPLICA_SET_SPEC: Message = Message {
    name: "ReplicaSetSpec",
    fields: &[
        ptr(1, "replicas", I32),
        opt(4, "minReadySeconds", I32),
        msg(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
    ],
};

static REPLICA_SET_STATUS: Message = Message {
    name: "ReplicaSetStatus",
    fields: &[
        req(1, "replicas", I32),
        opt(2, "fullyLabeledReplicas", I32),
        opt(4, "readyReplicas", I32),
        opt(5, "availableReplicas", I32),
        ptr(7, "terminatingReplicas", I32),
        opt(3, "observedGeneration", I64),
        rep(6, "conditions", m(&REPLICA_SET_CONDITION)),
    ],
};

static REPLICA_SET_CONDITION: Message = Message {
    name: "ReplicaSetCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(3, "lastTransitionTime"),
        opt(4, "reason", Str),
        opt(5, "message", Str),
    ],
};

static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &DEPLOYMENT_SPEC),
        msg(3, "status", &DEPLOYMENT_STATUS),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        ptr(1, "replicas", I32),
        msg(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
        msg(4, "strategy", &DEPLOYMENT_STRATEGY),
        opt(5, "minReadySeconds", I32),
        ptr(6, "revisionHistoryLimit", I32),
        opt(7, "paused", Bool),
        ptr(9, "progressDeadlineSeconds", I32),
        ptr(10, "podReplacementPolicy", Str),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        opt(1, "type", Str),
        msg(2, "rollingUpdate", &ROLLING_UPDATE_DEPLOYMENT),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        ptr(1, "maxUnavailable", IntOrString),
        ptr(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        opt(1, "observedGeneration", I64),
        opt(2, "replicas", I32),
        opt(3, "updatedReplicas", I32),
        opt(7, "readyReplicas", I32),
        opt(4, "availableReplicas", I32),
        opt(5, "unavailableReplicas", I32),
        ptr(9, "terminatingReplicas", I32),
        rep(6, "conditions", m(&DEPLOYMENT_CONDITION)),
        ptr(8, "collisionCount", I32),
    ],
};

static DEPLOYMENT_CONDITION: Message = Message {
    name: "DeploymentCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(6, "lastUpdateTime"),
        time(7, "lastTransitionTime"),
        opt(4, "reason", Str),
        opt(5, "message", Str),
    ],
};

// ---------------------------------------------------------------------------------------------
// batch/v1 (k8s.io/api/batch/v1/generated.proto)
// ---------------------------------------------------------------------------------------------

static JOB: Message = Message {
    name: "Job",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &JOB_SPEC),
        msg(3, "status", &JOB_STATUS),
    ],
};

/// Unsupported (error if present): podFailurePolicy (11), successPolicy (16).
static JOB_SPEC: Message = Message {
    name: "JobSpec",
    fields: &[
        ptr(1, "parallelism", I32),
        ptr(2, "completions", I32),
        ptr(3, "activeDeadlineSeconds", I64),
        ptr(7, "backoffLimit", I32),
        ptr(12, "backoffLimitPerIndex", I32),
        ptr(13, "maxFailedIndexes", I32),
        msg(4, "selector", &LABEL_SELECTOR),
        ptr(5, "manualSelector", Bool),
        msg(6, "template", &POD_TEMPLATE_SPEC),
        ptr(8, "ttlSecondsAfterFinished", I32),
        ptr(9, "completionMode", Str),
        ptr(10, "suspend", Bool),
        ptr(14, "podReplacementPolicy", Str),
        ptr(15, "managedBy", Str),
    ],
};

static JOB_STATUS: Message = Message {
    name: "JobStatus",
    fields: &[
        rep(1, "conditions", m(&JOB_CONDITION)),
        time(2, "startTime"),
        time(3, "completionTime"),
        opt(4, "active", I32),
        opt(5, "succeeded", I32),
        opt(6, "failed", I32),
        ptr(11, "terminating", I32),
        opt(7, "completedIndexes", Str),
        ptr(10, "failedIndexes", Str),
        msg(8, "uncountedTerminatedPods", &UNCOUNTED_TERMINATED_PODS),
        ptr(9, "ready", I32),
    ],
};

static JOB_CONDITION: Message = Message {
    name: "JobCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(3, "lastProbeTime"),
        time(4, "lastTransitionTime"),
        opt(5, "reason", Str),
        opt(6, "message", Str),
    ],
};

static UNCOUNTED_TERMINATED_PODS: Message = Message {
    name: "UncountedTerminatedPods",
    fields: &[rep(1, "succeeded", Str), rep(2, "failed", Str)],
};

static JOB_TEMPLATE_SPEC: Message = Message {
    name: "JobTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &JOB_SPEC)],
};

static CRON_JOB: Message = Message {
    name: "CronJob",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &CRON_JOB_SPEC),
        msg(3, "status", &CRON_JOB_STATUS),
    ],
};

static CRON_JOB_SPEC: Message = Message {
    name: "CronJobSpec",
    fields: &[
        req(1, "schedule", Str),
        ptr(8, "timeZone", Str),
        ptr(2, "startingDeadlineSeconds", I64),
        opt(3, "concurrencyPolicy", Str),
        ptr(4, "suspend", Bool),
        msg(5, "jobTemplate", &JOB_TEMPLATE_SPEC),
        ptr(6, "successfulJobsHistoryLimit", I32),
        ptr(7, "failedJobsHistoryLimit", I32),
    ],
};

static CRON_JOB_STATUS: Message = Message {
    name: "CronJobStatus",
    fields: &[
        rep(1, "active", m(&OBJECT_REFERENCE)),
        time(4, "lastScheduleTime"),
        time(5, "lastSuccessfulTime"),
    ],
};

// ---------------------------------------------------------------------------------------------
// rbac.authorization.k8s.io/v1 (k8s.io/api/rbac/v1/generated.proto)
// ---------------------------------------------------------------------------------------------

static ROLE: Message = Message {
    name: "Role",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep_null(2, "rules", m(&POLICY_RULE)),
    ],
};

static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep_null(2, "rules", m(&POLICY_RULE)),
        msg(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[rep(1, "clusterRoleSelectors", m(&LABEL_SELECTOR))],
};

static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        rep_null(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
        rep(5, "nonResourceURLs", Str),
    ],
};

static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "subjects", m(&SUBJECT)),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

static CLUSTER_ROLE_BINDING: Message = Message {
    name: "ClusterRoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "subjects", m(&SUBJECT)),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        req(1, "kind", Str),
        opt(2, "apiGroup", Str),
        req(3, "name", Str),
        opt(4, "namespace", Str),
    ],
};

static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[
        req(1, "apiGroup", Str),
        req(2, "kind", Str),
        req(3, "name", Str),
    ],
};

// ---------------------------------------------------------------------------------------------
// scheduling.k8s.io/v1 and policy/v1
// ---------------------------------------------------------------------------------------------

static PRIORITY_CLASS: Message = Message {
    name: "PriorityClass",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        req(2, "value", I32),
        opt(3, "globalDefault", Bool),
        opt(4, "description", Str),
        ptr(5, "preemptionPolicy", Str),
    ],
};

static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_DISRUPTION_BUDGET_SPEC),
        msg(3, "status", &POD_DISRUPTION_BUDGET_STATUS),
    ],
};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        ptr(1, "minAvailable", IntOrString),
        msg(2, "selector", &LABEL_SELECTOR),
        ptr(3, "maxUnavailable", IntOrString),
        ptr(4, "unhealthyPodEvictionPolicy", Str),
    ],
};

static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        opt(1, "observedGeneration", I64),
        map(2, "disruptedPods", Ty::Time),
        // No omitempty upstream: Go always emits these counters, zero included.
        req(3, "disruptionsAllowed", I32),
        req(4, "currentHealthy", I32),
        req(5, "desiredHealthy", I32),
        req(6, "expectedPods", I32),
        rep(7, "conditions", m(&CONDITION)),
    ],
};

// ---------------------------------------------------------------------------------------------
// coordination/v1 (k8s.io/api/coordination/v1/generated.proto): client-go's leader election
// ---------------------------------------------------------------------------------------------

static LEASE: Message = Message {
    name: "Lease",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &LEASE_SPEC),
    ],
};

static LEASE_SPEC: Message = Message {
    name: "LeaseSpec",
    fields: &[
        ptr(1, "holderIdentity", Str),
        ptr(2, "leaseDurationSeconds", I32),
        micro_time(3, "acquireTime"),
        micro_time(4, "renewTime"),
        ptr(5, "leaseTransitions", I32),
        ptr(6, "strategy", Str),
        ptr(7, "preferredHolder", Str),
    ],
};

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A tiny protobuf encoder for building test inputs by hand.
    #[derive(Default)]
    struct Enc(Vec<u8>);

    impl Enc {
        fn new() -> Self {
            Self::default()
        }

        fn raw_varint(&mut self, mut v: u64) {
            while v >= 0x80 {
                self.0.push((v as u8) | 0x80);
                v >>= 7;
            }
            self.0.push(v as u8);
        }

        fn key(&mut self, field: u32, wire: u8) {
            self.raw_varint((u64::from(field) << 3) | u64::from(wire));
        }

        fn varint(mut self, field: u32, v: u64) -> Self {
            self.key(field, WIRE_VARINT);
            self.raw_varint(v);
            self
        }

        /// int32/int64 fields: negatives are sign-extended to ten bytes, as Go does.
        fn int(self, field: u32, v: i64) -> Self {
            self.varint(field, v as u64)
        }

        fn bool(self, field: u32, v: bool) -> Self {
            self.varint(field, u64::from(v))
        }

        fn bytes(mut self, field: u32, v: &[u8]) -> Self {
            self.key(field, WIRE_LEN);
            self.raw_varint(v.len() as u64);
            self.0.extend_from_slice(v);
            self
        }

        fn str(self, field: u32, v: &str) -> Self {
            self.bytes(field, v.as_bytes())
        }

        fn msg(self, field: u32, v: Enc) -> Self {
            self.bytes(field, &v.0)
        }

        fn map_str(self, field: u32, k: &str, v: &str) -> Self {
            self.msg(field, Enc::new().str(1, k).str(2, v))
        }

        fn map_bytes(self, field: u32, k: &str, v: &[u8]) -> Self {
            self.msg(field, Enc::new().str(1, k).bytes(2, v))
        }

        fn map_msg(self, field: u32, k: &str, v: Enc) -> Self {
            self.msg(field, Enc::new().str(1, k).msg(2, v))
        }
    }

    /// Wraps a typed message the way kubectl does: magic + runtime.Unknown with empty encoding/type.
    fn envelope(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
        let unknown = Enc::new()
            .msg(1, Enc::new().str(1, api_version).str(2, kind))
            .msg(2, raw)
            .str(3, "")
            .str(4, "");
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&unknown.0);
        body
    }

    /// ObjectMeta as gogo marshals it: every non-pointer field written, zero time as an empty message.
    fn go_meta(name: &str, namespace: &str) -> Enc {
        Enc::new()
            .str(1, name)
            .str(2, "")
            .str(3, namespace)
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .int(7, 0)
            .msg(8, Enc::new())
    }

    fn quantity(text: &str) -> Enc {
        Enc::new().str(1, text)
    }

    fn int_or_string_int(v: i64) -> Enc {
        Enc::new().int(1, 0).int(2, v).str(3, "")
    }

    fn int_or_string_str(v: &str) -> Enc {
        Enc::new().int(1, 1).int(2, 0).str(3, v)
    }

    /// A container as gogo marshals it (all non-pointer fields present).
    fn go_container(name: &str, image: &str) -> Enc {
        Enc::new()
            .str(1, name)
            .str(2, image)
            .str(5, "")
            .str(13, "")
            .str(14, "")
            .bool(16, false)
            .bool(17, false)
            .bool(18, false)
            .str(20, "")
    }

    /// The non-pointer PodSpec fields gogo always writes, with the given containers.
    fn go_pod_spec(containers: Vec<Enc>, restart_policy: &str) -> Enc {
        let mut spec = Enc::new();
        for container in containers {
            spec = spec.msg(2, container);
        }
        spec.str(3, restart_policy)
            .str(6, "")
            .str(8, "")
            .str(9, "")
            .str(10, "")
            .bool(11, false)
            .bool(12, false)
            .bool(13, false)
            .str(16, "")
            .str(17, "")
            .str(19, "")
            .str(24, "")
    }

    fn ok(body: &[u8]) -> Value {
        match decode(body) {
            Ok(v) => v,
            Err(e) => panic!("decode failed: {e}"),
        }
    }

    fn err(body: &[u8]) -> String {
        match decode(body) {
            Ok(v) => panic!("expected an error, got {v}"),
            Err(e) => e,
        }
    }

    #[test]
    fn namespace_with_labels_omits_go_zero_values() {
        let ns = Enc::new()
            .msg(
                1,
                go_meta("demo", "")
                    .map_str(11, "team", "a")
                    .map_str(11, "env", "dev"),
            )
            .msg(2, Enc::new())
            .msg(3, Enc::new().str(1, ""));
        let got = ok(&envelope("v1", "Namespace", ns));
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": "demo", "labels": {"team": "a", "env": "dev"}},
                "spec": {},
                "status": {}
            })
        );
    }

    #[test]
    fn config_map_data_and_binary_data() {
        let cm = Enc::new()
            .msg(1, go_meta("cfg", "default"))
            .map_str(2, "app.properties", "a=1\nb=2")
            .map_bytes(3, "blob", &[0, 1, 2, 255]);
        let got = ok(&envelope("v1", "ConfigMap", cm));
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "cfg", "namespace": "default"},
                "data": {"app.properties": "a=1\nb=2"},
                "binaryData": {"blob": "AAEC/w=="}
            })
        );
    }

    #[test]
    fn secret_data_is_base64_and_type_kept() {
        let secret = Enc::new()
            .msg(1, go_meta("creds", "default"))
            .map_bytes(2, "password", b"s3cr3t")
            .map_bytes(2, "empty", b"")
            .str(3, "Opaque");
        let got = ok(&envelope("v1", "Secret", secret));
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "creds", "namespace": "default"},
                "data": {"password": "czNjcjN0", "empty": ""},
                "type": "Opaque"
            })
        );
    }

    #[test]
    fn deployment_like_kubectl_create_deployment() {
        let container = go_container("nginx", "nginx:1.25")
            .msg(
                6,
                Enc::new()
                    .str(1, "")
                    .int(2, 0)
                    .int(3, 80)
                    .str(4, "TCP")
                    .str(5, ""),
            )
            .msg(8, Enc::new().map_msg(1, "cpu", quantity("500m")));
        let template = Enc::new()
            .msg(1, go_meta("", "").map_str(11, "app", "web"))
            .msg(2, go_pod_spec(vec![container], ""));
        let strategy = Enc::new().str(1, "RollingUpdate").msg(
            2,
            Enc::new()
                .msg(1, int_or_string_int(1))
                .msg(2, int_or_string_str("25%")),
        );
        let spec = Enc::new()
            .int(1, 3)
            .msg(2, Enc::new().map_str(1, "app", "web"))
            .msg(3, template)
            .msg(4, strategy)
            .int(5, 0)
            .bool(7, false);
        let status = Enc::new()
            .int(1, 0)
            .int(2, 0)
            .int(3, 0)
            .int(4, 0)
            .int(5, 0)
            .int(7, 0);
        let deployment = Enc::new()
            .msg(1, go_meta("web", "default").map_str(11, "app", "web"))
            .msg(2, spec)
            .msg(3, status);
        let got = ok(&envelope("apps/v1", "Deployment", deployment));
        assert_eq!(
            got,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
                "spec": {
                    "replicas": 3,
                    "selector": {"matchLabels": {"app": "web"}},
                    "template": {
                        "metadata": {"labels": {"app": "web"}},
                        "spec": {
                            "containers": [{
                                "name": "nginx",
                                "image": "nginx:1.25",
                                "ports": [{"containerPort": 80, "protocol": "TCP"}],
                                "resources": {"limits": {"cpu": "500m"}}
                            }]
                        }
                    },
                    "strategy": {
                        "type": "RollingUpdate",
                        "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                    }
                },
                "status": {}
            })
        );
    }

    #[test]
    fn role_binding_keeps_required_fields() {
        let binding = Enc::new()
            .msg(1, go_meta("read-pods", "dev"))
            .msg(
                2,
                Enc::new()
                    .str(1, "User")
                    .str(2, "rbac.authorization.k8s.io")
                    .str(3, "jane")
                    .str(4, ""),
            )
            .msg(
                2,
                Enc::new()
                    .str(1, "ServiceAccount")
                    .str(2, "")
                    .str(3, "robot")
                    .str(4, "dev"),
            )
            .msg(
                3,
                Enc::new()
                    .str(1, "rbac.authorization.k8s.io")
                    .str(2, "Role")
                    .str(3, "pod-reader"),
            );
        let got = ok(&envelope(
            "rbac.authorization.k8s.io/v1",
            "RoleBinding",
            binding,
        ));
        assert_eq!(
            got,
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "read-pods", "namespace": "dev"},
                "subjects": [
                    {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
                    {"kind": "ServiceAccount", "name": "robot", "namespace": "dev"}
                ],
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}
            })
        );
    }

    #[test]
    fn cluster_role_with_rules_and_aggregation() {
        let role = Enc::new()
            .msg(1, go_meta("reader", ""))
            .msg(
                2,
                Enc::new()
                    .str(1, "get")
                    .str(1, "list")
                    .str(2, "")
                    .str(3, "pods"),
            )
            .msg(3, Enc::new().msg(1, Enc::new().map_str(1, "agg", "true")));
        let got = ok(&envelope(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            role,
        ));
        assert_eq!(
            got["rules"],
            json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
        );
        assert_eq!(
            got["aggregationRule"],
            json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]})
        );
    }

    #[test]
    fn negative_varints_decode_as_twos_complement() {
        let meta = go_meta("low", "").int(10, -30);
        let class = Enc::new()
            .msg(1, meta)
            .int(2, -1_000)
            .bool(3, false)
            .str(4, "");
        let body = envelope("scheduling.k8s.io/v1", "PriorityClass", class);
        let got = ok(&body);
        assert_eq!(
            got,
            json!({
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": "low", "deletionGracePeriodSeconds": -30},
                "value": -1000
            })
        );
    }

    #[test]
    fn creation_timestamp_is_rfc3339_utc() {
        let meta = go_meta("t", "").msg(8, Enc::new().int(1, 1_700_000_000).int(2, 999_999_999));
        let got = ok(&envelope("v1", "Namespace", Enc::new().msg(1, meta)));
        assert_eq!(
            got["metadata"]["creationTimestamp"],
            json!("2023-11-14T22:13:20Z")
        );
    }

    #[test]
    fn time_formatting_normalises_and_rejects_out_of_range() {
        assert_eq!(
            format_time(0, 0, false).as_deref(),
            Ok("1970-01-01T00:00:00Z")
        );
        assert_eq!(
            format_time(10, -1, false).as_deref(),
            Ok("1970-01-01T00:00:09Z")
        );
        assert!(format_time(i64::MAX, 0, false).is_err());
        assert!(format_time(-62_167_219_201, 0, false).is_err());
    }

    #[test]
    fn pod_like_kubectl_run() {
        let container = go_container("shell", "busybox")
            .str(4, "sleep")
            .str(4, "3600")
            .msg(7, Enc::new().str(1, "MODE").str(2, "demo"))
            .msg(
                7,
                Enc::new().str(1, "POD_NAME").str(2, "").msg(
                    3,
                    Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "metadata.name")),
                ),
            )
            .msg(8, Enc::new())
            .bool(16, true)
            .bool(18, true);
        let spec = go_pod_spec(vec![container], "Never").str(6, "ClusterFirst");
        let status = Enc::new()
            .str(1, "")
            .str(3, "")
            .str(4, "")
            .str(5, "")
            .str(6, "")
            .str(9, "")
            .str(11, "");
        let pod = Enc::new()
            .msg(1, go_meta("shell", "default").map_str(11, "run", "shell"))
            .msg(2, spec)
            .msg(3, status);
        let got = ok(&envelope("v1", "Pod", pod));
        assert_eq!(
            got,
            json!({
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "shell", "namespace": "default", "labels": {"run": "shell"}},
                "spec": {
                    "containers": [{
                        "name": "shell",
                        "image": "busybox",
                        "args": ["sleep", "3600"],
                        "env": [
                            {"name": "MODE", "value": "demo"},
                            {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
                        ],
                        "resources": {},
                        "stdin": true,
                        "tty": true
                    }],
                    "restartPolicy": "Never",
                    "dnsPolicy": "ClusterFirst"
                },
                "status": {}
            })
        );
    }

    #[test]
    fn service_with_int_and_named_target_ports() {
        let port = |name: &str, port: i64, target: Enc| {
            Enc::new()
                .str(1, name)
                .str(2, "TCP")
                .int(3, port)
                .msg(4, target)
                .int(5, 0)
        };
        let spec = Enc::new()
            .msg(1, port("http", 80, int_or_string_int(8080)))
            .msg(1, port("metrics", 9090, int_or_string_str("metrics")))
            .map_str(2, "app", "web")
            .str(3, "")
            .str(4, "NodePort")
            .str(7, "")
            .str(8, "")
            .str(10, "")
            .str(11, "")
            .int(12, 0)
            .bool(13, false);
        let status = Enc::new().msg(1, Enc::new());
        let service = Enc::new()
            .msg(1, go_meta("web", "default"))
            .msg(2, spec)
            .msg(3, status);
        let got = ok(&envelope("v1", "Service", service));
        assert_eq!(
            got["spec"],
            json!({
                "ports": [
                    {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                    {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"}
                ],
                "selector": {"app": "web"},
                "type": "NodePort"
            })
        );
        assert_eq!(got["status"], json!({"loadBalancer": {}}));
    }

    #[test]
    fn cron_job_nests_job_template() {
        let job_spec = Enc::new().msg(
            6,
            Enc::new().msg(1, go_meta("", "")).msg(
                2,
                go_pod_spec(
                    vec![go_container("c", "busybox").msg(8, Enc::new())],
                    "OnFailure",
                ),
            ),
        );
        let spec = Enc::new().str(1, "*/5 * * * *").str(3, "").msg(
            5,
            Enc::new().msg(1, go_meta("nightly", "")).msg(2, job_spec),
        );
        let cron = Enc::new()
            .msg(1, go_meta("nightly", "default"))
            .msg(2, spec)
            .msg(3, Enc::new());
        let got = ok(&envelope("batch/v1", "CronJob", cron));
        assert_eq!(got["spec"]["schedule"], json!("*/5 * * * *"));
        assert_eq!(
            got["spec"]["jobTemplate"]["metadata"],
            json!({"name": "nightly"})
        );
        assert_eq!(
            got["spec"]["jobTemplate"]["spec"]["template"]["spec"],
            json!({"containers": [{"name": "c", "image": "busybox", "resources": {}}], "restartPolicy": "OnFailure"})
        );
        assert_eq!(got["status"], json!({}));
    }

    #[test]
    fn pdb_status_counters_are_always_emitted() {
        let spec = Enc::new()
            .msg(1, int_or_string_str("50%"))
            .msg(2, Enc::new().map_str(1, "app", "web"));
        let status = Enc::new().int(1, 0).int(3, 0).int(4, 0).int(5, 0).int(6, 0);
        let pdb = Enc::new()
            .msg(1, go_meta("web", "default"))
            .msg(2, spec)
            .msg(3, status);
        let got = ok(&envelope("policy/v1", "PodDisruptionBudget", pdb));
        assert_eq!(
            got["spec"],
            json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}})
        );
        assert_eq!(
            got["status"],
            json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
        );
    }

    #[test]
    fn quota_hard_quantities_and_env_from_inline_reference() {
        let quota = Enc::new()
            .msg(1, go_meta("q", "default"))
            .msg(
                2,
                Enc::new()
                    .map_msg(1, "pods", quantity("10"))
                    .str(2, "BestEffort"),
            )
            .msg(3, Enc::new());
        let got = ok(&envelope("v1", "ResourceQuota", quota));
        assert_eq!(
            got["spec"],
            json!({"hard": {"pods": "10"}, "scopes": ["BestEffort"]})
        );

        let container = go_container("c", "img").msg(
            19,
            Enc::new()
                .str(1, "")
                .msg(2, Enc::new().msg(1, Enc::new().str(1, "cfg"))),
        );
        let pod = Enc::new().msg(2, go_pod_spec(vec![container], ""));
        let got = ok(&envelope("v1", "Pod", pod));
        assert_eq!(
            got["spec"]["containers"][0]["envFrom"],
            json!([{"configMapRef": {"name": "cfg"}}])
        );
    }

    #[test]
    fn packed_repeated_varints_are_accepted() {
        let packed = {
            let mut inner = Enc::new();
            inner.raw_varint(1000);
            inner.raw_varint(2000);
            inner.0
        };
        let pod = Enc::new().msg(
            2,
            Enc::new().msg(14, Enc::new().bytes(4, &packed).int(4, 3000)),
        );
        let got = ok(&envelope("v1", "Pod", pod));
        assert_eq!(
            got["spec"]["securityContext"],
            json!({"supplementalGroups": [1000, 2000, 3000]})
        );
    }

    #[test]
    fn malformed_inputs_are_errors() {
        // Wrong magic.
        assert!(err(b"k8x\0\x0a\x00").starts_with("invalid protobuf body"));
        assert!(err(b"").contains("magic"));
        // Truncated varint (a key whose continuation byte never arrives).
        assert!(err(b"k8s\0\x80").contains("truncated varint"));
        // Truncated length-delimited field.
        assert!(err(b"k8s\0\x12\x05ab").contains("runs past the end"));
        // Varint that overflows 64 bits.
        let mut long = MAGIC.to_vec();
        long.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
        assert!(err(&long).contains("overflows"));
        // Field number zero.
        assert!(err(b"k8s\0\x02\x00").contains("field number 0"));
        // A varint where a message is expected.
        let mismatch = envelope("v1", "Namespace", Enc::new().varint(1, 0));
        assert!(err(&mismatch).contains("wire type 0, expected 2"));
        // Groups (wire type 3) are never valid here.
        let mut group = Enc::new();
        group.key(1, 3);
        assert!(err(&envelope("v1", "Namespace", group)).contains("wire type 3, expected 2"));
    }

    #[test]
    fn unknown_kind_is_reported_as_unsupported() {
        let e = err(&envelope("v1", "Node", Enc::new()));
        assert!(e.starts_with("unsupported protobuf kind"), "{e}");
        let e = err(&envelope("apps/v1beta1", "Deployment", Enc::new()));
        assert!(e.starts_with("unsupported protobuf kind"), "{e}");
    }

    #[test]
    fn unknown_field_names_message_and_number() {
        let container = go_container("c", "img").msg(25, Enc::new());
        let pod = Enc::new().msg(2, go_pod_spec(vec![container], ""));
        let e = err(&envelope("v1", "Pod", pod));
        assert!(e.contains("field 25 of Container is not supported"), "{e}");
        assert!(e.contains("Pod.spec: PodSpec.containers"), "{e}");
    }

    #[test]
    fn envelope_rejects_encodings_and_foreign_content_types() {
        let mut body = envelope("v1", "Namespace", Enc::new());
        body.extend_from_slice(&Enc::new().str(3, "gzip").0);
        assert!(err(&body).contains("content encoding"));
        let mut body = envelope("v1", "Namespace", Enc::new());
        body.extend_from_slice(&Enc::new().str(4, "application/json").0);
        assert!(err(&body).contains("content type"));
    }

    #[test]
    fn int_or_string_rejects_unknown_type() {
        let pdb = Enc::new().msg(2, Enc::new().msg(1, Enc::new().int(1, 2)));
        let e = err(&envelope("policy/v1", "PodDisruptionBudget", pdb));
        assert!(e.contains("IntOrString type 2"), "{e}");
    }

    /// Truncations and byte flips of a realistic body must never panic (errors are fine).
    #[test]
    fn corrupted_inputs_never_panic() {
        let container =
            go_container("nginx", "nginx").msg(8, Enc::new().map_msg(1, "cpu", quantity("1")));
        let spec = Enc::new()
            .int(1, 1)
            .msg(2, Enc::new().map_str(1, "app", "web"))
            .msg(
                3,
                Enc::new()
                    .msg(1, go_meta("", ""))
                    .msg(2, go_pod_spec(vec![container], "")),
            )
            .msg(
                4,
                Enc::new().msg(2, Enc::new().msg(1, int_or_string_str("25%"))),
            );
        let body = envelope(
            "apps/v1",
            "Deployment",
            Enc::new().msg(1, go_meta("web", "ns")).msg(2, spec),
        );
        assert!(decode(&body).is_ok());
        for len in 0..body.len() {
            let _ = decode(body.get(..len).unwrap_or_default());
        }
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..4000 {
            // xorshift keeps the test deterministic without a rand dependency.
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut mutated = body.clone();
            let index = (state % mutated.len() as u64) as usize;
            if let Some(byte) = mutated.get_mut(index) {
                *byte = (state >> 32) as u8;
            }
            let _ = decode(&mutated);
        }
    }

    /// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
    /// `kubectl create deployment web --image=nginx --replicas=3 --port=80`.
    /// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
    #[test]
    fn real_kubectl_deployment_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xb8\x01\x0a\x1f\x0a\x03web",
            b"\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\x86",
            b"\x01\x08\x03\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1al\x0a\x1c\x0a\x00\x12\x00",
            b"\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12L\x12.\x0a",
            b"\x05nginx\x12\x05nginx*\x002\x0a\x0a\x00\x10\x00\x18P\x22\x00*\x00B\x00j\x00r",
            b"\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00",
            b"X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(",
            b"\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00",
        ];
        let body = parts.concat();
        let want: Value = serde_json::from_str(r#"{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}]}}, "strategy": {}}, "status": {}}"#).unwrap_or_default();
        assert_eq!(ok(&body), want);
    }

    /// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
    /// `kubectl create cronjob cj --image=busybox --schedule='*/5 * * * *' -- echo hi`.
    /// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
    #[test]
    fn real_kubectl_cron_job_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a\x13\x0a\x08batch/v1\x12\x07CronJob\x12\xa8\x01\x0a\x12\x0a\x02cj\x12",
            b"\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x8f\x01\x0a\x0b*/5 * * * *\x1a\x00*",
            b"~\x0a\x12\x0a\x02cj\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12h2f\x0a\x10",
            b"\x0a\x00\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12R\x12+\x0a\x02cj\x12\x07",
            b"busybox\x1a\x04echo\x1a\x02hi*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90",
            b"\x01\x00\xa2\x01\x00\x1a\x09OnFailure2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01",
            b"\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x00\x1a\x00\x22\x00",
        ];
        let body = parts.concat();
        let want: Value = serde_json::from_str(r#"{"kind": "CronJob", "apiVersion": "batch/v1", "metadata": {"name": "cj"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"metadata": {"name": "cj"}, "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "cj", "image": "busybox", "command": ["echo", "hi"], "resources": {}}], "restartPolicy": "OnFailure"}}}}}, "status": {}}"#).unwrap_or_default();
        assert_eq!(ok(&body), want);
    }

    /// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
    /// `kubectl create clusterrole agg --aggregation-rule=foo=bar`.
    /// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
    #[test]
    fn real_kubectl_cluster_role_aggregated_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bClusterRole\x12%\x0a\x13",
            b"\x0a\x03agg\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x1a\x0e\x0a\x0c\x0a\x0a",
            b"\x0a\x03foo\x12\x03bar\x1a\x00\x22\x00",
        ];
        let body = parts.concat();
        let want: Value = serde_json::from_str(r#"{"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "agg"}, "rules": null, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"foo": "bar"}}]}}"#).unwrap_or_default();
        assert_eq!(ok(&body), want);
    }

    /// Bytes Helm v4.1.4 (client-go v1.35) sent with each DELETE of a release Secret during
    /// `helm uninstall`, captured between Helm and a v1.28 kube-apiserver: an empty DeleteOptions.
    #[test]
    fn real_helm_delete_options_bytes() {
        let body = b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\"\x00";
        assert_eq!(
            ok(body),
            json!({"apiVersion": "v1", "kind": "DeleteOptions"})
        );
    }

    /// Bytes kubectl v1.33 sent with each pod DELETE of
    /// `kubectl drain NODE --disable-eviction --grace-period=1` (captured): gracePeriodSeconds only.
    #[test]
    fn real_kubectl_drain_delete_options_bytes() {
        let body = b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x02\x08\x01\x1a\x00\"\x00";
        assert_eq!(
            ok(body),
            json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 1})
        );
    }

    #[test]
    fn delete_options_with_every_field() {
        let raw = Enc::new()
            .int(1, 30)
            .msg(2, Enc::new().str(1, "uid-1").str(2, "42"))
            .bool(3, false)
            .str(4, "Foreground")
            .str(5, "All")
            .bool(6, false);
        // Typed clients of other groups name their own group version; the message is the same.
        let got = ok(&envelope("apps/v1", "DeleteOptions", raw));
        assert_eq!(
            got,
            json!({
                "apiVersion": "apps/v1",
                "kind": "DeleteOptions",
                "gracePeriodSeconds": 30,
                "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
                "orphanDependents": false,
                "propagationPolicy": "Foreground",
                "dryRun": ["All"],
                "ignoreStoreReadErrorWithClusterBreakingPotential": false
            })
        );
    }

    /// Bytes Helm v4.1.4 PUT to `secrets/sh.helm.release.v1.t1.v1` (its release record) during
    /// `helm upgrade`, captured between Helm and a v1.28 kube-apiserver.
    #[test]
    fn real_helm_release_secret_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\xcc\x06\x0a\x7f\x0a\x18sh.helm.relea",
            b"se.v1.t1.v1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00Z\x18\x0a\x0amodifiedAt\x12",
            b"\x0a1795609912Z\x0a\x0a\x04name\x12\x02t1Z\x0d\x0a\x05owner\x12\x04helmZ\x12\x0a",
            b"\x06status\x12\x08deployedZ\x0c\x0a\x07version\x12\x011\x12\xb4\x05\x0a\x07relea",
            b"se\x12\xa8\x05H4sIAAAAAAAC/5RSXU/bMBT9K9Hda1Jst4HFEg9rRiFiExorLc0yIZM4iak/otgpZI",
            b"j/PiWIdhMP06T7YF/pnnvuOecZNFMcKDgMPghdGqDPUIrWuruCN9L0vAAKBJHjAOOAhEtM6BTTkEwwim",
            b"aziKBpCj5I9p8DBbd5KxonjAYKibaOSenlRjWSOw4+WMdcZ4HCHvXFh7xmrRsYKu5YwRwb3m8XCN2DDz",
            b"ve2ldQNMETBD6wRqz2zR0ZcKTJt0B1J6UPjqtGMsct0B8HsLfmUa4mPVNyoDzug83tvFmpVZ8Tubt/MF",
            b"XxcHbJiOzSz6b6RqIuVVIv14vHWGFZnC+2m9vr+qoyVXIe1vfrm+PkomhydeM2BF2m5wu0WZrLJJ7XV2",
            b"J+wvtP3UotbLFe/fqizqoynm/TdVoX6yeUxMlTIuYfk4sFvp9ey+QCR3F1ego+KFM4MfJ+p/ssnExRdI",
            b"IjMgtTePnpw47Jbjj29Xqb11yxv38HOIQQDsZaIkTHGswrhTwg/Gt5iNExnqWD7IppUXLrgEIQBJn+4H",
            b"03XZtz6g3mHb0TPdMH76i3w5neCl1QLza6FNVX1mT6LQg00543mEe9R9HyIFeZ3vcZ9TLAGWT6z4Bgf3",
            b"TbNiwf2L+OscZ1LR9T08j+TnFXmyHQ1jJ4+R0AAP//WuA6Si4DAAA=\x1a\x12helm.sh/release.v1",
            b"\x1a\x00\"\x00",
        ];
        let got = ok(&parts.concat());
        assert_eq!(got["kind"], "Secret");
        assert_eq!(got["type"], "helm.sh/release.v1");
        assert_eq!(got["metadata"]["name"], "sh.helm.release.v1.t1.v1");
        assert_eq!(
            got["metadata"]["labels"],
            json!({"modifiedAt": "1795609912", "name": "t1", "owner": "helm", "status": "deployed", "version": "1"})
        );
        // Helm's payload is base64 text of a gzip stream; JSON carries those bytes base64 again.
        let release = got["data"]["release"].as_str().unwrap_or_default();
        let inner = base64::engine::general_purpose::STANDARD
            .decode(release)
            .unwrap_or_default();
        assert!(inner.starts_with(b"H4sI"), "release payload: {release}");
    }

    /// Bytes kubectl v1.33 POSTed to a v1.28 kube-apiserver (captured between them) for
    /// `kubectl create job j1 --from=cronjob/cj`, where the CronJob's pod template (as the server
    /// defaulted it) has every kind of probe, lifecycle hooks and the common volume sources.
    /// The expected JSON is the same command's `--dry-run=client -o json` output, minus
    /// `"creationTimestamp": null`.
    #[test]
    fn real_kubectl_job_with_probes_lifecycle_and_volumes_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\x93\x06\x0a\x89\x01\x0a\x02j1\x12",
            b"\x00\x1a\x09wire-cap3\"\x00*\x002\x008\x00B\x00b+\x0a!cronjob.kubernetes.io/inst",
            b"antiate\x12\x06manualj?\x0a\x07CronJob\x1a\x02cj\"$35d356ef-dda9-4128-9ee1-29c41",
            b"c4ae8b5*\x08batch/v10\x01\x12\xfa\x042\xf7\x04\x0a\x10\x0a\x00\x12\x00\x1a\x00\"",
            b"\x00*\x002\x008\x00B\x00\x12\xe2\x04\x0a\x14\x0a\x05cache\x12\x0b\x12\x09\x0a",
            b"\x00\x12\x05\x0a\x031Gi\x0a*\x0a\x04conf\x12\"\x9a\x01\x1f\x0a\x0a\x0a\x08app-co",
            b"nf\x12\x0e\x0a\x01a\x12\x06a.conf\x18\xa4\x03\x18\x80\x02\x0aS\x0a\x03tok\x12L",
            b"\xd2\x01I\x0a\x13\"\x11\x0a\x05vault\x10\x90\x1c\x1a\x05token\x0a\x0a\x0a\x08",
            b"\x0a\x04\x0a\x02s1 \x01\x0a#\x12!\x0a\x1f\x0a\x06labels\x12\x15\x0a\x02v1\x12",
            b"\x0fmetadata.labels\x10\xa4\x03\x0a\x1f\x0a\x04host\x12\x17\x0a\x15\x0a\x08/var/",
            b"log\x12\x09Directory\x0a\x12\x0a\x04data\x12\x0aR\x08\x0a\x04data\x10\x01\x12",
            b"\xf5\x01\x0a\x03app\x12\x07busybox*\x00B\x00J\x15\x0a\x05cache\x10\x00\x1a\x06/c",
            b"ache\"\x002\x00R9\x0a-\x12+\x0a\x08/healthz\x12\x0d\x08\x01\x10\x00\x1a\x07metri",
            b"cs\x1a\x00\"\x04HTTP*\x08\x0a\x03X-A\x12\x01b\x10\x00\x18\x01 \x0a(\x010\x03Z",
            b"\x19\x0a\x0d\x1a\x0b\x0a\x07\x08\x00\x10\x90?\x1a\x00\x12\x00\x10\x02\x18\x01 ",
            b"\x0a(\x010\x03b%\x0a\x0c\x0a\x0a\x0a\x04echo\x0a\x02hi\x12\x15\x12\x13\x0a\x01/",
            b"\x12\x06\x08\x00\x10P\x1a\x00\x1a\x00\"\x04HTTPj\x14/dev/termination-logr\x06Alw",
            b"ays\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x04File\xb2\x01\x1e\x0a\x10\x0a",
            b"\x0e\x0a\x03cat\x0a\x07/tmp/ok\x10\x00\x18\x01 \x0a(\x010\x038\x05\x12V\x0a\x04g",
            b"rpc\x12\x07busybox*\x00B\x00R\x13\x0a\x07\"\x05\x08\x82G\x12\x00\x10\x00\x18\x01",
            b" \x0a(\x010\x03j\x14/dev/termination-logr\x06Always\x80\x01\x00\x88\x01\x00\x90",
            b"\x01\x00\xa2\x01\x04File\x1a\x09OnFailure \x1e2\x0cClusterFirstB\x00J\x00R\x00X",
            b"\x00`\x00h\x00r\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x11default-scheduler\xc2\x01",
            b"\x00\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00",
        ];
        let want: Value = serde_json::from_str(r#"{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j1","namespace":"wire-cap3","annotations":{"cronjob.kubernetes.io/instantiate":"manual"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"cj","uid":"35d356ef-dda9-4128-9ee1-29c41c4ae8b5","controller":true}]},"spec":{"template":{"metadata":{},"spec":{"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"1Gi"}},{"name":"conf","configMap":{"name":"app-conf","items":[{"key":"a","path":"a.conf","mode":420}],"defaultMode":256}},{"name":"tok","projected":{"sources":[{"serviceAccountToken":{"audience":"vault","expirationSeconds":3600,"path":"token"}},{"secret":{"name":"s1","optional":true}},{"downwardAPI":{"items":[{"path":"labels","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels"}}]}}],"defaultMode":420}},{"name":"host","hostPath":{"path":"/var/log","type":"Directory"}},{"name":"data","persistentVolumeClaim":{"claimName":"data","readOnly":true}}],"containers":[{"name":"app","image":"busybox","resources":{},"volumeMounts":[{"name":"cache","mountPath":"/cache"}],"livenessProbe":{"httpGet":{"path":"/healthz","port":"metrics","scheme":"HTTP","httpHeaders":[{"name":"X-A","value":"b"}]},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"tcpSocket":{"port":8080},"initialDelaySeconds":2,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"startupProbe":{"exec":{"command":["cat","/tmp/ok"]},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3,"terminationGracePeriodSeconds":5},"lifecycle":{"postStart":{"exec":{"command":["echo","hi"]}},"preStop":{"httpGet":{"path":"/","port":80,"scheme":"HTTP"}}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"},{"name":"grpc","image":"busybox","resources":{},"livenessProbe":{"grpc":{"port":9090,"service":""},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"OnFailure","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}},"status":{}}"#).unwrap_or_default();
        assert_eq!(ok(&parts.concat()), want);
    }

    #[test]
    fn lease_times_keep_microseconds() {
        let spec = Enc::new()
            .str(1, "holder-a")
            .int(2, 15)
            .msg(3, Enc::new().int(1, 1_700_000_000).int(2, 123_456_789))
            .msg(4, Enc::new().int(1, 1_700_000_010))
            .int(5, 0);
        let lease = Enc::new()
            .msg(1, go_meta("leader", "kube-system"))
            .msg(2, spec);
        assert_eq!(
            ok(&envelope("coordination.k8s.io/v1", "Lease", lease)),
            json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": "leader", "namespace": "kube-system"},
                "spec": {
                    "holderIdentity": "holder-a",
                    "leaseDurationSeconds": 15,
                    "acquireTime": "2023-11-14T22:13:20.123456Z",
                    "renewTime": "2023-11-14T22:13:30.000000Z",
                    "leaseTransitions": 0
                }
            })
        );
    }

    #[test]
    fn replica_set_pod_template_and_binding() {
        let template = Enc::new()
            .msg(1, go_meta("", "").map_str(11, "app", "web"))
            .msg(2, go_pod_spec(vec![go_container("web", "nginx")], "Always"));
        let rs = Enc::new()
            .msg(1, go_meta("web-1", "default"))
            .msg(
                2,
                Enc::new()
                    .int(1, 3)
                    .msg(2, Enc::new().map_str(1, "app", "web"))
                    .msg(3, template)
                    .int(4, 0),
            )
            .msg(
                3,
                Enc::new().int(1, 0).int(2, 0).int(3, 0).int(4, 0).int(5, 0),
            );
        let got = ok(&envelope("apps/v1", "ReplicaSet", rs));
        assert_eq!(got["spec"]["replicas"], 3);
        assert_eq!(
            got["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}})
        );
        assert_eq!(
            got["spec"]["template"]["metadata"],
            json!({"labels": {"app": "web"}})
        );
        assert!(got["spec"].get("minReadySeconds").is_none());
        // `replicas` has no omitempty upstream; the other counters do.
        assert_eq!(got["status"], json!({"replicas": 0}));

        let pt = Enc::new().msg(1, go_meta("tpl", "default")).msg(
            2,
            Enc::new()
                .msg(1, go_meta("", ""))
                .msg(2, go_pod_spec(vec![go_container("c", "busybox")], "")),
        );
        let got = ok(&envelope("v1", "PodTemplate", pt));
        assert_eq!(got["template"]["spec"]["containers"][0]["image"], "busybox");

        let binding = Enc::new()
            .msg(1, go_meta("p1", "default"))
            .msg(2, Enc::new().str(1, "Node").str(3, "node-1"));
        assert_eq!(
            ok(&envelope("v1", "Binding", binding)),
            json!({
                "apiVersion": "v1",
                "kind": "Binding",
                "metadata": {"name": "p1", "namespace": "default"},
                "target": {"kind": "Node", "name": "node-1"}
            })
        );
    }

    /// Bytes kubectl v1.33 POSTed to a v1.28 kube-apiserver (captured between them) for
    /// `kubectl create job j2 --from=cronjob/cj`, where the CronJob's pod template has node, pod
    /// and anti-affinity, topology spread constraints, host aliases and a DNS config.
    /// The expected JSON is the same command's `--dry-run=client -o json` output, minus
    /// `"creationTimestamp": null`.
    #[test]
    fn real_kubectl_job_with_affinity_spread_aliases_and_dns_bytes() {
        let parts: &[&[u8]] = &[
            b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\xe8\x04\x0a\x89\x01\x0a\x02j2\x12",
            b"\x00\x1a\x09wire-cap4\"\x00*\x002\x008\x00B\x00b+\x0a!cronjob.kubernetes.io/inst",
            b"antiate\x12\x06manualj?\x0a\x07CronJob\x1a\x02cj\"$1101d690-d113-46f8-a5d3-03e47",
            b"fa8dbd7*\x08batch/v10\x01\x12\xcf\x032\xcc\x03\x0a\x10\x0a\x00\x12\x00\x1a\x00\"",
            b"\x00*\x002\x008\x00B\x00\x12\xb7\x03\x12@\x0a\x03app\x12\x07busybox*\x00B\x00j",
            b"\x14/dev/termination-logr\x06Always\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01",
            b"\x04File\x1a\x05Never \x1e2\x0cClusterFirstB\x00J\x00R\x00X\x00`\x00h\x00r\x00",
            b"\x82\x01\x00\x8a\x01\x00\x92\x01\x9e\x01\x0aG\x0a/\x0a-\x0a\x0f\x0a\x04disk\x12",
            b"\x02In\x1a\x03ssd\x12\x1a\x0a\x0dmetadata.name\x12\x05NotIn\x1a\x02n1\x12\x14",
            b"\x08\x05\x12\x10\x0a\x0e\x0a\x04zone\x12\x06Exists\x121\x0a/\x0a\x0e\x0a\x0c\x0a",
            b"\x03app\x12\x05cache\x12\x05other\x1a\x16kubernetes.io/hostname\x1a \x12\x1e\x08",
            b"2\x12\x1a\x0a\x10\x12\x0e\x0a\x03app\x12\x02In\x1a\x03web\x1a\x04zone\"\x00\x9a",
            b"\x01\x11default-scheduler\xba\x01\x18\x0a\x0810.0.0.1\x12\x02db\x12\x08db.local",
            b"\xc2\x01\x00\xd2\x01)\x0a\x071.1.1.1\x12\x09svc.local\x1a\x0a\x0a\x05ndots\x12",
            b"\x012\x1a\x07\x0a\x05edns0\x8a\x02G\x08\x01\x12\x04zone\x1a\x0dDoNotSchedule\"",
            b"\x0a\x0a\x08\x0a\x03app\x12\x01a(\x022\x05Honor:\x06IgnoreB\x11pod-template-hash",
            b"\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00",
        ];
        let want: Value = serde_json::from_str(r#"{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j2","namespace":"wire-cap4","annotations":{"cronjob.kubernetes.io/instantiate":"manual"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"cj","uid":"1101d690-d113-46f8-a5d3-03e47fa8dbd7","controller":true}]},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"app","image":"busybox","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"disk","operator":"In","values":["ssd"]}],"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["n1"]}]}]},"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"zone","operator":"Exists"}]}}]},"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"namespaces":["other"],"topologyKey":"kubernetes.io/hostname"}]},"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":50,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["web"]}]},"topologyKey":"zone","namespaceSelector":{}}}]}},"schedulerName":"default-scheduler","hostAliases":[{"ip":"10.0.0.1","hostnames":["db","db.local"]}],"dnsConfig":{"nameservers":["1.1.1.1"],"searches":["svc.local"],"options":[{"name":"ndots","value":"2"},{"name":"edns0"}]},"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"a"}},"minDomains":2,"nodeAffinityPolicy":"Honor","nodeTaintsPolicy":"Ignore","matchLabelKeys":["pod-template-hash"]}]}}},"status":{}}"#).unwrap_or_default();
        assert_eq!(ok(&parts.concat()), want);
    }
}
