//! OpenTelemetry tracing against a collector of the test's own (an OTLP/HTTP receiver decoding
//! the protobuf it is sent): the spans of a delegated request — the request, its authentication,
//! its decision, the registry's and the scheme owner's calls and the backend call — arrive with
//! their parent links in the client's trace; the backend, the registry and the scheme owner each
//! receive a `traceparent` naming the gateway's span of the call; a gateway that does not accept
//! a client's context starts a trace of its own; exports that fail are counted; and the binary
//! sends its spans before it exits on SIGTERM.

use crate::support;

use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::process::{eventually, GatewayProcess};
use support::served::Served;
use support::*;

const BIN: &str = "tracing";
/// A client's trace: its id, its span (the parent of the gateway's request span), its state.
const CLIENT_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CLIENT_SPAN: &str = "b7ad6b7169203331";
const CLIENT_STATE: &str = "congo=t61rcWkgMzE";

fn client_traceparent() -> String {
    format!("00-{CLIENT_TRACE}-{CLIENT_SPAN}-01")
}

/// A public route to the echo backend.
const STATUS_ROUTE: &str = r#"
[[route]]
name = "status"
methods = ["GET"]
path = "/status"
upstream = "echo"
auth = "public"
"#;

/// A delegated route decided by the registry behind the recorder, and the public route.
fn rules() -> String {
    format!(
        r#"
[[route]]
name = "read"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
registry = "recorded"
{STATUS_ROUTE}"#
    )
}

/// A span as the collector received it.
#[derive(Clone, Debug)]
struct Received {
    service: String,
    name: String,
    kind: SpanKind,
    trace_id: String,
    span_id: String,
    /// Empty for a root span.
    parent_id: String,
    attributes: BTreeMap<String, String>,
    failed: bool,
}

impl Received {
    fn attribute(&self, key: &str) -> Option<&str> {
        self.attributes.get(key).map(String::as_str)
    }
}

/// An OTLP/HTTP collector on an ephemeral loopback port: every span it is sent, decoded. While
/// `refusing`, it answers 400 and keeps nothing.
struct Collector {
    endpoint: String,
    spans: Arc<Mutex<Vec<Received>>>,
    refusing: Arc<AtomicBool>,
    served: Served,
}

#[derive(Clone)]
struct CollectorState {
    spans: Arc<Mutex<Vec<Received>>>,
    refusing: Arc<AtomicBool>,
}

async fn collect(State(state): State<CollectorState>, body: Bytes) -> Response {
    if state.refusing.load(Ordering::Relaxed) {
        return (StatusCode::BAD_REQUEST, "refused by the test").into_response();
    }
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, "not an ExportTraceServiceRequest").into_response();
    };
    let text = |v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| match v
        .as_ref()
        .and_then(|v| v.value.as_ref())
    {
        Some(AnyValue::StringValue(s)) => s.clone(),
        Some(AnyValue::IntValue(i)) => i.to_string(),
        Some(AnyValue::BoolValue(b)) => b.to_string(),
        Some(AnyValue::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| &r.attributes)
            .find(|a| a.key == "service.name")
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for span in resource_spans.scope_spans.into_iter().flat_map(|s| s.spans) {
            received.push(Received {
                service: service.clone(),
                kind: span.kind(),
                name: span.name,
                trace_id: hex::encode(&span.trace_id),
                span_id: hex::encode(&span.span_id),
                parent_id: hex::encode(&span.parent_span_id),
                attributes: span
                    .attributes
                    .iter()
                    .map(|a| (a.key.clone(), text(&a.value)))
                    .collect(),
                failed: span.status.is_some_and(|s| s.code == 2),
            });
        }
    }
    state.spans.lock().unwrap().extend(received);
    (
        [(header::CONTENT_TYPE, "application/x-protobuf")],
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
        .into_response()
}

impl Collector {
    async fn start() -> Collector {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let refusing = Arc::new(AtomicBool::new(false));
        let app = axum::Router::new()
            .route("/v1/traces", axum::routing::post(collect))
            .with_state(CollectorState {
                spans: spans.clone(),
                refusing: refusing.clone(),
            });
        let served = Served::start(app).await;
        Collector {
            endpoint: format!("{}/v1/traces", served.url()),
            spans,
            refusing,
            served,
        }
    }

    fn spans_of(&self, trace_id: &str) -> Vec<Received> {
        let spans = self.spans.lock().unwrap();
        spans
            .iter()
            .filter(|s| s.trace_id == trace_id)
            .cloned()
            .collect()
    }

