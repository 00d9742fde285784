//! Per-kind behaviour of built-in resources: the defaults the real server fills in and the
//! validation it applies. Only what clients commonly rely on is modelled; see `docs/sandbox.md`.

use base64::Engine as _;
use serde_json::{Map, Value, json};

use crate::field_error::FieldError;
use crate::registry::meta;
use crate::registry::resources::ResourceInfo;

/// Fills in server-side defaults on a create or update body (`old` is the live object on update).
pub fn apply_defaults(
    info: &ResourceInfo,
    obj: &mut Value,
    old: Option<&Value>,
    alloc: &mut dyn FnMut() -> String,
) {
    if info.crd.is_some() {
        return;
    }
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "namespaces") => default_namespace(obj),
        ("", "pods") => default_pod_spec(obj.get_mut("spec")),
        ("", "services") => default_service(obj, old, alloc),
        ("", "secrets") => default_secret(obj),
        ("apps", kind @ ("deployments" | "replicasets")) => default_workload(obj, kind),
        ("batch", "jobs") => default_job(obj),
        ("apps", "statefulsets") => default_stateful_set(obj),
        ("apps", "daemonsets") => default_daemon_set(obj),
        ("", "podtemplates") => {
            default_pod_spec(obj.get_mut("template").and_then(|t| t.get_mut("spec")))
        }
        ("discovery.k8s.io", "endpointslices") => default_ports(obj.get_mut("ports"), "protocol"),
        _ => {}
    }
}

/// Fills in the status the server sets on create (pods start Pending, namespaces Active).
pub fn initial_status(info: &ResourceInfo, obj: &mut Value) {
    if info.crd.is_some() || !info.group.is_empty() {
        return;
    }
    match info.resource.as_str() {
        "pods" => obj["status"] = json!({"phase": "Pending", "qosClass": "BestEffort"}),
        "namespaces" => obj["status"] = json!({"phase": "Active"}),
        "services" => obj["status"] = json!({"loadBalancer": {}}),
        _ => {}
    }
}

fn set_default(map: &mut Map<String, Value>, key: &str, value: Value) {
    if map.get(key).is_none_or(Value::is_null) {
        map.insert(key.to_owned(), value);
    }
}

fn default_namespace(obj: &mut Value) {
    let name = meta::name(obj).to_owned();
    let meta = meta::meta_mut(obj);
    let labels = meta::object_mut(meta.entry("labels").or_insert_with(|| json!({})));
    labels.insert("kubernetes.io/metadata.name".into(), Value::String(name));
    let spec = meta::object_mut(&mut obj["spec"]);
    set_default(spec, "finalizers", json!(["kubernetes"]));
}

fn default_pod_spec(spec: Option<&mut Value>) {
    let Some(Value::Object(spec)) = spec else {
        return;
    };
    set_default(spec, "restartPolicy", json!("Always"));
    set_default(spec, "terminationGracePeriodSeconds", json!(30));
    set_default(spec, "dnsPolicy", json!("ClusterFirst"));
    set_default(spec, "schedulerName", json!("default-scheduler"));
    set_default(spec, "securityContext", json!({}));
    set_default(spec, "enableServiceLinks", json!(true));
    for list in ["containers", "initContainers"] {
        if let Some(Value::Array(containers)) = spec.get_mut(list) {
            containers.iter_mut().for_each(default_container);
        }
    }
}

fn default_container(c: &mut Value) {
    let Value::Object(c) = c else { return };
    let image = c.get("image").and_then(Value::as_str).unwrap_or("");
    let tag_is_latest = {
        let last = image.rsplit('/').next().unwrap_or(image);
        !image.contains('@') && last.rsplit_once(':').is_none_or(|(_, tag)| tag == "latest")
    };
    set_default(
        c,
        "imagePullPolicy",
        json!(if tag_is_latest {
            "Always"
        } else {
            "IfNotPresent"
        }),
    );
    set_default(c, "terminationMessagePath", json!("/dev/termination-log"));
    set_default(c, "terminationMessagePolicy", json!("File"));
    set_default(c, "resources", json!({}));
    default_ports(c.get_mut("ports"), "protocol");
}

