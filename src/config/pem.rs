//! PEM files in the configuration: certificates and keys that must read, and the TLS of a
//! listener (the proxy's and the decision service's).

use super::file::{ClientAuthMode, ListenerTlsFile};
use super::issues::Issues;
use super::model::{ClientAuth, ListenerTls};
use super::values::resolve;
use std::path::Path;

/// The certificates of a PEM file at `path`, each problem reported under `key`.
pub(super) fn check_pem_certs(path: &Path, key: &str, issues: &mut Issues) -> Option<Vec<Vec<u8>>> {
    let bytes = issues.check(
        key,
        std::fs::read(path).map_err(|e| format!("{}: {e}", path.display())),
    )?;
    let certs = issues.check(
        key,
        crate::tls::certs_from_pem(&bytes, &path.display().to_string()).map_err(|e| e.to_string()),
    )?;
    Some(certs.into_iter().map(|c| c.to_vec()).collect())
}

/// Whether `path` holds a PEM private key.
fn check_pem_key(path: &Path, key: &str, issues: &mut Issues) {
    if let Some(bytes) = issues.check(
        key,
        std::fs::read(path).map_err(|e| format!("{}: {e}", path.display())),
    ) {
        issues.check(
            key,
            crate::tls::key_from_pem(&bytes, &path.display().to_string())
                .map_err(|e| e.to_string()),
        );
    }
}

/// A listener's `tls` table: its certificate and key, and the CA its clients' certificates
/// are checked against.
pub(super) fn listener_tls(
    base: &Path,
    key: &str,
    t: ListenerTlsFile,
    issues: &mut Issues,
) -> ListenerTls {
    let mode = t
        .client_auth
        .and_then(|c| issues.choice(&format!("{key}.tls.client_auth"), c));
    let client_auth = match (t.client_ca, mode) {
        (None, None) => None,
        (None, Some(_)) => {
            issues.add(format!("{key}.tls.client_auth"), "needs tls.client_ca");
            None
        }
        (Some(ca), mode) => {
            let ca_file = resolve(base, &ca);
            check_pem_certs(&ca_file, &format!("{key}.tls.client_ca"), issues);
            Some(ClientAuth {
                ca_file,
                required: mode == Some(ClientAuthMode::Required),
            })
        }
    };
    let certificate = resolve(base, &t.certificate);
    let key_file = resolve(base, &t.key);
    check_pem_certs(&certificate, &format!("{key}.tls.certificate"), issues);
    check_pem_key(&key_file, &format!("{key}.tls.key"), issues);
    ListenerTls {
        certificate,
        key: key_file,
        client_auth,
    }
}
