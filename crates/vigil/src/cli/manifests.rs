//! `vigil manifests`: everything that installs Vigil, printed as YAML — the CRDs generated from
//! the Rust types, a ServiceAccount, a ClusterRole holding exactly the permissions the chosen
//! controllers' code declares (no wildcards), a Role for the leader-election Lease, their
//! bindings, the default PodTemplate, and a hardened two-replica Deployment.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use vigil_controllers::permissions::Permission;
use vigil_controllers::registry::{self, Registration};
use vigil_controllers::{
    configmap_sync, critical_service, kafka_topic, kubernetes_cluster, status_vault,
};
use vigil_runtime::leader::LEASE_VERBS;

#[derive(Debug, clap::Args)]
pub struct ManifestsArgs {
    /// Namespace Vigil runs in.
    #[arg(long, default_value = "vigil-system")]
    namespace: String,
    /// Container image of Vigil.
    #[arg(long, default_value = concat!("vigil:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// Controllers to install, comma-separated (default: all of them).
    #[arg(long, value_delimiter = ',', default_values_t = registry::names().map(str::to_owned).collect::<Vec<_>>())]
    controllers: Vec<String>,
    /// Status vault: the resources StatusBackupPolicies may cover, as `plural` or
    /// `plural.group` (`services,kubernetesclusters.infra.example.com`); each gets exactly
    /// get/list/watch/patch and patch on its `/status` (no wildcards).
    #[arg(long, value_delimiter = ',')]
    status_vault_resources: Vec<String>,
    /// ConfigMapSync: also copy Secrets — grants Secret permissions and passes
    /// `--configmapsync-secrets` to `vigil run`.
    #[arg(long)]
    configmapsync_secrets: bool,
    /// KafkaTopic: grant `get` on Secrets, for Topics whose cluster names TLS or SASL Secrets.
    #[arg(long)]
    kafka_topic_secrets: bool,
    /// Instead of printing, write the generated files of the Helm chart in this directory (its
    /// CRDs and the RBAC rules of each controller; the templates around them are hand-written).
    #[arg(long, value_name = "DIR")]
    chart: Option<std::path::PathBuf>,
}

const NAME: &str = "vigil";
/// The KubernetesClusters' resource, as `--status-vault-resources` names it.
const KUBERNETES_CLUSTERS: &str = "kubernetesclusters.vigil.dev";

