//! Scheme JWTs: signing with an x5c chain (header `alg`, `typ`, `x5c` and nothing else), and strict
//! decoding of header, claims and signature. Chain trust is `trust.rs`'s business.

use super::party::PartyId;
use super::Timestamp;
use crate::reading::json::{read_signed, JsonProblem};
use aws_lc_rs::signature::{
    ParsedPublicKey, RSA_PKCS1_2048_8192_SHA256, RSA_PKCS1_2048_8192_SHA384,
    RSA_PKCS1_2048_8192_SHA512,
};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{Map, Value};
use std::sync::OnceLock;
use x509_parser::certificate::X509CertificateParser;
use x509_parser::nom::Parser;
use x509_parser::prelude::{FromDer, X509Certificate};
use x509_parser::public_key::PublicKey;

/// The header parameters a scheme JWT may carry.
const ALLOWED_HEADER: [&str; 3] = ["alg", "typ", "x5c"];

/// Which signature algorithms are accepted. We always emit RS256.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AlgorithmPolicy {
    /// Also accept RS384 and RS512 (allowed by newer versions of the scheme).
    pub allow_rs384_rs512: bool,
}

impl AlgorithmPolicy {
    fn accept(&self, alg: &str) -> Option<Algorithm> {
        match alg {
            "RS256" => Some(Algorithm::RS256),
            "RS384" if self.allow_rs384_rs512 => Some(Algorithm::RS384),
            "RS512" if self.allow_rs384_rs512 => Some(Algorithm::RS512),
            _ => None,
        }
    }
}

/// What is wrong with a JWT as a JWS: its form, its header or its signature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    #[error("not a signed JWT: {0}")]
    Malformed(String),
    #[error("the JWT header has no alg")]
    MissingAlg,
    #[error("the JWT alg {0:?} is not accepted (RS256 expected)")]
    InvalidAlg(String),
    #[error("the JWT header has no typ")]
    MissingTyp,
    #[error("the JWT typ {0:?} is not JWT")]
    InvalidTyp(String),
    #[error("the JWT header has no x5c certificate chain")]
    MissingX5c,
    #[error("the JWT x5c is invalid: {0}")]
    InvalidX5c(String),
    #[error("the JWT header carries the parameter {0:?}; only alg, typ and x5c are allowed")]
    ExtraHeaderParameter(String),
    #[error("the JWT has no signature")]
    MissingSignature,
    #[error("the JWT signature does not verify with the key of the first x5c certificate")]
    InvalidSignature,
}

/// A payload whose signature verified, but whose members are not what they must be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the payload member {member} cannot be read: {problem}")]
pub struct PayloadError {
    pub member: String,
    pub problem: String,
}

/// Why a party's key and chain cannot sign, or signing failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SigningError {
    #[error("the private key is not an RSA PEM key: {0}")]
    Key(String),
    #[error("the certificate chain is not PEM: {0}")]
    Chain(String),
    #[error("the certificate chain holds no certificate")]
    EmptyChain,
    #[error("the private key does not belong to the first certificate of the chain")]
    KeyNotOfLeaf,
    #[error("signing failed: {0}")]
    Failed(String),
}

reason_codes! {
    JwtError {
        JwtError::Malformed(_) => "malformed_jwt",
        JwtError::MissingAlg => "missing_alg",
        JwtError::InvalidAlg(_) => "invalid_alg",
        JwtError::MissingTyp => "missing_typ",
        JwtError::InvalidTyp(_) => "invalid_typ",
        JwtError::MissingX5c => "missing_x5c",
        JwtError::InvalidX5c(_) => "invalid_x5c",
        JwtError::ExtraHeaderParameter(_) => "extra_header_parameter",
        JwtError::MissingSignature => "missing_signature",
        JwtError::InvalidSignature => "invalid_signature",
    }
}

/// A JWT whose form and header have been checked, not yet its signature.
#[derive(Clone, Debug)]
pub struct DecodedJwt {
    pub alg: Algorithm,
    /// The x5c chain as DER, leaf first.
    pub x5c: Vec<Vec<u8>>,
    pub claims: Map<String, Value>,
    signing_input_len: usize,
    raw: String,
}

