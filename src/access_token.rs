//! The access tokens we issue: opaque to consumers, HS256 over the claims with a key derived from the
//! issuer's private key, so that every replica holding the same key material can verify them without
//! shared state and without an RSA operation per request. Validation is on every request's path: it
//! accepts only the exact header we write, checks the MAC before reading anything else, and reads
//! the claims once; a token presented again is compared whole with the one verified, and its times
//! are judged again.

use crate::scheme::party::PartyId;
use crate::scheme::reason_codes;
use crate::scheme::Timestamp;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::time::Duration;

/// The claims inside an access token.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AccessClaims {
    /// The party that issued the token (us).
    pub iss: String,
    /// The service consumer the token was issued to.
    pub sub: String,
    pub aud: String,
    pub jti: String,
    pub iat: i64,
    pub exp: i64,
    pub scope: Vec<String>,
}

/// Why a bearer token is not accepted. All of these are a 401 to the caller.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AccessTokenError {
    #[error("no bearer token")]
    Missing,
    #[error("the Authorization header is not of the form 'Bearer <token>'")]
    NotBearer,
    #[error("the access token has expired")]
    Expired,
    #[error("the access token is not valid here")]
    Invalid,
}

reason_codes! {
    AccessTokenError {
        AccessTokenError::Missing => "missing_token",
        AccessTokenError::NotBearer => "not_bearer",
        AccessTokenError::Expired => "token_expired",
        AccessTokenError::Invalid => "invalid_token",
    }
}

/// Issues and validates access tokens for one party.
#[derive(Clone)]
pub struct AccessTokens {
    issuer: String,
    key: ring::hmac::Key,
    lifetime_secs: u64,
    leeway_secs: u64,
    /// Tokens whose MAC, issuer and audience were checked, with their claims: a token presented
    /// again is found by a keyed hash and compared whole instead of verified again (its times are
    /// judged at every use). Only tokens we issued enter, each at most as long as it can be valid.
    verified: moka::sync::Cache<Box<str>, Arc<AccessClaims>, crate::keyed::KeyedHash>,
}

impl std::fmt::Debug for AccessTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AccessTokens")
            .field("issuer", &self.issuer)
            .field("lifetime_secs", &self.lifetime_secs)
            .finish_non_exhaustive()
    }
}

const KEY_INFO: &[u8] = b"ishare-gateway access token key v1";

/// The one JOSE header of our tokens, `{"typ":"JWT","alg":"HS256"}`, base64url-encoded.
const HEADER: &str = "eyJ0eXAiOiJKV1QiLCJhbGciOiJIUzI1NiJ9";

/// The longest token read: ours are a few hundred bytes.
const MAX_TOKEN_LEN: usize = 4096;

/// How many verified tokens are kept (at most about 5 KiB each).
const VERIFIED_TOKENS: u64 = 10_000;

impl AccessTokens {
    /// Derive the token key from the issuer's private key (any bytes of it: PEM or DER) with
    /// HKDF-SHA256, so the key material to share between replicas is the identity they share anyway.
    pub fn new(issuer: &PartyId, private_key: &[u8], lifetime_secs: u64, leeway_secs: u64) -> Self {
        let salt = ring::hkdf::Salt::new(ring::hkdf::HKDF_SHA256, issuer.as_str().as_bytes());
        let mut key = [0u8; 32];
        salt.extract(private_key)
            .expand(&[KEY_INFO], ring::hkdf::HKDF_SHA256)
            .and_then(|okm| okm.fill(&mut key))
            .expect("HKDF-SHA256 can fill 32 bytes");
        let valid_for = Duration::from_secs(lifetime_secs.saturating_add(leeway_secs));
        AccessTokens {
            issuer: issuer.to_string(),
            key: ring::hmac::Key::new(ring::hmac::HMAC_SHA256, &key),
            lifetime_secs,
            leeway_secs,
            verified: moka::sync::Cache::builder()
                .max_capacity(VERIFIED_TOKENS)
                .time_to_live(valid_for)
                .build_with_hasher(crate::keyed::keyed()),
        }
    }

    pub fn lifetime_secs(&self) -> u64 {
        self.lifetime_secs
    }

    /// A token for `client` with `scopes`; returns the token.
    pub fn issue(&self, client: &PartyId, scopes: &[String], now: Timestamp) -> String {
        let iat = now.secs();
        let claims = AccessClaims {
            iss: self.issuer.clone(),
            sub: client.to_string(),
            aud: self.issuer.clone(),
            jti: uuid::Uuid::new_v4().to_string(),
            iat,
            exp: iat + self.lifetime_secs as i64,
            scope: scopes.to_vec(),
        };
        let payload = serde_json::to_vec(&claims).expect("plain claims serialise");
        let mut token = format!("{HEADER}.{}", URL_SAFE_NO_PAD.encode(payload));
        let tag = ring::hmac::sign(&self.key, token.as_bytes());
        token.push('.');
        token.push_str(&URL_SAFE_NO_PAD.encode(tag.as_ref()));
        token
    }

