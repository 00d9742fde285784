//! The kinds client-go's typed clients send, by (apiVersion, kind).

use super::apps_v1::{DEPLOYMENT, REPLICA_SET};
use super::batch_v1::{CRON_JOB, JOB};
use super::coordination_v1::LEASE;
use super::core_v1::{
    BINDING, CONFIG_MAP, NAMESPACE, POD, POD_TEMPLATE, RESOURCE_QUOTA, SECRET, SERVICE,
    SERVICE_ACCOUNT,
};
use super::meta_v1::DELETE_OPTIONS;
use super::model::Message;
use super::rbac_v1::{CLUSTER_ROLE, CLUSTER_ROLE_BINDING, ROLE, ROLE_BINDING};
use super::scheduling_policy_v1::{POD_DISRUPTION_BUDGET, PRIORITY_CLASS};

/// The kinds client-go's typed clients send that the sandbox serves or kubectl's generators create,
/// by (apiVersion, kind).
static KINDS: &[(&str, &str, &Message)] = &[
    ("v1", "Namespace", &NAMESPACE),
    ("v1", "ConfigMap", &CONFIG_MAP),
    ("v1", "Secret", &SECRET),
    ("v1", "ServiceAccount", &SERVICE_ACCOUNT),
    ("v1", "Service", &SERVICE),
    ("v1", "Pod", &POD),
    ("v1", "ResourceQuota", &RESOURCE_QUOTA),
    ("v1", "PodTemplate", &POD_TEMPLATE),
    ("v1", "Binding", &BINDING),
    ("apps/v1", "ReplicaSet", &REPLICA_SET),
    ("coordination.k8s.io/v1", "Lease", &LEASE),
    ("apps/v1", "Deployment", &DEPLOYMENT),
    ("batch/v1", "Job", &JOB),
    ("batch/v1", "CronJob", &CRON_JOB),
    ("rbac.authorization.k8s.io/v1", "Role", &ROLE),
    ("rbac.authorization.k8s.io/v1", "ClusterRole", &CLUSTER_ROLE),
    ("rbac.authorization.k8s.io/v1", "RoleBinding", &ROLE_BINDING),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &CLUSTER_ROLE_BINDING,
    ),
    ("scheduling.k8s.io/v1", "PriorityClass", &PRIORITY_CLASS),
    ("policy/v1", "PodDisruptionBudget", &POD_DISRUPTION_BUDGET),
];

pub(super) fn lookup_kind(api_version: &str, kind: &str) -> Option<&'static Message> {
    // meta/v1 DeleteOptions is registered in every group version, so a typed client of any group
    // (or the generic `meta.k8s.io/v1`) may name it; the message is the same everywhere.
    if kind == "DeleteOptions" {
        return Some(&DELETE_OPTIONS);
    }
    KINDS
        .iter()
        .find(|(version, name, _)| *version == api_version && *name == kind)
        .map(|(_, _, message)| *message)
}
