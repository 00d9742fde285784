//! End-to-end: the sample-controller example (`examples/sample-controller`) on a Manager, on
//! the sandbox (its Deployment and ReplicaSet loops, a simulated kubelet) or on the cluster of
//! `VIGIL_TEST_KUBECONFIG` (kube-controller-manager, the same simulated kubelet). Black-box: the
//! test only creates, scales and deletes a Foo and looks at what the API shows.

#![allow(clippy::disallowed_names)] // upstream's kind is `Foo`

use crate::example as sample_controller;

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, ResourceExt as _};
use sample_controller::{Foo, FooSpec};
use tokio::sync::oneshot;
use vigil_runtime::Manager;
use vigil_testenv::{TestEnv, TestEnvOptions, wait_for};

/// Long enough for a Deployment's pods to become available on a busy machine.
const SETTLE: Duration = Duration::from_secs(60);

async fn foo_status(foos: &Api<Foo>, name: &str) -> Result<Option<i32>, String> {
    let foo = foos.get(name).await.map_err(|e| e.to_string())?;
    Ok(foo.status.map(|s| s.available_replicas))
}

#[tokio::test]
async fn a_foo_gets_its_deployment_mirrors_its_availability_and_takes_it_along() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("test environment");
    let crd: CustomResourceDefinition = serde_saphyr::from_str(include_str!(
        "../../../../examples/sample-controller/foo-crd.yaml"
    ))
    .expect("upstream CRD");
    vigil_testenv::install_crd(&env.client(), &crd)
        .await
        .expect("Foo CRD served");

    let config = env.config().await.expect("client configuration");
    let mut manager = Manager::builder(sample_controller::NAME, config)
        .build()
        .await
        .expect("manager");
    sample_controller::add(&mut manager);
    let metrics = manager.runtime().metrics().clone();
    let (stop, stopped) = oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));

    let ns = env.namespace().to_owned();
    let foos: Api<Foo> = env.api();
    let deployments: Api<Deployment> = env.api();
    let deployment_name = format!("example-foo-{}", ns.trim_start_matches("vigil-test-"));
    let foo = Foo::new(
        "example-foo",
        FooSpec {
            deployment_name: deployment_name.clone(),
            replicas: Some(1),
        },
    );
    let foo = foos
        .create(&PostParams::default(), &foo)
        .await
        .expect("Foo created");

    // The Deployment, owned by the Foo, with its replicas; then its availability mirrored.
    let deployment = wait_for("the Foo's Deployment", SETTLE, || async {
        deployments
            .get_opt(&deployment_name)
            .await
            .map_err(|e| e.to_string())
    })
    .await
    .expect("Deployment created");
    let owner = deployment
        .owner_references()
        .first()
        .cloned()
        .expect("an owner");
    assert_eq!((owner.kind.as_str(), owner.controller), ("Foo", Some(true)));
    assert_eq!(Some(owner.uid), foo.uid());
    assert_eq!(deployment.spec.and_then(|s| s.replicas), Some(1));
    wait_for("availableReplicas 1 on the Foo", SETTLE, || async {
        Ok((foo_status(&foos, "example-foo").await? == Some(1)).then_some(()))
    })
    .await
    .expect("status mirrored");

    // An Event `Synced` about the Foo.
    let events: Api<Event> = env.api();
    wait_for("an Event Synced about the Foo", SETTLE, || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        Ok(list
            .items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Synced")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("example-foo")
            })
            .then_some(()))
    })
    .await
    .expect("Synced recorded");

    // Scaling the Foo scales its Deployment.
    let patch = serde_json::json!({"spec": {"replicas": 2}});
    foos.patch(
        "example-foo",
        &PatchParams::default(),
        &Patch::Merge(&patch),
    )
    .await
    .expect("Foo scaled");
    wait_for("availableReplicas 2 on the Foo", SETTLE, || async {
        Ok((foo_status(&foos, "example-foo").await? == Some(2)).then_some(()))
    })
    .await
    .expect("scaled and mirrored");

    // Every request the controller made is in client-go's metrics.
    let text = metrics.encode();
    assert!(
        text.contains("rest_client_requests_total{code=\"201\",method=\"POST\""),
        "{text}"
    );
    assert!(
        text.contains("sample_controller_rest_client_watches_total{resource=\"deployments.apps\"}"),
        "{text}"
    );

    // Deleting the Foo takes its Deployment along (garbage collection).
    foos.delete("example-foo", &DeleteParams::background())
        .await
        .expect("Foo deleted");
    wait_for("the Deployment garbage-collected", SETTLE, || async {
        let gone = deployments
            .get_opt(&deployment_name)
            .await
            .map_err(|e| e.to_string())?
            .is_none();
        Ok(gone.then_some(()))
    })
    .await
    .expect("Deployment gone with its Foo");

    let _ = stop.send(());
    running.await.expect("manager stopped");
    env.cleanup().await;
}
