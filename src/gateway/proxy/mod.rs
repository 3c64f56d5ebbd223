//! The proxy's phases, as pingora calls them: `request_filter` decides (`decision::decide`) and
//! turns the decision into what the proxy does (forward, refuse, answer at one of the gateway's
//! own endpoints, send a person to sign in); then the request rewritten for the backend, the
//! licence headers on the response, error answers, and the access log and metrics.

pub mod spans;
pub mod token_endpoint;

use crate::config::model::{Route, B3};
use crate::gateway::backend::forward;
use crate::gateway::capabilities;
use crate::gateway::connections::body::{self, BodyClock};
use crate::gateway::connections::{client_ip, is_tls, Connections, Guarded, StreamLimit};
use crate::gateway::decision::authenticate::Live;
use crate::gateway::decision::decide::{Next, Own};
use crate::gateway::decision::incoming::Incoming;
use crate::gateway::decision::{logged, logged_method, Decision, Stage};
use crate::gateway::people::login::{Context as LoginContext, Login};
use crate::gateway::reject::{self, respond, Answer, Reject};
use crate::gateway::snapshot::{self, GatewayState, Latency, Snapshot};
use crate::request::form::MethodFieldScan;
use crate::scheme::Timestamp;
use crate::telemetry::metrics::Outcome;
use crate::telemetry::trace;
use async_trait::async_trait;
use http::Method;
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::modules::http::HttpModules;
use pingora::proxy::{FailToProxy, ProxyHttp, Session};
use pingora::upstreams::peer::HttpPeer;
use pingora::{Error, ErrorSource, ErrorType};
use spans::RequestTrace;
use std::sync::Arc;
use std::time::Instant;

/// The policy enforcement gateway.
pub struct Gateway {
    state: Arc<GatewayState>,
    /// The connection limits of the listeners, which HTTP/2 streams count against.
    streams: Vec<StreamLimit>,
    /// The open connections, which an HTTP/2 stream takes a permit of and closes when its body is
    /// late.
    connections: Connections,
}

impl Gateway {
    pub fn new(
        state: Arc<GatewayState>,
        streams: Vec<StreamLimit>,
        connections: Connections,
    ) -> Self {
        Gateway {
            state,
            streams,
            connections,
        }
    }

    /// Admit an HTTP/2 stream: a permit of its connection and of its listener, and a watchdog
    /// that closes the connection when the stream's body is late (its reads have no timeout).
    fn admit_stream(&self, session: &mut Session, ctx: &mut Ctx) -> Result<(), Reject> {
        let full = || Reject::Unavailable(reject::Unavailable::ListenerFull);
        let local = session.server_addr().and_then(|a| a.as_inet()).copied();
        let client = session.client_addr().and_then(|a| a.as_inet()).copied();
        let connection = client
            .zip(local)
            .and_then(|(c, l)| self.connections.get(c, l));
        if let Some(connection) = &connection {
            ctx.stream_permits
                .push(connection.stream_permit().ok_or_else(full)?);
        }
        if let Some(permit) = StreamLimit::admit(&self.streams, local).map_err(|_| full())? {
            ctx.stream_permits.push(permit);
        }
        if let (Some(clock), Some(connection)) = (ctx.body, connection) {
            if !session.is_body_done() {
                ctx.watchdog = Some(body::Watchdog::start(clock, move || connection.close()));
            }
        }
        Ok(())
    }
}

/// What one request carries through the phases.
pub struct Ctx {
    started: Instant,
    snap: Option<Arc<Snapshot>>,
    route: Option<Arc<Route>>,
    /// What was decided, and on what: its route is the bounded metrics label (the route name, or
    /// what the gateway answered itself).
    decision: Decision,
    /// The path and query the backend receives: what the decision was made on.
    upstream_uri: Option<http::Uri>,
    connect_attempts: usize,
    /// A refusal decided while choosing the backend, answered by `fail_to_proxy`.
    reject: Option<Reject>,
    /// What the backend is told about a signed-in person.
    person_headers: Vec<(http::HeaderName, String)>,
    /// The time the request body may still take.
    body: Option<BodyClock>,
    /// An HTTP/2 stream's share of its connection's and its listener's limits.
    stream_permits: Vec<tokio::sync::OwnedSemaphorePermit>,
    /// The deadline of an HTTP/2 stream's body.
    watchdog: Option<body::Watchdog>,
    /// The scan of the body for a `_method` field, on a route that does not accept one.
    method_field: Option<MethodFieldScan>,
    /// The body the decision was made on (a route whose rule reads it): what the backend gets.
    decided_body: Option<bytes::Bytes>,
    /// The request's spans, when tracing is on.
    trace: RequestTrace,
}

