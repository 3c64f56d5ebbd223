//! Why the consumer's side made no call, or could not finish one: each reason with the status the
//! local client gets, a code (for its program, the metrics and the log) and a description it can
//! read. A call that lacks what its route requires is never forwarded.

use crate::peers::registry_errors::RegistryError;
use crate::peers::PeerError;
use crate::scheme::reason_codes;
use http::StatusCode;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the call failed inside the consumer's side (its log says why)")]
    Internal,
    #[error("the request's target is a whole URL: call the consumer's side with a path (http://host:port/path), not as a forward proxy")]
    AbsoluteTarget,
    #[error("the path is not usable: {0}")]
    BadPath(String),
    #[error("no outgoing route takes {method} {path}")]
    NoRoute { method: String, path: String },
    #[error("the outgoing route {route} takes {allowed}, not {method}")]
    MethodNotAllowed {
        route: String,
        allowed: String,
        method: String,
    },
    #[error("the request's body is larger than {limit} bytes, the most the consumer's side holds")]
    BodyTooLarge { limit: usize },
    #[error("the request's body could not be read: {0}")]
    BodyUnreadable(String),
    #[error("the outgoing route {route} calls as a broker: give the consumer's client assertion (addressed to us) in the service_consumer_assertion header")]
    NoConsumerAssertion { route: String },
    #[error("the outgoing route {route} does not call as a broker: a consumer's assertion goes only on a route with broker = true")]
    NotABroker { route: String },
    #[error("{0}: servers read it differently, and the evidence is asked for one reading only")]
    Ambiguous(String),
    #[error("the {header} header is given more than once (or under both its names)")]
    Repeated { header: &'static str },
    #[error("the {header} header is not text")]
    BadHeader { header: &'static str },
    #[error("our client assertion could not be signed: {0}")]
    CannotSign(String),
    #[error("the request carries delegation evidence, and the outgoing route {route} brings its own from the data owner's registry: leave the header out")]
    EvidenceGiven { route: String },
    #[error(
        "the request lacks {template}, which the outgoing route {route} asks the registry about"
    )]
    MissingValue { route: String, template: String },
    #[error("the provider {provider} has as many calls of ours in flight as its max_concurrent allows ({max}): call again shortly")]
    ProviderBusy { provider: String, max: usize },
    #[error("the provider {provider} refused our token request ({status}): {detail}")]
    TokenRefused {
        provider: String,
        status: u16,
        detail: String,
    },
    #[error("the provider {provider} gave no token: {detail}")]
    TokenFailed { provider: String, detail: String },
    #[error("the data owner's registry {registry} does not grant the call: {reason}")]
    RegistryDenied { registry: String, reason: String },
    #[error("the registry {registry} gave no usable answer: {detail}")]
    RegistryFailed { registry: String, detail: String },
    #[error("the provider {provider} did not answer in time")]
    ProviderTimeout { provider: String },
    #[error("the provider {provider} is unreachable: {detail}")]
    ProviderUnreachable { provider: String, detail: String },
    #[error("the provider {provider}'s TLS certificate is not trusted: {detail}")]
    ProviderUntrusted { provider: String, detail: String },
}

reason_codes! {
    Refusal {
        Refusal::Internal => "internal_error",
        Refusal::AbsoluteTarget => "absolute_target",
        Refusal::BadPath(_) => "bad_path",
        Refusal::NoRoute { .. } => "no_route",
        Refusal::MethodNotAllowed { .. } => "method_not_allowed",
        Refusal::BodyTooLarge { .. } => "body_too_large",
        Refusal::BodyUnreadable(_) => "body_unreadable",
        Refusal::NoConsumerAssertion { .. } => "consumer_assertion_missing",
        Refusal::NotABroker { .. } => "not_a_broker",
        Refusal::Ambiguous(_) => "ambiguous_request",
        Refusal::Repeated { .. } => "repeated_header",
        Refusal::BadHeader { .. } => "bad_header",
        Refusal::CannotSign(_) => "signing_failed",
        Refusal::EvidenceGiven { .. } => "evidence_given",
        Refusal::MissingValue { .. } => "missing_value",
        Refusal::ProviderBusy { .. } => "provider_busy",
        Refusal::TokenRefused { .. } => "token_refused",
        Refusal::TokenFailed { .. } => "token_failed",
        Refusal::RegistryDenied { .. } => "registry_denied",
        Refusal::RegistryFailed { .. } => "registry_failed",
        Refusal::ProviderTimeout { .. } => "provider_timeout",
        Refusal::ProviderUnreachable { .. } => "provider_unreachable",
        Refusal::ProviderUntrusted { .. } => "provider_untrusted",
    }
}

