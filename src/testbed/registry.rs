//! The dummy authorisation registry and entitled party: stored policies, POST /delegation answering
//! a mask with mirror-the-mask evidence, and POST /policy. An entitled party runs the same engine
//! but answers only for delegations it issued itself.

use super::config::Serve;
use super::participant::{common_routes, require, token_answer, ApiError, ApiResult, Participant};
use super::policy_store::check_policy_shape;
use super::strict;
use crate::access_token::{bearer_token, AccessTokenError};
use crate::peers::trust::{Trust, VerifyError};
use crate::scheme::assertion::check_assertion;
use crate::scheme::evaluation::evaluate_policy_sets;
use crate::scheme::evidence::{DelegationEvidence, Policy, PolicySet, Rule};
use crate::scheme::jwt::{self, AlgorithmPolicy};
use crate::scheme::licence::Licence;
use crate::scheme::mask::{AccessRequest, DelegationBody, DelegationRequest};
use crate::scheme::party::PartyId;
use crate::scheme::vocabulary::{member, DELEGATION_EVIDENCE_CLAIM};
use crate::scheme::Timestamp;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use serde_json::{json, Value};
use std::sync::Arc;

pub fn router(p: Arc<Participant>) -> Router {
    common_routes()
        .route("/delegation", any(delegation))
        .route("/policy", any(add_policy))
        .with_state(p)
}

/// The request one mask policy stands for. An omitted identifier or attribute list asks for all.
fn request_of(mask: &DelegationRequest, set: &PolicySet, policy: &Policy) -> AccessRequest {
    let all = || vec!["*".to_string()];
    let t = &policy.target;
    AccessRequest {
        policy_issuer: mask.policy_issuer.clone(),
        access_subject: mask.target.access_subject.clone(),
        service_providers: t
            .environment
            .as_ref()
            .and_then(|e| e.service_providers.clone())
            .unwrap_or_default(),
        resource_type: t.resource.resource_type.clone(),
        identifiers: t.resource.identifiers.clone().unwrap_or_else(all),
        attributes: t.resource.attributes.clone().unwrap_or_else(all),
        actions: t.actions.clone(),
        required_licences: set
            .licences()
            .iter()
            .flat_map(Licence::identifiers)
            .map(str::to_string)
            .collect(),
        operands: t
            .context
            .iter()
            .flat_map(|c| &c.values)
            .filter_map(|(k, v)| Some((k.clone(), Some(v.as_str()?.to_string()))))
            .collect(),
        unnamed_provider_accepted: false,
    }
}

/// Evidence that mirrors the mask: each mask policy with its own target and one rule, Permit when the
/// stored policies grant it and Deny otherwise; validity, issuer and subject from the stored policies.
/// Conditions of the stored rules are the service provider's to evaluate (3.0, type 2): the
/// registry decides without them and passes the granting policy's on in its Permit rule; the
/// conditions of a stored policy's `context` (type 1) it evaluates itself, on the mask's context.
pub fn mirror(
    mask: &DelegationRequest,
    stored: &[DelegationEvidence],
    now: i64,
) -> DelegationEvidence {
    let sets: Vec<PolicySet> = stored.iter().flat_map(|e| e.policy_sets.clone()).collect();
    let unconditioned: Vec<PolicySet> = sets
        .iter()
        .cloned()
        .map(|mut set| {
            for rule in set.policies.iter_mut().flat_map(|p| p.rules.iter_mut()) {
                rule.conditions = None;
            }
            set
        })
        .collect();
    // The conditions of the first stored policy that grants the request without them.
    let conditions_for = |request: &AccessRequest| {
        sets.iter().zip(&unconditioned).find_map(|(set, bare)| {
            set.policies
                .iter()
                .zip(&bare.policies)
                .find_map(|(policy, bare_policy)| {
                    let alone = PolicySet {
                        policies: vec![bare_policy.clone()],
                        ..bare.clone()
                    };
                    evaluate_policy_sets(std::slice::from_ref(&alone), request).ok()?;
                    Some(policy.rules.first()?.conditions.clone())
                })
        })
    };
    let policy_sets = mask
        .policy_sets
        .iter()
        .map(|mask_set| {
            let mut out = PolicySet::default();
            for mask_policy in &mask_set.policies {
                let request = request_of(mask, mask_set, mask_policy);
                let rule = match evaluate_policy_sets(&unconditioned, &request) {
                    Ok(granted) => {
                        out.max_delegation_depth =
                            out.max_delegation_depth.max(granted.max_delegation_depth);
                        if out.target.is_none() && !granted.licences.is_empty() {
                            out.target = Some(crate::scheme::evidence::PolicySetTarget {
                                environment: Some(crate::scheme::evidence::PolicySetEnvironment {
                                    licenses: granted.licences,
                                    ..Default::default()
                                }),
                                ..Default::default()
                            });
                        }
                        Rule {
                            conditions: conditions_for(&request).flatten(),
                            ..Rule::permit()
                        }
                    }
                    Err(_) => Rule::deny(),
                };
                out.policies.push(Policy {
                    target: mask_policy.target.clone(),
                    rules: vec![rule],
                    unknown: Default::default(),
                });
            }
            out
        })
        .collect();
    DelegationEvidence {
        not_before: now,
        not_on_or_after: stored
            .iter()
            .map(|e| e.not_on_or_after)
            .max()
            .unwrap_or(now),
        policy_issuer: mask.policy_issuer.clone(),
        target: mask.target.clone(),
        policy_sets,
        unknown: Default::default(),
        read_as: Default::default(),
        signer: None,
    }
}

