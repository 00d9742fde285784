//! Fuzz targets `sandbox-*`: the sandbox API server's request decoding, fed what any client could
//! send — through its HTTP front door, so that each input takes the path a real request takes
//! (content type dispatch, decoding, `apiVersion`/`kind` checks, patching, defaulting, validation,
//! selectors, paging).
//!
//! | target | request |
//! |---|---|
//! | `sandbox-json`, `sandbox-yaml`, `sandbox-protobuf` | the input as a create body, POSTed to the resource its kind names |
//! | `sandbox-json-patch`, `sandbox-merge-patch`, `sandbox-strategic-merge-patch`, `sandbox-apply-patch` | the input as a PATCH of the Deployment `web` (the richest merge keys) |
//! | `sandbox-delete-options` | the input as a DELETE body (JSON, or protobuf when it starts with `k8s\0`) |
//! | `sandbox-label-selector`, `sandbox-field-selector` | the input as `labelSelector` / `fieldSelector` of a list |
//! | `sandbox-list-query` | the input as the whole query string of a list (`limit`, `continue`, `resourceVersion`, …) |
//!
//! Patches and deletes are dry runs (`dryRun=All`), so that each meets the same object; creates
//! are too, except one in four, which then also goes through the store and the watch cache. The server runs in this process, without its control loops (what
//! they make of hostile objects is not request decoding); a panic on any of its tasks counts.
//! Besides never panicking, it answers every request, within 5 s, and never with a `5xx`: a
//! malformed request is the client's error.
//!
//! Corpora: the protobuf bodies kubectl and Helm sent (captured for the wire decoder's tests, in
//! `crates/sandbox/src/wire/tests.rs`); the objects, patches and selectors of the sandbox's own
//! tests and of kubectl's (`kubectl apply`'s strategic merge patches with their directives,
//! `kubectl patch --type json|merge`, server-side apply configurations); see each file.

use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use vigil_sandbox::{Loops, Sandbox, SandboxConfig};

/// Kinds a create body may name, longest first (a body naming `ClusterRoleBinding` also
/// contains `RoleBinding`), and where they are created.
const KINDS: &[(&str, &str)] = &[
    (
        "CustomResourceDefinition",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    ),
    (
        "ClusterRoleBinding",
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
    ),
    ("ServiceAccount", "/api/v1/namespaces/fuzz/serviceaccounts"),
    (
        "ClusterRole",
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    ),
    (
        "RoleBinding",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/fuzz/rolebindings",
    ),
    ("StatefulSet", "/apis/apps/v1/namespaces/fuzz/statefulsets"),
    ("PodTemplate", "/api/v1/namespaces/fuzz/podtemplates"),
    ("Deployment", "/apis/apps/v1/namespaces/fuzz/deployments"),
    ("ReplicaSet", "/apis/apps/v1/namespaces/fuzz/replicasets"),
    ("DaemonSet", "/apis/apps/v1/namespaces/fuzz/daemonsets"),
    ("Namespace", "/api/v1/namespaces"),
    ("ConfigMap", "/api/v1/namespaces/fuzz/configmaps"),
    (
        "Lease",
        "/apis/coordination.k8s.io/v1/namespaces/fuzz/leases",
    ),
    ("Secret", "/api/v1/namespaces/fuzz/secrets"),
    ("Service", "/api/v1/namespaces/fuzz/services"),
    (
        "Role",
        "/apis/rbac.authorization.k8s.io/v1/namespaces/fuzz/roles",
    ),
    ("Job", "/apis/batch/v1/namespaces/fuzz/jobs"),
    ("Pod", "/api/v1/namespaces/fuzz/pods"),
];

const WEB: &str = "/apis/apps/v1/namespaces/fuzz/deployments/web";

/// One sandbox for every target of this binary (tests run on several threads: each request is
/// its own connection).
struct Server {
    runtime: tokio::runtime::Runtime,
    sandbox: Sandbox,
}

