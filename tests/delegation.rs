//! Delegation enforcement against the testbed registry: Permit, each Deny reason, 404, each
//! registry fault, the decision cache and single-flight counted at the registry, evidence in the
//! header, and each way of forging or replaying it for someone else; licences, the broker pattern
//! and evidence chains.

use crate::support;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use ishare_gateway::scheme::mask::AccessRequest;
use ishare_gateway::scheme::Timestamp;
use serde_json::{json, Value};
use support::process::GatewayProcess;
use support::*;

const BIN: &str = "delegation";
const BROKER: &str = "EU.EORI.NL000000100";
const NOBODY: &str = "EU.EORI.NL000000101";
const SHALLOW: &str = "EU.EORI.NL000000102";

fn rules() -> String {
    let route = |name: &str, methods: &str, path: &str, delegation: &str| {
        format!("[[route]]\nname = \"{name}\"\nmethods = [{methods}]\npath = \"{path}\"\nupstream = \"echo\"\n[route.delegation]\nresource_type = \"CONTAINER\"\nidentifiers = [\"{{path.id}}\"]\n{delegation}\n\n")
    };
    let owner = format!("policy_issuer = \"{OWNER}\"");
    [
        route(
            "read",
            "\"GET\"",
            "/api/containers/{id}",
            &format!("{owner}\nlicences = [\"ISHARE.0001\"]"),
        ),
        route(
            "update",
            "\"PUT\"",
            "/api/containers/{id}",
            &format!("{owner}\nregistry = \"ar\""),
        ),
        route(
            "special",
            "\"GET\"",
            "/api/special/{id}",
            &format!("{owner}\nlicences = [\"ISHARE.0002\"]"),
        ),
        route(
            "header-only",
            "\"GET\"",
            "/api/header-only/{id}",
            &format!("{owner}\nevidence = [\"header\"]"),
        ),
        route(
            "by-owner",
            "\"GET\"",
            "/api/owned/{id}",
            "policy_issuer = \"{header.X-Data-Owner}\"\ncaller_names_owner = true",
        ),
        route(
            "chain",
            "\"GET\"",
            "/api/chain/{id}",
            &format!("{owner}\ndelegation_path = [\"{BROKER}\"]"),
        ),
        route(
            "via",
            "\"GET\"",
            "/api/via/{id}",
            &format!("{owner}\ndelegation_path = [\"{{header.X-Via}}\"]"),
        ),
        route(
            "shallow-chain",
            "\"GET\"",
            "/api/shallow-chain/{id}",
            &format!("{owner}\ndelegation_path = [\"{SHALLOW}\"]"),
        ),
        route(
            "down",
            "\"GET\"",
            "/api/down/{id}",
            &format!("{owner}\nregistry = \"down\""),
        ),
        route(
            "slow",
            "\"GET\"",
            "/api/slow/{id}",
            &format!("{owner}\nregistry = \"slow\""),
        ),
        route(
            "garbage",
            "\"GET\"",
            "/api/garbage/{id}",
            &format!("{owner}\nregistry = \"garbage\""),
        ),
        route(
            "failing",
            "\"GET\"",
            "/api/failing/{id}",
            &format!("{owner}\nregistry = \"failing\""),
        ),
    ]
    .concat()
}

/// Fake registries for the fault cases, over TLS with the testbed's certificate.
struct Fakes {
    dead: String,
    slow: String,
    garbage: String,
    failing: String,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

async fn fakes() -> Fakes {
    use axum::routing::post;
    let keys = prepare_keys(&testbed_config(BIN));
    let tls = std::sync::Arc::new(
        ishare_gateway::tls::server_config(
            keys.tls.chain_pem.as_bytes(),
            keys.tls.key_pem.as_bytes(),
        )
        .unwrap(),
    );
    let (stop, watch) = tokio::sync::watch::channel(false);
    let token = || async {
        axum::Json(json!({"access_token": "t", "token_type": "Bearer", "expires_in": 3600}))
    };
    let garbage = axum::Router::new()
        .route("/connect/token", post(token))
        .route(
            "/delegation",
            post(|| async { axum::Json(json!({"delegation_token": "not.a.jwt"})) }),
        );
    let failing = axum::Router::new()
        .route("/connect/token", post(token))
        .route(
            "/delegation",
            post(|| async { (axum::http::StatusCode::INTERNAL_SERVER_ERROR, "boom") }),
        );
    let mut tasks = Vec::new();
    let mut serve = |router: axum::Router, listener: tokio::net::TcpListener| {
        tasks.push(tokio::spawn(ishare_gateway::testbed::server::serve(
            listener,
            Some(tls.clone()),
            router,
            watch.clone(),
        )));
    };
    let bind = || async { tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap() };
    let (g, f) = (bind().await, bind().await);
    let urls = (g.local_addr().unwrap(), f.local_addr().unwrap());
    serve(garbage, g);
    serve(failing, f);
    let silent = bind().await;
    let slow = silent.local_addr().unwrap();
    tasks.push(tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = silent.accept().await {
            held.push(s);
        }
    }));
    Fakes {
        dead: format!("https://127.0.0.1:{}", free_port()),
        slow: format!("https://{slow}"),
        garbage: format!("https://{}", urls.0),
        failing: format!("https://{}", urls.1),
        stop,
        tasks,
    }
}

