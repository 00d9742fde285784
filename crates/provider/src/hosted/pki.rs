//! The certificates of a hosted control plane: one CA, the leaves it signs for kube-apiserver,
//! kube-controller-manager and etcd (serving, client, peer), and the service-account signing key.
//!
//! Pure: no I/O and no clock. The caller keeps the PEMs (in Secrets) and passes the current time,
//! so every decision here is reproducible in a test. The caller's loop is "check, and issue only
//! when the check says why": [`leaf_renewal`] and [`ca_renewal`] return `None` for a certificate
//! [`issue`] / [`new_ca`] just made from the same inputs, so a reconcile never re-issues forever.
//! One input breaks that promise and is the caller's to avoid: a `validity` not longer than
//! `renew_before` (every new certificate is then already "expiring"). A CA made again makes every
//! leaf [`Renewal::NotSignedByCa`]: each is issued again once, and stable after.
//!
//! Every key is ECDSA P-256 (ring, rustls's crypto backend here, cannot make RSA keys); Kubernetes
//! and etcd take ECDSA for serving, client and service-account keys alike. Private keys are PKCS#8
//! PEM (`PRIVATE KEY`), which Go's `tls.X509KeyPair` and kube-apiserver's
//! `--service-account-signing-key-file` read.

use std::collections::BTreeSet;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use rcgen::string::{Ia5String, PrintableString};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyIdMethod, KeyPair, KeyUsagePurpose, SanType,
    SerialNumber,
};
use time::OffsetDateTime;
use x509_parser::certificate::X509Certificate;
use x509_parser::der_parser::asn1_rs::Tag;
use x509_parser::extensions::GeneralName;
use x509_parser::x509::X509Name;

/// How far before `now` a certificate's validity starts: the pods that check it may run on nodes
/// whose clocks are behind the operator's, and a certificate "not yet valid" there fails every
/// handshake.
pub const CLOCK_SKEW: Duration = Duration::from_secs(5 * 60);

/// A certificate and its private key, PEM.
#[derive(Clone, PartialEq, Eq)]
pub struct CertPair {
    /// The certificate, PEM (`CERTIFICATE`).
    pub cert: String,
    /// Its private key, PKCS#8 PEM (`PRIVATE KEY`).
    pub key: String,
}

impl fmt::Debug for CertPair {
    /// Never prints the key: a `{:?}` in a log line or an error must not leak it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertPair")
            .field("cert", &format_args!("<{} bytes of PEM>", self.cert.len()))
            .field("key", &format_args!("<redacted>"))
            .finish()
    }
}

/// Why a certificate or key could not be made or read.
#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("cannot generate a key or certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error("cannot read the certificate: {0}")]
    Certificate(String),
    #[error("cannot read the private key: {0}")]
    Key(String),
    #[error("cannot read the CA: {0}")]
    CaUnreadable(String),
    #[error("the CA certificate is not a CA (basicConstraints CA:TRUE is missing)")]
    NotACa,
    #[error("the CA's private key is not the key of the CA certificate")]
    CaKeyMismatch,
    #[error("cannot sign with this CA: {0}")]
    CaSubject(String),
    #[error("{name:?} cannot be a DNS name of a certificate: {why}")]
    DnsName { name: String, why: String },
    #[error("a certificate's subject holds at most {MAX_ORGANIZATIONS} organizations, not {0}")]
    TooManyOrganizations(usize),
    #[error("{0} is out of the range of certificate dates")]
    Time(String),
}

/// What a leaf certificate is for: its extended key usages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Usage {
    /// `serverAuth`: a TLS server (kube-apiserver's and etcd's serving certificates).
    Server,
    /// `clientAuth`: a TLS client (the controller-manager's, the API server's etcd client).
    Client,
    /// Both (etcd's peer certificate: each member dials and answers the others).
    ServerAndClient,
}

impl Usage {
    fn extended_key_usages(self) -> Vec<ExtendedKeyUsagePurpose> {
        match self {
            Usage::Server => vec![ExtendedKeyUsagePurpose::ServerAuth],
            Usage::Client => vec![ExtendedKeyUsagePurpose::ClientAuth],
            Usage::ServerAndClient => vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ],
        }
    }
}

/// What a leaf certificate says: its subject, its names, what it is for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafSpec {
    /// The subject's CN: the user name of a client certificate (`system:kube-controller-manager`).
    pub common_name: String,
    /// The subject's O values: the groups of a client certificate (`system:masters`). At most
    /// [`MAX_ORGANIZATIONS`] distinct values.
    pub organizations: Vec<String>,
    /// DNS subject alternative names (a serving certificate's host names).
    pub dns_names: Vec<String>,
    /// IP subject alternative names.
    pub ips: Vec<IpAddr>,
    pub usage: Usage,
}

/// The most distinct organizations a subject can hold: rcgen's `DistinguishedName` keeps one
/// value per attribute type, and the second is written under the same OID spelled as a custom
/// type (see `subject`). Kubernetes' own certificates have at most one.
pub const MAX_ORGANIZATIONS: usize = 2;

/// What [`inspect`] reads from a certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFacts {
    /// The subject's first CN, if any.
    pub common_name: Option<String>,
    /// The subject's O values, in order.
    pub organizations: Vec<String>,
    /// DNS subject alternative names, in order.
    pub dns_names: Vec<String>,
    /// IP subject alternative names, in order.
    pub ips: Vec<IpAddr>,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    /// basicConstraints CA:TRUE.
    pub is_ca: bool,
    /// The extended key usages as a [`Usage`]; `None` without the extension or when it names
    /// neither `serverAuth` nor `clientAuth`.
    pub usage: Option<Usage>,
}

