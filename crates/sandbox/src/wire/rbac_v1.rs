//! rbac.authorization.k8s.io/v1 messages (`k8s.io/api/rbac/v1/generated.proto`).

use super::model::Ty::Str;

use super::meta_v1::{LABEL_SELECTOR, OBJECT_META};
use super::model::{Message, m, msg, opt, rep, rep_null, req};

pub(super) static ROLE: Message = Message {
    name: "Role",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep_null(2, "rules", m(&POLICY_RULE)),
    ],
};

pub(super) static CLUSTER_ROLE: Message = Message {
    name: "ClusterRole",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep_null(2, "rules", m(&POLICY_RULE)),
        msg(3, "aggregationRule", &AGGREGATION_RULE),
    ],
};

static AGGREGATION_RULE: Message = Message {
    name: "AggregationRule",
    fields: &[rep(1, "clusterRoleSelectors", m(&LABEL_SELECTOR))],
};

static POLICY_RULE: Message = Message {
    name: "PolicyRule",
    fields: &[
        rep_null(1, "verbs", Str),
        rep(2, "apiGroups", Str),
        rep(3, "resources", Str),
        rep(4, "resourceNames", Str),
        rep(5, "nonResourceURLs", Str),
    ],
};

pub(super) static ROLE_BINDING: Message = Message {
    name: "RoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "subjects", m(&SUBJECT)),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

pub(super) static CLUSTER_ROLE_BINDING: Message = Message {
    name: "ClusterRoleBinding",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        rep(2, "subjects", m(&SUBJECT)),
        msg(3, "roleRef", &ROLE_REF),
    ],
};

static SUBJECT: Message = Message {
    name: "Subject",
    fields: &[
        req(1, "kind", Str),
        opt(2, "apiGroup", Str),
        req(3, "name", Str),
        opt(4, "namespace", Str),
    ],
};

static ROLE_REF: Message = Message {
    name: "RoleRef",
    fields: &[
        req(1, "apiGroup", Str),
        req(2, "kind", Str),
        req(3, "name", Str),
    ],
};
