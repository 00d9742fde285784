//! The decision's unit tests: worlds built by hand, plans checked.

use super::*;
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use k8s_openapi::jiff::Timestamp;
use vigil_apis::critical_service::StandbyState;

use super::look::is_vigils;
use crate::critical_service::model::{
    CRITICAL_SERVICE_LABEL, FALLBACK_ROLE_LABEL, MANAGED_BY_LABEL, MANAGED_BY_VALUE, OWNED_VALUE,
    PodRef, PodView, ROLE_ACTIVE, ROLE_RETIRING, ROLE_STANDBY, Relabel, SERVICE_LABEL, SliceWrite,
    TemplateKey, TemplateLookup,
};

use k8s_openapi::api::core::v1::{Container, Pod, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use vigil_apis::critical_service::LabelMatch;
use vigil_runtime::conditions;

use crate::critical_service::fallback::fallback_pod;
use crate::critical_service::model::{
    CriticalServiceView, OWNED_ANNOTATION, RETIRING_SINCE_ANNOTATION, SLICE_HASH_ANNOTATION,
    ServicePortView, SliceView, StandbySliceView, TEMPLATE_HASH_ANNOTATION,
};

const NS: &str = "shop";
const FALLBACK: &str = "service-watcher-web";

fn at(secs: i64) -> Timestamp {
    Timestamp::from_second(secs).expect("valid time")
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

/// Labels a merge patch sets.
fn set(pairs: &[(&str, &str)]) -> BTreeMap<String, Option<String>> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), Some((*v).to_owned())))
        .collect()
}

fn spec(pairs: &[(&str, &str)]) -> CriticalServiceSpec {
    CriticalServiceSpec {
        namespace: None,
        match_labels: pairs
            .iter()
            .map(|(k, v)| LabelMatch {
                key: (*k).into(),
                value: (*v).into(),
            })
            .collect(),
        pod_template: None,
        activation_delay_seconds: None,
        maintenance_message: None,
        warm_standby: None,
        // Today's immediate delete, which most tests pin; the default drain has its own tests.
        drain_seconds: Some(0),
    }
}

fn cr(name: &str) -> CriticalServiceView {
    CriticalServiceView {
        name: name.into(),
        uid: format!("{name}-uid"),
        generation: Some(3),
        spec: spec(&[("role", "frontend")]),
        status: None,
    }
}

fn service(namespace: &str, name: &str) -> ServiceView {
    ServiceView {
        namespace: namespace.into(),
        name: name.into(),
        uid: format!("{name}-svc-uid"),
        labels: labels(&[("role", "frontend"), ("team", "shop")]),
        selector: labels(&[("app", name)]),
        external_name: false,
        ports: vec![ServicePortView {
            name: Some("http".into()),
            port: 80,
            target_port: Some(IntOrString::String("http".into())),
            protocol: "TCP".into(),
        }],
    }
}

fn key() -> TemplateKey {
    TemplateKey {
        namespace: "vigil".into(),
        name: "maintenance".into(),
    }
}

fn template(containers: Vec<Container>) -> TemplateLookup {
    TemplateLookup::Found {
        key: key(),
        template: Box::new(PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers,
                ..PodSpec::default()
            }),
        }),
    }
}

fn page() -> Vec<Container> {
    vec![Container {
        name: "page".into(),
        image: Some("nginx".into()),
        ..Container::default()
    }]
}

fn settings() -> Settings {
    Settings {
        pod_name_prefix: "service-watcher".into(),
        default_template: key(),
        watched_namespaces: None,
    }
}

/// A real pod of Service `app`.
fn real_pod(name: &str, app: &str, ready: bool) -> PodView {
    PodView {
        namespace: NS.into(),
        name: name.into(),
        uid: format!("{name}-uid"),
        labels: labels(&[("app", app)]),
        owned_annotation: None,
        template_hash: None,
        owner_uids: vec![],
        ready,
        terminating: false,
        ip: Some("10.0.0.1".into()),
        node_name: None,
        retiring_since: None,
        starting_since: None,
        deleted_under_controller: None,
        controller_wants: None,
    }
}

/// The pod cache's view of a created pod.
fn view_of(pod: &Pod, ready: bool) -> PodView {
    let meta = &pod.metadata;
    let annotations = meta.annotations.clone().unwrap_or_default();
    PodView {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: format!("{}-uid", meta.name.clone().unwrap_or_default()),
        labels: meta.labels.clone().unwrap_or_default(),
        owned_annotation: annotations.get(OWNED_ANNOTATION).cloned(),
        template_hash: annotations.get(TEMPLATE_HASH_ANNOTATION).cloned(),
        owner_uids: meta
            .owner_references
            .iter()
            .flatten()
            .map(|o| o.uid.clone())
            .collect(),
        ready,
        terminating: false,
        ip: None,
        node_name: None,
        retiring_since: None,
        starting_since: None,
        deleted_under_controller: None,
        controller_wants: None,
    }
}

/// Everything a decision reads, owned, plus the writes a controller would make.
struct World {
    cr: CriticalServiceView,
    others: Vec<CriticalServiceView>,
    services: Vec<ServiceView>,
    pods: Vec<PodView>,
    slices: BTreeMap<(String, String), SliceView>,
    template: TemplateLookup,
    now: Timestamp,
    settings: Settings,
}

impl World {
    /// One CriticalService covering `shop/web`, which has no pods.
    fn new() -> Self {
        Self {
            cr: cr("frontend"),
            others: vec![],
            services: vec![service(NS, "web")],
            pods: vec![],
            slices: BTreeMap::new(),
            template: template(page()),
            now: at(1_000),
            settings: settings(),
        }
    }

    fn decide(&self) -> Plan {
        let mut all = self.others.clone();
        all.push(self.cr.clone());
        decide(&Inputs {
            cr: &self.cr,
            all_crs: &all,
            services: &self.services,
            pods: &self.pods,
            slices: &self.slices,
            template: &self.template,
            now: self.now,
            settings: &self.settings,
        })
    }

    /// Writes the plan as the controller would; created pods appear not ready yet.
    fn apply(&mut self, plan: &Plan) {
        self.cr.status = Some(plan.status.clone());
        for relabel in &plan.relabel {
            if let Some(pod) = self.pods.iter_mut().find(|p| p.uid == relabel.pod.uid) {
                for (key, value) in &relabel.labels {
                    match value {
                        Some(value) => pod.labels.insert(key.clone(), value.clone()),
                        None => pod.labels.remove(key),
                    };
                }
                if let Some(since) = relabel.annotations.get(RETIRING_SINCE_ANNOTATION) {
                    pod.retiring_since = since.as_ref().and_then(|t| t.parse().ok());
                }
            }
        }
        for write in &plan.slices {
            match write {
                SliceWrite::Apply(slice) => {
                    let labels = slice.metadata.labels.clone().unwrap_or_default();
                    let annotations = slice.metadata.annotations.clone().unwrap_or_default();
                    self.slices
                        .entry((NS.into(), labels[SERVICE_LABEL].clone()))
                        .or_default()
                        .standby_slices
                        .insert(
                            slice.metadata.name.clone().unwrap_or_default(),
                            StandbySliceView {
                                critical_service: labels[CRITICAL_SERVICE_LABEL].clone(),
                                hash: annotations[SLICE_HASH_ANNOTATION].clone(),
                            },
                        );
                }
                SliceWrite::Delete { name, .. } => {
                    for view in self.slices.values_mut() {
                        view.standby_slices.remove(name);
                    }
                }
            }
        }
        for gone in &plan.delete {
            if let Some(pod) = self.pods.iter_mut().find(|p| p.uid == gone.uid) {
                pod.terminating = true;
            }
        }
        self.pods
            .extend(plan.create.iter().map(|p| view_of(p, false)));
    }

