//! Registries as they really answer, through the binary: a registry that answers as FIWARE
//! Keyrock does (the testbed's `keyrock`: its own paths, evidence addressed to the id it keeps for
//! the gateway, 500 for a token it lost), found in the data owner's record and asked with the
//! settings of its `[[registry]]`; and each way a registry can fail, worded and counted as it
//! happened: for now (503, with a 429's `Retry-After`) or for good (502, with the registry's own
//! page in the log only); a body batch asked of a slow registry within the consumer's consent.

use crate::support;

use ishare_gateway::testbed::keyrock_ways;
use serde_json::{json, Value};
use support::process::GatewayProcess;
use support::*;

const BIN: &str = "registry_answers";
/// A consumer without any policy at the registry.
const NOBODY: &str = "EU.EORI.NL000000101";
/// A consumer that asks this test's first gateway for no token.
const STRANGER: &str = "EU.EORI.NL000000102";

/// Routes that ask the registry the data owner designated (the default), and one per fake.
fn rules(fakes: &[&str]) -> String {
    let route = |name: &str, path: &str, registry: &str| {
        format!("[[route]]\nname = \"{name}\"\nmethods = [\"GET\"]\npath = \"{path}\"\nupstream = \"echo\"\n[route.delegation]\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\npolicy_issuer = \"{OWNER}\"\nlicences = [\"ISHARE.0001\"]\n{registry}\n\n")
    };
    let mut rules = route("containers", "/api/containers/{id}", "");
    rules.push_str(&route(
        "header",
        "/api/header/{id}",
        "evidence = [\"header\"]",
    ));
    for fake in fakes {
        rules.push_str(&route(
            fake,
            &format!("/api/{fake}/{{id}}"),
            &format!("registry = \"{fake}\""),
        ));
    }
    rules
}

/// The testbed with its registry answering as Keyrock does.
async fn keyrock_bed() -> Bed {
    let mut config = testbed_config(BIN);
    for party in &mut config.parties {
        party.keyrock |= party.id == AR;
    }
    Bed::start_of(config).await
}

/// The `[[registry]]` the book gives for Keyrock, with `addresses_us_as` where given.
fn keyrock_settings(bed: &Bed, addresses_us_as: Option<&str>) -> String {
    let mut settings = format!(
        "[[registry]]\nname = \"keyrock\"\nparty_id = \"{AR}\"\nurl = \"{}\"\ntoken_path = \"/oauth2/token\"\ndelegation_path = \"/ar/delegation\"\nmask_licences = false\nprevious_steps = \"consumer_assertion\"\n",
        bed.url(AR)
    );
    if let Some(id) = addresses_us_as {
        settings.push_str(&format!("addresses_us_as = \"{id}\"\n"));
    }
    settings
}

/// The binary with `rules` and `extra` in front of `bed`: the process and its plain listener.
async fn binary(bed: &Bed, rules: &str, extra: &str) -> (GatewayProcess, String) {
    binary_in_front(bed, BIN, rules, extra).await
}

async fn get(
    bed: &Bed,
    plain: &str,
    path: &str,
    token: &str,
) -> (u16, reqwest::header::HeaderMap, Value) {
    get_bearing(&bed.http, &format!("{plain}{path}"), token).await
}

