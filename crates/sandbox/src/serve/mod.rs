//! Serving the HTTP front on a socket: the supervisor that owns the listener (stopping and
//! binding it again on command) and, with TLS, the certificates and the TLS listener.

pub mod pki;
pub mod tls;

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::control::Control;
use crate::http;

/// Owns the listener: serves until told to stop, binds the same address again when told to
/// start, and ends with the sandbox. The store lives outside, so a restart keeps every object.
pub struct Supervisor {
    pub addr: SocketAddr,
    pub app: Arc<http::App>,
    pub control: mpsc::Receiver<Control>,
    pub shutdown: watch::Receiver<bool>,
    /// With TLS: the configuration every connection is handshaken with.
    pub tls: Option<Arc<rustls::ServerConfig>>,
}

impl Supervisor {
    pub async fn run(mut self, listener: tokio::net::TcpListener) {
        let mut listener = Some(listener);
        loop {
            let command = match listener.take() {
                Some(current) => self.serve_until_told(current).await,
                None => tokio::select! {
                    _ = self.shutdown.wait_for(|stop| *stop) => None,
                    command = self.control.recv() => command,
                },
            };
            match command {
                Some(Control::Stop(ack)) => {
                    let _ = ack.send(());
                }
                Some(Control::Start(ack)) => match tokio::net::TcpListener::bind(self.addr).await {
                    Ok(bound) => {
                        // As a restarted kube-apiserver: its own writes, then its watch cache
                        // starting afresh (watches resumed from before get 410 Expired), and
                        // its start-up (see `crate::startup`).
                        crate::startup::restart(&self.app.store);
                        self.app.start_up.restarted();
                        listener = Some(bound);
                        let _ = ack.send(Ok(()));
                    }
                    Err(e) => {
                        let _ = ack.send(Err(e));
                    }
                },
                None => return,
            }
        }
    }

    /// Serves until a command or the sandbox's shutdown; returns the command (None on shutdown).
    async fn serve_until_told(&mut self, listener: tokio::net::TcpListener) -> Option<Control> {
        let (stop, stopped) = watch::channel(false);
        self.app.listening.send_replace(true);
        let router = http::router(self.app.clone());
        let server = match &self.tls {
            Some(config) => tokio::spawn(serve(
                tls::TlsListener::new(listener, config.clone()),
                router,
                stopped,
            )),
            None => {
                use axum::serve::ListenerExt as _;
                // Watch events are small writes: without TCP_NODELAY they can wait on delayed ACKs.
                let listener = listener.tap_io(|tcp| {
                    let _ = tcp.set_nodelay(true);
                });
                tokio::spawn(serve(listener, router, stopped))
            }
        };
        let command = tokio::select! {
            _ = self.shutdown.wait_for(|stop| *stop) => None,
            command = self.control.recv() => command,
        };
        // Open watches would hold the graceful shutdown open: every one ends, including those
        // that arrive while the server stops (clients re-watch at once).
        self.app.listening.send_replace(false);
        let _ = stop.send(true);
        let _ = server.await;
        command
    }
}

async fn serve<L>(listener: L, router: axum::Router, mut stop: watch::Receiver<bool>)
where
    L: axum::serve::Listener,
    L::Addr: std::fmt::Debug,
{
    let stopped = async move {
        let _ = stop.wait_for(|stop| *stop).await;
    };
    if let Err(e) = axum::serve(listener, router)
        .with_graceful_shutdown(stopped)
        .await
    {
        tracing::error!(error = %e, "sandbox server failed");
    }
}
