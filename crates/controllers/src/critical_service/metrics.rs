//! The `vigil_lame_services` gauge and the log of Services that turn lame or answer again while
//! no CriticalService covers them, as the article's first scripts did. Read-only: from the caches.

use std::collections::{BTreeSet, HashSet};
use std::time::Duration;

use kube::ResourceExt as _;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use vigil_runtime::Runtime;
use vigil_runtime::cache::Synced;
use vigil_runtime::leader::Leadership;

use super::cache;
use super::lame;
use super::model::{CriticalServiceView, Settings};
use super::observe::{Caches, crs_covering, view};

/// Registers `vigil_lame_services` and keeps it current until the runtime shuts down, once
/// `synced` caches are.
pub(super) fn report_lame_services(
    runtime: &Runtime,
    caches: Caches,
    settings: Settings,
    synced: Vec<Synced>,
) {
    let gauge = Gauge::<i64>::default();
    runtime.metrics().register(
        "vigil_lame_services",
        "Services with a selector and no ready endpoint that no CriticalService covers",
        gauge.clone(),
    );
    runtime.spawn(report(
        caches,
        settings,
        gauge,
        runtime.leadership(),
        synced,
    ));
}

/// How often lame, uncovered Services are looked for.
const LAME_REPORT_INTERVAL: Duration = Duration::from_secs(2);

/// Logs Services that turn lame or answer again while no CriticalService covers them, and keeps
/// `vigil_lame_services` current, as the article's first scripts did. Read-only: from the caches.
async fn report(
    caches: Caches,
    settings: Settings,
    gauge: Gauge<i64>,
    leadership: watch::Receiver<Leadership>,
    synced: Vec<Synced>,
) {
    for cache in synced {
        if !cache.wait().await {
            return;
        }
    }
    let mut known = BTreeSet::new();
    let mut tick = tokio::time::interval(LAME_REPORT_INTERVAL);
    loop {
        tick.tick().await;
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
