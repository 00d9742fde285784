use base64::Engine as _;
use serde_json::Value;

use super::decode::*;
use super::envelope::*;
use super::model::*;
use super::reader::*;
use super::*;
use serde_json::json;

/// A tiny protobuf encoder for building test inputs by hand.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn new() -> Self {
        Self::default()
    }

    fn raw_varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.raw_varint((u64::from(field) << 3) | u64::from(wire));
    }

    fn varint(mut self, field: u32, v: u64) -> Self {
        self.key(field, WIRE_VARINT);
        self.raw_varint(v);
        self
    }

    /// int32/int64 fields: negatives are sign-extended to ten bytes, as Go does.
    fn int(self, field: u32, v: i64) -> Self {
        self.varint(field, v as u64)
    }

    fn bool(self, field: u32, v: bool) -> Self {
        self.varint(field, u64::from(v))
    }

    fn bytes(mut self, field: u32, v: &[u8]) -> Self {
        self.key(field, WIRE_LEN);
        self.raw_varint(v.len() as u64);
        self.0.extend_from_slice(v);
        self
    }

    fn str(self, field: u32, v: &str) -> Self {
        self.bytes(field, v.as_bytes())
    }

    fn msg(self, field: u32, v: Enc) -> Self {
        self.bytes(field, &v.0)
    }

    fn map_str(self, field: u32, k: &str, v: &str) -> Self {
        self.msg(field, Enc::new().str(1, k).str(2, v))
    }

    fn map_bytes(self, field: u32, k: &str, v: &[u8]) -> Self {
        self.msg(field, Enc::new().str(1, k).bytes(2, v))
    }

    fn map_msg(self, field: u32, k: &str, v: Enc) -> Self {
        self.msg(field, Enc::new().str(1, k).msg(2, v))
    }
}

/// Wraps a typed message the way kubectl does: magic + runtime.Unknown with empty encoding/type.
fn envelope(api_version: &str, kind: &str, raw: Enc) -> Vec<u8> {
    let unknown = Enc::new()
        .msg(1, Enc::new().str(1, api_version).str(2, kind))
        .msg(2, raw)
        .str(3, "")
        .str(4, "");
    let mut body = MAGIC.to_vec();
    body.extend_from_slice(&unknown.0);
    body
}

/// ObjectMeta as gogo marshals it: every non-pointer field written, zero time as an empty message.
fn go_meta(name: &str, namespace: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, "")
        .str(3, namespace)
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .int(7, 0)
        .msg(8, Enc::new())
}

fn quantity(text: &str) -> Enc {
    Enc::new().str(1, text)
}

fn int_or_string_int(v: i64) -> Enc {
    Enc::new().int(1, 0).int(2, v).str(3, "")
}

fn int_or_string_str(v: &str) -> Enc {
    Enc::new().int(1, 1).int(2, 0).str(3, v)
}

/// A container as gogo marshals it (all non-pointer fields present).
fn go_container(name: &str, image: &str) -> Enc {
    Enc::new()
        .str(1, name)
        .str(2, image)
        .str(5, "")
        .str(13, "")
        .str(14, "")
        .bool(16, false)
        .bool(17, false)
        .bool(18, false)
        .str(20, "")
}

/// The non-pointer PodSpec fields gogo always writes, with the given containers.
fn go_pod_spec(containers: Vec<Enc>, restart_policy: &str) -> Enc {
    let mut spec = Enc::new();
    for container in containers {
        spec = spec.msg(2, container);
    }
    spec.str(3, restart_policy)
        .str(6, "")
        .str(8, "")
        .str(9, "")
        .str(10, "")
        .bool(11, false)
        .bool(12, false)
        .bool(13, false)
        .str(16, "")
        .str(17, "")
        .str(19, "")
        .str(24, "")
}

fn ok(body: &[u8]) -> Value {
    match decode(body) {
        Ok(v) => v,
        Err(e) => panic!("decode failed: {e}"),
    }
}

fn err(body: &[u8]) -> String {
    match decode(body) {
        Ok(v) => panic!("expected an error, got {v}"),
        Err(e) => e,
    }
}

#[test]
fn namespace_with_labels_omits_go_zero_values() {
    let ns = Enc::new()
        .msg(
            1,
            go_meta("demo", "")
                .map_str(11, "team", "a")
                .map_str(11, "env", "dev"),
        )
        .msg(2, Enc::new())
        .msg(3, Enc::new().str(1, ""));
    let got = ok(&envelope("v1", "Namespace", ns));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "demo", "labels": {"team": "a", "env": "dev"}},
            "spec": {},
            "status": {}
        })
    );
}

#[test]
fn config_map_data_and_binary_data() {
    let cm = Enc::new()
        .msg(1, go_meta("cfg", "default"))
        .map_str(2, "app.properties", "a=1\nb=2")
        .map_bytes(3, "blob", &[0, 1, 2, 255]);
    let got = ok(&envelope("v1", "ConfigMap", cm));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cfg", "namespace": "default"},
            "data": {"app.properties": "a=1\nb=2"},
            "binaryData": {"blob": "AAEC/w=="}
        })
    );
}

#[test]
fn secret_data_is_base64_and_type_kept() {
    let secret = Enc::new()
        .msg(1, go_meta("creds", "default"))
        .map_bytes(2, "password", b"s3cr3t")
        .map_bytes(2, "empty", b"")
        .str(3, "Opaque");
    let got = ok(&envelope("v1", "Secret", secret));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "creds", "namespace": "default"},
            "data": {"password": "czNjcjN0", "empty": ""},
            "type": "Opaque"
        })
    );
}

