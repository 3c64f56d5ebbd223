//! The delegation decision for a request on a delegated route: the request in the scheme's terms,
//! whom it is for (the caller, or the consumer a broker acts for), and the evidence that decides —
//! from the `delegation_evidence` header, or from the data owner's registry through the decision
//! cache. The rules of evidence tokens live in `scheme`; registries are asked through `peers`.

use super::broker;
use super::decision_cache::{DecisionCache, DecisionKey};
use super::header_evidence::{Expected, HeaderEvidence};
use super::reject::{EvidenceRefusal, MissingValue, Reject, RuleValue, Unavailable};
use super::replay::ReplayStore;
use crate::config::model::{Config, DelegationRule};
use crate::peers::registry::RegistryClient;
use crate::peers::scheme_owner::TrustStore;
use crate::peers::PeerClient;
use crate::rate::Buckets;
use crate::request::template::{RequestValues, Template};
use crate::request::{single_header, value_ambiguities, Ambiguities};
use crate::scheme::assertion::AssertionRules;
use crate::scheme::evaluation::{evaluate_chain, Decision, DenyReason};
use crate::scheme::evidence::AccessRequest;
use crate::scheme::evidence_token::HeaderEvidenceRules;
use crate::scheme::jwt::AlgorithmPolicy;
use crate::scheme::licence::Licence;
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::{Action, BROKER_HEADER, EVIDENCE_HEADER};
use crate::scheme::Timestamp;
use crate::telemetry::Metrics;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The longest value a rule takes from a request (an identifier, the data owner …): decisions are
/// cached by these values, so their size is bounded.
const MAX_VALUE_LEN: usize = 256;

/// Data owners a caller may name per minute that the gateway has not looked up yet: each costs
/// calls to the scheme owner.
const NEW_OWNERS_PER_MINUTE: u32 = 30;
/// The most callers whose registry budget is remembered (a forgotten caller starts with a full one).
const CALLERS: u64 = 100_000;

/// A permitted request: what the response headers are made from.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The consumer a broker acts for, when it does (the broker pattern).
    pub original_consumer: Option<String>,
    pub licences: Vec<Licence>,
    pub not_on_or_after: i64,
    pub max_delegation_depth: Option<u32>,
}

struct Inner {
    our_id: PartyId,
    replay: Arc<ReplayStore>,
    scheme: String,
    algorithms: AlgorithmPolicy,
    leeway_secs: f64,
    header_evidence: HeaderEvidence,
    registry_timeout: Duration,
    registries: RegistryClient,
    decisions: DecisionCache,
    /// Per caller: the data owners it named this minute that were not known yet.
    named_owners: moka::sync::Cache<String, Arc<AtomicU32>>,
    /// Registry calls each caller may cause: (a bucket per caller, a minute's worth).
    registry_budget: (Buckets<String>, u32),
    metrics: Metrics,
}

#[derive(Clone)]
pub struct Authorizer(Arc<Inner>);

/// What `authorize` needs to know about the request.
pub struct RequestFacts<'a> {
    pub route: &'a str,
    pub method: &'a http::Method,
    pub values: RequestValues<'a>,
    /// The ambiguous forms the route accepts in the values its rule reads.
    pub accepted: Ambiguities,
    /// The authenticated caller (from the access token).
    pub caller: &'a str,
}

/// The single value of a credential header, if present.
pub fn header<'a>(
    headers: &'a http::HeaderMap,
    name: &'static str,
) -> Result<Option<&'a str>, Reject> {
    match single_header(headers, name) {
        Ok(value) => Ok(value.map(str::trim)),
        Err(problem) => Err(EvidenceRefusal::Header {
            header: name,
            problem,
        }
        .into()),
    }
}

/// A value a rule takes from the request, as decisions are made on it: present and not empty, at
/// most MAX_VALUE_LEN bytes, and in no form backends read differently (unless the route accepts
/// it).
fn rule_value(t: &Template, value: RuleValue, facts: &RequestFacts) -> Result<String, Reject> {
    let rendered = t
        .render(&facts.values)
        .filter(|v| !v.is_empty())
        .ok_or_else(|| MissingValue::Absent {
            value,
            template: t.as_str().to_string(),
        })?;
    if rendered.len() > MAX_VALUE_LEN {
        return Err(Reject::ValueTooLong {
            value,
            limit: MAX_VALUE_LEN,
        });
    }
    match value_ambiguities(&rendered).first_not_in(facts.accepted) {
        Some(a) => Err(Reject::Ambiguous(a)),
        None => Ok(rendered),
    }
}

impl Authorizer {
    pub fn new(
        config: &Config,
        peer: PeerClient,
        replay: Arc<ReplayStore>,
        metrics: Metrics,
    ) -> Self {
        let algorithms = AlgorithmPolicy {
            allow_rs384_rs512: config.tokens.allow_rs384_rs512,
        };
        let leeway_secs = config.tokens.leeway.as_secs_f64();
        let d = &config.delegation;
        Authorizer(Arc::new(Inner {
            our_id: config.identity.party_id.clone(),
            replay,
            scheme: config.scheme.clone(),
            algorithms,
            leeway_secs,
            header_evidence: HeaderEvidence::new(
                algorithms,
                HeaderEvidenceRules {
                    leeway_secs,
                    max_age_secs: d.header_evidence_max_age.as_secs_f64(),
                },
                d.cache_size,
                metrics.clone(),
            ),
            registry_timeout: d.registry_timeout,
            registries: RegistryClient::new(
                peer,
                algorithms,
                leeway_secs,
                config.registries.clone(),
                metrics.clone(),
            ),
            decisions: DecisionCache::new(d, metrics.clone()),
            registry_budget: {
                let per_minute = d.registry_calls_per_minute.max(1);
                let burst = f64::from(per_minute);
                (Buckets::new(burst / 60.0, burst, CALLERS), per_minute)
            },
            named_owners: moka::sync::Cache::builder()
                .max_capacity(100_000)
                .time_to_live(Duration::from_secs(60))
                .build(),
            metrics,
        }))
    }

