//! Discovery (`/version`, `/api`, `/apis`, resource lists, kube-rs `Discovery`), the two Event APIs
//! serving the same objects, and coordination.k8s.io Leases.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Event as CoreEvent;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{APIResource, APIResourceList};
use kube::api::{Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::discovery::{Discovery, Scope, pinned_kind};
use serde_json::json;
use vigil_testenv::TestEnv;

use crate::support::raw_request;

fn find<'a>(list: &'a APIResourceList, name: &str) -> &'a APIResource {
    list.resources
        .iter()
        .find(|r| r.name == name)
        .unwrap_or_else(|| panic!("{name} in {}", list.group_version))
}

fn has_verbs(res: &APIResource, verbs: &[&str]) {
    for verb in verbs {
        assert!(
            res.verbs.iter().any(|v| v == verb),
            "{} lacks verb {verb}: {:?}",
            res.name,
            res.verbs
        );
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

#[tokio::test]
async fn version_endpoint_reports_the_server_version() {
    let env = TestEnv::start().await.expect("test env");
    let info = env.client().apiserver_version().await.expect("/version");
    assert!(!info.major.is_empty() && !info.minor.is_empty(), "{info:?}");
    assert!(
        info.major.chars().all(|c| c.is_ascii_digit()),
        "major is a number: {info:?}"
    );
    assert!(
        info.git_version.starts_with('v'),
        "gitVersion like v1.33.0: {info:?}"
    );
    assert!(!info.platform.is_empty(), "{info:?}");
    let raw = raw_request(&env.client(), "GET", "/version", None, None).await;
    assert_eq!(raw.status, 200);
    for key in [
        "major",
        "minor",
        "gitVersion",
        "gitCommit",
        "goVersion",
        "platform",
    ] {
        assert!(raw.json[key].is_string(), "{key} in {}", raw.text);
    }
    env.cleanup().await;
}

#[tokio::test]
async fn core_and_group_lists() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let core = client.list_core_api_versions().await.expect("/api");
    assert!(core.versions.iter().any(|v| v == "v1"), "{core:?}");
    let raw = raw_request(&client, "GET", "/api", None, None).await;
    assert_eq!(raw.json["kind"], "APIVersions", "{}", raw.text);

    let groups = client.list_api_groups().await.expect("/apis");
    for name in [
        "apps",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "apiextensions.k8s.io",
        "rbac.authorization.k8s.io",
    ] {
        let group = groups
            .groups
            .iter()
            .find(|g| g.name == name)
            .unwrap_or_else(|| panic!("group {name} under /apis"));
        let preferred = group
            .preferred_version
            .as_ref()
            .unwrap_or_else(|| panic!("{name} has a preferred version"));
        assert_eq!(
            preferred.group_version,
            format!("{name}/{}", preferred.version)
        );
        assert!(
            group
                .versions
                .iter()
                .any(|v| v.group_version == format!("{name}/v1")),
            "{name}/v1 served: {group:?}"
        );
    }
    let apps = groups
        .groups
        .iter()
        .find(|g| g.name == "apps")
        .expect("apps");
    assert_eq!(
        apps.preferred_version
            .as_ref()
            .map(|v| v.group_version.as_str()),
        Some("apps/v1")
    );
    assert!(
        !groups.groups.iter().any(|g| g.name.is_empty()),
        "the core group is not under /apis"
    );

    let raw = raw_request(&client, "GET", "/apis/apps", None, None).await;
    assert_eq!(
        (
            raw.status,
            raw.json["kind"].as_str(),
            raw.json["name"].as_str()
        ),
        (200, Some("APIGroup"), Some("apps")),
        "{}",
        raw.text
    );
    let raw = raw_request(
        &client,
        "GET",
        "/apis/no-such-group.example.com",
        None,
        None,
    )
    .await;
    assert_eq!(raw.status, 404, "{}", raw.text);
    env.cleanup().await;
}

#[tokio::test]
async fn core_v1_resource_list() {
    let env = TestEnv::start().await.expect("test env");
    let list = env
        .client()
        .list_core_api_resources("v1")
        .await
        .expect("/api/v1");
    assert_eq!(list.group_version, "v1");

    let pods = find(&list, "pods");
    assert_eq!(
        (
            pods.kind.as_str(),
            pods.namespaced,
            pods.singular_name.as_str()
        ),
        ("Pod", true, "pod")
    );
    assert!(
        pods.short_names.iter().flatten().any(|s| s == "po"),
        "{pods:?}"
    );
    has_verbs(pods, ALL_VERBS);
    let status = find(&list, "pods/status");
    assert_eq!((status.kind.as_str(), status.namespaced), ("Pod", true));
    has_verbs(status, &["get", "patch", "update"]);
    assert!(
        !status.verbs.iter().any(|v| v == "list" || v == "watch"),
        "subresources are not listed: {status:?}"
    );

    let namespaces = find(&list, "namespaces");
    assert_eq!(
        (namespaces.kind.as_str(), namespaces.namespaced),
        ("Namespace", false)
    );
    assert!(
        namespaces.short_names.iter().flatten().any(|s| s == "ns"),
        "{namespaces:?}"
    );
    for (name, kind, short) in [
        ("configmaps", "ConfigMap", "cm"),
        ("services", "Service", "svc"),
        ("events", "Event", "ev"),
    ] {
        let res = find(&list, name);
        assert_eq!((res.kind.as_str(), res.namespaced), (kind, true));
        assert!(
            res.short_names.iter().flatten().any(|s| s == short),
            "{res:?}"
        );
    }
    env.cleanup().await;
}

#[tokio::test]
async fn group_resource_lists() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let apps = client
        .list_api_group_resources("apps/v1")
        .await
        .expect("/apis/apps/v1");
    assert_eq!(apps.group_version, "apps/v1");
    let deployments = find(&apps, "deployments");
    assert_eq!(
        (deployments.kind.as_str(), deployments.namespaced),
        ("Deployment", true)
    );
    assert!(
        deployments
            .short_names
            .iter()
            .flatten()
            .any(|s| s == "deploy"),
        "{deployments:?}"
    );
    has_verbs(deployments, ALL_VERBS);
    find(&apps, "deployments/status");

    for (gv, name, kind) in [
        ("coordination.k8s.io/v1", "leases", "Lease"),
        ("discovery.k8s.io/v1", "endpointslices", "EndpointSlice"),
        ("events.k8s.io/v1", "events", "Event"),
    ] {
        let list = client
            .list_api_group_resources(gv)
            .await
            .unwrap_or_else(|e| panic!("/apis/{gv}: {e:?}"));
        let res = find(&list, name);
        assert_eq!((res.kind.as_str(), res.namespaced), (kind, true), "{gv}");
        has_verbs(res, ALL_VERBS);
    }
    let crds = client
        .list_api_group_resources("apiextensions.k8s.io/v1")
        .await
        .expect("apiextensions");
    let res = find(&crds, "customresourcedefinitions");
    assert_eq!(
        (res.kind.as_str(), res.namespaced),
        ("CustomResourceDefinition", false)
    );
    assert!(
        res.short_names.iter().flatten().any(|s| s == "crd"),
        "{res:?}"
    );
    env.cleanup().await;
}

