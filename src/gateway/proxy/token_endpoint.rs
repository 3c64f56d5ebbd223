//! POST /connect/token (also the other configured token paths): a client assertion in, an access
//! token out. Every check of the scheme in its order, trust from the scheme owner's trusted list,
//! the party checked at the scheme owner, and jti replays refused.

use crate::gateway::connections::body::{read_whole, BodyClock};
use crate::gateway::fleet::replay::ReplayStore;
use crate::gateway::reject::{Answer, Body, Reject};
use crate::gateway::snapshot::Snapshot;
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::assertion::{check_assertion, jti_retention, TokenRequest};
use crate::scheme::models::TokenResponse;
use crate::scheme::party::PartyId;
use crate::scheme::Timestamp;
use http::Method;
use pingora::proxy::Session;

/// The largest token request body read.
pub const MAX_BODY: usize = 64 * 1024;

/// Handle a token request; the answer and the client it was issued to.
pub async fn answer(
    session: &mut Session,
    snap: &Snapshot,
    clock: &mut BodyClock,
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
    let body = read_whole(session, MAX_BODY, clock, None).await?;
    issue(content_type.as_deref(), &body, snap, &snap.stores.replay).await
}

/// The token request in `body` (of `content_type`) checked, its jti kept in `replay`, and the token
/// issued; the answer and the client it was issued to.
pub async fn issue(
    content_type: Option<&str>,
    body: &[u8],
    snap: &Snapshot,
    replay: &ReplayStore,
) -> Result<(Answer, String), Reject> {
    let request = TokenRequest::from_body(content_type, body)
        .map_err(|e| Reject::UnreadableBody(e.into()))?;
    let checked = request
        .check(&snap.config.scheme)
        .map_err(Reject::TokenRequest)?;
    let rules = snap
        .authz
        .assertion_rules(snap.config.identity.party_id.as_str());
    let now = Timestamp::now();
    let assertion = check_assertion(&checked.assertion, Some(&checked.client_id), &rules, now)
        .map_err(Reject::TokenRequest)?;
    let signer = snap
        .trust
        .verify_signer(&assertion.jwt, &assertion.client_id, now)
        .await
        .map_err(|e| match e {
            VerifyError::Refused(e) => Reject::TokenRequest(e.into()),
            VerifyError::SchemeOwner(e) => e.into(),
        })?;
    // The party as the scheme owner spells it, whatever letter case the client used.
    let client = PartyId::parse(&signer.record.id).unwrap_or(assertion.client_id.clone());
    let until = jti_retention(&assertion, &rules, now);
    replay
        .first_use(
            client.as_str(),
            &assertion.jti,
            (assertion.iat, rules.leeway_secs),
            until,
            now,
        )
        .await
        .map_err(|e| Reject::Unavailable(e.into()))?
        .accepted()
        .map_err(Reject::TokenRequest)?;
    if crate::gateway::snapshot::forwards(&snap.config) {
        let kept =
            snap.stores
                .forwarded
                .keep(client.as_str(), &checked.assertion, assertion.exp, now);
        // Held here all the same: only a request at another instance misses it.
        if let Err(e) = kept.await {
            tracing::warn!(
                client = %client,
                "the consumer's client assertion is held at this instance only: {e}"
            );
        }
    }
    let access_token = snap.tokens.issue(&client, &checked.scopes, now);
    let answer = Answer {
        status: 200,
        body: Body::Json(
            serde_json::to_value(TokenResponse::bearer(
                access_token,
                snap.tokens.lifetime_secs(),
            ))
            .unwrap_or_default(),
        ),
        headers: vec![
            ("cache-control", "no-store".into()),
            ("pragma", "no-cache".into()),
        ],
    };
    Ok((answer, client.to_string()))
}
