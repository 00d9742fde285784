//! The S3-compatible backend: `s3://bucket/prefix[?endpoint=http://host:port&region=…]`.
//!
//! Objects are `<prefix>/<layout path>/<version>.json`, the same layout as the directory backend.
//! A PUT is all-or-nothing in S3, so a version exists whole or not at all without a rename.
//! Requests are signed (SigV4, presigned URLs) by `rusty-s3`, a sans-IO signer, and sent with the
//! hyper client already in the tree; path-style addressing, so any S3-compatible server works.
//!
//! Settings: the endpoint from `?endpoint=`, else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`;
//! the region from `?region=`, else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else `us-east-1`;
//! credentials from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`); none
//! means unsigned requests. This build has no TLS stack (neither has its Kubernetes client), so
//! the endpoint must be `http://` — an in-cluster MinIO/Ceph/Garage, or a local proxy.

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use rusty_s3::{Bucket, Credentials, S3Action as _, UrlStyle, actions::ListObjectsV2};

use crate::backend::{Backend, StoredVersion};
use crate::layout::{key_path, parse_key_segments, parse_version_name, version_name};
use crate::{Error, ObjectKey};

/// How long a presigned URL stays valid: one request's worth.
const SIGNATURE_TTL: Duration = Duration::from_secs(300);
/// Pages of one listing read at most (S3 pages hold up to 1,000 objects: ten million objects,
/// far more than a vault holds).
const MAX_LIST_PAGES: usize = 10_000;
/// A request that takes longer than this is treated as an unreachable backend.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Debug)]
pub struct S3Backend {
    bucket: Bucket,
    credentials: Option<Credentials>,
    /// Empty, or ends with `/`.
    prefix: String,
    endpoint: String,
    location: String,
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

impl S3Backend {
    /// Parses `s3://bucket/prefix?endpoint=…&region=…`. Does not contact the server; see
    /// [`Backend::check`].
    pub fn new(location: &str) -> Result<Self, Error> {
        let bad = |reason: String| Error::Location {
            location: location.to_owned(),
            reason,
        };
        let url = url::Url::parse(location).map_err(|e| bad(e.to_string()))?;
        if url.scheme() != "s3" {
            return Err(bad("expected s3://bucket/prefix".into()));
        }
        let bucket_name = url
            .host_str()
            .filter(|b| !b.is_empty())
            .ok_or_else(|| bad("no bucket name".into()))?
            .to_owned();
        let mut prefix = url.path().trim_matches('/').to_owned();
        if !prefix.is_empty() {
            prefix.push('/');
        }
        let mut endpoint = None;
        let mut region = None;
        for (name, value) in url.query_pairs() {
            match &*name {
                "endpoint" => endpoint = Some(value.into_owned()),
                "region" => region = Some(value.into_owned()),
                other => {
                    return Err(bad(format!(
                        "unknown setting {other:?}; use endpoint or region"
                    )));
                }
            }
        }
        let region = region
            .or_else(|| env("AWS_REGION"))
            .or_else(|| env("AWS_DEFAULT_REGION"))
            .unwrap_or_else(|| "us-east-1".into());
        let endpoint = endpoint
            .or_else(|| env("AWS_ENDPOINT_URL_S3"))
            .or_else(|| env("AWS_ENDPOINT_URL"))
            .unwrap_or_else(|| format!("https://s3.{region}.amazonaws.com"));
        let endpoint_url =
            url::Url::parse(&endpoint).map_err(|e| bad(format!("endpoint {endpoint:?}: {e}")))?;
        let connector = hyper_rustls::HttpsConnectorBuilder::new();
        let connector = match endpoint_url.scheme() {
            // Verified against the machine's CA certificates (a private CA goes there too).
            "https" => connector.with_native_roots().map_err(|e| {
                bad(format!(
                    "endpoint {endpoint}: no CA certificates to verify it with: {e}"
                ))
            })?,
            // Plain HTTP (a local S3-compatible server): no certificate is ever checked.
            "http" => connector.with_tls_config(
                rustls::ClientConfig::builder()
                    .with_root_certificates(rustls::RootCertStore::empty())
                    .with_no_client_auth(),
            ),
            other => {
                return Err(bad(format!(
                    "endpoint {endpoint}: scheme {other:?} is neither http nor https"
                )));
            }
        };
        let connector = connector.https_or_http().enable_http1().build();
        let bucket = Bucket::new(endpoint_url, UrlStyle::Path, bucket_name, region)
            .map_err(|e| bad(format!("endpoint {endpoint}: {e}")))?;
        let credentials = match (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
            (Some(key), Some(secret)) => Some(match env("AWS_SESSION_TOKEN") {
                Some(token) => Credentials::new_with_token(key, secret, token),
                None => Credentials::new(key, secret),
            }),
            _ => None,
        };
        let client = Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
        let location = format!("s3://{}/{}", bucket.name(), prefix);
        Ok(Self {
            bucket,
            credentials,
            prefix,
            endpoint,
            location,
            client,
        })
    }

