//! batch/v1 messages (`k8s.io/api/batch/v1/generated.proto`).

use super::model::Ty::{Bool, I32, I64, Str};

use super::core_v1::{OBJECT_REFERENCE, POD_TEMPLATE_SPEC};
use super::meta_v1::{LABEL_SELECTOR, OBJECT_META};
use super::model::{Message, m, msg, opt, ptr, rep, req, time};

pub(super) static JOB: Message = Message {
    name: "Job",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &JOB_SPEC),
        msg(3, "status", &JOB_STATUS),
    ],
};

/// Unsupported (error if present): podFailurePolicy (11), successPolicy (16).
static JOB_SPEC: Message = Message {
    name: "JobSpec",
    fields: &[
        ptr(1, "parallelism", I32),
        ptr(2, "completions", I32),
        ptr(3, "activeDeadlineSeconds", I64),
        ptr(7, "backoffLimit", I32),
        ptr(12, "backoffLimitPerIndex", I32),
        ptr(13, "maxFailedIndexes", I32),
        msg(4, "selector", &LABEL_SELECTOR),
        ptr(5, "manualSelector", Bool),
        msg(6, "template", &POD_TEMPLATE_SPEC),
        ptr(8, "ttlSecondsAfterFinished", I32),
        ptr(9, "completionMode", Str),
        ptr(10, "suspend", Bool),
        ptr(14, "podReplacementPolicy", Str),
        ptr(15, "managedBy", Str),
    ],
};

static JOB_STATUS: Message = Message {
    name: "JobStatus",
    fields: &[
        rep(1, "conditions", m(&JOB_CONDITION)),
        time(2, "startTime"),
        time(3, "completionTime"),
        opt(4, "active", I32),
        opt(5, "succeeded", I32),
        opt(6, "failed", I32),
        ptr(11, "terminating", I32),
        opt(7, "completedIndexes", Str),
        ptr(10, "failedIndexes", Str),
        msg(8, "uncountedTerminatedPods", &UNCOUNTED_TERMINATED_PODS),
        ptr(9, "ready", I32),
    ],
};

static JOB_CONDITION: Message = Message {
    name: "JobCondition",
    fields: &[
        req(1, "type", Str),
        req(2, "status", Str),
        time(3, "lastProbeTime"),
        time(4, "lastTransitionTime"),
        opt(5, "reason", Str),
        opt(6, "message", Str),
    ],
};

static UNCOUNTED_TERMINATED_PODS: Message = Message {
    name: "UncountedTerminatedPods",
    fields: &[rep(1, "succeeded", Str), rep(2, "failed", Str)],
};

static JOB_TEMPLATE_SPEC: Message = Message {
    name: "JobTemplateSpec",
    fields: &[msg(1, "metadata", &OBJECT_META), msg(2, "spec", &JOB_SPEC)],
};

pub(super) static CRON_JOB: Message = Message {
    name: "CronJob",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &CRON_JOB_SPEC),
        msg(3, "status", &CRON_JOB_STATUS),
    ],
};

static CRON_JOB_SPEC: Message = Message {
    name: "CronJobSpec",
    fields: &[
        req(1, "schedule", Str),
        ptr(8, "timeZone", Str),
        ptr(2, "startingDeadlineSeconds", I64),
        opt(3, "concurrencyPolicy", Str),
        ptr(4, "suspend", Bool),
        msg(5, "jobTemplate", &JOB_TEMPLATE_SPEC),
        ptr(6, "successfulJobsHistoryLimit", I32),
        ptr(7, "failedJobsHistoryLimit", I32),
    ],
};

static CRON_JOB_STATUS: Message = Message {
    name: "CronJobStatus",
    fields: &[
        rep(1, "active", m(&OBJECT_REFERENCE)),
        time(4, "lastScheduleTime"),
        time(5, "lastSuccessfulTime"),
    ],
};
