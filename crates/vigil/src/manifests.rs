//! `vigil manifests`: everything that installs Vigil, printed as YAML — the CRDs generated from
//! the Rust types, a ServiceAccount, a ClusterRole holding exactly the permissions the chosen
//! controllers' code declares (no wildcards), a Role for the leader-election Lease, their
//! bindings, the default PodTemplate, and a hardened two-replica Deployment.

use std::collections::BTreeMap;

use kube::CustomResourceExt as _;
use serde_json::{Value, json};
use vigil_apis::ConfigMapSync;
use vigil_apis::CriticalService;
use vigil_apis::KubernetesCluster;
use vigil_apis::StatusBackupPolicy;
use vigil_apis::Topic;
use vigil_controllers::configmap_sync::controller as configmap_sync;
use vigil_controllers::critical_service::controller as critical_service;
use vigil_controllers::kafka_topic::controller as kafka_topic;
use vigil_controllers::kubernetes_cluster;
use vigil_controllers::permissions::Permission;
use vigil_controllers::status_vault;
use vigil_runtime::leader::LEASE_VERBS;

#[derive(Debug, clap::Args)]
pub struct ManifestsArgs {
    /// Namespace Vigil runs in.
    #[arg(long, default_value = "vigil-system")]
    namespace: String,
    /// Container image of Vigil.
    #[arg(long, default_value = concat!("vigil:", env!("CARGO_PKG_VERSION")))]
    image: String,
    /// Controllers to install, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "criticalservice,configmapsync,statusvault,kubernetescluster,kafkatopic"
    )]
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
    /// Instead of printing, write a Helm chart rendering the same objects into this directory.
    #[arg(long, value_name = "DIR")]
    chart: Option<std::path::PathBuf>,
}

const NAME: &str = "vigil";
/// The KubernetesClusters' resource, as `--status-vault-resources` names it.
const KUBERNETES_CLUSTERS: &str = "kubernetesclusters.vigil.dev";

/// The objects to install, in apply order.
pub fn objects(args: &ManifestsArgs) -> anyhow::Result<Vec<Value>> {
    let mut permissions: Vec<Permission> = Vec::new();
    let mut crds = Vec::new();
    for controller in &args.controllers {
        match controller.as_str() {
            critical_service::NAME => {
                permissions.extend_from_slice(critical_service::PERMISSIONS);
                crds.push(serde_json::to_value(CriticalService::crd())?);
            }
            status_vault::NAME => {
                permissions.extend_from_slice(status_vault::PERMISSIONS);
                crds.push(serde_json::to_value(StatusBackupPolicy::crd())?);
            }
            kubernetes_cluster::NAME => {
                permissions.extend_from_slice(kubernetes_cluster::PERMISSIONS);
                crds.push(serde_json::to_value(KubernetesCluster::crd())?);
            }
            configmap_sync::NAME => {
                permissions.extend_from_slice(configmap_sync::PERMISSIONS);
                if args.configmapsync_secrets {
                    permissions.extend_from_slice(configmap_sync::SECRET_PERMISSIONS);
                }
                crds.push(serde_json::to_value(ConfigMapSync::crd())?);
            }
            kafka_topic::NAME => {
                permissions.extend_from_slice(kafka_topic::PERMISSIONS);
                if args.kafka_topic_secrets {
                    permissions.extend_from_slice(kafka_topic::SECRET_PERMISSIONS);
                }
                crds.push(serde_json::to_value(Topic::crd())?);
            }
            other => anyhow::bail!("unknown controller {other:?}"),
        }
    }
    let ns = args.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": NAME});
    let mut out = crds;
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, "labels": labels}}));
    let mut cluster_rules = rules(&permissions);
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
    Ok(out)
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
                        "env": [env_from_field("POD_NAME", "metadata.name"), env_from_field("POD_NAMESPACE", "metadata.namespace")],
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
        println!("---\n{}", serde_saphyr::to_string(&object)?.trim_end());
    }
    Ok(())
}

/// Placeholders the chart's templates replace with Helm expressions. The chart is generated
/// from the very objects `vigil manifests` prints, so the two cannot drift apart.
const NAMESPACE_MARK: &str = "vigil-chart-namespace";
const IMAGE_MARK: &str = "vigil-chart-image";
const REPLICAS_MARK: i64 = 987_654_321;

