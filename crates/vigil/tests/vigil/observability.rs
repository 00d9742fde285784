//! observability/alerts.yaml and observability/dashboard.json against the real thing: `vigil run`
//! on the sandbox exports every metric they name, and a real Prometheus scraping it evaluates
//! every alert rule and every dashboard query without an error.
//!
//! The Prometheus part needs a `prometheus` binary (`VIGIL_PROMETHEUS` or `PATH`; Debian's
//! `prometheus` package); without one it prints a note and checks the metric names only.

use std::io::{BufRead as _, BufReader, Read as _, Write as _};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::Value;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A child process killed when dropped, so a failing assertion leaves nothing running.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// A bare HTTP/1.0 GET (no chunked encoding to undo): status code and body.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_secs(2)).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(stream, "GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    let code = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((code, body.to_owned()))
}

fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let started = Instant::now();
    loop {
        if let Some(value) = check() {
            return value;
        }
        assert!(started.elapsed() < timeout, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Percent-encodes a query parameter.
fn encode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Every alert's expression, by alert name.
fn alert_exprs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("observability/alerts.yaml"))
        .expect("observability/alerts.yaml");
    let rules: Value = serde_saphyr::from_str(&text).expect("alerts YAML");
    rules["groups"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["alert"].as_str().unwrap_or_default().to_owned(),
                r["expr"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// An alert expression without its final threshold comparison (`expr > 0.1` → `expr`).
fn without_threshold(expr: &str) -> String {
    let trimmed = expr.trim();
    let Some(at) = trimmed.rfind(['>', '<']) else {
        return trimmed.to_owned();
    };
    let threshold = trimmed[at + 1..].trim_start_matches('=').trim();
    if threshold.parse::<f64>().is_ok() {
        trimmed[..at].trim().to_owned()
    } else {
        trimmed.to_owned()
    }
}

/// Every dashboard query, by panel title, with Grafana's variables given values Prometheus takes.
fn dashboard_exprs() -> Vec<(String, String)> {
    let text = std::fs::read_to_string(repo_root().join("observability/dashboard.json"))
        .expect("observability/dashboard.json");
    let dashboard: Value = serde_json::from_str(&text).expect("dashboard JSON");
    let mut out = Vec::new();
    for panel in dashboard["panels"].as_array().into_iter().flatten() {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"]
                .as_str()
                .unwrap_or_default()
                .replace("$__rate_interval", "1m")
                .replace("$controller", ".*");
            out.push((panel["title"].as_str().unwrap_or_default().to_owned(), expr));
        }
    }
    // The controller variable's own query.
    for variable in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        if let Some(q) = variable["definition"].as_str()
            && let Some(metric) = q
                .strip_prefix("label_values(")
                .and_then(|r| r.split(',').next())
        {
            out.push((format!("variable {}", variable["name"]), metric.to_owned()));
        }
    }
    out
}

/// The metric names an expression uses: Vigil's families (and controller-runtime's and
/// client-go's names).
fn metric_names(expr: &str) -> Vec<String> {
    const PREFIXES: &[&str] = &[
        "controller_runtime_",
        "workqueue_",
        "leader_election_",
        "rest_client_",
        "vigil_",
    ];
    expr.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .filter(|t| PREFIXES.iter().any(|p| t.starts_with(p)))
        .map(str::to_owned)
        .collect()
}

/// The families `/metrics` declares (`# TYPE name kind`), with the sample names each gives.
fn exported(exposition: &str) -> Vec<String> {
    let mut names = Vec::new();
    for line in exposition.lines() {
        let mut words = line.split_whitespace();
        if words.next() == Some("#") && words.next() == Some("TYPE") {
            let (Some(name), Some(kind)) = (words.next(), words.next()) else {
                continue;
            };
            match kind {
                "counter" => names.push(format!("{name}_total")),
                "histogram" => {
                    for suffix in ["_bucket", "_sum", "_count"] {
                        names.push(format!("{name}{suffix}"));
                    }
                }
                _ => names.push(name.to_owned()),
            }
        }
    }
    names
}

fn vigil() -> Command {
    Command::new(env!("CARGO_BIN_EXE_vigil"))
}

/// A sandbox with Vigil's CRDs and `vigil run` hosting every controller on it.
struct Operator {
    _sandbox: Running,
    _run: Running,
    metrics: SocketAddr,
    dir: PathBuf,
    kubeconfig: PathBuf,
}

impl Drop for Operator {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn start_operator(name: &str) -> Operator {
    let dir = std::env::temp_dir().join(format!("vigil-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let kubeconfig = dir.join("kubeconfig");
    let mut sandbox = vigil()
        .args(["sandbox", "--listen", "127.0.0.1:0", "--kubeconfig-out"])
        .arg(&kubeconfig)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn sandbox");
    let mut line = String::new();
    BufReader::new(sandbox.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    assert!(line.contains("sandbox ready"), "{line}");
    let sandbox = Running(sandbox);

    // Vigil's CRDs, from `vigil manifests`, so every controller runs for real.
    let out = vigil().arg("manifests").output().expect("vigil manifests");
    let crds: Vec<CustomResourceDefinition> = String::from_utf8_lossy(&out.stdout)
        .split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| d.contains("kind: CustomResourceDefinition"))
        .map(|d| serde_saphyr::from_str(d).expect("CRD YAML"))
        .collect();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let file = kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .expect("config");
        let client = kube::Client::try_from(config).expect("client");
        let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client);
        for crd in &crds {
            api.create(&Default::default(), crd)
                .await
                .expect("create CRD");
        }
    });

    let port = free_port();
    let metrics: SocketAddr = format!("127.0.0.1:{port}").parse().expect("address");
    let run = vigil()
        .arg("run")
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .arg("--metrics-addr")
        .arg(metrics.to_string())
        .arg("--leader-elect=true")
        .arg("--lease-namespace")
        .arg("default")
        .arg("--status-vault-location")
        .arg(dir.join("vault"))
        .arg("--local-clusters-dir")
        .arg(dir.join("clusters"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn vigil run");
    let run = Running(run);
    wait_for("vigil run to be ready", Duration::from_secs(60), || {
        get(metrics, "/readyz").filter(|(code, _)| *code == 200)
    });
    Operator {
        _sandbox: sandbox,
        _run: run,
        metrics,
        dir,
        kubeconfig,
    }
}

/// Work for the controllers while Prometheus scrapes: a ConfigMap copied to two namespaces by a
/// ConfigMapSync, and a CriticalService over a Service no pod answers (a fallback pod). Applied
/// through the API as a user would.
fn scenario(kubeconfig: &Path) {
    use kube::api::{Api, DynamicObject, PostParams};
    use kube::discovery::ApiResource;
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let file = kube::config::Kubeconfig::read_from(kubeconfig).expect("kubeconfig");
        let config = kube::Config::from_custom_kubeconfig(file, &Default::default())
            .await
            .expect("config");
        let client = kube::Client::try_from(config).expect("client");
        let create = |group: &str, version: &str, kind: &str, plural: &str, body: Value| {
            let client = client.clone();
            let resource = ApiResource {
                group: group.into(),
                version: version.into(),
                api_version: if group.is_empty() {
                    version.into()
                } else {
                    format!("{group}/{version}")
                },
                kind: kind.into(),
                plural: plural.into(),
            };
            let kind = kind.to_owned();
            async move {
                let namespace = body["metadata"]["namespace"].as_str().map(str::to_owned);
                let api: Api<DynamicObject> = match namespace {
                    Some(ns) => Api::namespaced_with(client, &ns, &resource),
                    None => Api::all_with(client, &resource),
                };
                let object: DynamicObject = serde_json::from_value(body).expect("object");
                api.create(&PostParams::default(), &object)
                    .await
                    .unwrap_or_else(|e| panic!("create {kind}: {e}"));
            }
        };
        for ns in ["shared", "team-a", "team-b"] {
            create(
                "",
                "v1",
                "Namespace",
                "namespaces",
                serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}
                }),
            )
            .await;
        }
        create(
            "",
            "v1",
            "ConfigMap",
            "configmaps",
            serde_json::json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "app-config", "namespace": "shared"},
                "data": {"level": "info"}
            }),
        )
        .await;
        create(
            "apps.bixbite.io",
            "v1",
            "ConfigMapSync",
            "configmapsyncs",
            serde_json::json!({
                "apiVersion": "apps.bixbite.io/v1", "kind": "ConfigMapSync",
                "metadata": {"name": "app-config", "namespace": "team-a"},
                "spec": {"sourceNamespace": "shared", "destinationNamespace": "team-a",
                         "configMapName": "app-config", "destinationNamespaces": ["team-b"]}
            }),
        )
        .await;
        create(
            "",
            "v1",
            "PodTemplate",
            "podtemplates",
            serde_json::json!({
                "apiVersion": "v1", "kind": "PodTemplate",
                "metadata": {"name": "critical-service-pod-template", "namespace": "default"},
                "template": {"spec": {"containers": [{"name": "fallback", "image": "nginx"}]}}
            }),
        )
        .await;
        create("", "v1", "Service", "services", serde_json::json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "payments", "namespace": "team-a", "labels": {"role": "payments"}},
            "spec": {"selector": {"app": "payments"}, "ports": [{"port": 80}]}
        }))
        .await;
        create("mycrd.com", "v1", "CriticalService", "criticalservices", serde_json::json!({
            "apiVersion": "mycrd.com/v1", "kind": "CriticalService",
            "metadata": {"name": "payments"},
            "spec": {"namespace": "team-a", "matchLabels": [{"key": "role", "value": "payments"}]}
        }))
        .await;
    });
}

