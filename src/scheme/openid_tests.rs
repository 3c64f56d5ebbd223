use super::*;
use crate::scheme::assertion::{check_assertion, AssertionRules};
use crate::scheme::jwe::{encrypt_to_certificate, Decryption, JweError};
use crate::scheme::jwt::{decode, AlgorithmPolicy};
use crate::testbed::pki::TestPki;
use serde_json::{json, Value};

const SP: &str = "EU.EORI.NL000000003";
const IDP: &str = "EU.EORI.NL000000007";
const NOW: i64 = 1_800_000_000;

fn sign(claims: Value) -> String {
    TestPki::shared()
        .party(SP)
        .signing_identity()
        .sign_raw(&claims)
        .unwrap()
}

fn request_claims() -> Value {
    json!({
        "iss": SP, "sub": SP, "aud": IDP, "jti": "j-1", "iat": NOW, "exp": NOW + 30,
        "response_type": "code", "client_id": SP, "scope": "openid profile company",
        "redirect_uri": "https://sp.example/openid_connect1.0/return",
        "state": "s-1", "nonce": "n-1",
    })
}

fn params() -> AuthorizeParams {
    AuthorizeParams {
        response_type: Some("code".into()),
        client_id: Some(SP.into()),
        scope: Some("openid profile company".into()),
    }
}

fn check(
    edit: impl FnOnce(&mut Value),
    edit_params: impl FnOnce(&mut AuthorizeParams),
) -> Result<AuthorizeRequest, RequestError> {
    let mut claims = request_claims();
    edit(&mut claims);
    let mut p = params();
    edit_params(&mut p);
    let client = PartyId::parse(SP).unwrap();
    let assertion = check_assertion(
        &sign(claims),
        Some(&client),
        &AssertionRules::new(IDP),
        Timestamp::from_secs(NOW),
    )?;
    check_request_claims(&assertion.jwt, &client, &p)
}

#[test]
fn a_request_object_in_order_gives_what_it_asks() {
    let r = check(|_| {}, |_| {}).unwrap();
    assert_eq!(r.attribute_scopes, ["profile", "company"]);
    assert_eq!(r.state, "s-1");
    assert_eq!(r.nonce, "n-1");
    assert_eq!(
        r.redirect_uri,
        "https://sp.example/openid_connect1.0/return"
    );
}

type EditClaims = Box<dyn FnOnce(&mut Value)>;
type EditParams = Box<dyn FnOnce(&mut AuthorizeParams)>;

#[test]
fn each_defect_of_a_request_object_has_its_error_and_only_trusted_ones_redirect() {
    let cases: Vec<(EditClaims, EditParams, &str, bool)> = vec![
        (
            Box::new(|c| c["scope"] = json!("openid")),
            Box::new(|p| p.scope = Some("openid".into())),
            "invalid_scope",
            true,
        ),
        (
            Box::new(|c| c["scope"] = json!("profile")),
            Box::new(|p| p.scope = Some("profile".into())),
            "invalid_scope",
            true,
        ),
        (
            Box::new(|_| {}),
            Box::new(|p| p.scope = Some("openid email".into())),
            "invalid_request",
            true,
        ),
        (
            Box::new(|c| c["response_type"] = json!("token")),
            Box::new(|p| p.response_type = Some("token".into())),
            "unsupported_response_type",
            true,
        ),
        (
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("nonce");
            }),
            Box::new(|_| {}),
            "invalid_request",
            true,
        ),
        (
            Box::new(|c| {
                c.as_object_mut().unwrap().remove("state");
            }),
            Box::new(|_| {}),
            "invalid_request",
            false,
        ),
        (
            Box::new(|c| c["redirect_uri"] = json!("http://sp.example/return")),
            Box::new(|_| {}),
            "invalid_request",
            false,
        ),
        (
            Box::new(|c| c["redirect_uri"] = json!("https://sp.example/return#x")),
            Box::new(|_| {}),
            "invalid_request",
            false,
        ),
        (
            Box::new(|c| c["aud"] = json!("EU.EORI.NL000000009")),
            Box::new(|_| {}),
            "invalid_request_object",
            false,
        ),
        (
            Box::new(|c| c["exp"] = json!(NOW + 3600)),
            Box::new(|_| {}),
            "invalid_request_object",
            false,
        ),
        (
            Box::new(|c| {
                c["iat"] = json!(NOW - 100);
                c["exp"] = json!(NOW - 70);
            }),
            Box::new(|_| {}),
            "invalid_request_object",
            false,
        ),
    ];
    for (i, (edit, edit_params, code, redirect)) in cases.into_iter().enumerate() {
        let e = check(edit, edit_params).unwrap_err();
        assert_eq!(
            (e.oauth_error(), e.redirectable()),
            (code, redirect),
            "case {i}: {e}"
        );
    }
    assert_eq!(
        check(|_| {}, |p| p.client_id = Some("EU.EORI.NL000000001".into())).unwrap_err(),
        RequestError::Mismatch {
            name: "client_id",
            plain: "EU.EORI.NL000000001".into(),
            inside: SP.into()
        }
    );
}

