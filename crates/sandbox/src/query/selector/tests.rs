use super::*;
use serde_json::json;

fn labels(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap_or_default()
}

fn selects(selector: &str, value: Value) -> bool {
    let parsed = LabelSelector::parse(selector).unwrap_or_else(|e| panic!("{selector}: {e}"));
    parsed.matches(Some(&labels(value)))
}

fn parse_error(selector: &str) -> String {
    match LabelSelector::parse(selector) {
        Ok(parsed) => panic!("{selector} parsed as {parsed:?}"),
        Err(e) => e,
    }
}

#[test]
fn empty_selector_matches_everything() {
    for s in ["", "   ", "\t\n"] {
        let parsed = LabelSelector::parse(s).unwrap();
        assert!(parsed.is_empty());
        assert!(parsed.matches(None));
        assert!(parsed.matches(Some(&labels(json!({"a": "b"})))));
    }
}

#[test]
fn equality_operators() {
    for s in ["a=b", "a==b", " a = b "] {
        assert!(selects(s, json!({"a": "b"})), "{s}");
        assert!(!selects(s, json!({"a": "c"})), "{s}");
        assert!(!selects(s, json!({})), "{s}");
    }
    assert!(!LabelSelector::parse("a=b").unwrap().is_empty());
}

#[test]
fn inequality_matches_missing_labels() {
    assert!(selects("a!=b", json!({"a": "c"})));
    assert!(selects("a!=b", json!({})));
    assert!(!selects("a!=b", json!({"a": "b"})));
    assert!(LabelSelector::parse("a!=b").unwrap().matches(None));
}

#[test]
fn set_operators() {
    assert!(selects("a in (x, y)", json!({"a": "y"})));
    assert!(!selects("a in (x,y)", json!({"a": "z"})));
    assert!(!selects("a in (x)", json!({})));
    assert!(selects("a notin (x)", json!({"a": "y"})));
    assert!(selects("a notin (x)", json!({})));
    assert!(!selects("a notin (x,y)", json!({"a": "x"})));
    assert!(selects("a in ()", json!({"a": ""})));
    assert!(selects("a in (,x)", json!({"a": ""})));
}

#[test]
fn existence_operators() {
    assert!(selects("a", json!({"a": ""})));
    assert!(!selects("a", json!({"b": "c"})));
    assert!(selects("!a", json!({"b": "c"})));
    assert!(!selects("! a", json!({"a": "x"})));
    assert!(LabelSelector::parse("!a").unwrap().matches(None));
    assert!(!LabelSelector::parse("a").unwrap().matches(None));
}

#[test]
fn numeric_comparisons() {
    assert!(selects("a>1", json!({"a": "2"})));
    assert!(!selects("a>1", json!({"a": "1"})));
    assert!(!selects("a>1", json!({"a": "x"})));
    assert!(!selects("a>1", json!({})));
    assert!(selects("a<10", json!({"a": "-3"})));
}

#[test]
fn comma_means_and() {
    let s = "app=web, tier in (fe,be),!legacy,env!=prod";
    assert!(selects(s, json!({"app": "web", "tier": "fe"})));
    assert!(!selects(
        s,
        json!({"app": "web", "tier": "fe", "legacy": "1"})
    ));
    assert!(!selects(s, json!({"app": "web", "tier": "db"})));
    assert!(!selects(
        s,
        json!({"app": "web", "tier": "be", "env": "prod"})
    ));
}

#[test]
fn keywords_are_identifiers_in_value_position() {
    assert!(selects("in=notin", json!({"in": "notin"})));
    assert!(selects("a in (in,notin)", json!({"a": "notin"})));
}

#[test]
fn prefixed_keys_and_empty_values() {
    assert!(selects(
        "app.kubernetes.io/name=web",
        json!({"app.kubernetes.io/name": "web"})
    ));
    assert!(selects("a=", json!({"a": ""})));
    assert!(selects("a=,b", json!({"a": "", "b": "x"})));
    assert!(selects("a==", json!({"a": ""})));
}

#[test]
fn structural_errors_match_upstream_wording() {
    let cases = [
        (
            "a b",
            "unable to parse requirement: found 'b', expected: in, notin, =, ==, !=, gt, lt",
        ),
        ("a=b,", "found '', expected: identifier after ','"),
        ("a=b c", "found 'c', expected: ',' or 'end of string'"),
        (
            "=b",
            "found '=', expected: !, identifier, or 'end of string'",
        ),
        (
            "!=b",
            "found '!=', expected: !, identifier, or 'end of string'",
        ),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        (
            "a in x",
            "unable to parse requirement: found 'x' expected: '('",
        ),
        (
            "a in (x",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "a in (x y)",
            "unable to parse requirement: found 'y', expected: ',' or ')'",
        ),
        (
            "a in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
        ),
        (
            "a in (x,=)",
            "unable to parse requirement: found '=', expected: ',', or identifier",
        ),
        (
            "a=(",
            "unable to parse requirement: found '(', expected: identifier",
        ),
        ("!a=b", "found '=', expected: ',' or 'end of string'"),
    ];
    for (input, expected) in cases {
        assert_eq!(parse_error(input), expected, "input {input:?}");
    }
}

