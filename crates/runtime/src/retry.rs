//! Retrying inside the client only what the server asked to be retried, as client-go does.
//!
//! kube-rs's default client retries every 429, 503 and 504 by itself: 15 times, from 5 ms doubling
//! (to a 1000 s ceiling), so a request caught in a 5xx storm stays in flight for seconds, then
//! minutes, where no caller sees it. Its caller cannot tell the server is failing, and when the
//! storm ends the request still sleeps out its current delay: a watch restarted during a 6 s 503
//! storm resumed only 3–6 s after it (issue 25). client-go retries a response only when the server
//! says when to — a 429 or 5xx carrying `Retry-After` — at most 10 times, after that many
//! seconds; every other failure goes back to the caller, whose own loop decides (a watch backs off
//! and probes, see [`crate::reachability`]; a reconcile backs off per object; leader election
//! retries every retry period). [`RetryAfter`] is that policy, for [`crate::client::instrumented`].
//!
//! One difference from client-go: a 5xx's `Retry-After` is waited at most
//! [`MAX_SERVER_ERROR_WAIT`]. kube-apiserver sends `Retry-After` on a 5xx only around its own
//! life cycle — a fixed `5` while it starts ("the request has been made before all known HTTP
//! paths have been installed", seen for about 0.4 s on 1.28, custom resources only) and while it
//! shuts down — never as a measure of load (overload is API Priority and Fairness's 429, whose
//! `Retry-After` is waited in full). Waiting the full 5 s left a request sent in the last moments
//! of a start-up stalled for 4 s after `/readyz` was `ok`; retrying after 1 s still sends at
//! most [`MAX_RETRIES`] requests, one a second.

use std::time::Duration;

use http::{Request, Response};
use kube::client::Body;
use tower::BoxError;

/// client-go's `maxRetries` for a request the server asked to retry.
pub const MAX_RETRIES: u32 = 10;
/// The longest `Retry-After` waited inside the client: a longer one goes back to the caller.
pub const MAX_WAIT: Duration = Duration::from_secs(30);
/// The longest a 5xx's `Retry-After` is waited before the retry (see the module's documentation).
pub const MAX_SERVER_ERROR_WAIT: Duration = Duration::from_secs(1);

/// The retry policy: a 429 or 5xx with `Retry-After: <seconds>` is retried after those seconds,
/// up to [`MAX_RETRIES`] times; nothing else is.
#[derive(Clone, Debug, Default)]
pub struct RetryAfter {
    attempts: u32,
}

impl RetryAfter {
    /// How long to wait before retrying a response with `status` and `retry_after` (the
    /// header's value), if at all: a 429's whole `Retry-After`, a 5xx's at most
    /// [`MAX_SERVER_ERROR_WAIT`].
    pub fn wait(status: http::StatusCode, retry_after: Option<&str>) -> Option<Duration> {
        let throttled = status == http::StatusCode::TOO_MANY_REQUESTS;
        if !throttled && !status.is_server_error() {
            return None;
        }
        let seconds: u64 = retry_after?.trim().parse().ok()?;
        let wait = Duration::from_secs(seconds);
        if wait > MAX_WAIT {
            return None;
        }
        Some(if throttled {
            wait
        } else {
            wait.min(MAX_SERVER_ERROR_WAIT)
        })
    }
}

impl<Res> tower::retry::Policy<Request<Body>, Response<Res>, BoxError> for RetryAfter {
    type Future = tokio::time::Sleep;

    fn retry(
        &mut self,
        _request: &mut Request<Body>,
        result: &mut Result<Response<Res>, BoxError>,
    ) -> Option<Self::Future> {
        let response = result.as_ref().ok()?;
        if self.attempts >= MAX_RETRIES {
            return None;
        }
        let header = response
            .headers()
            .get(http::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok());
        let wait = Self::wait(response.status(), header)?;
        self.attempts += 1;
        Some(tokio::time::sleep(wait))
    }

    fn clone_request(&mut self, request: &Request<Body>) -> Option<Request<Body>> {
        // A streamed body cannot be sent twice: such a request is not retried.
        let body = request.body().try_clone()?;
        let mut copy = Request::new(body);
        *copy.method_mut() = request.method().clone();
        *copy.uri_mut() = request.uri().clone();
        *copy.version_mut() = request.version();
        *copy.headers_mut() = request.headers().clone();
        *copy.extensions_mut() = request.extensions().clone();
        Some(copy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::StatusCode;
    use tower::retry::Policy as _;

    #[test]
    fn only_what_the_server_asked_to_retry_is_retried() {
        assert_eq!(
            RetryAfter::wait(StatusCode::TOO_MANY_REQUESTS, Some("1")),
            Some(Duration::from_secs(1))
        );
        assert_eq!(
            RetryAfter::wait(StatusCode::TOO_MANY_REQUESTS, Some("5")),
            Some(Duration::from_secs(5)),
            "a 429's Retry-After is waited in full"
        );
        // kube-apiserver's start-up answer: retried, but after a second, not five.
        assert_eq!(
            RetryAfter::wait(StatusCode::SERVICE_UNAVAILABLE, Some("5")),
            Some(MAX_SERVER_ERROR_WAIT)
        );
        assert_eq!(
            RetryAfter::wait(StatusCode::SERVICE_UNAVAILABLE, Some("0")),
            Some(Duration::ZERO)
        );
        // A 5xx storm without Retry-After goes back to the caller at once.
        assert_eq!(
            RetryAfter::wait(StatusCode::SERVICE_UNAVAILABLE, None),
            None
        );
        assert_eq!(RetryAfter::wait(StatusCode::GATEWAY_TIMEOUT, None), None);
        assert_eq!(RetryAfter::wait(StatusCode::CONFLICT, Some("1")), None);
        assert_eq!(RetryAfter::wait(StatusCode::OK, Some("1")), None);
        // An HTTP date or a far-off wait is the caller's to handle.
        assert_eq!(
            RetryAfter::wait(
                StatusCode::TOO_MANY_REQUESTS,
                Some("Wed, 21 Oct 2015 07:28:00 GMT")
            ),
            None
        );
        assert_eq!(
            RetryAfter::wait(StatusCode::TOO_MANY_REQUESTS, Some("3600")),
            None
        );
    }

    #[tokio::test]
    async fn at_most_ten_retries() {
        let mut policy = RetryAfter::default();
        let mut request = Request::new(Body::from(b"{}".to_vec()));
        let copy =
            tower::retry::Policy::<_, Response<()>, BoxError>::clone_request(&mut policy, &request);
        assert!(copy.is_some(), "a whole body");
        let throttled = || -> Result<Response<()>, BoxError> {
            Ok(Response::builder()
                .status(429)
                .header("Retry-After", "0")
                .body(())
                .expect("a response"))
        };
        for _ in 0..MAX_RETRIES {
            assert!(policy.retry(&mut request, &mut throttled()).is_some());
        }
        assert!(policy.retry(&mut request, &mut throttled()).is_none());
        let mut fresh = RetryAfter::default();
        let mut failed: Result<Response<()>, BoxError> = Err("connection refused".into());
        assert!(fresh.retry(&mut request, &mut failed).is_none());
    }
}
