//! Client assertions: the token request, and the assertion checks in the scheme's order, with one
//! error variant per conformance defect and a replay store for `jti`s.

use super::evidence_token::Readers;
use super::jwt::{self, AlgorithmPolicy, DecodedJwt, JwtError, ASSERTION_LIFETIME};
use super::party::PartyId;
use super::trust::{ChainError, PartyError, SignerError};
use super::Timestamp;
use jsonwebtoken::Algorithm;
use serde::Deserialize;
use std::borrow::Cow;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::Mutex;

pub const ASSERTION_TYPE: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
pub const GRANT_TYPE: &str = "client_credentials";
/// The longest `jti` accepted: enough for any id scheme, and no store fills up on one.
pub const MAX_JTI_LEN: usize = 256;
/// Clients compute `exp = iat + 30` in floating point; the sum may be off by a few 1e-7 s.
const LIFETIME_TOLERANCE: f64 = 0.001;

/// The fields of a token request, from a form or a JSON body. Every field is optional here so that
/// each missing one gets its own error.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct TokenRequest {
    pub grant_type: Option<String>,
    pub scope: Option<String>,
    pub client_id: Option<String>,
    pub client_assertion_type: Option<String>,
    pub client_assertion: Option<String>,
}

/// A token request whose parameters are in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckedTokenRequest {
    pub client_id: PartyId,
    pub scopes: Vec<String>,
    pub assertion: String,
}

/// Everything that can be wrong with a token request or its client assertion.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AssertionError {
    #[error("grant_type is missing")]
    MissingGrantType,
    #[error("grant_type must be client_credentials")]
    UnsupportedGrantType,
    #[error("scope must contain {0}")]
    InvalidScope(String),
    #[error("client_id is missing")]
    MissingClientId,
    #[error("client_id is not a party identifier: {0}")]
    InvalidClientId(String),
    #[error("client_assertion_type must be {ASSERTION_TYPE}")]
    InvalidAssertionType,
    #[error("client_assertion is missing")]
    MissingAssertion,
    #[error("client assertion: {0}")]
    Jwt(#[from] JwtError),
    #[error("client assertion has no iss")]
    MissingIss,
    #[error("client assertion iss {found:?} is not the client_id {expected:?}")]
    InvalidIss { expected: String, found: String },
    #[error("client assertion has no sub")]
    MissingSub,
    #[error("client assertion sub is not equal to iss")]
    InvalidSub,
    #[error("client assertion has no aud")]
    MissingAud,
    #[error("client assertion aud must be exactly {expected:?}")]
    InvalidAud { expected: String },
    #[error("client assertion has no iat")]
    MissingIat,
    #[error("client assertion has no exp")]
    MissingExp,
    #[error("client assertion exp must be iat + 30 seconds")]
    InvalidExp,
    #[error("client assertion has no jti")]
    MissingJti,
    #[error("client assertion jti is longer than {MAX_JTI_LEN} characters")]
    InvalidJti,
    #[error("client assertion iat is in the future")]
    IssuedInFuture,
    #[error("client assertion nbf is in the future")]
    NotYetValid,
    #[error("client assertion has expired")]
    Expired,
    #[error("client assertion certificate: {0}")]
    Chain(#[from] ChainError),
    #[error("client assertion party: {0}")]
    Party(#[from] PartyError),
    #[error("client assertion jti has been used before")]
    Replayed,
    #[error(
        "client assertion was issued before the replay store started remembering (new or back \
         empty at {epoch}): make a new assertion"
    )]
    IssuedBeforeReplayStore { epoch: i64 },
}

impl From<SignerError> for AssertionError {
    fn from(e: SignerError) -> Self {
        match e {
            SignerError::Signature(e) => AssertionError::Jwt(e),
            SignerError::Chain(e) => AssertionError::Chain(e),
            SignerError::Party(e) => AssertionError::Party(e),
        }
    }
}

impl AssertionError {
    /// The OAuth 2.0 error code (RFC 6749 §5.2) for a token endpoint answer.
    pub fn oauth_error(&self) -> &'static str {
        match self {
            AssertionError::MissingGrantType
            | AssertionError::MissingClientId
            | AssertionError::InvalidClientId(_)
            | AssertionError::InvalidAssertionType
            | AssertionError::MissingAssertion => "invalid_request",
            AssertionError::UnsupportedGrantType => "unsupported_grant_type",
            AssertionError::InvalidScope(_) => "invalid_scope",
            _ => "invalid_client",
        }
    }
}

