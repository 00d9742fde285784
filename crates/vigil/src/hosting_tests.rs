//! The registry is the whole truth: a sixth, test-only controller, registered with a flag, a
//! chart value and an optional permission set, reaches `vigil run --help`, `vigil manifests`
//! (rules, arguments) and the generated chart (values, schema, README, arguments, RBAC, rendered
//! by the real Helm when there is one) with no other edit, and its dependency is checked.

use std::path::{Path, PathBuf};
use std::process::Command;

use clap::{Args as _, FromArgMatches as _};
use serde_json::{Value, json};
use vigil_controllers::permissions::Permission;
use vigil_controllers::registry::{
    self, ChartValue, FlagKind, Install, OrderError, PermissionSet, Registration,
};

use crate::cli::manifests::ManifestsArgs;

/// Its flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)]
struct ProbeFlags {
    /// Probe: how often it looks at its gadgets.
    #[arg(long, default_value = "5s", value_parser = crate::parse_duration)]
    probe_poll_interval: std::time::Duration,
}

/// A controller that exists only here.
const PROBE: Registration = Registration {
    name: "probe",
    summary: "Probe (probe.example.com/v1): a controller that exists only in a test.",
    chart_key: "probe",
    crds: Vec::new,
    permissions: &[Permission {
        group: "probe.example.com",
        resources: &["gadgets"],
        verbs: &["list", "watch"],
    }],
    optional_permissions: &[PermissionSet {
        name: "configmaps",
        permissions: &[Permission {
            group: "",
            resources: &["configmaps"],
            verbs: &["get"],
        }],
        value: "readConfigMaps",
        manifests_flag: "probe-read-configmaps",
        help: "Probe: read ConfigMaps (get).",
        narrowed_by: None,
    }],
    flags: ProbeFlags::augment_args,
    chart_values: &[ChartValue::flag(
        "pollInterval",
        "probe-poll-interval",
        FlagKind::Duration,
    )],
    after: &[],
    requires: &[vigil_controllers::critical_service::NAME],
    install: Install::NOTHING,
    add: |_, _| Ok(()),
};

fn with_probe() -> Vec<Registration> {
    registry::CONTROLLERS
        .iter()
        .copied()
        .chain([PROBE])
        .collect()
}

fn manifests_args(registry: &[Registration], flags: &[&str]) -> ManifestsArgs {
    let command = crate::cli::manifests::with_controller_flags(
        ManifestsArgs::augment_args(clap::Command::new("manifests")),
        registry,
    );
    let matches = command
        .try_get_matches_from(std::iter::once("manifests").chain(flags.iter().copied()))
        .expect("flags parse");
    ManifestsArgs::from_arg_matches(&matches).expect("arguments")
}

#[test]
fn vigil_run_help_lists_its_flag_and_its_dependency_is_checked() {
    let registry = with_probe();
    let mut command = crate::command(&registry);
    command.build();
    let run = command
        .find_subcommand_mut("run")
        .expect("run")
        .render_long_help()
        .to_string();
    assert!(run.contains("--probe-poll-interval"), "{run}");
    assert!(
        run.contains("Probe: how often it looks at its gadgets"),
        "{run}"
    );
    assert!(run.contains("probe"), "in --controllers' default: {run}");
    let manifests = command
        .find_subcommand_mut("manifests")
        .expect("manifests")
        .render_long_help()
        .to_string();
    assert!(manifests.contains("--probe-read-configmaps"), "{manifests}");
    let matches = crate::command(&registry)
        .try_get_matches_from(["vigil", "run", "--probe-poll-interval", "250ms"])
        .expect("its flag parses");
    assert!(crate::Cli::from_arg_matches(&matches).is_ok());
    assert_eq!(
        registry::start_order(&registry, &["probe"]).expect_err("alone"),
        OrderError::Missing {
            controller: "probe",
            requires: "criticalservice"
        }
    );
    assert!(registry::start_order(&registry, &["probe", "criticalservice"]).is_ok());
}

#[test]
fn vigil_manifests_grants_its_rules_and_its_optional_set_on_request() {
    let registry = with_probe();
    let rules = |flags: &[&str]| {
        let objects = crate::cli::manifests::objects(&manifests_args(&registry, flags), &registry)
            .expect("objects");
        let role = objects
            .iter()
            .find(|o| o["kind"] == "ClusterRole")
            .expect("ClusterRole");
        let deploy = objects
            .iter()
            .find(|o| o["kind"] == "Deployment")
            .expect("Deployment");
        (
            role["rules"].clone(),
            deploy["spec"]["template"]["spec"]["containers"][0]["args"].clone(),
        )
    };
    let gadgets = json!({"apiGroups": ["probe.example.com"], "resources": ["gadgets"], "verbs": ["list", "watch"]});
    let configmaps = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
    let (default_rules, args) = rules(&[]);
    let has = |rules: &Value, rule: &Value| rules.as_array().is_some_and(|r| r.contains(rule));
    assert!(has(&default_rules, &gadgets), "{default_rules}");
    assert!(!has(&default_rules, &configmaps), "opt-in: {default_rules}");
    assert!(args.to_string().contains("kafkatopic,probe"), "{args}");
    let (asked, _) = rules(&["--probe-read-configmaps"]);
    assert!(has(&asked, &configmaps), "{asked}");
}

