//! meta/v1 messages (`k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto`).

use super::model::Ty::{Bool, I64, Str};

use super::model::{Message, m, map, msg, opt, ptr, rep, req, time};

pub(super) static OBJECT_META: Message = Message {
    name: "ObjectMeta",
    fields: &[
        opt(1, "name", Str),
        opt(2, "generateName", Str),
        opt(3, "namespace", Str),
        opt(4, "selfLink", Str),
        opt(5, "uid", Str),
        opt(6, "resourceVersion", Str),
        opt(7, "generation", I64),
        // Go renders the zero creationTimestamp as null; omitting it is equivalent for the store.
        time(8, "creationTimestamp"),
        time(9, "deletionTimestamp"),
        ptr(10, "deletionGracePeriodSeconds", I64),
        map(11, "labels", Str),
        map(12, "annotations", Str),
        rep(13, "ownerReferences", m(&OWNER_REFERENCE)),
        rep(14, "finalizers", Str),
        // Removed upstream, but clients older than 1.25 still write it (always, even when empty).
        opt(15, "clusterName", Str),
    ],
};

static OWNER_REFERENCE: Message = Message {
    name: "OwnerReference",
    fields: &[
        req(5, "apiVersion", Str),
        req(1, "kind", Str),
        req(3, "name", Str),
        req(4, "uid", Str),
        ptr(6, "controller", Bool),
        ptr(7, "blockOwnerDeletion", Bool),
    ],
};

pub(super) static LABEL_SELECTOR: Message = Message {
    name: "LabelSelector",
    fields: &[
        map(1, "matchLabels", Str),
        rep(2, "matchExpressions", m(&LABEL_SELECTOR_REQUIREMENT)),
    ],
};

static LABEL_SELECTOR_REQUIREMENT: Message = Message {
    name: "LabelSelectorRequirement",
    fields: &[
        req(1, "key", Str),
        req(2, "operator", Str),
        rep(3, "values", Str),
    ],
};

/// The body client-go sends with DELETE and deletecollection (Helm's release-Secret purge, `kubectl
/// drain --disable-eviction`, every typed `Delete`/`DeleteCollection` call).
pub(super) static DELETE_OPTIONS: Message = Message {
    name: "DeleteOptions",
    fields: &[
        ptr(1, "gracePeriodSeconds", I64),
        msg(2, "preconditions", &PRECONDITIONS),
        ptr(3, "orphanDependents", Bool),
        ptr(4, "propagationPolicy", Str),
        rep(5, "dryRun", Str),
        ptr(6, "ignoreStoreReadErrorWithClusterBreakingPotential", Bool),
    ],
};

static PRECONDITIONS: Message = Message {
    name: "Preconditions",
    fields: &[ptr(1, "uid", Str), ptr(2, "resourceVersion", Str)],
};

pub(super) static CONDITION: Message = Message {
    name: "Condition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        opt(3, "observedGeneration", I64),
        time(4, "lastTransitionTime"),
        req(5, "reason", Str),
        req(6, "message", Str),
    ],
};
