//! `vigil manifests`: everything that installs Vigil, printed as YAML — the CRDs generated from
//! the Rust types, a ServiceAccount, a ClusterRole holding exactly the permissions the chosen
//! controllers' code declares (no wildcards), a Role for the leader-election Lease, their
//! bindings, the default PodTemplate, and a hardened two-replica Deployment.

use std::collections::BTreeMap;

use clap::ArgAction;
use serde_json::{Value, json};
use vigil_controllers::permissions::Permission;
use vigil_controllers::registry::{
    self, ControllerFlags, FlagKind, InstallContext, PermissionSet, Registration, ValueSource,
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
    /// Instead of printing, write the generated files of the Helm chart in this directory (its
    /// CRDs, the RBAC rules of each controller, the arguments and values its controllers'
    /// registrations declare; the templates around them are hand-written).
    #[arg(long, value_name = "DIR")]
    chart: Option<std::path::PathBuf>,
    /// The flags the controllers add: their optional permission sets and install flags
    /// ([`with_controller_flags`]).
    #[command(flatten)]
    controller_flags: ControllerFlags,
}

/// `vigil manifests`' command for the controllers of `registry`: each optional permission set
/// is a switch (`--configmapsync-secrets`), each controller's install flags are added, and
/// `--controllers` defaults to them all.
pub fn with_controller_flags(command: clap::Command, registry: &[Registration]) -> clap::Command {
    let names: Vec<&'static str> = registry.iter().map(|c| c.name).collect();
    let command = command.mut_arg("controllers", |arg| arg.default_values(names));
    registry.iter().fold(command, |command, controller| {
        let command = controller
            .optional_permissions
            .iter()
            .fold(command, |command, set| {
                command.arg(
                    clap::Arg::new(set.manifests_flag)
                        .long(set.manifests_flag)
                        .action(ArgAction::SetTrue)
                        .help(set.help),
                )
            });
        (controller.install.flags)(command)
    })
}

/// The command of `vigil manifests` alone, for tests.
#[cfg(test)]
pub fn command(registry: &[Registration]) -> clap::Command {
    use clap::Args as _;
    with_controller_flags(
        ManifestsArgs::augment_args(clap::Command::new("manifests")),
        registry,
    )
}

const NAME: &str = "vigil";

impl ManifestsArgs {
    /// Whether `set`'s `vigil manifests` switch was given.
    fn asks_for(&self, set: &PermissionSet) -> bool {
        matches!(
            self.controller_flags
                .0
                .try_get_one::<bool>(set.manifests_flag),
            Ok(Some(true))
        )
    }
}

/// The objects to install, in apply order, for the controllers of `registry` that `args` names.
pub fn objects(args: &ManifestsArgs, registry: &[Registration]) -> anyhow::Result<Vec<Value>> {
    let installed = registry::start_order(registry, &args.controllers)?;
    let ns = args.namespace.as_str();
    let labels = json!({"app.kubernetes.io/name": NAME, "app.kubernetes.io/managed-by": NAME});
    let install = InstallContext {
        namespace: ns,
        labels: &labels,
        installed: &installed,
        flags: &args.controller_flags.0,
    };
    // Rules per controller, in start order, a rule another controller already brought left out:
    // the chart assembles its ClusterRole the same way from the controllers enabled
    // (`vigil.enabledRules`), so both render the same rules.
    let mut cluster_rules: Vec<Value> = Vec::new();
    let mut grant = |rules: Vec<Value>| {
        for rule in rules {
            if !cluster_rules.contains(&rule) {
                cluster_rules.push(rule);
            }
        }
    };
    let mut crds = Vec::new();
    // Switches a requested permission set turns on: asking for the permission asks for the
    // feature (ConfigMapSync's Secrets).
    let mut run_switches: Vec<String> = Vec::new();
    for controller in &installed {
        grant(rules(controller.permissions));
        for set in controller.optional_permissions {
            if args.asks_for(set) {
                grant(rules(set.permissions));
                run_switches.extend(switches_bound_to(controller, set.value));
            }
        }
        for crd in (controller.crds)() {
            crds.push(serde_json::to_value(crd)?);
        }
    }
    // Install-time rules follow, whole (the chart appends them the same way).
    for controller in &installed {
        cluster_rules.extend((controller.install.rules)(&install));
    }
    let mut out = crds;
    out.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}));
    out.push(json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NAME, "namespace": ns, "labels": labels}}));
    out.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": NAME, "labels": labels}, "rules": cluster_rules}));
    out.push(binding("ClusterRoleBinding", None, ns, &labels));
    out.push(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": format!("{NAME}-leader-election"), "namespace": ns, "labels": labels},
        "rules": [{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": LEASE_VERBS}],
    }));
    out.push(binding("RoleBinding", Some(ns), ns, &labels));
    for controller in &installed {
        out.extend((controller.install.objects)(&install));
    }
    let mut deploy = deployment(args, &labels);
    if let Some(run_args) =
        deploy["spec"]["template"]["spec"]["containers"][0]["args"].as_array_mut()
    {
        run_args.extend(run_switches.into_iter().map(Value::String));
    }
    if installed.iter().any(|c| c.install.data_volume) {
        // The root file system is read-only: what a controller keeps (the vault's default
        // directory, the local cluster provider's clusters) needs a volume. An emptyDir survives
        // container restarts, not rescheduling — use a PersistentVolume or S3
        // (`--status-vault-location s3://…`) to keep records across pods.
        let pod = &mut deploy["spec"]["template"]["spec"];
        pod["volumes"] = json!([{"name": "status-vault", "emptyDir": {}}]);
        pod["containers"][0]["volumeMounts"] =
            json!([{"name": "status-vault", "mountPath": "/var/lib/vigil"}]);
    }
    out.push(deploy);
    out.push(disruption_budget(args, &labels));
    Ok(out)
}

