//! Evidence as the scheme's later versions write it, through the gateway: conditional Permits
//! never granted unless the condition holds on the route's values, members no version defines,
//! licence expressions, 3.0 evidence that names no service provider, RS384, what a peer's
//! configured version does not have, members listed per issuer, a 3.0 registry asked with the
//! route's values as context, and both names of the credential headers (read, checked, used once,
//! never forwarded). Then the same decisions through the binary: its decision log, `explain` and
//! `test`.

use crate::support;

use ishare_gateway::scheme::Timestamp;
use ishare_gateway::testbed::pki::PartyCredentials;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use support::process::{eventually, GatewayProcess};
use support::served::Served;
use support::*;

const BIN: &str = "scheme_versions";
const LICENCE: &str = "https://licenses.ishare.eu/general-internal-use/1.0";

fn route(name: &str, path: &str, delegation: &str) -> String {
    format!(
        "[[route]]\nname = \"{name}\"\nmethods = [\"GET\"]\npath = \"{path}\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"{OWNER}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\n{delegation}\n\n"
    )
}

const LOCATED: &str = "[route.delegation.conditions]\nrequesterLocation = \"{header.X-Region}\"";

fn rules() -> String {
    [
        route("plain", "/api/plain/{id}", "evidence = [\"header\"]"),
        route(
            "located",
            "/api/located/{id}",
            &format!("evidence = [\"header\"]\n{LOCATED}"),
        ),
        route(
            "unnamed",
            "/api/unnamed/{id}",
            &format!("evidence = [\"header\"]\naccept_unnamed_service_provider = true\n{LOCATED}"),
        ),
        route(
            "licensed",
            "/api/licensed/{id}",
            &format!("evidence = [\"header\"]\nlicences = [\"{LICENCE}\"]"),
        ),
        route("containers", "/api/containers/{id}", ""),
        route(
            "registered",
            "/api/registered/{id}",
            "evidence = [\"registry\"]",
        ),
        route(
            "asked",
            "/api/asked/{id}",
            &format!("evidence = [\"registry\"]\nregistry = \"standin\"\naccept_unnamed_service_provider = true\n{LOCATED}"),
        ),
        format!(
            "[[route]]\nname = \"shadow\"\nmethods = [\"GET\"]\npath = \"/api/shadow/{{id}}\"\nupstream = \"echo\"\nmode = \"shadow\"\n[route.delegation]\npolicy_issuer = \"{OWNER}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\n\n"
        ),
        "[[route]]\nname = \"public\"\npath = \"/public/{*rest}\"\nupstream = \"echo\"\nauth = \"public\"\n\n".into(),
        "[[route]]\nname = \"token-only\"\npath = \"/token-only/{*rest}\"\nupstream = \"echo\"\nauth = \"token\"\n\n".into(),
    ]
    .concat()
}

/// A JWT signed with a party's real key and chain, with `alg` in the header.
fn sign_as(creds: &PartyCredentials, alg: &str, claims: &Value) -> String {
    use base64::Engine;
    let x5c: Vec<String> = creds
        .chain_der
        .iter()
        .map(|d| base64::engine::general_purpose::STANDARD.encode(d))
        .collect();
    forge(
        &json!({"alg": alg, "typ": "JWT", "x5c": x5c}),
        claims,
        &creds.key_pem,
    )
}

/// The claims of a delegation token `signer` issues to `aud` now, with `sub` as given.
fn delegation_claims(signer: &str, sub: &str, aud: &str, evidence: Value) -> Value {
    let now = Timestamp::now().secs();
    json!({"iss": signer, "sub": sub, "aud": aud, "jti": uuid::Uuid::new_v4().to_string(),
        "iat": now, "exp": now + 30, "delegationEvidence": evidence})
}