/// Copies the committed chart (files only, recursively) into `to`.
fn copy_chart(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("target");
    for entry in std::fs::read_dir(from).expect("chart dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_chart(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

fn helm() -> Option<PathBuf> {
    let candidate = std::env::var_os("VIGIL_HELM")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("helm"));
    let works = Command::new(&candidate)
        .arg("version")
        .output()
        .is_ok_and(|o| o.status.success());
    works.then_some(candidate)
}

#[test]
fn the_generated_chart_carries_its_values_schema_arguments_and_rules() {
    let registry = with_probe();
    let dir = std::env::temp_dir().join(format!("vigil-chart-probe-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    copy_chart(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil"),
        &dir,
    );
    let args = manifests_args(&registry, &[]);
    crate::cli::chart::write_chart(&args, &registry, &dir).expect("generated");
    let read = |path: &str| std::fs::read_to_string(dir.join(path)).expect("generated file");
    let values = read("values.yaml");
    assert!(
        values.contains("\nprobe:\n  # -- Probe (probe.example.com/v1)"),
        "{values}"
    );
    assert!(values.contains("  pollInterval: 5s\n"), "{values}");
    assert!(values.contains("  readConfigMaps: false\n"), "{values}");
    let schema: Value = serde_json::from_str(&read("values.schema.json")).expect("schema");
    let probe = &schema["properties"]["probe"];
    assert_eq!(probe["additionalProperties"], false, "{probe}");
    assert_eq!(probe["properties"]["readConfigMaps"]["type"], "boolean");
    assert!(read("README.md").contains("| `probe.pollInterval` | `5s` |"));
    assert!(read("templates/_rules.tpl").contains("vigil.rules.probe.configmaps"));

    let Some(helm) = helm() else {
        eprintln!("skipped the Helm rendering: no helm (set VIGIL_HELM or put helm on PATH)");
        let _ = std::fs::remove_dir_all(&dir);
        return;
    };
    // The Deployment's arguments and the ClusterRole's rules, or Helm's complaint.
    let template = |sets: &str| -> Result<(Value, Value), String> {
        let out = Command::new(&helm)
            .args(["template", "vigil"])
            .arg(&dir)
            .args(["--namespace", "vigil-system", "--set", sets])
            .output()
            .expect("helm runs");
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let objects: Vec<Value> = text
            .split("\n---")
            .filter_map(|d| serde_saphyr::from_str::<Value>(d.trim_start_matches("---")).ok())
            .collect();
        let find = |kind: &str| objects.iter().find(|o| o["kind"] == kind).cloned();
        let args = find("Deployment").expect("Deployment")["spec"]["template"]["spec"]
            ["containers"][0]["args"]
            .clone();
        let rules = find("ClusterRole").expect("ClusterRole")["rules"].clone();
        Ok((args, rules))
    };
    let has = |list: &Value, item: &Value| list.as_array().is_some_and(|l| l.contains(item));
    let gadgets = json!({"apiGroups": ["probe.example.com"], "resources": ["gadgets"], "verbs": ["list", "watch"]});
    let configmaps = json!({"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]});
    let (args, rules) =
        template("probe.pollInterval=9s,probe.readConfigMaps=true").expect("rendered");
    let args: Vec<&str> = args
        .as_array()
        .expect("args")
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--probe-poll-interval", "9s"]),
        "{args:?}"
    );
    assert!(args.iter().any(|a| a.ends_with(",probe")), "{args:?}");
    assert!(has(&rules, &gadgets) && has(&rules, &configmaps), "{rules}");
    // Its default value passes no flag; disabled, it takes its rules with it.
    let (args, _) = template("probe.pollInterval=5s").expect("rendered");
    assert!(
        !args.to_string().contains("--probe-poll-interval"),
        "{args}"
    );
    let (args, rules) = template("probe.enabled=false").expect("rendered");
    assert!(!has(&rules, &gadgets), "{rules}");
    assert!(!args.to_string().contains(",probe"), "{args}");
    let typo = template("probe.pollIntervall=1s");
    assert!(
        typo.as_ref().is_err_and(|e| e.contains("pollIntervall")),
        "{typo:?}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