#[test]
fn deployment_like_kubectl_create_deployment() {
    let container = go_container("nginx", "nginx:1.25")
        .msg(
            6,
            Enc::new()
                .str(1, "")
                .int(2, 0)
                .int(3, 80)
                .str(4, "TCP")
                .str(5, ""),
        )
        .msg(8, Enc::new().map_msg(1, "cpu", quantity("500m")));
    let template = Enc::new()
        .msg(1, go_meta("", "").map_str(11, "app", "web"))
        .msg(2, go_pod_spec(vec![container], ""));
    let strategy = Enc::new().str(1, "RollingUpdate").msg(
        2,
        Enc::new()
            .msg(1, int_or_string_int(1))
            .msg(2, int_or_string_str("25%")),
    );
    let spec = Enc::new()
        .int(1, 3)
        .msg(2, Enc::new().map_str(1, "app", "web"))
        .msg(3, template)
        .msg(4, strategy)
        .int(5, 0)
        .bool(7, false);
    let status = Enc::new()
        .int(1, 0)
        .int(2, 0)
        .int(3, 0)
        .int(4, 0)
        .int(5, 0)
        .int(7, 0);
    let deployment = Enc::new()
        .msg(1, go_meta("web", "default").map_str(11, "app", "web"))
        .msg(2, spec)
        .msg(3, status);
    let got = ok(&envelope("apps/v1", "Deployment", deployment));
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "default", "labels": {"app": "web"}},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {
                        "containers": [{
                            "name": "nginx",
                            "image": "nginx:1.25",
                            "ports": [{"containerPort": 80, "protocol": "TCP"}],
                            "resources": {"limits": {"cpu": "500m"}}
                        }]
                    }
                },
                "strategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "25%"}
                }
            },
            "status": {}
        })
    );
}

#[test]
fn role_binding_keeps_required_fields() {
    let binding = Enc::new()
        .msg(1, go_meta("read-pods", "dev"))
        .msg(
            2,
            Enc::new()
                .str(1, "User")
                .str(2, "rbac.authorization.k8s.io")
                .str(3, "jane")
                .str(4, ""),
        )
        .msg(
            2,
            Enc::new()
                .str(1, "ServiceAccount")
                .str(2, "")
                .str(3, "robot")
                .str(4, "dev"),
        )
        .msg(
            3,
            Enc::new()
                .str(1, "rbac.authorization.k8s.io")
                .str(2, "Role")
                .str(3, "pod-reader"),
        );
    let got = ok(&envelope(
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        binding,
    ));
    assert_eq!(
        got,
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "read-pods", "namespace": "dev"},
            "subjects": [
                {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "jane"},
                {"kind": "ServiceAccount", "name": "robot", "namespace": "dev"}
            ],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"}
        })
    );
}

#[test]
fn cluster_role_with_rules_and_aggregation() {
    let role = Enc::new()
        .msg(1, go_meta("reader", ""))
        .msg(
            2,
            Enc::new()
                .str(1, "get")
                .str(1, "list")
                .str(2, "")
                .str(3, "pods"),
        )
        .msg(3, Enc::new().msg(1, Enc::new().map_str(1, "agg", "true")));
    let got = ok(&envelope(
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        role,
    ));
    assert_eq!(
        got["rules"],
        json!([{"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]}])
    );
    assert_eq!(
        got["aggregationRule"],
        json!({"clusterRoleSelectors": [{"matchLabels": {"agg": "true"}}]})
    );
}

#[test]
fn negative_varints_decode_as_twos_complement() {
    let meta = go_meta("low", "").int(10, -30);
    let class = Enc::new()
        .msg(1, meta)
        .int(2, -1_000)
        .bool(3, false)
        .str(4, "");
    let body = envelope("scheduling.k8s.io/v1", "PriorityClass", class);
    let got = ok(&body);
    assert_eq!(
        got,
        json!({
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "low", "deletionGracePeriodSeconds": -30},
            "value": -1000
        })
    );
}

#[test]
fn creation_timestamp_is_rfc3339_utc() {
    let meta = go_meta("t", "").msg(8, Enc::new().int(1, 1_700_000_000).int(2, 999_999_999));
    let got = ok(&envelope("v1", "Namespace", Enc::new().msg(1, meta)));
    assert_eq!(
        got["metadata"]["creationTimestamp"],
        json!("2023-11-14T22:13:20Z")
    );
}

#[test]
fn time_formatting_normalises_and_rejects_out_of_range() {
    assert_eq!(
        format_time(0, 0, false).as_deref(),
        Ok("1970-01-01T00:00:00Z")
    );
    assert_eq!(
        format_time(10, -1, false).as_deref(),
        Ok("1970-01-01T00:00:09Z")
    );
    assert!(format_time(i64::MAX, 0, false).is_err());
    assert!(format_time(-62_167_219_201, 0, false).is_err());
}

#[test]
fn pod_like_kubectl_run() {
    let container = go_container("shell", "busybox")
        .str(4, "sleep")
        .str(4, "3600")
        .msg(7, Enc::new().str(1, "MODE").str(2, "demo"))
        .msg(
            7,
            Enc::new().str(1, "POD_NAME").str(2, "").msg(
                3,
                Enc::new().msg(1, Enc::new().str(1, "v1").str(2, "metadata.name")),
            ),
        )
        .msg(8, Enc::new())
        .bool(16, true)
        .bool(18, true);
    let spec = go_pod_spec(vec![container], "Never").str(6, "ClusterFirst");
    let status = Enc::new()
        .str(1, "")
        .str(3, "")
        .str(4, "")
        .str(5, "")
        .str(6, "")
        .str(9, "")
        .str(11, "");
    let pod = Enc::new()
        .msg(1, go_meta("shell", "default").map_str(11, "run", "shell"))
        .msg(2, spec)
        .msg(3, status);
    let got = ok(&envelope("v1", "Pod", pod));
    assert_eq!(
        got,
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "shell", "namespace": "default", "labels": {"run": "shell"}},
            "spec": {
                "containers": [{
                    "name": "shell",
                    "image": "busybox",
                    "args": ["sleep", "3600"],
                    "env": [
                        {"name": "MODE", "value": "demo"},
                        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
                    ],
                    "resources": {},
                    "stdin": true,
                    "tty": true
                }],
                "restartPolicy": "Never",
                "dnsPolicy": "ClusterFirst"
            },
            "status": {}
        })
    );
}

