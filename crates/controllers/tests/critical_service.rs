//! CriticalService end to end: the controller runs in-process against a TestEnv (the sandbox
//! with its simulated kubelet by default), and the article's section 5.4 scenario plays out with
//! the article's own manifests.

use std::collections::BTreeSet;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Endpoints, Pod, PodTemplate, Service};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt as _;
use kube::api::{Api, DeleteParams, PostParams};
use tokio::sync::watch;
use vigil_apis::CriticalService;
use vigil_controllers::critical_service::controller;
use vigil_controllers::critical_service::model::{Settings, TemplateKey};
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::Metrics;
use vigil_testenv::{SETTLE_TIMEOUT, TestEnv, TestEnvOptions, wait_for};

/// The article's service.yaml.
const SERVICE: &str = "apiVersion: v1
kind: Service
metadata:
  name: frontend
  labels:
    role: frontend
spec:
  selector:
    role: frontend
  type: NodePort
  ports:
    - port: 80
";

/// The article's critical-service-pod-template.yaml (its namespace is the test's).
const POD_TEMPLATE: &str = "apiVersion: v1
kind: PodTemplate
metadata:
  namespace: linux-mag
  name: critical-service-pod-template
template:
  metadata:
    name: critical-service-pod
  spec:
    containers:
      - name: nginx
        image: nginx:1.7.9
";

/// The article's critical-service.yaml (its namespace is the test's).
const CRITICAL_SERVICE: &str = "apiVersion: mycrd.com/v1
kind: CriticalService
metadata:
  name: frontend
spec:
  namespace: default
  matchLabels:
    - key: role
      value: frontend
";

/// The article's nginx-pod.yaml.
const NGINX_POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: nginx
  labels:
    role: frontend
spec:
  containers:
    - name: nginx
      image: nginx:1.7.9
      ports:
        - containerPort: 80
";

fn parse<T: serde::de::DeserializeOwned>(yaml: &str, ns: &str) -> T {
    let yaml = yaml
        .replace("namespace: linux-mag", &format!("namespace: {ns}"))
        .replace("namespace: default", &format!("namespace: {ns}"));
    serde_saphyr::from_str(&yaml).expect("manifest")
}

/// Runs the controller for this test's namespace; dropping the sender stops it.
async fn start_controller(env: &TestEnv) -> watch::Sender<bool> {
    let crds: Api<CustomResourceDefinition> = Api::all(env.client());
    match crds
        .create(&PostParams::default(), &CriticalService::crd())
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 409 => {}
        Err(e) => panic!("create CRD: {e}"),
    }
    wait_for(
        "the CriticalService CRD to be served",
        SETTLE_TIMEOUT,
        || async {
            let api: Api<CriticalService> = Api::all(env.client());
            api.list(&Default::default())
                .await
                .map(|_| Some(()))
                .map_err(|e| e.to_string())
        },
    )
    .await
    .expect("CRD served");
    let settings = Settings {
        pod_name_prefix: "service-watcher".into(),
        default_template: TemplateKey {
            namespace: env.namespace().into(),
            name: "critical-service-pod-template".into(),
        },
        watched_namespaces: Some(BTreeSet::from([env.namespace().to_owned()])),
    };
    let (leading_tx, leading) = watch::channel(Leadership::Leading);
    let (stop, mut stopped) = watch::channel(false);
    let metrics = Metrics::new().controller(controller::NAME);
    let client = env.client();
    tokio::spawn(async move {
        let _keep = leading_tx;
        controller::run(client, settings, leading, metrics, |_| {}, async move {
            let _ = stopped.wait_for(|s| *s).await;
        })
        .await;
    });
    stop
}

async fn endpoint_ips(env: &TestEnv, service: &str) -> Result<Vec<String>, String> {
    let ep = env
        .api::<Endpoints>()
        .get_opt(service)
        .await
        .map_err(|e| e.to_string())?;
    Ok(ep
        .and_then(|e| e.subsets)
        .unwrap_or_default()
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| a.ip.clone())
        .collect())
}

async fn pod_ip(env: &TestEnv, name: &str) -> Option<String> {
    env.api::<Pod>()
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|p| p.status)
        .and_then(|s| s.pod_ip)
}

