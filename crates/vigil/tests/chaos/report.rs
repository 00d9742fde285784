//! The failure report: what explains a run that did not converge, kept where the test's cleanup
//! does not reach and summed up in the panic message, so CI's log alone explains the failure.
//!
//! For every object a violation names (its [`Subject`]), read before the cleanup deletes
//! anything:
//! - its state: metadata, spec, status and each condition (reason, message,
//!   observedGeneration, lastTransitionTime); a Service's pods and the run's CriticalService
//!   (its conditions say why no fallback was made); a KubernetesCluster's
//!   kubeconfig Secret, its cluster at the `local` provider (the record, the live processes,
//!   the end of the API server's log) and its status vault history;
//! - its timeline: the workload's operations on it, the faults, its Events, and the replicas'
//!   log lines that mention it (its name, and a cluster's id), each at its time from the run's
//!   start (`+12.345s`; log and Event timestamps are converted).
//!
//! Then the whole schedule (every operation the workload did or attempted, with its start, end
//! and outcome, and the faults with their start and end) and the end of each replica's log.
//!
//! Written to `report.txt` in `$VIGIL_CHAOS_REPORT_DIR/<seed>/` when that variable is set (an
//! absolute path: the test runs in its package's directory), else in
//! `<target>/chaos-failures/<seed>/`, `<target>` being the Cargo target directory the test's
//! `vigil` binary was built in; with copies of the replicas' logs. A run of the same seed
//! replaces it.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use serde_json::Value;
use vigil_apis::{ConfigMapSync, CriticalService, KubernetesCluster, StatusBackupPolicy, Topic};
use vigil_vault::{ObjectKey, Vault, VaultOptions};

use super::invariants::{Subject, Violation};
use super::workload::Op;

/// How many subjects the panic message details (the report file has them all).
const SUBJECTS_IN_PANIC: usize = 4;
/// How many of a subject's latest timeline lines the panic message shows.
const TIMELINE_IN_PANIC: usize = 40;
/// How many of each replica's last log lines the report file keeps inline.
const TAIL_LINES: usize = 30;

/// The run's start, as an instant (the workload's and the faults' times) and on the wall clock
/// (log lines', Events' and vault records' times).
#[derive(Debug, Clone, Copy)]
pub struct Clock {
    pub t0: Instant,
    pub wall0: Timestamp,
}

impl Clock {
    pub fn start() -> Self {
        Self {
            t0: Instant::now(),
            wall0: Timestamp::now(),
        }
    }

    /// Milliseconds from the run's start to a wall-clock time.
    pub fn since_start(&self, at: Timestamp) -> i64 {
        at.as_millisecond() - self.wall0.as_millisecond()
    }
}

/// `+12.345s` (or `-0.250s` before the run's start).
pub fn rel(ms: i64) -> String {
    let sign = if ms < 0 { '-' } else { '+' };
    let ms = ms.unsigned_abs();
    format!("{sign}{}.{:03}s", ms / 1000, ms % 1000)
}

fn rel_duration(d: Duration) -> String {
    rel(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// A fault as the run played it, from the run's start.
#[derive(Debug, Clone)]
pub struct FaultSpan {
    pub start: Duration,
    pub end: Duration,
    pub what: String,
}

/// One line of a subject's timeline.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Line {
    pub at_ms: i64,
    /// `workload`, `fault`, `event`, `vault`, or the replica's name.
    pub source: String,
    pub text: String,
}

impl Line {
    fn render(&self) -> String {
        format!("{:>10} {:<9} {}", rel(self.at_ms), self.source, self.text)
    }
}

/// The wall-clock time a `vigil run` log line starts with (tracing's RFC 3339 timestamp).
pub fn log_time(line: &str) -> Option<Timestamp> {
    line.split_whitespace().next()?.parse().ok()
}

/// Whether `text` mentions `token` as a whole name: not inside a longer name (`kc-1` is not in
/// `kc-10` nor `xkc-1`), but `kc-1-kubeconfig`, `ns/kc-1` and `prefix.t3` count.
pub fn mentions(text: &str, token: &str) -> bool {
    if token.is_empty() {
        return false;
    }
    let name_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(token).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + token.len()..].chars().next();
        !before.is_some_and(name_char) && !after.is_some_and(name_char)
    })
}

