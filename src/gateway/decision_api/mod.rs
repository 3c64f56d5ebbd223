//! The decision service: the proxy's decisions answered to other proxies and to AuthZEN clients.
//! nginx (`auth_request`) and Envoy (`ext_authz`, HTTP and gRPC) describe the request they hold;
//! it is decided as the proxy decides (`decision::decide` with the live evidence, under the
//! current snapshot), logged in the decision log and counted, and answered with what the
//! backend receives (allowed) or the refusal with its reason and decision id.

pub mod authzen;
pub mod connection;
pub mod forwarded;
pub mod grpc;
pub mod server;

use crate::gateway::backend::forward::{to_remove, Told};
use crate::gateway::connections::body;
use crate::gateway::decision::authenticate::Bearer;
use crate::gateway::decision::decide::{self, Asked, Decided, Next};
use crate::gateway::decision::dry_run::{request_header, DescribedRequest, DryRunError};
use crate::gateway::decision::incoming::{Held, HeldBody};
use crate::gateway::decision::route::Routed;
use crate::gateway::decision::Decision;
use crate::gateway::reject::{Answer, Reject, ServiceRefusal, DECISION_ID_HEADER};
use crate::gateway::snapshot::{GatewayState, Snapshot};
use crate::request::body::BodyRefusal;
use crate::scheme::vocabulary::CREDENTIAL_HEADERS;
use crate::scheme::Timestamp;
use crate::telemetry::metrics::Outcome;
use std::time::{Duration, Instant};

/// The header an answer names its reason code in, for a proxy that passes on only headers.
pub const REASON_HEADER: &str = "x-decision-reason";
/// The caller's identifier of a request, echoed on its answer.
pub const REQUEST_ID_HEADER: &str = "x-request-id";
/// The longest `X-Request-ID` echoed: UUIDs, nginx's `$request_id` and trace ids fit well.
pub const REQUEST_ID_MAX: usize = 128;

/// Whether an `X-Request-ID` is echoed: 1 to `REQUEST_ID_MAX` visible ASCII characters, so that
/// what the answer carries is bounded and what a log or a PEP reads back is plain text.
pub fn echoable(id: &http::HeaderValue) -> bool {
    let bytes = id.as_bytes();
    (1..=REQUEST_ID_MAX).contains(&bytes.len()) && bytes.iter().all(u8::is_ascii_graphic)
}

/// Which interface asked: the `interface` label of `decision_api_requests_total`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interface {
    Nginx,
    ExtAuthzHttp,
    ExtAuthzGrpc,
    AuthZen,
}

impl Interface {
    pub fn as_str(self) -> &'static str {
        match self {
            Interface::Nginx => "nginx",
            Interface::ExtAuthzHttp => "ext_authz_http",
            Interface::ExtAuthzGrpc => "ext_authz_grpc",
            Interface::AuthZen => "authzen",
        }
    }
}

/// A decision as the decision service answers it.
pub struct Verdict {
    pub decision: Decision,
    /// The refusal, as the proxy would answer it; None: allowed.
    pub refusal: Option<Answer>,
    /// What the backend receives when allowed: the party headers, the licence headers and
    /// X-Decision-Id, as the proxy sets them.
    pub upstream_headers: Vec<(String, String)>,
    /// What the proxy in front must remove from the request before the backend gets it: the
    /// scheme's credentials, and the party headers the decision does not set (Envoy removes them
    /// as told; nginx's recipe clears them).
    pub remove_upstream: Vec<String>,
}

impl Verdict {
    pub fn allowed(&self) -> bool {
        self.refusal.is_none()
    }

    /// The status the proxy would answer with itself, or 200.
    pub fn status(&self) -> u16 {
        self.refusal.as_ref().map_or(200, |a| a.status)
    }

    /// The reason code: `granted`, `authenticated`, `public`, or the refusal's.
    pub fn reason(&self) -> &'static str {
        self.decision.reason
    }
}

/// The original request cannot be read off what the proxy in front sent.
pub fn invalid_original(why: impl Into<String>) -> Reject {
    ServiceRefusal::InvalidOriginalRequest(why.into()).into()
}

/// Why a request the decision service was given cannot be decided.
fn undecidable(e: DryRunError) -> Reject {
    match e {
        DryRunError::Method(_) | DryRunError::Target(_) | DryRunError::Header(_) => {
            invalid_original(e.to_string())
        }
        DryRunError::OwnEndpoint(path) => ServiceRefusal::OwnEndpoint(path).into(),
        // The live registry failed in a way the stages call internal.
        DryRunError::RegistryNotGiven => Reject::Internal,
    }
}

