//! Request bodies in protobuf (`application/vnd.kubernetes.protobuf`), as client-go's typed
//! clients (Helm, kubectl, controllers written in Go) send them for built-in kinds: DeleteOptions on
//! delete and deletecollection. The bytes are built the way client-go marshals them (the `k8s\0`
//! magic, then a `runtime.Unknown` envelope around the typed message).

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, PostParams};
use vigil_testenv::TestEnv;

use crate::support::{config_map, labelled_config_map, raw_request, sorted_names};

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// A protobuf varint.
fn varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// A length-delimited field (strings, bytes, nested messages).
fn field(num: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    varint((num << 3) | 2, &mut out);
    varint(bytes.len() as u64, &mut out);
    out.extend_from_slice(bytes);
    out
}

/// DeleteOptions with the given message fields, wrapped as client-go sends it (apiVersion `v1`,
/// empty contentEncoding and contentType written out, as gogo-protobuf does).
fn delete_options(message: &[u8]) -> Vec<u8> {
    let type_meta = [field(1, b"v1"), field(2, b"DeleteOptions")].concat();
    let mut body = b"k8s\0".to_vec();
    body.extend(field(1, &type_meta));
    body.extend(field(2, message));
    body.extend(field(3, b""));
    body.extend(field(4, b""));
    body
}

/// Exactly what Helm 4 sent for each release Secret on `helm uninstall` (captured): no options.
const HELM_DELETE_OPTIONS: &[u8] =
    b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\x22\x00";

#[tokio::test]
async fn delete_accepts_protobuf_delete_options() {
    let env = TestEnv::start().await.expect("test env");
    let ns = env.namespace().to_owned();
    let api: Api<ConfigMap> = env.api();
    for name in ["helm", "precondition", "dry-run"] {
        api.create(&PostParams::default(), &config_map(name))
            .await
            .expect("create");
    }
    let path = |name: &str| format!("/api/v1/namespaces/{ns}/configmaps/{name}");
    let client = env.client();

    let r = raw_request(
        &client,
        "DELETE",
        &path("helm"),
        Some(PROTOBUF),
        Some(HELM_DELETE_OPTIONS.to_vec()),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(api.get_opt("helm").await.expect("get").is_none());

    // preconditions { uid: "not-the-uid" } must be honoured, not ignored.
    let wrong_uid = field(2, &field(1, b"not-the-uid"));
    let r = raw_request(
        &client,
        "DELETE",
        &path("precondition"),
        Some(PROTOBUF),
        Some(delete_options(&wrong_uid)),
    )
    .await;
    assert_eq!(
        (r.status, r.json["reason"].as_str()),
        (409, Some("Conflict")),
        "{}",
        r.text
    );
    assert!(api.get_opt("precondition").await.expect("get").is_some());

    // dryRun: ["All"] deletes nothing.
    let r = raw_request(
        &client,
        "DELETE",
        &path("dry-run"),
        Some(PROTOBUF),
        Some(delete_options(&field(5, b"All"))),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    assert!(api.get_opt("dry-run").await.expect("get").is_some());

    env.cleanup().await;
}

#[tokio::test]
async fn deletecollection_accepts_protobuf_delete_options() {
    let env = TestEnv::start().await.expect("test env");
    let ns = env.namespace().to_owned();
    let api: Api<ConfigMap> = env.api();
    for (name, tier) in [("a", "web"), ("b", "web"), ("c", "db")] {
        api.create(
            &PostParams::default(),
            &labelled_config_map(name, &[("tier", tier)]),
        )
        .await
        .expect("create");
    }
    // propagationPolicy: "Background", as client-go's DeleteCollection callers usually pass.
    let body = delete_options(&field(4, b"Background"));
    let r = raw_request(
        &env.client(),
        "DELETE",
        &format!("/api/v1/namespaces/{ns}/configmaps?labelSelector=tier%3Dweb"),
        Some(PROTOBUF),
        Some(body),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text);
    let left = api
        .list(&ListParams::default().labels("tier"))
        .await
        .expect("list");
    assert_eq!(sorted_names(&left.items), ["c"]);
    env.cleanup().await;
}
