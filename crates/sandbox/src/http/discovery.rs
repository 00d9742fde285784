//! Discovery documents: `/api`, `/apis`, `/apis/{group}` and the resource lists of each
//! group version, built from the registry so CRDs appear as soon as they are established
//! (`/version` is in `crate::version`).

use serde_json::{Value, json};

use crate::registry::resources::{Registry, ResourceInfo};

/// `/api`.
pub fn core_versions(server_address: &str) -> Value {
    json!({
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    })
}

fn group_json(name: &str, versions: &[String]) -> Value {
    let list: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    let preferred = list.first().cloned().unwrap_or(json!({}));
    json!({"name": name, "versions": list, "preferredVersion": preferred})
}

/// `/apis`: every named group.
pub fn groups(registry: &Registry) -> Value {
    let groups: Vec<Value> = registry
        .groups()
        .into_iter()
        .filter(|g| !g.name.is_empty())
        .map(|g| group_json(&g.name, &g.versions))
        .collect();
    json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
}

/// `/apis/{group}`, or None when the group is not served.
pub fn group(registry: &Registry, name: &str) -> Option<Value> {
    let g = registry
        .groups()
        .into_iter()
        .find(|g| g.name == name && !name.is_empty())?;
    let mut doc = group_json(&g.name, &g.versions);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Some(doc)
}

fn resource_json(info: &ResourceInfo) -> Value {
    let mut r = json!({
        "name": info.resource,
        "singularName": info.singular,
        "namespaced": info.namespaced,
        "kind": info.kind,
        "verbs": info.verbs(),
    });
    if !info.short_names.is_empty() {
        r["shortNames"] = json!(info.short_names);
    }
    if !info.categories.is_empty() {
        r["categories"] = json!(info.categories);
    }
    r
}

fn subresources_json(info: &ResourceInfo) -> Vec<Value> {
    let mut out = Vec::new();
    let sub = |name: &str, kind: &str, verbs: &[&str]| json!({"name": format!("{}/{name}", info.resource), "singularName": "", "namespaced": info.namespaced, "kind": kind, "verbs": verbs});
    if info.has_status_subresource() {
        out.push(sub("status", &info.kind, &["get", "patch", "update"]));
    }
    for extra in info.extra_subresources {
        out.push(match *extra {
            "binding" => sub("binding", "Binding", &["create"]),
            "finalize" => sub("finalize", &info.kind, &["update"]),
            "scale" => {
                let mut s = sub("scale", "Scale", &["get", "patch", "update"]);
                s["group"] = json!("autoscaling");
                s["version"] = json!("v1");
                s
            }
            other => sub(other, &info.kind, &["get"]),
        });
    }
    out
}

/// `/api/v1` or `/apis/{group}/{version}`, or None when not served.
pub fn resource_list(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_of(group, version);
    if infos.is_empty() {
        return None;
    }
    let mut resources = Vec::new();
    for info in &infos {
        resources.push(resource_json(info));
        resources.extend(subresources_json(info));
    }
    let group_version = if group.is_empty() {
        version.to_owned()
    } else {
        format!("{group}/{version}")
    };
    Some(
        json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group_version, "resources": resources}),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn core_list_has_pods_and_status() {
        let r = Registry::builtin();
        let list = resource_list(&r, "", "v1").expect("served");
        let names: Vec<&str> = list["resources"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|r| r["name"].as_str())
            .collect();
        assert!(names.contains(&"pods"));
        assert!(names.contains(&"pods/status"));
        assert!(names.contains(&"namespaces/finalize"));
        assert!(resource_list(&r, "nope", "v1").is_none());
        let apps = group(&r, "apps").expect("served");
        assert_eq!(apps["preferredVersion"]["groupVersion"], "apps/v1");
    }
}
