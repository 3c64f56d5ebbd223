//! PEM files in the configuration: certificates and keys that must read, and the TLS of a
//! listener (the proxy's and the decision service's).

use super::file::{ClientAuthMode, ListenerTlsFile};
use super::issues::Issues;
use super::model::{
    CertificateExpiry, ClientAuth, DecisionApiSettings, Identity, Listener, ListenerTls,
};
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

/// Under this many days to its expiry, a certificate is warned of (iSHARE certificates are
/// renewed yearly; the alerts fire at 30 and 7 days).
const EXPIRY_WARNING_DAYS: i64 = 30;

/// When each certificate the gateway presents or stands on expires: the identity's leaf, the
/// first of its issuers to expire, the scheme's root it chains to, and each TLS listener's
/// chain. One that expires within 30 days, or has, is warned of under its key.
pub(super) fn certificate_expiries(
    identity: Option<&Identity>,
    listeners: &[Listener],
    decision_api: Option<&DecisionApiSettings>,
    issues: &mut Issues,
) -> Vec<CertificateExpiry> {
    let mut found = Vec::new();
    let mut add = |certificate: String, key: String, ders: &[Vec<u8>]| {
        if let Some(not_after) = first_expiry(ders) {
            warn_expiry(&certificate, &key, not_after, issues);
            found.push(CertificateExpiry {
                certificate,
                not_after,
            });
        }
    };
    if let Some(id) = identity {
        let chain = id.signing.chain_der();
        let key = "identity.certificate_chain".to_string();
        if let Some((leaf, rest)) = chain.split_first() {
            add("identity".into(), key.clone(), std::slice::from_ref(leaf));
            if let Some((root, issuers)) = rest.split_last() {
                add("identity_issuer".into(), key.clone(), issuers);
                add("scheme_root".into(), key, std::slice::from_ref(root));
            }
        }
    }
    let served = listeners
        .iter()
        .enumerate()
        .filter_map(|(i, l)| {
            let tls = l.tls.as_ref()?;
            Some((
                format!("listener {}", l.address),
                format!("listener[{i}]"),
                tls,
            ))
        })
        .chain(decision_api.and_then(|d| {
            let tls = d.tls.as_ref()?;
            Some((
                format!("decision_api {}", d.address),
                "decision_api".into(),
                tls,
            ))
        }));
    for (certificate, key, tls) in served {
        let read = std::fs::read(&tls.certificate).ok();
        let ders = read
            .and_then(|bytes| crate::tls::certs_from_pem(&bytes, "").ok())
            .map(|certs| certs.into_iter().map(|c| c.to_vec()).collect::<Vec<_>>());
        if let Some(ders) = ders {
            add(certificate, format!("{key}.tls.certificate"), &ders);
        }
    }
    found
}

/// The earliest notAfter of `ders` (None for none, or for one that is no certificate: reported
/// where it is read).
fn first_expiry(ders: &[Vec<u8>]) -> Option<i64> {
    use x509_parser::prelude::{FromDer, X509Certificate};
    ders.iter()
        .map(|der| {
            X509Certificate::from_der(der)
                .ok()
                .map(|(_, c)| c.validity().not_after.timestamp())
        })
        .collect::<Option<Vec<_>>>()?
        .into_iter()
        .min()
}

fn warn_expiry(certificate: &str, key: &str, not_after: i64, issues: &mut Issues) {
    let now = crate::scheme::Timestamp::now().secs();
    let date = time::OffsetDateTime::from_unix_timestamp(not_after)
        .map(|t| t.date().to_string())
        .unwrap_or_else(|_| not_after.to_string());
    let left = not_after.saturating_sub(now);
    if left <= 0 {
        issues.warn(
            key,
            format!("the {certificate} certificate expired on {date}: renew it (peers refuse what it signs or serves)"),
        );
    } else if left < EXPIRY_WARNING_DAYS * 86_400 {
        issues.warn(
            key,
            format!("the {certificate} certificate expires on {date}, in {} days: renew it before then (peers refuse what an expired one signs or serves)", left / 86_400),
        );
    }
}
