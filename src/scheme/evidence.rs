//! Delegation evidence and the delegation mask (both body shapes), and the evaluation of evidence
//! against a request: the time window, issuer and subject, permit-overrides across policy sets and
//! policies, deny-overrides across rules, service providers, licences, and chains of evidence.

use super::licence::{self, Licence};
use super::Timestamp;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::fmt;

/// `delegationEvidence`, the payload of a delegation token.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationEvidence {
    #[serde(deserialize_with = "de_unix_seconds")]
    pub not_before: i64,
    /// The DOC example misspells it `nonOnOrAfter`; both are read.
    #[serde(deserialize_with = "de_unix_seconds", alias = "nonOnOrAfter")]
    pub not_on_or_after: i64,
    pub policy_issuer: String,
    pub target: RootTarget,
    #[serde(with = "one_or_many")]
    pub policy_sets: Vec<PolicySet>,
}

/// The root target: only `accessSubject` is allowed there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootTarget {
    pub access_subject: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySet {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_delegation_depth: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<PolicySetTarget>,
    #[serde(with = "one_or_many")]
    pub policies: Vec<Policy>,
}

impl DelegationEvidence {
    /// Every licence identifier the evidence mentions.
    pub fn licence_ids(&self) -> impl Iterator<Item = &str> {
        self.policy_sets
            .iter()
            .flat_map(|s| s.licences())
            .flat_map(Licence::identifiers)
    }
}

impl PolicySet {
    pub fn licences(&self) -> &[Licence] {
        self.target
            .as_ref()
            .and_then(|t| t.environment.as_ref())
            .map(|e| e.licenses.as_slice())
            .unwrap_or(&[])
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySetTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<PolicySetEnvironment>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicySetEnvironment {
    #[serde(default)]
    pub licenses: Vec<Licence>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub target: PolicyTarget,
    #[serde(default)]
    pub rules: Vec<Rule>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyTarget {
    pub resource: Resource,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<PolicyEnvironment>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Absent: every identifier of the type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Vec<String>>,
    /// Absent: every attribute.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEnvironment {
    /// Absent: any service provider may serve the access subject.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_providers: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub effect: Effect,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<RuleTarget>,
}

impl Rule {
    pub fn permit() -> Self {
        Rule {
            effect: Effect::Permit,
            target: None,
        }
    }
    pub fn deny() -> Self {
        Rule {
            effect: Effect::Deny,
            target: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleTarget {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource: Option<RuleResource>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actions: Option<Vec<String>>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RuleResource {
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub resource_type: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identifiers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<Vec<String>>,
}

/// `Permit` or `Deny`; read without regard to case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    Permit,
    Deny,
}

impl Serialize for Effect {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(match self {
            Effect::Permit => "Permit",
            Effect::Deny => "Deny",
        })
    }
}

impl<'de> Deserialize<'de> for Effect {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.eq_ignore_ascii_case("permit") {
            Ok(Effect::Permit)
        } else if s.eq_ignore_ascii_case("deny") {
            Ok(Effect::Deny)
        } else {
            Err(serde::de::Error::custom(format!(
                "rule effect must be Permit or Deny, found {s:?}"
            )))
        }
    }
}

/// The delegation mask: `delegationRequest`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationRequest {
    pub policy_issuer: String,
    pub target: RootTarget,
    #[serde(with = "one_or_many")]
    pub policy_sets: Vec<PolicySet>,
}

/// Which of the two documented body shapes a delegation request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyShape {
    /// `{"delegationRequest": …, "previous_steps": […]}` (delegation endpoint reference).
    Endpoint,
    /// `{"delegation_mask": {"delegationRequest": …}, "delegation_path": […], "previous_steps": […]}`.
    Generic,
}

/// A POST /delegation body in either shape.
#[derive(Clone, Debug, PartialEq)]
pub struct DelegationBody {
    pub request: DelegationRequest,
    pub delegation_path: Vec<String>,
    pub previous_steps: Vec<String>,
    pub shape: BodyShape,
}

impl DelegationBody {
    pub fn new(request: DelegationRequest) -> Self {
        DelegationBody {
            request,
            delegation_path: Vec::new(),
            previous_steps: Vec::new(),
            shape: BodyShape::Endpoint,
        }
    }
}

impl<'de> Deserialize<'de> for DelegationBody {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        let mut top = Map::<String, Value>::deserialize(d)?;
        let (shape, mut holder) = match top.remove("delegation_mask") {
            Some(Value::Object(mask)) => (BodyShape::Generic, mask),
            Some(_) => return Err(D::Error::custom("delegation_mask must be an object")),
            None => (BodyShape::Endpoint, Map::new()),
        };
        let request = holder
            .remove("delegationRequest")
            .or_else(|| top.remove("delegationRequest"))
            .ok_or_else(|| D::Error::custom("the body holds no delegationRequest"))?;
        let mut request_obj = match request {
            Value::Object(o) => o,
            _ => return Err(D::Error::custom("delegationRequest must be an object")),
        };
        // previous_steps and delegation_path belong at the top; some clients nest them in the mask
        // or in the request itself.
        let mut list = |name: &str| -> Result<Vec<String>, D::Error> {
            let v = top
                .remove(name)
                .or_else(|| holder.remove(name))
                .or_else(|| request_obj.remove(name));
            match v {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v).map_err(|e| {
                    D::Error::custom(format!("{name} must be an array of strings: {e}"))
                }),
            }
        };
        let previous_steps = list("previous_steps")?;
        let delegation_path = list("delegation_path")?;
        let request = serde_json::from_value(Value::Object(request_obj))
            .map_err(|e| D::Error::custom(format!("delegationRequest: {e}")))?;
        Ok(DelegationBody {
            request,
            delegation_path,
            previous_steps,
            shape,
        })
    }
}