/// Why a certificate must be issued (or the CA made) again. `None` where this is returned means
/// the current one is good.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Renewal {
    /// There is none yet.
    Missing,
    /// The certificate or key PEM cannot be read (or, for a leaf, the CA's certificate).
    Unreadable(String),
    /// The leaf is not signed by the current CA (the CA was renewed, or the leaf came from
    /// elsewhere): clients trusting the CA would refuse it.
    NotSignedByCa,
    /// The certificate kept as the CA is not a CA.
    NotACa,
    /// It expires within `renew_before`, or has expired.
    Expiring { not_after: SystemTime },
    /// It is not valid yet (the clock went back by more than [`CLOCK_SKEW`] since it was issued).
    NotYetValid { not_before: SystemTime },
    /// Its names are not the spec's: the DNS names and IPs the spec has and the certificate lacks,
    /// those it has and the spec does not, and whether the subject (CN, O) differs.
    NamesChanged {
        missing_dns: Vec<String>,
        missing_ips: Vec<IpAddr>,
        extra_dns: Vec<String>,
        extra_ips: Vec<IpAddr>,
        subject_changed: bool,
    },
    /// Its extended key usages are not the spec's.
    UsageChanged {
        current: Option<Usage>,
        wanted: Usage,
    },
    /// The private key is not the certificate's key.
    KeyMismatch,
}

impl fmt::Display for Renewal {
    /// One line, for a log or a condition's message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Renewal::Missing => write!(f, "missing"),
            Renewal::Unreadable(why) => write!(f, "unreadable: {why}"),
            Renewal::NotSignedByCa => write!(f, "not signed by the current CA"),
            Renewal::NotACa => write!(f, "not a CA certificate"),
            Renewal::Expiring { not_after } => {
                write!(f, "expires at {}", EpochSeconds(*not_after))
            }
            Renewal::NotYetValid { not_before } => {
                write!(f, "not valid before {}", EpochSeconds(*not_before))
            }
            Renewal::NamesChanged {
                missing_dns,
                missing_ips,
                extra_dns,
                extra_ips,
                subject_changed,
            } => {
                write!(f, "names changed:")?;
                if !missing_dns.is_empty() || !missing_ips.is_empty() {
                    write!(f, " missing {missing_dns:?} {missing_ips:?}")?;
                }
                if !extra_dns.is_empty() || !extra_ips.is_empty() {
                    write!(f, " extra {extra_dns:?} {extra_ips:?}")?;
                }
                if *subject_changed {
                    write!(f, " subject (CN/O) differs")?;
                }
                Ok(())
            }
            Renewal::UsageChanged { current, wanted } => {
                write!(f, "usage is {current:?}, wanted {wanted:?}")
            }
            Renewal::KeyMismatch => write!(f, "the private key is not the certificate's"),
        }
    }
}

/// A time as seconds since the epoch (no calendar formatting: `time`'s is a feature this crate
/// does not ask for).
struct EpochSeconds(SystemTime);

impl fmt::Display for EpochSeconds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.duration_since(UNIX_EPOCH) {
            Ok(d) => write!(f, "{}s after the epoch", d.as_secs()),
            Err(e) => write!(f, "{}s before the epoch", e.duration().as_secs()),
        }
    }
}

