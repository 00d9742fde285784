//! How the status vault is hosted: its flags and how it is added to a Manager (see
//! [`crate::registry`]). It hands its restorer to the controllers added after it
//! ([`Setup::shared`]): KubernetesCluster consults it.

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::StatusBackupPolicy;
use vigil_runtime::Manager;

use super::model::Settings;
use super::{NAME, PERMISSIONS, StatusVault};
use crate::registry::{
    ChartValue, FlagKind, Install, InstallContext, Registration, Setup, SetupError,
};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    summary: "The status vault: records the status of the objects StatusBackupPolicies cover, restores it.",
    chart_key: "statusVault",
    crds: || vec![StatusBackupPolicy::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
    chart_values: &[
        ChartValue::flag("location", "status-vault-location", FlagKind::Text),
        // Read by the chart's RBAC template, as `vigil manifests --status-vault-resources`.
        ChartValue::chart(
            "resources",
            "[]",
            r#"{"type": "array", "description": "Covered resources, `plural` or `plural.group`.", "items": {"type": "string", "pattern": "^[A-Za-z0-9]+(\\.[A-Za-z0-9.-]+)?$"}}"#,
            "Resources StatusBackupPolicies may cover, as `plural` or `plural.group`; each gets exactly get/list/watch/patch and patch on its /status. Those of the other controllers installed (KubernetesClusters) are added.",
        ),
        // The S3 backend's credentials and the key of the default backend, passed as
        // environment variables and a volume by the chart's Deployment template.
        ChartValue::chart(
            "s3.existingSecret",
            "\"\"",
            r#"{"type": "string"}"#,
            "Secret with AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and optionally AWS_SESSION_TOKEN).",
        ),
        ChartValue::chart("s3.region", "\"\"", r#"{"type": "string"}"#, "AWS_REGION."),
        ChartValue::chart(
            "s3.endpoint",
            "\"\"",
            r#"{"type": "string"}"#,
            "S3-compatible endpoint (AWS_ENDPOINT_URL_S3), e.g. MinIO's.",
        ),
        ChartValue::chart(
            "encryption.existingSecret",
            "\"\"",
            r#"{"type": "string"}"#,
            "Secret holding the AES-256-GCM key of the default backend (32 raw bytes or base64); empty: records in clear.",
        ),
        ChartValue::chart(
            "encryption.key",
            "key",
            r#"{"type": "string", "minLength": 1}"#,
            "The key in that Secret.",
        ),
    ],
    after: &[],
    requires: &[],
    install: Install {
        // The default backend's directory is under /var/lib/vigil.
        data_volume: true,
        flags: InstallFlags::augment_args,
        rules: covered_rules,
        ..Install::NOTHING
    },
    add,
};

/// The status vault's flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// Status vault: where policies without a backend keep records — a directory or
    /// `s3://bucket/prefix`.
    #[arg(
        long,
        env = "VIGIL_STATUS_VAULT_LOCATION",
        default_value = "/var/lib/vigil/status-vault"
    )]
    status_vault_location: String,
    /// Status vault: file holding the AES-256-GCM key of that default backend (32 raw bytes or
    /// base64); absent: records are stored in clear.
    #[arg(long, env = "VIGIL_STATUS_VAULT_KEY_FILE")]
    status_vault_key_file: Option<String>,
}

/// The status vault's flags of `vigil manifests`.
#[derive(Debug, clap::Args)]
#[group(skip)]
struct InstallFlags {
    /// Status vault: the resources StatusBackupPolicies may cover, as `plural` or
    /// `plural.group` (`services,kubernetesclusters.infra.example.com`); each gets exactly
    /// get/list/watch/patch and patch on its `/status` (no wildcards).
    #[arg(long, value_delimiter = ',')]
    status_vault_resources: Vec<String>,
}

/// Rules on the covered resources: those asked for, and those whose status the other installed
/// controllers declare worth keeping.
fn covered_rules(install: &InstallContext<'_>) -> Vec<serde_json::Value> {
    use clap::FromArgMatches as _;
    let mut covered = InstallFlags::from_arg_matches(install.flags)
        .map(|f| f.status_vault_resources)
        .unwrap_or_default();
    for controller in install.installed {
        for resource in controller.install.status_worth_keeping {
            if !covered.iter().any(|c| c == resource) {
                covered.push((*resource).to_owned());
            }
        }
    }
    super::covered_kind_permissions(&covered)
        .into_iter()
        .map(|(group, resources, verbs)| {
            serde_json::json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
        })
        .collect()
}

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let settings = Settings {
        default_location: flags.status_vault_location,
        default_key_file: flags.status_vault_key_file,
    };
    let vault = StatusVault::on(manager.runtime(), settings);
    setup.shared.insert(vault.restorer());
    manager.add(NAME, move |rt| vault.run_on(rt));
    Ok(())
}
