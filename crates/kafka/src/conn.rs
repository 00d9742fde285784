//! One broker connection: TCP, optionally TLS, optionally SASL/PLAIN, versions negotiated with
//! `ApiVersions`, requests framed and correlated.

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Buf as _, BufMut as _, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiVersionsRequest, RequestHeader, ResponseHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::TcpStream;

use crate::{ClientConfig, Error, RequestCounts, Result};

/// Largest response accepted (a describe of thousands of topics stays far below).
const MAX_FRAME: usize = 256 << 20;

/// TLS to the brokers.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TlsConfig {
    /// PEM CA certificates to trust; none: the system's roots.
    pub ca_pem: Option<Vec<u8>>,
}

/// SASL credentials and mechanism.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct SaslConfig {
    pub mechanism: SaslMechanism,
    pub username: String,
    pub password: String,
}

/// SASL mechanisms the client speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SaslMechanism {
    Plain,
    Scram(crate::scram::ScramHash),
}

impl SaslMechanism {
    pub fn name(self) -> &'static str {
        match self {
            Self::Plain => "PLAIN",
            Self::Scram(hash) => hash.mechanism(),
        }
    }
}

impl std::fmt::Debug for SaslConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslConfig")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

pub(crate) struct Conn {
    stream: Box<dyn Stream>,
    /// API key → (min, max) version the broker supports.
    versions: HashMap<i16, (i16, i16)>,
    correlation: i32,
}

impl Conn {
    /// Connects to the first bootstrap server that answers.
    pub(crate) async fn open(config: &ClientConfig, counts: &RequestCounts) -> Result<Self> {
        let mut last = String::from("no bootstrap servers");
        // A failed TLS handshake is a configuration problem, not an outage: reported as such
        // when no other server answers.
        let mut tls_failure = None;
        for server in &config.bootstrap {
            match tokio::time::timeout(config.timeout, Self::open_one(server, config, counts)).await
            {
                Ok(Ok(conn)) => return Ok(conn),
                // Not tried on the next server: the same wrong password would count twice
                // against the account's lockout.
                Ok(Err(e)) if matches!(e, Error::Auth(_)) => return Err(e),
                Ok(Err(Error::Tls(e))) => {
                    tls_failure.get_or_insert(Error::Tls(format!("{server}: {e}")));
                }
                Ok(Err(e)) => last = format!("{server}: {e}"),
                Err(_) => last = format!("{server}: timed out"),
            }
        }
        Err(tls_failure.unwrap_or(Error::Unreachable(last)))
    }

    async fn open_one(server: &str, config: &ClientConfig, counts: &RequestCounts) -> Result<Self> {
        let tcp = TcpStream::connect(server).await?;
        tcp.set_nodelay(true)?;
        let stream: Box<dyn Stream> = match &config.tls {
            None => Box::new(tcp),
            Some(tls) => Box::new(tls_connect(tcp, server, tls).await?),
        };
        let mut conn = Self {
            stream,
            versions: HashMap::new(),
            correlation: 0,
        };
        counts.add("ApiVersions");
        // v3 is what current clients send; every broker since 2.4 answers it.
        let response = conn
            .request("ApiVersions", &api_versions_request(), 3)
            .await;
        counts.ended("ApiVersions", &response);
        let response = response?;
        crate::check(response.error_code, None)?;
        conn.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        if let Some(sasl) = &config.sasl {
            conn.authenticate(sasl, counts).await?;
        }
        Ok(conn)
    }

    async fn authenticate(&mut self, sasl: &SaslConfig, counts: &RequestCounts) -> Result<()> {
        let mechanism = sasl.mechanism.name();
        let mut handshake = SaslHandshakeRequest::default();
        handshake.mechanism = StrBytes::from_static_str(mechanism);
        counts.add("SaslHandshake");
        let response = self.request("SaslHandshake", &handshake, 1).await;
        counts.ended("SaslHandshake", &response);
        let response = response?;
        if response.error_code != 0 {
            let offered: Vec<String> = response.mechanisms.iter().map(|m| m.to_string()).collect();
            // UNSUPPORTED_SASL_MECHANISM (33) is the broker's word for a mechanism it does not
            // enable; any other code (a broker that lists the mechanism yet refuses the
            // handshake, or ILLEGAL_SASL_STATE) is reported as it came.
            let why = if response.error_code == 33 {
                format!("the broker does not accept {mechanism}")
            } else {
                format!(
                    "the broker refused the {mechanism} handshake (Kafka error code {})",
                    response.error_code
                )
            };
            return Err(Error::Auth(format!(
                "{why} (it offers {})",
                if offered.is_empty() {
                    "no mechanism".to_owned()
                } else {
                    offered.join(", ")
                }
            )));
        }
        match sasl.mechanism {
            SaslMechanism::Plain => {
                let mut token = BytesMut::new();
                token.put_u8(0);
                token.put_slice(sasl.username.as_bytes());
                token.put_u8(0);
                token.put_slice(sasl.password.as_bytes());
                self.sasl_step(token.freeze(), counts).await?;
            }
            SaslMechanism::Scram(hash) => {
                let mut scram = crate::scram::Scram::new(
                    hash,
                    &sasl.username,
                    &sasl.password,
                    crate::scram::Scram::random_nonce(),
                );
                let first = Bytes::from(scram.client_first());
                let server_first = self.sasl_step(first, counts).await?;
                let server_first = String::from_utf8_lossy(&server_first).into_owned();
                let last = scram.client_final(&server_first).map_err(Error::Auth)?;
                let server_final = self.sasl_step(Bytes::from(last), counts).await?;
                scram
                    .verify(&String::from_utf8_lossy(&server_final))
                    .map_err(Error::Auth)?;
            }
        }
        Ok(())
    }

