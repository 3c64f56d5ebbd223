//! POST /connect/token (also the other configured token paths): a client assertion in, an access
//! token out. Every check of the scheme in its order, trust from the scheme owner's trusted list,
//! the party checked at the scheme owner, and jti replays refused.

use super::reject::{Answer, Reject};
use super::snapshot::{Shared, Snapshot};
use crate::scheme::assertion::{
    check_assertion_with, jti_retention, AssertionError, AssertionRules, JtiStore, TokenRequest,
};
use crate::scheme::models::TokenResponse;
use crate::scheme::trust::check_party;
use crate::scheme::Timestamp;
use http::Method;
use pingora::proxy::Session;

/// The largest token request body read.
pub const MAX_BODY: usize = 64 * 1024;

/// Read a request body of at most `limit` bytes.
pub async fn read_body(session: &mut Session, limit: usize) -> Result<Vec<u8>, Reject> {
    let mut body = Vec::new();
    loop {
        match session.read_request_body().await {
            Ok(Some(chunk)) => {
                if body.len() + chunk.len() > limit {
                    return Err(Reject::BodyTooLarge);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(None) => return Ok(body),
            Err(e) => {
                return Err(Reject::TokenRequestBody(format!(
                    "the body could not be read: {}",
                    e.etype().as_str()
                )))
            }
        }
    }
}

/// Handle a token request; the answer and the client it was issued to.
pub async fn answer(
    session: &mut Session,
    snap: &Snapshot,
    shared: &Shared,
) -> Result<(Answer, String), Reject> {
    if session.req_header().method != Method::POST {
        return Err(Reject::MethodNotAllowed(vec![Method::POST]));
    }
    let content_type = session
        .req_header()
        .headers
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let body = read_body(session, MAX_BODY).await?;
    let request = TokenRequest::from_body(content_type.as_deref(), &body)
        .map_err(Reject::TokenRequestBody)?;
    let checked = request
        .check(&snap.config.scheme)
        .map_err(Reject::TokenRequest)?;
    let rules = AssertionRules {
        audience: snap.config.identity.party_id.to_string(),
        leeway_secs: snap.config.tokens.leeway.as_secs_f64(),
        algorithms: snap.algorithms,
    };
    let now = Timestamp::now();
    let assertion = check_assertion_with(
        &checked.assertion,
        Some(&checked.client_id),
        &rules,
        now,
        |jwt| match snap.trust.cached_key(&jwt.x5c) {
            Some(key) => jwt.verify_signature_with(&key),
            None => jwt.verify_signature(),
        },
    )
    .map_err(Reject::TokenRequest)?;
    let chain = snap
        .trust
        .validate(&assertion.jwt.x5c, now)
        .await?
        .map_err(|e| Reject::TokenRequest(AssertionError::Chain(e)))?;
    let record = snap.trust.party(&assertion.client_id).await?;
    check_party(&chain.chain, &assertion.client_id, record.as_deref(), now)
        .map_err(|e| Reject::TokenRequest(AssertionError::Party(e)))?;
    let until = jti_retention(&assertion, &rules, now);
    if !shared
        .replay
        .remember(assertion.client_id.as_str(), &assertion.jti, until, now)
    {
        return Err(Reject::TokenRequest(AssertionError::Replayed));
    }
    let access_token = snap
        .tokens
        .issue(&assertion.client_id, &checked.scopes, now);
    let answer = Answer {
        status: 200,
        body: serde_json::to_value(TokenResponse::bearer(
            access_token,
            snap.tokens.lifetime_secs(),
        ))
        .unwrap_or_default(),
        headers: vec![
            ("cache-control", "no-store".into()),
            ("pragma", "no-cache".into()),
        ],
    };
    Ok((answer, assertion.client_id.to_string()))
}
