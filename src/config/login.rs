//! The `[login]` section: the identity provider people sign in at, the session cookie and its
//! secret, the logout path, the budgets of sign-in starts, and what the backend is told of a
//! person.

use super::defaults as default;
use super::file::LoginFile;
use super::issues::Issues;
use super::model::{LoginSettings, SessionSecret};
use super::values::{header_name, nonzero, party, resolve, scheme_version, url_of, warn_plain};
use crate::request::TRACE_HEADERS;
use crate::scheme::openid::{self, Flow};
use crate::scheme::same_letters;
use crate::scheme::version::SchemeVersion;
use std::path::Path;

/// `versions`: the scheme owner's (the identity provider's unless it says), and the gateway's own
/// (its return path).
pub(super) fn build(
    base: &Path,
    l: LoginFile,
    shared_store: bool,
    versions: (SchemeVersion, SchemeVersion),
    issues: &mut Issues,
) -> Option<LoginSettings> {
    let (peers, own) = versions;
    let scheme_version =
        scheme_version("login.scheme_version", l.scheme_version, issues).unwrap_or(peers);
    let return_path = Flow::of(own).return_path;
    let identity_provider = match &l.identity_provider {
        Some(id) => issues.check("login.identity_provider", party(id)),
        None => {
            issues.add(
                "login.identity_provider",
                "missing: the identity provider's party id",
            );
            None
        }
    };
    let url = match &l.url {
        Some(u) => issues.check("login.url", url_of(u)),
        None => {
            issues.add("login.url", "missing: the identity provider's base URL");
            None
        }
    };
    if let Some(u) = &url {
        warn_plain("login.url", u, issues);
    }
    let scope = l.scope.unwrap_or_else(|| default::LOGIN_SCOPE.to_string());
    check_scope(&scope, issues);
    let cookie_name = l
        .cookie_name
        .unwrap_or_else(|| default::COOKIE_NAME.to_string());
    check_cookie_name(&cookie_name, issues);
    if shared_store && l.session_secret_file.is_none() {
        issues.add(
            "login.session_secret_file",
            "needed with [replay] store = \"redis\": every instance must open the others' cookies",
        );
    }
    let secret = l
        .session_secret_file
        .and_then(|file| session_secret(&resolve(base, &file), issues));
    let logout_path = l
        .logout_path
        .unwrap_or_else(|| default::LOGOUT_PATH.to_string());
    if !logout_path.starts_with('/') || logout_path == return_path {
        issues.add(
            "login.logout_path",
            format!("a path starting with / other than {return_path}"),
        );
    }
    let configured: Vec<(String, String)> = match l.headers {
        Some(h) => h.into_iter().collect(),
        None => default::PERSON_HEADERS
            .iter()
            .map(|(a, h)| (a.to_string(), h.to_string()))
            .collect(),
    };
    let headers = person_headers(configured, issues);
    Some(LoginSettings {
        identity_provider: identity_provider?,
        scheme_version,
        return_path,
        url: url?,
        scope,
        session_lifetime: issues
            .check(
                "login.session_lifetime",
                nonzero(
                    l.session_lifetime.unwrap_or(default::SESSION_LIFETIME),
                    "session_lifetime",
                ),
            )
            .unwrap_or(default::SESSION_LIFETIME),
        cookie_name,
        secret,
        logout_path,
        starts_per_second: l
            .starts_per_second
            .unwrap_or(default::LOGIN_STARTS_PER_SECOND)
            .max(1),
        starts_per_address_per_minute: l
            .starts_per_address_per_minute
            .unwrap_or(default::LOGIN_STARTS_PER_ADDRESS_PER_MINUTE),
        headers,
    })
}

/// The scope asked: openid, and an attribute scope.
fn check_scope(scope: &str, issues: &mut Issues) {
    let scopes: Vec<&str> = scope.split_whitespace().collect();
    if !scopes.contains(&openid::OPENID_SCOPE)
        || !scopes.iter().any(|s| openid::attributes_of(s).is_some())
    {
        issues.add(
            "login.scope",
            "must hold openid and an attribute scope (profile, company or email)",
        );
    }
}

/// A cookie name of plain characters, with the `__Host-` prefix.
fn check_cookie_name(cookie_name: &str, issues: &mut Issues) {
    if cookie_name.is_empty()
        || !cookie_name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_".contains(c))
    {
        issues.add("login.cookie_name", "use letters, digits, '-' and '_'");
    }
    if !cookie_name.starts_with("__Host-") {
        issues.add(
            "login.cookie_name",
            "must start with __Host- (a cookie only this host sets: no other subdomain can plant one)",
        );
    }
}

/// The key sessions are sealed with: the SHA-256 of at least 32 bytes of secret in `path`.
fn session_secret(path: &Path, issues: &mut Issues) -> Option<SessionSecret> {
    super::values::warn_open_secret("login.session_secret_file", path, issues);
    let checked = std::fs::read(path)
        .map_err(|e| format!("{}: {e}", path.display()))
        .and_then(|bytes| {
            if bytes.trim_ascii().len() < 32 {
                Err(format!(
                    "{}: needs at least 32 bytes of secret (e.g. `openssl rand -hex 32`)",
                    path.display()
                ))
            } else {
                let digest = ring::digest::digest(&ring::digest::SHA256, bytes.trim_ascii());
                let mut key = [0u8; 32];
                key.copy_from_slice(digest.as_ref());
                Ok(SessionSecret(key))
            }
        });
    issues.check("login.session_secret_file", checked)
}

/// (attribute, header): what the backend is told of a person, each attribute one a scope gives
/// and each header one that can carry it.
fn person_headers(
    configured: Vec<(String, String)>,
    issues: &mut Issues,
) -> Vec<(String, http::HeaderName)> {
    let mut headers = Vec::new();
    for (attribute, header) in configured {
        let key = format!("login.headers.{attribute}");
        if attribute != "sub"
            && !openid::ATTRIBUTE_SCOPES
                .iter()
                .any(|(_, names)| names.contains(&attribute.as_str()))
        {
            issues.add(&key, "not sub nor an attribute of a scope");
            continue;
        }
        if let Some(name) = issues.check(&key, header_name(&header)) {
            if [
                "authorization",
                "cookie",
                "host",
                "content-length",
                "transfer-encoding",
            ]
            .contains(&name.as_str())
                || TRACE_HEADERS.iter().any(|t| same_letters(t, name.as_str()))
            {
                issues.add(&key, format!("{name} cannot carry an attribute"));
            } else {
                headers.push((attribute, name));
            }
        }
    }
    headers
}
