//! The evaluation of delegation evidence against a request: the time window, issuer and subject,
//! permit-overrides across policy sets and policies, deny-overrides across rules, service
//! providers, conditions and contexts, licences, and chains of evidence. Nothing in evidence that
//! is not understood grants anything: a member no version defines, a condition that cannot be
//! evaluated or a licence expression that is not the scheme's makes its rule, policy, policy set
//! or evidence a Deny that names it.

use super::condition::ConditionFailure;
use super::evidence::{AccessRequest, DelegationEvidence, Effect, Policy, PolicySet, ReadAs, Rule};
use super::licence::{self, Licence, LicenceProblem};
use super::Timestamp;
use crate::reading::names::same_name;
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
/// and rule of that step (none of them when the step failed on its time window, issuer or subject),
/// and the part of it that decided (a condition, a licence expression, a member not understood).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct DecidedBy {
    pub step: usize,
    pub policy_set: Option<u32>,
    pub policy: Option<u32>,
    pub rule: Option<u32>,
    /// Below the innermost of those: `conditions.allOf[1]`, `target.environment.licenses[0]`.
    pub part: Option<Box<str>>,
}

/// An index into the evidence's lists, which hold far fewer than 2³² items.
fn index(i: usize) -> Option<u32> {
    Some(u32::try_from(i).unwrap_or(u32::MAX))
}

impl DecidedBy {
    fn set(s: usize) -> Self {
        DecidedBy {
            policy_set: index(s),
            ..DecidedBy::default()
        }
    }

    fn policy(s: usize, p: usize) -> Self {
        DecidedBy {
            policy: index(p),
            ..DecidedBy::set(s)
        }
    }

    fn rule(s: usize, p: usize, r: usize) -> Self {
        DecidedBy {
            rule: index(r),
            ..DecidedBy::policy(s, p)
        }
    }

    fn with_part(self, part: impl Into<Box<str>>) -> Self {
        DecidedBy {
            part: Some(part.into()),
            ..self
        }
    }

    /// The lists it is in, each with its index there when it is in one.
    pub fn indices(&self) -> [(&'static str, Option<u32>); 3] {
        [
            ("policySets", self.policy_set),
            ("policies", self.policy),
            ("rules", self.rule),
        ]
    }

    /// The path of this place within its evidence (`policySets[0].policies[1]`).
    fn path(&self) -> String {
        let mut out = String::new();
        for (name, index) in self.indices() {
            if let Some(i) = index {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(&format!("{name}[{i}]"));
            }
        }
        out
    }

    /// The path of `member` (below this place) within the evidence.
    fn member(&self, member: &str) -> String {
        match self.path() {
            p if p.is_empty() => member.to_string(),
            p => format!("{p}.{member}"),
        }
    }
}

impl fmt::Display for DecidedBy {
    /// As a path into the evidence: `evidence[0].policySets[1].policies[0].rules[2].conditions`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "evidence[{}]", self.step)?;
        for (name, index) in self.indices() {
            if let Some(i) = index {
                write!(f, ".{name}[{i}]")?;
            }
        }
        if let Some(part) = &self.part {
            write!(f, ".{part}")?;
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
    NotYetValid {
        not_before: i64,
    },
    Expired {
        not_on_or_after: i64,
    },
    WrongIssuer {
        expected: String,
        found: String,
    },
    WrongSubject {
        expected: String,
        found: String,
    },
    NoPolicy,
    ResourceTypeNotGranted {
        requested: String,
    },
    IdentifierNotGranted {
        identifier: String,
    },
    AttributeNotGranted {
        attribute: String,
    },
    ActionNotGranted {
        action: String,
    },
    ServiceProviderNotListed,
    /// 3.0 evidence that names no service provider, not designated for us nor accepted so by the route.
    ServiceProviderNotNamed,
    LicenceMissing {
        licence: String,
    },
    /// A licence expression that is not one the scheme defines (`at` within the evidence).
    LicenceUnusable {
        at: String,
        problem: Box<LicenceProblem>,
    },
    /// A member of the evidence that no version of the scheme defines where it stands.
    NotUnderstood {
        member: String,
    },
    /// A condition (or a context) that does not hold or cannot be evaluated.
    Condition(Box<ConditionFailure>),
    DeniedByRule,
    ChainBroken {
        hop: usize,
    },
    DelegationDepthExceeded {
        hop: usize,
    },
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
            DenyReason::ServiceProviderNotListed | DenyReason::ServiceProviderNotNamed => 5,
            DenyReason::NotUnderstood { .. } | DenyReason::LicenceUnusable { .. } => 6,
            DenyReason::Condition(_) | DenyReason::DeniedByRule => 7,
            DenyReason::LicenceMissing { .. } => 8,
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
        DenyReason::ServiceProviderNotNamed => "service_provider_not_named",
        DenyReason::LicenceMissing { .. } => "licence_missing",
        DenyReason::NotUnderstood { .. } => "evidence_member_not_understood",
        DenyReason::LicenceUnusable { .. } => "licence_expression_malformed",
        DenyReason::DeniedByRule => "denied_by_rule",
        DenyReason::ChainBroken { .. } => "delegation_chain_broken",
        DenyReason::DelegationDepthExceeded { .. } => "delegation_depth_exceeded",
        DenyReason::EmptyChain => "no_evidence",
    } nested {
        DenyReason::Condition(e) => e: ConditionFailure,
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
            DenyReason::ServiceProviderNotNamed => f.write_str(
                "the policy names no service provider: evidence of a 3.0 signer binds to this service provider only where the data owner designated the signing registry for it, or the route accepts it (accept_unnamed_service_provider)",
            ),
            DenyReason::LicenceMissing { licence } => {
                write!(f, "the evidence does not grant the required licence {licence}")
            }
            DenyReason::LicenceUnusable { at, problem } => write!(
                f,
                "the licence expression {at} {problem}; a licence expression that is not understood grants nothing"
            ),
            DenyReason::NotUnderstood { member } => write!(
                f,
                "the evidence's member {member} is not understood, and nothing not understood grants anything"
            ),
            DenyReason::Condition(e) => e.fmt(f),
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
