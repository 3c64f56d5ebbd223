//! A test PKI: root CA, intermediate CA, and party leaf certificates whose subject serialNumber is
//! the party identifier, plus TLS server certificates for loopback. For the tests, the testbed and
//! the demo; never for production.

use crate::scheme::jwt::SigningIdentity;
use crate::scheme::models::TrustedListEntry;
use crate::scheme::party::PartyId;
use crate::scheme::trust::{certificate_subject, fingerprint};
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, DnValue,
    ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair, KeyUsagePurpose, SanType,
    PKCS_ECDSA_P256_SHA256, PKCS_RSA_SHA256,
};
use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use time::{Duration, OffsetDateTime};

/// OID of the X.520 serialNumber attribute, where scheme certificates carry the party identifier.
const SERIAL_NUMBER: [u64; 4] = [2, 5, 4, 5];
/// OID of organizationIdentifier, where newer scheme certificates carry it.
const ORGANIZATION_IDENTIFIER: [u64; 4] = [2, 5, 4, 97];

#[derive(Debug, thiserror::Error)]
pub enum PkiError {
    #[error("certificate generation failed: {0}")]
    Rcgen(#[from] rcgen::Error),
    #[error("{0}")]
    Invalid(String),
}

/// A private key and its certificate chain (leaf first, root last), in PEM and DER.
#[derive(Clone)]
pub struct Credentials {
    pub key_pem: String,
    pub chain_pem: String,
    pub chain_der: Vec<Vec<u8>>,
}

impl Credentials {
    pub fn leaf_der(&self) -> &[u8] {
        &self.chain_der[0]
    }

    /// The signing identity of the party these credentials were issued to.
    pub fn identity_for(&self, party_id: &str) -> Result<SigningIdentity, PkiError> {
        let id = PartyId::parse(party_id).map_err(|e| PkiError::Invalid(e.to_string()))?;
        SigningIdentity::from_pem(id, &self.key_pem, &self.chain_pem)
            .map_err(|e| PkiError::Invalid(e.to_string()))
    }
}

/// Credentials issued to a party, which know whose they are.
#[derive(Clone)]
pub struct PartyCredentials {
    pub party_id: String,
    pub credentials: Credentials,
}

impl std::ops::Deref for PartyCredentials {
    type Target = Credentials;
    fn deref(&self) -> &Credentials {
        &self.credentials
    }
}

impl PartyCredentials {
    pub fn signing_identity(&self) -> SigningIdentity {
        self.credentials
            .identity_for(&self.party_id)
            .expect("credentials issued by the test PKI are consistent")
    }
}

/// What a leaf certificate should look like. The defaults are a valid party certificate.
#[derive(Clone, Debug)]
pub struct LeafSpec {
    pub common_name: String,
    /// The subject serialNumber (2.5.4.5): the party identifier.
    pub serial_number: Option<String>,
    /// The subject organizationIdentifier (2.5.4.97), used by newer scheme certificates.
    pub organization_identifier: Option<String>,
    pub not_before: OffsetDateTime,
    pub not_after: OffsetDateTime,
    pub key_usages: Vec<KeyUsagePurpose>,
    pub is_ca: bool,
    /// DNS names or IP addresses, for TLS server certificates.
    pub subject_alt_names: Vec<String>,
    pub server_auth: bool,
    /// Sign with the root directly instead of the intermediate (a chain of two).
    pub signed_by_root: bool,
}

impl LeafSpec {
    /// A party's certificate: an EORI in the subject's serialNumber; for a `did:ishare` party, its
    /// iSHARE id (the last segment, `NTRNL-10000003`) in organizationIdentifier, as 3.0's are.
    pub fn party(party_id: &str, name: &str, now: OffsetDateTime) -> Self {
        let organization = party_id
            .strip_prefix("did:ishare:")
            .map(|rest| rest.rsplit('.').next().unwrap_or(rest).to_string());
        LeafSpec {
            common_name: name.to_string(),
            serial_number: organization.is_none().then(|| party_id.to_string()),
            organization_identifier: organization,
            not_before: now - Duration::days(1),
            not_after: now + Duration::days(5 * 365),
            key_usages: vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::ContentCommitment,
            ],
            is_ca: false,
            subject_alt_names: Vec::new(),
            server_auth: false,
            signed_by_root: false,
        }
    }

    pub fn tls_server(names: &[&str], now: OffsetDateTime) -> Self {
        LeafSpec {
            common_name: names.first().copied().unwrap_or("localhost").to_string(),
            serial_number: None,
            organization_identifier: None,
            not_before: now - Duration::days(1),
            not_after: now + Duration::days(5 * 365),
            key_usages: vec![
                KeyUsagePurpose::DigitalSignature,
                KeyUsagePurpose::KeyEncipherment,
            ],
            is_ca: false,
            subject_alt_names: names.iter().map(|s| s.to_string()).collect(),
            server_auth: true,
            signed_by_root: false,
        }
    }
}

