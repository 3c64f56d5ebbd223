//! Delegation evidence presented as a signed token (a `delegation_token`, as a consumer sends it in
//! the `delegationEvidence` header or a registry answers it): reading the evidence and its issuer
//! as the issuer's scheme version writes it, and what the token's claims must say beside its
//! signature, at a given time.

use super::evidence::{drop_listed, DelegationEvidence, ReadAs};
use super::jwt::{DecodedJwt, JwtError};
use super::party::{PartyId, PartyIdError};
use super::version::SchemeVersion;
use super::vocabulary::DELEGATION_EVIDENCE_CLAIM;
use super::Timestamp;
use jsonwebtoken::Algorithm;
use serde_json::Value;
use std::collections::BTreeMap;

/// What is wrong with an evidence token's claims.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvidenceTokenError {
    #[error("the evidence token: {0}")]
    NotAJwt(#[from] JwtError),
    #[error("the token carries no delegationEvidence")]
    NoEvidence,
    #[error("the delegationEvidence is not readable: {0}")]
    Unreadable(String),
    #[error("the token's sub is neither the evidence's accessSubject nor (from 2.1) its issuer")]
    SubjectMismatch,
    #[error("the evidence carries {member}, which scheme {version} (its issuer's, as configured) does not have")]
    BeyondVersion {
        member: String,
        version: SchemeVersion,
    },
    #[error("the token's iss is not a party identifier: {0}")]
    IssuerNotAParty(PartyIdError),
    #[error("the evidence token is addressed to {found} (aud), not to {expected}")]
    NotForCaller {
        /// The parties it may be addressed to, as written in the refusal.
        expected: String,
        /// Its `aud`, as written in the token (bounded).
        found: String,
    },
    #[error("the evidence token's iat is in the future")]
    IssuedInFuture,
    #[error("the evidence token is older than the accepted maximum age")]
    TooOld,
    #[error("the evidence token has no exp")]
    NoExpiry,
    #[error("the evidence token has no {0}, which every token of the scheme carries")]
    MissingClaim(&'static str),
    #[error("the evidence token carries the claim {0:?}, which no evidence token has: nothing in evidence that is not understood grants anything")]
    UnknownClaim(String),
    #[error("the evidence token is valid for longer (exp − iat) than evidence may be old")]
    LifetimeTooLong,
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
        | EvidenceTokenError::NoExpiry
        | EvidenceTokenError::MissingClaim(_) => "malformed_evidence",
        EvidenceTokenError::UnknownClaim(_) => "evidence_member_not_understood",
        EvidenceTokenError::LifetimeTooLong => "evidence_lifetime_too_long",
        EvidenceTokenError::IssuerNotAParty(_) => "evidence_issuer_unknown",
        EvidenceTokenError::BeyondVersion { .. } => "evidence_version_mismatch",
        EvidenceTokenError::NotForCaller { .. } => "evidence_not_for_caller",
        EvidenceTokenError::IssuedInFuture => "evidence_issued_in_future",
        EvidenceTokenError::TooOld => "evidence_too_old",
        EvidenceTokenError::Expired => "evidence_token_expired",
        EvidenceTokenError::NotYetValid => "evidence_token_not_yet_valid",
    }
}

/// The evidence a token carries, the party that claims to have issued it, and its `sub`.
#[derive(Clone, Debug, PartialEq)]
pub struct EvidenceToken {
    pub issuer: PartyId,
    pub subject: String,
    pub evidence: DelegationEvidence,
}

impl EvidenceToken {
    /// Its `sub` names the evidence's access subject or (from 2.1) its issuer, as `same` tells
    /// names of one party: as written, or (3.0) through the participant registry's records.
    pub fn check_subject(
        &self,
        same: impl Fn(&str, &str) -> bool,
    ) -> Result<(), EvidenceTokenError> {
        let version = self.evidence.read_as.version;
        let named = same(&self.subject, &self.evidence.target.access_subject)
            || (version.evidence_sub_is_issuer() && same(&self.subject, self.issuer.as_str()));
        match named {
            true => Ok(()),
            false => Err(EvidenceTokenError::SubjectMismatch),
        }
    }
}