/// A self-signed CA, valid from `now` − [`CLOCK_SKEW`] to `now` + `validity`.
pub fn new_ca(
    common_name: &str,
    now: SystemTime,
    validity: Duration,
) -> Result<CertPair, PkiError> {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    params.distinguished_name = name;
    // Unconstrained as kubeadm's CA: it signs leaves only today, and a path length would have to
    // be undone by a new CA (and new trust everywhere) to ever add an intermediate.
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    set_validity(&mut params, now, validity)?;
    params.serial_number = Some(random_serial());
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok(CertPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// A leaf for `spec`, with a new key, signed by `ca`, valid from `now` − [`CLOCK_SKEW`] to
/// `now` + `validity`. Not capped at the CA's own expiry: a leaf shortened to a CA close to its
/// end would be "expiring" as soon as issued (renew the CA first: [`ca_renewal`]).
pub fn issue(
    ca: &CertPair,
    spec: &LeafSpec,
    now: SystemTime,
    validity: Duration,
) -> Result<CertPair, PkiError> {
    let unreadable = |e: PkiError| PkiError::CaUnreadable(e.to_string());
    let ca_der = cert_der(&ca.cert).map_err(unreadable)?;
    let ca_cert = parse_der(&ca_der).map_err(unreadable)?;
    if !ca_cert.is_ca() {
        return Err(PkiError::NotACa);
    }
    let ca_key =
        KeyPair::from_pem(&ca.key).map_err(|e| unreadable(PkiError::Key(e.to_string())))?;
    if !key_matches(&ca_cert, &ca_key) {
        return Err(PkiError::CaKeyMismatch);
    }
    let issuer = Issuer::new(issuer_params(&ca_cert)?, ca_key);

    let mut params = CertificateParams::default();
    params.distinguished_name = subject(&spec.common_name, &spec.organizations)?;
    params.is_ca = IsCa::ExplicitNoCa;
    // digitalSignature only: an ECDSA key signs the handshake; keyEncipherment is RSA key
    // transport, meaningless for it.
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = spec.usage.extended_key_usages();
    // The authority key identifier lets verifiers pick the right CA when an old and a new one are
    // trusted side by side during a rotation.
    params.use_authority_key_identifier_extension = true;
    for dns in distinct(&spec.dns_names) {
        params.subject_alt_names.push(SanType::DnsName(
            Ia5String::try_from(dns.as_str()).map_err(|e| PkiError::DnsName {
                name: dns.clone(),
                why: e.to_string(),
            })?,
        ));
    }
    for ip in distinct(&spec.ips) {
        params.subject_alt_names.push(SanType::IpAddress(ip));
    }
    set_validity(&mut params, now, validity)?;
    params.serial_number = Some(random_serial());

    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, &issuer)?;
    // The issuer name is the CA's subject re-encoded by rcgen; a verifier matches it byte for
    // byte against the CA's subject. Checked here rather than trusted, so that a CA whose subject
    // rcgen would spell differently fails now instead of making leaves that `leaf_renewal` calls
    // NotSignedByCa on every pass.
    let leaf = parse_der(cert.der())?;
    if leaf.issuer().as_raw() != ca_cert.subject().as_raw() {
        return Err(PkiError::CaSubject(format!(
            "its subject {} cannot be written back exactly",
            ca_cert.subject()
        )));
    }
    Ok(CertPair {
        cert: cert.pem(),
        key: key.serialize_pem(),
    })
}

/// An ECDSA P-256 private key, PKCS#8 PEM (kube-apiserver's `--service-account-signing-key-file`
/// and the controller-manager's `--service-account-private-key-file`), and its public key, PEM
/// `PUBLIC KEY` (kube-apiserver's `--service-account-key-file`).
pub fn service_account_key() -> Result<(String, String), PkiError> {
    let key = KeyPair::generate()?;
    Ok((key.serialize_pem(), key.public_key_pem()))
}

/// What a certificate PEM says (its first block, when it holds a chain).
pub fn inspect(cert_pem: &str) -> Result<CertFacts, PkiError> {
    let der = cert_der(cert_pem)?;
    facts(&parse_der(&der)?)
}

/// Why the leaf `current` must be issued again for `spec` and `ca`, or `None` when it is good: its
/// PEMs read, its key is its certificate's, `ca` signed it, it is valid at `now` and stays so
/// beyond `now` + `renew_before`, and its names and usage are the spec's (compared as sets:
/// order and duplicates do not matter).
pub fn leaf_renewal(
    current: Option<&CertPair>,
    ca: &CertPair,
    spec: &LeafSpec,
    now: SystemTime,
    renew_before: Duration,
) -> Option<Renewal> {
    let Some(current) = current else {
        return Some(Renewal::Missing);
    };
    let check = || -> Result<Option<Renewal>, String> {
        let der = cert_der(&current.cert).map_err(|e| e.to_string())?;
        let leaf = parse_der(&der).map_err(|e| e.to_string())?;
        let facts = facts(&leaf).map_err(|e| e.to_string())?;
        let key = KeyPair::from_pem(&current.key)
            .map_err(|e| PkiError::Key(e.to_string()).to_string())?;
        if !key_matches(&leaf, &key) {
            return Ok(Some(Renewal::KeyMismatch));
        }
        let ca_der = cert_der(&ca.cert).map_err(|e| format!("the CA: {e}"))?;
        let ca_cert = parse_der(&ca_der).map_err(|e| format!("the CA: {e}"))?;
        if !signed_by(&leaf, &ca_cert) {
            return Ok(Some(Renewal::NotSignedByCa));
        }
        if let Some(renewal) = validity_renewal(&facts, now, renew_before) {
            return Ok(Some(renewal));
        }
        if let Some(renewal) = names_renewal(&facts, spec) {
            return Ok(Some(renewal));
        }
        if facts.usage != Some(spec.usage) {
            return Ok(Some(Renewal::UsageChanged {
                current: facts.usage,
                wanted: spec.usage,
            }));
        }
        Ok(None)
    };
    check().unwrap_or_else(|why| Some(Renewal::Unreadable(why)))
}

/// Why the CA must be made again, or `None` when it is good: its PEMs read, its key is its
/// certificate's, it is a CA, and it is valid at `now` and stays so beyond `now` + `renew_before`.
/// A new CA invalidates every leaf (they become [`Renewal::NotSignedByCa`]).
pub fn ca_renewal(
    current: Option<&CertPair>,
    now: SystemTime,
    renew_before: Duration,
) -> Option<Renewal> {
    let Some(current) = current else {
        return Some(Renewal::Missing);
    };
    let check = || -> Result<Option<Renewal>, String> {
        let der = cert_der(&current.cert).map_err(|e| e.to_string())?;
        let cert = parse_der(&der).map_err(|e| e.to_string())?;
        let facts = facts(&cert).map_err(|e| e.to_string())?;
        let key = KeyPair::from_pem(&current.key)
            .map_err(|e| PkiError::Key(e.to_string()).to_string())?;
        if !key_matches(&cert, &key) {
            return Ok(Some(Renewal::KeyMismatch));
        }
        if !facts.is_ca {
            return Ok(Some(Renewal::NotACa));
        }
        Ok(validity_renewal(&facts, now, renew_before))
    };
    check().unwrap_or_else(|why| Some(Renewal::Unreadable(why)))
}

/// Expiring or not yet valid at `now`.
fn validity_renewal(facts: &CertFacts, now: SystemTime, renew_before: Duration) -> Option<Renewal> {
    if now < facts.not_before {
        return Some(Renewal::NotYetValid {
            not_before: facts.not_before,
        });
    }
    // An overflow is a horizon beyond any certificate: expiring.
    let horizon = now.checked_add(renew_before);
    if horizon.is_none_or(|horizon| horizon >= facts.not_after) {
        return Some(Renewal::Expiring {
            not_after: facts.not_after,
        });
    }
    None
}

/// The differences between the certificate's names and the spec's, as sets.
fn names_renewal(facts: &CertFacts, spec: &LeafSpec) -> Option<Renewal> {
    let wanted_dns: BTreeSet<&str> = spec.dns_names.iter().map(String::as_str).collect();
    let have_dns: BTreeSet<&str> = facts.dns_names.iter().map(String::as_str).collect();
    let wanted_ips: BTreeSet<IpAddr> = spec.ips.iter().copied().collect();
    let have_ips: BTreeSet<IpAddr> = facts.ips.iter().copied().collect();
    let wanted_orgs: BTreeSet<&str> = spec.organizations.iter().map(String::as_str).collect();
    let have_orgs: BTreeSet<&str> = facts.organizations.iter().map(String::as_str).collect();

    let missing_dns: Vec<String> = wanted_dns
        .difference(&have_dns)
        .map(|s| s.to_string())
        .collect();
    let extra_dns: Vec<String> = have_dns
        .difference(&wanted_dns)
        .map(|s| s.to_string())
        .collect();
    let missing_ips: Vec<IpAddr> = wanted_ips.difference(&have_ips).copied().collect();
    let extra_ips: Vec<IpAddr> = have_ips.difference(&wanted_ips).copied().collect();
    let subject_changed =
        facts.common_name.as_deref() != Some(spec.common_name.as_str()) || wanted_orgs != have_orgs;

    let changed = !missing_dns.is_empty()
        || !extra_dns.is_empty()
        || !missing_ips.is_empty()
        || !extra_ips.is_empty()
        || subject_changed;
    changed.then_some(Renewal::NamesChanged {
        missing_dns,
        missing_ips,
        extra_dns,
        extra_ips,
        subject_changed,
    })
}

/// The DER of a PEM's first block, which must be a certificate.
fn cert_der(pem: &str) -> Result<Vec<u8>, PkiError> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes())
        .map_err(|e| PkiError::Certificate(format!("no PEM block: {e}")))?;
    if block.label != "CERTIFICATE" {
        return Err(PkiError::Certificate(format!(
            "a PEM block of {:?}, not CERTIFICATE",
            block.label
        )));
    }
    Ok(block.contents)
}

