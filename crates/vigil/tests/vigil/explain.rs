//! `kubectl explain` on every Vigil CRD served by `vigil sandbox`: the sandbox publishes the CRDs'
//! schemas in OpenAPI v3 as kube-apiserver does, so users read the same field documentation as on
//! a real cluster. kubectl is `$VIGIL_KUBECTL`, else `kubectl` on PATH; without one the test prints
//! a note and passes.

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
}

impl Kubectl {
    fn run(&self, args: &[&str]) -> String {
        let output = Command::new(&self.bin)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache)
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .output()
            .expect("run kubectl");
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "kubectl {args:?} failed:\nstdout: {stdout}\nstderr: {}",
            String::from_utf8_lossy(&output.stderr)
        );
        stdout
    }
}

/// The CRDs the chart ships (the same objects `vigil manifests` prints; a test keeps them equal).
fn vigil_crds() -> Vec<(PathBuf, Value)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../charts/vigil/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("charts/vigil/crds")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("read CRD");
            let crd: Value = serde_saphyr::from_str(&text).expect("CRD YAML");
            (path, crd)
        })
        .collect()
}

/// Whitespace-insensitive: kubectl wraps descriptions at its terminal width.
fn words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The first sentence-ish of a description, enough to recognise it after wrapping.
fn opening(description: &str) -> String {
    description
        .split_whitespace()
        .take(8)
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn kubectl_explain_documents_every_vigil_crd() {
    let Some(bin) = support::client_program("VIGIL_KUBECTL", "kubectl") else {
        eprintln!("skipped: kubectl not found (set VIGIL_KUBECTL or put kubectl on PATH)");
        return;
    };
    let dir = std::env::temp_dir().join(format!("vigil-explain-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("work directory");
    let kubeconfig = dir.join("kubeconfig");
    let _sandbox = support::spawn_sandbox(&kubeconfig);
    let kubectl = Kubectl {
        bin,
        kubeconfig,
        cache: dir.join("cache"),
    };
    let crds = vigil_crds();
    assert!(crds.len() >= 5, "the chart's CRDs: {crds:?}");
    for (path, _) in &crds {
        let path = path.to_string_lossy();
        kubectl.run(&["apply", "--server-side", "-f", &path]);
    }
    for (_, crd) in &crds {
        let crd_name = crd["metadata"]["name"].as_str().unwrap_or_default();
        kubectl.run(&[
            "wait",
            "--for=condition=Established",
            &format!("crd/{crd_name}"),
        ]);
        let group = crd["spec"]["group"].as_str().unwrap_or_default();
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap_or_default();
        // explain takes `plural[.field]`; the group comes from --api-version.
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or_default();
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            let name = version["name"].as_str().unwrap_or_default();
            let api_version = format!("--api-version={group}/{name}");
            let schema = &version["schema"]["openAPIV3Schema"];

            let out = words(&kubectl.run(&["explain", plural, &api_version]));
            assert!(
                out.contains(&format!("KIND: {kind}")) && out.contains(&format!("VERSION: {name}")),
                "{crd_name} {name}: {out}"
            );
            for field in ["apiVersion", "kind", "metadata"] {
                assert!(
                    out.contains(field),
                    "{crd_name} {name} lists {field}: {out}"
                );
            }
            if let Some(description) = schema["description"].as_str() {
                assert!(
                    out.contains(&opening(description)),
                    "{crd_name} {name} describes itself ({description:?}): {out}"
                );
            }

            let Some(spec) = schema["properties"]["spec"].as_object() else {
                continue;
            };
            let out = words(&kubectl.run(&["explain", &format!("{plural}.spec"), &api_version]));
            assert!(
                out.contains("FIELD: spec <Object>"),
                "{crd_name} {name}: {out}"
            );
            for (field, field_schema) in spec
                .get("properties")
                .and_then(Value::as_object)
                .into_iter()
                .flatten()
            {
                assert!(
                    out.contains(field.as_str()),
                    "{crd_name} {name} spec lists {field}: {out}"
                );
                if let Some(description) = field_schema["description"].as_str() {
                    assert!(
                        out.contains(&opening(description)),
                        "{crd_name} {name} spec.{field} described ({description:?}): {out}"
                    );
                }
            }
            // The whole tree, metadata's references to the meta/v1 schemas included.
            let out = kubectl.run(&["explain", plural, &api_version, "--recursive"]);
            assert!(
                out.contains("creationTimestamp"),
                "{crd_name} {name}: {out}"
            );
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}
