//! A registry that answers as FIWARE Keyrock 8.3 does (`keyrock = true`), for tests of the
//! gateway's settings for it: its token endpoint at `/oauth2/token` and its delegation endpoint
//! at `/ar/delegation` (policies in at `/ar/policy`), a web page for a path it does not serve
//! (Express's "Cannot POST"), evidence addressed to the id it keeps for the asking client (its
//! user id, not the client's party id), and a token it no longer knows (after its database lost
//! it: `POST /testing/forget-tokens`) answered 500 with an error page. It reads requests as the
//! strict registry does (`strict.rs`).

use super::keyrock_ways::{DELEGATION_PATH, POLICY_PATH, TOKEN_PATH};
use super::participant::{self, ApiResult, Participant};
use super::registry;
use crate::access_token::bearer_token;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, post};
use axum::Router;
use std::sync::Arc;

pub fn router(p: Arc<Participant>) -> Router {
    Router::new()
        .route(TOKEN_PATH, any(participant::token))
        .route(DELEGATION_PATH, any(delegation))
        .route(POLICY_PATH, any(registry::add_policy))
        .route("/capabilities", any(participant::capabilities))
        .route("/testing/stats", axum::routing::get(participant::stats))
        .route("/testing/forget-tokens", post(forget_tokens))
        .fallback(no_such_path)
        .with_state(p)
}

/// POST /ar/delegation: a token it does not know is its server's error page (500), as Keyrock
/// answers one its database lost; otherwise the registry's answer.
async fn delegation(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
    body: bytes::Bytes,
) -> ApiResult {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let known = p
        .keyrock
        .as_ref()
        .is_some_and(|k| bearer_token(token).is_ok_and(|t| k.knows(t)));
    if method == Method::POST && !known {
        return Ok(page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "Internal Server Error",
            "Cannot read properties of null (reading 'user_id')",
        ));
    }
    registry::delegation(State(p), method, headers, body).await
}

/// POST /testing/forget-tokens (test only): the registry's database loses every token it issued.
async fn forget_tokens(State(p): State<Arc<Participant>>) -> StatusCode {
    if let Some(k) = &p.keyrock {
        k.forget_all();
    }
    StatusCode::NO_CONTENT
}

/// A path it does not serve: Express's page.
async fn no_such_path(method: Method, uri: Uri) -> Response {
    let text = format!("Cannot {method} {}", uri.path());
    page(StatusCode::NOT_FOUND, "Error", &text)
}

/// An HTML error page with `status`.
fn page(status: StatusCode, title: &str, text: &str) -> Response {
    let body = format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n</head>\n<body>\n<pre>{}</pre>\n</body>\n</html>\n",
        crate::html::escape(title),
        crate::html::escape(text)
    );
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}
