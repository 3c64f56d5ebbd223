//! The access tokens we issue: opaque to consumers, HS256 over the claims with a key derived from the
//! issuer's private key, so that every replica holding the same key material can verify them without
//! shared state and without an RSA operation per request.

use crate::scheme::party::PartyId;
use crate::scheme::reason_codes;
use crate::scheme::Timestamp;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

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
    encoding: EncodingKey,
    decoding: DecodingKey,
    lifetime_secs: u64,
    leeway_secs: u64,
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
        AccessTokens {
            issuer: issuer.to_string(),
            encoding: EncodingKey::from_secret(&key),
            decoding: DecodingKey::from_secret(&key),
            lifetime_secs,
            leeway_secs,
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
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .expect("HS256 signing of plain claims cannot fail")
    }

    /// Validate a token we issued, at `now`.
    pub fn validate(&self, token: &str, now: Timestamp) -> Result<AccessClaims, AccessTokenError> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.set_issuer(&[&self.issuer]);
        validation.set_audience(&[&self.issuer]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        // Expiry is judged below against the given time, not the clock.
        validation.validate_exp = false;
        let data = jsonwebtoken::decode::<AccessClaims>(token, &self.decoding, &validation)
            .map_err(|_| AccessTokenError::Invalid)?;
        let claims = data.claims;
        if now.as_f64() > (claims.exp + self.leeway_secs as i64) as f64 {
            return Err(AccessTokenError::Expired);
        }
        if claims.iat as f64 > now.as_f64() + self.leeway_secs as f64 {
            return Err(AccessTokenError::Invalid);
        }
        Ok(claims)
    }

    /// Validate the value of an Authorization header.
    pub fn validate_header(
        &self,
        authorization: Option<&str>,
        now: Timestamp,
    ) -> Result<AccessClaims, AccessTokenError> {
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