/// The objects to install, in apply order.
pub fn objects(args: &ManifestsArgs) -> anyhow::Result<Vec<Value>> {
    // Rules per controller, in the order the controllers are named, a rule another controller
    // already brought left out: the chart assembles its ClusterRole the same way from the
    // controllers enabled (`templates/_rules.tpl`), so both render the same rules.
    let mut cluster_rules: Vec<Value> = Vec::new();
    let mut grant = |permissions: &[Permission]| {
        for rule in rules(permissions) {
            if !cluster_rules.contains(&rule) {
                cluster_rules.push(rule);
            }
        }
    };
    let mut crds = Vec::new();
    for name in &args.controllers {
        let controller =
            registry::find(name).ok_or_else(|| anyhow::anyhow!("unknown controller {name:?}"))?;
        grant(controller.permissions);
        for set in requested_sets(args, controller) {
            grant(set);
        }
        for crd in (controller.crds)() {
            crds.push(serde_json::to_value(crd)?);
        }
    }
    let ns = args.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": NAME});
    let mut out = crds;
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, "labels": labels}}));
    if args.controllers.iter().any(|c| c == status_vault::NAME) {
        // KubernetesClusters' status is what the vault exists for: covered whenever both run.
        let mut covered = args.status_vault_resources.clone();
        if args
            .controllers
            .iter()
            .any(|c| c == kubernetes_cluster::NAME)
            && !covered.iter().any(|r| r == KUBERNETES_CLUSTERS)
        {
            covered.push(KUBERNETES_CLUSTERS.to_owned());
        }
        for (group, resources, verbs) in
            status_vault::controller::covered_kind_permissions(&covered)
        {
            cluster_rules
                .push(json!({"apiGroups": [group], "resources": resources, "verbs": verbs}));
        }
    }
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME, "labels": labels}, "rules": cluster_rules}));
    out.push(binding("ClusterRoleBinding", None, ns, &labels));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": ns, "labels": labels},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": LEASE_VERBS}],
    }));
    out.push(binding("RoleBinding", Some(ns), ns, &labels));
    if args.controllers.iter().any(|c| c == critical_service::NAME) {
        out.push(json!({
            "apiVersion": "v1", "kind": "PodTemplate",
            "metadata": {"name": "critical-service-pod-template", "namespace": ns, "labels": labels},
            "template": {"metadata": {"name": "critical-service-pod"}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
        }));
    }
    let mut deploy = deployment(args, &labels);
    if args.configmapsync_secrets
        && let Some(run_args) =
            deploy["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut()
    {
        run_args.push(json!("--configmapsync-secrets"));
    }
    if args
        .controllers
        .iter()
        .any(|c| c == status_vault::NAME || c == kubernetes_cluster::NAME)
    {
        // The root file system is read-only: the default directory backend of the vault and
        // the local cluster provider need a volume. An emptyDir survives container restarts,
        // not rescheduling — use a PersistentVolume or S3 (`--status-vault-location s3://…`)
        // to keep records across pods.
        let pod = &mut deploy["spec"]["template"]["spec"];
        pod["volumes"] = json!([{"name": "status-vault", "emptyDir": {}}]);
        pod["containers"][0]["volumeMounts"] =
            json!([{"name": "status-vault", "mountPath": "/var/lib/vigil"}]);
    }
    out.push(deploy);
    out.push(disruption_budget(args, &labels));
    Ok(out)
}

/// At most one of the two replicas evicted at a time: a node drain keeps one running to take
/// over the Lease (maxUnavailable rather than minAvailable: it stays meetable at any replica
/// count, and means the same with two).
fn disruption_budget(args: &ManifestsArgs, labels: &Value) -> Value {
    json!({
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": NAME, "namespace": args.namespace, "labels": labels},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
        },
    })
}

/// The optional permission sets of `controller` that the flags ask for.
fn requested_sets(
    args: &ManifestsArgs,
    controller: &Registration,
) -> impl Iterator<Item = &'static [Permission]> {
    let asked = match controller.name {
        configmap_sync::NAME => args.configmapsync_secrets,
        kafka_topic::NAME => args.kafka_topic_secrets,
        _ => false,
    };
    asked
        .then(|| controller.optional("secrets"))
        .flatten()
        .into_iter()
}

/// ClusterRole rules from declared permissions: one rule per (group, verbs), resources merged.
fn rules(permissions: &[Permission]) -> Vec<Value> {
    let mut merged: BTreeMap<(&str, Vec<&str>), Vec<&str>> = BTreeMap::new();
    for p in permissions {
        let mut verbs: Vec<&str> = p.verbs.to_vec();
        verbs.sort_unstable();
        verbs.dedup();
        let resources = merged.entry((p.group, verbs)).or_default();
        for r in p.resources {
            if !resources.contains(r) {
                resources.push(r);
            }
        }
    }
    merged
        .into_iter()
        .map(|((group, verbs), resources)| json!({"apiGroups": [group], "resources": resources, "verbs": verbs}))
        .collect()
}

fn binding(kind: &str, namespace: Option<&str>, sa_namespace: &str, labels: &Value) -> Value {
    let (role_kind, role_name) = match namespace {
        Some(_) => ("Role", format!("{NAME}-leader-election")),
        None => ("ClusterRole", NAME.to_owned()),
    };
    let mut metadata = json!({"name": role_name, "labels": labels});
    if let Some(ns) = namespace {
        metadata["namespace"] = json!(ns);
    }
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": role_name},
        "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": sa_namespace}],
    })
}

