//! Encryption with JOSE (josekit): a signed JWT encrypted to a party's certificate (RSA-OAEP-256 key
//! wrapping, A256GCM content), as the request object of the human flow must be; and a sealed box
//! under a secret key (`dir`, A256GCM) for values only their sealer may read and trust, such as a
//! session cookie.

use josekit::jwe::{self, JweDecrypter, JweHeader, RSA_OAEP, RSA_OAEP_256};

/// The key wrapping we encrypt with; RSA-OAEP (SHA-1) is accepted when decrypting too.
pub const KEY_ALGORITHM: &str = "RSA-OAEP-256";
pub const CONTENT_ENCRYPTION: &str = "A256GCM";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JweError {
    #[error("not an encrypted JWT (a JWE has five parts)")]
    NotEncrypted,
    #[error("the key wrapping {0:?} is not accepted (RSA-OAEP-256 or RSA-OAEP)")]
    Algorithm(String),
    #[error("the certificate's public key cannot encrypt: {0}")]
    Key(String),
    #[error("cannot be decrypted with our key: {0}")]
    Decrypt(String),
    #[error("the decrypted content is not text")]
    NotText,
    #[error("cannot encrypt: {0}")]
    Encrypt(String),
    #[error("compressed content (zip) is not accepted")]
    Compressed,
}

/// 256 random bits, base64url: for codes, states, nonces, session and login ids.
pub fn random_value() -> String {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source");
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// Whether a token has the five parts of a compact JWE (a JWS has three).
pub fn is_encrypted(token: &str) -> bool {
    token.split('.').count() == 5
}

/// Encrypt `jws` (a signed JWT) to the holder of the certificate `cert_der`.
pub fn encrypt_to_certificate(cert_der: &[u8], jws: &str) -> Result<String, JweError> {
    let (_, cert) =
        x509_parser::parse_x509_certificate(cert_der).map_err(|e| JweError::Key(e.to_string()))?;
    let encrypter = RSA_OAEP_256
        .encrypter_from_der(cert.tbs_certificate.subject_pki.raw)
        .map_err(|e| JweError::Key(e.to_string()))?;
    let mut header = JweHeader::new();
    header.set_content_encryption(CONTENT_ENCRYPTION);
    header.set_content_type("JWT");
    jwe::serialize_compact(jws.as_bytes(), &header, &encrypter)
        .map_err(|e| JweError::Encrypt(e.to_string()))
}

/// The private key a party decrypts what is encrypted to its certificate with.
pub struct Decryption {
    oaep_256: Box<dyn JweDecrypter>,
    oaep: Box<dyn JweDecrypter>,
}

impl Decryption {
    pub fn from_pem(key_pem: &[u8]) -> Result<Self, JweError> {
        let key = |e: josekit::JoseError| JweError::Key(e.to_string());
        Ok(Decryption {
            oaep_256: Box::new(RSA_OAEP_256.decrypter_from_pem(key_pem).map_err(key)?),
            oaep: Box::new(RSA_OAEP.decrypter_from_pem(key_pem).map_err(key)?),
        })
    }

    /// The content of a compact JWE encrypted to us.
    pub fn decrypt(&self, token: &str) -> Result<String, JweError> {
        if !is_encrypted(token) {
            return Err(JweError::NotEncrypted);
        }
        let header =
            josekit::jwt::decode_header(token).map_err(|e| JweError::Decrypt(e.to_string()))?;
        if header.claim("zip").is_some() {
            return Err(JweError::Compressed);
        }
        let decrypter: &dyn JweDecrypter =
            match header.claim("alg").and_then(serde_json::Value::as_str) {
                Some("RSA-OAEP-256") => self.oaep_256.as_ref(),
                Some("RSA-OAEP") => self.oaep.as_ref(),
                other => return Err(JweError::Algorithm(other.unwrap_or_default().to_string())),
            };
        let (content, _) = jwe::deserialize_compact(token, decrypter)
            .map_err(|e| JweError::Decrypt(e.to_string()))?;
        String::from_utf8(content).map_err(|_| JweError::NotText)
    }
}

/// Authenticated encryption under a 256-bit secret: what it seals cannot be read or altered by
/// anyone without the secret.
pub struct SealedBox {
    encrypter: josekit::jwe::alg::direct::DirectJweEncrypter,
    decrypter: josekit::jwe::alg::direct::DirectJweDecrypter,
}

impl SealedBox {
    pub fn new(secret: &[u8; 32]) -> Result<Self, JweError> {
        let key = |e: josekit::JoseError| JweError::Key(e.to_string());
        Ok(SealedBox {
            encrypter: jwe::Dir.encrypter_from_bytes(secret).map_err(key)?,
            decrypter: jwe::Dir.decrypter_from_bytes(secret).map_err(key)?,
        })
    }

    pub fn seal(&self, content: &[u8]) -> Result<String, JweError> {
        let mut header = JweHeader::new();
        header.set_content_encryption(CONTENT_ENCRYPTION);
        jwe::serialize_compact(content, &header, &self.encrypter)
            .map_err(|e| JweError::Encrypt(e.to_string()))
    }

    /// The content, or None for anything not sealed by this box (altered, foreign, garbage).
    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        if !is_encrypted(sealed) {
            return None;
        }
        let (content, header) = jwe::deserialize_compact(sealed, &self.decrypter).ok()?;
        (header.content_encryption() == Some(CONTENT_ENCRYPTION)).then_some(content)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_box_opens_only_what_it_sealed() {
        let a = SealedBox::new(&[7; 32]).unwrap();
        let b = SealedBox::new(&[8; 32]).unwrap();
        let sealed = a.seal(b"session 1").unwrap();
        assert_eq!(a.open(&sealed).as_deref(), Some(&b"session 1"[..]));
        assert_eq!(b.open(&sealed), None, "another key");
        let other = a.seal(b"session 2").unwrap();
        let mut spliced: Vec<&str> = sealed.split('.').collect();
        spliced[4] = other.split('.').nth(4).unwrap();
        assert_eq!(a.open(&spliced.join(".")), None, "another tag");
        assert_eq!(a.open("a.b.c"), None);
        assert_eq!(a.open("not a token"), None);
    }
}
