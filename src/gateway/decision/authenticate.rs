//! Who calls: the one place a request is authenticated. Two sources of a caller sit behind the
//! `Callers` seam, as evidence sits behind `Evidence`: a party with one of this gateway's access
//! tokens (the bearer), and a person signed in at the gateway (the session cookie). The proxy
//! reads both (`Live`); the decision service reads bearer tokens only (`Bearer`: another proxy
//! holds no session of ours); `explain` and rule tests name the caller (`Named`).

use crate::access_token::{AccessClaims, AccessTokenError, AccessTokens};
use crate::gateway::people::login::{Login, Person};
use crate::gateway::people::sessions::SessionStore;
use crate::gateway::reject::{Reject, ServiceRefusal};
use crate::request::{single_header, HeaderProblem};
use crate::scheme::Timestamp;
use crate::telemetry::trace::Step;
use async_trait::async_trait;
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use pingora::http::RequestHeader;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Where the caller of a request comes from.
#[async_trait]
pub trait Callers: Send + Sync {
    /// The party a route that needs one is called by: 401 without a valid access token.
    fn party(&self, req: &RequestHeader, now: Timestamp) -> Result<arcstr::ArcStr, Reject>;

    /// The verified claims that name the party of `req`, for `stands` to judge again without
    /// reading a request; None where the caller has none to keep (its decisions are then not
    /// kept).
    fn credential(&self, _req: &RequestHeader, _now: Timestamp) -> Option<Arc<AccessClaims>> {
        None
    }

    /// Whether `credential`, as `credential` gave it, still names its party at `now`. What is
    /// asked must not outlive the configuration it was given under (a kept decision lives in
    /// its snapshot): the keys that verified the claims are not judged again.
    fn stands(&self, _credential: &Arc<AccessClaims>, _now: Timestamp) -> bool {
        false
    }

    /// The person a route for people acts for; None: no one is signed in.
    async fn person(&self, req: &RequestHeader, now: Timestamp) -> Result<Option<Person>, Reject>;
}

/// The party an access token of this gateway names: 401 when the token is missing, malformed,
/// forged or expired. A span of its own in a traced request. No I/O, no RSA.
pub fn bearer(
    req: &RequestHeader,
    tokens: &AccessTokens,
    now: Timestamp,
) -> Result<Arc<AccessClaims>, Reject> {
    traced(|| validate(req, tokens, now))
}

/// Claims verified before, judged again at `now` as `bearer` judges them: in a span of their
/// own too, that a traced request shows its caller judged.
fn in_time(
    claims: &Arc<AccessClaims>,
    tokens: &AccessTokens,
    now: Timestamp,
) -> Result<Arc<AccessClaims>, Reject> {
    traced(|| match tokens.in_time(claims, now) {
        Ok(()) => Ok(claims.clone()),
        Err(e) => Err(Reject::Unauthenticated(e)),
    })
}

/// What `authenticate` comes to, in a span named `authenticate`.
fn traced(
    authenticate: impl FnOnce() -> Result<Arc<AccessClaims>, Reject>,
) -> Result<Arc<AccessClaims>, Reject> {
    let mut step = Step::start(SpanKind::Internal, || "authenticate", Vec::new);
    let result = authenticate();
    match &result {
        Ok(claims) => {
            step.record(|| vec![KeyValue::new("ishare.client.party_id", claims.sub.clone())]);
            step.end(|| ("authenticated", false));
        }
        Err(reject) => step.end(|| (reject.row().reason, false)),
    }
    result
}

fn validate(
    req: &RequestHeader,
    tokens: &AccessTokens,
    now: Timestamp,
) -> Result<Arc<AccessClaims>, Reject> {
    let value = single_header(&req.headers, http::header::AUTHORIZATION).map_err(|problem| {
        Reject::Unauthenticated(match problem {
            HeaderProblem::Repeated => AccessTokenError::Invalid,
            HeaderProblem::NotText | HeaderProblem::Empty => AccessTokenError::NotBearer,
        })
    })?;
    tokens
        .validate_header(value, now)
        .map_err(Reject::Unauthenticated)
}

/// The proxy's callers: bearer tokens, and people's sessions where sign-in is configured.
pub struct Live<'a> {
    pub tokens: &'a AccessTokens,
    pub login: Option<&'a Login>,
    pub sessions: &'a SessionStore,
}

#[async_trait]
impl Callers for Live<'_> {
    fn party(&self, req: &RequestHeader, now: Timestamp) -> Result<arcstr::ArcStr, Reject> {
        bearer(req, self.tokens, now).map(|claims| claims.sub.as_str().into())
    }

    /// The bearer token's claims, verified under this configuration's key: the same token (a
    /// kept decision's head holds it byte for byte) needs only its times judged again.
    fn credential(&self, req: &RequestHeader, now: Timestamp) -> Option<Arc<AccessClaims>> {
        validate(req, self.tokens, now).ok()
    }

    fn stands(&self, credential: &Arc<AccessClaims>, now: Timestamp) -> bool {
        in_time(credential, self.tokens, now).is_ok()
    }

    /// A session's person, whose requests that change something come from the gateway's own
    /// pages (a request from another site carries the cookie too).
    async fn person(&self, req: &RequestHeader, now: Timestamp) -> Result<Option<Person>, Reject> {
        // A route for people without sign-in configured is refused when the config is checked.
        let login = self.login.ok_or(Reject::Internal)?;
        let Some(person) = login.person(&req.headers, self.sessions, now).await? else {
            return Ok(None);
        };
        login.check_same_origin(&req.method, &req.headers)?;
        Ok(Some(person))
    }
}

/// The decision service's callers: the bearer token of the request another proxy holds. People
/// sign in with a session cookie at the gateway itself, which no other proxy holds.
pub struct Bearer<'a>(pub &'a AccessTokens);

#[async_trait]
impl Callers for Bearer<'_> {
    fn party(&self, req: &RequestHeader, now: Timestamp) -> Result<arcstr::ArcStr, Reject> {
        bearer(req, self.0, now).map(|claims| claims.sub.as_str().into())
    }

    async fn person(
        &self,
        _req: &RequestHeader,
        _now: Timestamp,
    ) -> Result<Option<Person>, Reject> {
        Err(ServiceRefusal::RouteForPeople.into())
    }
}

/// The caller `explain` and rule tests name.
#[derive(Clone, Debug)]
pub enum CallerArg {
    /// A party (or, on a route for people, a person's identifier), taken as authenticated.
    As(String),
    /// An access token of this gateway, validated as the proxy would.
    Token(String),
}

/// The callers of `explain` and rule tests: a party or a person's identifier taken as
/// authenticated, or an access token validated as the proxy would.
pub struct Named<'a> {
    pub caller: Option<&'a CallerArg>,
    pub tokens: &'a AccessTokens,
}

#[async_trait]
impl Callers for Named<'_> {
    fn party(&self, req: &RequestHeader, now: Timestamp) -> Result<arcstr::ArcStr, Reject> {
        match self.caller {
            Some(CallerArg::As(id)) => Ok(id.as_str().into()),
            _ => bearer(req, self.tokens, now).map(|claims| claims.sub.as_str().into()),
        }
    }

    async fn person(
        &self,
        _req: &RequestHeader,
        _now: Timestamp,
    ) -> Result<Option<Person>, Reject> {
        Ok(match self.caller {
            Some(CallerArg::As(sub)) => Some(Person {
                sub: sub.clone(),
                attributes: BTreeMap::new(),
            }),
            _ => None,
        })
    }
}
