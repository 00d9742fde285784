//! Requests a client sent, recorded for tests, and the RBAC attributes the API server's
//! authorizer checks for each one: verb, API group, resource (with its subresource). They are
//! derived the way kube-apiserver's `RequestInfoFactory` derives them, so a test can check that
//! the ClusterRole generated from a controller's declared permissions grants everything its code
//! actually does. The sandbox does not enforce RBAC, so without such a check a missing verb
//! would show only on a real cluster.

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex, PoisonError};

use kube::Client;

/// What RBAC checks for one resource request.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RbacAttributes {
    /// The API group, "" for the core group.
    pub group: String,
    /// The resource, as `resource` or `resource/subresource`.
    pub resource: String,
    /// get, list, watch, create, update, patch, delete or deletecollection.
    pub verb: String,
}

impl RbacAttributes {
    pub fn new(group: &str, resource: &str, verb: &str) -> Self {
        Self {
            group: group.to_owned(),
            resource: resource.to_owned(),
            verb: verb.to_owned(),
        }
    }
}

impl std::fmt::Display for RbacAttributes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let group = if self.group.is_empty() {
            "core"
        } else {
            &self.group
        };
        write!(f, "{} {}/{}", self.verb, group, self.resource)
    }
}

/// Every request a recording client sent: method and URI (path and query), and whether it was
/// a server-side apply.
#[derive(Clone, Debug, Default)]
pub struct RequestLog(Arc<Mutex<Vec<Recorded>>>);

#[derive(Clone, Debug)]
struct Recorded {
    method: String,
    uri: String,
    apply: bool,
}

impl RequestLog {
    fn push(&self, method: &str, uri: &str, apply: bool) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Recorded {
                method: method.to_owned(),
                uri: uri.to_owned(),
                apply,
            });
    }

    /// The requests so far, in order: (method, URI).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|r| (r.method.clone(), r.uri.clone()))
            .collect()
    }

    /// The RBAC attributes of the resource requests so far (discovery and other non-resource
    /// URLs are left out: every authenticated user may read them). A server-side apply needs
    /// `create` as well as `patch`: kube-apiserver authorizes `create` too when the object does
    /// not exist yet (checked on kube-apiserver 1.28: an apply with `patch` alone is refused
    /// "cannot create resource"), and a controller's first apply creates.
    pub fn rbac_attributes(&self) -> BTreeSet<RbacAttributes> {
        let recorded = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        recorded
            .iter()
            .filter_map(|r| Some((rbac_attributes(&r.method, &r.uri)?, r.apply)))
            .flat_map(|(attributes, apply)| {
                let create = apply.then(|| RbacAttributes {
                    verb: "create".into(),
                    ..attributes.clone()
                });
                std::iter::once(attributes).chain(create)
            })
            .collect()
    }

    /// Checks that a role granting `granted` is exactly what the requests so far needed: an
    /// error names each request it does not grant, and each grant no request used — except
    /// those in `may_be_unused` (as `RbacAttributes` display them, e.g.
    /// `patch events.k8s.io/events`), grants whose use a test cannot always provoke.
    pub fn check_exactly(
        &self,
        granted: impl IntoIterator<Item = RbacAttributes>,
        may_be_unused: &[&str],
    ) -> Result<(), String> {
        let used = self.rbac_attributes();
        let granted: BTreeSet<RbacAttributes> = granted.into_iter().collect();
        let ungranted: Vec<String> = used.difference(&granted).map(ToString::to_string).collect();
        let unused: Vec<String> = granted
            .difference(&used)
            .map(ToString::to_string)
            .filter(|a| !may_be_unused.contains(&a.as_str()))
            .collect();
        if ungranted.is_empty() && unused.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "requests not granted: {ungranted:?}; granted but never used: {unused:?}"
            ))
        }
    }
}

/// A client built from `config` that records every request in the returned log.
pub fn recording_client(config: kube::Config) -> Result<(Client, RequestLog), kube::Error> {
    let log = RequestLog::default();
    let recorder = log.clone();
    let layer =
        tower::util::MapRequestLayer::new(move |request: http::Request<kube::client::Body>| {
            let uri = request
                .uri()
                .path_and_query()
                .map_or_else(|| request.uri().path().to_owned(), ToString::to_string);
            let apply = request
                .headers()
                .get(http::header::CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.starts_with("application/apply-patch"));
            recorder.push(request.method().as_str(), &uri, apply);
            request
        });
    let client = kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .build();
    Ok((client, log))
}