#[test]
fn a_request_object_encrypted_to_a_certificate_opens_with_its_key_only() {
    let pki = TestPki::shared();
    let idp = pki.party(IDP);
    let jws = sign(request_claims());
    let jwe = encrypt_to_certificate(&idp.chain_der[0], &jws).unwrap();
    assert_eq!(jwe.split('.').count(), 5);
    let ours = Decryption::from_pem(idp.key_pem.as_bytes()).unwrap();
    assert_eq!(ours.decrypt(&jwe).unwrap(), jws);
    let other = Decryption::from_pem(pki.party(SP).key_pem.as_bytes()).unwrap();
    assert!(matches!(other.decrypt(&jwe), Err(JweError::Decrypt(_))));
    assert_eq!(ours.decrypt(&jws), Err(JweError::NotEncrypted));

    // Compressed content would be inflated before any signature is checked: refused unread.
    let (_, cert) = x509_parser::parse_x509_certificate(&idp.chain_der[0]).unwrap();
    let encrypter = josekit::jwe::RSA_OAEP_256
        .encrypter_from_der(cert.tbs_certificate.subject_pki.raw)
        .unwrap();
    let mut header = josekit::jwe::JweHeader::new();
    header.set_content_encryption("A256GCM");
    header.set_compression("DEF");
    let zipped =
        josekit::jwe::serialize_compact(&vec![b'a'; 100_000], &header, &encrypter).unwrap();
    assert_eq!(ours.decrypt(&zipped), Err(JweError::Compressed));
}

#[test]
fn an_id_token_must_be_ours_fresh_and_carry_our_nonce() {
    let token = |edit: &dyn Fn(&mut Value)| {
        let mut c = json!({"iss": IDP, "sub": "did:ishare:person.jane", "aud": SP, "iat": NOW, "exp": NOW + 30, "nonce": "n-1"});
        edit(&mut c);
        decode(&sign(c), AlgorithmPolicy::default()).unwrap()
    };
    let now = Timestamp::from_secs(NOW);
    let check =
        |jwt: &DecodedJwt| check_id_token(jwt, IDP, SP, "n-1", 5.0, now).map(str::to_string);
    assert_eq!(check(&token(&|_| {})), Ok("did:ishare:person.jane".into()));
    assert_eq!(
        check(&token(&|c| c["aud"] = json!("EU.EORI.NL000000002"))),
        Err(IssuedTokenError::Audience(SP.into()))
    );
    assert_eq!(
        check(&token(&|c| c["nonce"] = json!("n-2"))),
        Err(IssuedTokenError::Nonce)
    );
    assert_eq!(
        check(&token(&|c| c["iss"] = json!(SP))),
        Err(IssuedTokenError::Issuer {
            expected: IDP.into(),
            found: SP.into()
        })
    );
    assert_eq!(
        check(&token(&|c| c["exp"] = json!(NOW - 10))),
        Err(IssuedTokenError::Expired)
    );
    assert_eq!(
        check(&token(&|c| c["iat"] = json!(NOW + 60))),
        Err(IssuedTokenError::IssuedInFuture)
    );
    assert_eq!(
        check(&token(&|c| c["sub"] = json!(""))),
        Err(IssuedTokenError::MissingSub)
    );
}
