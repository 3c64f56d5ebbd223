//! Authorisation registries as the gateway asks them: which registry holds a data owner's
//! delegations (a configured one, or the one the owner's party record names, confirmed by the
//! registry's own record), our token there (cached), `POST /delegation` with a mask, and the answer
//! verified: signed by that registry, addressed to us, unexpired. A 404 is "no policy", a Deny.

use super::forwarded::ForwardedAssertions;
use super::registry_errors::{
    classify, may_be_the_token, NoRegistry, RegistryError, RegistryFailure, RegistryRefusal,
    ADDRESSED_HINT,
};
use super::scheme_owner::TrustStore;
use super::token_cache::TokenCache;
use super::trust::{Trust, TrustError, VerifyError};
use super::{join, PeerClient, PeerError};
use crate::config::model::{PreviousSteps, Registry};
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::evidence_token::{
    check_token_claims, read_evidence_token, EvidenceTokenRules, Readers,
};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::mask::{AccessRequest, DelegationBody};
use crate::scheme::party::PartyId;
use crate::scheme::party_record::{Aliases, Designation, Party};
use crate::scheme::vocabulary::{Role, DELEGATION_PATH, TOKEN_PATH};
use crate::scheme::Timestamp;
use crate::telemetry::trace::Step;
use crate::telemetry::Metrics;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// What a span of a call to a registry says of it: which registry, where.
fn call_attributes(registry: &Registry) -> Vec<KeyValue> {
    let mut attributes = vec![
        KeyValue::new("ishare.peer.party_id", registry.party_id.to_string()),
        KeyValue::new("ishare.registry", registry.name.clone()),
    ];
    attributes.extend(super::url_attributes(&join(
        &registry.url,
        &registry.delegation_path,
    )));
    attributes
}

/// Whose consent to ask a registry about the consumer's delegations the gateway forwards, where
/// the registry wants it (`previous_steps = "consumer_assertion"`).
#[derive(Clone, Copy, Debug)]
pub enum Consent<'a> {
    /// The consumer called: its client assertion from its token request (addressed to us).
    Consumer,
    /// A broker called for the consumer: the consumer's `service_consumer_assertion` (addressed
    /// to the broker, checked with the request), then the broker's client assertion from its
    /// token request (addressed to us): a chain of consent from the consumer to the gateway.
    Broker { broker: &'a str, assertion: &'a str },
}

/// What a registry is asked for: the evidence of a request from the data owner through the
/// delegation path to the consumer.
#[derive(Clone, Copy)]
pub struct ChainAsk<'a> {
    /// The `[[registry]]` the route names; none: the one the data owner designated.
    pub configured: Option<&'a str>,
    pub owner: &'a PartyId,
    /// The parties between the data owner and the consumer, in order.
    pub path: &'a [String],
    pub request: &'a AccessRequest,
    /// The names of the request's parties, each to its record's id.
    pub aliases: &'a Aliases,
    /// Whose consent is forwarded to a registry that wants previous steps.
    pub consent: Consent<'a>,
}

/// That a registry holds a data owner's delegations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holding {
    /// The data owner designated it for this service provider (3.0, RFC056), not only in general.
    pub for_us: bool,
}

/// Asks registries for evidence as our identity.
pub struct RegistryClient {
    peer: PeerClient,
    our_id: PartyId,
    /// Every algorithm some version signs with: which one a registry may use is its version's.
    algorithms: AlgorithmPolicy,
    readers: Readers,
    rules: EvidenceTokenRules,
    configured: BTreeMap<String, Registry>,
    tokens: TokenCache,
    /// Token endpoints whose token was renewed after a failure within `RENEWAL_INTERVAL`.
    renewed: moka::sync::Cache<String, ()>,
    forwarded: Arc<ForwardedAssertions>,
    metrics: Metrics,
}

/// How often a registry's token is renewed after a failed call at most.
const RENEWAL_INTERVAL: std::time::Duration = std::time::Duration::from_secs(10);

impl RegistryClient {
    pub fn new(
        peer: PeerClient,
        readers: Readers,
        rules: EvidenceTokenRules,
        configured: BTreeMap<String, Registry>,
        forwarded: Arc<ForwardedAssertions>,
        metrics: Metrics,
    ) -> Self {
        RegistryClient {
            our_id: peer.identity().party_id().clone(),
            peer,
            algorithms: AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
            readers,
            rules,
            configured,
            tokens: TokenCache::default(),
            renewed: moka::sync::Cache::builder()
                .max_capacity(1024)
                .time_to_live(RENEWAL_INTERVAL)
                .build(),
            forwarded,
            metrics,
        }
    }