fn default_ports(ports: Option<&mut Value>, field: &str) {
    if let Some(Value::Array(ports)) = ports {
        for p in ports.iter_mut() {
            if let Value::Object(p) = p {
                set_default(p, field, json!("TCP"));
            }
        }
    }
}

fn default_service(obj: &mut Value, old: Option<&Value>, alloc: &mut dyn FnMut() -> String) {
    // Node ports come from 30000-32767 at random. Nothing listens on them in the sandbox, so a
    // rare repeat across Services is harmless (the real allocator guarantees uniqueness).
    let alloc_node_port = || rand::random_range(30000..=32767);
    let old_spec = old
        .and_then(|o| o.get("spec"))
        .cloned()
        .unwrap_or(Value::Null);
    let spec = meta::object_mut(&mut obj["spec"]);
    set_default(spec, "type", json!("ClusterIP"));
    set_default(spec, "sessionAffinity", json!("None"));
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_owned();
    if service_type != "ExternalName" {
        set_default(spec, "internalTrafficPolicy", json!("Cluster"));
        // Since 1.20 an update that omits allocated values keeps them rather than failing.
        for key in ["clusterIP", "clusterIPs", "ipFamilies", "ipFamilyPolicy"] {
            if let Some(v) = old_spec.get(key) {
                set_default(spec, key, v.clone());
            }
        }
        if spec.get("clusterIP").is_none_or(Value::is_null) {
            spec.insert("clusterIP".into(), Value::String(alloc()));
        }
        let ip = spec.get("clusterIP").cloned().unwrap_or(Value::Null);
        set_default(spec, "clusterIPs", json!([ip]));
        set_default(spec, "ipFamilies", json!(["IPv4"]));
        set_default(spec, "ipFamilyPolicy", json!("SingleStack"));
    }
    let wants_node_ports = matches!(service_type.as_str(), "NodePort" | "LoadBalancer");
    let old_ports = old_spec
        .get("ports")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if let Some(Value::Array(ports)) = spec.get_mut("ports") {
        for p in ports.iter_mut() {
            if let Value::Object(p) = p {
                set_default(p, "protocol", json!("TCP"));
                if let Some(port) = p.get("port").cloned() {
                    set_default(p, "targetPort", port);
                }
                if wants_node_ports && p.get("nodePort").is_none_or(Value::is_null) {
                    // Keep the node port an update omits, else allocate one.
                    let kept = old_ports
                        .iter()
                        .find(|o| o.get("port") == p.get("port"))
                        .and_then(|o| o.get("nodePort"))
                        .cloned();
                    let node_port = kept.unwrap_or_else(|| json!(alloc_node_port()));
                    p.insert("nodePort".into(), node_port);
                }
            }
        }
    }
    if service_type != "ExternalName" && service_type != "ClusterIP" {
        set_default(spec, "externalTrafficPolicy", json!("Cluster"));
    }
}

fn default_secret(obj: &mut Value) {
    let Value::Object(map) = obj else { return };
    set_default(map, "type", json!("Opaque"));
    // stringData is write-only: the server merges it into data, base64-encoded.
    if let Some(Value::Object(string_data)) = map.remove("stringData") {
        let data = meta::object_mut(map.entry("data").or_insert_with(|| json!({})));
        for (k, v) in string_data {
            let text = v.as_str().unwrap_or_default();
            data.insert(
                k,
                Value::String(base64::engine::general_purpose::STANDARD.encode(text)),
            );
        }
    }
}

fn default_workload(obj: &mut Value, kind: &str) {
    let spec = meta::object_mut(&mut obj["spec"]);
    set_default(spec, "replicas", json!(1));
    if kind == "deployments" {
        set_default(spec, "revisionHistoryLimit", json!(10));
        set_default(spec, "progressDeadlineSeconds", json!(600));
        let strategy = meta::object_mut(spec.entry("strategy").or_insert_with(|| json!({})));
        set_default(strategy, "type", json!("RollingUpdate"));
        if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
            let rolling =
                meta::object_mut(strategy.entry("rollingUpdate").or_insert_with(|| json!({})));
            set_default(rolling, "maxUnavailable", json!("25%"));
            set_default(rolling, "maxSurge", json!("25%"));
        }
    }
    default_pod_spec(spec.get_mut("template").and_then(|t| t.get_mut("spec")));
}

