//! Delegation evidence, as every version writes it (the mask and the request in the scheme's terms
//! are in `mask.rs`); `evaluation.rs` decides a request on evidence.

use super::condition::{Condition, ConditionFailure, Operands};
use super::licence::Licence;
use super::party_record::{Aliases, AmbiguousName};
use super::version::SchemeVersion;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// Members of an object that no version of the scheme defines there, kept as written. Nothing not
/// understood grants anything: evaluation denies the rule, policy, policy set or evidence they
/// are part of, naming them, unless an operator listed them to be dropped for their issuer.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Unknown(pub Map<String, Value>);

/// The first member not understood among these objects (each with its path below the object
/// asked), as a path.
fn first_unknown<'a>(
    objects: impl IntoIterator<Item = (&'a str, Option<&'a Unknown>)>,
) -> Option<String> {
    objects.into_iter().find_map(|(at, unknown)| {
        let member = unknown?.0.keys().next()?;
        Some(match at.is_empty() {
            true => member.clone(),
            false => format!("{at}.{member}"),
        })
    })
}

/// How evidence was read, beside what it says: the scheme version of its signer, and whether
/// the data owner designated its signer (a registry) for this service provider. Not part of the
/// JSON; evidence read without a signer (tests, the testbed's stores) is read as 1.9.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReadAs {
    pub version: SchemeVersion,
    pub designated_for_us: bool,
}

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
    #[serde(flatten)]
    pub unknown: Unknown,
    #[serde(skip)]
    pub read_as: ReadAs,
    /// The party whose certificate signed the token that carried it (3.0: its record's id),
    /// where one did. Not part of the JSON.
    #[serde(skip)]
    pub signer: Option<String>,
}