impl Serialize for DelegationBody {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut out = Map::new();
        let request = serde_json::to_value(&self.request).map_err(serde::ser::Error::custom)?;
        match self.shape {
            BodyShape::Endpoint => {
                out.insert("delegationRequest".into(), request);
            }
            BodyShape::Generic => {
                let mut mask = Map::new();
                mask.insert("delegationRequest".into(), request);
                out.insert("delegation_mask".into(), Value::Object(mask));
            }
        }
        if !self.delegation_path.is_empty() {
            out.insert(
                "delegation_path".into(),
                self.delegation_path.clone().into(),
            );
        }
        out.insert("previous_steps".into(), self.previous_steps.clone().into());
        out.serialize(s)
    }
}

/// What a service request asks for, in the terms of the scheme.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct AccessRequest {
    /// The data owner (entitled party) whose delegation is needed.
    pub policy_issuer: String,
    /// The party the evidence must be issued to: the service consumer.
    pub access_subject: String,
    /// The service providers that will serve the request (normally just us).
    pub service_providers: Vec<String>,
    pub resource_type: String,
    pub identifiers: Vec<String>,
    pub attributes: Vec<String>,
    pub actions: Vec<String>,
    pub required_licences: Vec<String>,
}

impl AccessRequest {
    /// The mask that asks a registry exactly for this request.
    pub fn to_mask(&self) -> DelegationRequest {
        let environment = (!self.required_licences.is_empty()).then(|| PolicySetTarget {
            environment: Some(PolicySetEnvironment {
                licenses: self
                    .required_licences
                    .iter()
                    .cloned()
                    .map(Licence::Id)
                    .collect(),
            }),
        });
        DelegationRequest {
            policy_issuer: self.policy_issuer.clone(),
            target: RootTarget {
                access_subject: self.access_subject.clone(),
            },
            policy_sets: vec![PolicySet {
                max_delegation_depth: None,
                target: environment,
                policies: vec![Policy {
                    target: PolicyTarget {
                        resource: Resource {
                            resource_type: self.resource_type.clone(),
                            identifiers: Some(self.identifiers.clone()),
                            attributes: Some(self.attributes.clone()),
                        },
                        actions: self.actions.clone(),
                        environment: (!self.service_providers.is_empty()).then(|| {
                            PolicyEnvironment {
                                service_providers: Some(self.service_providers.clone()),
                            }
                        }),
                    },
                    rules: vec![Rule::permit()],
                }],
            }],
        }
    }
}

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
    match check_chain(chain, request, now) {
        Ok(permit) => Decision::Permit(permit),
        Err(reason) => Decision::Deny(reason),
    }
}