fn default_stateful_set(obj: &mut Value) {
    let spec = meta::object_mut(&mut obj["spec"]);
    set_default(spec, "replicas", json!(1));
    set_default(spec, "podManagementPolicy", json!("OrderedReady"));
    set_default(spec, "revisionHistoryLimit", json!(10));
    set_default(
        spec,
        "persistentVolumeClaimRetentionPolicy",
        json!({"whenDeleted": "Retain", "whenScaled": "Retain"}),
    );
    let strategy = meta::object_mut(spec.entry("updateStrategy").or_insert_with(|| json!({})));
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling =
            meta::object_mut(strategy.entry("rollingUpdate").or_insert_with(|| json!({})));
        set_default(rolling, "partition", json!(0));
    }
    default_pod_spec(spec.get_mut("template").and_then(|t| t.get_mut("spec")));
}

fn default_daemon_set(obj: &mut Value) {
    let spec = meta::object_mut(&mut obj["spec"]);
    set_default(spec, "revisionHistoryLimit", json!(10));
    let strategy = meta::object_mut(spec.entry("updateStrategy").or_insert_with(|| json!({})));
    set_default(strategy, "type", json!("RollingUpdate"));
    if strategy.get("type").and_then(Value::as_str) == Some("RollingUpdate") {
        let rolling =
            meta::object_mut(strategy.entry("rollingUpdate").or_insert_with(|| json!({})));
        set_default(rolling, "maxUnavailable", json!(1));
        set_default(rolling, "maxSurge", json!(0));
    }
    default_pod_spec(spec.get_mut("template").and_then(|t| t.get_mut("spec")));
}

fn default_job(obj: &mut Value) {
    let spec = meta::object_mut(&mut obj["spec"]);
    if spec.get("completions").is_none_or(Value::is_null)
        && spec.get("parallelism").is_none_or(Value::is_null)
    {
        spec.insert("completions".into(), json!(1));
    }
    set_default(spec, "parallelism", json!(1));
    set_default(spec, "backoffLimit", json!(6));
    set_default(spec, "completionMode", json!("NonIndexed"));
    set_default(spec, "suspend", json!(false));
    default_pod_spec(spec.get_mut("template").and_then(|t| t.get_mut("spec")));
}

/// Labels a Job's strategy derives from its new uid (`batch.kubernetes.io/controller-uid` and
/// friends on the Job, its template and its generated selector), unless `manualSelector`.
pub fn label_with_uid(info: &ResourceInfo, obj: &mut Value) {
    if info.crd.is_some() || info.group != "batch" || info.resource != "jobs" {
        return;
    }
    if obj.pointer("/spec/manualSelector").and_then(Value::as_bool) == Some(true) {
        return;
    }
    let uid = meta::meta_str(obj, "uid").to_owned();
    let name = meta::name(obj).to_owned();
    let labels = [
        ("batch.kubernetes.io/controller-uid", &uid),
        ("batch.kubernetes.io/job-name", &name),
        ("controller-uid", &uid),
        ("job-name", &name),
    ];
    let template_meta = meta::meta_mut(&mut obj["spec"]["template"]);
    let template_labels =
        meta::object_mut(template_meta.entry("labels").or_insert_with(|| json!({})));
    for (k, v) in labels {
        template_labels.insert(k.into(), json!(v));
    }
    let template_labels = Value::Object(template_labels.clone());
    // A Job without labels of its own takes its template's, as the real strategy does.
    if meta::labels(obj).is_none_or(Map::is_empty) {
        meta::set_meta(obj, "labels", template_labels);
    }
    obj["spec"]["selector"] = json!({"matchLabels": {"batch.kubernetes.io/controller-uid": uid}});
}

/// Kind-specific validation of a create (`old` = None) or update.
pub fn validate(info: &ResourceInfo, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    if info.crd.is_some() {
        return Vec::new();
    }
    let mut errors = Vec::new();
    match (info.group.as_str(), info.resource.as_str()) {
        ("", "pods") => validate_pod(obj, old, &mut errors),
        ("", "services") => validate_service(obj, old, &mut errors),
        ("", "configmaps") => validate_data_keys(obj, &["data", "binaryData"], &mut errors),
        ("", "secrets") => validate_data_keys(obj, &["data"], &mut errors),
        ("", "podtemplates") => {
            validate_containers(obj.pointer("/template/spec"), "template.spec", &mut errors)
        }
        ("events.k8s.io", "events") => {
            if let Some(old) = old {
                validate_event_update(obj, old, &mut errors);
            }
        }
        ("discovery.k8s.io", "endpointslices")
            if obj.get("addressType").and_then(Value::as_str).is_none() =>
        {
            errors.push(FieldError::required("addressType", ""));
        }
        _ => {}
    }
    errors
}

