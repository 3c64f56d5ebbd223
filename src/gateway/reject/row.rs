//! The table: each refusal's status, `error` code, reason code, metrics outcome, description
//! and gRPC status.

use super::refusals::*;
use crate::peers::registry_errors::{RegistryFailure, RegistryRefusal};
use crate::peers::PeerError;
use crate::rate::whole_seconds;
use crate::scheme::verdict::DenyReason;
use crate::telemetry::metrics::Outcome;
use http::Method;

/// How a refusal is answered and counted.
pub struct Row {
    pub status: u16,
    /// The `error` member: OAuth 2.0 / RFC 6750 codes where they exist.
    pub error: &'static str,
    /// The `reason` member, and the reason label of metrics and the access log.
    pub reason: &'static str,
    /// The outcome label of metrics and the access log.
    pub outcome: Outcome,
    pub description: String,
    /// The gRPC status of the refusal, as Envoy's `ext_authz` over gRPC is answered.
    pub grpc: GrpcCode,
}

/// A gRPC status code (google.rpc.Code) of a refusal, chosen by its HTTP status as the gRPC
/// HTTP mapping has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrpcCode(pub i32, pub &'static str);

impl GrpcCode {
    pub fn for_status(status: u16) -> GrpcCode {
        match status {
            401 => GrpcCode(16, "UNAUTHENTICATED"),
            403 => GrpcCode(7, "PERMISSION_DENIED"),
            404 => GrpcCode(5, "NOT_FOUND"),
            413 | 429 => GrpcCode(8, "RESOURCE_EXHAUSTED"),
            400..=499 => GrpcCode(3, "INVALID_ARGUMENT"),
            502 | 503 => GrpcCode(14, "UNAVAILABLE"),
            504 => GrpcCode(4, "DEADLINE_EXCEEDED"),
            _ => GrpcCode(13, "INTERNAL"),
        }
    }
}