/// How the evidence of each signer is read: the scheme version it speaks (configured per
/// registry, else the scheme owner's), and the members an operator listed as harmless for it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Readers {
    /// The version of every peer not configured on its own.
    pub scheme_version: SchemeVersion,
    /// Versions of peers configured on their own, by party id.
    pub versions: BTreeMap<String, SchemeVersion>,
    /// Members (generic paths) to drop from each issuer's evidence, by party id.
    pub dropped: BTreeMap<String, Vec<String>>,
    /// RS384 and RS512 from every peer, whatever its version (`tokens.allow_rs384_rs512`).
    pub rs384_rs512: bool,
}

impl Readers {
    /// The version `party` speaks. Party ids are looked up as the scheme owner finds a party's
    /// record (EORIs without regard to case): a signer is read in one version however it writes
    /// its id.
    pub fn version_of(&self, party: &str) -> SchemeVersion {
        self.versions
            .iter()
            .find(|(id, _)| id.eq_ignore_ascii_case(party))
            .map_or(self.scheme_version, |(_, v)| *v)
    }

    /// Whether evidence signed under either name is read alike: in one version, with the same
    /// members dropped.
    pub fn read_alike(&self, a: &str, b: &str) -> bool {
        self.version_of(a) == self.version_of(b) && self.dropped_for(a) == self.dropped_for(b)
    }

    /// The members listed to drop from `party`'s evidence, looked up as `version_of` does.
    pub fn dropped_for(&self, party: &str) -> &[String] {
        self.dropped
            .iter()
            .find(|(id, _)| id.eq_ignore_ascii_case(party))
            .map_or(&[], |(_, listed)| listed.as_slice())
    }
}

/// Read the evidence and the issuer of a delegation token (its signature is checked elsewhere),
/// as the issuer's version writes it: its algorithm one that version signs with, a `sub` (whom
/// it names is `EvidenceToken::check_subject`'s), no member that version does not have (refused,
/// not guessed to be another version's), and the members listed for the issuer dropped.
pub fn read_evidence_token(
    jwt: &DecodedJwt,
    readers: &Readers,
) -> Result<EvidenceToken, EvidenceTokenError> {
    let issuer = PartyId::parse(jwt.str_claim("iss").unwrap_or_default())
        .map_err(EvidenceTokenError::IssuerNotAParty)?;
    let version = readers.version_of(issuer.as_str());
    if jwt.alg != Algorithm::RS256 && !(readers.rs384_rs512 || version.signs_with_rs384_rs512()) {
        let alg = format!("{:?}", jwt.alg);
        return Err(EvidenceTokenError::NotAJwt(JwtError::InvalidAlg(alg)));
    }
    let written = jwt
        .claims
        .get(DELEGATION_EVIDENCE_CLAIM)
        .cloned()
        .ok_or(EvidenceTokenError::NoEvidence)?;
    let evidence = read_evidence(written, issuer.as_str(), readers)?;
    let subject = jwt
        .str_claim("sub")
        .ok_or(EvidenceTokenError::MissingClaim("sub"))?
        .to_string();
    Ok(EvidenceToken {
        issuer,
        subject,
        evidence,
    })
}

/// Evidence (the JSON of a `delegationEvidence`) as its issuer's version writes it: the members
/// listed for the issuer dropped, no member that version does not have, licence identifiers a
/// header can carry. Marked as read in that version.
pub fn read_evidence(
    mut written: Value,
    issuer: &str,
    readers: &Readers,
) -> Result<DelegationEvidence, EvidenceTokenError> {
    drop_listed(&mut written, readers.dropped_for(issuer));
    let mut evidence: DelegationEvidence = serde_json::from_value(written)
        .map_err(|e| EvidenceTokenError::Unreadable(e.to_string()))?;
    let version = readers.version_of(issuer);
    if let Some(member) = evidence.first_beyond(version) {
        return Err(EvidenceTokenError::BeyondVersion { member, version });
    }
    if let Some(id) = evidence.licence_ids().find(|id| !is_header_safe(id)) {
        return Err(EvidenceTokenError::Unreadable(format!(
            "the licence {id:?} holds characters a header cannot carry"
        )));
    }
    evidence.read_as = ReadAs {
        version,
        designated_for_us: false,
    };
    Ok(evidence)
}

/// Licence ids become response headers: visible ASCII and spaces only.
fn is_header_safe(id: &str) -> bool {
    id.bytes().all(|b| b == b' ' || b.is_ascii_graphic())
}

/// How the claims of evidence tokens are judged, from a consumer and a registry alike.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EvidenceTokenRules {
    /// Clock leeway for iat, nbf and exp, in seconds.
    pub leeway_secs: f64,
    /// The oldest `iat` accepted, in seconds before now; also the longest `exp − iat`.
    pub max_age_secs: f64,
}

