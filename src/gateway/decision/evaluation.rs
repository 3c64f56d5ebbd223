//! An evaluation a policy enforcement point describes by its parts (AuthZEN): the route stage of
//! `decide` for a request that is not there. The named route is found (never one for people signed
//! in at the gateway), and the parts become the request that route's rule would see: a mask whose
//! values are captures (so they pass the checks of any request's values: present, bounded,
//! unambiguous), or, given the body of the request the enforcement point holds, the route's own
//! rule on that body; the evidence it carries stands in the header 3.0 names. What follows is the
//! sequence's, as for any request: the subject named is the caller, the delegation stages decide,
//! always enforced (a route's shadow mode is the gateway's own roll-out, not a permit for whatever
//! an evaluation names).

use super::incoming::Incoming;
use super::route::{read_rule_body, RouteTable, Routed};
use super::CallerKind;
use crate::config::model::{own_route, Auth, DelegationRule, EvidenceSources, Mode, Route};
use crate::gateway::reject::Reject;
use crate::request::body::{BodyRefusal, ReadBody};
use crate::request::pattern::PathPattern;
use crate::request::template::Template;
use crate::scheme::vocabulary::EVIDENCE_HEADER_3;
use async_trait::async_trait;
use bytes::Bytes;
use pingora::http::RequestHeader;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;

/// An evaluation as its parts name it, checked for form at the interface that reads them.
pub struct Parts<'a> {
    /// Who asks: a party, or a person.
    pub subject: (CallerKind, &'a str),
    pub resource_type: &'a str,
    pub id: &'a str,
    /// The data owner, whose policy decides.
    pub policy_issuer: Option<&'a str>,
    pub attributes: &'a [String],
    /// A delegation route whose settings apply.
    pub route: Option<&'a str>,
    /// The JSON body of the request the enforcement point holds, decided on by the route's rule.
    pub body: Option<&'a Value>,
    pub action: &'a str,
    /// The values of conditions' left operands, as the enforcement point knows them.
    pub conditions: &'a BTreeMap<String, String>,
    /// Licences the evidence must grant.
    pub licences: &'a [String],
    /// Evidence tokens, as the `delegationEvidence` header carries them.
    pub delegation_evidence: Option<&'a str>,
}

/// An evaluation made into the request its route would see.
pub struct Evaluation {
    /// The request's head: the evidence given with it, in its header.
    pub head: Head,
    /// The request matched to the evaluation's route (enforced, for the subject it names).
    pub routed: Routed,
    /// The body the enforcement point gave, read for the route's rule (or why it is not).
    pub body: Option<Result<ReadBody, Reject>>,
}

impl Evaluation {
    /// The evaluation `parts` name, under `routes`; why it cannot be decided at all.
    pub fn new(routes: &RouteTable, parts: &Parts<'_>) -> Result<Self, String> {
        let named = match parts.route {
            None => None,
            Some(name) => {
                let found = routes.routes().iter().find(|r| r.name == name);
                let route = found.ok_or_else(|| format!("no route named {name:?}"))?;
                if route.login {
                    return Err(format!(
                        "{name} is a route for people signed in at the gateway"
                    ));
                }
                Some(&**route)
            }
        };
        let (rule, captures, body) = match parts.body {
            None => {
                let (rule, captures) = rule_of(parts, named)?;
                (rule, captures, None)
            }
            Some(json) => {
                let (rule, body) = rule_with_body(named, parts.action, json)?;
                (rule, BTreeMap::new(), Some(body))
            }
        };
        let mut header =
            RequestHeader::build(http::Method::GET, b"/", None).map_err(|e| e.to_string())?;
        if let Some(tokens) = parts.delegation_evidence {
            let value = http::HeaderValue::from_str(tokens)
                .map_err(|_| "context.delegation_evidence is not a header value")?;
            header
                .insert_header(EVIDENCE_HEADER_3, value)
                .map_err(|e| e.to_string())?;
        }
        let mut route = match named {
            Some(route) => route.clone(),
            None => unnamed()?,
        };
        route.auth = Auth::Delegation(Box::new(rule));
        // The body is the one given, if any: an evaluation has no other to read.
        if body.is_none() {
            route.body = None;
        }
        route.mode = Mode::Enforce;
        route.login = parts.subject.0 == CallerKind::Person;
        let routed = Routed {
            route: Arc::new(route),
            path: "/".into(),
            captures,
            query: Default::default(),
            upstream_uri: http::Uri::from_static("/"),
            body: None,
        };
        Ok(Evaluation {
            head: Head(header),
            routed,
            body,
        })
    }
}

/// The head of the request an evaluation stands for; its body, if any, is the one given with it.
pub struct Head(RequestHeader);

#[async_trait]
impl Incoming for Head {
    fn header(&self) -> &RequestHeader {
        &self.0
    }

    fn has_body(&self) -> bool {
        false
    }

    fn described(&self) -> bool {
        true
    }

    async fn body(&mut self, _limit: usize) -> Result<Bytes, Reject> {
        Err(Reject::Body(BodyRefusal::Unseen))
    }
}

/// The route of an evaluation that names none: its settings are every route's defaults.
fn unnamed() -> Result<Route, String> {
    Ok(Route {
        name: own_route::AUTHZEN.into(),
        description: String::new(),
        methods: None,
        pattern: PathPattern::parse("/")?,
        upstream: String::new(),
        auth: Auth::Public,
        upstream_path: None,
        advertise: false,
        forward_authorization: false,
        accept: Default::default(),
        websocket: false,
        response_headers: Vec::new(),
        source: Default::default(),
        login: false,
        identifier_case: None,
        mode: Mode::Enforce,
        body: None,
    })
}