/// Where the report of `seed` goes (see the module docs).
pub fn report_dir(seed: u64) -> PathBuf {
    let base = std::env::var_os("VIGIL_CHAOS_REPORT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            // CARGO_BIN_EXE_vigil is <target dir>/<profile>/vigil.
            Path::new(env!("CARGO_BIN_EXE_vigil"))
                .parent()
                .and_then(Path::parent)
                .map_or_else(
                    || std::env::temp_dir().join("vigil-chaos-failures"),
                    |target| target.join("chaos-failures"),
                )
        });
    base.join(seed.to_string())
}

/// What the report is made from.
pub struct Inputs<'a> {
    pub seed: u64,
    pub client: &'a kube::Client,
    pub ns: &'a str,
    pub clock: Clock,
    /// The run's one-line summary (operations, faults survived).
    pub summary: &'a str,
    pub violations: &'a [Violation],
    pub read_error: &'a str,
    pub schedule: &'a [Op],
    pub faults: &'a [FaultSpan],
    /// Each replica's name and log file.
    pub replica_logs: Vec<(String, PathBuf)>,
    pub clusters_dir: &'a Path,
    pub vault_dir: &'a Path,
    /// The run's temporary directory (logs, vault, clusters).
    pub run_dir: &'a Path,
}

/// One subject, as gathered.
struct Gathered {
    subject: Subject,
    /// Its state: one line per fact.
    state: Vec<String>,
    timeline: Vec<Line>,
}

/// Gathers and writes the report; returns its directory and the part for the panic message.
pub async fn write(inputs: &Inputs<'_>) -> (PathBuf, String) {
    let logs: Vec<(String, Vec<String>)> = inputs
        .replica_logs
        .iter()
        .map(|(name, path)| {
            let text = std::fs::read(path).unwrap_or_default();
            let lines = String::from_utf8_lossy(&text)
                .lines()
                .map(str::to_owned)
                .collect();
            (name.clone(), lines)
        })
        .collect();
    let events = events(inputs.client, inputs.ns).await;
    let subjects: BTreeSet<Subject> = inputs
        .violations
        .iter()
        .map(|v| v.subject.clone())
        .collect();
    let mut gathered = Vec::new();
    for subject in subjects {
        gathered.push(gather(inputs, subject, &logs, &events).await);
    }

    let mut head = String::new();
    let _ = writeln!(
        head,
        "chaos failure report: seed {} (VIGIL_CHAOS_SEED={} replays it)\nrun: {}\nthe run started at {} (times are counted from it); its directory: {}",
        inputs.seed,
        inputs.seed,
        inputs.summary,
        inputs.clock.wall0,
        inputs.run_dir.display()
    );
    let _ = writeln!(head, "\n== violations ({})", inputs.violations.len());
    for v in inputs.violations {
        let _ = writeln!(head, "  {v}");
    }
    if !inputs.read_error.is_empty() {
        let _ = writeln!(head, "  (the last read failed: {})", inputs.read_error);
    }
    let _ = writeln!(head, "\n== faults");
    for f in inputs.faults {
        let _ = writeln!(
            head,
            "  {} .. {}  {}",
            rel_duration(f.start),
            rel_duration(f.end),
            f.what
        );
    }

    let mut file = head.clone();
    let mut panic = head;
    for (k, g) in gathered.iter().enumerate() {
        let _ = writeln!(file, "\n== {}\n-- state", g.subject);
        for line in &g.state {
            let _ = writeln!(file, "  {line}");
        }
        let _ = writeln!(
            file,
            "-- timeline: the workload's operations on it, the faults, its Events, its vault records, the replicas' log lines naming it ({} lines)",
            g.timeline.len()
        );
        for line in &g.timeline {
            let _ = writeln!(file, "  {}", line.render());
        }
        if k < SUBJECTS_IN_PANIC {
            let _ = writeln!(panic, "\n== {}\n-- state", g.subject);
            for line in &g.state {
                let _ = writeln!(panic, "  {line}");
            }
            let skip = g.timeline.len().saturating_sub(TIMELINE_IN_PANIC);
            let _ = writeln!(
                panic,
                "-- timeline (last {} of {} lines)",
                g.timeline.len() - skip,
                g.timeline.len()
            );
            for line in &g.timeline[skip..] {
                let _ = writeln!(panic, "  {}", line.render());
            }
        }
    }
    if gathered.len() > SUBJECTS_IN_PANIC {
        let _ = writeln!(
            panic,
            "\n({} more objects in the report file)",
            gathered.len() - SUBJECTS_IN_PANIC
        );
    }

    let _ = writeln!(
        file,
        "\n== the schedule: every operation of the workload ({}), start .. end, and the faults",
        inputs.schedule.len()
    );
    let mut schedule: Vec<Line> = inputs.schedule.iter().map(op_line).collect();
    schedule.extend(inputs.faults.iter().flat_map(fault_lines));
    schedule.sort();
    for line in &schedule {
        let _ = writeln!(file, "  {}", line.render());
    }
    for (name, lines) in &logs {
        let _ = writeln!(file, "\n== {name}: its last {TAIL_LINES} log lines");
        for line in &lines[lines.len().saturating_sub(TAIL_LINES)..] {
            let _ = writeln!(file, "  {line}");
        }
    }

    let dir = report_dir(inputs.seed);
    let _ = std::fs::remove_dir_all(&dir);
    let written =
        std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(dir.join("report.txt"), &file));
    for (name, path) in &inputs.replica_logs {
        let _ = std::fs::copy(path, dir.join(format!("{name}.log")));
    }
    match written {
        Ok(()) => {
            let _ = writeln!(
                panic,
                "\nthe full report (every object, the whole schedule, the replicas' logs): {}",
                dir.join("report.txt").display()
            );
        }
        Err(e) => {
            let _ = writeln!(
                panic,
                "\nthe report could not be written to {}: {e}",
                dir.display()
            );
        }
    }
    (dir, panic)
}

