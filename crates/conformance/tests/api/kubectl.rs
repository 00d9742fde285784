//! kubectl against the server: typed generators, `create -f`, server-side apply of a CRD and a
//! custom object, `get` (table, YAML, watch), `api-resources`, `patch` and `delete`.
//! kubectl is `$VIGIL_KUBECTL` (CI installs one there), else `kubectl` on PATH; the tests are
//! skipped (with a message) without one.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, BufReader};
use vigil_testenv::TestEnv;

use crate::support::{
    create_crd, delete_crd, expect_status, poll_until, test_group, wait_crd_established,
};

/// How long one kubectl invocation may take.
const KUBECTL_TIMEOUT: Duration = Duration::from_secs(30);

/// What a kubectl run printed.
#[derive(Debug)]
struct Output {
    success: bool,
    stdout: String,
    stderr: String,
}

/// kubectl bound to the test's kubeconfig, with a discovery cache and a work directory of its own.
struct Kubectl {
    bin: PathBuf,
    kubeconfig: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    /// None when there is no kubectl (neither `$VIGIL_KUBECTL` nor on PATH).
    fn new(env: &mut TestEnv) -> Option<Self> {
        let bin = match std::env::var_os("VIGIL_KUBECTL").filter(|p| !p.is_empty()) {
            Some(path) => Some(PathBuf::from(path)).filter(|p| p.is_file())?,
            None => std::env::split_paths(&std::env::var_os("PATH")?)
                .map(|p| p.join("kubectl"))
                .find(|p| p.is_file())?,
        };
        let dir = std::env::temp_dir().join(format!("vigil-kubectl-{}", env.namespace()));
        std::fs::create_dir_all(dir.join("cache")).expect("kubectl work directory");
        let kubeconfig = env
            .kubeconfig_path()
            .expect("kubeconfig file")
            .to_path_buf();
        Some(Self {
            bin,
            kubeconfig,
            dir,
        })
    }

    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(&self.bin);
        cmd.arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .arg("--request-timeout=10s")
            .args(args)
            .env_remove("KUBECONFIG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }

    async fn run(&self, args: &[&str]) -> Output {
        let output = tokio::time::timeout(KUBECTL_TIMEOUT, self.command(args).output())
            .await
            .unwrap_or_else(|_| {
                panic!("kubectl {args:?} did not finish within {KUBECTL_TIMEOUT:?}")
            })
            .expect("run kubectl");
        Output {
            success: output.status.success(),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }

    /// Runs kubectl, asserts it succeeded and returns its stdout.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.success,
            "kubectl {args:?} failed:\nstdout: {}\nstderr: {}",
            out.stdout, out.stderr
        );
        out.stdout
    }

    /// Writes a file in the work directory.
    fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, contents).expect("write manifest");
        path
    }
}

impl Drop for Kubectl {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

macro_rules! kubectl_or_skip {
    ($env:ident) => {
        match Kubectl::new(&mut $env) {
            Some(k) => k,
            None => {
                eprintln!("skipped: no kubectl (set VIGIL_KUBECTL or put kubectl on PATH)");
                $env.cleanup().await;
                return;
            }
        }
    };
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("UTF-8 path")
}

fn yaml(text: &str) -> Value {
    serde_saphyr::from_str::<Value>(text)
        .unwrap_or_else(|e| panic!("kubectl printed invalid YAML ({e}):\n{text}"))
}

/// The `gadgets.<group>` CRD as YAML: spec.size (string), spec.replicas (integer), printer
/// columns for both, short name `gdg`.
fn gadget_crd_yaml(group: &str) -> String {
    format!(
        r#"apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.{group}
  labels:
    {label}: "true"
spec:
  group: {group}
  scope: Namespaced
  names:
    plural: gadgets
    singular: gadget
    kind: Gadget
    listKind: GadgetList
    shortNames: [gdg]
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      status: {{}}
    additionalPrinterColumns:
    - name: Size
      type: string
      jsonPath: .spec.size
    - name: Replicas
      type: integer
      jsonPath: .spec.replicas
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size:
                type: string
              replicas:
                type: integer
"#,
        label = vigil_testenv::TEST_LABEL
    )
}

fn gadget_yaml(group: &str, name: &str, size: &str, replicas: i64) -> String {
    format!(
        "apiVersion: {group}/v1\nkind: Gadget\nmetadata:\n  name: {name}\nspec:\n  size: {size}\n  replicas: {replicas}\n"
    )
}

/// Installs the Gadget CRD through the API; returns its group and an `Api` for its objects.
async fn install_gadgets(env: &TestEnv, tag: &str) -> (String, Api<DynamicObject>) {
    let client = env.client();
    let group = test_group(env.namespace(), tag);
    let manifest = yaml(&gadget_crd_yaml(&group));
    create_crd(&client, manifest).await;
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Gadget"),
        "gadgets",
    );
    (group, Api::namespaced_with(client, env.namespace(), &ar))
}

