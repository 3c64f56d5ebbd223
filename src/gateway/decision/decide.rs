//! The one sequence that decides a request, for every caller: the proxy, `explain` and rule
//! tests, nginx and Envoy (HTTP and gRPC) through the decision service, and AuthZEN. Where the
//! request and its body come from (`Incoming`), where the caller comes from (`Callers`) and where
//! the evidence comes from (`Evidence`) are the seams; the order is this file's: the route stage
//! (the request's form, the gateway's own endpoints, the route; an AuthZEN evaluation's parts,
//! `evaluation.rs`), the authentication stage (a signed-in person on a route for people, else a
//! bearer token), the body only when the route's rule reads it and a caller was found who may
//! call (no stranger makes the gateway hold a body), the authorisation stage (`authorise.rs`: on
//! a delegation route the delegation stages), then what the route's mode makes of the outcome.

use std::sync::Arc;

use super::authenticate::Callers;
use super::authorise::{self, authorise, Evidence};
use super::evaluation::Evaluation;
use super::incoming::Incoming;
use super::route::{self, read_rule_body, RouteTable, Routed};
use super::{logged, logged_method, Decision, Stage};
use crate::config::model::{own_route, Auth, BodyRule, Config, LoginSettings, Route};
use crate::gateway::connections::body;
use crate::gateway::people::login::Person;
use crate::gateway::reject::{HeaderRefusal, Reject};
use crate::request::body::{BodyRefusal, ReadBody};
use crate::request::form::MethodFieldScan;
use crate::request::path::canonical_path;
use crate::scheme::vocabulary::{BROKER_HEADERS, CAPABILITIES_PATH};
use crate::scheme::Timestamp;
use pingora::http::RequestHeader;
use std::time::Instant;

/// What a decision is made under: one configuration's settings and routes, and people's
/// sign-in where it is configured.
pub struct Policy<'a> {
    pub config: &'a Config,
    pub routes: &'a RouteTable,
    pub sign_in: Option<&'a LoginSettings>,
}

