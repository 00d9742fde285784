//! CRD validation rules (`x-kubernetes-validations`, CEL): rules of every shape — on an object,
//! a list, a list's items, a map, the resource root; transition rules (`oldSelf`) on fields and
//! on the items of a map-list; `messageExpression`, `fieldPath`, `reason` — with objects that
//! pass and objects that fail, and rules the server refuses when the CRD is created. Every
//! outcome and message is the one kube-apiserver 1.28 gives.

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::{Value, json};
use vigil_testenv::TestEnv;

use crate::support::{create_crd, delete_crd, raw_request, test_group};

fn gadget_schema() -> Value {
    json!({
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.metadata.name.startsWith('ok-')", "message": "name must start with ok-"}
        ],
        "properties": {
            "spec": {
                "type": "object",
                "x-kubernetes-validations": [
                    {"rule": "self.min <= self.max", "message": "min must not exceed max"},
                    {"rule": "!has(self.a) || !has(self.b)",
                     "messageExpression": "'a and b are exclusive, got a=' + self.a",
                     "fieldPath": ".a", "reason": "FieldValueForbidden"},
                    {"rule": "self.replicas >= oldSelf.replicas", "message": "replicas cannot go down"},
                ],
                "properties": {
                    "name": {"type": "string", "maxLength": 20,
                             "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
                    "min": {"type": "integer"},
                    "max": {"type": "integer"},
                    "a": {"type": "string", "maxLength": 20},
                    "b": {"type": "string"},
                    "replicas": {"type": "integer"},
                    "tags": {
                        "type": "array", "maxItems": 10,
                        "items": {"type": "string", "maxLength": 10,
                                  "x-kubernetes-validations": [{"rule": "self.startsWith('t-')", "message": "tags start with t-"}]},
                        "x-kubernetes-validations": [
                            {"rule": "self.all(t, t.size() > 2)"},
                            {"rule": "self.isSorted()", "message": "tags sorted"},
                        ],
                    },
                    "labels": {
                        "type": "object", "maxProperties": 5,
                        "additionalProperties": {"type": "string", "maxLength": 10},
                        "x-kubernetes-validations": [{"rule": "self.all(k, k.matches('^[a-z]+$'))", "message": "keys lowercase"}],
                    },
                    "addons": {
                        "type": "array", "maxItems": 4,
                        "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "required": ["name"], "properties": {
                            "name": {"type": "string", "maxLength": 10},
                            "version": {"type": "integer",
                                        "x-kubernetes-validations": [{"rule": "self >= oldSelf", "message": "no downgrade"}]},
                        }},
                    },
                    "numbers": {
                        "type": "array", "maxItems": 5, "items": {"type": "integer"},
                        "x-kubernetes-validations": [
                            {"rule": "self.sum() < 10", "message": "sum below 10"},
                            {"rule": "self.size() == 0 || self.max() == self[self.size() - 1]", "message": "last is the largest"},
                            {"rule": "self.indexOf(3) != 0", "message": "3 does not come first"},
                        ],
                    },
                    "text": {
                        "type": "string", "maxLength": 20,
                        "x-kubernetes-validations": [
                            {"rule": "self.find('[0-9]+') != '13'", "message": "no 13"},
                            {"rule": "self.findAll('[a-z]').size() <= 3", "message": "at most 3 letters"},
                            {"rule": "self.lowerAscii() == self && self.split('-').size() <= 2", "message": "lower case, one dash at most"},
                        ],
                    },
                },
            }
        }
    })
}

fn gadget_crd(group: &str) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{group}"), "labels": {vigil_testenv::TEST_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": gadget_schema()}}]
        }
    })
}

/// A refused request's message and its causes as `field: message`, sorted (the server reports
/// the failures of one object in no fixed order).
fn refusal(body: &Value) -> (String, Vec<String>) {
    let mut causes: Vec<String> = body["details"]["causes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            format!(
                "{} {}: {}",
                c["reason"].as_str().unwrap_or(""),
                c["field"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or("")
            )
        })
        .collect();
    causes.sort();
    (body["message"].as_str().unwrap_or("").to_owned(), causes)
}

async fn post(client: &kube::Client, path: &str, obj: &Value) -> (u16, Value) {
    let body = serde_json::to_vec(obj).expect("json");
    let response = raw_request(client, "POST", path, Some("application/json"), Some(body)).await;
    (response.status, response.json)
}

