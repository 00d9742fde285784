//! Helpers shared by the conformance tests.

use k8s_openapi::api::core::v1::ConfigMap;
use serde_json::json;

/// A ConfigMap named `name` with one data entry.
pub fn config_map(name: &str) -> ConfigMap {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name},
        "data": {"key": "value"}
    }))
    .expect("valid ConfigMap")
}

// ---------------------------------------------------------------------------------------------
// Helpers for the patch, CRD, discovery and kubectl tests: API errors, raw HTTP, polling, CRDs.
// ---------------------------------------------------------------------------------------------

/// How long [`poll_until`] waits before giving up.
pub const POLL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// The `Status` of a request that must fail with `code` and `reason`; panics with the actual
/// outcome otherwise.
pub fn expect_status<T: std::fmt::Debug>(
    result: Result<T, kube::Error>,
    code: u16,
    reason: &str,
) -> kube::core::Status {
    match result {
        Err(kube::Error::Api(status)) => {
            assert_eq!(
                (status.code, status.reason.as_str()),
                (code, reason),
                "unexpected status: {status:?}"
            );
            *status
        }
        other => panic!("expected a {code} {reason} API error, got {other:?}"),
    }
}

/// Polls `check` every 100 ms until it returns `Some`, for at most [`POLL_TIMEOUT`].
pub async fn poll_until<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + POLL_TIMEOUT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {POLL_TIMEOUT:?} waiting for {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The answer to a raw HTTP request.
#[derive(Debug)]
pub struct RawResponse {
    pub status: u16,
    pub headers: http::HeaderMap,
    /// The body as text.
    pub text: String,
    /// The body as JSON (`Null` when it is not JSON).
    pub json: serde_json::Value,
}

/// Sends `method path_and_query` (relative to the server) with an optional body and content type.
pub async fn raw_request(
    client: &kube::Client,
    method: &str,
    path_and_query: &str,
    content_type: Option<&str>,
    body: Option<Vec<u8>>,
) -> RawResponse {
    let mut builder = http::Request::builder()
        .method(method)
        .uri(path_and_query)
        .header(http::header::ACCEPT, "application/json");
    if let Some(content_type) = content_type {
        builder = builder.header(http::header::CONTENT_TYPE, content_type);
    }
    let request = builder
        .body(kube::client::Body::from(body.unwrap_or_default()))
        .expect("valid request");
    let response = client.send(request).await.expect("send raw request");
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response
        .into_body()
        .collect_bytes()
        .await
        .expect("read response body");
    let text = String::from_utf8_lossy(&bytes).into_owned();
    let json = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
    RawResponse {
        status,
        headers,
        text,
        json,
    }
}

/// A fresh API group for this test's CRDs: cluster-scoped names must not clash between tests
/// running in parallel on one cluster.
pub fn test_group(namespace: &str, tag: &str) -> String {
    format!("{tag}.{namespace}.example.com")
}

/// A namespaced CRD `<plural>.<group>` serving `v1` with a status subresource, a spec with typed
/// `size` (string) and `replicas` (integer) that keeps unknown fields, and a `status.phase` field.
pub fn simple_crd(group: &str, kind: &str, plural: &str) -> serde_json::Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}"), "labels": {vigil_testenv::TEST_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "listKind": format!("{kind}List")},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "subresources": {"status": {}},
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "properties": {"size": {"type": "string"}, "replicas": {"type": "integer"}}
                        },
                        "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
                    }
                }}
            }]
        }
    })
}

/// Creates a CRD from its JSON manifest and waits until it is `Established` and every served
/// version answers a list.
pub async fn create_crd(
    client: &kube::Client,
    manifest: serde_json::Value,
) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crd: CustomResourceDefinition =
        serde_json::from_value(manifest).expect("valid CRD manifest");
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let created = api
        .create(&kube::api::PostParams::default(), &crd)
        .await
        .expect("create CRD");
    let name = created.metadata.name.clone().expect("CRD name");
    wait_crd_established(client, &name).await;
    created
}

/// Waits until the CRD `name` is `Established` and every served version answers a list.
pub async fn wait_crd_established(client: &kube::Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let crd = poll_until(&format!("CRD {name} to be Established"), || async {
        let crd = api.get(name).await.ok()?;
        let conditions = crd.status.as_ref()?.conditions.as_ref()?;
        conditions
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(crd)
    })
    .await;
    for version in crd.spec.versions.iter().filter(|v| v.served) {
        let path = format!(
            "/apis/{}/{}/{}",
            crd.spec.group, version.name, crd.spec.names.plural
        );
        poll_until(&format!("{path} to be served"), || async {
            (raw_request(client, "GET", &path, None, None).await.status == 200).then_some(())
        })
        .await;
    }
}

/// Deletes the CRD `name` (if present) and waits until it is gone.
pub async fn delete_crd(client: &kube::Client, name: &str) {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    match api.delete(name, &kube::api::DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.code == 404 => return,
        Err(e) => panic!("delete CRD {name}: {e:?}"),
    }
    poll_until(&format!("CRD {name} to be deleted"), || async {
        matches!(api.get(name).await, Err(kube::Error::Api(ref s)) if s.code == 404).then_some(())
    })
    .await;
}

