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
    evidence_at(NOW)
}

/// Evidence of the data owner `EU.EORI.NL000000005` for the consumer, in force at `now`: to read
/// container C1.
pub(crate) fn evidence_at(now: i64) -> Value {
    json!({
        "notBefore": now - 10, "notOnOrAfter": now + 600,
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

const RULES: EvidenceTokenRules = EvidenceTokenRules {
    leeway_secs: 5.0,
    max_age_secs: 3600.0,
};

fn check_at(jwt: &DecodedJwt, now: i64) -> Result<(), EvidenceTokenError> {
    read_evidence_token(jwt, &Readers::default())?;
    let claims = ClaimTimes::read(jwt);
    check_header_evidence(
        jwt,
        &claims,
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
    let other_sub = read_evidence_token(&token(|c| c["sub"] = json!(CALLER)), &Readers::default());
    assert_eq!(
        other_sub.unwrap().check_subject(|a, b| a == b),
        Err(EvidenceTokenError::SubjectMismatch)
    );
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
        Err(EvidenceTokenError::MissingClaim("aud"))
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
        c["exp"] = json!(NOW + 3500);
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
    let t = token(|c| c["exp"] = json!(NOW + 3600));
    assert_eq!(check_at(&t, NOW - 5), Ok(()));
    assert_eq!(
        check_at(&t, NOW - 6),
        Err(EvidenceTokenError::IssuedInFuture)
    );
    assert_eq!(check_at(&t, NOW + 3600), Ok(()));
    assert_eq!(check_at(&t, NOW + 3601), Err(EvidenceTokenError::TooOld));
}

#[test]
fn a_token_carries_every_claim_of_the_scheme_and_nothing_else() {
    for claim in ["iat", "jti", "aud", "sub"] {
        let without = token(|c| {
            c.as_object_mut().unwrap().remove(claim);
        });
        assert_eq!(
            check_at(&without, NOW),
            Err(EvidenceTokenError::MissingClaim(claim)),
            "{claim}"
        );
    }
    assert_eq!(
        check_at(&token(|c| c["jti"] = json!("")), NOW),
        Err(EvidenceTokenError::MissingClaim("jti"))
    );
    for claim in ["delegation_evidence", "conditions", "scope"] {
        let more = token(|c| c[claim] = json!({"effect": "Deny"}));
        assert_eq!(
            check_at(&more, NOW),
            Err(EvidenceTokenError::UnknownClaim(claim.into())),
            "{claim}"
        );
        assert_eq!(
            check_at(&more, NOW).unwrap_err().code(),
            "evidence_member_not_understood"
        );
    }
    assert_eq!(check_at(&token(|c| c["nbf"] = json!(NOW)), NOW), Ok(()));
}

#[test]
fn a_token_lives_no_longer_than_evidence_may_be_old() {
    for exp in [
        json!(NOW + 3606),
        json!(NOW + 10 * 365 * 86400),
        json!(9.223372036854776e18),
    ] {
        let long = token(|c| c["exp"] = exp.clone());
        assert_eq!(
            check_at(&long, NOW),
            Err(EvidenceTokenError::LifetimeTooLong),
            "{exp}"
        );
    }
    assert_eq!(
        check_at(&token(|c| c["exp"] = json!(NOW + 3605)), NOW),
        Ok(())
    );
}

#[test]
fn a_null_where_a_member_belongs_is_not_its_absence() {
    let at = |path: &[&str]| {
        let mut c = claims();
        let mut member = &mut c["delegationEvidence"];
        for step in &path[..path.len() - 1] {
            member = match step.parse::<usize>() {
                Ok(i) => &mut member[i],
                Err(_) => &mut member[*step],
            };
        }
        member[path[path.len() - 1]] = Value::Null;
        c
    };
    for path in [
        &["policySets", "0", "policies", "0", "target", "context"][..],
        &["policySets", "0", "policies", "0", "target", "environment"],
        &["policySets", "0", "policies", "0", "rules", "0", "target"],
        &[
            "policySets",
            "0",
            "policies",
            "0",
            "target",
            "resource",
            "identifiers",
        ],
        &["policySets", "0", "maxDelegationDepth"],
        &["policySets", "0", "target"],
    ] {
        let written = at(path);
        let jwt = token(|c| *c = written);
        let read = read_evidence_token(&jwt, &Readers::default());
        assert_eq!(
            read.map(|_| ()).map_err(|e| e.code()),
            Err("malformed_evidence"),
            "{path:?}"
        );
    }
}