fn deployment(args: &ManifestsArgs, labels: &Value) -> Value {
    let env_from_field = |name: &str, path: &str| json!({"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}});
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": NAME, "namespace": args.namespace, "labels": labels},
        "spec": {
            // Two replicas: one leads, the other keeps warm caches and takes over.
            "replicas": 2,
            "selector": {"matchLabels": {"app.kubernetes.io/name": NAME}},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": NAME,
                    "securityContext": {"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [{
                        "name": NAME,
                        "image": args.image,
                        "args": ["run", "--controllers", args.controllers.join(",")],
                        "env": [
                            env_from_field("POD_NAME", "metadata.name"),
                            env_from_field("POD_NAMESPACE", "metadata.namespace"),
                            // Spelled out so the level is one edit away (the chart's `logLevel`).
                            {"name": "LOG_LEVEL", "value": "info"},
                        ],
                        "ports": [{"name": "metrics", "containerPort": 8080}],
                        "livenessProbe": {"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10},
                        "readinessProbe": {"httpGet": {"path": "/readyz", "port": "metrics"}, "periodSeconds": 5},
                        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
                        "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}},
                    }],
                },
            },
        },
    })
}

/// Prints the objects as one multi-document YAML stream, or writes them as a Helm chart.
pub fn run(args: &ManifestsArgs) -> anyhow::Result<()> {
    if let Some(dir) = &args.chart {
        return write_chart(args, dir);
    }
    for object in objects(args)? {
        crate::outln!("---\n{}", serde_saphyr::to_string(&object)?.trim_end())?;
    }
    Ok(())
}

/// The chart's files that are generated from the code, path → content: the CRDs (from the Rust
/// types) and `templates/_rules.tpl`, the RBAC rules each controller's code declares. The rest
/// of `charts/vigil` (templates, values, schema) is written by hand around them; a test renders
/// it with Helm and compares the result with [`objects`].
pub fn chart_files(args: &ManifestsArgs) -> anyhow::Result<BTreeMap<String, String>> {
    let mut files = BTreeMap::new();
    for object in objects(args)? {
        // Helm installs CRDs from crds/, before templates, and never templates them.
        if object["kind"] == "CustomResourceDefinition" {
            let name = object["metadata"]["name"]
                .as_str()
                .unwrap_or("crd")
                .to_owned();
            let yaml = serde_saphyr::to_string(&object)?;
            files.insert(
                format!("crds/{name}.yaml"),
                format!("{}\n", yaml.trim_end()),
            );
        }
    }
    files.insert("templates/_rules.tpl".into(), rules_template()?);
    Ok(files)
}

/// Helm defines holding each controller's ClusterRole rules (a YAML list), so the chart grants
/// exactly what the code declares for the controllers a release enables.
fn rules_template() -> anyhow::Result<String> {
    let strings = |v: &[&str]| v.iter().map(|s| json!(s)).collect::<Vec<_>>();
    let lease = vec![
        json!({"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": LEASE_VERBS}),
    ];
    let mut defines: Vec<(String, Vec<Value>)> = Vec::new();
    for controller in registry::CONTROLLERS {
        defines.push((controller.name.to_owned(), rules(controller.permissions)));
        for (set, permissions) in controller.optional_permissions {
            defines.push((format!("{}.{set}", controller.name), rules(permissions)));
        }
    }
    defines.push(("leaderelection".into(), lease));
    defines.push((
        "statusvault.coveredVerbs".into(),
        strings(status_vault::controller::COVERED_VERBS),
    ));
    defines.push((
        "statusvault.coveredStatusVerbs".into(),
        strings(status_vault::controller::COVERED_STATUS_VERBS),
    ));
    let mut out = String::from(
        "{{/*\nGenerated by `vigil manifests --chart charts/vigil` from the permissions each \
         controller's code declares\n(crates/controllers): do not edit. One YAML list per \
         controller; templates/rbac.yaml grants those of the\nenabled controllers.\n*/}}\n",
    );
    for (name, list) in defines {
        let yaml = serde_saphyr::to_string(&list)?;
        out.push_str(&format!(
            "{{{{- define \"vigil.rules.{name}\" }}}}\n{}\n{{{{- end }}}}\n",
            yaml.trim_end()
        ));
    }
    // The enabled controllers, from the values' `<chartKey>.enabled`, in the registry's order. A
    // controller whose values have no such block (or no `enabled` in it) is enabled: a new
    // controller needs no values to be installed.
    out.push_str("{{- define \"vigil.controllers\" -}}\n{{- $enabled := list }}\n");
    for (i, controller) in registry::CONTROLLERS.iter().enumerate() {
        out.push_str(&format!(
            "{{{{- $v{i} := index .Values \"{key}\" | default dict }}}}\
             {{{{- if hasKey $v{i} \"enabled\" | ternary (get $v{i} \"enabled\") true }}}}\
             {{{{- $enabled = append $enabled \"{name}\" }}}}{{{{ end }}}}\n",
            key = controller.chart_key,
            name = controller.name
        ));
    }
    out.push_str("{{- join \",\" $enabled }}\n{{- end }}\n");
    Ok(out)
}

