//! Encryption at rest: AES-256-GCM in a small versioned binary envelope.
//!
//! ```text
//! "VGLV" | format (1 byte, = 1) | key id (8 bytes) | nonce (12 bytes) | ciphertext + 16-byte tag
//! ```
//!
//! The key id (the first 8 bytes of SHA-256 over a label and the key) tells a wrong key apart from
//! a damaged record: a different id is [`Error::WrongKey`], the same id with a failing tag is
//! [`Error::Corrupt`]. The header and the object's key are the additional authenticated data, so a
//! record copied under another object's name, or a header edited, fails authentication instead of
//! being applied to the wrong object. The nonce is random per record (96 bits): a vault writes far
//! fewer than the 2^32 records per key where random nonces start to be a concern.

use aes_gcm::aead::{Aead, Payload};
use aes_gcm::{Aes256Gcm, KeyInit};
use base64::Engine as _;
use rand::RngCore as _;
use sha2::Digest as _;

use crate::Error;

const MAGIC: &[u8; 4] = b"VGLV";
const FORMAT: u8 = 1;
const KEY_ID_LEN: usize = 8;
const NONCE_LEN: usize = 12;
const HEADER_LEN: usize = MAGIC.len() + 1 + KEY_ID_LEN;
/// Bytes an envelope adds to the plaintext: header, nonce, tag.
pub const ENVELOPE_OVERHEAD: usize = HEADER_LEN + NONCE_LEN + 16;

/// A 256-bit key for AES-256-GCM.
#[derive(Clone)]
pub struct EncryptionKey {
    cipher: Aes256Gcm,
    id: [u8; KEY_ID_LEN],
}

impl std::fmt::Debug for EncryptionKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptionKey")
            .field("id", &self.id())
            .finish_non_exhaustive()
    }
}