/// The token requests the registry received.
async fn token_requests(bed: &Bed) -> u64 {
    bed.stats(AR).await["token_requests"].as_u64().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_owners_keyrock_is_asked_at_its_own_paths_and_recovers_a_lost_token() {
    let bed = keyrock_bed().await;
    let ours = keyrock_ways::user_id(SP);
    let (gateway, plain) = binary(&bed, &rules(&[]), &keyrock_settings(&bed, Some(&ours))).await;
    let token = bed.token_at(&plain, CONSUMER).await;
    let (status, headers, body) = get(&bed, &plain, "/api/containers/C1", &token).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(headers["licensepurpose"], "ISHARE.0001");
    let (status, _, body) = get(&bed, &plain, "/api/containers/SECRET-1", &token).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    let nobody = bed.token_at(&plain, NOBODY).await;
    let (status, _, body) = get(&bed, &plain, "/api/containers/C1", &nobody).await;
    assert_refused(status, &body, (403, "no_policy"));
    // The registry's database loses its tokens: it answers 500 to the one the gateway holds,
    // which the gateway drops, and asks once more with a fresh one.
    let before = token_requests(&bed).await;
    let forgot = bed
        .http
        .post(format!("{}/testing/forget-tokens", bed.url(AR)))
        .send()
        .await
        .unwrap();
    assert_eq!(forgot.status(), 204);
    let (status, _, body) = get(&bed, &plain, "/api/containers/C2", &token).await;
    assert_eq!(status, 200, "the next call recovers: {body}");
    assert_eq!(token_requests(&bed).await, before + 1);
    let m = gateway.metrics().await;
    let calls = |outcome: &str| {
        metric(
            &m,
            "ishare_gateway_registry_calls_total",
            &[("registry", "keyrock"), ("outcome", outcome)],
        )
    };
    assert_eq!((calls("evidence"), calls("no_policy")), (3.0, 1.0), "{m}");
    // A request refused before any call (no consent of the consumer held here: it asked
    // another instance for its token) is no registry call.
    let (other, other_plain) =
        binary(&bed, &rules(&[]), &keyrock_settings(&bed, Some(&ours))).await;
    let elsewhere = bed.token_at(&other_plain, STRANGER).await;
    let (status, _, body) = get(&bed, &plain, "/api/containers/C3", &elsewhere).await;
    assert_refused(status, &body, (401, "previous_steps_unavailable"));
    let after = gateway.metrics().await;
    assert_eq!(
        metric(
            &after,
            "ishare_gateway_registry_calls_total",
            &[("registry", "keyrock")]
        ),
        4.0,
        "{after}"
    );
    // Evidence addressed to the id the registry keeps for the gateway is taken from the
    // registry's answers to the gateway's own calls only, never from a client.
    let now = ishare_gateway::scheme::Timestamp::now().secs();
    let evidence = json!({
        "notBefore": now - 10, "notOnOrAfter": now + 600,
        "policyIssuer": OWNER, "target": {"accessSubject": CONSUMER},
        "policySets": [{"policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Permit"}]
        }]}]
    });
    let signed = bed
        .identity(OWNER)
        .sign_raw(&json!({
            "iss": OWNER, "sub": CONSUMER, "aud": ours, "jti": "addressed-to-keyrocks-id",
            "iat": now, "exp": now + 30, "delegationEvidence": evidence
        }))
        .unwrap();
    let presented = bed
        .http
        .get(format!("{plain}/api/header/C1"))
        .bearer_auth(&token)
        .header("delegation_evidence", signed)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(presented).await;
    assert_refused(status, &body, (403, "evidence_not_for_caller"));
    other.terminate().await;
    gateway.terminate().await;
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_settings_keyrock_is_refused_for_good_and_said_why() {
    let bed = keyrock_bed().await;
    // No [[registry]] for it: asked at the scheme's paths, it answers its page for an unknown
    // path, which is no "no policy".
    let (gateway, plain) = binary(&bed, &rules(&[]), "").await;
    let token = bed.token_at(&plain, CONSUMER).await;
    let (status, _, body) = get(&bed, &plain, "/api/containers/C1", &token).await;
    assert_refused(status, &body, (502, "registry_endpoint_missing"));
    let said = body["error_description"].as_str().unwrap();
    assert!(said.contains("token_path") && !said.contains("<"), "{said}");
    gateway.terminate().await;
    // Its paths but not the id it addresses the gateway by: refused for good, naming both.
    let (gateway, plain) = binary(&bed, &rules(&[]), &keyrock_settings(&bed, None)).await;
    let token = bed.token_at(&plain, CONSUMER).await;
    let (status, _, body) = get(&bed, &plain, "/api/containers/C1", &token).await;
    assert_refused(status, &body, (502, "registry_evidence_not_for_us"));
    let said = body["error_description"].as_str().unwrap();
    assert!(
        said.contains(&keyrock_ways::user_id(SP)) && said.contains(SP),
        "{said}"
    );
    let (_, log) = gateway.terminate().await;
    assert!(
        log.contains("addresses_us_as"),
        "the log says which setting: {log}"
    );
    bed.stop().await;
}

/// A registry that fails each way: (name, its delegation answer).
struct Fake {
    name: &'static str,
    answer: fn() -> axum::response::Response,
}