fn op_line(op: &Op) -> Line {
    let outcome = match &op.outcome {
        Ok(()) => "ok".to_owned(),
        Err(e) => format!("FAILED: {e}"),
    };
    let detail = if op.detail.is_empty() {
        String::new()
    } else {
        format!(" ({})", op.detail)
    };
    Line {
        at_ms: i64::try_from(op.start.as_millis()).unwrap_or(i64::MAX),
        source: "workload".into(),
        text: format!(
            "{} {}{detail}: {outcome} (until {}){}",
            op.subject,
            op.what,
            rel_duration(op.end),
            if op.while_down {
                ", no operator running"
            } else {
                ""
            }
        ),
    }
}

fn fault_lines(f: &FaultSpan) -> [Line; 2] {
    let at = |d: Duration| i64::try_from(d.as_millis()).unwrap_or(i64::MAX);
    [
        Line {
            at_ms: at(f.start),
            source: "fault".into(),
            text: format!("begins: {}", f.what),
        },
        Line {
            at_ms: at(f.end),
            source: "fault".into(),
            text: format!("ends: {}", f.what),
        },
    ]
}

/// The Events of the run's namespace and of `default` (where cluster-scoped objects' go).
async fn events(client: &kube::Client, ns: &str) -> Vec<Event> {
    let mut out = Vec::new();
    for namespace in [ns, "default"] {
        if let Ok(list) = Api::<Event>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
        {
            out.extend(list.items);
        }
    }
    out
}