#[tokio::test]
async fn kube_discovery_resolves_kinds() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    // Other tests of this binary create and delete CRDs of their own groups meanwhile: a group
    // listed by `/apis` can be gone when its version is asked for (404, seen 1 in 5 runs on
    // kube-apiserver), as any discovery client meets on a live cluster. Discover again then.
    let mut attempts = 0;
    let discovery = loop {
        attempts += 1;
        match Discovery::new(client.clone()).run().await {
            Ok(discovery) => break discovery,
            Err(kube::Error::Api(status)) if status.code == 404 && attempts < 5 => {
                tokio::time::sleep(std::time::Duration::from_millis(200)).await;
            }
            Err(e) => panic!("discovery: {e:?}"),
        }
    };
    for (group, version, kind, plural, scope) in [
        ("", "v1", "Pod", "pods", Scope::Namespaced),
        ("", "v1", "Namespace", "namespaces", Scope::Cluster),
        ("apps", "v1", "Deployment", "deployments", Scope::Namespaced),
        (
            "coordination.k8s.io",
            "v1",
            "Lease",
            "leases",
            Scope::Namespaced,
        ),
        (
            "discovery.k8s.io",
            "v1",
            "EndpointSlice",
            "endpointslices",
            Scope::Namespaced,
        ),
        ("events.k8s.io", "v1", "Event", "events", Scope::Namespaced),
        (
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            Scope::Cluster,
        ),
    ] {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let (ar, caps) = discovery
            .resolve_gvk(&gvk)
            .unwrap_or_else(|| panic!("discovery resolves {gvk:?}"));
        assert_eq!(
            (ar.plural.as_str(), &caps.scope),
            (plural, &scope),
            "{gvk:?}"
        );
        assert!(
            caps.supports_operation("watch"),
            "{gvk:?}: {:?}",
            caps.operations
        );
        let (pinned, pinned_caps) = pinned_kind(&client, &gvk)
            .await
            .unwrap_or_else(|e| panic!("pinned_kind {gvk:?}: {e:?}"));
        assert_eq!((pinned.plural.as_str(), pinned_caps.scope), (plural, scope));
    }
    assert!(discovery.has_group("events.k8s.io"));
    assert!(
        discovery
            .resolve_gvk(&GroupVersionKind::gvk("apps", "v1", "NoSuchKind"))
            .is_none()
    );
    env.cleanup().await;
}