    /// The spans of `trace_id` once every one of `names` has arrived (bounded wait).
    async fn wait_for(&self, trace_id: &str, names: &[&str]) -> Vec<Received> {
        let arrived = eventually(Duration::from_secs(20), || async {
            let spans = self.spans_of(trace_id);
            names.iter().all(|n| spans.iter().any(|s| s.name == *n))
        })
        .await;
        let spans = self.spans_of(trace_id);
        assert!(
            arrived,
            "spans {names:?} of trace {trace_id} did not all arrive; got {:#?}",
            spans
        );
        spans
    }

    async fn stop(self) {
        let _ = self.served.stop().await;
    }
}

/// Each request's path and `traceparent`, in order.
type Seen = Arc<Mutex<Vec<(String, Option<String>)>>>;

/// A proxy in front of a testbed participant that notes the `traceparent` of every request, by
/// path.
struct Recorder {
    url: String,
    seen: Seen,
    served: Served,
}

#[derive(Clone)]
struct RecorderState {
    upstream: String,
    http: reqwest::Client,
    seen: Seen,
}

async fn relay(State(s): State<RecorderState>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let traceparent = parts
        .headers
        .get("traceparent")
        .map(|v| v.to_str().unwrap().to_string());
    s.seen
        .lock()
        .unwrap()
        .push((parts.uri.path().to_string(), traceparent));
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap();
    let mut forward = s
        .http
        .request(parts.method, format!("{}{}", s.upstream, parts.uri));
    for name in [header::AUTHORIZATION, header::CONTENT_TYPE] {
        if let Some(v) = parts.headers.get(&name) {
            forward = forward.header(name, v);
        }
    }
    let answer = forward.body(body).send().await.unwrap();
    let status = answer.status();
    let content_type = answer.headers().get(header::CONTENT_TYPE).cloned();
    let mut response = (status, answer.bytes().await.unwrap()).into_response();
    if let Some(c) = content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, c);
    }
    response
}

impl Recorder {
    async fn start(upstream: &str, http: reqwest::Client) -> Recorder {
        let seen = Seen::default();
        let app = axum::Router::new()
            .fallback(relay)
            .with_state(RecorderState {
                upstream: upstream.trim_end_matches('/').to_string(),
                http,
                seen: seen.clone(),
            });
        let served = Served::start(app).await;
        Recorder {
            url: served.url(),
            seen,
            served,
        }
    }

    /// The `traceparent` of every request for `path`, in order.
    fn traceparents(&self, path: &str) -> Vec<Option<String>> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter(|(p, _)| p == path)
            .map(|(_, t)| t.clone())
            .collect()
    }

    async fn stop(self) {
        let _ = self.served.stop().await;
    }
}

/// The testbed, a collector, recorders in front of the scheme owner and the registry, and a
/// gateway (in this process) with `[tracing]` set by `tracing` (given the collector's endpoint).
struct Traced {
    env: Env,
    collector: Collector,
    scheme_owner: Recorder,
    registry: Recorder,
}

impl Traced {
    async fn start(tracing: impl FnOnce(&str) -> String) -> Traced {
        let bed = Bed::start(BIN).await;
        let collector = Collector::start().await;
        let scheme_owner = Recorder::start(&bed.url(SO), bed.http.clone()).await;
        let registry = Recorder::start(&bed.url(AR), bed.http.clone()).await;
        let extra = format!(
            "[[registry]]\nname = \"recorded\"\nparty_id = \"{AR}\"\nurl = \"{}\"\n\n{}",
            registry.url,
            tracing(&collector.endpoint)
        );
        let so = bed.url(SO);
        let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |text| {
            text.replace(
                &format!("url = \"{so}\""),
                &format!("url = \"{}\"", scheme_owner.url),
            )
        });
        let env = Env::launch(bed, dir, &ports).await;
        Traced {
            env,
            collector,
            scheme_owner,
            registry,
        }
    }

    /// GET `path` with a bearer token and `headers`: the status and the echo backend's JSON.
    async fn get(&self, path: &str, token: &str, headers: &[(&str, &str)]) -> (u16, Value) {
        let mut request = self
            .env
            .bed
            .http
            .get(format!("{}{path}", self.env.url))
            .bearer_auth(token);
        for (name, value) in headers {
            request = request.header(*name, *value);
        }
        status_json(request.send().await.unwrap()).await
    }

    async fn stop(self) {
        self.env.stop().await;
        self.collector.stop().await;
        self.scheme_owner.stop().await;
        self.registry.stop().await;
    }
}

