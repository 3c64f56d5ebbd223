//! Delegation evidence a consumer presents in the `delegationEvidence` header (`delegation_evidence`
//! before 3.0): one delegation token, or several separated by commas for a chain from the data
//! owner to the consumer. Each must be signed by a party that may issue it, be written as its
//! signer's scheme version writes evidence, and say what the scheme's rules require of its claims.
//!
//! A consumer sends the same token again and again until it expires. What a token proves by itself
//! (its signature by a chain under the trusted list) is kept, found by the SHA-256 of its signature
//! and used only for the very same token text, until the token, its evidence or its chain expires,
//! and only under the trusted list it was verified with. (Hashing the signature alone, not the
//! whole token of several kilobytes, is most of what a cache hit saves.) What
//! depends on the request or on the signer's standing now (its party record, its role, the subjects,
//! the token's age) is checked on every request.

use super::decision::stages::Expected;
use super::reject::{EvidenceRefusal, HeaderProblem, Reject};
use crate::peers::registry::RegistryClient;
use crate::peers::scheme_owner::TrustStore;
use crate::peers::trust::{Signer, Trust, TrustedChain, VerifyError};
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::evidence_token::{
    check_header_evidence, read_evidence_token, EvidenceToken, HeaderEvidenceRules, Readers,
};
use crate::scheme::jwt::{self, AlgorithmPolicy, DecodedJwt};
use crate::scheme::party_record::Party;
use crate::scheme::trust::{check_party, PartyError, SignerError};
use crate::scheme::vocabulary::Role;
use crate::scheme::{pieces, Timestamp};
use crate::telemetry::Metrics;
use moka::Expiry;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The most delegation tokens one header may carry: a chain from the data owner through its
/// delegates to the consumer is a few steps long.
const MAX_CHAIN: usize = 8;

/// A delegation token whose signature verified with a chain under the trusted list.
struct VerifiedToken {
    /// The token's text, compared on every hit: the key is made of its signature only.
    text: Box<str>,
    jwt: DecodedJwt,
    token: EvidenceToken,
    chain: Arc<TrustedChain>,
    /// The trusted list's generation it was verified under.
    generation: u64,
    /// Unix seconds: when the token, its evidence or its chain expires.
    until: i64,
    /// What it holds in memory, roughly.
    weight: u32,
}

impl VerifiedToken {
    fn new(text: &str, jwt: DecodedJwt, token: EvidenceToken, chain: Arc<TrustedChain>) -> Self {
        let until = [
            jwt.time_claim("exp").map(|e| e.floor() as i64),
            Some(token.evidence.not_on_or_after),
            Some(chain.chain.not_after),
        ]
        .into_iter()
        .flatten()
        .min()
        .unwrap_or(0);
        VerifiedToken {
            text: text.into(),
            jwt,
            token,
            chain,
            generation: 0,
            until,
            // The text, and the decoded claims and evidence: about what the text takes, twice.
            weight: u32::try_from(3 * text.len() + 512).unwrap_or(u32::MAX),
        }
    }
}

struct UntilExpiry;

impl Expiry<[u8; 32], Arc<VerifiedToken>> for UntilExpiry {
    fn expire_after_create(
        &self,
        _key: &[u8; 32],
        value: &Arc<VerifiedToken>,
        _at: Instant,
    ) -> Option<Duration> {
        let left = value.until - Timestamp::now().secs();
        Some(Duration::from_secs(left.max(0) as u64))
    }
}

pub struct HeaderEvidence {
    /// Every algorithm some version signs with: which one a signer may use is its version's.
    algorithms: AlgorithmPolicy,
    readers: Readers,
    rules: HeaderEvidenceRules,
    verified: moka::sync::Cache<[u8; 32], Arc<VerifiedToken>>,
    metrics: Metrics,
}

impl HeaderEvidence {
    /// `cache_size`: the bytes verified tokens may take.
    pub fn new(
        readers: Readers,
        rules: HeaderEvidenceRules,
        cache_size: u64,
        metrics: Metrics,
    ) -> Self {
        HeaderEvidence {
            algorithms: AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
            readers,
            rules,
            verified: moka::sync::Cache::builder()
                .max_capacity(cache_size)
                .weigher(|_, v: &Arc<VerifiedToken>| v.weight)
                .eviction_listener(metrics.on_eviction("evidence_token"))
                .expire_after(UntilExpiry)
                .build(),
            metrics,
        }
    }