#[tokio::test]
async fn validation_rules_refuse_bad_objects_with_the_rules_messages() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let ns = env.namespace();
    let group = test_group(ns, "cel");
    let crd_name = format!("gadgets.{group}");
    create_crd(&client, gadget_crd(&group)).await;
    let path = format!("/apis/{group}/v1/namespaces/{ns}/gadgets");
    let gadget = |name: &str, spec: Value| json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": name}, "spec": spec});

    // Every rule of a create, at every level, each with its message, field and reason.
    let bad = gadget(
        "ok-bad",
        json!({"name": "n1", "min": 5, "max": 3, "a": "x", "b": "y", "replicas": 3,
               "tags": ["t-b", "t-a", "x"], "labels": {"A": "b"},
               "numbers": [3, 9, 1], "text": "ab-13-c-d"}),
    );
    let (code, body) = post(&client, &path, &bad).await;
    assert_eq!(code, 422, "{body}");
    let (_, causes) = refusal(&body);
    assert_eq!(
        causes,
        [
            "FieldValueForbidden spec.a: Forbidden: a and b are exclusive, got a=x",
            "FieldValueInvalid spec.labels: Invalid value: \"object\": keys lowercase",
            "FieldValueInvalid spec.numbers: Invalid value: \"array\": 3 does not come first",
            "FieldValueInvalid spec.numbers: Invalid value: \"array\": last is the largest",
            "FieldValueInvalid spec.numbers: Invalid value: \"array\": sum below 10",
            "FieldValueInvalid spec.tags: Invalid value: \"array\": failed rule: self.all(t, t.size() > 2)",
            "FieldValueInvalid spec.tags: Invalid value: \"array\": tags sorted",
            "FieldValueInvalid spec.tags[2]: Invalid value: \"string\": tags start with t-",
            "FieldValueInvalid spec.text: Invalid value: \"string\": at most 3 letters",
            "FieldValueInvalid spec.text: Invalid value: \"string\": lower case, one dash at most",
            "FieldValueInvalid spec.text: Invalid value: \"string\": no 13",
            "FieldValueInvalid spec: Invalid value: \"object\": min must not exceed max",
        ]
    );

    // A rule on the resource's root sees its name; one failure prints in full.
    let (code, body) = post(&client, &path, &gadget("bad", json!({"min": 1, "max": 2}))).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        body["message"],
        format!(
            "Gadget.{group} \"bad\" is invalid: <nil>: Invalid value: \"object\": name must start with ok-"
        )
    );

    // A type error keeps the rules from running, and says so.
    let (code, body) = post(
        &client,
        &path,
        &gadget("bad", json!({"min": "1", "max": 2})),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        refusal(&body).1,
        [
            "FieldValueInvalid <nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
            "FieldValueTypeInvalid spec.min: Invalid value: \"string\": spec.min in body must be of type integer: \"string\"",
        ]
    );

    // A good object; transition rules pass on its create (no old value).
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(&group, "v1", "Gadget"),
            "gadgets",
        ),
    );
    let good = gadget(
        "ok-1",
        json!({"name": "n1", "min": 1, "max": 3, "a": "x", "replicas": 3, "tags": ["t-a", "t-b"],
               "labels": {"a": "b"}, "addons": [{"name": "a", "version": 2}, {"name": "b", "version": 5}],
               "numbers": [1, 2, 4], "text": "ab-12"}),
    );
    let created = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(good).expect("gadget"),
        )
        .await
        .expect("a valid object is stored");
    assert_eq!(created.data["spec"]["replicas"], 3);

    // An update breaking transition rules: on the object, on a field, on a map-list's items
    // (correlated by key; a new item has no old value). A field the old object lacked skips its
    // own rule, but the spec's rule reading it fails with the runtime error.
    let patch = json!({"spec": {"name": "n2", "replicas": 2,
        "addons": [{"name": "b", "version": 4}, {"name": "c", "version": 1}]}});
    let refused = api
        .patch("ok-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .expect_err("the update is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}");
    };
    assert_eq!(status.code, 422);
    let body = serde_json::to_value(&status).expect("status");
    assert_eq!(
        refusal(&body).1,
        [
            "FieldValueInvalid spec.addons[0].version: Invalid value: \"integer\": no downgrade",
            "FieldValueInvalid spec.name: Invalid value: \"string\": name is immutable",
            "FieldValueInvalid spec: Invalid value: \"object\": replicas cannot go down",
        ]
    );
    let stored = api.get("ok-1").await.expect("get");
    assert_eq!(stored.data["spec"]["replicas"], 3, "nothing stored");

    // The same update without the breaking parts goes through (apply too).
    let ok = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": "ok-1"},
        "spec": {"replicas": 4, "addons": [{"name": "a", "version": 2}, {"name": "b", "version": 6}]}});
    api.patch(
        "ok-1",
        &PatchParams::apply("cel-test").force(),
        &Patch::Apply(&ok),
    )
    .await
    .expect("apply passes the rules");
    // An apply breaking a transition rule is refused like any other write.
    let down = json!({"apiVersion": format!("{group}/v1"), "kind": "Gadget", "metadata": {"name": "ok-1"},
        "spec": {"replicas": 1}});
    let refused = api
        .patch(
            "ok-1",
            &PatchParams::apply("cel-test").force(),
            &Patch::Apply(&down),
        )
        .await
        .expect_err("the apply is refused");
    let kube::Error::Api(status) = refused else {
        panic!("not an API error: {refused}");
    };
    assert_eq!(
        status.message,
        format!(
            "Gadget.{group} \"ok-1\" is invalid: spec: Invalid value: \"object\": replicas cannot go down"
        )
    );

    delete_crd(&client, &crd_name).await;
}

