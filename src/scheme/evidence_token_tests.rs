use super::*;
use crate::scheme::jwt::{decode, AlgorithmPolicy};
use crate::scheme::version::SchemeVersion;
use crate::testbed::pki::TestPki;
use serde_json::{json, Value};

const AR: &str = "EU.EORI.NL000000004";
const CONSUMER: &str = "EU.EORI.NL000000001";
const CALLER: &str = "EU.EORI.NL000000002";
const NOW: i64 = 1_800_000_000;

fn evidence() -> Value {
    json!({
        "notBefore": NOW - 10, "notOnOrAfter": NOW + 600,
        "policyIssuer": "EU.EORI.NL000000005",
        "target": {"accessSubject": CONSUMER},
        "policySets": [{"policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["C1"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]},
            "rules": [{"effect": "Permit"}]
        }]}]
    })
}

fn claims() -> Value {
    json!({"iss": AR, "sub": CONSUMER, "aud": CONSUMER, "jti": "j", "iat": NOW, "exp": NOW + 30, "delegationEvidence": evidence()})
}

fn token(edit: impl FnOnce(&mut Value)) -> DecodedJwt {
    let mut c = claims();
    edit(&mut c);
    let signed = TestPki::shared()
        .party(AR)
        .signing_identity()
        .sign_raw(&c)
        .unwrap();
    decode(&signed, AlgorithmPolicy::default()).unwrap()
}

const RULES: HeaderEvidenceRules = HeaderEvidenceRules {
    leeway_secs: 5.0,
    max_age_secs: 3600.0,
};

fn check_at(jwt: &DecodedJwt, now: i64) -> Result<(), EvidenceTokenError> {
    let read = read_evidence_token(jwt, &Readers::default())?;
    check_header_evidence(
        jwt,
        &read.evidence,
        &[CONSUMER, CALLER],
        &RULES,
        Timestamp::from_secs(now),
    )
}

#[test]
fn a_token_reads_as_its_issuer_and_evidence() {
    let read = read_evidence_token(&token(|_| {}), &Readers::default()).unwrap();
    assert_eq!(read.issuer.as_str(), AR);
    assert_eq!(read.evidence.target.access_subject, CONSUMER);
    assert_eq!(check_at(&token(|_| {}), NOW + 1), Ok(()));
}

#[test]
fn unreadable_evidence_and_issuers_are_refused() {
    let code = |edit: fn(&mut Value)| {
        read_evidence_token(&token(edit), &Readers::default())
            .unwrap_err()
            .code()
    };
    assert_eq!(
        code(|c| {
            c.as_object_mut().unwrap().remove("delegationEvidence");
        }),
        "malformed_evidence"
    );
    assert_eq!(
        code(|c| c["delegationEvidence"]["policySets"] = json!("none")),
        "malformed_evidence"
    );
    assert_eq!(code(|c| c["sub"] = json!(CALLER)), "malformed_evidence");
    assert_eq!(
        code(|c| c["iss"] = json!("nobody")),
        "evidence_issuer_unknown"
    );
}

#[test]
fn the_token_must_be_addressed_to_the_consumer_or_the_caller() {
    assert_eq!(check_at(&token(|c| c["aud"] = json!(CALLER)), NOW), Ok(()));
    assert_eq!(
        check_at(&token(|c| c["aud"] = json!(json!([CONSUMER]))), NOW),
        Ok(())
    );
    assert_eq!(
        check_at(
            &token(|c| {
                c.as_object_mut().unwrap().remove("aud");
            }),
            NOW
        ),
        Ok(())
    );
    assert_eq!(
        check_at(&token(|c| c["aud"] = json!(AR)), NOW),
        Err(EvidenceTokenError::NotForCaller {
            expected: format!("{CONSUMER} or {CALLER}"),
            found: AR.into(),
        })
    );
}

#[test]
fn the_token_is_used_within_its_own_nbf_and_exp() {
    let t = token(|_| {});
    assert_eq!(check_at(&t, NOW + 35), Ok(()));
    assert_eq!(check_at(&t, NOW + 36), Err(EvidenceTokenError::Expired));
    assert_eq!(check_at(&t, NOW + 611), Err(EvidenceTokenError::Expired));
    let early = token(|c| {
        c["nbf"] = json!(NOW + 3000);
        c["exp"] = json!(NOW + 4000);
    });
    assert_eq!(check_at(&early, NOW), Err(EvidenceTokenError::NotYetValid));
    assert_eq!(check_at(&early, NOW + 2995), Ok(()));
    let eternal = token(|c| {
        c.as_object_mut().unwrap().remove("exp");
    });
    assert_eq!(check_at(&eternal, NOW), Err(EvidenceTokenError::NoExpiry));
}

#[test]
fn licence_ids_must_be_able_to_become_headers() {
    let crlf = token(|c| {
        c["delegationEvidence"]["policySets"][0]["target"] =
            json!({"environment": {"licenses": ["ISHARE.0001\r\nX-Injected: 1"]}})
    });
    assert_eq!(
        read_evidence_token(&crlf, &Readers::default())
            .unwrap_err()
            .code(),
        "malformed_evidence"
    );
    let fine = token(
        |c| c["delegationEvidence"]["policySets"][0]["target"] = json!({"environment": {"licenses": [{"anyOf": ["ISHARE.0001", "https://licenses.ishare.eu/x/1.0"]}]}}),
    );
    let from_2_2 = Readers {
        scheme_version: SchemeVersion::V2_2,
        ..Readers::default()
    };
    assert!(read_evidence_token(&fine, &from_2_2).is_ok());
    // Before 2.2 a licence is an identifier: an expression from a peer configured so is refused.
    let refused = read_evidence_token(&fine, &Readers::default()).unwrap_err();
    assert_eq!(refused.code(), "evidence_version_mismatch");
    assert!(refused
        .to_string()
        .contains("policySets[0].target.environment.licenses[0]"));
}

#[test]
fn issue_time_is_judged_with_leeway_and_a_maximum_age() {
    let t = token(|c| c["exp"] = json!(NOW + 7200));
    assert_eq!(check_at(&t, NOW - 5), Ok(()));
    assert_eq!(
        check_at(&t, NOW - 6),
        Err(EvidenceTokenError::IssuedInFuture)
    );
    assert_eq!(check_at(&t, NOW + 3600), Ok(()));
    assert_eq!(check_at(&t, NOW + 3601), Err(EvidenceTokenError::TooOld));
    // Without iat the evidence's notBefore counts.
    let no_iat = token(|c| {
        c.as_object_mut().unwrap().remove("iat");
        c["exp"] = json!(NOW + 7200);
    });
    assert_eq!(
        check_at(&no_iat, NOW - 10 + 3601),
        Err(EvidenceTokenError::TooOld)
    );
}
