//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the client side: what Kafka brokers
//! (and Strimzi's users) use for SASL besides PLAIN.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::Mac as _;

/// The hash of a SCRAM mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    /// The SASL mechanism name.
    pub fn mechanism(self) -> &'static str {
        match self {
            Self::Sha256 => "SCRAM-SHA-256",
            Self::Sha512 => "SCRAM-SHA-512",
        }
    }

    fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        fn run<D>(key: &[u8], data: &[u8]) -> Vec<u8>
        where
            D: hmac::EagerHash,
            hmac::Hmac<D>: hmac::KeyInit + hmac::Mac,
        {
            // HMAC takes keys of any length: this cannot fail.
            let Ok(mut mac) = <hmac::Hmac<D> as hmac::KeyInit>::new_from_slice(key) else {
                return Vec::new();
            };
            mac.update(data);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Self::Sha256 => run::<sha2::Sha256>(key, data),
            Self::Sha512 => run::<sha2::Sha512>(key, data),
        }
    }

    fn hash(self, data: &[u8]) -> Vec<u8> {
        use sha2::Digest as _;
        match self {
            Self::Sha256 => sha2::Sha256::digest(data).to_vec(),
            Self::Sha512 => sha2::Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with this HMAC, one block.
    fn hi(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut block = salt.to_vec();
        block.extend_from_slice(&1u32.to_be_bytes());
        let mut u = self.hmac(password, &block);
        let mut out = u.clone();
        for _ in 1..iterations {
            u = self.hmac(password, &u);
            for (o, x) in out.iter_mut().zip(&u) {
                *o ^= x;
            }
        }
        out
    }
}

/// The most iterations a server may ask for: Kafka's own bound (`ScramMechanism`'s
/// `maxIterations`). Each costs an HMAC computed on the caller's thread, so a server asking for
/// billions would stall the client's runtime for minutes, out of reach of its timeouts.
const MAX_ITERATIONS: u32 = 16_384;

/// One SCRAM exchange.
pub(crate) struct Scram {
    hash: ScramHash,
    password: String,
    client_first_bare: String,
    nonce: String,
    /// Set once the final message is computed: the server signature to expect.
    server_signature: Option<Vec<u8>>,
}

fn escape(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

impl Scram {
    pub(crate) fn new(hash: ScramHash, username: &str, password: &str, nonce: String) -> Self {
        Self {
            hash,
            password: password.to_owned(),
            client_first_bare: format!("n={},r={nonce}", escape(username)),
            nonce,
            server_signature: None,
        }
    }

    /// A client nonce: 24 random bytes, base64.
    pub(crate) fn random_nonce() -> String {
        B64.encode(rand::random::<[u8; 24]>())
    }

    pub(crate) fn client_first(&self) -> String {
        format!("n,,{}", self.client_first_bare)
    }

    /// The client's final message, from the server's first.
    pub(crate) fn client_final(&mut self, server_first: &str) -> Result<String, String> {
        let mut nonce = None;
        let mut salt = None;
        let mut iterations = None;
        for part in server_first.split(',') {
            match part.split_once('=') {
                Some(("r", v)) => nonce = Some(v),
                Some(("s", v)) => salt = Some(B64.decode(v).map_err(|e| format!("salt: {e}"))?),
                Some(("i", v)) => iterations = v.parse::<u32>().ok(),
                Some(("e", v)) => return Err(format!("the server refused: {v}")),
                _ => {}
            }
        }
        let (Some(nonce), Some(salt), Some(iterations)) = (nonce, salt, iterations) else {
            return Err(format!("malformed server-first-message {server_first:?}"));
        };
        if !nonce.starts_with(&self.nonce) || iterations == 0 {
            return Err("the server's nonce or iteration count is invalid".into());
        }
        if iterations > MAX_ITERATIONS {
            return Err(format!(
                "the server asks for {iterations} iterations, more than Kafka's maximum of {MAX_ITERATIONS}"
            ));
        }
        let h = self.hash;
        let salted = h.hi(self.password.as_bytes(), &salt, iterations);
        let client_key = h.hmac(&salted, b"Client Key");
        let stored_key = h.hash(&client_key);
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{},{server_first},{without_proof}", self.client_first_bare);
        let signature = h.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = h.hmac(&salted, b"Server Key");
        self.server_signature = Some(h.hmac(&server_key, auth_message.as_bytes()));
        Ok(format!("{without_proof},p={}", B64.encode(proof)))
    }

    /// Checks the server's final message (mutual authentication).
    pub(crate) fn verify(&self, server_final: &str) -> Result<(), String> {
        if let Some(error) = server_final.strip_prefix("e=") {
            return Err(format!("the server refused: {error}"));
        }
        let given = server_final
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or_else(|| format!("malformed server-final-message {server_final:?}"))?;
        if Some(&given) == self.server_signature.as_ref() {
            Ok(())
        } else {
            Err(
                "the server's signature does not match: not the broker holding these credentials"
                    .into(),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677's SCRAM-SHA-256 example.
    #[test]
    fn rfc7677_example() {
        let mut scram = Scram::new(
            ScramHash::Sha256,
            "user",
            "pencil",
            "rOprNGfwEbeRWgbNEkqO".into(),
        );
        assert_eq!(scram.client_first(), "n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        assert_eq!(
            scram.client_final(server_first).expect("final"),
            "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
        );
        scram
            .verify("v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=")
            .expect("server verified");
        assert!(scram.verify("v=AAAA").is_err());
        assert!(scram.verify("e=invalid-proof").is_err());
    }

    #[test]
    fn a_server_nonce_not_extending_ours_is_refused() {
        let mut scram = Scram::new(ScramHash::Sha512, "u,=x", "p", "abc".into());
        assert_eq!(scram.client_first(), "n,,n=u=2C=3Dx,r=abc");
        assert!(scram.client_final("r=zzz,s=AAAA,i=4096").is_err());
        assert!(scram.client_final("garbage").is_err());
        assert!(scram.client_final("r=abcdef,s=AAAA,i=10").is_ok());
    }

    /// A broker echoing our nonce with `i=4294967295` would have the client compute four billion
    /// HMACs on its runtime thread (minutes, out of reach of every timeout): refused at once.
    #[test]
    fn an_iteration_count_beyond_kafkas_maximum_is_refused_not_computed() {
        let mut scram = Scram::new(ScramHash::Sha512, "u", "p", "abc".into());
        let started = std::time::Instant::now();
        let error = scram
            .client_final("r=abcdef,s=AAAA,i=4294967295")
            .expect_err("refused");
        assert!(error.contains("4294967295"), "{error}");
        assert!(started.elapsed() < std::time::Duration::from_secs(1));
        assert!(scram.client_final("r=abcdef,s=AAAA,i=16384").is_ok());
    }
}
