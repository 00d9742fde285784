//! The consent model. A ConfigMapSync must not let its author read or write ConfigMaps they could
//! not reach themselves, so outside the ConfigMapSync's own namespace:
//! - a source is read only if it names that namespace (or `*`) in its
//!   `configmapsync.apps.bixbite.io/shareable-with` annotation — set by whoever may edit the
//!   source, i.e. someone who could hand its content out anyway;
//! - a destination namespace is written only if it carries the label
//!   `accept-from.configmapsync.apps.bixbite.io/<namespace>: "true"` (or
//!   `configmapsync.apps.bixbite.io/accept-from-any: "true"`) — set by whoever may label
//!   namespaces, typically an administrator. Labels, so `kubectl get ns -l` lists what a team
//!   may write to.
//!
//! `--configmapsync-trust-all` switches the model off, for clusters where only administrators may
//! create ConfigMapSyncs.

use super::model::{
    ACCEPT_FROM_ANY_LABEL, ACCEPT_FROM_LABEL_PREFIX, ConfigMapView, NamespaceView,
    SHAREABLE_WITH_ANNOTATION, Settings,
};

/// Whether the source may be read by a ConfigMapSync in `sync_namespace`.
pub fn source_consents(source: &ConfigMapView, sync_namespace: &str, settings: &Settings) -> bool {
    settings.trust_all
        || source.namespace == sync_namespace
        || source.shareable_with.as_deref().is_some_and(|list| {
            list.split(',')
                .map(str::trim)
                .any(|ns| ns == "*" || ns == sync_namespace)
        })
}

/// Whether `namespace` accepts copies for a ConfigMapSync in `sync_namespace`.
pub fn namespace_accepts(
    namespace: &NamespaceView,
    sync_namespace: &str,
    settings: &Settings,
) -> bool {
    settings.trust_all
        || namespace.name == sync_namespace
        || namespace
            .labels
            .get(ACCEPT_FROM_ANY_LABEL)
            .is_some_and(|v| v == "true")
        || namespace
            .labels
            .get(&accept_label(sync_namespace))
            .is_some_and(|v| v == "true")
}

/// The label that makes a namespace accept copies for ConfigMapSyncs of `sync_namespace`.
pub fn accept_label(sync_namespace: &str) -> String {
    format!("{ACCEPT_FROM_LABEL_PREFIX}{sync_namespace}")
}

/// What a source lacks, said so that the fix can be copied from the message. It reads the same
/// whether the source exists or not, so a ConfigMapSync cannot probe foreign namespaces.
pub fn missing_source_consent(source_namespace: &str, name: &str, sync_namespace: &str) -> String {
    format!(
        "source ConfigMap {source_namespace}/{name} does not exist or does not consent to be read by ConfigMapSyncs in namespace {sync_namespace} (annotation {SHAREABLE_WITH_ANNOTATION}: \"{sync_namespace}\" missing)"
    )
}

/// What destination namespaces lack.
pub fn missing_destination_consent(namespaces: &[&str], sync_namespace: &str) -> String {
    let (noun, verb) = if namespaces.len() == 1 {
        ("namespace", "does")
    } else {
        ("namespaces", "do")
    };
    format!(
        "{noun} {} {verb} not consent to copies from ConfigMapSyncs in namespace {sync_namespace} (label {}=true missing)",
        namespaces.join(", "),
        accept_label(sync_namespace)
    )
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn cm(ns: &str, shareable: Option<&str>) -> ConfigMapView {
        ConfigMapView {
            namespace: ns.into(),
            name: "app".into(),
            uid: "u".into(),
            resource_version: None,
            labels: BTreeMap::new(),
            owner: None,
            content_hash: String::new(),
            size: 0,
            immutable: false,
            shareable_with: shareable.map(Into::into),
            terminating: false,
        }
    }

    fn ns(name: &str, labels: &[(&str, &str)]) -> NamespaceView {
        NamespaceView {
            name: name.into(),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            terminating: false,
        }
    }

    #[test]
    fn a_source_consents_by_name_or_star_and_its_own_namespace_always() {
        let strict = Settings::default();
        assert!(source_consents(&cm("team", None), "team", &strict));
        assert!(!source_consents(&cm("src", None), "team", &strict));
        assert!(source_consents(
            &cm("src", Some("a, team")),
            "team",
            &strict
        ));
        assert!(!source_consents(&cm("src", Some("teamx")), "team", &strict));
        assert!(source_consents(&cm("src", Some("*")), "team", &strict));
        let trusting = Settings {
            trust_all: true,
            secrets: false,
        };
        assert!(source_consents(&cm("src", None), "team", &trusting));
    }

    #[test]
    fn a_namespace_consents_by_label() {
        let strict = Settings::default();
        assert!(namespace_accepts(&ns("team", &[]), "team", &strict));
        assert!(!namespace_accepts(&ns("dst", &[]), "team", &strict));
        let label = accept_label("team");
        assert!(namespace_accepts(
            &ns("dst", &[(&label, "true")]),
            "team",
            &strict
        ));
        assert!(!namespace_accepts(
            &ns("dst", &[(&label, "false")]),
            "team",
            &strict
        ));
        assert!(!namespace_accepts(
            &ns("dst", &[(&accept_label("other"), "true")]),
            "team",
            &strict
        ));
        assert!(namespace_accepts(
            &ns("dst", &[(ACCEPT_FROM_ANY_LABEL, "true")]),
            "team",
            &strict
        ));
        assert!(namespace_accepts(
            &ns("dst", &[]),
            "team",
            &Settings {
                trust_all: true,
                secrets: false,
            }
        ));
    }

    #[test]
    fn messages_name_the_missing_consent() {
        assert_eq!(
            missing_destination_consent(&["dst"], "default"),
            "namespace dst does not consent to copies from ConfigMapSyncs in namespace default (label accept-from.configmapsync.apps.bixbite.io/default=true missing)"
        );
        assert!(
            missing_source_consent("src", "app", "default").contains("shareable-with: \"default\"")
        );
    }
}
