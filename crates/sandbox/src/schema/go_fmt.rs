//! JSON numbers as Go decodes them, and values printed the way Go prints them, as the API
//! server's messages show them.

use std::fmt::Write as _;

use serde_json::{Number, Value};

/// A JSON number as the server decodes it: integral literals become int64, the rest float64.
#[derive(Clone, Copy)]
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(super) fn of(n: &Number) -> Self {
        match n.as_i64() {
            Some(i) => Self::Int(i),
            None => Self::Float(n.as_f64().unwrap_or(0.0)),
        }
    }
}

/// A bad value as the API server's field errors print it: numbers and booleans bare, strings
/// quoted, null as `"null"`, objects and arrays in Go syntax.
pub(super) fn go_value(value: &Value) -> String {
    match value {
        Value::Null => "\"null\"".to_owned(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => go_number(n),
        Value::String(s) => go_quote(s),
        Value::Array(_) | Value::Object(_) => go_syntax(value),
    }
}

/// Go's `%#v` of a decoded JSON value (`map[string]interface {}{"a":1}`).
fn go_syntax(value: &Value) -> String {
    match value {
        Value::Null => "interface {}(nil)".to_owned(),
        Value::Array(list) => {
            let items: Vec<String> = list.iter().map(go_syntax).collect();
            format!("[]interface {{}}{{{}}}", items.join(", "))
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by_key(|(key, _)| *key);
            let entries: Vec<String> = entries
                .into_iter()
                .map(|(k, v)| format!("{}:{}", go_quote(k), go_syntax(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", entries.join(", "))
        }
        scalar => go_value(scalar),
    }
}

/// Integers print as int64; anything else was a float64 in Go.
fn go_number(n: &Number) -> String {
    match Num::of(n) {
        Num::Int(i) => i.to_string(),
        Num::Float(f) => format_go_float(f),
    }
}

/// Formats a float the way Go's `%v` does (`strconv.FormatFloat(f, 'g', -1, 64)`): shortest
/// round-trip digits, in exponent form (`1e+06`, `1.5e-07`) when the decimal exponent is below
/// -4 or at least 6. Shared with the printer-column code, which prints numbers the same way.
pub fn format_go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    let scientific = format!("{:e}", f.abs());
    let Some((mantissa, exponent)) = scientific.split_once('e') else {
        return f.to_string();
    };
    let Ok(exponent) = exponent.parse::<i32>() else {
        return f.to_string();
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!(
            "{sign}{first}{fraction}e{exp_sign}{:02}",
            exponent.unsigned_abs()
        );
    }
    if exponent < 0 {
        let zeros = "0".repeat(exponent.unsigned_abs() as usize - 1);
        return format!("{sign}0.{zeros}{digits}");
    }
    let whole_len = exponent as usize + 1;
    if digits.len() <= whole_len {
        format!("{sign}{digits}{}", "0".repeat(whole_len - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(whole_len);
        format!("{sign}{whole}.{fraction}")
    }
}

/// go-openapi's `IsFloat64AJSONInteger`: integral within ±(2^53-1), or within a relative 1e-9
/// of the integer below a positive value.
pub(super) fn is_json_integer(f: f64) -> bool {
    const MAX_JSON_INT: f64 = 9_007_199_254_740_991.0;
    if !f.is_finite() || f.abs() > MAX_JSON_INT {
        return false;
    }
    if f.fract() == 0.0 {
        return true;
    }
    let whole = f.trunc();
    f > 0.0 && whole > 0.0 && (f - whole) / (f + whole) < 1e-9
}

/// Go's `strconv.Quote`: JSON-like, but control characters use `\a`, `\v`, `\x..` escapes and
/// invisible Unicode is escaped as `\u....`.
pub(super) fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c == '\u{7f}' => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if !is_go_printable(c) => {
                let _ = if (c as u32) < 0x10000 {
                    write!(out, "\\u{:04x}", c as u32)
                } else {
                    write!(out, "\\U{:08x}", c as u32)
                };
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Approximates Go's `unicode.IsPrint`: no controls, no spaces other than ' ', no invisible
/// formatting characters.
fn is_go_printable(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{feff}'))
}
