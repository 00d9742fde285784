//! Every controller Vigil can host, each declared once, in its module's `registration.rs`: its
//! name, CRDs, permissions, flags and how it is added to a Manager. `vigil run` (flags, the
//! `--controllers` list, starting them), `vigil manifests` (CRDs, the ClusterRole), the Helm
//! chart's generated RBAC (`templates/_rules.tpl`) and the tests read this one list, so a new
//! controller is its module plus one line in [`CONTROLLERS`].

use std::any::{Any, TypeId};
use std::collections::{BTreeSet, HashMap};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use vigil_runtime::Manager;

use crate::permissions::Permission;
use crate::{configmap_sync, critical_service, kafka_topic, kubernetes_cluster, status_vault};

/// The controllers, in the order they are added to a Manager (the status vault before
/// KubernetesCluster, which consults its restore) and their rules are listed.
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
pub struct Registration {
    /// Its name in metrics, logs, Events, `--controllers` and the chart's rules.
    pub name: &'static str,
    /// The key of its block in the Helm chart's values (`criticalService.enabled`…).
    pub chart_key: &'static str,
    /// The CRDs it serves (generated from `vigil-apis`).
    pub crds: fn() -> Vec<CustomResourceDefinition>,
    /// What its code does with the API: its ClusterRole rules.
    pub permissions: &'static [Permission],
    /// Rules granted only on request, by set name (`secrets`): `vigil manifests`' flags and the
    /// chart's values name them; the chart's define is `vigil.rules.<name>.<set>`.
    pub optional_permissions: &'static [(&'static str, &'static [Permission])],
    /// Adds its flags to `vigil run`'s (a clap `Args` type's `augment_args`).
    pub flags: fn(clap::Command) -> clap::Command,
    /// Adds it to `manager`, configured from `setup`.
    pub add: fn(&mut Manager, &mut Setup<'_>) -> Result<(), SetupError>,
}

impl Registration {
    /// The optional permission set `set`, if the controller has one by that name.
    pub fn optional(&self, set: &str) -> Option<&'static [Permission]> {
        self.optional_permissions
            .iter()
            .find(|(name, _)| *name == set)
            .map(|(_, permissions)| *permissions)
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
}

/// Every registered controller's flags, for `#[command(flatten)]` in `vigil run`'s arguments;
/// [`Setup::flags`] hands each controller the parsed result.
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
        CONTROLLERS
            .iter()
            .fold(command, |command, c| (c.flags)(command))
    }

    fn augment_args_for_update(command: clap::Command) -> clap::Command {
        Self::augment_args(command)
    }
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
        let command = ControllerFlags::augment_args(clap::Command::new("run"));
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
