//! Validation rules (CEL, `x-kubernetes-validations`) several CRDs share. The API server refuses a
//! create or update that breaks one, with the rule's message; the controllers keep their own
//! checks for objects stored before a rule existed.

use kube::core::Rule;

/// What `kubectl apply` prints for a label selector kube-rs (and the API server, for built-in
/// kinds) cannot use: the controllers' `InvalidSelector`.
pub const SELECTOR_MESSAGE: &str = "matchExpressions: operators In and NotIn need values, \
     Exists and DoesNotExist take none, and there is no other operator (InvalidSelector)";

/// A `LabelSelector` whose expressions can all be used: In/NotIn with values, Exists/DoesNotExist
/// without, no other operator — what `metav1.LabelSelector` validation requires of built-in
/// kinds, and what kube-rs needs to turn it into a matcher.
pub fn label_selector() -> Rule {
    Rule::new(
        "!has(self.matchExpressions) || self.matchExpressions.all(e, \
         e.operator in ['In', 'NotIn'] ? has(e.values) && size(e.values) > 0 \
         : e.operator in ['Exists', 'DoesNotExist'] && (!has(e.values) || size(e.values) == 0))",
    )
    .message(SELECTOR_MESSAGE)
}
