//! Decisions without a client, for `explain` and rule tests: a request built from its parts, a
//! caller named (or a token), and evidence from a file or a fixture (or, asked for, the live
//! registry), decided as the proxy decides (`decision::decide`) under a snapshot of the
//! configuration.

use std::sync::Arc;

use super::authenticate::{CallerArg, Named};
use super::authorise::{assess_presented, evaluate, no_policy, Evidence, Expected, RegistryAsk};
use super::decide::{Asked, Decided, Next, Policy};
use super::incoming::{Held, HeldBody};
use super::route::Routed;
use super::{logged, Assessed, Decision, EvidenceSource, Stage};
use crate::access_token::AccessTokens;
use crate::gateway::reject::{EvidenceRefusal, LoginFailure, Reject};
use crate::reading::json::read_signed;
use crate::scheme::evidence::DelegationEvidence;
use crate::scheme::evidence_token::{read_evidence, read_evidence_token, Readers};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::Timestamp;
use async_trait::async_trait;
use pingora::http::RequestHeader;

/// A request described by its parts: by `explain` and rule tests, and by another proxy to the
/// decision service.
#[derive(Clone, Debug)]
pub struct DescribedRequest {
    pub method: String,
    /// The path, with its query.
    pub target: String,
    pub headers: Vec<(String, String)>,
    pub caller: Option<CallerArg>,
    /// The body, as the request carries it (decided on by a route whose rule reads it).
    pub body: Option<Vec<u8>>,
}

impl DescribedRequest {
    /// The body as the stages are given it.
    pub fn held_body(&self) -> HeldBody<'_> {
        self.body
            .as_deref()
            .map_or(HeldBody::Unseen, HeldBody::Given)
    }
}

/// What a registry answers, given instead of asked.
#[derive(Clone, Debug)]
pub enum RegistryAnswer {
    /// Its evidence (a chain from the data owner), and where it was read from.
    Evidence(Vec<DelegationEvidence>, String),
    /// 404: it holds no policy.
    NoPolicy,
}

/// Evidence given instead of verified or asked: what `explain` reads from a file and rule tests
/// from their fixtures. Signatures are not verified (that is the trust list's business, not the
/// rules'); the chain is evaluated as the gateway would.
pub struct Given {
    /// What stands for the `delegation_evidence` header.
    pub header: Option<(Vec<DelegationEvidence>, String)>,
    /// What stands for the registry's answer.
    pub registry: Option<RegistryAnswer>,
    pub algorithms: AlgorithmPolicy,
    /// How each signer's evidence is read, as the gateway reads it.
    pub readers: Readers,
    pub now: Timestamp,
}

/// Evidence tokens are decoded with every algorithm some version signs with; which one a signer
/// may use is its version's (`read_evidence_token`).
const EVERY_ALGORITHM: AlgorithmPolicy = AlgorithmPolicy {
    allow_rs384_rs512: true,
};

/// The payload of a JWT, read without its signature verified.
fn unverified(token: &str, algorithms: AlgorithmPolicy) -> Result<jwt::DecodedJwt, Reject> {
    jwt::decode(token, algorithms).map_err(|e| EvidenceRefusal::Token(e.into()).into())
}

#[async_trait]
impl Evidence for Given {
    async fn consumer_of_broker(
        &self,
        assertion: &str,
        _caller: &str,
        _now: Timestamp,
    ) -> Result<String, Reject> {
        let decoded = unverified(assertion, self.algorithms)?;
        Ok(decoded.str_claim("iss").unwrap_or_default().to_string())
    }

    fn admit_owner(&self, _caller: &str, _owner: &str) -> Result<(), Reject> {
        Ok(())
    }

    async fn header(
        &self,
        tokens: &str,
        expected: &Expected<'_>,
        now: Timestamp,
    ) -> Result<Assessed, Reject> {
        let request = expected.request;
        if let Some((chain, from)) = &self.header {
            let source = EvidenceSource::Given { from: from.clone() };
            return Ok(assess_presented(chain, request, source, now));
        }
        let mut chain = Vec::new();
        for token in tokens.split(',').map(str::trim).filter(|t| !t.is_empty()) {
            let decoded = unverified(token, EVERY_ALGORITHM)?;
            let read =
                read_evidence_token(&decoded, &self.readers).map_err(EvidenceRefusal::Token)?;
            // No party records here: names compare as written.
            read.check_subject(|a, b| a == b)
                .map_err(EvidenceRefusal::Token)?;
            chain.push(read.evidence);
        }
        let source = EvidenceSource::Given {
            from: format!(
                "the {} header, its signatures not verified",
                expected.header
            ),
        };
        Ok(assess_presented(&chain, request, source, now))
    }

    async fn registry(&self, ask: &RegistryAsk<'_>) -> Result<Assessed, Reject> {
        let evaluated = match &self.registry {
            Some(RegistryAnswer::Evidence(chain, from)) => {
                let source = EvidenceSource::Given { from: from.clone() };
                evaluate(chain, ask.chain.request, source, self.now)
            }
            Some(RegistryAnswer::NoPolicy) => no_policy(EvidenceSource::Given {
                from: "the registry's answer: no policy (404)".into(),
            }),
            // No registry answer to give: `decide` says so.
            None => return Err(Reject::Internal),
        };
        Ok(Assessed {
            evaluated: std::sync::Arc::new(evaluated),
            cache_hit: false,
            kept_as: None,
            judged: None,
        })
    }
}

