//! The one sequence that decides a request, for every caller: the proxy, `explain` and rule
//! tests, nginx and Envoy (HTTP and gRPC) through the decision service, and AuthZEN. Where the
//! caller comes from (`Callers`) and where the evidence comes from (`Evidence`) are the seams;
//! the order is this file's: the request's form and the gateway's own endpoints, the route,
//! who calls (a signed-in person on a route for people, else a bearer token), and on a
//! delegation route the delegation stages, then what the route's mode makes of the outcome.

use super::authenticate::Callers;
use super::authorise::{self, authorise, Evidence, Permitted};
use super::mask::RequestFacts;
use super::route::{self, RouteTable, Routed};
use super::{logged, logged_method, CallerKind, Decision, Stage};
use crate::config::model::{
    own_route, BodyRule, Config, DelegationRule, LoginSettings, Mode, Route,
};
use crate::gateway::connections::body;
use crate::gateway::people::login::Person;
use crate::gateway::reject::{HeaderRefusal, Reject};
use crate::request::body::{read_for_rule, BodyRefusal, ReadBody, Reading};
use crate::request::form::MethodFieldScan;
use crate::request::path::canonical_path;
use crate::request::template::{BodyValues, RequestValues};
use crate::request::Ambiguities;
use crate::scheme::vocabulary::{BROKER_HEADERS, CAPABILITIES_PATH};
use crate::scheme::Timestamp;
use pingora::http::RequestHeader;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

/// What a decision is made under: one configuration's settings and routes, and people's
/// sign-in where it is configured.
pub struct Policy<'a> {
    pub config: &'a Config,
    pub routes: &'a RouteTable,
    pub sign_in: Option<&'a LoginSettings>,
}

/// A request to decide.
pub struct Asked<'a> {
    pub header: &'a RequestHeader,
    /// Whether a body follows (a form or JSON one may hold a `_method` field).
    pub has_body: bool,
    /// The body, as far as the caller has it (read on a route whose rule reads it).
    pub body: AskedBody<'a>,
    /// Read off the wire (an HTTP/1.1 request names its `Host`), or described by another proxy
    /// or a command, which may leave the `Host` out.
    pub described: bool,
}

/// The body of a request to decide, as far as the caller has it.
pub enum AskedBody<'a> {
    /// Not read, or not given.
    Unread,
    /// Read whole: the bytes decided on, which are the bytes forwarded.
    Read(&'a [u8]),
    /// Reading it failed.
    Failed(Reject),
}

/// The gateway's own endpoints, answered by the gateway itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Own {
    /// The token endpoint (`[tokens] paths`).
    Token,
    /// `/capabilities`.
    Capabilities,
    /// The return from the identity provider.
    SignInReturn,
    /// A person's logout: its page, or the sign-out.
    Logout,
}

impl Own {
    /// The route label the decision names it by.
    pub fn route(self) -> &'static str {
        match self {
            Own::Token => own_route::TOKEN,
            Own::Capabilities => own_route::CAPABILITIES,
            Own::SignInReturn => own_route::LOGIN_RETURN,
            Own::Logout => own_route::LOGOUT,
        }
    }
}

/// What is done with a decided request.
pub enum Next {
    /// It goes to the route's backend (permitted, or denied on a route in shadow mode).
    Forward(Forward),
    /// The refusal recorded in the decision is the answer.
    Refuse(Reject),
    /// One of the gateway's own endpoints answers it.
    Own(Own),
    /// A route for people and nobody signed in: the person is sent to sign in first.
    SignIn,
    /// An evaluation without a route (AuthZEN) is granted.
    Granted,
}

/// A request on its way to the backend (the decision's `routed`).
pub struct Forward {
    /// The person the backend is told about, on a route for people.
    pub person: Option<Person>,
    /// The scan its body needs for a `_method` field, on a route that does not accept one.
    pub method_field: Option<MethodFieldScan>,
}

/// A decision and what follows from it.
pub struct Decided {
    pub decision: Decision,
    /// The request matched to its route, once the route stage took it.
    pub routed: Option<Routed>,
    pub next: Next,
}