/// An update through events.k8s.io/v1 may change only metadata and the series, as the real
/// server's `ValidateEventUpdate` allows; core/v1 updates are free. The object is in its
/// stored (core/v1) shape here, and the paths are the ones the real server reports: core
/// names (`message`, not `note`), but `reportingController`.
fn validate_event_update(obj: &Value, old: &Value, errors: &mut Vec<FieldError>) {
    for (stored, path) in [
        ("action", "action"),
        ("reason", "reason"),
        ("message", "message"),
        ("source", "source"),
        ("related", "related"),
        ("involvedObject", "involvedObject"),
        ("reportingComponent", "reportingController"),
        ("reportingInstance", "reportingInstance"),
        ("type", "type"),
        ("eventTime", "eventTime"),
        ("count", "count"),
        ("firstTimestamp", "firstTimestamp"),
        ("lastTimestamp", "lastTimestamp"),
    ] {
        if obj.get(stored) != old.get(stored) {
            errors.push(FieldError::invalid(
                path,
                obj.get(stored).unwrap_or(&Value::Null),
                "field is immutable",
            ));
        }
    }
}

fn validate_containers(spec: Option<&Value>, path: &str, errors: &mut Vec<FieldError>) {
    let containers = spec
        .and_then(|s| s.get("containers"))
        .and_then(Value::as_array);
    match containers {
        None => errors.push(FieldError::required(format!("{path}.containers"), "")),
        Some(list) if list.is_empty() => {
            errors.push(FieldError::required(format!("{path}.containers"), ""))
        }
        Some(list) => {
            let mut seen = Vec::new();
            for (i, c) in list.iter().enumerate() {
                let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                let field = format!("{path}.containers[{i}]");
                if name.is_empty() {
                    errors.push(FieldError::required(format!("{field}.name"), ""));
                } else if seen.contains(&name) {
                    errors.push(FieldError::duplicate(format!("{field}.name"), &json!(name)));
                } else {
                    for p in meta::name_problems(name, crate::registry::resources::NameRule::Label)
                    {
                        errors.push(FieldError::invalid(
                            format!("{field}.name"),
                            &json!(name),
                            &p,
                        ));
                    }
                }
                seen.push(name);
                if c.get("image")
                    .and_then(Value::as_str)
                    .is_none_or(str::is_empty)
                {
                    errors.push(FieldError::required(format!("{field}.image"), ""));
                }
            }
        }
    }
}

fn validate_pod(obj: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    validate_containers(obj.get("spec"), "spec", errors);
    if let Some(old) = old.filter(|old| old.get("spec") != obj.get("spec")) {
        // Pod specs are immutable but for a few fields; compare everything else.
        let strip = |spec: Option<&Value>| {
            let mut s = spec.cloned().unwrap_or(Value::Null);
            if let Some(Value::Array(cs)) = s.get_mut("containers") {
                for c in cs.iter_mut() {
                    if let Value::Object(c) = c {
                        c.remove("image");
                    }
                }
            }
            if let Value::Object(m) = &mut s {
                for k in [
                    "activeDeadlineSeconds",
                    "tolerations",
                    "terminationGracePeriodSeconds",
                ] {
                    m.remove(k);
                }
                // Binding sets nodeName once.
                if old.pointer("/spec/nodeName").is_none() {
                    m.remove("nodeName");
                }
            }
            s
        };
        if strip(obj.get("spec")) != strip(old.get("spec")) {
            errors.push(FieldError::forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set to 1 if it was previously negative)",
            ));
        }
    }
}

