//! The API client, instrumented: every request the operator makes is counted and timed under
//! client-go's metric names, so a user sees exactly what Vigil costs the API server (and the
//! dashboards written for Go operators show it).
//!
//! | exposed name | type | labels |
//! |---|---|---|
//! | `rest_client_requests_total` | counter | `code`, `method`, `host` |
//! | `rest_client_request_duration_seconds` | histogram | `verb`, `host` |
//! | `<prefix>_rest_client_lists_total` | counter | `resource` |
//! | `<prefix>_rest_client_watches_total` | counter | `resource` |
//!
//! `code` is the HTTP status, or `<error>` when no answer came (client-go's spelling). The
//! duration runs to the response headers, so a watch counts the time to its first byte, as in
//! client-go. A watch request is a watch started or restarted (after its timeout, an error or an
//! outage); a list is a LIST of a collection, every page counted.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Instant;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;

use crate::metrics::Metrics;
use crate::retry::RetryAfter;

/// client-go's `rest_client_request_duration_seconds` buckets.
const REQUEST_DURATION_BUCKETS: [f64; 12] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DurationLabels {
    verb: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResourceLabel {
    resource: String,
}

/// The client request series; cloning shares them.
#[derive(Clone, Debug)]
pub struct ClientMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<DurationLabels, Histogram, fn() -> Histogram>,
    lists: Family<ResourceLabel, Counter>,
    watches: Family<ResourceLabel, Counter>,
}

fn duration_histogram() -> Histogram {
    Histogram::new(REQUEST_DURATION_BUCKETS)
}

impl ClientMetrics {
    pub(crate) fn new() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(duration_histogram),
            lists: Family::default(),
            watches: Family::default(),
        }
    }

    /// Registers the series; `product` is the prefix of the two client-go does not define,
    /// ending in `_` (or empty).
    pub(crate) fn register(
        &self,
        registry: &mut prometheus_client::registry::Registry,
        product: &str,
    ) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds, broken down by verb and host",
            self.duration.clone(),
        );
        registry.register(
            format!("{product}rest_client_lists"),
            "LIST requests (each page), by resource",
            self.lists.clone(),
        );
        registry.register(
            format!("{product}rest_client_watches"),
            "WATCH requests (each watch started or restarted), by resource",
            self.watches.clone(),
        );
    }

    /// Requests made so far, whatever their outcome: the sum of `rest_client_requests_total`.
    pub fn requests_total(&self) -> u64 {
        // Family offers no iteration; the exposition is the only view of every series.
        let mut registry = prometheus_client::registry::Registry::default();
        registry.register("r", "", self.requests.clone());
        let mut text = String::new();
        if prometheus_client::encoding::text::encode(&mut text, &registry).is_err() {
            return 0;
        }
        text.lines()
            .filter(|l| l.starts_with("r_total{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
            .sum()
    }

    fn record(&self, host: &str, method: &str, code: &str, seconds: f64) {
        self.requests
            .get_or_create(&RequestLabels {
                code: code.to_owned(),
                method: method.to_owned(),
                host: host.to_owned(),
            })
            .inc();
        self.duration
            .get_or_create(&DurationLabels {
                verb: method.to_owned(),
                host: host.to_owned(),
            })
            .observe(seconds);
    }
}

/// What a request does to a collection, read from its path and query.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Collection {
    List(String),
    Watch(String),
}

/// `LIST` or `WATCH` of a collection (`/api/v1/[namespaces/NS/]PLURAL`,
/// `/apis/GROUP/VERSION/[namespaces/NS/]PLURAL`), with the resource as `plural[.group]`.
fn collection(method: &http::Method, uri: &http::Uri) -> Option<Collection> {
    if method != http::Method::GET {
        return None;
    }
    let parts: Vec<&str> = uri.path().split('/').filter(|p| !p.is_empty()).collect();
    let (group, rest) = match parts.as_slice() {
        ["api", _version, rest @ ..] => ("", rest),
        ["apis", group, _version, rest @ ..] => (*group, rest),
        _ => return None,
    };
    let plural = match rest {
        ["namespaces", _, plural] => *plural,
        [plural] => *plural,
        _ => return None,
    };
    let resource = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    let watching = uri.query().is_some_and(|q| {
        form_urlencoded::parse(q.as_bytes()).any(|(k, v)| k == "watch" && (v == "true" || v == "1"))
    });
    Some(if watching {
        Collection::Watch(resource)
    } else {
        Collection::List(resource)
    })
}

/// The tower layer that records every request; see [`instrumented`].
#[derive(Clone, Debug)]
pub struct RequestMetricsLayer {
    metrics: ClientMetrics,
    host: Arc<str>,
}

impl<S> tower::Layer<S> for RequestMetricsLayer {
    type Service = RequestMetrics<S>;

    fn layer(&self, inner: S) -> Self::Service {
        RequestMetrics {
            inner,
            metrics: self.metrics.clone(),
            host: self.host.clone(),
        }
    }
}

/// A service that records each request it passes on.
#[derive(Clone, Debug)]
pub struct RequestMetrics<S> {
    inner: S,
    metrics: ClientMetrics,
    host: Arc<str>,
}

impl<S, B, RB> tower::Service<http::Request<B>> for RequestMetrics<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<RB>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        let method = request.method().as_str().to_owned();
        match collection(request.method(), request.uri()) {
            Some(Collection::List(resource)) => {
                self.metrics
                    .lists
                    .get_or_create(&ResourceLabel { resource })
                    .inc();
            }
            Some(Collection::Watch(resource)) => {
                self.metrics
                    .watches
                    .get_or_create(&ResourceLabel { resource })
                    .inc();
            }
            None => {}
        }
        let metrics = self.metrics.clone();
        let host = self.host.clone();
        let started = Instant::now();
        let response = self.inner.call(request);
        Box::pin(async move {
            let result = response.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            metrics.record(&host, &method, &code, started.elapsed().as_secs_f64());
            result
        })
    }
}

