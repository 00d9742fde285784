//! A bare HTTP GET, for Vigil's /metrics and probes and the brokers' admin endpoints.

use std::time::Duration;

use anyhow::Context as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// How long [`http_get`] waits for an answer.
pub(crate) const HTTP_TIMEOUT: Duration = Duration::from_secs(5);

/// A GET over HTTP/1.0 (so the body is neither chunked nor kept alive): status and body.
pub(crate) async fn http_get(addr: &str, path: &str) -> anyhow::Result<(u16, String)> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\n\r\n").as_bytes())
            .await?;
        let mut buf = Vec::new();
        stream.read_to_end(&mut buf).await?;
        anyhow::Ok(buf)
    };
    let buf = tokio::time::timeout(HTTP_TIMEOUT, exchange)
        .await
        .with_context(|| format!("GET {path} on {addr} timed out"))??;
    let text = String::from_utf8_lossy(&buf);
    let (head, body) = text
        .split_once("\r\n\r\n")
        .context("malformed HTTP response")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("no HTTP status code")?;
    Ok((code, body.to_owned()))
}
