//! The admin listener: /metrics (Prometheus), /live, /ready (the trusted list is fresh, the
//! scheme owner answers, and the replay store can be reached), and POST /purge of cached
//! decisions for callers with `[admin] purge_secret_file`'s secret.

use crate::gateway::evidence::cache::PurgeScope;
use crate::gateway::purge::MAX_BODY_BYTES;
use crate::gateway::reject::{Answer, Reject, ServiceRefusal};
use crate::gateway::snapshot::GatewayState;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The longest a purge request's body may take to arrive.
const BODY_TIMEOUT: Duration = Duration::from_secs(5);

pub struct Admin {
    state: Arc<GatewayState>,
}

impl Admin {
    pub fn new(state: Arc<GatewayState>) -> Self {
        Admin { state }
    }
}

fn answer(status: u16, content_type: &str, body: Vec<u8>) -> Response<Vec<u8>> {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .header("content-length", body.len())
        .header("cache-control", "no-store")
        .body(body)
        .unwrap_or_default()
}

fn json(status: u16, value: serde_json::Value) -> Response<Vec<u8>> {
    answer(
        status,
        "application/json",
        serde_json::to_vec(&value).unwrap_or_default(),
    )
}

fn refusal(reject: Reject) -> Response<Vec<u8>> {
    Answer::from(&reject).into_response()
}

/// The request's body, at most `MAX_BODY_BYTES`, within `BODY_TIMEOUT`; None: larger, or late.
async fn bounded_body(session: &mut ServerSession) -> Option<Vec<u8>> {
    let read = async {
        let mut body = Vec::new();
        while let Some(chunk) = session.read_request_body().await.ok()? {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_BODY_BYTES {
                return None;
            }
        }
        Some(body)
    };
    tokio::time::timeout(BODY_TIMEOUT, read)
        .await
        .ok()
        .flatten()
}

impl Admin {
    /// POST /purge: authenticated, exactly one scope; the entries dropped here and whether the
    /// fleet was told. Redis out of reach: purged here all the same, answered 503 with
    /// `"fleet": false`, as the other instances still hold what they cached.
    async fn purge(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        let Some(secret) = self.state.current.load().config.purge_secret.clone() else {
            return refusal(ServiceRefusal::PurgeNotConfigured.into());
        };
        if session.req_header().method != http::Method::POST {
            return refusal(Reject::MethodNotAllowed(vec![http::Method::POST]));
        }
        if !secret.admits(&session.req_header().headers) {
            let lines = &self.state.shared.dependency_lines;
            if let Some(left_out) = lines.admit("purge_unauthenticated", Instant::now()) {
                tracing::warn!(left_out, "a purge was refused: no or a wrong secret");
            }
            self.count_refused();
            return refusal(ServiceRefusal::PurgeUnauthenticated.into());
        }
        let Some(body) = bounded_body(session).await else {
            self.count_refused();
            return refusal(
                ServiceRefusal::PurgeTooLarge {
                    bytes: MAX_BODY_BYTES,
                    within: BODY_TIMEOUT,
                }
                .into(),
            );
        };
        let scope = match PurgeScope::from_request(&body) {
            Ok(scope) => scope,
            Err(e) => {
                self.count_refused();
                return refusal(ServiceRefusal::InvalidPurge(e).into());
            }
        };
        let purged = crate::gateway::purge::purge(&self.state, &scope).await;
        let scope_json = serde_json::to_value(&scope).unwrap_or_default();
        match purged.fleet {
            Some(Err(e)) => {
                let row = Reject::from(ServiceRefusal::FleetNotTold(e.to_string())).row();
                json(
                    row.status,
                    json!({"purged": purged.dropped, "scope": scope_json, "fleet": false, "error": row.error, "error_description": row.description, "reason": row.reason}),
                )
            }
            fleet => json(
                200,
                json!({"purged": purged.dropped, "scope": scope_json, "fleet": fleet.is_some()}),
            ),
        }
    }

    fn count_refused(&self) {
        self.state
            .shared
            .metrics
            .purges
            .with_label_values(&["none", "admin", "refused"])
            .inc();
    }
}

#[async_trait]
impl ServeHttp for Admin {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
        if session.req_header().uri.path() == "/purge" {
            return self.purge(session).await;
        }
        let req = session.req_header();
        if req.method != http::Method::GET && req.method != http::Method::HEAD {
            return refusal(Reject::MethodNotAllowed(vec![
                http::Method::GET,
                http::Method::HEAD,
            ]));
        }
        match req.uri.path() {
            "/metrics" => {
                let snap = self.state.current.load();
                snap.trust.report_age();
                snap.report_certificate_expiry(&self.state.shared.metrics);
                answer(
                    200,
                    "text/plain; version=0.0.4",
                    self.state.shared.metrics.render(),
                )
            }
            "/live" => json(200, json!({"status": "live"})),
            "/ready" => {
                let snap = self.state.current.load_full();
                match snap.readiness().await {
                    Ok(()) => json(
                        200,
                        json!({"status": "ready", "config_generation": snap.generation}),
                    ),
                    Err(problems) => json(
                        503,
                        json!({"status": "not_ready", "problems": problems, "config_generation": snap.generation}),
                    ),
                }
            }
            _ => refusal(Reject::NotFound),
        }
    }
}