    fn object_name(&self, key: &ObjectKey, version: u64) -> String {
        format!("{}{}/{}", self.prefix, key_path(key), version_name(version))
    }

    /// Sends one signed request; returns the body of a 2xx answer, a clear error otherwise.
    async fn send(
        &self,
        operation: &'static str,
        method: http::Method,
        url: url::Url,
        body: Vec<u8>,
        object: &str,
    ) -> Result<Bytes, Error> {
        let request = http::Request::builder()
            .method(method)
            .uri(url.as_str())
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Error::S3 {
                operation,
                object: object.to_owned(),
                reason: e.to_string(),
            })?;
        let unreachable = |reason: String| Error::Unreachable {
            location: format!("{} ({})", self.location, self.endpoint),
            reason,
        };
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| unreachable(error_chain(&e)))?;
            let status = response.status();
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| unreachable(error_chain(&e)))?
                .to_bytes();
            Ok::<_, Error>((status, body))
        };
        let (status, body) = tokio::time::timeout(REQUEST_TIMEOUT, exchange)
            .await
            .map_err(|_| unreachable(format!("no answer within {REQUEST_TIMEOUT:?}")))??;
        if status.is_success() {
            return Ok(body);
        }
        let text = String::from_utf8_lossy(&body);
        let code = xml_field(&text, "Code").unwrap_or_default();
        if code == "NoSuchBucket" || (status == http::StatusCode::NOT_FOUND && operation == "check")
        {
            return Err(Error::NoSuchBucket {
                bucket: self.bucket.name().to_owned(),
                endpoint: self.endpoint.clone(),
            });
        }
        let mut reason = format!("HTTP {status}");
        if !code.is_empty() {
            reason.push_str(&format!(" {code}"));
        }
        if let Some(message) = xml_field(&text, "Message") {
            reason.push_str(&format!(": {message}"));
        }
        if matches!(status.as_u16(), 401 | 403) && self.credentials.is_none() {
            reason.push_str(" (no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)");
        }
        Err(Error::S3 {
            operation,
            object: object.to_owned(),
            reason,
        })
    }

    /// Every object under `prefix` (all pages), with sizes.
    async fn list(&self, prefix: &str) -> Result<Vec<(String, u64)>, Error> {
        let mut out = Vec::new();
        let mut token: Option<String> = None;
        let mut pages = 0;
        loop {
            let mut action = ListObjectsV2::new(&self.bucket, self.credentials.as_ref());
            action.with_prefix(prefix);
            if let Some(t) = &token {
                action.with_continuation_token(t.clone());
            }
            let url = action.sign(SIGNATURE_TTL);
            let body = self
                .send("list", http::Method::GET, url, Vec::new(), prefix)
                .await?;
            let text = String::from_utf8_lossy(&body);
            let page = ListObjectsV2::parse_response(&text).map_err(|e| Error::S3 {
                operation: "list",
                object: prefix.to_owned(),
                reason: format!("unreadable listing: {e}"),
            })?;
            out.extend(
                page.contents
                    .into_iter()
                    .map(|c| (c.key, c.size.unwrap_or(0))),
            );
            let Some(next) = page.next_continuation_token else {
                return Ok(out);
            };
            // A server that hands back the token it was given, or pages without end, would
            // keep this loop (and the reconcile waiting on it) forever.
            pages += 1;
            let endless = if token.as_deref() == Some(next.as_str()) {
                Some("the listing repeats its continuation token".to_owned())
            } else if pages >= MAX_LIST_PAGES {
                Some(format!("the listing goes on past {MAX_LIST_PAGES} pages"))
            } else {
                None
            };
            if let Some(reason) = endless {
                return Err(Error::S3 {
                    operation: "list",
                    object: prefix.to_owned(),
                    reason,
                });
            }
            token = Some(next);
        }
    }
}

/// An error with its causes, since hyper's top-level messages ("client error (Connect)") say
/// little on their own.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// The text of the first `<field>…</field>` of an S3 error document.
fn xml_field(text: &str, field: &str) -> Option<String> {
    let open = format!("<{field}>");
    let start = text.find(&open)? + open.len();
    let end = text[start..].find(&format!("</{field}>"))? + start;
    Some(text[start..end].to_owned())
}

#[async_trait::async_trait]
impl Backend for S3Backend {
    fn location(&self) -> &str {
        &self.location
    }

    async fn versions(&self, key: &ObjectKey) -> Result<Vec<StoredVersion>, Error> {
        let folder = format!("{}{}/", self.prefix, key_path(key));
        let mut versions: Vec<StoredVersion> = self
            .list(&folder)
            .await?
            .into_iter()
            .filter_map(|(name, bytes)| {
                let file = name.strip_prefix(&folder)?;
                let version = parse_version_name(file)?;
                Some(StoredVersion { version, bytes })
            })
            .collect();
        versions.sort_by_key(|v| v.version);
        Ok(versions)
    }