    /// Decides and applies.
    fn pass(&mut self) -> Plan {
        let plan = self.decide();
        self.apply(&plan);
        plan
    }

    /// Real endpoints of `web` ready in pods and slices.
    fn healthy(&mut self) {
        self.pods.push(real_pod("web-1", "web", true));
        self.slice_lists("web-1");
    }

    fn slice_lists(&mut self, pod: &str) {
        self.slices
            .entry((NS.into(), "web".into()))
            .or_default()
            .ready_pods
            .insert(pod.into());
    }

    /// Vigil's up-to-date fallback for `web`, as if created earlier: Ready and selected.
    fn with_fallback(&mut self) {
        let plan = World {
            pods: vec![],
            slices: BTreeMap::new(),
            ..self.clone_inputs()
        }
        .decide();
        let service = self.services[0].clone();
        self.pods.extend(plan.create.iter().map(|p| {
            let mut view = view_of(p, true);
            view.labels.remove(FALLBACK_ROLE_LABEL);
            view.labels.extend(service.selector.clone());
            view
        }));
    }

    fn clone_inputs(&self) -> World {
        World {
            cr: self.cr.clone(),
            others: self.others.clone(),
            services: self.services.clone(),
            pods: self.pods.clone(),
            slices: self.slices.clone(),
            template: self.template.clone(),
            now: self.now,
            settings: self.settings.clone(),
        }
    }

    fn fallback_uid(&self) -> String {
        self.pods
            .iter()
            .find(|p| p.name == FALLBACK)
            .map(|p| p.uid.clone())
            .unwrap_or_default()
    }
}

fn entry<'a>(plan: &'a Plan, name: &str) -> &'a CoveredService {
    plan.status
        .services
        .iter()
        .find(|s| s.name == name)
        .expect("service in status")
}

fn condition<'a>(plan: &'a Plan, type_: &str) -> &'a Condition {
    conditions::find(&plan.status.conditions, type_).expect("condition set")
}

fn reasons(plan: &Plan) -> Vec<(bool, &str)> {
    plan.events
        .iter()
        .map(|e| (e.warning, e.reason.as_str()))
        .collect()
}

fn assert_no_writes(plan: &Plan) {
    assert!(plan.slices.is_empty(), "slices: {:?}", plan.slices);
    assert!(plan.relabel.is_empty(), "promote: {:?}", plan.relabel);
    assert!(plan.create.is_empty(), "create: {:?}", plan.create);
    assert!(plan.delete.is_empty(), "delete: {:?}", plan.delete);
    assert!(plan.events.is_empty(), "events: {:?}", plan.events);
}

// ---- coverage ----

#[test]
fn covers_follows_the_namespace_rules() {
    let web = service(NS, "web");
    let mut in_shop = spec(&[("role", "frontend")]);
    in_shop.namespace = Some(NS.into());
    assert!(covers(&in_shop, &web, &settings()));
    in_shop.namespace = Some("other".into());
    assert!(!covers(&in_shop, &web, &settings()));

    let anywhere = spec(&[("role", "frontend")]);
    assert!(covers(&anywhere, &web, &settings()), "None watches all");
    let mut watched = settings();
    watched.watched_namespaces = Some(BTreeSet::from(["other".to_owned()]));
    assert!(!covers(&anywhere, &web, &watched));
    watched.watched_namespaces = Some(BTreeSet::from([NS.to_owned()]));
    assert!(covers(&anywhere, &web, &watched));
}

#[test]
fn covers_needs_every_match_label() {
    let web = service(NS, "web");
    let s = &settings();
    assert!(covers(&spec(&[("role", "frontend")]), &web, s), "subset");
    assert!(covers(
        &spec(&[("role", "frontend"), ("team", "shop")]),
        &web,
        s
    ));
    assert!(!covers(
        &spec(&[("role", "frontend"), ("tier", "x")]),
        &web,
        s
    ));
    assert!(!covers(&spec(&[("role", "backend")]), &web, s));
    assert!(!covers(&spec(&[]), &web, s), "empty list covers nothing");
}

#[test]
fn covers_skips_selectorless_and_external_name_services() {
    let s = &settings();
    let wanted = spec(&[("role", "frontend")]);
    let mut no_selector = service(NS, "web");
    no_selector.selector.clear();
    assert!(!covers(&wanted, &no_selector, s));
    let mut external = service(NS, "web");
    external.external_name = true;
    assert!(!covers(&wanted, &external, s));
}

// ---- lame, healthy, recovering ----

/// Regression: `since` is rounded up to the second, and was taken for a wait of up to a
/// second even with no activation delay (the fallback came ~1 s late).
#[test]
fn without_activation_delay_a_fallback_comes_at_once_mid_second() {
    let mut world = World::new();
    world.now = at(1_000)
        .checked_add(k8s_openapi::jiff::SignedDuration::from_millis(17))
        .expect("valid time");
    let plan = world.decide();
    assert_eq!(plan.create.len(), 1, "{plan:?}");
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn a_lame_service_gets_its_fallback() {
    let plan = World::new().decide();
    assert_eq!(plan.create.len(), 1);
    let pod = &plan.create[0];
    assert_eq!(pod.metadata.name.as_deref(), Some(FALLBACK));
    assert_eq!(pod.metadata.namespace.as_deref(), Some(NS));
    let pod_labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(
        pod_labels.get("app"),
        None,
        "not selected before it is Ready"
    );
    assert_eq!(
        pod_labels.get(FALLBACK_ROLE_LABEL).map(String::as_str),
        Some(ROLE_STARTING)
    );
    assert_eq!(
        pod_labels.get(CRITICAL_SERVICE_LABEL).map(String::as_str),
        Some("frontend")
    );
    let owner = pod.metadata.owner_references.clone().unwrap_or_default();
    assert_eq!(owner.len(), 1);
    assert_eq!(owner[0].uid, "frontend-uid");
    assert!(plan.delete.is_empty());
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_CREATED)]);
    assert!(plan.events[0].note.contains("shop/service-watcher-web"));
    assert!(plan.events[0].note.contains("shop/web"));

    let web = entry(&plan, "web");
    assert_eq!(web.state, ServiceState::FallbackActive);
    assert_eq!(web.fallback_pod.as_deref(), Some(FALLBACK));
    assert_eq!(web.since, Some(Time(at(1_000))));
    let status = &plan.status;
    assert_eq!(status.observed_generation, Some(3));
    assert_eq!(
        (status.covered, status.lame, status.fallback_active),
        (1, 0, 1)
    );
    assert_eq!(condition(&plan, READY).status, "True");
    assert_eq!(condition(&plan, READY).reason, REASON_ALL_ANSWERING);
    assert_eq!(condition(&plan, DEGRADED).status, "False");
    assert_eq!(condition(&plan, DEGRADED).reason, REASON_AS_EXPECTED);
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn a_long_service_name_gets_a_valid_truncated_pod_name() {
    let mut world = World::new();
    world.services = vec![service(NS, &"w".repeat(63))];
    let plan = world.decide();
    let name = plan.create[0].metadata.name.clone().unwrap_or_default();
    assert!(name.len() <= 63 && !name.ends_with('-'), "{name}");
    assert_eq!(plan.status.services[0].fallback_pod, Some(name));
}