/// Decide `asked` under `policy`: its caller from `callers`, its evidence from `evidence`, at `now`.
/// A refusal is recorded in the decision and is its `Next`; `decided_in` is the time it took.
pub async fn decide(
    policy: &Policy<'_>,
    asked: &Asked<'_>,
    callers: &dyn Callers,
    evidence: &dyn Evidence,
    now: Timestamp,
) -> Decided {
    let started = Instant::now();
    let mut d = Decision::new();
    d.method = logged_method(&asked.header.method);
    let mut routed = None;
    let next = sequence(policy, asked, callers, evidence, &mut d, &mut routed, now).await;
    concluded(d, started, routed, next)
}

/// The decision and what follows from it: a refusal recorded in it, and the time it took.
fn concluded(
    mut d: Decision,
    started: Instant,
    routed: Option<Routed>,
    next: Result<Next, Reject>,
) -> Decided {
    let next = next.unwrap_or_else(|reject| {
        d.refused(&reject);
        Next::Refuse(reject)
    });
    d.decided_in = Some(started.elapsed());
    Decided {
        decision: d,
        routed,
        next,
    }
}

async fn sequence(
    policy: &Policy<'_>,
    asked: &Asked<'_>,
    callers: &dyn Callers,
    evidence: &dyn Evidence,
    d: &mut Decision,
    routed: &mut Option<Routed>,
    now: Timestamp,
) -> Result<Next, Reject> {
    let req = asked.header;
    d.stage = Stage::Answer;
    check_host(req, asked.described)?;
    let canonical = canonical_path(req.uri.path()).map_err(Reject::BadPath)?;
    d.path = logged(&canonical.path);
    if let Some(own) = own_endpoint(policy, &canonical.path) {
        d.route = own.route().into();
        return Ok(Next::Own(own));
    }
    let routed = routed.insert(route::route(
        policy.routes,
        req,
        canonical,
        asked.has_body,
        d,
    )?);
    if let Some(rule) = &routed.route.body {
        routed.body = Some(read_body(rule, asked)?);
    }
    let method_field = body::method_field_scan(&routed.route, req, asked.has_body)?;
    let route = routed.route.clone();
    let mut person = None;
    if route.login {
        d.stage = Stage::Authentication;
        if BROKER_HEADERS.iter().any(|h| req.headers.contains_key(*h)) {
            return Err(Reject::BadHeader(HeaderRefusal::BrokerWithPerson));
        }
        let Some(signed_in) = callers.person(req, now).await? else {
            return Ok(Next::SignIn);
        };
        d.called_by_person(signed_in.sub.clone());
        person = Some(signed_in);
    }
    let authorised = authorise(policy.config, routed, req, callers, evidence, d, now).await;
    authorise::enforce(route.mode, authorised, d)?;
    Ok(Next::Forward(Forward {
        person,
        method_field,
    }))
}

/// The JSON body of a route whose rule reads it: given whole, within the route's bound, read one
/// way only, with every value the rule takes.
fn read_body(rule: &BodyRule, asked: &Asked<'_>) -> Result<ReadBody, Reject> {
    let bytes = match &asked.body {
        AskedBody::Read(bytes) => *bytes,
        AskedBody::Failed(reject) => return Err(reject.clone()),
        AskedBody::Unread if asked.has_body => return Err(Reject::Body(BodyRefusal::Unseen)),
        AskedBody::Unread => return Err(Reject::Body(BodyRefusal::Missing)),
    };
    read_rule_body(rule, &asked.header.headers, bytes)
}

/// `bytes`, the body of a request with `headers`, read for a rule: within its bound, read one way
/// only, with every value the rule takes.
pub fn read_rule_body(
    rule: &BodyRule,
    headers: &http::HeaderMap,
    bytes: &[u8],
) -> Result<ReadBody, Reject> {
    if bytes.len() > rule.max_bytes {
        return Err(Reject::BodyTooLarge);
    }
    let reading = Reading {
        pointers: &rule.pointers,
        keys: &rule.keys,
        each: rule.each.as_ref(),
        max_elements: rule.max_elements,
    };
    read_for_rule(headers, bytes, &reading).map_err(Reject::Body)
}

/// The largest body the route that takes `req` reads to decide on, if its rule reads the body;
/// None for any other request (which the route stage will refuse or decide without its body).
pub fn body_bound(policy: &Policy<'_>, req: &RequestHeader) -> Option<usize> {
    let canonical = canonical_path(req.uri.path()).ok()?;
    if own_endpoint(policy, &canonical.path).is_some() {
        return None;
    }
    match policy.routes.lookup(&req.method, &canonical.path) {
        route::Lookup::Found(route, _) => route.body.as_ref().map(|b| b.max_bytes),
        _ => None,
    }
}