/// Section 5.4: a Service without endpoints becomes critical → the fallback pod answers; a real
/// pod arrives → the fallback goes; the real pod goes → the fallback comes back.
#[tokio::test]
async fn the_articles_scenario() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let _controller = start_controller(&env).await;

    env.api::<Service>()
        .create(&PostParams::default(), &parse(SERVICE, &ns))
        .await
        .expect("service.yaml");
    env.api::<PodTemplate>()
        .create(&PostParams::default(), &parse(POD_TEMPLATE, &ns))
        .await
        .expect("pod template");
    assert!(
        endpoint_ips(&env, "frontend")
            .await
            .unwrap_or_default()
            .is_empty(),
        "no endpoints yet"
    );

    let crs: Api<CriticalService> = Api::all(env.client());
    crs.create(&PostParams::default(), &parse(CRITICAL_SERVICE, &ns))
        .await
        .expect("critical-service.yaml");

    // The fallback pod runs and becomes the Service's endpoint.
    let fallback_ip = wait_for(
        "service-watcher-frontend to be the endpoint",
        SETTLE_TIMEOUT,
        || async {
            let ip = pod_ip(&env, "service-watcher-frontend").await;
            let ips = endpoint_ips(&env, "frontend").await?;
            match ip {
                Some(ip) if ips == vec![ip.clone()] => Ok(Some(ip)),
                _ => Err(format!("fallback ip {ip:?}, endpoints {ips:?}")),
            }
        },
    )
    .await
    .expect("fallback answers");
    let fallback = env
        .api::<Pod>()
        .get("service-watcher-frontend")
        .await
        .expect("fallback");
    let annotations = fallback.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get("service-watcher").map(String::as_str),
        Some("owned"),
        "the article's annotation"
    );
    let owner = &fallback.metadata.owner_references.as_ref().expect("owner")[0];
    assert_eq!(
        (owner.kind.as_str(), owner.name.as_str()),
        ("CriticalService", "frontend")
    );

    // The real nginx pod arrives: the fallback goes, and nginx is the endpoint.
    env.api::<Pod>()
        .create(&PostParams::default(), &parse(NGINX_POD, &ns))
        .await
        .expect("nginx-pod.yaml");
    let nginx_ip = wait_for("nginx to replace the fallback", SETTLE_TIMEOUT, || async {
        let fallback_left = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        let ip = pod_ip(&env, "nginx").await;
        let ips = endpoint_ips(&env, "frontend").await?;
        match ip {
            Some(ip) if !fallback_left && ips == vec![ip.clone()] => Ok(Some(ip)),
            _ => Err(format!(
                "fallback still there: {fallback_left}, endpoints {ips:?}"
            )),
        }
    })
    .await
    .expect("fallback retired");
    assert_ne!(nginx_ip, fallback_ip);

    // The status tells the story.
    let cr = crs.get("frontend").await.expect("cr");
    let status = cr.status.expect("status written");
    assert_eq!((status.covered, status.fallback_active), (1, 0));

    // nginx goes away: the fallback comes back.
    env.delete_pod_as_kubelet_would("nginx")
        .await
        .expect("delete nginx");
    wait_for("the fallback to come back", SETTLE_TIMEOUT, || async {
        let ready = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?
            .is_some();
        Ok(ready.then_some(()))
    })
    .await
    .expect("fallback again");

    // Deleting the CriticalService removes its fallback (garbage collection via ownerReference).
    crs.delete("frontend", &DeleteParams::background())
        .await
        .expect("delete CR");
    wait_for("the fallback to be collected", SETTLE_TIMEOUT, || async {
        let left = env
            .api::<Pod>()
            .get_opt("service-watcher-frontend")
            .await
            .map_err(|e| e.to_string())?;
        Ok(left.is_none().then_some(()))
    })
    .await
    .expect("fallback collected");
    env.cleanup().await;
}

/// A pod Vigil did not create, with the fallback's name, is never touched.
#[tokio::test]
async fn a_foreign_pod_with_the_fallback_name_is_left_alone() {
    let env = TestEnv::start_with(TestEnvOptions::with_kubelet())
        .await
        .expect("env");
    vigil_testenv::require_sandbox!(env);
    let ns = env.namespace().to_owned();
    let _controller = start_controller(&env).await;
    env.api::<PodTemplate>()
        .create(&PostParams::default(), &parse(POD_TEMPLATE, &ns))
        .await
        .expect("pod template");
    // Not selected by the Service (other labels), but squatting the fallback's name.
    let squatter: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "service-watcher-frontend", "labels": {"app": "other"}},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}
    }))
    .expect("pod");
    let squatter = env
        .api::<Pod>()
        .create(&PostParams::default(), &squatter)
        .await
        .expect("squatter");
    env.api::<Service>()
        .create(&PostParams::default(), &parse(SERVICE, &ns))
        .await
        .expect("service");
    let crs: Api<CriticalService> = Api::all(env.client());
    crs.create(&PostParams::default(), &parse(CRITICAL_SERVICE, &ns))
        .await
        .expect("cr");
    let degraded = wait_for(
        "the CriticalService to report Degraded",
        SETTLE_TIMEOUT,
        || async {
            let cr = crs.get("frontend").await.map_err(|e| e.to_string())?;
            let conditions = cr.status.map(|s| s.conditions).unwrap_or_default();
            let d = conditions
                .into_iter()
                .find(|c| c.type_ == "Degraded" && c.status == "True");
            Ok(d)
        },
    )
    .await
    .expect("degraded");
    assert_eq!(degraded.reason, "ForeignPodInTheWay");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let still = env
        .api::<Pod>()
        .get("service-watcher-frontend")
        .await
        .expect("still there");
    assert_eq!(
        still.metadata.uid, squatter.metadata.uid,
        "never deleted or replaced"
    );
    assert_eq!(
        still.metadata.labels, squatter.metadata.labels,
        "never modified"
    );
    crs.delete("frontend", &DeleteParams::background())
        .await
        .expect("delete CR");
    env.cleanup().await;
}
