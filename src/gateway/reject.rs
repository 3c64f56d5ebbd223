//! The one place where a refusal becomes an HTTP answer: status, JSON body naming the reason, and
//! the headers that go with it.

use crate::access_token::AccessTokenError;
use crate::peers::scheme_owner::TrustError;
use crate::request::path::PathError;
use crate::scheme::assertion::AssertionError;
use crate::scheme::evidence::DenyReason;
use bytes::Bytes;
use http::Method;
use pingora::http::ResponseHeader;
use pingora::proxy::Session;
use serde_json::{json, Value};

/// Why a request is answered by the gateway instead of the backend.
#[derive(Debug, Clone)]
pub enum Reject {
    BadPath(PathError),
    NotFound,
    MethodNotAllowed(Vec<Method>),
    BodyTooLarge,
    Unauthenticated(AccessTokenError),
    /// A token request that fails; 400 with an OAuth 2.0 error.
    TokenRequest(AssertionError),
    TokenRequestBody(String),
    /// Delegation evidence does not grant the request.
    Denied(DenyReason),
    /// The delegation evidence in the header is unusable (bad signature, untrusted, not for us...).
    BadEvidence {
        reason: &'static str,
        detail: String,
    },
    /// A value the rule needs is missing from the request (a header or query parameter).
    MissingRequestValue(String),
    /// A dependency (scheme owner, registry) failed: fail closed.
    Unavailable {
        reason: &'static str,
        detail: String,
    },
    NoHealthyBackend(String),
    BackendUnreachable,
    BackendTimeout,
}

impl From<TrustError> for Reject {
    fn from(e: TrustError) -> Self {
        Reject::Unavailable {
            reason: e.code(),
            detail: e.to_string(),
        }
    }
}

impl Reject {
    pub fn status(&self) -> u16 {
        match self {
            Reject::BadPath(_) | Reject::TokenRequest(_) | Reject::TokenRequestBody(_) => 400,
            Reject::MissingRequestValue(_) => 400,
            Reject::NotFound => 404,
            Reject::MethodNotAllowed(_) => 405,
            Reject::BodyTooLarge => 413,
            Reject::Unauthenticated(_) => 401,
            Reject::Denied(_) | Reject::BadEvidence { .. } => 403,
            Reject::Unavailable { .. } => 503,
            Reject::NoHealthyBackend(_) | Reject::BackendUnreachable => 502,
            Reject::BackendTimeout => 504,
        }
    }

