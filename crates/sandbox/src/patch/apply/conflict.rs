//! Conflicts: fields an apply would change that another manager owns, and how the server words them.

use std::collections::BTreeMap;

use super::field_set::quote;

/// A field the applier would change that another manager owns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The owning manager's name.
    pub manager: String,
    /// The field as the server prints it: `.spec.replicas`, `.data.key`,
    /// `.spec.containers[name="c"].image`, `.metadata.finalizers[="f"]`.
    pub field: String,
    /// `Some(apiVersion)` when the owner's entry is an `Update` (the server then says
    /// `using <apiVersion>`); `None` when it is an `Apply`.
    pub updated_with: Option<String>,
    /// The owner entry's subresource, e.g. `status`.
    pub subresource: Option<String>,
}

impl Conflict {
    /// The message of this conflict's Status cause (reason `FieldManagerConflict`, field
    /// [`Conflict::field`]), e.g. `conflict with "kubectl" using apps/v1`.
    /// `api_version` stands in for an owner entry that recorded no apiVersion.
    pub fn cause_message(&self, api_version: &str) -> String {
        format!("conflict with {}", self.owner(api_version))
    }

    /// `printManager`: `"m"`, `"m" with subresource "status"`, `"m" using v1`.
    fn owner(&self, fallback_api_version: &str) -> String {
        let mut owner = quote(&self.manager);
        if let Some(subresource) = &self.subresource {
            owner = format!("{owner} with subresource {}", quote(subresource));
        }
        match self.updated_with.as_deref() {
            Some("") => format!("{owner} using {fallback_api_version}"),
            Some(api_version) => format!("{owner} using {api_version}"),
            None => owner,
        }
    }

    /// The owner's identifier as upstream serializes it; conflict messages group by it, sorted.
    pub(super) fn owner_identifier(&self) -> String {
        let operation = if self.updated_with.is_some() {
            "Update"
        } else {
            "Apply"
        };
        let mut id = format!(
            "{{\"manager\":{},\"operation\":\"{operation}\"",
            quote(&self.manager)
        );
        if let Some(api_version) = self.updated_with.as_deref().filter(|v| !v.is_empty()) {
            id.push_str(&format!(",\"apiVersion\":{}", quote(api_version)));
        }
        if let Some(subresource) = &self.subresource {
            id.push_str(&format!(",\"subresource\":{}", quote(subresource)));
        }
        id.push('}');
        id
    }
}

/// The 409 message, worded like kube-apiserver's:
/// `Apply failed with 1 conflict: conflict with "kubectl-client-side-apply" using v1: .data.key`, or
/// `Apply failed with 2 conflicts: conflicts with "m" using v1:\n- .spec.a\n- .spec.b`.
/// `api_version` stands in for owner entries that recorded no apiVersion.
pub fn conflict_message(conflicts: &[Conflict], api_version: &str) -> String {
    if let [only] = conflicts {
        let cause = only.cause_message(api_version);
        return format!("Apply failed with 1 conflict: {cause}: {}", only.field);
    }
    let mut by_owner: BTreeMap<String, (String, Vec<&str>)> = BTreeMap::new();
    for conflict in conflicts {
        by_owner
            .entry(conflict.owner_identifier())
            .or_insert_with(|| (conflict.owner(api_version), Vec::new()))
            .1
            .push(&conflict.field);
    }
    let mut lines = Vec::new();
    for (owner, fields) in by_owner.values() {
        lines.push(format!("conflicts with {owner}:"));
        lines.extend(fields.iter().map(|field| format!("- {field}")));
    }
    format!(
        "Apply failed with {} conflicts: {}",
        conflicts.len(),
        lines.join("\n")
    )
}
