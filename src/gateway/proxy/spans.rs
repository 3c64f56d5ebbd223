//! A request's spans as the proxy phases see it: the request itself (a server span, from its
//! header to its log line), the decision on a delegated route, and the call to the backend (a
//! client span, from choosing the backend to the arrival of its answer's header), whose span id
//! the backend receives as the parent in `traceparent` — never the client's own. A request that
//! is not recorded has only its own span, which the backend receives as the parent.

use crate::config::model::B3;
use crate::gateway::connections::{client_ip, is_tls};
use crate::gateway::decision::Decision;
use crate::telemetry::trace::{samples_children, Open, Tracing};
use crate::telemetry::traceparent::{self, TRACEPARENT, TRACESTATE};
use opentelemetry::trace::{SpanKind, TraceContextExt};
use opentelemetry::{Context, KeyValue};
use pingora::http::{RequestHeader, ResponseHeader};
use pingora::proxy::Session;
use pingora::upstreams::peer::{HttpPeer, Peer};

/// The longest path recorded in a span, as in the access log.
const PATH_LEN: usize = 256;

/// A request's spans, while tracing is on.
#[derive(Default)]
pub struct RequestTrace(Option<Box<Spans>>);

struct Spans {
    request: Open,
    /// The backend call under way.
    backend: Option<Open>,
}

/// The method as spans name it: one of HTTP's, or `_OTHER` (a method of the client's invention
/// is no span name).
fn method(req: &RequestHeader) -> &'static str {
    use http::Method;
    match req.method {
        Method::GET => "GET",
        Method::HEAD => "HEAD",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::OPTIONS => "OPTIONS",
        Method::TRACE => "TRACE",
        Method::CONNECT => "CONNECT",
        _ => "_OTHER",
    }
}

/// At most PATH_LEN bytes of a path, cut at a character.
fn bounded(path: &str) -> String {
    let mut end = path.len().min(PATH_LEN);
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    path[..end].to_string()
}

impl RequestTrace {
    /// The request's span when tracing is on: in the trace its `traceparent` names if the
    /// configuration accepts a client's context and the header is valid, else in a new trace.
    pub fn start(tracing: Option<&Tracing>, session: &Session) -> RequestTrace {
        let Some((tracing, base)) = tracing.and_then(|t| Some((t, t.base()?))) else {
            return RequestTrace(None);
        };
        let req = session.req_header();
        let client = tracing
            .settings()
            .accept_client_context
            .then(|| traceparent::extract(&req.headers))
            .flatten()
            .map(|sc| base.with_remote_span_context(sc));
        let attributes = || {
            let tls = is_tls(session);
            let mut attributes = vec![
                KeyValue::new("http.request.method", method(req)),
                KeyValue::new("url.scheme", if tls { "https" } else { "http" }),
                KeyValue::new(
                    "network.protocol.version",
                    if session.is_http2() { "2" } else { "1.1" },
                ),
            ];
            if let Some(addr) = client_ip(session) {
                attributes.push(KeyValue::new("network.peer.address", addr.to_string()));
            }
            if let Some(local) = session.server_addr().and_then(|a| a.as_inet()) {
                attributes.push(KeyValue::new("server.port", i64::from(local.port())));
            }
            attributes
        };
        let parent = client.as_ref().unwrap_or(base);
        let request = Open::start(parent, method(req), SpanKind::Server, attributes);
        RequestTrace(request.map(|request| {
            Box::new(Spans {
                request,
                backend: None,
            })
        }))
    }

    /// Whether the request is traced.
    pub fn is_on(&self) -> bool {
        self.0.is_some()
    }

    /// The context the request's steps run in (None: not traced).
    pub fn context(&self) -> Option<Context> {
        self.0.as_ref().map(|s| s.request.context().clone())
    }

    /// The backend call begins: `peer` was chosen for it. A previous attempt still open failed to
    /// connect.
    pub fn backend_chosen(&mut self, upstream: &str, session: &Session, peer: &HttpPeer) {
        let Some(spans) = self.0.as_mut() else {
            return;
        };
        if let Some(mut attempt) = spans.backend.take() {
            attempt.fail("connect");
            attempt.end();
        }
        if !samples_children(spans.request.context()) {
            return;
        }
        let attributes = || {
            let mut attributes = vec![
                KeyValue::new("http.request.method", method(session.req_header())),
                KeyValue::new("ishare.upstream", upstream.to_string()),
            ];
            if let Some(addr) = peer.address().as_inet() {
                attributes.push(KeyValue::new("server.address", addr.ip().to_string()));
                attributes.push(KeyValue::new("server.port", i64::from(addr.port())));
            }
            attributes
        };
        spans.backend = Open::start(
            spans.request.context(),
            format!("backend {upstream}"),
            SpanKind::Client,
            attributes,
        );
    }

