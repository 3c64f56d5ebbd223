//! The decision service's listeners, beside pingora's: HTTP/1.1 and HTTP/2 (h2c, or TLS with
//! optional client certificates) for nginx, Envoy's HTTP form and AuthZEN, and gRPC for Envoy.
//! Bound when the server is built (a taken port fails the start), served by a background service
//! until shutdown; every request is read under the configured deadline and body bound.

use super::connection::{next_connection, Connection};
use super::{authzen, forwarded, grpc, Interface, REQUEST_ID_HEADER};
use crate::config::model::DecisionApiSettings;
use crate::gateway::connections::listener::{server_config, CertResolver};
use crate::gateway::reject::{Answer, Reject, ServiceRefusal};
use crate::gateway::snapshot::GatewayState;
use async_trait::async_trait;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use pingora::server::ShutdownWatch;
use pingora::services::background::BackgroundService;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;

/// Connections served at once; more wait to be accepted.
const MAX_CONNECTIONS: usize = 4096;

/// The decision service, bound and ready to serve.
pub struct DecisionService {
    state: Arc<GatewayState>,
    settings: DecisionApiSettings,
    http: Mutex<Option<std::net::TcpListener>>,
    grpc: Mutex<Option<std::net::TcpListener>>,
    tls: Option<tokio_rustls::TlsAcceptor>,
}

fn bind(address: SocketAddr, key: &str) -> Result<std::net::TcpListener, String> {
    let listener = std::net::TcpListener::bind(address)
        .map_err(|e| format!("{key} {address}: cannot listen: {e}"))?;
    listener
        .set_nonblocking(true)
        .map_err(|e| format!("{key} {address}: {e}"))?;
    Ok(listener)
}

impl DecisionService {
    /// Bind the configured addresses and load the TLS certificate.
    pub fn bind(
        state: Arc<GatewayState>,
        settings: DecisionApiSettings,
    ) -> Result<DecisionService, String> {
        let tls = match &settings.tls {
            None => None,
            Some(tls) => {
                let resolver = Arc::new(CertResolver::load(&tls.certificate, &tls.key)?);
                let config = server_config(tls, resolver)?;
                Some(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
            }
        };
        let http = bind(settings.address, "decision_api.address")?;
        let grpc = match settings.grpc_address {
            Some(a) => Some(bind(a, "decision_api.grpc_address")?),
            None => None,
        };
        Ok(DecisionService {
            state,
            settings,
            http: Mutex::new(Some(http)),
            grpc: Mutex::new(grpc),
            tls,
        })
    }
}

#[async_trait]
impl BackgroundService for DecisionService {
    async fn start(&self, shutdown: ShutdownWatch) {
        let taken = |m: &Mutex<Option<std::net::TcpListener>>| {
            m.lock().unwrap_or_else(|e| e.into_inner()).take()
        };
        if let Some(listener) = taken(&self.grpc) {
            match tokio::net::TcpListener::from_std(listener) {
                Ok(listener) => {
                    let state = self.state.clone();
                    let shutdown = shutdown.clone();
                    tokio::spawn(grpc::serve(state, listener, self.tls.clone(), shutdown));
                }
                Err(e) => tracing::error!("decision_api.grpc_address: {e}"),
            }
        }
        let Some(listener) = taken(&self.http) else {
            return;
        };
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(l) => l,
            Err(e) => {
                tracing::error!("decision_api.address: {e}");
                return;
            }
        };
        self.serve(listener, shutdown).await;
    }
}