/// Evidence from the owner to the consumer for container `*`, with `policy` as its one policy.
fn evidence(policy: Value, licences: Value) -> Value {
    let now = Timestamp::now().secs();
    json!({
        "notBefore": now - 10, "notOnOrAfter": now + 600,
        "policyIssuer": OWNER, "target": {"accessSubject": CONSUMER},
        "policySets": [{"target": {"environment": {"licenses": licences}}, "policies": [policy]}]
    })
}

/// A policy for every container, read by us (`providers` null: naming no service provider), with
/// these rules.
fn policy(providers: Value, rules: Value) -> Value {
    let mut target = json!({
        "resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]},
        "actions": ["iSHARE.READ"]
    });
    if !providers.is_null() {
        target["environment"] = json!({"serviceProviders": providers});
    }
    json!({"target": target, "rules": rules})
}

/// The token a registry of 3.0 answers: `sub` = the registry, addressed to the consumer.
fn token_3(bed: &Bed, signer: &str, alg: &str, evidence: Value) -> String {
    let claims = delegation_claims(signer, signer, CONSUMER, evidence);
    sign_as(bed.creds(signer), alg, &claims)
}

/// The token a 1.9 registry answers: `sub` = the access subject.
fn token_19(bed: &Bed, signer: &str, evidence: Value) -> String {
    let claims = delegation_claims(signer, CONSUMER, CONSUMER, evidence);
    sign_as(bed.creds(signer), "RS256", &claims)
}

fn condition(left: &str, op: &str, right: &str) -> Value {
    json!({"leftOperand": left, "operator": op, "rightOperand": right})
}

/// Refused with `status` and `why`: the answer's description.
async fn refused(
    env: &Env,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
    (status, why): (u16, &str),
) -> String {
    let (got, body) = env.get(path, token, headers).await;
    assert_eq!(
        (got, body["reason"].as_str()),
        (status, Some(why)),
        "{path}: {body}"
    );
    body["error_description"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A registry of 3.0 standing in for the data owner's: it records what it is asked, and answers
/// a `delegationToken` signed with the registry's key that mirrors the mask's policies (their
/// context too) with a Permit rule whose condition is that the requester is in NL.
struct StandIn {
    served: Served,
    asked: Arc<Mutex<Vec<Value>>>,
}

async fn stand_in() -> StandIn {
    use axum::routing::post;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let creds = &prepare_keys(&testbed_config(BIN)).parties[AR];
    let recorded = asked.clone();
    let answer = move |axum::Json(body): axum::Json<Value>| {
        let recorded = recorded.clone();
        async move {
            recorded.lock().unwrap().push(body.clone());
            let request = &body["delegationRequest"];
            let mut sets = request["policySets"].clone();
            for set in sets.as_array_mut().into_iter().flatten() {
                for p in set["policies"].as_array_mut().into_iter().flatten() {
                    p["rules"] = json!([{"effect": "Permit", "conditions": condition("requesterLocation", "equal", "NL")}]);
                }
            }
            let now = Timestamp::now().secs();
            let evidence = json!({
                "notBefore": now - 10, "notOnOrAfter": now + 600,
                "policyIssuer": request["policyIssuer"], "target": request["target"],
                "policySets": sets
            });
            let token = sign_as(creds, "RS256", &delegation_claims(AR, AR, SP, evidence));
            axum::Json(json!({ "delegationToken": token }))
        }
    };
    let token = || async {
        axum::Json(json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}))
    };
    let router = axum::Router::new()
        .route("/connect/token", post(token))
        .route("/delegation", post(answer));
    StandIn {
        served: Served::start(router).await,
        asked,
    }
}

/// The testbed's registry (and the stand-in beside it) configured as speaking 3.0.
async fn env_3(standin: &str) -> Env {
    let bed = Bed::start(BIN).await;
    let extra = format!(
        "[[registry]]\nname = \"ar\"\nparty_id = \"{AR}\"\nurl = \"{}\"\nscheme_version = \"3.0\"\n\n[[registry]]\nname = \"standin\"\nparty_id = \"{AR}\"\nurl = \"{standin}\"\nscheme_version = \"3.0\"\n",
        bed.url(AR)
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |t| t);
    Env::launch(bed, dir, &ports).await
}