    /// One `SaslAuthenticate` round trip; the server's bytes.
    async fn sasl_step(&mut self, bytes: Bytes, counts: &RequestCounts) -> Result<Bytes> {
        let mut authenticate = SaslAuthenticateRequest::default();
        authenticate.auth_bytes = bytes;
        counts.add("SaslAuthenticate");
        let response = self.request("SaslAuthenticate", &authenticate, 2).await;
        counts.ended("SaslAuthenticate", &response);
        let response = response?;
        if response.error_code != 0 {
            return Err(Error::Auth(
                response
                    .error_message
                    .map(|m| m.to_string())
                    .unwrap_or_else(|| format!("error code {}", response.error_code)),
            ));
        }
        Ok(response.auth_bytes)
    }

    /// The version to speak: the highest that we want, the crate knows and the broker supports.
    fn version<R: Request>(&self, api: &'static str, wanted: i16) -> Result<i16> {
        let ours = R::VERSIONS;
        let version = match self.versions.get(&R::KEY) {
            // Before ApiVersions answered: the wanted version.
            None if self.versions.is_empty() => wanted,
            None => return Err(Error::Unsupported(api)),
            Some(&(min, max)) => {
                let v = wanted.min(max).min(ours.max);
                if v < min || v < ours.min {
                    return Err(Error::Unsupported(api));
                }
                v
            }
        };
        Ok(version)
    }

    pub(crate) async fn request<R: Request>(
        &mut self,
        api: &'static str,
        request: &R,
        wanted: i16,
    ) -> Result<R::Response> {
        let version = self.version::<R>(api, wanted)?;
        self.correlation = self.correlation.wrapping_add(1);
        let correlation = self.correlation;
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY)
            .with_request_api_version(version)
            .with_correlation_id(correlation)
            .with_client_id(Some(StrBytes::from_static_str("vigil")));
        let mut body = BytesMut::new();
        header
            .encode(&mut body, R::header_version(version))
            .map_err(protocol)?;
        request.encode(&mut body, version).map_err(protocol)?;
        let len =
            u32::try_from(body.len()).map_err(|_| Error::Protocol("request too large".into()))?;
        let mut frame = BytesMut::with_capacity(body.len() + 4);
        frame.put_u32(len);
        frame.put_slice(&body);
        self.stream.write_all(&frame).await?;
        self.stream.flush().await?;

        let len = self.stream.read_u32().await? as usize;
        if len > MAX_FRAME {
            return Err(Error::Protocol(format!("response of {len} bytes")));
        }
        let mut buf = vec![0u8; len];
        self.stream.read_exact(&mut buf).await?;
        let mut buf = Bytes::from(buf);
        let header = ResponseHeader::decode(&mut buf, R::Response::header_version(version))
            .map_err(protocol)?;
        if header.correlation_id != correlation {
            return Err(Error::Protocol(format!(
                "{api}: correlation id {} for request {correlation}",
                header.correlation_id
            )));
        }
        let response = R::Response::decode(&mut buf, version).map_err(protocol)?;
        if buf.has_remaining() {
            tracing::trace!(api, left = buf.remaining(), "response bytes left undecoded");
        }
        Ok(response)
    }
}

fn protocol(e: impl std::fmt::Display) -> Error {
    Error::Protocol(e.to_string())
}

fn api_versions_request() -> ApiVersionsRequest {
    let mut request = ApiVersionsRequest::default();
    request.client_software_name = StrBytes::from_static_str("vigil");
    request.client_software_version = StrBytes::from_static_str(env!("CARGO_PKG_VERSION"));
    request
}

async fn tls_connect(
    tcp: TcpStream,
    server: &str,
    tls: &TlsConfig,
) -> Result<tokio_rustls::client::TlsStream<TcpStream>> {
    use tokio_rustls::rustls::{self, pki_types::CertificateDer, pki_types::ServerName};
    let mut roots = rustls::RootCertStore::empty();
    match &tls.ca_pem {
        Some(pem) => {
            use rustls::pki_types::pem::PemObject as _;
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| Error::Protocol(format!("CA certificate: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| Error::Protocol(format!("CA certificate: {e}")))?;
            }
        }
        None => {
            for cert in rustls_native_certs::load_native_certs().certs {
                // A system certificate rustls cannot parse is skipped, as browsers do.
                let _ = roots.add(cert);
            }
        }
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Protocol(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let host = server.rsplit_once(':').map_or(server, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let name = ServerName::try_from(host.to_owned())
        .map_err(|e| Error::Protocol(format!("server name {host:?}: {e}")))?;
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| match e.kind() {
            // rustls reports a refused handshake (an untrusted certificate, a name mismatch, no
            // common protocol) as invalid data; anything else is the connection failing.
            std::io::ErrorKind::InvalidData => Error::Tls(e.to_string()),
            _ => Error::Io(e),
        })
}
