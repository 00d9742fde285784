//! Cluster behaviour around the API server: the simulated kubelet running pods, the Endpoints
//! and EndpointSlice controllers following pod readiness, and the end-to-end scenario of a
//! Service whose pods go NotReady, disappear, and whose namespace is deleted. On a real cluster
//! these need kube-controller-manager plus the simulated kubelet (started by TestEnv).

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Endpoints, Namespace, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;
use vigil_testenv::{SETTLE_TIMEOUT, TestEnv, TestEnvOptions, wait_for};

/// (ready, not ready) addresses of a Service's Endpoints.
async fn endpoint_counts(env: &TestEnv, service: &str) -> Result<(usize, usize), String> {
    let ep = env
        .api::<Endpoints>()
        .get(service)
        .await
        .map_err(|e| e.to_string())?;
    let subsets = ep.subsets.unwrap_or_default();
    let ready = subsets
        .iter()
        .map(|s| s.addresses.as_ref().map_or(0, Vec::len))
        .sum();
    let not_ready = subsets
        .iter()
        .map(|s| s.not_ready_addresses.as_ref().map_or(0, Vec::len))
        .sum();
    Ok((ready, not_ready))
}

async fn wait_endpoints(env: &TestEnv, service: &str, want: (usize, usize)) {
    wait_for(
        &format!("endpoints of {service} to be {want:?} (ready, not ready)"),
        SETTLE_TIMEOUT,
        || async {
            let got = endpoint_counts(env, service).await?;
            if got == want {
                Ok(Some(()))
            } else {
                Err(format!("{got:?}"))
            }
        },
    )
    .await
    .expect("endpoints settle");
}

/// (ready, not ready) endpoints over a Service's EndpointSlices.
async fn slice_counts(env: &TestEnv, service: &str) -> Result<(usize, usize), String> {
    let lp = ListParams::default().labels(&format!("kubernetes.io/service-name={service}"));
    let slices = env
        .api::<EndpointSlice>()
        .list(&lp)
        .await
        .map_err(|e| e.to_string())?;
    let mut counts = (0, 0);
    for ep in slices.items.iter().flat_map(|s| s.endpoints.iter()) {
        if ep.conditions.as_ref().and_then(|c| c.ready) == Some(true) {
            counts.0 += 1;
        } else {
            counts.1 += 1;
        }
    }
    Ok(counts)
}

#[tokio::test]
async fn kubelet_registers_a_node_and_runs_pods() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let node_name = env.node_name().expect("kubelet").to_owned();
    let node = Api::<Node>::all(env.client())
        .get(&node_name)
        .await
        .expect("node registered");
    let ready = node.status.and_then(|s| s.conditions).unwrap_or_default();
    assert!(
        ready
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        "node is Ready"
    );

    env.create_pod("solo", "solo").await.expect("create pod");
    let pod = env.wait_pod("solo", true).await.expect("pod runs");
    assert_eq!(
        pod.spec.and_then(|s| s.node_name).as_deref(),
        Some(node_name.as_str()),
        "bound to the node"
    );
    let ip = pod.status.and_then(|s| s.pod_ip).expect("pod IP");
    assert!(ip.starts_with("10.244."), "IP from 10.244.0.0/16: {ip}");

    // The annotation keeps a new pod Pending.
    let pending: Pod = serde_json::from_value(json!({
        "metadata": {"name": "held", "annotations": {vigil_testenv::STATE_ANNOTATION: "Pending"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/app:1.0"}]}
    }))
    .expect("pod");
    env.api::<Pod>()
        .create(&PostParams::default(), &pending)
        .await
        .expect("create");
    let held = wait_for(
        "the held pod to be scheduled but Pending",
        SETTLE_TIMEOUT,
        || async {
            let pod = env
                .api::<Pod>()
                .get("held")
                .await
                .map_err(|e| e.to_string())?;
            let scheduled = pod
                .spec
                .as_ref()
                .and_then(|s| s.node_name.as_ref())
                .is_some();
            let phase = pod.status.as_ref().and_then(|s| s.phase.clone());
            let shown = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some();
            if scheduled && shown && phase.as_deref() == Some("Pending") {
                Ok(Some(pod))
            } else {
                Err(format!("{phase:?}"))
            }
        },
    )
    .await
    .expect("held pod");
    assert!(
        held.status.and_then(|s| s.pod_ip).is_none(),
        "a Pending pod has no IP"
    );

    env.delete_pod_as_kubelet_would("solo")
        .await
        .expect("graceful deletion completes");
    env.cleanup().await;
}

#[tokio::test]
async fn named_target_ports_resolve_and_slices_belong_to_the_service() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let (service, _) = env
        .service_with_ready_pods("web", 2)
        .await
        .expect("service with pods");
    wait_endpoints(&env, "web", (2, 0)).await;
    let ep = env.api::<Endpoints>().get("web").await.expect("endpoints");
    let ports = ep
        .subsets
        .unwrap_or_default()
        .remove(0)
        .ports
        .unwrap_or_default();
    assert_eq!(
        ports[0].port, 8080,
        "named targetPort `http` resolved to the container port"
    );
    assert_eq!(ports[0].name.as_deref(), Some("http"));

    let lp = ListParams::default().labels("kubernetes.io/service-name=web");
    let slices = env.api::<EndpointSlice>().list(&lp).await.expect("slices");
    assert!(!slices.items.is_empty());
    for slice in &slices.items {
        let owner = &slice.metadata.owner_references.as_ref().expect("owner")[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str()),
            ("Service", "web")
        );
        assert_eq!(Some(owner.uid.as_str()), service.metadata.uid.as_deref());
        assert_eq!(slice.address_type, "IPv4");
    }
    env.cleanup().await;
}

