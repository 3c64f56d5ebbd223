//! Envoy's gRPC `ext_authz` (`envoy.service.auth.v3.Authorization/Check`): the request's method,
//! target and headers from the `CheckRequest`, decided as the proxy decides; an `OkHttpResponse`
//! with the headers the backend receives, or a `DeniedHttpResponse` with the proxy's status,
//! reason and body.

use super::connection::next_connection;
use super::{decide, forwarded, Interface, Verdict, REASON_HEADER};
use crate::gateway::decision::dry_run::DescribedRequest;
use crate::gateway::reject::{Reject, ServiceRefusal};
use crate::gateway::snapshot::GatewayState;
use envoy_types::ext_authz::v3::pb::{
    Authorization, AuthorizationServer, CheckRequest, CheckResponse, DeniedHttpResponse,
    HeaderAppendAction, HeaderValue, HeaderValueOption, HttpResponse, HttpStatus, OkHttpResponse,
};
use envoy_types::pb::envoy::service::auth::v3::attribute_context;
use envoy_types::pb::google::rpc;
use pingora::server::ShutdownWatch;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

/// How much later than the decision's deadline the transport gives up on a check (one that
/// arrives too slowly to be decided).
const TRANSPORT_GRACE: Duration = Duration::from_secs(1);

/// gRPC status codes of the answer (google.rpc.Code): OK allows; a refusal's row names its own.
const OK: i32 = 0;
const PERMISSION_DENIED: i32 = 7;

/// The Authorization service on the decision service's state.
pub struct Checks {
    state: Arc<GatewayState>,
}

impl Checks {
    pub fn new(state: Arc<GatewayState>) -> Self {
        Checks { state }
    }
}

/// The request Envoy holds, as the stages read it, with its body when Envoy sends it;
/// pseudo-headers (`:path`, …) and the headers of the hop are left out.
fn asked(check: &CheckRequest) -> Option<DescribedRequest> {
    let http = http_of(check)?;
    let headers = http
        .headers
        .iter()
        .filter(|(name, _)| !name.starts_with(':') && !forwarded::is_of_the_hop(name))
        .map(|(n, v)| (n.to_ascii_lowercase(), v.clone()))
        .collect();
    // `with_request_body`: the body as bytes (`pack_as_bytes`) or as text.
    let body = match (&http.raw_body, &http.body) {
        (raw, _) if !raw.is_empty() => Some(raw.clone()),
        (_, text) if !text.is_empty() => Some(text.clone().into_bytes()),
        _ => None,
    };
    Some(DescribedRequest {
        method: http.method.clone(),
        target: http.path.clone(),
        headers,
        caller: None,
        body,
    })
}

/// The request a check describes.
fn http_of(check: &CheckRequest) -> Option<&attribute_context::HttpRequest> {
    check.attributes.as_ref()?.request.as_ref()?.http.as_ref()
}

/// The size of the request a check describes: its method, path, headers and body.
fn size(check: &CheckRequest) -> usize {
    let Some(http) = http_of(check) else {
        return 0;
    };
    let headers: usize = http.headers.iter().map(|(n, v)| n.len() + v.len()).sum();
    http.method.len() + http.path.len() + headers + http.raw_body.len() + http.body.len()
}

fn header(name: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: name.to_string(),
            value: value.to_string(),
            ..Default::default()
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        ..Default::default()
    }
}

/// The verdict as Envoy reads it.
pub fn check_response(verdict: Verdict) -> CheckResponse {
    let reason = verdict.reason();
    let status = verdict.status();
    // The refusal's row names its gRPC status; any but OK denies.
    let grpc_code = verdict
        .decision
        .refusal
        .as_ref()
        .map_or(PERMISSION_DENIED, |r| r.row().grpc.0);
    let (code, http_response) = match verdict.refusal {
        None => {
            let mut headers: Vec<HeaderValueOption> = verdict
                .upstream_headers
                .iter()
                .map(|(n, v)| header(n, v))
                .collect();
            headers.push(header(REASON_HEADER, reason));
            let ok = OkHttpResponse {
                headers,
                headers_to_remove: verdict.remove_upstream.clone(),
                ..Default::default()
            };
            (OK, HttpResponse::OkResponse(ok))
        }
        Some(answer) => {
            let response = answer.into_response();
            let headers = response
                .headers()
                .iter()
                .filter(|(n, _)| *n != http::header::CONTENT_LENGTH)
                .filter_map(|(n, v)| Some(header(n.as_str(), v.to_str().ok()?)))
                .chain(std::iter::once(header(REASON_HEADER, reason)))
                .collect();
            let denied = DeniedHttpResponse {
                status: Some(HttpStatus {
                    code: i32::from(status),
                }),
                headers,
                body: String::from_utf8_lossy(response.body()).into_owned(),
            };
            (grpc_code, HttpResponse::DeniedResponse(denied))
        }
    };
    CheckResponse {
        status: Some(rpc::Status {
            code,
            message: reason.to_string(),
            details: Vec::new(),
        }),
        http_response: Some(http_response),
        ..Default::default()
    }
}

