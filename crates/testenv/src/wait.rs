//! Waiting for the cluster to reach a state, with a timeout and a message that says what was
//! awaited and what was last seen.

use std::future::Future;
use std::time::{Duration, Instant};

/// A wait that ran out of time.
#[derive(Debug, thiserror::Error)]
#[error("timed out after {after:?} waiting for {what}; last seen: {last}")]
pub struct WaitError {
    pub what: String,
    pub after: Duration,
    /// The last observation (or error) the probe returned, for the failure message.
    pub last: String,
}

/// Polls `probe` until it returns `Ok(Some(value))`, every 25 ms, for at most `timeout`.
/// `Ok(None)` means "not yet"; `Err(text)` is remembered as the last observation and retried.
pub async fn wait_for<T, F, Fut>(
    what: &str,
    timeout: Duration,
    mut probe: F,
) -> Result<T, WaitError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>, String>>,
{
    let started = Instant::now();
    let mut last = String::from("nothing yet");
    loop {
        match probe().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(observation) => last = observation,
        }
        if started.elapsed() >= timeout {
            return Err(WaitError {
                what: what.to_owned(),
                after: timeout,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn times_out_with_the_last_observation() {
        let err = wait_for::<(), _, _>("the impossible", Duration::from_millis(60), || async {
            Err("still 2 pods".to_owned())
        })
        .await
        .expect_err("never satisfied");
        assert_eq!(
            err.to_string(),
            "timed out after 60ms waiting for the impossible; last seen: still 2 pods"
        );
        let mut calls = 0;
        let value = wait_for("the third call", Duration::from_secs(5), || {
            calls += 1;
            let done = calls >= 3;
            async move { Ok(done.then_some(7)) }
        })
        .await
        .expect("satisfied");
        assert_eq!(value, 7);
    }
}
