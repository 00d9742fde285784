//! Turning a typed message into the JSON Go's `encoding/json` would produce for the same value.

use base64::Engine as _;
use chrono::Datelike as _;
use serde_json::{Map, Value};

use super::model::Ty::{Bool, Bytes, I32, I64, IntOrString, Quantity, Str};

use super::model::{Field, Message, Shape, Ty};
use super::reader::{
    Reader, WIRE_LEN, as_i32, as_i64, read_len, read_string, read_varint, unknown_field,
};

/// Bound on message nesting. The schema is acyclic (deepest path is about a dozen levels), so this
/// only guards against a corrupted table ever turning into unbounded recursion.
const MAX_DEPTH: usize = 32;

/// Decodes `bytes` as `message`, merging its fields into `out` (merging is also how protobuf treats
/// a repeated occurrence of a singular message field).
pub(super) fn decode_message(
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
pub(super) fn format_time(seconds: i64, nanos: i32, micro: bool) -> Result<String, String> {
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
