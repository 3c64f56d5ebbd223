//! The evaluation of delegation evidence against a request: the time window, issuer and subject,
//! permit-overrides across policy sets and policies, deny-overrides across rules, service
//! providers, conditions and contexts, licences, and chains of evidence. Nothing in evidence that
//! is not understood grants anything: a member no version defines, a condition that cannot be
//! evaluated or a licence expression that is not the scheme's makes its rule, policy, policy set
//! or evidence a Deny that names it.

use super::condition::ConditionFailure;
use super::evidence::{DelegationEvidence, Effect, Policy, PolicySet, ReadAs, Rule};
use super::licence::{self, Licence, LicenceProblem};
use super::mask::AccessRequest;
use super::verdict::{DecidedBy, Decision, DenyReason, Evaluation, Permit};
use super::Timestamp;
use crate::reading::names::same_name;

/// Evaluate one piece of evidence against a request at `now`.
pub fn evaluate(
    evidence: &DelegationEvidence,
    request: &AccessRequest,
    now: Timestamp,
) -> Decision {
    evaluate_chain(std::slice::from_ref(evidence), request, now)
}

/// Evaluate a chain of evidence from the data owner (`chain[0].policyIssuer`) to the consumer
/// (`chain[last].accessSubject`): every step must grant the request, each step's subject must be the
/// next step's issuer, and each step must allow the steps after it by `maxDelegationDepth`, counting down.
pub fn evaluate_chain(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    now: Timestamp,
) -> Decision {
    evaluate_chain_at(chain, request, now).decision
}

/// `evaluate_chain`, saying where the decision was made.
pub fn evaluate_chain_at(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    now: Timestamp,
) -> Evaluation {
    match check_chain(chain, request, now) {
        Ok((permit, decided_by)) => Evaluation {
            decision: Decision::Permit(permit),
            decided_by,
        },
        Err((reason, at)) => Evaluation {
            decision: Decision::Deny(reason),
            decided_by: at.into_iter().collect(),
        },
    }
}

/// A reason to deny, and where it was found.
type Denial = (DenyReason, Option<DecidedBy>);

fn at_step(step: usize) -> impl Fn(DenyReason) -> Denial {
    move |reason| {
        (
            reason,
            Some(DecidedBy {
                step,
                ..DecidedBy::default()
            }),
        )
    }
}

fn check_chain(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    now: Timestamp,
) -> Result<(Permit, Vec<DecidedBy>), Denial> {
    let last = chain
        .len()
        .checked_sub(1)
        .ok_or((DenyReason::EmptyChain, None))?;
    if chain[0].policy_issuer != request.policy_issuer {
        return Err(at_step(0)(DenyReason::WrongIssuer {
            expected: request.policy_issuer.clone(),
            found: chain[0].policy_issuer.clone(),
        }));
    }
    if chain[last].target.access_subject != request.access_subject {
        return Err(at_step(last)(DenyReason::WrongSubject {
            expected: request.access_subject.clone(),
            found: chain[last].target.access_subject.clone(),
        }));
    }
    let mut licences: Vec<Licence> = Vec::new();
    let mut not_on_or_after = i64::MAX;
    let mut allowed_after: Option<u32> = None; // None: no limit yet (before the first step)
    let mut last_depth = None;
    let mut decided_by = Vec::with_capacity(chain.len());
    for (hop, ev) in chain.iter().enumerate() {
        if hop > 0 && ev.policy_issuer != chain[hop - 1].target.access_subject {
            return Err(at_step(hop)(DenyReason::ChainBroken { hop }));
        }
        if let Some(member) = ev.not_understood() {
            let place = DecidedBy {
                step: hop,
                part: Some(member.as_str().into()),
                ..DecidedBy::default()
            };
            return Err((DenyReason::NotUnderstood { member }, Some(place)));
        }
        check_window(ev, now).map_err(at_step(hop))?;
        let on_step = |mut place: DecidedBy| {
            place.step = hop;
            place
        };
        let (granted, places) = granting_policy(&ev.policy_sets, request, ev.read_as)
            .map_err(|(reason, place)| (reason, place.map(on_step)))?;
        decided_by.extend(places.into_iter().map(on_step));
        let own = granted.max_delegation_depth.unwrap_or(0);
        let allowed = match allowed_after {
            None => own,
            Some(prev) => own.min(prev.saturating_sub(1)),
        };
        if hop < last && allowed < 1 {
            return Err(at_step(hop + 1)(DenyReason::DelegationDepthExceeded {
                hop: hop + 1,
            }));
        }
        allowed_after = Some(allowed);
        last_depth = granted.max_delegation_depth;
        not_on_or_after = not_on_or_after.min(ev.not_on_or_after);
        for l in granted.licences {
            if !licences.contains(&l) {
                licences.push(l);
            }
        }
    }
    let permit = Permit {
        licences,
        not_on_or_after,
        max_delegation_depth: last_depth,
    };
    Ok((permit, decided_by))
}

