//! AuthZEN 1.0 (the OpenID Authorization API): `POST /access/v1/evaluation`, the batch
//! `POST /access/v1/evaluations` and `GET /.well-known/authzen-configuration`. The caller, a
//! policy enforcement point, authenticates with the bearer secret or a client certificate; the
//! subject it names is its claim, not a proof. An evaluation is the mask of a rule whose values
//! are the request's (`subject.id` the access subject, `resource.type` and `id`,
//! `properties.attributes`, `properties.policy_issuer`, `action.name`) — or, given the body of the
//! request (`properties.body`), the named route's own rule on it; with a route named, its
//! conditions' operands are the route's (its constants fixed, its request values the PEP's) —
//! decided by the one sequence every request goes through (`decision::decide`, its route stage
//! `decision::evaluation`: the mask, the evidence of the `delegation_evidence` in `context` or of
//! the data owner's registry, its evaluation). This file is the JSON edge.
//!
//! Read as the specification's HTTPS binding has it: a body of `Content-Type: application/json`,
//! read one way only (a member named twice is refused), each entity an object and its
//! `properties` too. A batch without items is a single evaluation; an item that cannot be
//! evaluated is denied with its error in its own `context`, the other items answered.

use super::connection::Connection;
use super::{record, Interface, Verdict};
use crate::config::model::DecisionApiSettings;
use crate::gateway::decision::authenticate::{CallerArg, Named};
use crate::gateway::decision::decide::{self, decide, Next};
use crate::gateway::decision::evaluation::{Evaluation as Described, Parts};
use crate::gateway::decision::CallerKind;
use crate::gateway::reject::{Answer, Reject, ServiceRefusal};
use crate::gateway::snapshot::{GatewayState, Snapshot};
use crate::reading::json::{read_unique, JsonProblem};
use crate::scheme::Timestamp;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

pub const EVALUATION_PATH: &str = "/access/v1/evaluation";
pub const EVALUATIONS_PATH: &str = "/access/v1/evaluations";
pub const CONFIGURATION_PATH: &str = "/.well-known/authzen-configuration";

/// The longest subject id and action name (the rule's values are bounded by the stages).
const MAX_ID_LEN: usize = 256;
/// The most attributes one evaluation names.
const MAX_ATTRIBUTES: usize = 32;
/// An evaluation's entities: objects, when given.
const ENTITIES: [&str; 4] = ["subject", "resource", "action", "context"];
/// The entities whose `properties`, when given, are an object.
const WITH_PROPERTIES: [&str; 3] = ["subject", "resource", "action"];

#[derive(Debug, Default, Deserialize, Clone)]
struct Subject {
    #[serde(rename = "type")]
    kind: String,
    id: String,
}

#[derive(Debug, Default, Deserialize, Clone)]
struct Resource {
    #[serde(rename = "type")]
    kind: String,
    id: String,
    #[serde(default)]
    properties: ResourceProperties,
}

#[derive(Debug, Default, Deserialize, Clone)]
struct ResourceProperties {
    /// The data owner, whose policy decides.
    policy_issuer: Option<String>,
    #[serde(default)]
    attributes: Vec<String>,
    /// A delegation route whose evidence settings (header, registry, licences, mode) apply.
    route: Option<String>,
    /// The JSON body of the request the PEP holds, decided on by the route's own rule.
    body: Option<Value>,
}

#[derive(Debug, Default, Deserialize, Clone)]
struct Action {
    name: String,
}

#[derive(Debug, Default, Deserialize, Clone)]
struct Context {
    /// Licences the evidence must grant (also under the scheme's spelling, `licenses`).
    #[serde(default, alias = "licenses")]
    licences: Vec<String>,
    /// Evidence tokens, as the delegationEvidence header carries them.
    #[serde(alias = "delegationEvidence")]
    delegation_evidence: Option<String>,
    /// The values of conditions' left operands (3.0), as the PEP knows them of the request.
    #[serde(default)]
    conditions: BTreeMap<String, String>,
}

/// One evaluation, or a batch item with the defaults it leaves out.
#[derive(Debug, Default, Deserialize, Clone)]
struct Evaluation {
    subject: Option<Subject>,
    resource: Option<Resource>,
    action: Option<Action>,
    context: Option<Context>,
}

#[derive(Debug, Default, Deserialize)]
struct BatchOptions {
    evaluations_semantic: Option<String>,
}

/// A refusal of the caller's request, as the table answers it.
fn refused(reject: impl Into<Reject>) -> http::Response<Vec<u8>> {
    Answer::from(&reject.into()).into_response()
}

fn invalid(description: impl Into<String>) -> http::Response<Vec<u8>> {
    refused(ServiceRefusal::InvalidEvaluation(description.into()))
}

