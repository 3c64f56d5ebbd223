//! The broker pattern: a caller acting for another consumer forwards that consumer's client
//! assertion in the `service_consumer_assertion` header; the request is then decided for that
//! consumer. The assertion is a client assertion as the scheme defines it and nothing more: signed
//! by the consumer (an active party, its certificate chained to the trusted list), `iss` = `sub` =
//! the consumer, `aud` = the caller, `exp` = `iat` + 30 and unexpired, a `jti` used once only (the
//! replay store remembers it), and no claims beyond `iss`, `sub`, `aud`, `jti`, `iat`, `exp`, `nbf`.

use crate::gateway::fleet::replay::ReplayStore;
use crate::gateway::reject::{EvidenceRefusal, Reject};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::assertion::{check_assertion, jti_retention, AssertionRules};
use crate::scheme::Timestamp;

/// The claims a consumer assertion may carry.
const CLAIMS: [&str; 7] = ["iss", "sub", "aud", "jti", "iat", "exp", "nbf"];

/// The consumer the caller acts for (as the scheme owner spells its id), from its forwarded client
/// assertion; `rules.audience` is the caller.
pub async fn original_consumer(
    assertion: &str,
    rules: &AssertionRules,
    trust: &TrustStore,
    replay: &ReplayStore,
    now: Timestamp,
) -> Result<String, Reject> {
    let refused = |e| Reject::from(EvidenceRefusal::ConsumerAssertion(e));
    let checked = check_assertion(assertion, None, rules, now).map_err(refused)?;
    if let Some(extra) = checked
        .jwt
        .claims
        .keys()
        .find(|k| !CLAIMS.contains(&k.as_str()))
    {
        return Err(EvidenceRefusal::ConsumerAssertionClaim(extra.clone()).into());
    }
    let signer = trust
        .verify_signer(&checked.jwt, &checked.client_id, now)
        .await
        .map_err(|e| match e {
            VerifyError::Refused(e) => refused(e.into()),
            VerifyError::SchemeOwner(e) => e.into(),
        })?;
    let consumer = signer.record.id.clone();
    let until = jti_retention(&checked, rules, now);
    replay
        .first_use(
            &consumer,
            &checked.jti,
            (checked.iat, rules.leeway_secs),
            until,
            now,
        )
        .await
        .map_err(|e| Reject::Unavailable(e.into()))?
        .accepted()
        .map_err(refused)?;
    Ok(consumer)
}
