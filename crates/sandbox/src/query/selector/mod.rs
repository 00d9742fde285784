//! Label and field selectors, parsed and matched like the API server's
//! `k8s.io/apimachinery/pkg/labels` and `k8s.io/apimachinery/pkg/fields` packages.
//!
//! The parsers are transcriptions of the Go ones rather than fresh grammars, because clients
//! (and conformance tests) see their error strings verbatim in 400 responses: the label parser
//! keeps the Go lexer's token rules, lookahead contexts and `found '…', expected: …` wording,
//! and label keys/values are validated with the same `IsQualifiedName` / `IsValidLabelValue`
//! messages.

use std::collections::BTreeSet;

use serde_json::{Map, Value};

use crate::field_error::FieldError;

/// A parsed `labelSelector`: every requirement must hold (comma means AND).
#[derive(Debug, Clone, PartialEq)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

/// One `key <op> values` clause of a label selector.
#[derive(Debug, Clone, PartialEq)]
struct Requirement {
    key: String,
    operator: Operator,
    /// Sorted and de-duplicated, as Go's `sets.String.List()` leaves them.
    values: Vec<String>,
}

/// Label selector operators; `=` and `==` are the same operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Operator {
    Equals,
    NotEquals,
    In,
    NotIn,
    Exists,
    DoesNotExist,
    GreaterThan,
    LessThan,
}

impl LabelSelector {
    /// Parses the `labelSelector` query parameter: `a=b`, `a==b`, `a!=b`, `a in (x,y)`,
    /// `a notin (x)`, `a`, `!a`, `a>1`, `a<1`, comma-separated (AND), whitespace tolerant.
    /// An empty (or all-blank) string matches everything.
    ///
    /// Errors carry the real server's message, e.g.
    /// `unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt`.
    pub fn parse(s: &str) -> Result<Self, String> {
        let requirements = Parser::new(s).parse()?;
        Ok(Self { requirements })
    }

    /// Whether an object with these labels (None = no labels) is selected.
    /// `a!=b` and `a notin (…)` select objects that lack label `a` altogether, as upstream.
    pub fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }

    /// True when the selector has no requirements and so selects everything.
    pub fn is_empty(&self) -> bool {
        self.requirements.is_empty()
    }
}

impl Requirement {
    fn matches(&self, labels: Option<&Map<String, Value>>) -> bool {
        let value = labels.and_then(|l| l.get(&self.key)).map(scalar_text);
        match (self.operator, value) {
            (Operator::Exists, value) => value.is_some(),
            (Operator::DoesNotExist, value) => value.is_none(),
            (Operator::Equals | Operator::In, Some(value)) => self.values.contains(&value),
            (Operator::NotEquals | Operator::NotIn, Some(value)) => !self.values.contains(&value),
            (Operator::NotEquals | Operator::NotIn, None) => true,
            (Operator::GreaterThan | Operator::LessThan, Some(value)) => self.compare(&value),
            (
                Operator::Equals | Operator::In | Operator::GreaterThan | Operator::LessThan,
                None,
            ) => false,
        }
    }

