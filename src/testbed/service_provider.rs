//! The dummy service provider: the common endpoints and the test service POST /boom_access.

use super::participant::{common_routes, require, ApiResult, Participant};
use axum::extract::State;
use axum::http::{HeaderMap, Method};
use axum::response::IntoResponse;
use axum::routing::any;
use axum::Router;
use std::sync::Arc;

pub fn router(p: Arc<Participant>) -> Router {
    common_routes()
        .route("/boom_access", any(boom_access))
        .with_state(p)
}

/// POST /boom_access: `true` to a valid token.
async fn boom_access(
    State(p): State<Arc<Participant>>,
    method: Method,
    headers: HeaderMap,
) -> ApiResult {
    require(&method, Method::POST)?;
    p.authenticate(&headers)?;
    Ok(axum::Json(true).into_response())
}
