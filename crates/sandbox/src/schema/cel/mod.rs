//! CRD validation rules (`x-kubernetes-validations`), compiled when a CRD is created or updated
//! and evaluated on every create, update, patch and apply of its custom resources, as
//! kube-apiserver 1.28 does (`k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel`).
//!
//! - [`check_rules`] is what the CRD must pass: each rule parses, type-checks against the schema
//!   it sits on, evaluates to a bool (its `messageExpression` to a string), has a valid
//!   `fieldPath` and `reason`, and stays within the estimated cost limits. A rule the sandbox
//!   cannot evaluate fails the CRD with a message saying so, never silently.
//! - [`validate_rules`] evaluates the rules at every level of an object, with `oldSelf` bound to
//!   the correlated old value on updates (transition rules are skipped when there is none), and
//!   reports failures in kube-apiserver's words and field paths.
//!
//! Expressions are parsed and evaluated by cel-rust; the type checks, the cost model and the
//! Kubernetes libraries are here because cel-rust has none of them.

mod check;
mod crd;
mod eval;
mod library;
#[cfg(test)]
mod tests;
mod types;
mod value;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use cel::Program;
use serde_json::Value;

use super::node::Node;

pub use crd::check_rules;
pub use eval::{has_rules, validate_rules};

/// kube-apiserver's cost limits (`k8s.io/apiserver/pkg/apis/cel/config.go` and the CRD
/// validation's): the estimated cost one rule may have, the estimated total of a schema (each
/// rule's cost times how many times it can run in one object), the runtime cost one evaluation
/// may reach, and the runtime budget of all the rules of one object.
const STATIC_RULE_LIMIT: u64 = 10_000_000;
const STATIC_CRD_LIMIT: u64 = 100_000_000;
const PER_CALL_LIMIT: u64 = 1_000_000;
const RUNTIME_BUDGET: u64 = 10_000_000;

/// The longest message a `messageExpression` may produce (bytes, after trimming).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One entry of `x-kubernetes-validations`.
#[derive(Clone, Debug, Default)]
struct Rule {
    rule: String,
    message: String,
    message_expression: String,
    reason: Option<String>,
    field_path: String,
}

impl Rule {
    fn all(node: Node) -> Vec<Rule> {
        let Some(Value::Array(list)) = node.get("x-kubernetes-validations") else {
            return Vec::new();
        };
        list.iter()
            .map(|r| {
                let text = |key: &str| r.get(key).and_then(Value::as_str).unwrap_or("").to_owned();
                Rule {
                    rule: text("rule"),
                    message: text("message"),
                    message_expression: text("messageExpression"),
                    reason: r.get("reason").and_then(Value::as_str).map(str::to_owned),
                    field_path: text("fieldPath"),
                }
            })
            .collect()
    }

    /// The rule as its errors name it: the message if any, else the expression.
    fn error_string(&self) -> &str {
        let message = self.message.trim();
        if message.is_empty() {
            self.rule.trim()
        } else {
            message
        }
    }

    /// The detail of a failure when there is no (usable) `messageExpression`.
    fn message_or_default(&self) -> String {
        let message = self.message.trim();
        if message.is_empty() {
            format!("failed rule: {}", self.rule.trim())
        } else {
            message.to_owned()
        }
    }
}

/// A parsed expression, shared by every object its CRD validates.
type Compiled = Arc<Program>;

/// Parses `source` once: programs are cached by their text, which is all they depend on (the
/// environment is fixed). The cache is cleared if it ever holds more than a few thousand
/// programs, so CRDs created and deleted in a loop cannot grow it without bound.
fn compile(source: &str) -> Result<Compiled, String> {
    static CACHE: Mutex<Option<HashMap<String, Result<Compiled, String>>>> = Mutex::new(None);
    let mut guard = CACHE
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let cache = guard.get_or_insert_with(HashMap::new);
    if let Some(found) = cache.get(source) {
        return found.clone();
    }
    if cache.len() >= 4096 {
        cache.clear();
    }
    let compiled = library::ENV
        .compile(source)
        .map(Arc::new)
        .map_err(|errors| {
            errors
                .errors
                .iter()
                .map(|e| cel_go_error(source, e.pos.0, e.pos.1, &e.msg))
                .collect::<Vec<_>>()
                .join("\n")
        });
    cache.insert(source.to_owned(), compiled.clone());
    compiled
}

/// An error in cel-go's layout: `ERROR: <input>:L:C: msg`, the line, and a caret under column C.
fn cel_go_error(source: &str, line: isize, column: isize, message: &str) -> String {
    let line = line.max(1);
    let column = column.max(1);
    let text = source.lines().nth(line as usize - 1).unwrap_or("");
    let dots = ".".repeat(column as usize - 1);
    format!("ERROR: <input>:{line}:{column}: {message}\n | {text}\n | {dots}^")
}

/// The line and column (1-based) of an expression of a program, for checker errors.
fn position(program: &Program, id: u64) -> (isize, isize) {
    let source = &program.source_info().source;
    let Some((start, _)) = program.source_info().offset_for(id) else {
        return (1, 1);
    };
    let before: String = source.chars().take(start as usize).collect();
    let line = before.matches('\n').count() as isize + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) as isize + 1;
    (line, column)
}
