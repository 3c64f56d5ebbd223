//! The `[decision_api]` section: where the decision service listens (HTTP for nginx and Envoy's
//! HTTP form, gRPC for Envoy), its TLS and client certificates, and the deadline of a request.

use super::defaults as default;
use super::file::DecisionApiFile;
use super::issues::Issues;
use super::model::DecisionApiSettings;
use super::values::socket_addr;
use std::net::SocketAddr;
use std::path::Path;

pub(super) fn build(
    base: &Path,
    f: DecisionApiFile,
    issues: &mut Issues,
) -> Option<DecisionApiSettings> {
    let address = match f.address.as_deref() {
        None | Some("") => {
            issues.add(
                "decision_api.address",
                "missing: an address such as \"127.0.0.1:9902\"",
            );
            None
        }
        Some(a) => issues.check("decision_api.address", socket_addr(a)),
    };
    let grpc_address = f
        .grpc_address
        .and_then(|a| issues.check("decision_api.grpc_address", socket_addr(&a)));
    let tls = f
        .tls
        .map(|t| super::gateway::listener_tls(base, "decision_api", t, issues));
    let timeout = f.timeout.unwrap_or(default::DECISION_API_TIMEOUT);
    if timeout.is_zero() {
        issues.add("decision_api.timeout", "longer than 0 s");
    }
    Some(DecisionApiSettings {
        address: address?,
        grpc_address,
        tls,
        timeout,
    })
}

/// The addresses the service binds, by key, which no other listener may take.
pub(super) fn addresses(settings: &DecisionApiSettings) -> Vec<(String, SocketAddr)> {
    std::iter::once(("decision_api.address".to_string(), settings.address))
        .chain(
            settings
                .grpc_address
                .map(|a| ("decision_api.grpc_address".to_string(), a)),
        )
        .collect()
}
