//! The `vigil_lame_services` gauge and the log of Services that turn lame or answer again while
//! no CriticalService covers them, as the article's first scripts did. Read-only: from the caches.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use futures::stream::{BoxStream, StreamExt as _};
use kube::ResourceExt as _;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::time::Instant;
use vigil_runtime::Runtime;
use vigil_runtime::cache::{Source as _, Synced};
use vigil_runtime::leader::Leadership;

use super::cache::{self, Sources};
use super::lame;
use super::model::{CriticalServiceView, Settings};
use super::observe::{Caches, crs_covering, view};

/// Registers `vigil_lame_services` and keeps it current until the runtime shuts down, once
/// the caches are synced.
pub(super) fn report_lame_services(
    runtime: &Runtime,
    sources: &Sources,
    caches: Caches,
    settings: Settings,
) {
    let gauge = Gauge::<i64>::default();
    runtime.metrics().register(
        "vigil_lame_services",
        "Services with a selector and no ready endpoint that no CriticalService covers",
        gauge.clone(),
    );
    // What can change the answer: a Service, an EndpointSlice, a CriticalService. Subscribed to
    // once the caches are synced, never before: a cache's feed waits for every subscriber, and a
    // subscriber that does not drain its queue while the cache lists would keep it from syncing.
    let (services, slices, crs) = (
        sources.services.clone(),
        sources.slices.clone(),
        sources.crs.clone(),
    );
    let changes = move || {
        futures::stream::select_all([
            services.subscribe().map(|_| ()).boxed(),
            slices.subscribe().map(|_| ()).boxed(),
            crs.subscribe().map(|_| ()).boxed(),
        ])
        .boxed()
    };
    runtime.spawn(report(
        caches,
        settings,
        gauge,
        runtime.leadership(),
        sources
            .synced()
            .into_iter()
            .chain([sources.crs.synced()])
            .collect(),
        changes,
    ));
}

/// The shortest time between two looks for lame, uncovered Services: changes that come faster
/// (a rollout, churn) are looked at together.
const LAME_REPORT_INTERVAL: Duration = Duration::from_secs(2);

/// Logs Services that turn lame or answer again while no CriticalService covers them, and keeps
/// `vigil_lame_services` current, as the article's first scripts did. Read-only: from the caches.
/// It looks only after a change (a Service, an EndpointSlice or a CriticalService), at most once
/// per [`LAME_REPORT_INTERVAL`]: a cluster at rest costs it nothing. (It looked every 2 s, each
/// look going through every cached EndpointSlice: the largest part of Vigil's CPU at rest with
/// 10,000 Services.)
async fn report(
    caches: Caches,
    settings: Settings,
    gauge: Gauge<i64>,
    leadership: watch::Receiver<Leadership>,
    synced: Vec<Synced>,
    changes: impl FnOnce() -> BoxStream<'static, ()>,
) {
    for cache in synced {
        if !cache.wait().await {
            return;
        }
    }
    // Every change from here on is seen: the first look below comes after it.
    let mut changes = changes();
    let mut known = BTreeSet::new();
    loop {
        let looked = Instant::now();
        let now = lame_now(&caches, &settings);
        gauge.set(i64::try_from(now.len()).unwrap_or(i64::MAX));
        // Only the leader logs, so a pair of replicas does not report everything twice.
        if *leadership.borrow() == Leadership::Leading {
            let (lame, answering) = lame::changes(&known, &now);
            for (ns, name) in lame {
                tracing::warn!(service = %format!("{ns}/{name}"), "Service is lame: no ready endpoint, and no CriticalService covers it");
            }
            for (ns, name) in answering {
                tracing::info!(service = %format!("{ns}/{name}"), "Service answers again");
            }
        }
        known = now;
        // Wait for a change, then for the interval to end; the changes meanwhile are drained
        // (the caches' feeds wait for their subscribers) and looked at together.
        if changes.next().await.is_none() {
            return;
        }
        let next = tokio::time::sleep_until(looked + LAME_REPORT_INTERVAL);
        tokio::pin!(next);
        loop {
            tokio::select! {
                () = &mut next => break,
                change = changes.next() => if change.is_none() { return },
            }
        }
    }
}

/// The Services lame and uncovered now. Only Services without a ready endpoint can be lame: it
/// looks at those alone (a handful), not at every Service of the cluster every two seconds.
fn lame_now(caches: &Caches, settings: &Settings) -> BTreeSet<(String, String)> {
    let answering: HashSet<(String, String)> = caches
        .slices
        .state()
        .iter()
        .filter(|(_, s)| !s.ready_pods.is_empty())
        .filter_map(|(_, s)| Some((s.namespace.to_string(), s.service.as_deref()?.to_owned())))
        .collect();
    let services: Vec<_> = caches
        .services
        .state()
        .iter()
        .filter(|s| !answering.contains(&(s.namespace().unwrap_or_default(), s.name_any())))
        .map(|s| cache::service_view(s))
        .collect();
    let mut crs: Vec<CriticalServiceView> = Vec::new();
    let mut seen: HashSet<String> = HashSet::new();
    for service in &services {
        for r in crs_covering(caches, settings, service) {
            if let (true, Some(cr)) = (seen.insert(r.name.clone()), caches.crs.get(&r)) {
                crs.push(view(&cr));
            }
        }
    }
    let slices = cache::slice_views(
        caches
            .slices
            .state()
            .iter()
            .map(|(_, s)| s.as_ref())
            .filter(|s| {
                s.service.as_deref().is_some_and(|svc| {
                    !answering.contains(&(s.namespace.to_string(), svc.to_owned()))
                })
            }),
    );
    lame::lame_uncovered(&services, &slices, &crs, settings)
}
