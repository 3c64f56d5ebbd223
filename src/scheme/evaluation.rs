//! The evaluation of delegation evidence against a request: the time window, issuer and subject,
//! permit-overrides across policy sets and policies, deny-overrides across rules, service
//! providers, licences, and chains of evidence.

use super::evidence::{AccessRequest, DelegationEvidence, Effect, Policy, PolicySet, Rule};
use super::licence::{self, Licence};
use super::Timestamp;
use std::fmt;

/// The outcome of evaluating evidence.
#[derive(Clone, Debug, PartialEq)]
pub enum Decision {
    Permit(Permit),
    Deny(DenyReason),
}

impl Decision {
    pub fn is_permit(&self) -> bool {
        matches!(self, Decision::Permit(_))
    }
}

/// Where in the evidence a decision was made: the step of the chain, and the policy set, policy
/// and rule of that step (none of them when the step failed on its time window, issuer or subject).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecidedBy {
    pub step: usize,
    pub policy_set: Option<usize>,
    pub policy: Option<usize>,
    pub rule: Option<usize>,
}

impl fmt::Display for DecidedBy {
    /// As a path into the evidence: `evidence[0].policySets[1].policies[0].rules[2]`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "evidence[{}]", self.step)?;
        let parts = [
            ("policySets", self.policy_set),
            ("policies", self.policy),
            ("rules", self.rule),
        ];
        for (name, index) in parts {
            if let Some(i) = index {
                write!(f, ".{name}[{i}]")?;
            }
        }
        Ok(())
    }
}

/// A decision and where it was made: for a Permit the granting policy of every step, for a Deny
/// the place that decided it (the policy that came closest to granting, or the rule that denied).
#[derive(Clone, Debug, PartialEq)]
pub struct Evaluation {
    pub decision: Decision,
    pub decided_by: Vec<DecidedBy>,
}

/// What a Permit carries: the licences of the granting policy sets, and how long it holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Permit {
    pub licences: Vec<Licence>,
    pub not_on_or_after: i64,
    /// The largest `maxDelegationDepth` of the granting policy sets of the last hop.
    pub max_delegation_depth: Option<u32>,
}

/// Why evidence does not grant a request. `code()` is a bounded label for logs and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DenyReason {
    NotYetValid { not_before: i64 },
    Expired { not_on_or_after: i64 },
    WrongIssuer { expected: String, found: String },
    WrongSubject { expected: String, found: String },
    NoPolicy,
    ResourceTypeNotGranted { requested: String },
    IdentifierNotGranted { identifier: String },
    AttributeNotGranted { attribute: String },
    ActionNotGranted { action: String },
    ServiceProviderNotListed,
    LicenceMissing { licence: String },
    DeniedByRule,
    ChainBroken { hop: usize },
    DelegationDepthExceeded { hop: usize },
    EmptyChain,
}

impl DenyReason {
    /// How far a policy got before it failed: with permit-overrides, the reason reported is the one
    /// of the policy that came closest to granting.
    fn depth(&self) -> u8 {
        match self {
            DenyReason::ResourceTypeNotGranted { .. } => 1,
            DenyReason::IdentifierNotGranted { .. } => 2,
            DenyReason::AttributeNotGranted { .. } => 3,
            DenyReason::ActionNotGranted { .. } => 4,
            DenyReason::ServiceProviderNotListed => 5,
            DenyReason::DeniedByRule => 6,
            DenyReason::LicenceMissing { .. } => 7,
            _ => 0,
        }
    }
}

reason_codes! {
    DenyReason {
        DenyReason::NotYetValid { .. } => "evidence_not_yet_valid",
        DenyReason::Expired { .. } => "evidence_expired",
        DenyReason::WrongIssuer { .. } => "wrong_policy_issuer",
        DenyReason::WrongSubject { .. } => "wrong_access_subject",
        DenyReason::NoPolicy => "no_policy",
        DenyReason::ResourceTypeNotGranted { .. } => "resource_type_not_granted",
        DenyReason::IdentifierNotGranted { .. } => "identifier_not_granted",
        DenyReason::AttributeNotGranted { .. } => "attribute_not_granted",
        DenyReason::ActionNotGranted { .. } => "action_not_granted",
        DenyReason::ServiceProviderNotListed => "service_provider_not_listed",
        DenyReason::LicenceMissing { .. } => "licence_missing",
        DenyReason::DeniedByRule => "denied_by_rule",
        DenyReason::ChainBroken { .. } => "delegation_chain_broken",
        DenyReason::DelegationDepthExceeded { .. } => "delegation_depth_exceeded",
        DenyReason::EmptyChain => "no_evidence",
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DenyReason::NotYetValid { not_before } => {
                write!(f, "the evidence is not valid before {not_before}")
            }
            DenyReason::Expired { not_on_or_after } => {
                write!(f, "the evidence expired at {not_on_or_after}")
            }
            DenyReason::WrongIssuer { expected, found } => write!(
                f,
                "the evidence is issued by {found}, but the data owner is {expected}"
            ),
            DenyReason::WrongSubject { expected, found } => write!(
                f,
                "the evidence is issued to {found}, not to the caller {expected}"
            ),
            DenyReason::NoPolicy => f.write_str("no policy grants this request"),
            DenyReason::ResourceTypeNotGranted { requested } => {
                write!(f, "no policy covers the resource type {requested}")
            }
            DenyReason::IdentifierNotGranted { identifier } => {
                write!(f, "the identifier {identifier} is not granted")
            }
            DenyReason::AttributeNotGranted { attribute } => {
                write!(f, "the attribute {attribute} is not granted")
            }
            DenyReason::ActionNotGranted { action } => {
                write!(f, "the action {action} is not granted")
            }
            DenyReason::ServiceProviderNotListed => {
                f.write_str("this service provider is not listed in the policy's serviceProviders")
            }
            DenyReason::LicenceMissing { licence } => {
                write!(f, "the evidence does not carry the required licence {licence}")
            }
            DenyReason::DeniedByRule => f.write_str("a Deny rule of the policy covers this request"),
            DenyReason::ChainBroken { hop } => write!(
                f,
                "delegation chain broken at step {hop}: its issuer is not the previous step's subject"
            ),
            DenyReason::DelegationDepthExceeded { hop } => write!(
                f,
                "step {hop} of the delegation chain exceeds the allowed maxDelegationDepth"
            ),
            DenyReason::EmptyChain => f.write_str("no delegation evidence was given"),
        }
    }
}

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
        check_window(ev, now).map_err(at_step(hop))?;
        let (granted, (set, policy)) =
            granting_policy(&ev.policy_sets, request).map_err(|(reason, place)| {
                let at = DecidedBy {
                    step: hop,
                    policy_set: place.map(|p| p.0),
                    policy: place.map(|p| p.1),
                    rule: place.and_then(|p| p.2),
                };
                (reason, Some(at))
            })?;
        decided_by.push(DecidedBy {
            step: hop,
            policy_set: Some(set),
            policy: Some(policy),
            rule: Some(0),
        });
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
    granting_policy(sets, request)
        .map(|(granted, _)| granted)
        .map_err(|(reason, _)| reason)
}

