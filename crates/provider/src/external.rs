//! The external provider: a [`ClusterProvider`] that speaks the HTTP+JSON protocol of
//! `docs/cluster-provider-protocol.md` to a system outside Vigil (the bank's own, or
//! `reference` in tests).
//!
//! Answers map onto the contract: `4xx` with a `{reason, message}` body is
//! [`ProviderError::Rejected`] (the request cannot succeed as it is); `5xx`, `408`, `429`,
//! timeouts, refused or dropped connections and unreadable answers are
//! [`ProviderError::Unavailable`] (retry with backoff). Creates carry the identity as their
//! idempotency key, so retrying a create whose answer was lost returns the first cluster.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, StatusCode, header};
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use serde::de::DeserializeOwned;

use crate::protocol::{
    self, AddonsRequest, Catalog, ClusterList, DeletionProgress, ErrorBody, IDEMPOTENCY_KEY,
    UpgradeRequest,
};
use crate::{
    Addon, ClusterIdentity, ClusterProvider, ClusterRequest, Deletion, ProviderCluster,
    ProviderError, ProviderResult,
};

/// Where the external provider is and how to talk to it.
#[derive(Clone)]
pub struct ExternalConfig {
    /// Base URL, `http://host:port` or `https://host[:port]` (a path prefix is kept).
    pub url: String,
    /// Sent as `Authorization: Bearer <token>` when set.
    pub token: Option<String>,
    /// The most one request may take, connecting included; longer is `Unavailable`.
    pub timeout: Duration,
}

impl std::fmt::Debug for ExternalConfig {
    // The token is a credential: never in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalConfig")
            .field("url", &self.url)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl ExternalConfig {
    /// `url` with no token and a 10 s timeout.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            token: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Why an [`ExternalConfig`] cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("external provider {url}: {reason}")]
pub struct ExternalConfigError {
    pub url: String,
    pub reason: String,
}

/// The HTTP client of the external provider protocol.
pub struct ExternalProvider {
    base: String,
    token: Option<String>,
    timeout: Duration,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

impl std::fmt::Debug for ExternalProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExternalProvider")
            .field("base", &self.base)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// An answer: its status and body.
struct Answer {
    status: StatusCode,
    body: Bytes,
}

impl ExternalProvider {
    /// Checks the URL and builds the client; does not contact the server.
    pub fn new(config: ExternalConfig) -> Result<Self, ExternalConfigError> {
        let bad = |reason: String| ExternalConfigError {
            url: config.url.clone(),
            reason,
        };
        let uri: http::Uri = config
            .url
            .parse()
            .map_err(|e: http::uri::InvalidUri| bad(e.to_string()))?;
        if uri.host().is_none() {
            return Err(bad("no host".into()));
        }
        let connector = hyper_rustls::HttpsConnectorBuilder::new();
        let connector = match uri.scheme_str() {
            // Verified against the machine's CA certificates (a private CA goes there too).
            Some("https") => connector
                .with_native_roots()
                .map_err(|e| bad(format!("no CA certificates to verify it with: {e}")))?,
            // Plain HTTP (loopback, a sidecar): no certificate is ever checked.
            Some("http") => connector.with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
            other => {
                return Err(bad(format!(
                    "scheme {:?} is neither http nor https",
                    other.unwrap_or("")
                )));
            }
        };
        let connector = connector.https_or_http().enable_http1().build();
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        Ok(Self {
            base: config.url.trim_end_matches('/').to_owned(),
            token: config.token,
            timeout: config.timeout,
            client,
        })
    }

    /// `GET /v1/addons`: the addons the provider offers.
    pub async fn catalog(&self) -> ProviderResult<Catalog> {
        let answer = self
            .send(Method::GET, &protocol::catalog_path(), None, None)
            .await?;
        ok_json(answer)
    }

    /// Sends one request; an answer of any status is `Ok`, no answer is `Unavailable`.
    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
        idempotency_key: Option<&str>,
    ) -> ProviderResult<Answer> {
        let url = format!("{}{path}", self.base);
        let mut request = http::Request::builder()
            .method(method.clone())
            .uri(&url)
            .header(header::ACCEPT, "application/json");
        if body.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(key) = idempotency_key {
            request = request.header(IDEMPOTENCY_KEY, key);
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| ProviderError::Unavailable(format!("{method} {url}: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                ProviderError::Unavailable(format!("{method} {url}: {}", error_chain(&e)))
            })?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| {
                    ProviderError::Unavailable(format!(
                        "{method} {url}: the answer broke off: {}",
                        error_chain(&e)
                    ))
                })?
                .to_bytes();
            Ok(Answer { status, body })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .map_err(|_| {
                ProviderError::Unavailable(format!(
                    "{method} {url}: no answer within {:?}",
                    self.timeout
                ))
            })?
    }
}

/// The error and its sources, `: `-joined (hyper's top-level message alone says little).
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(e) = source {
        text.push_str(": ");
        text.push_str(&e.to_string());
        source = e.source();
    }
    text
}

fn decode<T: DeserializeOwned>(answer: &Answer) -> ProviderResult<T> {
    serde_json::from_slice(&answer.body).map_err(|e| {
        ProviderError::Unavailable(format!(
            "the provider answered {} with a body that is not the protocol's JSON: {e}",
            answer.status
        ))
    })
}

/// The error an unsuccessful answer stands for.
fn failure(answer: &Answer) -> ProviderError {
    let status = answer.status;
    let body: Option<ErrorBody> = serde_json::from_slice(&answer.body).ok();
    let text = match &body {
        Some(e) => format!("{}: {}", e.reason, e.message),
        None => String::from_utf8_lossy(&answer.body)
            .chars()
            .take(200)
            .collect(),
    };
    let transient = status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS;
    if transient || !status.is_client_error() {
        return ProviderError::Unavailable(format!("the provider answered {status}: {text}"));
    }
    match body {
        Some(ErrorBody { reason, message }) => ProviderError::Rejected { reason, message },
        None => ProviderError::Rejected {
            reason: format!("Http{}", status.as_u16()),
            message: format!("the provider answered {status}: {text}"),
        },
    }
}

fn ok_json<T: DeserializeOwned>(answer: Answer) -> ProviderResult<T> {
    if answer.status.is_success() {
        decode(&answer)
    } else {
        Err(failure(&answer))
    }
}

fn encode<T: serde::Serialize>(value: &T) -> ProviderResult<Vec<u8>> {
    serde_json::to_vec(value).map_err(|e| ProviderError::Unavailable(e.to_string()))
}

#[async_trait::async_trait]
impl ClusterProvider for ExternalProvider {
    async fn find(&self, identity: &ClusterIdentity) -> ProviderResult<Option<ProviderCluster>> {
        let key = identity.key();
        let answer = self
            .send(Method::GET, &protocol::find_path(&key), None, None)
            .await?;
        let list: ClusterList = ok_json(answer)?;
        // Filter again: a server that ignored the query must not hand back someone else's cluster.
        Ok(list.items.into_iter().find(|c| c.identity == *identity))
    }