#[tokio::test]
async fn services_without_selectors_are_left_alone() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    let svc: Service = serde_json::from_value(
        json!({"metadata": {"name": "manual"}, "spec": {"ports": [{"port": 80}]}}),
    )
    .expect("service");
    env.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("create");
    let manual: Endpoints = serde_json::from_value(json!({
        "metadata": {"name": "manual"},
        "subsets": [{"addresses": [{"ip": "192.0.2.10"}], "ports": [{"port": 80}]}]
    }))
    .expect("endpoints");
    env.api::<Endpoints>()
        .create(&PostParams::default(), &manual)
        .await
        .expect("create endpoints");
    // Give the controllers a chance to (wrongly) act, then check nothing changed.
    env.service_with_ready_pods("other", 1)
        .await
        .expect("unrelated workload");
    wait_endpoints(&env, "other", (1, 0)).await;
    let ep = env
        .api::<Endpoints>()
        .get("manual")
        .await
        .expect("endpoints");
    let subsets = ep.subsets.expect("subsets");
    let ip = &subsets[0].addresses.as_ref().expect("addresses")[0].ip;
    assert_eq!(ip, "192.0.2.10");
    env.cleanup().await;
}

/// The scenario of the issue: 3 ready pods → 3 endpoints; one NotReady → 2 + 1; all pods gone
/// → no ready endpoint; owner gone → dependents gone; namespace gone → everything gone.
#[tokio::test]
async fn service_pods_owner_and_namespace_scenario() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    env.service_with_ready_pods("shop", 3)
        .await
        .expect("service with 3 ready pods");
    wait_endpoints(&env, "shop", (3, 0)).await;

    env.make_pod_not_ready("shop-1")
        .await
        .expect("pod NotReady");
    wait_endpoints(&env, "shop", (2, 1)).await;
    wait_for(
        "slices to show 2 ready + 1 not ready",
        SETTLE_TIMEOUT,
        || async {
            let got = slice_counts(&env, "shop").await?;
            if got == (2, 1) {
                Ok(Some(()))
            } else {
                Err(format!("{got:?}"))
            }
        },
    )
    .await
    .expect("slices follow readiness");

    for i in 0..3 {
        env.delete_pod_as_kubelet_would(&format!("shop-{i}"))
            .await
            .expect("pod deleted");
    }
    wait_endpoints(&env, "shop", (0, 0)).await;

    // Owner deleted → dependents collected.
    let owner = env
        .api::<ConfigMap>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "owner"}})).expect("cm"),
        )
        .await
        .expect("owner");
    let dependent: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "dependent", "ownerReferences": [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.metadata.uid.clone().expect("uid")
    }]}}))
    .expect("cm");
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &dependent)
        .await
        .expect("dependent");
    env.api::<ConfigMap>()
        .delete("owner", &DeleteParams::background())
        .await
        .expect("delete owner");
    wait_for("the dependent to be collected", SETTLE_TIMEOUT, || async {
        match env
            .api::<ConfigMap>()
            .get_opt("dependent")
            .await
            .map_err(|e| e.to_string())?
        {
            None => Ok(Some(())),
            Some(_) => Err("still there".into()),
        }
    })
    .await
    .expect("garbage collected");

    // Namespace deleted → everything in it gone, then the namespace itself.
    let ns = env.namespace().to_owned();
    let namespaces: Api<Namespace> = Api::all(env.client());
    namespaces
        .delete(&ns, &DeleteParams::background())
        .await
        .expect("delete namespace");
    wait_for(
        "the namespace and its content to be gone",
        Duration::from_secs(60),
        || async {
            let services = env
                .api::<Service>()
                .list(&Default::default())
                .await
                .map(|l| l.items.len())
                .unwrap_or(0);
            match namespaces.get_opt(&ns).await.map_err(|e| e.to_string())? {
                None => Ok(Some(())),
                Some(n) => Err(format!(
                    "phase {:?}, {services} services left",
                    n.status.and_then(|s| s.phase)
                )),
            }
        },
    )
    .await
    .expect("namespace removed");
    env.cleanup().await;
}

