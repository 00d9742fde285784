//! Every controller Vigil can host, each declared once, in its module's `registration.rs`: its
//! name, CRDs, permissions (optional sets included), flags with their chart values, what it needs
//! from other controllers, what it adds to an installation, and how it is added to a Manager.
//! `vigil run` (flags, the `--controllers` list, start order), `vigil manifests` (CRDs, the
//! ClusterRole, the Deployment), the Helm chart's generated files (values, schema, arguments,
//! RBAC) and the tests read this one list, so a new controller is its module plus one line in
//! [`CONTROLLERS`]. Every function here takes the list as a parameter, so a test can host one
//! more controller.

mod chart;
mod install;
mod order;

pub use chart::{ChartValue, DURATION_SCHEMA, FlagKind, NarrowedBy, PermissionSet, ValueSource};
pub use install::{Install, InstallContext};
pub use order::{OrderError, start_order};

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use vigil_runtime::Manager;

use crate::permissions::Permission;
use crate::{configmap_sync, critical_service, kafka_topic, kubernetes_cluster, status_vault};

/// The controllers, in the order their rules and values are listed (and they start, unless
/// [`Registration::after`] says otherwise).
pub const CONTROLLERS: &[Registration] = &[
    critical_service::registration::REGISTRATION,
    configmap_sync::registration::REGISTRATION,
    status_vault::registration::REGISTRATION,
    kubernetes_cluster::registration::REGISTRATION,
    kafka_topic::registration::REGISTRATION,
];

/// The controller named `name`, if there is one.
pub fn find(name: &str) -> Option<&'static Registration> {
    CONTROLLERS.iter().find(|c| c.name == name)
}

/// Every controller's name, in [`CONTROLLERS`]' order.
pub fn names() -> impl Iterator<Item = &'static str> {
    CONTROLLERS.iter().map(|c| c.name)
}

/// Why a controller could not be added.
pub type SetupError = Box<dyn std::error::Error + Send + Sync>;

/// One controller, as everything that hosts or installs it sees it.
#[derive(Clone, Copy)]
pub struct Registration {
    /// Its name in metrics, logs, Events, `--controllers` and the chart's rules.
    pub name: &'static str,
    /// One line: what it does (the chart's `<chart_key>.enabled` help).
    pub summary: &'static str,
    /// The key of its block in the Helm chart's values (`criticalService.enabled`…).
    pub chart_key: &'static str,
    /// The CRDs it serves (generated from `vigil-apis`).
    pub crds: fn() -> Vec<CustomResourceDefinition>,
    /// What its code does with the API: its ClusterRole rules.
    pub permissions: &'static [Permission],
    /// Rules granted only on request (see [`PermissionSet`]).
    pub optional_permissions: &'static [PermissionSet],
    /// Adds its flags to `vigil run`'s (a clap `Args` type's `augment_args`).
    pub flags: fn(clap::Command) -> clap::Command,
    /// Its block of the chart's values, in order (`enabled` and its permission sets' values are
    /// added): what sets its flags in the chart.
    pub chart_values: &'static [ChartValue],
    /// Controllers it consults when they run: they start first (their values in [`Setup::shared`]).
    pub after: &'static [&'static str],
    /// Controllers it cannot run without: `vigil run` refuses to start it alone.
    pub requires: &'static [&'static str],
    /// What it adds to an installation beyond CRDs and permissions.
    pub install: Install,
    /// Adds it to `manager`, configured from `setup`.
    pub add: fn(&mut Manager, &mut Setup<'_>) -> Result<(), SetupError>,
}

impl std::fmt::Debug for Registration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registration")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Registration {
    /// The optional permission set `set`, if the controller has one by that name.
    pub fn optional(&self, set: &str) -> Option<&'static PermissionSet> {
        self.optional_permissions.iter().find(|p| p.name == set)
    }
}

/// What `vigil run` hands each controller it adds.
pub struct Setup<'a> {
    /// `vigil run`'s parsed flags: each controller reads its own (its `flags`' type).
    pub flags: &'a clap::ArgMatches,
    /// The namespaces to watch (`--namespaces`); `None`: every namespace.
    pub namespaces: Option<BTreeSet<String>>,
    /// The namespace the operator runs in.
    pub own_namespace: String,
    /// What controllers hand each other, and what the binary provides (see [`Shared`]).
    pub shared: Shared,
}

/// Values by type: what one controller hands another (the status vault's restorer) or the
/// binary provides (KubernetesCluster's providers).
#[derive(Default)]
pub struct Shared(HashMap<TypeId, Box<dyn Any + Send>>);

impl Shared {
    /// Keeps `value`, replacing any value of its type.
    pub fn insert<T: Any + Send>(&mut self, value: T) {
        self.0.insert(TypeId::of::<T>(), Box::new(value));
    }