fn fakes() -> Vec<Fake> {
    use axum::http::{header, StatusCode};
    use axum::response::IntoResponse;
    vec![
        Fake {
            name: "busy",
            answer: || {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "7")],
                    "slow down",
                )
                    .into_response()
            },
        },
        Fake {
            name: "hasty",
            answer: || {
                (
                    StatusCode::TOO_MANY_REQUESTS,
                    [(header::RETRY_AFTER, "86400")],
                    "",
                )
                    .into_response()
            },
        },
        Fake {
            name: "moved",
            answer: || {
                (
                    StatusCode::TEMPORARY_REDIRECT,
                    [(header::LOCATION, "https://elsewhere.example/delegation")],
                    "",
                )
                    .into_response()
            },
        },
        Fake {
            name: "schema",
            answer: || {
                (StatusCode::BAD_REQUEST, axum::Json(json!([{"instancePath": "/delegationRequest/policySets/0", "message": "must NOT have additional properties"}]))).into_response()
            },
        },
        Fake {
            name: "worded",
            answer: || {
                (StatusCode::BAD_REQUEST, axum::Json(json!({"error": "invalid_request", "error_description": "Invalid client credentials\u{7}<script>"}))).into_response()
            },
        },
        Fake {
            name: "locked",
            answer: || (StatusCode::UNAUTHORIZED, "token unknown").into_response(),
        },
        Fake {
            name: "page",
            answer: || {
                (
                    StatusCode::NOT_FOUND,
                    [(header::CONTENT_TYPE, "text/html")],
                    "<html><body>Cannot POST /delegation</body></html>",
                )
                    .into_response()
            },
        },
        Fake {
            name: "empty",
            answer: || {
                (
                    StatusCode::NOT_FOUND,
                    axum::Json(json!({"error": "not_found"})),
                )
                    .into_response()
            },
        },
        Fake {
            name: "broken",
            answer: || {
                (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "<html>stack trace</html>",
                )
                    .into_response()
            },
        },
    ]
}

