//! The checks kube-apiserver's CEL type-checker makes on a rule before it accepts a CRD, and its
//! cost estimate, in one walk of the parsed expression.
//!
//! cel-rust parses and evaluates but does not type-check, so this walk does what the CRD author
//! needs from cel-go's checker: a field `self` does not have, a function that does not exist in
//! kube-apiserver 1.28, an operator applied to types it has no overload for, and a rule that
//! cannot evaluate to a bool are refused with cel-go's wording. Types the walk cannot know (int-or-
//! string, preserved unknown fields) are `dyn`, as they are for cel-go, and checked at runtime.
//!
//! The cost follows cel-go's model closely enough to refuse what kube-apiserver refuses for
//! being too expensive: one unit a node, a comprehension costs its body once per element of the
//! largest list or map it can range over, and string functions cost a tenth of a unit a
//! character. The bound of a list, map or string is the schema's `maxItems`, `maxProperties` or
//! `maxLength`, or as many as a 3 MiB request can hold, as kube-apiserver derives it.

use cel::common::ast::operators as op;
use cel::common::ast::{CallExpr, ComprehensionExpr, Expr, IdedExpr, LiteralValue};

use super::super::node::Node;
use super::types::{MAX_REQUEST_BYTES, Root, Sized, Ty, of_schema, property};

/// Functions of kube-apiserver 1.28's CEL environment the sandbox does not evaluate: a rule that
/// calls one is refused with a message that says so, rather than reported as undeclared.
const NOT_IMPLEMENTED: [&str; 22] = [
    "url",
    "isURL",
    "getScheme",
    "getHost",
    "getHostname",
    "getPort",
    "getEscapedPath",
    "getQuery",
    "duration",
    "timestamp",
    "getFullYear",
    "getMonth",
    "getDate",
    "getDayOfMonth",
    "getDayOfWeek",
    "getDayOfYear",
    "getHours",
    "getMinutes",
    "getSeconds",
    "getMilliseconds",
    "optional.of",
    "optional.none",
];

/// What the walk found: the result type, the estimated cost, whether `oldSelf` is used, and the
/// errors (with the id of the expression each is about).
pub(super) struct Checked<'s> {
    pub(super) result: Sized<'s>,
    pub(super) cost: u64,
    pub(super) uses_old_self: bool,
    pub(super) errors: Vec<(u64, String)>,
}

pub(super) fn check<'s>(
    expr: &IdedExpr,
    self_ty: Sized<'s>,
    bound: &dyn Fn(Node) -> u64,
) -> Checked<'s> {
    let mut checker = Checker {
        self_ty,
        bound,
        scopes: Vec::new(),
        uses_old_self: false,
        errors: Vec::new(),
    };
    let (result, cost) = checker.expr(expr);
    Checked {
        result,
        cost,
        uses_old_self: checker.uses_old_self,
        errors: checker.errors,
    }
}

struct Checker<'s, 'b> {
    self_ty: Sized<'s>,
    bound: &'b dyn Fn(Node) -> u64,
    /// Comprehension variables, innermost last.
    scopes: Vec<(String, Sized<'s>)>,
    uses_old_self: bool,
    errors: Vec<(u64, String)>,
}

/// A tenth of a unit a character, rounded up: cel-go's cost of traversing a string.
fn traversal(size: u64) -> u64 {
    size.div_ceil(10)
}

/// A product of costs or sizes, capped where sums of a few of them cannot overflow.
fn product(a: u64, b: u64) -> u64 {
    a.saturating_mul(b).min(super::types::CAP)
}

impl<'s> Checker<'s, '_> {
    fn error(&mut self, id: u64, message: String) -> (Sized<'s>, u64) {
        self.errors.push((id, message));
        (Sized::dyn_(), 0)
    }

