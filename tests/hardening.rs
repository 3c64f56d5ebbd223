//! What the backend receives is exactly what was decided on: one canonical form of the path and
//! the query, every form that backends read differently refused (unless a route accepts it), values
//! put into upstream paths as whole segments, and bytes beyond ASCII passed on unmangled.

use crate::support;

use ishare_gateway::scheme::Timestamp;
use serde_json::{json, Value};
use support::*;

const BIN: &str = "hardening";

fn rules() -> String {
    format!(
        r#"
[[route]]
name = "read"
methods = ["GET"]
path = "/api/containers/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]

[[route]]
name = "by-query"
methods = ["GET"]
path = "/api/lookup"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{query.id}}"]

[[route]]
name = "lenient"
methods = ["GET"]
path = "/api/lenient/{{id}}"
upstream = "echo"
accept = ["path_parameters", "repeated_query_key"]
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]

[[route]]
name = "tenant"
methods = ["GET"]
path = "/v1/{{id}}"
upstream = "echo"
auth = "public"
accept = ["repeated_query_key"]
upstream_path = "/tenants/{{header.X-Tenant}}/v{{query.version}}/{{id}}"

[[route]]
name = "header-only"
methods = ["GET"]
path = "/api/header-only/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
evidence = ["header"]

[[route]]
name = "mine"
path = "/api/mine"
upstream = "echo"

[[route]]
name = "by-owner"
methods = ["GET"]
path = "/api/owned/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{{header.X-Data-Owner}}"
caller_names_owner = true
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]

[[route]]
name = "nocase"
methods = ["GET"]
path = "/api/nocase/{{id}}"
upstream = "echo"
identifier_case = "upper"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}", "{{query.also}}"]

[[route]]
name = "socket"
path = "/socket"
upstream = "echo"
auth = "public"
websocket = true

[[route]]
name = "files"
methods = ["GET"]
path = "/files/{{*rest}}"
upstream = "echo"
auth = "public"

[[route]]
name = "forms"
path = "/forms/{{*rest}}"
upstream = "echo"
auth = "public"

[[route]]
name = "overridable"
path = "/overridable/{{*rest}}"
upstream = "echo"
auth = "public"
accept = ["method_override"]
"#
    )
}