struct Ca {
    params: CertificateParams,
    key: KeyPair,
    cert_pem: String,
    cert_der: Vec<u8>,
}

/// The CAs of a test PKI in PEM, for saving and loading.
#[derive(Clone, Debug)]
pub struct PkiPem {
    pub root_cert: String,
    pub root_key: String,
    pub intermediate_cert: String,
    pub intermediate_key: String,
}

/// A root and an intermediate CA that issue party and TLS certificates.
pub struct TestPki {
    root: Ca,
    intermediate: Ca,
    issued: Mutex<HashMap<String, PartyCredentials>>,
}

fn ca_params(label: &str, which: &str, now: OffsetDateTime) -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "NL");
    dn.push(DnType::OrganizationName, format!("{label} Test PKI"));
    dn.push(DnType::CommonName, format!("{label} Test {which} CA"));
    params.distinguished_name = dn;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    params.not_before = now - Duration::days(1);
    params.not_after = now + Duration::days(10 * 365);
    params
}

fn rsa_key() -> Result<KeyPair, PkiError> {
    Ok(KeyPair::generate_for(&PKCS_RSA_SHA256)?)
}

impl TestPki {
    /// A new root and intermediate CA, RSA-2048, valid for ten years from `now`.
    pub fn generate(label: &str, now: OffsetDateTime) -> Result<Self, PkiError> {
        let root_params = ca_params(label, "Root", now);
        let root_key = rsa_key()?;
        let root_cert = root_params.self_signed(&root_key)?;
        let int_params = ca_params(label, "Intermediate", now);
        let int_key = rsa_key()?;
        let int_cert =
            int_params.signed_by(&int_key, &Issuer::from_params(&root_params, &root_key))?;
        Ok(TestPki {
            root: Ca {
                cert_pem: root_cert.pem(),
                cert_der: root_cert.der().to_vec(),
                params: root_params,
                key: root_key,
            },
            intermediate: Ca {
                cert_pem: int_cert.pem(),
                cert_der: int_cert.der().to_vec(),
                params: int_params,
                key: int_key,
            },
            issued: Mutex::new(HashMap::new()),
        })
    }

    /// Load a PKI saved with [`TestPki::pem`]; `label` must be the one it was generated with, so the
    /// issuer names of new certificates match the saved CAs.
    pub fn from_pem(label: &str, pem: &PkiPem) -> Result<Self, PkiError> {
        let load = |which: &str, cert: &str, key: &str| -> Result<Ca, PkiError> {
            let der = rustls_pemfile::certs(&mut cert.as_bytes())
                .next()
                .and_then(Result::ok)
                .ok_or_else(|| {
                    PkiError::Invalid(format!("the {which} CA certificate is not PEM"))
                })?;
            let params = ca_params(label, which, OffsetDateTime::now_utc());
            let expected = params.distinguished_name.get(&DnType::CommonName).cloned();
            let (_, parsed) = <x509_parser::certificate::X509Certificate as x509_parser::prelude::FromDer<_>>::from_der(&der)
                .map_err(|_| PkiError::Invalid(format!("the {which} CA certificate does not parse")))?;
            let cn = parsed
                .subject()
                .iter_common_name()
                .next()
                .and_then(|a| a.as_str().ok());
            if expected != cn.map(|c| DnValue::Utf8String(c.to_string())) {
                return Err(PkiError::Invalid(format!(
                    "the saved {which} CA was not generated with the label {label:?}"
                )));
            }
            Ok(Ca {
                params,
                key: KeyPair::from_pem(key)?,
                cert_pem: cert.to_string(),
                cert_der: der.to_vec(),
            })
        };
        Ok(TestPki {
            root: load("Root", &pem.root_cert, &pem.root_key)?,
            intermediate: load(
                "Intermediate",
                &pem.intermediate_cert,
                &pem.intermediate_key,
            )?,
            issued: Mutex::new(HashMap::new()),
        })
    }

    pub fn pem(&self) -> PkiPem {
        PkiPem {
            root_cert: self.root.cert_pem.clone(),
            root_key: self.root.key.serialize_pem(),
            intermediate_cert: self.intermediate.cert_pem.clone(),
            intermediate_key: self.intermediate.key.serialize_pem(),
        }
    }