/// The claims an evidence token may carry: the scheme's six, `nbf`, and the evidence.
const EVIDENCE_TOKEN_CLAIMS: [&str; 8] = [
    "iss",
    "sub",
    "aud",
    "jti",
    "iat",
    "exp",
    "nbf",
    DELEGATION_EVIDENCE_CLAIM,
];

/// The claims of an evidence token (its addressee aside), wherever it comes from: only the ones
/// an evidence token has (a second spelling of the evidence, `delegation_evidence`, is refused,
/// not ignored), a `jti`, an `aud`, an `iat` no later than now and not older than the maximum
/// age, an `exp` not passed and no further from `iat` than that age, and an `nbf` (if any) not
/// ahead — all with leeway.
pub fn check_token_claims(
    jwt: &DecodedJwt,
    rules: &EvidenceTokenRules,
    now: Timestamp,
) -> Result<(), EvidenceTokenError> {
    ClaimTimes::read(jwt)?.check(rules, now)
}

/// What `check_token_claims` reads of a token, read once: the claims it checks before any time
/// (which hold or fail alike at every time), and the times the rest is judged on.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimTimes {
    iat: f64,
    exp: Option<f64>,
    nbf: Option<f64>,
}

impl ClaimTimes {
    /// The token's claims are all an evidence token's, and it has a `jti`, an `aud` and an `iat`:
    /// its times, or the first of these that fails.
    pub fn read(jwt: &DecodedJwt) -> Result<Self, EvidenceTokenError> {
        if let Some(unknown) = jwt
            .claims
            .keys()
            .find(|k| !EVIDENCE_TOKEN_CLAIMS.contains(&k.as_str()))
        {
            return Err(EvidenceTokenError::UnknownClaim(
                unknown.chars().take(64).collect(),
            ));
        }
        if jwt.str_claim("jti").is_none_or(str::is_empty) {
            return Err(EvidenceTokenError::MissingClaim("jti"));
        }
        if !jwt.claims.contains_key("aud") {
            return Err(EvidenceTokenError::MissingClaim("aud"));
        }
        let iat = jwt
            .time_claim("iat")
            .ok_or(EvidenceTokenError::MissingClaim("iat"))?;
        Ok(ClaimTimes {
            iat,
            exp: jwt.time_claim("exp"),
            nbf: jwt.time_claim("nbf"),
        })
    }

    /// The rest of `check_token_claims` at `now`, in its order.
    pub fn check(
        &self,
        rules: &EvidenceTokenRules,
        now: Timestamp,
    ) -> Result<(), EvidenceTokenError> {
        let iat = self.iat;
        if iat > now.as_f64() + rules.leeway_secs {
            return Err(EvidenceTokenError::IssuedInFuture);
        }
        if now.as_f64() - iat > rules.max_age_secs {
            return Err(EvidenceTokenError::TooOld);
        }
        let exp = self.exp.ok_or(EvidenceTokenError::NoExpiry)?;
        if now.as_f64() > exp + rules.leeway_secs {
            return Err(EvidenceTokenError::Expired);
        }
        if exp - iat > rules.max_age_secs + rules.leeway_secs {
            return Err(EvidenceTokenError::LifetimeTooLong);
        }
        if self
            .nbf
            .is_some_and(|nbf| nbf > now.as_f64() + rules.leeway_secs)
        {
            return Err(EvidenceTokenError::NotYetValid);
        }
        Ok(())
    }
}

/// The claims of evidence a consumer presents itself: addressed to one of `audiences` (the
/// consumer or the caller acting for it), and held to `check_token_claims` (its claims as
/// `ClaimTimes::read` read them).
pub fn check_header_evidence<S: std::borrow::Borrow<str>>(
    jwt: &DecodedJwt,
    claims: &Result<ClaimTimes, EvidenceTokenError>,
    audiences: &[S],
    rules: &EvidenceTokenRules,
    now: Timestamp,
) -> Result<(), EvidenceTokenError> {
    if !audiences
        .iter()
        .any(|p| jwt.audience_includes(p.borrow()) != Some(false))
    {
        return Err(EvidenceTokenError::NotForCaller {
            expected: audiences.join(" or "),
            found: jwt.audience(),
        });
    }
    claims.as_ref().map_err(Clone::clone)?.check(rules, now)
}

#[cfg(test)]
#[path = "evidence_token_tests.rs"]
pub(crate) mod tests;
