//! OpenAPI v3 documents: one per group version, listing each kind's paths and the
//! `fieldValidation` query parameter. kubectl reads them to learn that the server validates
//! fields itself (then it skips downloading schemas for client-side validation).
//!
//! Custom resources get their schemas as kube-apiserver publishes them (its CRD OpenAPI builder):
//! the CRD's `openAPIV3Schema` with `apiVersion`, `kind` and a `metadata` reference to ObjectMeta
//! added, `x-kubernetes-int-or-string` unfolded into its `anyOf`, a `<Kind>List` schema, and the
//! meta/v1 schemas those refer to. That is what `kubectl explain` reads. Built-in kinds publish
//! paths only (their schemas would be megabytes of upstream text), so `kubectl explain` works for
//! custom resources only.

use serde_json::{Map, Value, json};

use crate::registry::resources::{Registry, ResourceInfo};

/// The meta/v1 schemas CRD documents refer to (ObjectMeta, ListMeta, Status, DeleteOptions, ...),
/// verbatim as kube-apiserver v1.28 serves them in every CRD group version's document, so their
/// descriptions are the real ones.
const META_SCHEMAS: &str = include_str!("openapi_meta.json");

const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const METADATA_DESCRIPTION: &str = "Standard object's metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
const LIST_METADATA_DESCRIPTION: &str = "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";
const OBJECT_META_REF: &str =
    "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";
const LIST_META_REF: &str = "#/components/schemas/io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";

fn gv_path(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// A short content hash, so clients that cache by hash (kubectl keeps documents by URL) see CRD
/// changes, schema edits included.
fn fingerprint(infos: &[std::sync::Arc<ResourceInfo>]) -> String {
    // FNV-1a over the served kinds: stable across runs, unlike std's randomized hasher.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for info in infos {
        let schema = info
            .crd
            .as_ref()
            .and_then(|c| c.schema.as_ref())
            .map(|s| serde_json::to_vec(s).unwrap_or_default())
            .unwrap_or_default();
        for b in info
            .resource
            .bytes()
            .chain(info.kind.bytes())
            .chain([info.namespaced as u8])
            .chain(schema)
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{h:016X}")
}

/// The component name kube-apiserver gives a custom kind: the group reversed, then version and
/// kind (`vigil.dev`, `v1alpha1`, `KubernetesCluster` → `dev.vigil.v1alpha1.KubernetesCluster`).
fn schema_name(group: &str, version: &str, kind: &str) -> String {
    let mut parts: Vec<&str> = group.split('.').collect();
    parts.reverse();
    format!("{}.{version}.{kind}", parts.join("."))
}

fn gvk(group: &str, version: &str, kind: &str) -> Value {
    json!([{"group": group, "kind": kind, "version": version}])
}

/// A property that is a described `$ref` (OpenAPI v3 puts siblings of `$ref` under `allOf`).
fn described_ref(description: &str, reference: &str) -> Value {
    json!({"description": description, "allOf": [{"$ref": reference}]})
}

/// Expands `x-kubernetes-int-or-string` into the `anyOf` it stands for and gives embedded
/// resources their `apiVersion`, `kind` and `metadata`, as the upstream builder does, so clients
/// reading the document see the same shapes as on a real server.
fn unfold(schema: &mut Value) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    if obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true))
        && !obj.contains_key("anyOf")
    {
        obj.insert(
            "anyOf".into(),
            json!([{"type": "integer"}, {"type": "string"}]),
        );
    }
    if obj.get("x-kubernetes-embedded-resource") == Some(&Value::Bool(true)) {
        add_type_meta(obj);
    }
    for key in ["properties", "patternProperties"] {
        if let Some(Value::Object(props)) = obj.get_mut(key) {
            props.values_mut().for_each(unfold);
        }
    }
    for key in ["items", "additionalProperties", "not"] {
        if let Some(inner) = obj.get_mut(key) {
            unfold(inner);
        }
    }
    for key in ["allOf", "anyOf", "oneOf"] {
        if let Some(Value::Array(branches)) = obj.get_mut(key) {
            branches.iter_mut().for_each(unfold);
        }
    }
}