fn validate_service(obj: &Value, old: Option<&Value>, errors: &mut Vec<FieldError>) {
    let spec = obj.get("spec").cloned().unwrap_or(Value::Null);
    let service_type = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP");
    let supported = ["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"];
    if !supported.contains(&service_type) {
        let values: Vec<Value> = supported.iter().map(|s| json!(s)).collect();
        errors.push(FieldError::not_supported(
            "spec.type",
            &json!(service_type),
            &values,
        ));
    }
    let headless = spec.get("clusterIP").and_then(Value::as_str) == Some("None");
    let ports = spec.get("ports").and_then(Value::as_array);
    if service_type != "ExternalName" && !headless && ports.is_none_or(|p| p.is_empty()) {
        errors.push(FieldError::required("spec.ports", ""));
    }
    for (i, p) in ports.into_iter().flatten().enumerate() {
        let port = p.get("port").and_then(Value::as_i64).unwrap_or(0);
        if !(1..=65535).contains(&port) {
            errors.push(FieldError::invalid(
                format!("spec.ports[{i}].port"),
                &json!(port),
                "must be between 1 and 65535, inclusive",
            ));
        }
        if ports.is_some_and(|all| all.len() > 1)
            && p.get("name")
                .and_then(Value::as_str)
                .is_none_or(str::is_empty)
        {
            errors.push(FieldError::required(format!("spec.ports[{i}].name"), ""));
        }
    }
    if let Some(old) = old {
        let old_ip = old.pointer("/spec/clusterIP");
        if old_ip.is_some() && spec.get("clusterIP") != old_ip {
            errors.push(FieldError::invalid(
                "spec.clusterIPs[0]",
                spec.get("clusterIP").unwrap_or(&Value::Null),
                "may not change once set",
            ));
        }
    }
}

fn validate_data_keys(obj: &Value, fields: &[&str], errors: &mut Vec<FieldError>) {
    let valid = |k: &str| {
        !k.is_empty()
            && k.len() <= 253
            && k.bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    };
    for field in fields {
        let Some(map) = obj.get(*field).and_then(Value::as_object) else {
            continue;
        };
        for key in map.keys().filter(|k| !valid(k)) {
            errors.push(FieldError::invalid(
                format!("{field}[{key}]"),
                &json!(key),
                "a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')",
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::resources::Registry;

    fn info(resource: &str) -> std::sync::Arc<ResourceInfo> {
        Registry::builtin()
            .get("", "v1", resource)
            .expect("builtin")
    }

    #[test]
    fn services_get_cluster_ip_and_target_port() {
        let mut svc = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}});
        apply_defaults(&info("services"), &mut svc, None, &mut || {
            "10.96.0.10".to_owned()
        });
        assert_eq!(svc["spec"]["clusterIP"], "10.96.0.10");
        assert_eq!(svc["spec"]["ports"][0]["targetPort"], 80);
        assert_eq!(svc["spec"]["ports"][0]["protocol"], "TCP");
        let mut update = json!({"metadata": {"name": "web"}, "spec": {"ports": [{"port": 81}]}});
        apply_defaults(&info("services"), &mut update, Some(&svc), &mut || {
            "10.96.0.99".to_owned()
        });
        assert_eq!(update["spec"]["clusterIP"], "10.96.0.10");
    }

    #[test]
    fn secret_string_data_is_encoded() {
        let mut s = json!({"stringData": {"k": "v"}});
        apply_defaults(&info("secrets"), &mut s, None, &mut String::new);
        assert_eq!(s["data"]["k"], "dg==");
        assert!(s.get("stringData").is_none());
    }

    #[test]
    fn pods_need_containers_with_images() {
        let errs = validate(
            &info("pods"),
            &json!({"spec": {"containers": [{"name": "a"}]}}),
            None,
        );
        assert_eq!(
            errs[0].to_string(),
            "spec.containers[0].image: Required value"
        );
        let errs = validate(&info("pods"), &json!({"spec": {}}), None);
        assert_eq!(errs[0].field, "spec.containers");
    }

    #[test]
    fn pod_spec_is_mostly_immutable() {
        let old = json!({"spec": {"containers": [{"name": "a", "image": "x"}]}});
        let new_image = json!({"spec": {"containers": [{"name": "a", "image": "y"}]}});
        assert!(validate(&info("pods"), &new_image, Some(&old)).is_empty());
        let new_name = json!({"spec": {"containers": [{"name": "b", "image": "x"}]}});
        assert_eq!(
            validate(&info("pods"), &new_name, Some(&old))[0].field,
            "spec"
        );
    }
}
