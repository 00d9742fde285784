//! A cache of a kind the API may not serve (`runtime.cache::<K>().optional()`), end to end: with
//! the CRD absent it counts as synced and empty (a plain cache never syncs: its list answers 404),
//! and installing the CRD later fills it, with no restart. This is what lets the status vault run
//! idle in a cluster without the StatusBackupPolicy CRD and wake up when it is installed.
//! A controller on a plain cache of that kind is not ready, and `/readyz` says why and what to do.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ObjectMeta, PostParams};
use kube::runtime::controller::Action;
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use vigil_runtime::Manager;
use vigil_runtime::cache::Source as _;
use vigil_testenv::wait_for;

/// Only this test installs this group, so its CRD's absence is the test's own doing.
const GROUP: &str = "optional-cache.test.vigil.dev";
const CRD_NAME: &str = "gadgets.optional-cache.test.vigil.dev";
const TIMEOUT: Duration = Duration::from_secs(30);

/// A cluster-scoped custom resource with nothing but metadata.
#[derive(Clone, Debug, Default, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Gadget {
    api_version: String,
    kind: String,
    metadata: ObjectMeta,
}

impl Resource for Gadget {
    type DynamicType = ();
    type Scope = k8s_openapi::ClusterResourceScope;

    fn kind(_: &()) -> Cow<'_, str> {
        "Gadget".into()
    }
    fn group(_: &()) -> Cow<'_, str> {
        GROUP.into()
    }
    fn version(_: &()) -> Cow<'_, str> {
        "v1".into()
    }
    fn plural(_: &()) -> Cow<'_, str> {
        "gadgets".into()
    }
    fn meta(&self) -> &ObjectMeta {
        &self.metadata
    }
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

fn crd() -> CustomResourceDefinition {
    serde_json::from_value(serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": CRD_NAME},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"kind": "Gadget", "plural": "gadgets", "singular": "gadget", "listKind": "GadgetList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}
            }]
        }
    }))
    .expect("a CRD")
}

/// Deletes the CRD (left by an earlier run against the same cluster) and waits until the API no
/// longer serves the kind.
async fn remove_crd(client: &Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    match crds.delete(CRD_NAME, &DeleteParams::default()).await {
        Ok(_) | Err(kube::Error::Api(_)) => {}
        Err(e) => panic!("delete CRD: {e}"),
    }
    let gadgets: Api<Gadget> = Api::all(client.clone());
    wait_for("the Gadget kind to be unserved", TIMEOUT, || async {
        match gadgets.list(&Default::default()).await {
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(Some(())),
            other => Err(format!("{:?}", other.map(|l| l.items.len()))),
        }
    })
    .await
    .expect("CRD removed");
}

#[tokio::test]
async fn an_optional_cache_of_an_unserved_kind_is_synced_and_fills_once_it_is_served() {
    let env = vigil_testenv::TestEnv::start().await.expect("env");
    let client = env.client();
    remove_crd(&client).await;
    let mut manager = Manager::for_client("test", client.clone())
        .metrics_addr("127.0.0.1:0".parse().expect("an address"))
        .missing_kind_hint("apply the test's CRD")
        .build()
        .await
        .expect("a manager");
    let addr = manager.metrics_addr().expect("probes served");
    let optional = manager.runtime().cache::<Gadget>().optional().build();
    let plain = manager.runtime().cache::<Gadget>().build();
    manager.add("gadgets", |rt| async move {
        let gadgets = rt.cache::<Gadget>().build();
        let reconcile =
            |_: Arc<Gadget>, _: Arc<()>| async { Ok::<_, std::io::Error>(Action::await_change()) };
        rt.controller(&gadgets).run(reconcile, Arc::new(())).await;
    });
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(manager.run_until(async {
        let _ = stopped.await;
    }));
    let reason = "[-]gadgets not ready: the API server does not serve Gadget \
                  (optional-cache.test.vigil.dev/v1) (is its CRD installed? apply the test's CRD)";
    wait_for(
        "/readyz to say why the controller is not ready",
        TIMEOUT,
        || async {
            let (status, body) = readyz(addr).await;
            if status.contains("503") && body.contains(reason) {
                Ok(Some(()))
            } else {
                Err(format!("{status}\n{body}"))
            }
        },
    )
    .await
    .expect("the reason on /readyz");

    let synced = tokio::time::timeout(TIMEOUT, optional.synced().wait()).await;
    assert_eq!(synced, Ok(true), "the optional cache syncs, empty");
    assert!(optional.state().is_empty());
    assert!(
        !plain.synced().is_synced(),
        "a plain cache of an unserved kind never syncs"
    );

    vigil_testenv::install_crd(&client, &crd())
        .await
        .expect("install the CRD");
    let gadget = Gadget {
        api_version: format!("{GROUP}/v1"),
        kind: "Gadget".into(),
        metadata: ObjectMeta {
            name: Some(format!("g-{}", env.namespace())),
            ..ObjectMeta::default()
        },
    };
    Api::<Gadget>::all(client.clone())
        .create(&PostParams::default(), &gadget)
        .await
        .expect("create a gadget");
    let name = gadget.metadata.name.clone();
    wait_for("the gadget in the optional cache", TIMEOUT, || {
        let optional = optional.clone();
        let name = name.clone();
        async move {
            let names: Vec<_> = optional
                .state()
                .iter()
                .map(|g| g.metadata.name.clone())
                .collect();
            if names.contains(&name) {
                Ok(Some(()))
            } else {
                Err(format!("cached: {names:?}"))
            }
        }
    })
    .await
    .expect("filled once served");
    wait_for(
        "the controller ready once its kind is served",
        TIMEOUT,
        || async {
            let (status, body) = readyz(addr).await;
            if status.contains("200") && body.contains("[+]gadgets ok") {
                Ok(Some(()))
            } else {
                Err(format!("{status}\n{body}"))
            }
        },
    )
    .await
    .expect("ready");
    let _ = stop.send(());
    let _ = tokio::time::timeout(TIMEOUT, running).await;
    remove_crd(&client).await;
}

/// GET `/readyz` on `addr`: the status line and the body.
async fn readyz(addr: SocketAddr) -> (String, String) {
    let Ok(mut stream) = tokio::net::TcpStream::connect(addr).await else {
        return ("unreachable".into(), String::new());
    };
    let request = "GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
    let mut response = String::new();
    if stream.write_all(request.as_bytes()).await.is_err()
        || stream.read_to_string(&mut response).await.is_err()
    {
        return ("no answer".into(), String::new());
    }
    let status = response.lines().next().unwrap_or_default().to_owned();
    let body = response
        .split("\r\n\r\n")
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    (status, body)
}
