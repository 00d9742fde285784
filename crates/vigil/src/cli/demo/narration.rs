//! How the demo tells its story: timestamped steps, and waiting for what a step promises.

use std::time::{Duration, Instant};

/// Polls until `check` returns Some, for at most 20 s.
pub(crate) async fn until<T, F, Fut>(what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return Ok(value);
        }
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(20),
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Prints one step of the scenario, with the time since the demo started.
pub(crate) fn step(started: Instant, text: &str) {
    say!("[{:>6.3}s] {text}", started.elapsed().as_secs_f64());
}