impl Fakes {
    fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            t.abort();
        }
    }
}

async fn env() -> (Env, Fakes) {
    let fakes = fakes().await;
    let (dead, slow, garbage, failing) = (
        fakes.dead.clone(),
        fakes.slow.clone(),
        fakes.garbage.clone(),
        fakes.failing.clone(),
    );
    let env = Env::start(BIN, &rules(), move |bed| {
        format!(
            r#"
[[registry]]
name = "ar"
party_id = "{AR}"
url = "{ar}"

[[registry]]
name = "down"
party_id = "{AR}"
url = "{dead}"

[[registry]]
name = "slow"
party_id = "{AR}"
url = "{slow}"

[[registry]]
name = "garbage"
party_id = "{AR}"
url = "{garbage}"

[[registry]]
name = "failing"
party_id = "{AR}"
url = "{failing}"

[delegation]
registry_timeout = "700ms"
"#,
            ar = bed.url(AR),
        )
    })
    .await;
    (env, fakes)
}

async fn get(
    env: &Env,
    path: &str,
    token: &str,
    headers: &[(&str, &str)],
) -> (u16, reqwest::header::HeaderMap, Value) {
    let mut req = env
        .bed
        .http
        .get(format!("{}{path}", env.url))
        .bearer_auth(token);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = req.send().await.unwrap();
    let h = resp.headers().clone();
    let (status, body) = status_json(resp).await;
    (status, h, body)
}

/// The status and reason of a request to `path` with `evidence` in the delegation_evidence header.
async fn refusal(env: &Env, path: &str, token: &str, evidence: &str) -> (u16, String) {
    let (status, _, body) = get(env, path, token, &[("delegation_evidence", evidence)]).await;
    (
        status,
        body["reason"].as_str().unwrap_or_default().to_string(),
    )
}

/// Evidence fetched from the registry by `requester` (as the consumer does).
async fn evidence(env: &Env, requester: &str, request: AccessRequest) -> String {
    env.bed.registry_evidence(requester, &request).await
}

async fn registry_stats(env: &Env) -> u64 {
    env.bed.stats(AR).await["delegation_requests"]
        .as_u64()
        .unwrap()
}

/// Evidence signed with a testbed party's real key: for the cases a registry would never sign.
fn signed_evidence(
    bed: &Bed,
    signer: &str,
    iss: &str,
    aud: &str,
    iat: i64,
    evidence: Value,
) -> String {
    bed.identity(signer)
        .sign_raw(&json!({
            "iss": iss, "sub": evidence["target"]["accessSubject"], "aud": aud, "jti": "j",
            "iat": iat, "exp": iat + 30, "delegationEvidence": evidence
        }))
        .unwrap()
}

/// `evidence` signed by the data owner for the consumer, issued at `iat`.
fn owners_evidence(bed: &Bed, iat: i64, evidence: Value) -> String {
    signed_evidence(bed, OWNER, OWNER, CONSUMER, iat, evidence)
}

