//! The generated CRDs against an API server (a fresh sandbox, or `VIGIL_TEST_KUBECONFIG`'s
//! cluster): accepted as structural, the article's manifests apply unchanged, bad input is
//! rejected with 422, and Vigil's CRD can replace the article's hand-written one in place.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use vigil_apis::CriticalService;
use vigil_testenv::{TestEnv, wait_for};

/// The article's CRD (critical-service-crd.yaml), unchanged.
const ARTICLE_CRD: &str = r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: criticalservices.mycrd.com
spec:
  group: mycrd.com
  versions:
    - name: v1
      served: true
      storage: true
      schema:
        openAPIV3Schema:
          type: object
          properties:
            spec:
              type: object
              properties:
                namespace:
                  type: string
                matchLabels:
                  type: array
                  items:
                    type: object
                    properties:
                      key:
                        type: string
                      value:
                        type: string
              required: ["matchLabels"]
  scope: Cluster
  names:
    plural: criticalservices
    singular: criticalservice
    kind: CriticalService
    shortNames:
      - crisvc
"#;

/// The article's CriticalService (critical-service.yaml), unchanged.
const ARTICLE_CR: &str = "apiVersion: mycrd.com/v1
kind: CriticalService
metadata:
  name: frontend
spec:
  namespace: default
  matchLabels:
    - key: role
      value: frontend
";

async fn established(crds: &Api<CustomResourceDefinition>) {
    wait_for(
        "the CriticalService CRD to be Established",
        Duration::from_secs(10),
        || async {
            let crd = crds
                .get("criticalservices.mycrd.com")
                .await
                .map_err(|e| e.to_string())?;
            let ok = crd
                .status
                .and_then(|s| s.conditions)
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            Ok(ok.then_some(()))
        },
    )
    .await
    .expect("established");
}

// These tests create and delete the cluster-wide `criticalservices.mycrd.com` CRD, which a real
// cluster may be using (Vigil itself, or the article's controller): they run on the sandbox only,
// where each test has its own server.
#[tokio::test]
async fn generated_crd_serves_the_articles_manifests() {
    let env = TestEnv::start().await.expect("env");
    vigil_testenv::require_sandbox!(env);
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    crds.create(&PostParams::default(), &CriticalService::crd())
        .await
        .expect("the generated CRD is accepted");
    established(&crds).await;

    let cr: CriticalService = serde_saphyr::from_str(ARTICLE_CR).expect("article CR");
    let api: Api<CriticalService> = Api::all(env.client());
    let created = api
        .create(&PostParams::default(), &cr)
        .await
        .expect("the article's CR applies");
    assert_eq!(created.spec.match_labels.len(), 1);

    // Bad input is rejected by the schema with the field named.
    let bad: serde_json::Value = serde_json::json!({
        "apiVersion": "mycrd.com/v1", "kind": "CriticalService",
        "metadata": {"name": "bad"},
        "spec": {"namespace": "default", "matchLabels": [], "activationDelaySeconds": -1}
    });
    // Sent untyped: the Rust type could not even express these values.
    let resource = kube::api::ApiResource::erase::<CriticalService>(&());
    let dynamic: Api<kube::api::DynamicObject> = Api::all_with(env.client(), &resource);
    let err = dynamic
        .create(
            &PostParams::default(),
            &serde_json::from_value(bad).expect("json"),
        )
        .await
        .expect_err("rejected");
    match err {
        kube::Error::Api(s) => {
            assert_eq!(s.code, 422, "{s:?}");
            assert!(s.message.contains("spec.matchLabels"), "{}", s.message);
            assert!(
                s.message.contains("spec.activationDelaySeconds"),
                "{}",
                s.message
            );
        }
        other => panic!("unexpected error: {other:?}"),
    }
    crds.delete("criticalservices.mycrd.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    env.cleanup().await;
}

#[tokio::test]
async fn vigils_crd_replaces_the_articles_in_place() {
    let env = TestEnv::start().await.expect("env");
    vigil_testenv::require_sandbox!(env);
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    let article: CustomResourceDefinition =
        serde_saphyr::from_str(ARTICLE_CRD).expect("article CRD");
    crds.create(&PostParams::default(), &article)
        .await
        .expect("the article's CRD applies");
    established(&crds).await;
    let api: Api<CriticalService> = Api::all(env.client());
    let cr: CriticalService = serde_saphyr::from_str(ARTICLE_CR).expect("article CR");
    api.create(&PostParams::default(), &cr)
        .await
        .expect("CR under the article's CRD");

    // Upgrading to Vigil's CRD keeps the object and adds the status subresource.
    let ours = serde_json::to_value(CriticalService::crd()).expect("crd json");
    crds.patch(
        "criticalservices.mycrd.com",
        &PatchParams::apply("vigil").force(),
        &Patch::Apply(&ours),
    )
    .await
    .expect("upgrade the CRD in place");
    established(&crds).await;
    let kept = api
        .get("frontend")
        .await
        .expect("the object survives the upgrade");
    assert_eq!(kept.spec.namespace.as_deref(), Some("default"));
    let status = serde_json::json!({"status": {"covered": 1, "lame": 0, "fallbackActive": 0}});
    let patched = api
        .patch_status("frontend", &PatchParams::default(), &Patch::Merge(&status))
        .await
        .expect("status subresource after the upgrade");
    assert_eq!(patched.status.map(|s| s.covered), Some(1));
    crds.delete("criticalservices.mycrd.com", &DeleteParams::default())
        .await
        .expect("delete CRD");
    env.cleanup().await;
}
