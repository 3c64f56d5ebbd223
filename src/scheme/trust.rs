//! Certificate trust: SHA-256 fingerprints, the scheme owner's trusted list, x5c chain validation,
//! and binding a certificate to the party it claims to be.

use super::jwt::JwtError;
use super::models::TrustedListEntry;
use super::party::PartyId;
use super::party_record::Party;
use super::Timestamp;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use std::collections::HashMap;
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};
use x509_parser::public_key::PublicKey;

/// The smallest RSA key the scheme accepts.
pub const MIN_RSA_BITS: usize = 2048;
/// The largest RSA key verified: bigger keys cost a stranger's request many times the CPU.
pub const MAX_RSA_BITS: usize = 4096;
/// The longest x5c chain validated (leaf, intermediates, root).
pub const MAX_CHAIN_LEN: usize = 5;
const ORGANIZATION_IDENTIFIER: &str = "2.5.4.97";
const SERIAL_NUMBER: &str = "2.5.4.5";

/// SHA-256 of the DER bytes, upper-case hex: the scheme's certificate fingerprint.
pub fn fingerprint(der: &[u8]) -> String {
    hex::encode_upper(ring::digest::digest(&ring::digest::SHA256, der))
}

/// The certificate authorities trusted under the scheme, by fingerprint.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TrustedList {
    by_fingerprint: HashMap<String, TrustedListEntry>,
}

impl TrustedList {
    pub fn new(entries: impl IntoIterator<Item = TrustedListEntry>) -> Self {
        TrustedList {
            by_fingerprint: entries
                .into_iter()
                .map(|e| (normalise_fingerprint(&e.certificate_fingerprint), e))
                .collect(),
        }
    }

    /// A list that trusts exactly one pinned root (e.g. the scheme owner's own root).
    pub fn pinned(fingerprint: &str) -> Self {
        TrustedList::new([TrustedListEntry {
            subject: String::new(),
            certificate_fingerprint: fingerprint.to_string(),
            validity: "valid".into(),
            status: "granted".into(),
        }])
    }

    pub fn get(&self, fingerprint: &str) -> Option<&TrustedListEntry> {
        self.by_fingerprint.get(&normalise_fingerprint(fingerprint))
    }

    pub fn len(&self) -> usize {
        self.by_fingerprint.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_fingerprint.is_empty()
    }

    pub fn entries(&self) -> impl Iterator<Item = &TrustedListEntry> {
        self.by_fingerprint.values()
    }
}

/// Whether `registered` (base64 that may be broken into lines) is the base64 text `leaf`.
fn same_base64(registered: &str, leaf: &str) -> bool {
    registered == leaf
        || registered
            .chars()
            .filter(|c| !c.is_whitespace())
            .eq(leaf.chars())
}

/// Fingerprints compare case-insensitively and with or without colons.
fn normalise_fingerprint(fp: &str) -> String {
    fingerprint_digits(fp).map(char::from).collect()
}

/// The hexadecimal digits of a fingerprint, in upper case.
fn fingerprint_digits(fp: &str) -> impl Iterator<Item = u8> + '_ {
    fp.bytes()
        .filter(u8::is_ascii_hexdigit)
        .map(|b| b.to_ascii_uppercase())
}

/// Why a certificate chain is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChainError {
    #[error("the x5c chain must hold the certificate and its chain up to a trusted root (at least two certificates)")]
    TooShort,
    #[error("the x5c chain holds {len} certificates; at most {MAX_CHAIN_LEN} are validated")]
    TooLong { len: usize },
    #[error("certificate {index} of the chain does not parse")]
    Unparseable { index: usize },
    #[error("the certificate key is not RSA")]
    NotRsa,
    #[error("the certificate key has {bits} bits; at least {MIN_RSA_BITS} are required")]
    WeakKey { bits: usize },
    #[error("certificate {index} of the chain has a {bits}-bit key; at most {MAX_RSA_BITS} are verified")]
    KeyTooLarge { index: usize, bits: usize },
    #[error("certificate {index} of the chain is not yet valid")]
    NotYetValid { index: usize },
    #[error("certificate {index} of the chain has expired")]
    Expired { index: usize },
    #[error("the certificate is not valid for signing (needs digitalSignature or nonRepudiation, and no CA flag)")]
    NotForSigning,
    #[error("certificate {index} of the chain is not a CA certificate with keyCertSign")]
    NotACa { index: usize },
    #[error("certificate {index} of the chain is not signed by the next one")]
    BrokenChain { index: usize },
    #[error("the root {fingerprint} is not on the trusted list")]
    UntrustedRoot { fingerprint: String },
    #[error(
        "the root {fingerprint} is on the trusted list as {validity}/{status}, not valid/granted"
    )]
    RootNotGranted {
        fingerprint: String,
        validity: String,
        status: String,
    },
}