    /// `Gt`/`Lt`: both sides must be base-10 integers, otherwise the label doesn't match.
    fn compare(&self, label: &str) -> bool {
        let (Ok(actual), Some(Ok(bound))) = (
            label.parse::<i64>(),
            self.values.first().map(|v| v.parse::<i64>()),
        ) else {
            return false;
        };
        match self.operator {
            Operator::GreaterThan => actual > bound,
            _ => actual < bound,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Label selector lexer: the Go lexer's tokens, including its longest-match on `!=` / `==`.

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Token {
    End,
    OpenPar,
    ClosedPar,
    Comma,
    Not,
    Equals,
    DoubleEquals,
    NotEquals,
    GreaterThan,
    LessThan,
    In,
    NotIn,
    Identifier,
}

#[derive(Debug, Clone)]
struct Scanned {
    token: Token,
    literal: String,
}

fn is_whitespace(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special(c: char) -> bool {
    matches!(c, '=' | '!' | '(' | ')' | ',' | '>' | '<')
}

/// Splits a selector into tokens, ending with `End`. Like Go, a NUL character ends the input.
fn lex(input: &str) -> Vec<Scanned> {
    let chars: Vec<char> = input.chars().take_while(|&c| c != '\0').collect();
    let mut tokens = Vec::new();
    let mut pos = 0;
    loop {
        while chars.get(pos).is_some_and(|&c| is_whitespace(c)) {
            pos += 1;
        }
        let Some(&first) = chars.get(pos) else {
            tokens.push(Scanned {
                token: Token::End,
                literal: String::new(),
            });
            return tokens;
        };
        let (scanned, len) = if is_special(first) {
            scan_symbol(first, chars.get(pos + 1).copied())
        } else {
            scan_identifier(chars.get(pos..).unwrap_or_default())
        };
        tokens.push(scanned);
        pos += len;
    }
}

/// Every single special character is a token; `!=` and `==` win as the longer match.
fn scan_symbol(first: char, second: Option<char>) -> (Scanned, usize) {
    let two = match (first, second) {
        ('!', Some('=')) => Some(Token::NotEquals),
        ('=', Some('=')) => Some(Token::DoubleEquals),
        _ => None,
    };
    if let Some(token) = two {
        let literal = [first, '='].iter().collect();
        return (Scanned { token, literal }, 2);
    }
    let token = match first {
        '(' => Token::OpenPar,
        ')' => Token::ClosedPar,
        ',' => Token::Comma,
        '!' => Token::Not,
        '=' => Token::Equals,
        '>' => Token::GreaterThan,
        _ => Token::LessThan,
    };
    (
        Scanned {
            token,
            literal: first.to_string(),
        },
        1,
    )
}

/// Reads up to the next blank or special character; `in` and `notin` are keywords.
fn scan_identifier(chars: &[char]) -> (Scanned, usize) {
    let len = chars
        .iter()
        .take_while(|&&c| !is_special(c) && !is_whitespace(c))
        .count();
    let literal: String = chars.iter().take(len).collect();
    let token = match literal.as_str() {
        "in" => Token::In,
        "notin" => Token::NotIn,
        _ => Token::Identifier,
    };
    (Scanned { token, literal }, len)
}

// ---------------------------------------------------------------------------------------------
// Label selector parser.

/// Go's parser reads `in`/`notin` as plain identifiers except where an operator is expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Context {
    KeyAndOperator,
    Values,
}

struct Parser {
    items: Vec<Scanned>,
    position: usize,
}

const BINARY_OPERATORS: &str = "in, notin, =, ==, !=, gt, lt";

impl Parser {
    fn new(input: &str) -> Self {
        Self {
            items: lex(input),
            position: 0,
        }
    }

    fn lookahead(&self, context: Context) -> (Token, String) {
        let item = self.items.get(self.position).or(self.items.last());
        let (token, literal) = item.map_or((Token::End, String::new()), |item| {
            (item.token, item.literal.clone())
        });
        (contextual(token, context), literal)
    }

    fn consume(&mut self, context: Context) -> (Token, String) {
        let next = self.lookahead(context);
        if self.position < self.items.len() {
            self.position += 1;
        }
        next
    }

    fn parse(&mut self) -> Result<Vec<Requirement>, String> {
        let mut requirements = Vec::new();
        loop {
            let (token, literal) = self.lookahead(Context::Values);
            match token {
                Token::Identifier | Token::Not => {
                    let requirement = self
                        .parse_requirement()
                        .map_err(|e| format!("unable to parse requirement: {e}"))?;
                    requirements.push(requirement);
                    if self.parse_separator()? {
                        return Ok(requirements);
                    }
                }
                Token::End => return Ok(requirements),
                _ => {
                    return Err(format!(
                        "found '{literal}', expected: !, identifier, or 'end of string'"
                    ));
                }
            }
        }
    }

    /// After a requirement: end of input (true) or a comma followed by another requirement.
    fn parse_separator(&mut self) -> Result<bool, String> {
        let (token, literal) = self.consume(Context::Values);
        match token {
            Token::End => Ok(true),
            Token::Comma => {
                let (next, next_literal) = self.lookahead(Context::Values);
                if next == Token::Identifier || next == Token::Not {
                    Ok(false)
                } else {
                    Err(format!(
                        "found '{next_literal}', expected: identifier after ','"
                    ))
                }
            }
            _ => Err(format!(
                "found '{literal}', expected: ',' or 'end of string'"
            )),
        }
    }

    fn parse_requirement(&mut self) -> Result<Requirement, String> {
        let (key, unary) = self.parse_key_and_infer_operator()?;
        if let Some(operator) = unary {
            return new_requirement(key, operator, Vec::new());
        }
        let operator = self.parse_operator()?;
        let values = match operator {
            Operator::In | Operator::NotIn => self.parse_values()?,
            _ => self.parse_exact_value()?,
        };
        new_requirement(key, operator, values)
    }

    /// Reads `[!]key`; a key directly followed by `,` or the end is an existence test.
    fn parse_key_and_infer_operator(&mut self) -> Result<(String, Option<Operator>), String> {
        let (mut token, mut literal) = self.consume(Context::Values);
        let mut operator = None;
        if token == Token::Not {
            operator = Some(Operator::DoesNotExist);
            (token, literal) = self.consume(Context::Values);
        }
        if token != Token::Identifier {
            return Err(format!("found '{literal}', expected: identifier"));
        }
        validate_label_key(&literal)?;
        let (next, _) = self.lookahead(Context::Values);
        if operator.is_none() && matches!(next, Token::End | Token::Comma) {
            operator = Some(Operator::Exists);
        }
        Ok((literal, operator))
    }

    fn parse_operator(&mut self) -> Result<Operator, String> {
        let (token, literal) = self.consume(Context::KeyAndOperator);
        match token {
            Token::In => Ok(Operator::In),
            Token::NotIn => Ok(Operator::NotIn),
            Token::Equals | Token::DoubleEquals => Ok(Operator::Equals),
            Token::NotEquals => Ok(Operator::NotEquals),
            Token::GreaterThan => Ok(Operator::GreaterThan),
            Token::LessThan => Ok(Operator::LessThan),
            _ => Err(format!("found '{literal}', expected: {BINARY_OPERATORS}")),
        }
    }

    /// `( v1, v2 )`; empty slots (`()`, `(,a)`) mean the empty value, as upstream.
    fn parse_values(&mut self) -> Result<Vec<String>, String> {
        let (token, literal) = self.consume(Context::Values);
        if token != Token::OpenPar {
            return Err(format!("found '{literal}' expected: '('"));
        }
        let (token, literal) = self.lookahead(Context::Values);
        match token {
            Token::Identifier | Token::Comma => {
                let values = self.parse_identifiers_list()?;
                // Go reports the token after '(' here, not the offending one; kept for fidelity.
                if self.consume(Context::Values).0 != Token::ClosedPar {
                    return Err(format!("found '{literal}', expected: ')'"));
                }
                Ok(values.into_iter().collect())
            }
            Token::ClosedPar => {
                self.consume(Context::Values);
                Ok(vec![String::new()])
            }
            _ => Err(format!(
                "found '{literal}', expected: ',', ')' or identifier"
            )),
        }
    }

    fn parse_identifiers_list(&mut self) -> Result<BTreeSet<String>, String> {
        let mut values = BTreeSet::new();
        loop {
            let (token, literal) = self.consume(Context::Values);
            match token {
                Token::Identifier => {
                    values.insert(literal);
                    let (next, next_literal) = self.lookahead(Context::Values);
                    match next {
                        Token::Comma => {}
                        Token::ClosedPar => return Ok(values),
                        _ => return Err(format!("found '{next_literal}', expected: ',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.lookahead(Context::Values).0 {
                        Token::ClosedPar => {
                            values.insert(String::new());
                            return Ok(values);
                        }
                        Token::Comma => {
                            self.consume(Context::Values);
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                _ => return Err(format!("found '{literal}', expected: ',', or identifier")),
            }
        }
    }

    /// The single value after `=`, `==`, `!=`, `>` or `<`; nothing at all means `""`.
    fn parse_exact_value(&mut self) -> Result<Vec<String>, String> {
        if matches!(self.lookahead(Context::Values).0, Token::End | Token::Comma) {
            return Ok(vec![String::new()]);
        }
        let (token, literal) = self.consume(Context::Values);
        if token == Token::Identifier {
            Ok(vec![literal])
        } else {
            Err(format!("found '{literal}', expected: identifier"))
        }
    }
}

fn contextual(token: Token, context: Context) -> Token {
    match (token, context) {
        (Token::In | Token::NotIn, Context::Values) => Token::Identifier,
        _ => token,
    }
}

/// `NewRequirement`: validates the values and aggregates the errors like `ToAggregate`.
fn new_requirement(
    key: String,
    operator: Operator,
    values: Vec<String>,
) -> Result<Requirement, String> {
    let mut errors = Vec::new();
    if matches!(operator, Operator::GreaterThan | Operator::LessThan) {
        for (i, value) in values.iter().enumerate() {
            if value.parse::<i64>().is_err() {
                let detail = "for 'Gt', 'Lt' operators, the value must be an integer";
                let field = format!("values[{i}]");
                errors.push(invalid(&field, value, detail));
            }
        }
    }
    for (i, value) in values.iter().enumerate() {
        let problems = label_value_errors(value);
        if !problems.is_empty() {
            let field = format!("values[{i}][{key}]");
            errors.push(invalid(&field, value, &problems.join("; ")));
        }
    }
    match aggregate(errors) {
        Some(message) => Err(message),
        None => Ok(Requirement {
            key,
            operator,
            values,
        }),
    }
}

/// `utilerrors.NewAggregate(...).Error()`: one message bare, several de-duplicated in brackets.
fn aggregate(errors: Vec<String>) -> Option<String> {
    let mut unique: Vec<String> = Vec::new();
    for error in errors {
        if !unique.contains(&error) {
            unique.push(error);
        }
    }
    match unique.len() {
        0 => None,
        1 => unique.pop(),
        _ => Some(format!("[{}]", unique.join(", "))),
    }
}

fn invalid(field: &str, value: &str, detail: &str) -> String {
    FieldError::invalid(field, &Value::String(value.to_owned()), detail).to_string()
}

/// The key check runs with a nil field path upstream, hence the literal `<nil>` prefix.
fn validate_label_key(key: &str) -> Result<(), String> {
    let problems = qualified_name_errors(key);
    if problems.is_empty() {
        Ok(())
    } else {
        Err(invalid("<nil>", key, &problems.join("; ")))
    }
}

// ---------------------------------------------------------------------------------------------
// Syntax checks from k8s.io/apimachinery/pkg/util/validation, with their exact messages.

const QUALIFIED_NAME_MAX_LENGTH: usize = 63;
const LABEL_VALUE_MAX_LENGTH: usize = 63;
const DNS1123_SUBDOMAIN_MAX_LENGTH: usize = 253;
const QUALIFIED_NAME_FMT: &str = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const QUALIFIED_NAME_MSG: &str = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character";

/// `validation.RegexError`, including Go's doubled space between examples.
fn regex_error(message: &str, pattern: &str, examples: &[&str]) -> String {
    let examples: String = examples
        .iter()
        .map(|e| format!("'{e}', "))
        .collect::<Vec<_>>()
        .join(" or ");
    format!("{message} (e.g. {examples}regex used for validation is '{pattern}')")
}

fn max_len_error(length: usize) -> String {
    format!("must be no more than {length} characters")
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?` — the shared name/label-value shape.
fn is_qualified_token(s: &str) -> bool {
    let alnum = |c: char| c.is_ascii_alphanumeric();
    s.starts_with(alnum)
        && s.ends_with(alnum)
        && s.chars().all(|c| alnum(c) || matches!(c, '-' | '_' | '.'))
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?` joined by dots.
fn is_dns1123_subdomain(s: &str) -> bool {
    let lower = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    s.split('.').all(|label| {
        label.starts_with(lower)
            && label.ends_with(lower)
            && label.chars().all(|c| lower(c) || c == '-')
    })
}

/// `validation.IsQualifiedName`.
fn qualified_name_errors(value: &str) -> Vec<String> {
    let name_examples = ["MyName", "my.name", "123-abc"];
    let parts: Vec<&str> = value.split('/').collect();
    let mut errors = Vec::new();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            errors.extend(prefix_errors(prefix));
            *name
        }
        _ => {
            let shape = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &name_examples);
            return vec![format!(
                "a qualified name {shape} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
            )];
        }
    };
    if name.is_empty() {
        errors.push("name part must be non-empty".to_owned());
    } else if name.len() > QUALIFIED_NAME_MAX_LENGTH {
        errors.push(format!(
            "name part {}",
            max_len_error(QUALIFIED_NAME_MAX_LENGTH)
        ));
    }
    if !is_qualified_token(name) {
        let shape = regex_error(QUALIFIED_NAME_MSG, QUALIFIED_NAME_FMT, &name_examples);
        errors.push(format!("name part {shape}"));
    }
    errors
}

fn prefix_errors(prefix: &str) -> Vec<String> {
    if prefix.is_empty() {
        return vec!["prefix part must be non-empty".to_owned()];
    }
    let mut errors = Vec::new();
    if prefix.len() > DNS1123_SUBDOMAIN_MAX_LENGTH {
        errors.push(format!(
            "prefix part {}",
            max_len_error(DNS1123_SUBDOMAIN_MAX_LENGTH)
        ));
    }
    if !is_dns1123_subdomain(prefix) {
        let shape = regex_error(
            DNS1123_SUBDOMAIN_MSG,
            DNS1123_SUBDOMAIN_FMT,
            &["example.com"],
        );
        errors.push(format!("prefix part {shape}"));
    }
    errors
}

/// `validation.IsValidLabelValue`.
fn label_value_errors(value: &str) -> Vec<String> {
    let mut errors = Vec::new();
    if value.len() > LABEL_VALUE_MAX_LENGTH {
        errors.push(max_len_error(LABEL_VALUE_MAX_LENGTH));
    }
    if !value.is_empty() && !is_qualified_token(value) {
        let pattern = format!("({QUALIFIED_NAME_FMT})?");
        errors.push(regex_error(
            LABEL_VALUE_MSG,
            &pattern,
            &["MyValue", "my_value", "12345"],
        ));
    }
    errors
}

// ---------------------------------------------------------------------------------------------
// Field selectors.

/// A parsed `fieldSelector`: every term must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldSelector {
    terms: Vec<FieldTerm>,
}

#[derive(Debug, Clone, PartialEq)]
struct FieldTerm {
    key: String,
    value: String,
    negated: bool,
}

/// Checked in this order at every position, so `a!=b` is `!=` and `a==b` is `==`.
const TERM_OPERATORS: [&str; 3] = ["!=", "==", "="];

impl FieldSelector {
    /// Parses `fieldSelector`: comma-separated `key=value`, `key==value` and `key!=value` terms.
    /// Values may escape `\,`, `\=` and `\\`; nothing is trimmed (upstream doesn't either).
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut parts = split_terms(s);
        // Upstream sorts the raw terms first, which decides which bad term is reported.
        parts.sort_unstable();
        let mut terms = Vec::new();
        for part in parts.into_iter().filter(|p| !p.is_empty()) {
            let Some((key, operator, raw)) = split_term(part) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{part}'"
                ));
            };
            let value = unescape_value(raw)?;
            terms.push(FieldTerm {
                key: key.to_owned(),
                value,
                negated: operator == "!=",
            });
        }
        Ok(Self { terms })
    }

    /// The field keys used, so the caller can reject unsupported ones
    /// (`field label not supported: <key>`).
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.terms.iter().map(|t| t.key.as_str())
    }

