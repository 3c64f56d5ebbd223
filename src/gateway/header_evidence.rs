//! Delegation evidence a consumer presents in the `delegation_evidence` header: one delegation
//! token, or several separated by commas for a chain from the data owner to the consumer. Each must
//! be signed by a party that may issue it, and say what the scheme's rules require of its claims.

use super::reject::{EvidenceRefusal, HeaderProblem, Reject};
use crate::peers::registry::RegistryClient;
use crate::peers::scheme_owner::TrustStore;
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::evidence::{AccessRequest, DelegationEvidence};
use crate::scheme::evidence_token::{
    check_header_evidence, read_evidence_token, HeaderEvidenceRules,
};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::vocabulary::{Role, EVIDENCE_HEADER};
use crate::scheme::Timestamp;

/// What presented evidence must serve.
pub struct Expected<'a> {
    pub request: &'a AccessRequest,
    /// The authenticated caller (the consumer, or a broker acting for it).
    pub caller: &'a str,
    /// The registry the route names, if any.
    pub registry: Option<&'a str>,
}

pub struct HeaderEvidence {
    algorithms: AlgorithmPolicy,
    rules: HeaderEvidenceRules,
}

impl HeaderEvidence {
    pub fn new(algorithms: AlgorithmPolicy, rules: HeaderEvidenceRules) -> Self {
        HeaderEvidence { algorithms, rules }
    }

    /// Evidence from the header: one delegation_token, or several separated by commas for a chain
    /// from the data owner to the consumer.
    pub async fn chain(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        registries: &RegistryClient,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<Vec<DelegationEvidence>, Reject> {
        let mut chain = Vec::new();
        for token in tokens.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            chain.push(self.verify(token, expected, registries, trust, now).await?);
        }
        if chain.is_empty() {
            return Err(EvidenceRefusal::Header {
                header: EVIDENCE_HEADER,
                problem: HeaderProblem::Empty,
            }
            .into());
        }
        Ok(chain)
    }

    /// One delegation_token from the header: signed by its `iss`, which is the data owner of that
    /// evidence or an authorisation registry of that owner (or of the route's data owner); and
    /// addressed to the consumer, issued in time (the pure checks of `evidence_token`).
    async fn verify(
        &self,
        token: &str,
        expected: &Expected<'_>,
        registries: &RegistryClient,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<DelegationEvidence, Reject> {
        let decoded =
            jwt::decode(token, self.algorithms).map_err(|e| EvidenceRefusal::Token(e.into()))?;
        let read = read_evidence_token(&decoded).map_err(EvidenceRefusal::Token)?;
        let signer = trust
            .verify_signer(&decoded, &read.issuer, now)
            .await
            .map_err(|e| match e {
                VerifyError::Refused(e) => Reject::from(EvidenceRefusal::Signer(e)),
                VerifyError::SchemeOwner(e) => e.into(),
            })?;
        let owner = &read.evidence.policy_issuer;
        if read.issuer.as_str() != owner {
            if !signer
                .record
                .has_role(Role::AuthorisationRegistry.as_str(), now.secs())
            {
                return Err(EvidenceRefusal::IssuerNotARegistry(read.issuer).into());
            }
            // In a chain, a later step may be registered with the route's data owner's registry.
            let configured = expected.registry;
            let holds = registries
                .holds_delegations_of(configured, owner, &read.issuer, trust)
                .await?
                || registries
                    .holds_delegations_of(
                        configured,
                        &expected.request.policy_issuer,
                        &read.issuer,
                        trust,
                    )
                    .await?;
            if !holds {
                return Err(EvidenceRefusal::IssuerNotTheOwnersRegistry {
                    issuer: read.issuer,
                    owner: owner.clone(),
                }
                .into());
            }
        }
        check_header_evidence(
            &decoded,
            &read.evidence,
            &[expected.request.access_subject.as_str(), expected.caller],
            &self.rules,
            now,
        )
        .map_err(EvidenceRefusal::Token)?;
        Ok(read.evidence)
    }
}
