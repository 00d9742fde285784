//! Evaluating an object's validation rules, as kube-apiserver's `cel.Validator` does: the rules of
//! a node run before those below it, `oldSelf` is the correlated old value (object properties
//! and map entries by key, items of `x-kubernetes-list-type: map` lists by their keys; none for
//! other lists), and transition rules are skipped where there is no old value.
//!
//! Costs: each rule's cost is estimated with the same model as at CRD creation, but sized by the
//! largest list, map and string actually present under the node instead of the schema's bounds.
//! It is an upper bound of cel-go's actual cost, checked against the same per-call limit and
//! per-object budget, with the same errors when they are exceeded.

use std::collections::HashMap;

use cel::{Context, ExecutionError};
use serde_json::{Value, json};

use crate::field_error::{FieldError, child_path, index_path};

use super::super::node::Node;
use super::check::check;
use super::library::ENV;
use super::types::{Root, Sized, embedded, of_schema};
use super::value::to_cel;
use super::{MAX_MESSAGE_BYTES, PER_CALL_LIMIT, RUNTIME_BUDGET, Rule, compile};

/// Whether a schema has any validation rule (if not, objects of it skip this walk entirely).
pub fn has_rules(schema: &Value) -> bool {
    match schema {
        Value::Object(map) => {
            map.contains_key("x-kubernetes-validations") || map.values().any(has_rules)
        }
        Value::Array(items) => items.iter().any(has_rules),
        _ => false,
    }
}

/// Evaluates every validation rule of `schema` on `obj` (`old` on updates) and returns the
/// failures, in the order of the schema walk (a node's own rules, then its properties by name,
/// then its items).
pub fn validate_rules(schema: &Value, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut walk = Walk {
        budget: RUNTIME_BUDGET,
        exhausted: false,
        errors: Vec::new(),
    };
    walk.node(Node(schema), Root::Resource, obj, old, "");
    walk.errors
}

struct Walk {
    budget: u64,
    exhausted: bool,
    errors: Vec<FieldError>,
}

/// The field an error at `path` is reported on (`<nil>` at the root, as the server's nil path).
fn field(path: &str) -> String {
    if path.is_empty() {
        "<nil>".to_owned()
    } else {
        path.to_owned()
    }
}

