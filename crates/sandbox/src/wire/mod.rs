//! Decoding of Kubernetes protobuf request bodies into the JSON the sandbox stores.
//!
//! kubectl's typed generators (`kubectl create deployment`, `kubectl run`, ...) POST built-in objects as
//! `application/vnd.kubernetes.protobuf`: the 4-byte magic `k8s\0` followed by a `runtime.Unknown`
//! envelope whose `typeMeta` names the kind and whose `raw` bytes hold the typed message. The store
//! only understands JSON, so [`decode`] turns those bytes into exactly the JSON object Go's
//! `encoding/json` would produce for the same value.
//!
//! The decoder is driven by static schema tables: one [`Message`] per protobuf message, listing
//! (field number, JSON name, shape). Field numbers come from the upstream `generated.proto` files
//! (kubernetes/api and kubernetes/apimachinery); JSON names and presence rules come from the Go
//! `json` tags. A field number missing from a table is an error naming the message and number, so a
//! gap shows up as a clear rejection instead of silently dropped data.
//!
//! Presence needs care. gogo-generated marshalers write every non-pointer field unconditionally (an
//! empty `Name` is still on the wire), so wire presence alone does not say what Go's JSON would
//! contain. Each scalar field therefore records whether its Go type is a non-pointer with
//! `omitempty` (zero values are dropped, as Go would) or not (pointers and tag-without-`omitempty`
//! fields keep whatever value is on the wire, zero included). Nested messages are always emitted when
//! present because `omitempty` never omits a Go struct (hence `"spec": {}` and `"status": {}`).

mod apps_v1;
mod batch_v1;
mod coordination_v1;
mod core_v1;
mod decode;
mod envelope;
mod kinds;
mod meta_v1;
mod model;
mod rbac_v1;
mod reader;
mod scheduling_policy_v1;
#[cfg(test)]
mod tests;

pub use envelope::decode;