/// A setting of `[decision_api]` as the current configuration says, or its default.
fn setting<T>(
    state: &GatewayState,
    pick: impl Fn(&crate::config::model::DecisionApiSettings) -> T,
    default: T,
) -> T {
    state
        .current
        .load()
        .config
        .decision_api
        .as_ref()
        .map_or(default, pick)
}

/// How long a request to the decision service may take, as the current configuration says.
pub fn deadline(state: &GatewayState) -> Duration {
    setting(
        state,
        |s| s.timeout,
        crate::config::defaults::DECISION_API_TIMEOUT,
    )
}

/// The largest body the decision service reads, as the current configuration says.
pub fn max_body(state: &GatewayState) -> usize {
    let default = crate::config::defaults::DECISION_API_MAX_BODY;
    setting(state, |s| s.max_body_bytes, default)
}

/// Envoy's mark of a body it cut short at `max_request_bytes`.
const PARTIAL_BODY: &str = "x-envoy-auth-partial-body";

/// Decide a request another proxy holds, as the proxy decides (`decision::decide`), under the
/// current snapshot, with the live evidence; the token in Authorization names the caller. A body
/// Envoy cut short is none to decide on. Logged and counted.
pub async fn decide(
    state: &GatewayState,
    interface: Interface,
    mut req: DescribedRequest,
) -> Verdict {
    let started = Instant::now();
    let snap = state.current.load_full();
    let partial = req.headers.iter().any(|(name, value)| {
        name.eq_ignore_ascii_case(PARTIAL_BODY) && value.trim().eq_ignore_ascii_case("true")
    });
    req.headers
        .retain(|(name, _)| !name.eq_ignore_ascii_case(PARTIAL_BODY));
    if partial {
        req.body = None;
    }
    let header = match request_header(&req) {
        Ok(header) => header,
        Err(e) => return refused_unread(state, interface, undecidable(e)),
    };
    let mut held = Held {
        header: &header,
        // Without the body, one is taken to follow a request that names its type.
        has_body: req.body.is_some() || header.headers.contains_key(http::header::CONTENT_TYPE),
        body: match partial {
            true => HeldBody::Refused(Reject::Body(BodyRefusal::Partial)),
            false => req.held_body(),
        },
        described: true,
    };
    let evidence = snap.authz.with(&snap.trust);
    let decided = decide::decide(
        &snap.policy(),
        Asked::Request(&mut held),
        &Bearer(&snap.tokens),
        &evidence,
        Timestamp::now(),
    )
    .await;
    let Decided {
        decision: mut d,
        routed,
        next,
    } = decided;
    let mut upstream_headers = Vec::new();
    let mut remove_upstream = Vec::new();
    let refusal = match (next, routed) {
        (Next::Forward(forward), Some(routed)) => {
            let body_unseen = match (forward.method_field, &req.body) {
                (None, _) => Ok(false),
                (Some(_), None) => Ok(true),
                // The body was given: scanned here as the proxy scans it on its way.
                (Some(mut scan), Some(body)) => {
                    body::scan_chunk(&mut scan, Some(body), true).map(|()| false)
                }
            };
            match body_unseen.and_then(|unseen| as_decided(&snap, &req, &routed, unseen)) {
                Err(refusal) => Some(refusal),
                Ok(()) => {
                    upstream_headers = backend_headers(&snap, &routed.route, &d);
                    remove_upstream = to_remove(&snap.config, &routed.route, &upstream_headers);
                    None
                }
            }
        }
        (Next::Own(_), _) => Some(ServiceRefusal::OwnEndpoint(d.path.to_string()).into()),
        (Next::Refuse(reject), _) => Some(reject),
        (Next::SignIn | Next::Forward(_), _) => Some(Reject::Internal),
    };
    let refusal = refusal.map(|reject| {
        if d.refusal.is_none() || d.outcome == Outcome::ShadowDenied {
            d.grant = None;
            d.refused(&reject);
        }
        Answer::from(&reject).for_decision(d.id.as_str())
    });
    d.decided_in.get_or_insert(started.elapsed());
    let verdict = Verdict {
        decision: d,
        refusal,
        upstream_headers,
        remove_upstream,
    };
    record(state, &snap, interface, &verdict, started.elapsed());
    verdict
}