fn write_chart(args: &ManifestsArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    for (path, content) in chart_files(args)? {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, content)?;
    }
    say!("generated files of the chart written to {}", dir.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_args() -> ManifestsArgs {
        ManifestsArgs {
            namespace: "vigil-system".into(),
            image: "vigil:test".into(),
            controllers: vec![
                critical_service::NAME.into(),
                configmap_sync::NAME.into(),
                status_vault::NAME.into(),
                kubernetes_cluster::NAME.into(),
                kafka_topic::NAME.into(),
            ],
            status_vault_resources: Vec::new(),
            configmapsync_secrets: false,
            kafka_topic_secrets: false,
            chart: None,
        }
    }

    #[test]
    fn rbac_has_no_wildcards_and_covers_the_declared_permissions() {
        let objects = objects(&default_args()).expect("objects");
        let role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        let text = role.to_string();
        assert!(!text.contains('*'), "no wildcards: {text}");
        for p in critical_service::PERMISSIONS
            .iter()
            .chain(kubernetes_cluster::PERMISSIONS)
        {
            for resource in p.resources {
                for verb in p.verbs {
                    let granted = role["rules"].as_array().into_iter().flatten().any(|r| {
                        r["apiGroups"][0] == p.group
                            && r["resources"]
                                .as_array()
                                .is_some_and(|rs| rs.iter().any(|x| x == resource))
                            && r["verbs"]
                                .as_array()
                                .is_some_and(|vs| vs.iter().any(|x| x == verb))
                    });
                    assert!(granted, "{verb} {resource} in {:?}", p.group);
                }
            }
        }
    }

    #[test]
    fn status_vault_covered_resources_get_exact_rules_and_the_vault_a_volume() {
        let mut args = default_args();
        args.status_vault_resources = vec![
            "services".into(),
            "kubernetesclusters.infra.example.com".into(),
        ];
        let objects = objects(&args).expect("objects");
        let role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        let rules = role["rules"].as_array().expect("rules");
        for expected in [
            json!({"apiGroups": ["infra.example.com"], "resources": ["kubernetesclusters"], "verbs": ["get", "list", "watch", "patch"]}),
            json!({"apiGroups": ["infra.example.com"], "resources": ["kubernetesclusters/status"], "verbs": ["patch"]}),
            json!({"apiGroups": [""], "resources": ["services/status"], "verbs": ["patch"]}),
        ] {
            assert!(rules.contains(&expected), "{expected} in {rules:?}");
        }
        assert!(!role.to_string().contains('*'));
        assert!(
            objects
                .iter()
                .any(|o| o["metadata"]["name"] == "statusbackuppolicies.vigil.dev")
        );
        let deploy = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        assert_eq!(
            deploy["spec"]["template"]["spec"]["containers"][0]["volumeMounts"][0]["mountPath"],
            "/var/lib/vigil"
        );
    }

    #[test]
    fn configmapsync_secrets_grants_secrets_and_passes_the_flag() {
        let mut args = default_args();
        // KubernetesCluster writes kubeconfig Secrets: without it, no Secret permission.
        args.controllers.retain(|c| c != kubernetes_cluster::NAME);
        let mentions_secrets = |objects: &[Value]| {
            objects
                .iter()
                .find(|o| o["kind"] == "ClusterRole")
                .is_some_and(|r| r["rules"].to_string().contains("\"secrets\""))
        };
        assert!(!mentions_secrets(&objects(&args).expect("objects")));
        args.configmapsync_secrets = true;
        let objects = objects(&args).expect("objects");
        assert!(mentions_secrets(&objects));
        let deploy = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let run_args = deploy["spec"]["template"]["spec"]["containers"][0]["args"].to_string();
        assert!(run_args.contains("--configmapsync-secrets"), "{run_args}");
    }

    #[test]
    fn kubernetes_clusters_are_covered_by_the_vault_when_both_run() {
        let all = objects(&default_args()).expect("objects");
        let role = all
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        let rules = role["rules"].as_array().expect("rules");
        let vault_rule = json!({"apiGroups": ["vigil.dev"], "resources": ["kubernetesclusters"], "verbs": ["get", "list", "watch", "patch"]});
        assert!(rules.contains(&vault_rule), "{rules:?}");
        assert!(
            all.iter()
                .any(|o| o["metadata"]["name"] == "kubernetesclusters.vigil.dev")
        );
        let mut args = default_args();
        args.controllers.retain(|c| c != status_vault::NAME);
        let without_vault = objects(&args).expect("objects");
        let role = without_vault
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        assert!(
            !role["rules"]
                .as_array()
                .expect("rules")
                .contains(&vault_rule)
        );
    }

    #[test]
    fn deployment_is_hardened() {
        let objects = objects(&default_args()).expect("objects");
        let deploy = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("deployment");
        let pod = &deploy["spec"]["template"]["spec"];
        assert_eq!(deploy["spec"]["replicas"], 2);
        let budget = objects
            .iter()
            .find(|o| o["kind"] == "PodDisruptionBudget")
            .expect("a PodDisruptionBudget");
        assert_eq!(
            budget["spec"]["maxUnavailable"], 1,
            "a drain keeps a replica"
        );
        assert_eq!(
            budget["spec"]["selector"], deploy["spec"]["selector"],
            "it covers the Deployment's pods"
        );
        assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
        assert_eq!(
            pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"],
            true
        );
        assert_eq!(
            pod["containers"][0]["readinessProbe"]["httpGet"]["path"],
            "/readyz"
        );
        assert!(
            objects
                .iter()
                .any(|o| o["kind"] == "CustomResourceDefinition")
        );
    }
}

