//! The checks a CRD's validation rules must pass before the CRD is accepted, with
//! kube-apiserver's paths and messages (`validateCustomResourceDefinition`'s CEL part).

use serde_json::{Value, json};

use crate::field_error::{FieldError, child_path};

use super::super::go_fmt::go_quote;
use super::super::node::{Additional, Node, key_path};
use super::check::{Checked, check};
use super::eval::normalize_field_path;
use super::types::{Root, Ty, embedded, of_schema, schema_bound};
use super::{Rule, STATIC_CRD_LIMIT, STATIC_RULE_LIMIT, cel_go_error, compile, position};

/// The `reason`s a rule may give.
const REASONS: [&str; 4] = [
    "FieldValueInvalid",
    "FieldValueForbidden",
    "FieldValueRequired",
    "FieldValueDuplicate",
];

/// Checks every `x-kubernetes-validations` rule of a CRD version's schema, reporting errors
/// under `path_prefix` (e.g. `spec.validation.openAPIV3Schema`).
pub fn check_rules(schema: &Value, path_prefix: &str) -> Vec<FieldError> {
    let mut walk = Walk {
        errors: Vec::new(),
        costs: Vec::new(),
    };
    walk.node(Node(schema), Root::Resource, path_prefix, 1, None);
    let total = walk
        .costs
        .iter()
        .fold(0u64, |sum, (_, cost)| sum.saturating_add(*cost));
    if total > STATIC_CRD_LIMIT {
        let mut costs = walk.costs.clone();
        costs.sort_by_key(|c| std::cmp::Reverse(c.1));
        for (path, _) in costs.iter().take(4) {
            walk.errors.push(FieldError::forbidden(
                path.clone(),
                "contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema",
            ));
        }
        let name = "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema";
        walk.errors.push(FieldError::forbidden(
            path_prefix,
            &cost_message(name, total, STATIC_CRD_LIMIT),
        ));
    }
    walk.errors
}