/// The bearer token of a delegation request. A missing or non-Bearer Authorization header is a 400
/// (as the conformance tests expect on this endpoint); an invalid or expired token a 401.
fn delegation_caller(p: &Participant, headers: &HeaderMap) -> Result<String, ApiError> {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    match bearer_token(auth) {
        Err(e @ (AccessTokenError::Missing | AccessTokenError::NotBearer)) => {
            Err(ApiError::bad_request("invalid_request", e.to_string()))
        }
        Err(e) => Err(ApiError::unauthorized(e)),
        Ok(token) => p
            .tokens
            .validate(token, Timestamp::now())
            .map(|c| c.sub.clone())
            .map_err(ApiError::unauthorized),
    }
}

/// The previous steps as a chain of consent to the caller: each client assertion addressed to the
/// issuer of the next step (the last to the caller), the first of a party named as issuer or
/// subject of the mask; so a broker's consumer's assertion (to the broker) and then the broker's
/// (to the service provider asking) let that service provider ask for the consumer.
async fn check_previous_steps(
    p: &Participant,
    caller: &str,
    mask: &DelegationRequest,
    steps: &[String],
) -> Result<(), ApiError> {
    let issuers: Vec<Option<String>> = steps
        .iter()
        .map(|s| {
            let decoded = jwt::decode(
                s,
                AlgorithmPolicy {
                    allow_rs384_rs512: true,
                },
            )
            .ok();
            decoded.and_then(|j| j.str_claim("iss").map(str::to_string))
        })
        .collect();
    for (i, step) in steps.iter().enumerate() {
        let to = issuers
            .get(i + 1)
            .and_then(Option::as_deref)
            .unwrap_or(caller);
        check_previous_step(p, (caller, to), mask, step, i == 0).await?;
    }
    Ok(())
}

