//! The small JSONPath dialect of CRD `additionalPrinterColumns` (client-go's `jsonpath`, as the
//! API server uses it to fill table cells).
//!
//! Supported: `.field`, `['key']`/`["key"]` (for keys with dots; `\.` also escapes a dot in a
//! dotted field), `[n]` (negative counts from the end), `[start:end:step]`, `[*]`/`.*`, and
//! filters `[?(@.path <op> literal)]` with `==`, `!=`, `<`, `<=`, `>`, `>=`, or `[?(@.path)]` for
//! existence. The path may be wrapped in `{...}` and start with `$`. Anything else (recursive
//! descent `..`, unions) yields no result rather than an error, like a missing field.

use std::cmp::Ordering;

use serde_json::Value;

use crate::schema::format_go_float;

/// Evaluates a printer-column `jsonPath` (e.g. `.spec.replicas`,
/// `.status.conditions[?(@.type=="Ready")].status`, `.spec.items[*].name`) against `obj`,
/// returning every match in document order; missing fields and unsupported syntax give none.
/// (Tables only need the first match, through [`cell`]; the full result is for tests.)
#[cfg(test)]
pub fn eval(path: &str, obj: &Value) -> Vec<Value> {
    find_all(path, obj).into_iter().cloned().collect()
}

/// Renders a printer-column cell the way kube-apiserver does for a column of the given OpenAPI
/// `type`: only the first match counts; `integer` truncates floats, `number` and `boolean` need
/// values of that type, `string` prints any value as text (objects and arrays as JSON), and
/// `date` returns the raw string for the caller to turn into an age. A missing or mismatched
/// value is `Value::Null`, which the table shows as `<none>`.
pub fn cell(path: &str, column_type: &str, obj: &Value) -> Value {
    let Some(first) = find_all(path, obj).into_iter().next() else {
        return Value::Null;
    };
    match (column_type, first) {
        ("integer", Value::Number(n)) => match n.as_i64() {
            Some(i) => Value::from(i),
            // Go converts float64 to int64 by truncation.
            None => n.as_f64().map_or(Value::Null, |f| Value::from(f as i64)),
        },
        ("number", Value::Number(n)) => Value::Number(n.clone()),
        ("boolean", Value::Bool(b)) => Value::Bool(*b),
        ("string", value) => as_text(value),
        ("date", Value::String(s)) => Value::String(s.clone()),
        _ => Value::Null,
    }
}

/// A value printed by client-go's `PrintResults`: strings as-is, numbers and booleans as Go
/// prints them, objects and arrays as compact JSON.
fn as_text(value: &Value) -> Value {
    let text = match value {
        Value::Null => return Value::Null,
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => format_go_float(n.as_f64().unwrap_or(0.0)),
        },
        Value::Array(_) | Value::Object(_) => value.to_string(),
    };
    Value::String(text)
}

fn find_all<'a>(path: &str, obj: &'a Value) -> Vec<&'a Value> {
    match parse(path) {
        Some(steps) => run(&steps, obj),
        None => Vec::new(),
    }
}

/// One step of a path, applied to every value the previous steps produced.
#[derive(Debug, PartialEq)]
enum Step {
    Field(String),
    Wildcard,
    Index(i64),
    Slice {
        start: Option<i64>,
        end: Option<i64>,
        step: Option<i64>,
    },
    Filter(Filter),
}

/// `[?(@.path <op> literal)]`, or `[?(@.path)]` when `test` is `None`.
#[derive(Debug, PartialEq)]
struct Filter {
    path: Vec<Step>,
    test: Option<(Op, Literal)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

#[derive(Debug, PartialEq)]
enum Literal {
    Str(String),
    Num(f64),
    Bool(bool),
}

fn run<'a>(steps: &[Step], root: &'a Value) -> Vec<&'a Value> {
    steps.iter().fold(vec![root], |current, step| {
        current
            .into_iter()
            .flat_map(|value| apply(step, value))
            .collect()
    })
}

fn apply<'a>(step: &Step, value: &'a Value) -> Vec<&'a Value> {
    match (step, value) {
        (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
        (Step::Wildcard, Value::Object(map)) => map.values().collect(),
        (Step::Wildcard, Value::Array(list)) => list.iter().collect(),
        (Step::Index(index), Value::Array(list)) => resolve_index(*index, list.len())
            .and_then(|i| list.get(i))
            .into_iter()
            .collect(),
        (Step::Slice { start, end, step }, Value::Array(list)) => slice(list, *start, *end, *step),
        (Step::Filter(filter), Value::Array(list)) => {
            list.iter().filter(|item| filter.accepts(item)).collect()
        }
        _ => Vec::new(),
    }
}