    /// The bounded outcome label for metrics and the access log.
    pub fn outcome(&self) -> &'static str {
        match self {
            Reject::BadPath(_)
            | Reject::TokenRequestBody(_)
            | Reject::BodyTooLarge
            | Reject::MissingRequestValue(_) => "bad_request",
            Reject::NotFound => "not_found",
            Reject::MethodNotAllowed(_) => "method_not_allowed",
            Reject::Unauthenticated(_) => "unauthenticated",
            Reject::TokenRequest(_) => "token_refused",
            Reject::Denied(_) | Reject::BadEvidence { .. } => "denied",
            Reject::Unavailable { .. } => "unavailable",
            Reject::NoHealthyBackend(_) | Reject::BackendUnreachable | Reject::BackendTimeout => {
                "upstream_error"
            }
        }
    }

    /// The bounded reason label.
    pub fn reason(&self) -> &'static str {
        match self {
            Reject::BadPath(_) => "invalid_path",
            Reject::NotFound => "no_route",
            Reject::MethodNotAllowed(_) => "method_not_allowed",
            Reject::BodyTooLarge => "body_too_large",
            Reject::Unauthenticated(e) => e.code(),
            Reject::TokenRequest(e) => e.code(),
            Reject::TokenRequestBody(_) => "unreadable_body",
            Reject::Denied(r) => r.code(),
            Reject::BadEvidence { reason, .. } => reason,
            Reject::MissingRequestValue(_) => "missing_request_value",
            Reject::Unavailable { reason, .. } => reason,
            Reject::NoHealthyBackend(_) => "no_healthy_backend",
            Reject::BackendUnreachable => "backend_unreachable",
            Reject::BackendTimeout => "backend_timeout",
        }
    }

    fn description(&self) -> String {
        match self {
            Reject::BadPath(e) => e.to_string(),
            Reject::NotFound => "no route for this path".into(),
            Reject::MethodNotAllowed(m) => format!(
                "this path answers {}",
                m.iter().map(Method::as_str).collect::<Vec<_>>().join(", ")
            ),
            Reject::BodyTooLarge => "the request body is too large".into(),
            Reject::Unauthenticated(e) => e.to_string(),
            Reject::TokenRequest(e) => e.to_string(),
            Reject::TokenRequestBody(e) => e.clone(),
            Reject::Denied(r) => r.to_string(),
            Reject::BadEvidence { detail, .. } => detail.clone(),
            Reject::MissingRequestValue(what) => {
                format!("the request lacks {what}, which the route's rule needs")
            }
            // What failed upstream is logged, not told: it names internal addresses and answers.
            Reject::Unavailable { reason, .. } => match *reason {
                r if r.starts_with("registry") => {
                    "the authorisation registry gave no usable answer in time; try again later"
                        .into()
                }
                r if r.starts_with("scheme_owner") => {
                    "the scheme owner gave no usable answer; try again later".into()
                }
                _ => "a service the gateway depends on failed; try again later".into(),
            },
            Reject::NoHealthyBackend(u) => format!("no healthy backend in upstream {u}"),
            Reject::BackendUnreachable => "the backend could not be reached".into(),
            Reject::BackendTimeout => "the backend did not answer in time".into(),
        }
    }

    /// The `error` member: OAuth 2.0 / RFC 6750 codes where they exist.
    fn error(&self) -> &'static str {
        match self {
            Reject::TokenRequest(e) => e.oauth_error(),
            Reject::TokenRequestBody(_) | Reject::BadPath(_) | Reject::MissingRequestValue(_) => {
                "invalid_request"
            }
            Reject::Unauthenticated(_) => "invalid_token",
            Reject::Denied(_) | Reject::BadEvidence { .. } => "access_denied",
            Reject::NotFound => "not_found",
            Reject::MethodNotAllowed(_) => "method_not_allowed",
            Reject::BodyTooLarge => "request_too_large",
            Reject::Unavailable { .. } => "temporarily_unavailable",
            Reject::NoHealthyBackend(_) | Reject::BackendUnreachable => "bad_gateway",
            Reject::BackendTimeout => "gateway_timeout",
        }
    }

    /// What the log should say beyond the answer, for failures of dependencies.
    pub fn log_detail(&self) -> Option<&str> {
        match self {
            Reject::Unavailable { detail, .. } => Some(detail),
            _ => None,
        }
    }

    pub fn body(&self) -> Value {
        json!({
            "error": self.error(),
            "error_description": self.description(),
            "reason": self.reason(),
        })
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            Reject::Unauthenticated(_) => {
                vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())]
            }
            Reject::MethodNotAllowed(m) => vec![(
                "allow",
                m.iter().map(Method::as_str).collect::<Vec<_>>().join(", "),
            )],
            Reject::TokenRequest(_) | Reject::TokenRequestBody(_) => {
                vec![
                    ("cache-control", "no-store".into()),
                    ("pragma", "no-cache".into()),
                ]
            }
            _ => Vec::new(),
        }
    }
}

/// A complete answer the gateway gives itself.
pub struct Answer {
    pub status: u16,
    pub body: Value,
    pub headers: Vec<(&'static str, String)>,
}

impl Answer {
    pub fn ok(body: Value) -> Self {
        Answer {
            status: 200,
            body,
            headers: Vec::new(),
        }
    }
}

/// Write a complete JSON answer.
pub async fn respond_json(
    session: &mut Session,
    status: u16,
    body: &Value,
    headers: &[(&'static str, String)],
) -> pingora::Result<()> {
    let body = Bytes::from(serde_json::to_vec(body).unwrap_or_default());
    let mut resp = ResponseHeader::build(status, Some(4 + headers.len()))?;
    resp.insert_header("content-type", "application/json")?;
    resp.insert_header("content-length", body.len().to_string())?;
    for (name, value) in headers {
        resp.insert_header(*name, value.as_str())?;
    }
    let head_only = session.req_header().method == Method::HEAD;
    session
        .write_response_header(Box::new(resp), head_only)
        .await?;
    if !head_only {
        session.write_response_body(Some(body), true).await?;
    }
    Ok(())
}

impl From<&Reject> for Answer {
    fn from(r: &Reject) -> Self {
        Answer {
            status: r.status(),
            body: r.body(),
            headers: r.headers(),
        }
    }
}

/// Write an answer.
pub async fn respond(session: &mut Session, answer: &Answer) -> pingora::Result<()> {
    respond_json(session, answer.status, &answer.body, &answer.headers).await
}