reason_codes! {
    ChainError {
        ChainError::TooShort => "incomplete_chain",
        ChainError::TooLong { .. } => "certificate_chain_too_long",
        ChainError::Unparseable { .. } => "invalid_x5c",
        ChainError::NotRsa => "certificate_key_not_rsa",
        ChainError::WeakKey { .. } => "certificate_key_too_small",
        ChainError::KeyTooLarge { .. } => "certificate_key_too_large",
        ChainError::NotYetValid { .. } => "certificate_not_yet_valid",
        ChainError::Expired { .. } => "certificate_expired",
        ChainError::NotForSigning => "certificate_not_for_signing",
        ChainError::NotACa { .. } => "certificate_issuer_not_a_ca",
        ChainError::BrokenChain { .. } => "certificate_chain_broken",
        ChainError::UntrustedRoot { .. } => "untrusted_root",
        ChainError::RootNotGranted { .. } => "root_not_granted",
    }
}

/// The identifiers a certificate subject carries for its party.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SubjectIds {
    pub serial_number: Option<String>,
    pub organization_identifier: Option<String>,
    /// The subject as RFC 4514 writes it, for display.
    pub subject: String,
}

/// A chain that passed validation: what later checks (party binding, caching) need from it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatedChain {
    pub leaf_der: Vec<u8>,
    /// The leaf in standard base64, as a party record registers it (`x5c`): made once per chain.
    pub leaf_base64: String,
    pub leaf_fingerprint: String,
    pub root_fingerprint: String,
    pub subject: SubjectIds,
    /// The earliest notAfter in the chain: when this validation stops holding.
    pub not_after: i64,
}

impl ValidatedChain {
    /// Whether the leaf's subject names `party` (serialNumber or organizationIdentifier).
    pub fn names(&self, party: &PartyId) -> bool {
        [
            self.subject.serial_number.as_deref(),
            self.subject.organization_identifier.as_deref(),
        ]
        .into_iter()
        .flatten()
        .any(|v| party.matches_subject_identifier(v))
    }
}

