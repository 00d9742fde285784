//! coordination/v1 messages (`k8s.io/api/coordination/v1/generated.proto`): client-go's leader
//! election.

use super::model::Ty::{I32, Str};

use super::meta_v1::OBJECT_META;
use super::model::{Message, micro_time, msg, ptr};

pub(super) static LEASE: Message = Message {
    name: "Lease",
    fields: &[
        msg(1, "metadata", &OBJECT_META),
        msg(2, "spec", &LEASE_SPEC),
    ],
};

static LEASE_SPEC: Message = Message {
    name: "LeaseSpec",
    fields: &[
        ptr(1, "holderIdentity", Str),
        ptr(2, "leaseDurationSeconds", I32),
        micro_time(3, "acquireTime"),
        micro_time(4, "renewTime"),
        ptr(5, "leaseTransitions", I32),
        ptr(6, "strategy", Str),
        ptr(7, "preferredHolder", Str),
    ],
};