/// Decode a scheme JWT: three segments; header with alg, typ `JWT`, an x5c of X.509 certificates,
/// and no other parameter; a JSON object as payload. The order of the checks is the scheme's.
pub fn decode(token: &str, algorithms: AlgorithmPolicy) -> Result<DecodedJwt, JwtError> {
    let token = token.trim();
    let mut parts = token.split('.');
    let (Some(h), Some(p), Some(s), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(JwtError::Malformed(
            "a JWS has three dot-separated parts".into(),
        ));
    };
    let header: Map<String, Value> = json_segment(h, "header")?;
    let alg = match header.get("alg") {
        None | Some(Value::Null) => return Err(JwtError::MissingAlg),
        Some(Value::String(a)) => algorithms
            .accept(a)
            .ok_or_else(|| JwtError::InvalidAlg(a.clone()))?,
        Some(other) => return Err(JwtError::InvalidAlg(other.to_string())),
    };
    match header.get("typ") {
        None | Some(Value::Null) => return Err(JwtError::MissingTyp),
        Some(Value::String(t)) if t.eq_ignore_ascii_case("JWT") => {}
        Some(Value::String(t)) => return Err(JwtError::InvalidTyp(t.clone())),
        Some(other) => return Err(JwtError::InvalidTyp(other.to_string())),
    }
    let x5c = match header.get("x5c") {
        None | Some(Value::Null) => return Err(JwtError::MissingX5c),
        Some(Value::Array(items)) if items.is_empty() => return Err(JwtError::MissingX5c),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| certificate_der(i, item))
            .collect::<Result<Vec<_>, _>>()?,
        Some(_) => return Err(JwtError::InvalidX5c("x5c must be an array".into())),
    };
    if let Some(extra) = header
        .keys()
        .find(|k| !ALLOWED_HEADER.contains(&k.as_str()))
    {
        return Err(JwtError::ExtraHeaderParameter(extra.clone()));
    }
    let claims: Map<String, Value> = json_segment(p, "payload")?;
    if s.is_empty() {
        return Err(JwtError::MissingSignature);
    }
    Ok(DecodedJwt {
        alg,
        x5c,
        claims,
        signing_input_len: h.len() + 1 + p.len(),
        raw: token.to_string(),
    })
}

/// A segment's JSON object, read one way only (`reading::json::read_signed`): no member named
/// twice (in any spelling a binder folds together), no number that reads as another.
fn json_segment(segment: &str, what: &str) -> Result<Map<String, Value>, JwtError> {
    let bytes = URL_SAFE_NO_PAD
        .decode(segment.trim_end_matches('='))
        .map_err(|_| JwtError::Malformed(format!("the {what} is not base64url")))?;
    match read_signed(&bytes) {
        Ok(Value::Object(members)) => Ok(members),
        Ok(_) | Err(JsonProblem::NotJson(_) | JsonProblem::Trailing) => Err(JwtError::Malformed(
            format!("the {what} is not a JSON object"),
        )),
        Err(problem) => Err(JwtError::Malformed(format!("the {what} {problem}"))),
    }
}

