//! Status vault: keeps the status of covered objects (any kind with a status subresource, named
//! by `StatusBackupPolicy` objects) in a vault outside the cluster, continuously, and writes it
//! back when an object is re-created with an empty status — before Vigil's own controllers act on
//! it ([`restore::StatusRestorer::ensure_restored`]). Not a kube-runtime controller: a
//! supervisor over policies, one watch per covered kind, and capture workers.
//!
//! Modules depend one way, from the pure to the running: [`model`] and [`decide`] (no I/O);
//! the state each part owns — [`scope`] (the policy and namespace caches), [`kinds`] (watched
//! objects), [`backends`] (open vaults and their health), [`queue`]
//! (captures waiting for a backend); [`discovery`] (a kind's resource); [`error`] (what keeps it from answering); [`restore`] (reads the
//! vault, writes a status back); [`capture`] (kind watches and capture workers, handing empty
//! objects to the restore); [`supervisor`] (runs the kind watches as policies change, writes
//! the policies' status, checks the backends); `metrics` (its metrics); [`controller`] (the
//! wiring); [`registration`] (its entry in the registry: flags, CRD, permissions, how it is
//! added).

pub mod backends;
pub mod capture;
pub mod controller;
pub mod decide;
pub mod discovery;
pub mod error;
pub mod kinds;
mod metrics;
pub mod model;
pub mod queue;
pub mod registration;
pub mod restore;
pub mod scope;
mod supervisor;

use std::collections::{BTreeMap, BTreeSet};

pub use controller::StatusVault;
pub use error::{BackendError, Pending};
pub use restore::{RestoreOutcome, StatusRestorer};

/// Name of the controller in metrics, logs and Events.
pub const NAME: &str = "statusvault";

/// Locks one of the vault's shared maps, sets or queues. Each is changed by single inserts and
/// removes, so a panic elsewhere cannot leave one half-updated: a poisoned lock is taken as is
/// rather than failing every later capture.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What this controller's code does with the API, for its own kinds. The kinds policies cover
/// are only known at install time: `vigil manifests --status-vault-resources` adds, for each,
/// get/list/watch on the resource, patch on the resource (the restore annotations) and
/// patch on its `/status` (see [`covered_kind_permissions`]).
pub const PERMISSIONS: &[crate::permissions::Permission] = &[
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["statusbackuppolicies"],
        verbs: &["list", "watch"],
    },
    crate::permissions::Permission {
        group: "vigil.dev",
        resources: &["statusbackuppolicies/status"],
        verbs: &["patch"],
    },
    // namespaceSelector: namespaces' labels, through a metadata-only watch.
    crate::permissions::Permission {
        group: "",
        resources: &["namespaces"],
        verbs: &["list", "watch"],
    },
    crate::permissions::RECORD_EVENTS,
];

/// Verbs on a covered kind: watched (get for the restore's fresh read), and patched for the
/// restore annotations; its `/status` is patched to restore.
pub const COVERED_VERBS: &[&str] = &["get", "list", "watch", "patch"];
pub const COVERED_STATUS_VERBS: &[&str] = &["patch"];

/// The rules for covered resources given as `plural` or `plural.group`
/// (`services,kubernetesclusters.infra.example.com`): `(group, resources, verbs)`.
pub fn covered_kind_permissions(resources: &[String]) -> Vec<(String, Vec<String>, Vec<String>)> {
    let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for r in resources {
        let r = r.trim().to_lowercase();
        if r.is_empty() {
            continue;
        }
        let (plural, group) = r.split_once('.').unwrap_or((r.as_str(), ""));
        by_group
            .entry(group.to_owned())
            .or_default()
            .insert(plural.to_owned());
    }
    let verbs = |v: &[&str]| v.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    let mut out = Vec::new();
    for (group, plurals) in by_group {
        out.push((
            group.clone(),
            plurals.iter().cloned().collect(),
            verbs(COVERED_VERBS),
        ));
        out.push((
            group,
            plurals.iter().map(|p| format!("{p}/status")).collect(),
            verbs(COVERED_STATUS_VERBS),
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn covered_resources_get_exact_rules() {
        let rules = covered_kind_permissions(&[
            "services".into(),
            "kubernetesclusters.infra.example.com".into(),
            " ".into(),
        ]);
        assert_eq!(
            rules,
            vec![
                (
                    String::new(),
                    vec!["services".to_owned()],
                    vec!["get".into(), "list".into(), "watch".into(), "patch".into()]
                ),
                (
                    String::new(),
                    vec!["services/status".to_owned()],
                    vec!["patch".into()]
                ),
                (
                    "infra.example.com".into(),
                    vec!["kubernetesclusters".to_owned()],
                    vec!["get".into(), "list".into(), "watch".into(), "patch".into()]
                ),
                (
                    "infra.example.com".into(),
                    vec!["kubernetesclusters/status".to_owned()],
                    vec!["patch".into()]
                ),
            ]
        );
    }
}
