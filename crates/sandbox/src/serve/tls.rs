//! Serving HTTPS: the rustls configuration built from [`super::pki::Pki`], and a listener that
//! hands axum connections only once their TLS handshake is done.
//!
//! Handshakes run in their own tasks, so a client that connects and says nothing (or a slow one)
//! never holds up the next connection; each has [`HANDSHAKE_TIMEOUT`] to finish.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rustls::ServerConfig;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

use super::pki::Pki;

/// The most a client may take to complete its handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's TLS configuration: the serving certificate followed by the CA, HTTP/1.1 only
/// (the server speaks no HTTP/2; ALPN tells clients such as kubectl so up front).
pub fn server_config(pki: &Pki) -> Result<Arc<ServerConfig>, rustls::Error> {
    // An explicit provider: the process-wide default may be unset or another backend.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = vec![
        CertificateDer::from(pki.serving_der.clone()),
        CertificateDer::from(pki.ca_der.clone()),
    ];
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(pki.serving_key_der.clone()));
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(chain, key)?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// TCP accepted, TLS handshaken, then given to axum.
pub struct TlsListener {
    tcp: TcpListener,
    acceptor: TlsAcceptor,
    /// Handshakes in flight; dropping the listener aborts them.
    handshakes: JoinSet<Option<(TlsStream<TcpStream>, SocketAddr)>>,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<ServerConfig>) -> Self {
        Self {
            tcp,
            acceptor: TlsAcceptor::from(config),
            handshakes: JoinSet::new(),
        }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            tokio::select! {
                accepted = self.tcp.accept() => match accepted {
                    Ok((tcp, addr)) => {
                        // Watch events are small writes: without TCP_NODELAY they can wait on
                        // delayed ACKs.
                        let _ = tcp.set_nodelay(true);
                        let acceptor = self.acceptor.clone();
                        self.handshakes.spawn(async move {
                            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                                Ok(Ok(stream)) => Some((stream, addr)),
                                Ok(Err(e)) => {
                                    tracing::debug!(%addr, error = %e, "TLS handshake failed");
                                    None
                                }
                                Err(_) => {
                                    tracing::debug!(%addr, "TLS handshake timed out");
                                    None
                                }
                            }
                        });
                    }
                    Err(e) => {
                        // A connection reset before it was taken, or no descriptors left: skip
                        // it, pausing so an error that persists does not spin.
                        tracing::debug!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                },
                Some(done) = self.handshakes.join_next(), if !self.handshakes.is_empty() => {
                    if let Ok(Some(connection)) = done {
                        return connection;
                    }
                }
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.tcp.local_addr()
    }
}