impl Reject {
    /// The table: every refusal's status, codes, outcome and description.
    #[rustfmt::skip]
    pub fn row(&self) -> Row {
        let row = |status, error, reason, outcome, description: String| Row {
            status,
            error,
            reason,
            outcome,
            description,
            grpc: GrpcCode::for_status(status),
        };
        match self {
            Reject::BadPath(e) => row(400, "invalid_request", "invalid_path", Outcome::BadRequest, e.to_string()),
            Reject::BadQuery(e) => row(400, "invalid_request", "invalid_query", Outcome::BadRequest, e.to_string()),
            Reject::BadHeader(e) => row(400, "invalid_request", e.code(), Outcome::BadRequest, e.to_string()),
            Reject::Ambiguous(a) => row(400, "invalid_request", "ambiguous_request", Outcome::BadRequest, format!("the request holds {a}, which backends read differently; the route does not accept it")),
            Reject::NotFound => row(404, "not_found", "no_route", Outcome::NotFound, "no route for this path".into()),
            Reject::MethodNotAllowed(m) => row(405, "method_not_allowed", "method_not_allowed", Outcome::MethodNotAllowed, format!("this path answers {}", methods(m))),
            Reject::BodyTooLarge => row(413, "request_too_large", "body_too_large", Outcome::BadRequest, "the request body is too large".into()),
            Reject::UnreadableBody(e) => row(400, "invalid_request", "unreadable_body", Outcome::BadRequest, e.to_string()),
            Reject::Body(e) => row(e.status(), body_error(e.status()), e.code(), Outcome::BadRequest, e.to_string()),
            Reject::BodyElement { index, refusal } => { let inner = refusal.row(); Row { description: format!("element {index} of the body's array: {}", inner.description), ..inner } }
            Reject::Unauthenticated(e) => row(401, "invalid_token", e.code(), Outcome::Unauthenticated, e.to_string()),
            Reject::TokenRequest(e) => row(400, e.oauth_error(), e.code(), Outcome::TokenRefused, e.to_string()),
            Reject::Denied(r) => row(403, "access_denied", r.code(), Outcome::Denied, r.to_string()),
            Reject::RegistryDenied { registry, reason } => row(403, "access_denied", reason.code(), Outcome::Denied, match reason {
                DenyReason::NoPolicy => format!("the authorisation registry {registry} holds no policy for this request"),
                DenyReason::DeniedByRule => format!("the authorisation registry {registry} denies this request: the rule of its evidence is Deny"),
                other => format!("the evidence of the authorisation registry {registry} does not grant this request: {other}"),
            }),
            Reject::Evidence(e) => row(403, "access_denied", e.code(), Outcome::Denied, e.to_string()),
            Reject::MissingRequestValue(e) => row(400, "invalid_request", "missing_request_value", Outcome::BadRequest, e.to_string()),
            Reject::TooManyRegistryCalls { per_minute, retry_after } => row(429, "too_many_requests", "too_many_registry_calls", Outcome::RateLimited, format!("more than {per_minute} requests a minute that needed the registry; try again in {} s", whole_seconds(*retry_after))),
            Reject::TooManyNewOwners { per_minute } => row(429, "too_many_requests", "too_many_new_owners", Outcome::RateLimited, format!("more than {per_minute} data owners this minute that the gateway has not looked up yet; try again later")),
            Reject::ValueTooLong { value, limit } => row(400, "invalid_request", "request_value_too_long", Outcome::BadRequest, format!("{value} is longer than {limit} bytes")),
            Reject::ControlInValue(value) => row(400, "invalid_request", "request_value_control", Outcome::BadRequest, format!("{value} holds a control character (U+0000 to U+001F, U+007F to U+009F), which no value a rule reads may hold: a backend that trims it or stops at it reads another value")),
            Reject::PreviousStepsUnavailable { registry, party, broker: false } => row(401, "invalid_token", "previous_steps_unavailable", Outcome::Unauthenticated, format!("the authorisation registry {registry} asks for the client assertion of your ({party}'s) token request, which the gateway holds only for its lifetime (30 s): request a new token and send this request within it")),
            Reject::PreviousStepsUnavailable { registry, party, broker: true } => row(401, "invalid_token", "previous_steps_unavailable", Outcome::Unauthenticated, format!("the authorisation registry {registry} asks for the consent of the consumer you act for (its service_consumer_assertion, sent) and then yours: the client assertion of your ({party}'s) token request, which the gateway holds only for its lifetime (30 s): request a new token and send this request within it")),
            Reject::RegistryRefused(r) => row(502, "bad_gateway", r.code(), Outcome::UpstreamError, registry_refusal(r)),
            Reject::Unavailable(e) => row(503, "temporarily_unavailable", e.code(), Outcome::Unavailable, e.description().into()),
            Reject::NoHealthyBackend(u) => row(502, "bad_gateway", "no_healthy_backend", Outcome::UpstreamError, format!("no healthy backend in upstream {u}")),
            Reject::BackendUnreachable => row(502, "bad_gateway", "backend_unreachable", Outcome::UpstreamError, "the backend could not be reached".into()),
            Reject::BackendTimeout => row(504, "gateway_timeout", "backend_timeout", Outcome::UpstreamError, "the backend did not answer in time".into()),
            Reject::Login(e) => row(e.status(), "login_failed", e.code(), Outcome::LoginRefused, e.description()),
            Reject::Service(e) => { let (status, error, outcome) = e.answered(); row(status, error, e.code(), outcome, e.to_string()) }
            Reject::Internal => row(500, "server_error", "internal_error", Outcome::InternalError, "the gateway failed to handle the request".into()),
        }
    }

    /// What the log should say beyond the answer, for failures of dependencies.
    pub fn log_detail(&self) -> Option<String> {
        self.failure().map(ToString::to_string)
    }

