//! The Helm chart (charts/vigil) rendered and installed by the real Helm: its default rendering is
//! what `vigil manifests` prints, controllers switched off take their RBAC with them, the schema
//! refuses typos and wrong types, optional objects appear when enabled, and a release installs,
//! upgrades, rolls back and uninstalls on a real API server.
//!
//! Helm is found through `VIGIL_HELM` or `PATH`; without it every test prints a note and passes.
//! The install test also needs `VIGIL_TEST_KUBECONFIG` (a real cluster: it installs CRDs and
//! cluster-wide RBAC); it does not pass `--wait`, since nothing needs Vigil's pods to run.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Value, json};

fn chart_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil")
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Helm binary: `VIGIL_HELM`, else `helm` on `PATH`; `None` (with a note) when neither works.
fn helm() -> Option<PathBuf> {
    let candidate = std::env::var_os("VIGIL_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("helm"));
    match Command::new(&candidate).arg("version").output() {
        Ok(out) if out.status.success() => Some(candidate),
        _ => {
            eprintln!(
                "skipped: no Helm (set VIGIL_HELM to a helm binary or put helm on PATH); tried {}",
                candidate.display()
            );
            None
        }
    }
}

fn run(helm: &Path, args: &[&str]) -> Output {
    Command::new(helm).args(args).output().expect("helm runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Splits a multi-document YAML stream into objects, leaving out empty documents.
fn documents(yaml: &str) -> Vec<Value> {
    yaml.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).expect("each document is YAML"))
        .collect()
}

/// `helm template` of the chart as release `vigil` in `vigil-system`, with `--set` pairs and
/// values files; Err carries Helm's complaint.
fn template(helm: &Path, extra: &[&str]) -> Result<Vec<Value>, String> {
    let chart = chart_dir();
    let mut args = vec![
        "template",
        "vigil",
        chart.to_str().expect("utf-8 path"),
        "--namespace",
        "vigil-system",
    ];
    args.extend_from_slice(extra);
    let out = run(helm, &args);
    if out.status.success() {
        Ok(documents(&text(&out.stdout)))
    } else {
        Err(text(&out.stderr))
    }
}

/// `vigil manifests` with these flags, without the CRDs (the chart's crds/) and the Namespace
/// (`helm install --create-namespace`).
fn manifests(flags: &[&str]) -> Vec<Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_vigil"))
        .arg("manifests")
        .args(flags)
        .output()
        .expect("vigil manifests");
    assert!(out.status.success(), "{}", text(&out.stderr));
    documents(&text(&out.stdout))
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition" && o["kind"] != "Namespace")
        .collect()
}

/// What may differ between the chart and `vigil manifests`: Helm's bookkeeping labels
/// (instance, chart, version, managed-by) and the instance label in selectors. Everything else
/// must be equal. Sorted by kind and name, since Helm orders objects its own way.
fn normalized(mut objects: Vec<Value>) -> Vec<Value> {
    fn keep_name_label(labels: &mut Value) {
        if let Some(map) = labels.as_object_mut() {
            map.retain(|k, _| k == "app.kubernetes.io/name");
        }
    }
    for o in &mut objects {
        keep_name_label(&mut o["metadata"]["labels"]);
        if o["kind"] == "Deployment" || o["kind"] == "PodDisruptionBudget" {
            keep_name_label(&mut o["spec"]["selector"]["matchLabels"]);
        }
        if o["kind"] == "Deployment" {
            keep_name_label(&mut o["spec"]["template"]["metadata"]["labels"]);
        }
    }
    objects.sort_by_key(|o| format!("{}/{}", o["kind"], o["metadata"]["name"]));
    objects
}

fn find<'a>(objects: &'a [Value], kind: &str) -> Option<&'a Value> {
    objects.iter().find(|o| o["kind"] == kind)
}

fn cluster_rules(objects: &[Value]) -> String {
    find(objects, "ClusterRole")
        .map(|r| r["rules"].to_string())
        .unwrap_or_default()
}

