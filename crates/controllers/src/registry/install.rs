//! What a controller adds to an installation besides its CRDs and rules, as `vigil manifests`
//! prints it: objects of its own (CriticalService's default PodTemplate), rules known only at
//! install time (the status vault's covered resources), `vigil manifests` flags for them, and
//! whether it keeps files (a data volume on a read-only root file system).

use serde_json::Value;

use super::Registration;

/// The installation being generated.
pub struct InstallContext<'a> {
    /// The namespace Vigil runs in.
    pub namespace: &'a str,
    /// The labels every installed object carries.
    pub labels: &'a Value,
    /// The controllers installed, in start order.
    pub installed: &'a [&'a Registration],
    /// `vigil manifests`' parsed flags: each controller reads those it added
    /// ([`Install::flags`]).
    pub flags: &'a clap::ArgMatches,
}

/// A controller's part of an installation beyond its CRDs and declared permissions.
#[derive(Clone, Copy)]
pub struct Install {
    /// It keeps files under `/var/lib/vigil`: the Deployment gets a writable volume there.
    pub data_volume: bool,
    /// The `vigil manifests` flags it reads in [`Install::objects`] and [`Install::rules`].
    pub flags: fn(clap::Command) -> clap::Command,
    /// Objects to install with it, in apply order.
    pub objects: fn(&InstallContext<'_>) -> Vec<Value>,
    /// ClusterRole rules known only at install time (whole rules, as JSON).
    pub rules: fn(&InstallContext<'_>) -> Vec<Value>,
    /// Resources (`plural.group`) whose status is worth keeping: a status vault installed with
    /// it covers them.
    pub status_worth_keeping: &'static [&'static str],
}

impl Install {
    /// Nothing beyond CRDs and permissions.
    pub const NOTHING: Self = Self {
        data_volume: false,
        flags: |command| command,
        objects: |_| Vec::new(),
        rules: |_| Vec::new(),
        status_worth_keeping: &[],
    };
}