/// The AuthZEN paths; any other is not found.
pub async fn route(
    state: &GatewayState,
    conn: Connection,
    req: http::Request<axum::body::Body>,
) -> http::Response<Vec<u8>> {
    let path = req.uri().path().to_string();
    let known = [EVALUATION_PATH, EVALUATIONS_PATH, CONFIGURATION_PATH];
    if !known.contains(&path.as_str()) {
        return refused(ServiceRefusal::NotServed(
            "the decision service answers /nginx, /ext_authz/…, /access/v1/evaluation(s) and /.well-known/authzen-configuration",
        ));
    }
    let id = req.headers().get(super::REQUEST_ID_HEADER);
    if id.is_some_and(|id| !super::echoable(id)) {
        return refused(ServiceRefusal::InvalidRequestId(super::REQUEST_ID_MAX));
    }
    let snap = state.current.load_full();
    let Some(settings) = snap.config.decision_api.clone() else {
        return refused(ServiceRefusal::NotServed("no [decision_api]"));
    };
    let method = if path == CONFIGURATION_PATH {
        http::Method::GET
    } else {
        http::Method::POST
    };
    if req.method() != method {
        return refused(Reject::MethodNotAllowed(vec![method]));
    }
    if path == CONFIGURATION_PATH {
        return configuration(&settings);
    }
    if let Err(why) = authenticate(&settings, conn, req.headers()) {
        return refused(ServiceRefusal::PepUnauthenticated(why));
    }
    if !json_content_type(req.headers()) {
        return refused(ServiceRefusal::NotJson);
    }
    let limit = settings.max_body_bytes;
    let body = match axum::body::to_bytes(req.into_body(), limit).await {
        Ok(b) => b,
        Err(_) => return refused(Reject::BodyTooLarge),
    };
    let batch = path == EVALUATIONS_PATH;
    let asked = match read_request(&body, batch, settings.max_batch) {
        Ok(asked) => asked,
        Err(e) => return refused(e),
    };
    let answer = match asked {
        AskedRequest::One(one) => evaluate(state, &snap, *one).await,
        AskedRequest::Batch { items, stop_on } => {
            Ok(evaluations(state, &snap, items, stop_on).await)
        }
    };
    match answer {
        Ok(answer) => json_answer(answer),
        Err(description) => invalid(description),
    }
}

/// An AuthZEN request as read off its body.
#[derive(Debug)]
pub enum AskedRequest {
    /// One evaluation (also a batch without items).
    One(Box<Asked>),
    /// A batch: each item with the defaults it leaves out, read and checked (or why not), and
    /// the decision that ends it early, if any.
    Batch {
        items: Vec<Result<Asked, String>>,
        stop_on: Option<bool>,
    },
}

/// An AuthZEN body read as the specification's HTTPS binding has it: JSON read one way only
/// (`reading::json`), an evaluation or (`batch`, at the evaluations endpoint) a batch of at most
/// `max` items; each entity an object and its `properties` too. What is wrong with the request as
/// a whole is its refusal; an item that cannot be evaluated is that item's error.
pub fn read_request(body: &[u8], batch: bool, max: usize) -> Result<AskedRequest, Reject> {
    let invalid = |d: String| Reject::from(ServiceRefusal::InvalidEvaluation(d));
    let value = match read_unique(body) {
        Ok(v) => v,
        Err(JsonProblem::RepeatedMember(e)) => return Err(ServiceRefusal::RepeatedMember(e).into()),
        Err(e) => return Err(invalid(format!("the body {e}"))),
    };
    let one = |value: &Value| {
        let asked = evaluation_of(value).and_then(asked).map_err(invalid)?;
        Ok(AskedRequest::One(Box::new(asked)))
    };
    if !batch {
        return one(&value);
    }
    let Value::Object(members) = &value else {
        return Err(invalid("the body is not a JSON object".into()));
    };
    shaped(members).map_err(invalid)?;
    let items = match members.get("evaluations") {
        None => &[][..],
        Some(Value::Array(items)) => items.as_slice(),
        Some(_) => return Err(invalid("evaluations is not an array".into())),
    };
    if items.len() > max {
        return Err(invalid(format!(
            "{} evaluations: at most {max} in one batch",
            items.len()
        )));
    }
    let options = match members.get("options") {
        None => BatchOptions::default(),
        Some(o) if o.is_object() => {
            BatchOptions::deserialize(o).map_err(|e| invalid(format!("options: {e}")))?
        }
        Some(_) => return Err(invalid("options is not an object".into())),
    };
    let stop_on = match options.evaluations_semantic.as_deref() {
        None | Some("execute_all") => None,
        Some("deny_on_first_deny") => Some(false),
        Some("permit_on_first_permit") => Some(true),
        Some(other) => return Err(invalid(format!("evaluations_semantic {other:?} is not execute_all, deny_on_first_deny or permit_on_first_permit"))),
    };
    if items.is_empty() {
        return one(&value);
    }
    let items = items
        .iter()
        .map(|item| {
            merged(members, item)
                .and_then(|m| evaluation_of(&m))
                .and_then(asked)
        })
        .collect();
    Ok(AskedRequest::Batch { items, stop_on })
}