/// Validate an x5c chain (DER, leaf first) at `now`: the last certificate on the trusted list as
/// valid/granted (looked up first: it costs a hash, where signatures cost much more), every
/// certificate in its validity period with an RSA key of at most 4096 bits, the leaf's key of at
/// least 2048 bits and usable for signing, and every further certificate a CA with keyCertSign that
/// signed the one before it.
pub fn validate_chain(
    chain: &[Vec<u8>],
    trusted: &TrustedList,
    now: Timestamp,
) -> Result<ValidatedChain, ChainError> {
    if chain.len() < 2 {
        return Err(ChainError::TooShort);
    }
    if chain.len() > MAX_CHAIN_LEN {
        return Err(ChainError::TooLong { len: chain.len() });
    }
    let root_fingerprint = fingerprint(&chain[chain.len() - 1]);
    match trusted.get(&root_fingerprint) {
        None => {
            return Err(ChainError::UntrustedRoot {
                fingerprint: root_fingerprint,
            })
        }
        Some(entry) if !entry.is_granted() => {
            return Err(ChainError::RootNotGranted {
                fingerprint: root_fingerprint,
                validity: entry.validity.clone(),
                status: entry.status.clone(),
            })
        }
        Some(_) => {}
    }
    let certs = chain
        .iter()
        .enumerate()
        .map(|(index, der)| match X509Certificate::from_der(der) {
            Ok((&[], cert)) => Ok(cert),
            _ => Err(ChainError::Unparseable { index }),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let leaf = &certs[0];
    match leaf.public_key().parsed() {
        Ok(PublicKey::RSA(rsa)) if rsa.key_size() >= MIN_RSA_BITS => {}
        Ok(PublicKey::RSA(rsa)) => {
            return Err(ChainError::WeakKey {
                bits: rsa.key_size(),
            })
        }
        _ => return Err(ChainError::NotRsa),
    }
    for (index, cert) in certs.iter().enumerate() {
        if let Ok(PublicKey::RSA(rsa)) = cert.public_key().parsed() {
            if rsa.key_size() > MAX_RSA_BITS {
                return Err(ChainError::KeyTooLarge {
                    index,
                    bits: rsa.key_size(),
                });
            }
        }
    }
    let now_secs = now.secs();
    for (index, cert) in certs.iter().enumerate() {
        let validity = cert.validity();
        if now_secs < validity.not_before.timestamp() {
            return Err(ChainError::NotYetValid { index });
        }
        if now_secs > validity.not_after.timestamp() {
            return Err(ChainError::Expired { index });
        }
    }
    let leaf_usage_ok = match leaf.key_usage() {
        Ok(Some(ku)) => ku.value.digital_signature() || ku.value.non_repudiation(),
        _ => false,
    };
    if !leaf_usage_ok || is_ca(leaf) {
        return Err(ChainError::NotForSigning);
    }
    for (index, ca) in certs.iter().enumerate().skip(1) {
        let signs_certs = matches!(ca.key_usage(), Ok(Some(ku)) if ku.value.key_cert_sign());
        if !signs_certs || !is_ca(ca) {
            return Err(ChainError::NotACa { index });
        }
    }
    for index in 0..certs.len() - 1 {
        certs[index]
            .verify_signature(Some(certs[index + 1].public_key()))
            .map_err(|_| ChainError::BrokenChain { index })?;
    }
    Ok(ValidatedChain {
        leaf_der: chain[0].clone(),
        leaf_base64: STANDARD.encode(&chain[0]),
        leaf_fingerprint: fingerprint(&chain[0]),
        root_fingerprint,
        subject: subject_ids(leaf),
        not_after: certs
            .iter()
            .map(|c| c.validity().not_after.timestamp())
            .min()
            .unwrap_or(now_secs),
    })
}

fn is_ca(cert: &X509Certificate) -> bool {
    matches!(cert.basic_constraints(), Ok(Some(bc)) if bc.value.ca)
}

fn subject_ids(cert: &X509Certificate) -> SubjectIds {
    let mut ids = SubjectIds {
        subject: rfc4514(cert.subject()),
        ..SubjectIds::default()
    };
    for attr in cert.subject().iter_attributes() {
        let oid = attr.attr_type().to_id_string();
        let value = attr.as_str().ok().map(str::to_string);
        match oid.as_str() {
            SERIAL_NUMBER => ids.serial_number = value,
            ORGANIZATION_IDENTIFIER => ids.organization_identifier = value,
            _ => {}
        }
    }
    ids
}

/// A certificate's subject as RFC 4514 writes it; `None` when `der` is not a certificate.
pub fn certificate_subject(der: &[u8]) -> Option<String> {
    X509Certificate::from_der(der)
        .ok()
        .map(|(_, cert)| rfc4514(cert.subject()))
}

/// A distinguished name in the string form of RFC 4514 as the `cryptography` package writes it
/// (and python-ishare compares it with a trusted list's `subject`): the last RDN first, RDNs
/// joined by `,` and multi-valued ones by `+`, the short names CN L ST O OU C STREET DC UID and
/// dotted OIDs for every other type, special characters escaped, non-string values as `#` and hex.
pub fn rfc4514(name: &X509Name) -> String {
    let rdns: Vec<String> = name
        .iter()
        .map(|rdn| {
            rdn.iter()
                .map(|attr| {
                    let oid = attr.attr_type().to_id_string();
                    let value = match attr.as_str() {
                        Ok(text) => escape_dn_value(text),
                        Err(_) => format!("#{}", hex::encode(attr.attr_value().data)),
                    };
                    format!("{}={value}", short_attribute_name(&oid).unwrap_or(&oid))
                })
                .collect::<Vec<_>>()
                .join("+")
        })
        .collect();
    rdns.into_iter().rev().collect::<Vec<_>>().join(",")
}

fn short_attribute_name(oid: &str) -> Option<&'static str> {
    Some(match oid {
        "2.5.4.3" => "CN",
        "2.5.4.7" => "L",
        "2.5.4.8" => "ST",
        "2.5.4.10" => "O",
        "2.5.4.11" => "OU",
        "2.5.4.6" => "C",
        "2.5.4.9" => "STREET",
        "0.9.2342.19200300.100.1.25" => "DC",
        "0.9.2342.19200300.100.1.1" => "UID",
        _ => return None,
    })
}

fn escape_dn_value(value: &str) -> String {
    let last = value.chars().count().saturating_sub(1);
    let mut out = String::with_capacity(value.len());
    for (i, c) in value.chars().enumerate() {
        match c {
            '\\' | '"' | '+' | ',' | ';' | '<' | '>' => out.push('\\'),
            '\0' => {
                out.push_str("\\00");
                continue;
            }
            '#' if i == 0 => out.push('\\'),
            ' ' if i == 0 || i == last => out.push('\\'),
            _ => {}
        }
        out.push(c);
    }
    out
}

/// Why a token's signer is not trusted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignerError {
    #[error("{0}")]
    Signature(JwtError),
    #[error("certificate: {0}")]
    Chain(ChainError),
    #[error("party: {0}")]
    Party(PartyError),
}

