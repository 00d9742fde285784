//! `kubectl apply` of a change Vigil's CRDs refuse prints the rule's message and stores nothing —
//! on `vigil sandbox`, and on the cluster of `VIGIL_TEST_KUBECONFIG` when it is set (the same
//! manifests, the same expected lines). kubectl is `$VIGIL_KUBECTL`, else `kubectl` on PATH;
//! without one the test prints a note and passes.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str], stdin: Option<&str>) -> (bool, String) {
        let mut child = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .arg("--request-timeout=20s")
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(if stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        if let Some(text) = stdin {
            use std::io::Write as _;
            let mut pipe = child.stdin.take().expect("stdin");
            pipe.write_all(text.as_bytes()).expect("write manifest");
        }
        let output = child.wait_with_output().expect("kubectl output");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    }

    fn ok(&self, args: &[&str]) -> String {
        let (success, text) = self.run(args, None);
        assert!(success, "kubectl {args:?} failed: {text}");
        text
    }

    /// `kubectl apply -f -` of `manifest` in `ns`.
    fn apply(&self, ns: &str, manifest: &str) -> (bool, String) {
        self.run(&["apply", "-n", ns, "-f", "-"], Some(manifest))
    }
}

/// One refused change: what is applied first (accepted), what then (refused), and the lines
/// kubectl must print.
struct Case {
    what: &'static str,
    first: &'static str,
    then: &'static str,
    lines: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        what: "a Topic's partitions down, its replication factor and its name changed",
        first: "apiVersion: kafka.vigil.dev/v1alpha1
kind: Topic
metadata: {name: orders}
spec:
  partitions: 6
  replicationFactor: 3
  cluster: {bootstrapServers: [\"kafka-0.kafka:9092\"]}
",
        then: "apiVersion: kafka.vigil.dev/v1alpha1
kind: Topic
metadata: {name: orders}
spec:
  topicName: orders-v2
  partitions: 3
  replicationFactor: 2
  cluster: {bootstrapServers: [\"kafka-0.kafka:9092\"]}
",
        lines: &[
            "The Topic \"orders\" is invalid:",
            "* spec.topicName: Forbidden: spec.topicName cannot change: Kafka cannot rename topics; leave it unset (the topic is named after the object), or create a new Topic (TopicNameImmutable)",
            "* spec.partitions: Invalid value: \"object\": partitions cannot decrease: Kafka can only add partitions; set it back to at least the topic's current count, status.partitions (PartitionDecreaseRefused)",
            "* spec.replicationFactor: Invalid value: \"integer\": replicationFactor cannot change: Kafka cannot change it for an existing topic; set it back, or create a new Topic (ReplicationFactorChangeRefused)",
        ],
    },
    Case {
        what: "a KubernetesCluster downgraded and moved to another env",
        first: "apiVersion: vigil.dev/v1alpha1
kind: KubernetesCluster
metadata: {name: prod}
spec:
  type: iks
  env: test
  kubeVersion: \"1.28\"
  osVersion: UBUNTU_20_64
  product: {name: p, shortName: p, uuid: {value: aaa692e5-e6ce-4f19-ad20-6491ca74067c}}
",
        then: "apiVersion: vigil.dev/v1alpha1
kind: KubernetesCluster
metadata: {name: prod}
spec:
  type: iks
  env: prod
  kubeVersion: \"1.27.9\"
  osVersion: UBUNTU_20_64
  product: {name: p, shortName: p, uuid: {value: aaa692e5-e6ce-4f19-ad20-6491ca74067c}}
",
        lines: &[
            "The KubernetesCluster \"prod\" is invalid:",
            "* spec.env: Invalid value: \"string\": env cannot change once the cluster exists: set it back, or declare a new KubernetesCluster (ImmutableFieldChanged)",
            "* spec.kubeVersion: Invalid value: \"string\": kubeVersion 1.27.9 is older than 1.28: Kubernetes clusters cannot be downgraded; set it back to 1.28 or later (DowngradeRefused)",
        ],
    },
    Case {
        what: "a ConfigMapSync copying onto its own source, with an unusable selector",
        first: "apiVersion: apps.bixbite.io/v1
kind: ConfigMapSync
metadata: {name: sync}
spec: {sourceNamespace: src, destinationNamespace: dst, configMapName: cfg}
",
        then: "apiVersion: apps.bixbite.io/v1
kind: ConfigMapSync
metadata: {name: sync}
spec:
  sourceNamespace: src
  destinationNamespace: src
  configMapName: cfg
  namespaceSelector: {matchExpressions: [{key: env, operator: In}]}
",
        lines: &[
            "The ConfigMapSync \"sync\" is invalid:",
            "* spec.destinationNamespace: Invalid value: \"object\": the source's own namespace cannot be a destination: a ConfigMap cannot be copied onto itself; name other namespaces (InvalidDestination)",
            "* spec.namespaceSelector: Invalid value: \"object\": matchExpressions: operators In and NotIn need values, Exists and DoesNotExist take none, and there is no other operator (InvalidSelector)",
        ],
    },
    Case {
        what: "a CriticalService naming a label key twice (cluster-scoped: named after the test)",
        first: "apiVersion: mycrd.com/v1
kind: CriticalService
metadata: {name: NAMESPACE}
spec:
  matchLabels: [{key: role, value: frontend}]
",
        then: "apiVersion: mycrd.com/v1
kind: CriticalService
metadata: {name: NAMESPACE}
spec:
  matchLabels: [{key: role, value: frontend}, {key: role, value: web}]
",
        lines: &[
            // One failure prints on the heading's line.
            "The CriticalService \"NAMESPACE\" is invalid: spec.matchLabels: Invalid value: \"array\": matchLabels names a key more than once: a Service has one value per label key, so no Service could match; keep one entry per key",
        ],
    },
];

#[test]
fn kubectl_apply_prints_the_rules_message_and_stores_nothing() {
    let Some(bin) = support::client_program("VIGIL_KUBECTL", "kubectl") else {
        eprintln!("skipped: kubectl not found (set VIGIL_KUBECTL or put kubectl on PATH)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("vigil-refused-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("cache")).expect("work directory");
    let (kubeconfig, _sandbox) = match std::env::var_os("VIGIL_TEST_KUBECONFIG") {
        Some(path) if !path.is_empty() => (PathBuf::from(path), None),
        _ => {
            let kubeconfig = dir.join("kubeconfig");
            let sandbox = support::spawn_sandbox(&kubeconfig);
            (kubeconfig, Some(sandbox))
        }
    };
    let kubectl = Kubectl {
        bin,
        kubeconfig,
        dir: dir.clone(),
    };
    let crds = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil/crds");
    for crd in [
        "criticalservices.mycrd.com",
        "topics.kafka.vigil.dev",
        "kubernetesclusters.vigil.dev",
        "configmapsyncs.apps.bixbite.io",
    ] {
        let file = crds.join(format!("{crd}.yaml"));
        kubectl.ok(&[
            "apply",
            "--server-side",
            "--force-conflicts",
            "-f",
            &file.to_string_lossy(),
        ]);
        kubectl.ok(&["wait", "--for=condition=Established", &format!("crd/{crd}")]);
    }
    let ns = format!("vigil-refused-{}", std::process::id());
    kubectl.ok(&["create", "namespace", &ns]);
    for case in CASES {
        let (created, text) = kubectl.apply(&ns, &case.first.replace("NAMESPACE", &ns));
        assert!(
            created,
            "{}: the first manifest is accepted: {text}",
            case.what
        );
        let (applied, text) = kubectl.apply(&ns, &case.then.replace("NAMESPACE", &ns));
        assert!(!applied, "{}: refused: {text}", case.what);
        // A deprecated version's warning (`v1alpha1` manifests still apply, with one) comes
        // first; the rule's message is what follows.
        let printed: Vec<&str> = text
            .lines()
            .map(str::trim_end)
            .filter(|l| !l.starts_with("Warning: "))
            .collect();
        let heading = case.lines[0].replace("NAMESPACE", &ns);
        assert_eq!(printed[0], heading, "{}: {text}", case.what);
        // The server lists the failures of one object in no fixed order.
        let mut printed_causes: Vec<&str> = printed[1..].to_vec();
        printed_causes.sort();
        let mut expected: Vec<&str> = case.lines[1..].to_vec();
        expected.sort();
        assert_eq!(printed_causes, expected, "{}: {text}", case.what);
    }
    // Nothing of the refused changes was stored.
    let topic = kubectl.ok(&[
        "get",
        "-n",
        &ns,
        "topics.kafka.vigil.dev/orders",
        "-o",
        "jsonpath={.spec.partitions}",
    ]);
    assert_eq!(topic.trim(), "6");
    let cluster = kubectl.ok(&[
        "get",
        "-n",
        &ns,
        "kubernetesclusters.vigil.dev/prod",
        "-o",
        "jsonpath={.spec.kubeVersion}",
    ]);
    assert_eq!(cluster.trim(), "1.28");
    kubectl.ok(&["delete", "criticalservices.mycrd.com", &ns, "--wait=false"]);
    kubectl.ok(&["delete", "namespace", &ns, "--wait=false"]);
    let _ = std::fs::remove_dir_all(&dir);
}
