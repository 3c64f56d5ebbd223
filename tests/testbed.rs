//! The testbed over real HTTPS on ephemeral ports: every endpoint's happy path and its 400, 401,
//! 404 and 405 cases, the parties filters and paging, both delegation body shapes, and the client
//! command against it.

use crate::support;

use ishare_gateway::scheme::Timestamp;
use serde_json::{json, Value};
use support::*;

const BIN: &str = "testbed";

async fn get(bed: &Bed, url: String, token: Option<&str>) -> (u16, Value) {
    let mut req = bed.http.get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    status_json(req.send().await.unwrap()).await
}

async fn parties(bed: &Bed, token: &str, query: &str) -> (u16, Value) {
    let (status, body) = get(bed, format!("{}/parties?{query}", bed.url(SO)), Some(token)).await;
    if status == 200 {
        (
            status,
            claims(body["parties_token"].as_str().unwrap())["parties_info"].clone(),
        )
    } else {
        (status, body)
    }
}

fn ids(info: &Value) -> Vec<String> {
    info["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["party_id"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_show_restricted_features_only_to_token_holders() {
    let bed = Bed::start(BIN).await;
    for party in [SO, AR, OWNER, SP] {
        let (status, body) = get(&bed, format!("{}/capabilities", bed.url(party)), None).await;
        assert_eq!(status, 200);
        let c = claims(body["capabilities_token"].as_str().unwrap());
        assert_eq!(c["iss"], party);
        assert!(
            c.get("aud").is_none(),
            "anonymous capabilities carry no aud"
        );
        let features = &c["capabilities_info"]["supported_versions"][0]["supported_features"][0];
        assert!(features["public"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["feature"] == "access token"));
        assert!(features.get("restricted").is_none());
        assert_eq!(
            c["capabilities_info"]["ishare_roles"]
                .as_array()
                .unwrap()
                .len(),
            1
        );

        let token = bed.token(party, CONSUMER).await;
        let (_, body) = get(
            &bed,
            format!("{}/capabilities", bed.url(party)),
            Some(&token),
        )
        .await;
        let c = claims(body["capabilities_token"].as_str().unwrap());
        assert_eq!(c["aud"], CONSUMER);
        assert!(
            !c["supported_versions"][0]["supported_features"][0]["restricted"]
                .as_array()
                .unwrap()
                .is_empty()
        );
    }
    let (status, body) = get(
        &bed,
        format!("{}/capabilities", bed.url(SO)),
        Some("forged"),
    )
    .await;
    assert_eq!(
        (status, body["error"].as_str()),
        (401, Some("invalid_token"))
    );
    let resp = bed
        .http
        .post(format!("{}/capabilities", bed.url(SO)))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 405);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_endpoints_validate_assertions() {
    let bed = Bed::start(BIN).await;
    for path in ["/connect/token", "/token"] {
        let resp = bed
            .http
            .post(format!("{}{path}", bed.url(SO)))
            .form(&[("grant_type", "password")])
            .send()
            .await
            .unwrap();
        let (status, body) = status_json(resp).await;
        assert_eq!(
            (status, body["error"].as_str()),
            (400, Some("unsupported_grant_type"))
        );
    }
    let (status, _) = status_json(
        bed.http
            .get(format!("{}/connect/token", bed.url(AR)))
            .send()
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(status, 405);

    // A fresh assertion works once; the same assertion again is a replay.
    let identity = bed.identity(CONSUMER);
    let assertion = identity.client_assertion(SO, Timestamp::now()).unwrap();
    let first = bed
        .token_response(SO, &identity, Some(assertion.clone()))
        .await;
    let (status, body) = status_json(first).await;
    assert_eq!(
        (
            status,
            body["token_type"].as_str(),
            body["expires_in"].as_u64()
        ),
        (200, Some("Bearer"), Some(3600))
    );
    let (status, body) =
        status_json(bed.token_response(SO, &identity, Some(assertion)).await).await;
    assert_eq!(status, 400);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("replayed_jti"),
        "{body}"
    );

    // An assertion for another audience.
    let wrong_aud = identity.client_assertion(AR, Timestamp::now()).unwrap();
    let (status, body) =
        status_json(bed.token_response(SO, &identity, Some(wrong_aud)).await).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (400, Some("invalid_client"))
    );
    assert!(body["error_description"]
        .as_str()
        .unwrap()
        .contains("invalid_aud"));

    // Parties that are unknown or not active at the scheme owner.
    let (status, body) =
        status_json(bed.token_response(SO, &bed.unknown_party(), None).await).await;
    assert_eq!(status, 400);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("unknown_party"),
        "{body}"
    );
    let (status, body) =
        status_json(bed.token_response(AR, &bed.identity(INACTIVE), None).await).await;
    assert_eq!(status, 400);
    assert!(
        body["error_description"]
            .as_str()
            .unwrap()
            .contains("party_not_active"),
        "{body}"
    );

    // JSON bodies are accepted as well as forms.
    let assertion = identity.client_assertion(SP, Timestamp::now()).unwrap();
    let resp = bed
        .http
        .post(format!("{}/oauth2.0/token", bed.url(SP)))
        .json(&json!({
            "grant_type": "client_credentials", "scope": "iSHARE", "client_id": CONSUMER,
            "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
            "client_assertion": assertion
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["cache-control"], "no-store");
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_search_filters_and_pages() {
    let bed = Bed::start(BIN).await;
    let (status, _) = parties(&bed, "not-a-token", "eori=*").await;
    assert_eq!(status, 401);
    let token = bed.token(SO, CONSUMER).await;
    let (status, body) = parties(&bed, &token, "").await;
    assert_eq!(status, 400);
    assert!(body["error_description"]
        .as_str()
        .unwrap()
        .contains("at least one"));
    assert_eq!(parties(&bed, &token, "name=a*b*c").await.0, 400);
    assert_eq!(
        parties(&bed, &token, "eori=*&active_only=maybe").await.0,
        400
    );

    // 16 parties: two pages of at most 10, count over all.
    let (_, page1) = parties(&bed, &token, "eori=*").await;
    assert_eq!(page1["count"], 16);
    assert_eq!(ids(&page1).len(), 10);
    let (_, page2) = parties(&bed, &token, "eori=*&page=2").await;
    assert_eq!((page2["count"].as_u64(), ids(&page2).len()), (Some(16), 6));
    assert!(ids(&page1).iter().all(|id| !ids(&page2).contains(id)));
    let (_, page3) = parties(&bed, &token, "eori=*&page=3").await;
    assert_eq!((page3["count"].as_u64(), ids(&page3).len()), (Some(16), 0));

    let (_, named) = parties(&bed, &token, "name=happy*").await;
    assert_eq!(ids(&named), vec![OWNER]);
    let (_, by_eori) = parties(&bed, &token, "eori=EU.EORI.NL00000010*").await;
    assert_eq!(by_eori["count"], 8);
    let (_, inactive) = parties(&bed, &token, "eori=*&active_only=false").await;
    assert_eq!(ids(&inactive), vec![INACTIVE]);
    let (_, active) = parties(&bed, &token, "name=*&active_only=true").await;
    assert_eq!(active["count"], 15);
    let (_, uncertified) = parties(&bed, &token, "eori=*&certified_only=false").await;
    assert_eq!(ids(&uncertified), vec![INACTIVE]);
    let (_, then) = parties(
        &bed,
        &token,
        "eori=EU.EORI.NL000000006&active_only=true&date_time=2023-06-01T00:00:00Z",
    )
    .await;
    assert_eq!(ids(&then), vec![INACTIVE], "active before its end date");

    // certificate_subject_name: all attributes in any order, and only together with the eori.
    let subject = "SERIALNUMBER=EU.EORI.NL000000001, CN=ABC Trucking, O=ABC Trucking, C=NL";
    let q = |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
    let (_, found) = parties(
        &bed,
        &token,
        &format!("eori={CONSUMER}&certificate_subject_name={}", q(subject)),
    )
    .await;
    assert_eq!(ids(&found), vec![CONSUMER]);
    let (_, partial) = parties(
        &bed,
        &token,
        &format!(
            "eori={CONSUMER}&certificate_subject_name={}",
            q("CN=ABC Trucking")
        ),
    )
    .await;
    assert_eq!(partial["count"], 0);
    let (_, alone) = parties(
        &bed,
        &token,
        &format!("certificate_subject_name={}", q(subject)),
    )
    .await;
    assert_eq!(alone["count"], 0);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_party_trusted_list_and_certificate_validation() {
    let bed = Bed::start(BIN).await;
    let token = bed.token(SO, SP).await;
    let (status, body) = get(
        &bed,
        format!("{}/parties/{OWNER}", bed.url(SO)),
        Some(&token),
    )
    .await;
    assert_eq!(status, 200);
    let party = claims(body["party_token"].as_str().unwrap());
    assert_eq!(party["party_info"]["party_id"], OWNER);
    assert_eq!(party["party_info"]["auth_registries"][0]["id"], AR);
    assert_eq!(
        party["party_info"]["auth_registries"][0]["url"],
        bed.url(AR)
    );
    assert_eq!(
        get(
            &bed,
            format!("{}/parties/EU.EORI.NL000000077", bed.url(SO)),
            Some(&token)
        )
        .await
        .0,
        404
    );
    assert_eq!(
        get(&bed, format!("{}/parties/{OWNER}", bed.url(SO)), None)
            .await
            .0,
        401
    );

    let (status, body) = get(&bed, format!("{}/trusted_list", bed.url(SO)), Some(&token)).await;
    assert_eq!(status, 200);
    let list = claims(body["trusted_list_token"].as_str().unwrap());
    assert_eq!(
        list["trusted_list"][0]["certificate_fingerprint"],
        bed.keys.pki.root_fingerprint()
    );
    assert_eq!(list["trusted_list"][0]["status"], "granted");

    use base64::Engine;
    let leaf = base64::engine::general_purpose::STANDARD.encode(bed.creds(CONSUMER).leaf_der());
    let resp = bed
        .http
        .post(format!("{}/certificate_validation", bed.url(SO)))
        .bearer_auth(&token)
        .json(&json!({"certificate": leaf}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["validity"].as_bool()),
        (200, Some(true)),
        "{body}"
    );
    let foreign = ishare_gateway::testbed::pki::TestPki::shared().party(CONSUMER);
    let resp = bed
        .http
        .post(format!("{}/certificate_validation", bed.url(SO)))
        .bearer_auth(&token)
        .json(&json!({"x5c": foreign.chain_der.iter().map(|d| base64::engine::general_purpose::STANDARD.encode(d)).collect::<Vec<_>>()}))
        .send()
        .await
        .unwrap();
    assert_eq!(status_json(resp).await.1["validity"], false);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn test_only_endpoints() {
    let bed = Bed::start(BIN).await;
    let resp = bed
        .http
        .post(format!("{}/testing/generate-jws", bed.url(SO)))
        .json(&json!({"client_id": CONSUMER, "audience": SP}))
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(status, 200);
    let assertion = body["client_assertion"].as_str().unwrap().to_string();
    let resp = bed
        .token_response(SP, &bed.identity(CONSUMER), Some(assertion))
        .await;
    let token: Value = resp.json().await.unwrap();
    let token = token["access_token"].as_str().unwrap();

    let (status, me) = get(&bed, format!("{}/me", bed.url(SP)), Some(token)).await;
    assert_eq!(
        (status, me["client_id"].as_str(), me["party_name"].as_str()),
        (200, Some(CONSUMER), Some("ABC Trucking"))
    );
    assert_eq!(get(&bed, format!("{}/me", bed.url(SP)), None).await.0, 401);

    let boom = |t: Option<&str>| {
        let mut req = bed.http.post(format!("{}/boom_access", bed.url(SP)));
        if let Some(t) = t {
            req = req.bearer_auth(t);
        }
        req.send()
    };
    let (status, body) = status_json(boom(Some(token)).await.unwrap()).await;
    assert_eq!((status, body), (200, Value::Bool(true)));
    assert_eq!(boom(None).await.unwrap().status(), 401);
    let resp = bed
        .http
        .post(format!("{}/testing/generate-jws", bed.url(SO)))
        .json(&json!({"client_id": UNKNOWN, "audience": SP}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    bed.stop().await;
}

fn mask(issuer: &str, subject: &str, identifier: &str, action: &str, sps: &[&str]) -> Value {
    let mut policy = json!({
        "target": {
            "resource": {"type": "CONTAINER", "identifiers": [identifier], "attributes": ["*"]},
            "actions": [action]
        },
        "rules": [{"effect": "Permit"}]
    });
    if !sps.is_empty() {
        policy["target"]["environment"] = json!({"serviceProviders": sps});
    }
    json!({"policyIssuer": issuer, "target": {"accessSubject": subject}, "policySets": [{"policies": [policy]}]})
}

async fn delegation(bed: &Bed, server: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    let mut req = bed
        .http
        .post(format!("{}/delegation", bed.url(server)))
        .json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let (status, body) = status_json(req.send().await.unwrap()).await;
    if status == 200 {
        (status, claims(body["delegation_token"].as_str().unwrap()))
    } else {
        (status, body)
    }
}

fn effect(evidence: &Value) -> &str {
    evidence["delegationEvidence"]["policySets"][0]["policies"][0]["rules"][0]["effect"]
        .as_str()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_answers_masks_in_both_shapes() {
    let bed = Bed::start(BIN).await;
    let token = bed.token(AR, CONSUMER).await;
    let permit = mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP]);
    let (status, ev) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": permit, "previous_steps": []}),
    )
    .await;
    assert_eq!(status, 200, "{ev}");
    assert_eq!(
        (ev["iss"].as_str(), ev["sub"].as_str(), ev["aud"].as_str()),
        (Some(AR), Some(CONSUMER), Some(CONSUMER))
    );
    assert_eq!(effect(&ev), "Permit");
    assert_eq!(
        ev["delegationEvidence"]["policySets"][0]["target"]["environment"]["licenses"][0],
        "ISHARE.0001"
    );
    let generic = json!({"delegation_mask": {"delegationRequest": permit}, "delegation_path": [OWNER, CONSUMER], "previous_steps": []});
    let (status, ev) = delegation(&bed, AR, Some(&token), &generic).await;
    assert_eq!((status, effect(&ev)), (200, "Permit"));

    let (_, ev) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.DELETE", &[SP])}),
    )
    .await;
    assert_eq!(effect(&ev), "Deny");
    let (_, ev) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": mask(OWNER, CONSUMER, "SECRET-1", "iSHARE.READ", &[SP])}),
    )
    .await;
    assert_eq!(effect(&ev), "Deny", "a Deny rule restricts the policy");
    let (status, body) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": mask(CONSUMER, OWNER, "C1", "iSHARE.READ", &[])}),
    )
    .await;
    assert_eq!(
        status, 404,
        "no policy from the consumer to the owner: {body}"
    );
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_refuses_bad_delegation_requests() {
    let bed = Bed::start(BIN).await;
    let token = bed.token(AR, CONSUMER).await;
    let body = json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP])});
    assert_eq!(
        status_json(
            bed.http
                .get(format!("{}/delegation", bed.url(AR)))
                .send()
                .await
                .unwrap()
        )
        .await
        .0,
        405
    );
    assert_eq!(
        delegation(&bed, AR, None, &body).await.0,
        400,
        "missing Authorization"
    );
    let resp = bed
        .http
        .post(format!("{}/delegation", bed.url(AR)))
        .header("authorization", "Basic abc")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400, "not Bearer");
    assert_eq!(
        delegation(&bed, AR, Some("expired-or-forged"), &body)
            .await
            .0,
        401
    );
    let (status, err) = delegation(&bed, AR, Some(&token), &json!({"nothing": true})).await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("delegationRequest"));

    let mut no_permit = mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP]);
    no_permit["policySets"][0]["policies"][0]["rules"] = json!([{"effect": "Deny"}]);
    let (status, err) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": no_permit}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("Permit"));

    let (status, err) = delegation(&bed, AR, Some(&token), &json!({"delegationRequest": mask("EU.EORI.NL000000077", CONSUMER, "C1", "iSHARE.READ", &[])})).await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("unknown_mask_id"));
    let (status, err) = delegation(
        &bed,
        AR,
        Some(&token),
        &json!({"delegationRequest": mask(OWNER, INACTIVE, "C1", "iSHARE.READ", &[])}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("mask_id_not_active"));

    // A service provider not named in the mask may not ask about others' delegations...
    let sp_token = bed.token(AR, SP2).await;
    let others = json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP])});
    let (status, err) = delegation(&bed, AR, Some(&sp_token), &others).await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("client_id_not_allowed"));
    // ...unless it brings the subject's client assertion addressed to it,
    let step = bed
        .identity(CONSUMER)
        .client_assertion(SP2, Timestamp::now())
        .unwrap();
    let with_step = json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP]), "previous_steps": [step]});
    assert_eq!(
        delegation(&bed, AR, Some(&sp_token), &with_step).await.0,
        200
    );
    // ...and a step addressed to someone else is refused with its defect.
    let wrong = bed
        .identity(CONSUMER)
        .client_assertion(SP, Timestamp::now())
        .unwrap();
    let with_wrong = json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP]), "previous_steps": [wrong]});
    let (status, err) = delegation(&bed, AR, Some(&sp_token), &with_wrong).await;
    assert_eq!(status, 400);
    assert!(
        err["error_description"]
            .as_str()
            .unwrap()
            .contains("invalid_aud"),
        "{err}"
    );
    // A service provider named in every policy of the mask may ask.
    let named = json!({"delegationRequest": mask(OWNER, CONSUMER, "C1", "iSHARE.READ", &[SP2])});
    let (status, ev) = delegation(&bed, AR, Some(&sp_token), &named).await;
    assert_eq!((status, effect(&ev)), (200, "Permit"));
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entitled_party_answers_for_its_own_delegations_only() {
    let bed = Bed::start(BIN).await;
    let token = bed.token(OWNER, CONSUMER).await;
    let (status, ev) = delegation(
        &bed,
        OWNER,
        Some(&token),
        &json!({"delegationRequest": mask(OWNER, CONSUMER, "C9", "iSHARE.READ", &[SP])}),
    )
    .await;
    assert_eq!(
        (status, ev["iss"].as_str(), effect(&ev)),
        (200, Some(OWNER), "Permit")
    );
    let token = bed.token(OWNER, SP2).await;
    let (status, err) = delegation(
        &bed,
        OWNER,
        Some(&token),
        &json!({"delegationRequest": mask(SP2, CONSUMER, "C9", "iSHARE.READ", &[])}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(err["error_description"]
        .as_str()
        .unwrap()
        .contains("only for delegations it issued"));
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parties_add_policies_they_issue() {
    let bed = Bed::start(BIN).await;
    let policy = json!({
        "notBefore": 0, "notOnOrAfter": 4102444800i64,
        "policyIssuer": SP2, "target": {"accessSubject": CONSUMER},
        "policySets": [{"policies": [{
            "target": {"resource": {"type": "PALLET", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]},
            "rules": [{"effect": "Permit"}]
        }]}]
    });
    let add = |token: String, body: Value| {
        bed.http
            .post(format!("{}/policy", bed.url(AR)))
            .bearer_auth(token)
            .json(&body)
            .send()
    };
    let consumer = bed.token(AR, CONSUMER).await;
    let (status, err) = status_json(add(consumer.clone(), policy.clone()).await.unwrap()).await;
    assert_eq!(status, 403, "{err}");
    let issuer = bed.token(AR, SP2).await;
    assert_eq!(
        add(issuer.clone(), json!({"policyIssuer": SP2}))
            .await
            .unwrap()
            .status(),
        400
    );
    assert_eq!(add(issuer, policy).await.unwrap().status(), 201);
    let mut m = mask(SP2, CONSUMER, "P1", "iSHARE.READ", &[]);
    m["policySets"][0]["policies"][0]["target"]["resource"]["type"] = json!("PALLET");
    let (status, ev) =
        delegation(&bed, AR, Some(&consumer), &json!({"delegationRequest": m})).await;
    assert_eq!((status, effect(&ev)), (200, "Permit"));
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_echo_backend_reflects_the_request() {
    let bed = Bed::start(BIN).await;
    let resp = bed
        .http
        .put(format!("{}/some/path?x=1&y=2", bed.testbed.echo_url))
        .header("x-custom", "abc")
        .body("hello")
        .send()
        .await
        .unwrap();
    let (status, echo) = status_json(resp).await;
    assert_eq!(status, 200);
    assert_eq!(
        (
            echo["method"].as_str(),
            echo["path"].as_str(),
            echo["query"].as_str()
        ),
        (Some("PUT"), Some("/some/path"), Some("x=1&y=2"))
    );
    assert_eq!(
        (echo["headers"]["x-custom"].as_str(), echo["body"].as_str()),
        (Some("abc"), Some("hello"))
    );
    bed.stop().await;
}

/// Run `ishare-gateway client --testbed DIR --as CONSUMER ARGS…` off the async threads.
async fn client(data_dir: std::path::PathBuf, args: Vec<String>) -> (bool, String, String) {
    tokio::task::spawn_blocking(move || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
            .args([
                "client",
                "--testbed",
                data_dir.to_str().unwrap(),
                "--as",
                CONSUMER,
            ])
            .args(args)
            .output()
            .unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    })
    .await
    .unwrap()
}

fn args(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_client_command_gets_tokens_and_evidence() {
    let bed = Bed::start(BIN).await;
    let dir = bed.keys.data_dir.clone();
    let (ok, out, err) = client(
        dir.clone(),
        args(&["--raw", "token", "--url", &bed.url(SO)]),
    )
    .await;
    assert!(ok, "{err}");
    assert_eq!(out.trim().split('.').count(), 3);
    let (ok, out, err) = client(
        dir,
        args(&[
            "evidence",
            "--registry",
            &bed.url(AR),
            "--issuer",
            OWNER,
            "--type",
            "CONTAINER",
            "--id",
            "C1",
            "--action",
            "iSHARE.READ",
            "--service-provider",
            SP,
        ]),
    )
    .await;
    assert!(ok, "{err}");
    assert!(
        out.contains("signature: valid") && out.contains("chain: trusted"),
        "{out}"
    );
    assert!(out.contains("\"effect\": \"Permit\""), "{out}");
    bed.stop().await;
}