/// The root target: only `accessSubject` is allowed there.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootTarget {
    pub access_subject: String,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl RootTarget {
    pub fn new(access_subject: String) -> Self {
        RootTarget {
            access_subject,
            unknown: Unknown::default(),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicySet {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub max_delegation_depth: Option<u32>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub target: Option<PolicySetTarget>,
    #[serde(with = "one_or_many")]
    pub policies: Vec<Policy>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl DelegationEvidence {
    /// The evidence with each party it names (issuer, subject, service providers) named by the
    /// id it stands for (`aliases`): what it says, compared as the request is.
    pub fn resolve(&mut self, aliases: &Aliases) -> Result<(), AmbiguousName> {
        aliases.resolve(&mut self.policy_issuer)?;
        aliases.resolve(&mut self.target.access_subject)?;
        self.service_providers_mut()
            .try_for_each(|sp| aliases.resolve(sp))
    }

    /// The service providers its policies list.
    pub fn service_providers(&self) -> impl Iterator<Item = &str> {
        self.policy_sets
            .iter()
            .flat_map(|set| &set.policies)
            .filter_map(|p| p.target.environment.as_ref())
            .filter_map(|e| e.service_providers.as_ref())
            .flatten()
            .map(String::as_str)
    }

    fn service_providers_mut(&mut self) -> impl Iterator<Item = &mut String> {
        self.policy_sets
            .iter_mut()
            .flat_map(|set| set.policies.iter_mut())
            .filter_map(|p| p.target.environment.as_mut())
            .filter_map(|e| e.service_providers.as_mut())
            .flatten()
    }

    /// Every licence identifier the evidence mentions.
    pub fn licence_ids(&self) -> impl Iterator<Item = &str> {
        self.policy_sets
            .iter()
            .flat_map(|s| s.licences())
            .flat_map(Licence::identifiers)
    }

    /// The first member not understood at its root (the evidence and its target), as a path.
    pub fn not_understood(&self) -> Option<String> {
        first_unknown([
            ("", Some(&self.unknown)),
            ("target", Some(&self.target.unknown)),
        ])
    }

    /// The first member, as a path, that `version` does not define: one no version defines, one
    /// a later version brought ([`Self::first_beyond`]), or a policy's
    /// `environment.serviceProviders` from 3.0, which dropped it. What a registry of `version`
    /// refuses to store: a policy it could never match.
    pub fn first_undefined_in(&self, version: SchemeVersion) -> Option<String> {
        let within = |at: String, member: Option<String>| member.map(|m| format!("{at}.{m}"));
        let in_sets = self.policy_sets.iter().enumerate().find_map(|(s, set)| {
            let set_at = format!("policySets[{s}]");
            within(set_at.clone(), set.not_understood()).or_else(|| {
                set.policies.iter().enumerate().find_map(|(p, policy)| {
                    let at = format!("{set_at}.policies[{p}]");
                    let dropped = !version.policies_name_service_providers()
                        && policy
                            .target
                            .environment
                            .as_ref()
                            .is_some_and(|e| e.service_providers.is_some());
                    within(at.clone(), policy.not_understood()).or_else(|| {
                        dropped.then(|| format!("{at}.target.environment.serviceProviders"))
                    })
                })
            })
        });
        self.not_understood()
            .or(in_sets)
            .or_else(|| self.first_beyond(version))
    }

    /// The first member, as a path, that `version` does not have: licence expressions before
    /// 2.2, conditions and contexts before 3.0. A peer configured for `version` that writes one
    /// is not guessed to speak another.
    pub fn first_beyond(&self, version: SchemeVersion) -> Option<String> {
        self.policy_sets.iter().enumerate().find_map(|(s, set)| {
            let set_at = format!("policySets[{s}]");
            let expression = (!version.licence_expressions())
                .then(|| set.licences().iter().position(|l| !l.is_identifier()))
                .flatten()
                .map(|i| format!("{set_at}.target.environment.licenses[{i}]"));
            let conditional = (!version.conditions())
                .then(|| {
                    set.policies.iter().enumerate().find_map(|(p, policy)| {
                        let at = format!("{set_at}.policies[{p}]");
                        let context = policy
                            .target
                            .context
                            .is_some()
                            .then(|| format!("{at}.target.context"));
                        let condition = policy
                            .rules
                            .iter()
                            .position(|r| r.conditions.is_some())
                            .map(|r| format!("{at}.rules[{r}].conditions"));
                        context.or(condition)
                    })
                })
                .flatten();
            expression.or(conditional)
        })
    }
}

/// Where members an operator may list to drop can be, as generic paths; and the members each
/// object has in some version, which can never be listed.
const OBJECTS: [(&str, &[&str]); 12] = [
    (
        "",
        &[
            "notBefore",
            "notOnOrAfter",
            "nonOnOrAfter",
            "policyIssuer",
            "target",
            "policySets",
        ],
    ),
    ("target", &["accessSubject"]),
    (
        "policySets[]",
        &["maxDelegationDepth", "target", "policies"],
    ),
    ("policySets[].target", &["environment"]),
    ("policySets[].target.environment", &["licenses"]),
    ("policySets[].policies[]", &["target", "rules"]),
    (
        "policySets[].policies[].target",
        &["resource", "actions", "environment", "context"],
    ),
    (
        "policySets[].policies[].target.resource",
        &["type", "identifiers", "attributes"],
    ),
    (
        "policySets[].policies[].target.environment",
        &["serviceProviders"],
    ),
    (
        "policySets[].policies[].rules[]",
        &["effect", "target", "conditions"],
    ),
    (
        "policySets[].policies[].rules[].target",
        &["resource", "actions"],
    ),
    (
        "policySets[].policies[].rules[].target.resource",
        &["type", "identifiers", "attributes"],
    ),
];

/// Whether `path` names a member an operator may list to drop: a member of one of the
/// evidence's objects (not of a condition, a context or a licence expression) that no version
/// of the scheme defines there.
pub fn droppable(path: &str) -> Result<(), String> {
    let (object, member) = path.rsplit_once('.').unwrap_or(("", path));
    let Some((_, known)) = OBJECTS.iter().find(|(o, _)| *o == object) else {
        return Err(format!(
            "{path:?} is not a member of an object of the evidence; write paths as policySets[].policies[].rules[].comment"
        ));
    };
    if member.is_empty() || member.contains(['[', ']']) {
        return Err(format!("{path:?} does not end in a member name"));
    }
    // Nor a spelling of one (`Conditions`, `service_providers`): its issuer may mean it.
    let defined = ["conditions", "context"]
        .iter()
        .chain(known.iter())
        .find(|k| super::same_letters(k, member));
    if let Some(defined) = defined {
        return Err(format!(
            "{member} is (a spelling of) {defined}, a member of the scheme's evidence: it is evaluated, never dropped"
        ));
    }
    Ok(())
}

/// Drop from evidence as written (the JSON of a `delegationEvidence`) the members at `listed`
/// generic paths, which `droppable` admits: members no version defines, which would otherwise
/// make what they are part of a Deny. A list (`[]`) may be written as one object, as
/// `policySets` and `policies` may.
pub fn drop_listed(evidence: &mut Value, listed: &[String]) {
    fn drop_at(value: &mut Value, path: &[&str]) {
        match path {
            [] => {}
            [member] => {
                if let Value::Object(o) = value {
                    o.remove(*member);
                }
            }
            [step, rest @ ..] => {
                let (name, each) = match step.strip_suffix("[]") {
                    Some(name) => (name, true),
                    None => (*step, false),
                };
                match value.get_mut(name) {
                    Some(Value::Array(items)) if each => {
                        items.iter_mut().for_each(|item| drop_at(item, rest))
                    }
                    Some(child) => drop_at(child, rest),
                    None => {}
                }
            }
        }
    }
    for path in listed {
        let steps: Vec<&str> = path.split('.').collect();
        drop_at(evidence, &steps);
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

    /// The first member of the set, its target or its environment not understood, as a path
    /// below the set.
    pub fn not_understood(&self) -> Option<String> {
        let target = self.target.as_ref();
        first_unknown([
            ("", Some(&self.unknown)),
            ("target", target.map(|t| &t.unknown)),
            (
                "target.environment",
                target
                    .and_then(|t| t.environment.as_ref())
                    .map(|e| &e.unknown),
            ),
        ])
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicySetTarget {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub environment: Option<PolicySetEnvironment>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PolicySetEnvironment {
    #[serde(default)]
    pub licenses: Vec<Licence>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Policy {
    pub target: PolicyTarget,
    #[serde(default)]
    pub rules: Vec<Rule>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl Policy {
    /// The first member of the policy, its target, resource or environment not understood, as a
    /// path below the policy.
    pub fn not_understood(&self) -> Option<String> {
        let t = &self.target;
        first_unknown([
            ("", Some(&self.unknown)),
            ("target", Some(&t.unknown)),
            ("target.resource", Some(&t.resource.unknown)),
            (
                "target.environment",
                t.environment.as_ref().map(|e| &e.unknown),
            ),
        ])
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PolicyTarget {
    pub resource: Resource,
    #[serde(default)]
    pub actions: Vec<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub environment: Option<PolicyEnvironment>,
    /// 3.0: what the evidence was issued on (the values asked with, and conditions the
    /// registry evaluated on them).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub context: Option<Context>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

/// A policy target's `context` (3.0): values of the request the evidence was issued on, and
/// conditions (type 1) the registry evaluated on them. The service provider holds both against
/// the request it decides: each value must be the route's, and the conditions must hold.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_condition"
    )]
    pub conditions: Option<Condition>,
    #[serde(flatten)]
    pub values: BTreeMap<String, Value>,
}

impl Context {
    /// Whether the context agrees with the request's operands; `at` names it.
    pub fn check(&self, at: &str, operands: &Operands) -> Result<(), ConditionFailure> {
        for (name, value) in &self.values {
            let at = format!("{at}.{name}");
            let Value::String(value) = value else {
                return Err(ConditionFailure::Incomparable {
                    at,
                    comparison: format!("{name} as the context gives it"),
                    value: value.to_string(),
                });
            };
            let leaf = super::condition::Comparison {
                left: name.clone(),
                operator: super::condition::Operator::Equal,
                right: super::condition::Operand::Text(value.clone()),
            };
            Condition::Compare(leaf).check(&at, operands)?;
        }
        match &self.conditions {
            Some(c) => c.check(&format!("{at}.conditions"), operands),
            None => Ok(()),
        }
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Resource {
    #[serde(rename = "type")]
    pub resource_type: String,
    /// Absent: every identifier of the type (`null` is not absent: it is refused).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub identifiers: Option<Vec<String>>,
    /// Absent: every attribute.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub attributes: Option<Vec<String>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PolicyEnvironment {
    /// Absent: before 3.0, any service provider may serve the access subject.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub service_providers: Option<Vec<String>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    pub effect: Effect,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub target: Option<RuleTarget>,
    /// 3.0: conditions the service provider evaluates (type 2). Present, they are read, whatever
    /// they are (`null` too): what is not a condition never holds.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "some_condition"
    )]
    pub conditions: Option<Condition>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

impl Rule {
    pub fn permit() -> Self {
        Rule::of(Effect::Permit)
    }

    pub fn deny() -> Self {
        Rule::of(Effect::Deny)
    }

    fn of(effect: Effect) -> Self {
        Rule {
            effect,
            target: None,
            conditions: None,
            unknown: Unknown::default(),
        }
    }

    /// The first member of the rule or its target not understood, as a path below the rule.
    pub fn not_understood(&self) -> Option<String> {
        let target = self.target.as_ref();
        first_unknown([
            ("", Some(&self.unknown)),
            ("target", target.map(|t| &t.unknown)),
            (
                "target.resource",
                target.and_then(|t| t.resource.as_ref()).map(|r| &r.unknown),
            ),
        ])
    }
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuleTarget {
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub resource: Option<RuleResource>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub actions: Option<Vec<String>>,
    #[serde(flatten)]
    pub unknown: Unknown,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RuleResource {
    #[serde(
        rename = "type",
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub resource_type: Option<String>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub identifiers: Option<Vec<String>>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "present"
    )]
    pub attributes: Option<Vec<String>>,
    #[serde(flatten)]
    pub unknown: Unknown,
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

/// A member that is present: `null` is refused, never read as absent (absence grants every
/// value of a list, binds evidence to any service provider, drops a context).
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// A condition tree that is present, whatever it holds.
fn some_condition<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Condition>, D::Error> {
    Ok(Some(Condition::read(&Value::deserialize(d)?)))
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
pub(super) mod one_or_many {
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