/// Why a request could not be decided at all.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DryRunError {
    #[error("{0:?} is not a method")]
    Method(String),
    #[error("{0:?} is not a request target (a path from /, with an optional query)")]
    Target(String),
    #[error("the header {0:?} cannot be sent")]
    Header(String),
    #[error("{0} is served by the gateway itself, not by a route")]
    OwnEndpoint(String),
    #[error("the route asks the data owner's registry, and no answer was given: give the registry's evidence (explain: --evidence FILE; rule tests: registry = \"FILE\" or \"no_policy\") or ask the registry (explain --registry)")]
    RegistryNotGiven,
}

/// The longest method a request may name (the longest registered one has 17 letters).
const MAX_METHOD_LEN: usize = 32;

/// The request as the proxy reads it.
pub fn request_header(req: &DescribedRequest) -> Result<RequestHeader, DryRunError> {
    if req.method.len() > MAX_METHOD_LEN {
        return Err(DryRunError::Method(logged(&req.method)));
    }
    let method = http::Method::from_bytes(req.method.to_ascii_uppercase().as_bytes())
        .map_err(|_| DryRunError::Method(req.method.clone()))?;
    if !req.target.starts_with('/') {
        return Err(DryRunError::Target(req.target.clone()));
    }
    let mut header = RequestHeader::build(method, req.target.as_bytes(), None)
        .map_err(|_| DryRunError::Target(req.target.clone()))?;
    for (name, value) in &req.headers {
        let name = http::HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| DryRunError::Header(name.clone()))?;
        let value = http::HeaderValue::from_str(value.trim())
            .map_err(|_| DryRunError::Header(name.to_string()))?;
        header
            .append_header(name.clone(), value)
            .map_err(|_| DryRunError::Header(name.to_string()))?;
    }
    if let Some(CallerArg::Token(token)) = &req.caller {
        let bearer = http::HeaderValue::from_str(&format!("Bearer {}", token.trim()))
            .map_err(|_| DryRunError::Header("authorization".into()))?;
        header
            .insert_header(http::header::AUTHORIZATION, bearer)
            .map_err(|_| DryRunError::Header("authorization".into()))?;
    }
    Ok(header)
}

/// Decide `req` under `policy` with `source`'s evidence, as the proxy decides
/// (`decision::decide`), a token validated with `tokens`: the decision (a refusal is recorded in
/// it), and the route when one took the request.
pub async fn decide(
    policy: &Policy<'_>,
    tokens: &AccessTokens,
    req: &DescribedRequest,
    source: &dyn Evidence,
    now: Timestamp,
) -> Result<(Decision, Option<Arc<Routed>>), DryRunError> {
    let header = request_header(req)?;
    let mut held = Held {
        header: &header,
        has_body: req.body.is_some(),
        body: req.held_body(),
        described: true,
    };
    let callers = Named {
        caller: req.caller.as_ref(),
        tokens,
    };
    let asked = Asked::Request(&mut held);
    let decided = super::decide::decide(policy, asked, &callers, source, now).await;
    let Decided {
        mut decision,
        routed,
        next,
    } = decided;
    match next {
        Next::Own(_) => Err(DryRunError::OwnEndpoint(decision.path.to_string())),
        Next::Refuse(Reject::Internal) if decision.stage == Stage::Evidence => {
            Err(DryRunError::RegistryNotGiven)
        }
        Next::SignIn => {
            decision.refused(&LoginFailure::Required.into());
            Ok((decision, routed))
        }
        Next::Refuse(_) | Next::Forward(_) => Ok((decision, routed)),
    }
}

/// Evidence from a file: a `delegationEvidence` (bare, or in `{"delegationEvidence": …}`), a
/// list of them (a chain from the data owner), a registry's answer (`{"delegation_token": …}`,
/// `{"delegationToken": …}`), or a delegation token itself. Tokens are read without their
/// signatures verified, as their issuer's version writes evidence; bare evidence as its data
/// owner's.
pub fn read_evidence_file(
    text: &str,
    readers: &Readers,
) -> Result<Vec<DelegationEvidence>, String> {
    let text = text.trim();
    let from_token = |token: &str| -> Result<DelegationEvidence, String> {
        let decoded = jwt::decode(token, EVERY_ALGORITHM).map_err(|e| e.to_string())?;
        let read = read_evidence_token(&decoded, readers).map_err(|e| e.to_string())?;
        read.check_subject(|a, b| a == b)
            .map_err(|e| e.to_string())?;
        Ok(read.evidence)
    };
    if !text.starts_with(['{', '[']) {
        return text
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .map(from_token)
            .collect();
    }
    // Read as a signed token's JSON is: one way only, every number as written.
    let value = read_signed(text.as_bytes()).map_err(|e| format!("the evidence {e}"))?;
    let one = |v: &serde_json::Value| -> Result<DelegationEvidence, String> {
        let token = ["delegation_token", "delegationToken"]
            .iter()
            .find_map(|m| v.get(*m).and_then(|t| t.as_str()));
        if let Some(token) = token {
            return from_token(token);
        }
        let evidence = v.get("delegationEvidence").unwrap_or(v);
        let owner = evidence["policyIssuer"].as_str().unwrap_or_default();
        read_evidence(evidence.clone(), owner, readers)
            .map_err(|e| format!("not a delegationEvidence: {e}"))
    };
    match &value {
        serde_json::Value::Array(items) if items.is_empty() => {
            Err("an empty list of evidence".into())
        }
        serde_json::Value::Array(items) => items.iter().map(one).collect(),
        other => one(other).map(|e| vec![e]),
    }
}