impl Ctx {
    /// Record a refusal in the decision; the answer to write, which names the decision.
    fn refuse(&mut self, reject: &Reject) -> Answer {
        let row = self.decision.refused(reject);
        Answer::refusal(reject, row).for_decision(self.decision.id.as_str())
    }
}

/// People's sign-in at the gateway's own paths: the return from the identity provider, and
/// logout (a page on GET, the sign-out on POST).
async fn sign_in_path(
    session: &Session,
    d: &mut Decision,
    login: &Login,
    cx: &LoginContext<'_>,
    own: Own,
) -> Result<Answer, Reject> {
    let req = session.req_header();
    if own == Own::SignInReturn {
        if req.method != Method::GET {
            return Err(Reject::MethodNotAllowed(vec![Method::GET]));
        }
        let (answer, person) = login
            .finish(req.uri.query(), &req.headers, cx, Timestamp::now())
            .await?;
        d.called_by_person(&person.sub);
        d.outcome = Outcome::SignedIn;
        return Ok(answer);
    }
    match req.method {
        Method::GET | Method::HEAD => {
            d.outcome = Outcome::Local;
            Ok(login.logout_page())
        }
        Method::POST => {
            let answer = login.logout(&req.headers, cx.store).await?;
            d.outcome = Outcome::SignedOut;
            Ok(answer)
        }
        _ => {
            let allowed = vec![Method::GET, Method::HEAD, Method::POST];
            Err(Reject::MethodNotAllowed(allowed))
        }
    }
}

/// The request as the proxy holds it: its head off the session, its body read from the client
/// only when the sequence asks for it (a route's rule reads it, and a caller who may call was
/// found), within the body's deadline (on HTTP/2 watched), and kept as the body forwarded.
struct FromClient<'a> {
    session: &'a mut Session,
    has_body: bool,
    clock: Option<&'a mut BodyClock>,
    watchdog: &'a mut Option<body::Watchdog>,
    read: &'a mut Option<bytes::Bytes>,
}

#[async_trait]
impl Incoming for FromClient<'_> {
    fn header(&self) -> &RequestHeader {
        self.session.req_header()
    }

    fn has_body(&self) -> bool {
        self.has_body
    }

    fn described(&self) -> bool {
        false
    }

    async fn body(&mut self, limit: usize) -> Result<bytes::Bytes, Reject> {
        // The clock starts with the request's head, before any phase decides.
        let clock = self.clock.as_deref_mut().ok_or(Reject::Internal)?;
        let watchdog = self.watchdog.as_ref();
        let read = body::read_to_decide(self.session, limit, clock, watchdog).await;
        // The body has arrived (or never will): its deadline no longer runs.
        *self.watchdog = None;
        let bytes = read?;
        *self.read = Some(bytes.clone());
        Ok(bytes)
    }
}

