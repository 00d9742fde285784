//! `helm upgrade` from release 0.1.0's chart (`tests/fixtures/chart-0.1.0`, the chart as it was
//! before this release) to `charts/vigil`, with default values, on a real node (CI's third
//! stage), the way docs/upgrading.md says: this release's CRDs applied server-side first (Helm
//! never upgrades a chart's `crds/`), then the upgrade, which must roll out to Ready pods.
//!
//! Only the image differs from the defaults (the node's image, never pulled): both charts run
//! the image under test, as there is no 0.1.0 image on the node. This release's CRDs are
//! applied before 0.1.0 is installed (without its `crds/`), as CRDs are cluster-wide and
//! other tests on the same cluster have installed them already.
//!
//! Needs a node (`../shared/kube/node-up.sh`), Vigil's image loaded into it (`.ci/image`,
//! `VIGIL_TEST_IMAGE`) and Helm (`VIGIL_HELM`); without them it prints a note and passes.

use crate::node_support;
use crate::support;

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use node_support::{diagnose, node, split_image};
use serde_json::json;
use support::{Helm, chart_dir};
use vigil_testenv::{TestEnv, wait_for, wait_until_served};

const WAIT: Duration = Duration::from_secs(180);

/// Applies every CRD of `charts/vigil/crds` server-side, as docs/upgrading.md's first step.
async fn apply_crds(client: &Client) {
    let dir = Path::new(&chart_dir()).join("crds");
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    for entry in std::fs::read_dir(&dir).expect("charts/vigil/crds") {
        let path = entry.expect("a CRD file").path();
        let text = std::fs::read_to_string(&path).expect("a CRD file");
        let crd: CustomResourceDefinition = serde_saphyr::from_str(&text).expect("a CRD");
        let mut value = serde_json::to_value(&crd).expect("CRD json");
        value["apiVersion"] = json!("apiextensions.k8s.io/v1");
        value["kind"] = json!("CustomResourceDefinition");
        crds.patch(
            &crd.name_any(),
            &PatchParams::apply("vigil-upgrade-test").force(),
            &Patch::Apply(&value),
        )
        .await
        .unwrap_or_else(|e| panic!("applying {}: {e}", path.display()));
        wait_until_served(client, &crd).await.expect("CRD served");
    }
}

/// Waits until the release's Deployment runs `replicas` updated, Ready replicas of `chart`.
async fn rolled_out(deployments: &Api<Deployment>, release: &str, chart: &str) -> Duration {
    let started = Instant::now();
    wait_for(
        &format!("{release} rolled out as {chart}"),
        WAIT,
        || async {
            let d = deployments.get(release).await.map_err(|e| e.to_string())?;
            let labels = d.labels();
            let s = d.status.clone().unwrap_or_default();
            let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
            let done = labels.get("helm.sh/chart").map(String::as_str) == Some(chart)
                && s.observed_generation == d.metadata.generation
                && s.updated_replicas == Some(want)
                && s.ready_replicas == Some(want)
                && s.replicas == Some(want);
            if done {
                Ok(Some(()))
            } else {
                Err(format!("{s:?}"))
            }
        },
    )
    .await
    .expect("rolled out");
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_upgrade_from_the_0_1_0_chart_succeeds_with_default_values() {
    let test = "helm_upgrade_from_the_0_1_0_chart_succeeds_with_default_values";
    let Some(node) = node(test) else { return };
    let home = std::env::temp_dir().join(format!("vigil-node-upgrade-{}", std::process::id()));
    std::fs::create_dir_all(&home).expect("helm home");
    let Some(helm) = Helm::find(&node.kubeconfig, &home) else {
        eprintln!("skipped {test}: no helm (set VIGIL_HELM or put helm on PATH)");
        return;
    };
    let env = TestEnv::start().await.expect("the node's API server");
    let client = env.client();
    let ns = env.namespace().to_owned();
    let release = format!("vigil-{}", ns.trim_start_matches("vigil-test-"));
    let (repository, tag) = split_image(&node.image);
    let image = [
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        "image.pullPolicy=Never".to_owned(),
    ];
    let old_chart = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/chart-0.1.0")
        .to_string_lossy()
        .into_owned();
    let new_chart = chart_dir();
    let helm_args = |verb: &str, chart: &str| -> Vec<String> {
        let mut args: Vec<String> = [verb, release.as_str(), chart, "--namespace", ns.as_str()]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        if verb == "install" {
            // The cluster already has this release's CRDs (applied below, or left by an earlier
            // test: CRDs are cluster-wide and outlive releases). Installing 0.1.0's `crds/` over
            // them would take `v1` out of `spec.versions` while objects are stored at `v1`,
            // which kube-apiserver refuses (and Helm 4 applies them server-side, so it meets
            // the other manager's fields first). A user upgrading installed 0.1.0 on a cluster
            // without them; what 0.1.0's CRDs become is storage_migration.rs's subject.
            args.push("--skip-crds".to_owned());
        }
        for value in &image {
            args.extend(["--set".to_owned(), value.clone()]);
        }
        args.extend([
            "--wait".to_owned(),
            "--timeout".to_owned(),
            "180s".to_owned(),
        ]);
        args
    };
    let run = |args: Vec<String>| {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        helm.try_run(&args)
    };
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &ns);

    apply_crds(&client).await;
    if let Err(e) = run(helm_args("install", &old_chart)) {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    rolled_out(&deployments, &release, "vigil-0.1.0").await;
    let started = Instant::now();
    if let Err(e) = run(helm_args("upgrade", &new_chart)) {
        panic!("{e}\n{}", diagnose(&client, &ns).await);
    }
    let upgrade = started.elapsed();
    // The chart's version follows the crate's (the release that ships it).
    let new_version = format!("vigil-{}", env!("CARGO_PKG_VERSION"));
    rolled_out(&deployments, &release, &new_version).await;
    eprintln!(
        "node_chart_upgrade: helm upgrade from the 0.1.0 fixture to {new_version} --wait returned after {:.1} s",
        upgrade.as_secs_f64()
    );
    let history = helm
        .try_run(&["history", &release, "--namespace", &ns])
        .unwrap_or_default();
    assert!(history.contains(&new_version), "{history}");
    if let Err(e) = helm.try_run(&["uninstall", &release, "--namespace", &ns, "--wait"]) {
        panic!("{e}");
    }
    env.cleanup().await;
    let _ = std::fs::remove_dir_all(&home);
}