/// Adds `apiVersion`, `kind` and `metadata` (a reference to ObjectMeta) to an object schema.
fn add_type_meta(obj: &mut Map<String, Value>) {
    let props = obj
        .entry("properties")
        .or_insert_with(|| Value::Object(Map::new()));
    if !props.is_object() {
        *props = Value::Object(Map::new());
    }
    if let Value::Object(props) = props {
        props.insert(
            "apiVersion".into(),
            json!({"description": API_VERSION_DESCRIPTION, "type": "string"}),
        );
        props.insert(
            "kind".into(),
            json!({"description": KIND_DESCRIPTION, "type": "string"}),
        );
        props.insert(
            "metadata".into(),
            described_ref(METADATA_DESCRIPTION, OBJECT_META_REF),
        );
    }
}

/// The schema of a custom kind, as the real server derives it from the CRD version's schema.
fn custom_kind_schema(info: &ResourceInfo, schema: Option<&Value>) -> Value {
    let mut out = match schema {
        Some(schema) if schema.is_object() => {
            let mut out = schema.clone();
            unfold(&mut out);
            if let Value::Object(obj) = &mut out {
                add_type_meta(obj);
            }
            out
        }
        // Without a schema only the type is known; properties would make clients reject fields.
        _ => json!({"type": "object"}),
    };
    out["x-kubernetes-group-version-kind"] = gvk(&info.group, &info.version, &info.kind);
    out
}

/// The `<Kind>List` schema of a custom kind.
fn custom_list_schema(info: &ResourceInfo, item_ref: &str) -> Value {
    json!({
        "description": format!("{}List is a list of {}", info.kind, info.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"description": API_VERSION_DESCRIPTION, "type": "string"},
            "items": {
                "description": format!("List of {}. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md", info.resource),
                "type": "array",
                "items": {"$ref": item_ref},
            },
            "kind": {"description": KIND_DESCRIPTION, "type": "string"},
            "metadata": described_ref(LIST_METADATA_DESCRIPTION, LIST_META_REF),
        },
        "x-kubernetes-group-version-kind": gvk(&info.group, &info.version, &format!("{}List", info.kind)),
    })
}

