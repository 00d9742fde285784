//! Server-side printing (`as=Table`), which kubectl asks for on `get`: Name and Age for every
//! kind, a few well-known columns for built-ins, and a CRD's additionalPrinterColumns.

use serde_json::{Value, json};

use crate::http::jsonpath;
use crate::registry::convert;
use crate::registry::meta;
use crate::registry::resources::ResourceInfo;
use crate::registry::store::Stored;

/// `includeObject`: what each row carries besides its cells.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    None,
    Metadata,
    Object,
}

impl IncludeObject {
    pub fn parse(v: Option<&str>) -> Self {
        match v {
            Some("None") => Self::None,
            Some("Object") => Self::Object,
            _ => Self::Metadata,
        }
    }
}

struct Column {
    name: String,
    kind: String,
    format: String,
    description: String,
    priority: i64,
    /// How to fill the cell.
    source: Source,
}

enum Source {
    Name,
    Age,
    Path(String),
    Date(String),
}

fn columns(info: &ResourceInfo) -> Vec<Column> {
    let col = |name: &str, kind: &str, format: &str, source: Source| Column {
        name: name.into(),
        kind: kind.into(),
        format: format.into(),
        description: String::new(),
        priority: 0,
        source,
    };
    let mut cols = vec![Column {
        description: "Name must be unique within a namespace.".into(),
        ..col("Name", "string", "name", Source::Name)
    }];
    if let Some(crd) = &info.crd {
        for c in &crd.printer_columns {
            let path = c
                .get("jsonPath")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned();
            let kind = c
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("string")
                .to_owned();
            let source = if kind == "date" {
                Source::Date(path)
            } else {
                Source::Path(path)
            };
            cols.push(Column {
                name: c.get("name").and_then(Value::as_str).unwrap_or("").into(),
                kind: if kind == "date" {
                    "string".into()
                } else {
                    kind
                },
                format: c.get("format").and_then(Value::as_str).unwrap_or("").into(),
                description: c
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .into(),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                source,
            });
        }
        if crd.printer_columns.is_empty() {
            cols.push(col("Age", "date", "", Source::Age));
        }
        return cols;
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces") => cols.push(col(
            "Status",
            "string",
            "",
            Source::Path(".status.phase".into()),
        )),
        ("", "pods") => {
            cols.push(col(
                "Status",
                "string",
                "",
                Source::Path(".status.phase".into()),
            ));
            cols.push(Column {
                priority: 1,
                ..col("IP", "string", "", Source::Path(".status.podIP".into()))
            });
            cols.push(Column {
                priority: 1,
                ..col("Node", "string", "", Source::Path(".spec.nodeName".into()))
            });
        }
        ("", "services") => {
            cols.push(col("Type", "string", "", Source::Path(".spec.type".into())));
            cols.push(col(
                "Cluster-IP",
                "string",
                "",
                Source::Path(".spec.clusterIP".into()),
            ));
        }
        ("apps", "deployments" | "replicasets") => {
            cols.push(col(
                "Replicas",
                "integer",
                "",
                Source::Path(".spec.replicas".into()),
            ));
        }
        ("", "events") => {
            cols.push(col("Type", "string", "", Source::Path(".type".into())));
            cols.push(col("Reason", "string", "", Source::Path(".reason".into())));
            cols.push(col(
                "Message",
                "string",
                "",
                Source::Path(".message".into()),
            ));
        }
        _ => {}
    }
    cols.push(Column { description: "CreationTimestamp is a timestamp representing the server time when this object was created.".into(), ..col("Age", "string", "", Source::Age) });
    cols
}

/// Renders a duration as kubectl's HumanDuration does (`45s`, `3m20s`, `5h`, `12d`).
pub fn human_duration(seconds: i64) -> String {
    let s = seconds.max(0);
    let (m, h, d) = (s / 60, s / 3600, s / 86400);
    match s {
        _ if s < 120 => format!("{s}s"),
        _ if m < 10 => match s % 60 {
            0 => format!("{m}m"),
            rest => format!("{m}m{rest}s"),
        },
        _ if h < 3 => format!("{m}m"),
        _ if h < 8 => match m % 60 {
            0 => format!("{h}h"),
            rest => format!("{h}h{rest}m"),
        },
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 => match h % 24 {
            0 => format!("{d}d"),
            rest => format!("{d}d{rest}h"),
        },
        _ if d < 730 => format!("{d}d"),
        _ => format!("{}y{}d", d / 365, d % 365),
    }
}

fn age(timestamp: Option<&str>) -> Value {
    let Some(ts) = timestamp.and_then(|t| chrono::DateTime::parse_from_rfc3339(t).ok()) else {
        return json!("<unknown>");
    };
    let seconds = (chrono::Utc::now() - ts.with_timezone(&chrono::Utc)).num_seconds();
    json!(human_duration(seconds))
}

fn row(info: &ResourceInfo, cols: &[Column], stored: &Stored, include: IncludeObject) -> Value {
    let obj = convert::from_storage(info, &stored.value);
    let cells: Vec<Value> = cols
        .iter()
        .map(|c| match &c.source {
            Source::Name => json!(meta::name(&obj)),
            Source::Age => age(obj
                .pointer("/metadata/creationTimestamp")
                .and_then(Value::as_str)),
            Source::Date(path) => age(jsonpath::cell(path, "date", &obj).as_str()),
            Source::Path(path) => jsonpath::cell(path, &c.kind, &obj),
        })
        .collect();
    let mut row = json!({"cells": cells});
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => row["object"] = obj.into_owned(),
        IncludeObject::Metadata => {
            row["object"] = json!({
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
            })
        }
    }
    row
}

/// A Table of objects.
pub fn table(
    info: &ResourceInfo,
    items: &[&Stored],
    include: IncludeObject,
    resource_version: &str,
    continue_token: Option<&str>,
) -> Value {
    let cols = columns(info);
    let definitions: Vec<Value> = cols
        .iter()
        .map(|c| json!({"name": c.name, "type": c.kind, "format": c.format, "description": c.description, "priority": c.priority}))
        .collect();
    let rows: Vec<Value> = items.iter().map(|s| row(info, &cols, s, include)).collect();
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": metadata, "columnDefinitions": definitions, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_like_kubectl() {
        assert_eq!(human_duration(45), "45s");
        assert_eq!(human_duration(200), "3m20s");
        assert_eq!(human_duration(3600 * 5), "5h");
        assert_eq!(human_duration(86400 * 3 + 3600), "3d1h");
        assert_eq!(human_duration(86400 * 30), "30d");
    }
}