impl EncryptionKey {
    /// A key from 32 raw bytes, or from base64 text (surrounding whitespace ignored) of 32 bytes
    /// — what `head -c 32 /dev/urandom | base64` or a Kubernetes Secret's data gives.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, Error> {
        if bytes.len() == 32 {
            return Self::from_raw(bytes);
        }
        let text = std::str::from_utf8(bytes)
            .map_err(|_| {
                Error::InvalidKey(format!(
                    "{} bytes; need 32 raw bytes or their base64",
                    bytes.len()
                ))
            })?
            .trim();
        let raw = base64::engine::general_purpose::STANDARD
            .decode(text)
            .map_err(|e| Error::InvalidKey(format!("neither 32 raw bytes nor base64: {e}")))?;
        if raw.len() != 32 {
            return Err(Error::InvalidKey(format!(
                "base64 decodes to {} bytes; AES-256 needs 32",
                raw.len()
            )));
        }
        Self::from_raw(&raw)
    }

    /// A key read from a file (32 raw bytes or base64 text).
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let bytes = std::fs::read(path).map_err(|e| Error::io(path.display(), e))?;
        Self::from_bytes(&bytes).map_err(|e| match e {
            Error::InvalidKey(reason) => Error::InvalidKey(format!("{}: {reason}", path.display())),
            other => other,
        })
    }

    fn from_raw(raw: &[u8]) -> Result<Self, Error> {
        let cipher = Aes256Gcm::new_from_slice(raw)
            .map_err(|_| Error::InvalidKey("AES-256 needs 32 bytes".into()))?;
        let mut hasher = sha2::Sha256::new();
        hasher.update(b"vigil-vault key id\0");
        hasher.update(raw);
        let digest = hasher.finalize();
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Ok(Self { cipher, id })
    }

    /// The key's public fingerprint (hex), stored in every envelope.
    pub fn id(&self) -> String {
        hex(&self.id)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Whether stored bytes are an envelope (rather than plain JSON).
pub(crate) fn is_envelope(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}

/// Encrypts `plaintext` for the object named `context` (its key, bound as authenticated data).
pub(crate) fn seal(key: &EncryptionKey, context: &str, plaintext: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(plaintext.len() + ENVELOPE_OVERHEAD);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    out.extend_from_slice(&key.id);
    let mut nonce = [0u8; NONCE_LEN];
    rand::rng().fill_bytes(&mut nonce);
    let aad = aad(&out[..HEADER_LEN], context);
    let ciphertext = key
        .cipher
        .encrypt(
            &nonce.into(),
            Payload {
                msg: plaintext,
                aad: &aad,
            },
        )
        // AES-GCM encryption fails only past 64 GiB of plaintext; records are small JSON.
        .unwrap_or_default();
    out.extend_from_slice(&nonce);
    out.extend_from_slice(&ciphertext);
    out
}

/// Decrypts an envelope; `what` names the record in errors.
pub(crate) fn open(
    key: Option<&EncryptionKey>,
    context: &str,
    what: &str,
    bytes: &[u8],
) -> Result<Vec<u8>, Error> {
    let corrupt = |reason: &str| Error::Corrupt {
        what: what.to_owned(),
        reason: reason.to_owned(),
    };
    if bytes.len() < ENVELOPE_OVERHEAD {
        return Err(corrupt("encrypted envelope is truncated"));
    }
    let format = bytes[MAGIC.len()];
    if format != FORMAT {
        return Err(corrupt(&format!(
            "unknown envelope format {format} (this Vigil reads format {FORMAT})"
        )));
    }
    let found_id = &bytes[MAGIC.len() + 1..HEADER_LEN];
    let Some(key) = key else {
        return Err(Error::KeyRequired {
            what: what.to_owned(),
            key_id: hex(found_id),
        });
    };
    if found_id != key.id {
        return Err(Error::WrongKey {
            what: what.to_owned(),
            found: hex(found_id),
            expected: key.id(),
        });
    }
    let mut nonce = [0u8; NONCE_LEN];
    nonce.copy_from_slice(&bytes[HEADER_LEN..HEADER_LEN + NONCE_LEN]);
    let aad = aad(&bytes[..HEADER_LEN], context);
    key.cipher
        .decrypt(
            &nonce.into(),
            Payload {
                msg: &bytes[HEADER_LEN + NONCE_LEN..],
                aad: &aad,
            },
        )
        .map_err(|_| corrupt("authentication failed: the record was altered, truncated or stored under another object's name"))
}

fn aad(header: &[u8], context: &str) -> Vec<u8> {
    let mut aad = header.to_vec();
    aad.extend_from_slice(context.as_bytes());
    aad
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(byte: u8) -> EncryptionKey {
        EncryptionKey::from_bytes(&[byte; 32]).unwrap()
    }

    #[test]
    fn round_trip() {
        let k = key(1);
        let sealed = seal(&k, "ctx", b"{\"a\":1}");
        assert!(is_envelope(&sealed));
        assert_eq!(sealed.len(), 7 + ENVELOPE_OVERHEAD);
        assert_eq!(open(Some(&k), "ctx", "r", &sealed).unwrap(), b"{\"a\":1}");
    }

    #[test]
    fn nonces_differ_between_records() {
        let k = key(1);
        assert_ne!(seal(&k, "ctx", b"same"), seal(&k, "ctx", b"same"));
    }

    #[test]
    fn wrong_key_missing_key_tampering_and_moved_record_are_told_apart() {
        let sealed = seal(&key(1), "ctx", b"secret");
        assert!(matches!(
            open(Some(&key(2)), "ctx", "r", &sealed),
            Err(Error::WrongKey { .. })
        ));
        assert!(matches!(
            open(None, "ctx", "r", &sealed),
            Err(Error::KeyRequired { .. })
        ));
        let mut flipped = sealed.clone();
        let last = flipped.len() - 1;
        flipped[last] ^= 1;
        assert!(matches!(
            open(Some(&key(1)), "ctx", "r", &flipped),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            open(Some(&key(1)), "other", "r", &sealed),
            Err(Error::Corrupt { .. })
        ));
        assert!(matches!(
            open(Some(&key(1)), "ctx", "r", &sealed[..20]),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn keys_from_raw_bytes_and_base64_text() {
        let raw = [7u8; 32];
        let text = base64::engine::general_purpose::STANDARD.encode(raw);
        let a = EncryptionKey::from_bytes(&raw).unwrap();
        let b = EncryptionKey::from_bytes(format!("{text}\n").as_bytes()).unwrap();
        assert_eq!(a.id(), b.id());
        assert!(matches!(
            EncryptionKey::from_bytes(b"short"),
            Err(Error::InvalidKey(_))
        ));
        let sixteen = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        assert!(matches!(
            EncryptionKey::from_bytes(sixteen.as_bytes()),
            Err(Error::InvalidKey(_))
        ));
    }
}