reason_codes! {
    AssertionError {
        AssertionError::MissingGrantType => "missing_grant_type",
        AssertionError::UnsupportedGrantType => "unsupported_grant_type",
        AssertionError::InvalidScope(_) => "invalid_scope",
        AssertionError::MissingClientId => "missing_client_id",
        AssertionError::InvalidClientId(_) => "invalid_client_id",
        AssertionError::InvalidAssertionType => "invalid_client_assertion_type",
        AssertionError::MissingAssertion => "missing_client_assertion",
        AssertionError::MissingIss => "missing_iss",
        AssertionError::InvalidIss { .. } => "invalid_iss",
        AssertionError::MissingSub => "missing_sub",
        AssertionError::InvalidSub => "invalid_sub",
        AssertionError::MissingAud => "missing_aud",
        AssertionError::InvalidAud { .. } => "invalid_aud",
        AssertionError::MissingIat => "missing_iat",
        AssertionError::MissingExp => "missing_exp",
        AssertionError::InvalidExp => "invalid_exp",
        AssertionError::MissingJti => "missing_jti",
        AssertionError::InvalidJti => "invalid_jti",
        AssertionError::IssuedInFuture => "iat_in_future",
        AssertionError::NotYetValid => "nbf_in_future",
        AssertionError::Expired => "assertion_expired",
        AssertionError::Replayed => "replayed_jti",
        AssertionError::IssuedBeforeReplayStore { .. } => "issued_before_replay_store",
    } nested {
        AssertionError::Jwt(e) => e: JwtError,
        AssertionError::Chain(e) => e: ChainError,
        AssertionError::Party(e) => e: PartyError,
    }
}

/// Why a token request body cannot be read as one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenBodyError {
    #[error("the JSON body is not a token request: {0}")]
    NotATokenRequest(String),
    #[error("the parameter {0} is given twice")]
    Repeated(String),
}

impl TokenRequest {
    /// Read a token request from a body: JSON when the content type says so, else
    /// `application/x-www-form-urlencoded` (the scheme accepts both).
    pub fn from_body(content_type: Option<&str>, body: &[u8]) -> Result<Self, TokenBodyError> {
        let is_json = content_type.is_some_and(|ct| ct.to_ascii_lowercase().contains("json"));
        if is_json {
            return serde_json::from_slice(body)
                .map_err(|e| TokenBodyError::NotATokenRequest(e.to_string()));
        }
        let mut request = TokenRequest::default();
        for (key, value) in form_pairs(body) {
            let slot = match key.as_ref() {
                "grant_type" => &mut request.grant_type,
                "scope" => &mut request.scope,
                "client_id" => &mut request.client_id,
                "client_assertion_type" => &mut request.client_assertion_type,
                "client_assertion" => &mut request.client_assertion,
                _ => continue,
            };
            if slot.is_some() {
                return Err(TokenBodyError::Repeated(key.into_owned()));
            }
            *slot = Some(value.into_owned());
        }
        Ok(request)
    }

    /// Steps 2–5 of the scheme's order: grant_type, scope, client_id, client_assertion_type, and a
    /// client_assertion present. An absent scope means the scheme's default scope.
    pub fn check(&self, scheme: &str) -> Result<CheckedTokenRequest, AssertionError> {
        match self.grant_type.as_deref() {
            None | Some("") => return Err(AssertionError::MissingGrantType),
            Some(GRANT_TYPE) => {}
            Some(_) => return Err(AssertionError::UnsupportedGrantType),
        }
        let scopes: Vec<String> = match self.scope.as_deref().map(str::trim) {
            None | Some("") => vec![scheme.to_string()],
            Some(s) => s.split_whitespace().map(str::to_string).collect(),
        };
        if !scopes.iter().any(|s| s == scheme) {
            return Err(AssertionError::InvalidScope(scheme.to_string()));
        }
        let client_id = match self.client_id.as_deref() {
            None | Some("") => return Err(AssertionError::MissingClientId),
            Some(id) => {
                PartyId::parse(id).map_err(|e| AssertionError::InvalidClientId(e.to_string()))?
            }
        };
        if self.client_assertion_type.as_deref() != Some(ASSERTION_TYPE) {
            return Err(AssertionError::InvalidAssertionType);
        }
        let assertion = match self.client_assertion.as_deref().map(str::trim) {
            None | Some("") => return Err(AssertionError::MissingAssertion),
            Some(a) => a.to_string(),
        };
        Ok(CheckedTokenRequest {
            client_id,
            scopes,
            assertion,
        })
    }
}