#[test]
fn healthy_in_pods_and_slices_retires_the_fallback_by_uid() {
    let mut world = World::new();
    world.with_fallback();
    world.healthy();
    let plan = world.decide();
    assert!(plan.create.is_empty());
    assert_eq!(
        plan.delete,
        vec![PodRef {
            namespace: NS.into(),
            name: FALLBACK.into(),
            uid: world.fallback_uid(),
        }]
    );
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_DELETED)]);
    let web = entry(&plan, "web");
    assert_eq!(web.state, ServiceState::Healthy);
    assert_eq!(web.fallback_pod, None);

    world.apply(&plan);
    let terminating = world.decide();
    assert_no_writes(&terminating);
    assert_eq!(terminating.status, plan.status, "no second delete");
}

#[test]
fn ready_pods_not_yet_in_slices_keep_but_never_create_a_fallback() {
    let mut world = World::new();
    world.pods.push(real_pod("web-1", "web", true));
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").state, ServiceState::Healthy);

    world.with_fallback();
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
    assert_eq!(entry(&plan, "web").fallback_pod.as_deref(), Some(FALLBACK));

    // The slice listing only the fallback is not a real endpoint.
    world.slice_lists(FALLBACK);
    assert_no_writes(&world.decide());
}

#[test]
fn a_pod_losing_readiness_makes_the_service_lame_at_once() {
    for terminating in [false, true] {
        let mut world = World::new();
        let mut pod = real_pod("web-1", "web", terminating);
        pod.terminating = terminating;
        world.pods.push(pod);
        world.slice_lists("web-1"); // slices lag behind
        let plan = world.decide();
        assert_eq!(plan.create.len(), 1, "terminating={terminating}");
        assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
    }
}

#[test]
fn a_fallback_is_selected_once_ready_in_one_patch() {
    let mut world = World::new();
    world.pass();
    let starting = world.pass();
    assert_no_writes(&starting);
    assert_eq!(entry(&starting, "web").state, ServiceState::FallbackActive);

    world.pods[0].ready = true;
    let ready = world.pass();
    assert_eq!(
        ready.relabel,
        vec![Relabel {
            pod: PodRef {
                namespace: NS.into(),
                name: FALLBACK.into(),
                uid: world.fallback_uid(),
            },
            labels: BTreeMap::from([
                ("app".to_owned(), Some("web".to_owned())),
                (FALLBACK_ROLE_LABEL.to_owned(), None),
            ]),
            annotations: BTreeMap::new(),
        }]
    );
    assert_eq!(reasons(&ready), vec![(false, REASON_FALLBACK_SELECTED)]);
    assert!(ready.create.is_empty() && ready.delete.is_empty());
    assert_eq!(
        ready.status, starting.status,
        "still FallbackActive, same since"
    );

    world.slice_lists(FALLBACK);
    assert_no_writes(&world.decide());
}

#[test]
fn a_starting_fallback_is_deleted_at_once_when_the_service_recovers() {
    let mut world = World::new();
    world.pass();
    world.healthy();
    let plan = world.decide();
    assert!(plan.relabel.is_empty(), "never selected: nothing to drain");
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(plan.delete[0].uid, world.fallback_uid());
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_DELETED)]);
}

#[test]
fn an_out_of_date_starting_fallback_is_rebuilt_not_selected() {
    let mut world = World::new();
    world.pass();
    world.pods[0].ready = true;
    world.pods[0].template_hash = Some("old".into());
    let plan = world.decide();
    assert!(plan.relabel.is_empty(), "{:?}", plan.relabel);
    assert_eq!(plan.delete.len(), 1);
}

#[test]
fn other_services_fallbacks_are_not_real_endpoints() {
    let mut world = World::new();
    // `web-admin` selects app=web too; its fallback carries app=web.
    let mut admin = service(NS, "web-admin");
    admin.selector = labels(&[("app", "web")]);
    world.services = vec![admin, service(NS, "web")];
    let first = world.pass();
    assert_eq!(first.create.len(), 2);
    for pod in &mut world.pods {
        pod.ready = true;
    }
    assert_eq!(world.pass().relabel.len(), 2, "both selected once Ready");
    world.slice_lists("service-watcher-web-admin");
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
}

// ---- activation delay ----

#[test]
fn the_activation_delay_holds_the_fallback_back_then_lets_it_go() {
    let mut world = World::new();
    world.cr.spec.activation_delay_seconds = Some(60);
    let first = world.pass();
    assert!(first.create.is_empty());
    assert_eq!(first.requeue_after, Some(Duration::from_secs(60)));
    assert_eq!(entry(&first, "web").state, ServiceState::Lame);
    assert_eq!(entry(&first, "web").since, Some(Time(at(1_000))));
    assert_eq!(condition(&first, READY).status, "False");
    assert_eq!(condition(&first, READY).reason, REASON_SERVICES_LAME);
    assert!(condition(&first, READY).message.contains("shop/web"));
    assert_eq!(first.status.lame, 1);

    world.now = at(1_030);
    let waiting = world.pass();
    assert!(waiting.create.is_empty());
    assert_eq!(waiting.requeue_after, Some(Duration::from_secs(30)));
    assert_eq!(entry(&waiting, "web").since, Some(Time(at(1_000))), "kept");
    assert_eq!(
        waiting.status, first.status,
        "nothing to write while waiting"
    );

    world.now = at(1_060);
    let due = world.pass();
    assert_eq!(due.create.len(), 1);
    assert_eq!(due.requeue_after, None);
    assert_eq!(entry(&due, "web").state, ServiceState::FallbackActive);
    assert_eq!(entry(&due, "web").since, Some(Time(at(1_060))));
}

