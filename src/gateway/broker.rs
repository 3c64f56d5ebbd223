//! The broker pattern: a caller acting for another consumer forwards that consumer's client
//! assertion in the `service_consumer_assertion` header; the request is then decided for the
//! consumer. The assertion must be addressed to the caller (the forwarder) and signed by an active
//! party.

use super::reject::{EvidenceRefusal, Reject};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::assertion::{check_assertion, AssertionRules};
use crate::scheme::Timestamp;

/// The consumer the caller acts for, from its forwarded client assertion; `rules.audience` is the
/// caller.
pub async fn original_consumer(
    assertion: &str,
    rules: &AssertionRules,
    trust: &TrustStore,
    now: Timestamp,
) -> Result<String, Reject> {
    let refused = |e| Reject::from(EvidenceRefusal::ConsumerAssertion(e));
    let checked = check_assertion(assertion, None, rules, now).map_err(refused)?;
    trust
        .verify_signer(&checked.jwt, &checked.client_id, now)
        .await
        .map_err(|e| match e {
            VerifyError::Refused(e) => refused(e.into()),
            VerifyError::SchemeOwner(e) => e.into(),
        })?;
    Ok(checked.client_id.to_string())
}
