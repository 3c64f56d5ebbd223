//! The `[decision_api]` section: where the decision service listens (HTTP for nginx, Envoy's HTTP
//! form and AuthZEN; gRPC for Envoy), its TLS and client certificates, the secret AuthZEN callers
//! present, the bounds of a request, and the identifier AuthZEN's discovery document publishes.

use super::defaults as default;
use super::file::DecisionApiFile;
use super::issues::Issues;
use super::model::{digest, BearerSecret, DecisionApiSettings};
use super::values::{resolve, socket_addr, warn_open_secret};
use std::net::SocketAddr;
use std::path::Path;

/// The fewest bytes of secret a bearer secret file holds.
const MIN_SECRET_BYTES: usize = 32;

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
        .map(|t| super::pem::listener_tls(base, "decision_api", t, issues));
    let bearer_secret = f
        .bearer_secret_file
        .as_ref()
        .and_then(|p| bearer_secret(&resolve(base, p), "decision_api.bearer_secret_file", issues));
    let max_body_bytes = match f.max_body_bytes {
        None => default::DECISION_API_MAX_BODY,
        Some(size) => match usize::try_from(size.0) {
            Ok(n) if n >= 1024 => n,
            _ => {
                issues.add("decision_api.max_body_bytes", "at least 1024 bytes");
                default::DECISION_API_MAX_BODY
            }
        },
    };
    let max_batch = f.max_batch.unwrap_or(default::DECISION_API_MAX_BATCH);
    if max_batch == 0 {
        issues.add("decision_api.max_batch", "at least 1");
    }
    let required_certificates = tls
        .as_ref()
        .and_then(|t| t.client_auth.as_ref())
        .is_some_and(|c| c.required);
    if bearer_secret.is_none() && !required_certificates && f.bearer_secret_file.is_none() {
        issues.warn(
            "decision_api",
            "no bearer_secret_file and no required client certificates: AuthZEN callers cannot authenticate and are refused (nginx and Envoy are decided on their callers' tokens)",
        );
    }
    let timeout = f.timeout.unwrap_or(default::DECISION_API_TIMEOUT);
    if timeout.is_zero() {
        issues.add("decision_api.timeout", "longer than 0 s");
    }
    let policy_decision_point = f.policy_decision_point.and_then(|url| {
        issues.check(
            "decision_api.policy_decision_point",
            policy_decision_point(&url),
        )
    });
    Some(DecisionApiSettings {
        address: address?,
        grpc_address,
        tls,
        bearer_secret,
        max_body_bytes,
        max_batch,
        timeout,
        policy_decision_point,
    })
}

/// AuthZEN's Policy Decision Point identifier: an https URL with no query or fragment (the
/// specification's words), and no path, since the service answers at its root; written without
/// the trailing slash, as the discovery document's URLs are built on it.
fn policy_decision_point(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    let only_origin = url.scheme() == "https"
        && url.host().is_some()
        && url.username().is_empty()
        && url.password().is_none()
        && url.path() == "/"
        && url.query().is_none()
        && url.fragment().is_none();
    match only_origin {
        true => Ok(url.as_str().trim_end_matches('/').to_string()),
        false => Err(format!(
            "{text:?}: an https URL of a host (and port) only, such as \"https://pdp.example.com\""
        )),
    }
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

/// The SHA-256 of the secret in `path` (`key` names it in errors): at least 32 bytes,
/// surrounding white space ignored.
pub(super) fn bearer_secret(path: &Path, key: &str, issues: &mut Issues) -> Option<BearerSecret> {
    warn_open_secret(key, path, issues);
    let checked = std::fs::read(path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|bytes| {
            let secret = bytes.trim_ascii();
            if secret.len() < MIN_SECRET_BYTES {
                return Err(format!(
                    "{}: needs at least {MIN_SECRET_BYTES} bytes of secret (e.g. `openssl rand -hex 32`)",
                    path.display()
                ));
            }
            if std::str::from_utf8(secret).is_err() || secret.iter().any(|b| b.is_ascii_control()) {
                return Err(format!(
                    "{}: the secret is sent in a header: printable text only",
                    path.display()
                ));
            }
            Ok(BearerSecret(digest(secret)))
        });
    issues.check(key, checked)
}