    /// The request in the scheme's terms, from the rule and the request, and its data owner.
    fn access_request(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts,
        subject: &str,
    ) -> Result<(AccessRequest, PartyId), Reject> {
        let render = |t: &Template, value: RuleValue| rule_value(t, value, facts);
        let renders = |ts: &[Template], value| -> Result<Vec<String>, Reject> {
            ts.iter().map(|t| render(t, value)).collect()
        };
        let policy_issuer = render(&rule.policy_issuer, RuleValue::DataOwner)?;
        let owner = PartyId::parse(&policy_issuer).map_err(MissingValue::InvalidDataOwner)?;
        let action = match &rule.action {
            Some(a) => a.clone(),
            None => Action::for_method(facts.method)
                .ok_or(MissingValue::NoAction)?
                .qualified(&self.0.scheme),
        };
        let request = AccessRequest {
            policy_issuer,
            access_subject: subject.to_string(),
            service_providers: vec![self.0.our_id.to_string()],
            resource_type: render(&rule.resource_type, RuleValue::ResourceType)?,
            identifiers: renders(&rule.identifiers, RuleValue::Identifier)?,
            attributes: renders(&rule.attributes, RuleValue::Attribute)?,
            actions: vec![action],
            required_licences: rule.licences.clone(),
        };
        Ok((request, owner))
    }

    /// Decide a request on a delegation route.
    pub async fn authorize(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts<'_>,
        trust: &TrustStore,
    ) -> Result<Grant, Reject> {
        let now = Timestamp::now();
        let original_consumer = match header(facts.values.headers, BROKER_HEADER)? {
            Some(assertion) => {
                let rules = AssertionRules {
                    audience: facts.caller.to_string(),
                    leeway_secs: self.0.leeway_secs,
                    algorithms: self.0.algorithms,
                };
                Some(
                    broker::original_consumer(assertion, &rules, trust, &self.0.replay, now)
                        .await?,
                )
            }
            None => None,
        };
        let subject = original_consumer.as_deref().unwrap_or(facts.caller);
        let (request, owner) = self.access_request(rule, facts, subject)?;
        if rule.caller_names_owner
            && [subject, facts.caller]
                .iter()
                .any(|p| p.eq_ignore_ascii_case(&request.policy_issuer))
        {
            return Err(EvidenceRefusal::OwnerIsCaller(request.policy_issuer).into());
        }
        if rule.caller_names_owner && !trust.knows(&request.policy_issuer) {
            let named = self
                .0
                .named_owners
                .get_with(facts.caller.to_string(), Default::default);
            if named.fetch_add(1, Ordering::Relaxed) >= NEW_OWNERS_PER_MINUTE {
                return Err(Reject::TooManyNewOwners {
                    per_minute: NEW_OWNERS_PER_MINUTE,
                });
            }
        }
        let evidence = match rule.evidence.header {
            true => header(facts.values.headers, EVIDENCE_HEADER)?,
            false => None,
        };
        let decision = match evidence {
            Some(tokens) => {
                let chain = self
                    .0
                    .header_evidence
                    .chain(
                        tokens,
                        &Expected {
                            request: &request,
                            caller: facts.caller,
                            registry: rule.registry.as_deref(),
                        },
                        &self.0.registries,
                        trust,
                        now,
                    )
                    .await?;
                evaluate_chain(&chain, &request, now)
            }
            None if rule.evidence.registry => {
                self.registry_decision(rule, facts, &request, &owner, trust)
                    .await?
            }
            None => Decision::Deny(DenyReason::EmptyChain),
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
                original_consumer,
                licences: p.licences,
                not_on_or_after: p.not_on_or_after,
                max_delegation_depth: p.max_delegation_depth,
            }),
            Decision::Deny(reason) => Err(Reject::Denied(reason)),
        }
    }

    /// A decision from the registry, through the decision cache.
    async fn registry_decision(
        &self,
        rule: &DelegationRule,
        facts: &RequestFacts<'_>,
        request: &AccessRequest,
        owner: &PartyId,
        trust: &TrustStore,
    ) -> Result<Decision, Reject> {
        let path: Vec<String> = rule
            .delegation_path
            .iter()
            .map(|t| rule_value(t, RuleValue::DelegationPathParty, facts))
            .collect::<Result<_, _>>()?;
        let key = DecisionKey {
            route: facts.route.to_string(),
            request: request.clone(),
            registry: rule.registry.clone().unwrap_or_default(),
            path: path.clone(),
        };
        let timeout = self.0.registry_timeout;
        let fetch = async {
            let (budget, per_minute) = &self.0.registry_budget;
            if let Err(retry_after) = budget.take(facts.caller, std::time::Instant::now()) {
                self.0
                    .metrics
                    .budget_exhausted
                    .with_label_values(&["registry_calls"])
                    .inc();
                return Err(Reject::TooManyRegistryCalls {
                    per_minute: *per_minute,
                    retry_after,
                });
            }
            let configured = rule.registry.as_deref();
            let chain = self
                .0
                .registries
                .chain(configured, owner, &path, request, trust);
            let chain = tokio::time::timeout(timeout, chain)
                .await
                .map_err(|_| Reject::Unavailable(Unavailable::RegistryTimeout(timeout)))??;
            Ok(match chain {
                Some(chain) => evaluate_chain(&chain, request, Timestamp::now()),
                None => Decision::Deny(DenyReason::NoPolicy),
            })
        };
        self.0.decisions.get_or_decide(key, fetch).await
    }
}
