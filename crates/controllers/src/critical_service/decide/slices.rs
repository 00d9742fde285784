//! Vigil's EndpointSlices for warm standbys (see `standby_slice.rs` for why they exist): which
//! standby each Service's slices should list, and how, and the writes that make the cached
//! slices say so. Only what differs is written (the slice's hash annotation tells).

use super::actions::{Actions, usable_template};
use super::look::Observed;
use crate::critical_service::model::{Inputs, PodView, SliceWrite};
use crate::critical_service::standby_slice::{Listing, standby_slice};

/// When the change a slice's content reflects happened.
const TRIGGER_TIME_ANNOTATION: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// The standbys a Service's slices should list.
pub(super) struct Listed<'a> {
    pods: Vec<(&'a PodView, Listing)>,
}

impl<'a> Listed<'a> {
    /// Nothing (no warm standby asked for, or another CriticalService owns the Service).
    pub(super) fn none() -> Self {
        Self { pods: Vec::new() }
    }

    /// The standby answering for the lame Service (`answering`, set only while a fallback is
    /// active: promoted now or before, or selected again) as a ready endpoint, and the standby
    /// kept waiting as an armed one; each only once Ready (a pod listed before its server
    /// listens would fail the connections sent to it).
    pub(super) fn new(
        observed: &Observed<'a>,
        answering: Option<&str>,
        waiting: Option<&str>,
    ) -> Self {
        let candidates = || {
            observed
                .active
                .iter()
                .chain(observed.standbys.iter())
                .chain(observed.retiring.iter())
                .copied()
                .filter(|p| p.ready && !p.terminating)
        };
        let ready = candidates().find(|p| Some(p.name.as_str()) == answering);
        let armed = candidates()
            .find(|p| Some(p.name.as_str()) == waiting && Some(p.name.as_str()) != answering);
        Self {
            pods: ready
                .map(|p| (p, Listing::Ready))
                .into_iter()
                .chain(armed.map(|p| (p, Listing::Armed)))
                .collect(),
        }
    }
}

/// Writes what makes this CriticalService's slices for the Service list `listed`: a slice
/// applied where its content differs, deleted where nothing is to be listed.
pub(super) fn reconcile(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    listed: &Listed<'_>,
    actions: &mut Actions,
) {
    let service = observed.service;
    let template = usable_template(inputs.template).ok().map(|(_, t)| t);
    let wanted: Vec<_> = listed
        .pods
        .iter()
        .filter_map(|(pod, listing)| {
            standby_slice(&inputs.cr.name, service, pod, template, *listing)
        })
        .collect();
    let current = inputs
        .slices
        .get(&(service.namespace.clone(), service.name.clone()))
        .into_iter()
        .flat_map(|view| view.standby_slices.iter())
        .filter(|(_, slice)| slice.critical_service == inputs.cr.name);
    for (name, _) in current.clone() {
        let still_wanted = wanted
            .iter()
            .any(|(slice, _)| slice.metadata.name.as_ref() == Some(name));
        if !still_wanted {
            actions.slices.push(SliceWrite::Delete {
                namespace: service.namespace.clone(),
                name: name.clone(),
            });
        }
    }
    for (mut slice, hash) in wanted {
        let unchanged = current.clone().any(|(name, cached)| {
            slice.metadata.name.as_ref() == Some(name) && cached.hash == hash
        });
        if !unchanged {
            // What the EndpointSlice controller stamps too: kube-proxy measures its network
            // programming latency from it (outside the hash: it changes with every write).
            slice
                .metadata
                .annotations
                .get_or_insert_with(Default::default)
                .insert(TRIGGER_TIME_ANNOTATION.into(), inputs.now.to_string());
            actions.slices.push(SliceWrite::Apply(Box::new(slice)));
        }
    }
}