#[test]
fn an_activation_delay_is_never_cut_short_by_the_stored_second() {
    // Between passes the status goes through the API, which keeps times to the second.
    fn through_the_api(world: &mut World) {
        let json = serde_json::to_string(&world.cr.status).expect("serialize status");
        world.cr.status = serde_json::from_str(&json).expect("deserialize status");
    }
    let ms = |ms: i64| Timestamp::from_millisecond(ms).expect("valid time");
    let mut world = World::new();
    world.cr.spec.activation_delay_seconds = Some(2);
    world.now = ms(1_000_200);
    let first = world.pass();
    through_the_api(&mut world);
    assert!(first.create.is_empty());
    assert_eq!(
        entry(&first, "web").since,
        Some(Time(at(1_001))),
        "rounded up"
    );
    assert_eq!(first.requeue_after, Some(Duration::from_millis(2_800)));
    let stored = world.cr.status.clone();

    // 1.8 s into the outage: the stored `since` must not make it look like 2 s.
    world.now = ms(1_002_000);
    let early = world.pass();
    through_the_api(&mut world);
    assert!(early.create.is_empty(), "created 1.8 s into a 2 s delay");
    assert_eq!(early.requeue_after, Some(Duration::from_secs(1)));
    assert_eq!(Some(early.status), stored, "nothing to write while waiting");

    world.now = ms(1_003_000);
    let due = world.pass();
    assert_eq!(due.create.len(), 1);
    assert_eq!(entry(&due, "web").since, Some(Time(at(1_003))));
}

#[test]
fn the_shortest_remaining_delay_wins() {
    let mut world = World::new();
    world.cr.spec.activation_delay_seconds = Some(60);
    world.services.push(service(NS, "api"));
    let first = world.pass();
    // `api` becomes lame 20s later than `web`.
    world.cr.status = Some(CriticalServiceStatus {
        services: first
            .status
            .services
            .iter()
            .filter(|s| s.name == "web")
            .cloned()
            .collect(),
        ..first.status.clone()
    });
    world.now = at(1_020);
    let plan = world.decide();
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(40)));
}

#[test]
fn a_fallback_gone_during_an_outage_returns_without_a_new_delay() {
    let mut world = World::new();
    world.cr.spec.activation_delay_seconds = Some(60);
    world.pass();
    world.now = at(1_060);
    world.pass();
    world.pods.clear(); // someone deleted the fallback
    world.now = at(2_000);
    let plan = world.decide();
    assert_eq!(plan.create.len(), 1);
    assert_eq!(
        entry(&plan, "web").since,
        Some(Time(at(1_060))),
        "same state"
    );
}

// ---- overlapping CriticalServices ----

#[test]
fn only_the_smallest_name_acts_for_a_shared_service() {
    let mut world = World::new();
    world.others = vec![cr("a-first"), cr("zz-last")];
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").state, ServiceState::Lame);

    // a-first created it.
    world.pods.push(view_of(
        &fallback_pod(
            &cr("a-first"),
            &service(NS, "web"),
            &PodTemplateSpec {
                metadata: None,
                spec: Some(PodSpec {
                    containers: page(),
                    ..PodSpec::default()
                }),
            },
            &key(),
            &settings(),
        ),
        true,
    ));
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);

    world.healthy();
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(
        entry(&plan, "web").state,
        ServiceState::FallbackActive,
        "the owner retires it"
    );

    // The owner sees it the other way round.
    let mut owner = world.clone_inputs();
    owner.cr = cr("a-first");
    owner.others = vec![cr("frontend")];
    assert_eq!(owner.decide().delete.len(), 1);
}

#[test]
fn a_crs_that_stops_covering_leaves_ownership_to_the_next() {
    let mut world = World::new();
    let mut other = cr("a-first");
    other.spec = spec(&[("role", "backend")]);
    world.others = vec![other];
    assert_eq!(world.decide().create.len(), 1);
}

// ---- foreign pods and template problems ----

#[test]
fn a_foreign_pod_with_the_fallback_name_is_never_touched() {
    let mut world = World::new();
    let mut foreign = real_pod(FALLBACK, "other", false);
    // Vigil's label alone is not enough: the annotation is missing.
    foreign.labels = labels(&[
        (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
        (CRITICAL_SERVICE_LABEL, "frontend"),
        (SERVICE_LABEL, "web"),
    ]);
    world.pods.push(foreign);
    let plan = world.pass();
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(reasons(&plan), vec![(true, "ForeignPodInTheWay")]);
    assert!(plan.events[0].note.contains("shop/service-watcher-web"));
    let degraded = condition(&plan, DEGRADED);
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "ForeignPodInTheWay")
    );
    assert_eq!(entry(&plan, "web").state, ServiceState::Lame);
    assert_eq!(entry(&plan, "web").fallback_pod, None);

    world.now = at(2_000);
    let again = world.decide();
    assert_no_writes(&again);
    assert_eq!(again.status, plan.status, "already reported");
}

#[test]
fn template_problems_degrade_and_block_creation() {
    let cases = [
        (TemplateLookup::NotFound(key()), "PodTemplateNotFound"),
        (TemplateLookup::Forbidden(key()), "PodTemplateForbidden"),
        (template(vec![]), "PodTemplateInvalid"),
        (
            TemplateLookup::Found {
                key: key(),
                template: Box::default(),
            },
            "PodTemplateInvalid",
        ),
    ];
    for (lookup, reason) in cases {
        let mut world = World::new();
        world.template = lookup;
        world.services.push(service(NS, "api"));
        let plan = world.decide();
        assert!(plan.create.is_empty(), "{reason}");
        assert_eq!(
            reasons(&plan),
            vec![(true, reason)],
            "once, not per Service"
        );
        assert!(
            plan.events[0].note.contains("vigil/maintenance"),
            "{reason}"
        );
        let degraded = condition(&plan, DEGRADED);
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", reason)
        );
        assert!(degraded.message.contains("vigil/maintenance"));
        assert_eq!(plan.status.lame, 2);
    }
}

#[test]
fn template_problems_do_not_matter_when_no_fallback_is_needed() {
    let mut world = World::new();
    world.template = TemplateLookup::NotFound(key());
    world.healthy();
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(condition(&plan, DEGRADED).status, "False");
}

#[test]
fn a_running_fallback_is_kept_when_its_template_goes_missing() {
    let mut world = World::new();
    world.with_fallback();
    world.template = TemplateLookup::NotFound(key());
    let plan = world.decide();
    assert!(plan.create.is_empty() && plan.delete.is_empty());
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
    assert_eq!(condition(&plan, READY).status, "True");
    assert_eq!(condition(&plan, DEGRADED).reason, "PodTemplateNotFound");
}

#[test]
fn the_worst_problem_names_degraded_and_all_are_listed() {
    let mut world = World::new();
    world.template = TemplateLookup::NotFound(key());
    world.services.push(service(NS, "api"));
    world
        .pods
        .push(real_pod("service-watcher-api", "other", false));
    let plan = world.decide();
    let degraded = condition(&plan, DEGRADED);
    assert_eq!(degraded.reason, "PodTemplateNotFound");
    assert!(degraded.message.contains("ForeignPodInTheWay"));
    assert_eq!(plan.events.len(), 2);
}

// ---- cleanup and rebuilds ----

/// Something that happens to the world between passes.
type Change = fn(&mut World);

