//! The certificates of a TLS sandbox (`SandboxConfig::tls`): a self-signed CA, as a real cluster
//! has, and a serving certificate it signs for the loopback names clients dial.
//!
//! The CA is what clients trust (the kubeconfig's `certificate-authority-data`), so it is the part
//! worth keeping: with a data directory it is persisted there (`ca.crt`, and `ca.key` mode 0600)
//! and a restarted sandbox keeps it, so kubeconfigs handed out before the restart still verify.
//! The serving certificate is cheap (one ECDSA P-256 key) and is issued anew at every start, so it
//! always names the address actually listened on.
//!
//! Validity is rcgen's default (1975 to 4096): a sandbox has no rotation, and a certificate that
//! expires would break a long-lived test cluster for no benefit.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject as _;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SanType,
};

/// The CA certificate's file name in the data directory.
pub const CA_CERT_FILE: &str = "ca.crt";
/// The CA key's file name in the data directory (owner-only).
pub const CA_KEY_FILE: &str = "ca.key";

/// Why the certificates could not be made or loaded.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot generate the sandbox's certificates: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot use the sandbox CA {path}: {reason}")]
    Stored { path: PathBuf, reason: String },
}

/// A CA, and a serving certificate it signed.
pub struct Pki {
    /// The CA certificate, PEM: what clients trust.
    pub ca_pem: String,
    /// The CA certificate, DER (sent after the serving certificate).
    pub ca_der: Vec<u8>,
    /// The serving certificate, DER.
    pub serving_der: Vec<u8>,
    /// The serving certificate's private key, PKCS#8 DER.
    pub serving_key_der: Vec<u8>,
}

impl std::fmt::Debug for Pki {
    /// Never prints key material.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").finish_non_exhaustive()
    }
}

impl Pki {
    /// A CA (loaded from `dir`, or generated and stored there; generated in memory without a
    /// directory) and a serving certificate for `listen`.
    pub fn new(dir: Option<&Path>, listen: IpAddr) -> Result<Self, PkiError> {
        let (ca_pem, ca_key) = match dir {
            Some(dir) => load_or_create_ca(dir)?,
            None => new_ca()?,
        };
        let ca_der = CertificateDer::from_pem_slice(ca_pem.as_bytes())
            .map_err(|e| PkiError::Stored {
                path: PathBuf::from(CA_CERT_FILE),
                reason: e.to_string(),
            })?
            .to_vec();
        // The issuer is rebuilt from the same parameters the CA was made with: its subject is what
        // a signed certificate names as issuer, and its key identifier derives from the key.
        let issuer = Issuer::new(ca_params(), ca_key);
        let key = KeyPair::generate()?;
        let serving = serving_params(listen)?.signed_by(&key, &issuer)?;
        Ok(Self {
            ca_pem,
            ca_der,
            serving_der: serving.der().to_vec(),
            serving_key_der: key.serialize_der(),
        })
    }
}

/// The CA's parameters: always the same subject, so a stored CA can sign again after a restart.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    // kube-apiserver's own self-signed CA is `<host>-ca@<timestamp>`; a fixed name keeps the
    // stored CA's subject reproducible.
    name.push(DnType::CommonName, "vigil-sandbox-ca");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// The serving certificate's parameters: the loopback names, the listen address, and the names
/// in-cluster clients use for the API server.
fn serving_params(listen: IpAddr) -> Result<CertificateParams, rcgen::Error> {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "kube-apiserver");
    params.distinguished_name = name;
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.use_authority_key_identifier_extension = true;
    let mut ips = vec![
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpAddr::V6(Ipv6Addr::LOCALHOST),
    ];
    if !ips.contains(&listen) {
        ips.push(listen);
    }
    params.subject_alt_names = ips.into_iter().map(SanType::IpAddress).collect();
    for dns in [
        "localhost",
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
    ] {
        params
            .subject_alt_names
            .push(SanType::DnsName(dns.try_into()?));
    }
    Ok(params)
}

fn new_ca() -> Result<(String, KeyPair), PkiError> {
    let key = KeyPair::generate()?;
    let cert = ca_params().self_signed(&key)?;
    Ok((cert.pem(), key))
}

/// Reads `ca.crt` and `ca.key` from `dir`, or, when either is missing, makes a CA and writes both
/// (the key first: a certificate on disk always has its key beside it).
fn load_or_create_ca(dir: &Path) -> Result<(String, KeyPair), PkiError> {
    let cert_path = dir.join(CA_CERT_FILE);
    let key_path = dir.join(CA_KEY_FILE);
    let stored = |path: &Path, reason: String| PkiError::Stored {
        path: path.to_owned(),
        reason,
    };
    match (read(&cert_path)?, read(&key_path)?) {
        (Some(cert), Some(key)) => {
            let key = KeyPair::from_pem(&key).map_err(|e| stored(&key_path, e.to_string()))?;
            CertificateDer::from_pem_slice(cert.as_bytes())
                .map_err(|e| stored(&cert_path, e.to_string()))?;
            Ok((cert, key))
        }
        _ => {
            let (cert, key) = new_ca()?;
            write_private(&key_path, key.serialize_pem().as_bytes())
                .map_err(|e| stored(&key_path, e.to_string()))?;
            write_private(&cert_path, cert.as_bytes())
                .map_err(|e| stored(&cert_path, e.to_string()))?;
            Ok((cert, key))
        }
    }
}

fn read(path: &Path) -> Result<Option<String>, PkiError> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(PkiError::Stored {
            path: path.to_owned(),
            reason: e.to_string(),
        }),
    }
}

/// Temp file (mode 0600), fsync, rename: never a half-written key or certificate.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write as _;
    let temp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(&temp)?;
    file.write_all(bytes)?;
    file.sync_all()?;
    drop(file);
    std::fs::rename(&temp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stored_ca_is_kept_and_signs_again() {
        let dir = std::env::temp_dir().join(format!("vigil-pki-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        let first = Pki::new(Some(&dir), IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("first");
        let second = Pki::new(Some(&dir), IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("second");
        assert_eq!(first.ca_pem, second.ca_pem, "the CA survives a restart");
        assert_ne!(
            first.serving_der, second.serving_der,
            "each start issues its own serving certificate"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(dir.join(CA_KEY_FILE))
                .expect("key")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600, "the CA key is owner-only");
        }
        std::fs::write(dir.join(CA_KEY_FILE), "garbage").expect("damage");
        let err = Pki::new(Some(&dir), IpAddr::V4(Ipv4Addr::LOCALHOST)).expect_err("damaged");
        assert!(err.to_string().contains(CA_KEY_FILE), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