    /// Validate a token we issued, at `now`.
    pub fn validate(
        &self,
        token: &str,
        now: Timestamp,
    ) -> Result<Arc<AccessClaims>, AccessTokenError> {
        if token.len() > MAX_TOKEN_LEN {
            return Err(AccessTokenError::Invalid);
        }
        let claims = match self.verified.get(token) {
            Some(claims) => claims,
            None => {
                let claims = Arc::new(self.verify(token)?);
                self.verified.insert(token.into(), claims.clone());
                claims
            }
        };
        self.in_time(&claims, now)?;
        Ok(claims)
    }

    /// Whether the claims of a token verified here are valid at `now`: what of a token's
    /// validity changes with the time (its MAC, issuer and audience do not).
    pub fn in_time(&self, claims: &AccessClaims, now: Timestamp) -> Result<(), AccessTokenError> {
        let leeway = i64::try_from(self.leeway_secs).unwrap_or(i64::MAX);
        if now.as_f64() > claims.exp.saturating_add(leeway) as f64 {
            return Err(AccessTokenError::Expired);
        }
        if claims.iat as f64 > now.as_f64() + self.leeway_secs as f64 {
            return Err(AccessTokenError::Invalid);
        }
        Ok(())
    }

    /// The claims of a token we issued: its MAC first, then its issuer, audience and subject.
    fn verify(&self, token: &str) -> Result<AccessClaims, AccessTokenError> {
        let (signed, signature) = token.rsplit_once('.').ok_or(AccessTokenError::Invalid)?;
        let payload = signed
            .strip_prefix(HEADER)
            .and_then(|rest| rest.strip_prefix('.'))
            .ok_or(AccessTokenError::Invalid)?;
        let signature = URL_SAFE_NO_PAD
            .decode(signature)
            .map_err(|_| AccessTokenError::Invalid)?;
        ring::hmac::verify(&self.key, signed.as_bytes(), &signature)
            .map_err(|_| AccessTokenError::Invalid)?;
        let claims: AccessClaims = URL_SAFE_NO_PAD
            .decode(payload)
            .ok()
            .and_then(|json| serde_json::from_slice(&json).ok())
            .ok_or(AccessTokenError::Invalid)?;
        if claims.iss != self.issuer || claims.aud != self.issuer || claims.sub.is_empty() {
            return Err(AccessTokenError::Invalid);
        }
        Ok(claims)
    }

    /// Validate the value of an Authorization header.
    pub fn validate_header(
        &self,
        authorization: Option<&str>,
        now: Timestamp,
    ) -> Result<Arc<AccessClaims>, AccessTokenError> {
        self.validate(bearer_token(authorization)?, now)
    }
}