#[test]
fn our_pods_for_services_no_longer_covered_are_deleted_by_uid() {
    let changes: [(&str, Change); 4] = [
        ("service deleted", |w| w.services.clear()),
        ("stopped matching", |w| {
            w.services[0].labels.remove("role");
        }),
        ("selector removed", |w| w.services[0].selector.clear()),
        ("CR changed", |w| {
            w.cr.spec.namespace = Some("elsewhere".into())
        }),
    ];
    for (what, change) in changes {
        let mut world = World::new();
        world.with_fallback();
        change(&mut world);
        let plan = world.decide();
        assert!(plan.create.is_empty(), "{what}");
        assert_eq!(plan.delete.len(), 1, "{what}");
        assert_eq!(plan.delete[0].uid, world.fallback_uid(), "{what}");
        assert_eq!(
            reasons(&plan),
            vec![(false, REASON_FALLBACK_DELETED)],
            "{what}"
        );
    }
}

#[test]
fn pods_of_others_are_not_cleaned_up() {
    let mut world = World::new();
    world.services.clear();
    let mut unmarked = real_pod("service-watcher-gone", "gone", true);
    unmarked.labels = labels(&[
        (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
        (CRITICAL_SERVICE_LABEL, "frontend"),
    ]);
    let mut other_cr = real_pod("service-watcher-x", "x", true);
    other_cr.labels = labels(&[
        (MANAGED_BY_LABEL, MANAGED_BY_VALUE),
        (CRITICAL_SERVICE_LABEL, "backend"),
    ]);
    other_cr.owned_annotation = Some(OWNED_VALUE.into());
    world.pods = vec![unmarked, other_cr];
    assert_no_writes(&world.decide());
}

#[test]
fn a_changed_template_deletes_now_and_recreates_next_pass() {
    let mut world = World::new();
    world.with_fallback();
    world.pass();
    world.cr.spec.activation_delay_seconds = Some(60);
    world.cr.spec.maintenance_message = Some("back at 5".into());
    world.now = at(5_000);
    let plan = world.pass();
    assert!(
        plan.create.is_empty(),
        "no create while the old pod holds the name"
    );
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);

    let terminating = world.pass();
    assert_no_writes(&terminating);

    let old_hash = world.pods[0].template_hash.clone();
    world.pods.retain(|p| !p.terminating);
    let recreated = world.pass();
    assert_eq!(recreated.create.len(), 1, "no new activation delay");
    assert_eq!(entry(&recreated, "web").state, ServiceState::FallbackActive);
    assert_ne!(world.pods[0].template_hash, old_hash, "rebuilt");
    assert_no_writes(&world.decide());
}

// ---- steady state and status ----

#[test]
fn steady_states_write_nothing() {
    // Lame with its fallback.
    let mut world = World::new();
    let created = world.pass();
    world.now = at(9_000);
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(plan.status, created.status);

    // Healthy.
    let mut world = World::new();
    world.healthy();
    let first = world.pass();
    world.now = at(9_000);
    let plan = world.decide();
    assert_no_writes(&plan);
    assert_eq!(plan.status, first.status);
    assert_eq!(plan.requeue_after, None);
}

#[test]
fn condition_transition_times_move_only_on_transitions() {
    let mut world = World::new();
    world.healthy();
    world.pass();
    world.now = at(2_000);
    let same = world.pass();
    assert_eq!(
        condition(&same, READY).last_transition_time,
        Time(at(1_000))
    );
    assert_eq!(
        condition(&same, DEGRADED).last_transition_time,
        Time(at(1_000))
    );

    world.template = TemplateLookup::NotFound(key());
    world.pods.clear();
    world.now = at(3_000);
    let lame = world.pass();
    assert_eq!(
        condition(&lame, READY).last_transition_time,
        Time(at(3_000))
    );
    assert_eq!(
        condition(&lame, DEGRADED).last_transition_time,
        Time(at(3_000))
    );
}

#[test]
fn services_are_sorted_and_counted() {
    let mut world = World::new();
    world.services = vec![
        service("b", "web"),
        service(NS, "api"),
        service("a", "z"),
        service(NS, "api"),
    ];
    let plan = world.decide();
    let keys: Vec<(&str, &str)> = plan
        .status
        .services
        .iter()
        .map(|s| (s.namespace.as_str(), s.name.as_str()))
        .collect();
    assert_eq!(keys, vec![("a", "z"), ("b", "web"), (NS, "api")]);
    assert_eq!(plan.status.covered, 3);
}

#[test]
fn long_lists_are_capped_in_messages() {
    let mut world = World::new();
    world.cr.spec.activation_delay_seconds = Some(60);
    world.services = (0..25).map(|i| service(NS, &format!("s{i:02}"))).collect();
    let plan = world.decide();
    assert!(condition(&plan, READY).message.ends_with("and 15 more"));
}

#[test]
fn odd_inputs_do_not_panic() {
    let mut world = World::new();
    world.services = vec![];
    world.cr.status = Some(CriticalServiceStatus {
        services: vec![CoveredService {
            namespace: NS.into(),
            name: "web".into(),
            state: ServiceState::Lame,
            since: Some(Time(at(999_999))),
            fallback_pod: None,
            standby_pod: None,
            standby: None,
        }],
        ..CriticalServiceStatus::default()
    });
    let plan = world.decide();
    assert_eq!(plan.status.covered, 0);
    assert_eq!(condition(&plan, READY).status, "True");

    // A `since` in the future waits the delay, no longer.
    world.services = vec![service(NS, "web")];
    world.cr.spec.activation_delay_seconds = Some(86_400);
    assert_eq!(
        world.decide().requeue_after,
        Some(Duration::from_secs(86_400))
    );
    world.settings.pod_name_prefix = String::new();
    world.cr.spec.activation_delay_seconds = None;
    let _ = world.decide();
}

// ---- warm standby ----

const STANDBY_A: &str = "service-watcher-web-standby-a";
const STANDBY_B: &str = "service-watcher-web-standby-b";

fn with_standby() -> World {
    let mut world = World::new();
    world.cr.spec.warm_standby = Some(true);
    world
}

fn set_ready(world: &mut World, name: &str, ready: bool) {
    let pod = world
        .pods
        .iter_mut()
        .find(|p| p.name == name)
        .expect("pod exists");
    pod.ready = ready;
}

/// A healthy `web` with a Ready standby under its first name.
fn healthy_with_ready_standby() -> World {
    let mut world = with_standby();
    world.healthy();
    world.pass();
    set_ready(&mut world, STANDBY_A, true);
    world.pass();
    world
}