fn parse_der(der: &[u8]) -> Result<X509Certificate<'_>, PkiError> {
    let (rest, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| PkiError::Certificate(e.to_string()))?;
    if !rest.is_empty() {
        return Err(PkiError::Certificate(format!(
            "{} bytes after the certificate",
            rest.len()
        )));
    }
    Ok(cert)
}

fn facts(cert: &X509Certificate<'_>) -> Result<CertFacts, PkiError> {
    let bad = |what: &str, e: &dyn fmt::Display| PkiError::Certificate(format!("{what}: {e}"));
    let subject = cert.subject();
    let common_name = subject
        .iter_common_name()
        .next()
        .map(|cn| cn.as_str().map(str::to_owned))
        .transpose()
        .map_err(|e| bad("the CN", &e))?;
    let organizations = subject
        .iter_organization()
        .map(|o| o.as_str().map(str::to_owned))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad("an O", &e))?;

    let mut dns_names = Vec::new();
    let mut ips = Vec::new();
    let san = cert
        .subject_alternative_name()
        .map_err(|e| bad("the subject alternative names", &e))?;
    for name in san.iter().flat_map(|san| san.value.general_names.iter()) {
        match name {
            GeneralName::DNSName(dns) => dns_names.push((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => ips.push(ip_of(bytes).ok_or_else(|| {
                PkiError::Certificate(format!("an IP address of {} bytes", bytes.len()))
            })?),
            // Other kinds (e-mail, URI) are never issued here and name nothing TLS checks.
            _ => {}
        }
    }

    let is_ca = cert
        .basic_constraints()
        .map_err(|e| bad("basicConstraints", &e))?
        .is_some_and(|bc| bc.value.ca);
    let usage = cert
        .extended_key_usage()
        .map_err(|e| bad("extendedKeyUsage", &e))?
        .and_then(|eku| match (eku.value.server_auth, eku.value.client_auth) {
            (true, true) => Some(Usage::ServerAndClient),
            (true, false) => Some(Usage::Server),
            (false, true) => Some(Usage::Client),
            (false, false) => None,
        });

    let validity = cert.validity();
    Ok(CertFacts {
        common_name,
        organizations,
        dns_names,
        ips,
        not_before: system_time(validity.not_before.timestamp())?,
        not_after: system_time(validity.not_after.timestamp())?,
        is_ca,
        usage,
    })
}

fn ip_of(bytes: &[u8]) -> Option<IpAddr> {
    if let Ok(v4) = <[u8; 4]>::try_from(bytes) {
        return Some(IpAddr::V4(Ipv4Addr::from(v4)));
    }
    <[u8; 16]>::try_from(bytes)
        .ok()
        .map(|v6| IpAddr::V6(Ipv6Addr::from(v6)))
}

/// Whether `key` is the private half of the certificate's public key. The raw public keys are
/// compared (for ECDSA, the curve point), not the SubjectPublicKeyInfo encodings, which may
/// spell the same algorithm differently.
fn key_matches(cert: &X509Certificate<'_>, key: &KeyPair) -> bool {
    cert.public_key().subject_public_key.as_ref() == key.public_key_raw()
}

/// Whether `ca` signed `leaf`: the leaf names the CA's subject as its issuer (what a verifier
/// builds the chain by) and the CA's key verifies its signature.
fn signed_by(leaf: &X509Certificate<'_>, ca: &X509Certificate<'_>) -> bool {
    leaf.issuer().as_raw() == ca.subject().as_raw()
        && leaf.verify_signature(Some(ca.public_key())).is_ok()
}

/// What rcgen needs of a CA to sign with it: its subject (a leaf's issuer name) and its subject
/// key identifier (a leaf's authority key identifier). rcgen's own `Issuer::from_ca_cert_pem`
/// needs its `x509-parser` feature and panics on an empty RDN; this reads the CA already parsed
/// and refuses what it cannot write back.
fn issuer_params(ca: &X509Certificate<'_>) -> Result<CertificateParams, PkiError> {
    let mut params = CertificateParams::default();
    params.distinguished_name = distinguished_name(ca.subject())?;
    let ski = ca
        .iter_extensions()
        .find_map(|ext| match ext.parsed_extension() {
            x509_parser::extensions::ParsedExtension::SubjectKeyIdentifier(id) => {
                Some(id.0.to_vec())
            }
            _ => None,
        });
    // Without one (not a CA made here), rcgen derives the identifier from the CA's key, as it
    // does for the CAs it makes.
    if let Some(ski) = ski {
        params.key_identifier_method = KeyIdMethod::PreSpecified(ski);
    }
    Ok(params)
}

/// A parsed name as rcgen's `DistinguishedName`: one attribute per RDN, of the common types, in
/// UTF8String, PrintableString or IA5String (what CAs are made with, here and by kubeadm).
fn distinguished_name(name: &X509Name<'_>) -> Result<DistinguishedName, PkiError> {
    use x509_parser::oid_registry as oids;
    let refuse = |why: String| PkiError::CaSubject(format!("its subject {name} has {why}"));
    let mut dn = DistinguishedName::new();
    for rdn in name.iter() {
        let mut attributes = rdn.iter();
        let (Some(attribute), None) = (attributes.next(), attributes.next()) else {
            return Err(refuse("an RDN of other than one attribute".into()));
        };
        let oid = attribute.attr_type();
        // Only the types rcgen names: a custom OID would be written by yasna, which panics on
        // some it cannot encode.
        let ty = if *oid == oids::OID_X509_COMMON_NAME {
            DnType::CommonName
        } else if *oid == oids::OID_X509_ORGANIZATION_NAME {
            DnType::OrganizationName
        } else if *oid == oids::OID_X509_ORGANIZATIONAL_UNIT {
            DnType::OrganizationalUnitName
        } else if *oid == oids::OID_X509_COUNTRY_NAME {
            DnType::CountryName
        } else if *oid == oids::OID_X509_STATE_OR_PROVINCE_NAME {
            DnType::StateOrProvinceName
        } else if *oid == oids::OID_X509_LOCALITY_NAME {
            DnType::LocalityName
        } else {
            return Err(refuse(format!("an attribute of type {oid}")));
        };
        let value = attribute.attr_value();
        let text = std::str::from_utf8(value.data)
            .map_err(|_| refuse("an attribute that is not text".into()))?;
        let value = match value.header.tag() {
            Tag::Utf8String => DnValue::Utf8String(text.to_owned()),
            Tag::PrintableString => DnValue::PrintableString(
                PrintableString::try_from(text).map_err(|e| refuse(e.to_string()))?,
            ),
            Tag::Ia5String => {
                DnValue::Ia5String(Ia5String::try_from(text).map_err(|e| refuse(e.to_string()))?)
            }
            tag => return Err(refuse(format!("an attribute in {tag}"))),
        };
        dn.push(ty, value);
    }
    Ok(dn)
}

/// A leaf's subject: CN, then the organizations. rcgen's `DistinguishedName` keeps one value per
/// attribute type, so a second organization is pushed as a custom type of the same OID (2.5.4.10):
/// keyed apart by rcgen, written identically, and read back as an O by every parser.
fn subject(common_name: &str, organizations: &[String]) -> Result<DistinguishedName, PkiError> {
    const ORGANIZATION_OID: [u64; 4] = [2, 5, 4, 10];
    let organizations = distinct(organizations);
    if organizations.len() > MAX_ORGANIZATIONS {
        return Err(PkiError::TooManyOrganizations(organizations.len()));
    }
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    for (i, organization) in organizations.into_iter().enumerate() {
        let ty = if i == 0 {
            DnType::OrganizationName
        } else {
            DnType::CustomDnType(ORGANIZATION_OID.to_vec())
        };
        dn.push(ty, organization);
    }
    Ok(dn)
}

/// The values in their first order, without repeats (a spec naming a host twice gets one SAN).
fn distinct<T: Ord + Clone>(values: &[T]) -> Vec<T> {
    let mut seen = BTreeSet::new();
    values.iter().filter(|v| seen.insert(*v)).cloned().collect()
}

fn set_validity(
    params: &mut CertificateParams,
    now: SystemTime,
    validity: Duration,
) -> Result<(), PkiError> {
    let not_before = now
        .checked_sub(CLOCK_SKEW)
        .ok_or_else(|| PkiError::Time(format!("now - {CLOCK_SKEW:?}")))?;
    let not_after = now
        .checked_add(validity)
        .ok_or_else(|| PkiError::Time(format!("now + {validity:?}")))?;
    params.not_before = offset_date_time(not_before)?;
    params.not_after = offset_date_time(not_after)?;
    Ok(())
}

/// Whole seconds (certificate times have no fractions), rounded down.
fn offset_date_time(t: SystemTime) -> Result<OffsetDateTime, PkiError> {
    let out_of_range = || PkiError::Time(format!("{}", EpochSeconds(t)));
    let secs = match t.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).map_err(|_| out_of_range())?,
        Err(before) => {
            let before = before.duration();
            let whole = i64::try_from(before.as_secs()).map_err(|_| out_of_range())?;
            // Rounded down means away from the epoch here.
            -whole - i64::from(before.subsec_nanos() > 0)
        }
    };
    OffsetDateTime::from_unix_timestamp(secs).map_err(|_| out_of_range())
}