/// `application/json`, with or without parameters (`charset=utf-8`), given once.
fn json_content_type(headers: &http::HeaderMap) -> bool {
    let mut given = headers.get_all(http::header::CONTENT_TYPE).iter();
    match (given.next(), given.next()) {
        (Some(value), None) => value
            .to_str()
            .ok()
            .and_then(|v| v.split(';').next())
            .is_some_and(|media| media.trim().eq_ignore_ascii_case("application/json")),
        _ => false,
    }
}

fn json_answer(body: Value) -> http::Response<Vec<u8>> {
    Answer::ok(body).into_response()
}

/// The caller shows the bearer secret, or connected with a client certificate of
/// `tls.client_ca`; without either configured nobody may call.
fn authenticate(
    settings: &DecisionApiSettings,
    conn: Connection,
    headers: &http::HeaderMap,
) -> Result<(), &'static str> {
    if conn.client_certificate
        && settings
            .tls
            .as_ref()
            .is_some_and(|t| t.client_auth.is_some())
    {
        return Ok(());
    }
    let Some(secret) = &settings.bearer_secret else {
        return Err("AuthZEN callers authenticate with [decision_api] bearer_secret_file or a client certificate of tls.client_ca; this connection has neither");
    };
    let matches = secret.admits(headers);
    match matches {
        true => Ok(()),
        false => Err("the caller is not authenticated: send Authorization: Bearer with the decision service's secret"),
    }
}

/// The discovery document, on the configured identifier: never on the Host a caller sends, which
/// would have the service name whatever PDP a request (or a cache in between) says it is.
fn configuration(settings: &DecisionApiSettings) -> http::Response<Vec<u8>> {
    let Some(base) = &settings.policy_decision_point else {
        return refused(ServiceRefusal::NoDiscovery);
    };
    json_answer(json!({
        "policy_decision_point": base,
        "access_evaluation_endpoint": format!("{base}{EVALUATION_PATH}"),
        "access_evaluations_endpoint": format!("{base}{EVALUATIONS_PATH}"),
    }))
}

/// An evaluation as written: an object whose entities are objects, and their `properties` too.
fn evaluation_of(value: &Value) -> Result<Evaluation, String> {
    let Value::Object(members) = value else {
        return Err("an evaluation is a JSON object".into());
    };
    shaped(members)?;
    Evaluation::deserialize(value).map_err(|e| format!("not an evaluation: {e}"))
}

/// Each entity given is an object, and the `properties` of one an object too.
fn shaped(members: &Map<String, Value>) -> Result<(), String> {
    for name in ENTITIES {
        match members.get(name) {
            None => {}
            Some(Value::Object(entity)) => {
                let properties = entity.get("properties");
                if WITH_PROPERTIES.contains(&name) && properties.is_some_and(|p| !p.is_object()) {
                    return Err(format!("{name}.properties is not an object"));
                }
            }
            Some(_) => return Err(format!("{name} is not an object")),
        }
    }
    Ok(())
}

/// A batch item with the top-level entities it leaves out, each whole: an item's `subject`
/// replaces the default one, it is never merged into it.
fn merged(defaults: &Map<String, Value>, item: &Value) -> Result<Value, String> {
    let Value::Object(item) = item else {
        return Err("an evaluation is a JSON object".into());
    };
    let entities = ENTITIES.iter().filter_map(|name| {
        let entity = item.get(*name).or_else(|| defaults.get(*name))?;
        Some((name.to_string(), entity.clone()))
    });
    Ok(Value::Object(entities.collect()))
}

/// A batch item that cannot be evaluated: denied, with its error in its own `context` (the
/// specification's shape), while the others are answered.
fn unevaluated(description: String) -> Value {
    let row = Reject::from(ServiceRefusal::InvalidEvaluation(description)).row();
    json!({
        "decision": false,
        "context": {
            "reason": row.reason,
            "error": {"status": row.status, "message": row.description},
        },
    })
}