    fn expr(&mut self, e: &IdedExpr) -> (Sized<'s>, u64) {
        match &e.expr {
            Expr::Unspecified => (Sized::dyn_(), 0),
            Expr::Literal(literal) => (literal_type(literal), 0),
            Expr::Ident(name) => self.ident(e.id, name),
            Expr::Select(select) => {
                let (operand, cost) = self.expr(&select.operand);
                let (field, _) = self.select(e.id, &operand, &select.field);
                if select.test {
                    (Sized::scalar(Ty::Bool), cost.saturating_add(1))
                } else {
                    (field, cost.saturating_add(1))
                }
            }
            Expr::Call(call) => self.call(e.id, call),
            Expr::List(list) => {
                let mut cost: u64 = 0;
                let mut elem: Option<Sized<'s>> = None;
                for item in &list.elements {
                    let (ty, c) = self.expr(item);
                    cost = cost.saturating_add(c);
                    elem = Some(match elem {
                        None => ty,
                        Some(prev) if prev.ty.name() == ty.ty.name() => {
                            Sized::new(prev.ty, prev.size.max(ty.size))
                        }
                        Some(_) => Sized::dyn_(),
                    });
                }
                let elem = elem.unwrap_or_else(Sized::dyn_);
                (
                    Sized::new(Ty::List(Box::new(elem)), list.elements.len() as u64),
                    cost.saturating_add(10),
                )
            }
            Expr::Map(map) => {
                let mut cost: u64 = 0;
                for entry in &map.entries {
                    if let cel::common::ast::EntryExpr::MapEntry(entry) = &entry.expr {
                        cost = cost
                            .saturating_add(self.expr(&entry.key).1)
                            .saturating_add(self.expr(&entry.value).1);
                    }
                }
                let ty = Ty::Map(Box::new(Sized::dyn_()), Box::new(Sized::dyn_()));
                (
                    Sized::new(ty, map.entries.len() as u64),
                    cost.saturating_add(30),
                )
            }
            Expr::Struct(s) => self.error(
                e.id,
                format!(
                    "undeclared reference to '{}' (in container '')",
                    s.type_name
                ),
            ),
            Expr::Comprehension(c) => self.comprehension(e.id, c),
        }
    }

