//! apps/v1 messages (`k8s.io/api/apps/v1/generated.proto`).

use super::model::Ty::{Bool, I32, I64, IntOrString, Str};

use super::core_v1::POD_TEMPLATE_SPEC;
use super::meta_v1::{LABEL_SELECTOR, OBJECT_META};
use super::model::{Message, m, msg, opt, ptr, rep, req, time};

pub(super) static REPLICA_SET: Message = Message {
    name: "ReplicaSet",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &REPLICA_SET_SPEC),
        msg(3, "status", &REPLICA_SET_STATUS),
    ],
};

static REPLICA_SET_SPEC: Message = Message {
    name: "ReplicaSetSpec",
    fields: &[
        ptr(1, "replicas", I32),
        opt(4, "minReadySeconds", I32),
        msg(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
    ],
};

static REPLICA_SET_STATUS: Message = Message {
    name: "ReplicaSetStatus",
    fields: &[
        req(1, "replicas", I32),
        opt(2, "fullyLabeledReplicas", I32),
        opt(4, "readyReplicas", I32),
        opt(5, "availableReplicas", I32),
        ptr(7, "terminatingReplicas", I32),
        opt(3, "observedGeneration", I64),
        rep(6, "conditions", m(&REPLICA_SET_CONDITION)),
    ],
};

static REPLICA_SET_CONDITION: Message = Message {
    name: "ReplicaSetCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(3, "lastTransitionTime"),
        opt(4, "reason", Str),
        opt(5, "message", Str),
    ],
};

pub(super) static DEPLOYMENT: Message = Message {
    name: "Deployment",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &DEPLOYMENT_SPEC),
        msg(3, "status", &DEPLOYMENT_STATUS),
    ],
};

static DEPLOYMENT_SPEC: Message = Message {
    name: "DeploymentSpec",
    fields: &[
        ptr(1, "replicas", I32),
        msg(2, "selector", &LABEL_SELECTOR),
        msg(3, "template", &POD_TEMPLATE_SPEC),
        msg(4, "strategy", &DEPLOYMENT_STRATEGY),
        opt(5, "minReadySeconds", I32),
        ptr(6, "revisionHistoryLimit", I32),
        opt(7, "paused", Bool),
        ptr(9, "progressDeadlineSeconds", I32),
        ptr(10, "podReplacementPolicy", Str),
    ],
};

static DEPLOYMENT_STRATEGY: Message = Message {
    name: "DeploymentStrategy",
    fields: &[
        opt(1, "type", Str),
        msg(2, "rollingUpdate", &ROLLING_UPDATE_DEPLOYMENT),
    ],
};

static ROLLING_UPDATE_DEPLOYMENT: Message = Message {
    name: "RollingUpdateDeployment",
    fields: &[
        ptr(1, "maxUnavailable", IntOrString),
        ptr(2, "maxSurge", IntOrString),
    ],
};

static DEPLOYMENT_STATUS: Message = Message {
    name: "DeploymentStatus",
    fields: &[
        opt(1, "observedGeneration", I64),
        opt(2, "replicas", I32),
        opt(3, "updatedReplicas", I32),
        opt(7, "readyReplicas", I32),
        opt(4, "availableReplicas", I32),
        opt(5, "unavailableReplicas", I32),
        ptr(9, "terminatingReplicas", I32),
        rep(6, "conditions", m(&DEPLOYMENT_CONDITION)),
        ptr(8, "collisionCount", I32),
    ],
};

static DEPLOYMENT_CONDITION: Message = Message {
    name: "DeploymentCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(6, "lastUpdateTime"),
        time(7, "lastTransitionTime"),
        opt(4, "reason", Str),
        opt(5, "message", Str),
    ],
};