fn server() -> &'static Server {
    static SERVER: std::sync::OnceLock<Server> = std::sync::OnceLock::new();
    SERVER.get_or_init(|| {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let sandbox = runtime
            .block_on(Sandbox::start(SandboxConfig {
                loops: Loops {
                    namespace_lifecycle: false,
                    garbage_collector: false,
                    endpoints: false,
                    deployments: false,
                    replicasets: false,
                    jobs: false,
                    statefulsets: false,
                    daemonsets: false,
                },
                ..SandboxConfig::default()
            }))
            .expect("sandbox");
        let server = Server { runtime, sandbox };
        for (path, body) in [
            (
                "/api/v1/namespaces",
                r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"fuzz"}}"#,
            ),
            (
                "/apis/apps/v1/namespaces/fuzz/deployments",
                r#"{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","labels":{"app":"web","tier":"front"}},
                "spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
                "spec":{"containers":[{"name":"web","image":"nginx:1.25","ports":[{"containerPort":80,"name":"http"}],
                "env":[{"name":"A","value":"1"},{"name":"B","valueFrom":{"fieldRef":{"fieldPath":"metadata.name"}}}],
                "volumeMounts":[{"name":"conf","mountPath":"/etc/conf"}]},{"name":"sidecar","image":"busybox","args":["sleep","1d"]}],
                "volumes":[{"name":"conf","configMap":{"name":"conf"}}],"tolerations":[{"key":"a","operator":"Exists"}]}}}}"#,
            ),
            (
                "/api/v1/namespaces/fuzz/configmaps",
                r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"conf","labels":{"app":"web","env":"prod"}},"data":{"a":"1"}}"#,
            ),
            (
                "/api/v1/namespaces/fuzz/pods",
                r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p1","labels":{"app":"web"}},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"busybox"}]}}"#,
            ),
        ] {
            let (status, answer) = server
                .request("POST", path, "application/json", body.as_bytes())
                .expect("seed object");
            assert_eq!(status, 201, "{path}: {answer}");
        }
        server
    })
}

impl Server {
    /// One request on its own connection; the status and body, or why there was none.
    fn request(
        &self,
        method: &str,
        path_and_query: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<(u16, String), String> {
        let addr = self.sandbox.addr();
        self.runtime.block_on(async {
            let exchange = async {
                let mut socket = tokio::net::TcpStream::connect(addr)
                    .await
                    .map_err(|e| format!("connect: {e}"))?;
                let head = format!(
                    "{method} {path_and_query} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nuser-agent: vigil-fuzz\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                socket
                    .write_all(head.as_bytes())
                    .await
                    .map_err(|e| format!("write: {e}"))?;
                socket
                    .write_all(body)
                    .await
                    .map_err(|e| format!("write: {e}"))?;
                let mut answer = Vec::new();
                socket
                    .read_to_end(&mut answer)
                    .await
                    .map_err(|e| format!("read: {e}"))?;
                let text = String::from_utf8_lossy(&answer).into_owned();
                let status = text
                    .get(9..12)
                    .and_then(|s| s.parse::<u16>().ok())
                    .ok_or_else(|| format!("no answer (the connection closed): {text:?}"))?;
                let body = text
                    .split_once("\r\n\r\n")
                    .map(|(_, b)| b.to_owned())
                    .unwrap_or_default();
                Ok((status, body))
            };
            tokio::time::timeout(Duration::from_secs(5), exchange)
                .await
                .map_err(|_| "no answer within 5 s".to_owned())?
        })
    }

    /// A request that must be answered, without a panic anywhere and without a 5xx.
    fn check(
        &self,
        method: &str,
        path_and_query: &str,
        content_type: &str,
        body: &[u8],
    ) -> Result<(), String> {
        // One request at a time, so that a panic is the one of this request.
        static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
        let before = vigil_fuzz::panics();
        let answer = self.request(method, path_and_query, content_type, body);
        let after = vigil_fuzz::panics();
        if after != before {
            return Err(format!(
                "{method} {path_and_query}: the server panicked (see above)"
            ));
        }
        match answer {
            Err(e) => Err(format!("{method} {path_and_query}: {e}")),
            Ok((status, text)) if status >= 500 => Err(format!(
                "{method} {path_and_query}: answered {status}: {text}"
            )),
            Ok(_) => Ok(()),
        }
    }
}

/// `dryRun=All` for three inputs in four, by their bytes (so that a replay does the same).
fn dry_run(input: &[u8]) -> &'static str {
    let sum = input
        .iter()
        .fold(0u32, |a, b| a.wrapping_mul(31).wrapping_add(u32::from(*b)));
    if sum % 4 == 0 { "" } else { "dryRun=All&" }
}

fn create_path(input: &[u8]) -> &'static str {
    KINDS
        .iter()
        .find(|(kind, _)| input.windows(kind.len()).any(|w| w == kind.as_bytes()))
        .map_or("/api/v1/namespaces/fuzz/configmaps", |(_, path)| path)
}

fn create(content_type: &'static str) -> impl Fn(&[u8]) -> Result<(), String> {
    move |input| {
        let path = format!(
            "{}?{}fieldManager=fuzz&fieldValidation=Strict",
            create_path(input),
            dry_run(input)
        );
        server().check("POST", &path, content_type, input)
    }
}