#[tonic::async_trait]
impl Authorization for Checks {
    async fn check(
        &self,
        request: tonic::Request<CheckRequest>,
    ) -> Result<tonic::Response<CheckResponse>, tonic::Status> {
        let interface = Interface::ExtAuthzGrpc;
        let state = &self.state;
        // Refusals of the check itself are the table's, as on the HTTP forms: a check larger than
        // a head and the body the service reads, and a decision past the deadline.
        let refused = |reject| super::refused_unread(state, interface, reject);
        let check = request.get_ref();
        let verdict = if size(check) > max_check_bytes(super::max_body(state)) {
            refused(Reject::BodyTooLarge)
        } else {
            match asked(check) {
                Some(req) => {
                    let deadline = super::deadline(state);
                    match tokio::time::timeout(deadline, decide(state, interface, req)).await {
                        Ok(verdict) => verdict,
                        Err(_) => refused(ServiceRefusal::DecisionTimeout(deadline).into()),
                    }
                }
                None => refused(super::invalid_original(
                    "the CheckRequest has no attributes.request.http",
                )),
            }
        };
        Ok(tonic::Response::new(check_response(verdict)))
    }
}

/// A TLS connection, as tonic serves it.
struct TlsIo(tokio_rustls::server::TlsStream<tokio::net::TcpStream>);

impl tonic::transport::server::Connected for TlsIo {
    type ConnectInfo = ();

    fn connect_info(&self) -> Self::ConnectInfo {}
}

impl tokio::io::AsyncRead for TlsIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for TlsIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

/// Connections whose TLS handshake completed within `timeout`: each handshake runs on its own, so
/// that a slow one holds up no other.
fn tls_connections(
    listener: tokio::net::TcpListener,
    acceptor: tokio_rustls::TlsAcceptor,
    timeout: Duration,
) -> impl futures::Stream<Item = Result<TlsIo, std::io::Error>> {
    let (tx, rx) = tokio::sync::mpsc::channel::<TlsIo>(64);
    tokio::spawn(async move {
        let key = "decision_api.grpc_address";
        while let Some(stream) = next_connection(&listener, key, tx.closed()).await {
            let (acceptor, sender) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                if let Ok(Ok(tls)) = tokio::time::timeout(timeout, acceptor.accept(stream)).await {
                    let _ = sender.send(TlsIo(tls)).await;
                }
            });
        }
    });
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|io| (Ok(io), rx))
    })
}

/// What a CheckRequest holds besides the request's body: its head, as Envoy describes it.
const HEAD_BYTES: usize = 256 << 10;

/// The largest CheckRequest decided on: a head and the body the service reads; a larger one is
/// refused by the table (413).
fn max_check_bytes(max_body: usize) -> usize {
    max_body.saturating_add(HEAD_BYTES)
}

/// The largest CheckRequest the transport decodes at all: four times what is decided on at
/// start-up, so that the table answers any check a configuration reload may bound lower; beyond
/// it, the transport refuses (`OUT_OF_RANGE`) without reading it.
fn max_decoded_bytes(max_body: usize) -> usize {
    max_check_bytes(max_body).saturating_mul(4)
}

/// Serve the Authorization service on `listener` (h2c, or TLS with `tls`) until shutdown.
pub async fn serve(
    state: Arc<GatewayState>,
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    mut shutdown: ShutdownWatch,
) {
    let timeout = super::deadline(&state);
    // A check is a request's head and body: bounded in size, in streams per connection, and
    // idle connections are found out and closed. The decision's deadline is the check's own
    // (answered by the table); the transport's, a little later, bounds a check read slowly.
    let decoded = max_decoded_bytes(super::max_body(&state));
    let service = AuthorizationServer::new(Checks::new(state)).max_decoding_message_size(decoded);
    let server = tonic::transport::Server::builder()
        .timeout(timeout.saturating_add(TRANSPORT_GRACE))
        .concurrency_limit_per_connection(100)
        .max_concurrent_streams(100)
        .http2_keepalive_interval(Some(Duration::from_secs(30)))
        .http2_keepalive_timeout(Some(Duration::from_secs(10)))
        .tcp_keepalive(Some(Duration::from_secs(60)))
        .add_service(service);
    let stop = async move {
        let _ = shutdown.changed().await;
    };
    let served = match tls {
        None => {
            let incoming =
                tonic::transport::server::TcpIncoming::from(listener).with_nodelay(Some(true));
            server.serve_with_incoming_shutdown(incoming, stop).await
        }
        Some(acceptor) => {
            let incoming = tls_connections(listener, acceptor, timeout);
            server.serve_with_incoming_shutdown(incoming, stop).await
        }
    };
    if let Err(e) = served {
        tracing::error!("decision_api.grpc_address: {e}");
    }
}
