use super::*;
use crate::scheme::models::SchemeTime;
use crate::scheme::party_record::{RegisteredCertificate, Span};
use crate::scheme::version::SchemeVersion;
use crate::testbed::pki::{LeafSpec, TestPki};
use rcgen::KeyUsagePurpose;
use std::sync::OnceLock;
use time::{Duration, OffsetDateTime};

const PARTY: &str = "EU.EORI.NL000000001";

fn pki() -> &'static TestPki {
    TestPki::shared()
}

fn trusted() -> TrustedList {
    TrustedList::new([pki().trusted_list_entry()])
}

fn now() -> Timestamp {
    Timestamp::from_secs(OffsetDateTime::now_utc().unix_timestamp())
}

fn leaf(edit: impl FnOnce(&mut LeafSpec)) -> Vec<Vec<u8>> {
    let mut spec = LeafSpec::party(PARTY, "ABC Trucking", OffsetDateTime::now_utc());
    edit(&mut spec);
    pki().issue(&spec).unwrap().chain_der
}

fn code(chain: &[Vec<u8>]) -> &'static str {
    match validate_chain(chain, &trusted(), now()) {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

#[test]
fn fingerprint_is_sha256_upper_hex() {
    let fp = fingerprint(b"abc");
    assert_eq!(
        fp,
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
    );
    let list = TrustedList::pinned(&fp.to_lowercase());
    assert!(list.get(&fp).is_some());
    assert!(list.get("BA:78:16:BF:8F:01:CF:EA:41:41:40:DE:5D:AE:22:23:B0:03:61:A3:96:17:7A:9C:B4:10:FF:61:F2:00:15:AD").is_some());
}

#[test]
fn a_party_chain_validates_and_names_its_party() {
    let chain = pki().party(PARTY).chain_der.clone();
    let v = validate_chain(&chain, &trusted(), now()).unwrap();
    assert_eq!(v.subject.serial_number.as_deref(), Some(PARTY));
    assert_eq!(v.root_fingerprint, pki().root_fingerprint());
    assert_eq!(v.leaf_fingerprint, fingerprint(&chain[0]));
}

#[test]
fn a_single_certificate_is_not_a_chain() {
    let chain = pki().party(PARTY).chain_der.clone();
    assert_eq!(code(&chain[..1]), "incomplete_chain");
}

#[test]
fn expired_and_future_certificates_are_refused() {
    assert_eq!(
        code(&leaf(|s| {
            s.not_before = OffsetDateTime::now_utc() - Duration::days(10);
            s.not_after = OffsetDateTime::now_utc() - Duration::days(1);
        })),
        "certificate_expired"
    );
    assert_eq!(
        code(&leaf(
            |s| s.not_before = OffsetDateTime::now_utc() + Duration::days(1)
        )),
        "certificate_not_yet_valid"
    );
}

#[test]
fn the_leaf_must_be_usable_for_signing() {
    assert_eq!(
        code(&leaf(
            |s| s.key_usages = vec![KeyUsagePurpose::KeyEncipherment]
        )),
        "certificate_not_for_signing"
    );
    assert_eq!(
        code(&leaf(|s| s.key_usages = vec![])),
        "certificate_not_for_signing"
    );
    assert_eq!(
        code(&leaf(
            |s| s.key_usages = vec![KeyUsagePurpose::ContentCommitment]
        )),
        "ok",
        "nonRepudiation alone is what v2 test certificates carry"
    );
    assert_eq!(
        code(&leaf(|s| s.is_ca = true)),
        "certificate_not_for_signing"
    );
}

#[test]
fn every_issuer_must_be_a_ca_that_signed_the_certificate_before_it() {
    let a = pki().party(PARTY).chain_der.clone();
    let b = pki().party("EU.EORI.NL000000003").chain_der.clone();
    // A leaf in the issuer position.
    assert_eq!(
        code(&[a[0].clone(), b[0].clone(), a[2].clone()]),
        "certificate_issuer_not_a_ca"
    );
    // Skipping the intermediate: the root did not sign the leaf.
    assert_eq!(
        code(&[a[0].clone(), a[2].clone()]),
        "certificate_chain_broken"
    );
    // Signed directly by the root: a chain of two is fine.
    assert_eq!(code(&leaf(|s| s.signed_by_root = true)), "ok");
}

#[test]
fn the_root_must_be_granted_on_the_trusted_list() {
    static OTHER: OnceLock<TestPki> = OnceLock::new();
    let other =
        OTHER.get_or_init(|| TestPki::generate("Other", OffsetDateTime::now_utc()).unwrap());
    let foreign = other.party(PARTY).chain_der.clone();
    assert_eq!(code(&foreign), "untrusted_root");
    let mut entry = pki().trusted_list_entry();
    entry.status = "withdrawn".into();
    let chain = pki().party(PARTY).chain_der.clone();
    let err = validate_chain(&chain, &TrustedList::new([entry]), now()).unwrap_err();
    assert_eq!(err.code(), "root_not_granted");
    // Capitalised values as production satellites send them.
    let mut entry = pki().trusted_list_entry();
    entry.validity = "Valid".into();
    entry.status = "Granted".into();
    assert!(validate_chain(&chain, &TrustedList::new([entry]), now()).is_ok());
}

#[test]
fn keys_below_2048_bits_are_refused() {
    let pem = include_str!("testdata/rsa1024-cert.pem");
    let weak = rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .to_vec();
    let root = pki().root_der().to_vec();
    assert_eq!(
        validate_chain(&[weak, root], &trusted(), now()).unwrap_err(),
        ChainError::WeakKey { bits: 1024 }
    );
}

fn der_of(pem: &str) -> Vec<u8> {
    rustls_pemfile::certs(&mut pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
        .to_vec()
}

#[test]
fn oversized_keys_and_long_chains_are_refused_before_any_signature() {
    let big_root = der_of(include_str!("testdata/rsa8192-cert.pem"));
    let leaf = pki().party(PARTY).chain_der[0].clone();
    let with_big_root = TrustedList::new([TrustedListEntry {
        subject: String::new(),
        certificate_fingerprint: fingerprint(&big_root),
        validity: "valid".into(),
        status: "granted".into(),
    }]);
    assert_eq!(
        validate_chain(&[leaf.clone(), big_root.clone()], &with_big_root, now()).unwrap_err(),
        ChainError::KeyTooLarge {
            index: 1,
            bits: 8192
        }
    );
    let chain = pki().party(PARTY).chain_der.clone();
    let mut long = vec![chain[0].clone()];
    long.extend(std::iter::repeat_n(chain[1].clone(), 5));
    long.push(chain[2].clone());
    assert_eq!(
        validate_chain(&long, &trusted(), now()).unwrap_err(),
        ChainError::TooLong { len: 7 }
    );
    // Under an untrusted root nothing else is looked at: not even a broken signature.
    let mut broken = chain.clone();
    broken[1] = big_root.clone();
    broken[2] = big_root;
    assert_eq!(code(&broken), "untrusted_root");
}

/// A 1.9 record of the party, active from 2020 to 2099.
fn record(certificates: Vec<RegisteredCertificate>) -> Party {
    let date = |t: &str| SchemeTime::parse(t).map(|t| t.unix());
    Party {
        id: PARTY.into(),
        also_known_as: vec![],
        name: "ABC Trucking".into(),
        version: SchemeVersion::V1_9,
        adherence: vec![Span {
            from: date("2020-01-01T00:00:00Z"),
            until: date("2099-01-01T00:00:00Z"),
        }],
        roles: vec![],
        certificates,
        registries: vec![],
        capability_url: None,
        ..Party::default()
    }
}

fn registered(x5c: Option<String>, x5t: Option<String>) -> RegisteredCertificate {
    RegisteredCertificate {
        x5c,
        x5t_s256: x5t,
        valid: Span::default(),
    }
}

fn party() -> PartyId {
    PartyId::parse(PARTY).unwrap()
}

fn validated() -> ValidatedChain {
    validate_chain(&pki().party(PARTY).chain_der, &trusted(), now()).unwrap()
}

#[test]
fn party_binding_by_subject_serial_number() {
    assert_eq!(
        check_party(&validated(), &party(), Some(&record(vec![])), now()),
        Ok(())
    );
    let other = PartyId::parse("EU.EORI.NL000000002").unwrap();
    let mut rec = record(vec![]);
    rec.id = other.to_string();
    assert_eq!(
        check_party(&validated(), &other, Some(&rec), now())
            .unwrap_err()
            .code(),
        "certificate_subject_mismatch"
    );
}

#[test]
fn party_binding_by_organization_identifier_for_did_parties() {
    let did = PartyId::parse("did:ishare:EU.NL.NTRNL-10000001").unwrap();
    let chain = leaf(|s| {
        s.serial_number = None;
        s.organization_identifier = Some("NTRNL-10000001".into());
    });
    let v = validate_chain(&chain, &trusted(), now()).unwrap();
    let mut rec = record(vec![]);
    rec.id = did.to_string();
    assert_eq!(check_party(&v, &did, Some(&rec), now()), Ok(()));
}

#[test]
fn registered_certificates_take_precedence_over_the_subject() {
    let v = validated();
    let by_thumbprint = record(vec![registered(
        None,
        Some(v.leaf_fingerprint.to_lowercase()),
    )]);
    assert_eq!(
        check_party(&v, &party(), Some(&by_thumbprint), now()),
        Ok(())
    );
    let by_x5c = record(vec![registered(Some(STANDARD.encode(&v.leaf_der)), None)]);
    assert_eq!(check_party(&v, &party(), Some(&by_x5c), now()), Ok(()));
    // Registered as PEM lines are: the same certificate.
    let b64 = STANDARD.encode(&v.leaf_der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|l| std::str::from_utf8(l).unwrap())
        .collect();
    let by_lines = record(vec![registered(Some(lines.join("\r\n")), None)]);
    assert_eq!(check_party(&v, &party(), Some(&by_lines), now()), Ok(()));
    // One character less is another certificate.
    let cut = record(vec![registered(Some(b64[1..].to_string()), None)]);
    assert_eq!(
        check_party(&v, &party(), Some(&cut), now())
            .unwrap_err()
            .code(),
        "certificate_not_registered"
    );
    // The subject names the party, but the record registers another certificate.
    let other = record(vec![registered(None, Some("00".repeat(32)))]);
    assert_eq!(
        check_party(&v, &party(), Some(&other), now())
            .unwrap_err()
            .code(),
        "certificate_not_registered"
    );
}

#[test]
fn the_party_must_be_known_and_active() {
    let v = validated();
    assert_eq!(
        check_party(&v, &party(), None, now()).unwrap_err().code(),
        "unknown_party"
    );
    let mut inactive = record(vec![]);
    inactive.adherence.clear();
    assert_eq!(
        check_party(&v, &party(), Some(&inactive), now())
            .unwrap_err()
            .code(),
        "party_not_active"
    );
    let mut ended = record(vec![]);
    ended.adherence[0].until = SchemeTime::parse("2021-01-01T00:00:00Z").map(|t| t.unix());
    assert_eq!(
        check_party(&v, &party(), Some(&ended), now())
            .unwrap_err()
            .code(),
        "party_not_active"
    );
}

#[test]
fn subjects_are_written_as_rfc4514_last_name_first() {
    let root = certificate_subject(pki().root_der()).unwrap();
    assert_eq!(root, "CN=Shared Test Root CA,O=Shared Test PKI,C=NL");
    let chain = leaf(|_| {});
    assert_eq!(
        certificate_subject(&chain[0]).unwrap(),
        format!("2.5.4.5={PARTY},CN=ABC Trucking,O=ABC Trucking,C=NL")
    );
    assert_eq!(certificate_subject(b"not a certificate"), None);
}

#[test]
fn subject_values_escape_what_rfc4514_escapes() {
    let mut params = rcgen::CertificateParams::default();
    params.distinguished_name = rcgen::DistinguishedName::new();
    for (kind, value) in [
        (rcgen::DnType::CountryName, "NL"),
        (rcgen::DnType::OrganizationName, "A, B+C \"D\" <E>;\\"),
        (rcgen::DnType::CommonName, "#lead and trail "),
        (rcgen::DnType::OrganizationalUnitName, " x"),
    ] {
        params.distinguished_name.push(kind, value);
    }
    let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
    let cert = params.self_signed(&key).unwrap();
    assert_eq!(
        certificate_subject(cert.der()).unwrap(),
        r#"OU=\ x,CN=\#lead and trail\ ,O=A\, B\+C \"D\" \<E\>\;\\,C=NL"#
    );
}