fn system_time(unix_seconds: i64) -> Result<SystemTime, PkiError> {
    let magnitude = Duration::from_secs(unix_seconds.unsigned_abs());
    let t = if unix_seconds >= 0 {
        UNIX_EPOCH.checked_add(magnitude)
    } else {
        UNIX_EPOCH.checked_sub(magnitude)
    };
    t.ok_or_else(|| PkiError::Time(format!("{unix_seconds}s from the epoch")))
}

/// 16 random bytes, positive (top bit clear) and never shorter (next bit set): serials must be
/// unique per CA, and a leaf issued again for the same spec must not repeat one (rcgen's default
/// is a hash of the public key).
fn random_serial() -> SerialNumber {
    let mut bytes: [u8; 16] = rand::random();
    bytes[0] = (bytes[0] & 0x7f) | 0x40;
    SerialNumber::from_slice(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: Duration = Duration::from_secs(24 * 60 * 60);
    const YEAR: Duration = Duration::from_secs(365 * 24 * 60 * 60);

    /// A fixed "now" (2025-01-01T00:00:00Z and a fraction): nothing here reads the clock.
    fn now() -> SystemTime {
        UNIX_EPOCH + Duration::new(1_735_689_600, 123_456_789)
    }

    fn serving_spec() -> LeafSpec {
        LeafSpec {
            common_name: "kube-apiserver".into(),
            organizations: vec![],
            dns_names: vec![
                "kubernetes".into(),
                "kubernetes.default.svc".into(),
                "demo-apiserver.ns.svc".into(),
            ],
            ips: vec![
                IpAddr::V4(Ipv4Addr::new(10, 96, 0, 1)),
                IpAddr::V6(Ipv6Addr::LOCALHOST),
            ],
            usage: Usage::Server,
        }
    }

    fn client_spec() -> LeafSpec {
        LeafSpec {
            common_name: "kubernetes-admin".into(),
            organizations: vec!["system:masters".into()],
            dns_names: vec![],
            ips: vec![],
            usage: Usage::Client,
        }
    }

    fn ca() -> CertPair {
        new_ca("kubernetes", now(), 10 * YEAR).unwrap()
    }

    #[test]
    fn a_ca_and_a_leaf_round_trip_through_inspect() {
        let ca = ca();
        let ca_facts = inspect(&ca.cert).unwrap();
        assert_eq!(ca_facts.common_name.as_deref(), Some("kubernetes"));
        assert!(ca_facts.is_ca);
        assert_eq!(
            ca_facts.not_before,
            UNIX_EPOCH + Duration::from_secs(1_735_689_300)
        );
        assert_eq!(
            ca_facts.not_after,
            UNIX_EPOCH + Duration::from_secs(1_735_689_600) + 10 * YEAR
        );

        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let facts = inspect(&leaf.cert).unwrap();
        assert_eq!(
            facts,
            CertFacts {
                common_name: Some("kube-apiserver".into()),
                organizations: vec![],
                dns_names: spec.dns_names.clone(),
                ips: spec.ips.clone(),
                // Whole seconds, CLOCK_SKEW before now.
                not_before: UNIX_EPOCH + Duration::from_secs(1_735_689_600 - 300),
                not_after: UNIX_EPOCH + Duration::from_secs(1_735_689_600) + YEAR,
                is_ca: false,
                usage: Some(Usage::Server),
            }
        );
        assert!(
            leaf.key.starts_with("-----BEGIN PRIVATE KEY-----"),
            "PKCS#8"
        );

        let client = issue(&ca, &client_spec(), now(), YEAR).unwrap();
        let facts = inspect(&client.cert).unwrap();
        assert_eq!(facts.common_name.as_deref(), Some("kubernetes-admin"));
        assert_eq!(facts.organizations, vec!["system:masters".to_string()]);
        assert_eq!(facts.usage, Some(Usage::Client));
        assert!(facts.dns_names.is_empty() && facts.ips.is_empty());
    }

    #[test]
    fn two_organizations_are_two_o_values_and_three_are_refused() {
        let ca = ca();
        let mut spec = client_spec();
        spec.organizations = vec!["system:masters".into(), "ops".into(), "ops".into()];
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let facts = inspect(&leaf.cert).unwrap();
        assert_eq!(facts.organizations, vec!["system:masters", "ops"]);
        assert_eq!(leaf_renewal(Some(&leaf), &ca, &spec, now(), DAY), None);

        spec.organizations.push("third".into());
        assert!(matches!(
            issue(&ca, &spec, now(), YEAR),
            Err(PkiError::TooManyOrganizations(3))
        ));
    }

    #[test]
    fn a_dns_name_that_is_not_ascii_is_refused() {
        let mut spec = serving_spec();
        spec.dns_names.push("kübernetes".into());
        let err = issue(&ca(), &spec, now(), YEAR).unwrap_err();
        assert!(matches!(err, PkiError::DnsName { .. }), "{err}");
        assert!(err.to_string().contains("kübernetes"), "{err}");
    }

    #[test]
    fn fresh_certificates_need_no_renewal() {
        let ca = ca();
        assert_eq!(ca_renewal(Some(&ca), now(), 30 * DAY), None);
        for spec in [serving_spec(), client_spec()] {
            let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
            assert_eq!(leaf_renewal(Some(&leaf), &ca, &spec, now(), 30 * DAY), None);
            // Nor a little later, nor with the names listed in another order or twice.
            let mut shuffled = spec.clone();
            shuffled.dns_names.reverse();
            shuffled.ips.reverse();
            shuffled.dns_names.extend(spec.dns_names.clone());
            let later = now() + 100 * DAY;
            assert_eq!(
                leaf_renewal(Some(&leaf), &ca, &shuffled, later, 30 * DAY),
                None
            );
        }
    }

    #[test]
    fn missing_certificates_are_missing() {
        let ca = ca();
        assert_eq!(
            leaf_renewal(None, &ca, &serving_spec(), now(), DAY),
            Some(Renewal::Missing)
        );
        assert_eq!(ca_renewal(None, now(), DAY), Some(Renewal::Missing));
    }

    #[test]
    fn a_changed_name_or_subject_renews() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();

        let mut added = spec.clone();
        added.dns_names.push("api.example.com".into());
        added.ips.push(IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7)));
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &added, now(), DAY),
            Some(Renewal::NamesChanged {
                missing_dns: vec!["api.example.com".into()],
                missing_ips: vec![IpAddr::V4(Ipv4Addr::new(192, 0, 2, 7))],
                extra_dns: vec![],
                extra_ips: vec![],
                subject_changed: false,
            })
        );

        let mut removed = spec.clone();
        removed.dns_names.retain(|d| d != "kubernetes");
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &removed, now(), DAY),
            Some(Renewal::NamesChanged {
                missing_dns: vec![],
                missing_ips: vec![],
                extra_dns: vec!["kubernetes".into()],
                extra_ips: vec![],
                subject_changed: false,
            })
        );

        let mut renamed = spec.clone();
        renamed.common_name = "apiserver".into();
        assert!(matches!(
            leaf_renewal(Some(&leaf), &ca, &renamed, now(), DAY),
            Some(Renewal::NamesChanged {
                subject_changed: true,
                ..
            })
        ));

        let mut grouped = spec.clone();
        grouped.organizations = vec!["system:masters".into()];
        assert!(matches!(
            leaf_renewal(Some(&leaf), &ca, &grouped, now(), DAY),
            Some(Renewal::NamesChanged {
                subject_changed: true,
                ..
            })
        ));

        // Re-issued for the new spec, it is stable again.
        let again = issue(&ca, &added, now(), YEAR).unwrap();
        assert_eq!(leaf_renewal(Some(&again), &ca, &added, now(), DAY), None);
    }

    #[test]
    fn a_changed_usage_renews() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let peer = LeafSpec {
            usage: Usage::ServerAndClient,
            ..spec
        };
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &peer, now(), DAY),
            Some(Renewal::UsageChanged {
                current: Some(Usage::Server),
                wanted: Usage::ServerAndClient,
            })
        );
        let again = issue(&ca, &peer, now(), YEAR).unwrap();
        assert_eq!(
            inspect(&again.cert).unwrap().usage,
            Some(Usage::ServerAndClient)
        );
        assert_eq!(leaf_renewal(Some(&again), &ca, &peer, now(), DAY), None);
    }

    #[test]
    fn close_to_expiry_renews() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let not_after = inspect(&leaf.cert).unwrap().not_after;
        let renew_before = 30 * DAY;
        // One second before the window opens: good.
        let just_before = not_after - renew_before - Duration::from_secs(1);
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &spec, just_before, renew_before),
            None
        );
        // In the window, and past the end.
        for at in [not_after - renew_before, not_after - DAY, not_after + DAY] {
            assert_eq!(
                leaf_renewal(Some(&leaf), &ca, &spec, at, renew_before),
                Some(Renewal::Expiring { not_after })
            );
        }
        // A horizon beyond what SystemTime holds is past any certificate.
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &spec, now(), Duration::MAX),
            Some(Renewal::Expiring { not_after })
        );
    }

    #[test]
    fn a_clock_gone_back_renews_and_the_skew_is_allowed() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let not_before = inspect(&leaf.cert).unwrap().not_before;
        let skewed = now() - Duration::from_secs(4 * 60);
        assert_eq!(leaf_renewal(Some(&leaf), &ca, &spec, skewed, DAY), None);
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &spec, now() - DAY, DAY),
            Some(Renewal::NotYetValid { not_before })
        );
    }

    #[test]
    fn a_leaf_of_another_ca_renews() {
        let ca = ca();
        let other = new_ca("kubernetes", now(), 10 * YEAR).unwrap();
        let spec = serving_spec();
        // Same subject, another key: only the signature tells them apart.
        let leaf = issue(&other, &spec, now(), YEAR).unwrap();
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &spec, now(), DAY),
            Some(Renewal::NotSignedByCa)
        );
        // Another subject: the issuer name differs too.
        let etcd_ca = new_ca("etcd-ca", now(), 10 * YEAR).unwrap();
        let leaf = issue(&etcd_ca, &spec, now(), YEAR).unwrap();
        assert_eq!(
            leaf_renewal(Some(&leaf), &ca, &spec, now(), DAY),
            Some(Renewal::NotSignedByCa)
        );
    }

    #[test]
    fn a_key_that_is_not_the_certificates_renews() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let other = issue(&ca, &spec, now(), YEAR).unwrap();
        let mixed = CertPair {
            cert: leaf.cert.clone(),
            key: other.key.clone(),
        };
        assert_eq!(
            leaf_renewal(Some(&mixed), &ca, &spec, now(), DAY),
            Some(Renewal::KeyMismatch)
        );
        let ca_mixed = CertPair {
            cert: ca.cert.clone(),
            key: leaf.key.clone(),
        };
        assert_eq!(
            ca_renewal(Some(&ca_mixed), now(), DAY),
            Some(Renewal::KeyMismatch)
        );
        assert!(matches!(
            issue(&ca_mixed, &spec, now(), YEAR),
            Err(PkiError::CaKeyMismatch)
        ));
    }

    #[test]
    fn garbage_is_unreadable_not_a_panic() {
        let ca = ca();
        let spec = serving_spec();
        let leaf = issue(&ca, &spec, now(), YEAR).unwrap();
        let truncated = &leaf.cert[..leaf.cert.len() / 2];
        let corrupted = leaf.cert.replacen("MII", "MIJ", 1);
        let not_base64 = "-----BEGIN CERTIFICATE-----\n!!!!\n-----END CERTIFICATE-----\n";
        let bad_certs = [
            "",
            "garbage",
            truncated,
            corrupted.as_str(),
            not_base64,
            // A PEM, but of a key.
            leaf.key.as_str(),
        ];
        for bad in bad_certs {
            let pair = CertPair {
                cert: bad.into(),
                key: leaf.key.clone(),
            };
            assert!(
                matches!(
                    leaf_renewal(Some(&pair), &ca, &spec, now(), DAY),
                    Some(Renewal::Unreadable(_))
                ),
                "{bad:?}"
            );
            assert!(matches!(
                ca_renewal(Some(&pair), now(), DAY),
                Some(Renewal::Unreadable(_))
            ));
            assert!(inspect(bad).is_err(), "{bad:?}");
            // As the CA: the leaf cannot be checked, and nothing can be issued.
            let bad_ca = CertPair {
                cert: bad.into(),
                key: ca.key.clone(),
            };
            assert!(matches!(
                leaf_renewal(Some(&leaf), &bad_ca, &spec, now(), DAY),
                Some(Renewal::Unreadable(_))
            ));
            assert!(matches!(
                issue(&bad_ca, &spec, now(), YEAR),
                Err(PkiError::CaUnreadable(_))
            ));
        }
        for bad_key in ["", "garbage", leaf.cert.as_str()] {
            let pair = CertPair {
                cert: leaf.cert.clone(),
                key: bad_key.into(),
            };
            let renewal = leaf_renewal(Some(&pair), &ca, &spec, now(), DAY);
            assert!(
                matches!(&renewal, Some(Renewal::Unreadable(why)) if why.contains("private key")),
                "{renewal:?}"
            );
        }
    }

    #[test]
    fn ca_renewal_checks_expiry_and_caness() {
        let ca = ca();
        let not_after = inspect(&ca.cert).unwrap().not_after;
        assert_eq!(ca_renewal(Some(&ca), now(), 365 * DAY), None);
        assert_eq!(
            ca_renewal(Some(&ca), not_after - 10 * DAY, 365 * DAY),
            Some(Renewal::Expiring { not_after })
        );
        let leaf = issue(&ca, &serving_spec(), now(), YEAR).unwrap();
        assert_eq!(ca_renewal(Some(&leaf), now(), DAY), Some(Renewal::NotACa));
        assert!(matches!(
            issue(&leaf, &serving_spec(), now(), YEAR),
            Err(PkiError::NotACa)
        ));
        // After the CA is made again, its old leaves are issued again.
        let renewed = new_ca("kubernetes", not_after - 10 * DAY, 10 * YEAR).unwrap();
        assert_eq!(
            leaf_renewal(Some(&leaf), &renewed, &serving_spec(), now(), DAY),
            Some(Renewal::NotSignedByCa)
        );
    }

    #[test]
    fn a_service_account_key_pair_parses_and_matches() {
        let (private, public) = service_account_key().unwrap();
        assert!(private.starts_with("-----BEGIN PRIVATE KEY-----"));
        assert!(public.starts_with("-----BEGIN PUBLIC KEY-----"));
        let key = KeyPair::from_pem(&private).unwrap();
        assert_eq!(key.public_key_pem(), public);
        let (other, _) = service_account_key().unwrap();
        assert_ne!(private, other, "a new key each time");
    }

    #[test]
    fn debug_never_prints_the_key() {
        let ca = ca();
        let printed = format!("{ca:?}");
        assert!(!printed.contains("PRIVATE"), "{printed}");
        let body: String = ca.key.lines().nth(1).unwrap().into();
        assert!(!printed.contains(&body), "{printed}");
        assert!(printed.contains("redacted"), "{printed}");
    }

    #[test]
    fn serials_differ_between_issues() {
        let ca = ca();
        let spec = client_spec();
        let serial = |pair: &CertPair| {
            let der = cert_der(&pair.cert).unwrap();
            parse_der(&der).unwrap().raw_serial().to_vec()
        };
        let a = issue(&ca, &spec, now(), YEAR).unwrap();
        let b = issue(&ca, &spec, now(), YEAR).unwrap();
        assert_ne!(serial(&a), serial(&b));
        assert_eq!(serial(&a).len(), 16);
    }

    /// What clients do with a serving certificate: webpki (through rustls) builds the chain to the
    /// CA, checks the name, the validity and the serverAuth usage.
    #[test]
    fn a_serving_certificate_verifies_with_webpki() {
        use rustls::client::danger::ServerCertVerifier as _;
        use rustls::pki_types::pem::PemObject as _;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};

        let ca = ca();
        let der = |pem: &str| CertificateDer::from_pem_slice(pem.as_bytes()).unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(der(&ca.cert)).unwrap();
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            std::sync::Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        let at = UnixTime::since_unix_epoch(now().duration_since(UNIX_EPOCH).unwrap());
        let verify = |pair: &CertPair, name: &str| {
            verifier.verify_server_cert(
                &der(&pair.cert),
                &[],
                &ServerName::try_from(name.to_owned()).unwrap(),
                &[],
                at,
            )
        };

        let serving = issue(&ca, &serving_spec(), now(), YEAR).unwrap();
        for name in [
            "kubernetes.default.svc",
            "demo-apiserver.ns.svc",
            "10.96.0.1",
            "::1",
        ] {
            verify(&serving, name).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        assert!(verify(&serving, "elsewhere.example.com").is_err());
        // A client certificate is no server's, even with the name.
        let mut client_named = client_spec();
        client_named.dns_names = vec!["kubernetes".into()];
        let client = issue(&ca, &client_named, now(), YEAR).unwrap();
        assert!(verify(&client, "kubernetes").is_err());
        // Signed by another CA: refused.
        let other = new_ca("kubernetes", now(), YEAR).unwrap();
        let foreign = issue(&other, &serving_spec(), now(), YEAR).unwrap();
        assert!(verify(&foreign, "kubernetes").is_err());
    }
}
