//! The echo backend: answers any request with the method, path, query, headers and body it
//! received, as JSON, so that tests see exactly what a gateway forwarded.

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use axum::Router;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use serde_json::{json, Map, Value};

pub fn router() -> Router {
    Router::new().fallback(echo)
}

async fn echo(request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let mut headers = Map::new();
    for (name, value) in &parts.headers {
        let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
        match headers.get_mut(name.as_str()) {
            Some(Value::String(existing)) => {
                existing.push_str(", ");
                existing.push_str(&value);
            }
            _ => {
                headers.insert(name.as_str().to_string(), Value::String(value));
            }
        }
    }
    let bytes = match axum::body::to_bytes(Body::new(body), 64 * 1024 * 1024).await {
        Ok(b) => b,
        Err(e) => {
            return (
                axum::http::StatusCode::BAD_REQUEST,
                axum::Json(json!({"error": "unreadable_body", "error_description": e.to_string()})),
            )
                .into_response()
        }
    };
    let (body, encoding) = match std::str::from_utf8(&bytes) {
        Ok(text) => (Value::String(text.to_string()), "utf-8"),
        Err(_) => (Value::String(STANDARD.encode(&bytes)), "base64"),
    };
    axum::Json(json!({
        "method": parts.method.as_str(),
        "path": parts.uri.path(),
        "query": parts.uri.query(),
        "version": format!("{:?}", parts.version),
        "headers": headers,
        "body": body,
        "body_encoding": encoding,
        "body_length": bytes.len(),
    }))
    .into_response()
}