#[test]
fn service_with_int_and_named_target_ports() {
    let port = |name: &str, port: i64, target: Enc| {
        Enc::new()
            .str(1, name)
            .str(2, "TCP")
            .int(3, port)
            .msg(4, target)
            .int(5, 0)
    };
    let spec = Enc::new()
        .msg(1, port("http", 80, int_or_string_int(8080)))
        .msg(1, port("metrics", 9090, int_or_string_str("metrics")))
        .map_str(2, "app", "web")
        .str(3, "")
        .str(4, "NodePort")
        .str(7, "")
        .str(8, "")
        .str(10, "")
        .str(11, "")
        .int(12, 0)
        .bool(13, false);
    let status = Enc::new().msg(1, Enc::new());
    let service = Enc::new()
        .msg(1, go_meta("web", "default"))
        .msg(2, spec)
        .msg(3, status);
    let got = ok(&envelope("v1", "Service", service));
    assert_eq!(
        got["spec"],
        json!({
            "ports": [
                {"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080},
                {"name": "metrics", "protocol": "TCP", "port": 9090, "targetPort": "metrics"}
            ],
            "selector": {"app": "web"},
            "type": "NodePort"
        })
    );
    assert_eq!(got["status"], json!({"loadBalancer": {}}));
}

#[test]
fn cron_job_nests_job_template() {
    let job_spec = Enc::new().msg(
        6,
        Enc::new().msg(1, go_meta("", "")).msg(
            2,
            go_pod_spec(
                vec![go_container("c", "busybox").msg(8, Enc::new())],
                "OnFailure",
            ),
        ),
    );
    let spec = Enc::new().str(1, "*/5 * * * *").str(3, "").msg(
        5,
        Enc::new().msg(1, go_meta("nightly", "")).msg(2, job_spec),
    );
    let cron = Enc::new()
        .msg(1, go_meta("nightly", "default"))
        .msg(2, spec)
        .msg(3, Enc::new());
    let got = ok(&envelope("batch/v1", "CronJob", cron));
    assert_eq!(got["spec"]["schedule"], json!("*/5 * * * *"));
    assert_eq!(
        got["spec"]["jobTemplate"]["metadata"],
        json!({"name": "nightly"})
    );
    assert_eq!(
        got["spec"]["jobTemplate"]["spec"]["template"]["spec"],
        json!({"containers": [{"name": "c", "image": "busybox", "resources": {}}], "restartPolicy": "OnFailure"})
    );
    assert_eq!(got["status"], json!({}));
}

#[test]
fn pdb_status_counters_are_always_emitted() {
    let spec = Enc::new()
        .msg(1, int_or_string_str("50%"))
        .msg(2, Enc::new().map_str(1, "app", "web"));
    let status = Enc::new().int(1, 0).int(3, 0).int(4, 0).int(5, 0).int(6, 0);
    let pdb = Enc::new()
        .msg(1, go_meta("web", "default"))
        .msg(2, spec)
        .msg(3, status);
    let got = ok(&envelope("policy/v1", "PodDisruptionBudget", pdb));
    assert_eq!(
        got["spec"],
        json!({"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}})
    );
    assert_eq!(
        got["status"],
        json!({"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0})
    );
}

#[test]
fn quota_hard_quantities_and_env_from_inline_reference() {
    let quota = Enc::new()
        .msg(1, go_meta("q", "default"))
        .msg(
            2,
            Enc::new()
                .map_msg(1, "pods", quantity("10"))
                .str(2, "BestEffort"),
        )
        .msg(3, Enc::new());
    let got = ok(&envelope("v1", "ResourceQuota", quota));
    assert_eq!(
        got["spec"],
        json!({"hard": {"pods": "10"}, "scopes": ["BestEffort"]})
    );

    let container = go_container("c", "img").msg(
        19,
        Enc::new()
            .str(1, "")
            .msg(2, Enc::new().msg(1, Enc::new().str(1, "cfg"))),
    );
    let pod = Enc::new().msg(2, go_pod_spec(vec![container], ""));
    let got = ok(&envelope("v1", "Pod", pod));
    assert_eq!(
        got["spec"]["containers"][0]["envFrom"],
        json!([{"configMapRef": {"name": "cfg"}}])
    );
}

#[test]
fn packed_repeated_varints_are_accepted() {
    let packed = {
        let mut inner = Enc::new();
        inner.raw_varint(1000);
        inner.raw_varint(2000);
        inner.0
    };
    let pod = Enc::new().msg(
        2,
        Enc::new().msg(14, Enc::new().bytes(4, &packed).int(4, 3000)),
    );
    let got = ok(&envelope("v1", "Pod", pod));
    assert_eq!(
        got["spec"]["securityContext"],
        json!({"supplementalGroups": [1000, 2000, 3000]})
    );
}

#[test]
fn malformed_inputs_are_errors() {
    // Wrong magic.
    assert!(err(b"k8x\0\x0a\x00").starts_with("invalid protobuf body"));
    assert!(err(b"").contains("magic"));
    // Truncated varint (a key whose continuation byte never arrives).
    assert!(err(b"k8s\0\x80").contains("truncated varint"));
    // Truncated length-delimited field.
    assert!(err(b"k8s\0\x12\x05ab").contains("runs past the end"));
    // Varint that overflows 64 bits.
    let mut long = MAGIC.to_vec();
    long.extend_from_slice(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f]);
    assert!(err(&long).contains("overflows"));
    // Field number zero.
    assert!(err(b"k8s\0\x02\x00").contains("field number 0"));
    // A varint where a message is expected.
    let mismatch = envelope("v1", "Namespace", Enc::new().varint(1, 0));
    assert!(err(&mismatch).contains("wire type 0, expected 2"));
    // Groups (wire type 3) are never valid here.
    let mut group = Enc::new();
    group.key(1, 3);
    assert!(err(&envelope("v1", "Namespace", group)).contains("wire type 3, expected 2"));
}

#[test]
fn unknown_kind_is_reported_as_unsupported() {
    let e = err(&envelope("v1", "Node", Enc::new()));
    assert!(e.starts_with("unsupported protobuf kind"), "{e}");
    let e = err(&envelope("apps/v1beta1", "Deployment", Enc::new()));
    assert!(e.starts_with("unsupported protobuf kind"), "{e}");
}

#[test]
fn unknown_field_names_message_and_number() {
    let container = go_container("c", "img").msg(25, Enc::new());
    let pod = Enc::new().msg(2, go_pod_spec(vec![container], ""));
    let e = err(&envelope("v1", "Pod", pod));
    assert!(e.contains("field 25 of Container is not supported"), "{e}");
    assert!(e.contains("Pod.spec: PodSpec.containers"), "{e}");
}

#[test]
fn envelope_rejects_encodings_and_foreign_content_types() {
    let mut body = envelope("v1", "Namespace", Enc::new());
    body.extend_from_slice(&Enc::new().str(3, "gzip").0);
    assert!(err(&body).contains("content encoding"));
    let mut body = envelope("v1", "Namespace", Enc::new());
    body.extend_from_slice(&Enc::new().str(4, "application/json").0);
    assert!(err(&body).contains("content type"));
}

#[test]
fn int_or_string_rejects_unknown_type() {
    let pdb = Enc::new().msg(2, Enc::new().msg(1, Enc::new().int(1, 2)));
    let e = err(&envelope("policy/v1", "PodDisruptionBudget", pdb));
    assert!(e.contains("IntOrString type 2"), "{e}");
}

/// Truncations and byte flips of a realistic body must never panic (errors are fine).
#[test]
fn corrupted_inputs_never_panic() {
    let container =
        go_container("nginx", "nginx").msg(8, Enc::new().map_msg(1, "cpu", quantity("1")));
    let spec = Enc::new()
        .int(1, 1)
        .msg(2, Enc::new().map_str(1, "app", "web"))
        .msg(
            3,
            Enc::new()
                .msg(1, go_meta("", ""))
                .msg(2, go_pod_spec(vec![container], "")),
        )
        .msg(
            4,
            Enc::new().msg(2, Enc::new().msg(1, int_or_string_str("25%"))),
        );
    let body = envelope(
        "apps/v1",
        "Deployment",
        Enc::new().msg(1, go_meta("web", "ns")).msg(2, spec),
    );
    assert!(decode(&body).is_ok());
    for len in 0..body.len() {
        let _ = decode(body.get(..len).unwrap_or_default());
    }
    let mut state = 0x2545_f491_4f6c_dd1du64;
    for _ in 0..4000 {
        // xorshift keeps the test deterministic without a rand dependency.
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut mutated = body.clone();
        let index = (state % mutated.len() as u64) as usize;
        if let Some(byte) = mutated.get_mut(index) {
            *byte = (state >> 32) as u8;
        }
        let _ = decode(&mutated);
    }
}

/// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
/// `kubectl create deployment web --image=nginx --replicas=3 --port=80`.
/// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
#[test]
fn real_kubectl_deployment_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a\x15\x0a\x07apps/v1\x12\x0aDeployment\x12\xb8\x01\x0a\x1f\x0a\x03web",
        b"\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12\x86",
        b"\x01\x08\x03\x12\x0c\x0a\x0a\x0a\x03app\x12\x03web\x1al\x0a\x1c\x0a\x00\x12\x00",
        b"\x1a\x00\x22\x00*\x002\x008\x00B\x00Z\x0a\x0a\x03app\x12\x03web\x12L\x12.\x0a",
        b"\x05nginx\x12\x05nginx*\x002\x0a\x0a\x00\x10\x00\x18P\x22\x00*\x00B\x00j\x00r",
        b"\x00\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x00\x1a\x002\x00B\x00J\x00R\x00",
        b"X\x00`\x00h\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x22\x02\x0a\x00(",
        b"\x008\x00\x1a\x0c\x08\x00\x10\x00\x18\x00 \x00(\x008\x00\x1a\x00\x22\x00",
    ];
    let body = parts.concat();
    let want: Value = serde_json::from_str(r#"{"kind": "Deployment", "apiVersion": "apps/v1", "metadata": {"name": "web", "labels": {"app": "web"}}, "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "nginx", "image": "nginx", "ports": [{"containerPort": 80}], "resources": {}}]}}, "strategy": {}}, "status": {}}"#).unwrap_or_default();
    assert_eq!(ok(&body), want);
}

/// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
/// `kubectl create cronjob cj --image=busybox --schedule='*/5 * * * *' -- echo hi`.
/// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
#[test]
fn real_kubectl_cron_job_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a\x13\x0a\x08batch/v1\x12\x07CronJob\x12\xa8\x01\x0a\x12\x0a\x02cj\x12",
        b"\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12\x8f\x01\x0a\x0b*/5 * * * *\x1a\x00*",
        b"~\x0a\x12\x0a\x02cj\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12h2f\x0a\x10",
        b"\x0a\x00\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x12R\x12+\x0a\x02cj\x12\x07",
        b"busybox\x1a\x04echo\x1a\x02hi*\x00B\x00j\x00r\x00\x80\x01\x00\x88\x01\x00\x90",
        b"\x01\x00\xa2\x01\x00\x1a\x09OnFailure2\x00B\x00J\x00R\x00X\x00`\x00h\x00\x82\x01",
        b"\x00\x8a\x01\x00\x9a\x01\x00\xc2\x01\x00\x1a\x00\x1a\x00\x22\x00",
    ];
    let body = parts.concat();
    let want: Value = serde_json::from_str(r#"{"kind": "CronJob", "apiVersion": "batch/v1", "metadata": {"name": "cj"}, "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"metadata": {"name": "cj"}, "spec": {"template": {"metadata": {}, "spec": {"containers": [{"name": "cj", "image": "busybox", "command": ["echo", "hi"], "resources": {}}], "restartPolicy": "OnFailure"}}}}}, "status": {}}"#).unwrap_or_default();
    assert_eq!(ok(&body), want);
}

/// Bytes kubectl v1.32.4 POSTed (captured with a stub API server) for
/// `kubectl create clusterrole agg --aggregation-rule=foo=bar`.
/// The expected JSON is the same command's `--dry-run=client -o json` output, minus `"creationTimestamp": null`.
#[test]
fn real_kubectl_cluster_role_aggregated_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a+\x0a\x1crbac.authorization.k8s.io/v1\x12\x0bClusterRole\x12%\x0a\x13",
        b"\x0a\x03agg\x12\x00\x1a\x00\x22\x00*\x002\x008\x00B\x00\x1a\x0e\x0a\x0c\x0a\x0a",
        b"\x0a\x03foo\x12\x03bar\x1a\x00\x22\x00",
    ];
    let body = parts.concat();
    let want: Value = serde_json::from_str(r#"{"kind": "ClusterRole", "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": {"name": "agg"}, "rules": null, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"foo": "bar"}}]}}"#).unwrap_or_default();
    assert_eq!(ok(&body), want);
}

/// Bytes Helm v4.1.4 (client-go v1.35) sent with each DELETE of a release Secret during
/// `helm uninstall`, captured between Helm and a v1.28 kube-apiserver: an empty DeleteOptions.
#[test]
fn real_helm_delete_options_bytes() {
    let body = b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x00\x1a\x00\"\x00";
    assert_eq!(
        ok(body),
        json!({"apiVersion": "v1", "kind": "DeleteOptions"})
    );
}

/// Bytes kubectl v1.33 sent with each pod DELETE of
/// `kubectl drain NODE --disable-eviction --grace-period=1` (captured): gracePeriodSeconds only.
#[test]
fn real_kubectl_drain_delete_options_bytes() {
    let body = b"k8s\x00\x0a\x13\x0a\x02v1\x12\x0dDeleteOptions\x12\x02\x08\x01\x1a\x00\"\x00";
    assert_eq!(
        ok(body),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 1})
    );
}