// ---------------------------------------------------------------------------------------------
// Helpers for the errors, list, watch, finalizer, status, lifecycle and robustness tests:
// polling with an explicit timeout, resourceVersions, watch events and finalizers.
// ---------------------------------------------------------------------------------------------

/// How long a watch test waits for one event before failing.
pub const EVENT_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// Polls `check` every 50 ms until it returns `true`; panics naming `what` after `timeout`
/// (at most 60 s).
pub async fn wait_until<F, Fut>(timeout: std::time::Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let timeout = timeout.min(std::time::Duration::from_secs(60));
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if check().await {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out after {timeout:?} waiting until {what}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}

/// The object's resourceVersion as a number (real servers use etcd revisions).
pub fn rv_of<K: kube::Resource>(obj: &K) -> u64 {
    let rv = obj.meta().resource_version.as_deref().unwrap_or_default();
    rv.parse().unwrap_or_else(|_| {
        panic!(
            "resourceVersion {rv:?} of {:?} is not numeric",
            obj.meta().name
        )
    })
}

/// A ConfigMap named `name` with one data entry and the given labels.
pub fn labelled_config_map(
    name: &str,
    labels: &[(&str, &str)],
) -> k8s_openapi::api::core::v1::ConfigMap {
    let mut cm = config_map(name);
    cm.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    cm
}

/// The sorted names of `items`.
pub fn sorted_names<K: kube::Resource>(items: &[K]) -> Vec<String> {
    let mut names: Vec<String> = items
        .iter()
        .map(|o| o.meta().name.clone().unwrap_or_default())
        .collect();
    names.sort();
    names
}

/// Whether `name` is gone (GET answers 404); panics on any other error.
pub async fn is_gone<K>(api: &kube::Api<K>, name: &str) -> bool
where
    K: kube::Resource + Clone + k8s_openapi::serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.get(name).await {
        Ok(_) => false,
        Err(kube::Error::Api(s)) if s.code == 404 => true,
        Err(e) => panic!("get {name}: {e:?}"),
    }
}

/// The next non-bookmark event of a watch stream; panics if the stream ends, fails, or stays
/// silent for [`EVENT_TIMEOUT`]. `ERROR` events are returned.
pub async fn next_event<K, S>(stream: &mut S, what: &str) -> kube::api::WatchEvent<K>
where
    S: futures::Stream<Item = Result<kube::api::WatchEvent<K>, kube::Error>> + Unpin,
{
    use futures::StreamExt as _;
    loop {
        match tokio::time::timeout(EVENT_TIMEOUT, stream.next()).await {
            Err(_) => panic!("no watch event within {EVENT_TIMEOUT:?} while waiting for {what}"),
            Ok(None) => panic!("watch stream ended while waiting for {what}"),
            Ok(Some(Err(e))) => panic!("watch stream failed while waiting for {what}: {e:?}"),
            Ok(Some(Ok(kube::api::WatchEvent::Bookmark(_)))) => continue,
            Ok(Some(Ok(event))) => return event,
        }
    }
}

/// `(type, name, resourceVersion)` of a watch event carrying an object; panics on others.
pub fn event_summary<K: kube::Resource>(
    event: &kube::api::WatchEvent<K>,
) -> (&'static str, String, u64) {
    let (kind, obj) = match event {
        kube::api::WatchEvent::Added(o) => ("ADDED", o),
        kube::api::WatchEvent::Modified(o) => ("MODIFIED", o),
        kube::api::WatchEvent::Deleted(o) => ("DELETED", o),
        other => panic!("expected an object event, got {other:?}"),
    };
    (
        kind,
        obj.meta().name.clone().unwrap_or_default(),
        rv_of(obj),
    )
}

/// Removes `finalizer` from the object `name` (re-reading on conflicts: controllers may write it).
pub async fn remove_finalizer<K>(api: &kube::Api<K>, name: &str, finalizer: &str)
where
    K: kube::Resource
        + Clone
        + k8s_openapi::serde::de::DeserializeOwned
        + k8s_openapi::serde::Serialize
        + std::fmt::Debug,
{
    for _ in 0..20 {
        let mut obj = match api.get(name).await {
            Ok(obj) => obj,
            Err(kube::Error::Api(s)) if s.code == 404 => return,
            Err(e) => panic!("get {name}: {e:?}"),
        };
        let finalizers = obj.meta_mut().finalizers.get_or_insert_default();
        if !finalizers.iter().any(|f| f == finalizer) {
            return;
        }
        finalizers.retain(|f| f != finalizer);
        match api
            .replace(name, &kube::api::PostParams::default(), &obj)
            .await
        {
            Ok(_) => return,
            Err(kube::Error::Api(s)) if s.code == 409 || s.code == 404 => continue,
            Err(e) => panic!("remove finalizer {finalizer} from {name}: {e:?}"),
        }
    }
    panic!("could not remove finalizer {finalizer} from {name}: too many conflicts");
}