fn evidence_body(subject: &str, not_before: i64, not_on_or_after: i64) -> Value {
    json!({
        "notBefore": not_before, "notOnOrAfter": not_on_or_after,
        "policyIssuer": OWNER, "target": {"accessSubject": subject},
        "policySets": [{"policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Permit"}]
        }]}]
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delegation_path_party_taken_from_the_request_is_checked_as_every_rule_value() {
    let (env, _fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let long = "P".repeat(300);
    for (via, reason) in [
        (long.as_str(), "request_value_too_long"),
        (
            "EU.EORI.NL000000003,EU.EORI.NL000000001",
            "ambiguous_request",
        ),
        ("EU.EORI.NL000000003#x", "ambiguous_request"),
        ("", "missing_request_value"),
    ] {
        let (status, _, body) = get(&env, "/api/via/C1", &token, &[("X-Via", via)]).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some(reason)),
            "{via:?}: {body}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_evidence_permits_and_sets_licence_headers() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let (status, headers, echo) = get(
        &env,
        "/api/containers/C1",
        &token,
        &[("LicensePurpose", "research")],
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(headers["licensepurpose"], "ISHARE.0001");
    assert_eq!(headers["licensesublicense"], "1");
    assert_eq!(headers["licenseenddate"], "2100-01-01T00:00:00Z");
    assert!(
        echo["headers"].get("licensepurpose").is_none(),
        "the client's LicensePurpose does not reach the backend of a route that answers with its own: {echo}"
    );
    assert_eq!(echo["headers"]["x-consumer-party-id"], CONSUMER);
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_delegation_decisions_total",
            &[("route", "read"), ("decision", "permit")]
        ),
        1.0
    );
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_denials_name_their_reason() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    // The registry answers Deny: the policy grants READ only, and SECRET-1 has a Deny rule.
    let resp = env
        .bed
        .http
        .put(format!("{}/api/containers/C1", env.url))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_refused(status, &body, (403, "denied_by_rule"));
    let (status, _, body) = get(&env, "/api/containers/SECRET-1", &token, &[]).await;
    assert_eq!(
        (status, body["error"].as_str(), body["reason"].as_str()),
        (403, Some("access_denied"), Some("denied_by_rule"))
    );
    // No policy at all for this consumer: the registry's 404 is a Deny.
    let nobody = env.token(NOBODY).await;
    let (status, _, body) = get(&env, "/api/containers/C1", &nobody, &[]).await;
    assert_eq!((status, body["reason"].as_str()), (403, Some("no_policy")));
    // Evidence is never in the header of a header-only route: no evidence.
    let (status, _, body) = get(&env, "/api/header-only/C1", &token, &[]).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("no_evidence"))
    );
    // A rule value the request lacks.
    let (status, _, body) = get(&env, "/api/owned/C1", &token, &[]).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("missing_request_value"))
    );
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_delegation_decisions_total",
            &[("decision", "deny"), ("reason", "no_policy")]
        ) >= 1.0
    );
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_faults_fail_closed_with_503() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    for (path, reason) in [
        ("/api/down/C1", "registry_unreachable"),
        ("/api/slow/C1", "registry_timeout"),
        ("/api/garbage/C1", "registry_garbled"),
        ("/api/failing/C1", "registry_error"),
    ] {
        let started = std::time::Instant::now();
        let (status, _, body) = get(&env, path, &token, &[]).await;
        assert_eq!(
            (status, body["error"].as_str(), body["reason"].as_str()),
            (503, Some("temporarily_unavailable"), Some(reason)),
            "{path}: {body}"
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(3),
            "{path} took {:?}",
            started.elapsed()
        );
    }
    // Errors are not cached: the same fault is met again.
    let (status, _, _) = get(&env, "/api/down/C1", &token, &[]).await;
    assert_eq!(status, 503);
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_requests_total",
            &[("route", "down"), ("status", "503")]
        ),
        2.0
    );
    assert!(
        metric(
            &m,
            "ishare_gateway_registry_calls_total",
            &[("registry", "slow")]
        ) >= 0.0
    );
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_are_cached_and_concurrent_misses_make_one_registry_call() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let before = registry_stats(&env).await;
    // A thousand identical requests at once, multiplexed on one HTTP/2 connection.
    let h2 = h2_client(&env.bed.keys.ca_file);
    let calls = (0..1000).map(|_| {
        h2.get(format!("{}/api/containers/SF1", env.url))
            .bearer_auth(&token)
            .send()
    });
    let statuses: Vec<u16> = futures::future::join_all(calls)
        .await
        .into_iter()
        .map(|r| r.map_or(0, |r| r.status().as_u16()))
        .collect();
    assert!(statuses.iter().all(|s| *s == 200), "{statuses:?}");
    assert_eq!(
        registry_stats(&env).await - before,
        1,
        "a thousand concurrent misses, one registry call"
    );
    for _ in 0..5 {
        assert_eq!(get(&env, "/api/containers/SF1", &token, &[]).await.0, 200);
    }
    assert_eq!(
        registry_stats(&env).await - before,
        1,
        "hits from the cache"
    );
    assert_eq!(get(&env, "/api/containers/SF2", &token, &[]).await.0, 200);
    assert_eq!(
        registry_stats(&env).await - before,
        2,
        "another identifier is another decision"
    );
    // Denials are cached too (briefly).
    assert_eq!(
        get(&env, "/api/containers/SECRET-1", &token, &[]).await.0,
        403
    );
    assert_eq!(
        get(&env, "/api/containers/SECRET-1", &token, &[]).await.0,
        403
    );
    assert_eq!(registry_stats(&env).await - before, 3);
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_cache_lookups_total",
            &[("cache", "decision"), ("result", "hit")]
        ) >= 1000.0
    );
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_registry_calls_total",
            &[("registry", "ar"), ("outcome", "evidence")]
        ),
        3.0
    );
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_evidence_is_accepted_without_asking_the_registry() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let ev = evidence(&env, CONSUMER, read_request(CONSUMER, "H1", &[SP])).await;
    let before = registry_stats(&env).await;
    let (status, headers, echo) = get(
        &env,
        "/api/header-only/H1",
        &token,
        &[("delegation_evidence", &ev)],
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    assert!(
        echo["headers"].get("delegation_evidence").is_none(),
        "evidence is not passed to the backend"
    );
    assert_eq!(headers["licenseenddate"], "2100-01-01T00:00:00Z");
    assert_eq!(registry_stats(&env).await, before);
    // The evidence grants READ on H1 only: not another identifier, not another action.
    let (status, _, body) = get(
        &env,
        "/api/header-only/H2",
        &token,
        &[("delegation_evidence", &ev)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("identifier_not_granted"))
    );
    let resp = env
        .bed
        .http
        .put(format!("{}/api/containers/H1", env.url))
        .bearer_auth(&token)
        .header("delegation_evidence", &ev)
        .send()
        .await
        .unwrap();
    let (status, body) = status_json(resp).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("action_not_granted"))
    );
    // A route that needs a licence the evidence lacks.
    let (status, _, body) = get(
        &env,
        "/api/special/H1",
        &token,
        &[("delegation_evidence", &ev)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("licence_missing"))
    );
    env.stop().await;
    fakes.stop();
}