#[test]
fn delete_options_with_every_field() {
    let raw = Enc::new()
        .int(1, 30)
        .msg(2, Enc::new().str(1, "uid-1").str(2, "42"))
        .bool(3, false)
        .str(4, "Foreground")
        .str(5, "All")
        .bool(6, false);
    // Typed clients of other groups name their own group version; the message is the same.
    let got = ok(&envelope("apps/v1", "DeleteOptions", raw));
    assert_eq!(
        got,
        json!({
            "apiVersion": "apps/v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 30,
            "preconditions": {"uid": "uid-1", "resourceVersion": "42"},
            "orphanDependents": false,
            "propagationPolicy": "Foreground",
            "dryRun": ["All"],
            "ignoreStoreReadErrorWithClusterBreakingPotential": false
        })
    );
}

/// Bytes Helm v4.1.4 PUT to `secrets/sh.helm.release.v1.t1.v1` (its release record) during
/// `helm upgrade`, captured between Helm and a v1.28 kube-apiserver.
#[test]
fn real_helm_release_secret_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12\xcc\x06\x0a\x7f\x0a\x18sh.helm.relea",
        b"se.v1.t1.v1\x12\x00\x1a\x00\"\x00*\x002\x008\x00B\x00Z\x18\x0a\x0amodifiedAt\x12",
        b"\x0a1795609912Z\x0a\x0a\x04name\x12\x02t1Z\x0d\x0a\x05owner\x12\x04helmZ\x12\x0a",
        b"\x06status\x12\x08deployedZ\x0c\x0a\x07version\x12\x011\x12\xb4\x05\x0a\x07relea",
        b"se\x12\xa8\x05H4sIAAAAAAAC/5RSXU/bMBT9K9Hda1Jst4HFEg9rRiFiExorLc0yIZM4iak/otgpZI",
        b"j/PiWIdhMP06T7YF/pnnvuOecZNFMcKDgMPghdGqDPUIrWuruCN9L0vAAKBJHjAOOAhEtM6BTTkEwwim",
        b"aziKBpCj5I9p8DBbd5KxonjAYKibaOSenlRjWSOw4+WMdcZ4HCHvXFh7xmrRsYKu5YwRwb3m8XCN2DDz",
        b"ve2ldQNMETBD6wRqz2zR0ZcKTJt0B1J6UPjqtGMsct0B8HsLfmUa4mPVNyoDzug83tvFmpVZ8Tubt/MF",
        b"XxcHbJiOzSz6b6RqIuVVIv14vHWGFZnC+2m9vr+qoyVXIe1vfrm+PkomhydeM2BF2m5wu0WZrLJJ7XV2",
        b"J+wvtP3UotbLFe/fqizqoynm/TdVoX6yeUxMlTIuYfk4sFvp9ey+QCR3F1ego+KFM4MfJ+p/ssnExRdI",
        b"IjMgtTePnpw47Jbjj29Xqb11yxv38HOIQQDsZaIkTHGswrhTwg/Gt5iNExnqWD7IppUXLrgEIQBJn+4H",
        b"03XZtz6g3mHb0TPdMH76i3w5neCl1QLza6FNVX1mT6LQg00543mEe9R9HyIFeZ3vcZ9TLAGWT6z4Bgf3",
        b"TbNiwf2L+OscZ1LR9T08j+TnFXmyHQ1jJ4+R0AAP//WuA6Si4DAAA=\x1a\x12helm.sh/release.v1",
        b"\x1a\x00\"\x00",
    ];
    let got = ok(&parts.concat());
    assert_eq!(got["kind"], "Secret");
    assert_eq!(got["type"], "helm.sh/release.v1");
    assert_eq!(got["metadata"]["name"], "sh.helm.release.v1.t1.v1");
    assert_eq!(
        got["metadata"]["labels"],
        json!({"modifiedAt": "1795609912", "name": "t1", "owner": "helm", "status": "deployed", "version": "1"})
    );
    // Helm's payload is base64 text of a gzip stream; JSON carries those bytes base64 again.
    let release = got["data"]["release"].as_str().unwrap_or_default();
    let inner = base64::engine::general_purpose::STANDARD
        .decode(release)
        .unwrap_or_default();
    assert!(inner.starts_with(b"H4sI"), "release payload: {release}");
}

