//! What an evaluation of evidence concludes: a Permit (what it grants) or a Deny with its reason,
//! and the place in the evidence (policy set, policy, rule) that decided.

use super::condition::ConditionFailure;
use super::licence::{Licence, LicenceProblem};
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
    pub(super) fn set(s: usize) -> Self {
        DecidedBy {
            policy_set: index(s),
            ..DecidedBy::default()
        }
    }

    pub(super) fn policy(s: usize, p: usize) -> Self {
        DecidedBy {
            policy: index(p),
            ..DecidedBy::set(s)
        }
    }

    pub(super) fn rule(s: usize, p: usize, r: usize) -> Self {
        DecidedBy {
            rule: index(r),
            ..DecidedBy::policy(s, p)
        }
    }

    pub(super) fn with_part(self, part: impl Into<Box<str>>) -> Self {
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
    pub(super) fn path(&self) -> String {
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
    pub(super) fn member(&self, member: &str) -> String {
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
    pub(super) fn depth(&self) -> u8 {
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