/// The gateway's own endpoint at `path`, if it is one.
fn own_endpoint(policy: &Policy<'_>, path: &str) -> Option<Own> {
    if policy.config.tokens.paths.iter().any(|p| p == path) {
        return Some(Own::Token);
    }
    if path == CAPABILITIES_PATH {
        return Some(Own::Capabilities);
    }
    let sign_in = policy.sign_in?;
    match path {
        p if p == sign_in.return_path => Some(Own::SignInReturn),
        p if p == sign_in.logout_path => Some(Own::Logout),
        _ => None,
    }
}

/// One valid `Host` (RFC 9112 §3.2): an HTTP/1.1 request without one, with two, or with one that is
/// not a host and port is refused before anything else reads it. HTTP/2 names its authority in the
/// request line, which must be valid too. A described request may leave its `Host` out.
fn check_host(req: &RequestHeader, described: bool) -> Result<(), Reject> {
    let refuse = |why| Err(Reject::BadHeader(HeaderRefusal::Host(why)));
    let mut hosts = req.headers.get_all(http::header::HOST).iter();
    let host = match (hosts.next(), hosts.next()) {
        (Some(_), Some(_)) => return refuse("is given more than once"),
        (Some(value), None) => value.to_str().ok(),
        (None, _) if req.version == http::Version::HTTP_11 && !described => {
            return refuse("is missing")
        }
        (None, _) => None,
    };
    let authority = req.uri.authority().map(http::uri::Authority::as_str);
    if host
        .or(authority)
        .is_some_and(|h| !crate::request::valid_host(h))
        || (host.is_none() && req.headers.contains_key(http::header::HOST))
    {
        return refuse("is not a host name or address with an optional port");
    }
    Ok(())
}

/// An evaluation without a request: AuthZEN's, a mask named by its parts. Its values are the
/// captures `rule` reads; its caller the subject the PEP names.
pub struct Evaluation<'a> {
    pub rule: &'a DelegationRule,
    /// The route whose settings apply, if the evaluation names one.
    pub route: Option<&'a Arc<Route>>,
    pub captures: BTreeMap<String, String>,
    /// Evidence given with it, as the header would carry it.
    pub headers: http::HeaderMap,
    /// The subject: a party or a person.
    pub subject: (CallerKind, &'a str),
    /// The body of the request the PEP holds, read for a rule that reads it (or why it is not).
    pub body: Option<Result<ReadBody, Reject>>,
}

/// Decide an evaluation: the delegation stages on its mask, always enforced (a PEP reads the
/// answer; a route's shadow mode is the gateway's own roll-out, not a permit for whatever an
/// evaluation names).
pub async fn decide_evaluation(
    policy: &Policy<'_>,
    asked: &Evaluation<'_>,
    evidence: &dyn Evidence,
    now: Timestamp,
) -> Decided {
    let started = Instant::now();
    let mut d = Decision::new();
    d.method = "AUTHZEN".into();
    d.route = asked
        .route
        .map_or(own_route::AUTHZEN.into(), |r| r.name.clone().into());
    let (kind, id) = asked.subject;
    match kind {
        CallerKind::Person => d.called_by_person(id.to_string()),
        CallerKind::Party => d.called_by_party(id.to_string()),
    }
    let body = match &asked.body {
        None => None,
        Some(Ok(body)) => Some(body),
        Some(Err(reject)) => return concluded(d, started, None, Err(reject.clone())),
    };
    let query = Default::default();
    let facts = |element| RequestFacts {
        method: &http::Method::GET,
        values: RequestValues {
            captures: &asked.captures,
            query: &query,
            headers: &asked.headers,
            body: body.map(|b| BodyValues {
                json: &b.json,
                element,
            }),
        },
        accepted: asked.route.map_or(Ambiguities::default(), |r| r.accept),
        caller: id,
        person: kind == CallerKind::Person,
    };
    let elements = body.and_then(|b| b.elements);
    let granted = authorise::delegation_each(
        policy.config,
        asked.rule,
        facts,
        elements,
        evidence,
        &mut d,
        now,
    )
    .await;
    let next = authorise::enforce(Mode::Enforce, granted.map(Permitted::Granted), &mut d);
    concluded(d, started, None, next.map(|()| Next::Granted))
}