/// Check one previous step: a client assertion (of a party named as issuer or subject of the
/// mask, for the `first` step) addressed to `to`; or delegation evidence issued by a registered
/// party to the caller.
/// The assertion's checks are those of Keyrock's `is_valid_prev_steps` and `validate_jwt` (RS256,
/// typ JWT, a trusted x5c chain, `iss` the mask's policy issuer or access subject, `iss == sub`,
/// a `jti`, `iat` not in the future, unexpired, `exp == iat + 30`, `aud` the caller) and of the
/// iSHARE reference registry's `PreviousStepsValidationService` (every step, the `/token` checks,
/// the audience the requesting client). A strict registry takes client assertions only, as
/// Keyrock does: delegation evidence fails its `iss == sub`.
async fn check_previous_step(
    p: &Participant,
    (caller, to): (&str, &str),
    mask: &DelegationRequest,
    step: &str,
    first: bool,
) -> Result<(), ApiError> {
    let now = Timestamp::now();
    let register = &p.shared.register;
    let invalid = |code: &'static str, msg: String| {
        ApiError::bad_request("invalid_request", format!("previous_steps: {msg} ({code})"))
    };
    let untrusted = |e: VerifyError| match e {
        VerifyError::Refused(e) => invalid(e.code(), e.to_string()),
        VerifyError::SchemeOwner(e) => invalid("scheme_owner_unavailable", e.to_string()),
    };
    let decoded =
        jwt::decode(step, p.shared.algorithms).map_err(|e| invalid(e.code(), e.to_string()))?;
    let evidence = decoded.claims.get(DELEGATION_EVIDENCE_CLAIM);
    if evidence.is_some() && p.strict {
        return Err(invalid(
            "not_a_client_assertion",
            "this registry takes client assertions only, not delegation evidence".into(),
        ));
    }
    if let Some(evidence) = evidence {
        let iss = decoded.str_claim("iss").unwrap_or_default();
        let issuer = PartyId::parse(iss).map_err(|e| invalid("invalid_iss", e.to_string()))?;
        register
            .verify_signer(&decoded, &issuer, now)
            .await
            .map_err(untrusted)?;
        let ev: DelegationEvidence = serde_json::from_value(evidence.clone())
            .map_err(|e| invalid("invalid_evidence", e.to_string()))?;
        let links = ev.target.access_subject == caller
            && (ev.policy_issuer == mask.policy_issuer
                || ev.policy_issuer == mask.target.access_subject)
            && ev.not_before <= now.secs()
            && now.secs() < ev.not_on_or_after;
        return if links {
            Ok(())
        } else {
            Err(invalid(
                "evidence_does_not_link",
                "the evidence does not delegate this mask's party to the caller".into(),
            ))
        };
    }
    let rules = p.shared.assertion_rules(to);
    let assertion =
        check_assertion(step, None, &rules, now).map_err(|e| invalid(e.code(), e.to_string()))?;
    register
        .verify_signer(&assertion.jwt, &assertion.client_id, now)
        .await
        .map_err(untrusted)?;
    let iss = assertion.client_id.as_str();
    if first && iss != mask.target.access_subject && iss != mask.policy_issuer {
        return Err(invalid(
            "invalid_delegation_assertion_pair",
            format!(
                "the assertion is from {iss}, not from the mask's accessSubject or policyIssuer"
            ),
        ));
    }
    Ok(())
}

/// Whether the caller may ask about this mask without a previous step: it is the policy issuer, the
/// access subject, or a service provider named in every policy of the mask.
fn caller_is_named(caller: &str, mask: &DelegationRequest) -> bool {
    caller == mask.policy_issuer
        || caller == mask.target.access_subject
        || mask
            .policy_sets
            .iter()
            .flat_map(|s| &s.policies)
            .all(|policy| {
                policy
                    .target
                    .environment
                    .as_ref()
                    .and_then(|e| e.service_providers.as_ref())
                    .is_some_and(|sps| sps.iter().any(|sp| sp == caller))
            })
}

/// Whether the policy issuer designated this registry for the caller, a service provider (3.0,
/// RFC056): its 3.0 mask cannot name the caller, and the designation says it may ask.
fn designated_for(p: &Participant, caller: &str, mask: &DelegationRequest) -> bool {
    let register = &p.shared.register;
    let member_of = |space: &str| register.is_member(caller, space);
    register.version().camel_case()
        && register.party(&mask.policy_issuer).is_some_and(|owner| {
            owner.registries().any(|r| {
                r.id == p.party_id.as_str()
                    && match (&r.service_provider, &r.dataspace_id) {
                        (Some(sp), _) => sp == caller,
                        (None, Some(space)) => member_of(space),
                        (None, None) => false,
                    }
            })
        })
}