/// A batch's items answered in order; `stop_on` (`deny_on_first_deny`, `permit_on_first_permit`)
/// ends it early. An item that cannot be evaluated is denied with its error in its own context.
async fn evaluations(
    state: &GatewayState,
    snap: &Arc<Snapshot>,
    items: Vec<Result<Asked, String>>,
    stop_on: Option<bool>,
) -> Value {
    let mut answers = Vec::new();
    for item in items {
        let answer = match item {
            Ok(asked) => evaluate(state, snap, asked).await,
            Err(description) => Err(description),
        };
        let answer = answer.unwrap_or_else(unevaluated);
        let decided = answer["decision"].as_bool();
        answers.push(answer);
        if stop_on.is_some() && decided == stop_on {
            break;
        }
    }
    json!({ "evaluations": answers })
}

/// What an evaluation asks, checked.
#[derive(Debug)]
pub struct Asked {
    subject: Subject,
    resource: Resource,
    action: Action,
    context: Context,
}

fn asked(e: Evaluation) -> Result<Asked, String> {
    let subject = e.subject.ok_or("subject is missing")?;
    if !matches!(subject.kind.as_str(), "party" | "person") {
        return Err(format!(
            "subject.type {:?}: \"party\" or \"person\"",
            subject.kind
        ));
    }
    if subject.id.is_empty() || subject.id.len() > MAX_ID_LEN {
        return Err(format!("subject.id: 1 to {MAX_ID_LEN} bytes"));
    }
    let resource = e.resource.ok_or("resource is missing")?;
    if resource.properties.attributes.len() > MAX_ATTRIBUTES {
        return Err(format!(
            "at most {MAX_ATTRIBUTES} resource.properties.attributes"
        ));
    }
    let action = e.action.ok_or("action is missing")?;
    if action.name.is_empty() || action.name.len() > MAX_ID_LEN {
        return Err(format!("action.name: 1 to {MAX_ID_LEN} bytes"));
    }
    let context = e.context.unwrap_or_default();
    if context.conditions.len() > MAX_ATTRIBUTES {
        return Err(format!("at most {MAX_ATTRIBUTES} context.conditions"));
    }
    if context
        .conditions
        .keys()
        .any(|k| k.is_empty() || k.len() > MAX_ID_LEN)
    {
        return Err(format!(
            "context.conditions: operands of 1 to {MAX_ID_LEN} bytes"
        ));
    }
    Ok(Asked {
        subject,
        resource,
        action,
        context,
    })
}

/// One evaluation, decided by the one sequence (`decision::decide`), logged and counted.
async fn evaluate(
    state: &GatewayState,
    snap: &Arc<Snapshot>,
    asked: Asked,
) -> Result<Value, String> {
    let started = Instant::now();
    let kind = match asked.subject.kind.as_str() {
        "person" => CallerKind::Person,
        _ => CallerKind::Party,
    };
    let properties = &asked.resource.properties;
    let parts = Parts {
        subject: (kind, &asked.subject.id),
        resource_type: &asked.resource.kind,
        id: &asked.resource.id,
        policy_issuer: properties.policy_issuer.as_deref(),
        attributes: &properties.attributes,
        route: properties.route.as_deref(),
        body: properties.body.as_ref(),
        action: &asked.action.name,
        conditions: &asked.context.conditions,
        licences: &asked.context.licences,
        delegation_evidence: asked.context.delegation_evidence.as_deref(),
    };
    let evaluation = Described::new(&snap.routes, &parts)?;
    // The subject the enforcement point names is its claim, taken as the caller.
    let subject = CallerArg::As(asked.subject.id.clone());
    let callers = Named {
        caller: Some(&subject),
        tokens: &snap.tokens,
    };
    let evidence = snap.authz.with(&snap.trust);
    let decided = decide(
        &snap.policy(),
        decide::Asked::Evaluation(Box::new(evaluation)),
        &callers,
        &evidence,
        Timestamp::now(),
    )
    .await;
    let mut d = decided.decision;
    let refusal = match decided.next {
        Next::Forward(_) => None,
        Next::Refuse(reject) => Some(Answer::from(&reject).for_decision(d.id.as_str())),
        Next::Own(_) | Next::SignIn => {
            let reject = Reject::Internal;
            d.refused(&reject);
            Some(Answer::from(&reject).for_decision(d.id.as_str()))
        }
    };
    d.decided_in = Some(started.elapsed());
    let verdict = Verdict {
        decision: d,
        refusal,
        upstream_headers: Vec::new(),
        remove_upstream: Vec::new(),
    };
    record(state, snap, Interface::AuthZen, &verdict, started.elapsed());
    let d = &verdict.decision;
    let mut context = json!({"reason": d.reason, "decision_id": d.id});
    if let Some(description) = d.description.as_ref().filter(|_| !verdict.allowed()) {
        context["description"] = json!(description);
    }
    Ok(json!({"decision": verdict.allowed(), "context": context}))
}