/// A possibly negative index (counting from the end) as a position in a list of `len`.
fn resolve_index(index: i64, len: usize) -> Option<usize> {
    let len = i64::try_from(len).ok()?;
    let index = if index < 0 { index + len } else { index };
    usize::try_from(index).ok()
}

/// Python-style slicing with a positive step; bounds are clamped to the list.
fn slice(list: &[Value], start: Option<i64>, end: Option<i64>, step: Option<i64>) -> Vec<&Value> {
    let step = step.unwrap_or(1);
    let Ok(step) = usize::try_from(step) else {
        return Vec::new();
    };
    if step == 0 {
        return Vec::new();
    }
    let len = list.len();
    let clamp = |bound: i64| {
        let signed_len = i64::try_from(len).unwrap_or(i64::MAX);
        let position = if bound < 0 {
            bound.saturating_add(signed_len)
        } else {
            bound
        };
        usize::try_from(position.clamp(0, signed_len)).unwrap_or(0)
    };
    let start = start.map_or(0, clamp);
    let end = end.map_or(len, clamp);
    if start >= end {
        return Vec::new();
    }
    list.get(start..end)
        .unwrap_or_default()
        .iter()
        .step_by(step)
        .collect()
}

impl Filter {
    /// Whether an item passes: the path must resolve, and (with a test) some result must
    /// compare as asked. Values of different types are never equal and never ordered.
    fn accepts(&self, item: &Value) -> bool {
        let found = run(&self.path, item);
        match &self.test {
            None => !found.is_empty(),
            Some((op, literal)) => found.into_iter().any(|value| compare(value, *op, literal)),
        }
    }
}

fn compare(value: &Value, op: Op, literal: &Literal) -> bool {
    let ordering = match (value, literal) {
        (Value::String(a), Literal::Str(b)) => Some(a.as_str().cmp(b.as_str())),
        (Value::Number(a), Literal::Num(b)) => a.as_f64().and_then(|a| a.partial_cmp(b)),
        (Value::Bool(a), Literal::Bool(b)) if matches!(op, Op::Eq | Op::Ne) => Some(a.cmp(b)),
        _ => None,
    };
    match (op, ordering) {
        (Op::Ne, None) => true,
        (_, None) => false,
        (Op::Eq, Some(o)) => o == Ordering::Equal,
        (Op::Ne, Some(o)) => o != Ordering::Equal,
        (Op::Lt, Some(o)) => o == Ordering::Less,
        (Op::Le, Some(o)) => o != Ordering::Greater,
        (Op::Gt, Some(o)) => o == Ordering::Greater,
        (Op::Ge, Some(o)) => o != Ordering::Less,
    }
}

// ---------------------------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------------------------