#[test]
fn lint_strict_passes() {
    let Some(helm) = helm() else { return };
    let chart = chart_dir();
    let out = run(
        &helm,
        &["lint", "--strict", chart.to_str().expect("utf-8 path")],
    );
    assert!(
        out.status.success(),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
}

/// The generated list of enabled controllers, rendered by the real Helm in a throwaway chart
/// around the generated templates: a controller without a values block (a new one), or with
/// a block but no `enabled`, is enabled; `enabled: false` disables it. So adding a controller
/// needs no values block for it to be installed.
#[test]
fn a_controller_without_values_is_enabled_and_enabled_false_disables_it() {
    let Some(helm) = helm() else { return };
    let dir = std::env::temp_dir().join(format!("vigil-chart-controllers-{}", std::process::id()));
    let templates = dir.join("templates");
    std::fs::create_dir_all(&templates).expect("temp chart");
    std::fs::write(
        dir.join("Chart.yaml"),
        "apiVersion: v2\nname: probe\nversion: 0.1.0\n",
    )
    .expect("Chart.yaml");
    // criticalService: no block at all; configMapSync: a block without `enabled`;
    // statusVault: disabled; the others enabled as in the real chart.
    std::fs::write(
        dir.join("values.yaml"),
        "configMapSync:\n  secrets: false\nstatusVault:\n  enabled: false\n\
         kubernetesCluster:\n  enabled: true\nkafkaTopic:\n  enabled: true\n",
    )
    .expect("values.yaml");
    for generated in ["_rules.tpl", "_controllers.tpl"] {
        std::fs::copy(
            chart_dir().join("templates").join(generated),
            templates.join(generated),
        )
        .expect("the generated templates");
    }
    std::fs::write(
        templates.join("out.yaml"),
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: out\ndata:\n  controllers: {{ include \"vigil.controllers\" . | quote }}\n",
    )
    .expect("out.yaml");
    let out = run(&helm, &["template", "p", dir.to_str().expect("utf-8 path")]);
    let _ = std::fs::remove_dir_all(&dir);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rendered = documents(&text(&out.stdout));
    assert_eq!(
        rendered[0]["data"]["controllers"],
        json!("criticalservice,configmapsync,kubernetescluster,kafkatopic")
    );
}

#[test]
fn the_default_rendering_is_what_vigil_manifests_prints() {
    let Some(helm) = helm() else { return };
    let chart = template(&helm, &[]).expect("helm template");
    assert_eq!(normalized(chart), normalized(manifests(&[])));
}

/// Each set of controllers (and Secret options) renders exactly the RBAC and Deployment that
/// `vigil manifests` prints for it: a controller switched off takes its rules with it.
#[test]
fn disabled_controllers_take_their_rbac_with_them() {
    let Some(helm) = helm() else { return };
    let off = |c: &str| format!("{c}.enabled=false");
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec![off("kafkaTopic"), off("kubernetesCluster")],
            vec!["--controllers", "criticalservice,configmapsync,statusvault"],
        ),
        (
            vec![
                off("criticalService"),
                off("configMapSync"),
                off("statusVault"),
                off("kafkaTopic"),
            ],
            vec!["--controllers", "kubernetescluster"],
        ),
        (
            vec![
                off("criticalService"),
                off("kubernetesCluster"),
                off("kafkaTopic"),
                "configMapSync.secrets=true".into(),
                "statusVault.resources={services,kubernetesclusters.infra.example.com}".into(),
            ],
            vec![
                "--controllers",
                "configmapsync,statusvault",
                "--configmapsync-secrets",
                "--status-vault-resources",
                "services,kubernetesclusters.infra.example.com",
            ],
        ),
        (
            vec!["kafkaTopic.secrets.enabled=true".into()],
            vec!["--kafka-topic-secrets"],
        ),
    ];
    for (sets, flags) in cases {
        let mut args = Vec::new();
        for s in &sets {
            args.extend(["--set", s.as_str()]);
        }
        let chart = template(&helm, &args).expect("helm template");
        assert_eq!(
            normalized(chart.clone()),
            normalized(manifests(&flags)),
            "--set {sets:?} vs vigil manifests {flags:?}"
        );
        let rules = cluster_rules(&chart);
        if sets.iter().any(|s| s == "kafkaTopic.enabled=false") {
            assert!(!rules.contains("kafka.vigil.dev"), "{rules}");
        }
        if sets.iter().any(|s| s == "criticalService.enabled=false") {
            assert!(!rules.contains("mycrd.com"), "{rules}");
            assert!(find(&chart, "PodTemplate").is_none());
        }
        if sets.iter().any(|s| s == "statusVault.enabled=false") {
            assert!(!rules.contains("statusbackuppolicies"), "{rules}");
        }
    }
    // A Kafka Secret list narrows the Secret grant to those names.
    let chart = template(
        &helm,
        &[
            "--set",
            "kafkaTopic.secrets.enabled=true",
            "--set",
            "kafkaTopic.secrets.names={kafka-tls}",
        ],
    )
    .expect("helm template");
    let role = find(&chart, "ClusterRole").expect("ClusterRole");
    let secret_rule = json!({"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": ["kafka-tls"]});
    assert!(
        role["rules"]
            .as_array()
            .is_some_and(|r| r.contains(&secret_rule)),
        "{role}"
    );
    // No controller at all is refused rather than rendering an operator that does nothing.
    let none = template(
        &helm,
        &[
            "--set",
            "criticalService.enabled=false,configMapSync.enabled=false,statusVault.enabled=false,kubernetesCluster.enabled=false,kafkaTopic.enabled=false",
        ],
    );
    assert!(
        none.as_ref()
            .is_err_and(|e| e.contains("enable at least one controller")),
        "{none:?}"
    );
}

/// The controllers' values pass their flags (generated from the registry): a value set passes
/// its flag, and an empty one means the flag's default — no argument, and the default
/// PodTemplate keeps the name `--pod-template` defaults to.
#[test]
fn controller_values_pass_their_flags_and_empty_means_the_default() {
    let Some(helm) = helm() else { return };
    let empty = template(
        &helm,
        &[
            "--set",
            "criticalService.podTemplate.name=,kafkaTopic.driftInterval=,statusVault.location=",
        ],
    )
    .expect("helm template");
    assert_eq!(normalized(empty), normalized(manifests(&[])));
    let set = template(
        &helm,
        &[
            "--set",
            "criticalService.podTemplate.name=mine,kafkaTopic.driftInterval=5s,configMapSync.trustAll=true",
        ],
    )
    .expect("helm template");
    let args: Vec<String> =
        find(&set, "Deployment").expect("Deployment")["spec"]["template"]["spec"]["containers"][0]
            ["args"]
            .as_array()
            .expect("args")
            .iter()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
    for pair in [["--pod-template", "mine"], ["--kafka-drift-interval", "5s"]] {
        assert!(args.windows(2).any(|w| w == pair), "{pair:?} in {args:?}");
    }
    assert!(
        args.iter().any(|a| a == "--configmapsync-trust-all"),
        "{args:?}"
    );
    let template = find(&set, "PodTemplate").expect("PodTemplate");
    assert_eq!(template["metadata"]["name"], "mine");
}

#[test]
fn the_schema_refuses_unknown_keys_and_wrong_types() {
    let Some(helm) = helm() else { return };
    for (set, complaint) in [
        ("replicaCout=3", "replicaCout"),
        ("kafkaTopic.driftIntervall=5s", "driftIntervall"),
        ("image.tag.x=1", "tag"),
        ("replicaCount=two", "replicaCount"),
        ("criticalService.enabled=maybe", "enabled"),
        ("kafkaTopic.driftInterval=5 minutes", "driftInterval"),
    ] {
        let result = template(&helm, &["--set", set]);
        assert!(
            result.as_ref().is_err_and(|e| e.contains(complaint)),
            "--set {set}: {result:?}"
        );
    }
}

#[test]
fn optional_objects_render_when_enabled() {
    let Some(helm) = helm() else { return };
    let defaults = template(&helm, &[]).expect("helm template");
    for kind in [
        "ServiceMonitor",
        "PrometheusRule",
        "NetworkPolicy",
        "Service",
    ] {
        assert!(find(&defaults, kind).is_none(), "{kind} is opt-in");
    }
    let chart = template(
        &helm,
        &[
            "--set",
            "podDisruptionBudget.enabled=true",
            "--set",
            "metrics.serviceMonitor.enabled=true,metrics.serviceMonitor.labels.release=prom",
            "--set",
            "metrics.prometheusRule.enabled=true",
            "--set",
            "networkPolicy.enabled=true",
            "--set",
            "metrics.port=9090",
        ],
    )
    .expect("helm template");
    let pdb = find(&chart, "PodDisruptionBudget").expect("PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], 1);
    let monitor = find(&chart, "ServiceMonitor").expect("ServiceMonitor");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prom");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    let service = find(&chart, "Service").expect("the metrics Service the monitor needs");
    assert_eq!(service["spec"]["ports"][0]["port"], 9090);
    let policy = find(&chart, "NetworkPolicy").expect("NetworkPolicy");
    assert_eq!(policy["spec"]["ingress"][0]["ports"][0]["port"], "metrics");
    let deploy = find(&chart, "Deployment").expect("Deployment");
    assert!(
        deploy["spec"]["template"]["spec"]["containers"][0]["args"]
            .to_string()
            .contains("0.0.0.0:9090")
    );
    // The PrometheusRule carries observability/alerts.yaml's groups, unchanged.
    let rule = find(&chart, "PrometheusRule").expect("PrometheusRule");
    let alerts: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(repo_root().join("observability/alerts.yaml"))
            .expect("observability/alerts.yaml"),
    )
    .expect("alerts YAML");
    assert_eq!(rule["spec"], alerts);
    let with_max = template(
        &helm,
        &[
            "--set",
            "podDisruptionBudget.enabled=true,podDisruptionBudget.maxUnavailable=50%",
        ],
    )
    .expect("helm template");
    let pdb = find(&with_max, "PodDisruptionBudget").expect("PodDisruptionBudget");
    assert_eq!(pdb["spec"]["maxUnavailable"], "50%");
    assert!(pdb["spec"].get("minAvailable").is_none(), "{pdb}");
}

/// The PodDisruptionBudget is on by default with two replicas or more (a node drain keeps one
/// to take over the Lease), and absent with one (a budget could only block the drain for ever).
#[test]
fn the_disruption_budget_follows_the_replica_count() {
    let Some(helm) = helm() else { return };
    let budget = |sets: &[&str]| {
        let mut args = Vec::new();
        for set in sets {
            args.extend(["--set", *set]);
        }
        let objects = template(&helm, &args).expect("helm template");
        find(&objects, "PodDisruptionBudget").map(|pdb| pdb["spec"].clone())
    };
    let default = budget(&[]).expect("on by default with the default 2 replicas");
    assert_eq!(default["maxUnavailable"], 1, "{default}");
    assert!(default.get("minAvailable").is_none(), "{default}");
    let deployment = template(&helm, &[]).expect("helm template");
    let deployment = find(&deployment, "Deployment").expect("Deployment");
    assert_eq!(
        default["selector"], deployment["spec"]["selector"],
        "it covers Vigil's pods"
    );
    assert!(budget(&["replicaCount=3"]).is_some());
    assert!(budget(&["replicaCount=1"]).is_none(), "one replica: none");
    assert!(
        budget(&["podDisruptionBudget.enabled=false"]).is_none(),
        "opt-out"
    );
    let min = budget(&["podDisruptionBudget.minAvailable=1"]).expect("PodDisruptionBudget");
    assert_eq!(min["minAvailable"], 1, "{min}");
    assert!(min.get("maxUnavailable").is_none(), "{min}");
}

/// The chart's copy of the alerts (read by `.Files.Get`) is observability/alerts.yaml.
#[test]
fn the_charts_alerts_are_observability_alerts() {
    let read =
        |p: PathBuf| std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    assert_eq!(
        read(chart_dir().join("files/alerts.yaml")),
        read(repo_root().join("observability/alerts.yaml")),
        "copy observability/alerts.yaml to charts/vigil/files/alerts.yaml"
    );
}

/// A release's life on a real API server: install, upgrade (a controller switched off), rollback,
/// uninstall, checked through the API.
#[test]
fn install_upgrade_rollback_uninstall_on_a_real_cluster() {
    let Some(helm) = helm() else { return };
    let Some(kubeconfig) = std::env::var_os("VIGIL_TEST_KUBECONFIG") else {
        eprintln!("skipped: set VIGIL_TEST_KUBECONFIG to a real cluster's kubeconfig");
        return;
    };
    let kubeconfig = PathBuf::from(kubeconfig);
    let id = format!("{}-{}", std::process::id(), rand_suffix());
    let release = format!("vigil-t{id}");
    let namespace = format!("vigil-helm-{id}");
    let chart = chart_dir();
    let chart = chart.to_str().expect("utf-8 path");
    let kc = kubeconfig.to_str().expect("utf-8 path");
    let helm_in = |args: &[&str]| {
        let mut all = vec!["--kubeconfig", kc, "--namespace", namespace.as_str()];
        all.extend_from_slice(args);
        let out = run(&helm, &all);
        assert!(
            out.status.success(),
            "helm {args:?}: {}{}",
            text(&out.stdout),
            text(&out.stderr)
        );
        text(&out.stdout)
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let client = rt.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .expect("config");
        kube::Client::try_from(config).expect("client")
    });
    let get = |api_version: &str, kind: &str, ns: Option<&str>, name: &str| -> Option<Value> {
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let gvk = kube::api::GroupVersionKind::gvk(group, version, kind);
        let lower = kind.to_lowercase();
        let plural = match lower.strip_suffix('y') {
            Some(stem) => format!("{stem}ies"),
            None => format!("{lower}s"),
        };
        let resource = kube::api::ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: kube::Api<kube::api::DynamicObject> = match ns {
            Some(ns) => kube::Api::namespaced_with(client.clone(), ns, &resource),
            None => kube::Api::all_with(client.clone(), &resource),
        };
        rt.block_on(api.get_opt(name))
            .expect("API get")
            .map(|o| serde_json::to_value(o).expect("JSON"))
    };
    let replicas = || {
        get("apps/v1", "Deployment", Some(&namespace), &release)
            .map(|d| d["spec"]["replicas"].clone())
    };
    let role_rules = || {
        get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            None,
            &release,
        )
        .map(|r| r["rules"].to_string())
        .unwrap_or_default()
    };

    helm_in(&[
        "install",
        &release,
        chart,
        "--create-namespace",
        "--set",
        "replicaCount=1",
    ]);
    let cleanup = Cleanup {
        helm: helm.clone(),
        kubeconfig: kubeconfig.clone(),
        release: release.clone(),
        namespace: namespace.clone(),
    };
    assert_eq!(replicas(), Some(json!(1)));
    assert!(role_rules().contains("kafka.vigil.dev"));
    assert!(get("v1", "ServiceAccount", Some(&namespace), &release).is_some());
    assert!(
        get(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "topics.kafka.vigil.dev"
        )
        .is_some(),
        "CRDs installed from crds/"
    );

    // Every option the API server can check without the Prometheus Operator's CRDs: the
    // server validates the Deployment, PDB, NetworkPolicy and Service they render.
    let values = std::env::temp_dir().join(format!("vigil-chart-values-{id}.yaml"));
    std::fs::write(&values, RICH_VALUES).expect("values file");
    helm_in(&[
        "upgrade",
        &release,
        chart,
        "--values",
        values.to_str().expect("utf-8 path"),
    ]);
    let _ = std::fs::remove_file(&values);
    assert_eq!(replicas(), Some(json!(3)));
    assert!(
        get(
            "policy/v1",
            "PodDisruptionBudget",
            Some(&namespace),
            &release
        )
        .is_some(),
        "PodDisruptionBudget"
    );
    assert!(
        get(
            "networking.k8s.io/v1",
            "NetworkPolicy",
            Some(&namespace),
            &release
        )
        .is_some(),
        "NetworkPolicy"
    );
    assert!(role_rules().contains("resourceNames"), "{}", role_rules());

    helm_in(&[
        "upgrade",
        &release,
        chart,
        "--set",
        "replicaCount=2,kafkaTopic.enabled=false",
    ]);
    assert_eq!(replicas(), Some(json!(2)));
    assert!(
        !role_rules().contains("kafka.vigil.dev"),
        "{}",
        role_rules()
    );

    helm_in(&["rollback", &release, "1"]);
    assert_eq!(replicas(), Some(json!(1)));
    assert!(role_rules().contains("kafka.vigil.dev"));
    let history = helm_in(&["history", &release, "--output", "json"]);
    let revisions: Value = serde_json::from_str(&history).expect("history JSON");
    assert_eq!(revisions.as_array().map(Vec::len), Some(4), "{history}");

    helm_in(&["uninstall", &release]);
    assert_eq!(replicas(), None);
    assert!(
        get(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            None,
            &release
        )
        .is_none(),
        "cluster-wide RBAC goes with the release"
    );
    drop(cleanup);
}

