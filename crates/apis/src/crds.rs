//! The CRDs as Vigil installs them: every version a client may still use, served.
//!
//! KubernetesCluster and Topic graduated from `v1alpha1` to `v1` without a schema change. The
//! Rust types are `v1`, the storage version; `v1alpha1` is served from the very same schema
//! (a copy of `v1`'s version entry, so the two cannot drift apart), deprecated, so that manifests
//! written for it keep applying. The conversion strategy is `None`: the API server only rewrites
//! `apiVersion` between the two. `CustomResourceExt::crd()` alone gives the `v1` version only:
//! installing that over a cluster that still stores `v1alpha1` objects is refused by the API
//! server, so install these.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{CustomResourceExt, Resource};

use crate::{KubernetesCluster, Topic};

/// The version KubernetesCluster and Topic graduated from, still served (deprecated).
pub const V1ALPHA1: &str = "v1alpha1";

/// `kubernetesclusters.vigil.dev`: `v1` (stored) and `v1alpha1` (deprecated).
pub fn kubernetes_cluster() -> CustomResourceDefinition {
    graduated::<KubernetesCluster>(V1ALPHA1)
}

/// `topics.kafka.vigil.dev`: `v1` (stored) and `v1alpha1` (deprecated).
pub fn topic() -> CustomResourceDefinition {
    graduated::<Topic>(V1ALPHA1)
}

/// What a client of a deprecated version is told (kube-apiserver's `Warning` header, printed by
/// kubectl and client-go): the same fields, so only `apiVersion` needs changing.
pub fn deprecation_warning(group: &str, kind: &str, from: &str, to: &str) -> String {
    format!(
        "{group}/{from} {kind} is deprecated; use {group}/{to} {kind}: the same fields, change \
         only apiVersion"
    )
}

/// `K`'s CRD with `earlier` served too: a copy of `K`'s own version entry (its schema, printer
/// columns and subresources), neither stored nor preferred, deprecated.
fn graduated<K>(earlier: &str) -> CustomResourceDefinition
where
    K: CustomResourceExt + Resource<DynamicType = ()>,
{
    let mut crd = K::crd();
    let current = K::version(&());
    let kind = K::kind(&());
    let group = K::group(&());
    let copies: Vec<_> = crd
        .spec
        .versions
        .iter()
        .map(|v| {
            let mut old = v.clone();
            old.name = earlier.to_owned();
            old.storage = false;
            old.served = true;
            old.deprecated = Some(true);
            old.deprecation_warning = Some(deprecation_warning(&group, &kind, earlier, &current));
            old
        })
        .collect();
    crd.spec.versions.extend(copies);
    crd
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ConfigMapSync, CriticalService, StatusBackupPolicy};

    #[test]
    fn graduated_kinds_store_v1_and_serve_v1alpha1_deprecated_with_the_same_schema() {
        for crd in [kubernetes_cluster(), topic()] {
            let name = crd.metadata.name.clone().unwrap_or_default();
            let versions = &crd.spec.versions;
            let names: Vec<&str> = versions.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, ["v1", "v1alpha1"], "{name}");
            let (v1, old) = (&versions[0], &versions[1]);
            assert!(v1.served && v1.storage && v1.deprecated.is_none(), "{name}");
            assert!(old.served && !old.storage, "{name}");
            assert_eq!(old.deprecated, Some(true), "{name}");
            let warning = old.deprecation_warning.as_deref().unwrap_or_default();
            assert!(
                warning.contains("/v1alpha1 ") && warning.contains("/v1 "),
                "{name}: {warning}"
            );
            assert_eq!(v1.schema, old.schema, "{name}: no schema change");
            assert_eq!(v1.subresources, old.subresources, "{name}");
            assert_eq!(
                v1.additional_printer_columns, old.additional_printer_columns,
                "{name}"
            );
            assert!(crd.spec.conversion.is_none(), "{name}: conversion None");
        }
    }

    #[test]
    fn the_other_kinds_keep_their_single_version() {
        for (crd, version) in [
            (CriticalService::crd(), "v1"),
            (ConfigMapSync::crd(), "v1"),
            (StatusBackupPolicy::crd(), "v1"),
        ] {
            let names: Vec<&str> = crd.spec.versions.iter().map(|v| v.name.as_str()).collect();
            assert_eq!(names, [version]);
        }
    }
}