    /// A process-wide PKI, generated on first use, for tests and benchmarks.
    pub fn shared() -> &'static TestPki {
        static SHARED: OnceLock<TestPki> = OnceLock::new();
        SHARED.get_or_init(|| {
            TestPki::generate("Shared", OffsetDateTime::now_utc()).expect("test PKI generation")
        })
    }

    pub fn root_pem(&self) -> &str {
        &self.root.cert_pem
    }

    pub fn root_der(&self) -> &[u8] {
        &self.root.cert_der
    }

    pub fn root_fingerprint(&self) -> String {
        fingerprint(&self.root.cert_der)
    }

    /// The root as a granted entry of a trusted list.
    pub fn trusted_list_entry(&self) -> TrustedListEntry {
        TrustedListEntry {
            subject: certificate_subject(&self.root.cert_der).unwrap_or_default(),
            certificate_fingerprint: self.root_fingerprint(),
            validity: "valid".into(),
            status: "granted".into(),
        }
    }

    /// Issue a leaf certificate as `spec` describes, with a fresh RSA-2048 key.
    pub fn issue(&self, spec: &LeafSpec) -> Result<Credentials, PkiError> {
        self.issue_with(spec, rsa_key()?)
    }

    /// Issue a leaf certificate as `spec` describes, for `key`.
    fn issue_with(&self, spec: &LeafSpec, key: KeyPair) -> Result<Credentials, PkiError> {
        let mut params = CertificateParams::default();
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CountryName, "NL");
        dn.push(DnType::OrganizationName, spec.common_name.clone());
        dn.push(DnType::CommonName, spec.common_name.clone());
        if let Some(serial) = &spec.serial_number {
            let printable = rcgen::string::PrintableString::try_from(serial.as_str())
                .map_err(|_| PkiError::Invalid(format!("{serial:?} is not a printable string")))?;
            dn.push(
                DnType::CustomDnType(SERIAL_NUMBER.to_vec()),
                DnValue::PrintableString(printable),
            );
        }
        if let Some(org_id) = &spec.organization_identifier {
            dn.push(
                DnType::CustomDnType(ORGANIZATION_IDENTIFIER.to_vec()),
                org_id.clone(),
            );
        }
        params.distinguished_name = dn;
        params.not_before = spec.not_before;
        params.not_after = spec.not_after;
        params.key_usages = spec.key_usages.clone();
        params.is_ca = if spec.is_ca {
            IsCa::Ca(BasicConstraints::Unconstrained)
        } else {
            IsCa::ExplicitNoCa
        };
        for name in &spec.subject_alt_names {
            params.subject_alt_names.push(match name.parse() {
                Ok(ip) => SanType::IpAddress(ip),
                Err(_) => SanType::DnsName(name.clone().try_into()?),
            });
        }
        if spec.server_auth {
            params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        }
        params.use_authority_key_identifier_extension = true;
        let (issuer_ca, chain): (&Ca, Vec<&Ca>) = if spec.signed_by_root {
            (&self.root, vec![&self.root])
        } else {
            (&self.intermediate, vec![&self.intermediate, &self.root])
        };
        let cert = params.signed_by(
            &key,
            &Issuer::from_params(&issuer_ca.params, &issuer_ca.key),
        )?;
        let mut chain_der = vec![cert.der().to_vec()];
        let mut chain_pem = cert.pem();
        for ca in chain {
            chain_der.push(ca.cert_der.clone());
            chain_pem.push_str(&ca.cert_pem);
        }
        Ok(Credentials {
            key_pem: key.serialize_pem(),
            chain_pem,
            chain_der,
        })
    }

    /// A valid party certificate for `party_id` (`LeafSpec::party`).
    pub fn issue_party(&self, party_id: &str, name: &str) -> Result<PartyCredentials, PkiError> {
        let credentials =
            self.issue(&LeafSpec::party(party_id, name, OffsetDateTime::now_utc()))?;
        Ok(PartyCredentials {
            party_id: party_id.to_string(),
            credentials,
        })
    }

    /// A TLS server certificate for the given DNS names and IP addresses.
    pub fn issue_tls_server(&self, names: &[&str]) -> Result<Credentials, PkiError> {
        self.issue(&LeafSpec::tls_server(names, OffsetDateTime::now_utc()))
    }

    /// The same TLS server certificate with an ECDSA P-256 key: a full handshake signs with the
    /// server's key, and P-256 signs many times faster than RSA-2048.
    pub fn issue_tls_server_ecdsa(&self, names: &[&str]) -> Result<Credentials, PkiError> {
        let key = KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256)?;
        self.issue_with(&LeafSpec::tls_server(names, OffsetDateTime::now_utc()), key)
    }

    /// The credentials of `party_id`, issued on first request and remembered.
    pub fn party(&self, party_id: &str) -> PartyCredentials {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        issued
            .entry(party_id.to_string())
            .or_insert_with(|| {
                self.issue_party(party_id, party_id)
                    .expect("issuing a test party certificate")
            })
            .clone()
    }
}
