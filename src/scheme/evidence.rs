//! Delegation evidence and the delegation mask (both body shapes), and the request in the scheme's
//! terms (`AccessRequest`); `evaluation.rs` decides a request on evidence.

use super::licence::Licence;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};

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