    async fn read(&self, key: &ObjectKey, version: u64) -> Result<Vec<u8>, Error> {
        let name = self.object_name(key, version);
        let url = self
            .bucket
            .get_object(self.credentials.as_ref(), &name)
            .sign(SIGNATURE_TTL);
        Ok(self
            .send("get", http::Method::GET, url, Vec::new(), &name)
            .await?
            .to_vec())
    }

    async fn write(&self, key: &ObjectKey, version: u64, bytes: Vec<u8>) -> Result<(), Error> {
        let name = self.object_name(key, version);
        let url = self
            .bucket
            .put_object(self.credentials.as_ref(), &name)
            .sign(SIGNATURE_TTL);
        self.send("put", http::Method::PUT, url, bytes, &name)
            .await
            .map(drop)
    }

    async fn remove(&self, key: &ObjectKey, version: u64) -> Result<(), Error> {
        let name = self.object_name(key, version);
        let url = self
            .bucket
            .delete_object(self.credentials.as_ref(), &name)
            .sign(SIGNATURE_TTL);
        self.send("delete", http::Method::DELETE, url, Vec::new(), &name)
            .await
            .map(drop)
    }

    async fn keys(&self) -> Result<Vec<ObjectKey>, Error> {
        let mut keys: Vec<ObjectKey> = self
            .list(&self.prefix)
            .await?
            .into_iter()
            .filter_map(|(name, _)| {
                let relative = name.strip_prefix(&self.prefix)?;
                let segments: Vec<&str> = relative.split('/').collect();
                let [group, kind, namespace, object, file] = segments[..] else {
                    return None;
                };
                parse_version_name(file)?;
                parse_key_segments([group, kind, namespace, object])
            })
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    async fn check(&self) -> Result<(), Error> {
        let url = self
            .bucket
            .head_bucket(self.credentials.as_ref())
            .sign(SIGNATURE_TTL);
        self.send(
            "check",
            http::Method::HEAD,
            url,
            Vec::new(),
            self.bucket.name(),
        )
        .await?;
        let probe = format!("{}.vigil-health", self.prefix);
        let put = self
            .bucket
            .put_object(self.credentials.as_ref(), &probe)
            .sign(SIGNATURE_TTL);
        self.send("put", http::Method::PUT, put, b"ok".to_vec(), &probe)
            .await?;
        let delete = self
            .bucket
            .delete_object(self.credentials.as_ref(), &probe)
            .sign(SIGNATURE_TTL);
        self.send("delete", http::Method::DELETE, delete, Vec::new(), &probe)
            .await
            .map(drop)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations_parse_with_endpoint_region_and_prefix() {
        let b =
            S3Backend::new("s3://vault/team/a/?endpoint=http://127.0.0.1:9000&region=eu-west-3")
                .unwrap();
        assert_eq!(b.prefix, "team/a/");
        assert_eq!(b.bucket.name(), "vault");
        assert_eq!(b.bucket.region(), "eu-west-3");
        assert_eq!(b.location, "s3://vault/team/a/");
        let key = ObjectKey::new("", "Service", Some("ns"), "web");
        assert_eq!(
            b.object_name(&key, 3),
            "team/a/_core/Service/ns/web/00000000000000000003.json"
        );
        let root = S3Backend::new("s3://vault?endpoint=http://127.0.0.1:9000").unwrap();
        assert_eq!(root.prefix, "");
    }

    #[test]
    fn https_endpoints_are_verified_with_the_machines_roots() {
        match S3Backend::new("s3://vault?endpoint=https://s3.example.com") {
            Ok(backend) => assert_eq!(backend.endpoint, "https://s3.example.com"),
            // A machine without any CA certificate: the error says so.
            Err(e) => assert!(e.to_string().contains("CA certificates"), "{e}"),
        }
    }

    #[test]
    fn bad_locations_are_clear_errors() {
        for (location, expect) in [
            ("s3:///prefix?endpoint=http://127.0.0.1:1", "bucket"),
            (
                "s3://b?endpoint=ftp://s3.example.com",
                "neither http nor https",
            ),
            (
                "s3://b?endpoint=http://127.0.0.1:1&colour=blue",
                "unknown setting",
            ),
        ] {
            let err = S3Backend::new(location).unwrap_err().to_string();
            assert!(err.contains(expect), "{location}: {err}");
        }
    }

    #[test]
    fn error_documents_are_read() {
        let doc = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist</Message></Error>";
        assert_eq!(xml_field(doc, "Code").as_deref(), Some("NoSuchBucket"));
        assert_eq!(
            xml_field(doc, "Message").as_deref(),
            Some("The specified bucket does not exist")
        );
        assert_eq!(xml_field(doc, "Resource"), None);
    }
}