/// The mask's policy issuer and access subject are parties the scheme owner knows, and active.
fn check_mask_parties(
    p: &Participant,
    mask: &DelegationRequest,
    now: Timestamp,
) -> Result<(), ApiError> {
    for (role, id) in [
        ("policyIssuer", &mask.policy_issuer),
        ("accessSubject", &mask.target.access_subject),
    ] {
        match p.shared.register.party(id) {
            // A person (an identifier of the form did:ishare:…, given by an identity provider) is
            // not in the scheme owner's register.
            None if role == "accessSubject" && id.starts_with("did:") => {}
            None => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!(
                        "the mask's {role} {id} is unknown at the scheme owner (unknown_mask_id)"
                    ),
                ))
            }
            Some(r) if !r.adherence.is_active_at(now.secs()) => {
                return Err(ApiError::bad_request(
                    "invalid_request",
                    format!("the mask's {role} {id} is not active (mask_id_not_active)"),
                ))
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// A delegation path names parties only, and runs from the mask's policy issuer to its access
/// subject.
fn check_delegation_path(path: &[&str], mask: &DelegationRequest) -> Result<(), ApiError> {
    if !path.is_empty() {
        if let Some(bad) = path.iter().find(|id| PartyId::parse(id).is_err()) {
            return Err(ApiError::bad_request(
                "invalid_request",
                format!("delegation_path holds {bad:?}, not a party identifier"),
            ));
        }
        let (first, last) = (&path[0], &path[path.len() - 1]);
        if *first != mask.policy_issuer || *last != mask.target.access_subject {
            return Err(ApiError::bad_request(
                "invalid_request",
                "delegation_path must run from the mask's policyIssuer to its accessSubject",
            ));
        }
    }
    Ok(())
}

/// POST /delegation.
pub async fn delegation(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    p.stats
        .delegation_requests
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let caller = delegation_caller(&p, &headers)?;
    let not_a_request = |e: String| {
        ApiError::bad_request(
            "invalid_request",
            format!("the body is not a delegation request: {e}"),
        )
    };
    let body: Value = serde_json::from_slice(&body).map_err(|e| not_a_request(e.to_string()))?;
    if let Some(departure) = p.strict.then(|| strict::outside_schema(&body)).flatten() {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("the body does not hold to the delegation request schema: {departure}"),
        ));
    }
    let body: DelegationBody =
        serde_json::from_value(body).map_err(|e| not_a_request(e.to_string()))?;
    // The mask's parties by their ids (3.0: whatever alias it names them by) for every check
    // and the stored policies; the answer mirrors the mask as asked.
    let asked = &body.request;
    let register = &p.shared.register;
    let mut resolved = asked.clone();
    resolved.policy_issuer = register.id_of(&asked.policy_issuer).to_string();
    resolved.target.access_subject = register.id_of(&asked.target.access_subject).to_string();
    let mask = &resolved;
    check_policy_shape(
        &mask.policy_issuer,
        &mask.target.access_subject,
        &mask.policy_sets,
    )
    .map_err(|e| ApiError::bad_request("invalid_request", e))?;
    if p.serve == Serve::EntitledParty && mask.policy_issuer != p.party_id.as_str() {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "this entitled party answers only for delegations it issued ({})",
                p.party_id
            ),
        ));
    }
    let now = Timestamp::now();
    check_mask_parties(&p, mask, now)?;
    let path: Vec<&str> = body
        .delegation_path
        .iter()
        .map(|id| register.id_of(id))
        .collect();
    check_delegation_path(&path, mask)?;
    check_previous_steps(&p, &caller, mask, &body.previous_steps).await?;
    let with_steps = !body.previous_steps.is_empty();
    if p.strict {
        strict::caller_may_ask(&caller, mask, with_steps)
            .map_err(|e| ApiError::bad_request("invalid_request", e))?;
    } else if !with_steps && !caller_is_named(&caller, mask) && !designated_for(&p, &caller, mask) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!("{caller} is neither the policyIssuer, the accessSubject nor a listed service provider of the mask, and previous_steps holds no client assertion (client_id_not_allowed)"),
        ));
    }
    let stored =
        p.shared
            .policies
            .matching(&mask.policy_issuer, &mask.target.access_subject, now.secs());
    if stored.is_empty() {
        return Err(ApiError::not_found(format!(
            "no policy from {} to {}",
            mask.policy_issuer, mask.target.access_subject
        )));
    }
    let evidence = mirror(asked, &stored, now.secs());
    // 3.0 answers with `delegationToken`, its `sub` the registry itself; before, `sub` is the
    // access subject.
    let version = p.shared.register.version();
    let (sub, answer_member) = match version.camel_case() {
        true => (p.party_id.as_str(), member::DELEGATION_3),
        false => (asked.target.access_subject.as_str(), member::DELEGATION),
    };
    // Keyrock addresses its evidence to the id it keeps for the caller.
    let aud = match &p.keyrock {
        Some(_) => super::keyrock_ways::user_id(&caller),
        None => caller,
    };
    let token = p
        .identity
        .sign_token(
            sub,
            Some(&aud),
            &json!({ DELEGATION_EVIDENCE_CLAIM: evidence }),
            now,
            super::participant::RESPONSE_TOKEN_LIFETIME,
        )
        .map_err(ApiError::from)?;
    Ok(token_answer(answer_member, token))
}