impl Walk {
    fn node(&mut self, schema: Node, root: Root, value: &Value, old: Option<&Value>, path: &str) {
        if value.is_null() || self.exhausted {
            return;
        }
        self.rules(schema, root, value, old, path);
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                for key in keys {
                    if self.exhausted {
                        return;
                    }
                    let child = schema.property(key).or_else(|| {
                        if schema.has_properties() {
                            None
                        } else {
                            schema.additional_schema()
                        }
                    });
                    let Some(child) = child else { continue };
                    let old_child = old.and_then(|o| o.get(key.as_str()));
                    let child_path = if schema.has_properties() {
                        child_path(path, key)
                    } else {
                        format!("{path}[{key}]")
                    };
                    self.node(
                        child,
                        embedded(child),
                        &map[key.as_str()],
                        old_child,
                        &child_path,
                    );
                }
            }
            Value::Array(items) => {
                let Some(item_schema) = schema.items() else {
                    return;
                };
                let keys = schema.list_map_keys();
                let correlated = schema.list_type() == Some("map") && !keys.is_empty();
                for (i, item) in items.iter().enumerate() {
                    if self.exhausted {
                        return;
                    }
                    let old_item = old
                        .filter(|_| correlated)
                        .and_then(Value::as_array)
                        .and_then(|olds| {
                            olds.iter()
                                .find(|o| keys.iter().all(|k| o.get(k) == item.get(k)))
                        });
                    let item_path = index_path(path, i);
                    self.node(
                        item_schema,
                        embedded(item_schema),
                        item,
                        old_item,
                        &item_path,
                    );
                }
            }
            _ => {}
        }
    }

    fn rules(&mut self, schema: Node, root: Root, value: &Value, old: Option<&Value>, path: &str) {
        let rules = Rule::all(schema);
        if rules.is_empty() {
            return;
        }
        let type_name = json!(schema.type_name());
        if self.budget == 0 {
            self.out_of_budget(path, &type_name);
            return;
        }
        // Sizes for the cost: the largest value present under this node, for each schema node.
        let mut sizes = HashMap::new();
        observe(schema, value, &mut sizes);
        if let Some(old) = old {
            observe(schema, old, &mut sizes);
        }
        // kube-apiserver 1.28 moves the path of every later rule of the node under a failed
        // rule's `fieldPath` (it reassigns the node's path; fixed in later releases): so does
        // the sandbox, since clients see that path.
        let mut path = path.to_owned();
        let bound = |node: Node| sizes.get(&(node.0 as *const Value)).copied().unwrap_or(1);
        let self_ty = of_schema(schema, root, &bound);
        let self_value = to_cel(Some(schema), root, value);
        let old_value = old.map(|o| to_cel(Some(schema), root, o));
        for rule in &rules {
            let program = match compile(&rule.rule) {
                Ok(p) => p,
                Err(err) => {
                    let detail = format!("rule compile error: {err}");
                    self.errors
                        .push(FieldError::invalid(field(&path), &type_name, &detail));
                    continue;
                }
            };
            let checked = check(program.expression(), self_ty.clone(), &bound);
            if checked.uses_old_self && old_value.is_none() {
                continue;
            }
            if checked.cost > PER_CALL_LIMIT {
                let detail = format!(
                    "'operation cancelled: actual cost limit exceeded': no further validation rules will be run due to call cost exceeds limit for rule: {}",
                    rule.error_string()
                );
                self.errors
                    .push(FieldError::invalid(field(&path), &type_name, &detail));
                self.exhausted = true;
                return;
            }
            if checked.cost > self.budget {
                self.out_of_budget(&path, &type_name);
                return;
            }
            self.budget -= checked.cost;
            let mut context = Context::with_env(ENV.clone());
            context.add_variable_from_value("self", self_value.clone());
            if let Some(old) = &old_value {
                context.add_variable_from_value("oldSelf", old.clone());
            }
            match program.execute(&context) {
                Ok(cel::Value::Bool(true)) => {}
                Ok(cel::Value::Bool(false)) => {
                    path = self.failed(rule, &context, &self_ty, &path, &type_name, &bound);
                    if self.exhausted {
                        return;
                    }
                }
                Ok(other) => {
                    let detail = format!(
                        "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {} (it evaluated to {:?})",
                        rule.error_string(),
                        other.type_of()
                    );
                    self.errors
                        .push(FieldError::invalid(field(&path), &type_name, &detail));
                }
                Err(err) => {
                    let detail = runtime_error(&err, rule);
                    self.errors
                        .push(FieldError::invalid(field(&path), &type_name, &detail));
                }
            }
        }
    }

    fn out_of_budget(&mut self, path: &str, type_name: &Value) {
        let detail = "validation failed due to running out of cost budget, no further validation rules will be run";
        self.errors
            .push(FieldError::invalid(field(path), type_name, detail));
        self.exhausted = true;
    }

    /// Reports a rule that evaluated to false, with its `messageExpression`'s message when that
    /// evaluates to a usable one, at its `fieldPath` and with its `reason`.
    fn failed(
        &mut self,
        rule: &Rule,
        context: &Context,
        self_ty: &Sized,
        path: &str,
        type_name: &Value,
        bound: &dyn Fn(Node) -> u64,
    ) -> String {
        let path = match normalize_field_path(&rule.field_path) {
            Some(sub) if !sub.is_empty() => {
                if sub.starts_with('[') {
                    format!("{path}{sub}")
                } else {
                    child_path(path, &sub)
                }
            }
            _ => path.to_owned(),
        };
        let mut detail = None;
        if !rule.message_expression.is_empty()
            && let Ok(program) = compile(&rule.message_expression)
        {
            let cost = check(program.expression(), self_ty.clone(), bound).cost;
            if cost > PER_CALL_LIMIT {
                let detail = format!(
                    "no further validation rules will be run due to call cost exceeds limit for messageExpression: {}",
                    super::super::go_fmt::go_quote(&rule.message_expression)
                );
                self.errors
                    .push(FieldError::invalid(field(&path), type_name, &detail));
                self.exhausted = true;
                return path;
            }
            if cost > self.budget {
                let detail = "messageExpression evaluation failed due to running out of cost budget, no further validation rules will be run";
                self.errors
                    .push(FieldError::invalid(field(&path), type_name, detail));
                self.exhausted = true;
                return path;
            }
            self.budget -= cost;
            // Failures fall back to the static message, as the server does (it only logs them).
            if let Ok(cel::Value::String(message)) = program.execute(context) {
                let message = message.trim();
                if !message.is_empty()
                    && message.len() <= MAX_MESSAGE_BYTES
                    && !message.contains('\n')
                {
                    detail = Some(message.to_owned());
                }
            }
        }
        let detail = detail.unwrap_or_else(|| rule.message_or_default());
        let at = field(&path);
        let error = match rule.reason.as_deref() {
            Some("FieldValueForbidden") => FieldError::forbidden(at, &detail),
            Some("FieldValueRequired") => FieldError::required(at, &detail),
            Some("FieldValueDuplicate") => FieldError::duplicate(at, type_name),
            _ => FieldError::invalid(at, type_name, &detail),
        };
        self.errors.push(error);
        path
    }
}