#[test]
fn invalid_keys_are_reported_with_nil_path() {
    let error = parse_error("a@b=c");
    assert_eq!(
        error,
        "unable to parse requirement: <nil>: Invalid value: \"a@b\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
    );
    let long = "k".repeat(64);
    assert!(parse_error(&long).contains("name part must be no more than 63 characters"));
    assert!(parse_error("Example.com/a").contains("prefix part a lowercase RFC 1123 subdomain"));
    assert!(parse_error("/a").contains("prefix part must be non-empty"));
    assert!(parse_error("a/b/c").contains("a qualified name must consist of"));
    assert!(parse_error("example.com/=x").contains("name part must be non-empty"));
}

#[test]
fn invalid_values_are_reported_per_value() {
    let error = parse_error("a=-x");
    assert!(
        error.starts_with("unable to parse requirement: values[0][a]: Invalid value: \"-x\": a valid label must be an empty string"),
        "{error}"
    );
    let long = "v".repeat(64);
    assert!(parse_error(&format!("a={long}")).contains("must be no more than 63 characters"));
    let error = parse_error("a in (-x,_y)");
    assert!(
        error.starts_with("unable to parse requirement: [values[0][a]"),
        "{error}"
    );
    assert!(
        error.contains("values[1][a]: Invalid value: \"_y\""),
        "{error}"
    );
    assert_eq!(
        parse_error("a>x"),
        "unable to parse requirement: values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
}

#[test]
fn field_selector_operators() {
    let selector = FieldSelector::parse("metadata.name=a,spec.nodeName!=n1").unwrap();
    let mut keys: Vec<&str> = selector.keys().collect();
    keys.sort_unstable();
    assert_eq!(keys, ["metadata.name", "spec.nodeName"]);
    let pod = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n2"}});
    assert!(selector.matches(|k| field_value(&pod, k)));
    let other = json!({"metadata": {"name": "a"}, "spec": {"nodeName": "n1"}});
    assert!(!selector.matches(|k| field_value(&other, k)));
    let double = FieldSelector::parse("metadata.name==a").unwrap();
    assert!(double.matches(|k| field_value(&pod, k)));
}

#[test]
fn field_selector_missing_fields_are_empty_strings() {
    let pending = json!({"spec": {}});
    let unscheduled = FieldSelector::parse("spec.nodeName=").unwrap();
    assert!(unscheduled.matches(|k| field_value(&pending, k)));
    let scheduled = FieldSelector::parse("spec.nodeName!=").unwrap();
    assert!(!scheduled.matches(|k| field_value(&pending, k)));
}

#[test]
fn field_selector_empty_and_blank_terms() {
    assert!(FieldSelector::parse("").unwrap().is_empty());
    let selector = FieldSelector::parse("a=b,,").unwrap();
    assert_eq!(selector.keys().count(), 1);
    assert!(selector.matches(|_| "b".to_owned()));
}

#[test]
fn field_selector_escapes() {
    let selector = FieldSelector::parse(r"metadata.name=a\,b\=c\\d").unwrap();
    assert!(selector.matches(|_| r"a,b=c\d".to_owned()));
    assert_eq!(selector.keys().collect::<Vec<_>>(), ["metadata.name"]);
}

#[test]
fn field_selector_errors() {
    assert_eq!(
        FieldSelector::parse("a").unwrap_err(),
        "invalid selector: 'a'; can't understand 'a'"
    );
    assert_eq!(
        FieldSelector::parse(r"a=b\x").unwrap_err(),
        r"invalid field selector: invalid escape sequence: \x"
    );
    assert_eq!(
        FieldSelector::parse(r"a=b\").unwrap_err(),
        r"invalid field selector: invalid escape sequence: \"
    );
    assert_eq!(
        FieldSelector::parse("a=b=c").unwrap_err(),
        "invalid field selector: unescaped character in value: 61"
    );
}

#[test]
fn field_value_renders_scalars() {
    let obj = json!({"a": {"s": "x", "n": 3, "b": true, "z": null, "o": {}}});
    assert_eq!(field_value(&obj, "a.s"), "x");
    assert_eq!(field_value(&obj, "a.n"), "3");
    assert_eq!(field_value(&obj, "a.b"), "true");
    assert_eq!(field_value(&obj, "a.z"), "");
    assert_eq!(field_value(&obj, "a.o"), "");
    assert_eq!(field_value(&obj, "a.missing.deeper"), "");
    assert_eq!(field_value(&json!("scalar"), "a"), "");
}
