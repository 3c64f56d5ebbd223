//! Delegation enforcement for a route: the request in the scheme's terms, evidence from the
//! `delegation_evidence` header (verified, trusted, bound to this request) or fetched from the
//! data owner's authorisation registry (cached, single-flight), the broker pattern, evidence
//! chains, and the grant whose licences become response headers.

use super::reject::Reject;
use crate::config::model::{Config, DelegationRule, DelegationSettings, Registry};
use crate::peers::scheme_owner::TrustStore;
use crate::peers::token_cache::TokenCache;
use crate::peers::{join, PeerClient, PeerError};
use crate::request::template::RequestValues;
use crate::scheme::assertion::{check_assertion, AssertionError, AssertionRules};
use crate::scheme::evidence::{
    evaluate_chain, AccessRequest, Decision, DelegationBody, DelegationEvidence, DenyReason,
};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::licence::Licence;
use crate::scheme::party::PartyId;
use crate::scheme::trust::check_party;
use crate::scheme::vocabulary::{BROKER_HEADER, EVIDENCE_HEADER};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use moka::Expiry;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the evidence that decided came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Header,
    Registry,
}

/// A permitted request: what the response headers are made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    pub source: Source,
    pub licences: Vec<Licence>,
    pub not_on_or_after: i64,
    pub max_delegation_depth: Option<u32>,
    /// The party the evidence was issued to (the original consumer in the broker pattern).
    pub access_subject: String,
}

#[derive(Clone)]
struct CachedDecision {
    decision: Arc<Decision>,
    ttl: Duration,
}

struct DecisionExpiry;

impl Expiry<DecisionKey, CachedDecision> for DecisionExpiry {
    fn expire_after_create(
        &self,
        _k: &DecisionKey,
        v: &CachedDecision,
        _at: Instant,
    ) -> Option<Duration> {
        Some(v.ttl)
    }
}

/// A decision is cached per rule and request: a looser rule never serves a stricter one.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct DecisionKey {
    route: String,
    request: AccessRequest,
    registry: String,
    path: Vec<String>,
}

struct Inner {
    peer: PeerClient,
    our_id: PartyId,
    scheme: String,
    algorithms: AlgorithmPolicy,
    leeway_secs: f64,
    registries: BTreeMap<String, Registry>,
    settings: DelegationSettings,
    tokens: TokenCache,
    decisions: moka::future::Cache<DecisionKey, CachedDecision>,
    metrics: Metrics,
}

#[derive(Clone)]
pub struct Authorizer(Arc<Inner>);

/// What `authorize` needs to know about the request.
pub struct RequestFacts<'a> {
    pub route: &'a str,
    pub method: &'a http::Method,
    pub values: RequestValues<'a>,
    /// The authenticated caller (from the access token).
    pub caller: &'a str,
}

fn header<'a>(headers: &'a http::HeaderMap, name: &str) -> Result<Option<&'a str>, Reject> {
    let mut all = headers.get_all(name).iter();
    match (all.next(), all.next()) {
        (None, _) => Ok(None),
        (Some(v), None) => v
            .to_str()
            .map(|s| Some(s.trim()))
            .map_err(|_| Reject::BadEvidence {
                reason: "malformed_header",
                detail: format!("the {name} header is not text"),
            }),
        (Some(_), Some(_)) => Err(Reject::BadEvidence {
            reason: "malformed_header",
            detail: format!("the {name} header is given more than once"),
        }),
    }
}

fn bad_evidence(reason: &'static str, detail: impl Into<String>) -> Reject {
    Reject::BadEvidence {
        reason,
        detail: detail.into(),
    }
}

impl Authorizer {
    pub fn new(config: &Config, peer: PeerClient, metrics: Metrics) -> Self {
        Authorizer(Arc::new(Inner {
            our_id: config.identity.party_id.clone(),
            scheme: config.scheme.clone(),
            algorithms: peer_algorithms(config),
            leeway_secs: config.tokens.leeway.as_secs_f64(),
            registries: config.registries.clone(),
            settings: config.delegation.clone(),
            tokens: TokenCache::default(),
            decisions: moka::future::Cache::builder()
                .max_capacity(config.delegation.cache_capacity)
                .expire_after(DecisionExpiry)
                .build(),
            peer,
            metrics,
        }))
    }