fn patch(content_type: &'static str) -> impl Fn(&[u8]) -> Result<(), String> {
    move |input| {
        let force = if input.len() % 2 == 0 {
            "&force=true"
        } else {
            ""
        };
        // Always a dry run: every patch meets the same Deployment, so a failure replays alone.
        let path = format!("{WEB}?dryRun=All&fieldManager=fuzz{force}");
        server().check("PATCH", &path, content_type, input)
    }
}

/// Percent-encodes every byte but unreserved ones.
fn query_value(input: &[u8]) -> String {
    input
        .iter()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(*b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn run(
    target: &str,
    dictionary: &'static [&'static [u8]],
    check: impl Fn(&[u8]) -> Result<(), String>,
) {
    let _ = server();
    vigil_fuzz::fuzz(
        target,
        vigil_fuzz::corpus_and_random(target, dictionary),
        check,
    );
}

const OBJECT_TOKENS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b"\"",
    b":",
    b",",
    b"null",
    b"true",
    b"-1",
    b"1e999",
    b"\"\"",
    b"\"metadata\":",
    b"\"name\":",
    b"\"labels\":",
    b"\"spec\":",
    b"\"apiVersion\":\"v1\"",
    b"\"kind\":\"ConfigMap\"",
    b"\"kind\":\"Deployment\"",
    b"\"generateName\":\"a-\"",
    b"\"finalizers\":[\"a/b\"]",
    b"\"ownerReferences\":[{}]",
    b"\"resourceVersion\":\"x\"",
    b"\"managedFields\":[{}]",
    b"\"creationTimestamp\":\"2026-13-99T99:99:99Z\"",
    b"\"replicas\":-1",
    b"\"containers\":[{}]",
    b"\"ports\":[{\"containerPort\":99999}]",
    b"\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
    b"\"openAPIV3Schema\":{\"type\":\"object\",\"x-kubernetes-preserve-unknown-fields\":true}",
    b"\"x-kubernetes-int-or-string\":true",
    b"\"pattern\":\"(\"",
    b"\"format\":\"date-time\"",
    b"\"$ref\":\"#\"",
    b"\"items\":{}",
    b"\"anyOf\":[{}]",
    b"\"default\":{}",
];

#[test]
fn json_bodies() {
    run("sandbox-json", OBJECT_TOKENS, create("application/json"));
}

#[test]
fn yaml_bodies() {
    run(
        "sandbox-yaml",
        vigil_fuzz::YAML_TOKENS,
        create("application/yaml"),
    );
}

#[test]
fn protobuf_bodies() {
    run(
        "sandbox-protobuf",
        vigil_fuzz::PROTOBUF_TOKENS,
        create("application/vnd.kubernetes.protobuf"),
    );
}

#[test]
fn json_patches() {
    run(
        "sandbox-json-patch",
        vigil_fuzz::KUBE_TOKENS,
        patch("application/json-patch+json"),
    );
}

#[test]
fn merge_patches() {
    run(
        "sandbox-merge-patch",
        vigil_fuzz::KUBE_TOKENS,
        patch("application/merge-patch+json"),
    );
}

#[test]
fn strategic_merge_patches() {
    run(
        "sandbox-strategic-merge-patch",
        vigil_fuzz::KUBE_TOKENS,
        patch("application/strategic-merge-patch+json"),
    );
}

#[test]
fn apply_patches() {
    run(
        "sandbox-apply-patch",
        vigil_fuzz::YAML_TOKENS,
        patch("application/apply-patch+yaml"),
    );
}

#[test]
fn delete_options() {
    run("sandbox-delete-options", vigil_fuzz::KUBE_TOKENS, |input| {
        let content_type = if input.starts_with(b"k8s\0") {
            "application/vnd.kubernetes.protobuf"
        } else {
            "application/json"
        };
        // Always a dry run: the object must stay for the next case.
        server().check(
            "DELETE",
            "/api/v1/namespaces/fuzz/configmaps/conf?dryRun=All",
            content_type,
            input,
        )
    });
}

const SELECTOR_TOKENS: &[&[u8]] = &[
    b",",
    b"=",
    b"==",
    b"!=",
    b"!",
    b" in ",
    b" notin ",
    b"(",
    b")",
    b" ",
    b"app",
    b"a/b",
    b"example.com/",
    b"metadata.name",
    b"metadata.namespace",
    b"spec.nodeName",
    b"status.phase",
    b"\\",
    b"\\,",
    b"\\=",
    b"-",
    b".",
    b"_",
];