/// A certificate written as base64 (not base64url) DER; white space and PEM armour are tolerated.
pub fn certificate_from_base64(text: &str) -> Option<Vec<u8>> {
    // x5c elements are plain base64: decoded as they are.
    if !text.bytes().any(|b| b.is_ascii_whitespace() || b == b'-') {
        return STANDARD.decode(text.as_bytes()).ok();
    }
    let body: String = text
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .flat_map(|l| l.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    STANDARD.decode(body.as_bytes()).ok()
}

/// One x5c element: a base64 X.509 certificate.
fn certificate_der(index: usize, item: &Value) -> Result<Vec<u8>, JwtError> {
    let Value::String(text) = item else {
        return Err(JwtError::InvalidX5c(format!(
            "element {index} is not a string"
        )));
    };
    let der = certificate_from_base64(text)
        .ok_or_else(|| JwtError::InvalidX5c(format!("element {index} is not base64")))?;
    // The certificate's structure is checked here; its extensions when its chain is validated.
    let mut parser = X509CertificateParser::new().with_deep_parse_extensions(false);
    match parser.parse(&der) {
        Ok((&[], _)) => Ok(der),
        _ => Err(JwtError::InvalidX5c(format!(
            "element {index} is not an X.509 certificate"
        ))),
    }
}

impl DecodedJwt {
    fn signing_input(&self) -> &str {
        &self.raw[..self.signing_input_len]
    }

    fn signature(&self) -> &str {
        &self.raw[self.signing_input_len + 1..]
    }

    /// Verify the signature with the key of the first x5c certificate.
    pub fn verify_signature(&self) -> Result<(), JwtError> {
        self.verify_signature_with(&RsaKey::of_certificate(&self.x5c[0])?)
    }

    /// Verify the signature with a key obtained earlier for the same leaf (e.g. from a cache).
    pub fn verify_signature_with(&self, key: &RsaKey) -> Result<(), JwtError> {
        let signature = URL_SAFE_NO_PAD
            .decode(self.signature())
            .map_err(|_| JwtError::InvalidSignature)?;
        key.verify(self.alg, self.signing_input().as_bytes(), &signature)
            .then_some(())
            .ok_or(JwtError::InvalidSignature)
    }

    pub fn str_claim(&self, name: &str) -> Option<&str> {
        self.claims.get(name).and_then(Value::as_str)
    }

    /// Whether `aud` names `party`: None when there is no `aud`; an array counts when it holds
    /// `party`; anything else is Some(false).
    /// The texts `aud` names (none where it is absent or not text).
    pub fn audiences(&self) -> impl Iterator<Item = &str> {
        let (one, many) = match self.claims.get("aud") {
            Some(Value::String(a)) => (Some(a.as_str()), None),
            Some(Value::Array(items)) => (None, Some(items.iter().filter_map(Value::as_str))),
            _ => (None, None),
        };
        one.into_iter().chain(many.into_iter().flatten())
    }

    pub fn audience_includes(&self, party: &str) -> Option<bool> {
        match self.claims.get("aud")? {
            Value::String(a) => Some(a == party),
            Value::Array(items) => Some(items.iter().any(|i| i.as_str() == Some(party))),
            _ => Some(false),
        }
    }

    /// The `aud` claim as written, for messages: a string as it is, anything else as JSON; at
    /// most 120 characters.
    pub fn audience(&self) -> String {
        let written = match self.claims.get("aud") {
            Some(Value::String(a)) => a.clone(),
            Some(other) => other.to_string(),
            None => "nobody".into(),
        };
        written.chars().take(120).collect()
    }

    /// A NumericDate claim; fractional values are accepted as RFC 7519 allows.
    pub fn time_claim(&self, name: &str) -> Option<f64> {
        self.claims.get(name).and_then(Value::as_f64)
    }

    /// The claims as a typed payload; an error names the member that could not be read.
    pub fn claims_as<T: DeserializeOwned>(&self) -> Result<T, PayloadError> {
        serde_path_to_error::deserialize(Value::Object(self.claims.clone())).map_err(|e| {
            let (path, problem) = (e.path().to_string(), e.inner().to_string());
            // A payload type that reads its nested members itself names them in its message.
            match (path.as_str(), problem.split_once(": ")) {
                (".", Some((member, rest))) if !member.contains(' ') => PayloadError {
                    member: member.to_string(),
                    problem: rest.to_string(),
                },
                _ => PayloadError {
                    member: path,
                    problem,
                },
            }
        })
    }
}

/// The RSA public key of a certificate, parsed once for the signatures it checks: a parsed key
/// keeps what each check would otherwise compute again (its Montgomery form), which is most of the
/// cost of checking a signature. Keys of 2048 to 8192 bits; the scheme's bounds are checked where
/// chains are validated.
pub struct RsaKey {
    /// The PKCS#1 RSAPublicKey.
    der: Vec<u8>,
    rs256: ParsedPublicKey,
    rs384: OnceLock<Option<ParsedPublicKey>>,
    rs512: OnceLock<Option<ParsedPublicKey>>,
}

impl std::fmt::Debug for RsaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RsaKey")
            .field("bytes", &self.der.len())
            .finish_non_exhaustive()
    }
}