#[test]
fn a_warm_standby_starts_unselected_beside_a_healthy_service() {
    let mut world = with_standby();
    world.healthy();
    let plan = world.pass();
    assert_eq!(plan.create.len(), 1, "{:?}", plan.create);
    let pod = &plan.create[0];
    assert_eq!(pod.metadata.name.as_deref(), Some(STANDBY_A));
    let labels = pod.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("app"), None, "the Service must not select it");
    assert_eq!(
        labels.get(FALLBACK_ROLE_LABEL).map(String::as_str),
        Some(ROLE_STANDBY)
    );
    assert!(is_vigils(&view_of(pod, false)));
    assert_eq!(reasons(&plan), vec![(false, REASON_STANDBY_CREATED)]);
    let web = entry(&plan, "web");
    assert_eq!(web.state, ServiceState::Healthy);
    assert_eq!(
        (web.standby_pod.as_deref(), web.standby),
        (Some(STANDBY_A), Some(StandbyState::Starting))
    );
    assert_eq!(plan.status.standby_ready, Some(0));
    assert_eq!(
        condition(&plan, STANDBY_READY).reason,
        REASON_STANDBYS_STARTING
    );

    set_ready(&mut world, STANDBY_A, true);
    let plan = world.pass();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").standby, Some(StandbyState::Ready));
    assert_eq!(plan.status.standby_ready, Some(1));
    assert_eq!(condition(&plan, STANDBY_READY).status, "True");
    // At rest: nothing to write, the same status.
    let again = world.pass();
    assert_no_writes(&again);
    assert_eq!(again.status, plan.status);
}

#[test]
fn a_lame_service_promotes_its_standby_in_one_write_and_gets_a_new_one() {
    let mut world = healthy_with_ready_standby();
    set_ready(&mut world, "web-1", false);
    let plan = world.pass();
    assert_eq!(plan.relabel.len(), 1, "{:?}", plan.relabel);
    let promotion = &plan.relabel[0];
    assert_eq!(
        (promotion.pod.name.as_str(), promotion.pod.uid.as_str()),
        (STANDBY_A, "service-watcher-web-standby-a-uid")
    );
    assert_eq!(
        promotion.labels,
        set(&[("app", "web"), (FALLBACK_ROLE_LABEL, ROLE_ACTIVE)])
    );
    // No fallback created from scratch: a new standby under the other name instead.
    let created: Vec<_> = plan
        .create
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    assert_eq!(created, vec![STANDBY_B.to_owned()]);
    assert_eq!(
        reasons(&plan),
        vec![
            (false, REASON_STANDBY_PROMOTED),
            (false, REASON_STANDBY_CREATED)
        ]
    );
    let web = entry(&plan, "web");
    assert_eq!(
        (
            web.state,
            web.fallback_pod.as_deref(),
            web.standby_pod.as_deref()
        ),
        (
            ServiceState::FallbackActive,
            Some(STANDBY_A),
            Some(STANDBY_B)
        )
    );
    // The promoted standby answers; the next pass writes nothing new.
    set_ready(&mut world, STANDBY_B, true);
    let plan = world.pass();
    assert_no_writes(&plan);
    assert_eq!(entry(&plan, "web").fallback_pod.as_deref(), Some(STANDBY_A));

    // Recovery retires the promoted one by uid and keeps the new standby.
    set_ready(&mut world, "web-1", true);
    let plan = world.pass();
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.uid.as_str())
            .collect::<Vec<_>>(),
        vec!["service-watcher-web-standby-a-uid"]
    );
    let web = entry(&plan, "web");
    assert_eq!(
        (web.state, web.standby_pod.as_deref(), web.standby),
        (
            ServiceState::Healthy,
            Some(STANDBY_B),
            Some(StandbyState::Ready)
        )
    );

    // The next outage promotes the other; its name is taken until the old one is gone.
    set_ready(&mut world, "web-1", false);
    let plan = world.pass();
    assert_eq!(plan.relabel[0].pod.name, STANDBY_B);
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(entry(&plan, "web").standby, Some(StandbyState::Missing));
    assert_eq!(
        condition(&plan, STANDBY_READY).reason,
        REASON_STANDBYS_MISSING
    );
    world.pods.retain(|p| p.name != STANDBY_A);
    let plan = world.pass();
    assert_eq!(plan.create[0].metadata.name.as_deref(), Some(STANDBY_A));
}

#[test]
fn the_last_endpoint_terminating_promotes_the_standby_at_once() {
    let mut world = healthy_with_ready_standby();
    // Deleted, still Ready and still listed as ready in the slices: its server may stop any
    // moment, so the standby goes in now.
    world
        .pods
        .iter_mut()
        .find(|p| p.name == "web-1")
        .expect("pod")
        .terminating = true;
    let plan = world.pass();
    assert_eq!(plan.relabel.len(), 1, "{:?}", plan.relabel);
    assert_eq!(entry(&plan, "web").state, ServiceState::FallbackActive);
}

#[test]
fn a_lame_service_without_a_standby_gets_the_fallback_and_a_standby() {
    let mut world = with_standby();
    let plan = world.pass();
    let mut created: Vec<_> = plan
        .create
        .iter()
        .map(|p| p.metadata.name.clone().unwrap_or_default())
        .collect();
    created.sort();
    assert_eq!(created, vec![FALLBACK.to_owned(), STANDBY_A.to_owned()]);
    assert!(plan.relabel.is_empty());
    let web = entry(&plan, "web");
    assert_eq!(web.fallback_pod.as_deref(), Some(FALLBACK));
}

#[test]
fn the_activation_delay_holds_back_the_promotion_too() {
    let mut world = healthy_with_ready_standby();
    world.cr.spec.activation_delay_seconds = Some(5);
    set_ready(&mut world, "web-1", false);
    let plan = world.pass();
    assert!(plan.relabel.is_empty());
    assert!(plan.requeue_after.is_some());
    world.now = at(1_010);
    let plan = world.pass();
    assert_eq!(plan.relabel.len(), 1);
}

#[test]
fn an_out_of_date_standby_is_replaced() {
    let mut world = healthy_with_ready_standby();
    world.cr.spec.maintenance_message = Some("back soon".into());
    let plan = world.pass();
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        vec![STANDBY_A]
    );
    // Its name is held until it is gone; the other one is free.
    assert_eq!(plan.create[0].metadata.name.as_deref(), Some(STANDBY_B));
}

#[test]
fn switching_standbys_off_deletes_the_waiting_one_only() {
    let mut world = healthy_with_ready_standby();
    set_ready(&mut world, "web-1", false);
    world.pass();
    set_ready(&mut world, STANDBY_B, true);
    world.cr.spec.warm_standby = None;
    let plan = world.pass();
    // The promoted one keeps answering; the waiting one goes; the condition too.
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        vec![STANDBY_B]
    );
    let web = entry(&plan, "web");
    assert_eq!(
        (web.fallback_pod.as_deref(), web.standby_pod.as_deref()),
        (Some(STANDBY_A), None)
    );
    assert!(conditions::find(&plan.status.conditions, STANDBY_READY).is_none());
    assert_eq!(plan.status.standby_ready, None);
    assert!(plan.create.is_empty());
}

#[test]
fn only_the_owner_keeps_a_standby() {
    let mut world = with_standby();
    world.healthy();
    let mut other = cr("aaa-first");
    other.spec.warm_standby = Some(true);
    world.others = vec![other];
    let plan = world.pass();
    assert!(plan.create.is_empty(), "{:?}", plan.create);
    assert_eq!(entry(&plan, "web").standby, None);
}

// ---- Vigil's EndpointSlices of warm standbys ----

