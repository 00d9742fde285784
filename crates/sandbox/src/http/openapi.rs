//! Minimal OpenAPI v3 documents: one per group version, listing each kind's paths and the
//! `fieldValidation` query parameter. kubectl reads them to learn that the server validates
//! fields itself (then it skips downloading schemas for client-side validation). Schemas of the
//! kinds are not published; `kubectl explain` is therefore not supported.

use serde_json::{Value, json};

use crate::resources::{Registry, ResourceInfo};

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A short content hash, so clients that cache by hash see CRD changes.
fn fingerprint(infos: &[std::sync::Arc<ResourceInfo>]) -> String {
    // FNV-1a over the served kinds: stable across runs, unlike std's randomized hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for info in infos {
        for b in info
            .resource
            .bytes()
            .chain(info.kind.bytes())
            .chain([info.namespaced as u8])
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: where each group version's document is.
pub fn root(registry: &Registry) -> Value {
    let mut paths = serde_json::Map::new();
    for group in registry.groups() {
        for version in &group.versions {
            let infos = registry.resources_of(&group.name, version);
            let path = gv_path(&group.name, version);
            let url = format!("/openapi/v3/{path}?hash={}", fingerprint(&infos));
            paths.insert(path, json!({"serverRelativeURL": url}));
        }
    }
    json!({"paths": paths})
}

fn operation(info: &ResourceInfo, verb: &str) -> Value {
    let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let mut params = vec![
        json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ];
    if verb != "delete" {
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
    }
    json!({
        "operationId": format!("{verb}{}", info.kind),
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    })
}

/// `/openapi/v3/{api/v1 | apis/group/version}`, or None when not served.
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_of(group, version);
    if infos.is_empty() {
        return None;
    }
    let prefix = gv_path(group, version);
    let mut paths = serde_json::Map::new();
    for info in &infos {
        let scope = if info.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        paths.insert(
            format!("/{prefix}{scope}/{}", info.resource),
            json!({"get": operation(info, "list"), "post": operation(info, "post")}),
        );
        paths.insert(
            format!("/{prefix}{scope}/{}/{{name}}", info.resource),
            json!({"get": operation(info, "get"), "put": operation(info, "put"), "patch": operation(info, "patch"), "delete": operation(info, "delete")}),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-vigil-sandbox"},
        "paths": paths,
        "components": {"schemas": {}},
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_patch_with_field_validation() {
        let r = Registry::builtin();
        let root = root(&r);
        assert!(
            root["paths"]["api/v1"]["serverRelativeURL"]
                .as_str()
                .is_some_and(|u| u.starts_with("/openapi/v3/api/v1?hash="))
        );
        let doc = group_version(&r, "apps", "v1").expect("served");
        let patch =
            &doc["paths"]["/apis/apps/v1/namespaces/{namespace}/deployments/{name}"]["patch"];
        assert_eq!(
            patch["x-kubernetes-group-version-kind"]["kind"],
            "Deployment"
        );
        assert!(
            patch["parameters"]
                .as_array()
                .is_some_and(|p| p.iter().any(|p| p["name"] == "fieldValidation"))
        );
    }
}