impl RsaKey {
    /// The key of a DER certificate.
    pub fn of_certificate(der: &[u8]) -> Result<Self, JwtError> {
        let (_, cert) = X509Certificate::from_der(der)
            .map_err(|_| JwtError::InvalidX5c("the leaf is not an X.509 certificate".into()))?;
        let not_rsa = || JwtError::InvalidX5c("the leaf key is not an RSA key".into());
        if !matches!(cert.public_key().parsed(), Ok(PublicKey::RSA(_))) {
            return Err(not_rsa());
        }
        let der = cert.public_key().subject_public_key.data.to_vec();
        let rs256 =
            ParsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA256, &der).map_err(|_| not_rsa())?;
        Ok(RsaKey {
            der,
            rs256,
            rs384: OnceLock::new(),
            rs512: OnceLock::new(),
        })
    }

    /// Whether `signature` is this key's RSASSA-PKCS1-v1_5 signature of `message` under `alg`.
    pub fn verify(&self, alg: Algorithm, message: &[u8], signature: &[u8]) -> bool {
        let key = match alg {
            Algorithm::RS256 => Some(&self.rs256),
            Algorithm::RS384 => self
                .rs384
                .get_or_init(|| ParsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA384, &self.der).ok())
                .as_ref(),
            Algorithm::RS512 => self
                .rs512
                .get_or_init(|| ParsedPublicKey::new(&RSA_PKCS1_2048_8192_SHA512, &self.der).ok())
                .as_ref(),
            _ => None,
        };
        key.is_some_and(|k| k.verify_sig(message, signature).is_ok())
    }
}

/// A party's signing key with its certificate chain: what it needs to sign scheme JWTs.
#[derive(Clone)]
pub struct SigningIdentity {
    party_id: PartyId,
    key: EncodingKey,
    x5c: Vec<String>,
    chain_der: Vec<Vec<u8>>,
}

impl std::fmt::Debug for SigningIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SigningIdentity")
            .field("party_id", &self.party_id)
            .field("chain_len", &self.chain_der.len())
            .finish_non_exhaustive()
    }
}

/// The lifetime of a client assertion, fixed by the scheme.
pub const ASSERTION_LIFETIME: i64 = 30;

impl SigningIdentity {
    /// From a PEM private key (PKCS#1 or PKCS#8) and a PEM chain, leaf first. Checks that the key
    /// belongs to the leaf certificate by signing and verifying once.
    pub fn from_pem(
        party_id: PartyId,
        key_pem: &str,
        chain_pem: &str,
    ) -> Result<Self, SigningError> {
        let key = EncodingKey::from_rsa_pem(key_pem.as_bytes())
            .map_err(|e| SigningError::Key(e.to_string()))?;
        let chain_der: Vec<Vec<u8>> = rustls_pemfile::certs(&mut chain_pem.as_bytes())
            .map(|c| c.map(|c| c.to_vec()))
            .collect::<Result<_, _>>()
            .map_err(|e| SigningError::Chain(e.to_string()))?;
        if chain_der.is_empty() {
            return Err(SigningError::EmptyChain);
        }
        let identity = SigningIdentity {
            party_id,
            key,
            x5c: chain_der.iter().map(|d| STANDARD.encode(d)).collect(),
            chain_der,
        };
        let probe = identity.sign_raw(&serde_json::json!({"probe": true}))?;
        decode(&probe, AlgorithmPolicy::default())
            .and_then(|jwt| jwt.verify_signature())
            .map_err(|_| SigningError::KeyNotOfLeaf)?;
        Ok(identity)
    }

    pub fn party_id(&self) -> &PartyId {
        &self.party_id
    }

    pub fn chain_der(&self) -> &[Vec<u8>] {
        &self.chain_der
    }

    /// Sign any claims with header `{alg: RS256, typ: JWT, x5c}`.
    pub fn sign_raw<T: Serialize>(&self, claims: &T) -> Result<String, SigningError> {
        let mut header = Header::new(Algorithm::RS256);
        header.typ = Some("JWT".into());
        header.x5c = Some(self.x5c.clone());
        jsonwebtoken::encode(&header, claims, &self.key)
            .map_err(|e| SigningError::Failed(e.to_string()))
    }

    /// Sign a header and claims exactly as given, with RS256 (whatever the header says): how
    /// others' treatment of defective tokens is tested.
    pub fn sign_parts(&self, header: &Value, claims: &Value) -> Result<String, SigningError> {
        let encode = |v: &Value| {
            serde_json::to_vec(v)
                .map(|json| URL_SAFE_NO_PAD.encode(json))
                .map_err(|e| SigningError::Failed(e.to_string()))
        };
        let input = format!("{}.{}", encode(header)?, encode(claims)?);
        let signature = jsonwebtoken::crypto::sign(input.as_bytes(), &self.key, Algorithm::RS256)
            .map_err(|e| SigningError::Failed(e.to_string()))?;
        Ok(format!("{input}.{signature}"))
    }

    /// The x5c header value: the chain as base64 DER, leaf first.
    pub fn x5c(&self) -> &[String] {
        &self.x5c
    }