/// The lookups in `cache` counted with `result`.
async fn lookups(env: &Env, cache: &str, result: &str) -> f64 {
    metric(
        &env.metrics().await,
        "ishare_gateway_cache_lookups_total",
        &[("cache", cache), ("result", result)],
    )
}

/// The evidence-token lookups counted with `result`.
async fn evidence_lookups(env: &Env, result: &str) -> f64 {
    lookups(env, "evidence_token", result).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_evidence_is_verified_once_and_judged_on_every_request() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let ev = evidence(&env, CONSUMER, read_request(CONSUMER, "V1", &[SP])).await;
    let evidence_header = [("delegation_evidence", ev.as_str())];
    let started = std::time::Instant::now();
    for _ in 0..5 {
        let (status, _, body) = get(&env, "/api/header-only/V1", &token, &evidence_header).await;
        assert_eq!(status, 200, "{body}");
    }
    let seconds = started.elapsed().as_secs_f64().ceil();
    assert_eq!(evidence_lookups(&env, "miss").await, 1.0);
    // The same head given its decision again, the token judged again each time: whole (its
    // verified token looked up) at the first hit of each second, by its times at the others.
    let hits = evidence_lookups(&env, "hit").await;
    assert!(hits <= seconds.min(4.0), "{hits} in {seconds} s");
    assert_eq!(lookups(&env, "request", "hit").await, 4.0);
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let (status, _, body) = get(&env, "/api/header-only/V1", &token, &evidence_header).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(evidence_lookups(&env, "hit").await, hits + 1.0);
    assert_eq!(lookups(&env, "request", "hit").await, 5.0);

    // A verified token still serves only what it grants, and only its subject.
    assert_eq!(
        refusal(&env, "/api/header-only/V2", &token, &ev).await,
        (403, "identifier_not_granted".to_string())
    );
    let sp2 = env.token(SP2).await;
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &sp2, &ev).await,
        (403, "evidence_not_for_caller".to_string())
    );
    // Other bytes are another token, verified on their own.
    let (signed, signature) = ev.rsplit_once('.').unwrap();
    let flipped = if signature.starts_with('A') { "B" } else { "A" };
    let forged = format!("{signed}.{flipped}{}", &signature[1..]);
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &token, &forged).await,
        (403, "evidence_signature_invalid".to_string())
    );
    // The verified token's signature under other claims: found by its signature, but not the
    // token that was verified.
    let (head, payload) = signed.split_once('.').unwrap();
    let mut claims: Value =
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap();
    claims["jti"] = json!("another-token");
    let altered = format!(
        "{head}.{}.{signature}",
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&claims).unwrap())
    );
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &token, &altered).await,
        (403, "evidence_signature_invalid".to_string())
    );
    let misses = evidence_lookups(&env, "miss").await;

    // A new trusted list: verified again under it.
    env.state().current.load().trust.refresh().await.unwrap();
    assert_eq!(
        get(&env, "/api/header-only/V1", &token, &evidence_header)
            .await
            .0,
        200
    );
    assert_eq!(evidence_lookups(&env, "miss").await, misses + 1.0);

    // Once the token expires (30 s after its iat, with 5 s of leeway) it is refused, however
    // recently it was verified.
    let now = Timestamp::now().secs();
    let short = owners_evidence(
        &env.bed,
        now - 33,
        evidence_body(CONSUMER, now - 10, now + 600),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &token, &short).await,
        (200, String::new())
    );
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &token, &short).await,
        (403, "evidence_token_expired".to_string())
    );
    // Neither the head decided under the old trusted list nor the expired token's was given a
    // kept decision (both were looked up, and judged again).
    assert_eq!(lookups(&env, "request", "hit").await, 5.0);
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_evidence_is_evaluated_once_per_request_it_answers() {
    const EVALUATIONS: &str = "evidence_evaluation";
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let now = Timestamp::now().secs();
    let ev = owners_evidence(&env.bed, now, evidence_body(CONSUMER, now - 10, now + 600));
    let started = std::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(
            refusal(&env, "/api/header-only/V1", &token, &ev).await,
            (200, String::new())
        );
    }
    let seconds = started.elapsed().as_secs_f64().ceil();
    // The kept decision's hits find the evaluation again where they judge the chain whole (the
    // first of each second), else rely on what that judgement found.
    assert_eq!(lookups(&env, EVALUATIONS, "miss").await, 1.0);
    let hits = lookups(&env, EVALUATIONS, "hit").await;
    assert!(hits <= seconds.min(2.0), "{hits} in {seconds} s");
    // Another request is evaluated on its own, though the token is the same one.
    assert_eq!(
        refusal(&env, "/api/header-only/V2", &token, &ev).await,
        (200, String::new())
    );
    assert_eq!(lookups(&env, EVALUATIONS, "miss").await, 2.0);
    // The token and its signer are still judged on every request: another caller is refused
    // before any evaluation is looked up.
    let sp2 = env.token(SP2).await;
    assert_eq!(
        refusal(&env, "/api/header-only/V1", &sp2, &ev).await,
        (403, "evidence_not_for_caller".to_string())
    );
    let looked_up =
        lookups(&env, EVALUATIONS, "hit").await + lookups(&env, EVALUATIONS, "miss").await;
    assert_eq!(looked_up, hits + 2.0);

    // A Deny is kept as the Permit is: evidence for other actions, refused each time.
    let mut other_action = evidence_body(CONSUMER, now - 10, now + 600);
    other_action["policySets"][0]["policies"][0]["target"]["actions"] = json!(["iSHARE.DELETE"]);
    let denied = owners_evidence(&env.bed, now, other_action);
    for _ in 0..2 {
        assert_eq!(
            refusal(&env, "/api/header-only/V1", &token, &denied).await,
            (403, "action_not_granted".to_string())
        );
    }
    assert_eq!(lookups(&env, EVALUATIONS, "miss").await, 3.0);
    assert_eq!(lookups(&env, EVALUATIONS, "hit").await, hits + 1.0);
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_evidence_cannot_be_passed_off_for_someone_else() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    let now = Timestamp::now().secs();
    // Issued to another subject (fetched by SP2 about itself).
    let others = evidence(&env, SP2, read_request(SP2, "X1", &[SP])).await;
    let (status, _, body) = get(
        &env,
        "/api/header-only/X1",
        &token,
        &[("delegation_evidence", &others)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("evidence_not_for_caller"))
    );
    // The refusal (and the decision log, which keeps its description) names both audiences.
    assert_eq!(
        body["error_description"].as_str(),
        Some(format!("the evidence token is addressed to {SP2} (aud), not to {CONSUMER}").as_str()),
        "{body}"
    );
    // Addressed to the caller but about another subject.
    let about_consumer = evidence(&env, SP2, read_request(CONSUMER, "X1", &[SP2, SP])).await;
    let sp2 = env.token(SP2).await;
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &sp2, &about_consumer).await,
        (403, "wrong_access_subject".to_string())
    );
    // For another service provider only.
    let for_sp2 = evidence(&env, CONSUMER, read_request(CONSUMER, "X1", &[SP2])).await;
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &for_sp2).await,
        (403, "service_provider_not_listed".to_string())
    );
    // From another data owner than the route's.
    let mine = evidence(&env, CONSUMER, read_request(CONSUMER, "X1", &[SP])).await;
    let (status, _, body) = get(
        &env,
        "/api/owned/X1",
        &token,
        &[("delegation_evidence", &mine), ("X-Data-Owner", SP2)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("wrong_policy_issuer"))
    );
    // Tampered with.
    let (head, rest) = mine.split_once('.').unwrap();
    let (_, sig) = rest.split_once('.').unwrap();
    let mut claims = claims(&mine);
    claims["delegationEvidence"]["policySets"][0]["policies"][0]["target"]["resource"]
        ["identifiers"] = json!(["*"]);
    use base64::Engine;
    let forged_payload = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .encode(serde_json::to_vec(&claims).unwrap());
    let tampered = format!("{head}.{forged_payload}.{sig}");
    assert_eq!(
        refusal(&env, "/api/header-only/X9", &token, &tampered).await,
        (403, "evidence_signature_invalid".to_string())
    );
    // Signed by the consumer itself: neither the data owner nor a registry.
    let own = signed_evidence(
        &env.bed,
        CONSUMER,
        CONSUMER,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now - 10, now + 600),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &own).await,
        (403, "evidence_issuer_not_a_registry".to_string())
    );
    // Claiming to be the registry with another party's certificate.
    let posing = signed_evidence(
        &env.bed,
        SP2,
        AR,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now - 10, now + 600),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &posing).await,
        (403, "evidence_issuer_unknown".to_string())
    );
    // A chain that is not trusted.
    let foreign = ishare_gateway::testbed::pki::TestPki::shared()
        .party(AR)
        .signing_identity();
    let untrusted = foreign
        .sign_raw(&json!({"iss": AR, "sub": CONSUMER, "aud": CONSUMER, "jti": "j", "iat": now, "exp": now + 30, "delegationEvidence": evidence_body(CONSUMER, now - 10, now + 600)}))
        .unwrap();
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &untrusted).await,
        (403, "evidence_untrusted".to_string())
    );
    // Genuine registry evidence, but expired, not yet valid, or an old token.
    let expired = signed_evidence(
        &env.bed,
        AR,
        AR,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now - 600, now - 1),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &expired).await,
        (403, "evidence_expired".to_string())
    );
    let early = signed_evidence(
        &env.bed,
        AR,
        AR,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now + 600, now + 1200),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &early).await,
        (403, "evidence_not_yet_valid".to_string())
    );
    let old = signed_evidence(
        &env.bed,
        AR,
        AR,
        CONSUMER,
        now - 7200,
        evidence_body(CONSUMER, now - 7200, now + 600),
    );
    assert_eq!(
        refusal(&env, "/api/header-only/X1", &token, &old).await,
        (403, "evidence_too_old".to_string())
    );
    // And the genuine one passes.
    let good = signed_evidence(
        &env.bed,
        AR,
        AR,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now - 10, now + 600),
    );
    assert_eq!(
        get(
            &env,
            "/api/header-only/X1",
            &token,
            &[("delegation_evidence", &good)]
        )
        .await
        .0,
        200
    );
    // The data owner may sign its own evidence.
    let by_owner = signed_evidence(
        &env.bed,
        OWNER,
        OWNER,
        CONSUMER,
        now,
        evidence_body(CONSUMER, now - 10, now + 600),
    );
    assert_eq!(
        get(
            &env,
            "/api/header-only/X1",
            &token,
            &[("delegation_evidence", &by_owner)]
        )
        .await
        .0,
        200
    );
    env.stop().await;
    fakes.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broker_acts_for_a_consumer_with_its_assertion() {
    let (env, fakes) = env().await;
    let broker_token = env.token(SP2).await;
    let assertion = env
        .bed
        .identity(CONSUMER)
        .client_assertion(SP2, Timestamp::now())
        .unwrap();
    // The evidence (from the registry) is about the original consumer, not the broker.
    let (status, _, echo) = get(
        &env,
        "/api/containers/B1",
        &broker_token,
        &[("service_consumer_assertion", &assertion)],
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    assert!(echo["headers"].get("service_consumer_assertion").is_none());
    // Header evidence the consumer fetched, presented by the broker.
    let ev = evidence(&env, CONSUMER, read_request(CONSUMER, "B2", &[SP])).await;
    let fresh = env
        .bed
        .identity(CONSUMER)
        .client_assertion(SP2, Timestamp::now())
        .unwrap();
    let (status, _, _) = get(
        &env,
        "/api/header-only/B2",
        &broker_token,
        &[
            ("service_consumer_assertion", &fresh),
            ("delegation_evidence", &ev),
        ],
    )
    .await;
    assert_eq!(status, 200);
    // Without the assertion the broker is on its own, and the consumer's evidence is not its own.
    let (status, _, body) = get(
        &env,
        "/api/header-only/B2",
        &broker_token,
        &[("delegation_evidence", &ev)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("evidence_not_for_caller"))
    );
    // An assertion addressed to someone else, or not the consumer's, proves nothing.
    let elsewhere = env
        .bed
        .identity(CONSUMER)
        .client_assertion(AR, Timestamp::now())
        .unwrap();
    let (status, _, body) = get(
        &env,
        "/api/containers/B1",
        &broker_token,
        &[("service_consumer_assertion", &elsewhere)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("invalid_consumer_assertion"))
    );
    let foreign = ishare_gateway::testbed::pki::TestPki::shared()
        .party(CONSUMER)
        .signing_identity()
        .client_assertion(SP2, Timestamp::now())
        .unwrap();
    let (status, _, body) = get(
        &env,
        "/api/containers/B1",
        &broker_token,
        &[("service_consumer_assertion", &foreign)],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("invalid_consumer_assertion"))
    );
    env.stop().await;
    fakes.stop();
}

