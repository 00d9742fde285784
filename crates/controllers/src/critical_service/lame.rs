//! Lame Services that no CriticalService covers: reported (a log line per change, and the
//! `vigil_lame_services` gauge) as the article's first scripts did, without acting on them.

use std::collections::{BTreeMap, BTreeSet};

use super::decide::covers;
use super::model::{CriticalServiceView, ServiceView, Settings, SliceView};

/// (namespace, name) of a Service.
pub type ServiceKey = (String, String);

/// The Services in the watched namespaces that have a selector, no ready endpoint in their
/// EndpointSlices, and no CriticalService covering them.
pub fn lame_uncovered(
    services: &[ServiceView],
    slices: &BTreeMap<ServiceKey, SliceView>,
    crs: &[CriticalServiceView],
    settings: &Settings,
) -> BTreeSet<ServiceKey> {
    services
        .iter()
        .filter(|s| !s.selector.is_empty() && !s.external_name)
        .filter(|s| {
            settings
                .watched_namespaces
                .as_ref()
                .is_none_or(|w| w.contains(&s.namespace))
        })
        .filter(|s| !crs.iter().any(|cr| covers(&cr.spec, s, settings)))
        .filter(|s| {
            slices
                .get(&(s.namespace.clone(), s.name.clone()))
                .is_none_or(|v| v.ready_pods.is_empty())
        })
        .map(|s| (s.namespace.clone(), s.name.clone()))
        .collect()
}

/// What changed between two reports: (newly lame, answering again).
pub fn changes(
    before: &BTreeSet<ServiceKey>,
    now: &BTreeSet<ServiceKey>,
) -> (Vec<ServiceKey>, Vec<ServiceKey>) {
    (
        now.difference(before).cloned().collect(),
        before.difference(now).cloned().collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::super::model::TemplateKey;
    use super::*;
    use vigil_apis::critical_service::{CriticalServiceSpec, LabelMatch};

    fn svc(ns: &str, name: &str, labels: &[(&str, &str)]) -> ServiceView {
        ServiceView {
            namespace: ns.into(),
            name: name.into(),
            uid: format!("u-{name}"),
            labels: labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            selector: [("app".to_owned(), name.to_owned())].into(),
            external_name: false,
            ports: Vec::new(),
        }
    }

    fn settings(watched: Option<&[&str]>) -> Settings {
        Settings {
            pod_name_prefix: "service-watcher".into(),
            default_template: TemplateKey {
                namespace: "ops".into(),
                name: "t".into(),
            },
            watched_namespaces: watched.map(|w| w.iter().map(|s| (*s).to_owned()).collect()),
        }
    }

    #[test]
    fn only_uncovered_services_without_ready_endpoints_in_watched_namespaces() {
        let services = vec![
            svc("a", "lame", &[]),
            svc("a", "fine", &[]),
            svc("a", "critical", &[("tier", "critical")]),
            svc("b", "elsewhere", &[]),
        ];
        let mut slices = BTreeMap::new();
        slices.insert(
            ("a".to_owned(), "fine".to_owned()),
            SliceView {
                ready_pods: ["p".to_owned()].into(),
                ..SliceView::default()
            },
        );
        let cr = CriticalServiceView {
            name: "c".into(),
            uid: "u".into(),
            generation: Some(1),
            spec: CriticalServiceSpec {
                namespace: None,
                match_labels: vec![LabelMatch {
                    key: "tier".into(),
                    value: "critical".into(),
                }],
                pod_template: None,
                activation_delay_seconds: None,
                maintenance_message: None,
                warm_standby: None,
                drain_seconds: None,
            },
            status: None,
        };
        let lame = lame_uncovered(&services, &slices, &[cr], &settings(Some(&["a"])));
        assert_eq!(lame, BTreeSet::from([("a".to_owned(), "lame".to_owned())]));
        let all = lame_uncovered(&services, &slices, &[], &settings(None));
        assert_eq!(all.len(), 3, "{all:?}");
    }

    #[test]
    fn changes_report_transitions_only() {
        let before = BTreeSet::from([
            ("a".to_owned(), "x".to_owned()),
            ("a".to_owned(), "y".to_owned()),
        ]);
        let now = BTreeSet::from([
            ("a".to_owned(), "y".to_owned()),
            ("a".to_owned(), "z".to_owned()),
        ]);
        let (lame, answering) = changes(&before, &now);
        assert_eq!(lame, vec![("a".to_owned(), "z".to_owned())]);
        assert_eq!(answering, vec![("a".to_owned(), "x".to_owned())]);
    }
}
