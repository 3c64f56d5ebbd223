//! What the caller may do: the one place a request is authorised, once the authentication stage
//! (`decide.rs`) has found who calls. On a delegation route the delegation stages follow, in order:
//! the broker's consumer, the mask (`Stage::Mask`, taken in `mask.rs`), the evidence and its
//! evaluation. Each records what it found in the `Decision`; where the evidence comes from is an
//! `Evidence` source: the live gateway's (the header verified through the trust store, the
//! registry through the decision cache), or a file or fixture for `explain` and rule tests.
//! `enforce` is what the route's mode makes of the outcome.

use super::mask::RequestFacts;
use super::mask::{mask, rule_value};
use super::route::Routed;
use super::{Assessed, Decision, Evaluated, EvidenceSource, EvidenceUsed, Grant, Judged, Stage};
use crate::config::model::{Auth, Config, DelegationRule, Mode};
use crate::gateway::reject::{EvidenceRefusal, HeaderRefusal, Reject, RuleValue};
use crate::peers::registry::{ChainAsk, Consent};
use crate::request::single_header;
use crate::scheme::evaluation::evaluate_chain_at;
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::mask::AccessRequest;
use crate::scheme::party::PartyId;
use crate::scheme::party_record::Aliases;
use crate::scheme::verdict::{Decision as Verdict, DenyReason, Evaluation};
use crate::scheme::vocabulary::{BROKER_HEADERS, EVIDENCE_HEADERS};
use crate::scheme::Timestamp;
use crate::telemetry::trace::Step;
use arc_swap::ArcSwapOption;
use async_trait::async_trait;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use pingora::http::RequestHeader;
use std::sync::Arc;