/// `{"application/json": {"schema": {"$ref": ...}}, "application/yaml": ...}`.
fn content(reference: &str) -> Value {
    let schema = json!({"schema": {"$ref": reference}});
    json!({"application/json": schema, "application/yaml": schema})
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

/// One operation; `body` and `returns` are component references (custom kinds only).
fn operation(info: &ResourceInfo, verb: &str, body: Option<&str>, returns: Option<&str>) -> Value {
    let gvk = json!({"group": info.group, "version": info.version, "kind": info.kind});
    let mut params = vec![
        json!({"name": "dryRun", "in": "query", "schema": {"type": "string", "uniqueItems": true}}),
    ];
    if verb != "delete" {
        params.push(json!({"name": "fieldManager", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
        params.push(json!({"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": true}}));
    }
    let mut op = json!({
        "operationId": format!("{verb}{}", info.kind),
        "x-kubernetes-action": verb,
        "x-kubernetes-group-version-kind": gvk,
        "parameters": params,
        "responses": {"200": {"description": "OK"}},
    });
    if let Some(body) = body {
        op["requestBody"] = json!({"content": content(body)});
    }
    if let Some(returns) = returns {
        op["responses"]["200"]["content"] = content(returns);
    }
    op
}

/// `/openapi/v3/{api/v1 | apis/group/version}`, or None when not served.
pub fn group_version(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let infos = registry.resources_of(group, version);
    if infos.is_empty() {
        return None;
    }
    let prefix = gv_path(group, version);
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for info in &infos {
        let scope = if info.namespaced {
            "/namespaces/{namespace}"
        } else {
            ""
        };
        // Custom kinds publish their schemas and name them from their operations.
        let (item, list) = match &info.crd {
            Some(crd) => {
                let name = schema_name(&info.group, &info.version, &info.kind);
                let item = format!("#/components/schemas/{name}");
                let list = format!("#/components/schemas/{name}List");
                schemas.insert(name.clone(), custom_kind_schema(info, crd.schema.as_ref()));
                schemas.insert(format!("{name}List"), custom_list_schema(info, &item));
                (Some(item), Some(list))
            }
            None => (None, None),
        };
        let (item, list) = (item.as_deref(), list.as_deref());
        if info.namespaced {
            // The list across all namespaces, as the real server documents it.
            paths.insert(
                format!("/{prefix}/{}", info.resource),
                json!({"get": operation(info, "list", None, list)}),
            );
        }
        paths.insert(
            format!("/{prefix}{scope}/{}", info.resource),
            json!({"get": operation(info, "list", None, list), "post": operation(info, "post", item, item)}),
        );
        let object_ops = json!({
            "get": operation(info, "get", None, item),
            "put": operation(info, "put", item, item),
            "patch": operation(info, "patch", None, item),
            "delete": operation(info, "delete", None, None),
        });
        if info.has_status_subresource() {
            paths.insert(
                format!("/{prefix}{scope}/{}/{{name}}/status", info.resource),
                object_ops.clone(),
            );
        }
        paths.insert(
            format!("/{prefix}{scope}/{}/{{name}}", info.resource),
            object_ops,
        );
    }
    if !schemas.is_empty()
        && let Ok(Value::Object(meta)) = serde_json::from_str::<Value>(META_SCHEMAS)
    {
        schemas.extend(meta);
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.33.0-vigil-sandbox"},
        "paths": paths,
        "components": {"schemas": schemas},
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

    fn widget_crd() -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com",
                "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {
                        "type": "object",
                        "description": "A widget.",
                        "properties": {
                            "spec": {
                                "type": "object",
                                "description": "What the widget should be.",
                                "properties": {
                                    "size": {"type": "string", "description": "How big."},
                                    "port": {"x-kubernetes-int-or-string": true},
                                    "template": {"type": "object", "x-kubernetes-embedded-resource": true, "x-kubernetes-preserve-unknown-fields": true}
                                }
                            }
                        }
                    }}
                }]
            }
        })
    }

    fn registry_with_widgets() -> Registry {
        let mut r = Registry::builtin();
        r.set_crd_resources(
            "widgets.example.com",
            crate::registry::crd::served_resources(&widget_crd()),
        );
        r
    }

    #[test]
    fn custom_kinds_publish_their_schema_as_the_real_server_does() {
        let r = registry_with_widgets();
        assert!(root(&r)["paths"]["apis/example.com/v1"]["serverRelativeURL"].is_string());
        let doc = group_version(&r, "example.com", "v1").expect("served");
        let schemas = &doc["components"]["schemas"];
        let widget = &schemas["com.example.v1.Widget"];
        assert_eq!(widget["description"], "A widget.");
        assert_eq!(
            widget["x-kubernetes-group-version-kind"],
            json!([{"group": "example.com", "kind": "Widget", "version": "v1"}])
        );
        assert_eq!(
            widget["properties"]["spec"]["properties"]["size"]["description"],
            "How big."
        );
        assert_eq!(widget["properties"]["apiVersion"]["type"], "string");
        assert_eq!(
            widget["properties"]["metadata"]["allOf"][0]["$ref"],
            OBJECT_META_REF
        );
        assert_eq!(
            widget["properties"]["spec"]["properties"]["port"]["anyOf"],
            json!([{"type": "integer"}, {"type": "string"}])
        );
        let template = &widget["properties"]["spec"]["properties"]["template"]["properties"];
        assert_eq!(template["kind"]["type"], "string");
        // Every reference resolves inside the document, as kubectl explain needs.
        let text = doc.to_string();
        for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = reference.split('"').next().unwrap_or_default();
            assert!(schemas.get(name).is_some(), "dangling reference to {name}");
        }
        assert_eq!(
            schemas["com.example.v1.WidgetList"]["properties"]["items"]["items"]["$ref"],
            "#/components/schemas/com.example.v1.Widget"
        );
        assert!(
            schemas["io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"]["description"].is_string()
        );
        assert!(
            doc["paths"]["/apis/example.com/v1/namespaces/{namespace}/widgets/{name}/status"]
                .is_object()
        );
        assert!(doc["paths"]["/apis/example.com/v1/widgets"]["get"].is_object());
    }

    #[test]
    fn a_schema_change_changes_the_index_hash() {
        let before = root(&registry_with_widgets());
        let mut crd = widget_crd();
        crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["description"] = json!("Changed.");
        let mut r = Registry::builtin();
        r.set_crd_resources(
            "widgets.example.com",
            crate::registry::crd::served_resources(&crd),
        );
        let after = root(&r);
        assert_ne!(
            before["paths"]["apis/example.com/v1"],
            after["paths"]["apis/example.com/v1"]
        );
        assert_eq!(before["paths"]["api/v1"], after["paths"]["api/v1"]);
    }
}