/// The token of an `Authorization: Bearer <token>` header (the scheme word is case-insensitive).
pub fn bearer_token(authorization: Option<&str>) -> Result<&str, AccessTokenError> {
    let value = authorization.map(str::trim).filter(|v| !v.is_empty());
    let value = value.ok_or(AccessTokenError::Missing)?;
    match value.split_once(' ') {
        Some((scheme, token))
            if scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty() =>
        {
            Ok(token.trim())
        }
        _ => Err(AccessTokenError::NotBearer),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(key: &[u8]) -> AccessTokens {
        AccessTokens::new(
            &PartyId::parse("EU.EORI.NL000000003").unwrap(),
            key,
            3600,
            5,
        )
    }

    #[test]
    fn issued_tokens_validate_until_they_expire() {
        let t = tokens(b"key material");
        let client = PartyId::parse("EU.EORI.NL000000001").unwrap();
        let token = t.issue(&client, &["iSHARE".into()], Timestamp::from_secs(1000));
        let claims = t.validate(&token, Timestamp::from_secs(2000)).unwrap();
        assert_eq!(claims.sub, client.as_str());
        assert_eq!(claims.scope, vec!["iSHARE".to_string()]);
        assert_eq!(t.validate(&token, Timestamp::from_secs(4605)), Ok(claims));
        assert_eq!(
            t.validate(&token, Timestamp::from_secs(4606)),
            Err(AccessTokenError::Expired)
        );
    }

    #[test]
    fn a_token_seen_again_is_not_verified_again_but_still_expires() {
        let t = tokens(b"key material");
        let client = PartyId::parse("EU.EORI.NL000000001").unwrap();
        let token = t.issue(&client, &[], Timestamp::from_secs(1000));
        let first = t.validate(&token, Timestamp::from_secs(1001)).unwrap();
        t.verified.run_pending_tasks();
        assert_eq!(t.verified.entry_count(), 1);
        assert_eq!(t.validate(&token, Timestamp::from_secs(1002)), Ok(first));
        assert_eq!(
            t.validate(&token, Timestamp::from_secs(4606)),
            Err(AccessTokenError::Expired)
        );
        assert_eq!(
            t.validate(&token, Timestamp::from_secs(900)),
            Err(AccessTokenError::Invalid),
            "issued in the future"
        );
        // The same claims under another MAC, or the token with a byte more, are verified anew.
        let (signed, _) = token.rsplit_once('.').unwrap();
        let forged = format!("{signed}.{}", URL_SAFE_NO_PAD.encode([0u8; 32]));
        for other in [forged, format!("{token}A")] {
            assert_eq!(
                t.validate(&other, Timestamp::from_secs(1002)),
                Err(AccessTokenError::Invalid)
            );
        }
        t.verified.run_pending_tasks();
        assert_eq!(t.verified.entry_count(), 1, "refused tokens are not kept");
    }

    #[test]
    fn replicas_with_the_same_key_agree_and_others_refuse() {
        let client = PartyId::parse("EU.EORI.NL000000001").unwrap();
        let token = tokens(b"key material").issue(&client, &[], Timestamp::from_secs(1000));
        assert!(tokens(b"key material")
            .validate(&token, Timestamp::from_secs(1001))
            .is_ok());
        assert_eq!(
            tokens(b"other key").validate(&token, Timestamp::from_secs(1001)),
            Err(AccessTokenError::Invalid)
        );
        let tampered = format!("{}x", token);
        assert_eq!(
            tokens(b"key material").validate(&tampered, Timestamp::from_secs(1001)),
            Err(AccessTokenError::Invalid)
        );
    }

    #[test]
    fn only_our_header_and_our_mac_are_accepted() {
        let t = tokens(b"key material");
        let client = PartyId::parse("EU.EORI.NL000000001").unwrap();
        let token = t.issue(&client, &[], Timestamp::from_secs(1000));
        let now = Timestamp::from_secs(1001);
        let parts: Vec<&str> = token.split('.').collect();
        let header: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
        assert_eq!(header, serde_json::json!({"typ": "JWT", "alg": "HS256"}));
        let payload = |claims: serde_json::Value| URL_SAFE_NO_PAD.encode(claims.to_string());
        let mac = |signed: &str| {
            URL_SAFE_NO_PAD.encode(ring::hmac::sign(&t.key, signed.as_bytes()).as_ref())
        };
        let good = serde_json::json!({"iss": "EU.EORI.NL000000003", "sub": client.as_str(),
            "aud": "EU.EORI.NL000000003", "jti": "j", "iat": 1000, "exp": 2000, "scope": []});
        let signed = format!("{HEADER}.{}", payload(good.clone()));
        assert!(t
            .validate(&format!("{signed}.{}", mac(&signed)), now)
            .is_ok());
        let none = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#),
            payload(good.clone())
        );
        for (token, why) in [
            (
                format!("{none}.{}", mac(&none)),
                "another header, even with a valid MAC",
            ),
            (format!("{none}."), "alg none"),
            (format!("{signed}."), "no MAC"),
            (format!("{signed}.{}", &mac(&signed)[1..]), "a cut MAC"),
            (format!("{}.{}", parts[0], parts[1]), "two segments"),
            ("x".repeat(MAX_TOKEN_LEN + 1), "too long"),
        ] {
            assert_eq!(
                t.validate(&token, now),
                Err(AccessTokenError::Invalid),
                "{why}"
            );
        }
        for (member, value) in [
            ("iss", "EU.EORI.NL000000009"),
            ("aud", "EU.EORI.NL000000009"),
            ("sub", ""),
        ] {
            let mut claims = good.clone();
            claims[member] = value.into();
            let signed = format!("{HEADER}.{}", payload(claims));
            assert_eq!(
                t.validate(&format!("{signed}.{}", mac(&signed)), now),
                Err(AccessTokenError::Invalid),
                "{member}"
            );
        }
    }

    #[test]
    fn authorization_header_forms() {
        assert_eq!(bearer_token(None), Err(AccessTokenError::Missing));
        assert_eq!(bearer_token(Some("")), Err(AccessTokenError::Missing));
        assert_eq!(
            bearer_token(Some("Basic abc")),
            Err(AccessTokenError::NotBearer)
        );
        assert_eq!(
            bearer_token(Some("Bearer")),
            Err(AccessTokenError::NotBearer)
        );
        assert_eq!(bearer_token(Some("bearer abc")), Ok("abc"));
        assert_eq!(bearer_token(Some("Bearer  abc ")), Ok("abc"));
    }
}