/// What the caller the authentication stage found may do: anything on a public route or a route
/// that needs only a caller; on a delegation route, what the delegation stages grant.
pub async fn authorise(
    config: &Config,
    routed: &Routed,
    req: &RequestHeader,
    evidence: &dyn Evidence,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Permitted, Reject> {
    let route = &routed.route;
    let rule = match &route.auth {
        Auth::Public => return Ok(Permitted::Public),
        Auth::Token => return Ok(Permitted::Authenticated),
        Auth::Delegation(rule) => rule,
    };
    let caller = d.caller_id().unwrap_or_default().to_string();
    let person = d.caller_is_person();
    let facts = |element| RequestFacts {
        method: &req.method,
        values: routed.values(&req.headers, element),
        accepted: route.accept,
        caller: &caller,
        person,
    };
    let elements = routed.body.as_ref().and_then(|b| b.elements);
    let deciding = delegation_each(config, rule, facts, elements, evidence, d, now);
    traced(&route.name, deciding).await.map(Permitted::Granted)
}

/// How many elements of a body's array are decided at once: a registry asked about each is
/// asked for several together, so that a batch is decided within the life of the consent it
/// forwards (a consumer's client assertion lives 30 s).
const ELEMENTS_AT_ONCE: usize = 8;

/// The delegation stages once (`elements` None), or for every element of the body's array (the
/// request's facts as `facts` gives them for each; `ELEMENTS_AT_ONCE` at a time, each on its own
/// copy of the decision): all must grant, and the first refused element (by its index) refuses
/// the request, the elements after it left undecided. What they grant together is the grant; the
/// decision records the values of every element decided up to the last, and that one's mask and
/// evidence.
pub async fn delegation_each<'a>(
    config: &Config,
    rule: &DelegationRule,
    facts: impl Fn(Option<usize>) -> RequestFacts<'a> + Send + Sync,
    elements: Option<usize>,
    source: &dyn Evidence,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Grant, Reject> {
    use futures::StreamExt;
    let Some(count) = elements else {
        return delegation(config, rule, &facts(None), source, d, now).await;
    };
    let base = d.clone();
    let facts = &facts;
    let decide = |index: usize| {
        let mut own = base.clone();
        async move {
            let result = delegation(config, rule, &facts(Some(index)), source, &mut own, now).await;
            (index, own, result)
        }
    };
    let mut decided = futures::stream::iter(0..count)
        .map(decide)
        .buffered(ELEMENTS_AT_ONCE);
    let mut granted: Option<Grant> = None;
    while let Some((index, own, result)) = decided.next().await {
        let mut values = std::mem::take(&mut d.values);
        values.extend_from_slice(&own.values[base.values.len()..]);
        *d = Decision { values, ..own };
        let grant = result.map_err(|refusal| Reject::BodyElement {
            index,
            refusal: Box::new(refusal),
        })?;
        granted = Some(match granted {
            None => grant,
            Some(all) => all.and(grant),
        });
    }
    granted.ok_or(Reject::Internal)
}

/// The delegation stages as a span of a traced request (`authorize`): `ishare.decision` permit,
/// deny (a refusal) or error (the gateway could not decide), `ishare.outcome` the reason.
async fn traced<F>(route: &str, work: F) -> Result<Grant, Reject>
where
    F: std::future::Future<Output = Result<Grant, Reject>>,
{
    let mut step = Step::start(
        SpanKind::Internal,
        || "authorize",
        || vec![KeyValue::new("http.route", route.to_string())],
    );
    let result = step.within(work).await;
    let (decision, outcome, failed) = match &result {
        Ok(_) => ("permit", "granted", false),
        Err(reject) => {
            let row = reject.row();
            match row.status >= 500 {
                true => ("error", row.reason, true),
                false => ("deny", row.reason, false),
            }
        }
    };
    step.record(|| vec![KeyValue::new("ishare.decision", decision)]);
    step.end(|| (outcome, failed));
    result
}

/// What a request was let through on.
pub enum Permitted {
    /// A public route.
    Public,
    /// A route that needs only a caller.
    Authenticated,
    /// A delegation route whose evidence grants the request.
    Granted(Grant),
}

/// What the route's mode does with the decision: a permit lets the request through; a refusal is
/// the answer, except on a route in shadow mode, where it is recorded and counted and the request
/// goes on without a grant (no licence headers), its caller named only if it authenticated. The
/// route stage's refusals (the request's form) hold in either mode.
pub fn enforce(
    mode: Mode,
    authorised: Result<Permitted, Reject>,
    d: &mut Decision,
) -> Result<(), Reject> {
    match authorised {
        Ok(permitted) => {
            let (reason, grant) = match permitted {
                Permitted::Public => ("public", None),
                Permitted::Authenticated => ("authenticated", None),
                Permitted::Granted(grant) => ("granted", Some(grant)),
            };
            d.reason = reason;
            d.grant = grant;
            Ok(())
        }
        Err(reject) if mode == Mode::Shadow => {
            d.shadow_denied(&reject);
            Ok(())
        }
        Err(reject) => Err(reject),
    }
}

/// What presented evidence must serve.
pub struct Expected<'a> {
    pub request: &'a AccessRequest,
    /// The authenticated caller (the consumer, or a broker acting for it).
    pub caller: &'a str,
    /// The registry the route names, if any.
    pub registry: Option<&'a str>,
    /// The name of the header the evidence came in.
    pub header: &'static str,
    /// The names of the request's parties, each to its record's id.
    pub aliases: &'a Aliases,
}

/// What is asked of the data owner's registry, for which route and caller.
pub struct RegistryAsk<'a> {
    pub route: &'a str,
    pub caller: &'a str,
    pub chain: ChainAsk<'a>,
    /// The longest the route's decision is served from the cache.
    pub max_age: Option<std::time::Duration>,
}

/// Where the evidence of a decision comes from.
#[async_trait]
pub trait Evidence: Send + Sync {
    /// The consumer a broker acts for, from that consumer's forwarded client assertion.
    async fn consumer_of_broker(
        &self,
        assertion: &str,
        caller: &str,
        now: Timestamp,
    ) -> Result<String, Reject>;

    /// Each of `parties` looked up by itself, into `aliases` (3.0: parties are compared by the
    /// ids their names' records give). A source that reads no party records looks up nothing:
    /// ids compare as written.
    async fn look_up(&self, _parties: &[&str], _aliases: &mut Aliases) -> Result<(), Reject> {
        Ok(())
    }

