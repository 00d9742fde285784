//! Talking to the sandbox from a bench: a client of its own, creates that tolerate an earlier
//! run's objects, and many requests at once.

use anyhow::Context as _;
use futures::{StreamExt as _, TryStreamExt as _};
use kube::Client;

/// A client with its own connection pool to the server at `url`.
pub(crate) fn own_client(url: &str) -> anyhow::Result<Client> {
    Ok(Client::try_from(kube::Config::new(
        url.parse().context("sandbox URL")?,
    ))?)
}

/// A create's result, with "already exists" counted as success.
pub(crate) fn ok_if_exists<T>(result: Result<T, kube::Error>) -> anyhow::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Runs `make(0..count)` with at most `concurrency` in flight; the first error ends it.
pub(crate) async fn in_parallel<F, Fut>(
    count: usize,
    concurrency: usize,
    make: F,
) -> anyhow::Result<()>
where
    F: Fn(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    futures::stream::iter((0..count).map(make))
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}