#[tokio::test]
async fn events_v1_events_read_as_core_events() {
    let env = TestEnv::start().await.expect("test env");
    let ns = env.namespace().to_owned();
    let event: Event = serde_json::from_value(json!({
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "metadata": {"name": "modern"},
        "eventTime": "2024-05-01T10:00:00.123456Z",
        "reportingController": "vigil.dev/test-controller",
        "reportingInstance": "test-instance-1",
        "action": "Reconcile",
        "reason": "Synced",
        "type": "Normal",
        "note": "all good",
        "regarding": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "namespace": ns}
    }))
    .expect("valid events.k8s.io Event");
    let created = env
        .api::<Event>()
        .create(&PostParams::default(), &event)
        .await
        .expect("create events.k8s.io/v1 Event");
    assert_eq!(created.note.as_deref(), Some("all good"));

    let core = env
        .api::<CoreEvent>()
        .get("modern")
        .await
        .expect("same event via core v1");
    assert_eq!(core.metadata.uid, created.metadata.uid);
    assert_eq!(core.message.as_deref(), Some("all good"));
    assert_eq!(core.reason.as_deref(), Some("Synced"));
    assert_eq!(core.type_.as_deref(), Some("Normal"));
    assert_eq!(core.action.as_deref(), Some("Reconcile"));
    assert_eq!(
        core.reporting_component.as_deref(),
        Some("vigil.dev/test-controller")
    );
    assert_eq!(core.reporting_instance.as_deref(), Some("test-instance-1"));
    assert_eq!(core.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(core.involved_object.name.as_deref(), Some("cm1"));
    assert_eq!(core.involved_object.namespace.as_deref(), Some(ns.as_str()));
    assert_eq!(
        core.event_time.as_ref().map(|t| t.0.to_string()),
        Some("2024-05-01T10:00:00.123456Z".to_owned())
    );

    let listed = env
        .api::<CoreEvent>()
        .list(&Default::default())
        .await
        .expect("list core events");
    assert!(
        listed
            .items
            .iter()
            .any(|e| e.metadata.name.as_deref() == Some("modern"))
    );
    env.cleanup().await;
}