fn check_chain(
    chain: &[DelegationEvidence],
    request: &AccessRequest,
    now: Timestamp,
) -> Result<Permit, DenyReason> {
    let last = chain.len().checked_sub(1).ok_or(DenyReason::EmptyChain)?;
    if chain[0].policy_issuer != request.policy_issuer {
        return Err(DenyReason::WrongIssuer {
            expected: request.policy_issuer.clone(),
            found: chain[0].policy_issuer.clone(),
        });
    }
    if chain[last].target.access_subject != request.access_subject {
        return Err(DenyReason::WrongSubject {
            expected: request.access_subject.clone(),
            found: chain[last].target.access_subject.clone(),
        });
    }
    let mut licences: Vec<Licence> = Vec::new();
    let mut not_on_or_after = i64::MAX;
    let mut allowed_after: Option<u32> = None; // None: no limit yet (before the first step)
    let mut last_depth = None;
    for (hop, ev) in chain.iter().enumerate() {
        if hop > 0 && ev.policy_issuer != chain[hop - 1].target.access_subject {
            return Err(DenyReason::ChainBroken { hop });
        }
        check_window(ev, now)?;
        let granted = evaluate_policy_sets(&ev.policy_sets, request)?;
        let own = granted.max_delegation_depth.unwrap_or(0);
        let allowed = match allowed_after {
            None => own,
            Some(prev) => own.min(prev.saturating_sub(1)),
        };
        if hop < last && allowed < 1 {
            return Err(DenyReason::DelegationDepthExceeded { hop: hop + 1 });
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
    Ok(Permit {
        licences,
        not_on_or_after,
        max_delegation_depth: last_depth,
    })
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
    let mut best: Option<DenyReason> = None;
    let mut granted: Option<Granted> = None;
    for set in sets {
        for policy in &set.policies {
            match evaluate_policy(set, policy, request) {
                Ok(()) => {
                    let g = granted.get_or_insert_with(|| Granted {
                        licences: Vec::new(),
                        max_delegation_depth: None,
                    });
                    for l in set.licences() {
                        if !g.licences.contains(l) {
                            g.licences.push(l.clone());
                        }
                    }
                    g.max_delegation_depth = g.max_delegation_depth.max(set.max_delegation_depth);
                }
                Err(reason) => {
                    if best.as_ref().is_none_or(|b| reason.depth() > b.depth()) {
                        best = Some(reason);
                    }
                }
            }
        }
    }
    granted.ok_or_else(|| best.unwrap_or(DenyReason::NoPolicy))
}

fn evaluate_policy(
    set: &PolicySet,
    policy: &Policy,
    request: &AccessRequest,
) -> Result<(), DenyReason> {
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
    // Deny-overrides: the first rule is the default and must be Permit; any later Deny rule whose
    // target overlaps the request takes the permit away.
    let first_permits = policy
        .rules
        .first()
        .is_some_and(|r| r.effect == Effect::Permit);
    let denied = policy
        .rules
        .iter()
        .skip(1)
        .any(|r| r.effect == Effect::Deny && rule_covers(r, request));
    if !first_permits || denied {
        return Err(DenyReason::DeniedByRule);
    }
    if let Some(missing) = licence::first_missing(set.licences(), &request.required_licences) {
        return Err(DenyReason::LicenceMissing {
            licence: missing.to_string(),
        });
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

fn de_unix_seconds<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    let v = f64::deserialize(d)?;
    if v.is_finite() {
        Ok(v.floor() as i64)
    } else {
        Err(serde::de::Error::custom("time must be a number of seconds"))
    }
}

/// `policySets` and `policies` come as an array (delegation reference) or a single object (generic
/// reference); they are always written as arrays.
mod one_or_many {
    use serde::de::{DeserializeOwned, Error};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_json::Value;

    pub fn deserialize<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: DeserializeOwned,
    {
        match Value::deserialize(d)? {
            Value::Array(items) => items
                .into_iter()
                .map(|item| serde_json::from_value(item).map_err(D::Error::custom))
                .collect(),
            one => Ok(vec![serde_json::from_value(one).map_err(D::Error::custom)?]),
        }
    }

    pub fn serialize<S: Serializer, T: Serialize>(v: &[T], s: S) -> Result<S::Ok, S::Error> {
        v.serialize(s)
    }
}

#[cfg(test)]
#[path = "evidence_tests.rs"]
mod tests;