    /// The request in the scheme's terms, from the rule and the request.
    fn access_request(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts,
        subject: &str,
    ) -> Result<AccessRequest, Reject> {
        let render = |t: &crate::request::template::Template, what: &str| {
            t.render(&facts.values)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| Reject::MissingRequestValue(format!("{what} ({})", t.as_str())))
        };
        let policy_issuer = render(&rule.policy_issuer, "the data owner")?;
        PartyId::parse(&policy_issuer)
            .map_err(|e| Reject::MissingRequestValue(format!("a valid data owner: {e}")))?;
        let action = match &rule.action {
            Some(a) => a.clone(),
            None => crate::scheme::vocabulary::Action::for_method(facts.method)
                .map(|a| a.qualified(&self.0.scheme))
                .ok_or_else(|| Reject::MethodNotAllowed(vec![]))?,
        };
        Ok(AccessRequest {
            policy_issuer,
            access_subject: subject.to_string(),
            service_providers: vec![self.0.our_id.to_string()],
            resource_type: render(&rule.resource_type, "the resource type")?,
            identifiers: rule
                .identifiers
                .iter()
                .map(|t| render(t, "an identifier"))
                .collect::<Result<_, _>>()?,
            attributes: rule
                .attributes
                .iter()
                .map(|t| render(t, "an attribute"))
                .collect::<Result<_, _>>()?,
            actions: vec![action],
            required_licences: rule.licences.clone(),
        })
    }

    /// Decide a request on a delegation route.
    pub async fn authorize(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts<'_>,
        trust: &TrustStore,
    ) -> Result<Grant, Reject> {
        let subject = match header(facts.values.headers, BROKER_HEADER)? {
            Some(assertion) => {
                self.original_consumer(assertion, facts.caller, trust)
                    .await?
            }
            None => facts.caller.to_string(),
        };
        let request = self.access_request(rule, facts, &subject)?;
        let evidence = if rule.evidence.header {
            header(facts.values.headers, EVIDENCE_HEADER)?
        } else {
            None
        };
        let (decision, source) = match evidence {
            Some(tokens) => (
                self.header_decision(tokens, rule, &request, facts.caller, trust)
                    .await?,
                Source::Header,
            ),
            None if rule.evidence.registry => (
                self.registry_decision(rule, facts, &request, trust).await?,
                Source::Registry,
            ),
            None => (Decision::Deny(DenyReason::EmptyChain), Source::Header),
        };
        let (label, reason) = match &decision {
            Decision::Permit(_) => ("permit", "granted"),
            Decision::Deny(r) => ("deny", r.code()),
        };
        self.0
            .metrics
            .decisions
            .with_label_values(&[facts.route, label, reason])
            .inc();
        match decision {
            Decision::Permit(p) => Ok(Grant {
                source,
                licences: p.licences,
                not_on_or_after: p.not_on_or_after,
                max_delegation_depth: p.max_delegation_depth,
                access_subject: subject,
            }),
            Decision::Deny(reason) => Err(Reject::Denied(reason)),
        }
    }

    /// The broker pattern: the caller acts for the consumer whose client assertion it forwards.
    /// The assertion must verify and chain to the trusted list, be addressed to the caller, and
    /// come from an active party; the evidence must then be issued to that consumer.
    async fn original_consumer(
        &self,
        assertion: &str,
        caller: &str,
        trust: &TrustStore,
    ) -> Result<String, Reject> {
        let now = Timestamp::now();
        let rules = |audience: &str| AssertionRules {
            audience: audience.to_string(),
            leeway_secs: self.0.leeway_secs,
            algorithms: self.0.algorithms,
        };
        let bad = |e: AssertionError| {
            bad_evidence(
                "invalid_consumer_assertion",
                format!("{BROKER_HEADER}: {e}"),
            )
        };
        // A forwarded assertion counts only when addressed to the party forwarding it (§1.4).
        let checked = check_assertion(assertion, None, &rules(caller), now).map_err(bad)?;
        let chain = trust
            .validate(&checked.jwt.x5c, now)
            .await?
            .map_err(|e| bad(AssertionError::Chain(e)))?;
        let record = trust.party(&checked.client_id).await?;
        check_party(&chain.chain, &checked.client_id, record.as_deref(), now)
            .map_err(|e| bad(AssertionError::Party(e)))?;
        Ok(checked.client_id.to_string())
    }

    /// Evidence from the header: one delegation_token, or several separated by commas for a chain
    /// from the data owner to the consumer.
    async fn header_decision(
        &self,
        tokens: &str,
        rule: &DelegationRule,
        request: &AccessRequest,
        caller: &str,
        trust: &TrustStore,
    ) -> Result<Decision, Reject> {
        let now = Timestamp::now();
        let mut chain = Vec::new();
        for token in tokens.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            chain.push(
                self.verify_header_evidence(token, rule, request, caller, trust, now)
                    .await?,
            );
        }
        if chain.is_empty() {
            return Err(bad_evidence(
                "malformed_evidence",
                format!("the {EVIDENCE_HEADER} header is empty"),
            ));
        }
        Ok(evaluate_chain(&chain, request, now))
    }

    /// Verify one delegation_token from the header: a scheme JWT that verifies and chains to the
    /// trusted list, signed by its `iss`, which is the data owner of that evidence or an
    /// authorisation registry (active at the scheme owner, with that role) of that owner or of the
    /// route's data owner, addressed to the consumer, and not older than the configured maximum age.
    async fn verify_header_evidence(
        &self,
        token: &str,
        rule: &DelegationRule,
        request: &AccessRequest,
        caller: &str,
        trust: &TrustStore,
        now: Timestamp,
    ) -> Result<DelegationEvidence, Reject> {
        let decoded = jwt::decode(token, self.0.algorithms)
            .map_err(|e| bad_evidence("malformed_evidence", e.to_string()))?;
        match trust.cached_key(&decoded.x5c) {
            Some(key) => decoded.verify_signature_with(&key),
            None => decoded.verify_signature(),
        }
        .map_err(|e| bad_evidence("evidence_signature_invalid", e.to_string()))?;
        let chain = trust
            .validate(&decoded.x5c, now)
            .await?
            .map_err(|e| bad_evidence("evidence_untrusted", e.to_string()))?;
        let evidence: DelegationEvidence = decoded
            .claims
            .get(crate::scheme::vocabulary::DELEGATION_EVIDENCE_CLAIM)
            .cloned()
            .ok_or_else(|| {
                bad_evidence(
                    "malformed_evidence",
                    "the token carries no delegationEvidence",
                )
            })
            .and_then(|v| {
                serde_json::from_value(v)
                    .map_err(|e| bad_evidence("malformed_evidence", e.to_string()))
            })?;
        let iss = decoded.str_claim("iss").unwrap_or_default();
        let issuer = PartyId::parse(iss)
            .map_err(|e| bad_evidence("evidence_issuer_unknown", format!("iss: {e}")))?;
        let record = trust.party(&issuer).await?.ok_or_else(|| {
            bad_evidence(
                "evidence_issuer_unknown",
                format!("{iss} is unknown at the scheme owner"),
            )
        })?;
        check_party(&chain.chain, &issuer, Some(&record), now)
            .map_err(|e| bad_evidence("evidence_issuer_unknown", e.to_string()))?;
        let is_owner = iss == evidence.policy_issuer;
        if !is_owner {
            if !record.has_role(
                crate::scheme::vocabulary::Role::AuthorisationRegistry.as_str(),
                now.secs(),
            ) {
                return Err(bad_evidence(
                    "evidence_issuer_not_a_registry",
                    format!("{iss} is neither the data owner nor an authorisation registry"),
                ));
            }
            // In a chain, a later step may be registered with the route's data owner's registry.
            let registers = self
                .registry_of_owner(rule, &evidence.policy_issuer, iss, trust)
                .await?
                || self
                    .registry_of_owner(rule, &request.policy_issuer, iss, trust)
                    .await?;
            if !registers {
                return Err(bad_evidence(
                    "evidence_issuer_not_the_owners_registry",
                    format!(
                        "{iss} is not a registry of the data owner {}",
                        evidence.policy_issuer
                    ),
                ));
            }
        }
        let for_caller = [request.access_subject.as_str(), caller]
            .iter()
            .any(|p| decoded.audience_includes(p) != Some(false));
        if !for_caller {
            return Err(bad_evidence(
                "evidence_not_for_caller",
                "the evidence token is addressed to another party than the caller",
            ));
        }
        if decoded
            .str_claim("sub")
            .is_some_and(|s| s != evidence.target.access_subject)
        {
            return Err(bad_evidence(
                "malformed_evidence",
                "sub differs from the evidence's accessSubject",
            ));
        }
        let iat = decoded
            .time_claim("iat")
            .unwrap_or(evidence.not_before as f64);
        if iat > now.as_f64() + self.0.leeway_secs {
            return Err(bad_evidence(
                "evidence_issued_in_future",
                "the evidence token's iat is in the future",
            ));
        }
        if now.as_f64() - iat > self.0.settings.header_evidence_max_age.as_secs_f64() {
            return Err(bad_evidence(
                "evidence_too_old",
                "the evidence token is older than the accepted maximum age",
            ));
        }
        Ok(evidence)
    }

    /// Whether `registry` holds the delegations of `owner`: the route's configured registry, or
    /// one of the registries in the owner's party record.
    async fn registry_of_owner(
        &self,
        rule: &DelegationRule,
        owner: &str,
        registry: &str,
        trust: &TrustStore,
    ) -> Result<bool, Reject> {
        if let Some(name) = &rule.registry {
            return Ok(self
                .0
                .registries
                .get(name)
                .is_some_and(|r| r.party_id.as_str() == registry));
        }
        let Ok(owner_id) = PartyId::parse(owner) else {
            return Ok(false);
        };
        Ok(trust.party(&owner_id).await?.is_some_and(|r| {
            r.registries()
                .any(|ar| ar.id.eq_ignore_ascii_case(registry))
        }))
    }

    /// The registry to ask about `owner`'s delegations: the route's, or the one in the owner's
    /// party record, whose address must be the registry's own (its record's capabilities address),
    /// over https: otherwise our client assertion, addressed to the registry, would go to whoever
    /// the owner's record names.
    async fn registry_for(
        &self,
        rule: &DelegationRule,
        owner: &str,
        trust: &TrustStore,
    ) -> Result<Registry, Reject> {
        if let Some(name) = &rule.registry {
            return self
                .0
                .registries
                .get(name)
                .cloned()
                .ok_or_else(|| bad_evidence("no_registry", format!("no registry {name}")));
        }
        let id = PartyId::parse(owner)
            .map_err(|e| Reject::MissingRequestValue(format!("a valid data owner: {e}")))?;
        let record = trust.party(&id).await?.ok_or_else(|| {
            bad_evidence(
                "data_owner_unknown",
                format!("the data owner {owner} is unknown at the scheme owner"),
            )
        })?;
        let listed = record
            .registries()
            .find(|r| !r.url.is_empty() && PartyId::parse(&r.id).is_ok())
            .ok_or_else(|| {
                bad_evidence(
                    "no_registry",
                    format!("the data owner {owner} names no authorisation registry"),
                )
            })?;
        let ar_id = PartyId::parse(&listed.id).expect("checked above");
        let now = Timestamp::now().secs();
        let ar_record = trust
            .party(&ar_id)
            .await?
            .filter(|r| {
                r.adherence.is_active_at(now)
                    && r.has_role(
                        crate::scheme::vocabulary::Role::AuthorisationRegistry.as_str(),
                        now,
                    )
            })
            .ok_or_else(|| {
                bad_evidence(
                    "no_registry",
                    format!("{ar_id} is not an active authorisation registry"),
                )
            })?;
        let https_origin = |u: &str| {
            url::Url::parse(u)
                .ok()
                .filter(|u| u.scheme() == "https")
                .map(|u| u.origin())
        };
        let own_origin = ar_record.capability_url.as_deref().and_then(https_origin);
        if own_origin.is_none() || https_origin(&listed.url) != own_origin {
            return Err(bad_evidence(
                "no_registry",
                format!("the address of {ar_id} in the record of {owner} is not the registry's own https address"),
            ));
        }
        Ok(Registry {
            name: ar_id.to_string(),
            party_id: ar_id,
            url: listed.url.trim_end_matches('/').to_string(),
            token_path: crate::scheme::vocabulary::TOKEN_PATH.into(),
            delegation_path: crate::scheme::vocabulary::DELEGATION_PATH.into(),
        })
    }

    /// A decision from the registry, through the decision cache.
    async fn registry_decision(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts<'_>,
        request: &AccessRequest,
        trust: &TrustStore,
    ) -> Result<Decision, Reject> {
        let path: Vec<String> = rule
            .delegation_path
            .iter()
            .map(|t| {
                t.render(&facts.values).ok_or_else(|| {
                    Reject::MissingRequestValue(format!("a delegation path party ({})", t.as_str()))
                })
            })
            .collect::<Result<_, _>>()?;
        let key = DecisionKey {
            route: facts.route.to_string(),
            request: request.clone(),
            registry: rule.registry.clone().unwrap_or_default(),
            path: path.clone(),
        };
        let mut hit = true;
        let settings = &self.0.settings;
        let result = self
            .0
            .decisions
            .try_get_with(key, async {
                hit = false;
                let decision = tokio::time::timeout(
                    settings.registry_timeout,
                    self.fetch_chain(rule, request, &path, trust),
                )
                .await
                .map_err(|_| Reject::Unavailable {
                    reason: "registry_timeout",
                    detail: format!(
                        "the registry did not answer within {:?}",
                        settings.registry_timeout
                    ),
                })??;
                let ttl = match &decision {
                    Decision::Permit(p) => {
                        let left = (p.not_on_or_after - Timestamp::now().secs()).max(0) as u64;
                        settings.cache_ttl.min(Duration::from_secs(left))
                    }
                    Decision::Deny(_) => settings.deny_cache_ttl,
                };
                Ok::<_, Reject>(CachedDecision {
                    decision: Arc::new(decision),
                    ttl,
                })
            })
            .await;
        self.0.metrics.cache_hit("decision", hit);
        result
            .map(|c| (*c.decision).clone())
            .map_err(|e| (*e).clone())
    }

    /// Fetch the evidence of every step from the data owner through the path to the consumer from
    /// the data owner's registry (which holds the linked policies), and evaluate the chain.
    async fn fetch_chain(
        &self,
        rule: &DelegationRule,
        request: &AccessRequest,
        path: &[String],
        trust: &TrustStore,
    ) -> Result<Decision, Reject> {
        let mut parties = vec![request.policy_issuer.clone()];
        parties.extend(path.iter().cloned());
        parties.push(request.access_subject.clone());
        let registry = self
            .registry_for(rule, &request.policy_issuer, trust)
            .await?;
        let mut chain = Vec::new();
        for pair in parties.windows(2) {
            let step = AccessRequest {
                policy_issuer: pair[0].clone(),
                access_subject: pair[1].clone(),
                ..request.clone()
            };
            match self.fetch_evidence(&registry, &step, trust).await? {
                Some(ev) => chain.push(ev),
                None => return Ok(Decision::Deny(DenyReason::NoPolicy)),
            }
        }
        Ok(evaluate_chain(&chain, request, Timestamp::now()))
    }

    /// POST the mask of `step` to the registry. None: the registry holds no policy (404).
    async fn fetch_evidence(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        trust: &TrustStore,
    ) -> Result<Option<DelegationEvidence>, Reject> {
        let started = Instant::now();
        let result = self.call_registry(registry, step, trust).await;
        let outcome = match &result {
            Ok(Some(_)) => "evidence",
            Ok(None) => "no_policy",
            Err(Reject::Unavailable { reason, .. }) => reason,
            Err(_) => "refused",
        };
        self.0
            .metrics
            .registry_calls
            .with_label_values(&[&registry.name, outcome])
            .inc();
        self.0
            .metrics
            .registry_latency
            .with_label_values(&[&registry.name])
            .observe(started.elapsed().as_secs_f64());
        result
    }

    async fn call_registry(
        &self,
        registry: &Registry,
        step: &AccessRequest,
        trust: &TrustStore,
    ) -> Result<Option<DelegationEvidence>, Reject> {
        let unavailable = |e: PeerError| Reject::Unavailable {
            reason: match e {
                PeerError::Timeout { .. } => "registry_timeout",
                PeerError::Unreachable { .. } => "registry_unreachable",
                PeerError::Status { .. } => "registry_error",
                PeerError::Garbled { .. } => "registry_garbled",
            },
            detail: e.to_string(),
        };
        let token_url = join(&registry.url, &registry.token_path);
        let token = self
            .0
            .tokens
            .get(&self.0.peer, &token_url, registry.party_id.as_str())
            .await
            .map_err(unavailable)?;
        let body = DelegationBody::new(step.to_mask());
        let answer = self
            .0
            .peer
            .delegation(
                &join(&registry.url, &registry.delegation_path),
                &token,
                &body,
            )
            .await;
        if let Err(PeerError::Status { status: 401, .. }) = &answer {
            self.0
                .tokens
                .forget(&token_url, registry.party_id.as_str())
                .await;
        }
        let Some(token) = answer.map_err(unavailable)? else {
            return Ok(None);
        };
        self.verify_registry_evidence(&token, registry, trust)
            .await
            .map(Some)
    }

    /// The registry's answer must verify, chain to the trusted list, come from that registry (its
    /// certificate bound to it at the scheme owner) and be addressed to us.
    async fn verify_registry_evidence(
        &self,
        token: &str,
        registry: &Registry,
        trust: &TrustStore,
    ) -> Result<DelegationEvidence, Reject> {
        let garbled = |detail: String| Reject::Unavailable {
            reason: "registry_garbled",
            detail: format!(
                "the answer of {} is not usable evidence: {detail}",
                registry.party_id
            ),
        };
        let now = Timestamp::now();
        let decoded = jwt::decode(token, self.0.algorithms).map_err(|e| garbled(e.to_string()))?;
        decoded
            .verify_signature()
            .map_err(|e| garbled(e.to_string()))?;
        let chain = trust
            .validate(&decoded.x5c, now)
            .await?
            .map_err(|e| garbled(e.to_string()))?;
        let record = trust.party(&registry.party_id).await?;
        check_party(&chain.chain, &registry.party_id, record.as_deref(), now)
            .map_err(|e| garbled(e.to_string()))?;
        if decoded.str_claim("iss") != Some(registry.party_id.as_str()) {
            return Err(garbled("iss is not the registry".into()));
        }
        if decoded.audience_includes(self.0.our_id.as_str()) == Some(false) {
            return Err(garbled("the answer is addressed to another party".into()));
        }
        if decoded
            .time_claim("exp")
            .is_some_and(|exp| now.as_f64() > exp + self.0.leeway_secs)
        {
            return Err(garbled("the answer has expired".into()));
        }
        decoded
            .claims
            .get(crate::scheme::vocabulary::DELEGATION_EVIDENCE_CLAIM)
            .cloned()
            .ok_or_else(|| garbled("no delegationEvidence".into()))
            .and_then(|v| serde_json::from_value(v).map_err(|e| garbled(e.to_string())))
    }
}

fn peer_algorithms(config: &Config) -> AlgorithmPolicy {
    AlgorithmPolicy {
        allow_rs384_rs512: config.tokens.allow_rs384_rs512,
    }
}

/// The value of a licence header from a grant.
pub fn evidence_header_value(name: &str, grant: &Grant) -> Option<String> {
    match name.to_ascii_lowercase().as_str() {
        "licensepurpose" => {
            let ids: Vec<&str> = grant
                .licences
                .iter()
                .flat_map(Licence::identifiers)
                .collect();
            (!ids.is_empty()).then(|| ids.join(", "))
        }
        "licensesublicense" => Some(grant.max_delegation_depth.unwrap_or(0).to_string()),
        "licenseenddate" => Some(
            crate::scheme::models::SchemeTime::from_unix(grant.not_on_or_after)
                .as_str()
                .to_string(),
        ),
        _ => None,
    }
}
