//! Draining a retiring fallback (`spec.drainSeconds`): a pod that is deleted while kube-proxy
//! still sends it connections makes those connections fail (its server exits on SIGTERM, and
//! kube-proxy applies the EndpointSlice change up to its `minSyncPeriod` later). So the pod is
//! first taken out of its Service's selector (role `retiring`, with the time), and deleted once
//! the EndpointSlices no longer list it as ready and the drain time has passed. A Service that
//! turns lame again meanwhile gets the draining pod back, selected again.

use std::collections::BTreeMap;
use std::time::Duration;

use super::actions::{Actions, pod_ref};
use super::look::Observed;
use crate::critical_service::model::{
    CRITICAL_SERVICE_LABEL, FALLBACK_ROLE_LABEL, Inputs, MANAGED_BY_LABEL, PodView,
    RETIRING_SINCE_ANNOTATION, ROLE_ACTIVE, ROLE_RETIRING, Relabel, SERVICE_LABEL, about_pod,
};

/// The drain time when `drainSeconds` is absent. A fallback leaves the selector; the
/// EndpointSlice controller drops it within milliseconds; kube-proxy applies that at its next
/// sync, which its rate limiter holds back to at most `minSyncPeriod` (1 s by default, burst 2)
/// after the previous ones, and an iptables sync itself takes tens of milliseconds (35-40 ms on
/// the node here). 2 s covers a full `minSyncPeriod` after the slice change, with margin for the
/// sync and a slow API, and keeps the pod only that long.
pub const DEFAULT_DRAIN: Duration = Duration::from_secs(2);

/// The drain time: `drainSeconds`, [`DEFAULT_DRAIN`] when absent (a fallback deleted at once
/// loses the connections kube-proxy still sends it, which no controller at all would not cause),
/// and none with an explicit 0 (the article's immediate delete).
pub(super) fn configured(inputs: &Inputs<'_>) -> Option<Duration> {
    match inputs.cr.spec.drain_seconds {
        None => Some(DEFAULT_DRAIN),
        Some(0) => None,
        Some(seconds) => Some(Duration::from_secs(u64::from(seconds))),
    }
}

/// Vigil's own labels, which a selector may name but which the pod needs to stay Vigil's.
const MARKS: [&str; 4] = [
    MANAGED_BY_LABEL,
    CRITICAL_SERVICE_LABEL,
    SERVICE_LABEL,
    FALLBACK_ROLE_LABEL,
];

/// Takes `pod` out of its Service's endpoints: one label patch removes the selector's labels,
/// sets the role `retiring` and records when.
pub(super) fn start(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    pod: &PodView,
    why: &str,
    actions: &mut Actions,
) {
    let mut labels: BTreeMap<String, Option<String>> = observed
        .service
        .selector
        .keys()
        .filter(|k| !MARKS.contains(&k.as_str()))
        .map(|k| (k.clone(), None))
        .collect();
    labels.insert(FALLBACK_ROLE_LABEL.into(), Some(ROLE_RETIRING.into()));
    let annotations = BTreeMap::from([(
        RETIRING_SINCE_ANNOTATION.to_owned(),
        Some(inputs.now.to_string()),
    )]);
    actions.relabel.push(Relabel {
        pod: pod_ref(pod),
        labels,
        annotations,
    });
    actions.events.push(about_pod(
        super::REASON_FALLBACK_DRAINING,
        &pod.namespace,
        &pod.name,
        format!(
            "Took fallback pod {}/{} out of the endpoints of Service {}/{} ({why}); it is deleted once kube-proxy has stopped sending it connections",
            pod.namespace, pod.name, observed.service.namespace, observed.service.name
        ),
    ));
    if let Some(drain) = configured(inputs) {
        actions.requeue(drain);
    }
}

/// Selects a draining pod again for its lame Service: the selector's labels back, the role it
/// had (a standby's `active`; none for the fallback), and no drain time.
pub(super) fn reselect(observed: &Observed<'_>, pod: &PodView, actions: &mut Actions) {
    let service = observed.service;
    let mut labels = super::lifecycle::selected_by(service);
    let was_standby = observed.standby_names.contains(&pod.name);
    labels.insert(
        FALLBACK_ROLE_LABEL.into(),
        was_standby.then(|| ROLE_ACTIVE.to_owned()),
    );
    let annotations = BTreeMap::from([(RETIRING_SINCE_ANNOTATION.to_owned(), None)]);
    actions.relabel.push(Relabel {
        pod: pod_ref(pod),
        labels,
        annotations,
    });
    actions.events.push(about_pod(
        super::REASON_FALLBACK_RESELECTED,
        &pod.namespace,
        &pod.name,
        format!(
            "Selected draining fallback pod {}/{} again: Service {}/{} has no ready endpoint of its own",
            pod.namespace, pod.name, service.namespace, service.name
        ),
    ));
}

/// Deletes the draining pods whose drain is over (not `answering`, which was just selected
/// again): no EndpointSlice lists them as ready any more and the drain time has passed since
/// they left the selector. Until then, a wake-up for when the time runs out (a slice change
/// triggers a pass by itself).
pub(super) fn finish(
    inputs: &Inputs<'_>,
    observed: &Observed<'_>,
    answering: Option<&str>,
    actions: &mut Actions,
) {
    let service = observed.service;
    let listed = inputs
        .slices
        .get(&(service.namespace.clone(), service.name.clone()))
        .map(|s| &s.ready_pods);
    let drain = configured(inputs).unwrap_or_default();
    for pod in &observed.retiring {
        if Some(pod.name.as_str()) == answering
            || listed.is_some_and(|ready| ready.contains(&pod.name))
        {
            continue;
        }
        let elapsed = pod.retiring_since.map_or(drain, |since| {
            let ms = inputs
                .now
                .as_millisecond()
                .saturating_sub(since.as_millisecond());
            Duration::from_millis(u64::try_from(ms).unwrap_or(0))
        });
        match drain.checked_sub(elapsed).filter(|left| !left.is_zero()) {
            Some(left) => actions.requeue(left),
            None => actions.delete_pod(
                pod,
                &format!(
                    "it was drained from Service {}/{}",
                    service.namespace, service.name
                ),
            ),
        }
    }
}