impl Gateway {
    /// Decide the request (`decision::decide`), then turn the decision into what the proxy does:
    /// None to forward it, or the answer of the gateway itself.
    async fn act(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
    ) -> Result<Option<Answer>, Reject> {
        let has_body = !session.is_body_empty();
        let mut incoming = FromClient {
            session: &mut *session,
            has_body,
            clock: ctx.body.as_mut(),
            watchdog: &mut ctx.watchdog,
            read: &mut ctx.decided_body,
        };
        let callers = Live {
            tokens: &snap.tokens,
            login: snap.login.as_deref(),
            sessions: &snap.stores.sessions,
        };
        let evidence = snap.authz.with(&snap.trust);
        let decided = snap
            .as_it_came
            .decide(
                &snap.policy(),
                &mut incoming,
                &callers,
                &evidence,
                Timestamp::now(),
            )
            .await;
        ctx.decision = decided.decision;
        match (decided.next, decided.routed) {
            (Next::Forward(forward), Some(routed)) => {
                ctx.method_field = forward.method_field;
                // A body read to decide on is scanned whole now, before anything is forwarded.
                if let (Some(scan), Some(decided)) = (ctx.method_field.as_mut(), &ctx.decided_body)
                {
                    body::scan_chunk(scan, Some(decided), true)?;
                    ctx.method_field = None;
                }
                if let (Some(person), Some(login)) = (&forward.person, &snap.login) {
                    ctx.person_headers = login.headers_for(person);
                }
                ctx.upstream_uri = Some(routed.upstream_uri.clone());
                ctx.route = Some(routed.route.clone());
                Ok(None)
            }
            (Next::Refuse(reject), _) => Err(reject),
            (Next::Own(own), _) => self.own_endpoint(session, ctx, snap, own).await.map(Some),
            (Next::SignIn, Some(routed)) => {
                let login = snap.login.as_deref().ok_or(Reject::Internal)?;
                let req = session.req_header();
                let return_to = match req.uri.query() {
                    Some(q) => format!("{}?{q}", routed.path),
                    None => routed.path.clone(),
                };
                let trusted = &snap.config.trusted_proxies;
                let client = forward::client_address(client_ip(session), &req.headers, trusted);
                let cx = snap.login_context();
                let answer = login
                    .start(&req.method, &return_to, client, &cx, Timestamp::now())
                    .await?;
                ctx.decision.outcome = Outcome::LoginStarted;
                Ok(Some(answer))
            }
            (Next::Forward(_) | Next::SignIn, _) => Err(Reject::Internal),
        }
    }

    /// The answer of one of the gateway's own endpoints.
    async fn own_endpoint(
        &self,
        session: &mut Session,
        ctx: &mut Ctx,
        snap: &Snapshot,
        own: Own,
    ) -> Result<Answer, Reject> {
        let metrics = &self.state.shared.metrics;
        match own {
            Own::Token => {
                let clock = ctx
                    .body
                    .get_or_insert_with(|| BodyClock::new(&snap.config.server, Instant::now()));
                let answered = token_endpoint::answer(session, snap, clock).await;
                let label = answered
                    .as_ref()
                    .map_or_else(|r| r.row().reason, |_| "issued");
                metrics.tokens.with_label_values(&[label]).inc();
                let (answer, client) = answered?;
                ctx.decision.called_by_party(client.into());
                ctx.decision.outcome = Outcome::TokenIssued;
                Ok(answer)
            }
            Own::Capabilities => {
                // Its caller, if it named one, was authenticated with the decision.
                let method = &session.req_header().method;
                let caller = ctx.decision.caller_id();
                let answer = capabilities::answer(method, &snap.capabilities, caller, metrics)?;
                ctx.decision.outcome = Outcome::Local;
                Ok(answer)
            }
            Own::SignInReturn | Own::Logout => {
                let login = snap.login.as_deref().ok_or(Reject::Internal)?;
                let cx = snap.login_context();
                sign_in_path(session, &mut ctx.decision, login, &cx, own).await
            }
        }
    }
}

#[async_trait]
impl ProxyHttp for Gateway {
    /// Boxed: pingora holds a request's context in more than one place of the future it makes
    /// for every request, and copies that future whole into a box; a pointer there makes each
    /// copy shorter by about three times the context's size.
    type CTX = Box<Ctx>;

    /// None: pingora's default is a response compression module switched off, which would
    /// cost every request five allocations (the module, the list of modules, a boxed future
    /// for each of its three hooks). The backend's answer is passed on in the encoding it chose.
    fn init_downstream_modules(&self, _modules: &mut HttpModules) {}