/// The registry the rules name, at an address nothing answers: named, not asked.
fn unreachable_standin() -> String {
    format!("[[registry]]\nname = \"standin\"\nparty_id = \"{AR}\"\nurl = \"http://127.0.0.1:1\"\n")
}

/// Every peer as 1.9 (the default).
async fn env_19() -> Env {
    Env::start(BIN, &rules(), |_| unreachable_standin()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_conditional_permit_is_never_granted_whoever_signs_it() {
    let env = env_19().await;
    let token = env.token(CONSUMER).await;
    let mars = condition("requesterLocation", "equal", "Mars");
    let shapes = [
        mars.clone(),
        json!({"allOf": [mars, condition("requesterLocation", "notEqual", "Mars")]}),
        json!({"anyOf": [mars]}),
        json!({"anyOf": []}),
        json!({"leftOperand": "x", "operator": "within", "rightOperand": "EU"}),
        json!({"allOf": [{"anyOf": [mars]}]}),
    ];
    let conditional = |tree: &Value| {
        let rules = json!([{"effect": "Permit", "conditions": tree}]);
        evidence(policy(json!([SP]), rules), json!([]))
    };
    // A 1.9 peer has no conditions: its evidence with one is refused, not guessed to be 3.0's.
    for tree in &shapes {
        for signer in [OWNER, AR] {
            let presented = token_19(&env.bed, signer, conditional(tree));
            let headers = [
                ("delegation_evidence", presented.as_str()),
                ("X-Region", "Mars"),
            ];
            for path in ["/api/plain/C1", "/api/located/C1"] {
                let expected = (403, "evidence_version_mismatch");
                refused(&env, path, &token, &headers, expected).await;
            }
        }
    }
    env.stop().await;
    // Read as 3.0 evidence, each is decided: never a Permit the condition does not give.
    let standin = stand_in().await;
    let env = env_3(&standin.served.url()).await;
    let token = env.token(CONSUMER).await;
    let expected = [
        ("condition_operand_undefined", "condition_not_met"),
        ("condition_operand_undefined", "condition_not_met"),
        ("condition_operand_undefined", "condition_not_met"),
        ("condition_malformed", "condition_malformed"),
        ("condition_operator_unknown", "condition_operator_unknown"),
        ("condition_operand_undefined", "condition_not_met"),
    ];
    for (tree, (undeclared, declared)) in shapes.iter().zip(expected) {
        let presented = token_3(&env.bed, AR, "RS256", conditional(tree));
        let headers = [
            ("delegationEvidence", presented.as_str()),
            ("X-Region", "NL"),
        ];
        refused(&env, "/api/plain/C1", &token, &headers, (403, undeclared)).await;
        refused(&env, "/api/located/C1", &token, &headers, (403, declared)).await;
    }
    env.stop().await;
    standin.served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_condition_is_decided_on_the_value_the_route_declares() {
    let standin = stand_in().await;
    let env = env_3(&standin.served.url()).await;
    let token = env.token(CONSUMER).await;
    let in_nl_or_be = json!([{"effect": "Permit", "conditions": {"anyOf": [
        condition("requesterLocation", "equal", "NL"),
        condition("requesterLocation", "equal", "BE")
    ]}}]);
    // RS384, which 3.0 allows, and sub = the registry, as 3.0 writes it.
    let ev = evidence(policy(json!([SP]), in_nl_or_be), json!([]));
    let presented = token_3(&env.bed, AR, "RS384", ev);
    let from = |region| {
        [
            ("delegationEvidence", presented.as_str()),
            ("X-Region", region),
        ]
    };
    let (status, body) = env.get("/api/located/C1", &token, &from("NL")).await;
    assert_eq!(
        (status, &body["path"]),
        (200, &json!("/api/located/C1")),
        "{body}"
    );
    let said = refused(
        &env,
        "/api/located/C1",
        &token,
        &from("DE"),
        (403, "condition_not_met"),
    )
    .await;
    assert!(
        said.contains("rules[0].conditions") && said.contains("none of its 2"),
        "{said}"
    );
    let only_evidence = [("delegationEvidence", presented.as_str())];
    let absent = (403, "condition_value_absent");
    refused(&env, "/api/located/C1", &token, &only_evidence, absent).await;
    // 3.0 evidence that names no service provider binds to us only where the route says so.
    let in_nl =
        json!([{"effect": "Permit", "conditions": condition("requesterLocation", "equal", "NL")}]);
    let unnamed = token_3(
        &env.bed,
        AR,
        "RS256",
        evidence(policy(Value::Null, in_nl), json!([])),
    );
    let headers = [("delegationEvidence", unnamed.as_str()), ("X-Region", "NL")];
    let not_named = (403, "service_provider_not_named");
    refused(&env, "/api/located/C1", &token, &headers, not_named).await;
    let (status, body) = env.get("/api/unnamed/C1", &token, &headers).await;
    assert_eq!(status, 200, "{body}");
    env.stop().await;
    standin.served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_3_0_registry_is_asked_with_the_routes_values_and_its_conditions_decided() {
    let standin = stand_in().await;
    let env = env_3(&standin.served.url()).await;
    let token = env.token(CONSUMER).await;
    let (status, body) = env
        .get("/api/asked/C7", &token, &[("X-Region", "NL")])
        .await;
    assert_eq!(status, 200, "{body}");
    let not_met = (403, "condition_not_met");
    refused(
        &env,
        "/api/asked/C7",
        &token,
        &[("X-Region", "BE")],
        not_met,
    )
    .await;
    let asked = standin.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 2, "{asked:?}");
    let request = &asked[0]["delegationRequest"];
    // The 3.0 body: previousSteps inside the request, the route's value as the policy's context,
    // and no serviceProviders (which a 3.0 mask does not have).
    assert!(request["previousSteps"].is_array(), "{request}");
    assert!(asked[0].get("previous_steps").is_none(), "{request}");
    let target =
        |i: usize| asked[i]["delegationRequest"]["policySets"][0]["policies"][0]["target"].clone();
    assert_eq!(
        target(0)["context"],
        json!({"requesterLocation": "NL"}),
        "{request}"
    );
    assert!(target(0).get("environment").is_none(), "{request}");
    assert_eq!(target(1)["context"]["requesterLocation"], "BE");
    // What the gateway wrote holds to the scheme's own 3.0 schema.
    let requests: Vec<Value> = asked
        .iter()
        .map(|b| b["delegationRequest"].clone())
        .collect();
    let pointer = "/components/schemas/delegationRequestBody/properties/delegationRequest";
    assert_eq!(schema_errors(pointer, &requests), "", "{requests:?}");
    env.stop().await;
    standin.served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2_x_registry_is_asked_with_previous_steps_where_its_document_puts_them() {
    use axum::routing::post;
    let asked = Arc::new(Mutex::new(Vec::new()));
    let recorded = asked.clone();
    let no_policy = move |axum::Json(body): axum::Json<Value>| {
        recorded.lock().unwrap().push(body);
        async { (axum::http::StatusCode::NOT_FOUND, axum::Json(json!({}))) }
    };
    let token = || async {
        axum::Json(json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}))
    };
    let router = axum::Router::new()
        .route("/connect/token", post(token))
        .route("/delegation", post(no_policy));
    let standin = Served::start(router).await;
    let versions = ["2.0", "2.1", "2.2"];
    let name = |v: &str| format!("v{}", v.replace('.', ""));
    let rules: String = versions
        .iter()
        .map(|v| {
            route(
                &name(v),
                &format!("/api/{}/{{id}}", name(v)),
                &format!("registry = \"{}\"", name(v)),
            )
        })
        .collect();
    let url = standin.url();
    let env = Env::start(BIN, &rules, |_| {
        versions
            .iter()
            .map(|v| {
                // A party speaks one version: a registry of its own for each (the stand-in
                // answers no policy, signing nothing).
                let party = format!("EU.EORI.NL0000000{}", v.replace('.', ""));
                format!("[[registry]]\nname = \"{}\"\nparty_id = \"{party}\"\nurl = \"{url}\"\nscheme_version = \"{v}\"\nprevious_steps = \"consumer_assertion\"\n\n", name(v))
            })
            .collect()
    })
    .await;
    let token = env.token(CONSUMER).await;
    for v in versions {
        let (status, body) = env.get(&format!("/api/{}/C1", name(v)), &token, &[]).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (403, Some("no_policy")),
            "{v}: {body}"
        );
    }
    let asked = asked.lock().unwrap().clone();
    assert_eq!(asked.len(), versions.len(), "{asked:?}");
    for (v, body) in versions.iter().zip(&asked) {
        // The consumer's assertion inside the request, as 2.0 to 2.2 define it; nothing beside.
        let members: Vec<&String> = body.as_object().unwrap().keys().collect();
        assert_eq!(members, ["delegationRequest"], "{v}: {body}");
        let request = &body["delegationRequest"];
        assert_eq!(
            request["previous_steps"].as_array().map(Vec::len),
            Some(1),
            "{v}: {body}"
        );
        // And every member where the version's own document defines it.
        let spec = format!("v{v}/ishare_openapi_spec.yaml");
        let pointer = "/components/schemas/DelegationRequestBody/properties/delegationRequest";
        let errors = schema_errors_in(&spec, pointer, std::slice::from_ref(request), true);
        assert_eq!(errors, "", "{v}: {request}");
    }
    env.stop().await;
    standin.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn licence_expressions_grant_what_they_guarantee() {
    let standin = stand_in().await;
    let env = env_3(&standin.served.url()).await;
    let token = env.token(CONSUMER).await;
    let other = "https://licenses.ishare.eu/general-resharing-with-adhering-parties/1.0";
    let newer = "https://licenses.ishare.eu/general-internal-use/1.1";
    let cases = [
        (json!([{"allOf": [LICENCE, other]}]), 200, ""),
        (json!([{"anyOf": [LICENCE, other]}]), 403, "licence_missing"),
        (
            json!([{"anyOf": [{"allOf": [LICENCE, other]}, LICENCE]}]),
            200,
            "",
        ),
        (json!([newer]), 403, "licence_missing"),
        (json!([{"allOf": []}]), 403, "licence_expression_malformed"),
        (
            json!([{"allOf": [LICENCE], "anyOf": [LICENCE]}]),
            403,
            "licence_expression_malformed",
        ),
        (
            json!([{"allOf": [LICENCE], "note": "x"}]),
            403,
            "evidence_member_not_understood",
        ),
    ];
    for (licences, status, why) in cases {
        let permit = policy(json!([SP]), json!([{"effect": "Permit"}]));
        let presented = token_3(&env.bed, AR, "RS256", evidence(permit, licences.clone()));
        let resp = env
            .bed
            .http
            .get(format!("{}/api/licensed/C1", env.url))
            .bearer_auth(&token)
            .header("delegationEvidence", &presented)
            .send()
            .await
            .unwrap();
        let purpose = resp.headers().get("licensepurpose").cloned();
        let (got, body) = status_json(resp).await;
        assert_eq!(got, status, "{licences}: {body}");
        if status == 200 {
            // What was granted: the identifiers the expression guarantees.
            let purpose = purpose.unwrap();
            assert!(purpose.to_str().unwrap().contains(LICENCE), "{purpose:?}");
        } else {
            assert_eq!(body["reason"], why, "{licences}: {body}");
        }
    }
    env.stop().await;
    standin.served.stop().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn members_no_version_defines_deny_unless_listed_for_their_issuer() {
    let commented = json!([{"effect": "Permit", "comment": "agreed by phone"}]);
    let not_understood = (403, "evidence_member_not_understood");
    let env = env_19().await;
    let token = env.token(CONSUMER).await;
    for signer in [OWNER, AR] {
        let ev = evidence(policy(json!([SP]), commented.clone()), json!([]));
        let presented = token_19(&env.bed, signer, ev);
        let headers = [("delegation_evidence", presented.as_str())];
        let said = refused(&env, "/api/plain/C1", &token, &headers, not_understood).await;
        assert!(
            said.contains("policySets[0].policies[0].rules[0].comment"),
            "{said}"
        );
    }
    env.stop().await;
    // Listed for the registry: dropped from its evidence, and from nobody else's.
    let env = Env::start(BIN, &rules(), |_| {
        format!("{}\n[delegation.ignored_members]\n\"{AR}\" = [\"policySets[].policies[].rules[].comment\"]\n", unreachable_standin())
    })
    .await;
    let token = env.token(CONSUMER).await;
    let by = |signer| {
        let ev = evidence(policy(json!([SP]), commented.clone()), json!([]));
        token_19(&env.bed, signer, ev)
    };
    let (status, body) = env
        .get("/api/plain/C1", &token, &[("delegation_evidence", &by(AR))])
        .await;
    assert_eq!(status, 200, "{body}");
    let by_owner = by(OWNER);
    let headers = [("delegation_evidence", by_owner.as_str())];
    refused(&env, "/api/plain/C1", &token, &headers, not_understood).await;
    // RS384 from a peer of 1.9 (which signs with RS256 only) is refused.
    let permit = policy(json!([SP]), json!([{"effect": "Permit"}]));
    let rs384 = token_3(&env.bed, OWNER, "RS384", evidence(permit, json!([])));
    let headers = [("delegation_evidence", rs384.as_str())];
    let said = refused(
        &env,
        "/api/plain/C1",
        &token,
        &headers,
        (403, "malformed_evidence"),
    )
    .await;
    assert!(said.contains("RS384"), "{said}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_header_names_are_read_checked_used_once_and_never_forwarded() {
    let env = env_19().await;
    let token = env.token(CONSUMER).await;
    let permit = policy(json!([SP]), json!([{"effect": "Permit"}]));
    let good = token_19(&env.bed, AR, evidence(permit, json!([])));
    // A 3.0 consumer's header on a route that reads evidence only from the header.
    let (status, body) = env
        .get("/api/plain/C1", &token, &[("delegationEvidence", &good)])
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["headers"].get("delegationevidence").is_none(),
        "{body}"
    );
    // Both names of one header: which one was decided on would be a guess.
    let both = [
        ("delegationEvidence", good.as_str()),
        ("delegation_evidence", good.as_str()),
    ];
    let twice = (400, "both_header_spellings");
    refused(&env, "/api/plain/C1", &token, &both, twice).await;
    // A broker's consumer assertion under 3.0's name: checked, and used once.
    let broker = env.token(SP2).await;
    let assertion_for = |audience| {
        let consumer = env.bed.identity(CONSUMER);
        consumer
            .client_assertion(audience, Timestamp::now())
            .unwrap()
    };
    let assertion = assertion_for(SP2);
    let headers = [("serviceConsumerAssertion", assertion.as_str())];
    let (status, body) = env.get("/api/containers/B1", &broker, &headers).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(
        body["headers"]["x-original-consumer-party-id"], CONSUMER,
        "{body}"
    );
    assert!(
        body["headers"].get("serviceconsumerassertion").is_none(),
        "{body}"
    );
    let invalid = (403, "invalid_consumer_assertion");
    let said = refused(&env, "/api/containers/B1", &broker, &headers, invalid).await;
    assert!(said.contains("used"), "{said}");
    let elsewhere = assertion_for(AR);
    let headers = [("serviceConsumerAssertion", elsewhere.as_str())];
    refused(&env, "/api/containers/B1", &broker, &headers, invalid).await;
    let fresh = assertion_for(SP2);
    let both = [
        ("serviceConsumerAssertion", fresh.as_str()),
        ("service_consumer_assertion", fresh.as_str()),
    ];
    refused(&env, "/api/containers/B1", &broker, &both, twice).await;
    // No name or look-alike of a credential reaches the backend, on any kind of route.
    let forged = [
        "delegationEvidence",
        "serviceConsumerAssertion",
        "Delegation__Evidence",
        "Delegation.Evidence",
        "service-consumer-assertion",
        "DELEGATIONEVIDENCE-",
    ];
    for path in [
        "/public/a",
        "/token-only/a",
        "/api/registered/C1",
        "/api/shadow/C9",
    ] {
        let mut req = env
            .bed
            .http
            .get(format!("{}{path}", env.url))
            .bearer_auth(&token);
        for name in forged {
            // A broker's assertion is read on a delegation route that is enforced (and refused
            // when forged), and evidence on a route that reads the header.
            let read = name == "serviceConsumerAssertion" && path == "/api/registered/C1";
            if !read {
                req = req.header(name, "forged");
            }
        }
        let (status, body) = status_json(req.send().await.unwrap()).await;
        assert_eq!(status, 200, "{path}: {body}");
        let headers = body["headers"].as_object().unwrap();
        for name in forged {
            assert!(
                !headers.contains_key(&name.to_ascii_lowercase()),
                "{path} {name}: {body}"
            );
        }
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_logs_explains_and_tests_which_condition_decided() {
    let bed = Bed::start(BIN).await;
    let extra = format!(
        "[[registry]]\nname = \"standin\"\nparty_id = \"{AR}\"\nurl = \"{}\"\nscheme_version = \"3.0\"\n",
        bed.url(AR)
    );
    let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &extra, |t| t);
    let log = dir.join("decisions.log");
    let config = dir.join("gateway.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("\n[decision_log]\npath = \"{}\"\n", log.display()));
    std::fs::write(&config, text).unwrap();
    let checked = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let mut gateway = GatewayProcess::start(BIN, &config, ports.admin);
    gateway.wait_ready().await;
    let base = format!("http://127.0.0.1:{}", ports.plain);
    let http = reqwest::Client::new();
    let token = access_token(&http, &base, &bed.identity(CONSUMER)).await;
    let ev = evidence(
        policy(
            json!([SP]),
            json!([{"effect": "Permit", "conditions": {"allOf": [
                condition("requesterLocation", "notEqual", "Mars"),
                condition("requesterLocation", "equal", "NL")
            ]}}]),
        ),
        json!([]),
    );
    let presented = token_3(&bed, AR, "RS512", ev.clone());
    let resp = http
        .get(format!("{base}/api/located/C1"))
        .bearer_auth(&token)
        .header("delegationEvidence", &presented)
        .header("X-Region", "BE")
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (403, "condition_not_met"));
    let id = body["decision_id"].as_str().unwrap().to_string();
    let logged = eventually(std::time::Duration::from_secs(5), || async {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .contains(&id)
    })
    .await;
    assert!(logged);
    let line: Value = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .find(|l| l["decision_id"] == id.as_str())
        .unwrap();
    assert_eq!(line["reason"], "condition_not_met", "{line}");
    assert_eq!(
        line["decided_by"][0], "evidence[0].policySets[0].policies[0].rules[0].conditions.allOf[1]",
        "{line}"
    );
    assert!(
        line["description"].as_str().unwrap().contains("\"BE\""),
        "{line}"
    );
    let (status, _) = gateway.terminate().await;
    assert!(status.success());

    // explain, with the evidence token in a file: the same place decides.
    let file = dir.join("evidence.jwt");
    std::fs::write(&file, &presented).unwrap();
    let explained = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args([
            "explain",
            "--config",
            config.to_str().unwrap(),
            "--path",
            "/api/located/C1",
            "--as",
            CONSUMER,
            "--header",
            "X-Region: BE",
            "--header",
            "delegationEvidence: given",
            "--evidence",
            file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&explained.stdout).to_string();
    assert!(
        said.contains("condition_not_met") && said.contains("conditions.allOf[1]"),
        "{said}{}",
        String::from_utf8_lossy(&explained.stderr)
    );
    // test: a fixture per case, one of which holds.
    let tests = dir.join("policies/tests");
    std::fs::create_dir_all(&tests).unwrap();
    std::fs::write(tests.join("evidence.jwt"), &presented).unwrap();
    std::fs::write(
        tests.join("rules.toml"),
        format!(
            "[[case]]\nname = \"in NL\"\npath = \"/api/located/C1\"\ncaller = \"{CONSUMER}\"\nheaders = {{ X-Region = \"NL\" }}\nevidence = \"evidence.jwt\"\nstatus = 200\nreason = \"granted\"\n\n[[case]]\nname = \"in BE\"\npath = \"/api/located/C1\"\ncaller = \"{CONSUMER}\"\nheaders = {{ X-Region = \"BE\" }}\nevidence = \"evidence.jwt\"\nstatus = 403\nreason = \"condition_not_met\"\n"
        ),
    )
    .unwrap();
    let tested = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["test", "--config", config.to_str().unwrap()])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&tested.stdout).to_string();
    assert!(
        tested.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&tested.stderr)
    );
    assert!(said.contains("in NL") && said.contains("in BE"), "{said}");
    bed.stop().await;
}