async fn create_gadget(
    api: &Api<DynamicObject>,
    group: &str,
    name: &str,
    size: &str,
    replicas: i64,
) -> DynamicObject {
    let obj: DynamicObject =
        serde_json::from_value(yaml(&gadget_yaml(group, name, size, replicas))).expect("Gadget");
    api.create(&PostParams::default(), &obj)
        .await
        .expect("create gadget")
}

#[tokio::test]
async fn kubectl_create_namespace_generator() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let name = format!("{}-gen", env.namespace());
    let out = kubectl.run(&["create", "namespace", &name]).await;
    let namespaces: Api<Namespace> = Api::all(env.client());
    let created = namespaces.get_opt(&name).await.expect("get namespace");
    if created.is_some() {
        namespaces
            .delete(&name, &DeleteParams::default())
            .await
            .expect("delete namespace");
    }
    assert!(
        out.success,
        "kubectl create namespace failed:\nstdout: {}\nstderr: {}",
        out.stdout, out.stderr
    );
    assert_eq!(out.stdout.trim(), format!("namespace/{name} created"));
    assert!(created.is_some(), "the namespace exists");
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_create_configmap_generator() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let ns = env.namespace().to_owned();
    let stdout = kubectl
        .ok(&[
            "create",
            "configmap",
            "generated",
            "--from-literal=k=v",
            "--from-literal=x=y",
            "-n",
            &ns,
        ])
        .await;
    assert_eq!(stdout.trim(), "configmap/generated created");
    let cm = env
        .api::<ConfigMap>()
        .get("generated")
        .await
        .expect("configmap exists");
    let data = cm.data.unwrap_or_default();
    assert_eq!(
        (
            data.get("k").map(String::as_str),
            data.get("x").map(String::as_str)
        ),
        (Some("v"), Some("y"))
    );
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_create_get_delete_namespace_from_yaml() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let name = format!("{}-yaml", env.namespace());
    let file = kubectl.write(
        "ns.yaml",
        &format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {name}\n  labels:\n    {}: \"true\"\n    made-by: kubectl\n", vigil_testenv::TEST_LABEL),
    );
    let namespaces: Api<Namespace> = Api::all(env.client());

    let stdout = kubectl.ok(&["create", "-f", path_str(&file)]).await;
    assert_eq!(stdout.trim(), format!("namespace/{name} created"));
    let fetched = namespaces.get(&name).await.expect("namespace exists");
    assert_eq!(
        fetched
            .metadata
            .labels
            .unwrap_or_default()
            .get("made-by")
            .map(String::as_str),
        Some("kubectl")
    );

    let printed = yaml(&kubectl.ok(&["get", "namespace", &name, "-o", "yaml"]).await);
    assert_eq!(printed["kind"], "Namespace");
    assert_eq!(printed["metadata"]["name"], name.as_str());
    assert_eq!(printed["metadata"]["labels"]["made-by"], "kubectl");
    assert_eq!(printed["status"]["phase"], "Active");

    let stdout = kubectl
        .ok(&["delete", "-f", path_str(&file), "--wait=false"])
        .await;
    assert!(
        stdout.starts_with(&format!("namespace \"{name}\" deleted")),
        "{stdout}"
    );
    match namespaces.get_opt(&name).await.expect("get namespace") {
        None => {}
        Some(ns) => assert!(
            ns.metadata.deletion_timestamp.is_some(),
            "the namespace is being deleted: {ns:?}"
        ),
    }
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_server_side_apply_crd_and_custom_object() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let client = env.client();
    let ns = env.namespace().to_owned();
    let group = test_group(&ns, "kssa");
    let crd_name = format!("gadgets.{group}");

    let crd_file = kubectl.write("crd.yaml", &gadget_crd_yaml(&group));
    let stdout = kubectl
        .ok(&["apply", "--server-side", "-f", path_str(&crd_file)])
        .await;
    assert_eq!(
        stdout.trim(),
        format!("customresourcedefinition.apiextensions.k8s.io/{crd_name} serverside-applied")
    );
    wait_crd_established(&client, &crd_name).await;

    let obj_file = kubectl.write("gadget.yaml", &gadget_yaml(&group, "g1", "small", 2));
    let stdout = kubectl
        .ok(&[
            "apply",
            "--server-side",
            "-f",
            path_str(&obj_file),
            "-n",
            &ns,
        ])
        .await;
    assert_eq!(
        stdout.trim(),
        format!("gadget.{group}/g1 serverside-applied")
    );

    let printed = kubectl
        .ok(&[
            "get",
            &format!("gadget.{group}"),
            "g1",
            "-n",
            &ns,
            "-o",
            "yaml",
        ])
        .await;
    assert!(
        printed.contains("name: g1") && printed.contains("size: small"),
        "{printed}"
    );
    let printed = yaml(&printed);
    assert_eq!(printed["kind"], "Gadget");
    assert_eq!(printed["spec"], json!({"size": "small", "replicas": 2}));

    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&group, "v1", "Gadget"),
        "gadgets",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), &ns, &ar);
    let stored = api.get("g1").await.expect("custom object exists");
    let entry = stored
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .find(|e| e.operation.as_deref() == Some("Apply"));
    assert_eq!(
        entry.and_then(|e| e.manager.as_deref()),
        Some("kubectl"),
        "{:?}",
        stored.metadata.managed_fields
    );

    // Re-applying a changed manifest updates the object.
    let obj_file = kubectl.write("gadget.yaml", &gadget_yaml(&group, "g1", "large", 2));
    kubectl
        .ok(&[
            "apply",
            "--server-side",
            "-f",
            path_str(&obj_file),
            "-n",
            &ns,
        ])
        .await;
    assert_eq!(
        api.get("g1").await.expect("get").data["spec"]["size"],
        "large"
    );

    let stdout = kubectl
        .ok(&["delete", "-f", path_str(&obj_file), "-n", &ns])
        .await;
    assert!(
        stdout.starts_with(&format!("gadget.{group} \"g1\" deleted")),
        "{stdout}"
    );
    delete_crd(&client, &crd_name).await;
    env.cleanup().await;
}

