//! TLS on the listeners: certificates served through a resolver whose key can be swapped on reload
//! (certificate rotation without a restart), HTTP/2 by ALPN, and optional client certificates.

use crate::config::model::Listener;
use arc_swap::ArcSwap;
use pingora::listeners::tls::TlsSettings;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::RootCertStore;
use std::path::Path;
use std::sync::Arc;

/// Serves the current certificate of a listener; `reload` swaps it for new handshakes.
#[derive(Debug)]
pub struct CertResolver {
    current: ArcSwap<CertifiedKey>,
}

fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, String> {
    let chain = std::fs::read(cert).map_err(|e| format!("{}: {e}", cert.display()))?;
    let key_pem = std::fs::read(key).map_err(|e| format!("{}: {e}", key.display()))?;
    let certs = crate::tls::certs_from_pem(&chain, &cert.display().to_string())
        .map_err(|e| e.to_string())?;
    let key_der = crate::tls::key_from_pem(&key_pem, &key.display().to_string())
        .map_err(|e| e.to_string())?;
    let signing = rustls::crypto::ring::sign::any_supported_type(&key_der)
        .map_err(|e| format!("{}: unusable private key: {e}", key.display()))?;
    let certified = CertifiedKey::new(certs, signing);
    certified.keys_match().map_err(|e| {
        format!(
            "{} does not belong to {}: {e}",
            key.display(),
            cert.display()
        )
    })?;
    Ok(certified)
}

impl CertResolver {
    pub fn load(cert: &Path, key: &Path) -> Result<Self, String> {
        Ok(CertResolver {
            current: ArcSwap::from_pointee(certified_key(cert, key)?),
        })
    }

    /// Read and check new files without using them yet.
    pub fn prepare(&self, cert: &Path, key: &Path) -> Result<CertifiedKey, String> {
        certified_key(cert, key)
    }

    /// Serve `key` from the next handshake on.
    pub fn install(&self, key: CertifiedKey) {
        self.current.store(Arc::new(key));
    }
}

impl ResolvesServerCert for CertResolver {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// The TLS settings of a listener that has TLS.
pub fn tls_settings(
    listener: &Listener,
    resolver: Arc<CertResolver>,
) -> Result<TlsSettings, String> {
    crate::tls::ensure_crypto_provider();
    let tls = listener
        .tls
        .as_ref()
        .ok_or_else(|| format!("listener {} has no TLS", listener.address))?;
    let mut settings = TlsSettings::intermediate("", "").map_err(|e| e.to_string())?;
    settings.set_cert_resolver(resolver);
    settings.enable_h2();
    if let Some(client) = &tls.client_auth {
        let pem = std::fs::read(&client.ca_file)
            .map_err(|e| format!("{}: {e}", client.ca_file.display()))?;
        let mut roots = RootCertStore::empty();
        for cert in crate::tls::certs_from_pem(&pem, &client.ca_file.display().to_string())
            .map_err(|e| e.to_string())?
        {
            roots
                .add(cert)
                .map_err(|e| format!("{}: {e}", client.ca_file.display()))?;
        }
        let builder = WebPkiClientVerifier::builder(Arc::new(roots));
        let verifier = if client.required {
            builder.build()
        } else {
            builder.allow_unauthenticated().build()
        }
        .map_err(|e| format!("client certificate verification: {e}"))?;
        settings.set_client_cert_verifier(verifier);
    }
    Ok(settings)
}
