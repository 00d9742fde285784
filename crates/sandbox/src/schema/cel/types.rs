//! The CEL type of a schema node, as kube-apiserver declares it for `self` (its `SchemaDeclType`),
//! with the most elements, characters or properties a value of it can have: the bound every cost
//! estimate multiplies by.

use super::super::node::{Additional, Node};

/// The largest request body kube-apiserver accepts (3 MiB), from which it derives the size of
/// lists, maps and strings a schema leaves unbounded.
pub(super) const MAX_REQUEST_BYTES: u64 = 3 * 1024 * 1024;

/// The largest size or cost tracked: far above every limit, and small enough that adding a few
/// of them cannot overflow.
pub(super) const CAP: u64 = 1 << 60;

/// A CEL type, as far as the checker needs to know it.
#[derive(Clone, Debug)]
pub(super) enum Ty<'s> {
    /// Anything: int-or-string, preserved unknown fields, results the checker does not track.
    Dyn,
    Null,
    Bool,
    Int,
    UInt,
    Double,
    String,
    Bytes,
    /// The type of a type (`type(x)`).
    Type,
    List(Box<Sized<'s>>),
    Map(Box<Sized<'s>>, Box<Sized<'s>>),
    /// An object with declared properties: field selection is checked against them.
    Object(Node<'s>, Root),
    /// `self.metadata` at a resource's root: only `name` and `generateName` are visible.
    RootMeta,
}

/// Whether an object is the root of a resource (its own or an embedded one), where `apiVersion`,
/// `kind` and a reduced `metadata` are visible whatever the schema says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Root {
    Resource,
    Plain,
}

/// A type with the most elements (lists, maps), characters (strings) or bytes a value has.
#[derive(Clone, Debug)]
pub(super) struct Sized<'s> {
    pub(super) ty: Ty<'s>,
    pub(super) size: u64,
}

impl<'s> Sized<'s> {
    pub(super) fn new(ty: Ty<'s>, size: u64) -> Self {
        Self {
            ty,
            size: size.min(CAP),
        }
    }

    pub(super) fn scalar(ty: Ty<'s>) -> Self {
        Self { ty, size: 1 }
    }

    pub(super) fn dyn_() -> Self {
        Self::scalar(Ty::Dyn)
    }
}

impl Ty<'_> {
    /// The name CEL gives the type in messages.
    pub(super) fn name(&self) -> &'static str {
        match self {
            Ty::Dyn => "dyn",
            Ty::Null => "null_type",
            Ty::Bool => "bool",
            Ty::Int => "int",
            Ty::UInt => "uint",
            Ty::Double => "double",
            Ty::String => "string",
            Ty::Bytes => "bytes",
            Ty::Type => "type",
            Ty::List(_) => "list",
            Ty::Map(..) | Ty::Object(..) | Ty::RootMeta => "object",
        }
    }
}

/// The most elements, characters or properties the values of a node can have, for the static
/// estimate: `maxItems`, `maxLength` or `maxProperties` when set, otherwise as many as fit in a
/// request of [`MAX_REQUEST_BYTES`], as kube-apiserver estimates them.
pub(super) fn schema_bound(node: Node) -> u64 {
    let unbounded = MAX_REQUEST_BYTES - 2;
    match node.type_name() {
        "string" => node.count("maxLength").unwrap_or(unbounded),
        "array" => node.count("maxItems").unwrap_or_else(|| {
            let item = node.items().map_or(1, min_serialized_size);
            unbounded / (item + 1)
        }),
        "object" => node.count("maxProperties").unwrap_or_else(|| {
            // A key is at least `"":` before its value.
            let value = node.additional_schema().map_or(1, min_serialized_size);
            unbounded / (value + 4)
        }),
        _ => 1,
    }
}

/// The smallest JSON a value of this node can serialise to (kube's `estimateMinSizeJSON`).
fn min_serialized_size(node: Node) -> u64 {
    if node.int_or_string() || node.nullable() {
        return 1;
    }
    match node.type_name() {
        "string" => 2 + node.count("minLength").unwrap_or(0),
        "boolean" => 4,
        "integer" | "number" => 1,
        "array" => 2,
        // `{}` plus each required property's `"name":value,`.
        "object" => {
            let required = node.get("required").and_then(|r| r.as_array());
            required
                .into_iter()
                .flatten()
                .filter_map(|r| r.as_str())
                .fold(2, |sum, name| {
                    let value = node.property(name).map_or(1, min_serialized_size);
                    sum + name.len() as u64 + 4 + value
                })
        }
        _ => 1,
    }
}

/// A schema node's CEL type, sized by `bound`: the schema's limits for the static estimate, or
/// the largest value actually present for the runtime cost.
pub(super) fn of_schema<'s>(node: Node<'s>, root: Root, bound: &dyn Fn(Node) -> u64) -> Sized<'s> {
    let size = bound(node);
    let ty = if node.int_or_string() {
        Ty::Dyn
    } else {
        match node.type_name() {
            "string" => Ty::String,
            "integer" => Ty::Int,
            "number" => Ty::Double,
            "boolean" => Ty::Bool,
            "array" => match node.items() {
                Some(items) => Ty::List(Box::new(of_schema(items, embedded(items), bound))),
                None => Ty::List(Box::new(Sized::dyn_())),
            },
            "object" => object(node, root, bound),
            _ if node.preserves_unknown() => Ty::Dyn,
            _ => Ty::Dyn,
        }
    };
    Sized::new(ty, size)
}

fn object<'s>(node: Node<'s>, root: Root, bound: &dyn Fn(Node) -> u64) -> Ty<'s> {
    if node.has_properties() || root == Root::Resource {
        return Ty::Object(node, root);
    }
    match node.additional() {
        Additional::Schema(values) => Ty::Map(
            Box::new(Sized::new(Ty::String, MAX_REQUEST_BYTES)),
            Box::new(of_schema(values, embedded(values), bound)),
        ),
        _ if node.preserves_unknown() => Ty::Dyn,
        _ => Ty::Object(node, root),
    }
}

pub(super) fn embedded(node: Node) -> Root {
    if node.embedded() {
        Root::Resource
    } else {
        Root::Plain
    }
}

/// The CEL name of a property (kube's `Escape`): reserved words become `__word__`, and `_`,
/// `.`, `-` and `/` sequences are spelled out; `None` when the name cannot be escaped.
pub(super) fn escape(name: &str) -> Option<String> {
    const RESERVED: [&str; 23] = [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
        "__proto__",
        "prototype",
    ];
    if RESERVED.contains(&name) {
        return Some(format!("__{name}__"));
    }
    let mut chars = name.chars();
    let first = chars.next()?;
    if !(first.is_ascii_alphabetic() || first == '_') {
        return None;
    }
    let mut out = String::new();
    let mut rest = name;
    while let Some(c) = rest.chars().next() {
        if let Some(tail) = rest.strip_prefix("__") {
            out.push_str("__underscores__");
            rest = tail;
            continue;
        }
        let escaped = match c {
            '.' => "__dot__",
            '-' => "__dash__",
            '/' => "__slash__",
            c if c.is_ascii_alphanumeric() || c == '_' => {
                out.push(c);
                rest = &rest[1..];
                continue;
            }
            _ => return None,
        };
        out.push_str(escaped);
        rest = &rest[1..];
    }
    Some(out)
}

/// The property an escaped CEL field name refers to.
pub(super) fn property<'s>(node: Node<'s>, field: &str) -> Option<(&'s String, Node<'s>)> {
    node.property_nodes()
        .find(|(name, _)| escape(name).as_deref() == Some(field))
}