/// Bytes kubectl v1.33 POSTed to a v1.28 kube-apiserver (captured between them) for
/// `kubectl create job j1 --from=cronjob/cj`, where the CronJob's pod template (as the server
/// defaulted it) has every kind of probe, lifecycle hooks and the common volume sources.
/// The expected JSON is the same command's `--dry-run=client -o json` output, minus
/// `"creationTimestamp": null`.
#[test]
fn real_kubectl_job_with_probes_lifecycle_and_volumes_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\x93\x06\x0a\x89\x01\x0a\x02j1\x12",
        b"\x00\x1a\x09wire-cap3\"\x00*\x002\x008\x00B\x00b+\x0a!cronjob.kubernetes.io/inst",
        b"antiate\x12\x06manualj?\x0a\x07CronJob\x1a\x02cj\"$35d356ef-dda9-4128-9ee1-29c41",
        b"c4ae8b5*\x08batch/v10\x01\x12\xfa\x042\xf7\x04\x0a\x10\x0a\x00\x12\x00\x1a\x00\"",
        b"\x00*\x002\x008\x00B\x00\x12\xe2\x04\x0a\x14\x0a\x05cache\x12\x0b\x12\x09\x0a",
        b"\x00\x12\x05\x0a\x031Gi\x0a*\x0a\x04conf\x12\"\x9a\x01\x1f\x0a\x0a\x0a\x08app-co",
        b"nf\x12\x0e\x0a\x01a\x12\x06a.conf\x18\xa4\x03\x18\x80\x02\x0aS\x0a\x03tok\x12L",
        b"\xd2\x01I\x0a\x13\"\x11\x0a\x05vault\x10\x90\x1c\x1a\x05token\x0a\x0a\x0a\x08",
        b"\x0a\x04\x0a\x02s1 \x01\x0a#\x12!\x0a\x1f\x0a\x06labels\x12\x15\x0a\x02v1\x12",
        b"\x0fmetadata.labels\x10\xa4\x03\x0a\x1f\x0a\x04host\x12\x17\x0a\x15\x0a\x08/var/",
        b"log\x12\x09Directory\x0a\x12\x0a\x04data\x12\x0aR\x08\x0a\x04data\x10\x01\x12",
        b"\xf5\x01\x0a\x03app\x12\x07busybox*\x00B\x00J\x15\x0a\x05cache\x10\x00\x1a\x06/c",
        b"ache\"\x002\x00R9\x0a-\x12+\x0a\x08/healthz\x12\x0d\x08\x01\x10\x00\x1a\x07metri",
        b"cs\x1a\x00\"\x04HTTP*\x08\x0a\x03X-A\x12\x01b\x10\x00\x18\x01 \x0a(\x010\x03Z",
        b"\x19\x0a\x0d\x1a\x0b\x0a\x07\x08\x00\x10\x90?\x1a\x00\x12\x00\x10\x02\x18\x01 ",
        b"\x0a(\x010\x03b%\x0a\x0c\x0a\x0a\x0a\x04echo\x0a\x02hi\x12\x15\x12\x13\x0a\x01/",
        b"\x12\x06\x08\x00\x10P\x1a\x00\x1a\x00\"\x04HTTPj\x14/dev/termination-logr\x06Alw",
        b"ays\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01\x04File\xb2\x01\x1e\x0a\x10\x0a",
        b"\x0e\x0a\x03cat\x0a\x07/tmp/ok\x10\x00\x18\x01 \x0a(\x010\x038\x05\x12V\x0a\x04g",
        b"rpc\x12\x07busybox*\x00B\x00R\x13\x0a\x07\"\x05\x08\x82G\x12\x00\x10\x00\x18\x01",
        b" \x0a(\x010\x03j\x14/dev/termination-logr\x06Always\x80\x01\x00\x88\x01\x00\x90",
        b"\x01\x00\xa2\x01\x04File\x1a\x09OnFailure \x1e2\x0cClusterFirstB\x00J\x00R\x00X",
        b"\x00`\x00h\x00r\x00\x82\x01\x00\x8a\x01\x00\x9a\x01\x11default-scheduler\xc2\x01",
        b"\x00\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00",
    ];
    let want: Value = serde_json::from_str(r#"{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j1","namespace":"wire-cap3","annotations":{"cronjob.kubernetes.io/instantiate":"manual"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"cj","uid":"35d356ef-dda9-4128-9ee1-29c41c4ae8b5","controller":true}]},"spec":{"template":{"metadata":{},"spec":{"volumes":[{"name":"cache","emptyDir":{"sizeLimit":"1Gi"}},{"name":"conf","configMap":{"name":"app-conf","items":[{"key":"a","path":"a.conf","mode":420}],"defaultMode":256}},{"name":"tok","projected":{"sources":[{"serviceAccountToken":{"audience":"vault","expirationSeconds":3600,"path":"token"}},{"secret":{"name":"s1","optional":true}},{"downwardAPI":{"items":[{"path":"labels","fieldRef":{"apiVersion":"v1","fieldPath":"metadata.labels"}}]}}],"defaultMode":420}},{"name":"host","hostPath":{"path":"/var/log","type":"Directory"}},{"name":"data","persistentVolumeClaim":{"claimName":"data","readOnly":true}}],"containers":[{"name":"app","image":"busybox","resources":{},"volumeMounts":[{"name":"cache","mountPath":"/cache"}],"livenessProbe":{"httpGet":{"path":"/healthz","port":"metrics","scheme":"HTTP","httpHeaders":[{"name":"X-A","value":"b"}]},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"readinessProbe":{"tcpSocket":{"port":8080},"initialDelaySeconds":2,"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"startupProbe":{"exec":{"command":["cat","/tmp/ok"]},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3,"terminationGracePeriodSeconds":5},"lifecycle":{"postStart":{"exec":{"command":["echo","hi"]}},"preStop":{"httpGet":{"path":"/","port":80,"scheme":"HTTP"}}},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"},{"name":"grpc","image":"busybox","resources":{},"livenessProbe":{"grpc":{"port":9090,"service":""},"timeoutSeconds":1,"periodSeconds":10,"successThreshold":1,"failureThreshold":3},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"OnFailure","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"schedulerName":"default-scheduler"}}},"status":{}}"#).unwrap_or_default();
    assert_eq!(ok(&parts.concat()), want);
}

