//! CRD structural schemas: pruning, defaulting and validation of custom resources, plus the
//! checks a CRD's `openAPIV3Schema` must pass before it is served.
//!
//! The behaviour follows `k8s.io/apiextensions-apiserver` (pruning, defaulting, list-type and
//! embedded-resource validation, structural-schema rules) and `k8s.io/kube-openapi` (value
//! validation), down to the wording of the error messages, so clients see the same
//! `details.causes` from the sandbox as from a real cluster. Two consequences look odd but are
//! faithful: values in messages are printed the way Go prints them (`1e+06`,
//! `map[string]interface {}{"name":"a"}`), and the anyOf/oneOf/allOf/not summaries carry the
//! field `<nil>` because kube-openapi reports them without a path.
//!
//! Schemas and objects are untrusted input: malformed keywords are treated as absent and nothing
//! here panics.

mod cel;
mod default;
mod formats;
mod go_fmt;
mod node;
mod prune;
mod structural;
#[cfg(test)]
mod tests;
mod validate;

pub use cel::{check_rules, has_rules, validate_rules};
pub use default::apply_defaults;
pub use go_fmt::format_go_float;
pub use prune::prune;
pub use structural::check_structural;
pub use validate::validate;