    /// The dependency's failure the log names, where this refusal is one.
    pub fn failure(&self) -> Option<&dyn std::fmt::Display> {
        match self {
            Reject::Unavailable(e) => Some(e),
            Reject::RegistryRefused(r) => Some(r),
            Reject::Login(
                e @ (LoginFailure::ProviderUnavailable(_)
                | LoginFailure::Store(_)
                | LoginFailure::CodeRefused(_)
                | LoginFailure::IdToken(_)
                | LoginFailure::Userinfo(_)),
            ) => Some(e),
            _ => None,
        }
    }

    pub(super) fn headers(&self) -> Vec<(&'static str, String)> {
        match self {
            Reject::Unauthenticated(_) | Reject::PreviousStepsUnavailable { .. } => {
                vec![("www-authenticate", "Bearer error=\"invalid_token\"".into())]
            }
            Reject::Service(ServiceRefusal::PepUnauthenticated(_)) => {
                vec![("www-authenticate", "Bearer realm=\"authzen\"".into())]
            }
            Reject::Service(ServiceRefusal::PurgeUnauthenticated) => {
                vec![("www-authenticate", "Bearer".into())]
            }
            Reject::MethodNotAllowed(m) => vec![("allow", methods(m))],
            Reject::Unavailable(Unavailable::ListenerFull) => vec![("retry-after", "1".into())],
            Reject::Unavailable(Unavailable::Registry(RegistryFailure::Call(
                PeerError::Busy { retry_after, .. },
            ))) => vec![("retry-after", retry_after.to_string())],
            Reject::TooManyRegistryCalls { retry_after, .. } => {
                vec![("retry-after", whole_seconds(*retry_after).to_string())]
            }
            Reject::Login(
                LoginFailure::TooManyStarts { retry_after }
                | LoginFailure::TooManyStartsFromAddress { retry_after, .. },
            ) => vec![("retry-after", retry_after.to_string())],
            Reject::BodyElement { refusal, .. } => refusal.headers(),
            Reject::TokenRequest(_) | Reject::UnreadableBody(_) => vec![
                ("cache-control", "no-store".into()),
                ("pragma", "no-cache".into()),
            ],
            _ => Vec::new(),
        }
    }
}

/// What a consumer is told of a registry's refusal: what is wrong for good, in words of the
/// gateway's, with no address and none of the registry's pages (the log has those).
fn registry_refusal(r: &RegistryRefusal) -> String {
    const UNTIL: &str =
        "asking again will not help until the gateway's settings for that registry suit it";
    match r {
        RegistryRefusal::Request { status, .. } => format!(
            "the authorisation registry refused the gateway's request with {status} ({}); {UNTIL}",
            r.short_reason()
        ),
        RegistryRefusal::Credentials { status, .. } => format!(
            "the authorisation registry refused the gateway's credentials with {status} ({}), a fresh token's too; {UNTIL}",
            r.short_reason()
        ),
        RegistryRefusal::NoEndpoint { .. } => format!(
            "the authorisation registry has no endpoint at the path the gateway calls (404, a web page): its token_path or delegation_path is not the registry's; {UNTIL}"
        ),
        RegistryRefusal::Redirected(_) => format!(
            "the authorisation registry redirects the gateway's call elsewhere, and the gateway follows no redirects; {UNTIL}"
        ),
        RegistryRefusal::NotForUs {
            registry,
            addressed,
            ours,
            ..
        } => format!(
            "the evidence of the authorisation registry {registry} is addressed to {addressed} (aud), not to the gateway ({ours}); {UNTIL}"
        ),
    }
}

/// The `error` code of a body's refusal, by its status.
fn body_error(status: u16) -> &'static str {
    match status {
        413 => "request_too_large",
        415 => "unsupported_media_type",
        _ => "invalid_request",
    }
}

fn methods(m: &[Method]) -> String {
    m.iter().map(Method::as_str).collect::<Vec<_>>().join(", ")
}