/// What is decided: a request, or an evaluation a policy enforcement point describes by its
/// parts (AuthZEN), which the route stage turns into the request its route would see.
pub enum Asked<'a> {
    Request(&'a mut dyn Incoming),
    Evaluation(Box<Evaluation>),
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
    pub fn route(self) -> arcstr::ArcStr {
        match self {
            Own::Token => arcstr::literal!(own_route::TOKEN),
            Own::Capabilities => arcstr::literal!(own_route::CAPABILITIES),
            Own::SignInReturn => arcstr::literal!(own_route::LOGIN_RETURN),
            Own::Logout => arcstr::literal!(own_route::LOGOUT),
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
}

/// A request on its way to the backend (the decision's `routed`); an evaluation, granted.
pub struct Forward {
    /// The person the backend is told about, on a route for people.
    pub person: Option<Person>,
    /// The scan its body needs for a `_method` field, on a route that does not accept one.
    pub method_field: Option<MethodFieldScan>,
}

/// A decision and what follows from it.
pub struct Decided {
    pub decision: Decision,
    /// The request matched to its route, once the route stage took it: shared with a decision
    /// kept by the request as it came.
    pub routed: Option<Arc<Routed>>,
    pub next: Next,
}

/// Decide `asked` under `policy`: its caller from `callers`, its evidence from `evidence`, at `now`.
/// A refusal is recorded in the decision and is its `Next`; `decided_in` is the time it took.
pub async fn decide(
    policy: &Policy<'_>,
    asked: Asked<'_>,
    callers: &dyn Callers,
    evidence: &dyn Evidence,
    now: Timestamp,
) -> Decided {
    let started = Instant::now();
    let mut d = Decision::new();
    let mut routed = None;
    let next = sequence(policy, asked, callers, evidence, &mut d, &mut routed, now).await;
    let next = next.unwrap_or_else(|reject| {
        d.refused(&reject);
        Next::Refuse(reject)
    });
    d.decided_in = Some(started.elapsed());
    Decided {
        decision: d,
        routed: routed.map(Arc::new),
        next,
    }
}

/// The stages, in order: the route (the request's form and the gateway's own endpoints, or an
/// evaluation's parts), who calls, what the caller may do, and what the route's mode makes of it.
async fn sequence(
    policy: &Policy<'_>,
    asked: Asked<'_>,
    callers: &dyn Callers,
    evidence: &dyn Evidence,
    d: &mut Decision,
    routed: &mut Option<Routed>,
    now: Timestamp,
) -> Result<Next, Reject> {
    // Boxed, so that a request's decision carries a pointer for it, not an evaluation's head.
    let mut described: Box<dyn Incoming>;
    let (incoming, found): (&mut dyn Incoming, _) = match asked {
        Asked::Request(incoming) => match route_request(policy, &*incoming, d)? {
            Matched::Route(found) => (incoming, found),
            Matched::Own(own) => {
                if own == Own::Capabilities {
                    anyone(incoming.header(), callers, d, now)?;
                }
                return Ok(Next::Own(own));
            }
        },
        Asked::Evaluation(evaluation) => {
            let evaluation = *evaluation;
            let mut found = evaluation.routed;
            d.method = "AUTHZEN".into();
            d.route = found.route.name.clone();
            found.body = evaluation.body.transpose()?;
            described = Box::new(evaluation.head);
            (&mut *described, found)
        }
    };
    let found = routed.insert(found);
    let mut person = None;
    let authenticated = match authenticate(&found.route, incoming.header(), callers, d, now).await {
        Ok(Authenticated::NobodySignedIn) => return Ok(Next::SignIn),
        Ok(who) => {
            person = who.person();
            // Read only for a caller who may call, and only when the route's rule reads it.
            if let (None, Some(rule)) = (&found.body, &found.route.body) {
                d.stage = Stage::Route;
                let read = read_body(rule, incoming).await?;
                found.body = Some(read);
            }
            Ok(())
        }
        // A person's sign-in holds in either mode: shadow mode rolls out what evidence decides.
        Err(reject) if found.route.login => return Err(reject),
        Err(reject) => Err(reject),
    };
    let req = incoming.header();
    // A refusal of the request's form, whatever stage came before it.
    let method_field = body::method_field_scan(&found.route, req, incoming.has_body())
        .inspect_err(|_| d.stage = Stage::Route)?;
    let authorised = match authenticated {
        Ok(()) => authorise(policy.config, found, req, evidence, d, now).await,
        Err(reject) => Err(reject),
    };
    authorise::enforce(found.route.mode, authorised, d)?;
    Ok(Next::Forward(Forward {
        person,
        method_field,
    }))
}

/// What the route stage found. Moved once, on the way to the next stage: a box would cost every
/// request an allocation.
#[allow(clippy::large_enum_variant)]
enum Matched {
    /// A route: the request matched to it.
    Route(Routed),
    /// One of the gateway's own endpoints.
    Own(Own),
}

/// The route stage: one valid `Host`, the canonical path, the gateway's own endpoints, the route.
/// The body its rule reads, if it reads one, is read once a caller is found who may call.
fn route_request(
    policy: &Policy<'_>,
    incoming: &dyn Incoming,
    d: &mut Decision,
) -> Result<Matched, Reject> {
    let req = incoming.header();
    d.method = logged_method(&req.method);
    d.stage = Stage::Answer;
    check_host(req, incoming.described())?;
    let canonical = canonical_path(req.uri.path()).map_err(Reject::BadPath)?;
    d.path = logged(&canonical.path).into();
    if let Some(own) = own_endpoint(policy, &canonical.path) {
        d.route = own.route();
        return Ok(Matched::Own(own));
    }
    let routed = route::route(policy.routes, req, canonical, incoming.has_body(), d)?;
    Ok(Matched::Route(routed))
}

/// Who calls, as the authentication stage found it.
enum Authenticated {
    /// Anyone: a public route.
    Anyone,
    /// The party the bearer token names.
    Party,
    /// The person signed in, on a route for people.
    Person(Person),
    /// A route for people, and no one signed in.
    NobodySignedIn,
}

impl Authenticated {
    fn person(self) -> Option<Person> {
        match self {
            Authenticated::Person(person) => Some(person),
            _ => None,
        }
    }
}

/// The authentication stage, the one place a caller is found and recorded: on a route for people
/// the person signed in (a broker acts for parties, never for a person), on any other route but
/// a public one the party its bearer token names.
async fn authenticate(
    route: &Route,
    req: &RequestHeader,
    callers: &dyn Callers,
    d: &mut Decision,
    now: Timestamp,
) -> Result<Authenticated, Reject> {
    if route.login {
        d.stage = Stage::Authentication;
        if BROKER_HEADERS.iter().any(|h| req.headers.contains_key(*h)) {
            return Err(Reject::BadHeader(HeaderRefusal::BrokerWithPerson));
        }
        let Some(person) = callers.person(req, now).await? else {
            return Ok(Authenticated::NobodySignedIn);
        };
        d.called_by_person(&person.sub);
        return Ok(Authenticated::Person(person));
    }
    if route.auth == Auth::Public {
        return Ok(Authenticated::Anyone);
    }
    d.stage = Stage::Authentication;
    d.called_by_party(callers.party(req, now)?);
    Ok(Authenticated::Party)
}

/// The authentication stage where anyone may call and a caller may say who it is
/// (`/capabilities`): a party, when a bearer token comes with the request (and then a valid one).
fn anyone(
    req: &RequestHeader,
    callers: &dyn Callers,
    d: &mut Decision,
    now: Timestamp,
) -> Result<(), Reject> {
    if req.headers.contains_key(http::header::AUTHORIZATION) {
        d.stage = Stage::Authentication;
        d.called_by_party(callers.party(req, now)?);
    }
    Ok(())
}

/// The JSON body of a route whose rule reads it: given whole, within the route's bound, read one
/// way only, with every value the rule takes.
async fn read_body(rule: &BodyRule, incoming: &mut dyn Incoming) -> Result<ReadBody, Reject> {
    if !incoming.has_body() {
        return Err(Reject::Body(BodyRefusal::Missing));
    }
    let bytes = incoming.body(rule.max_bytes).await?;
    read_rule_body(rule, &incoming.header().headers, &bytes)
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