#[test]
fn lease_times_keep_microseconds() {
    let spec = Enc::new()
        .str(1, "holder-a")
        .int(2, 15)
        .msg(3, Enc::new().int(1, 1_700_000_000).int(2, 123_456_789))
        .msg(4, Enc::new().int(1, 1_700_000_010))
        .int(5, 0);
    let lease = Enc::new()
        .msg(1, go_meta("leader", "kube-system"))
        .msg(2, spec);
    assert_eq!(
        ok(&envelope("coordination.k8s.io/v1", "Lease", lease)),
        json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": "leader", "namespace": "kube-system"},
            "spec": {
                "holderIdentity": "holder-a",
                "leaseDurationSeconds": 15,
                "acquireTime": "2023-11-14T22:13:20.123456Z",
                "renewTime": "2023-11-14T22:13:30.000000Z",
                "leaseTransitions": 0
            }
        })
    );
}

#[test]
fn replica_set_pod_template_and_binding() {
    let template = Enc::new()
        .msg(1, go_meta("", "").map_str(11, "app", "web"))
        .msg(2, go_pod_spec(vec![go_container("web", "nginx")], "Always"));
    let rs = Enc::new()
        .msg(1, go_meta("web-1", "default"))
        .msg(
            2,
            Enc::new()
                .int(1, 3)
                .msg(2, Enc::new().map_str(1, "app", "web"))
                .msg(3, template)
                .int(4, 0),
        )
        .msg(
            3,
            Enc::new().int(1, 0).int(2, 0).int(3, 0).int(4, 0).int(5, 0),
        );
    let got = ok(&envelope("apps/v1", "ReplicaSet", rs));
    assert_eq!(got["spec"]["replicas"], 3);
    assert_eq!(
        got["spec"]["selector"],
        json!({"matchLabels": {"app": "web"}})
    );
    assert_eq!(
        got["spec"]["template"]["metadata"],
        json!({"labels": {"app": "web"}})
    );
    assert!(got["spec"].get("minReadySeconds").is_none());
    // `replicas` has no omitempty upstream; the other counters do.
    assert_eq!(got["status"], json!({"replicas": 0}));

    let pt = Enc::new().msg(1, go_meta("tpl", "default")).msg(
        2,
        Enc::new()
            .msg(1, go_meta("", ""))
            .msg(2, go_pod_spec(vec![go_container("c", "busybox")], "")),
    );
    let got = ok(&envelope("v1", "PodTemplate", pt));
    assert_eq!(got["template"]["spec"]["containers"][0]["image"], "busybox");

    let binding = Enc::new()
        .msg(1, go_meta("p1", "default"))
        .msg(2, Enc::new().str(1, "Node").str(3, "node-1"));
    assert_eq!(
        ok(&envelope("v1", "Binding", binding)),
        json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": "p1", "namespace": "default"},
            "target": {"kind": "Node", "name": "node-1"}
        })
    );
}