impl Refusal {
    pub fn status(&self) -> StatusCode {
        match self {
            Refusal::AbsoluteTarget
            | Refusal::BadPath(_)
            | Refusal::NotABroker { .. }
            | Refusal::Ambiguous(_)
            | Refusal::BodyUnreadable(_)
            | Refusal::NoConsumerAssertion { .. }
            | Refusal::Repeated { .. }
            | Refusal::BadHeader { .. }
            | Refusal::EvidenceGiven { .. }
            | Refusal::MissingValue { .. } => StatusCode::BAD_REQUEST,
            Refusal::NoRoute { .. } => StatusCode::NOT_FOUND,
            Refusal::CannotSign(_) | Refusal::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            Refusal::MethodNotAllowed { .. } => StatusCode::METHOD_NOT_ALLOWED,
            Refusal::BodyTooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
            Refusal::RegistryDenied { .. } => StatusCode::FORBIDDEN,
            Refusal::ProviderBusy { .. } => StatusCode::SERVICE_UNAVAILABLE,
            Refusal::ProviderTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            Refusal::TokenRefused { .. }
            | Refusal::TokenFailed { .. }
            | Refusal::RegistryFailed { .. }
            | Refusal::ProviderUnreachable { .. }
            | Refusal::ProviderUntrusted { .. } => StatusCode::BAD_GATEWAY,
        }
    }

    /// A failed call to the provider (its token endpoint or its service).
    pub fn of_provider(provider: &str, e: PeerError) -> Self {
        let provider = provider.to_string();
        match e {
            PeerError::Timeout { .. } => Refusal::ProviderTimeout { provider },
            e if e.untrusted_certificate() => Refusal::ProviderUntrusted {
                provider,
                detail: e.to_string(),
            },
            PeerError::Unreachable { detail, .. } => {
                Refusal::ProviderUnreachable { provider, detail }
            }
            PeerError::Status { status, body, .. } if (400..500).contains(&status) => {
                Refusal::TokenRefused {
                    provider,
                    status,
                    detail: body,
                }
            }
            e => Refusal::TokenFailed {
                provider,
                detail: e.to_string(),
            },
        }
    }

    /// A failed call to a registry.
    pub fn of_registry(registry: &str, e: RegistryError) -> Self {
        Refusal::RegistryFailed {
            registry: registry.to_string(),
            detail: e.to_string(),
        }
    }

    /// The answer: its status, and in JSON the code, the description and the id of the call's
    /// log line (a busy provider's says when to call again).
    pub fn answer(&self, decision_id: &str) -> http::Response<axum::body::Body> {
        let body = serde_json::json!({
            "error": self.code(),
            "error_description": self.to_string(),
            "decision_id": decision_id,
        });
        let mut response = http::Response::new(axum::body::Body::from(body.to_string()));
        *response.status_mut() = self.status();
        let headers = response.headers_mut();
        headers.insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("application/json"),
        );
        if matches!(self, Refusal::ProviderBusy { .. }) {
            headers.insert(
                http::header::RETRY_AFTER,
                http::HeaderValue::from_static("1"),
            );
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::Refusal;

    /// One refusal of every kind.
    fn every_kind() -> Vec<Refusal> {
        let (r, p, d) = (String::new, String::new, String::new);
        vec![
            Refusal::Internal,
            Refusal::AbsoluteTarget,
            Refusal::BadPath(d()),
            Refusal::NoRoute {
                method: d(),
                path: d(),
            },
            Refusal::MethodNotAllowed {
                route: r(),
                allowed: d(),
                method: d(),
            },
            Refusal::BodyTooLarge { limit: 1 },
            Refusal::BodyUnreadable(d()),
            Refusal::NoConsumerAssertion { route: r() },
            Refusal::NotABroker { route: r() },
            Refusal::Ambiguous(d()),
            Refusal::Repeated { header: "h" },
            Refusal::BadHeader { header: "h" },
            Refusal::CannotSign(d()),
            Refusal::EvidenceGiven { route: r() },
            Refusal::MissingValue {
                route: r(),
                template: d(),
            },
            Refusal::ProviderBusy {
                provider: p(),
                max: 1,
            },
            Refusal::TokenRefused {
                provider: p(),
                status: 400,
                detail: d(),
            },
            Refusal::TokenFailed {
                provider: p(),
                detail: d(),
            },
            Refusal::RegistryDenied {
                registry: r(),
                reason: d(),
            },
            Refusal::RegistryFailed {
                registry: r(),
                detail: d(),
            },
            Refusal::ProviderTimeout { provider: p() },
            Refusal::ProviderUnreachable {
                provider: p(),
                detail: d(),
            },
            Refusal::ProviderUntrusted {
                provider: p(),
                detail: d(),
            },
        ]
    }

    /// The guide's table of refusals lists every code with the status it is answered with.
    #[test]
    fn the_guides_table_lists_every_refusal_with_its_status() {
        let kinds = every_kind();
        let mut codes: Vec<&str> = kinds.iter().map(Refusal::code).collect();
        let mut all = Refusal::codes();
        codes.sort_unstable();
        all.sort_unstable();
        assert_eq!(codes, all, "every kind of refusal is in the list above");
        let page = include_str!("../../docs/src/guides/consumer.md");
        for refusal in kinds {
            let (code, status) = (refusal.code(), refusal.status().as_u16());
            let row = page
                .lines()
                .find(|l| l.starts_with('|') && l.contains(&format!("`{code}`")))
                .unwrap_or_else(|| panic!("the guide's table has no row for {code}"));
            assert!(
                row.starts_with(&format!("| {status} |")),
                "{code} is answered {status}: {row}"
            );
        }
    }
}