    /// The trace context the backend receives: the gateway's `traceparent` naming the backend call
    /// as the parent (the request's span when the request is not recorded), and the `tracestate` of
    /// the trace (a client's only when its context was accepted), and in B3 headers when configured.
    /// Whatever the client sent in these headers, in any spelling a backend folds into the same
    /// name (`X_B3_TraceId`, `trace-parent`), is gone already: a traced request's are withheld
    /// (`forward::Withheld`).
    pub fn to_backend(&mut self, upstream: &mut RequestHeader, b3: B3) -> pingora::Result<()> {
        let Some(spans) = self.0.as_mut() else {
            return Ok(());
        };
        let span = match &mut spans.backend {
            Some(backend) => {
                if backend.is_recording() {
                    backend.set(KeyValue::new("url.path", bounded(upstream.uri.path())));
                }
                backend.span_context()
            }
            None => spans.request.span_context(),
        };
        upstream.insert_header(TRACEPARENT, traceparent::traceparent(span))?;
        if let Some(state) = traceparent::tracestate_of(span) {
            upstream.insert_header(TRACESTATE, state)?;
        }
        match b3 {
            B3::None => {}
            B3::Single => upstream.insert_header("b3", traceparent::b3_single(span))?,
            B3::Multi => {
                for (name, value) in traceparent::b3_multi(span) {
                    upstream.insert_header(name, value)?;
                }
            }
        }
        Ok(())
    }

    /// The backend's answer arrived: its call ends (an informational answer is not the end).
    pub fn backend_answered(&mut self, answer: &ResponseHeader) {
        if answer.status.is_informational() {
            return;
        }
        let Some(mut backend) = self.0.as_mut().and_then(|s| s.backend.take()) else {
            return;
        };
        let status = answer.status.as_u16();
        if backend.is_recording() {
            backend.set(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
            if status >= 400 {
                backend.fail(status.to_string());
            }
        }
        backend.end();
    }

    /// The backend call did not connect; another backend may be tried.
    pub fn backend_failed(&mut self, e: &pingora::Error) {
        if let Some(mut backend) = self.0.as_mut().and_then(|s| s.backend.take()) {
            backend.fail(e.etype().as_str().to_string());
            backend.end();
        }
    }

    /// The request ends: what became of it, on its span (the path decided on, or as sent when the
    /// request was refused before; its route when one took it), and a backend call still open
    /// failed.
    pub fn finish(
        &mut self,
        session: &Session,
        d: &Decision,
        routed: bool,
        e: Option<&pingora::Error>,
        status: u16,
    ) {
        let Some(spans) = self.0.take() else {
            return;
        };
        let Spans {
            mut request,
            backend,
        } = *spans;
        let error = e.map(|e| e.etype().as_str().to_string());
        if let Some(mut backend) = backend {
            backend.fail(error.clone().unwrap_or_else(|| "no_answer".into()));
            backend.end();
        }
        if !request.is_recording() {
            return request.end();
        }
        let method = method(session.req_header());
        request.rename(format!("{method} {}", d.route));
        if routed {
            request.set(KeyValue::new("http.route", d.route.to_string()));
        }
        let path = match d.path.is_empty() {
            true => session.req_header().uri.path(),
            false => &d.path,
        };
        request.set(KeyValue::new("url.path", bounded(path)));
        request.set(KeyValue::new("ishare.outcome", d.outcome.as_str()));
        if !d.reason.is_empty() {
            request.set(KeyValue::new("ishare.reason", d.reason));
        }
        request.set(KeyValue::new("ishare.decision_id", d.id.to_string()));
        if let Some(consumer) = d.caller_id() {
            request.set(KeyValue::new(
                "ishare.client.party_id",
                consumer.to_string(),
            ));
        }
        if status > 0 {
            request.set(KeyValue::new(
                "http.response.status_code",
                i64::from(status),
            ));
        }
        match (status, error) {
            (500.., _) => request.fail(status.to_string()),
            (0, Some(error)) => request.fail(error),
            _ => {}
        }
        request.end();
    }
}