fn check_window(ev: &DelegationEvidence, now: Timestamp) -> Result<(), DenyReason> {
    if now.as_f64() < ev.not_before as f64 {
        return Err(DenyReason::NotYetValid {
            not_before: ev.not_before,
        });
    }
    if now.as_f64() >= ev.not_on_or_after as f64 {
        return Err(DenyReason::Expired {
            not_on_or_after: ev.not_on_or_after,
        });
    }
    Ok(())
}

/// What the policy sets of one piece of evidence grant for a request.
#[derive(Clone, Debug, PartialEq)]
pub struct Granted {
    pub licences: Vec<Licence>,
    pub max_delegation_depth: Option<u32>,
}

/// Permit-overrides across policy sets and across the policies within a set: the request is granted
/// when any policy of any set covers it and its rules permit it. Issuer, subject and time are not
/// looked at here. A registry uses this to decide a mask against its stored policies.
pub fn evaluate_policy_sets(
    sets: &[PolicySet],
    request: &AccessRequest,
) -> Result<Granted, DenyReason> {
    granting_policy(sets, request, ReadAs::default())
        .map(|(granted, _)| granted)
        .map_err(|(reason, _)| reason)
}

/// `evaluate_policy_sets`, with the places that granted (the first granting policy, and the
/// conditions and licence expressions that decided for it), or the reason to deny and the place
/// in the policy that came closest to granting.
fn granting_policy(
    sets: &[PolicySet],
    request: &AccessRequest,
    read_as: ReadAs,
) -> Result<(Granted, Vec<DecidedBy>), (DenyReason, Option<DecidedBy>)> {
    let mut best: Option<(DenyReason, DecidedBy)> = None;
    let mut granted: Option<(Granted, Vec<DecidedBy>)> = None;
    for (s, set) in sets.iter().enumerate() {
        for (p, policy) in set.policies.iter().enumerate() {
            match evaluate_policy(set, s, policy, p, request, read_as) {
                Ok(places) => {
                    let (g, _) = granted.get_or_insert_with(|| {
                        let none = Granted {
                            licences: Vec::new(),
                            max_delegation_depth: None,
                        };
                        (none, places)
                    });
                    for l in set.licences() {
                        if !g.licences.contains(l) {
                            g.licences.push(l.clone());
                        }
                    }
                    g.max_delegation_depth = g.max_delegation_depth.max(set.max_delegation_depth);
                }
                Err((reason, place)) => {
                    if best
                        .as_ref()
                        .is_none_or(|(b, _)| reason.depth() > b.depth())
                    {
                        best = Some((reason, place));
                    }
                }
            }
        }
    }
    let denial = match best {
        Some((reason, place)) => (reason, Some(place)),
        None => (DenyReason::NoPolicy, None),
    };
    granted.ok_or(denial)
}

/// Whether one policy grants the request: the places that decided if it does (the policy's
/// first rule, its conditions and context, the licence expressions that grant the required
/// licences); the reason and its place if not. Coverage first, then what is not understood in the
/// set or the policy, the context, the rules (every Permit rule must hold, no Deny rule may
/// apply), and the licences.
fn evaluate_policy(
    set: &PolicySet,
    s: usize,
    policy: &Policy,
    p: usize,
    request: &AccessRequest,
    read_as: ReadAs,
) -> Result<Vec<DecidedBy>, (DenyReason, DecidedBy)> {
    let here = DecidedBy::policy(s, p);
    covers(policy, request, read_as).map_err(|reason| (reason, here.clone()))?;
    check_set(set, s)?;
    if let Some(member) = policy.not_understood() {
        return Err(not_understood_at(here, member));
    }
    let mut decided = vec![DecidedBy::rule(s, p, 0)];
    if let Some(context) = &policy.target.context {
        let held = context.check(&here.member("target.context"), &request.operands);
        held.map_err(|e| condition_denial(&here, e))?;
        decided.push(here.with_part("target.context"));
    }
    check_rules(policy, (s, p), request, &mut decided)?;
    check_licences(set, s, request, &mut decided)?;
    Ok(decided)
}