/// The API resource of a subject's kind, and whether it is namespaced.
fn resource(kind: &str) -> Option<(ApiResource, bool)> {
    Some(match kind {
        "KubernetesCluster" => (ApiResource::erase::<KubernetesCluster>(&()), true),
        "Topic" => (ApiResource::erase::<Topic>(&()), true),
        "ConfigMapSync" => (ApiResource::erase::<ConfigMapSync>(&()), true),
        "CriticalService" => (ApiResource::erase::<CriticalService>(&()), false),
        "StatusBackupPolicy" => (ApiResource::erase::<StatusBackupPolicy>(&()), false),
        "Service" => (
            ApiResource::erase::<k8s_openapi::api::core::v1::Service>(&()),
            true,
        ),
        "Lease" => (
            ApiResource::erase::<k8s_openapi::api::coordination::v1::Lease>(&()),
            true,
        ),
        _ => return None,
    })
}

async fn gather(
    inputs: &Inputs<'_>,
    subject: Subject,
    logs: &[(String, Vec<String>)],
    events: &[Event],
) -> Gathered {
    let clock = inputs.clock;
    let mut state = Vec::new();
    let mut tokens = vec![subject.name.clone()];
    let mut timeline: Vec<Line> = Vec::new();

    // The object itself.
    if let Some((ar, namespaced)) = resource(subject.kind) {
        let api: Api<DynamicObject> = if namespaced {
            Api::namespaced_with(inputs.client.clone(), inputs.ns, &ar)
        } else {
            Api::all_with(inputs.client.clone(), &ar)
        };
        match api.get_opt(&subject.name).await {
            Ok(Some(obj)) => {
                let value = serde_json::to_value(&obj).unwrap_or(Value::Null);
                state.extend(describe(&value, clock));
                if let Some(id) = value["status"]["clusterID"].as_str() {
                    tokens.push(id.to_owned());
                }
            }
            Ok(None) => state.push("no such object".into()),
            Err(e) => state.push(format!("could not read it: {e}")),
        }
    } else if subject.kind == "Replica" {
        state.push("(a process: see its log lines in the timeline)".into());
    }

    match subject.kind {
        "Service" => {
            // The run's CriticalService, whose conditions say why no fallback was made.
            if let Ok(list) = Api::<CriticalService>::all(inputs.client.clone())
                .list(&ListParams::default())
                .await
            {
                for cs in list.items.iter().filter(|c| {
                    c.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.contains(inputs.ns))
                }) {
                    let value = serde_json::to_value(cs).unwrap_or(Value::Null);
                    let name = cs.metadata.name.as_deref().unwrap_or_default();
                    state.extend(
                        describe(&value, clock)
                            .into_iter()
                            .map(|l| format!("CriticalService {name} {l}")),
                    );
                }
            }
            // Its own pods and its fallback, by name.
            if let Ok(pods) = Api::<Pod>::namespaced(inputs.client.clone(), inputs.ns)
                .list(&ListParams::default())
                .await
            {
                for p in pods
                    .items
                    .iter()
                    .filter(|p| mentions(p.metadata.name.as_deref().unwrap_or(""), &subject.name))
                {
                    state.push(pod_line(p));
                }
            }
        }
        "KubernetesCluster" => {
            state.extend(kubeconfig_secret(inputs, &subject.name).await);
            let (lines, ids) = provider_state(inputs.clusters_dir, &subject.name);
            state.extend(lines);
            for id in ids {
                if !tokens.contains(&id) {
                    tokens.push(id);
                }
            }
            timeline.extend(vault_history(inputs, &subject.name).await);
        }
        _ => {}
    }

    // The timeline.
    timeline.extend(
        inputs
            .schedule
            .iter()
            .filter(|op| op.subject == subject)
            .map(op_line),
    );
    timeline.extend(inputs.faults.iter().flat_map(fault_lines));
    for e in events {
        // `default` holds the Events of every run's cluster-scoped objects: only this run's.
        let this_run = e.metadata.namespace.as_deref() == Some(inputs.ns)
            || e.regarding
                .as_ref()
                .and_then(|r| r.name.as_deref())
                .is_some_and(|n| n.contains(inputs.ns));
        if !this_run {
            continue;
        }
        let regarding = e.regarding.as_ref();
        let about_it = regarding.is_some_and(|r| {
            r.kind.as_deref() == Some(subject.kind)
                && r.name.as_deref() == Some(subject.name.as_str())
        }) || tokens
            .iter()
            .any(|t| mentions(e.note.as_deref().unwrap_or(""), t));
        if about_it {
            timeline.push(event_line(e, clock));
        }
    }
    let lease = subject.kind == "Lease" || subject.kind == "Replica";
    for (replica, lines) in logs {
        for line in lines {
            let wanted = if lease {
                // A replica's own log, or the leadership lines of both.
                (subject.kind == "Replica" && *replica == subject.name)
                    || ["leader", "lease"].iter().any(|t| line.contains(t))
            } else {
                tokens.iter().any(|t| mentions(line, t))
            };
            if !wanted {
                continue;
            }
            let Some(at) = log_time(line) else {
                continue;
            };
            let text = line
                .split_once(char::is_whitespace)
                .map_or(line.as_str(), |(_, rest)| rest.trim_start());
            timeline.push(Line {
                at_ms: clock.since_start(at),
                source: replica.clone(),
                text: text.to_owned(),
            });
        }
    }
    timeline.sort();
    Gathered {
        subject,
        state,
        timeline,
    }
}