async fn add_policy(env: &Env, issuer: &str, subject: &str, depth: u32) {
    let token = env.bed.token(AR, issuer).await;
    let policy = json!({
        "notBefore": 0, "notOnOrAfter": 4102444800i64,
        "policyIssuer": issuer, "target": {"accessSubject": subject},
        "policySets": [{"maxDelegationDepth": depth, "policies": [{
            "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
            "rules": [{"effect": "Permit"}]
        }]}]
    });
    let resp = env
        .bed
        .http
        .post(format!("{}/policy", env.bed.url(AR)))
        .bearer_auth(token)
        .json(&policy)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_chains_run_through_the_delegation_path_with_depth_enforced() {
    let (env, fakes) = env().await;
    let token = env.token(CONSUMER).await;
    // Owner → broker (one further step allowed) → consumer.
    add_policy(&env, OWNER, BROKER, 1).await;
    add_policy(&env, BROKER, CONSUMER, 0).await;
    let (status, _, body) = get(&env, "/api/chain/C1", &token, &[]).await;
    assert_eq!(status, 200, "{body}");
    // Owner → shallow (no further step allowed) → consumer.
    add_policy(&env, OWNER, SHALLOW, 0).await;
    add_policy(&env, SHALLOW, CONSUMER, 0).await;
    let (status, _, body) = get(&env, "/api/shallow-chain/C1", &token, &[]).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("delegation_depth_exceeded"))
    );
    // A missing step is no policy.
    let nobody = env.token(NOBODY).await;
    let (status, _, body) = get(&env, "/api/chain/C1", &nobody, &[]).await;
    assert_eq!((status, body["reason"].as_str()), (403, Some("no_policy")));
    // A chain in the header: the owner's evidence to the broker, and the broker's to the consumer.
    let now = Timestamp::now().secs();
    let mut first = evidence_body(BROKER, now - 10, now + 600);
    first["policySets"][0]["maxDelegationDepth"] = json!(1);
    let mut second = evidence_body(CONSUMER, now - 10, now + 600);
    second["policyIssuer"] = json!(BROKER);
    let hop1 = signed_evidence(&env.bed, AR, AR, BROKER, now, first);
    let hop2 = signed_evidence(&env.bed, AR, AR, CONSUMER, now, second);
    // Each token of the chain must be addressed to someone in this request: hop1 was issued to
    // the broker, so the chain is only accepted through the broker.
    let (status, _, body) = get(
        &env,
        "/api/header-only/C1",
        &token,
        &[("delegation_evidence", &format!("{hop1},{hop2}"))],
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("evidence_not_for_caller"))
    );
    let hop1_for_consumer = {
        let mut first = evidence_body(BROKER, now - 10, now + 600);
        first["policySets"][0]["maxDelegationDepth"] = json!(1);
        signed_evidence(&env.bed, AR, AR, CONSUMER, now, first)
    };
    let (status, _, body) = get(
        &env,
        "/api/header-only/C1",
        &token,
        &[(
            "delegation_evidence",
            &format!("{hop1_for_consumer},{hop2}"),
        )],
    )
    .await;
    assert_eq!(status, 200, "{body}");
    env.stop().await;
    fakes.stop();
}