/// The `sprockets.<group>` CRD: a described schema, as `kubectl explain` shows it.
fn sprocket_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("sprockets.{group}"), "labels": {vigil_testenv::TEST_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket", "listKind": "SprocketList"},
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "description": "Sprocket turns the chain of a test bicycle.",
                    "properties": {
                        "spec": {
                            "type": "object",
                            "description": "Desired shape of the sprocket.",
                            "required": ["teeth"],
                            "properties": {
                                "teeth": {"type": "integer", "description": "Number of teeth around the rim."},
                                "finish": {"type": "string", "description": "Surface finish, polished or matte."},
                                "offset": {"x-kubernetes-int-or-string": true, "description": "Offset from the hub."}
                            }
                        }
                    }
                }}
            }]
        }
    })
}

#[tokio::test]
async fn kubectl_explain_reads_the_crd_schema() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let group = test_group(env.namespace(), "kexplain");
    create_crd(&env.client(), sprocket_crd(&group)).await;
    let api_version = format!("--api-version={group}/v1");
    let words = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");

    // A real server publishes a new CRD's schema shortly after it is established.
    let top = poll_until("kubectl explain to know the CRD", || async {
        let out = kubectl.run(&["explain", "sprockets", &api_version]).await;
        out.success.then(|| words(&out.stdout))
    })
    .await;
    for expected in [
        "KIND: Sprocket",
        "VERSION: v1",
        "DESCRIPTION: Sprocket turns the chain of a test bicycle.",
        "apiVersion <string>",
        "metadata <ObjectMeta>",
        "spec <Object>",
    ] {
        assert!(top.contains(expected), "{expected:?} in: {top}");
    }

    let spec = words(
        &kubectl
            .ok(&["explain", "sprockets.spec", &api_version])
            .await,
    );
    for expected in [
        "FIELD: spec <Object>",
        "DESCRIPTION: Desired shape of the sprocket.",
        "teeth <integer> -required-",
        "Number of teeth around the rim.",
        "finish <string>",
        "Surface finish, polished or matte.",
        "offset <Object>",
    ] {
        assert!(spec.contains(expected), "{expected:?} in: {spec}");
    }

    let field = words(
        &kubectl
            .ok(&["explain", "sprockets.spec.teeth", &api_version])
            .await,
    );
    assert!(
        field.contains("FIELD: teeth <integer>")
            && field.contains("DESCRIPTION: Number of teeth around the rim."),
        "{field}"
    );
    // metadata resolves to the real ObjectMeta documentation.
    let meta = words(
        &kubectl
            .ok(&["explain", "sprockets.metadata.labels", &api_version])
            .await,
    );
    assert!(meta.contains("FIELD: labels <map[string]string>"), "{meta}");

    delete_crd(&env.client(), &format!("sprockets.{group}")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_get_prints_printer_columns() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let ns = env.namespace().to_owned();
    let (group, api) = install_gadgets(&env, "ktable").await;
    create_gadget(&api, &group, "g1", "small", 3).await;

    let stdout = kubectl
        .ok(&["get", &format!("gadgets.{group}"), "-n", &ns])
        .await;
    let lines: Vec<Vec<&str>> = stdout
        .lines()
        .map(|l| l.split_whitespace().collect())
        .collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert_eq!(lines[0], ["NAME", "SIZE", "REPLICAS"], "{stdout}");
    assert_eq!(lines[1], ["g1", "small", "3"], "{stdout}");

    delete_crd(&env.client(), &format!("gadgets.{group}")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_get_watch_streams_changes() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let ns = env.namespace().to_owned();
    let (group, api) = install_gadgets(&env, "kwatch").await;
    create_gadget(&api, &group, "first", "small", 1).await;

    let resource = format!("gadgets.{group}");
    let mut child = kubectl
        .command(&[
            "get",
            &resource,
            "-n",
            &ns,
            "--watch",
            "--output-watch-events",
        ])
        .spawn()
        .expect("spawn kubectl get --watch");
    let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
    let mut seen = Vec::new();
    let mut next_line = async |seen: &mut Vec<String>, want: &[&str]| {
        let found = tokio::time::timeout(Duration::from_secs(15), async {
            while let Some(line) = lines.next_line().await.expect("read kubectl output") {
                seen.push(line.clone());
                let words: Vec<&str> = line.split_whitespace().collect();
                if want.iter().all(|w| words.contains(w)) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(
            found,
            Ok(true),
            "no line with {want:?} from kubectl get --watch; output so far: {seen:#?}"
        );
    };

    // The initial list, then a change to an existing object, then a new object.
    next_line(&mut seen, &["ADDED", "first", "small"]).await;
    api.patch(
        "first",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": "large"}})),
    )
    .await
    .expect("patch");
    next_line(&mut seen, &["MODIFIED", "first", "large"]).await;
    create_gadget(&api, &group, "second", "medium", 2).await;
    next_line(&mut seen, &["ADDED", "second", "medium"]).await;
    api.delete("second", &DeleteParams::default())
        .await
        .expect("delete");
    next_line(&mut seen, &["DELETED", "second"]).await;

    child.kill().await.expect("stop kubectl");
    delete_crd(&env.client(), &resource).await;
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_api_resources_lists_the_crd() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let (group, _api) = install_gadgets(&env, "kres").await;

    let stdout = kubectl
        .ok(&["api-resources", &format!("--api-group={group}")])
        .await;
    let rows: Vec<Vec<&str>> = stdout
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect())
        .collect();
    let expected_version = format!("{group}/v1");
    assert_eq!(
        rows,
        [vec![
            "gadgets",
            "gdg",
            expected_version.as_str(),
            "true",
            "Gadget"
        ]],
        "{stdout}"
    );

    let all = kubectl.ok(&["api-resources", "-o", "name"]).await;
    let names: Vec<&str> = all.lines().collect();
    for name in [
        format!("gadgets.{group}"),
        "pods".to_owned(),
        "deployments.apps".to_owned(),
        "leases.coordination.k8s.io".to_owned(),
    ] {
        assert!(
            names.contains(&name.as_str()),
            "{name} in api-resources: {all}"
        );
    }

    delete_crd(&env.client(), &format!("gadgets.{group}")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_patch_and_delete() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let ns = env.namespace().to_owned();
    let (group, api) = install_gadgets(&env, "kpatch").await;
    create_gadget(&api, &group, "g1", "small", 1).await;
    let resource = format!("gadget.{group}");

    let stdout = kubectl
        .ok(&[
            "patch",
            &resource,
            "g1",
            "-n",
            &ns,
            "--type",
            "merge",
            "-p",
            r#"{"spec":{"replicas":5}}"#,
        ])
        .await;
    assert_eq!(stdout.trim(), format!("{resource}/g1 patched"));
    assert_eq!(
        api.get("g1").await.expect("get").data["spec"],
        json!({"size": "small", "replicas": 5})
    );

    // kubectl's default patch type for built-in kinds is a strategic merge patch.
    env.api::<ConfigMap>()
        .create(&PostParams::default(), &crate::support::config_map("cm"))
        .await
        .expect("create configmap");
    let stdout = kubectl
        .ok(&[
            "patch",
            "configmap",
            "cm",
            "-n",
            &ns,
            "-p",
            r#"{"data":{"more":"yes"}}"#,
        ])
        .await;
    assert_eq!(stdout.trim(), "configmap/cm patched");
    let data = env
        .api::<ConfigMap>()
        .get("cm")
        .await
        .expect("get")
        .data
        .unwrap_or_default();
    assert_eq!(
        (
            data.get("key").map(String::as_str),
            data.get("more").map(String::as_str)
        ),
        (Some("value"), Some("yes"))
    );

    let stdout = kubectl.ok(&["delete", &resource, "g1", "-n", &ns]).await;
    assert!(
        stdout.starts_with(&format!("{resource} \"g1\" deleted")),
        "{stdout}"
    );
    expect_status(api.get("g1").await, 404, "NotFound");
    let out = kubectl.run(&["delete", &resource, "g1", "-n", &ns]).await;
    assert!(!out.success, "deleting a missing object fails");
    assert!(
        out.stderr.contains("NotFound") && out.stderr.contains("\"g1\" not found"),
        "{}",
        out.stderr
    );

    let stdout = kubectl.ok(&["delete", "configmap", "cm", "-n", &ns]).await;
    assert!(stdout.starts_with("configmap \"cm\" deleted"), "{stdout}");
    poll_until("the configmap to be gone", || async {
        env.api::<ConfigMap>()
            .get_opt("cm")
            .await
            .expect("get")
            .is_none()
            .then_some(())
    })
    .await;

    delete_crd(&env.client(), &format!("gadgets.{group}")).await;
    env.cleanup().await;
}

#[tokio::test]
async fn kubectl_get_in_an_empty_namespace() {
    let mut env = TestEnv::start().await.expect("test env");
    let kubectl = kubectl_or_skip!(env);
    let ns = env.namespace().to_owned();
    let out = kubectl.run(&["get", "pods", "-n", &ns]).await;
    assert!(out.success, "{out:?}");
    assert_eq!(out.stdout, "", "{out:?}");
    assert_eq!(
        out.stderr.trim(),
        format!("No resources found in {ns} namespace.")
    );
    env.cleanup().await;
}