#[tokio::test]
async fn core_events_read_as_events_v1() {
    let env = TestEnv::start().await.expect("test env");
    let ns = env.namespace().to_owned();
    let event: CoreEvent = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": "legacy"},
        "involvedObject": {"apiVersion": "v1", "kind": "ConfigMap", "name": "cm1", "namespace": ns},
        "reason": "Created",
        "message": "made it",
        "type": "Warning",
        "source": {"component": "legacy-component"},
        "firstTimestamp": "2024-05-01T10:00:00Z",
        "lastTimestamp": "2024-05-01T10:05:00Z",
        "count": 3
    }))
    .expect("valid core Event");
    let created = env
        .api::<CoreEvent>()
        .create(&PostParams::default(), &event)
        .await
        .expect("create core v1 Event");

    let modern = env
        .api::<Event>()
        .get("legacy")
        .await
        .expect("same event via events.k8s.io/v1");
    assert_eq!(modern.metadata.uid, created.metadata.uid);
    assert_eq!(modern.note.as_deref(), Some("made it"));
    assert_eq!(modern.reason.as_deref(), Some("Created"));
    assert_eq!(modern.type_.as_deref(), Some("Warning"));
    let regarding = modern.regarding.as_ref().expect("regarding");
    assert_eq!(
        (regarding.kind.as_deref(), regarding.name.as_deref()),
        (Some("ConfigMap"), Some("cm1"))
    );
    assert_eq!(
        modern
            .deprecated_source
            .as_ref()
            .and_then(|s| s.component.as_deref()),
        Some("legacy-component")
    );
    assert_eq!(modern.deprecated_count, Some(3));
    assert_eq!(
        modern
            .deprecated_first_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2024-05-01T10:00:00Z".to_owned())
    );
    assert_eq!(
        modern
            .deprecated_last_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        Some("2024-05-01T10:05:00Z".to_owned())
    );

    // Updates through one API show through the other; events.k8s.io keeps what happened
    // immutable (the error names the stored, core field), core/v1 does not.
    let err = env
        .api::<Event>()
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(&json!({"note": "changed"})),
        )
        .await
        .expect_err("the note is immutable through events.k8s.io");
    match err {
        kube::Error::Api(s) => {
            assert_eq!((s.code, s.reason.as_str()), (422, "Invalid"), "{s:?}");
            assert!(
                s.message
                    .contains("message: Invalid value: \"changed\": field is immutable"),
                "{}",
                s.message
            );
        }
        other => panic!("expected a 422, got {other:?}"),
    }
    env.api::<Event>()
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(&json!({"series": {
                "count": 4, "lastObservedTime": "2024-05-01T10:06:00.000000Z"
            }})),
        )
        .await
        .expect("the series may change through events.k8s.io");
    env.api::<CoreEvent>()
        .patch(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(&json!({"message": "changed"})),
        )
        .await
        .expect("patch via core");
    let modern = env
        .api::<Event>()
        .get("legacy")
        .await
        .expect("get via events.k8s.io");
    assert_eq!(modern.note.as_deref(), Some("changed"));
    assert_eq!(modern.series.map(|s| s.count), Some(4));
    let listed = env
        .api::<Event>()
        .list(&Default::default())
        .await
        .expect("list events.k8s.io events");
    assert!(
        listed
            .items
            .iter()
            .any(|e| e.metadata.name.as_deref() == Some("legacy"))
    );
    env.cleanup().await;
}

#[tokio::test]
async fn leases_can_be_created_and_renewed() {
    let env = TestEnv::start().await.expect("test env");
    let api = env.api::<Lease>();
    let lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "leader"},
        "spec": {
            "holderIdentity": "node-a",
            "leaseDurationSeconds": 15,
            "acquireTime": "2024-05-01T10:00:00.000001Z",
            "renewTime": "2024-05-01T10:00:00.000001Z",
            "leaseTransitions": 0
        }
    }))
    .expect("valid Lease");
    let created = api
        .create(&PostParams::default(), &lease)
        .await
        .expect("create lease");
    let spec = created.spec.clone().expect("spec");
    assert_eq!(spec.holder_identity.as_deref(), Some("node-a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(
        spec.renew_time.as_ref().map(|t| t.0.to_string()),
        Some("2024-05-01T10:00:00.000001Z".to_owned())
    );

    // Renew with an update, then hand over with a patch.
    let mut renewed = created.clone();
    let renew: k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime =
        serde_json::from_value(json!("2024-05-01T10:00:05.500000Z")).expect("MicroTime");
    renewed.spec.as_mut().expect("spec").renew_time = Some(renew);
    let updated = api
        .replace("leader", &PostParams::default(), &renewed)
        .await
        .expect("renew lease");
    let rv = |l: &Lease| {
        l.metadata
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
            .expect("numeric rv")
    };
    assert!(rv(&updated) > rv(&created));
    assert_eq!(
        updated
            .spec
            .as_ref()
            .and_then(|s| s.renew_time.as_ref())
            .map(|t| t.0.to_string()),
        Some("2024-05-01T10:00:05.5Z".to_owned())
    );
    let patch = json!({"spec": {"holderIdentity": "node-b", "leaseTransitions": 1}});
    api.patch("leader", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect("patch lease");
    let fetched = api.get("leader").await.expect("get lease");
    let spec = fetched.spec.expect("spec");
    assert_eq!(
        (spec.holder_identity.as_deref(), spec.lease_transitions),
        (Some("node-b"), Some(1))
    );
    assert_eq!(spec.lease_duration_seconds, Some(15));

    // A stale update conflicts, as leader election relies on.
    let err = api
        .replace("leader", &PostParams::default(), &renewed)
        .await
        .expect_err("stale renew");
    assert!(
        matches!(err, kube::Error::Api(ref s) if s.code == 409),
        "{err:?}"
    );
    env.cleanup().await;
}