    /// Each of `names` that the record of one of the parties `listed_by` lists, looked up to
    /// confirm whom it names (3.0); nothing by a source that reads no party records.
    async fn confirm(
        &self,
        _names: &[&str],
        _listed_by: &[&str],
        _aliases: &mut Aliases,
    ) -> Result<(), Reject> {
        Ok(())
    }

    /// A data owner the caller names (`caller_names_owner`): refused when the caller names more
    /// owners the gateway has not looked up than it may.
    fn admit_owner(&self, caller: &str, owner: &str) -> Result<(), Reject>;

    /// The chain presented in the `delegation_evidence` header, verified and evaluated with
    /// `evaluate` against the request `expected` names (for the live gateway, each chain once).
    async fn header(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        now: Timestamp,
    ) -> Result<Assessed, Reject>;

    /// Whether a grant kept on the chain `tokens`, judged for `expected`, still stands at `now`:
    /// judging the chain again (`header`) would yield the very evaluation `evaluated`. `judged`
    /// holds what this source found when it last judged the chain whole (`Assessed::judged`),
    /// for it to rely on while nothing that judgement read changed, and to renew. By default the
    /// chain is judged whole.
    async fn header_stands(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        (evaluated, _judged): (&Arc<Evaluated>, &ArcSwapOption<Judged>),
        now: Timestamp,
    ) -> bool {
        match self.header(tokens, expected, now).await {
            Ok(assessed) => Arc::ptr_eq(&assessed.evaluated, evaluated),
            Err(_) => false,
        }
    }

