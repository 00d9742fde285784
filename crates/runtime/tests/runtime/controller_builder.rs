//! End-to-end, on the sandbox or the cluster of `VIGIL_TEST_KUBECONFIG`: what the controller
//! builder offers beyond watches — extra triggers, a controller's own backoff policy (its
//! quarantine threshold) and leadership hooks — seen on a controller of ConfigMaps in the test's
//! namespace that only counts its reconciles.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt as _;
use kube::api::{Api, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::{mpsc, watch};
use vigil_runtime::backoff::BackoffPolicy;
use vigil_runtime::leader::Leadership;
use vigil_runtime::metrics::Metrics;
use vigil_runtime::{ControllerBuilder, Manager};
use vigil_testenv::{TestEnv, wait_for};

const NAME: &str = "probe";
const SETTLE: Duration = Duration::from_secs(30);
/// The label of the ConfigMaps the probe controller sees.
const PROBE_LABEL: &str = "vigil.dev/probe";

#[derive(Debug, thiserror::Error)]
#[error("failing on purpose")]
struct Failing;

/// What the probe controller saw: reconciles (that did work) by object name.
#[derive(Default)]
struct Probe {
    reconciled: Mutex<HashMap<String, usize>>,
    fail: bool,
}

impl Probe {
    fn count(&self, name: &str) -> usize {
        self.lock().get(name).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, usize>> {
        self.reconciled.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn reconcile(cm: Arc<ConfigMap>, probe: Arc<Probe>) -> Result<Action, Failing> {
    *probe.lock().entry(cm.name_any()).or_default() += 1;
    if probe.fail {
        return Err(Failing);
    }
    Ok(Action::await_change())
}

/// A running probe controller.
struct Running {
    probe: Arc<Probe>,
    metrics: Arc<Metrics>,
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        let _ = self.stop.send(true);
        self.task.await.expect("controller stopped");
    }
}

/// Starts a controller counting in `probe` on `env`'s labelled ConfigMaps, wired further by
/// `wire`.
async fn start(
    env: &TestEnv,
    leadership: watch::Receiver<Leadership>,
    probe: Arc<Probe>,
    wire: impl FnOnce(ControllerBuilder<ConfigMap>) -> ControllerBuilder<ConfigMap> + Send + 'static,
) -> Running {
    let (stop, mut stopped) = watch::channel(false);
    let namespace = env.namespace().to_owned();
    let context = probe.clone();
    let mut manager = Manager::for_client("probe-test", env.client())
        .leadership(leadership)
        .build()
        .await
        .expect("manager");
    let metrics = manager.runtime().metrics().clone();
    manager.add(NAME, move |runtime| async move {
        // Only the test's own ConfigMaps (not `kube-root-ca.crt`).
        let config_maps = runtime
            .cache::<ConfigMap>()
            .namespaces(Some(&[namespace].into()))
            .labels(PROBE_LABEL)
            .build();
        wire(runtime.controller(&config_maps))
            .run(reconcile, context)
            .await;
    });
    let task = tokio::spawn(manager.run_until(async move {
        let _ = stopped.wait_for(|s| *s).await;
    }));
    Running {
        probe,
        metrics,
        stop,
        task,
    }
}

async fn create_config_map(env: &TestEnv, name: &str) {
    let api: Api<ConfigMap> = env.api();
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some(name.to_owned());
    cm.metadata.labels = Some([(PROBE_LABEL.to_owned(), "true".to_owned())].into());
    api.create(&PostParams::default(), &cm)
        .await
        .expect("ConfigMap created");
}

async fn reconciled_more_than(probe: &Probe, name: &str, times: usize) {
    wait_for(
        &format!("{name} reconciled more than {times} times"),
        SETTLE,
        || async { Ok::<_, String>((probe.count(name) > times).then_some(())) },
    )
    .await
    .expect("reconciled");
}

#[tokio::test]
async fn an_extra_trigger_reconciles_the_object_it_names() {
    let env = TestEnv::start().await.expect("test environment");
    create_config_map(&env, "polled").await;
    let (_leading_tx, leading) = watch::channel(Leadership::Leading);
    let (poll_tx, mut poll_rx) = mpsc::channel::<ObjectRef<ConfigMap>>(8);
    let polled = futures::stream::poll_fn(move |cx| poll_rx.poll_recv(cx));
    let running = start(&env, leading, Arc::default(), move |builder| {
        builder.triggers(polled)
    })
    .await;

    reconciled_more_than(&running.probe, "polled", 0).await;
    // Nothing changes in the API: only the trigger can bring the next reconcile.
    let before = running.probe.count("polled");
    poll_tx
        .send(ObjectRef::new("polled").within(env.namespace()))
        .await
        .expect("trigger sent");
    reconciled_more_than(&running.probe, "polled", before).await;

    running.stop().await;
    env.cleanup().await;
}

#[tokio::test]
async fn a_controllers_own_backoff_sets_when_an_object_is_quarantined() {
    let env = TestEnv::start().await.expect("test environment");
    create_config_map(&env, "failing").await;
    let (_leading_tx, leading) = watch::channel(Leadership::Leading);
    let policy = BackoffPolicy {
        base: Duration::from_millis(1),
        max: Duration::from_millis(10),
        jitter: 0.0,
        quarantine_after: 3,
        // Quarantined: no retry within the test.
        quarantine_interval: Duration::from_secs(3600),
    };
    let probe = Arc::new(Probe {
        fail: true,
        ..Probe::default()
    });
    let running = start(&env, leading, probe, move |builder| builder.backoff(policy)).await;

    let quarantined = format!("probe_test_quarantined_objects{{controller=\"{NAME}\"}} 1");
    wait_for("the failing ConfigMap quarantined", SETTLE, || async {
        Ok::<_, String>(
            running
                .metrics
                .encode()
                .contains(&quarantined)
                .then_some(()),
        )
    })
    .await
    .expect("quarantined");
    assert_eq!(
        running.probe.count("failing"),
        3,
        "quarantined after the policy's three failures, not the default ten"
    );

    running.stop().await;
    env.cleanup().await;
}

#[tokio::test]
async fn leadership_hooks_run_on_each_change_before_everything_is_reconciled() {
    let env = TestEnv::start().await.expect("test environment");
    create_config_map(&env, "led").await;
    let (leading_tx, following) = watch::channel(Leadership::Following);
    // Each change of leadership, with how often `led` had been reconciled when the hook ran.
    let seen: Arc<Mutex<Vec<(Leadership, usize)>>> = Arc::default();
    let hook_seen = seen.clone();
    let probe = Arc::new(Probe::default());
    let hook_probe = probe.clone();
    let running = start(&env, following, probe, move |builder| {
        builder.on_leadership(move |now| {
            let count = hook_probe.count("led");
            hook_seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((now, count));
        })
    })
    .await;

    // A standby's reconciles are counted in the metrics but do no work.
    let standby_pass =
        format!("controller_runtime_reconcile_total{{controller=\"{NAME}\",result=\"success\"}} 1");
    wait_for("a standby's pass over led", SETTLE, || async {
        Ok::<_, String>(
            running
                .metrics
                .encode()
                .contains(&standby_pass)
                .then_some(()),
        )
    })
    .await
    .expect("standby pass");
    assert_eq!(running.probe.count("led"), 0, "a standby does no work");

    leading_tx.send_replace(Leadership::Leading);
    reconciled_more_than(&running.probe, "led", 0).await;
    assert_eq!(
        seen.lock().unwrap_or_else(|e| e.into_inner()).as_slice(),
        &[(Leadership::Leading, 0)],
        "the hook ran once, before the reconcile that becoming leader brought"
    );

    leading_tx.send_replace(Leadership::Following);
    wait_for("the hook told of the lost leadership", SETTLE, || async {
        let seen = seen.lock().unwrap_or_else(|e| e.into_inner()).clone();
        Ok::<_, String>((seen.len() == 2).then_some(seen))
    })
    .await
    .map(|seen| assert_eq!(seen[1].0, Leadership::Following))
    .expect("told");

    running.stop().await;
    env.cleanup().await;
}