/// A runtime error in the words kube-apiserver reports it with.
fn runtime_error(err: &ExecutionError, rule: &Rule) -> String {
    let rule_string = rule.error_string();
    let text = match err {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        ExecutionError::IndexOutOfBounds(index) => {
            format!("index out of bounds: {}", cel_display(index))
        }
        ExecutionError::DivisionByZero(_) => "division by zero".to_owned(),
        ExecutionError::RemainderByZero(_) => "modulus by zero".to_owned(),
        ExecutionError::Overflow(..) => "integer overflow".to_owned(),
        ExecutionError::NoSuchOverload(_)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnexpectedType { .. } => {
            return format!(
                "'no such overload': call arguments did not match a supported operator, function or macro signature for rule: {rule_string}"
            );
        }
        ExecutionError::FunctionError { message, .. } => message.clone(),
        other => other.to_string(),
    };
    format!("{text} evaluating rule: {rule_string}")
}

fn cel_display(value: &cel::Value) -> String {
    match value {
        cel::Value::Int(i) => i.to_string(),
        cel::Value::UInt(u) => u.to_string(),
        cel::Value::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

/// A rule's `fieldPath` (`.a.b`, `.m['key']`) as the field path it names relative to the rule's
/// node (`a.b`, `m[key]`); `None` if it is not one (the CRD check refuses those).
pub(super) fn normalize_field_path(field_path: &str) -> Option<String> {
    let mut out = String::new();
    let mut rest = field_path;
    while !rest.is_empty() {
        if let Some(tail) = rest.strip_prefix('.') {
            let end = tail.find(['.', '[']).unwrap_or(tail.len());
            if end == 0 {
                return None;
            }
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&tail[..end]);
            rest = &tail[end..];
        } else if let Some(tail) = rest.strip_prefix("['") {
            let end = tail.find("']")?;
            out.push('[');
            out.push_str(&tail[..end]);
            out.push(']');
            rest = &tail[end + 2..];
        } else {
            return None;
        }
    }
    Some(out)
}

/// Records, for each schema node under `schema`, the largest size (elements, properties or
/// characters) of the values of `value` it describes.
fn observe(schema: Node, value: &Value, sizes: &mut HashMap<*const Value, u64>) {
    let size = match value {
        Value::String(s) => s.chars().count() as u64,
        Value::Array(items) => items.len() as u64,
        Value::Object(map) => map.len() as u64,
        _ => 1,
    };
    let entry = sizes.entry(schema.0 as *const Value).or_insert(0);
    *entry = (*entry).max(size);
    match value {
        Value::Array(items) => {
            if let Some(item_schema) = schema.items() {
                for item in items {
                    observe(item_schema, item, sizes);
                }
            }
        }
        Value::Object(map) => {
            for (key, child) in map {
                let child_schema = schema.property(key).or_else(|| schema.additional_schema());
                if let Some(child_schema) = child_schema {
                    observe(child_schema, child, sizes);
                }
            }
        }
        _ => {}
    }
}
