//! scheduling.k8s.io/v1 and policy/v1 messages.

use super::model::Ty::{Bool, I32, I64, IntOrString, Str};

use super::meta_v1::{CONDITION, LABEL_SELECTOR, OBJECT_META};
use super::model::{Message, Ty, m, map, msg, opt, ptr, rep, req};

pub(super) static PRIORITY_CLASS: Message = Message {
    name: "PriorityClass",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        req(2, "value", I32),
        opt(3, "globalDefault", Bool),
        opt(4, "description", Str),
        ptr(5, "preemptionPolicy", Str),
    ],
};

pub(super) static POD_DISRUPTION_BUDGET: Message = Message {
    name: "PodDisruptionBudget",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &POD_DISRUPTION_BUDGET_SPEC),
        msg(3, "status", &POD_DISRUPTION_BUDGET_STATUS),
    ],
};

static POD_DISRUPTION_BUDGET_SPEC: Message = Message {
    name: "PodDisruptionBudgetSpec",
    fields: &[
        ptr(1, "minAvailable", IntOrString),
        msg(2, "selector", &LABEL_SELECTOR),
        ptr(3, "maxUnavailable", IntOrString),
        ptr(4, "unhealthyPodEvictionPolicy", Str),
    ],
};

static POD_DISRUPTION_BUDGET_STATUS: Message = Message {
    name: "PodDisruptionBudgetStatus",
    fields: &[
        opt(1, "observedGeneration", I64),
        map(2, "disruptedPods", Ty::Time),
        // No omitempty upstream: Go always emits these counters, zero included.
        req(3, "disruptionsAllowed", I32),
        req(4, "currentHealthy", I32),
        req(5, "desiredHealthy", I32),
        req(6, "expectedPods", I32),
        rep(7, "conditions", m(&CONDITION)),
    ],
};