/// Helm expressions standing for the placeholders, in the rendered text.
const HELM_VALUES: &[(&str, &str)] = &[
    (NAMESPACE_MARK, "{{ .Release.Namespace }}"),
    (IMAGE_MARK, "{{ .Values.image | quote }}"),
    ("987654321", "{{ .Values.replicas }}"),
];

/// The chart's files: path → content.
pub fn chart_files(args: &ManifestsArgs) -> anyhow::Result<BTreeMap<String, String>> {
    let marked = ManifestsArgs {
        namespace: NAMESPACE_MARK.into(),
        image: IMAGE_MARK.into(),
        controllers: args.controllers.clone(),
        status_vault_resources: args.status_vault_resources.clone(),
        configmapsync_secrets: args.configmapsync_secrets,
        kafka_topic_secrets: args.kafka_topic_secrets,
        chart: None,
    };
    let mut files = BTreeMap::new();
    let version = env!("CARGO_PKG_VERSION");
    files.insert(
        "Chart.yaml".into(),
        format!(
            "apiVersion: v2\nname: vigil\ndescription: Vigil, a Kubernetes operator for platform teams (generated by `vigil manifests --chart`)\ntype: application\nversion: {version}\nappVersion: \"{version}\"\n"
        ),
    );
    files.insert(
        "values.yaml".into(),
        format!(
            "# Container image of Vigil.\nimage: \"{}\"\n# Replicas: one leads (a Lease), the others keep warm caches.\nreplicas: 2\n",
            args.image
        ),
    );
    let mut templates = String::new();
    for mut object in objects(&marked)? {
        match object["kind"].as_str() {
            // Helm installs CRDs from crds/, before templates, and never templates them.
            Some("CustomResourceDefinition") => {
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
            // `helm install --create-namespace` makes the release namespace.
            Some("Namespace") => {}
            _ => {
                if object["kind"] == "Deployment" {
                    object["spec"]["replicas"] = json!(REPLICAS_MARK);
                }
                let yaml = serde_saphyr::to_string(&object)?;
                templates.push_str(&format!("---\n{}\n", yaml.trim_end()));
            }
        }
    }
    for (mark, expression) in HELM_VALUES {
        templates = templates.replace(mark, expression);
    }
    files.insert("templates/vigil.yaml".into(), templates);
    Ok(files)
}

fn write_chart(args: &ManifestsArgs, dir: &std::path::Path) -> anyhow::Result<()> {
    for (path, content) in chart_files(args)? {
        let target = dir.join(path);
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&target, content)?;
    }
    println!("chart written to {}", dir.display());
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

    /// Renders the chart's templates the way Helm would with the given values.
    fn render(template: &str, namespace: &str, image: &str, replicas: i64) -> Vec<Value> {
        let text = template
            .replace("{{ .Release.Namespace }}", namespace)
            .replace("{{ .Values.image | quote }}", &format!("{image:?}"))
            .replace("{{ .Values.replicas }}", &replicas.to_string());
        text.split("---\n")
            .filter(|d| !d.trim().is_empty())
            .map(|d| serde_saphyr::from_str(d).expect("rendered YAML"))
            .collect()
    }

    #[test]
    fn the_committed_chart_is_the_generated_one() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil");
        for (path, content) in chart_files(&args()).expect("chart") {
            let committed = std::fs::read_to_string(root.join(&path)).unwrap_or_default();
            assert_eq!(
                committed, content,
                "charts/vigil/{path} is stale: run `cargo run -p vigil -- manifests --chart charts/vigil`"
            );
        }
    }

    #[test]
    fn the_chart_renders_the_same_objects_as_manifests() {
        let files = chart_files(&args()).expect("chart");
        let rendered = render(
            &files["templates/vigil.yaml"],
            "vigil-system",
            &args().image,
            2,
        );
        let expected: Vec<Value> = objects(&args())
            .expect("objects")
            .into_iter()
            .filter(|o| o["kind"] != "CustomResourceDefinition" && o["kind"] != "Namespace")
            .collect();
        assert_eq!(rendered, expected);
        assert!(
            files.keys().any(|k| k.starts_with("crds/")),
            "CRDs ship in crds/"
        );
    }
}