/// The rule an evaluation is the mask of: its values are captures the request fills in (so they
/// pass the proxy's checks of a value: present, bounded, unambiguous), its evidence settings the
/// named route's or both sources.
fn rule_of(
    asked: &Parts<'_>,
    route: Option<&Route>,
) -> Result<(DelegationRule, BTreeMap<String, String>), String> {
    let t = |text: &str| Template::parse(text).map_err(|e| e.to_string());
    let base = match route.map(|r| &r.auth) {
        Some(Auth::Delegation(rule)) => Some(rule),
        Some(_) => return Err("resource.properties.route is not a delegation route".into()),
        None => None,
    };
    let mut captures = BTreeMap::new();
    captures.insert("resource_type".to_string(), asked.resource_type.to_string());
    captures.insert("id".to_string(), asked.id.to_string());
    let policy_issuer = match (asked.policy_issuer, base) {
        (Some(owner), _) => {
            captures.insert("policy_issuer".to_string(), owner.to_string());
            t("{path.policy_issuer}")?
        }
        (None, Some(rule)) if rule.policy_issuer.is_literal() => rule.policy_issuer.clone(),
        (None, _) => {
            return Err("resource.properties.policy_issuer (the data owner) is missing".into())
        }
    };
    let mut attributes = Vec::new();
    for (i, a) in asked.attributes.iter().enumerate() {
        captures.insert(format!("attribute{i}"), a.clone());
        attributes.push(t(&format!("{{path.attribute{i}}}"))?);
    }
    let mut conditions = BTreeMap::new();
    let mut given = |i: usize, operand: &str, value: &str| -> Result<(), String> {
        captures.insert(format!("condition{i}"), value.to_string());
        conditions.insert(operand.to_string(), t(&format!("{{path.condition{i}}}"))?);
        Ok(())
    };
    match (route, base) {
        // The route's operands only: its constants as it fixes them, the values it takes from
        // the request as the enforcement point gives them.
        (Some(route), Some(rule)) => {
            let asked_for = asked.conditions;
            if let Some(operand) = asked_for.keys().find(|o| !rule.conditions.contains_key(*o)) {
                return Err(format!(
                    "context.conditions.{operand}: the route {} declares no such operand",
                    route.name
                ));
            }
            for (i, (operand, template)) in rule.conditions.iter().enumerate() {
                match (template.is_literal(), asked_for.get(operand)) {
                    (true, None) => {}
                    (true, Some(_)) => {
                        return Err(format!(
                            "context.conditions.{operand}: the route {} fixes it",
                            route.name
                        ))
                    }
                    (false, Some(value)) => given(i, operand, value)?,
                    (false, None) => {
                        return Err(format!(
                        "context.conditions.{operand} is missing: the route {} takes it from {}",
                        route.name,
                        template.as_str()
                    ))
                    }
                }
            }
            for (operand, template) in &rule.conditions {
                if template.is_literal() {
                    conditions.insert(operand.clone(), template.clone());
                }
            }
        }
        _ => {
            for (i, (operand, value)) in asked.conditions.iter().enumerate() {
                given(i, operand, value)?;
            }
        }
    }
    let mut licences = asked.licences.to_vec();
    licences.extend(base.iter().flat_map(|r| r.licences.iter().cloned()));
    let rule = DelegationRule {
        policy_issuer,
        resource_type: t("{path.resource_type}")?,
        identifiers: vec![t("{path.id}")?],
        attributes,
        action: Some(asked.action.to_string()),
        evidence: base.map_or(
            EvidenceSources {
                header: true,
                registry: true,
            },
            |r| r.evidence.clone(),
        ),
        registry: base.and_then(|r| r.registry.clone()),
        licences,
        delegation_path: Vec::new(),
        // A data owner the PEP names is bounded as one a caller names at the proxy: not the
        // subject itself, and only so many not looked up yet a minute.
        caller_names_owner: asked.policy_issuer.is_some(),
        conditions,
        max_decision_age: base.and_then(|r| r.max_decision_age),
        accept_unnamed_service_provider: base.is_some_and(|r| r.accept_unnamed_service_provider),
    };
    Ok((rule, captures))
}

/// The named route's own rule, for an evaluation that gives the body of the request the PEP
/// holds (`resource.properties.body`): its values come from the body and its literals only, its
/// action is its own or `action.name`. The body, read as the proxy reads it (or why it is not).
fn rule_with_body(
    route: Option<&Route>,
    action: &str,
    json: &Value,
) -> Result<(DelegationRule, Result<ReadBody, Reject>), String> {
    let route = route.ok_or("resource.properties.body needs resource.properties.route")?;
    let (Auth::Delegation(rule), Some(reads)) = (&route.auth, &route.body) else {
        return Err(format!("{}: its rule reads no body", route.name));
    };
    let from_request = Route::rule_templates(rule).any(|t| {
        t.path_names().next().is_some()
            || t.query_names().next().is_some()
            || t.header_names().next().is_some()
    });
    if from_request {
        return Err(format!(
            "{}: its rule reads the path, the query or headers, which an evaluation does not carry",
            route.name
        ));
    }
    let mut rule = (**rule).clone();
    rule.action.get_or_insert_with(|| action.to_string());
    let mut headers = http::HeaderMap::new();
    headers.insert(
        http::header::CONTENT_TYPE,
        http::HeaderValue::from_static("application/json"),
    );
    let bytes = serde_json::to_vec(json).map_err(|e| e.to_string())?;
    Ok((rule, read_rule_body(reads, &headers, &bytes)))
}