    /// What we are a member of: the framework, and the data spaces we serve in.
    pub fn membership(&self) -> &crate::scheme::party_record::Membership {
        self.peer.membership()
    }

    /// Whether `registry` (the record of the evidence's signer, `signer` as the token names it)
    /// holds the delegations of `owner` at this service provider: it is the configured registry
    /// (when a rule names one), or one the owner's party record designates for us (the most
    /// specific designations that fit, as the one asked is chosen); and whether the record
    /// designates it for this service provider by name. A name compares as written (1.9 EORIs
    /// without regard to case, as records were always matched) or, in 3.0, by the id its own
    /// lookup found — never by the aliases the signer's record claims. An owner that is no party
    /// identifier (`None`) has no record to designate any.
    pub async fn holds_delegations_of(
        &self,
        configured: Option<&str>,
        owner: Option<&PartyId>,
        (signer, registry): (&str, &Party),
        (aliases, trust): (&mut Aliases, &TrustStore),
        now: Timestamp,
    ) -> Result<Option<Holding>, TrustError> {
        let exact = trust.resolves_aliases();
        let same = |a: &str, b: &str| match exact {
            true => a == b,
            false => a.eq_ignore_ascii_case(b),
        };
        if let Some(name) = configured {
            let Some(configured) = self.configured.get(name) else {
                return Ok(None);
            };
            let id = configured.party_id.as_str();
            trust.confirm(&[id], &[&registry.id], aliases).await?;
            let holds = same(id, signer)
                || same(id, &registry.id)
                || (exact && aliases.names(id, &registry.id) == Ok(true));
            return Ok(holds.then_some(Holding { for_us: false }));
        }
        let Some(owner) = owner else {
            return Ok(None);
        };
        let Some(record) = trust.party(owner).await? else {
            return Ok(None);
        };
        let now = now.secs();
        let designations: Vec<&Designation> = record.registries_at(now).collect();
        // Designations by the names the signer's record lists; for whom, by those ours lists.
        let ids: Vec<&str> = designations.iter().map(|d| d.id.as_str()).collect();
        trust.confirm(&ids, &[&registry.id], aliases).await?;
        self.confirm_ours(&designations, aliases, trust).await?;
        // Only a registry the owner chose for us: not one it designated for another service
        // provider, nor its default where it designated another for us.
        let is_us = self.is_us(aliases, exact);
        let listed: Vec<&Designation> = record
            .designated_for(&is_us, self.peer.membership(), now)
            .into_iter()
            .filter(|d| {
                same(&d.id, signer) || (exact && aliases.names(&d.id, &registry.id) == Ok(true))
            })
            .collect();
        if listed.is_empty() {
            return Ok(None);
        }
        let for_us = listed
            .iter()
            .any(|d| d.for_us(&is_us, self.peer.membership()));
        Ok(Some(Holding { for_us }))
    }