async fn env() -> Env {
    Env::start(BIN, &rules(), |_| String::new()).await
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    status_json(req.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn identifiers_are_decided_on_in_the_form_the_backend_reads() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let h1 = &env.bed.http;
    let h2 = h2_client(&env.bed.keys.ca_file);
    let get = |client: &reqwest::Client, path: &str| {
        client.get(format!("{}{path}", env.url)).bearer_auth(&token)
    };
    // The registry denies SECRET-1 and permits every other container.
    let (status, body) = send(get(h1, "/api/containers/SECRET-1")).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule"))
    );
    let (status, body) = send(get(h1, "/api/containers/C1")).await;
    assert_eq!(
        (status, body["path"].as_str()),
        (200, Some("/api/containers/C1"))
    );
    let variants = [
        ("/api/containers/SECRET-1;x", "ambiguous_request"),
        ("/api/containers/SECRET-1;jsessionid=1", "ambiguous_request"),
        ("/api/containers/SECRET-1%3Bx", "ambiguous_request"),
        ("/api/containers/SECRET-1%20", "ambiguous_request"),
        ("/api/containers/%20SECRET-1", "ambiguous_request"),
        ("/api/containers/SECRET-1.", "ambiguous_request"),
        ("/api/containers/SECRET-1,C1", "ambiguous_request"),
        ("/api/containers/SECRET-1%09", "invalid_path"),
        (
            "/api/containers/SECRET-1%252e%252e%252fadmin",
            "ambiguous_request",
        ),
        ("/api/lookup?id=C1&ID=SECRET-1", "ambiguous_request"),
        ("/api/lookup?id=C1&id=SECRET-1", "ambiguous_request"),
        ("/api/lookup?id[]=SECRET-1", "ambiguous_request"),
        ("/api/lookup?id=C1;id=SECRET-1", "ambiguous_request"),
        ("/api/lookup?id=SECRET-1%00", "invalid_query"),
        ("/api/lookup?id=SECRET-1%2C", "ambiguous_request"),
        ("/api/lookup?id=%20SECRET-1", "ambiguous_request"),
        ("/api/lookup?id=C1&%20id=SECRET-1", "ambiguous_request"),
        ("/api/lookup?id=C1&id+=SECRET-1", "ambiguous_request"),
        ("/api/containers/%EF%BC%B3ECRET-1", "ambiguous_request"),
        ("/api/containers/SECRET-1%E2%80%8B", "ambiguous_request"),
        ("/api/containers/SE%C2%ADCRET-1", "ambiguous_request"),
        ("/api/containers/SECRET-1%3Fx=1", "ambiguous_request"),
        ("/api/containers/SECRET-1%23x", "ambiguous_request"),
        ("/api/lookup?id=SECRET-1%3Fx%3D1", "ambiguous_request"),
        ("/api/lookup?id=C1%26id%3DSECRET-1", "ambiguous_request"),
        ("/api/lookup?id=C1&_method=DELETE", "ambiguous_request"),
    ];
    for client in [h1, &h2] {
        for (path, reason) in variants {
            let (status, body) = send(get(client, path)).await;
            assert_eq!(
                (status, body["reason"].as_str()),
                (400, Some(reason)),
                "{path}: {body}"
            );
        }
    }
    // The backend receives the canonical query: what the rule read, and nothing read otherwise.
    let (status, body) = send(get(h1, "/api/lookup?id=C1&note=a+b&sign=%2B")).await;
    assert_eq!(
        (status, body["query"].as_str()),
        (200, Some("id=C1&note=a%20b&sign=%2B"))
    );
    let (status, body) = send(get(h1, "/api/lookup?id=SECRET-1")).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule"))
    );
    // A backend that compares identifiers without case is given them, decided on, in one case.
    let (status, body) = send(get(h1, "/api/nocase/secret-1?also=c2")).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("denied_by_rule"))
    );
    let (status, body) = send(get(h1, "/api/nocase/c1?also=c2&note=keep")).await;
    assert_eq!(
        (status, body["path"].as_str(), body["query"].as_str()),
        (200, Some("/api/nocase/C1"), Some("also=C2&note=keep"))
    );
    // A route that accepts path parameters decides on, and forwards, the whole segment.
    let (status, body) = send(get(h1, "/api/lenient/SECRET-1;v=2?a=1&a=2")).await;
    assert_eq!(
        (status, body["path"].as_str(), body["query"].as_str()),
        (200, Some("/api/lenient/SECRET-1;v=2"), Some("a=1&a=2"))
    );
    let (status, body) = send(get(h1, "/api/lenient/SECRET-1.")).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("ambiguous_request"))
    );
    // An identifier longer than decisions are made on.
    let long = format!("/api/containers/{}", "C".repeat(300));
    let (status, body) = send(get(h1, &long)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("request_value_too_long"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn values_enter_upstream_paths_as_whole_segments_or_not_at_all() {
    let env = env().await;
    let http = &env.bed.http;
    let get = |path: &str, tenant: Option<&str>| {
        let req = http.get(format!("{}{path}", env.url));
        match tenant {
            Some(t) => req.header("X-Tenant", t),
            None => req,
        }
    };
    let (status, body) = send(get("/v1/C%201?version=2", Some("acme"))).await;
    assert_eq!(
        (status, body["path"].as_str()),
        (200, Some("/tenants/acme/v2/C%201"))
    );
    for (path, tenant) in [
        ("/v1/C1?version=2", Some("../../admin")),
        ("/v1/C1?version=2", Some("..")),
        ("/v1/C1?version=../../admin", Some("acme")),
        ("/v1/C1?version=2", None),
        ("/v1/C1", Some("acme")),
        ("/v1/C1?version=2&version=3", Some("acme")),
    ] {
        let (status, body) = send(get(path, tenant)).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some("missing_request_value")),
            "{path} {tenant:?}: {body}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bytes_beyond_ascii_reach_the_backend_percent_encoded_not_mangled() {
    let env = env().await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    let request =
        format!("GET /files/caf\u{e9}/na\u{ef}ve?q=caf\u{e9} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    let answer = raw_request(&env.plain, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let body = raw_body(&answer);
    assert_eq!(body["path"], "/files/caf%C3%A9/na%C3%AFve");
    assert_eq!(body["query"], "q=caf%C3%A9");
    env.stop().await;
}

/// An evidence token signed by `signer` as the registry, about the consumer, issued at `iat`.
fn registry_evidence(env: &Env, claims: Value) -> String {
    let now = Timestamp::now().secs();
    let mut all = json!({
        "iss": AR, "sub": CONSUMER, "aud": CONSUMER, "jti": "j", "iat": now, "exp": now + 30,
        "delegationEvidence": {
            "notBefore": now - 10, "notOnOrAfter": now + 600,
            "policyIssuer": OWNER, "target": {"accessSubject": CONSUMER},
            "policySets": [{"policies": [{
                "target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"], "environment": {"serviceProviders": [SP]}},
                "rules": [{"effect": "Permit"}]
            }]}]
        }
    });
    for (k, v) in claims.as_object().unwrap() {
        all[k] = v.clone();
    }
    env.bed.identity(AR).sign_raw(&all).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_evidence_holds_only_within_its_own_token_lifetime() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let now = Timestamp::now().secs();
    let get = |evidence: String| {
        env.bed
            .http
            .get(format!("{}/api/header-only/C1", env.url))
            .bearer_auth(&token)
            .header("delegation_evidence", evidence)
    };
    let (status, _) = send(get(registry_evidence(&env, json!({})))).await;
    assert_eq!(status, 200);
    let cases = [
        (
            json!({"iat": now - 641, "exp": now - 611}),
            "evidence_token_expired",
        ),
        (json!({"exp": now - 2970}), "evidence_token_expired"),
        (
            json!({"nbf": now + 3000, "exp": now + 3600}),
            "evidence_token_not_yet_valid",
        ),
        (
            json!({"delegationEvidence": {"notBefore": now - 10, "notOnOrAfter": now + 600, "policyIssuer": OWNER, "target": {"accessSubject": CONSUMER},
                "policySets": [{"target": {"environment": {"licenses": ["ISHARE.0001\r\nSet-Cookie: x=1"]}},
                    "policies": [{"target": {"resource": {"type": "CONTAINER", "identifiers": ["*"], "attributes": ["*"]}, "actions": ["iSHARE.READ"]}, "rules": [{"effect": "Permit"}]}]}]}}),
            "malformed_evidence",
        ),
    ];
    for (claims, reason) in cases {
        let (status, body) = send(get(registry_evidence(&env, claims.clone()))).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (403, Some(reason)),
            "{claims}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forwarded_consumer_assertion_counts_once_and_the_backend_hears_of_both() {
    let env = env().await;
    let broker = env.token(SP2).await;
    let consumer = env.bed.identity(CONSUMER);
    let get = |assertion: &str| {
        env.bed
            .http
            .get(format!("{}/api/containers/C1", env.url))
            .bearer_auth(&broker)
            .header("service_consumer_assertion", assertion)
            .header("X-Original-Consumer-Party-Id", "EU.EORI.NL000000099")
    };
    let assertion = consumer.client_assertion(SP2, Timestamp::now()).unwrap();
    let (status, echo) = send(get(&assertion)).await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["headers"]["x-consumer-party-id"], SP2);
    assert_eq!(echo["headers"]["x-original-consumer-party-id"], CONSUMER);
    for _ in 0..3 {
        let (status, body) = send(get(&assertion)).await;
        assert_refused(status, &body, (403, "invalid_consumer_assertion"));
    }
    // A consumer's token for something else is not a consumer assertion.
    let now = Timestamp::now().secs();
    let with_evidence = consumer
        .sign_raw(&json!({"iss": CONSUMER, "sub": CONSUMER, "aud": SP2, "jti": "x1", "iat": now, "exp": now + 30, "delegationEvidence": {}}))
        .unwrap();
    let (status, body) = send(get(&with_evidence)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("invalid_consumer_assertion"))
    );
    // Without a broker assertion, a client's copy of the header never reaches the backend.
    let own = env.token(CONSUMER).await;
    let (status, echo) = send(
        env.bed
            .http
            .get(format!("{}/api/mine", env.url))
            .bearer_auth(&own)
            .header("X-Original-Consumer-Party-Id", SP2)
            .header("X_Original_Consumer_Party_Id", SP2),
    )
    .await;
    assert_eq!(status, 200);
    assert!(
        echo["headers"]
            .get("x-original-consumer-party-id")
            .is_none(),
        "{echo}"
    );
    assert!(
        echo["headers"]
            .get("x_original_consumer_party_id")
            .is_none(),
        "{echo}"
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn party_ids_are_passed_on_as_the_scheme_owner_spells_them() {
    let env = env().await;
    let creds = env.bed.creds(CONSUMER).clone();
    let lower = "eu.EORI.nl000000001";
    let (header, mut claims) = assertion_parts(&creds, SP);
    claims["iss"] = json!(lower);
    claims["sub"] = json!(lower);
    let assertion = forge(&header, &claims, &creds.key_pem);
    let mut form = token_form(&env.bed.identity(CONSUMER), SP, Some(assertion));
    for (k, v) in form.iter_mut() {
        if k == "client_id" {
            *v = lower.to_string();
        }
    }
    let (status, body) = status_json(request_token(&env.bed.http, &env.url, form).await).await;
    assert_eq!(status, 200, "{body}");
    let token = body["access_token"].as_str().unwrap();
    let (status, echo) = send(
        env.bed
            .http
            .get(format!("{}/api/mine", env.url))
            .bearer_auth(token),
    )
    .await;
    assert_eq!(
        (status, echo["headers"]["x-consumer-party-id"].as_str()),
        (200, Some(CONSUMER))
    );
    // A jti no store should keep.
    let (header, mut claims) = assertion_parts(&creds, SP);
    claims["jti"] = json!("j".repeat(45_000));
    let assertion = forge(&header, &claims, &creds.key_pem);
    let (status, body) = status_json(
        env.token_response(&env.bed.identity(CONSUMER), Some(assertion))
            .await,
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("invalid_jti"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn overrides_and_forged_forwarding_details_do_not_reach_the_backend() {
    let env = env().await;
    let (status, echo) = send(
        env.bed
            .http
            .get(format!("{}/files/a", env.url))
            .header("X-HTTP-Method-Override", "DELETE")
            .header("X_HTTP_Method_Override", "DELETE")
            .header("X-Method-Override", "PUT")
            .header("X-Original-URL", "/admin")
            .header("X-Rewrite-URL", "/admin")
            .header("Forwarded", "for=10.0.0.1;host=evil")
            .header("X-Forwarded-Host", "evil")
            .header("X-Original-Method", "DELETE")
            .header("X-Forwarded-Method", "DELETE")
            .header("X-Override-Method", "DELETE")
            .header("X-Forwarded-For", "7.7.7.7")
            .header("X_Forwarded_For", "6.6.6.6")
            .header("X.Forwarded.For", "5.5.5.5")
            .header("X_Forwarded_Proto", "http")
            .header("X_Forwarded_Host", "evil")
            .header("X-Forwarded-Ssl", "on")
            .header("True-Client-IP", "9.9.9.9")
            .header("X-Forwarded-Client-Cert", "Hash=forged")
            .header("X_Remote_User", "admin")
            .header("X-Kept", "yes"),
    )
    .await;
    assert_eq!(status, 200);
    let headers = echo["headers"].as_object().unwrap();
    for gone in [
        "x-http-method-override",
        "x_http_method_override",
        "x-method-override",
        "x-original-method",
        "x-forwarded-method",
        "x-override-method",
        "x-original-url",
        "x-rewrite-url",
        "forwarded",
        "x-forwarded-host",
        "x_forwarded_for",
        "x.forwarded.for",
        "x_forwarded_proto",
        "x_forwarded_host",
        "x-forwarded-ssl",
        "true-client-ip",
        "x-forwarded-client-cert",
        "x_remote_user",
    ] {
        assert!(!headers.contains_key(gone), "{gone}: {echo}");
    }
    assert_eq!(headers["x-kept"], "yes");
    // What the gateway saw, not what the client says (its peer is no trusted proxy).
    assert_eq!(headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(headers["x-forwarded-proto"], "https");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trusted_proxys_forwarded_for_is_appended_to() {
    let env = Env::start(BIN, &rules(), |_| {
        "[forwarding]\ntrusted_proxies = [\"127.0.0.0/8\"]\n".to_string()
    })
    .await;
    let (status, echo) = send(
        env.bed
            .http
            .get(format!("{}/files/a", env.url))
            .header("X-Forwarded-For", "7.7.7.7")
            .header("X_Forwarded_For", "6.6.6.6"),
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(echo["headers"]["x-forwarded-for"], "7.7.7.7, 127.0.0.1");
    assert!(echo["headers"].get("x_forwarded_for").is_none(), "{echo}");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_in_any_spelling_and_forged_licences_stay_away_from_the_backend() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let (status, echo) = send(
        env.bed
            .http
            .get(format!("{}/api/containers/C1", env.url))
            .bearer_auth(&token)
            .header("Delegation-Evidence", "forged")
            .header("Service-Consumer-Assertion", "forged")
            .header("DELEGATION.EVIDENCE", "forged")
            .header("LicensePurpose", "forged")
            .header("LicenseEndDate", "forged"),
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    let headers = echo["headers"].as_object().unwrap();
    for gone in [
        "delegation-evidence",
        "service-consumer-assertion",
        "delegation.evidence",
        "licensepurpose",
        "licenseenddate",
    ] {
        assert!(!headers.contains_key(gone), "{gone}: {echo}");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_needs_one_valid_host_and_trace_a_route_that_lists_it() {
    let env = env().await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    // Which Hosts are refused, and that nothing is read before them, is the decision's own
    // order (the harness's unit tests); here, that the proxy answers it.
    let request = b"GET /files/a HTTP/1.1\r\nHost: evil.example/../x\r\nConnection: close\r\n\r\n";
    let answer = raw_request(&env.plain, request).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(raw_body(&answer)["reason"], "invalid_host", "{answer}");
    // Two Hosts: refused by the HTTP parser itself, before the gateway reads the request.
    let two =
        format!("GET /files/a HTTP/1.1\r\nHost: {addr}\r\nHost: evil\r\nConnection: close\r\n\r\n");
    let answer = raw_request(&env.plain, two.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // HTTP/1.0 may go without a Host.
    let answer = raw_request(&env.plain, b"GET /files/a HTTP/1.0\r\n\r\n").await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    for method in ["TRACE", "TRACK", "PROPFIND", "DEBUG"] {
        let request =
            format!("{method} /files/a HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        let answer = raw_request(&env.plain, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 405"), "{method}: {answer}");
        assert_eq!(raw_body(&answer)["reason"], "method_not_allowed");
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hop_by_hop_headers_cannot_undo_a_decision_or_open_a_tunnel() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let owned = |owner: &str| {
        env.bed
            .http
            .get(format!("{}/api/owned/C1", env.url))
            .bearer_auth(&token)
            .header("X-Data-Owner", owner)
    };
    let (status, body) = send(owned(OWNER)).await;
    assert_eq!(
        (status, body["headers"]["x-data-owner"].as_str()),
        (200, Some(OWNER))
    );
    // (HTTP/1.1: over HTTP/2 a client cannot send Connection at all.)
    let hop = env
        .bed
        .http
        .get(format!("{}/api/owned/C1", env.plain))
        .bearer_auth(&token)
        .header("X-Data-Owner", OWNER)
        .header("Connection", "keep-alive, X-Data-Owner");
    let (status, body) = send(hop).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("connection_names_rule_header"))
    );
    // The caller may not name itself as the data owner.
    let (status, body) = send(owned(CONSUMER)).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (403, Some("owner_is_caller"))
    );
    // Upgrades only where a route allows them (HTTP/1.1, where they exist).
    let upgrade = |path: &str| {
        env.bed
            .http
            .get(format!("{}{path}", env.plain))
            .header("Connection", "upgrade")
            .header("Upgrade", "websocket")
            .header("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
            .header("Sec-WebSocket-Version", "13")
    };
    let (status, body) = send(upgrade("/files/a")).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("upgrade_not_allowed"))
    );
    let (status, body) = send(upgrade("/socket")).await;
    assert_eq!(
        (status, body["headers"]["upgrade"].as_str()),
        (200, Some("websocket"))
    );
    // A Connection header the proxy cannot honour gets an answer, not a dropped connection.
    let addr = env.plain.trim_start_matches("http://").to_string();
    let request =
        format!("GET /files/a HTTP/1.1\r\nHost: {addr}\r\nConnection: close, Host\r\n\r\n");
    let answer = raw_request(&env.plain, request.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert_eq!(raw_body(&answer)["reason"], "invalid_header");
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_method_field_in_a_body_is_refused_before_the_backend_can_act_on_it() {
    let env = env().await;
    let http = &env.bed.http;
    let post = |path: &str, content_type: &str, body: reqwest::Body| {
        http.post(format!("{}{path}", env.url))
            .header("content-type", content_type)
            .body(body)
    };
    const FORM: &str = "application/x-www-form-urlencoded";
    const MULTIPART: &str = "multipart/form-data; boundary=b0undary";
    let multipart = |name: &str| {
        format!(
            "--b0undary\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\nDELETE\r\n--b0undary--\r\n"
        )
    };
    // A body of one piece, and a large one streamed in chunks with the field at its end.
    let large = format!("{}&_method=DELETE", "a=1&".repeat(50_000));
    let chunked = || {
        let chunks: Vec<Result<Vec<u8>, std::io::Error>> = large
            .as_bytes()
            .chunks(16 * 1024)
            .map(|c| Ok(c.to_vec()))
            .collect();
        reqwest::Body::wrap_stream(futures::stream::iter(chunks))
    };
    let refused = [
        post("/forms/x", FORM, "a=1&_method=DELETE".into()),
        post("/forms/x", FORM, "%5Fmethod=PUT".into()),
        post("/forms/x", MULTIPART, multipart("_method").into()),
        post(
            "/forms/x",
            "application/json",
            r#"{"a":{"_method":"DELETE"}}"#.into(),
        ),
        post("/forms/x", FORM, large.clone().into()),
        post("/forms/x", FORM, chunked()),
        // Types as PHP, Rack and Laravel read them.
        post("/forms/x", "", "_method=DELETE".into()),
        post(
            "/forms/x",
            "application/x-www-form-urlencoded, text/plain",
            "_method=PUT".into(),
        ),
        post("/forms/x", "text/json", r#"{"_method":"DELETE"}"#.into()),
        post(
            "/forms/x",
            "multipart/mixed; boundary=b0undary",
            multipart("_method").into(),
        ),
        post("/forms/x", FORM, "_method%00x=DELETE".into()),
        http.post(format!("{}/forms/x", env.url))
            .body("_method=DELETE"),
    ];
    for request in refused {
        let (status, body) = send(request).await;
        assert_refused(status, &body, (400, "ambiguous_request"));
        assert!(
            body["error_description"]
                .as_str()
                .is_some_and(|d| d.contains("_method")),
            "{body}"
        );
    }
    // Bodies that cannot be read one way: compressed, a boundary readers cut differently.
    for request in [
        post("/forms/x", FORM, "_method=DELETE".into()).header("content-encoding", "gzip"),
        post(
            "/forms/x",
            "multipart/form-data; boundary=b0undary,x",
            multipart("_method").into(),
        ),
        post(
            "/forms/x",
            "multipart/form-data",
            multipart("_method").into(),
        ),
    ] {
        let (status, body) = send(request).await;
        assert_refused(status, &body, (400, "unreadable_body"));
    }
    // Part headers too long to be read as far as a name could be.
    let long = format!(
        "--b0undary\r\nContent-Disposition: form-data; filename=\"{}\"; name=\"_method\"\r\n\r\nDELETE\r\n--b0undary--\r\n",
        "f".repeat(9000)
    );
    let (status, body) = send(post("/forms/x", MULTIPART, long.into())).await;
    assert_refused(status, &body, (400, "unreadable_body"));
    // The same bodies without the field pass whole, as does the field on a route that accepts it.
    for (path, content_type, body) in [
        ("/forms/x", FORM, "a=1&method=DELETE".to_string()),
        ("/forms/x", MULTIPART, multipart("method")),
        (
            "/forms/x",
            "application/json",
            r#"{"a":"_method"}"#.to_string(),
        ),
        ("/forms/x", "text/plain", "_method=DELETE".to_string()),
        ("/overridable/x", FORM, "a=1&_method=DELETE".to_string()),
    ] {
        let (status, echo) = send(post(path, content_type, body.clone().into())).await;
        assert_eq!(
            (status, echo["method"].as_str(), echo["body"].as_str()),
            (200, Some("POST"), Some(body.as_str())),
            "{path} {content_type}"
        );
    }
    let (status, echo) = send(post("/overridable/x", FORM, chunked())).await;
    assert_eq!(
        (status, echo["body_length"].as_u64()),
        (200, Some(large.len() as u64))
    );
    // Counted as refused requests of the route.
    let m = env.metrics().await;
    let refused = metric(
        &m,
        "ishare_gateway_requests_total",
        &[
            ("route", "forms"),
            ("status", "400"),
            ("outcome", "bad_request"),
        ],
    );
    assert_eq!(refused, 16.0, "{m}");
    env.stop().await;
}
