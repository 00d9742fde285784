//! What a controller declares for the Helm chart: the values of its block (each bound to a
//! `vigil run` flag, or read by a hand-written template) and its optional permission sets.
//! `vigil manifests --chart` generates from them the controllers' part of `values.yaml`,
//! `values.schema.json`, the chart README's table, the `vigil run` arguments of the Deployment and
//! the ClusterRole's rules, so a controller's flag reaches the chart with no edit of the chart.

use crate::permissions::Permission;

/// One value of a controller's block in the chart's values (`kafkaTopic.driftInterval`).
#[derive(Debug, Clone, Copy)]
pub struct ChartValue {
    /// Its path inside the block, dot-separated (`driftInterval`, `podTemplate.name`).
    pub key: &'static str,
    /// What sets it, and what it sets.
    pub source: ValueSource,
}

/// Where a chart value goes.
#[derive(Debug, Clone, Copy)]
pub enum ValueSource {
    /// A `vigil run` flag of the controller (its long name, without dashes): the chart passes it
    /// when the value is set. Its help and default are the flag's.
    Flag {
        /// The flag's long name (`kafka-drift-interval`).
        flag: &'static str,
        /// What the value holds, for its schema.
        kind: FlagKind,
    },
    /// A value only the chart's hand-written templates read (an image, a Secret's name, the
    /// binary's provider plug-ins): declared here so the values, schema and README list it.
    Chart {
        /// Its default, as YAML (`""`, `[]`, `true`, `nginx:1.27`).
        default: &'static str,
        /// Its JSON schema (an object, as JSON text).
        schema: &'static str,
        /// One line for the values' comment and the README's table.
        help: &'static str,
    },
}

/// The type of a flag's value, as the chart's schema checks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A switch: the flag is passed alone when the value is `true`.
    Switch,
    /// A duration (`500ms`, `30s`, `2m`): passed when set and not the flag's default.
    Duration,
    /// Any text: passed when set and not the flag's default.
    Text,
}

impl ChartValue {
    /// A value bound to the flag `flag` of `vigil run`.
    pub const fn flag(key: &'static str, flag: &'static str, kind: FlagKind) -> Self {
        Self {
            key,
            source: ValueSource::Flag { flag, kind },
        }
    }

    /// A value read by the chart's templates only.
    pub const fn chart(
        key: &'static str,
        default: &'static str,
        schema: &'static str,
        help: &'static str,
    ) -> Self {
        Self {
            key,
            source: ValueSource::Chart {
                default,
                schema,
                help,
            },
        }
    }
}

/// Rules a controller needs only for an optional feature (ConfigMapSync copying Secrets): granted
/// on request, by `vigil manifests --<manifests_flag>` or the chart value `<chart_key>.<value>`.
#[derive(Debug, Clone, Copy)]
pub struct PermissionSet {
    /// Its name (`secrets`): the chart's define is `vigil.rules.<controller>.<name>`.
    pub name: &'static str,
    /// The rules.
    pub permissions: &'static [Permission],
    /// The chart value (a switch, in the controller's block) that grants it. A switch flag of
    /// the controller bound to the same value is passed with it: asking for the permission asks
    /// for the feature.
    pub value: &'static str,
    /// The `vigil manifests` flag that grants it (its long name).
    pub manifests_flag: &'static str,
    /// One line: what it grants and why (help of the flag, the value and the README's row).
    pub help: &'static str,
    /// A chart value (a list of names) that narrows the rules to those objects
    /// (`resourceNames`); only for rules whose verbs all take a name (`get`).
    pub narrowed_by: Option<NarrowedBy>,
}

/// A list value narrowing a permission set to named objects.
#[derive(Debug, Clone, Copy)]
pub struct NarrowedBy {
    /// The value's path in the controller's block (`secrets.names`).
    pub value: &'static str,
    /// One line for the values, schema and README.
    pub help: &'static str,
}

/// The schema of a duration value: empty (the flag's default) or a number and a unit.
pub const DURATION_SCHEMA: &str = r#"{"type": "string", "pattern": "^([0-9]+(ms|s|m))?$", "description": "A duration such as 500ms, 30s or 2m."}"#;
