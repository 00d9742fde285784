//! The generated ConfigMapSync CRD against an API server (a fresh sandbox, or
//! `VIGIL_TEST_KUBECONFIG`'s cluster): the tutorial's sample manifest — which capitalises the
//! field names — is rejected with a 422 naming the missing fields instead of being pruned into a
//! no-op, names that are not DNS labels are rejected, and the corrected example is accepted.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use vigil_apis::ConfigMapSync;
use vigil_testenv::{TestEnv, wait_for};

/// The tutorial's sample manifest, unchanged.
const TUTORIAL_SAMPLE: &str = "apiVersion: apps.bixbite.io/v1
kind: ConfigMapSync
metadata:
  labels:
    app.kubernetes.io/name: configmapsync
    app.kubernetes.io/instance: configmapsync-sample
    app.kubernetes.io/part-of: configmapsync
    app.kubernetes.io/managed-by: kustomize
    app.kubernetes.io/created-by: configmapsync
  name: configmapsync-sample
spec:
  SourceNamespace: \"sourceNamespace\"
  DestinationNamespace: \"destinationNamespace\"
  ConfigMapName: \"configMapName\"
";

const CRD_NAME: &str = "configmapsyncs.apps.bixbite.io";

async fn install(env: &TestEnv) -> Api<CustomResourceDefinition> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &ConfigMapSync::crd())
        .await
        .expect("the generated CRD is accepted");
    wait_for(
        "the ConfigMapSync CRD to be served",
        Duration::from_secs(10),
        || async {
            let api: Api<ConfigMapSync> = env.api();
            api.list(&Default::default())
                .await
                .map(|_| Some(()))
                .map_err(|e| e.to_string())
        },
    )
    .await
    .expect("served");
    crds
}

/// Creates an untyped object (the Rust type cannot express these manifests) and returns the
/// API's error.
async fn rejection(env: &TestEnv, object: serde_json::Value) -> kube::core::Status {
    let resource = ApiResource::erase::<ConfigMapSync>(&());
    let api: Api<DynamicObject> = Api::namespaced_with(env.client(), env.namespace(), &resource);
    let object: DynamicObject = serde_json::from_value(object).expect("object");
    match api.create(&PostParams::default(), &object).await {
        Err(kube::Error::Api(status)) => *status,
        other => panic!("expected a rejection, got {other:?}"),
    }
}

// Creates and deletes the cluster-wide CRD: sandbox only (a real cluster may be running Vigil).
#[tokio::test]
async fn the_tutorials_capitalised_sample_is_rejected_naming_the_missing_fields() {
    let env = TestEnv::start().await.expect("env");
    vigil_testenv::require_sandbox!(env);
    let crds = install(&env).await;
    let sample: serde_json::Value = serde_saphyr::from_str(TUTORIAL_SAMPLE).expect("sample");
    let status = rejection(&env, sample).await;
    assert_eq!(status.code, 422, "{status:?}");
    for field in [
        "spec.sourceNamespace",
        "spec.destinationNamespace",
        "spec.configMapName",
    ] {
        assert!(
            status.message.contains(field),
            "{field}: {}",
            status.message
        );
    }
    let api: Api<ConfigMapSync> = env.api();
    assert!(
        api.get_opt("configmapsync-sample")
            .await
            .expect("get")
            .is_none(),
        "nothing was stored"
    );

    // Names that are not DNS labels are rejected too, each named.
    let bad = serde_json::json!({
        "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
        "metadata": {"name": "bad"},
        "spec": {
            "sourceNamespace": "sourceNamespace",
            "destinationNamespace": "Not_A_Label",
            "configMapName": "app",
            "destinationNamespaces": ["ok", "-bad"],
            "deletionPolicy": "Sometimes"
        }
    });
    let status = rejection(&env, bad).await;
    assert_eq!(status.code, 422, "{status:?}");
    for field in [
        "spec.sourceNamespace",
        "spec.destinationNamespace",
        "spec.destinationNamespaces[1]",
        "spec.deletionPolicy",
    ] {
        assert!(
            status.message.contains(field),
            "{field}: {}",
            status.message
        );
    }

    // The tutorial's example with its Go types' JSON names is accepted.
    let good: ConfigMapSync = serde_saphyr::from_str(
        "apiVersion: apps.bixbite.io/v1
kind: ConfigMapSync
metadata:
  name: configmapsync-sample
spec:
  sourceNamespace: source
  destinationNamespace: destination
  configMapName: app-config
",
    )
    .expect("corrected sample");
    let created = api
        .create(&PostParams::default(), &good)
        .await
        .expect("the corrected example is accepted");
    assert_eq!(created.spec.config_map_name, "app-config");
    crds.delete(CRD_NAME, &DeleteParams::default())
        .await
        .expect("delete CRD");
    env.cleanup().await;
}
