//! The delegation mask (`delegationRequest`) and its body in both shapes, and the request in the
//! scheme's terms (`AccessRequest`), which a mask is made from.

use super::condition::Operands;
use super::evidence::{
    Context, Policy, PolicyEnvironment, PolicySet, PolicySetEnvironment, PolicySetTarget,
    PolicyTarget, Resource, RootTarget, Rule, Unknown,
};
use super::licence::Licence;
use super::party_record::{Aliases, AmbiguousName};
use super::version::SchemeVersion;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The delegation mask: `delegationRequest`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DelegationRequest {
    pub policy_issuer: String,
    pub target: RootTarget,
    #[serde(with = "super::evidence::one_or_many")]
    pub policy_sets: Vec<PolicySet>,
}

/// Which of the documented body shapes a delegation request came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyShape {
    /// `{"delegationRequest": …, "previous_steps": […]}` (delegation endpoint reference).
    Endpoint,
    /// `{"delegation_mask": {"delegationRequest": …}, "delegation_path": […], "previous_steps": […]}`.
    Generic,
    /// 2.0 to 2.2: `{"delegationRequest": {…, "previous_steps": […], "delegation_path": […]}}`
    /// (their OpenAPI documents' `DelegationRequestBody`).
    Nested,
    /// 3.0: `{"delegationRequest": {…, "previousSteps": […], "delegationPath": […]}}`.
    Camel,
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
    /// The body a registry of `version` reads: 3.0's inside `delegationRequest` in camelCase,
    /// 2.x's inside it in snake case, the delegation endpoint reference's before.
    pub fn new(request: DelegationRequest, version: SchemeVersion) -> Self {
        DelegationBody {
            request,
            delegation_path: Vec::new(),
            previous_steps: Vec::new(),
            shape: BodyShape::of(version),
        }
    }
}

impl BodyShape {
    /// The shape a registry of `version` reads.
    pub fn of(version: SchemeVersion) -> Self {
        match version {
            v if v.conditions() => BodyShape::Camel,
            v if v.generic_paths() => BodyShape::Nested,
            _ => BodyShape::Endpoint,
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
        // previous_steps and delegation_path belong at the top (1.9); 2.x nests them in the
        // request, and some clients in the mask; 3.0 writes them in camelCase in the request.
        let camel = ["previousSteps", "delegationPath"]
            .iter()
            .any(|m| request_obj.contains_key(*m));
        let nested = ["previous_steps", "delegation_path"]
            .iter()
            .any(|m| request_obj.contains_key(*m));
        let mut list = |name: &str, name_3: &str| -> Result<Vec<String>, D::Error> {
            let v = top
                .remove(name)
                .or_else(|| holder.remove(name))
                .or_else(|| request_obj.remove(name));
            let v_3 = request_obj.remove(name_3);
            if v.is_some() && v_3.is_some() {
                return Err(D::Error::custom(format!(
                    "the body has both {name} and {name_3}"
                )));
            }
            match v.or(v_3) {
                None | Some(Value::Null) => Ok(Vec::new()),
                Some(v) => serde_json::from_value(v).map_err(|e| {
                    D::Error::custom(format!("{name} must be an array of strings: {e}"))
                }),
            }
        };
        let previous_steps = list("previous_steps", "previousSteps")?;
        let delegation_path = list("delegation_path", "delegationPath")?;
        let shape = match (camel, nested) {
            (true, _) => BodyShape::Camel,
            (false, true) => BodyShape::Nested,
            (false, false) => shape,
        };
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
        let mut request = serde_json::to_value(&self.request).map_err(serde::ser::Error::custom)?;
        match self.shape {
            BodyShape::Endpoint => {
                out.insert("delegationRequest".into(), request);
            }
            BodyShape::Generic => {
                let mut mask = Map::new();
                mask.insert("delegationRequest".into(), request);
                out.insert("delegation_mask".into(), Value::Object(mask));
            }
            BodyShape::Camel | BodyShape::Nested => {
                let (path, steps) = match self.shape {
                    BodyShape::Camel => ("delegationPath", "previousSteps"),
                    _ => ("delegation_path", "previous_steps"),
                };
                if let Value::Object(o) = &mut request {
                    if !self.delegation_path.is_empty() {
                        o.insert(path.into(), self.delegation_path.clone().into());
                    }
                    o.insert(steps.into(), self.previous_steps.clone().into());
                }
                out.insert("delegationRequest".into(), request);
                return out.serialize(s);
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
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
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
    /// The values the route declares for conditions' left operands: the request's value, or
    /// None when the request does not give it.
    pub operands: Operands,
    /// The route accepts evidence that names no service provider from a 3.0 signer (whose
    /// evidence has no `serviceProviders`); otherwise such evidence binds to us only where the
    /// data owner designated its registry for us.
    pub unnamed_provider_accepted: bool,
}

impl AccessRequest {
    /// The request with each party named by the id it stands for (`aliases`).
    pub fn resolve(&mut self, aliases: &Aliases) -> Result<(), AmbiguousName> {
        aliases.resolve(&mut self.policy_issuer)?;
        aliases.resolve(&mut self.access_subject)?;
        self.service_providers
            .iter_mut()
            .try_for_each(|sp| aliases.resolve(sp))
    }

    /// The mask that asks a registry of `version` exactly for this request: before 3.0 with us
    /// as the service provider; in 3.0 with the route's values as the policy's `context` (for
    /// conditions the registry evaluates), since its mask has no `serviceProviders`.
    pub fn to_mask(&self, version: SchemeVersion) -> DelegationRequest {
        let environment = (!self.required_licences.is_empty()).then(|| PolicySetTarget {
            environment: Some(PolicySetEnvironment {
                licenses: self
                    .required_licences
                    .iter()
                    .cloned()
                    .map(Licence::Id)
                    .collect(),
                unknown: Unknown::default(),
            }),
            unknown: Unknown::default(),
        });
        let service_providers = (version.masks_name_service_providers()
            && !self.service_providers.is_empty())
        .then(|| PolicyEnvironment {
            service_providers: Some(self.service_providers.clone()),
            unknown: Unknown::default(),
        });
        let values: BTreeMap<String, Value> = self
            .operands
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), Value::String(v.clone()?))))
            .collect();
        let context = (version.conditions() && !values.is_empty()).then_some(Context {
            conditions: None,
            values,
        });
        DelegationRequest {
            policy_issuer: self.policy_issuer.clone(),
            target: RootTarget::new(self.access_subject.clone()),
            policy_sets: vec![PolicySet {
                max_delegation_depth: None,
                target: environment,
                policies: vec![Policy {
                    target: PolicyTarget {
                        resource: Resource {
                            resource_type: self.resource_type.clone(),
                            identifiers: Some(self.identifiers.clone()),
                            attributes: Some(self.attributes.clone()),
                            unknown: Unknown::default(),
                        },
                        actions: self.actions.clone(),
                        environment: service_providers,
                        context,
                        unknown: Unknown::default(),
                    },
                    rules: vec![Rule::permit()],
                    unknown: Unknown::default(),
                }],
                unknown: Unknown::default(),
            }],
        }
    }
}