/// The pairs of a form body (`application/x-www-form-urlencoded`, decoded as `url` does), decoded
/// only where they are encoded: a token request's values (a JWT, party ids) seldom are, and the
/// assertion is long.
fn form_pairs(body: &[u8]) -> impl Iterator<Item = (Cow<'_, str>, Cow<'_, str>)> {
    // An assertion is several kilobytes: the scans are memchr's, not byte by byte.
    fn decode(bytes: &[u8]) -> Cow<'_, str> {
        if memchr::memchr2(b'%', b'+', bytes).is_none() {
            return match std::str::from_utf8(bytes) {
                Ok(text) => Cow::Borrowed(text),
                Err(_) => String::from_utf8_lossy(bytes),
            };
        }
        let spaced: Vec<u8> = bytes
            .iter()
            .map(|b| if *b == b'+' { b' ' } else { *b })
            .collect();
        Cow::Owned(
            percent_encoding::percent_decode(&spaced)
                .decode_utf8_lossy()
                .into_owned(),
        )
    }
    super::pieces(body, b'&')
        .map(|at| &body[at])
        .filter(|pair| !pair.is_empty())
        .map(|pair| match memchr::memchr(b'=', pair) {
            Some(at) => (decode(&pair[..at]), decode(&pair[at + 1..])),
            None => (decode(pair), Cow::Borrowed("")),
        })
}

/// How assertions are checked.
#[derive(Clone, Debug)]
pub struct AssertionRules {
    /// The audience the assertion must be addressed to: our own party id, or for a forwarded
    /// assertion (previous_steps) the party that forwarded it.
    pub audience: String,
    /// Clock leeway for iat, nbf and exp, in seconds.
    pub leeway_secs: f64,
    /// RS384 and RS512 from every signer (`[tokens] allow_rs384_rs512`), else RS256 alone.
    pub algorithms: AlgorithmPolicy,
    /// The scheme version each signer speaks, where known: RS384 and RS512 too from a signer
    /// whose version signs with them (2.1 on), as evidence is read.
    pub signers: Option<Arc<Readers>>,
}

impl AssertionRules {
    pub fn new(audience: impl Into<String>) -> Self {
        AssertionRules {
            audience: audience.into(),
            leeway_secs: 5.0,
            algorithms: AlgorithmPolicy::default(),
            signers: None,
        }
    }

    /// Whether an assertion of `signer` may be signed with `alg`.
    fn accepts(&self, alg: Algorithm, signer: &str) -> bool {
        alg == Algorithm::RS256
            || self.algorithms.allow_rs384_rs512
            || self
                .signers
                .as_ref()
                .is_some_and(|s| s.version_of(signer).signs_with_rs384_rs512())
    }
}

/// An assertion whose header, claims, signature and time checked out; trust and party come next.
#[derive(Clone, Debug)]
pub struct ClientAssertion {
    pub jwt: DecodedJwt,
    pub client_id: PartyId,
    pub jti: String,
    pub iat: f64,
    pub exp: f64,
}

