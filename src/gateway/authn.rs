//! Bearer tokens on routes: our own access tokens, validated without I/O or RSA.

use super::reject::Reject;
use crate::access_token::{AccessClaims, AccessTokenError, AccessTokens};
use crate::request::{single_header, HeaderProblem};
use crate::scheme::Timestamp;
use crate::telemetry::trace::Step;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use pingora::http::RequestHeader;

/// The caller of a request: 401 when the token is missing, malformed, forged or expired. A span
/// of its own in a traced request.
pub fn authenticate(req: &RequestHeader, tokens: &AccessTokens) -> Result<AccessClaims, Reject> {
    let mut step = Step::start(SpanKind::Internal, || "authenticate", Vec::new);
    let result = validate(req, tokens);
    match &result {
        Ok(claims) => {
            step.record(|| vec![KeyValue::new("ishare.client.party_id", claims.sub.clone())]);
            step.end(|| ("authenticated", false));
        }
        Err(reject) => step.end(|| (reject.row().reason, false)),
    }
    result
}

fn validate(req: &RequestHeader, tokens: &AccessTokens) -> Result<AccessClaims, Reject> {
    let value = single_header(&req.headers, http::header::AUTHORIZATION).map_err(|problem| {
        Reject::Unauthenticated(match problem {
            HeaderProblem::Repeated => AccessTokenError::Invalid,
            HeaderProblem::NotText | HeaderProblem::Empty => AccessTokenError::NotBearer,
        })
    })?;
    tokens
        .validate_header(value, Timestamp::now())
        .map_err(Reject::Unauthenticated)
}