/// A member not understood as a Deny, at the place that holds it.
fn not_understood_at(place: DecidedBy, member: String) -> (DenyReason, DecidedBy) {
    let reason = DenyReason::NotUnderstood {
        member: place.member(&member),
    };
    (reason, place.with_part(member))
}

/// Whether the policy set (the `s`th) is understood: it has no member no version defines, and each
/// of its licence expressions can be used.
fn check_set(set: &PolicySet, s: usize) -> Result<(), (DenyReason, DecidedBy)> {
    if let Some(member) = set.not_understood() {
        return Err(not_understood_at(DecidedBy::set(s), member));
    }
    for (i, l) in set.licences().iter().enumerate() {
        if let Some((part, problem)) = l.unusable(format!("target.environment.licenses[{i}]")) {
            let place = DecidedBy::set(s);
            if let LicenceProblem::UnknownMember(member) = problem {
                return Err(not_understood_at(place, format!("{part}.{member}")));
            }
            let reason = DenyReason::LicenceUnusable {
                at: place.member(&part),
                problem: Box::new(problem.clone()),
            };
            return Err((reason, place.with_part(part)));
        }
    }
    Ok(())
}

/// Whether the rules of the policy (the `p`th of the `s`th set) let the request through: the first
/// is a Permit, every Permit rule holds and no Deny rule applies. The first rule's conditions, when
/// it has some, join the places that decided.
fn check_rules(
    policy: &Policy,
    (s, p): (usize, usize),
    request: &AccessRequest,
    decided: &mut Vec<DecidedBy>,
) -> Result<(), (DenyReason, DecidedBy)> {
    if policy
        .rules
        .first()
        .is_none_or(|r| r.effect != Effect::Permit)
    {
        let place = match policy.rules.is_empty() {
            true => DecidedBy::policy(s, p),
            false => DecidedBy::rule(s, p, 0),
        };
        return Err((DenyReason::DeniedByRule, place));
    }
    for (r, rule) in policy.rules.iter().enumerate() {
        let place = DecidedBy::rule(s, p, r);
        if let Some(member) = rule.not_understood() {
            return Err(not_understood_at(place, member));
        }
        let conditions = rule
            .conditions
            .as_ref()
            .map(|c| c.check(&place.member("conditions"), &request.operands));
        match rule.effect {
            // A Permit rule holds where its target (if any) covers the request and its
            // conditions hold.
            Effect::Permit => {
                if !rule_grants(rule, request) {
                    return Err((DenyReason::DeniedByRule, place.with_part("target")));
                }
                if let Some(held) = conditions {
                    held.map_err(|e| condition_denial(&place, e))?;
                    if r == 0 {
                        decided.push(place.with_part("conditions"));
                    }
                }
            }
            // A Deny rule applies where its target overlaps the request and its conditions hold;
            // conditions that cannot be evaluated deny.
            Effect::Deny if rule_covers(rule, request) => match conditions {
                None | Some(Ok(())) => return Err((DenyReason::DeniedByRule, place)),
                Some(Err(ConditionFailure::NotMet { .. })) => {}
                Some(Err(e)) => return Err(condition_denial(&place, e)),
            },
            Effect::Deny => {}
        }
    }
    Ok(())
}

/// Whether the licences of the policy set (the `s`th) grant every licence the request requires;
/// the licence expressions that grant them join the places that decided.
fn check_licences(
    set: &PolicySet,
    s: usize,
    request: &AccessRequest,
    decided: &mut Vec<DecidedBy>,
) -> Result<(), (DenyReason, DecidedBy)> {
    if let Some(missing) = licence::first_missing(set.licences(), &request.required_licences) {
        let reason = DenyReason::LicenceMissing {
            licence: missing.to_string(),
        };
        return Err((
            reason,
            DecidedBy::set(s).with_part("target.environment.licenses"),
        ));
    }
    let granting = licence::granting(set.licences(), &request.required_licences);
    decided.extend(
        granting
            .into_iter()
            .map(|i| DecidedBy::set(s).with_part(format!("target.environment.licenses[{i}]"))),
    );
    Ok(())
}

/// A condition's failure as a Deny, at the part of the policy that decided.
fn condition_denial(policy_or_rule: &DecidedBy, e: ConditionFailure) -> (DenyReason, DecidedBy) {
    let prefix = format!("{}.", policy_or_rule.path());
    let part = e.at().strip_prefix(&prefix).unwrap_or(e.at()).to_string();
    (
        DenyReason::Condition(Box::new(e)),
        policy_or_rule.clone().with_part(part),
    )
}