/// The binary's `/capabilities` as each version it can speak writes it: 1.9's and 2.0's features
/// under the configured version; 2.1's and 2.2's `capabilities_info` of services, named by the
/// operationIds of their own documents and held, closed, to those documents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_written_as_each_version_defines_them() {
    let bed = Bed::start(BIN).await;
    for v in ["1.9", "2.0", "2.1", "2.2"] {
        let (dir, ports) = gateway_dir(&bed, BIN, &rules(), &unreachable_standin(), |t| {
            format!("scheme_version = \"{v}\"\n{t}")
        });
        let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
        gateway.wait_ready().await;
        let url = format!("http://127.0.0.1:{}/capabilities", ports.plain);
        let (status, body) = status_json(bed.http.get(&url).send().await.unwrap()).await;
        assert_eq!(status, 200, "{v}: {body}");
        let claims = claims(body["capabilities_token"].as_str().unwrap());
        let info = &claims["capabilities_info"];
        let spec = format!("v{v}/ishare_openapi_spec.yaml");
        match v {
            "2.1" | "2.2" => {
                let ids: Vec<&str> = info["publicServices"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s["identifier"].as_str().unwrap())
                    .collect();
                assert_eq!(ids, ["/capabilities", "/connect/token"], "{v}: {info}");
                for s in info["publicServices"].as_array().unwrap() {
                    assert_eq!(s["version"]["compliesWithFrameworkVersions"], json!([v]));
                }
                let pointer = "/components/schemas/CapabilitiesInfo";
                let errors = schema_errors_in(&spec, pointer, std::slice::from_ref(info), true);
                assert_eq!(errors, "", "{v}: {info}");
            }
            _ => {
                assert_eq!(info["supported_versions"][0]["version"], v, "{info}");
                assert!(info.get("publicServices").is_none(), "{v}: {info}");
            }
        }
        if v != "1.9" {
            let pointer = "/components/schemas/jwt_payload_capabilities_token";
            let errors = schema_errors_in(&spec, pointer, std::slice::from_ref(&claims), false);
            assert_eq!(errors, "", "{v}: {claims}");
        }
        gateway.terminate().await;
    }
    bed.stop().await;
}