/// kube-apiserver's `getCostErrorMessage`.
fn cost_message(name: &str, cost: u64, limit: u64) -> String {
    let factor = cost as f64 / limit as f64;
    let factor = if factor > 100.0 {
        "more than 100x".to_owned()
    } else if factor < 1.5 {
        format!("{factor:.6}x")
    } else {
        format!("{factor:.1}x")
    };
    format!(
        "{name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )
}

struct Walk {
    errors: Vec<FieldError>,
    /// Each rule's path and estimated cost times how many times it can run in one object.
    costs: Vec<(String, u64)>,
}

impl Walk {
    /// `cardinality`: how many values this node can have in one object; `uncorrelatable`: the
    /// list (other than a map-list) it is inside of, where no old value can be found for it.
    fn node(
        &mut self,
        schema: Node,
        root: Root,
        path: &str,
        cardinality: u64,
        uncorrelatable: Option<&str>,
    ) {
        self.rules(schema, root, path, cardinality, uncorrelatable);
        for (key, property) in schema.property_nodes() {
            let property_path = key_path(path, "properties", key);
            self.node(
                property,
                embedded(property),
                &property_path,
                cardinality,
                uncorrelatable,
            );
        }
        if let Additional::Schema(values) = schema.additional() {
            let size = schema_bound(schema);
            let values_path = child_path(path, "additionalProperties");
            let cardinality = cardinality.saturating_mul(size);
            self.node(
                values,
                embedded(values),
                &values_path,
                cardinality,
                uncorrelatable,
            );
        }
        if let Some(items) = schema.items() {
            let size = schema_bound(schema);
            let map_list = schema.list_type() == Some("map");
            let items_path = child_path(path, "items");
            let cardinality = cardinality.saturating_mul(size);
            let uncorrelatable = uncorrelatable.or((!map_list).then_some(path));
            self.node(
                items,
                embedded(items),
                &items_path,
                cardinality,
                uncorrelatable,
            );
        }
    }

    fn rules(
        &mut self,
        schema: Node,
        root: Root,
        path: &str,
        cardinality: u64,
        uncorrelatable: Option<&str>,
    ) {
        let rules = Rule::all(schema);
        let self_ty = of_schema(schema, root, &schema_bound);
        for (i, rule) in rules.iter().enumerate() {
            let rule_path = format!("{path}.x-kubernetes-validations[{i}]");
            let at = |key: &str| format!("{rule_path}.{key}");
            if rule.rule.trim().is_empty() {
                self.errors
                    .push(FieldError::required(at("rule"), "rule is not specified"));
                continue;
            }
            if !rule.message.is_empty() && rule.message.trim().is_empty() {
                let detail = "message must be non-empty if specified";
                self.errors.push(FieldError::invalid(
                    at("message"),
                    &json!(rule.message),
                    detail,
                ));
            }
            if rule.message.contains('\n') {
                let detail = "message must not contain line breaks";
                self.errors.push(FieldError::invalid(
                    at("message"),
                    &json!(rule.message),
                    detail,
                ));
            }
            if let Some(reason) = &rule.reason
                && !REASONS.contains(&reason.as_str())
            {
                let supported: Vec<Value> = REASONS.iter().map(|r| json!(r)).collect();
                self.errors.push(FieldError::not_supported(
                    at("reason"),
                    &json!(reason),
                    &supported,
                ));
            }
            if !rule.field_path.is_empty() && !field_path_valid(schema, &rule.field_path) {
                let detail = "fieldPath must be a valid path";
                self.errors.push(FieldError::invalid(
                    at("fieldPath"),
                    &json!(rule.field_path),
                    detail,
                ));
            }
            let program = match compile(&rule.rule) {
                Ok(p) => p,
                Err(err) => {
                    self.rule_error(at("rule"), rule, &format!("compilation failed: {err}"));
                    continue;
                }
            };
            let checked = check(program.expression(), self_ty.clone(), &schema_bound);
            if let Some(err) = checker_errors(&program, &checked) {
                self.rule_error(at("rule"), rule, &format!("compilation failed: {err}"));
                continue;
            }
            if !matches!(checked.result.ty, Ty::Bool | Ty::Dyn) {
                self.rule_error(at("rule"), rule, "cel expression must evaluate to a bool");
                continue;
            }
            if checked.uses_old_self
                && let Some(list) = uncorrelatable
            {
                let detail = format!(
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within {list}"
                );
                self.errors
                    .push(FieldError::invalid(at("rule"), &json!(rule.rule), &detail));
                continue;
            }
            if checked.cost > STATIC_RULE_LIMIT {
                let detail = cost_message("estimated rule cost", checked.cost, STATIC_RULE_LIMIT);
                self.errors.push(FieldError::forbidden(at("rule"), &detail));
            }
            self.costs
                .push((at("rule"), checked.cost.saturating_mul(cardinality)));
            if !rule.message_expression.is_empty() {
                let path = at("messageExpression");
                if let Some(cost) = self.message_expression(rule, &path, &self_ty) {
                    self.costs.push((path, cost.saturating_mul(cardinality)));
                }
            }
        }
    }

    /// Checks a `messageExpression`; its estimated cost if it compiles.
    fn message_expression(
        &mut self,
        rule: &Rule,
        path: &str,
        self_ty: &super::types::Sized,
    ) -> Option<u64> {
        let program = match compile(&rule.message_expression) {
            Ok(p) => p,
            Err(err) => {
                self.rule_error(
                    path.to_owned(),
                    rule,
                    &format!("messageExpression compilation failed: {err}"),
                );
                return None;
            }
        };
        let checked = check(program.expression(), self_ty.clone(), &schema_bound);
        if let Some(err) = checker_errors(&program, &checked) {
            self.rule_error(
                path.to_owned(),
                rule,
                &format!("messageExpression compilation failed: {err}"),
            );
            return None;
        }
        if !matches!(checked.result.ty, Ty::String | Ty::Dyn) {
            self.rule_error(
                path.to_owned(),
                rule,
                "messageExpression must evaluate to a string",
            );
            return None;
        }
        if checked.cost > STATIC_RULE_LIMIT {
            let detail = cost_message(
                "estimated messageExpression cost",
                checked.cost,
                STATIC_RULE_LIMIT,
            );
            self.errors.push(FieldError::forbidden(path, &detail));
        }
        Some(checked.cost)
    }

    /// An error about a rule, whose value the server prints as the Go struct of the rule.
    fn rule_error(&mut self, path: String, rule: &Rule, detail: &str) {
        let reason = match &rule.reason {
            // The server prints the pointer's address, which no client can rely on.
            Some(_) => "(*apiextensions.FieldValueErrorReason)(0xc000000000)".to_owned(),
            None => "(*apiextensions.FieldValueErrorReason)(nil)".to_owned(),
        };
        let value = format!(
            "apiextensions.ValidationRule{{Rule:{}, Message:{}, MessageExpression:{}, Reason:{reason}, FieldPath:{}}}",
            go_quote(&rule.rule),
            go_quote(&rule.message),
            go_quote(&rule.message_expression),
            go_quote(&rule.field_path),
        );
        self.errors
            .push(FieldError::invalid_printed(path, &value, detail));
    }
}

/// The checker's errors in cel-go's layout, one a line, or `None` if there are none.
fn checker_errors(program: &cel::Program, checked: &Checked) -> Option<String> {
    if checked.errors.is_empty() {
        return None;
    }
    let source = &program.source_info().source;
    let lines: Vec<String> = checked
        .errors
        .iter()
        .map(|(id, message)| {
            let (line, column) = position(program, *id);
            cel_go_error(source, line, column, message)
        })
        .collect();
    Some(lines.join("\n"))
}

/// Whether a `fieldPath` names a field of the schema (properties by `.name` or `['name']`, map
/// entries by `['key']`; no list indexes), as kube's `ValidFieldPath` requires.
fn field_path_valid(schema: Node, field_path: &str) -> bool {
    if normalize_field_path(field_path).is_none() {
        return false;
    }
    let mut node = schema;
    let mut rest = field_path;
    while !rest.is_empty() {
        let (name, tail) = if let Some(tail) = rest.strip_prefix('.') {
            let end = tail.find(['.', '[']).unwrap_or(tail.len());
            (&tail[..end], &tail[end..])
        } else if let Some(tail) = rest.strip_prefix("['") {
            let Some(end) = tail.find("']") else {
                return false;
            };
            (&tail[..end], &tail[end + 2..])
        } else {
            return false;
        };
        node = if node.has_properties() {
            match node.property(name) {
                Some(n) => n,
                None => return false,
            }
        } else if let Some(values) = node.additional_schema() {
            values
        } else {
            return false;
        };
        rest = tail;
    }
    true
}
