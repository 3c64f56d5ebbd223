use super::*;
use crate::scheme::jwt::RsaKey;
use crate::scheme::models::{Adherence, PartyInfo, SchemeTime};
use crate::scheme::party_record::from_1_9;
use crate::scheme::trust::{check_party, validate_chain, SignerError, TrustedList};
use crate::scheme::version::SchemeVersion;
use crate::testbed::pki::{PartyCredentials, TestPki};
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use jsonwebtoken::{Algorithm, EncodingKey};
use serde_json::{json, Map, Value};

const CLIENT: &str = "EU.EORI.NL000000001";
const SERVER: &str = "EU.EORI.NL000000003";
const NOW: f64 = 1_800_000_000.0;

fn creds() -> PartyCredentials {
    TestPki::shared().party(CLIENT)
}

fn header() -> Value {
    let x5c: Vec<String> = creds()
        .chain_der
        .iter()
        .map(|d| STANDARD.encode(d))
        .collect();
    json!({"alg": "RS256", "typ": "JWT", "x5c": x5c})
}

fn claims() -> Value {
    json!({"iss": CLIENT, "sub": CLIENT, "aud": SERVER, "jti": "jti-1", "iat": NOW as i64, "exp": NOW as i64 + 30})
}

/// Sign any header and claims with the client's key, so that each defect can be made on purpose.
fn forge(header: &Value, claims: &Value, key_pem: &str) -> String {
    let h = URL_SAFE_NO_PAD.encode(serde_json::to_vec(header).unwrap());
    let c = URL_SAFE_NO_PAD.encode(serde_json::to_vec(claims).unwrap());
    let input = format!("{h}.{c}");
    let key = EncodingKey::from_rsa_pem(key_pem.as_bytes()).unwrap();
    let sig = jsonwebtoken::crypto::sign(input.as_bytes(), &key, Algorithm::RS256).unwrap();
    format!("{input}.{sig}")
}

fn token(edit_header: impl FnOnce(&mut Value), edit_claims: impl FnOnce(&mut Value)) -> String {
    let mut h = header();
    let mut c = claims();
    edit_header(&mut h);
    edit_claims(&mut c);
    forge(&h, &c, &creds().key_pem)
}

fn rules() -> AssertionRules {
    AssertionRules::new(SERVER)
}

fn client() -> PartyId {
    PartyId::parse(CLIENT).unwrap()
}

fn active_record() -> PartyInfo {
    serde_json::from_value(json!({
        "party_id": CLIENT, "party_name": "ABC Trucking",
        "adherence": {"status": "Active", "start_date": "2020-01-01T00:00:00Z", "end_date": "2099-01-01T00:00:00Z"}
    }))
    .unwrap()
}

/// The whole validation of a client assertion as the trust store runs it, on the pure parts: the
/// claims, the chain against the trusted list, the signer, and (with a store) the replay check.
fn validate_assertion(
    token: &str,
    client_id: Option<&PartyId>,
    rules: &AssertionRules,
    trusted: &TrustedList,
    party_record: impl FnOnce(&PartyId) -> Option<PartyInfo>,
    replay: Option<&dyn JtiStore>,
    now: Timestamp,
) -> Result<ClientAssertion, AssertionError> {
    let assertion = check_assertion(token, client_id, rules, now)?;
    let chain = validate_chain(&assertion.jwt.x5c, trusted, now)?;
    let key = RsaKey::of_certificate(&chain.leaf_der)?;
    let record = party_record(&assertion.client_id).map(|r| from_1_9(&r, SchemeVersion::V1_9));
    assertion
        .jwt
        .verify_signature_with(&key)
        .map_err(SignerError::Signature)?;
    check_party(&chain, &assertion.client_id, record.as_ref(), now).map_err(SignerError::Party)?;
    if let Some(store) = replay {
        let until = jti_retention(&assertion, rules, now);
        if !store.remember(assertion.client_id.as_str(), &assertion.jti, until, now) {
            return Err(AssertionError::Replayed);
        }
    }
    Ok(assertion)
}

fn validate_at(
    token: &str,
    now: f64,
    store: Option<&dyn JtiStore>,
) -> Result<ClientAssertion, AssertionError> {
    let trusted = TrustedList::new([TestPki::shared().trusted_list_entry()]);
    validate_assertion(
        token,
        Some(&client()),
        &rules(),
        &trusted,
        |_| Some(active_record()),
        store,
        Timestamp::from_secs_f64(now),
    )
}

fn code_of(token: &str) -> &'static str {
    match validate_at(token, NOW + 1.0, None) {
        Ok(_) => "ok",
        Err(e) => e.code(),
    }
}

fn remove(key: &'static str) -> impl FnOnce(&mut Value) {
    move |v: &mut Value| {
        v.as_object_mut().unwrap().remove(key);
    }
}