/// An endpoint's conditions: ready, serving, terminating.
type Conditions = (Option<bool>, Option<bool>, Option<bool>);

/// The slice a write applies and the conditions it lists its one endpoint with.
fn listed(write: &SliceWrite) -> (String, Conditions) {
    let SliceWrite::Apply(slice) = write else {
        panic!("not an apply: {write:?}");
    };
    let c = slice.endpoints[0].conditions.clone().unwrap_or_default();
    (
        slice.metadata.name.clone().unwrap_or_default(),
        (c.ready, c.serving, c.terminating),
    )
}

fn set_ip(world: &mut World, name: &str, ip: &str) {
    let pod = world
        .pods
        .iter_mut()
        .find(|p| p.name == name)
        .expect("pod exists");
    pod.ip = Some(ip.into());
}

const LISTED_ARMED: Conditions = (Some(false), Some(true), Some(true));
const LISTED_READY: Conditions = (Some(true), Some(true), Some(false));

/// A healthy `web` whose Ready standby has an IP and is listed, armed, in Vigil's slice.
fn armed_standby() -> World {
    let mut world = with_standby();
    world.healthy();
    world.pass();
    set_ready(&mut world, STANDBY_A, true);
    set_ip(&mut world, STANDBY_A, "10.0.0.9");
    let plan = world.pass();
    assert_eq!(
        plan.slices.iter().map(listed).collect::<Vec<_>>(),
        vec![(STANDBY_A.to_owned(), LISTED_ARMED)]
    );
    world
}

#[test]
fn a_ready_standby_is_listed_serving_and_terminating_and_nothing_is_rewritten_at_rest() {
    let mut world = armed_standby();
    assert_no_writes(&world.pass());
    // A standby that is not Ready yet is never listed.
    let mut starting = with_standby();
    starting.healthy();
    starting.pass();
    set_ip(&mut starting, STANDBY_A, "10.0.0.9");
    assert!(starting.pass().slices.is_empty());
}

#[test]
fn promotion_lists_the_standby_as_ready_first_and_the_next_standby_armed_once_ready() {
    let mut world = armed_standby();
    set_ready(&mut world, "web-1", false);
    let plan = world.pass();
    assert_eq!(
        plan.slices.iter().map(listed).collect::<Vec<_>>(),
        vec![(STANDBY_A.to_owned(), LISTED_READY)]
    );
    assert_eq!(plan.relabel.len(), 1);
    assert_no_writes(&world.pass());
    // The next standby, once Ready, is armed beside the promoted one.
    set_ready(&mut world, STANDBY_B, true);
    set_ip(&mut world, STANDBY_B, "10.0.0.10");
    let plan = world.pass();
    assert_eq!(
        plan.slices.iter().map(listed).collect::<Vec<_>>(),
        vec![(STANDBY_B.to_owned(), LISTED_ARMED)]
    );
    // Recovery without draining: the promoted one is deleted and its slice with it.
    set_ready(&mut world, "web-1", true);
    let plan = world.pass();
    assert_eq!(plan.delete.len(), 1);
    assert_eq!(
        plan.slices,
        vec![SliceWrite::Delete {
            namespace: NS.into(),
            name: STANDBY_A.into()
        }]
    );
}

#[test]
fn switching_standbys_off_or_losing_the_service_deletes_the_slice() {
    let mut world = armed_standby();
    world.cr.spec.warm_standby = None;
    let plan = world.pass();
    assert_eq!(
        plan.slices,
        vec![SliceWrite::Delete {
            namespace: NS.into(),
            name: STANDBY_A.into()
        }]
    );
    // Another CriticalService's slice is never touched.
    let mut world = armed_standby();
    for view in world.slices.values_mut() {
        for slice in view.standby_slices.values_mut() {
            slice.critical_service = "someone-else".into();
        }
    }
    world.cr.spec.warm_standby = None;
    assert!(world.pass().slices.is_empty());
}

// ---- draining (`spec.drainSeconds`) ----

fn draining(world: &mut World) {
    world.cr.spec.drain_seconds = Some(2);
}

#[test]
fn a_retiring_fallback_leaves_the_selector_first_and_goes_once_drained() {
    let mut world = World::new();
    draining(&mut world);
    world.with_fallback();
    world.slice_lists(FALLBACK);
    world.healthy();
    let plan = world.pass();
    assert!(plan.delete.is_empty(), "not deleted yet: {:?}", plan.delete);
    assert_eq!(plan.relabel.len(), 1);
    let relabel = &plan.relabel[0];
    assert_eq!(relabel.pod.name, FALLBACK);
    assert_eq!(relabel.labels.get("app"), Some(&None), "selector removed");
    assert_eq!(
        relabel.labels.get(FALLBACK_ROLE_LABEL),
        Some(&Some(ROLE_RETIRING.to_owned()))
    );
    assert_eq!(
        relabel.annotations.get(RETIRING_SINCE_ANNOTATION),
        Some(&Some(at(1_000).to_string()))
    );
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_DRAINING)]);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(2)));
    assert_eq!(entry(&plan, "web").state, ServiceState::Healthy);

    // Still listed by the slices: wait, whatever the time.
    world.now = at(1_010);
    let plan = world.pass();
    assert_no_writes(&plan);
    // Out of the slices, drain time not over: a wake-up for the rest.
    world.now = at(1_001);
    world
        .slices
        .get_mut(&(NS.into(), "web".into()))
        .expect("slices")
        .ready_pods
        .remove(FALLBACK);
    let plan = world.pass();
    assert_no_writes(&plan);
    assert_eq!(plan.requeue_after, Some(Duration::from_secs(1)));
    // Drained: deleted.
    world.now = at(1_002);
    let plan = world.pass();
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        vec![FALLBACK]
    );
}

#[test]
fn a_draining_fallback_is_selected_again_when_the_service_turns_lame() {
    let mut world = World::new();
    draining(&mut world);
    world.with_fallback();
    world.healthy();
    world.pass();
    set_ready(&mut world, "web-1", false);
    let plan = world.pass();
    assert!(plan.create.is_empty() && plan.delete.is_empty(), "{plan:?}");
    assert_eq!(plan.relabel.len(), 1);
    let relabel = &plan.relabel[0];
    assert_eq!(relabel.labels.get("app"), Some(&Some("web".to_owned())));
    assert_eq!(relabel.labels.get(FALLBACK_ROLE_LABEL), Some(&None));
    assert_eq!(
        relabel.annotations.get(RETIRING_SINCE_ANNOTATION),
        Some(&None)
    );
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_RESELECTED)]);
    let web = entry(&plan, "web");
    assert_eq!(
        (web.state, web.fallback_pod.as_deref()),
        (ServiceState::FallbackActive, Some(FALLBACK))
    );
    // Selected again, it is the fallback as before: nothing more to write.
    assert_no_writes(&world.pass());
}