/// A policy to store (a delegationEvidence object, bare or under `delegationEvidence`), checked:
/// its shape, its validity period, and for an entitled party that it is its own.
pub fn new_policy(p: &Participant, body: &[u8]) -> Result<DelegationEvidence, ApiError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad_request("invalid_request", format!("the body is not JSON: {e}"))
    })?;
    if let Some(inner) = value.get_mut(DELEGATION_EVIDENCE_CLAIM) {
        value = inner.take();
    }
    let evidence: DelegationEvidence = serde_json::from_value(value).map_err(|e| {
        ApiError::bad_request(
            "invalid_request",
            format!("the body is not delegation evidence: {e}"),
        )
    })?;
    check_policy_shape(
        &evidence.policy_issuer,
        &evidence.target.access_subject,
        &evidence.policy_sets,
    )
    .map_err(|e| ApiError::bad_request("invalid_request", e))?;
    let version = p.shared.register.version();
    if let Some(member) = evidence.first_undefined_in(version) {
        return Err(ApiError::bad_request(
            "invalid_request",
            format!(
                "{member} is not a member of delegation evidence in {}: a policy holding it would never match",
                version.as_str()
            ),
        ));
    }
    if evidence.not_on_or_after <= evidence.not_before {
        return Err(ApiError::bad_request(
            "invalid_request",
            "notOnOrAfter must be after notBefore",
        ));
    }
    if p.serve == Serve::EntitledParty && evidence.policy_issuer != p.party_id.as_str() {
        return Err(ApiError::bad_request(
            "invalid_request",
            "an entitled party holds only its own policies",
        ));
    }
    Ok(evidence)
}

/// POST /policy: store a policy the caller issues (an entitled party stores only its own).
pub async fn add_policy(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    require(&method, Method::POST)?;
    let caller = p.authenticate(&headers)?;
    let evidence = new_policy(&p, &body)?;
    if evidence.policy_issuer != caller.sub {
        return Err(ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "{} may only add policies it issues, not for {}",
                caller.sub, evidence.policy_issuer
            ),
        ));
    }
    p.shared.policies.add(evidence.clone());
    Ok((
        StatusCode::CREATED,
        axum::Json(json!({ DELEGATION_EVIDENCE_CLAIM: evidence })),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn stored() -> DelegationEvidence {
        serde_json::from_value(json!({
            "notBefore": 0, "notOnOrAfter": 4_000_000_000i64,
            "policyIssuer": "EU.EORI.NL000000005",
            "target": {"accessSubject": "EU.EORI.NL000000001"},
            "policySets": [{
                "maxDelegationDepth": 1,
                "target": {"environment": {"licenses": ["ISHARE.0001"]}},
                "policies": [{
                    "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]},
                    "rules": [{"effect": "Permit"}, {"effect": "Deny", "target": {"resource": {"identifiers": ["SECRET"]}}}]
                }]
            }]
        }))
        .unwrap()
    }

    fn mask(identifier: &str, action: &str) -> DelegationRequest {
        serde_json::from_value(json!({
            "policyIssuer": "EU.EORI.NL000000005",
            "target": {"accessSubject": "EU.EORI.NL000000001"},
            "policySets": [{"policies": [{
                "target": {"resource": {"type": "CONTAINER", "identifiers": [identifier], "attributes": ["*"]}, "actions": [action]},
                "rules": [{"effect": "Permit"}]
            }]}]
        }))
        .unwrap()
    }

    fn effect(ev: &DelegationEvidence) -> crate::scheme::evidence::Effect {
        ev.policy_sets[0].policies[0].rules[0].effect
    }

    #[test]
    fn the_answer_mirrors_the_mask_with_a_decided_rule() {
        let ev = mirror(&mask("C1", "iSHARE.READ"), &[stored()], 100);
        assert_eq!(effect(&ev), crate::scheme::evidence::Effect::Permit);
        assert_eq!(
            ev.policy_sets[0].policies[0].target,
            mask("C1", "iSHARE.READ").policy_sets[0].policies[0].target
        );
        assert_eq!(ev.policy_sets[0].max_delegation_depth, Some(1));
        assert_eq!(
            ev.policy_sets[0].licences(),
            &[Licence::Id("ISHARE.0001".into())]
        );
        assert_eq!((ev.not_before, ev.not_on_or_after), (100, 4_000_000_000));
        assert_eq!(
            effect(&mirror(&mask("C1", "iSHARE.DELETE"), &[stored()], 100)),
            crate::scheme::evidence::Effect::Deny
        );
        assert_eq!(
            effect(&mirror(&mask("SECRET", "iSHARE.READ"), &[stored()], 100)),
            crate::scheme::evidence::Effect::Deny
        );
    }
}