/// The `host` label for a cluster URL: `host:port` as client-go reports it.
fn host_of(url: &http::Uri) -> String {
    url.authority()
        .map_or_else(|| url.to_string(), |a| a.as_str().to_owned())
}

/// A client for `config` whose requests are recorded in `metrics` (see the module documentation),
/// retrying only what the server asks to be retried (see `retry`, inside the crate) instead of kube-rs's
/// default retries. Each attempt is a request of its own in the metrics, as in client-go.
pub fn instrumented(
    mut config: kube::Config,
    metrics: &Metrics,
) -> Result<kube::Client, kube::Error> {
    let layer = RequestMetricsLayer {
        metrics: metrics.client_metrics().clone(),
        host: host_of(&config.cluster_url).into(),
    };
    config.default_retry = false;
    // The retry layer needs a service it can clone: the buffer is one, over the stack.
    let retry = tower::ServiceBuilder::new()
        .layer(tower::retry::RetryLayer::new(RetryAfter::default()))
        .layer(tower::buffer::BufferLayer::new(1024));
    Ok(kube::client::ClientBuilder::try_from(config)?
        .with_layer(&layer)
        .with_layer(&retry)
        .build())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn classify(method: http::Method, uri: &str) -> Option<Collection> {
        collection(&method, &uri.parse().expect("a URI"))
    }

    #[test]
    fn lists_and_watches_are_told_apart_by_path_and_query() {
        use Collection::{List, Watch};
        assert_eq!(
            classify(http::Method::GET, "/api/v1/pods?limit=500"),
            Some(List("pods".into()))
        );
        assert_eq!(
            classify(
                http::Method::GET,
                "/api/v1/namespaces/ns/pods?watch=true&resourceVersion=5"
            ),
            Some(Watch("pods".into()))
        );
        assert_eq!(
            classify(http::Method::GET, "/apis/apps/v1/namespaces/ns/deployments"),
            Some(List("deployments.apps".into()))
        );
        assert_eq!(
            classify(http::Method::GET, "/api/v1/namespaces"),
            Some(List("namespaces".into()))
        );
        assert_eq!(classify(http::Method::GET, "/api/v1/namespaces/ns"), None);
        assert_eq!(
            classify(http::Method::GET, "/api/v1/namespaces/ns/pods/p"),
            None
        );
        assert_eq!(
            classify(http::Method::POST, "/api/v1/namespaces/ns/pods"),
            None
        );
        assert_eq!(classify(http::Method::GET, "/version"), None);
    }

    #[tokio::test]
    async fn every_request_is_counted_with_client_gos_labels() {
        use tower::{Layer as _, Service as _, ServiceExt as _};
        let metrics = Metrics::new("vigil");
        let layer = RequestMetricsLayer {
            metrics: metrics.client_metrics().clone(),
            host: "127.0.0.1:6443".into(),
        };
        let mut service = layer.layer(tower::service_fn(|request: http::Request<()>| async move {
            let code = if request.uri().path() == "/missing" {
                404
            } else {
                200
            };
            Ok::<_, std::convert::Infallible>(
                http::Response::builder()
                    .status(code)
                    .body(())
                    .expect("a response"),
            )
        }));
        for path in ["/api/v1/pods", "/api/v1/pods?watch=true", "/missing"] {
            let request = http::Request::get(path).body(()).expect("a request");
            service
                .ready()
                .await
                .expect("ready")
                .call(request)
                .await
                .expect("answered");
        }
        let text = metrics.encode();
        for expected in [
            r#"rest_client_requests_total{code="200",method="GET",host="127.0.0.1:6443"} 2"#,
            r#"rest_client_requests_total{code="404",method="GET",host="127.0.0.1:6443"} 1"#,
            r#"rest_client_request_duration_seconds_count{verb="GET",host="127.0.0.1:6443"} 3"#,
            r#"vigil_rest_client_lists_total{resource="pods"} 1"#,
            r#"vigil_rest_client_watches_total{resource="pods"} 1"#,
        ] {
            assert!(text.contains(expected), "missing {expected} in\n{text}");
        }
        assert_eq!(metrics.client_metrics().requests_total(), 3);
    }
}

/// Why no client configuration could be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The kubeconfig file given could not be read or parsed.
    #[error("reading kubeconfig {}", path.display())]
    Read {
        /// The file given.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// The kubeconfig was read but does not make a usable configuration.
    #[error("loading kubeconfig {}", path.display())]
    Load {
        /// The file given.
        path: std::path::PathBuf,
        /// What went wrong.
        #[source]
        source: kube::config::KubeconfigError,
    },
    /// No kubeconfig given, none in the usual places, and not in a cluster.
    #[error("no kubeconfig and not running in a cluster")]
    Infer(#[source] kube::config::InferConfigError),
}

/// The client configuration of `kubeconfig` if given, else the inferred one (`KUBECONFIG`,
/// `~/.kube/config`, then in-cluster): what a controller's `--kubeconfig` flag means.
pub async fn load_config(
    kubeconfig: Option<&std::path::Path>,
) -> Result<kube::Config, ConfigError> {
    let Some(path) = kubeconfig else {
        return kube::Config::infer().await.map_err(ConfigError::Infer);
    };
    let file = kube::config::Kubeconfig::read_from(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    kube::Config::from_custom_kubeconfig(file, &kube::config::KubeConfigOptions::default())
        .await
        .map_err(|source| ConfigError::Load {
            path: path.to_owned(),
            source,
        })
}