    /// `lookup(key)` returns the field's value as text (`""` when absent, like the server).
    pub fn matches(&self, lookup: impl Fn(&str) -> String) -> bool {
        self.terms
            .iter()
            .all(|t| (lookup(&t.key) == t.value) != t.negated)
    }

    /// True when there are no terms and so everything matches.
    pub fn is_empty(&self) -> bool {
        self.terms.is_empty()
    }
}

/// Splits on commas that aren't escaped by a backslash.
fn split_terms(selector: &str) -> Vec<&str> {
    if selector.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, c) in selector.char_indices() {
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' {
            terms.push(selector.get(start..i).unwrap_or_default());
            start = i + 1;
        }
    }
    terms.push(selector.get(start..).unwrap_or_default());
    terms
}

/// Splits at the first operator occurrence: `(key, operator, raw value)`.
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = term.get(i..)?;
        let operator = TERM_OPERATORS.into_iter().find(|op| rest.starts_with(op))?;
        Some((term.get(..i)?, operator, rest.get(operator.len()..)?))
    })
}

/// `fields.UnescapeValue`. An unescaped `,`/`=` is reported by code point, because Go formats
/// the rune with `%v`.
fn unescape_value(raw: &str) -> Result<String, String> {
    let mut value = String::with_capacity(raw.len());
    let mut escaped = false;
    for c in raw.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            value.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == ',' || c == '=' {
            let code = u32::from(c);
            return Err(format!(
                "invalid field selector: unescaped character in value: {code}"
            ));
        } else {
            value.push(c);
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".to_owned());
    }
    Ok(value)
}

/// The value of a dotted path as field selectors see it: strings as-is, numbers and booleans as
/// their text, and anything missing, null or structured as `""`.
/// e.g. `field_value(pod, "spec.nodeName")`, `field_value(event, "involvedObject.kind")`.
pub fn field_value(obj: &Value, dotted: &str) -> String {
    dotted
        .split('.')
        .try_fold(obj, |value, segment| value.get(segment))
        .map(scalar_text)
        .unwrap_or_default()
}

fn scalar_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Null | Value::Array(_) | Value::Object(_) => String::new(),
    }
}

#[cfg(test)]
mod tests;