/// Serve each fake over TLS with the testbed's certificate, and one that never answers: their
/// `[[registry]]` entries, and what stops them.
async fn serve_fakes(
    bed: &Bed,
) -> (
    String,
    tokio::sync::watch::Sender<bool>,
    Vec<tokio::task::JoinHandle<()>>,
) {
    use axum::routing::post;
    let tls = std::sync::Arc::new(
        ishare_gateway::tls::server_config(
            bed.keys.tls.chain_pem.as_bytes(),
            bed.keys.tls.key_pem.as_bytes(),
        )
        .unwrap(),
    );
    let (stop, watch) = tokio::sync::watch::channel(false);
    let mut tasks = Vec::new();
    let mut settings = String::new();
    let mut add = |name: &str, url: String| {
        settings.push_str(&format!(
            "[[registry]]\nname = \"{name}\"\nparty_id = \"{AR}\"\nurl = \"{url}\"\n\n"
        ));
    };
    for fake in fakes() {
        let answer = fake.answer;
        let router = axum::Router::new()
            .route(
                "/connect/token",
                post(|| async {
                    axum::Json(
                        json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}),
                    )
                }),
            )
            .route("/delegation", post(move || async move { answer() }));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        add(
            fake.name,
            format!("https://{}", listener.local_addr().unwrap()),
        );
        tasks.push(tokio::spawn(ishare_gateway::testbed::server::serve(
            listener,
            Some(tls.clone()),
            router,
            watch.clone(),
        )));
    }
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    add(
        "silent",
        format!("https://{}", silent.local_addr().unwrap()),
    );
    tasks.push(tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    }));
    settings.push_str("[delegation]\nregistry_timeout = \"700ms\"\n");
    (settings, stop, tasks)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_registry_fault_has_its_own_status_reason_words_and_count() {
    let bed = Bed::start(BIN).await;
    let (settings, stop, tasks) = serve_fakes(&bed).await;
    let names: Vec<&str> = fakes().iter().map(|f| f.name).chain(["silent"]).collect();
    let (gateway, plain) = binary(&bed, &rules(&names), &settings).await;
    let token = bed.token_at(&plain, CONSUMER).await;
    let cases: [(&str, u16, &str, &str); 10] = [
        ("busy", 503, "registry_busy", "429"),
        ("hasty", 503, "registry_busy", "429"),
        ("moved", 502, "registry_redirected", "redirects"),
        (
            "schema",
            502,
            "registry_refused_request",
            "400 (Bad Request)",
        ),
        (
            "worded",
            502,
            "registry_refused_request",
            "Invalid client credentials",
        ),
        ("locked", 502, "registry_refused_credentials", "401"),
        ("page", 502, "registry_endpoint_missing", "delegation_path"),
        ("empty", 403, "no_policy", "holds no policy"),
        ("broken", 503, "registry_error", "server error"),
        ("silent", 503, "registry_timeout", "did not answer in time"),
    ];
    for (name, status, reason, words) in cases {
        let (got, headers, body) = get(&bed, &plain, &format!("/api/{name}/C1"), &token).await;
        assert_refused(got, &body, (status, reason));
        let said = body["error_description"].as_str().unwrap();
        assert!(said.contains(words), "{name}: {said}");
        // Nothing of the registry's page, error list or address reaches the consumer.
        for secret in [
            "<",
            "instancePath",
            "127.0.0.1",
            "elsewhere.example",
            "\u{7}",
        ] {
            assert!(!said.contains(secret), "{name}: {said}");
        }
        let retry_after = headers.get("retry-after").map(|v| v.to_str().unwrap());
        let expected = match name {
            "busy" => Some("7"),
            "hasty" => Some("60"),
            _ => None,
        };
        assert_eq!(retry_after, expected, "{name}");
    }
    // Each call counted by how it ended, a timeout too.
    let m = gateway.metrics().await;
    for (name, _, reason, _) in cases {
        let outcome = if reason == "no_policy" {
            "no_policy"
        } else {
            reason
        };
        assert_eq!(
            metric(
                &m,
                "ishare_gateway_registry_calls_total",
                &[("registry", name), ("outcome", outcome)]
            ),
            1.0,
            "{name}: {m}"
        );
    }
    // The whole text is the log's.
    let (_, log) = gateway.terminate().await;
    assert!(
        log.contains("instancePath") && log.contains("elsewhere.example"),
        "{log}"
    );
    let _ = stop.send(true);
    for t in tasks {
        t.abort();
    }
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_batch_is_asked_of_a_slow_registry_within_the_consumers_consent() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let bed = Bed::start(BIN).await;
    // A registry that takes 1.1 s for each answer (30 one after another outlive the consumer's
    // 30 s assertion), mirroring the mask with a Permit; how many it answers at once.
    let (asking, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let registry = bed.identity(AR);
    let (now_asking, at_most) = (asking.clone(), most.clone());
    let answer = move |axum::Json(body): axum::Json<Value>| {
        let (asking, most, registry) = (now_asking.clone(), at_most.clone(), registry.clone());
        async move {
            let now = asking.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
            asking.fetch_sub(1, Ordering::SeqCst);
            let mask = &body["delegationRequest"];
            let at = ishare_gateway::scheme::Timestamp::now();
            let evidence = json!({
                "notBefore": at.secs() - 10, "notOnOrAfter": at.secs() + 600,
                "policyIssuer": mask["policyIssuer"], "target": mask["target"],
                "policySets": mask["policySets"],
            });
            let subject = mask["target"]["accessSubject"].as_str().unwrap_or_default();
            let claims = json!({ "delegationEvidence": evidence });
            let token = registry
                .sign_token(subject, Some(SP), &claims, at, 30)
                .unwrap();
            axum::Json(json!({ "delegation_token": token }))
        }
    };
    let token = || async {
        axum::Json(json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}))
    };
    let router = axum::Router::new()
        .route("/connect/token", axum::routing::post(token))
        .route("/delegation", axum::routing::post(answer));
    let standin = support::served::Served::start(router).await;
    let rules = format!("[[route]]\nname = \"batch\"\nmethods = [\"POST\"]\npath = \"/batch\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"{OWNER}\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{body.json./*/id}}\"]\naction = \"iSHARE.READ\"\nregistry = \"slow\"\n");
    let settings = format!(
        "[[registry]]\nname = \"slow\"\nparty_id = \"{AR}\"\nurl = \"{}\"\nprevious_steps = \"consumer_assertion\"\n",
        standin.url()
    );
    let (gateway, plain) = binary(&bed, &rules, &settings).await;
    let token = bed.token_at(&plain, CONSUMER).await;
    let batch: Vec<Value> = (0..30).map(|i| json!({"id": format!("B{i}")})).collect();
    let resp = bed
        .http
        .post(format!("{plain}/batch"))
        .bearer_auth(&token)
        .json(&batch)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(
        status, 200,
        "the batch is decided within the consent's life: {body}"
    );
    assert!(
        most.load(Ordering::SeqCst) > 1,
        "the elements are asked together"
    );
    let m = gateway.metrics().await;
    let calls = metric(
        &m,
        "ishare_gateway_registry_calls_total",
        &[("registry", "slow"), ("outcome", "evidence")],
    );
    assert_eq!(calls, 30.0, "{m}");
    gateway.terminate().await;
    standin.stop().await.unwrap();
    bed.stop().await;
}