#[test]
fn a_promoted_standby_drains_and_leaves_vigils_slice_at_once() {
    let mut world = armed_standby();
    draining(&mut world);
    set_ready(&mut world, "web-1", false);
    world.pass();
    set_ready(&mut world, "web-1", true);
    let plan = world.pass();
    assert!(plan.delete.is_empty());
    assert_eq!(plan.relabel.len(), 1);
    assert_eq!(plan.relabel[0].pod.name, STANDBY_A);
    assert_eq!(
        plan.slices,
        vec![SliceWrite::Delete {
            namespace: NS.into(),
            name: STANDBY_A.into()
        }]
    );
    // Drained after 2 s (nothing lists it): deleted.
    world.now = at(1_002);
    let plan = world.pass();
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        vec![STANDBY_A]
    );
}

// ---- the defaults: the article's manifest, no optional field ----

#[test]
fn without_drain_seconds_a_retiring_fallback_is_drained_for_the_default_time() {
    let mut world = World::new();
    world.cr.spec.drain_seconds = None;
    world.with_fallback();
    world.healthy();
    let plan = world.pass();
    assert!(
        plan.delete.is_empty(),
        "not deleted at once: {:?}",
        plan.delete
    );
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_DRAINING)]);
    assert_eq!(plan.requeue_after, Some(drain::DEFAULT_DRAIN));
    // Out of the slices but within the default drain: kept.
    world.now = at(1_001);
    assert_no_writes(&world.pass());
    world.now = at(1_002);
    let plan = world.pass();
    assert_eq!(
        plan.delete
            .iter()
            .map(|d| d.name.as_str())
            .collect::<Vec<_>>(),
        vec![FALLBACK]
    );
}

#[test]
fn drain_seconds_zero_deletes_at_once() {
    let mut world = World::new();
    world.cr.spec.drain_seconds = Some(0);
    world.with_fallback();
    world.healthy();
    let plan = world.pass();
    assert_eq!(plan.delete.len(), 1);
    assert!(plan.relabel.is_empty());
}

/// A real pod of `web` on its first start, created at `created`.
fn replacement(created: i64) -> PodView {
    PodView {
        starting_since: Some(at(created)),
        ..real_pod("web-2", "web", false)
    }
}

#[test]
fn a_replacement_already_starting_is_given_its_head_start_then_a_fallback_comes() {
    let mut world = World::new();
    world.pods.push(replacement(1_000));
    let plan = world.pass();
    assert!(plan.create.is_empty(), "no race with the replacement");
    assert_eq!(entry(&plan, "web").state, ServiceState::Lame);
    assert_eq!(plan.requeue_after, Some(REPLACEMENT_HEAD_START));
    // Half-way: still waiting, woken up when the head start runs out.
    world.now = Timestamp::from_millisecond(1_001_500).expect("time");
    let plan = world.pass();
    assert!(plan.create.is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_millis(1_500)));
    // Not Ready after its head start: slower than a fallback, which is created.
    world.now = at(1_003);
    let plan = world.pass();
    assert_eq!(plan.create.len(), 1);
}

/// `web-1`, deleted at `deleted` under a workload controller (a ReplicaSet's pod).
fn deleted_under_controller(deleted: i64) -> PodView {
    PodView {
        terminating: true,
        deleted_under_controller: Some(at(deleted)),
        ..real_pod("web-1", "web", true)
    }
}

#[test]
fn a_replacement_not_seen_yet_is_waited_for_after_a_controlled_pod_is_deleted() {
    let mut world = World::new();
    world.pods.push(deleted_under_controller(1_000));
    let plan = world.pass();
    assert!(
        plan.create.is_empty(),
        "the ReplicaSet's replacement is coming"
    );
    assert_eq!(entry(&plan, "web").state, ServiceState::Lame);
    assert_eq!(plan.requeue_after, Some(REPLACEMENT_APPEARS));
    // The replacement appears: its own head start applies from its creation.
    world.now = Timestamp::from_millisecond(1_000_300).expect("time");
    world.pods.push(replacement(1_000));
    let plan = world.pass();
    assert!(plan.create.is_empty());
    assert_eq!(plan.requeue_after, Some(Duration::from_millis(2_700)));
}

#[test]
fn a_pod_scaled_away_is_not_waited_for() {
    // Case (e): its ReplicaSet wants no pod any more (the Deployment was scaled to zero).
    let mut world = World::new();
    world.pods.push(PodView {
        controller_wants: Some(0),
        ..deleted_under_controller(1_000)
    });
    let plan = world.pass();
    assert_eq!(
        plan.create.len(),
        1,
        "nothing replaces it: the fallback now"
    );
    assert_eq!(plan.requeue_after, None);
    // A workload that still wants a pod is making its replacement: waited for, as is a
    // workload Vigil does not know (not cached yet, or another kind of owner).
    for wants in [Some(1), Some(3), None] {
        let mut world = World::new();
        world.pods.push(PodView {
            controller_wants: wants,
            ..deleted_under_controller(1_000)
        });
        let plan = world.pass();
        assert!(plan.create.is_empty(), "wants {wants:?}: {:?}", plan.create);
        assert_eq!(plan.requeue_after, Some(REPLACEMENT_APPEARS));
    }
}

#[test]
fn no_replacement_within_its_wait_brings_the_fallback() {
    let mut world = World::new();
    world.pods.push(deleted_under_controller(1_000));
    world.now = at(1_002);
    assert_eq!(world.pass().create.len(), 1, "no replacement came");
}

#[test]
fn a_deleted_bare_pod_or_a_broken_pod_left_is_not_waited_for() {
    // A bare pod: nothing replaces it.
    let mut world = World::new();
    world.pods.push(PodView {
        terminating: true,
        ..real_pod("web-1", "web", true)
    });
    assert_eq!(world.pass().create.len(), 1);
    // Another selected pod, not being deleted, neither ready nor starting: no replacement to
    // wait for.
    let mut world = World::new();
    world.pods.push(deleted_under_controller(1_000));
    world.pods.push(real_pod("web-3", "web", false));
    assert_eq!(world.pass().create.len(), 1);
}

#[test]
fn a_crashed_or_old_pod_is_no_replacement_to_wait_for() {
    // A pod not on its first start (crashed container, stuck image): no head start.
    let mut world = World::new();
    world.pods.push(real_pod("web-1", "web", false));
    assert_eq!(world.pass().create.len(), 1);
    // A replacement created long ago and still not Ready.
    let mut world = World::new();
    world.pods.push(replacement(900));
    assert_eq!(world.pass().create.len(), 1);
    // A replacement of another Service's.
    let mut world = World::new();
    world.pods.push(PodView {
        starting_since: Some(at(1_000)),
        ..real_pod("api-1", "api", false)
    });
    assert_eq!(world.pass().create.len(), 1);
}

#[test]
fn a_draining_fallback_is_selected_again_even_while_a_replacement_starts() {
    // It is already running: nothing can answer sooner.
    let mut world = World::new();
    draining(&mut world);
    world.with_fallback();
    world.healthy();
    world.pass();
    set_ready(&mut world, "web-1", false);
    world.pods.push(replacement(1_000));
    let plan = world.pass();
    assert_eq!(reasons(&plan), vec![(false, REASON_FALLBACK_RESELECTED)]);
}