/// Parses a whole path; `None` if any part of it is unsupported.
fn parse(path: &str) -> Option<Vec<Step>> {
    let mut text = path.trim();
    if let Some(inner) = text.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
        text = inner.trim();
    }
    let text = text.strip_prefix('$').unwrap_or(text);
    if text.is_empty() {
        return None;
    }
    Parser {
        chars: text.chars().collect(),
        pos: 0,
    }
    .steps()
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += 1;
        Some(c)
    }

    /// Parses to the end of the input.
    fn steps(&mut self) -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        while let Some(c) = self.bump() {
            match c {
                '.' => match self.peek() {
                    // `.` alone (or trailing) names the current value; `[` follows its own rules.
                    None | Some('[') => {}
                    Some('.') => return None,
                    Some('*') => {
                        self.pos += 1;
                        steps.push(Step::Wildcard);
                    }
                    Some(_) => steps.push(Step::Field(self.field_name()?)),
                },
                '[' => steps.push(self.bracket()?),
                _ => return None,
            }
        }
        Some(steps)
    }

    /// A dotted field name, up to the next `.` or `[`; `\` escapes the next character.
    fn field_name(&mut self) -> Option<String> {
        let mut name = String::new();
        while let Some(c) = self.peek() {
            match c {
                '.' | '[' => break,
                '\\' => {
                    self.pos += 1;
                    name.push(self.bump()?);
                }
                _ => {
                    self.pos += 1;
                    name.push(c);
                }
            }
        }
        (!name.is_empty()).then_some(name)
    }

    /// The contents of `[...]` (the `[` already consumed) as a step.
    fn bracket(&mut self) -> Option<Step> {
        let content = self.bracket_content()?;
        let content = content.trim();
        if let Some(filter) = content.strip_prefix('?') {
            let inner = filter.trim().strip_prefix('(')?.strip_suffix(')')?;
            return parse_filter(inner).map(Step::Filter);
        }
        if content == "*" {
            return Some(Step::Wildcard);
        }
        if let Some(key) = unquote(content) {
            return Some(Step::Field(key));
        }
        if content.contains(':') {
            return parse_slice(content);
        }
        content.parse().ok().map(Step::Index)
    }

    /// Reads up to the matching `]`, skipping brackets inside quotes and parentheses.
    fn bracket_content(&mut self) -> Option<String> {
        let mut content = String::new();
        let mut quote: Option<char> = None;
        let mut depth = 0usize;
        loop {
            let c = self.bump()?;
            match (quote, c) {
                (Some(_), '\\') => {
                    content.push(c);
                    content.push(self.bump()?);
                    continue;
                }
                (Some(q), _) if c == q => quote = None,
                (Some(_), _) => {}
                (None, '\'' | '"') => quote = Some(c),
                (None, '(') => depth += 1,
                (None, ')') => depth = depth.saturating_sub(1),
                (None, ']') if depth == 0 => return Some(content),
                (None, _) => {}
            }
            content.push(c);
        }
    }
}

/// `'text'` or `"text"` (the whole input) with `\` escapes removed.
fn unquote(text: &str) -> Option<String> {
    let quote = text.chars().next().filter(|c| *c == '\'' || *c == '"')?;
    let inner = text.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            out.push(chars.next()?);
        } else if c == quote {
            return None;
        } else {
            out.push(c);
        }
    }
    Some(out)
}

fn parse_slice(content: &str) -> Option<Step> {
    let parts: Vec<&str> = content.split(':').map(str::trim).collect();
    if parts.len() > 3 {
        return None;
    }
    let bound = |i: usize| -> Option<Option<i64>> {
        match parts.get(i) {
            None | Some(&"") => Some(None),
            Some(text) => text.parse().ok().map(Some),
        }
    };
    Some(Step::Slice {
        start: bound(0)?,
        end: bound(1)?,
        step: bound(2)?,
    })
}

/// `@.path <op> literal` or `@.path`.
fn parse_filter(expression: &str) -> Option<Filter> {
    let (left, test) = match find_operator(expression) {
        Some((at, op, width)) => {
            let right = expression.get(at + width..)?.trim();
            (expression.get(..at)?, Some((op, parse_literal(right)?)))
        }
        None => (expression, None),
    };
    let relative = left.trim().strip_prefix('@')?;
    let path = if relative.is_empty() {
        Vec::new()
    } else {
        Parser {
            chars: relative.chars().collect(),
            pos: 0,
        }
        .steps()?
    };
    Some(Filter { path, test })
}

/// The first comparison operator outside quotes: byte offset, operator and its length.
fn find_operator(expression: &str) -> Option<(usize, Op, usize)> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in expression.char_indices() {
        if let Some(q) = quote {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                _ if c == q => quote = None,
                _ => {}
            }
            continue;
        }
        let next = expression
            .get(at + c.len_utf8()..)
            .and_then(|rest| rest.chars().next());
        let op = match (c, next) {
            ('\'' | '"', _) => {
                quote = Some(c);
                continue;
            }
            ('=', Some('=')) => (Op::Eq, 2),
            ('!', Some('=')) => (Op::Ne, 2),
            ('<', Some('=')) => (Op::Le, 2),
            ('>', Some('=')) => (Op::Ge, 2),
            ('<', _) => (Op::Lt, 1),
            ('>', _) => (Op::Gt, 1),
            _ => continue,
        };
        return Some((at, op.0, op.1));
    }
    None
}

