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

/// aws-lc-rs with the TLS 1.3 suites in the order the gateway prefers: AES-128-GCM with SHA-256
/// first. Clients such as OpenSSL ask for AES-256-GCM with SHA-384 first, whose key schedule
/// (HKDF over SHA-384) costs a full handshake several times what SHA-256's does, with hardware
/// SHA-256 where SHA-512 has none; both are strong, and AES-128-GCM is what most servers choose.
fn provider() -> rustls::crypto::CryptoProvider {
    use rustls::crypto::aws_lc_rs::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384, TLS13_CHACHA20_POLY1305_SHA256,
    };
    let mut provider = rustls::crypto::aws_lc_rs::default_provider();
    let tls13 = [
        TLS13_AES_128_GCM_SHA256,
        TLS13_AES_256_GCM_SHA384,
        TLS13_CHACHA20_POLY1305_SHA256,
    ];
    let tls12 = provider
        .cipher_suites
        .iter()
        .filter(|s| s.version() == &rustls::version::TLS12);
    provider.cipher_suites = tls13.into_iter().chain(tls12.copied()).collect();
    provider
}

/// The rustls configuration of a listener with TLS (the proxy's, or the decision service's).
pub fn server_config(
    tls: &ListenerTls,
    resolver: Arc<CertResolver>,
) -> Result<ServerConfig, String> {
    crate::tls::ensure_crypto_provider();
    let builder = ServerConfig::builder_with_provider(Arc::new(provider()))
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
    // The server's order of cipher suites (`provider`), not the client's.
    config.ignore_client_order = true;
    config.session_storage = ServerSessionMemoryCache::new(SESSION_CACHE);
    config.ticketer = rustls::crypto::aws_lc_rs::Ticketer::new()
        .map_err(|e| format!("TLS session tickets: {e}"))?;
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testbed::pki::TestPki;
    use rustls::crypto::aws_lc_rs::cipher_suite::{
        TLS13_AES_128_GCM_SHA256, TLS13_AES_256_GCM_SHA384,
    };
    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection, ServerConnection};

    /// A handshake in memory: the suite the listener chose for a client that asks for
    /// AES-256-GCM with SHA-384 first, as OpenSSL does.
    fn negotiated(ecdsa: bool) -> rustls::SupportedCipherSuite {
        let pki = TestPki::generate("Listener", time::OffsetDateTime::now_utc()).unwrap();
        let creds = match ecdsa {
            true => pki.issue_tls_server_ecdsa(&["localhost"]),
            false => pki.issue_tls_server(&["localhost"]),
        }
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, &creds.chain_pem).unwrap();
        std::fs::write(&key, &creds.key_pem).unwrap();
        let tls = ListenerTls {
            certificate: cert.clone(),
            key: key.clone(),
            client_auth: None,
        };
        let resolver = Arc::new(CertResolver::load(&cert, &key).unwrap());
        let server_config = Arc::new(server_config(&tls, resolver).unwrap());

        let mut client_provider = rustls::crypto::aws_lc_rs::default_provider();
        client_provider.cipher_suites = vec![TLS13_AES_256_GCM_SHA384, TLS13_AES_128_GCM_SHA256];
        let mut roots = RootCertStore::empty();
        roots
            .add(creds.chain_der.last().unwrap().clone().into())
            .unwrap();
        let client_config = ClientConfig::builder_with_provider(Arc::new(client_provider))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let mut client = ClientConnection::new(
            Arc::new(client_config),
            ServerName::try_from("localhost").unwrap(),
        )
        .unwrap();
        let mut server = ServerConnection::new(server_config).unwrap();
        for _ in 0..10 {
            if !client.is_handshaking() && !server.is_handshaking() {
                break;
            }
            let mut wire = Vec::new();
            client.write_tls(&mut wire).unwrap();
            server.read_tls(&mut wire.as_slice()).unwrap();
            server.process_new_packets().unwrap();
            let mut back = Vec::new();
            server.write_tls(&mut back).unwrap();
            client.read_tls(&mut back.as_slice()).unwrap();
            client.process_new_packets().unwrap();
        }
        assert!(!client.is_handshaking(), "the handshake completes");
        client.negotiated_cipher_suite().unwrap()
    }

    #[test]
    fn listeners_choose_aes_128_gcm_sha256_whatever_the_client_asks_first() {
        for ecdsa in [false, true] {
            assert_eq!(
                negotiated(ecdsa).suite(),
                TLS13_AES_128_GCM_SHA256.suite(),
                "ecdsa: {ecdsa}"
            );
        }
    }
}