/// An object's metadata, spec, status and conditions, one fact a line.
fn describe(value: &Value, clock: Clock) -> Vec<String> {
    let meta = &value["metadata"];
    let mut out = Vec::new();
    let time = |v: &Value| -> String {
        match v.as_str() {
            Some(t) => match t.parse::<Timestamp>() {
                Ok(ts) => format!("{t} ({})", rel(clock.since_start(ts))),
                Err(_) => t.to_owned(),
            },
            None => "-".to_owned(),
        }
    };
    out.push(format!(
        "metadata: uid {} generation {} resourceVersion {} created {} deletionTimestamp {} finalizers {}",
        meta["uid"].as_str().unwrap_or("-"),
        meta["generation"],
        meta["resourceVersion"].as_str().unwrap_or("-"),
        time(&meta["creationTimestamp"]),
        time(&meta["deletionTimestamp"]),
        meta["finalizers"],
    ));
    let mut annotations = meta["annotations"].clone();
    if let Some(map) = annotations.as_object_mut() {
        map.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
    if !annotations.is_null() {
        out.push(format!("annotations: {annotations}"));
    }
    if !value["spec"].is_null() {
        out.push(format!("spec: {}", value["spec"]));
    }
    let mut status = value["status"].clone();
    let conditions = status
        .as_object_mut()
        .and_then(|s| s.remove("conditions"))
        .unwrap_or(Value::Null);
    if !status.is_null() {
        out.push(format!("status: {status}"));
    }
    for c in conditions.as_array().into_iter().flatten() {
        out.push(format!(
            "condition {}={} reason {} observedGeneration {} lastTransitionTime {}: {}",
            c["type"].as_str().unwrap_or("?"),
            c["status"].as_str().unwrap_or("?"),
            c["reason"].as_str().unwrap_or("-"),
            c["observedGeneration"],
            time(&c["lastTransitionTime"]),
            c["message"].as_str().unwrap_or(""),
        ));
    }
    out
}

fn pod_line(p: &Pod) -> String {
    let status = p.status.clone().unwrap_or_default();
    let ready = status
        .conditions
        .unwrap_or_default()
        .iter()
        .find(|c| c.type_ == "Ready")
        .map(|c| c.status.clone());
    format!(
        "pod {}: phase {:?} Ready {:?}{} labels {:?}",
        p.metadata.name.as_deref().unwrap_or(""),
        status.phase,
        ready,
        if p.metadata.deletion_timestamp.is_some() {
            " (terminating)"
        } else {
            ""
        },
        p.metadata.labels.clone().unwrap_or_default()
    )
}

fn event_line(e: &Event, clock: Clock) -> Line {
    let first = e
        .event_time
        .as_ref()
        .map(|t| t.0)
        .or_else(|| e.deprecated_first_timestamp.as_ref().map(|t| t.0))
        .or_else(|| e.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let series = e.series.as_ref().map(|s| {
        format!(
            " (x{}, last at {})",
            s.count,
            rel(clock.since_start(s.last_observed_time.0))
        )
    });
    let regarding = e.regarding.as_ref().map_or(String::new(), |r| {
        format!(
            "{} {}",
            r.kind.as_deref().unwrap_or(""),
            r.name.as_deref().unwrap_or("")
        )
    });
    Line {
        at_ms: first.map_or(i64::MAX, |t| clock.since_start(t)),
        source: "event".into(),
        text: format!(
            "{} {} about {regarding} from {}: {}{}",
            e.type_.as_deref().unwrap_or(""),
            e.reason.as_deref().unwrap_or(""),
            e.reporting_instance.as_deref().unwrap_or("?"),
            e.note.as_deref().unwrap_or(""),
            series.unwrap_or_default()
        ),
    }
}

/// The kubeconfig Secret's metadata and the server it names (never its data).
async fn kubeconfig_secret(inputs: &Inputs<'_>, name: &str) -> Vec<String> {
    let secrets: Api<Secret> = Api::namespaced(inputs.client.clone(), inputs.ns);
    match secrets.get_opt(&format!("{name}-kubeconfig")).await {
        Ok(Some(s)) => vec![format!(
            "Secret {name}-kubeconfig: resourceVersion {} server {:?} annotations {:?}",
            s.metadata.resource_version.as_deref().unwrap_or("-"),
            super::observe::server_of(&s),
            s.metadata.annotations.clone().unwrap_or_default()
        )],
        Ok(None) => vec![format!("Secret {name}-kubeconfig: none")],
        Err(e) => vec![format!("Secret {name}-kubeconfig: could not read it: {e}")],
    }
}

/// The `local` provider's clusters made for `name`: their record (without the token), live
/// processes and the end of the API server's log; and their ids.
fn provider_state(root: &Path, name: &str) -> (Vec<String>, Vec<String>) {
    let mut lines = Vec::new();
    let mut ids = Vec::new();
    let processes = vigil_provider::local::LocalProvider::new(
        vigil_provider::local::LocalConfig::new(root, env!("CARGO_BIN_EXE_vigil")),
    )
    .map(|p| p.processes())
    .unwrap_or_default();
    let Ok(entries) = std::fs::read_dir(root) else {
        lines.push(format!("provider: no directory {}", root.display()));
        return (lines, ids);
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let Ok(bytes) = std::fs::read(dir.join("cluster.json")) else {
            continue;
        };
        let Ok(mut record) = serde_json::from_slice::<Value>(&bytes) else {
            continue;
        };
        if record["identity"]["name"].as_str() != Some(name) {
            continue;
        }
        if let Some(map) = record.as_object_mut() {
            map.remove("token");
            map.remove("request");
        }
        let id = record["id"].as_str().unwrap_or_default().to_owned();
        let data = dir.join("data");
        let pids: Vec<u32> = processes
            .iter()
            .filter(|(_, d)| *d == data)
            .map(|(pid, _)| *pid)
            .collect();
        lines.push(format!(
            "provider cluster {id}: live processes {pids:?}; record {record}"
        ));
        let log = std::fs::read(dir.join("sandbox.log")).unwrap_or_default();
        let log = String::from_utf8_lossy(&log);
        let all: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
        for l in &all[all.len().saturating_sub(8)..] {
            lines.push(format!("provider cluster {id} sandbox.log: {l}"));
        }
        ids.push(id);
    }
    if ids.is_empty() {
        lines.push(format!("provider: no cluster made for {name}"));
    }
    (lines, ids)
}

/// The status vault's records of the KubernetesCluster `name`, as timeline lines.
async fn vault_history(inputs: &Inputs<'_>, name: &str) -> Vec<Line> {
    let Some(location) = inputs.vault_dir.to_str() else {
        return Vec::new();
    };
    let vault = match Vault::open(location, VaultOptions::default()).await {
        Ok(v) => v,
        Err(e) => {
            return vec![Line {
                at_ms: i64::MAX,
                source: "vault".into(),
                text: format!("could not open the vault: {e}"),
            }];
        }
    };
    let key = ObjectKey::new("vigil.dev", "KubernetesCluster", Some(inputs.ns), name);
    let history = match vault.history(&key).await {
        Ok(h) => h,
        Err(e) => {
            return vec![Line {
                at_ms: i64::MAX,
                source: "vault".into(),
                text: format!("could not read its history: {e}"),
            }];
        }
    };
    history
        .into_iter()
        .map(|r| match r {
            Ok(r) => Line {
                at_ms: r
                    .time
                    .parse::<Timestamp>()
                    .map_or(i64::MAX, |t| inputs.clock.since_start(t)),
                source: "vault".into(),
                text: format!(
                    "{} uid {} generation {:?} resourceVersion {}: phase {} clusterID {} observedGeneration {} masterVersion {}",
                    if r.deleted { "tombstone" } else { "record" },
                    r.uid,
                    r.generation,
                    r.resource_version,
                    r.status["phase"],
                    r.status["clusterID"],
                    r.status["observedGeneration"],
                    r.status["masterVersion"],
                ),
            },
            Err(e) => Line {
                at_ms: i64::MAX,
                source: "vault".into(),
                text: format!("an unreadable record: {e}"),
            },
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_is_mentioned_only_as_a_whole_name() {
        assert!(mentions("cluster=kc-1 done", "kc-1"));
        assert!(mentions("Secret kc-1-kubeconfig", "kc-1"));
        assert!(mentions("ns/kc-1", "kc-1"));
        assert!(mentions("vigil-test-ab12.t3 deleted", "t3"));
        assert!(mentions("kc-1", "kc-1"));
        assert!(!mentions("kc-10", "kc-1"));
        assert!(!mentions("xkc-1", "kc-1"));
        assert!(!mentions("at3 t30", "t3"));
        assert!(!mentions("anything", ""));
        // After a multi-byte character.
        assert!(mentions("→kc-1", "kc-1"));
    }

    #[test]
    fn log_lines_are_timed_from_the_run_start() {
        let wall0: Timestamp = "2026-12-02T06:25:03Z".parse().expect("time");
        let clock = Clock {
            t0: Instant::now(),
            wall0,
        };
        let line = "2026-12-02T06:25:15.250000Z  INFO vigil_controllers: status restored name=kc-1";
        let at = log_time(line).expect("a timestamp");
        assert_eq!(clock.since_start(at), 12_250);
        assert_eq!(rel(12_250), "+12.250s");
        assert_eq!(rel(-250), "-0.250s");
        assert_eq!(log_time("no timestamp here"), None);
    }

    #[test]
    fn a_status_is_described_condition_by_condition() {
        let clock = Clock {
            t0: Instant::now(),
            wall0: "2026-12-02T06:25:00Z".parse().expect("time"),
        };
        let value = serde_json::json!({
            "metadata": {"uid": "u", "generation": 3, "resourceVersion": "7",
                         "creationTimestamp": "2026-12-02T06:25:01Z", "finalizers": ["f"]},
            "spec": {"kubeVersion": "1.29"},
            "status": {"phase": "Failed", "observedGeneration": 3, "conditions": [
                {"type": "Ready", "status": "False", "reason": "ClusterFailed",
                 "message": "why", "observedGeneration": 3,
                 "lastTransitionTime": "2026-12-02T06:25:10Z"}]}
        });
        let lines = describe(&value, clock);
        assert!(lines[0].contains("generation 3") && lines[0].contains("(+1.000s)"));
        assert!(
            lines
                .iter()
                .any(|l| l == "spec: {\"kubeVersion\":\"1.29\"}")
        );
        assert!(
            lines
                .iter()
                .any(|l| l.starts_with("status: ") && l.contains("Failed"))
        );
        assert!(lines.iter().any(|l| l
            == "condition Ready=False reason ClusterFailed observedGeneration 3 lastTransitionTime 2026-12-02T06:25:10Z (+10.000s): why"));
    }
}