/// Bytes kubectl v1.33 POSTed to a v1.28 kube-apiserver (captured between them) for
/// `kubectl create job j2 --from=cronjob/cj`, where the CronJob's pod template has node, pod
/// and anti-affinity, topology spread constraints, host aliases and a DNS config.
/// The expected JSON is the same command's `--dry-run=client -o json` output, minus
/// `"creationTimestamp": null`.
#[test]
fn real_kubectl_job_with_affinity_spread_aliases_and_dns_bytes() {
    let parts: &[&[u8]] = &[
        b"k8s\x00\x0a\x0f\x0a\x08batch/v1\x12\x03Job\x12\xe8\x04\x0a\x89\x01\x0a\x02j2\x12",
        b"\x00\x1a\x09wire-cap4\"\x00*\x002\x008\x00B\x00b+\x0a!cronjob.kubernetes.io/inst",
        b"antiate\x12\x06manualj?\x0a\x07CronJob\x1a\x02cj\"$1101d690-d113-46f8-a5d3-03e47",
        b"fa8dbd7*\x08batch/v10\x01\x12\xcf\x032\xcc\x03\x0a\x10\x0a\x00\x12\x00\x1a\x00\"",
        b"\x00*\x002\x008\x00B\x00\x12\xb7\x03\x12@\x0a\x03app\x12\x07busybox*\x00B\x00j",
        b"\x14/dev/termination-logr\x06Always\x80\x01\x00\x88\x01\x00\x90\x01\x00\xa2\x01",
        b"\x04File\x1a\x05Never \x1e2\x0cClusterFirstB\x00J\x00R\x00X\x00`\x00h\x00r\x00",
        b"\x82\x01\x00\x8a\x01\x00\x92\x01\x9e\x01\x0aG\x0a/\x0a-\x0a\x0f\x0a\x04disk\x12",
        b"\x02In\x1a\x03ssd\x12\x1a\x0a\x0dmetadata.name\x12\x05NotIn\x1a\x02n1\x12\x14",
        b"\x08\x05\x12\x10\x0a\x0e\x0a\x04zone\x12\x06Exists\x121\x0a/\x0a\x0e\x0a\x0c\x0a",
        b"\x03app\x12\x05cache\x12\x05other\x1a\x16kubernetes.io/hostname\x1a \x12\x1e\x08",
        b"2\x12\x1a\x0a\x10\x12\x0e\x0a\x03app\x12\x02In\x1a\x03web\x1a\x04zone\"\x00\x9a",
        b"\x01\x11default-scheduler\xba\x01\x18\x0a\x0810.0.0.1\x12\x02db\x12\x08db.local",
        b"\xc2\x01\x00\xd2\x01)\x0a\x071.1.1.1\x12\x09svc.local\x1a\x0a\x0a\x05ndots\x12",
        b"\x012\x1a\x07\x0a\x05edns0\x8a\x02G\x08\x01\x12\x04zone\x1a\x0dDoNotSchedule\"",
        b"\x0a\x0a\x08\x0a\x03app\x12\x01a(\x022\x05Honor:\x06IgnoreB\x11pod-template-hash",
        b"\x1a\x08 \x00(\x000\x00:\x00\x1a\x00\"\x00",
    ];
    let want: Value = serde_json::from_str(r#"{"kind":"Job","apiVersion":"batch/v1","metadata":{"name":"j2","namespace":"wire-cap4","annotations":{"cronjob.kubernetes.io/instantiate":"manual"},"ownerReferences":[{"apiVersion":"batch/v1","kind":"CronJob","name":"cj","uid":"1101d690-d113-46f8-a5d3-03e47fa8dbd7","controller":true}]},"spec":{"template":{"metadata":{},"spec":{"containers":[{"name":"app","image":"busybox","resources":{},"terminationMessagePath":"/dev/termination-log","terminationMessagePolicy":"File","imagePullPolicy":"Always"}],"restartPolicy":"Never","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","securityContext":{},"affinity":{"nodeAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":{"nodeSelectorTerms":[{"matchExpressions":[{"key":"disk","operator":"In","values":["ssd"]}],"matchFields":[{"key":"metadata.name","operator":"NotIn","values":["n1"]}]}]},"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":5,"preference":{"matchExpressions":[{"key":"zone","operator":"Exists"}]}}]},"podAffinity":{"requiredDuringSchedulingIgnoredDuringExecution":[{"labelSelector":{"matchLabels":{"app":"cache"}},"namespaces":["other"],"topologyKey":"kubernetes.io/hostname"}]},"podAntiAffinity":{"preferredDuringSchedulingIgnoredDuringExecution":[{"weight":50,"podAffinityTerm":{"labelSelector":{"matchExpressions":[{"key":"app","operator":"In","values":["web"]}]},"topologyKey":"zone","namespaceSelector":{}}}]}},"schedulerName":"default-scheduler","hostAliases":[{"ip":"10.0.0.1","hostnames":["db","db.local"]}],"dnsConfig":{"nameservers":["1.1.1.1"],"searches":["svc.local"],"options":[{"name":"ndots","value":"2"},{"name":"edns0"}]},"topologySpreadConstraints":[{"maxSkew":1,"topologyKey":"zone","whenUnsatisfiable":"DoNotSchedule","labelSelector":{"matchLabels":{"app":"a"}},"minDomains":2,"nodeAffinityPolicy":"Honor","nodeTaintsPolicy":"Ignore","matchLabelKeys":["pod-template-hash"]}]}}},"status":{}}"#).unwrap_or_default();
    assert_eq!(ok(&parts.concat()), want);
}
