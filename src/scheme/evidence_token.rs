//! Delegation evidence presented as a signed token (a `delegation_token`, as a consumer sends it in
//! the `delegation_evidence` header or a registry answers it): reading the evidence and its issuer,
//! and what the token's claims must say beside its signature, at a given time.

use super::evidence::DelegationEvidence;
use super::jwt::{DecodedJwt, JwtError};
use super::party::{PartyId, PartyIdError};
use super::vocabulary::DELEGATION_EVIDENCE_CLAIM;
use super::Timestamp;

/// What is wrong with an evidence token's claims.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceTokenError {
    #[error("the evidence token: {0}")]
    NotAJwt(#[from] JwtError),
    #[error("the token carries no delegationEvidence")]
    NoEvidence,
    #[error("the delegationEvidence is not readable: {0}")]
    Unreadable(String),
    #[error("the token's sub differs from the evidence's accessSubject")]
    SubjectMismatch,
    #[error("the token's iss is not a party identifier: {0}")]
    IssuerNotAParty(PartyIdError),
    #[error("the evidence token is addressed to another party than the caller")]
    NotForCaller,
    #[error("the evidence token's iat is in the future")]
    IssuedInFuture,
    #[error("the evidence token is older than the accepted maximum age")]
    TooOld,
    #[error("the evidence token has no exp")]
    NoExpiry,
    #[error("the evidence token has expired (exp)")]
    Expired,
    #[error("the evidence token is not valid yet (nbf)")]
    NotYetValid,
}

reason_codes! {
    EvidenceTokenError {
        EvidenceTokenError::NotAJwt(_)
        | EvidenceTokenError::NoEvidence
        | EvidenceTokenError::Unreadable(_)
        | EvidenceTokenError::SubjectMismatch
        | EvidenceTokenError::NoExpiry => "malformed_evidence",
        EvidenceTokenError::IssuerNotAParty(_) => "evidence_issuer_unknown",
        EvidenceTokenError::NotForCaller => "evidence_not_for_caller",
        EvidenceTokenError::IssuedInFuture => "evidence_issued_in_future",
        EvidenceTokenError::TooOld => "evidence_too_old",
        EvidenceTokenError::Expired => "evidence_token_expired",
        EvidenceTokenError::NotYetValid => "evidence_token_not_yet_valid",
    }
}

/// The evidence a token carries, and the party that claims to have issued it.
#[derive(Clone, Debug, PartialEq)]
pub struct EvidenceToken {
    pub issuer: PartyId,
    pub evidence: DelegationEvidence,
}

/// Read the evidence and the issuer of a delegation token (its signature is checked elsewhere).
pub fn read_evidence_token(jwt: &DecodedJwt) -> Result<EvidenceToken, EvidenceTokenError> {
    let evidence: DelegationEvidence = jwt
        .claims
        .get(DELEGATION_EVIDENCE_CLAIM)
        .cloned()
        .ok_or(EvidenceTokenError::NoEvidence)
        .and_then(|v| {
            serde_json::from_value(v).map_err(|e| EvidenceTokenError::Unreadable(e.to_string()))
        })?;
    let issuer = PartyId::parse(jwt.str_claim("iss").unwrap_or_default())
        .map_err(EvidenceTokenError::IssuerNotAParty)?;
    if jwt
        .str_claim("sub")
        .is_some_and(|s| s != evidence.target.access_subject)
    {
        return Err(EvidenceTokenError::SubjectMismatch);
    }
    if let Some(id) = evidence.licence_ids().find(|id| !is_header_safe(id)) {
        return Err(EvidenceTokenError::Unreadable(format!(
            "the licence {id:?} holds characters a header cannot carry"
        )));
    }
    Ok(EvidenceToken { issuer, evidence })
}

/// Licence ids become response headers: visible ASCII and spaces only.
fn is_header_safe(id: &str) -> bool {
    id.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
}

/// How evidence tokens from a consumer are judged.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct HeaderEvidenceRules {
    /// Clock leeway for iat, in seconds.
    pub leeway_secs: f64,
    /// The oldest `iat` accepted, in seconds before now.
    pub max_age_secs: f64,
}

/// The claims of evidence a consumer presents itself: addressed to one of `audiences` (the consumer
/// or the caller acting for it; a token without `aud` is not refused for it), issued no later than
/// now and not older than the maximum age, within its own `nbf` and `exp` (all with leeway). A token
/// without `iat` counts from the evidence's `notBefore`; one without `exp` is refused.
pub fn check_header_evidence(
    jwt: &DecodedJwt,
    evidence: &DelegationEvidence,
    audiences: &[&str],
    rules: &HeaderEvidenceRules,
    now: Timestamp,
) -> Result<(), EvidenceTokenError> {
    if !audiences
        .iter()
        .any(|p| jwt.audience_includes(p) != Some(false))
    {
        return Err(EvidenceTokenError::NotForCaller);
    }
    let iat = jwt.time_claim("iat").unwrap_or(evidence.not_before as f64);
    if iat > now.as_f64() + rules.leeway_secs {
        return Err(EvidenceTokenError::IssuedInFuture);
    }
    if now.as_f64() - iat > rules.max_age_secs {
        return Err(EvidenceTokenError::TooOld);
    }
    let exp = jwt.time_claim("exp").ok_or(EvidenceTokenError::NoExpiry)?;
    if now.as_f64() > exp + rules.leeway_secs {
        return Err(EvidenceTokenError::Expired);
    }
    if jwt
        .time_claim("nbf")
        .is_some_and(|nbf| nbf > now.as_f64() + rules.leeway_secs)
    {
        return Err(EvidenceTokenError::NotYetValid);
    }
    Ok(())
}

#[cfg(test)]
#[path = "evidence_token_tests.rs"]
mod tests;