/// Values touching every part of the chart the API server validates.
const RICH_VALUES: &str = r#"
image: {repository: ghcr.io/example/vigil, tag: "9.9.9", pullPolicy: IfNotPresent}
imagePullSecrets: [{name: regcred}]
replicaCount: 3
logLevel: debug
watchNamespaces: [team-a, team-b]
nodeSelector: {kubernetes.io/os: linux}
tolerations: [{key: dedicated, operator: Exists, effect: NoSchedule}]
affinity:
  podAntiAffinity:
    preferredDuringSchedulingIgnoredDuringExecution:
      - weight: 1
        podAffinityTerm:
          topologyKey: kubernetes.io/hostname
          labelSelector: {matchLabels: {app.kubernetes.io/name: vigil}}
topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway, labelSelector: {matchLabels: {app.kubernetes.io/name: vigil}}}
podAnnotations: {example.com/team: platform}
podLabels: {team: platform}
serviceAccount: {annotations: {eks.amazonaws.com/role-arn: "arn:aws:iam::123456789012:role/vigil"}}
podDisruptionBudget: {enabled: true, minAvailable: 1}
metrics: {port: 9090, service: {enabled: true}}
networkPolicy:
  enabled: true
  metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]
  egress: [{}]
extraArgs: ["--lease-duration", "30s"]
extraEnv: [{name: RUST_BACKTRACE, value: "1"}]
criticalService: {podNamePrefix: fallback, podTemplate: {name: fallback-template, image: "nginx:1.27"}}
configMapSync: {trustAll: true, secrets: true}
statusVault:
  location: s3://vigil-status/prod
  resources: [services, deployments.apps]
  s3: {existingSecret: vigil-s3, region: eu-west-1, endpoint: "http://minio.minio:9000"}
  encryption: {existingSecret: vigil-vault-key}
