//! `CriticalService` (`mycrd.com/v1`, cluster-scoped, short name `crisvc`): Services that must
//! keep answering. Compatible with the article's CRD and manifests: `spec.namespace` (absent: every
//! watched namespace) and `spec.matchLabels`, a list of `{key, value}` that must all match a
//! Service's labels. The other fields are Vigil's extensions.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Desired state of a CriticalService.
/// What `kubectl apply` prints when `matchLabels` names a key twice: a Service has one value
/// per label, so such a CriticalService would cover nothing.
pub const DUPLICATE_KEY_MESSAGE: &str = "matchLabels names a key more than once: a Service \
     has one value per label key, so no Service could match; keep one entry per key";

#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[kube(
    group = "mycrd.com",
    version = "v1",
    kind = "CriticalService",
    plural = "criticalservices",
    singular = "criticalservice",
    shortname = "crisvc",
    status = "CriticalServiceStatus",
    printcolumn = r#"{"name":"Namespace","type":"string","jsonPath":".spec.namespace"}"#,
    printcolumn = r#"{"name":"Covered","type":"integer","jsonPath":".status.covered"}"#,
    printcolumn = r#"{"name":"Lame","type":"integer","jsonPath":".status.lame"}"#,
    printcolumn = r#"{"name":"Fallbacks","type":"integer","jsonPath":".status.fallbackActive"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","jsonPath":".status.conditions[?(@.type==\"Ready\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CriticalServiceSpec {
    /// Namespace of the Services to keep answering; absent means every namespace Vigil watches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Label pairs that must all be on a Service for it to be covered.
    #[schemars(length(min = 1, max = 64))]
    #[x_kube(validation = Rule::new("self.all(a, self.exists_one(b, b.key == a.key))")
        .message(DUPLICATE_KEY_MESSAGE))]
    pub match_labels: Vec<LabelMatch>,
    /// The PodTemplate whose spec the fallback pod runs; absent: the operator's default
    /// (`POD_TEMPLATE` in `POD_TEMPLATE_NS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_template: Option<PodTemplateRef>,
    /// How long a Service must stay without a ready endpoint before the fallback starts, so a
    /// rolling update does not trigger one. Default 0: react at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 86400))]
    pub activation_delay_seconds: Option<u32>,
    /// A message handed to the fallback pod (environment variable `VIGIL_MAINTENANCE_MESSAGE`),
    /// e.g. for a maintenance page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 4096))]
    pub maintenance_message: Option<String>,
    /// Keep a warm standby beside each covered Service: a pod from the same template, started
    /// ahead of time, Ready, but not selected by the Service. Vigil lists the Ready standby in an
    /// EndpointSlice of its own as a *serving, terminating* endpoint, which kube-proxy uses only
    /// while the Service has no ready endpoint: when the last one goes, traffic moves to the
    /// standby in kube-proxy's next sync, before Vigil has written anything. Vigil then makes the
    /// standby a ready endpoint (its EndpointSlice first, then a label patch adding the Service's
    /// selector) and starts a new standby in its place. Absent or false: the fallback is created
    /// when the Service turns lame, as in the article.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_standby: Option<bool>,
    /// Drain a retiring fallback before deleting it: when the Service has a ready endpoint of its
    /// own again, Vigil first takes its pod out of the Service's endpoints (a label patch removing
    /// the selector), and deletes it only once the EndpointSlices no longer list it as ready and
    /// this many seconds have passed, so that kube-proxy (which applies a change up to its
    /// `minSyncPeriod`, 1 s by default, later) has stopped sending it connections. If the Service
    /// turns lame again meanwhile, the draining pod is selected again. Absent: 2 s (one
    /// `minSyncPeriod` and a margin). 0: the fallback is deleted at once, as in the article.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 300))]
    pub drain_seconds: Option<u32>,
}

/// One label a covered Service must carry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct LabelMatch {
    #[schemars(length(min = 1, max = 317))]
    pub key: String,
    #[schemars(length(max = 63))]
    pub value: String,
}

/// Where the fallback pod's template lives.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct PodTemplateRef {
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// Namespace of the PodTemplate; absent: the operator's default template namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

/// Observed state of a CriticalService.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CriticalServiceStatus {
    /// The generation this status was computed from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Ready` (every covered Service answers, directly or through its fallback) and `Degraded`
    /// (something keeps Vigil from acting: missing template, a foreign pod in the way, API errors).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    /// Every covered Service and its state.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<CoveredService>,
    /// Number of covered Services.
    #[serde(default)]
    pub covered: u32,
    /// Covered Services without a ready endpoint of their own.
    #[serde(default)]
    pub lame: u32,
    /// Covered Services answered by a fallback pod right now.
    #[serde(default)]
    pub fallback_active: u32,
    /// Covered Services with a Ready warm standby (`spec.warmStandby`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_ready: Option<u32>,
}

/// A covered Service and how it is doing.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CoveredService {
    pub namespace: String,
    pub name: String,
    pub state: ServiceState,
    /// When the Service entered this state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since: Option<Time>,
    /// The fallback pod answering for it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fallback_pod: Option<String>,
    /// The warm standby waiting to answer for it (`spec.warmStandby`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby_pod: Option<String>,
    /// The standby's state (`spec.warmStandby`; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub standby: Option<StandbyState>,
}

/// State of a covered Service's warm standby.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum StandbyState {
    /// Running and Ready, not selected: promoted in one write when the Service turns lame.
    Ready,
    /// Created, not Ready yet (or not yet seen).
    Starting,
    /// None can be started (template problem, or its names are taken by pods being deleted).
    Missing,
}

/// State of a covered Service.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ServiceState {
    /// A real endpoint is ready.
    Healthy,
    /// No real endpoint is ready and no fallback runs (yet: activation delay, or an error).
    Lame,
    /// No real endpoint is ready; Vigil's fallback pod answers.
    FallbackActive,
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt as _;

    /// The article's own CriticalService manifest (critical-service.yaml), unchanged.
    const ARTICLE_CR: &str = "apiVersion: mycrd.com/v1
kind: CriticalService
metadata:
  name: frontend
spec:
  namespace: default
  matchLabels:
    - key: role
      value: frontend
";

    #[test]
    fn crd_matches_the_articles_names_and_scope() {
        let crd = CriticalService::crd();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("criticalservices.mycrd.com")
        );
        assert_eq!(crd.spec.group, "mycrd.com");
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(
            crd.spec.names.short_names.as_deref(),
            Some(&["crisvc".to_owned()][..])
        );
        let version = &crd.spec.versions[0];
        assert_eq!(
            (version.name.as_str(), version.served, version.storage),
            ("v1", true, true)
        );
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "status subresource"
        );
        let schema = serde_json::to_value(&version.schema).expect("schema json");
        let required = &schema["openAPIV3Schema"]["properties"]["spec"]["required"];
        assert_eq!(required, &serde_json::json!(["matchLabels"]));
    }

    #[test]
    fn the_articles_manifest_parses() {
        let cr: CriticalService = serde_saphyr::from_str(ARTICLE_CR).expect("article manifest");
        assert_eq!(cr.spec.namespace.as_deref(), Some("default"));
        assert_eq!(
            cr.spec.match_labels,
            vec![LabelMatch {
                key: "role".into(),
                value: "frontend".into()
            }]
        );
        assert_eq!(cr.spec.activation_delay_seconds, None);
        assert_eq!(cr.spec.warm_standby, None);
    }
}