/// The outcome of creating a CRD whose spec carries `rules` over `properties`.
async fn create_with_rules(
    client: &kube::Client,
    group: &str,
    rules: Value,
    properties: Value,
) -> (u16, Value) {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gizmos.{group}"), "labels": {vigil_testenv::TEST_LABEL: "true"}},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "gizmos", "singular": "gizmo", "kind": "Gizmo", "listKind": "GizmoList"},
            "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {"type": "object", "x-kubernetes-validations": rules, "properties": properties}},
            }}}]
        }
    });
    post(
        client,
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        &crd,
    )
    .await
}

#[tokio::test]
async fn rules_the_server_cannot_run_fail_the_crd() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let group = test_group(env.namespace(), "celcrd");
    let props =
        json!({"name": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}}});
    let at = "spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0]";
    let message = |body: &Value| body["message"].as_str().unwrap_or("").to_owned();

    let (code, body) = create_with_rules(
        &client,
        &group,
        json!([{"rule": "self.nme == 'a'"}]),
        props.clone(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    let text = message(&body);
    assert!(
        text.starts_with(&format!(
            "CustomResourceDefinition.apiextensions.k8s.io \"gizmos.{group}\" is invalid: {at}.rule: Invalid value: apiextensions.ValidationRule{{Rule:\"self.nme == 'a'\", Message:\"\", MessageExpression:\"\", Reason:(*apiextensions.FieldValueErrorReason)(nil), FieldPath:\"\"}}: compilation failed: ERROR: <input>:1:"
        )) && text.contains("undefined field 'nme'"),
        "{text}"
    );

    for (rule, expected) in [
        (
            json!({"rule": "self.name.foo()"}),
            "undeclared reference to 'foo' (in container '')",
        ),
        (
            json!({"rule": "self.name"}),
            "cel expression must evaluate to a bool",
        ),
        (
            json!({"rule": "true", "messageExpression": "1"}),
            "messageExpression must evaluate to a string",
        ),
        // Later releases' functions and macros are not in 1.28.
        (
            json!({"rule": "cel.bind(x, 1, x == 1)"}),
            "undeclared reference to 'x' (in container '')",
        ),
        (
            json!({"rule": "self.name.quote() != ''"}),
            "compilation failed: ERROR: <input>:1:",
        ),
        (
            json!({"rule": "self.name.format([1]) != ''"}),
            "compilation failed: ERROR: <input>:1:",
        ),
        (
            json!({"rule": "isQuantity(self.name)"}),
            "undeclared reference to 'isQuantity' (in container '')",
        ),
        // Joining an unbounded list of unbounded strings.
        (
            json!({"rule": "self.tags.join(',') != ''"}),
            "estimated rule cost exceeds budget by factor of more than 100x",
        ),
    ] {
        let (code, body) = create_with_rules(&client, &group, json!([rule]), props.clone()).await;
        assert_eq!(code, 422, "{body}");
        assert!(
            message(&body).contains(expected),
            "{rule}: {}",
            message(&body)
        );
    }

    let (code, body) = create_with_rules(
        &client,
        &group,
        json!([{"rule": "true", "fieldPath": ".nope"}]),
        props.clone(),
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        refusal(&body).1,
        [format!(
            "FieldValueInvalid {at}.fieldPath: Invalid value: \".nope\": fieldPath must be a valid path"
        )]
    );

    // Three nested passes over an unbounded list: far over the estimated cost limits.
    let rule = "self.tags.all(a, self.tags.all(b, self.tags.all(c, a + b + c != '')))";
    let (code, body) =
        create_with_rules(&client, &group, json!([{"rule": rule}]), props.clone()).await;
    assert_eq!(code, 422, "{body}");
    let advice = "(try simplifying the rule, or adding maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)";
    assert_eq!(
        refusal(&body).1,
        [
            format!(
                "FieldValueForbidden {at}.rule: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire OpenAPIv3 schema"
            ),
            format!(
                "FieldValueForbidden {at}.rule: Forbidden: estimated rule cost exceeds budget by factor of more than 100x {advice}"
            ),
            format!(
                "FieldValueForbidden spec.validation.openAPIV3Schema: Forbidden: x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema exceeds budget by factor of more than 100x {advice}"
            ),
        ]
    );

    // oldSelf where no old value can be found: inside an atomic list.
    let items = json!({"list": {"type": "array", "items": {"type": "object", "properties": {
        "v": {"type": "integer", "x-kubernetes-validations": [{"rule": "self >= oldSelf"}]}}}}});
    let (code, body) = create_with_rules(&client, &group, json!([]), items).await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(
        refusal(&body).1,
        [
            "FieldValueInvalid spec.validation.openAPIV3Schema.properties[spec].properties[list].items.properties[v].x-kubernetes-validations[0].rule: Invalid value: \"self >= oldSelf\": oldSelf cannot be used on the uncorrelatable portion of the schema within spec.validation.openAPIV3Schema.properties[spec].properties[list]"
        ]
    );
}

/// A rule added to a CRD applies to the objects already stored: every write to one that breaks
/// it is refused — status updates and finalizer removal included — until its spec is fixed
/// (1.28 has no validation ratcheting).
#[tokio::test]
async fn objects_stored_before_a_rule_are_refused_every_write_until_fixed() {
    let env = TestEnv::start().await.expect("test env");
    let client = env.client();
    let ns = env.namespace();
    let group = test_group(ns, "celold");
    let crd_name = format!("stats.{group}");
    create_crd(
        &client,
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": crd_name, "labels": {vigil_testenv::TEST_LABEL: "true"}},
            "spec": {
                "group": group,
                "scope": "Namespaced",
                "names": {"plural": "stats", "singular": "stat", "kind": "Stat", "listKind": "StatList"},
                "versions": [{"name": "v1", "served": true, "storage": true, "subresources": {"status": {}},
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                        "status": {"type": "object", "properties": {"m": {"type": "string"}}},
                    }}}}]
            }
        }),
    )
    .await;
    let api: Api<DynamicObject> = Api::namespaced_with(
        client.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(&group, "v1", "Stat"), "stats"),
    );
    let obj = json!({"apiVersion": format!("{group}/v1"), "kind": "Stat",
        "metadata": {"name": "old", "finalizers": ["example.com/cleanup"]}, "spec": {"a": "x", "b": "x"}});
    api.create(
        &PostParams::default(),
        &serde_json::from_value(obj).expect("stat"),
    )
    .await
    .expect("stored before the rule");

    let rule = json!([{"op": "add",
        "path": "/spec/versions/0/schema/openAPIV3Schema/properties/spec/x-kubernetes-validations",
        "value": [{"rule": "self.a != self.b", "message": "a and b differ"}]}]);
    let path = format!("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd_name}");
    let body = serde_json::to_vec(&rule).expect("json");
    let response = raw_request(
        &client,
        "PATCH",
        &path,
        Some("application/json-patch+json"),
        Some(body),
    )
    .await;
    assert_eq!(response.status, 200, "{}", response.text);

    // Once the server uses the new schema, a status write is refused with the rule's message.
    let status_patch = Patch::Merge(json!({"status": {"m": "hello"}}));
    let refused = crate::support::poll_until("the rule to apply to status writes", || async {
        match api
            .patch_status("old", &PatchParams::default(), &status_patch)
            .await
        {
            Err(kube::Error::Api(status)) if status.code == 422 => Some(status),
            _ => None,
        }
    })
    .await;
    assert_eq!(
        refused.message,
        format!("Stat.{group} \"old\" is invalid: spec: Invalid value: \"object\": a and b differ")
    );
    // Deleting it marks it; removing its finalizer is refused the same way.
    api.delete("old", &Default::default())
        .await
        .expect("delete marks");
    let unfinalize = Patch::Merge(json!({"metadata": {"finalizers": null}}));
    let refused = api
        .patch("old", &PatchParams::default(), &unfinalize)
        .await
        .expect_err("finalizer removal refused");
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 422),
        "{refused:?}"
    );
    // Fixing the spec is allowed, and then everything else is.
    api.patch(
        "old",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"b": "y"}})),
    )
    .await
    .expect("the fix is accepted");
    api.patch("old", &PatchParams::default(), &unfinalize)
        .await
        .expect("the finalizer goes once the spec is fixed");
    delete_crd(&client, &crd_name).await;
}
