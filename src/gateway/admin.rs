//! The admin listener: /metrics (Prometheus), /live, and /ready (the trusted list is fresh, the
//! scheme owner answers, and the replay store can be reached).

use super::reject::{Answer, Reject};
use super::snapshot::GatewayState;
use async_trait::async_trait;
use http::Response;
use pingora::apps::http_app::ServeHttp;
use pingora::protocols::http::ServerSession;
use serde_json::json;
use std::sync::Arc;

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

#[async_trait]
impl ServeHttp for Admin {
    async fn response(&self, session: &mut ServerSession) -> Response<Vec<u8>> {
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
                answer(
                    200,
                    "text/plain; version=0.0.4",
                    self.state.shared.metrics.render(),
                )
            }
            "/live" => json(200, json!({"status": "live"})),
            "/ready" => {
                let snap = self.state.current.load_full();
                let mut problems = snap.trust.readiness().err().unwrap_or_default();
                if let Err(e) = snap.stores.replay.check().await {
                    problems.push(e.to_string());
                }
                if problems.is_empty() {
                    json(
                        200,
                        json!({"status": "ready", "config_generation": snap.generation}),
                    )
                } else {
                    json(
                        503,
                        json!({"status": "not_ready", "problems": problems, "config_generation": snap.generation}),
                    )
                }
            }
            _ => refusal(Reject::NotFound),
        }
    }
}