reason_codes! {
    SignerError {
    } nested {
        SignerError::Signature(e) => e: JwtError,
        SignerError::Chain(e) => e: ChainError,
        SignerError::Party(e) => e: PartyError,
    }
}

/// Why a certificate does not prove the claimed party, or the party may not act.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PartyError {
    #[error("the party {0} is unknown at the scheme owner")]
    UnknownParty(String),
    #[error("the party {0} is not active at the scheme owner")]
    NotActive(String),
    #[error("the certificate is not one registered for {0} at the scheme owner")]
    CertificateNotRegistered(String),
    #[error("the certificate subject does not name {0} (serialNumber or organizationIdentifier)")]
    SubjectMismatch(String),
    #[error("the participant registry's records disagree on whom {0} names: it is no one's")]
    Contested(String),
}

reason_codes! {
    PartyError {
        PartyError::UnknownParty(_) => "unknown_party",
        PartyError::NotActive(_) => "party_not_active",
        PartyError::CertificateNotRegistered(_) => "certificate_not_registered",
        PartyError::SubjectMismatch(_) => "certificate_subject_mismatch",
        PartyError::Contested(_) => "party_name_ambiguous",
    }
}

/// Check that the chain's leaf belongs to `claimed` according to its party record, and that the
/// party adheres to the framework at `now`. The leaf must be one of the record's registered
/// certificates valid now (by x5t#s256, or in 1.9/2.x records by x5c); a 1.9/2.x record that
/// registers none binds a leaf whose subject serialNumber or organizationIdentifier names the
/// party. A 3.0 record binds a certificate only through its claim.
pub fn check_party(
    chain: &ValidatedChain,
    claimed: &PartyId,
    record: Option<&Party>,
    now: Timestamp,
) -> Result<(), PartyError> {
    let record = record
        .filter(|r| r.names(claimed.as_str()))
        .ok_or_else(|| PartyError::UnknownParty(claimed.to_string()))?;
    if !record.is_active_at(now.secs()) {
        return Err(PartyError::NotActive(claimed.to_string()));
    }
    let legacy = !record.claims_based();
    if record.certificates.is_empty() && legacy {
        return match chain.names(claimed) {
            true => Ok(()),
            false => Err(PartyError::SubjectMismatch(claimed.to_string())),
        };
    }
    let matches = record.certificates_at(now.secs()).any(|c| {
        c.x5t_s256
            .as_deref()
            .is_some_and(|t| fingerprint_digits(t).eq(chain.leaf_fingerprint.bytes()))
            || c.x5c
                .as_deref()
                .is_some_and(|x| legacy && same_base64(x, &chain.leaf_base64))
    });
    match matches {
        true => Ok(()),
        false => Err(PartyError::CertificateNotRegistered(claimed.to_string())),
    }
}

#[cfg(test)]
#[path = "trust_tests.rs"]
mod tests;
