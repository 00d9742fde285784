//! The wire format of the external provider protocol (HTTP+JSON, `docs/cluster-provider-protocol.md`),
//! shared by the client ([`crate::external`]) and the reference server (`reference`) so
//! the two cannot drift apart.
//!
//! Clusters travel as [`ProviderCluster`] and create requests as [`ClusterRequest`](crate::ClusterRequest) (their serde
//! forms are the protocol's JSON); this module adds the paths, headers and the small bodies only
//! the protocol has.

use serde::{Deserialize, Serialize};

use crate::{Addon, ProviderCluster};

/// Every path starts with this: a breaking change gets a new prefix, and both can be served.
pub const PREFIX: &str = "/v1";

/// The create request's header carrying the identity key (`<uuid>/<name>`): a server that
/// already has a cluster for it answers with that cluster instead of making a second one.
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";

/// `GET /v1/clusters?identity=…`: the clusters of an identity (none or one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterList {
    pub items: Vec<ProviderCluster>,
}

/// `POST /v1/clusters/{id}/upgrade`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct UpgradeRequest {
    pub kube_version: String,
}

/// `PUT /v1/clusters/{id}/addons`: the complete wanted set.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddonsRequest {
    pub addons: Vec<Addon>,
}

/// `DELETE /v1/clusters/{id}` while deletion runs (202).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeletionProgress {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<String>,
}

/// One entry of `GET /v1/addons`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CatalogAddon {
    pub name: String,
    pub description: String,
    pub default_version: String,
}

/// `GET /v1/addons`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Catalog {
    pub addons: Vec<CatalogAddon>,
}

/// Every error answer's body. `reason` is CamelCase and machine-readable; `message` is for people.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub reason: String,
    pub message: String,
}

/// `/v1/clusters`.
pub fn clusters_path() -> String {
    format!("{PREFIX}/clusters")
}

/// `/v1/clusters?identity=<uuid>/<name>` (form-encoded).
pub fn find_path(identity_key: &str) -> String {
    let query: String = form_urlencoded::Serializer::new(String::new())
        .append_pair("identity", identity_key)
        .finish();
    format!("{PREFIX}/clusters?{query}")
}

/// `/v1/clusters/{id}` with the id percent-encoded as one path segment.
pub fn cluster_path(id: &str) -> String {
    format!("{PREFIX}/clusters/{}", segment(id))
}

/// `/v1/clusters/{id}/upgrade`.
pub fn upgrade_path(id: &str) -> String {
    format!("{}/upgrade", cluster_path(id))
}

/// `/v1/clusters/{id}/addons`.
pub fn addons_path(id: &str) -> String {
    format!("{}/addons", cluster_path(id))
}

/// `/v1/addons`.
pub fn catalog_path() -> String {
    format!("{PREFIX}/addons")
}

fn segment(text: &str) -> String {
    // Everything but unreserved characters is escaped, so an id can never add a path segment.
    const SET: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
        .remove(b'-')
        .remove(b'_')
        .remove(b'.')
        .remove(b'~');
    percent_encoding::utf8_percent_encode(text, SET).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_escape_what_would_change_their_shape() {
        assert_eq!(
            find_path("aaa-1/my cluster"),
            "/v1/clusters?identity=aaa-1%2Fmy+cluster"
        );
        assert_eq!(cluster_path("c-1/../x"), "/v1/clusters/c-1%2F..%2Fx");
        assert_eq!(upgrade_path("c-1"), "/v1/clusters/c-1/upgrade");
    }
}