/// The `vigil run` switches of `controller` bound to the chart value `value`.
fn switches_bound_to(controller: &Registration, value: &str) -> Vec<String> {
    controller
        .chart_values
        .iter()
        .filter(|v| v.key == value)
        .filter_map(|v| match v.source {
            ValueSource::Flag {
                flag,
                kind: FlagKind::Switch,
            } => Some(format!("--{flag}")),
            _ => None,
        })
        .collect()
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

/// ClusterRole rules from declared permissions: one rule per (group, verbs), resources merged.
pub(crate) fn rules(permissions: &[Permission]) -> Vec<Value> {
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

/// Prints the objects as one multi-document YAML stream, or writes the chart's generated files.
pub fn run(args: &ManifestsArgs, registry: &[Registration]) -> anyhow::Result<()> {
    if let Some(dir) = &args.chart {
        return super::chart::write_chart(args, registry, dir);
    }
    for object in objects(args, registry)? {
        crate::outln!("---\n{}", serde_saphyr::to_string(&object)?.trim_end())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::FromArgMatches as _;
    use vigil_controllers::{critical_service, kubernetes_cluster, status_vault};

    /// `vigil manifests` parsed from these flags, for the shipped controllers.
    fn parse(flags: &[&str]) -> ManifestsArgs {
        let matches = command(registry::CONTROLLERS)
            .try_get_matches_from(std::iter::once("manifests").chain(flags.iter().copied()))
            .expect("flags parse");
        ManifestsArgs::from_arg_matches(&matches).expect("arguments")
    }

    fn default_args() -> ManifestsArgs {
        parse(&["--image", "vigil:test"])
    }

    #[test]
    fn rbac_has_no_wildcards_and_covers_the_declared_permissions() {
        let objects = objects(&default_args(), registry::CONTROLLERS).expect("objects");
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
        let args = parse(&[
            "--status-vault-resources",
            "services,kubernetesclusters.infra.example.com",
        ]);
        let objects = objects(&args, registry::CONTROLLERS).expect("objects");
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
        assert!(!mentions_secrets(
            &objects(&args, registry::CONTROLLERS).expect("objects")
        ));
        args = parse(&["--configmapsync-secrets"]);
        args.controllers.retain(|c| c != kubernetes_cluster::NAME);
        let objects = objects(&args, registry::CONTROLLERS).expect("objects");
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
        let all = objects(&default_args(), registry::CONTROLLERS).expect("objects");
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
        let without_vault = objects(&args, registry::CONTROLLERS).expect("objects");
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
        let objects = objects(&default_args(), registry::CONTROLLERS).expect("objects");
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