#[test]
fn label_selectors() {
    run("sandbox-label-selector", SELECTOR_TOKENS, |input| {
        let path = format!(
            "/api/v1/namespaces/fuzz/configmaps?labelSelector={}",
            query_value(input)
        );
        server().check("GET", &path, "", b"")?;
        let path = format!("/api/v1/pods?labelSelector={}", query_value(input));
        server().check("GET", &path, "", b"")
    });
}

#[test]
fn field_selectors() {
    run("sandbox-field-selector", SELECTOR_TOKENS, |input| {
        let path = format!("/api/v1/pods?fieldSelector={}", query_value(input));
        server().check("GET", &path, "", b"")?;
        let path = format!(
            "/api/v1/namespaces/fuzz/configmaps?fieldSelector={}",
            query_value(input)
        );
        server().check("GET", &path, "", b"")
    });
}

#[test]
fn list_queries() {
    const QUERY_TOKENS: &[&[u8]] = &[
        b"&",
        b"=",
        b"limit=",
        b"continue=",
        b"resourceVersion=",
        b"resourceVersionMatch=",
        b"NotOlderThan",
        b"Exact",
        b"labelSelector=",
        b"fieldSelector=",
        b"timeoutSeconds=",
        b"allowWatchBookmarks=true",
        b"includeObject=",
        b"%",
        b"%00",
        b"%FF",
        b"+",
        b"-1",
        b"0",
        b"9223372036854775808",
        b"eyJ",
        b"==",
    ];
    run("sandbox-list-query", QUERY_TOKENS, |input| {
        // Never a watch: it would stream until its timeout, which is not decoding.
        let query: String = String::from_utf8_lossy(input)
            .replace("watch", "wxtch")
            .chars()
            .map(|c| match c {
                ' ' | '#' | '\r' | '\n' | '\0' => '+',
                c if c.is_ascii_graphic() => c,
                _ => '~',
            })
            .collect();
        server().check(
            "GET",
            &format!("/api/v1/namespaces/fuzz/configmaps?{query}"),
            "",
            b"",
        )?;
        server().check(
            "GET",
            &format!("/apis/apps/v1/deployments?{query}"),
            "",
            b"",
        )
    });
}

/// The corpora are accepted as they are (the fuzz cases start from requests that get all the way
/// through, not from ones refused at the door).
#[test]
fn corpus_requests_succeed() {
    let objects = [
        ("sandbox-json", "application/json"),
        ("sandbox-yaml", "application/yaml"),
        ("sandbox-protobuf", "application/vnd.kubernetes.protobuf"),
    ];
    let mut refused = Vec::new();
    for (target, content_type) in objects {
        for seed in vigil_fuzz::corpus(target) {
            let path = format!("{}?dryRun=All&fieldManager=fuzz", create_path(&seed.bytes));
            let (status, body) = server()
                .request("POST", &path, content_type, &seed.bytes)
                .expect("answer");
            // kubectl's protobuf bodies name other namespaces and objects that exist: decoded is
            // enough (not 404 for their kind, not 415 for their encoding).
            let accepted = if content_type.contains("protobuf") {
                status != 404 && status != 415 && status < 500
            } else {
                status == 201
            };
            if !accepted {
                refused.push(format!("{target}/{}: {status} {body}", seed.name));
            }
        }
    }
    let patches = [
        ("sandbox-json-patch", "application/json-patch+json"),
        ("sandbox-merge-patch", "application/merge-patch+json"),
        (
            "sandbox-strategic-merge-patch",
            "application/strategic-merge-patch+json",
        ),
        ("sandbox-apply-patch", "application/apply-patch+yaml"),
    ];
    for (target, content_type) in patches {
        for seed in vigil_fuzz::corpus(target) {
            let force = if target.contains("apply") {
                "&force=true"
            } else {
                ""
            };
            let path = format!("{WEB}?dryRun=All&fieldManager=fuzz{force}");
            let (status, body) = server()
                .request("PATCH", &path, content_type, &seed.bytes)
                .expect("answer");
            if status != 200 {
                refused.push(format!("{target}/{}: {status} {body}", seed.name));
            }
        }
    }
    for target in ["sandbox-label-selector", "sandbox-field-selector"] {
        let param = if target.contains("label") {
            "labelSelector"
        } else {
            "fieldSelector"
        };
        for seed in vigil_fuzz::corpus(target) {
            let path = format!("/api/v1/pods?{param}={}", query_value(&seed.bytes));
            let (status, body) = server().request("GET", &path, "", b"").expect("answer");
            if status != 200 {
                refused.push(format!("{target}/{}: {status} {body}", seed.name));
            }
        }
    }
    assert!(refused.is_empty(), "refused:\n{}", refused.join("\n"));
}