/// Steps 6–12 and 14: decode; alg, typ, x5c and no other header parameter; iss and sub equal to the
/// client id (when one was given, else iss = sub); aud exactly ours; exp = iat + 30; a jti; and now
/// within [iat, exp] (with leeway). The signature (step 13) is checked with the chain, by whoever
/// holds the trusted list (`check_signer`).
pub fn check_assertion(
    token: &str,
    client_id: Option<&PartyId>,
    rules: &AssertionRules,
    now: Timestamp,
) -> Result<ClientAssertion, AssertionError> {
    // Which algorithms are accepted depends on who signed: decided once `iss` is read.
    let jwt = jwt::decode(
        token,
        AlgorithmPolicy {
            allow_rs384_rs512: true,
        },
    )?;
    let iss = match jwt.str_claim("iss") {
        None | Some("") => return Err(AssertionError::MissingIss),
        Some(iss) => iss,
    };
    if !rules.accepts(jwt.alg, iss) {
        return Err(JwtError::InvalidAlg(format!("{:?}", jwt.alg)).into());
    }
    let party = match client_id {
        Some(expected) if expected.as_str() != iss => {
            return Err(AssertionError::InvalidIss {
                expected: expected.to_string(),
                found: iss.to_string(),
            })
        }
        Some(expected) => expected.clone(),
        None => PartyId::parse(iss).map_err(|e| AssertionError::InvalidClientId(e.to_string()))?,
    };
    match jwt.str_claim("sub") {
        None | Some("") => return Err(AssertionError::MissingSub),
        Some(sub) if sub != iss => return Err(AssertionError::InvalidSub),
        Some(_) => {}
    }
    match jwt.claims.get("aud") {
        None | Some(serde_json::Value::Null) => return Err(AssertionError::MissingAud),
        Some(serde_json::Value::String(aud)) if *aud == rules.audience => {}
        Some(_) => {
            return Err(AssertionError::InvalidAud {
                expected: rules.audience.clone(),
            })
        }
    }
    let iat = jwt.time_claim("iat").ok_or(AssertionError::MissingIat)?;
    let exp = jwt.time_claim("exp").ok_or(AssertionError::MissingExp)?;
    if ((exp - iat) - ASSERTION_LIFETIME as f64).abs() > LIFETIME_TOLERANCE {
        return Err(AssertionError::InvalidExp);
    }
    let jti = match jwt.str_claim("jti") {
        None | Some("") => return Err(AssertionError::MissingJti),
        Some(jti) if jti.len() > MAX_JTI_LEN => return Err(AssertionError::InvalidJti),
        Some(jti) => jti.to_string(),
    };
    let now_f = now.as_f64();
    if iat > now_f + rules.leeway_secs {
        return Err(AssertionError::IssuedInFuture);
    }
    if jwt
        .time_claim("nbf")
        .is_some_and(|nbf| nbf > now_f + rules.leeway_secs)
    {
        return Err(AssertionError::NotYetValid);
    }
    if now_f > exp + rules.leeway_secs {
        return Err(AssertionError::Expired);
    }
    Ok(ClientAssertion {
        jwt,
        client_id: party,
        jti,
        iat,
        exp,
    })
}

/// Remembers the `jti`s of accepted assertions so none is accepted twice.
pub trait JtiStore: Send + Sync {
    /// Remember `jti` of `issuer` until `until` (seconds since the epoch). Returns false when it was
    /// already remembered: a replay.
    fn remember(&self, issuer: &str, jti: &str, until: f64, now: Timestamp) -> bool;
}

/// How long a jti must be remembered: past the assertion's own expiry, and at least 30 s + leeway.
pub fn jti_retention(assertion: &ClientAssertion, rules: &AssertionRules, now: Timestamp) -> f64 {
    (assertion.exp + rules.leeway_secs)
        .max(now.as_f64() + ASSERTION_LIFETIME as f64 + rules.leeway_secs)
}

/// An in-memory [`JtiStore`]; expired entries are dropped as new ones arrive.
#[derive(Default)]
pub struct MemoryJtiStore {
    seen: Mutex<HashMap<(String, String), f64>>,
}

impl MemoryJtiStore {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn len(&self) -> usize {
        self.seen.lock().map(|s| s.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl JtiStore for MemoryJtiStore {
    fn remember(&self, issuer: &str, jti: &str, until: f64, now: Timestamp) -> bool {
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if seen.len() >= 1024 {
            seen.retain(|_, until| *until > now.as_f64());
        }
        let key = (issuer.to_string(), jti.to_string());
        match seen.get(&key) {
            Some(existing) if *existing > now.as_f64() => false,
            _ => {
                seen.insert(key, until);
                true
            }
        }
    }
}

#[cfg(test)]
#[path = "assertion_tests.rs"]
mod tests;
