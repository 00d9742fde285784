//! How the message tables are written: one [`Message`] per protobuf message, listing each
//! field's number, JSON name and shape, with shorthands for the usual shapes.

/// The type of a single value on the wire and how it maps to JSON.
#[derive(Clone, Copy)]
pub(super) enum Ty {
    /// `string` → JSON string.
    Str,
    /// `bytes` → base64 JSON string (Go marshals `[]byte` that way).
    Bytes,
    /// `bool` varint → JSON bool.
    Bool,
    /// `int32` varint → JSON number.
    I32,
    /// `int64` varint → JSON number.
    I64,
    /// `metav1.Time` {seconds = 1, nanos = 2} → RFC 3339 string; an empty message is the zero time.
    Time,
    /// `metav1.MicroTime`: the same message, rendered with microseconds (Leases, events.k8s.io).
    MicroTime,
    /// `resource.Quantity` {string = 1} → JSON string.
    Quantity,
    /// `intstr.IntOrString` {type = 1, intVal = 2, strVal = 3} → JSON number or string.
    IntOrString,
    /// A nested message → JSON object.
    Msg(&'static Message),
}

/// How a field's values are laid out on the wire and merged into the parent JSON object.
#[derive(Clone, Copy)]
pub(super) enum Shape {
    /// One value. `omit_zero` is true for non-pointer Go fields tagged `omitempty`, whose zero values
    /// Go's JSON encoder drops even though the protobuf marshaler always writes them.
    Single { ty: Ty, omit_zero: bool },
    /// `repeated` → JSON array, present only when the wire has elements (as with `omitempty`).
    /// `null_if_absent` marks Go slices tagged without `omitempty`: Go decodes a list with no
    /// elements as nil and encodes nil as `null`, so an absent list becomes `null`.
    Repeated { ty: Ty, null_if_absent: bool },
    /// `map<string, V>` (repeated entry message {key = 1, value = 2}) → JSON object.
    Map(Ty),
    /// An embedded Go struct tagged `json:",inline"`: its fields land in the parent object.
    Inline(&'static Message),
}

/// One field of a message table.
pub(super) struct Field {
    pub(super) num: u32,
    /// JSON name (also used in error paths for inline fields).
    pub(super) name: &'static str,
    pub(super) shape: Shape,
}

/// A message table: the protobuf message name (for errors) and its supported fields.
pub(super) struct Message {
    pub(super) name: &'static str,
    pub(super) fields: &'static [Field],
}

/// Non-pointer field with `omitempty`: zero values are omitted.
pub(super) const fn opt(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: true,
        },
    }
}

/// Non-pointer field without `omitempty`: emitted as found, zero included.
pub(super) const fn req(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: false,
        },
    }
}

/// Pointer field: only on the wire when non-nil, and then emitted even when it points at zero.
pub(super) const fn ptr(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty,
            omit_zero: false,
        },
    }
}

/// Nested struct or pointer-to-struct: emitted whenever present (Go never omits structs).
pub(super) const fn msg(num: u32, name: &'static str, message: &'static Message) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::Msg(message),
            omit_zero: false,
        },
    }
}

/// `metav1.Time` (struct or pointer): the zero time is an empty message and is omitted.
pub(super) const fn time(num: u32, name: &'static str) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::Time,
            omit_zero: false,
        },
    }
}

/// `metav1.MicroTime` pointer: omitted when unset, microseconds otherwise.
pub(super) const fn micro_time(num: u32, name: &'static str) -> Field {
    Field {
        num,
        name,
        shape: Shape::Single {
            ty: Ty::MicroTime,
            omit_zero: false,
        },
    }
}

/// Repeated field with `omitempty`: absent when it has no elements.
pub(super) const fn rep(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Repeated {
            ty,
            null_if_absent: false,
        },
    }
}

/// Repeated field without `omitempty`: `null` when it has no elements.
pub(super) const fn rep_null(num: u32, name: &'static str, ty: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Repeated {
            ty,
            null_if_absent: true,
        },
    }
}

pub(super) const fn map(num: u32, name: &'static str, value: Ty) -> Field {
    Field {
        num,
        name,
        shape: Shape::Map(value),
    }
}

pub(super) const fn inline(num: u32, name: &'static str, message: &'static Message) -> Field {
    Field {
        num,
        name,
        shape: Shape::Inline(message),
    }
}

/// Shorthand for a nested-message value type (repeated or map values).
pub(super) const fn m(message: &'static Message) -> Ty {
    Ty::Msg(message)
}
