//! Checks of single values, shared by the sections: paths relative to the file, addresses, URLs,
//! party ids, header names, durations, scheme versions.

use super::issues::Issues;
use crate::scheme::party::PartyId;
use crate::scheme::version::SchemeVersion;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub(crate) fn resolve(base: &Path, p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        base.join(p)
    }
}

pub(crate) fn socket_addr(text: &str) -> Result<SocketAddr, String> {
    text.parse::<SocketAddr>().or_else(|_| {
        text.to_socket_addrs()
            .map_err(|e| format!("{text:?} is not an address: {e}"))?
            .next()
            .ok_or_else(|| format!("{text:?} resolves to no address"))
    })
}

pub(crate) fn url_of(text: &str) -> Result<String, String> {
    let url = url::Url::parse(text).map_err(|e| format!("{text:?} is not a URL: {e}"))?;
    match url.scheme() {
        "https" | "http" => Ok(text.trim_end_matches('/').to_string()),
        other => Err(format!(
            "{text:?}: the scheme must be https (or http), not {other}"
        )),
    }
}

pub(crate) fn party(text: &str) -> Result<PartyId, String> {
    PartyId::parse(text).map_err(|e| e.to_string())
}

pub(crate) fn header_name(text: &str) -> Result<http::HeaderName, String> {
    http::HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| format!("{text:?} is not a header name"))
}

pub(crate) fn nonzero(d: Duration, what: &str) -> Result<Duration, String> {
    if d.is_zero() {
        Err(format!("{what} must be more than zero"))
    } else {
        Ok(d)
    }
}

/// A plain http:// address of a participant: allowed for tests, never silently.
pub(crate) fn warn_plain(key: &str, url: &str, issues: &mut Issues) {
    if url.starts_with("http://") {
        issues.warn(
            key,
            format!("{url} is plain HTTP: tokens and answers travel unencrypted (for tests only)"),
        );
    }
}

/// A file of secret text that every user of the machine may read or change: warned of. Its owner
/// and its group may (the gateway's group under systemd, `fsGroup` on Kubernetes); no one else
/// needs it.
pub(crate) fn warn_open_secret(key: &str, path: &Path, issues: &mut Issues) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(path) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o007 != 0 {
        issues.warn(
            key,
            format!("{} is open to every user (mode {mode:03o}): whoever reads it holds the secret; `chmod o-rwx` it (its owner and its group suffice)", path.display()),
        );
    }
}

/// An https address of a participant whose certificate is verified against the platform's roots
/// alone: one from a private CA fails every call (`UnknownIssuer`), so say where that CA goes.
pub(crate) fn warn_platform_roots(key: &str, url: &str, issues: &mut Issues) {
    if url
        .get(..8)
        .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
    {
        issues.warn(
            key,
            format!("{url} is verified against the platform's root certificates only: if its certificate is not from a public CA, set [outbound] ca_file to the CA that issued it (else every call to it fails with UnknownIssuer)"),
        );
    }
}

/// A version of the scheme a peer speaks, if given.
pub(crate) fn scheme_version(
    key: &str,
    text: Option<String>,
    issues: &mut Issues,
) -> Option<SchemeVersion> {
    issues.check(key, SchemeVersion::parse(&text?))
}
