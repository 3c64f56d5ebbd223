//! TLS on the listeners: certificates served through a resolver whose key can be swapped on reload
//! (certificate rotation without a restart), HTTP/2 by ALPN, optional client certificates, and
//! session resumption.

use crate::config::model::{Listener, ListenerTls};
use arc_swap::ArcSwap;
use pingora::listeners::tls::Acceptor;
use rustls::server::{
    ClientHello, ResolvesServerCert, ServerSessionMemoryCache, WebPkiClientVerifier,
};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
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
    let signing = rustls::crypto::aws_lc_rs::sign::any_supported_type(&key_der)
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

/// Sessions a listener keeps for resumption by session id (TLS 1.2) and stateful tickets.
const SESSION_CACHE: usize = 20_000;

/// The TLS acceptor of a listener that has TLS: TLS 1.2 and 1.3, HTTP/2 and HTTP/1.1 by ALPN,
/// certificates from the swappable resolver, client certificates when configured, and session
/// resumption (a session cache, and stateless tickets from a key rotated in memory). Handshakes and
/// records use aws-lc-rs, the library that also verifies the scheme's RSA signatures.
pub fn tls_acceptor(listener: &Listener, resolver: Arc<CertResolver>) -> Result<Acceptor, String> {
    let tls = listener
        .tls
        .as_ref()
        .ok_or_else(|| format!("listener {} has no TLS", listener.address))?;
    Ok(Acceptor::from_server_config(Arc::new(server_config(
        tls, resolver,
    )?)))
}

/// The rustls configuration of a listener with TLS (the proxy's, or the decision service's).
pub fn server_config(
    tls: &ListenerTls,
    resolver: Arc<CertResolver>,
) -> Result<ServerConfig, String> {
    crate::tls::ensure_crypto_provider();
    let builder = ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
    .map_err(|e| format!("TLS versions: {e}"))?;
    let builder = match &tls.client_auth {
        None => builder.with_no_client_auth(),
        Some(client) => {
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
            let verifier = WebPkiClientVerifier::builder(Arc::new(roots));
            let verifier = if client.required {
                verifier.build()
            } else {
                verifier.allow_unauthenticated().build()
            }
            .map_err(|e| format!("client certificate verification: {e}"))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_cert_resolver(resolver);
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
        .map_err(|e| format!("TLS session tickets: {e}"))?;
    Ok(config)
}