#[tokio::test]
async fn built_in_loops_can_be_switched_off() {
    let options = TestEnvOptions {
        sandbox: vigil_sandbox::SandboxConfig {
            loops: vigil_sandbox::Loops {
                endpoints: false,
                ..vigil_sandbox::Loops::default()
            },
            ..Default::default()
        },
        ..TestEnvOptions::with_kubelet()
    };
    let env = TestEnv::start_with(options).await.expect("env");
    vigil_testenv::require_sandbox!(env);
    env.service_with_ready_pods("quiet", 1)
        .await
        .expect("service with a ready pod");
    // With the endpoints loop off, the test drives Endpoints by hand: none appear on their own.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        env.api::<Endpoints>()
            .get_opt("quiet")
            .await
            .expect("get")
            .is_none()
    );
    env.cleanup().await;
}

#[tokio::test]
async fn cluster_scoped_owner_collects_namespaced_dependents() {
    let env = TestEnv::start().await.expect("env");
    let roles: Api<k8s_openapi::api::rbac::v1::ClusterRole> = Api::all(env.client());
    let role_name = format!("{}-owner", env.namespace());
    let role = roles
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": role_name}})).expect("role"),
        )
        .await
        .expect("cluster-scoped owner");
    let dependent: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "dep", "ownerReferences": [{
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "name": role_name,
            "uid": role.metadata.uid.clone().expect("uid")
        }]}}))
        .expect("cm");
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &dependent)
        .await
        .expect("dependent");
    roles
        .delete(&role_name, &DeleteParams::background())
        .await
        .expect("delete owner");
    wait_for(
        "the namespaced dependent to be collected",
        SETTLE_TIMEOUT,
        || async {
            match env
                .api::<ConfigMap>()
                .get_opt("dep")
                .await
                .map_err(|e| e.to_string())?
            {
                None => Ok(Some(())),
                Some(_) => Err("still there".into()),
            }
        },
    )
    .await
    .expect("collected");
    env.cleanup().await;
}

#[tokio::test]
async fn kubelet_ready_delay_holds_pods_not_ready_first() {
    let options = TestEnvOptions {
        kubelet: Some(vigil_testenv::KubeletConfig {
            ready_delay: Duration::from_millis(600),
            ..Default::default()
        }),
        ..TestEnvOptions::default()
    };
    let env = TestEnv::start_with(options).await.expect("env");
    env.create_pod("slow", "slow").await.expect("pod");
    let running = env
        .wait_pod("slow", false)
        .await
        .expect("running, not ready yet");
    assert!(
        running.status.and_then(|s| s.pod_ip).is_some(),
        "a running pod has its IP before it is ready"
    );
    env.wait_pod("slow", true)
        .await
        .expect("ready after the delay");
    env.cleanup().await;
}