impl DecisionService {
    async fn serve(&self, listener: tokio::net::TcpListener, mut shutdown: ShutdownWatch) {
        let permits = Arc::new(Semaphore::new(MAX_CONNECTIONS));
        loop {
            let Ok(permit) = permits.clone().acquire_owned().await else {
                return;
            };
            let stopped = shutdown.changed();
            let Some(stream) = next_connection(&listener, "decision_api.address", stopped).await
            else {
                return;
            };
            let state = self.state.clone();
            let tls = self.tls.clone();
            let timeout = self.settings.timeout;
            tokio::spawn(async move {
                let _permit = permit;
                match tls {
                    None => {
                        let conn = Connection {
                            client_certificate: false,
                        };
                        serve_connection(state, conn, stream, timeout).await;
                    }
                    Some(acceptor) => {
                        let handshake = tokio::time::timeout(timeout, acceptor.accept(stream));
                        let Ok(Ok(stream)) = handshake.await else {
                            return;
                        };
                        let conn = Connection {
                            client_certificate: stream.get_ref().1.peer_certificates().is_some(),
                        };
                        serve_connection(state, conn, stream, timeout).await;
                    }
                }
            });
        }
    }
}

/// Serve HTTP/1.1 or HTTP/2 on one connection; a request's header must arrive within `timeout`.
async fn serve_connection<S>(
    state: Arc<GatewayState>,
    conn: Connection,
    stream: S,
    timeout: std::time::Duration,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let service = hyper::service::service_fn(move |req: http::Request<hyper::body::Incoming>| {
        let state = state.clone();
        async move {
            let req = req.map(axum::body::Body::new);
            Ok::<_, std::convert::Infallible>(answer(&state, conn, req).await)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeout);
    // An HTTP/2 connection whose peer stops answering pings is closed: idle ones hold nothing.
    builder
        .http2()
        .timer(TokioTimer::new())
        .max_concurrent_streams(100)
        .keep_alive_interval(Some(std::time::Duration::from_secs(30)))
        .keep_alive_timeout(std::time::Duration::from_secs(10));
    let _ = builder
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// One request, within the configured deadline; its `X-Request-ID` is echoed on the answer, as
/// AuthZEN requires (whatever the answer is), where it is one to echo (`echoable`; AuthZEN
/// refuses another).
async fn answer(
    state: &GatewayState,
    conn: Connection,
    req: http::Request<axum::body::Body>,
) -> http::Response<axum::body::Body> {
    let request_id = req
        .headers()
        .get(REQUEST_ID_HEADER)
        .filter(|id| super::echoable(id))
        .cloned();
    let mut response = within_deadline(state, conn, req).await;
    if let Some(id) = request_id {
        response.headers_mut().insert(REQUEST_ID_HEADER, id);
    }
    response
}

/// The service's answer, or 503 `decision_timeout` once the configured deadline has passed.
async fn within_deadline(
    state: &GatewayState,
    conn: Connection,
    req: http::Request<axum::body::Body>,
) -> http::Response<axum::body::Body> {
    let timeout = super::deadline(state);
    match tokio::time::timeout(timeout, route(state, conn, req)).await {
        Ok(response) => response.map(axum::body::Body::from),
        Err(_) => Answer::from(&ServiceRefusal::DecisionTimeout(timeout).into())
            .into_response()
            .map(axum::body::Body::from),
    }
}

/// The service's paths.
async fn route(
    state: &GatewayState,
    conn: Connection,
    req: http::Request<axum::body::Body>,
) -> http::Response<Vec<u8>> {
    let path = req.uri().path();
    if path == forwarded::NGINX_PATH {
        return forwarded::nginx(state, req.headers()).await;
    }
    if path == forwarded::EXT_AUTHZ_PREFIX
        || path.starts_with(&format!("{}/", forwarded::EXT_AUTHZ_PREFIX))
    {
        let target = req
            .uri()
            .path_and_query()
            .map_or(path, http::uri::PathAndQuery::as_str)
            .to_string();
        let (parts, body) = req.into_parts();
        let limit = super::max_body(state);
        let body = match axum::body::to_bytes(body, limit).await {
            Ok(bytes) => (!bytes.is_empty()).then(|| bytes.to_vec()),
            Err(_) => {
                let refusal =
                    super::refused_unread(state, Interface::ExtAuthzHttp, Reject::BodyTooLarge);
                return forwarded::respond(refusal);
            }
        };
        return forwarded::ext_authz(state, &parts.method, &target, &parts.headers, body).await;
    }
    authzen::route(state, conn, req).await
}