#[cfg(test)]
mod chart_tests {
    use super::*;

    fn args() -> ManifestsArgs {
        ManifestsArgs {
            namespace: "vigil-system".into(),
            image: concat!("vigil:", env!("CARGO_PKG_VERSION")).into(),
            controllers: vec![
                critical_service::NAME.into(),
                configmap_sync::NAME.into(),
                status_vault::NAME.into(),
                kubernetes_cluster::NAME.into(),
                kafka_topic::NAME.into(),
            ],
            status_vault_resources: Vec::new(),
            configmapsync_secrets: false,
            kafka_topic_secrets: false,
            chart: None,
        }
    }

    /// The generated part of the chart (CRDs, RBAC rules) is what the code generates today. The
    /// hand-written part is compared with `vigil manifests` by rendering it with Helm
    /// (crates/vigil/tests/chart.rs).
    #[test]
    fn the_committed_chart_is_the_generated_one() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil");
        let files = chart_files(&args()).expect("chart");
        assert!(
            files.keys().any(|k| k.starts_with("crds/")),
            "CRDs ship in crds/"
        );
        for (path, content) in files {
            let committed = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
            assert_eq!(
                committed, content,
                "charts/vigil/{path} is stale: run `cargo run -p vigil -- manifests --chart charts/vigil`"
            );
        }
        let chart = std::fs::read_to_string(root.join("Chart.yaml")).expect("Chart.yaml");
        let version = env!("CARGO_PKG_VERSION");
        assert!(
            chart.contains(&format!("\nversion: {version}\n"))
                && chart.contains(&format!("\nappVersion: \"{version}\"\n")),
            "Chart.yaml's version and appVersion are the crate's ({version})"
        );
    }

    #[test]
    fn rules_are_granted_once_even_when_controllers_share_them() {
        let all = objects(&args()).expect("objects");
        let role = all
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("cluster role");
        let rules = role["rules"].as_array().expect("rules");
        let events = rules
            .iter()
            .filter(|r| r["apiGroups"][0] == "events.k8s.io")
            .count();
        assert_eq!(events, 1, "{rules:?}");
    }
}