    fn new_ctx(&self) -> Box<Ctx> {
        Box::new(Ctx {
            started: Instant::now(),
            snap: None,
            route: None,
            decision: Decision::new(),
            upstream_uri: None,
            connect_attempts: 0,
            reject: None,
            person_headers: Vec::new(),
            body: None,
            stream_permits: Vec::new(),
            watchdog: None,
            method_field: None,
            decided_body: None,
            trace: RequestTrace::default(),
        })
    }

    async fn early_request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<()> {
        // Requests in flight finish under the snapshot they started with.
        let snap = self.state.current.load_full();
        // The request's head has just been read: the clock read when the context was made.
        let mut clock = BodyClock::new(&snap.config.server, ctx.started);
        session.set_read_timeout(clock.next_read(0, ctx.started));
        // An answer the client does not read holds nothing for longer than a body read may.
        session.set_write_timeout(Some(snap.config.server.body_timeout));
        ctx.body = Some(clock);
        if let Some(phase) = session.stream().and_then(Guarded::phase_of) {
            phase.header_read();
        }
        ctx.snap = Some(snap);
        ctx.trace = RequestTrace::start(self.state.shared.tracing.as_ref(), session);
        Ok(())
    }

    async fn request_filter(
        &self,
        session: &mut Session,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<bool> {
        let snap = ctx
            .snap
            .get_or_insert_with(|| self.state.current.load_full())
            .clone();
        let admitted = match session.is_http2() {
            true => self.admit_stream(session, ctx),
            false => Ok(()),
        };
        let decided = match admitted {
            Ok(()) => trace::within(ctx.trace.context(), self.act(session, ctx, &snap)).await,
            Err(reject) => {
                ctx.decision.method = logged_method(&session.req_header().method);
                Err(reject)
            }
        };
        let answer = match decided {
            Ok(None) => {
                ctx.decision.decided_in = Some(ctx.started.elapsed());
                return Ok(false);
            }
            Ok(Some(answer)) => answer,
            Err(reject) => {
                let answer = ctx.refuse(&reject);
                let d = &ctx.decision;
                let lines = &self.state.shared.dependency_lines;
                if let Some(detail) = reject.log_detail() {
                    if let Some(left_out) = lines.admit(d.reason, Instant::now()) {
                        tracing::warn!(route = %d.route, reason = d.reason, decision_id = %d.id, left_out, "{detail}");
                    }
                }
                answer
            }
        };
        ctx.decision.decided_in = Some(ctx.started.elapsed());
        let answer = answer.for_decision(ctx.decision.id.as_str());
        // A body left unread: answer first, then read what is left within bounds before the
        // connection closes (HTTP/1.1) or the stream ends, so the client reads the answer.
        if !session.is_body_done() && !session.is_body_empty() {
            session.set_keepalive(None);
        }
        respond(session, &answer).await?;
        let mut clock = ctx
            .body
            .unwrap_or_else(|| BodyClock::new(&snap.config.server, ctx.started));
        body::linger(session, &mut clock).await;
        Ok(true)
    }

    async fn request_body_filter(
        &self,
        session: &mut Session,
        body: &mut Option<bytes::Bytes>,
        end_of_stream: bool,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<()> {
        // An upgraded connection (WebSocket) carries messages, not a request body.
        if session.was_upgraded() {
            return Ok(());
        }
        // The body decided on, read before the decision, is what goes to the backend: whole, on
        // each attempt to reach it, and nothing after it.
        if let Some(decided) = &ctx.decided_body {
            *body = Some(decided.clone());
            return Ok(());
        }
        if let Some(scan) = ctx.method_field.as_mut() {
            if let Err(reject) = body::scan_chunk(scan, body.as_deref(), end_of_stream) {
                // Neither this chunk nor any after it reaches the backend, which cannot act on a
                // body it did not receive whole.
                *body = None;
                ctx.reject = Some(reject);
                return Error::e_explain(ErrorType::HTTPStatus(400), "a refused request body");
            }
        }
        let Some(clock) = ctx.body.as_mut() else {
            return Ok(());
        };
        let received = body.as_ref().map_or(0, bytes::Bytes::len);
        if let Some(watchdog) = &ctx.watchdog {
            watchdog.received(received);
        }
        if end_of_stream {
            ctx.watchdog = None;
        }
        match clock.next_read(received, Instant::now()) {
            Some(wait) => {
                session.set_read_timeout(Some(wait));
                Ok(())
            }
            None if end_of_stream => Ok(()),
            None => Err(body::too_slow()),
        }
    }

    async fn upstream_peer(
        &self,
        session: &mut Session,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<Box<HttpPeer>> {
        let (Some(snap), Some(route)) = (&ctx.snap, &ctx.route) else {
            return Error::e_explain(ErrorType::InternalError, "no route chosen");
        };
        let pool = snap.upstreams.get(&route.upstream).ok_or_else(|| {
            Error::explain(ErrorType::InternalError, "the route's upstream is gone")
        })?;
        match forward::peer(pool) {
            Ok(peer) => {
                ctx.trace.backend_chosen(&route.upstream, session, &peer);
                Ok(peer)
            }
            Err(reject) => {
                ctx.reject = Some(reject);
                Error::e_explain(ErrorType::HTTPStatus(502), "no healthy backend")
            }
        }
    }

    async fn upstream_request_filter(
        &self,
        session: &mut Session,
        upstream: &mut RequestHeader,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<()> {
        let (Some(snap), Some(route)) = (&ctx.snap, &ctx.route) else {
            return Ok(());
        };
        let Some(pool) = snap.upstreams.get(&route.upstream) else {
            return Ok(());
        };
        let Some(uri) = &ctx.upstream_uri else {
            return Ok(());
        };
        let withheld = snap.withheld(route);
        let forwarding = forward::Forwarding {
            route,
            pool,
            uri,
            withheld: &withheld,
            traced: ctx.trace.is_on(),
            told: forward::Told::new(
                route,
                ctx.decision.caller_id(),
                (ctx.decision.grant.as_ref()).and_then(|g| g.original_consumer.as_deref()),
                ctx.decision.id.as_str(),
            ),
            config: &snap.config,
            client_addr: client_ip(session),
            tls: is_tls(session),
            person: &ctx.person_headers,
            own_cookies: snap.login.as_ref().map_or(&[], |l| l.cookie_names()),
        };
        forward::rewrite_request(upstream, &forwarding)?;
        if let Some(decided) = &ctx.decided_body {
            forward::frame_decided_body(upstream, decided.len())?;
        }
        let b3 = snap.config.tracing.as_ref().map_or(B3::None, |t| t.b3);
        ctx.trace.to_backend(upstream, b3)
    }

    async fn upstream_response_filter(
        &self,
        _session: &mut Session,
        answer: &mut ResponseHeader,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<()> {
        ctx.trace.backend_answered(answer);
        Ok(())
    }

    async fn response_filter(
        &self,
        _session: &mut Session,
        resp: &mut ResponseHeader,
        ctx: &mut Box<Ctx>,
    ) -> pingora::Result<()> {
        if let Some(login) = ctx.snap.as_ref().and_then(|s| s.login.as_ref()) {
            forward::drop_own_cookies(resp, login.cookie_names())?;
        }
        let licences = (ctx.decision.grant.as_ref().zip(ctx.route.as_deref()))
            .into_iter()
            .flat_map(|(grant, route)| grant.licence_headers(route));
        forward::set_response_headers(resp, licences, ctx.decision.id.as_str())
    }

    fn fail_to_connect(
        &self,
        _session: &mut Session,
        _peer: &HttpPeer,
        ctx: &mut Box<Ctx>,
        mut e: Box<Error>,
    ) -> Box<Error> {
        ctx.trace.backend_failed(&e);
        ctx.connect_attempts += 1;
        let backends = ctx
            .snap
            .as_ref()
            .zip(ctx.route.as_ref())
            .and_then(|(s, r)| s.upstreams.get(&r.upstream))
            .map_or(1, |p| p.backend_count());
        // Another backend may take it; a request that never reached a backend is safe to retry.
        if ctx.connect_attempts < backends {
            e.set_retry(true);
        }
        e
    }

    async fn fail_to_proxy(
        &self,
        session: &mut Session,
        e: &Error,
        ctx: &mut Box<Ctx>,
    ) -> FailToProxy {
        let timeout = matches!(
            e.etype(),
            ErrorType::ConnectTimedout | ErrorType::ReadTimedout | ErrorType::WriteTimedout
        );
        let reject = match (ctx.reject.take(), e.esource()) {
            (Some(reject), _) => reject,
            (None, ErrorSource::Upstream) if timeout => Reject::BackendTimeout,
            (None, ErrorSource::Upstream) => Reject::BackendUnreachable,
            // A request header pingora cannot pass on (e.g. a Connection header naming Host).
            (None, ErrorSource::Downstream) if e.etype() == &ErrorType::InvalidHTTPHeader => {
                Reject::BadHeader(reject::HeaderRefusal::Invalid)
            }
            // The client went away or stalled: there is no one to answer.
            (None, ErrorSource::Downstream) => {
                ctx.decision.outcome = Outcome::ClientError;
                ctx.decision.reason = "downstream";
                return FailToProxy {
                    error_code: 0,
                    can_reuse_downstream: false,
                };
            }
            (None, _) if timeout => Reject::BackendTimeout,
            (None, _) => Reject::Internal,
        };
        let answer = ctx.refuse(&reject);
        // The connection is not reused after a failure: say so, so that no client sends on it.
        session.set_keepalive(None);
        let code = match respond(session, &answer).await {
            Ok(()) => answer.status,
            Err(_) => 0,
        };
        FailToProxy {
            error_code: code,
            can_reuse_downstream: false,
        }
    }

    /// How pingora's own log lines name a request: never with its query, which may carry
    /// credentials (`?access_token=…`), and bounded in length.
    fn request_summary(&self, session: &Session, _ctx: &Box<Ctx>) -> String {
        let req = session.req_header();
        let host = req
            .headers
            .get(http::header::HOST)
            .and_then(|h| h.to_str().ok())
            .or(req.uri.host())
            .unwrap_or("-");
        format!(
            "{} {}, Host: {}",
            req.method,
            logged(req.uri.path()),
            logged(host)
        )
    }

    async fn logging(&self, session: &mut Session, e: Option<&Error>, ctx: &mut Box<Ctx>) {
        if let Some(phase) = session.stream().and_then(Guarded::phase_of) {
            phase.done();
        }
        let written = session.response_written().map(|r| r.status);
        let status = written.map_or(0, |s| s.as_u16());
        let d = &ctx.decision;
        let metrics = &self.state.shared.metrics;
        let elapsed = ctx.started.elapsed();
        let series = snapshot::series(ctx.snap.as_deref(), ctx.route.as_ref(), &d.route, metrics);
        series.requests(written, d.outcome).inc();
        series
            .latency(Latency::Request)
            .observe(elapsed.as_secs_f64());
        if let Some(decided_in) = d.decided_in {
            series
                .latency(Latency::Decision)
                .observe(decided_in.as_secs_f64());
        }
        if d.stage == Stage::Evaluation {
            series.decisions(d.grant.is_some(), d.reason).inc();
        }
        let req = session.req_header();
        let path = if d.path.is_empty() {
            logged(req.uri.path()).into()
        } else {
            d.path.clone()
        };
        tracing::info!(
            target: "access",
            route = %d.route,
            method = %req.method,
            path = %path,
            client = d.caller_id().unwrap_or("-"),
            status,
            outcome = d.outcome.as_str(),
            reason = d.reason,
            decision_id = %d.id,
            duration_ms = (elapsed.as_secs_f64() * 1e6).round() / 1e3,
            error = e.map(|e| e.etype().as_str()).unwrap_or(""),
        );
        ctx.trace
            .finish(session, &ctx.decision, ctx.route.is_some(), e, status);
        if let Some(log) = ctx.snap.as_ref().and_then(|s| s.decision_log.as_ref()) {
            let d = std::mem::replace(&mut ctx.decision, Decision::moved_out());
            log.hand_over(d, status, elapsed);
        }
    }
}
