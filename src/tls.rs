//! TLS plumbing shared by the gateway, the testbed and the client: the process-wide rustls crypto
//! provider, PEM files, and the outbound HTTP client with its trust roots.

use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Once;
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("{what}: {detail}")]
    Pem { what: String, detail: String },
    #[error("TLS configuration: {0}")]
    Config(String),
}

/// Install ring as rustls' process-wide provider (the one pingora uses) once; reqwest shares it.
pub fn ensure_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Another part of the process may have installed the same provider first; either is fine.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// All certificates of a PEM text.
pub fn certs_from_pem(pem: &[u8], what: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = rustls_pemfile::certs(&mut &*pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            detail: e.to_string(),
        })?;
    if certs.is_empty() {
        return Err(TlsError::Pem {
            what: what.into(),
            detail: "no certificate found".into(),
        });
    }
    Ok(certs)
}

/// The first private key of a PEM text.
pub fn key_from_pem(pem: &[u8], what: &str) -> Result<PrivateKeyDer<'static>, TlsError> {
    rustls_pemfile::private_key(&mut &*pem)
        .map_err(|e| TlsError::Pem {
            what: what.into(),
            detail: e.to_string(),
        })?
        .ok_or_else(|| TlsError::Pem {
            what: what.into(),
            detail: "no private key found".into(),
        })
}

/// A rustls server configuration from a PEM chain and key, offering HTTP/2 and HTTP/1.1.
pub fn server_config(chain_pem: &[u8], key_pem: &[u8]) -> Result<rustls::ServerConfig, TlsError> {
    ensure_crypto_provider();
    let mut config = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(
            certs_from_pem(chain_pem, "server certificate")?,
            key_from_pem(key_pem, "server key")?,
        )
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

/// Which roots outbound TLS trusts.
#[derive(Clone, Debug, Default)]
pub struct OutboundTrust {
    /// Extra CA certificates in PEM (e.g. a private or test PKI).
    pub ca_pem: Option<Vec<u8>>,
    /// Also trust the platform's roots beside `ca_pem`.
    pub system_roots: bool,
}

/// The HTTP client for calls to other participants. Certificates are always verified: by the given
/// CA alone, or by the platform's roots (plus the CA when `system_roots` is set).
pub fn outbound_client(
    trust: &OutboundTrust,
    timeout: Duration,
) -> Result<reqwest::Client, TlsError> {
    outbound_builder(trust, timeout)?
        .build()
        .map_err(|e| TlsError::Config(e.to_string()))
}

/// What `outbound_client` builds, for a caller that sets more (e.g. the local address).
pub fn outbound_builder(
    trust: &OutboundTrust,
    timeout: Duration,
) -> Result<reqwest::ClientBuilder, TlsError> {
    ensure_crypto_provider();
    let mut builder = reqwest::Client::builder()
        .timeout(timeout)
        .connect_timeout(timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("ishare-gateway/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = &trust.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| TlsError::Config(format!("CA file: {e}")))?;
        builder = if trust.system_roots {
            builder.tls_certs_merge(certs)
        } else {
            builder.tls_certs_only(certs)
        };
    }
    Ok(builder)
}