fn set(key: &'static str, value: Value) -> impl FnOnce(&mut Value) {
    move |v: &mut Value| v[key] = value
}

fn keep(_: &mut Value) {}

#[test]
fn a_valid_assertion_is_accepted() {
    let ok = validate_at(&token(keep, keep), NOW + 1.0, None).unwrap();
    assert_eq!(ok.client_id, client());
    let made = creds()
        .signing_identity()
        .client_assertion(SERVER, Timestamp::from_secs_f64(NOW))
        .unwrap();
    assert_eq!(code_of(&made), "ok");
}

#[test]
fn each_header_defect_is_refused_with_its_own_error() {
    assert_eq!(code_of(&token(remove("typ"), keep)), "missing_typ");
    assert_eq!(
        code_of(&token(set("typ", json!("JOSE")), keep)),
        "invalid_typ"
    );
    assert_eq!(code_of(&token(set("typ", json!("jwt")), keep)), "ok");
    assert_eq!(code_of(&token(remove("alg"), keep)), "missing_alg");
    assert_eq!(
        code_of(&token(set("alg", json!("HS256")), keep)),
        "invalid_alg"
    );
    assert_eq!(
        code_of(&token(set("alg", json!("none")), keep)),
        "invalid_alg"
    );
    assert_eq!(code_of(&token(remove("x5c"), keep)), "missing_x5c");
    assert_eq!(code_of(&token(set("x5c", json!([])), keep)), "missing_x5c");
    assert_eq!(
        code_of(&token(set("x5c", json!(["bm90IGEgY2VydA=="])), keep)),
        "invalid_x5c"
    );
    assert_eq!(
        code_of(&token(set("x5c", json!("MIIB")), keep)),
        "invalid_x5c"
    );
    assert_eq!(
        code_of(&token(set("kid", json!("k1")), keep)),
        "extra_header_parameter"
    );
}

#[test]
fn each_claim_defect_is_refused_with_its_own_error() {
    assert_eq!(code_of(&token(keep, remove("iss"))), "missing_iss");
    assert_eq!(
        code_of(&token(keep, set("iss", json!("EU.EORI.NL000000002")))),
        "invalid_iss"
    );
    assert_eq!(code_of(&token(keep, remove("sub"))), "missing_sub");
    assert_eq!(
        code_of(&token(keep, set("sub", json!("EU.EORI.NL000000002")))),
        "invalid_sub"
    );
    assert_eq!(code_of(&token(keep, remove("aud"))), "missing_aud");
    assert_eq!(
        code_of(&token(keep, set("aud", json!("EU.EORI.NL000000004")))),
        "invalid_aud"
    );
    assert_eq!(
        code_of(&token(keep, set("aud", json!([SERVER])))),
        "invalid_aud"
    );
    assert_eq!(code_of(&token(keep, remove("jti"))), "missing_jti");
    assert_eq!(
        code_of(&token(keep, set("jti", json!("j".repeat(45_000))))),
        "invalid_jti"
    );
    assert_eq!(
        code_of(&token(keep, set("jti", json!("j".repeat(256))))),
        "ok"
    );
    assert_eq!(code_of(&token(keep, remove("iat"))), "missing_iat");
    assert_eq!(code_of(&token(keep, remove("exp"))), "missing_exp");
    assert_eq!(
        code_of(&token(keep, set("exp", json!(NOW as i64 + 31)))),
        "invalid_exp"
    );
    assert_eq!(
        code_of(&token(keep, set("exp", json!(NOW as i64 + 3600)))),
        "invalid_exp"
    );
}

#[test]
fn fractional_numeric_dates_are_accepted() {
    let iat = NOW + 0.123_456_7;
    let t = token(keep, |c| {
        c["iat"] = json!(iat);
        c["exp"] = json!(iat + 30.0);
    });
    assert_eq!(code_of(&t), "ok");
}

#[test]
fn time_is_checked_with_leeway() {
    let t = token(keep, keep);
    assert_eq!(
        validate_at(&t, NOW - 4.0, None).err().map(|e| e.code()),
        None,
        "within 5 s leeway"
    );
    assert_eq!(
        validate_at(&t, NOW - 6.0, None).unwrap_err().code(),
        "iat_in_future"
    );
    assert_eq!(
        validate_at(&t, NOW + 34.0, None).err().map(|e| e.code()),
        None
    );
    assert_eq!(
        validate_at(&t, NOW + 36.0, None).unwrap_err().code(),
        "assertion_expired"
    );
    let future_nbf = token(keep, set("nbf", json!(NOW as i64 + 20)));
    assert_eq!(code_of(&future_nbf), "nbf_in_future");
}