    /// Evidence from the header: one delegation_token, or several separated by commas for a chain
    /// from the data owner to the consumer; and whether every token was verified before (cached).
    pub async fn chain(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        registries: &RegistryClient,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<(Vec<DelegationEvidence>, bool), Reject> {
        let mut chain = Vec::new();
        let mut cached = true;
        let each = pieces(tokens.as_bytes(), b',').map(|at| tokens[at].trim());
        for (n, token) in each.filter(|t| !t.is_empty()).enumerate() {
            // Each token costs a signature check and its signer's record: a bound before any.
            if n == MAX_CHAIN {
                let header = expected.header;
                return Err(EvidenceRefusal::ChainTooLong {
                    header,
                    max: MAX_CHAIN,
                }
                .into());
            }
            let (evidence, hit) = self.verify(token, expected, registries, trust, now).await?;
            chain.push(evidence);
            cached &= hit;
        }
        if chain.is_empty() {
            return Err(EvidenceRefusal::Header {
                header: expected.header,
                problem: HeaderProblem::Empty,
            }
            .into());
        }
        Ok((chain, cached))
    }

    /// One delegation_token from the header: signed by its `iss`, which is the data owner of that
    /// evidence or an authorisation registry of that owner (or of the route's data owner); and
    /// addressed to the consumer, issued in time (the pure checks of `evidence_token`). Whether its
    /// signature was verified before (cached).
    async fn verify(
        &self,
        token: &str,
        expected: &Expected<'_>,
        registries: &RegistryClient,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<(DelegationEvidence, bool), Reject> {
        let (verified, hit) = self.verified_token(token, trust, now).await?;
        let (decoded, read) = (&verified.jwt, &verified.token);
        let signer = &read.issuer;
        let refused = |e: PartyError| Reject::from(EvidenceRefusal::Signer(SignerError::Party(e)));
        // The signer's standing now: its record as the scheme owner says (cached), its certificate
        // still the one registered, the party active.
        let record: Arc<Party> = trust
            .party(signer)
            .await?
            .ok_or_else(|| refused(PartyError::UnknownParty(signer.to_string())))?;
        check_party(&verified.chain.chain, signer, Some(&record), now).map_err(refused)?;
        // The signer is the party its certificate was bound to: its record's id (3.0), however
        // the token names it; and it is read as that id is configured to be.
        let mut aliases = expected.aliases.clone();
        let signer_id = match trust.resolves_aliases() {
            true => {
                aliases.found(signer.as_str(), Some(&record));
                if !self.readers.read_alike(signer.as_str(), &record.id) {
                    let id = record.id.clone();
                    let written = signer.clone();
                    return Err(EvidenceRefusal::SignerAlias { written, id }.into());
                }
                record.id.as_str()
            }
            false => signer.as_str(),
        };
        // Its parties by the ids their names' records give (3.0): only names a record found
        // lists are looked up, never one the signer made up.
        let mut evidence = read.evidence.clone();
        let audiences: Vec<&str> = decoded.audiences().collect();
        let named: Vec<&str> = evidence
            .parties()
            .chain(audiences.iter().copied())
            .collect();
        trust.confirm(&named, &mut aliases).await?;
        evidence.resolve(&aliases)?;
        let owner = &evidence.policy_issuer;
        let mut designated_for_us = false;
        if signer_id != owner {
            if !record.has_role(Role::AuthorisationRegistry.as_str(), now.secs()) {
                return Err(EvidenceRefusal::IssuerNotARegistry(read.issuer.clone()).into());
            }
            // In a chain, a later step may be registered with the route's data owner's registry.
            let configured = expected.registry;
            let mut holds = None;
            for of in [owner.as_str(), &expected.request.policy_issuer] {
                holds = registries
                    .holds_delegations_of(
                        configured,
                        of,
                        (signer.as_str(), &record),
                        &mut aliases,
                        trust,
                    )
                    .await?;
                if holds.is_some() {
                    break;
                }
            }
            let Some(holding) = holds else {
                return Err(EvidenceRefusal::IssuerNotTheOwnersRegistry {
                    issuer: read.issuer.clone(),
                    owner: owner.clone(),
                }
                .into());
            };
            designated_for_us = holding.for_us;
        }
        // Addressed to the consumer or the caller, by any name that stands for them.
        let mut addressees: Vec<&str> = Vec::new();
        for audience in &audiences {
            let id = aliases.id_of(audience)?;
            if [&expected.request.access_subject, expected.caller]
                .iter()
                .any(|party| aliases.id_of(party) == Ok(id))
            {
                addressees.push(audience);
            }
        }
        if audiences.is_empty() {
            addressees = vec![expected.request.access_subject.as_str(), expected.caller];
        }
        check_header_evidence(decoded, &evidence, &addressees, &self.rules, now)
            .map_err(EvidenceRefusal::Token)?;
        evidence.read_as.designated_for_us = designated_for_us;
        Ok((evidence, hit))
    }

    /// The token decoded, with its signature verified by a chain under the current trusted list:
    /// from the cache when it was verified under this list and has not expired (then true).
    async fn verified_token(
        &self,
        token: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<(Arc<VerifiedToken>, bool), Reject> {
        let generation = trust.trusted_list().await?.generation;
        let key = cache_key(token);
        if let Some(hit) = self.verified.get(&key) {
            if *hit.text == *token && hit.generation == generation && now.secs() < hit.until {
                self.metrics.cache_hit("evidence_token", true);
                return Ok((hit, true));
            }
        }
        self.metrics.cache_hit("evidence_token", false);
        let decoded =
            jwt::decode(token, self.algorithms).map_err(|e| EvidenceRefusal::Token(e.into()))?;
        let read = read_evidence_token(&decoded, &self.readers).map_err(EvidenceRefusal::Token)?;
        let Signer { chain, .. } = trust
            .verify_signer(&decoded, &read.issuer, now)
            .await
            .map_err(|e| match e {
                VerifyError::Refused(e) => Reject::from(EvidenceRefusal::Signer(e)),
                VerifyError::SchemeOwner(e) => e.into(),
            })?;
        let verified = Arc::new(VerifiedToken {
            generation,
            ..VerifiedToken::new(token, decoded, read, chain)
        });
        self.verified.insert(key, verified.clone());
        Ok((verified, false))
    }
}

/// Where a token is kept in the cache of verified tokens: the SHA-256 of its signature (what
/// follows its last dot). Tokens that share a signature but differ elsewhere share the key; the
/// text kept with the entry tells them apart, and only a token that verifies is ever kept.
fn cache_key(token: &str) -> [u8; 32] {
    let signature = token.rsplit_once('.').map_or(token, |(_, s)| s);
    let digest = ring::digest::digest(&ring::digest::SHA256, signature.as_bytes());
    let mut key = [0u8; 32];
    key.copy_from_slice(digest.as_ref());
    key
}
