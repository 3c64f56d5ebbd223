//! Bearer tokens on routes: our own access tokens, validated without I/O or RSA.

use super::reject::Reject;
use crate::access_token::{AccessClaims, AccessTokens};
use crate::scheme::Timestamp;
use pingora::http::RequestHeader;

/// The caller of a request: 401 when the token is missing, malformed, forged or expired.
pub fn authenticate(req: &RequestHeader, tokens: &AccessTokens) -> Result<AccessClaims, Reject> {
    let mut values = req.headers.get_all(http::header::AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => None,
        (Some(v), None) => Some(v.to_str().map_err(|_| {
            Reject::Unauthenticated(crate::access_token::AccessTokenError::NotBearer)
        })?),
        (Some(_), Some(_)) => {
            return Err(Reject::Unauthenticated(
                crate::access_token::AccessTokenError::Invalid,
            ))
        }
    };
    tokens
        .validate_header(value, Timestamp::now())
        .map_err(Reject::Unauthenticated)
}