/// The RBAC attributes of a request, or `None` for a non-resource URL (discovery, `/version`,
/// `/openapi`…).
pub fn rbac_attributes(method: &str, uri: &str) -> Option<RbacAttributes> {
    let (path, query) = uri.split_once('?').unwrap_or((uri, ""));
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    // /api/v1/… (core) or /apis/group/version/…
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    // Namespaced requests: namespaces/{ns}/{resource}… — except the namespace's own
    // subresources (namespaces/{ns}/status, /finalize), which are about the namespace itself.
    let rest: &[&str] = match rest {
        ["namespaces", _ns, sub, ..] if *sub != "status" && *sub != "finalize" => &rest[2..],
        _ => rest,
    };
    let (resource, name, subresource) = match rest {
        [] => return None,
        [resource] => (*resource, None, None),
        [resource, name] => (*resource, Some(*name), None),
        [resource, name, sub, ..] => (*resource, Some(*name), Some(*sub)),
    };
    let watching = query
        .split('&')
        .any(|pair| pair == "watch=true" || pair == "watch=1");
    let verb = match (method, name.is_some()) {
        ("GET", _) if watching => "watch",
        ("GET", true) => "get",
        ("GET", false) => "list",
        ("POST", _) => "create",
        ("PUT", _) => "update",
        ("PATCH", _) => "patch",
        ("DELETE", true) => "delete",
        ("DELETE", false) => "deletecollection",
        _ => return None,
    };
    Some(RbacAttributes {
        group: group.to_owned(),
        resource: match subresource {
            Some(sub) => format!("{resource}/{sub}"),
            None => resource.to_owned(),
        },
        verb: verb.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn attrs(method: &str, uri: &str) -> Option<String> {
        rbac_attributes(method, uri).map(|a| a.to_string())
    }

    #[test]
    fn verbs_follow_method_name_and_watch() {
        let cases = [
            ("GET", "/api/v1/pods?limit=500", "list core/pods"),
            (
                "GET",
                "/api/v1/namespaces/a/pods?watch=true&resourceVersion=5",
                "watch core/pods",
            ),
            ("GET", "/api/v1/namespaces/a/pods/p", "get core/pods"),
            ("POST", "/api/v1/namespaces/a/pods", "create core/pods"),
            (
                "PUT",
                "/api/v1/namespaces/a/configmaps/c",
                "update core/configmaps",
            ),
            ("DELETE", "/api/v1/namespaces/a/pods/p", "delete core/pods"),
            (
                "DELETE",
                "/api/v1/namespaces/a/pods",
                "deletecollection core/pods",
            ),
            (
                "PATCH",
                "/apis/mycrd.com/v1/criticalservices/x/status?fieldManager=v",
                "patch mycrd.com/criticalservices/status",
            ),
            (
                "POST",
                "/apis/events.k8s.io/v1/namespaces/default/events",
                "create events.k8s.io/events",
            ),
        ];
        for (method, uri, expected) in cases {
            assert_eq!(
                attrs(method, uri).as_deref(),
                Some(expected),
                "{method} {uri}"
            );
        }
    }

    #[test]
    fn namespaces_and_their_own_subresources() {
        assert_eq!(
            attrs("GET", "/api/v1/namespaces").as_deref(),
            Some("list core/namespaces")
        );
        assert_eq!(
            attrs("GET", "/api/v1/namespaces/a").as_deref(),
            Some("get core/namespaces")
        );
        assert_eq!(
            attrs("PUT", "/api/v1/namespaces/a/status").as_deref(),
            Some("update core/namespaces/status")
        );
        assert_eq!(
            attrs("PUT", "/api/v1/namespaces/a/finalize").as_deref(),
            Some("update core/namespaces/finalize")
        );
        assert_eq!(
            attrs("GET", "/api/v1/namespaces/a/services").as_deref(),
            Some("list core/services")
        );
    }

    #[test]
    fn a_server_side_apply_needs_create_as_well_as_patch() {
        let log = RequestLog::default();
        log.push(
            "PATCH",
            "/apis/discovery.k8s.io/v1/namespaces/a/endpointslices/s?fieldManager=m&force=true",
            true,
        );
        log.push("PATCH", "/api/v1/namespaces/a/pods/p", false);
        let shown: Vec<String> = log
            .rbac_attributes()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            shown,
            vec![
                "patch core/pods",
                "create discovery.k8s.io/endpointslices",
                "patch discovery.k8s.io/endpointslices",
            ]
        );
    }

    #[test]
    fn exactly_means_nothing_missing_and_nothing_unused() {
        let log = RequestLog::default();
        log.push("GET", "/api/v1/pods?watch=true", false);
        log.push("POST", "/api/v1/namespaces/a/pods", false);
        log.push("GET", "/apis", false);
        let role = |verbs: &[&str]| -> Vec<RbacAttributes> {
            verbs
                .iter()
                .map(|v| RbacAttributes::new("", "pods", v))
                .collect()
        };
        assert_eq!(log.check_exactly(role(&["watch", "create"]), &[]), Ok(()));
        let missing = log
            .check_exactly(role(&["watch"]), &[])
            .expect_err("create missing");
        assert!(
            missing.contains("not granted: [\"create core/pods\"]"),
            "{missing}"
        );
        let unused = log
            .check_exactly(role(&["watch", "create", "delete"]), &[])
            .expect_err("delete unused");
        assert!(
            unused.contains("never used: [\"delete core/pods\"]"),
            "{unused}"
        );
        assert_eq!(
            log.check_exactly(role(&["watch", "create", "delete"]), &["delete core/pods"]),
            Ok(())
        );
    }

    #[test]
    fn discovery_is_not_a_resource_request() {
        for uri in [
            "/api",
            "/apis",
            "/api/v1",
            "/apis/apps/v1",
            "/version",
            "/openapi/v2",
        ] {
            assert_eq!(attrs("GET", uri), None, "{uri}");
        }
    }
}