    /// Whether `party`'s record designates any registry (for any service provider): a party that
    /// chose none leaves the choice for a later step of a chain to the route's data owner; one
    /// that chose, chose for itself.
    pub async fn designates_any(
        &self,
        party: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<bool, TrustError> {
        let Ok(party) = PartyId::parse(party) else {
            return Ok(false);
        };
        Ok(trust
            .party(&party)
            .await?
            .is_some_and(|record| record.registries_at(now.secs()).next().is_some()))
    }

    /// The service providers `designations` are for, by the names the gateway's record lists.
    async fn confirm_ours(
        &self,
        designations: &[&Designation],
        aliases: &mut Aliases,
        trust: &TrustStore,
    ) -> Result<(), TrustError> {
        let named: Vec<&str> = designations
            .iter()
            .filter_map(|d| d.service_provider.as_deref())
            .collect();
        let us = aliases
            .id_of(self.our_id.as_str())
            .unwrap_or_default()
            .to_string();
        trust.confirm(&named, &[&us], aliases).await
    }

    /// Whether a name is ours: as `aliases` resolve it where names are `exact` (3.0; a name
    /// records disagree on is not), otherwise without regard to case, as 1.9 EORIs compare.
    fn is_us<'a>(&'a self, aliases: &'a Aliases, exact: bool) -> impl Fn(&str) -> bool + 'a {
        move |name| match exact {
            true => aliases.names(name, self.our_id.as_str()) == Ok(true),
            false => name.eq_ignore_ascii_case(self.our_id.as_str()),
        }
    }

    /// The registry to ask about `owner`'s delegations: the configured one, or the one in the
    /// owner's party record, whose address must be the registry's own (its record's capabilities
    /// address) over https: otherwise our client assertion, addressed to the registry, would go to
    /// whoever the owner's record names. Whether the record designates it for us.
    pub async fn registry_for(
        &self,
        configured: Option<&str>,
        owner: &PartyId,
        aliases: &mut Aliases,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<(Registry, Holding), RegistryError> {
        if let Some(registry) = configured.and_then(|name| self.configured.get(name)) {
            return Ok((registry.clone(), Holding { for_us: false }));
        }
        let record = trust
            .party(owner)
            .await?
            .ok_or_else(|| NoRegistry::DataOwnerUnknown(owner.to_string()))?;
        let designations: Vec<&Designation> = record.registries_at(now.secs()).collect();
        self.confirm_ours(&designations, aliases, trust).await?;
        let exact = trust.resolves_aliases();
        let listed = record
            .registry_for(
                self.is_us(aliases, exact),
                self.peer.membership(),
                now.secs(),
            )
            .ok_or_else(|| NoRegistry::NoneNamed(owner.to_string()))?;
        let ar_id = PartyId::parse(&listed.id)
            .map_err(|_| NoRegistry::NotAnActiveRegistry(listed.id.clone()))?;
        let ar_record = trust
            .party(&ar_id)
            .await?
            .filter(|r| {
                r.is_active_at(now.secs())
                    && r.holds_role(
                        Role::AuthorisationRegistry.as_str(),
                        self.peer.membership(),
                        now.secs(),
                    )
            })
            .ok_or_else(|| NoRegistry::NotAnActiveRegistry(ar_id.to_string()))?;
        let https_origin = |u: &str| {
            url::Url::parse(u)
                .ok()
                .filter(|u| u.scheme() == "https")
                .map(|u| u.origin())
        };
        let own_origin = ar_record.capability_url.as_deref().and_then(https_origin);
        if own_origin.is_none() || https_origin(&listed.url) != own_origin {
            return Err(NoRegistry::NotItsOwnAddress {
                registry: ar_id.to_string(),
                owner: owner.to_string(),
            }
            .into());
        }
        let holding = Holding {
            for_us: listed.for_us(self.is_us(aliases, exact), self.peer.membership()),
        };
        // A 3.0 registry designated by an alias is asked, and answers, as its record's id.
        let ar_id = match trust.resolves_aliases() {
            true => PartyId::parse(&ar_record.id).unwrap_or(ar_id),
            false => ar_id,
        };
        // A registry found in a record is asked as a [[registry]] of its party id is configured
        // (its paths, version, masks and the rest; of several, the one at the record's address),
        // at the address the record gives.
        let url = listed.url.trim_end_matches('/').to_string();
        let settings = self.configured.values().filter(|r| r.party_id == ar_id);
        let chosen = settings
            .clone()
            .find(|r| r.url.trim_end_matches('/') == url)
            .or_else(|| settings.clone().next());
        let registry = match chosen {
            Some(settings) => Registry {
                url,
                ..settings.clone()
            },
            None => Registry {
                name: ar_id.to_string(),
                url,
                scheme_version: self.readers.version_of(ar_id.as_str()),
                party_id: ar_id,
                token_path: TOKEN_PATH.into(),
                delegation_path: DELEGATION_PATH.into(),
                mask_licences: true,
                previous_steps: PreviousSteps::None,
                addresses_us_as: None,
            },
        };
        Ok((registry, holding))
    }

    /// The registry asked, and the evidence of every step from the data owner through the path to
    /// the consumer from the data owner's registry (which holds the linked policies), each call
    /// by `deadline`. None: a step has no policy.
    pub async fn chain(
        &self,
        ask: ChainAsk<'_>,
        trust: &TrustStore,
        deadline: tokio::time::Instant,
    ) -> Result<(PartyId, Option<Vec<DelegationEvidence>>), RegistryError> {
        let ChainAsk {
            configured,
            owner,
            path,
            request,
            aliases,
            consent,
        } = ask;
        let mut aliases = aliases.clone();
        let now = Timestamp::now();
        let (registry, holding) = self
            .registry_for(configured, owner, &mut aliases, trust, now)
            .await?;
        let mut parties = vec![request.policy_issuer.clone()];
        parties.extend(path.iter().cloned());
        parties.push(request.access_subject.clone());
        let mut chain = Vec::new();
        for pair in parties.windows(2) {
            let step = AccessRequest {
                policy_issuer: pair[0].clone(),
                access_subject: pair[1].clone(),
                ..request.clone()
            };
            // The route's data owner designated the registry for us; a later step's owner that
            // chose registries of its own did not choose this one for us.
            let for_us = holding.for_us
                && (chain.is_empty()
                    || !self.designates_any(&step.policy_issuer, trust, now).await?);
            match self
                .evidence(&registry, &step, consent, trust, deadline)
                .await?
            {
                Some(mut ev) => {
                    ev.read_as.designated_for_us = for_us;
                    chain.push(ev)
                }
                None => return Ok((registry.party_id, None)),
            }
        }
        Ok((registry.party_id, Some(chain)))
    }

    /// Ask `registry` for the evidence of `step` of a request, with the `consent` it may want,
    /// by `deadline`. None: the registry holds no policy (404). A call is counted by how it
    /// ended; a request refused before any call (no previous step held) is not a call.
    pub async fn evidence(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        consent: Consent<'_>,
        trust: &TrustStore,
        deadline: tokio::time::Instant,
    ) -> Result<Option<DelegationEvidence>, RegistryError> {
        self.evidence_token(registry, step, consent, trust, deadline)
            .await
            .map(|answer| answer.map(|(_, evidence)| evidence))
    }

    /// `evidence`, with the delegation token that carried it (for a consumer to present).
    pub async fn evidence_token(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        consent: Consent<'_>,
        trust: &TrustStore,
        deadline: tokio::time::Instant,
    ) -> Result<Option<(String, DelegationEvidence)>, RegistryError> {
        let previous_steps = match registry.previous_steps {
            PreviousSteps::ConsumerAssertion => self.consent(registry, step, consent).await?,
            PreviousSteps::None => Vec::new(),
        };
        let started = Instant::now();
        let span = Step::start(
            SpanKind::Client,
            || "registry evidence",
            || call_attributes(registry),
        );
        let call = span.within(self.call(registry, step, previous_steps, trust));
        let result = match tokio::time::timeout_at(deadline, call).await {
            Ok(result) => result,
            Err(_) => Err(RegistryFailure::Call(PeerError::Timeout {
                url: join(&registry.url, &registry.delegation_path),
            })
            .into()),
        };
        let outcome = match &result {
            Ok(Some(_)) => "evidence",
            Ok(None) => "no_policy",
            Err(e) => e.code(),
        };
        span.end(|| (outcome, result.is_err()));
        self.metrics
            .registry_calls
            .with_label_values(&[&registry.name, outcome])
            .inc();
        self.metrics
            .registry_latency
            .with_label_values(&[&registry.name])
            .observe(started.elapsed().as_secs_f64());
        result
    }

    /// Our token at `registry`, then the delegation call with it. A failure that may be the
    /// token's (a registry that forgot it) drops it and tries once more with a fresh one; a
    /// token fetched for this call is not tried twice.
    async fn call(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        previous_steps: Vec<String>,
        trust: &TrustStore,
    ) -> Result<Option<(String, DelegationEvidence)>, RegistryError> {
        let token_url = join(&registry.url, &registry.token_path);
        let audience = registry.party_id.as_str();
        let version = registry.scheme_version;
        // Without licences in the mask, the evidence's licences are still judged against the
        // route's (`evaluation`).
        let unlicensed;
        let step = match registry.mask_licences {
            true => step,
            false => {
                unlicensed = AccessRequest {
                    required_licences: Vec::new(),
                    ..step.clone()
                };
                &unlicensed
            }
        };
        let mut body = DelegationBody::new(step.to_mask(version), version);
        body.previous_steps = previous_steps;
        let url = join(&registry.url, &registry.delegation_path);
        let (mut token, mut fresh) = self
            .tokens
            .get_fresh(&self.peer, &token_url, audience)
            .await
            .map_err(classify)?;
        let answer = loop {
            match self.peer.delegation(&url, &token, &body).await {
                Err(e) if may_be_the_token(&e) && !fresh && self.may_renew(&token_url) => {
                    self.tokens.forget(&token_url, audience).await;
                    (token, _) = self
                        .tokens
                        .get_fresh(&self.peer, &token_url, audience)
                        .await
                        .map_err(classify)?;
                    fresh = true;
                }
                answer => break answer,
            }
        };
        let Some(token) = answer.map_err(classify)? else {
            return Ok(None);
        };
        let evidence = self.verify_answer(&token, registry, trust).await?;
        Ok(Some((token, evidence)))
    }

    /// Whether the token for `token_url` may be renewed after a failure: once per
    /// `RENEWAL_INTERVAL`, so that a registry failing every call costs no signature per request.
    fn may_renew(&self, token_url: &str) -> bool {
        let entry = self.renewed.entry_by_ref(token_url).or_insert(());
        entry.is_fresh()
    }

    /// The previous steps for a registry that wants them: the consumer's client assertion from
    /// its token request; where a broker called, the consumer's assertion to the broker, then
    /// the broker's from its token request. Never the assertion of another party the request
    /// names (the data owner a caller names, an intermediary of the chain), nor one the consumer
    /// made for another request where a broker calls.
    async fn consent(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        consent: Consent<'_>,
    ) -> Result<Vec<String>, RegistryError> {
        let (held_of, mut steps) = match consent {
            Consent::Consumer => (step.access_subject.as_str(), Vec::new()),
            Consent::Broker { broker, assertion } => (broker, vec![assertion.to_string()]),
        };
        let held = self
            .forwarded
            .of(held_of, Timestamp::now())
            .await
            .map_err(RegistryError::HeldAssertionsUnavailable)?
            .ok_or_else(|| RegistryError::NoPreviousStep {
                registry: registry.party_id.to_string(),
                party: held_of.to_string(),
                broker: matches!(consent, Consent::Broker { .. }),
            })?;
        steps.push(held);
        Ok(steps)
    }

    /// The registry's answer must verify and chain to the trusted list, come from that registry (its
    /// certificate bound to it at the scheme owner) and be addressed to us, unexpired.
    async fn verify_answer(
        &self,
        token: &str,
        registry: &Registry,
        trust: &TrustStore,
    ) -> Result<DelegationEvidence, RegistryError> {
        let garbled = |problem: String| RegistryFailure::Answer {
            registry: registry.party_id.to_string(),
            problem,
        };
        let now = Timestamp::now();
        let decoded = jwt::decode(token, self.algorithms).map_err(|e| garbled(e.to_string()))?;
        let signer = trust
            .verify_signer(&decoded, &registry.party_id, now)
            .await
            .map_err(|e| match e {
                VerifyError::Refused(e) => RegistryError::from(garbled(e.to_string())),
                VerifyError::SchemeOwner(e) => e.into(),
            })?;
        if decoded.str_claim("iss") != Some(registry.party_id.as_str()) {
            return Err(garbled("iss is not the registry".into()).into());
        }
        // Addressed to us, or to the id this registry keeps for us where its [[registry]] names
        // one (answers to our own call only: evidence a client presents is never read so).
        let for_us = decoded.audience_includes(self.our_id.as_str()) != Some(false)
            || registry
                .addresses_us_as
                .as_deref()
                .is_some_and(|id| decoded.audience_includes(id) == Some(true));
        if !for_us {
            return Err(RegistryRefusal::NotForUs {
                registry: registry.party_id.to_string(),
                addressed: decoded.audience(),
                ours: self.our_id.to_string(),
                hint: match registry.addresses_us_as {
                    None => ADDRESSED_HINT,
                    Some(_) => "",
                },
            }
            .into());
        }
        check_token_claims(&decoded, &self.rules, now).map_err(|e| garbled(e.to_string()))?;
        let read = read_evidence_token(&decoded, &self.readers)
            .map_err(|e| RegistryError::from(garbled(e.to_string())))?;
        // Its sub names the registry (by a name that stands for it, 3.0) or the access subject.
        let signer_id = signer.record.id.clone();
        let sub_is_signer = match PartyId::parse(&read.subject) {
            _ if read.subject == read.issuer.as_str() => true,
            Ok(sub) if trust.resolves_aliases() => trust
                .party(&sub)
                .await?
                .is_some_and(|record| record.id == signer_id),
            _ => false,
        };
        if !sub_is_signer {
            read.check_subject(|a, b| a == b)
                .map_err(|e| garbled(e.to_string()))?;
        }
        let mut evidence = read.evidence;
        evidence.signer = Some(signer_id);
        Ok(evidence)
    }
}