kubernetesCluster:
  pollInterval: 5s
  providers:
    - {name: bank, url: "https://clusters.bank.example", tokenSecret: {name: bank-provider, key: token}}
kafkaTopic: {secrets: {enabled: true, names: [kafka-tls]}, driftInterval: 0s, retryMax: 30s, brokerTimeout: 5s}
"#;

fn rand_suffix() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() % 100_000)
        .unwrap_or(0)
}

/// Uninstalls the release (if a step failed before) and deletes its namespace, without waiting.
struct Cleanup {
    helm: PathBuf,
    kubeconfig: PathBuf,
    release: String,
    namespace: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let kc = self.kubeconfig.to_string_lossy().into_owned();
        let _ = Command::new(&self.helm)
            .args([
                "--kubeconfig",
                &kc,
                "--namespace",
                &self.namespace,
                "uninstall",
                &self.release,
                "--ignore-not-found",
            ])
            .output();
        // The namespace goes through kube's own helper rather than kubectl, which may be absent.
        let namespace = self.namespace.clone();
        let kubeconfig = self.kubeconfig.clone();
        let deleted = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new().ok()?;
            rt.block_on(async {
                let file = kube::config::Kubeconfig::read_from(&kubeconfig).ok()?;
                let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
                    .await
                    .ok()?;
                let client = kube::Client::try_from(config).ok()?;
                let api: kube::Api<k8s_openapi::api::core::v1::Namespace> = kube::Api::all(client);
                api.delete(&namespace, &Default::default()).await.ok()
            })
        })
        .join();
        if !matches!(deleted, Ok(Some(_))) {
            eprintln!("note: namespace {} was not deleted", self.namespace);
        }
    }
}

/// Every value in values.yaml has a row in the chart README's table.
#[test]
fn the_readme_documents_every_value() {
    fn leaves(value: &Value, prefix: &str, out: &mut Vec<String>) {
        // Kubernetes objects passed through whole are one row each.
        const WHOLE: &[&str] = &["resources", "podSecurityContext", "securityContext"];
        match value.as_object() {
            Some(map) if !map.is_empty() && !WHOLE.contains(&prefix) => {
                for (k, v) in map {
                    let path = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    leaves(v, &path, out);
                }
            }
            _ => out.push(prefix.to_owned()),
        }
    }
    let values: Value = serde_saphyr::from_str(
        &std::fs::read_to_string(chart_dir().join("values.yaml")).expect("values.yaml"),
    )
    .expect("values YAML");
    let readme = std::fs::read_to_string(chart_dir().join("README.md")).expect("README.md");
    let mut paths = Vec::new();
    leaves(&values, "", &mut paths);
    let missing: Vec<&String> = paths
        .iter()
        .filter(|p| !readme.contains(&format!("| `{p}` |")))
        .collect();
    assert!(missing.is_empty(), "undocumented values: {missing:?}");
}
