//! How CriticalService is hosted: its flags (the article's environment variables) and how it is
//! added to a Manager (see [`crate::registry`]).

use clap::{Args as _, FromArgMatches as _};
use kube::CustomResourceExt as _;
use vigil_apis::CriticalService;
use vigil_runtime::Manager;

use super::model::{Settings, TemplateKey};
use super::{NAME, PERMISSIONS, controller};
use crate::registry::{Registration, Setup, SetupError};

/// The entry in [`crate::registry::CONTROLLERS`].
pub const REGISTRATION: Registration = Registration {
    name: NAME,
    chart_key: "criticalService",
    crds: || vec![CriticalService::crd()],
    permissions: PERMISSIONS,
    optional_permissions: &[],
    flags: Flags::augment_args,
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
        default_value = "critical-service-pod-template"
    )]
    pod_template: String,
    /// Namespace of that PodTemplate (default: the operator's own namespace).
    #[arg(long, env = "POD_TEMPLATE_NS")]
    pod_template_ns: Option<String>,
    /// Prefix of fallback pod names.
    #[arg(long, env = "POD_NAME_PREFIX", default_value = "service-watcher")]
    pod_name_prefix: String,
}

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