/// The one span named `name` among `spans`.
fn named<'a>(spans: &'a [Received], name: &str) -> &'a Received {
    let found: Vec<&Received> = spans.iter().filter(|s| s.name == name).collect();
    assert_eq!(found.len(), 1, "one {name:?} span in {spans:#?}");
    found[0]
}

/// The parent id a `traceparent` names, after checking it is in `trace_id`.
fn parent_in(traceparent: &str, trace_id: &str) -> String {
    let fields: Vec<&str> = traceparent.split('-').collect();
    assert_eq!(fields.len(), 4, "{traceparent}");
    assert_eq!((fields[0], fields[1]), ("00", trace_id), "{traceparent}");
    fields[2].to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegated_request_is_one_trace_from_the_client_to_the_backend_and_the_peers() {
    let traced = Traced::start(|endpoint| {
        format!(
            "[tracing]\notlp_endpoint = \"{endpoint}\"\nservice_name = \"gateway-under-test\"\n"
        )
    })
    .await;
    let token = traced.env.token(CONSUMER).await;
    let traceparent = client_traceparent();
    let (status, echo) = traced
        .get(
            "/api/containers/C1",
            &token,
            &[("traceparent", &traceparent), ("tracestate", CLIENT_STATE)],
        )
        .await;
    assert_eq!(status, 200, "{echo}");

    let spans = traced
        .collector
        .wait_for(
            CLIENT_TRACE,
            &[
                "GET read",
                "kept decision",
                "authenticate",
                "authorize",
                "registry evidence",
                "scheme_owner party",
                "backend echo",
            ],
        )
        .await;
    let request = named(&spans, "GET read");
    let authn = named(&spans, "authenticate");
    let decision = named(&spans, "authorize");
    let registry = named(&spans, "registry evidence");
    let scheme_owner = named(&spans, "scheme_owner party");
    let backend = named(&spans, "backend echo");
    assert_eq!(request.service, "gateway-under-test");
    assert_eq!(request.kind, SpanKind::Server);
    assert_eq!(
        request.parent_id, CLIENT_SPAN,
        "the client's span is the parent"
    );
    for (key, value) in [
        ("http.request.method", "GET"),
        ("http.route", "read"),
        ("url.path", "/api/containers/C1"),
        ("url.scheme", "https"),
        ("http.response.status_code", "200"),
        ("ishare.outcome", "forwarded"),
        ("ishare.client.party_id", CONSUMER),
    ] {
        assert_eq!(request.attribute(key), Some(value), "{key}: {request:#?}");
    }
    assert_eq!(authn.parent_id, request.span_id);
    assert_eq!(authn.attribute("ishare.outcome"), Some("authenticated"));
    // No decision was kept for this head yet: it is looked up, then made.
    let kept = named(&spans, "kept decision");
    assert_eq!(kept.parent_id, request.span_id);
    assert_eq!(kept.attribute("ishare.outcome"), Some("none"), "{kept:#?}");
    assert_eq!(decision.parent_id, request.span_id);
    assert_eq!(decision.attribute("ishare.decision"), Some("permit"));
    assert_eq!(registry.parent_id, decision.span_id);
    assert_eq!(registry.kind, SpanKind::Client);
    assert_eq!(registry.attribute("ishare.outcome"), Some("evidence"));
    assert_eq!(registry.attribute("ishare.peer.party_id"), Some(AR));
    // The registry's answer is verified against its party record, fetched then.
    assert_eq!(scheme_owner.parent_id, registry.span_id);
    assert_eq!(scheme_owner.kind, SpanKind::Client);
    assert_eq!(backend.parent_id, request.span_id);
    assert_eq!(backend.kind, SpanKind::Client);
    assert_eq!(backend.attribute("http.response.status_code"), Some("200"));
    assert_eq!(backend.attribute("ishare.upstream"), Some("echo"));
    assert!(spans.iter().all(|s| !s.failed), "{spans:#?}");

    // The backend's traceparent is the gateway's: the client's trace, the backend call's span as
    // the parent; the client's tracestate goes on with it.
    let sent = echo["headers"]["traceparent"].as_str().unwrap();
    assert_eq!(parent_in(sent, CLIENT_TRACE), backend.span_id, "{echo}");
    assert!(sent.ends_with("-01"), "{sent}");
    assert_eq!(echo["headers"]["tracestate"], CLIENT_STATE, "{echo}");
    // The registry's and the scheme owner's calls carry the span of the call as the parent.
    let registry_calls = traced.registry.traceparents("/delegation");
    assert_eq!(registry_calls.len(), 1, "{registry_calls:?}");
    let on_delegation = registry_calls[0].as_deref().expect("a traceparent");
    assert_eq!(parent_in(on_delegation, CLIENT_TRACE), registry.span_id);
    for token_call in traced.registry.traceparents("/connect/token") {
        let token_call = token_call.expect("a traceparent on the registry's token call");
        assert_eq!(parent_in(&token_call, CLIENT_TRACE), registry.span_id);
    }
    let record_calls = traced.scheme_owner.traceparents(&format!("/parties/{AR}"));
    assert_eq!(record_calls.len(), 1, "{record_calls:?}");
    let on_record = record_calls[0].as_deref().expect("a traceparent");
    assert_eq!(parent_in(on_record, CLIENT_TRACE), scheme_owner.span_id);
    // Work of the gateway's own (the trusted list's refresh) is in no request's trace.
    let refreshes = traced.scheme_owner.traceparents("/trusted_list");
    assert!(
        !refreshes.is_empty() && refreshes.iter().all(Option::is_none),
        "{refreshes:?}"
    );
    // No span holds a credential.
    let all = format!("{:?}", traced.collector.spans.lock().unwrap());
    assert!(!all.contains(&token), "the access token is in a span");
    assert!(!all.to_lowercase().contains("bearer"), "{all}");

    let metrics = traced.env.metrics().await;
    assert!(
        metric(
            &metrics,
            "ishare_gateway_spans_total",
            &[("outcome", "exported")]
        ) >= 6.0,
        "{metrics}"
    );

    // A trace the client does not record is not recorded either, and still passed on: the
    // backend gets the client's trace, a span of the gateway as the parent, flags 00.
    let unrecorded = "4bf92f3577b34da6a3ce929d0e0e4736";
    let (status, echo) = traced
        .get(
            "/status",
            &token,
            &[(
                "traceparent",
                &format!("00-{unrecorded}-00f067aa0ba902b7-00"),
            )],
        )
        .await;
    assert_eq!(status, 200, "{echo}");
    let passed = echo["headers"]["traceparent"].as_str().unwrap();
    let parent = parent_in(passed, unrecorded);
    assert!(
        parent != "00f067aa0ba902b7" && passed.ends_with("-00"),
        "{passed}"
    );

    // A malformed traceparent (upper-case hex) is ignored: the request starts a trace of its own,
    // and the backend gets the gateway's traceparent, not the client's.
    let upper = traceparent.to_uppercase();
    let (status, echo) = traced
        .get("/status", &token, &[("traceparent", &upper)])
        .await;
    assert_eq!(status, 200, "{echo}");
    let sent = echo["headers"]["traceparent"].as_str().unwrap();
    let trace_id = sent.split('-').nth(1).unwrap().to_string();
    assert_ne!(trace_id, CLIENT_TRACE, "{sent}");
    let spans = traced
        .collector
        .wait_for(&trace_id, &["GET status", "backend echo"])
        .await;
    assert_eq!(
        named(&spans, "GET status").parent_id,
        "",
        "a trace of its own"
    );
    assert_eq!(
        parent_in(sent, &trace_id),
        named(&spans, "backend echo").span_id
    );
    // Sent after the unrecorded request, these spans were exported with or after its own would
    // have been.
    assert!(traced.collector.spans_of(unrecorded).is_empty());
    traced.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_that_does_not_accept_client_context_starts_its_own_trace() {
    let traced = Traced::start(|endpoint| {
        format!("[tracing]\notlp_endpoint = \"{endpoint}\"\naccept_client_context = false\n")
    })
    .await;
    let token = traced.env.token(CONSUMER).await;
    let traceparent = client_traceparent();
    let client_b3 = format!("{CLIENT_TRACE}-{CLIENT_SPAN}-1");
    let headers = [
        ("traceparent", traceparent.as_str()),
        ("tracestate", CLIENT_STATE),
        ("b3", client_b3.as_str()),
        ("X-B3-TraceId", CLIENT_TRACE),
        ("X-B3-SpanId", CLIENT_SPAN),
        ("X-B3-Sampled", "1"),
        ("X_B3_TraceId", CLIENT_TRACE),
        ("Trace_Parent", traceparent.as_str()),
    ];

    // While the collector refuses, the spans are counted as failed, not kept.
    traced.collector.refusing.store(true, Ordering::Relaxed);
    let (status, echo) = traced.get("/api/containers/C1", &token, &headers).await;
    assert_eq!(status, 200, "{echo}");
    let failed = eventually(Duration::from_secs(20), || async {
        let metrics = traced.env.metrics().await;
        metric(
            &metrics,
            "ishare_gateway_spans_total",
            &[("outcome", "failed")],
        ) >= 1.0
    })
    .await;
    assert!(failed, "{}", traced.env.metrics().await);
    traced.collector.refusing.store(false, Ordering::Relaxed);

    let (status, echo) = traced.get("/api/containers/C1", &token, &headers).await;
    assert_eq!(status, 200, "{echo}");
    let sent = echo["headers"]["traceparent"].as_str().unwrap();
    assert_ne!(sent, traceparent);
    let trace_id = sent.split('-').nth(1).unwrap().to_string();
    assert_ne!(
        trace_id, CLIENT_TRACE,
        "the client's trace is not continued"
    );
    assert!(
        echo["headers"].get("tracestate").is_none(),
        "the client's tracestate does not reach the backend: {echo}"
    );
    for b3 in [
        "b3",
        "x-b3-traceid",
        "x-b3-spanid",
        "x-b3-sampled",
        "x_b3_traceid",
        "trace_parent",
    ] {
        assert!(
            echo["headers"].get(b3).is_none(),
            "the client's {b3} does not reach the backend: {echo}"
        );
    }
    // The same head again: the decision kept for it is given, as to a request not recorded; the
    // bearer token is judged again in it.
    let spans = traced
        .collector
        .wait_for(
            &trace_id,
            &["GET read", "kept decision", "authenticate", "backend echo"],
        )
        .await;
    let request = named(&spans, "GET read");
    assert_eq!(
        request.parent_id, "",
        "the gateway's trace starts at its request span"
    );
    let kept = named(&spans, "kept decision");
    assert_eq!(kept.parent_id, request.span_id);
    assert_eq!(kept.attribute("ishare.outcome"), Some("given"), "{kept:#?}");
    assert_eq!(named(&spans, "authenticate").parent_id, kept.span_id);
    assert!(
        spans.iter().all(|s| s.name != "authorize"),
        "a kept decision is not made again: {spans:#?}"
    );
    assert_eq!(request.attribute("ishare.outcome"), Some("forwarded"));
    assert_eq!(
        parent_in(sent, &trace_id),
        named(&spans, "backend echo").span_id
    );
    assert!(
        traced.collector.spans_of(CLIENT_TRACE).is_empty(),
        "no span is in the client's trace"
    );
    traced.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_exports_its_spans_and_sends_them_before_it_exits() {
    let bed = Bed::start(BIN).await;
    let collector = Collector::start().await;
    let extra = format!(
        "[tracing]\notlp_endpoint = \"{}\"\nb3 = \"single\"\n",
        collector.endpoint
    );
    let (dir, ports) = gateway_dir(&bed, BIN, STATUS_ROUTE, &extra, |t| t);
    let config = dir.join("gateway.toml");
    let check = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(check.status.success(), "{check:?}");
    let mut gateway = GatewayProcess::start("tracing", &config, ports.admin);
    gateway.wait_ready().await;
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let traceparent = client_traceparent();
    let answer = reqwest::Client::new()
        .get(format!("{plain}/status"))
        .header("traceparent", &traceparent)
        .header("b3", "80f198ee56343ba864fe8b2a57d3eff7-e457b5a2e4d86bd1-1")
        .header("X-B3-TraceId", "80f198ee56343ba864fe8b2a57d3eff7")
        .send()
        .await
        .unwrap();
    let (status, echo) = status_json(answer).await;
    assert_eq!(status, 200, "{echo}");
    let sent = echo["headers"]["traceparent"].as_str().unwrap().to_string();
    // Stopped at once: what is queued is sent before the process ends.
    let (exit, log) = gateway.terminate().await;
    assert!(exit.success(), "{exit}\n{log}");
    let spans = collector.spans_of(CLIENT_TRACE);
    let request = spans
        .iter()
        .find(|s| s.name == "GET status")
        .unwrap_or_else(|| panic!("the request's span arrived: {spans:#?}\n{log}"));
    assert_eq!(request.service, "ishare-gateway");
    assert_eq!(request.parent_id, CLIENT_SPAN);
    assert_eq!(request.attribute("url.scheme"), Some("http"));
    let backend = spans.iter().find(|s| s.name == "backend echo").unwrap();
    assert_eq!(parent_in(&sent, CLIENT_TRACE), backend.span_id);
    // B3 as configured: the gateway's context, in the single header; the client's are gone.
    assert_eq!(
        echo["headers"]["b3"],
        format!("{CLIENT_TRACE}-{}-1", backend.span_id),
        "{echo}"
    );
    assert!(echo["headers"].get("x-b3-traceid").is_none(), "{echo}");
    assert!(log.contains("spans are exported over OTLP/HTTP"), "{log}");
    collector.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
    bed.stop().await;
}