#[test]
fn signature_defects_are_refused() {
    let t = token(keep, keep);
    let unsigned = format!("{}.", t.rsplit_once('.').unwrap().0);
    assert_eq!(code_of(&unsigned), "missing_signature");
    let other_key = TestPki::shared().party(SERVER).key_pem.clone();
    let wrong = forge(&header(), &claims(), &other_key);
    assert_eq!(code_of(&wrong), "invalid_signature");
}

#[test]
fn an_untrusted_root_is_refused() {
    let t = token(keep, keep);
    let other = TrustedList::pinned(&"AB".repeat(32));
    let err = validate_assertion(
        &t,
        Some(&client()),
        &rules(),
        &other,
        |_| Some(active_record()),
        None,
        Timestamp::from_secs_f64(NOW),
    )
    .unwrap_err();
    assert_eq!(err.code(), "untrusted_root");
}

#[test]
fn party_checks_apply() {
    let t = token(keep, keep);
    let trusted = TrustedList::new([TestPki::shared().trusted_list_entry()]);
    let at = Timestamp::from_secs_f64(NOW);
    let unknown = validate_assertion(&t, Some(&client()), &rules(), &trusted, |_| None, None, at)
        .unwrap_err();
    assert_eq!(unknown.code(), "unknown_party");
    let mut inactive = active_record();
    inactive.adherence = Adherence {
        status: "Revoked".into(),
        start_date: SchemeTime::parse("2020-01-01"),
        end_date: None,
        extra: Map::new(),
    };
    let err = validate_assertion(
        &t,
        Some(&client()),
        &rules(),
        &trusted,
        |_| Some(inactive),
        None,
        at,
    )
    .unwrap_err();
    assert_eq!(err.code(), "party_not_active");
}

#[test]
fn a_replayed_jti_is_refused() {
    let store = MemoryJtiStore::new();
    let t = token(keep, keep);
    assert!(validate_at(&t, NOW + 1.0, Some(&store)).is_ok());
    assert_eq!(
        validate_at(&t, NOW + 2.0, Some(&store)).unwrap_err(),
        AssertionError::Replayed
    );
    // Another jti of the same client passes.
    let t2 = token(keep, set("jti", json!("jti-2")));
    assert!(validate_at(&t2, NOW + 2.0, Some(&store)).is_ok());
}

#[test]
fn the_jti_store_remembers_past_expiry_and_forgets_afterwards() {
    let store = MemoryJtiStore::new();
    let now = Timestamp::from_secs(1000);
    assert!(store.remember("a", "j", 1035.0, now));
    assert!(!store.remember("a", "j", 1035.0, Timestamp::from_secs(1034)));
    assert!(store.remember("b", "j", 1035.0, now), "jtis are per issuer");
    assert!(store.remember("a", "j", 1100.0, Timestamp::from_secs(1036)));
    let assertion = check_assertion(
        &token(keep, keep),
        Some(&client()),
        &rules(),
        Timestamp::from_secs_f64(NOW),
    )
    .unwrap();
    let until = jti_retention(&assertion, &rules(), Timestamp::from_secs_f64(NOW));
    assert!(until >= NOW + 35.0);
}

#[test]
fn forwarded_assertions_check_the_forwarder_as_audience_and_iss_equals_sub() {
    let forwarded = token(keep, keep);
    let ok = check_assertion(&forwarded, None, &rules(), Timestamp::from_secs_f64(NOW)).unwrap();
    assert_eq!(ok.client_id, client());
    let other_audience = AssertionRules::new("EU.EORI.NL000000004");
    assert_eq!(
        check_assertion(
            &forwarded,
            None,
            &other_audience,
            Timestamp::from_secs_f64(NOW)
        )
        .unwrap_err()
        .code(),
        "invalid_aud"
    );
}

fn request() -> TokenRequest {
    TokenRequest {
        grant_type: Some("client_credentials".into()),
        scope: Some("iSHARE".into()),
        client_id: Some(CLIENT.into()),
        client_assertion_type: Some(ASSERTION_TYPE.into()),
        client_assertion: Some("x.y.z".into()),
    }
}