    /// Sign a response token: `iss` = us, the given `sub` and `aud`, a fresh `jti`, `iat` = `nbf` = now,
    /// `exp` = now + lifetime, and the payload's members beside them.
    pub fn sign_token<T: Serialize>(
        &self,
        sub: &str,
        aud: Option<&str>,
        payload: &T,
        now: Timestamp,
        lifetime_secs: i64,
    ) -> Result<String, SigningError> {
        let iat = now.secs();
        let claims = super::models::Claims {
            iss: self.party_id.to_string(),
            sub: sub.to_string(),
            aud: aud.map(str::to_string),
            jti: uuid::Uuid::new_v4().to_string(),
            iat,
            nbf: Some(iat),
            exp: iat + lifetime_secs,
            payload,
        };
        self.sign_raw(&claims)
    }

    /// A client assertion for `audience`: iss = sub = us, exp = iat + 30.
    pub fn client_assertion(&self, audience: &str, now: Timestamp) -> Result<String, SigningError> {
        self.sign_token(
            self.party_id.as_str(),
            Some(audience),
            &Map::new(),
            now,
            ASSERTION_LIFETIME,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::pki::TestPki;
    use serde_json::json;

    fn b64(v: &Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(v).unwrap())
    }

    #[test]
    fn signed_tokens_verify_and_carry_only_alg_typ_x5c() {
        let pki = TestPki::shared();
        let id = pki.party("EU.EORI.NL000000001").signing_identity();
        let token = id
            .client_assertion("EU.EORI.NL000000003", Timestamp::from_secs(1000))
            .unwrap();
        let jwt = decode(&token, AlgorithmPolicy::default()).unwrap();
        jwt.verify_signature().unwrap();
        assert_eq!(jwt.alg, Algorithm::RS256);
        assert_eq!(jwt.x5c.len(), 3);
        assert_eq!(jwt.str_claim("iss"), Some("EU.EORI.NL000000001"));
        assert_eq!(jwt.time_claim("exp"), Some(1030.0));
        let header: Value = serde_json::from_slice(
            &URL_SAFE_NO_PAD
                .decode(token.split('.').next().unwrap())
                .unwrap(),
        )
        .unwrap();
        let mut keys: Vec<_> = header.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, ["alg", "typ", "x5c"]);
    }

    #[test]
    fn tampered_payload_fails_the_signature() {
        let pki = TestPki::shared();
        let id = pki.party("EU.EORI.NL000000001").signing_identity();
        let token = id
            .client_assertion("EU.EORI.NL000000003", Timestamp::from_secs(1000))
            .unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let forged = format!(
            "{}.{}.{}",
            parts[0],
            b64(&json!({"iss": "EU.EORI.NL000000002"})),
            parts[2]
        );
        let jwt = decode(&forged, AlgorithmPolicy::default()).unwrap();
        assert_eq!(jwt.verify_signature(), Err(JwtError::InvalidSignature));
    }

    #[test]
    fn rs384_and_rs512_only_when_enabled() {
        let header = |alg: &str| b64(&json!({"alg": alg, "typ": "JWT", "x5c": ["AA"]}));
        let strict = AlgorithmPolicy::default();
        let relaxed = AlgorithmPolicy {
            allow_rs384_rs512: true,
        };
        let token = format!("{}.{}.sig", header("RS512"), b64(&json!({})));
        assert_eq!(
            decode(&token, strict).unwrap_err(),
            JwtError::InvalidAlg("RS512".into())
        );
        // With RS512 allowed the next check (x5c) is reached.
        assert!(matches!(
            decode(&token, relaxed),
            Err(JwtError::InvalidX5c(_))
        ));
        for alg in ["HS256", "none", "ES256", "PS256"] {
            let token = format!("{}.{}.sig", header(alg), b64(&json!({})));
            assert_eq!(
                decode(&token, relaxed).unwrap_err(),
                JwtError::InvalidAlg(alg.into())
            );
        }
    }

    #[test]
    fn key_not_matching_the_chain_is_refused() {
        let pki = TestPki::shared();
        let a = pki.party("EU.EORI.NL000000001");
        let b = pki.party("EU.EORI.NL000000003");
        let err = SigningIdentity::from_pem(
            PartyId::parse("EU.EORI.NL000000001").unwrap(),
            &b.key_pem,
            &a.chain_pem,
        )
        .unwrap_err();
        assert!(err.to_string().contains("does not belong"));
    }
}