    async fn create(&self, request: &ClusterRequest) -> ProviderResult<ProviderCluster> {
        let key = request.identity.key();
        let answer = self
            .send(
                Method::POST,
                &protocol::clusters_path(),
                Some(encode(request)?),
                Some(&key),
            )
            .await?;
        ok_json(answer)
    }

    async fn get(&self, id: &str) -> ProviderResult<Option<ProviderCluster>> {
        let answer = self
            .send(Method::GET, &protocol::cluster_path(id), None, None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Ok(None);
        }
        ok_json(answer).map(Some)
    }

    async fn upgrade(&self, id: &str, kube_version: &str) -> ProviderResult<ProviderCluster> {
        let body = encode(&UpgradeRequest {
            kube_version: kube_version.to_owned(),
        })?;
        let answer = self
            .send(Method::POST, &protocol::upgrade_path(id), Some(body), None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Err(ProviderError::NotFound(id.to_owned()));
        }
        ok_json(answer)
    }

    async fn set_addons(&self, id: &str, addons: &[Addon]) -> ProviderResult<ProviderCluster> {
        let body = encode(&AddonsRequest {
            addons: addons.to_vec(),
        })?;
        let answer = self
            .send(Method::PUT, &protocol::addons_path(id), Some(body), None)
            .await?;
        if answer.status == StatusCode::NOT_FOUND {
            return Err(ProviderError::NotFound(id.to_owned()));
        }
        ok_json(answer)
    }

    async fn delete(&self, id: &str) -> ProviderResult<Deletion> {
        let answer = self
            .send(Method::DELETE, &protocol::cluster_path(id), None, None)
            .await?;
        match answer.status {
            StatusCode::NO_CONTENT | StatusCode::NOT_FOUND | StatusCode::OK => Ok(Deletion::Gone),
            StatusCode::ACCEPTED => {
                // The progress text is a courtesy: a 202 without it still means "in progress".
                let progress = serde_json::from_slice::<DeletionProgress>(&answer.body)
                    .ok()
                    .and_then(|p| p.progress);
                Ok(Deletion::InProgress(progress))
            }
            _ => Err(failure(&answer)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, body: &str) -> Answer {
        Answer {
            status: StatusCode::from_u16(status).expect("status"),
            body: Bytes::from(body.to_owned()),
        }
    }

    #[test]
    fn client_errors_with_a_reason_are_rejections_and_the_rest_is_transient() {
        let refused = failure(&answer(409, r#"{"reason":"DeleteRefused","message":"no"}"#));
        assert_eq!(
            refused,
            ProviderError::Rejected {
                reason: "DeleteRefused".into(),
                message: "no".into()
            }
        );
        assert!(matches!(
            failure(&answer(403, "forbidden")),
            ProviderError::Rejected { reason, .. } if reason == "Http403"
        ));
        for status in [500, 502, 503, 408, 429] {
            assert!(matches!(
                failure(&answer(status, r#"{"reason":"X","message":"y"}"#)),
                ProviderError::Unavailable(_)
            ));
        }
    }

    #[test]
    fn urls_need_http_or_https_and_a_host() {
        assert!(ExternalProvider::new(ExternalConfig::new("ftp://x")).is_err());
        assert!(ExternalProvider::new(ExternalConfig::new("not a url")).is_err());
        assert!(ExternalProvider::new(ExternalConfig::new("http://127.0.0.1:1/base/")).is_ok());
    }
}