/// A second registry of the testbed, which the data owner designates for us.
const OUR_AR: &str = "EU.EORI.NL000000008";
/// Another service provider, for which the data owner designates the testbed's registry.
const OTHER_SP: &str = "EU.EORI.NL000000002";

/// A testbed whose data owner designates two registries, each for another service provider: the
/// testbed's registry for `OTHER_SP` (listed first), `OUR_AR` for us; both hold its policies.
async fn two_registries_bed() -> Bed {
    let mut config = testbed_config("owner_registries");
    let mut second = config
        .parties
        .iter()
        .find(|p| p.id == AR)
        .expect("the testbed's registry")
        .clone();
    second.id = OUR_AR.into();
    second.name = "Our Registry".into();
    config.parties.push(second);
    let owner = config.parties.iter_mut().find(|p| p.id == OWNER).unwrap();
    owner.registries.clear();
    // Our id as the owner's record writes it, in another letter case: 1.9 EORIs compare without.
    owner.registries_for = [(OTHER_SP.to_string(), AR), (SP.to_lowercase(), OUR_AR)]
        .map(|(sp, ar)| (sp, ar.to_string()))
        .into();
    Bed::start_of(config).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_registry_asked_and_trusted_is_the_one_the_data_owner_designated_for_us() {
    let bed = two_registries_bed().await;
    let rules = "[[route]]\nname = \"containers\"\nmethods = [\"GET\"]\npath = \"/api/containers/{id}\"\nupstream = \"echo\"\n[route.delegation]\npolicy_issuer = \"EU.EORI.NL000000005\"\nresource_type = \"CONTAINER\"\nidentifiers = [\"{path.id}\"]\nregistry = \"owner\"\n";
    let (dir, ports) = gateway_dir(&bed, "owner_registries", rules, "", |t| {
        t + "\n[decision_log]\npath = \"decisions.log\"\n"
    });
    let mut gateway =
        GatewayProcess::start("owner-registries", &dir.join("gateway.toml"), ports.admin);
    gateway.wait_ready().await;
    let url = format!("https://127.0.0.1:{}", ports.tls);
    let token = access_token(&bed.http, &url, &bed.identity(CONSUMER)).await;
    let get = |path: &str, evidence: Option<&str>| {
        let mut req = bed.http.get(format!("{url}{path}")).bearer_auth(&token);
        if let Some(evidence) = evidence {
            req = req.header("delegation_evidence", evidence);
        }
        async move { status_json(req.send().await.unwrap()).await }
    };
    // Asked itself, the gateway asks the registry designated for us, not the first listed.
    let (status, body) = get("/api/containers/C1", None).await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = get("/api/containers/SECRET-1", None).await;
    assert_eq!(
        (status, body["reason"].as_str(), body["error_description"].as_str()),
        (
            403,
            Some("denied_by_rule"),
            Some(format!("the authorisation registry {OUR_AR} denies this request: the rule of its evidence is Deny").as_str())
        ),
        "{body}"
    );
    // Evidence in the header counts only from the registry designated for us: the other holds
    // the owner's delegations for another service provider, and signs this Permit all the same.
    let request = read_request(CONSUMER, "C1", &[SP]);
    let elsewhere = bed.evidence_of(CONSUMER, AR, &request).await;
    let (status, body) = get("/api/containers/C1", Some(&elsewhere)).await;
    assert_eq!(
        (status, body["reason"].as_str(), body["error_description"].as_str()),
        (
            403,
            Some("evidence_issuer_not_the_owners_registry"),
            Some(format!("{AR} is not a registry the data owner {OWNER} designated for this service provider").as_str())
        ),
        "{body}"
    );
    let ours = bed.evidence_of(CONSUMER, OUR_AR, &request).await;
    let (status, body) = get("/api/containers/C1", Some(&ours)).await;
    assert_eq!(status, 200, "{body}");
    // Evidence of that registry addressed as FIWARE Keyrock addresses it, to a user id of its
    // own: refused, and the answer and the decision log say which aud was found and expected.
    let now = Timestamp::now().secs();
    let keyrock_user = "3c2bd2b5-5f3e-4a7e-9b1d-0e6f7a8b9c0d";
    let body = evidence_body(CONSUMER, now - 10, now + 600);
    let misaddressed = signed_evidence(&bed, OUR_AR, OUR_AR, keyrock_user, now, body);
    let (status, body) = get("/api/containers/C1", Some(&misaddressed)).await;
    assert_refused(status, &body, (403, "evidence_not_for_caller"));
    let (status, _) = gateway.terminate().await;
    assert!(status.success());
    let said = format!("addressed to {keyrock_user} (aud)");
    let description = body["error_description"].as_str().unwrap_or_default();
    assert!(
        description.contains(&said) && description.contains(CONSUMER),
        "{description}"
    );
    // The refusal's line was queued just before SIGTERM: the log is written out at the end.
    let log = std::fs::read_to_string(dir.join("decisions.log")).unwrap();
    let line = log
        .lines()
        .find(|l| l.contains("evidence_not_for_caller"))
        .expect("a decision-log line for the refusal");
    let line: Value = serde_json::from_str(line).unwrap();
    assert_eq!(line["description"].as_str(), Some(description));
    bed.stop().await;
}