/// Metric families registered in the code (`register("vigil_…"`), with the sample names they
/// may give: a labelled family shows in `/metrics` only once it has a series (a Kafka request, a
/// provider call), which an idle operator does not make.
fn registered_in_code() -> Vec<String> {
    fn walk(dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
            let path = entry.path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                for (at, _) in text.match_indices("register(") {
                    let rest = text[at + "register(".len()..].trim_start();
                    let Some(rest) = rest.strip_prefix('"') else {
                        continue;
                    };
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    for suffix in ["", "_total", "_bucket", "_sum", "_count"] {
                        out.push(format!("{name}{suffix}"));
                    }
                }
            }
        }
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(repo_root().join("crates"))
        .expect("crates/")
        .flatten()
    {
        walk(&entry.path().join("src"), &mut out);
    }
    out
}

#[test]
fn every_alert_and_dashboard_query_names_metrics_vigil_exports() {
    let operator = start_operator("observability-names");
    let (_, exposition) = get(operator.metrics, "/metrics").expect("/metrics");
    let registered = registered_in_code();
    let mut exported = exported(&exposition);
    // Unlabelled metrics and the controllers' series (made at zero) are in the exposition; the
    // families still without a series must at least be registered by the code, under that name.
    exported.extend(
        registered
            .into_iter()
            .filter(|name| name.starts_with("vigil_")),
    );
    let mut unknown = Vec::new();
    for (what, expr) in alert_exprs().into_iter().chain(dashboard_exprs()) {
        let names = metric_names(&expr);
        assert!(!names.is_empty(), "{what}: no Vigil metric in {expr}");
        for name in names {
            if !exported.contains(&name) {
                unknown.push(format!("{what}: {name}"));
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "not exported by vigil run: {unknown:#?}\n{exposition}"
    );
}

fn prometheus() -> Option<PathBuf> {
    let candidate = std::env::var_os("VIGIL_PROMETHEUS")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("prometheus"));
    match Command::new(&candidate).arg("--version").output() {
        Ok(out) if out.status.success() => Some(candidate),
        _ => {
            eprintln!(
                "skipped: no Prometheus (VIGIL_PROMETHEUS or prometheus on PATH; apt-get install prometheus)"
            );
            None
        }
    }
}

/// Prometheus scrapes `vigil run`, loads observability/alerts.yaml, and answers every dashboard
/// and alert query without an error; every rule evaluates healthy.
#[test]
fn prometheus_scraping_vigil_evaluates_every_alert_and_dashboard_query() {
    let Some(prometheus) = prometheus() else {
        return;
    };
    let operator = start_operator("observability-prometheus");
    let dir = operator.dir.join("prometheus");
    std::fs::create_dir_all(&dir).expect("prometheus dir");
    let alerts = repo_root().join("observability/alerts.yaml");
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: vigil\n    static_configs:\n      - targets: ['{}']\n",
        alerts.canonicalize().expect("alerts path").display(),
        operator.metrics
    );
    std::fs::write(dir.join("prometheus.yml"), config).expect("config");
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port())
        .parse()
        .expect("address");
    let _prometheus = Running(
        Command::new(&prometheus)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address={addr}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn prometheus"),
    );
    let query = |expr: &str| -> Value {
        let (code, body) = get(addr, &format!("/api/v1/query?query={}", encode(expr)))
            .unwrap_or_else(|| panic!("no answer to {expr}"));
        let value: Value = serde_json::from_str(&body).unwrap_or(Value::Null);
        assert_eq!(code, 200, "{expr}: {body}");
        value
    };
    wait_for(
        "Prometheus to scrape vigil run",
        Duration::from_secs(60),
        || {
            get(addr, "/-/ready").filter(|(code, _)| *code == 200)?;
            let up = query(r#"up{job="vigil"}"#);
            (up["data"]["result"][0]["value"][1] == "1").then_some(())
        },
    );
    scenario(&operator.kubeconfig);
    // The scenario's reconciles scraped and in a rate window.
    wait_for(
        "reconciles of the scenario in Prometheus",
        Duration::from_secs(60),
        || {
            let done = query("sum(increase(controller_runtime_reconcile_total[1m]))");
            let value = done["data"]["result"][0]["value"][1]
                .as_str()?
                .parse::<f64>()
                .ok()?;
            (value > 0.0).then_some(())
        },
    );
    // Series exist: the controllers' are created at zero when they start.
    let series = query("count(controller_runtime_reconcile_total)");
    assert_ne!(
        series["data"]["result"],
        Value::Array(Vec::new()),
        "{series}"
    );
    // Valid, and most with data. An alert's expression is empty unless it fires, so what is
    // counted for an alert is its left side, without the threshold (`… > 0.1`).
    let mut with_data = 0;
    let mut without = Vec::new();
    let exprs: Vec<(String, String)> = alert_exprs().into_iter().chain(dashboard_exprs()).collect();
    for (what, expr) in &exprs {
        let answer = query(expr);
        assert_eq!(answer["status"], "success", "{what}: {expr}: {answer}");
        let measured = without_threshold(expr);
        let answer = query(&measured);
        assert_eq!(answer["status"], "success", "{what}: {measured}: {answer}");
        if answer["data"]["result"]
            .as_array()
            .is_some_and(|r| !r.is_empty())
        {
            with_data += 1;
        } else {
            without.push(what.clone());
        }
    }
    eprintln!(
        "{with_data} of {} alert and dashboard queries have data during the scenario; without: {without:?}",
        exprs.len()
    );
    assert!(
        with_data * 3 >= exprs.len() * 2,
        "most queries should have data during the scenario: {with_data} of {}; without: {without:?}",
        exprs.len()
    );
    // Every rule loaded and evaluated without an error.
    let rules = wait_for("every rule evaluated", Duration::from_secs(30), || {
        let (_, body) = get(addr, "/api/v1/rules")?;
        let rules: Value = serde_json::from_str(&body).ok()?;
        let all: Vec<Value> = rules["data"]["groups"]
            .as_array()?
            .iter()
            .flat_map(|g| g["rules"].as_array().cloned().unwrap_or_default())
            .collect();
        (all.len() == alert_exprs().len() && all.iter().all(|r| r["health"] != "unknown"))
            .then_some(all)
    });
    for rule in rules {
        assert_eq!(rule["health"], "ok", "{rule}");
    }
}