    fn ident(&mut self, id: u64, name: &str) -> (Sized<'s>, u64) {
        if let Some((_, ty)) = self.scopes.iter().rev().find(|(n, _)| n == name) {
            return (ty.clone(), 1);
        }
        match name {
            "self" => (self.self_ty.clone(), 1),
            "oldSelf" => {
                self.uses_old_self = true;
                (self.self_ty.clone(), 1)
            }
            _ => self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    /// The type of `operand.field`, or an error in cel-go's words.
    fn select(&mut self, id: u64, operand: &Sized<'s>, field: &str) -> (Sized<'s>, u64) {
        match &operand.ty {
            Ty::Object(node, root) => {
                if let Some((_, prop)) = property(*node, field) {
                    let root = super::types::embedded(prop);
                    return (of_schema(prop, root, self.bound), 0);
                }
                if *root == Root::Resource {
                    match field {
                        "apiVersion" | "kind" => return (Sized::new(Ty::String, 253), 0),
                        "metadata" => return (Sized::scalar(Ty::RootMeta), 0),
                        _ => {}
                    }
                }
                self.error(id, format!("undefined field '{field}'"))
            }
            Ty::RootMeta => match field {
                "name" | "generateName" => (Sized::new(Ty::String, 253), 0),
                _ => self.error(id, format!("undefined field '{field}'")),
            },
            Ty::Map(_, value) => ((**value).clone(), 0),
            Ty::Dyn => (Sized::dyn_(), 0),
            other => {
                let name = other.name();
                self.error(
                    id,
                    format!("type '{name}' does not support field selection"),
                )
            }
        }
    }

    fn comprehension(&mut self, id: u64, c: &ComprehensionExpr) -> (Sized<'s>, u64) {
        let (range, range_cost) = self.expr(&c.iter_range);
        let (first, second) = match &range.ty {
            Ty::List(elem) => (Sized::scalar(Ty::Int), (**elem).clone()),
            Ty::Map(key, value) => ((**key).clone(), (**value).clone()),
            Ty::Dyn => (Sized::dyn_(), Sized::dyn_()),
            other => {
                let name = other.name();
                self.errors.push((
                    id,
                    format!("expression of type '{name}' cannot be range of a comprehension (must be list, map, or dynamic)"),
                ));
                (Sized::dyn_(), Sized::dyn_())
            }
        };
        // One variable binds the element (list) or key (map); two bind index/key and value.
        let bindings = match &c.iter_var2 {
            None if matches!(range.ty, Ty::List(_)) => vec![(c.iter_var.clone(), second)],
            None => vec![(c.iter_var.clone(), first)],
            Some(var2) => vec![(c.iter_var.clone(), first), (var2.clone(), second)],
        };
        let (init, init_cost) = self.expr(&c.accu_init);
        let depth = self.scopes.len();
        self.scopes.extend(bindings);
        self.scopes.push((c.accu_var.clone(), init));
        let (_, cond_cost) = self.expr(&c.loop_cond);
        let (step, step_cost) = self.expr(&c.loop_step);
        // The accumulator takes the step's type (a list grows under map and filter).
        if let Some(last) = self.scopes.last_mut() {
            last.1 = step;
        }
        let (result, result_cost) = self.expr(&c.result);
        self.scopes.truncate(depth);
        let per_element = cond_cost.saturating_add(step_cost).saturating_add(1);
        let cost = range_cost
            .saturating_add(init_cost)
            .saturating_add(range.size.saturating_mul(per_element))
            .saturating_add(result_cost);
        let result = match result.ty {
            Ty::List(elem) => Sized::new(Ty::List(elem), range.size),
            ty => Sized::new(ty, result.size),
        };
        (result, cost)
    }

    fn call(&mut self, id: u64, call: &CallExpr) -> (Sized<'s>, u64) {
        let name = call.func_name.as_str();
        let mut cost: u64 = 0;
        let target = call.target.as_ref().map(|t| {
            let (ty, c) = self.expr(t);
            cost = cost.saturating_add(c);
            ty
        });
        let args: Vec<Sized<'s>> = call
            .args
            .iter()
            .map(|a| {
                let (ty, c) = self.expr(a);
                cost = cost.saturating_add(c);
                ty
            })
            .collect();
        let (ty, own) = match &target {
            None => self.global(id, name, &args),
            Some(target) => self.member(id, name, target, &args),
        };
        (ty, cost.saturating_add(own))
    }

    fn no_overload(
        &mut self,
        id: u64,
        name: &str,
        target: Option<&Sized>,
        args: &[Sized],
    ) -> (Sized<'s>, u64) {
        let list: Vec<&str> = args.iter().map(|a| a.ty.name()).collect();
        let applied = match target {
            Some(t) => format!("{}.({})", t.ty.name(), list.join(", ")),
            None => format!("({})", list.join(", ")),
        };
        self.error(
            id,
            format!("found no matching overload for '{name}' applied to '{applied}'"),
        )
    }

    fn global(&mut self, id: u64, name: &str, args: &[Sized<'s>]) -> (Sized<'s>, u64) {
        let arg = |i: usize| args.get(i).cloned().unwrap_or_else(Sized::dyn_);
        let bool_ = (Sized::scalar(Ty::Bool), 1);
        match name {
            op::LOGICAL_AND | op::LOGICAL_OR | op::LOGICAL_NOT | op::NOT_STRICTLY_FALSE => {
                for a in args {
                    if !matches!(a.ty, Ty::Bool | Ty::Dyn) {
                        return self.no_overload(id, name, None, args);
                    }
                }
                (Sized::scalar(Ty::Bool), 0)
            }
            op::CONDITIONAL => (arg(1), 0),
            op::EQUALS | op::NOT_EQUALS => {
                let (l, r) = (arg(0), arg(1));
                if !comparable(&l.ty, &r.ty) {
                    return self.no_overload(id, name, None, args);
                }
                let size = l.size.min(r.size);
                let cost = match l.ty {
                    Ty::String | Ty::Bytes => 1 + traversal(size),
                    Ty::List(_) | Ty::Map(..) | Ty::Object(..) => 1 + size,
                    _ => 1,
                };
                (Sized::scalar(Ty::Bool), cost)
            }
            op::LESS | op::LESS_EQUALS | op::GREATER | op::GREATER_EQUALS => {
                let (l, r) = (arg(0), arg(1));
                if !ordered(&l.ty, &r.ty) {
                    return self.no_overload(id, name, None, args);
                }
                let cost = match l.ty {
                    Ty::String | Ty::Bytes => 1 + traversal(l.size.min(r.size)),
                    _ => 1,
                };
                (Sized::scalar(Ty::Bool), cost)
            }
            op::ADD => {
                let (l, r) = (arg(0), arg(1));
                match (&l.ty, &r.ty) {
                    (Ty::String, Ty::String) | (Ty::Bytes, Ty::Bytes) => {
                        let size = l.size.saturating_add(r.size);
                        (Sized::new(l.ty.clone(), size), 1 + traversal(size))
                    }
                    (Ty::List(_), Ty::List(_)) => {
                        let size = l.size.saturating_add(r.size);
                        (Sized::new(l.ty.clone(), size), 1 + size)
                    }
                    (a, b) if arithmetic(a, b) => (if matches!(a, Ty::Dyn) { r } else { l }, 1),
                    _ => self.no_overload(id, name, None, args),
                }
            }
            op::SUBSTRACT | op::MULTIPLY | op::DIVIDE | op::MODULO => {
                let (l, r) = (arg(0), arg(1));
                if !arithmetic(&l.ty, &r.ty) || matches!(l.ty, Ty::String | Ty::Bytes) {
                    return self.no_overload(id, name, None, args);
                }
                (if matches!(l.ty, Ty::Dyn) { r } else { l }, 1)
            }
            op::NEGATE => {
                let a = arg(0);
                match a.ty {
                    Ty::Int | Ty::Double | Ty::Dyn => (a, 1),
                    _ => self.no_overload(id, name, None, args),
                }
            }
            op::INDEX => {
                let (container, index) = (arg(0), arg(1));
                match container.ty {
                    Ty::List(elem) => match index.ty {
                        Ty::Int | Ty::UInt | Ty::Dyn => (*elem, 1),
                        _ => self.no_overload(id, name, None, args),
                    },
                    Ty::Map(_, value) => (*value, 1),
                    Ty::Dyn => (Sized::dyn_(), 1),
                    _ => self.no_overload(id, name, None, args),
                }
            }
            op::IN => {
                let container = arg(1);
                match container.ty {
                    Ty::List(_) => (Sized::scalar(Ty::Bool), 1 + container.size),
                    Ty::Map(..) | Ty::Dyn => bool_,
                    _ => self.no_overload(id, name, None, args),
                }
            }
            op::OPT_INDEX | op::OPT_SELECT => self.not_implemented(id, "optional"),
            "size" => match args {
                [a] if sized(&a.ty) => (Sized::scalar(Ty::Int), 1),
                _ => self.no_overload(id, name, None, args),
            },
            "matches" => match args {
                [s, p] if stringish(&s.ty) && stringish(&p.ty) => (
                    Sized::scalar(Ty::Bool),
                    1 + product(traversal(s.size), traversal(p.size).max(1)),
                ),
                _ => self.no_overload(id, name, None, args),
            },
            "int" | "uint" | "double" | "string" | "bool" | "bytes" | "dyn" | "type"
                if args.len() == 1 =>
            {
                let a = arg(0);
                let ty = match name {
                    "int" => Ty::Int,
                    "uint" => Ty::UInt,
                    "double" => Ty::Double,
                    "string" => Ty::String,
                    "bool" => Ty::Bool,
                    "bytes" => Ty::Bytes,
                    "type" => Ty::Type,
                    _ => return (a, 1),
                };
                // cel-go knows nothing of the length of a number or bool printed as a string: the
                // estimate is unbounded, which makes `'x' + string(self.n)` over budget (as on a
                // real server).
                let size = match (&ty, &a.ty) {
                    (Ty::String, Ty::String) | (Ty::Bytes, Ty::Bytes | Ty::String) => a.size,
                    (Ty::String | Ty::Bytes, _) => u64::MAX,
                    _ => 1,
                };
                (Sized::new(ty, size), 1 + traversal(a.size))
            }
            _ if NOT_IMPLEMENTED.contains(&name) => self.not_implemented(id, name),
            _ => self.error(
                id,
                format!("undeclared reference to '{name}' (in container '')"),
            ),
        }
    }

    fn not_implemented(&mut self, id: u64, name: &str) -> (Sized<'s>, u64) {
        self.error(
            id,
            format!("'{name}' is part of kube-apiserver's CEL environment but the sandbox does not evaluate it (see docs/sandbox.md)"),
        )
    }

    fn member(
        &mut self,
        id: u64,
        name: &str,
        target: &Sized<'s>,
        args: &[Sized<'s>],
    ) -> (Sized<'s>, u64) {
        let string = |ty: Ty<'s>, size: u64| Sized::new(ty, size);
        let t = &target.ty;
        let n = args.len();
        let a0 = args.first().cloned().unwrap_or_else(Sized::dyn_);
        let all_strings = args.iter().all(|a| stringish(&a.ty));
        let ints_after_first = args
            .iter()
            .skip(1)
            .all(|a| matches!(a.ty, Ty::Int | Ty::Dyn));
        let on_string = stringish(t);
        let on_list = matches!(t, Ty::List(_) | Ty::Dyn);
        let size = target.size;
        let result = match name {
            "size" if n == 0 && sized(t) => Some((Sized::scalar(Ty::Int), 1)),
            "contains" | "startsWith" | "endsWith" if n == 1 && on_string && all_strings => {
                Some((Sized::scalar(Ty::Bool), 1 + traversal(size)))
            }
            "matches" if n == 1 && on_string && all_strings => Some((
                Sized::scalar(Ty::Bool),
                1 + product(traversal(size), traversal(a0.size).max(1)),
            )),
            "charAt"
                if n == 1
                    && on_string
                    && ints_after_first
                    && matches!(a0.ty, Ty::Int | Ty::Dyn) =>
            {
                Some((string(Ty::String, 1), 1 + traversal(size)))
            }
            "indexOf" | "lastIndexOf"
                if on_string && (n == 1 || n == 2) && stringish(&a0.ty) && ints_after_first =>
            {
                Some((
                    Sized::scalar(Ty::Int),
                    1 + product(traversal(size), traversal(a0.size).max(1)),
                ))
            }
            "indexOf" | "lastIndexOf" if n == 1 && matches!(t, Ty::List(_)) => {
                Some((Sized::scalar(Ty::Int), 1 + size))
            }
            "lowerAscii" | "upperAscii" | "trim" if n == 0 && on_string => {
                Some((string(Ty::String, size), 1 + traversal(size)))
            }
            "replace"
                if (n == 2 || n == 3)
                    && on_string
                    && stringish(&a0.ty)
                    && args.get(1).is_some_and(|a| stringish(&a.ty)) =>
            {
                let grown = product(size, args[1].size.max(1));
                Some((string(Ty::String, grown), 1 + traversal(grown)))
            }
            "substring"
                if (n == 1 || n == 2)
                    && on_string
                    && args.iter().all(|a| matches!(a.ty, Ty::Int | Ty::Dyn)) =>
            {
                Some((string(Ty::String, size), 1 + traversal(size)))
            }
            "split" if (n == 1 || n == 2) && on_string && stringish(&a0.ty) && ints_after_first => {
                let list = Ty::List(Box::new(string(Ty::String, size)));
                Some((Sized::new(list, size), 1 + size))
            }
            "join" if n <= 1 && on_list && all_strings => {
                let elem = match t {
                    Ty::List(e) => e.size,
                    _ => MAX_REQUEST_BYTES,
                };
                let joined = product(size, elem.saturating_add(a0.size));
                Some((string(Ty::String, joined), 1 + traversal(joined)))
            }
            "isSorted" if n == 0 && on_list => Some((Sized::scalar(Ty::Bool), 1 + size)),
            "sum" | "min" | "max" if n == 0 && on_list => {
                let elem = match t {
                    Ty::List(e) => (**e).clone(),
                    _ => Sized::dyn_(),
                };
                Some((elem, 1 + size))
            }
            "find" if n == 1 && on_string && all_strings => Some((
                string(Ty::String, size),
                1 + product(traversal(size), traversal(a0.size).max(1)),
            )),
            "findAll"
                if (n == 1 || n == 2) && on_string && stringish(&a0.ty) && ints_after_first =>
            {
                let list = Ty::List(Box::new(string(Ty::String, size)));
                Some((
                    Sized::new(list, size),
                    1 + product(traversal(size), traversal(a0.size).max(1)),
                ))
            }
            _ => None,
        };
        if let Some(found) = result {
            return found;
        }
        let known = [
            "size",
            "contains",
            "startsWith",
            "endsWith",
            "matches",
            "charAt",
            "indexOf",
            "lastIndexOf",
            "lowerAscii",
            "upperAscii",
            "trim",
            "replace",
            "substring",
            "split",
            "join",
            "isSorted",
            "sum",
            "min",
            "max",
            "find",
            "findAll",
        ];
        if known.contains(&name) {
            return self.no_overload(id, name, Some(target), args);
        }
        if NOT_IMPLEMENTED.contains(&name) {
            return self.not_implemented(id, name);
        }
        self.error(
            id,
            format!("undeclared reference to '{name}' (in container '')"),
        )
    }
}

fn literal_type<'s>(literal: &LiteralValue) -> Sized<'s> {
    match literal {
        LiteralValue::Boolean(_) => Sized::scalar(Ty::Bool),
        LiteralValue::Bytes(b) => Sized::new(Ty::Bytes, b.inner().len() as u64),
        LiteralValue::Double(_) => Sized::scalar(Ty::Double),
        LiteralValue::Int(_) => Sized::scalar(Ty::Int),
        LiteralValue::Null => Sized::scalar(Ty::Null),
        LiteralValue::String(s) => Sized::new(Ty::String, s.inner().chars().count() as u64),
        LiteralValue::UInt(_) => Sized::scalar(Ty::UInt),
    }
}

fn stringish(ty: &Ty) -> bool {
    matches!(ty, Ty::String | Ty::Dyn)
}

fn sized(ty: &Ty) -> bool {
    matches!(
        ty,
        Ty::String | Ty::Bytes | Ty::List(_) | Ty::Map(..) | Ty::Object(..) | Ty::Dyn
    )
}

/// Whether `==` has an overload for the two types (cel-go's `(A, A)`, with `dyn` matching any and
/// `null` comparable to objects).
fn comparable(l: &Ty, r: &Ty) -> bool {
    match (l, r) {
        (Ty::Dyn, _) | (_, Ty::Dyn) => true,
        (Ty::Null, _) | (_, Ty::Null) => true,
        (a, b) => a.name() == b.name(),
    }
}

fn ordered(l: &Ty, r: &Ty) -> bool {
    let numeric = |t: &Ty| matches!(t, Ty::Int | Ty::UInt | Ty::Double);
    match (l, r) {
        (Ty::Dyn, _) | (_, Ty::Dyn) => true,
        (a, b) if numeric(a) && numeric(b) => true,
        (a, b) => a.name() == b.name() && matches!(a, Ty::String | Ty::Bytes | Ty::Bool),
    }
}

fn arithmetic(l: &Ty, r: &Ty) -> bool {
    match (l, r) {
        (Ty::Dyn, _) | (_, Ty::Dyn) => true,
        (a, b) => a.name() == b.name() && matches!(a, Ty::Int | Ty::UInt | Ty::Double),
    }
}