    /// Takes the value of type `T`, if one was inserted.
    pub fn take<T: Any + Send>(&mut self) -> Option<T> {
        let value = self.0.remove(&TypeId::of::<T>())?;
        value.downcast::<T>().ok().map(|boxed| *boxed)
    }

    /// The value of type `T`, if one was inserted.
    pub fn get<T: Any + Send>(&self) -> Option<&T> {
        self.0.get(&TypeId::of::<T>())?.downcast_ref::<T>()
    }

    /// Takes the value of type `T` a controller cannot do without: an error naming the type
    /// when the host (or the controller that provides it) did not insert one.
    pub fn require<T: Any + Send>(&mut self) -> Result<T, MissingShared> {
        self.take::<T>()
            .ok_or(MissingShared(std::any::type_name::<T>()))
    }
}

/// A value a controller requires was not in [`Shared`].
#[derive(Debug, thiserror::Error)]
#[error("nothing provides {0}: the host inserts it in Setup::shared before adding the controller")]
pub struct MissingShared(pub &'static str);

/// Every registered controller's flags, for `#[command(flatten)]` in `vigil run`'s arguments;
/// [`Setup::flags`] hands each controller the parsed result. It adds no flag itself: the host
/// adds those of the controllers it hosts ([`with_flags`]), so the list is a parameter.
#[derive(Debug, Clone, Default)]
pub struct ControllerFlags(pub clap::ArgMatches);

impl clap::FromArgMatches for ControllerFlags {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<Self, clap::Error> {
        Ok(Self(matches.clone()))
    }

    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        self.0 = matches.clone();
        Ok(())
    }
}

impl clap::Args for ControllerFlags {
    fn augment_args(command: clap::Command) -> clap::Command {
        command
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
}

/// `command` with the flags of every controller of `registry`.
pub fn with_flags(command: clap::Command, registry: &[Registration]) -> clap::Command {
    registry
        .iter()
        .fold(command, |command, c| (c.flags)(command))
}

/// Parses `250ms`, `2s` or `1m` (a bare number is seconds): the durations of every flag.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number
        .parse()
        .map_err(|_| format!("invalid duration {text:?}"))?;
    match unit {
        "ms" => Ok(std::time::Duration::from_millis(n)),
        "s" | "" => Ok(std::time::Duration::from_secs(n)),
        "m" => Ok(std::time::Duration::from_secs(n * 60)),
        _ => Err(format!("invalid duration {text:?}: use ms, s or m")),
    }
}

/// A registration with nothing in it, for tests that only need names and dependencies.
#[cfg(test)]
pub(crate) mod test_support {
    use super::*;

    pub fn registration(name: &'static str) -> Registration {
        Registration {
            name,
            summary: "a test controller",
            chart_key: name,
            crds: Vec::new,
            permissions: &[],
            optional_permissions: &[],
            flags: |command| command,
            chart_values: &[],
            after: &[],
            requires: &[],
            install: Install::NOTHING,
            add: |_, _| Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use clap::{Args as _, FromArgMatches as _};

    use super::*;

    #[test]
    fn names_are_unique_and_each_controller_serves_a_crd() {
        let names: BTreeSet<&str> = names().collect();
        assert_eq!(names.len(), CONTROLLERS.len(), "one entry per name");
        for controller in CONTROLLERS {
            assert!(
                !(controller.crds)().is_empty(),
                "{} serves a CRD",
                controller.name
            );
            assert!(!controller.permissions.is_empty(), "{}", controller.name);
        }
    }

    #[test]
    fn every_controllers_flags_parse_together_with_their_defaults() {
        let command = with_flags(
            ControllerFlags::augment_args(clap::Command::new("run")),
            CONTROLLERS,
        );
        command.clone().debug_assert();
        let matches = command
            .try_get_matches_from(["run"])
            .expect("defaults parse");
        let flags = ControllerFlags::from_arg_matches(&matches).expect("flags");
        assert!(flags.0.ids().count() > 0);
    }

    #[test]
    fn shared_values_are_found_by_type() {
        let mut shared = Shared::default();
        shared.insert(7_u32);
        assert_eq!(shared.get::<u32>(), Some(&7));
        assert_eq!(shared.take::<u32>(), Some(7));
        assert_eq!(shared.take::<u32>(), None);
        shared.insert(7_u32);
        assert_eq!(shared.require::<u32>().ok(), Some(7));
        let missing = shared.require::<u32>().expect_err("taken");
        assert!(missing.to_string().contains("u32"), "{missing}");
        assert!(shared.get::<String>().is_none());
    }

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("s").is_err());
    }
}