#[test]
fn token_request_parameters_are_checked_in_order() {
    assert!(request().check("iSHARE").is_ok());
    let code = |r: TokenRequest| r.check("iSHARE").unwrap_err();
    let e = code(TokenRequest {
        grant_type: None,
        ..request()
    });
    assert_eq!(
        (e.code(), e.oauth_error()),
        ("missing_grant_type", "invalid_request")
    );
    let e = code(TokenRequest {
        grant_type: Some("password".into()),
        ..request()
    });
    assert_eq!(e.oauth_error(), "unsupported_grant_type");
    let e = code(TokenRequest {
        scope: Some("SCHEME".into()),
        ..request()
    });
    assert_eq!(e.oauth_error(), "invalid_scope");
    let e = code(TokenRequest {
        client_id: Some("ABC".into()),
        ..request()
    });
    assert_eq!(e.code(), "invalid_client_id");
    let e = code(TokenRequest {
        client_assertion_type: Some("jwt".into()),
        ..request()
    });
    assert_eq!(e.code(), "invalid_client_assertion_type");
    let e = code(TokenRequest {
        client_assertion: None,
        ..request()
    });
    assert_eq!(e.code(), "missing_client_assertion");
    // No scope means the scheme's default; extra scope values are allowed beside it.
    assert!(TokenRequest {
        scope: None,
        ..request()
    }
    .check("iSHARE")
    .is_ok());
    let r = TokenRequest {
        scope: Some("iSHARE read".into()),
        ..request()
    }
    .check("iSHARE")
    .unwrap();
    assert_eq!(r.scopes, vec!["iSHARE".to_string(), "read".to_string()]);
    assert!(TokenRequest {
        scope: Some("SCHEME".into()),
        ..request()
    }
    .check("SCHEME")
    .is_ok());
}

#[test]
fn token_requests_come_as_form_or_json() {
    let form = b"grant_type=client_credentials&scope=iSHARE&client_id=EU.EORI.NL000000001&client_assertion_type=urn%3Aietf%3Aparams%3Aoauth%3Aclient-assertion-type%3Ajwt-bearer&client_assertion=x.y.z";
    let from_form =
        TokenRequest::from_body(Some("application/x-www-form-urlencoded"), form).unwrap();
    assert_eq!(from_form.check("iSHARE").unwrap().client_id, client());
    let json = serde_json::to_vec(&json!({
        "grant_type": "client_credentials", "client_id": CLIENT,
        "client_assertion_type": ASSERTION_TYPE, "client_assertion": "x.y.z"
    }))
    .unwrap();
    let from_json =
        TokenRequest::from_body(Some("application/json; charset=utf-8"), &json).unwrap();
    assert_eq!(from_json.check("iSHARE").unwrap().assertion, "x.y.z");
    assert!(TokenRequest::from_body(Some("application/json"), b"{").is_err());
    assert!(TokenRequest::from_body(None, b"scope=a&scope=b")
        .unwrap_err()
        .to_string()
        .contains("twice"));
}

proptest::proptest! {
    #[test]
    fn form_bodies_decode_as_the_url_crate_decodes_them(
        body in proptest::collection::vec(
            proptest::prop_oneof![
                proptest::sample::select(b"a=&+%2B%3d%zz.-_~\xc3\xa9\xff".to_vec()),
                proptest::num::u8::ANY,
            ],
            0..64,
        )
    ) {
        let ours: Vec<(String, String)> = form_pairs(&body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        let theirs: Vec<(String, String)> = url::form_urlencoded::parse(&body)
            .map(|(k, v)| (k.into_owned(), v.into_owned()))
            .collect();
        proptest::prop_assert_eq!(ours, theirs);
    }
}

#[test]
fn rs384_and_rs512_are_accepted_from_a_signer_whose_version_signs_with_them() {
    let now = Timestamp::from_secs_f64(NOW + 1.0);
    let speaking = |scheme_version, versions: &[(&str, SchemeVersion)]| AssertionRules {
        signers: Some(std::sync::Arc::new(Readers {
            scheme_version,
            versions: versions.iter().map(|(p, v)| (p.to_string(), *v)).collect(),
            ..Readers::default()
        })),
        ..rules()
    };
    for alg in ["RS384", "RS512"] {
        let signed = token(set("alg", json!(alg)), keep);
        let checked = |rules: &AssertionRules| {
            check_assertion(&signed, Some(&client()), rules, now).map(|_| ())
        };
        let refused = Err(AssertionError::Jwt(JwtError::InvalidAlg(alg.into())));
        assert_eq!(checked(&rules()), refused, "{alg}: RS256 alone by default");
        assert_eq!(
            checked(&speaking(SchemeVersion::V1_9, &[])),
            refused,
            "{alg}"
        );
        assert_eq!(
            checked(&speaking(SchemeVersion::V3_0, &[])),
            Ok(()),
            "{alg}"
        );
        assert_eq!(
            checked(&speaking(SchemeVersion::V2_1, &[])),
            Ok(()),
            "{alg}"
        );
        // The signer's own version, where it is configured apart from the scheme's.
        let own = speaking(SchemeVersion::V1_9, &[(CLIENT, SchemeVersion::V3_0)]);
        assert_eq!(checked(&own), Ok(()), "{alg}");
        let every = AssertionRules {
            algorithms: AlgorithmPolicy {
                allow_rs384_rs512: true,
            },
            ..rules()
        };
        assert_eq!(checked(&every), Ok(()), "{alg}");
    }
}