/// Whether the target of a policy covers the request: resource, identifiers, attributes,
/// actions and service providers. A policy that names no service provider covers any before
/// 3.0; a 3.0 signer's only where the data owner designated it for us or the route accepts it.
fn covers(policy: &Policy, request: &AccessRequest, read_as: ReadAs) -> Result<(), DenyReason> {
    let target = &policy.target;
    if target.resource.resource_type != request.resource_type {
        return Err(DenyReason::ResourceTypeNotGranted {
            requested: request.resource_type.clone(),
        });
    }
    if let Some(identifier) =
        not_granted(target.resource.identifiers.as_deref(), &request.identifiers)
    {
        return Err(DenyReason::IdentifierNotGranted { identifier });
    }
    if let Some(attribute) = not_granted(target.resource.attributes.as_deref(), &request.attributes)
    {
        return Err(DenyReason::AttributeNotGranted { attribute });
    }
    if let Some(action) = not_granted(Some(&target.actions), &request.actions) {
        return Err(DenyReason::ActionNotGranted { action });
    }
    match target
        .environment
        .as_ref()
        .and_then(|e| e.service_providers.as_ref())
    {
        Some(listed) => {
            let all_listed = !request.service_providers.is_empty()
                && request
                    .service_providers
                    .iter()
                    .all(|sp| listed.contains(sp));
            if !all_listed {
                return Err(DenyReason::ServiceProviderNotListed);
            }
        }
        None => {
            let bound = read_as.version.binds_by_absence()
                || read_as.designated_for_us
                || request.unnamed_provider_accepted;
            if !bound {
                return Err(DenyReason::ServiceProviderNotNamed);
            }
        }
    }
    Ok(())
}

/// The first requested value that the granted list does not contain. Absent = everything granted;
/// `"*"` is a wildcard only on the granted side.
fn not_granted(granted: Option<&[String]>, requested: &[String]) -> Option<String> {
    let granted = granted?;
    if granted.iter().any(|g| g == "*") {
        return None;
    }
    requested.iter().find(|r| !granted.contains(r)).cloned()
}

/// Whether a Permit rule's own target (if it has one) covers the whole request: what it names
/// must grant every requested type, identifier, attribute and action.
fn rule_grants(rule: &Rule, request: &AccessRequest) -> bool {
    let Some(target) = &rule.target else {
        return true;
    };
    let resource = target.resource.as_ref();
    resource
        .and_then(|r| r.resource_type.as_ref())
        .is_none_or(|t| *t == request.resource_type)
        && not_granted(
            resource.and_then(|r| r.identifiers.as_deref()),
            &request.identifiers,
        )
        .is_none()
        && not_granted(
            resource.and_then(|r| r.attributes.as_deref()),
            &request.attributes,
        )
        .is_none()
        && not_granted(target.actions.as_deref(), &request.actions).is_none()
}

/// Whether a (Deny) rule's target overlaps the request. Omitted or empty parts mean "all", and a
/// request that names no identifiers or attributes (a whole collection) overlaps any rule. An
/// attribute (a member name, to a backend) is denied under every name a binder reads as it
/// (`secret` denies `SECRET`): a Permit grants the names it lists, a Deny all their spellings.
fn rule_covers(rule: &Rule, request: &AccessRequest) -> bool {
    let Some(target) = &rule.target else {
        return true;
    };
    let resource = target.resource.as_ref();
    let type_ok = resource
        .and_then(|r| r.resource_type.as_ref())
        .is_none_or(|t| *t == request.resource_type);
    let exactly = |a: &str, b: &str| a == b;
    type_ok
        && overlaps(
            resource.and_then(|r| r.identifiers.as_deref()),
            &request.identifiers,
            exactly,
        )
        && overlaps(
            resource.and_then(|r| r.attributes.as_deref()),
            &request.attributes,
            same_name,
        )
        && overlaps(target.actions.as_deref(), &request.actions, exactly)
}

fn overlaps(
    rule_values: Option<&[String]>,
    requested: &[String],
    same: impl Fn(&str, &str) -> bool,
) -> bool {
    match rule_values {
        None => true,
        Some([]) => true,
        Some(values) => {
            requested.is_empty()
                || values.iter().any(|v| v == "*")
                || requested
                    .iter()
                    .any(|r| r == "*" || values.iter().any(|v| same(v, r)))
        }
    }
}

#[cfg(test)]
#[path = "evaluation_tests.rs"]
mod tests;
