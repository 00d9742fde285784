//! How CriticalService is hosted: its flags (the article's environment variables) and how it is
//! added to a Manager (see [`crate::registry`]).

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::CriticalService;
use vigil_runtime::Manager;

use super::model::{Settings, TemplateKey};
use super::{NAME, PERMISSIONS, controller};
use crate::registry::{
    ChartValue, FlagKind, Install, InstallContext, Registration, Setup, SetupError,
};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    summary: "CriticalService (mycrd.com/v1): a fallback pod for every lame Service a CriticalService names.",
    chart_key: "criticalService",
    crds: || vec![CriticalService::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
    chart_values: &[
        ChartValue::flag("podNamePrefix", "pod-name-prefix", FlagKind::Text),
        // The default PodTemplate is installed by the chart's podtemplate.yaml.
        ChartValue::chart(
            "podTemplate.create",
            "true",
            r#"{"type": "boolean"}"#,
            "Install the PodTemplate of fallback pods that a CriticalService naming none gets.",
        ),
        ChartValue::flag("podTemplate.name", "pod-template", FlagKind::Text),
        ChartValue::chart(
            "podTemplate.image",
            "nginx:1.27",
            r#"{"type": "string", "minLength": 1}"#,
            "Image of that PodTemplate's container.",
        ),
        ChartValue::chart(
            "podTemplate.env",
            "[]",
            r#"{"type": "array", "description": "EnvVars of the fallback container.", "items": {"type": "object", "required": ["name"]}}"#,
            "Environment of its container (EnvVar objects), e.g. `[{name: PORT, value: \"80\"}]` for an image whose port is set by a variable. Vigil adds VIGIL_SERVICE_* to each fallback.",
        ),
    ],
    after: &[],
    requires: &[],
    install: Install {
        objects: default_pod_template,
        ..Install::NOTHING
    },
    add,
};

/// CriticalService's flags of `vigil run`.
#[derive(Debug, clap::Args)]
#[group(skip)] // every controller's flags are named `Flags`: no clap group for them
pub struct Flags {
    /// PodTemplate of fallback pods when a CriticalService names none.
    #[arg(
        long,
        env = "POD_TEMPLATE",
        default_value = DEFAULT_POD_TEMPLATE
    )]
    pod_template: String,
    /// Namespace of that PodTemplate (default: the operator's own namespace).
    #[arg(long, env = "POD_TEMPLATE_NS")]
    pod_template_ns: Option<String>,
    /// Prefix of fallback pod names.
    #[arg(long, env = "POD_NAME_PREFIX", default_value = "service-watcher")]
    pod_name_prefix: String,
}

/// The PodTemplate a CriticalService that names none gets (`--pod-template`'s default).
fn default_pod_template(install: &InstallContext<'_>) -> Vec<serde_json::Value> {
    vec![serde_json::json!({
        "apiVersion": "v1", "kind": "PodTemplate",
        "metadata": {"name": DEFAULT_POD_TEMPLATE, "namespace": install.namespace, "labels": install.labels},
        "template": {"metadata": {"name": "critical-service-pod"}, "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27"}]}},
    })]
}

/// The name of the default PodTemplate.
const DEFAULT_POD_TEMPLATE: &str = "critical-service-pod-template";

fn add(manager: &mut Manager, setup: &mut Setup<'_>) -> Result<(), SetupError> {
    let flags = Flags::from_arg_matches(setup.flags)?;
    let settings = Settings {
        pod_name_prefix: flags.pod_name_prefix,
        default_template: TemplateKey {
            namespace: (flags.pod_template_ns).unwrap_or_else(|| setup.own_namespace.clone()),
            name: flags.pod_template,
        },
        watched_namespaces: setup.namespaces.clone(),
    };
    manager.add(NAME, move |rt| controller::run_on(rt, settings));
    Ok(())
}