/// Where a policy failed: its policy set, the policy, and the rule when a rule decided.
type Place = (usize, usize, Option<usize>);
/// Where a policy granted: its policy set and the policy.
type Granting = (Granted, (usize, usize));

/// `evaluate_policy_sets`, with the first granting policy (set, policy), or the reason to deny and
/// the policy that came closest to granting.
fn granting_policy(
    sets: &[PolicySet],
    request: &AccessRequest,
) -> Result<Granting, (DenyReason, Option<Place>)> {
    let mut best: Option<(DenyReason, Place)> = None;
    let mut granted: Option<Granting> = None;
    for (s, set) in sets.iter().enumerate() {
        for (p, policy) in set.policies.iter().enumerate() {
            match evaluate_policy(set, policy, request) {
                Ok(()) => {
                    let (g, _) = granted.get_or_insert_with(|| {
                        let none = Granted {
                            licences: Vec::new(),
                            max_delegation_depth: None,
                        };
                        (none, (s, p))
                    });
                    for l in set.licences() {
                        if !g.licences.contains(l) {
                            g.licences.push(l.clone());
                        }
                    }
                    g.max_delegation_depth = g.max_delegation_depth.max(set.max_delegation_depth);
                }
                Err((reason, rule)) => {
                    if best
                        .as_ref()
                        .is_none_or(|(b, _)| reason.depth() > b.depth())
                    {
                        best = Some((reason, (s, p, rule)));
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

/// Whether one policy grants the request; the reason if not, with the rule that decided it.
fn evaluate_policy(
    set: &PolicySet,
    policy: &Policy,
    request: &AccessRequest,
) -> Result<(), (DenyReason, Option<usize>)> {
    covers(policy, request).map_err(|reason| (reason, None))?;
    // Deny-overrides: the first rule is the default and must be Permit; any later Deny rule whose
    // target overlaps the request takes the permit away.
    if policy
        .rules
        .first()
        .is_none_or(|r| r.effect != Effect::Permit)
    {
        let rule = (!policy.rules.is_empty()).then_some(0);
        return Err((DenyReason::DeniedByRule, rule));
    }
    let denying = policy
        .rules
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, r)| r.effect == Effect::Deny && rule_covers(r, request));
    if let Some((index, _)) = denying {
        return Err((DenyReason::DeniedByRule, Some(index)));
    }
    if let Some(missing) = licence::first_missing(set.licences(), &request.required_licences) {
        let reason = DenyReason::LicenceMissing {
            licence: missing.to_string(),
        };
        return Err((reason, None));
    }
    Ok(())
}

/// Whether the target of a policy covers the request: resource, identifiers, attributes,
/// actions and service providers.
fn covers(policy: &Policy, request: &AccessRequest) -> Result<(), DenyReason> {
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
    if let Some(listed) = target
        .environment
        .as_ref()
        .and_then(|e| e.service_providers.as_ref())
    {
        let all_listed = !request.service_providers.is_empty()
            && request
                .service_providers
                .iter()
                .all(|sp| listed.contains(sp));
        if !all_listed {
            return Err(DenyReason::ServiceProviderNotListed);
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

/// Whether a (Deny) rule's target overlaps the request. Omitted or empty parts mean "all", and a
/// request that names no identifiers or attributes (a whole collection) overlaps any rule.
fn rule_covers(rule: &Rule, request: &AccessRequest) -> bool {
    let Some(target) = &rule.target else {
        return true;
    };
    let resource = target.resource.as_ref();
    let type_ok = resource
        .and_then(|r| r.resource_type.as_ref())
        .is_none_or(|t| *t == request.resource_type);
    type_ok
        && overlaps(
            resource.and_then(|r| r.identifiers.as_deref()),
            &request.identifiers,
        )
        && overlaps(
            resource.and_then(|r| r.attributes.as_deref()),
            &request.attributes,
        )
        && overlaps(target.actions.as_deref(), &request.actions)
}

fn overlaps(rule_values: Option<&[String]>, requested: &[String]) -> bool {
    match rule_values {
        None => true,
        Some([]) => true,
        Some(values) => {
            requested.is_empty()
                || values.iter().any(|v| v == "*")
                || requested.iter().any(|r| r == "*" || values.contains(r))
        }
    }
}

#[cfg(test)]
#[path = "evaluation_tests.rs"]
mod tests;