/// A quoted string, `true`/`false`, a number, or (leniently) a bare word taken as a string.
fn parse_literal(text: &str) -> Option<Literal> {
    if text.is_empty() {
        return None;
    }
    if let Some(s) = unquote(text) {
        return Some(Literal::Str(s));
    }
    Some(match text {
        "true" => Literal::Bool(true),
        "false" => Literal::Bool(false),
        _ => match text.parse::<f64>() {
            Ok(n) if n.is_finite() => Literal::Num(n),
            _ => Literal::Str(text.to_owned()),
        },
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn sample() -> Value {
        json!({
            "metadata": {
                "name": "w",
                "labels": {"app": "web", "app.kubernetes.io/name": "widget"},
                "creationTimestamp": "2024-01-02T03:04:05Z"
            },
            "spec": {
                "replicas": 3,
                "ratio": 0.5,
                "big": 1e6,
                "paused": false,
                "items": [{"name": "a", "size": 1}, {"name": "b", "size": 5}, {"name": "c"}],
                "selector": {"matchLabels": {"app": "web"}}
            },
            "status": {
                "conditions": [
                    {"type": "Available", "status": "False"},
                    {"type": "Ready", "status": "True", "observed": 2}
                ]
            }
        })
    }

    #[test]
    fn dotted_fields() {
        let obj = sample();
        assert_eq!(eval(".spec.replicas", &obj), vec![json!(3)]);
        assert_eq!(eval(".metadata.labels.app", &obj), vec![json!("web")]);
        assert_eq!(eval("{.metadata.name}", &obj), vec![json!("w")]);
        assert_eq!(eval("$.metadata.name", &obj), vec![json!("w")]);
        assert_eq!(eval(".", &obj), vec![obj.clone()]);
    }

    #[test]
    fn missing_fields_give_nothing() {
        let obj = sample();
        assert!(eval(".spec.nope", &obj).is_empty());
        assert!(eval(".spec.replicas.deeper", &obj).is_empty());
        assert!(eval(".spec.items.name", &obj).is_empty());
    }

    #[test]
    fn bracketed_and_escaped_keys() {
        let obj = sample();
        let expected = vec![json!("widget")];
        assert_eq!(
            eval(".metadata.labels['app.kubernetes.io/name']", &obj),
            expected
        );
        assert_eq!(
            eval(r#".metadata.labels["app.kubernetes.io/name"]"#, &obj),
            expected
        );
        assert_eq!(
            eval(r".metadata.labels.app\.kubernetes\.io/name", &obj),
            expected
        );
        assert_eq!(eval("['spec']['replicas']", &obj), vec![json!(3)]);
    }

    #[test]
    fn indices_slices_and_wildcards() {
        let obj = sample();
        assert_eq!(eval(".spec.items[0].name", &obj), vec![json!("a")]);
        assert_eq!(eval(".spec.items[-1].name", &obj), vec![json!("c")]);
        assert!(eval(".spec.items[3].name", &obj).is_empty());
        assert!(eval(".spec.items[-4]", &obj).is_empty());
        assert_eq!(
            eval(".spec.items[*].name", &obj),
            vec![json!("a"), json!("b"), json!("c")]
        );
        assert_eq!(eval(".spec.items[*].size", &obj), vec![json!(1), json!(5)]);
        assert_eq!(
            eval(".spec.items[1:].name", &obj),
            vec![json!("b"), json!("c")]
        );
        assert_eq!(
            eval(".spec.items[0:3:2].name", &obj),
            vec![json!("a"), json!("c")]
        );
        assert_eq!(eval(".spec.items[-2:-1].name", &obj), vec![json!("b")]);
        assert!(eval(".spec.items[2:1]", &obj).is_empty());
        assert!(eval(".spec.items[::0]", &obj).is_empty());
        assert_eq!(eval(".spec.selector.*.app", &obj), vec![json!("web")]);
    }

    #[test]
    fn filters_with_equality() {
        let obj = sample();
        let ready = r#".status.conditions[?(@.type=="Ready")].status"#;
        assert_eq!(eval(ready, &obj), vec![json!("True")]);
        assert_eq!(
            eval(".status.conditions[?(@.type=='Ready')].status", &obj),
            vec![json!("True")]
        );
        assert_eq!(
            eval(".status.conditions[?(@.type == Ready)].status", &obj),
            vec![json!("True")]
        );
        assert_eq!(
            eval(".status.conditions[?(@.type!=\"Ready\")].type", &obj),
            vec![json!("Available")]
        );
        assert!(eval(".status.conditions[?(@.type==\"Gone\")].status", &obj).is_empty());
    }

    #[test]
    fn filters_with_numbers_booleans_and_existence() {
        let obj = sample();
        assert_eq!(
            eval(".spec.items[?(@.size>2)].name", &obj),
            vec![json!("b")]
        );
        assert_eq!(
            eval(".spec.items[?(@.size<=1)].name", &obj),
            vec![json!("a")]
        );
        assert_eq!(
            eval(".spec.items[?(@.size)].name", &obj),
            vec![json!("a"), json!("b")]
        );
        assert_eq!(
            eval(".status.conditions[?(@.observed==2.0)].type", &obj),
            vec![json!("Ready")]
        );
        let flags = json!({"l": [{"on": true, "n": "x"}, {"on": false, "n": "y"}]});
        assert_eq!(eval(".l[?(@.on==true)].n", &flags), vec![json!("x")]);
        // Mismatched types are unequal and unordered.
        assert_eq!(
            eval(".l[?(@.on!=\"true\")].n", &flags),
            vec![json!("x"), json!("y")]
        );
        assert!(eval(".l[?(@.n>1)].n", &flags).is_empty());
    }

    #[test]
    fn filters_see_brackets_and_operators_inside_quotes_as_text() {
        let obj = json!({"l": [{"k": "a]b==c", "v": 1}, {"k": "x", "v": 2}]});
        assert_eq!(eval(r#".l[?(@.k=="a]b==c")].v"#, &obj), vec![json!(1)]);
        assert_eq!(eval(r#".l[?(@['k']=="x")].v"#, &obj), vec![json!(2)]);
    }

    #[test]
    fn unsupported_or_malformed_paths_give_nothing() {
        let obj = sample();
        for path in [
            "",
            "spec.replicas",
            "..replicas",
            ".spec..replicas",
            ".spec.items[0,1]",
            ".spec.items[",
            ".spec.items[?(@.name=)]",
            ".spec.items[?(name=='a')]",
            ".spec['unterminated]",
            "{}",
            ".spec.items[1:2:3:4]",
            ".spec.items[x]",
            ".spec.items[?@.a]",
            ".a\\",
            "[\"a\\",
        ] {
            assert!(eval(path, &obj).is_empty(), "{path}");
        }
    }

    #[test]
    fn cells_follow_the_column_type() {
        let obj = sample();
        assert_eq!(cell(".spec.replicas", "integer", &obj), json!(3));
        assert_eq!(cell(".spec.ratio", "integer", &obj), json!(0));
        assert_eq!(cell(".spec.ratio", "number", &obj), json!(0.5));
        assert_eq!(cell(".spec.replicas", "number", &obj), json!(3));
        assert_eq!(cell(".spec.paused", "boolean", &obj), json!(false));
        assert_eq!(cell(".metadata.name", "string", &obj), json!("w"));
        assert_eq!(
            cell(".metadata.creationTimestamp", "date", &obj),
            json!("2024-01-02T03:04:05Z")
        );
        assert_eq!(cell(".spec.items[*].name", "string", &obj), json!("a"));
    }

    #[test]
    fn string_cells_print_any_value() {
        let obj = sample();
        assert_eq!(cell(".spec.replicas", "string", &obj), json!("3"));
        assert_eq!(cell(".spec.big", "string", &obj), json!("1e+06"));
        assert_eq!(cell(".spec.paused", "string", &obj), json!("false"));
        assert_eq!(
            cell(".spec.selector", "string", &obj),
            json!(r#"{"matchLabels":{"app":"web"}}"#)
        );
    }

    #[test]
    fn mismatched_or_missing_cells_are_null() {
        let obj = sample();
        assert_eq!(cell(".spec.nope", "string", &obj), Value::Null);
        assert_eq!(cell(".metadata.name", "integer", &obj), Value::Null);
        assert_eq!(cell(".spec.replicas", "boolean", &obj), Value::Null);
        assert_eq!(cell(".spec.replicas", "date", &obj), Value::Null);
        assert_eq!(cell(".spec.replicas", "money", &obj), Value::Null);
        assert_eq!(cell(".x", "string", &json!({"x": null})), Value::Null);
    }

    #[test]
    fn parser_builds_expected_steps() {
        assert_eq!(
            parse(r#".a['b.c'][2][*][?(@.d>=1)]"#),
            Some(vec![
                Step::Field("a".into()),
                Step::Field("b.c".into()),
                Step::Index(2),
                Step::Wildcard,
                Step::Filter(Filter {
                    path: vec![Step::Field("d".into())],
                    test: Some((Op::Ge, Literal::Num(1.0))),
                }),
            ])
        );
    }
}
