//! The CEL environment of kube-apiserver 1.28's CRD validation rules, on cel-rust: the standard
//! library and macros, cel-go's strings extension (from cel-rust), and the Kubernetes `lists` and
//! `regex` libraries written here (cel-rust has no equivalent of them).
//!
//! Nothing else of cel-rust's extensions is reachable: the checker ([`super::check`]) refuses any
//! function kube-apiserver 1.28 does not declare, so `format`, `sort` or `base64.encode` cannot
//! slip into a rule the sandbox would accept and a real cluster refuse.

use std::cmp::Ordering;
use std::sync::{Arc, LazyLock};

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{Env, ExecutionError, Value};

/// The environment every rule compiles and runs in, built once.
pub(super) static ENV: LazyLock<Arc<Env>> = LazyLock::new(|| Arc::new(build()));

fn build() -> Env {
    let mut env = Env::stdlib();
    // Each of these registers fixed names once on a fresh environment; a clash would be a bug
    // of this file, caught by every test that evaluates a rule.
    let registered = env
        .add_extension(cel::extensions::strings)
        .and_then(|()| add_lists(&mut env))
        .and_then(|()| add_regex(&mut env));
    if let Err(err) = registered {
        tracing::error!(%err, "CEL library registration failed");
    }
    env
}

type Result<T> = std::result::Result<T, ExecutionError>;

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn owned<'b, 'v>(value: Value) -> Result<CowVal<'b, 'v>> {
    let boxed: Box<dyn Val> = value.try_into()?;
    Ok(CowVal::Owned(boxed))
}

fn list_arg(value: &Value, function: &str) -> Result<Arc<Vec<Value>>> {
    match value {
        Value::List(items) => Ok(items.clone()),
        other => Err(ExecutionError::function_error(
            function,
            format!("expected a list, got {:?}", other.type_of()),
        )),
    }
}

fn add_lists(env: &mut Env) -> std::result::Result<(), cel::DeclarationError> {
    env.add_member_overload("isSorted", "list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list_min", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list_max", LIST_TYPE, vec![], max)?;
    env.add_member_overload(
        "indexOf",
        "list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )
}

fn compare(function: &str, a: &Value, b: &Value) -> Result<Ordering> {
    a.partial_cmp(b)
        .ok_or_else(|| ExecutionError::function_error(function, "no such overload".to_owned()))
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let list = list_arg(args.first().unwrap_or(&Value::Null), "isSorted")?;
    for pair in list.windows(2) {
        if compare("isSorted", &pair[0], &pair[1])? == Ordering::Greater {
            return owned(Value::Bool(false));
        }
    }
    owned(Value::Bool(true))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let list = list_arg(args.first().unwrap_or(&Value::Null), "sum")?;
    let overflow = || ExecutionError::function_error("sum", "integer overflow");
    let mut total = match list.first() {
        None => return owned(Value::Int(0)),
        Some(Value::Float(_)) => Value::Float(0.0),
        Some(Value::UInt(_)) => Value::UInt(0),
        Some(_) => Value::Int(0),
    };
    for item in list.iter() {
        total = match (&total, item) {
            (Value::Int(a), Value::Int(b)) => Value::Int(a.checked_add(*b).ok_or_else(overflow)?),
            (Value::UInt(a), Value::UInt(b)) => {
                Value::UInt(a.checked_add(*b).ok_or_else(overflow)?)
            }
            (Value::Float(a), Value::Float(b)) => Value::Float(a + b),
            _ => {
                return Err(ExecutionError::function_error("sum", "no such overload"));
            }
        };
    }
    owned(total)
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    keep: Ordering,
) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let list = list_arg(args.first().unwrap_or(&Value::Null), function)?;
    let Some(mut best) = list.first().cloned() else {
        return Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        ));
    };
    for item in list.iter().skip(1) {
        if compare(function, item, &best)? == keep {
            best = item.clone();
        }
    }
    owned(best)
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    extreme(args, "min", Ordering::Less)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    extreme(args, "max", Ordering::Greater)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    last: bool,
) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let list = list_arg(args.first().unwrap_or(&Value::Null), function)?;
    let needle = args.get(1).cloned().unwrap_or(Value::Null);
    let mut found = list.iter().enumerate().filter(|(_, item)| **item == needle);
    let index = if last {
        found.next_back()
    } else {
        found.next()
    };
    owned(Value::Int(index.map_or(-1, |(i, _)| i as i64)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    position(args, "indexOf", false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    position(args, "lastIndexOf", true)
}

fn add_regex(env: &mut Env) -> std::result::Result<(), cel::DeclarationError> {
    env.add_member_overload("find", "string_find", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all,
    )
}

/// The receiver and compiled pattern of a regex function (RE2 syntax, as Go's `regexp`).
fn text_and_pattern(args: &[Value], function: &str) -> Result<(Arc<String>, regex::Regex)> {
    let (Some(Value::String(text)), Some(Value::String(pattern))) = (args.first(), args.get(1))
    else {
        return Err(ExecutionError::function_error(function, "no such overload"));
    };
    let re = regex::Regex::new(pattern)
        .map_err(|err| ExecutionError::function_error(function, err.to_string()))?;
    Ok((text.clone(), re))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let (text, re) = text_and_pattern(&args, "find")?;
    let found = re.find(&text).map_or("", |m| m.as_str());
    owned(Value::String(Arc::new(found.to_owned())))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>> {
    let args = values(&args)?;
    let (text, re) = text_and_pattern(&args, "findAll")?;
    let limit = match args.get(2) {
        Some(Value::Int(n)) if *n >= 0 => *n as usize,
        _ => usize::MAX,
    };
    let found: Vec<Value> = re
        .find_iter(&text)
        .take(limit)
        .map(|m| Value::String(Arc::new(m.as_str().to_owned())))
        .collect();
    owned(Value::List(Arc::new(found)))
}