    /// The data owner's registry's evidence, evaluated with `evaluate` (through a cache, for
    /// the live gateway).
    async fn registry(&self, ask: &RegistryAsk<'_>) -> Result<Assessed, Reject>;
}

/// The single value of a credential header, if present, in either of its names (1.9's
/// `delegation_evidence`, 3.0's `delegationEvidence`): the name it came in, and its value. Both
/// names in one request are refused: which one was decided on would be a guess.
pub fn header<'a>(
    headers: &'a http::HeaderMap,
    names: [&'static str; 2],
) -> Result<Option<(&'static str, &'a str)>, Reject> {
    if names.iter().all(|n| headers.contains_key(*n)) {
        return Err(Reject::BadHeader(HeaderRefusal::BothSpellings(
            names[0], names[1],
        )));
    }
    for name in names {
        match single_header(headers, name) {
            Ok(Some(value)) => return Ok(Some((name, value.trim()))),
            Ok(None) => {}
            Err(problem) => {
                return Err(EvidenceRefusal::Header {
                    header: name,
                    problem,
                }
                .into())
            }
        }
    }
    Ok(None)
}

/// The evaluation stage: a chain of evidence against the mask, at `now`.
pub fn evaluate(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    source: EvidenceSource,
    now: Timestamp,
) -> Evaluated {
    Evaluated::new(
        evaluate_chain_at(chain, request, now),
        EvidenceUsed {
            source,
            issuers: chain.iter().map(|ev| ev.policy_issuer.clone()).collect(),
            signers: chain.iter().filter_map(|ev| ev.signer.clone()).collect(),
        },
    )
}

/// A chain presented with the request (from a file or fixture standing for the header),
/// evaluated with `evaluate`: not from any cache.
pub fn assess_presented(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    source: EvidenceSource,
    now: Timestamp,
) -> Assessed {
    Assessed {
        evaluated: Arc::new(evaluate(chain, request, source, now)),
        cache_hit: false,
        kept_as: None,
        judged: None,
    }
}

/// What a registry's answer that it holds no policy (404) comes to: a Deny.
pub fn no_policy(source: EvidenceSource) -> Evaluated {
    Evaluated::new(
        Evaluation {
            decision: Verdict::Deny(DenyReason::NoPolicy),
            decided_by: Vec::new(),
        },
        EvidenceUsed {
            source,
            issuers: Vec::new(),
            signers: Vec::new(),
        },
    )
}

/// The delegation stages for a request on a delegation route: whom it is for (the caller, or the
/// consumer a broker acts for), the mask, the evidence (the header's, or the data owner's
/// registry's) and its evaluation. A Permit is the grant; a Deny or any failure is the refusal.
pub async fn delegation(
    config: &Config,
    rule: &DelegationRule,
    facts: &RequestFacts<'_>,
    source: &dyn Evidence,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Grant, Reject> {
    d.stage = Stage::Authentication;
    let original_consumer = consumer_of_broker(facts, source, d, now).await?;
    let subject = original_consumer.as_deref().unwrap_or(facts.caller);
    let mut resolved = resolved_mask(config, rule, facts, subject, source, d).await?;
    let assessed = async {
        let path = delegation_path(rule, facts, &mut resolved, source, d).await?;
        d.stage = Stage::Evidence;
        evidence(rule, facts, &resolved, &path, source, d, now).await
    }
    .await;
    d.mask = Some(Arc::new(resolved.request));
    let assessed = assessed?;
    d.stage = Stage::Evaluation;
    verdict(assessed, original_consumer, d)
}

/// The consumer a broker acts for, when its assertion comes with the request (recorded on the
/// caller).
async fn consumer_of_broker(
    facts: &RequestFacts<'_>,
    source: &dyn Evidence,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Option<String>, Reject> {
    let original_consumer = match header(facts.values.headers, BROKER_HEADERS)? {
        Some((_, assertion)) => Some(
            source
                .consumer_of_broker(assertion, facts.caller, now)
                .await?,
        ),
        None => None,
    };
    if let Some(caller) = d.caller.as_mut() {
        caller.acting_for = original_consumer.clone();
    }
    Ok(original_consumer)
}

/// The mask with its parties by the ids their own names' records give (3.0), whatever alias
/// names them, and its data owner.
struct Resolved {
    request: AccessRequest,
    owner: PartyId,
    aliases: Aliases,
}

/// The mask stage, its parties resolved (recorded as the decision's mask if that fails).
async fn resolved_mask(
    config: &Config,
    rule: &DelegationRule,
    facts: &RequestFacts<'_>,
    subject: &str,
    source: &dyn Evidence,
    d: &mut Decision,
) -> Result<Resolved, Reject> {
    let (mut request, owner) = mask(config, rule, facts, subject, d)?;
    match resolve_parties(config, rule, facts, subject, source, &mut request).await {
        Ok(aliases) => Ok(Resolved {
            // Parsed again only when its record named it otherwise.
            owner: match request.policy_issuer == owner.as_str() {
                true => owner,
                false => PartyId::parse(&request.policy_issuer).unwrap_or(owner),
            },
            request,
            aliases,
        }),
        Err(refusal) => {
            d.mask = Some(Arc::new(request));
            Err(refusal)
        }
    }
}

/// The mask's parties by the ids their names' records give; a data owner the caller names is
/// neither the subject nor the caller, by name or by id.
async fn resolve_parties(
    config: &Config,
    rule: &DelegationRule,
    facts: &RequestFacts<'_>,
    subject: &str,
    source: &dyn Evidence,
    request: &mut AccessRequest,
) -> Result<Aliases, Reject> {
    let owner_is_caller = |owner: &str| Reject::from(EvidenceRefusal::OwnerIsCaller(owner.into()));
    if rule.caller_names_owner {
        if [subject, facts.caller]
            .iter()
            .any(|p| p.eq_ignore_ascii_case(&request.policy_issuer))
        {
            return Err(owner_is_caller(&request.policy_issuer));
        }
        source.admit_owner(facts.caller, &request.policy_issuer)?;
    }
    let us = config.identity.party_id.as_str();
    let mut aliases = Aliases::default();
    let parties = match facts.person {
        true => vec![request.policy_issuer.as_str(), us],
        false => vec![subject, facts.caller, &request.policy_issuer, us],
    };
    source.look_up(&parties, &mut aliases).await?;
    request.resolve(&aliases)?;
    if rule.caller_names_owner {
        for party in [subject, facts.caller] {
            if aliases.id_of(party)? == request.policy_issuer {
                return Err(owner_is_caller(&request.policy_issuer));
            }
        }
    }
    Ok(aliases)
}

/// The parties between the data owner and the consumer, by their ids where a record found lists
/// their names (never looked up otherwise: a caller could spend the scheme owner's lookups on
/// names it makes up).
async fn delegation_path(
    rule: &DelegationRule,
    facts: &RequestFacts<'_>,
    resolved: &mut Resolved,
    source: &dyn Evidence,
    d: &mut Decision,
) -> Result<Vec<String>, Reject> {
    let mut path: Vec<String> = rule
        .delegation_path
        .iter()
        .map(|t| rule_value(t, RuleValue::DelegationPathParty, facts, d))
        .collect::<Result<_, _>>()?;
    if path.is_empty() {
        return Ok(path);
    }
    let request = &resolved.request;
    let named: Vec<&str> = path.iter().map(String::as_str).collect();
    let caller = resolved.aliases.id_of(facts.caller)?.to_string();
    let parties = [&request.policy_issuer, &request.access_subject, &caller]
        .into_iter()
        .chain(&request.service_providers)
        .map(String::as_str)
        .collect::<Vec<_>>();
    source
        .confirm(&named, &parties, &mut resolved.aliases)
        .await?;
    drop(named);
    path.iter_mut()
        .try_for_each(|p| resolved.aliases.resolve(p))?;
    Ok(path)
}

/// The evidence stage: the header's chain (where the route reads it and the request has one),
/// else the data owner's registry's, evaluated against the mask.
async fn evidence(
    rule: &DelegationRule,
    facts: &RequestFacts<'_>,
    resolved: &Resolved,
    path: &[String],
    source: &dyn Evidence,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Assessed, Reject> {
    let request = &resolved.request;
    let presented = match rule.evidence.header {
        true => header(facts.values.headers, EVIDENCE_HEADERS)?,
        false => None,
    };
    match presented {
        Some((name, tokens)) => {
            let expected = Expected {
                request,
                caller: facts.caller,
                registry: rule.registry.as_deref(),
                header: name,
                aliases: &resolved.aliases,
            };
            source.header(tokens, &expected, now).await
        }
        None if rule.evidence.registry => {
            // A broker's consumer consented in the assertion checked with the request.
            let consent = match header(facts.values.headers, BROKER_HEADERS)? {
                Some((_, assertion)) => Consent::Broker {
                    broker: facts.caller,
                    assertion,
                },
                None => Consent::Consumer,
            };
            let ask = RegistryAsk {
                route: &d.route,
                caller: facts.caller,
                chain: ChainAsk {
                    configured: rule.registry.as_deref(),
                    owner: &resolved.owner,
                    path,
                    request,
                    aliases: &resolved.aliases,
                    consent,
                },
                max_age: rule.max_decision_age,
            };
            source.registry(&ask).await
        }
        None => {
            d.stage = Stage::Evaluation;
            Err(Reject::Denied(DenyReason::EmptyChain))
        }
    }
}

/// The evaluation stage's outcome, recorded: a Permit is the grant; a Deny the refusal (the
/// registry's own answer, no policy or its Deny, is said to be the registry's).
fn verdict(
    assessed: Assessed,
    original_consumer: Option<String>,
    d: &mut Decision,
) -> Result<Grant, Reject> {
    let evaluated = &*assessed.evaluated;
    let outcome = match (&evaluated.evaluation.decision, &evaluated.terms) {
        (Verdict::Permit(_), Some(terms)) => Ok(Grant {
            original_consumer,
            terms: terms.clone(),
        }),
        // Terms are made with every Permit's evaluation.
        (Verdict::Permit(_), None) => Err(Reject::Internal),
        (Verdict::Deny(reason @ (DenyReason::NoPolicy | DenyReason::DeniedByRule)), _) => {
            match &evaluated.evidence.source {
                EvidenceSource::Registry { registry } => Err(Reject::RegistryDenied {
                    registry: registry.clone(),
                    reason: reason.clone(),
                }),
                _ => Err(Reject::Denied(reason.clone())),
            }
        }
        (Verdict::Deny(reason), _) => Err(Reject::Denied(reason.clone())),
    };
    d.assessed = Some(assessed);
    outcome
}