/// Whether the proxy in front passes on what was decided on, as the gateway would have: the
/// target as written is the one the gateway forwards (the proxy in front passes it as written),
/// and the request carries no header the gateway never lets through (method and path overrides,
/// look-alikes of the headers it sets or a rule reads). The scheme's credentials and the party
/// headers are exempt: the proxy in front removes or overwrites them (`remove_upstream`, the
/// recipes). AuthZEN describes no request a proxy forwards.
fn as_decided(
    snap: &Snapshot,
    req: &DescribedRequest,
    routed: &Routed,
    body_unseen: bool,
) -> Result<(), Reject> {
    let decided = &routed.upstream_uri;
    let (path, query) = match req.target.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (req.target.as_str(), None),
    };
    let decoded = |q: &str| percent_encoding::percent_decode_str(q).collect::<Vec<u8>>();
    let same_query = match (query.filter(|q| !q.is_empty()), decided.query()) {
        (None, None) => true,
        (Some(raw), Some(ours)) => !raw.contains('+') && decoded(raw) == decoded(ours),
        _ => false,
    };
    if path != decided.path() || !same_query {
        return Err(ServiceRefusal::NotAsDecided(decided.to_string()).into());
    }
    if body_unseen {
        return Err(ServiceRefusal::BodyUnseen.into());
    }
    let route = &routed.route;
    let exempt = exempt_headers(snap);
    let withheld = snap.withheld(route);
    let refused = req.headers.iter().map(|(name, _)| name).find(|name| {
        !exempt.iter().any(|e| e.eq_ignore_ascii_case(name))
            // The proxy in front passes on trace context as it traces.
            && withheld.removes(&name.to_ascii_lowercase(), false)
    });
    match refused {
        Some(name) => Err(ServiceRefusal::HeaderNotPassable(name.clone()).into()),
        None => Ok(()),
    }
}

/// The headers the proxy in front removes or overwrites itself: the scheme's credentials, the
/// party headers, and what it sets about the hop.
fn exempt_headers(snap: &Snapshot) -> [&str; 10] {
    [
        http::header::AUTHORIZATION.as_str(),
        CREDENTIAL_HEADERS[0],
        CREDENTIAL_HEADERS[1],
        CREDENTIAL_HEADERS[2],
        CREDENTIAL_HEADERS[3],
        snap.config.party_header.as_str(),
        snap.config.original_consumer_header.as_str(),
        "x-forwarded-for",
        "x-forwarded-proto",
        DECISION_ID_HEADER,
    ]
}

/// What the backend receives about an allowed request, as the proxy sets it (`Told`): the caller
/// and the consumer a broker acts for in the `[forwarding]` headers and the decision's id; and the
/// route's licence headers.
fn backend_headers(
    snap: &Snapshot,
    route: &crate::config::model::Route,
    d: &Decision,
) -> Vec<(String, String)> {
    let original = (d.grant.as_ref()).and_then(|g| g.original_consumer.as_deref());
    let told = Told::new(route, d.caller_id(), original, d.id.as_str());
    let mut headers: Vec<(String, String)> = (told.headers(&snap.config))
        .map(|(name, value)| (name.to_string(), value.to_string()))
        .collect();
    if let Some(grant) = &d.grant {
        let licences = grant.licence_headers(route);
        headers
            .extend(licences.map(|(name, value)| (name.into_owned(), value.text().into_owned())));
    }
    headers
}

/// The decision log's line, the access log's and the count of a decision.
pub fn record(
    state: &GatewayState,
    snap: &Snapshot,
    interface: Interface,
    verdict: &Verdict,
    elapsed: Duration,
) {
    let d = &verdict.decision;
    let status = verdict.status();
    let outcome = match (verdict.allowed(), d.outcome) {
        (true, Outcome::ShadowDenied) => "shadow_denied",
        (true, _) => "allowed",
        (false, o) => o.as_str(),
    };
    state
        .shared
        .metrics
        .decision_api
        .with_label_values(&[interface.as_str(), outcome])
        .inc();
    tracing::info!(
        target: "access",
        interface = interface.as_str(),
        route = %d.route,
        method = %d.method,
        path = %d.path,
        client = d.caller_id().unwrap_or("-"),
        status,
        outcome,
        reason = d.reason,
        decision_id = %d.id,
        duration_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3,
    );
    if let Some(log) = &snap.decision_log {
        log.write(d, status, elapsed);
    }
}

/// A request refused before the stages could read it: logged and counted as a decision.
pub fn refused_unread(state: &GatewayState, interface: Interface, refusal: Reject) -> Verdict {
    let started = Instant::now();
    let snap = state.current.load_full();
    let mut decision = Decision::new();
    decision.refused(&refusal);
    let answer = Answer::from(&refusal).for_decision(decision.id.as_str());
    decision.decided_in = Some(started.elapsed());
    let verdict = Verdict {
        decision,
        refusal: Some(answer),
        upstream_headers: Vec::new(),
        remove_upstream: Vec::new(),
    };
    record(state, &snap, interface, &verdict, started.elapsed());
    verdict
}
