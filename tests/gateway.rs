//! The gateway with the testbed in-process, over real HTTP and TLS: /capabilities, /token with
//! every assertion defect, routes and bearer tokens, forwarding, backends and their failures,
//! the admin listener, and the access log of the real binary.

use crate::support;

use serde_json::{json, Value};
use support::*;

const BIN: &str = "gateway";

const RULES: &str = r#"
[[route]]
name = "status"
methods = ["GET", "HEAD"]
path = "/status"
upstream = "echo"
auth = "public"

[[route]]
name = "mine"
description = "The caller's own things"
path = "/api/mine/{*rest}"
upstream = "echo"
advertise = true

[[route]]
name = "raw"
path = "/api/raw/{id}"
upstream = "echo"
forward_authorization = true

[[route]]
name = "rewrite"
methods = ["GET"]
path = "/v1/things/{id}"
upstream = "echo"
upstream_path = "/legacy/things/{id}"

[[route]]
name = "hidden"
path = "/api/hidden"
upstream = "echo"
"#;

async fn env() -> Env {
    Env::start(BIN, RULES, |_| String::new()).await
}

async fn send(req: reqwest::RequestBuilder) -> (u16, reqwest::header::HeaderMap, Value) {
    let resp = req.send().await.unwrap();
    let headers = resp.headers().clone();
    let (status, body) = status_json(resp).await;
    (status, headers, body)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capabilities_are_signed_and_depend_on_the_token() {
    let env = env().await;
    let (status, _, body) = send(env.bed.http.get(format!("{}/capabilities", env.url))).await;
    assert_eq!(status, 200);
    let token = body["capabilities_token"].as_str().unwrap();
    let jwt = ishare_gateway::scheme::jwt::decode(token, Default::default()).unwrap();
    jwt.verify_signature().unwrap();
    let c = claims(token);
    assert_eq!((c["iss"].as_str(), c.get("aud")), (Some(SP), None));
    assert_eq!(c["capabilities_info"]["party_id"], SP);
    let features = &c["supported_versions"][0]["supported_features"][0];
    let public: Vec<&str> = features["public"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["feature"].as_str().unwrap())
        .collect();
    assert_eq!(public, ["capabilities", "access token"]);
    assert!(features.get("restricted").is_none());
    // Cached: the same token again.
    let (_, _, again) = send(env.bed.http.get(format!("{}/capabilities", env.url))).await;
    assert_eq!(again["capabilities_token"], body["capabilities_token"]);

    let token = env.token(CONSUMER).await;
    let (status, _, body) = send(
        env.bed
            .http
            .get(format!("{}/capabilities", env.url))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(status, 200);
    let c = claims(body["capabilities_token"].as_str().unwrap());
    assert_eq!(c["aud"], CONSUMER);
    let restricted: Vec<&str> = c["supported_versions"][0]["supported_features"][0]["restricted"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["feature"].as_str().unwrap())
        .collect();
    assert_eq!(restricted, ["mine"], "advertised routes only");

    let (status, headers, body) = send(
        env.bed
            .http
            .get(format!("{}/capabilities", env.url))
            .bearer_auth("expired.or.forged"),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (401, Some("invalid_token"))
    );
    assert_eq!(
        headers["www-authenticate"],
        "Bearer error=\"invalid_token\""
    );
    let (status, _, _) = send(env.bed.http.post(format!("{}/capabilities", env.url))).await;
    assert_eq!(status, 405);
    let m = env.metrics().await;
    assert!(
        metric(
            &m,
            "ishare_gateway_cache_lookups_total",
            &[("cache", "capabilities"), ("result", "hit")]
        ) >= 1.0
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_endpoint_refuses_every_assertion_defect() {
    let env = env().await;
    let creds = env.bed.creds(CONSUMER).clone();
    let identity = env.bed.identity(CONSUMER);
    let (header, claims_ok) = assertion_parts(&creds, SP);
    let now = ishare_gateway::scheme::Timestamp::now().secs();
    type Edit = Box<dyn Fn(&mut Value, &mut Value)>;
    let cases: Vec<(&str, Edit)> = vec![
        (
            "missing_typ",
            Box::new(|h, _| {
                h.as_object_mut().unwrap().remove("typ");
            }),
        ),
        ("invalid_typ", Box::new(|h, _| h["typ"] = json!("JOSE"))),
        (
            "missing_alg",
            Box::new(|h, _| {
                h.as_object_mut().unwrap().remove("alg");
            }),
        ),
        ("invalid_alg", Box::new(|h, _| h["alg"] = json!("HS256"))),
        (
            "missing_x5c",
            Box::new(|h, _| {
                h.as_object_mut().unwrap().remove("x5c");
            }),
        ),
        ("invalid_x5c", Box::new(|h, _| h["x5c"] = json!(["Zm9v"]))),
        (
            "extra_header_parameter",
            Box::new(|h, _| h["kid"] = json!("1")),
        ),
        (
            "missing_iss",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("iss");
            }),
        ),
        ("invalid_iss", Box::new(|_, c| c["iss"] = json!(SP2))),
        (
            "missing_sub",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("sub");
            }),
        ),
        ("invalid_sub", Box::new(|_, c| c["sub"] = json!(SP2))),
        (
            "missing_aud",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("aud");
            }),
        ),
        ("invalid_aud", Box::new(|_, c| c["aud"] = json!(AR))),
        (
            "missing_jti",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("jti");
            }),
        ),
        (
            "missing_iat",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("iat");
            }),
        ),
        (
            "missing_exp",
            Box::new(|_, c| {
                c.as_object_mut().unwrap().remove("exp");
            }),
        ),
        (
            "invalid_exp",
            Box::new(|_, c| c["exp"] = json!(c["iat"].as_i64().unwrap() + 60)),
        ),
        (
            "iat_in_future",
            Box::new(move |_, c| {
                c["iat"] = json!(now + 60);
                c["exp"] = json!(now + 90);
            }),
        ),
        (
            "assertion_expired",
            Box::new(move |_, c| {
                c["iat"] = json!(now - 120);
                c["exp"] = json!(now - 90);
            }),
        ),
    ];
    for (code, edit) in cases {
        let (mut h, mut c) = (header.clone(), claims_ok.clone());
        edit(&mut h, &mut c);
        let assertion = forge(&h, &c, &creds.key_pem);
        let (status, body) =
            status_json(env.token_response(&identity, Some(assertion)).await).await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (400, Some(code)),
            "{code}: {body}"
        );
        assert!(
            ["invalid_client", "invalid_request"].contains(&body["error"].as_str().unwrap()),
            "{body}"
        );
    }
    // Signature: missing, and made with another key than the x5c's.
    let good = forge(&header, &claims_ok, &creds.key_pem);
    let unsigned = format!("{}.", good.rsplit_once('.').unwrap().0);
    let (status, body) = status_json(env.token_response(&identity, Some(unsigned)).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("missing_signature"))
    );
    let wrong_key = forge(&header, &claims_ok, &env.bed.creds(SP2).key_pem);
    let (status, body) = status_json(env.token_response(&identity, Some(wrong_key)).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("invalid_signature"))
    );
    // A chain from a root that is not on the trusted list.
    let foreign = ishare_gateway::testbed::pki::TestPki::shared().party(CONSUMER);
    let foreign_assertion = foreign
        .signing_identity()
        .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
        .unwrap();
    let (status, body) =
        status_json(env.token_response(&identity, Some(foreign_assertion)).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("untrusted_root"))
    );
    // Parties unknown to or inactive at the scheme owner.
    let (status, body) =
        status_json(env.token_response(&env.bed.unknown_party(), None).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("unknown_party"))
    );
    let (status, body) =
        status_json(env.token_response(&env.bed.identity(INACTIVE), None).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("party_not_active"))
    );
    // A good assertion once, then its replay.
    let (status, body) = status_json(env.token_response(&identity, Some(good.clone())).await).await;
    assert_eq!(
        (
            status,
            body["token_type"].as_str(),
            body["expires_in"].as_u64()
        ),
        (200, Some("Bearer"), Some(3600)),
        "{body}"
    );
    let (status, body) = status_json(env.token_response(&identity, Some(good)).await).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (400, Some("replayed_jti"))
    );
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_tokens_total",
            &[("outcome", "replayed_jti")]
        ),
        1.0
    );
    assert_eq!(
        metric(&m, "ishare_gateway_tokens_total", &[("outcome", "issued")]),
        1.0
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_request_parameters_methods_paths_and_body_types() {
    let env = env().await;
    let identity = env.bed.identity(CONSUMER);
    let assertion = || {
        identity
            .client_assertion(SP, ishare_gateway::scheme::Timestamp::now())
            .unwrap()
    };
    let base = |a: String| {
        vec![
            ("grant_type".to_string(), "client_credentials".to_string()),
            ("scope".into(), "iSHARE".into()),
            ("client_id".into(), CONSUMER.into()),
            (
                "client_assertion_type".into(),
                "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into(),
            ),
            ("client_assertion".into(), a),
        ]
    };
    let cases = [
        (
            "grant_type",
            "password",
            "unsupported_grant_type",
            "unsupported_grant_type",
        ),
        ("scope", "other", "invalid_scope", "invalid_scope"),
        (
            "client_id",
            "nobody",
            "invalid_client_id",
            "invalid_request",
        ),
        (
            "client_assertion_type",
            "jwt",
            "invalid_client_assertion_type",
            "invalid_request",
        ),
        (
            "client_assertion",
            "",
            "missing_client_assertion",
            "invalid_request",
        ),
    ];
    for (field, value, reason, error) in cases {
        let form: Vec<(String, String)> = base(assertion())
            .into_iter()
            .map(|(k, v)| {
                if k == field {
                    (k, value.to_string())
                } else {
                    (k, v)
                }
            })
            .collect();
        let (status, headers, body) = send(
            env.bed
                .http
                .post(format!("{}/connect/token", env.url))
                .form(&form),
        )
        .await;
        assert_eq!(
            (status, body["reason"].as_str(), body["error"].as_str()),
            (400, Some(reason), Some(error)),
            "{field}"
        );
        assert_eq!(headers["cache-control"], "no-store");
    }
    for path in ["/connect/token", "/oauth2.0/token", "/token"] {
        let (status, _, body) = send(
            env.bed
                .http
                .post(format!("{}{path}", env.url))
                .form(&base(assertion())),
        )
        .await;
        assert_eq!(status, 200, "{path}: {body}");
    }
    let json_body: serde_json::Map<String, Value> = base(assertion())
        .into_iter()
        .map(|(k, v)| (k, Value::String(v)))
        .collect();
    let (status, _, body) = send(
        env.bed
            .http
            .post(format!("{}/connect/token", env.url))
            .json(&json_body),
    )
    .await;
    assert_eq!(status, 200, "JSON body: {body}");
    let (status, headers, _) = send(env.bed.http.get(format!("{}/connect/token", env.url))).await;
    assert_eq!((status, headers["allow"].to_str().unwrap()), (405, "POST"));
    let (status, _, body) = send(
        env.bed
            .http
            .post(format!("{}/connect/token", env.url))
            .body(vec![b'a'; 70 * 1024]),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (413, Some("body_too_large"))
    );
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routes_authenticate_normalise_and_rewrite() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    // Public: no token needed.
    let (status, _, echo) = send(env.bed.http.get(format!("{}/status", env.url))).await;
    assert_eq!((status, echo["path"].as_str()), (200, Some("/status")));
    // Token routes: 401 without, with a bad one, with an expired one.
    for auth in [None, Some("Bearer garbage"), Some("Basic dXNlcjpwYXNz")] {
        let mut req = env.bed.http.get(format!("{}/api/mine/x", env.url));
        if let Some(a) = auth {
            req = req.header("authorization", a);
        }
        let (status, headers, body) = send(req).await;
        assert_eq!(status, 401, "{auth:?}");
        assert_eq!(
            headers["www-authenticate"],
            "Bearer error=\"invalid_token\""
        );
        assert_eq!(body["error"], "invalid_token");
    }
    let issued_long_ago = {
        let state = env.state().current.load();
        state.tokens.issue(
            &ishare_gateway::scheme::party::PartyId::parse(CONSUMER).unwrap(),
            &["iSHARE".into()],
            ishare_gateway::scheme::Timestamp::from_secs(
                ishare_gateway::scheme::Timestamp::now().secs() - 7200,
            ),
        )
    };
    let (status, _, body) = send(
        env.bed
            .http
            .get(format!("{}/api/mine/x", env.url))
            .bearer_auth(issued_long_ago),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (401, Some("token_expired"))
    );
    // Forwarded: normalised path, the party header set and a client's copy removed, no Authorization.
    let (status, _, echo) = send(
        env.bed
            .http
            .get(format!("{}/api//mine/./a/../b?q=1&r=2", env.url))
            .bearer_auth(&token)
            .header("x-consumer-party-id", "EU.EORI.NL000000666")
            .header("X_Consumer_Party_Id", "EU.EORI.NL000000666")
            .header("delegation_evidence", "should-not-reach-the-backend"),
    )
    .await;
    assert_eq!(status, 200, "{echo}");
    assert_eq!(
        (echo["path"].as_str(), echo["query"].as_str()),
        (Some("/api/mine/b"), Some("q=1&r=2"))
    );
    assert_eq!(echo["headers"]["x-consumer-party-id"], CONSUMER);
    assert!(
        echo["headers"].get("x_consumer_party_id").is_none(),
        "no look-alike of the party header"
    );
    assert!(echo["headers"].get("authorization").is_none());
    assert!(echo["headers"].get("delegation_evidence").is_none());
    assert_eq!(echo["headers"]["x-forwarded-proto"], "https");
    // A public route never passes on a client-supplied party id.
    let (_, _, echo) = send(
        env.bed
            .http
            .get(format!("{}/status", env.url))
            .header("x-consumer-party-id", CONSUMER),
    )
    .await;
    assert!(echo["headers"].get("x-consumer-party-id").is_none());
    // Authorization forwarded where the route asks for it; path rewriting.
    let (_, _, echo) = send(
        env.bed
            .http
            .get(format!("{}/api/raw/7", env.url))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(echo["headers"]["authorization"], format!("Bearer {token}"));
    let (_, _, echo) = send(
        env.bed
            .http
            .get(format!("{}/v1/things/a%20b?x=1", env.url))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!(
        (echo["path"].as_str(), echo["query"].as_str()),
        (Some("/legacy/things/a%20b"), Some("x=1"))
    );
    // No route; wrong method; ambiguous paths.
    let (status, _, body) = send(
        env.bed
            .http
            .get(format!("{}/nowhere", env.url))
            .bearer_auth(&token),
    )
    .await;
    assert_eq!((status, body["reason"].as_str()), (404, Some("no_route")));
    let (status, headers, _) = send(env.bed.http.post(format!("{}/status", env.url))).await;
    assert_eq!(
        (status, headers["allow"].to_str().unwrap()),
        (405, "GET, HEAD")
    );
    // Sent as written: HTTP clients would resolve the dot segments themselves.
    for bad in [
        "/api/mine/a%2Fb",
        "/api/mine/%zz",
        "/api/mine/../../../etc/passwd",
        "/api/mine/%2e%2e/%2E%2E/%2e%2e/x",
    ] {
        let answer = raw_get(&env.plain, bad, &token).await;
        assert!(answer.starts_with("HTTP/1.1 400"), "{bad}: {answer}");
        assert!(
            answer.contains("\"reason\":\"invalid_path\""),
            "{bad}: {answer}"
        );
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_method_and_body_streams_through_over_http1_and_http2() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    // A body on a GET has no defined meaning: a backend might read it, no rule did.
    let (status, _, answer) = send(
        env.bed
            .http
            .get(format!("{}/api/mine/item", env.url))
            .bearer_auth(&token)
            .body("body of GET"),
    )
    .await;
    assert_refused(status, &answer, (400, "ambiguous_request"));
    for method in ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"] {
        let m = reqwest::Method::from_bytes(method.as_bytes()).unwrap();
        let (status, _, echo) = send(
            env.bed
                .http
                .request(m, format!("{}/api/mine/item", env.url))
                .bearer_auth(&token)
                .body(format!("body of {method}")),
        )
        .await;
        assert_eq!(status, 200, "{method}");
        assert_eq!(
            (echo["method"].as_str(), echo["body"].as_str()),
            (Some(method), Some(format!("body of {method}").as_str()))
        );
    }
    // A large body, streamed, both ways.
    let big: Vec<u8> = (0..4 * 1024 * 1024).map(|i| (i % 251) as u8).collect();
    let resp = env
        .bed
        .http
        .post(format!("{}/api/mine/upload", env.url))
        .bearer_auth(&token)
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.version(),
        reqwest::Version::HTTP_2,
        "TLS offers HTTP/2 by ALPN"
    );
    let echo: Value = resp.json().await.unwrap();
    assert_eq!(echo["body_length"], big.len());
    // Plain HTTP/1.1 listener. The answer is the backend's as it sent it: the gateway neither
    // compresses it nor keeps from the backend what the client accepts.
    let plain = reqwest::Client::builder().http1_only().build().unwrap();
    let resp = plain
        .get(format!("{}/api/mine/p", env.plain))
        .bearer_auth(&token)
        .header("accept-encoding", "gzip, br")
        .send()
        .await
        .unwrap();
    assert_eq!(
        (resp.status().as_u16(), resp.version()),
        (200, reqwest::Version::HTTP_11)
    );
    assert_eq!(resp.headers().get("content-encoding"), None);
    let echo: Value = resp.json().await.unwrap();
    assert_eq!(echo["headers"]["x-forwarded-proto"], "http");
    assert_eq!(echo["headers"]["accept-encoding"], "gzip, br");
    env.stop().await;
}

/// A backend that answers every request alike, with names in mixed case, and keeps each head
/// as it arrived.
async fn recording_backend() -> (
    String,
    std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    tokio::task::JoinHandle<()>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let heads = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let kept = heads.clone();
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let kept = kept.clone();
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while let Ok(n @ 1..) = stream.read(&mut chunk).await {
                    buf.extend_from_slice(&chunk[..n]);
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        let head: Vec<u8> = buf.drain(..end + 4).collect();
                        kept.lock()
                            .unwrap()
                            .push(String::from_utf8_lossy(&head).to_string());
                        let answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\
                                      X-Backend-Case: Yes\r\ncontent-type: text/plain\r\n\r\nok";
                        if stream.write_all(answer.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    (addr, heads, task)
}

/// Header names reach the backend and the client as they were written, whether the gateway
/// rewrites the backend's headers with pingora's map of their case or without it (every name in
/// the form pingora writes anyway); the gateway's own in lower case. Their order is the property
/// test's (`forward_case_tests`): removing a header moves the last one into its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn header_names_reach_the_backend_and_the_client_as_written() {
    let (backend, heads, task) = recording_backend().await;
    let rules = r#"
[[route]]
name = "recorded"
path = "/recorded"
upstream = "recorded"
auth = "token"
"#;
    let extra = format!("\n[[upstream]]\nname = \"recorded\"\naddresses = [\"{backend}\"]\n");
    let env = Env::start(BIN, rules, |_| extra).await;
    let token = env.token(CONSUMER).await;
    let host = env.plain.trim_start_matches("http://");
    // wrk's head, all in the form pingora writes once Authorization is withheld; then names
    // that keep the case map: in lower case, in capitals, and User-Agent as curl writes it.
    for (host_name, more) in [
        ("Host", ""),
        ("host", ""),
        ("HOST", "user-agent: t\r\n"),
        ("Host", "User-Agent: t\r\nX-Trace-Me: 1\r\n"),
    ] {
        let request = format!(
            "GET /recorded HTTP/1.1\r\n{host_name}: {host}\r\nAuthorization: Bearer {token}\r\n{more}Connection: close\r\n\r\n"
        );
        let answer = raw_request(&env.plain, request.as_bytes()).await;
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert!(
            answer.contains("\r\nX-Backend-Case: Yes\r\n")
                && answer.contains("\r\ncontent-type: text/plain\r\n"),
            "{answer}"
        );
        let head = heads.lock().unwrap().pop().expect("the backend's head");
        let lines: Vec<&str> = head
            .split("\r\n")
            .skip(1)
            .filter(|l| !l.is_empty())
            .collect();
        let mut expected = vec![format!("{host_name}: {host}")];
        expected.extend(
            more.split("\r\n")
                .filter(|l| !l.is_empty())
                .map(String::from),
        );
        for own in [
            "x-consumer-party-id: EU.EORI.NL000000001",
            "x-forwarded-for: 127.0.0.1",
            "x-forwarded-proto: http",
        ] {
            expected.push(own.to_string());
        }
        let mut got: Vec<String> = (lines.iter())
            .filter(|l| !l.starts_with("x-decision-id: ") && !l.starts_with("Connection: "))
            .map(|l| l.to_string())
            .collect();
        got.sort();
        expected.sort();
        assert_eq!(got, expected, "{head}");
        assert_eq!(
            lines
                .iter()
                .filter(|l| l.starts_with("x-decision-id: "))
                .count(),
            1,
            "{head}"
        );
    }
    env.stop().await;
    task.abort();
}

/// A GET with the path exactly as given, over plain HTTP/1.1; the whole answer as text.
async fn raw_get(base: &str, path: &str, token: &str) -> String {
    let addr = base.trim_start_matches("http://");
    let request = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n");
    raw_request(base, request.as_bytes()).await
}

/// A backend that answers with its own name.
async fn named_backend(name: &'static str) -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let app =
        axum::Router::new().fallback(move || async move { axum::Json(json!({"backend": name})) });
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

/// A backend that accepts connections and never answers.
async fn silent_backend() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = listener.accept().await {
            held.push(s);
        }
    });
    (addr, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn backends_are_balanced_checked_and_their_failures_answered() {
    let (a, ta) = named_backend("a").await;
    let (b, tb) = named_backend("b").await;
    let (slow, ts) = silent_backend().await;
    let dead = format!("127.0.0.1:{}", free_port());
    let rules = r#"
[[route]]
name = "pair"
path = "/pair"
upstream = "pair"
auth = "public"

[[route]]
name = "half-dead"
path = "/half-dead"
upstream = "half-dead"
auth = "public"

[[route]]
name = "dead"
path = "/dead"
upstream = "dead"
auth = "public"

[[route]]
name = "slow"
path = "/slow"
upstream = "slow"
auth = "public"
"#;
    let extra = format!(
        r#"
[[upstream]]
name = "pair"
addresses = ["{a}", "{b}"]

[[upstream]]
name = "half-dead"
addresses = ["{a}", "{dead}"]
[upstream.health_check]
kind = "tcp"
interval = "1s"

[[upstream]]
name = "dead"
addresses = ["{dead}"]
connect_timeout = "1s"

[[upstream]]
name = "slow"
addresses = ["{slow}"]
read_timeout = "300ms"
"#
    );
    let env = Env::start(BIN, rules, |_| extra).await;
    let mut seen = Vec::new();
    for _ in 0..4 {
        let (status, _, body) = send(env.bed.http.get(format!("{}/pair", env.url))).await;
        assert_eq!(status, 200);
        seen.push(body["backend"].as_str().unwrap().to_string());
    }
    assert!(
        seen.contains(&"a".to_string()) && seen.contains(&"b".to_string()),
        "round robin: {seen:?}"
    );
    // One backend dead: every request still succeeds (retried on connect failure, then health-checked out).
    for _ in 0..6 {
        let (status, _, body) = send(env.bed.http.get(format!("{}/half-dead", env.url))).await;
        assert_eq!((status, body["backend"].as_str()), (200, Some("a")));
    }
    let (status, _, body) = send(env.bed.http.get(format!("{}/dead", env.url))).await;
    assert_eq!(
        (status, body["error"].as_str(), body["reason"].as_str()),
        (502, Some("bad_gateway"), Some("backend_unreachable"))
    );
    let started = std::time::Instant::now();
    let (status, _, body) = send(env.bed.http.get(format!("{}/slow", env.url))).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (504, Some("backend_timeout"))
    );
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_requests_total",
            &[
                ("route", "dead"),
                ("status", "502"),
                ("outcome", "upstream_error")
            ]
        ),
        1.0
    );
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_backend_healthy",
            &[("upstream", "half-dead"), ("backend", &dead)]
        ),
        0.0
    );
    env.stop().await;
    for t in [ta, tb, ts] {
        t.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_to_the_backend_is_verified() {
    let bed_keys = {
        let config = testbed_config(BIN);
        prepare_keys(&config)
    };
    let tls = std::sync::Arc::new(
        ishare_gateway::tls::server_config(
            bed_keys.tls.chain_pem.as_bytes(),
            bed_keys.tls.key_pem.as_bytes(),
        )
        .unwrap(),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let (stop, watch) = tokio::sync::watch::channel(false);
    let server = tokio::spawn(ishare_gateway::testbed::server::serve(
        listener,
        Some(tls),
        ishare_gateway::testbed::echo::router(),
        watch,
    ));
    let ca = bed_keys.ca_file.display().to_string();
    let rules = r#"
[[route]]
name = "verified"
path = "/verified"
upstream = "verified"
auth = "public"

[[route]]
name = "unverifiable"
path = "/unverifiable"
upstream = "unverifiable"
auth = "public"

[[route]]
name = "wrong-name"
path = "/wrong-name"
upstream = "wrong-name"
auth = "public"
"#;
    let extra = format!(
        r#"
[[upstream]]
name = "verified"
addresses = ["{addr}"]
tls = true
sni = "localhost"
ca_file = "{ca}"
[upstream.health_check]
kind = "tcp"
interval = "1s"

[[upstream]]
name = "unverifiable"
addresses = ["{addr}"]
tls = true
sni = "localhost"

[[upstream]]
name = "wrong-name"
addresses = ["{addr}"]
tls = true
sni = "backend.example"
ca_file = "{ca}"
"#
    );
    let env = Env::start(BIN, rules, |_| extra).await;
    let (status, _, echo) = send(env.bed.http.get(format!("{}/verified", env.url))).await;
    assert_eq!((status, echo["path"].as_str()), (200, Some("/verified")));
    let (status, _, _) = send(env.bed.http.get(format!("{}/unverifiable", env.url))).await;
    assert_eq!(status, 502, "a certificate from an unknown CA is refused");
    let (status, _, _) = send(env.bed.http.get(format!("{}/wrong-name", env.url))).await;
    assert_eq!(status, 502, "a certificate for another name is refused");
    // Its health check verifies the backend against the same roots: it stays in.
    let healthy = |m: &str| {
        let labels = [("upstream", "verified"), ("backend", addr.as_str())];
        let name = "ishare_gateway_backend_healthy{";
        let checked = m
            .lines()
            .any(|l| l.starts_with(name) && l.contains("\"verified\""));
        checked.then(|| metric(m, "ishare_gateway_backend_healthy", &labels))
    };
    let mut checked = None;
    for _ in 0..50 {
        checked = healthy(&env.metrics().await);
        if checked.is_some() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(
        checked,
        Some(1.0),
        "the health check trusts the upstream's CA"
    );
    let (status, _, _) = send(env.bed.http.get(format!("{}/verified", env.url))).await;
    assert_eq!(status, 200);
    env.stop().await;
    let _ = stop.send(true);
    let _ = server.await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_listener_serves_metrics_liveness_and_readiness() {
    let env = env().await;
    let token = env.token(CONSUMER).await;
    let _ = send(
        env.bed
            .http
            .get(format!("{}/api/mine/x", env.url))
            .bearer_auth(&token),
    )
    .await;
    let _ = send(env.bed.http.get(format!("{}/api/mine/x", env.url))).await;
    let m = env.metrics().await;
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_requests_total",
            &[
                ("route", "mine"),
                ("status", "200"),
                ("outcome", "forwarded")
            ]
        ),
        1.0
    );
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_requests_total",
            &[
                ("route", "mine"),
                ("status", "401"),
                ("outcome", "unauthenticated")
            ]
        ),
        1.0
    );
    assert!(
        metric(
            &m,
            "ishare_gateway_request_duration_seconds_count",
            &[("route", "mine")]
        ) >= 2.0
    );
    // Both were decided: the forward and the refusal.
    assert_eq!(
        metric(
            &m,
            "ishare_gateway_decision_duration_seconds_count",
            &[("route", "mine")]
        ),
        2.0
    );
    assert!(
        metric(
            &m,
            "ishare_gateway_scheme_owner_calls_total",
            &[("endpoint", "trusted_list"), ("outcome", "ok")]
        ) >= 1.0
    );
    assert!(
        metric(
            &m,
            "ishare_gateway_cache_lookups_total",
            &[("cache", "party")]
        ) >= 1.0
    );
    let live = reqwest::get(format!("{}/live", env.admin)).await.unwrap();
    assert_eq!(live.status(), 200);
    let ready = reqwest::get(format!("{}/ready", env.admin)).await.unwrap();
    assert_eq!(ready.status(), 200);
    env.stop().await;
}

/// `ishare-gateway health` against an admin listener, as the container's health check runs it.
async fn health_check(admin: &str) -> std::process::Output {
    let admin = admin.to_string();
    tokio::task::spawn_blocking(move || {
        binary_output(&["health", "--admin", &admin, "--timeout", "2"])
    })
    .await
    .unwrap()
}

/// A TCP relay on a port of its own to `to`, until dropped (its connections with it): a peer
/// that can go away and come back at the same address.
struct Relay(tokio::task::JoinHandle<()>);

impl Relay {
    async fn start(port: u16, to: std::net::SocketAddr) -> Relay {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .unwrap();
        Relay(tokio::spawn(async move {
            let mut links = tokio::task::JoinSet::new();
            while let Ok((mut client, _)) = listener.accept().await {
                links.spawn(async move {
                    if let Ok(mut server) = tokio::net::TcpStream::connect(to).await {
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
                    }
                });
            }
        }))
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_is_deciding_now_and_recovers_on_its_own_after_a_scheme_owner_blip() {
    use support::process::{eventually, GatewayProcess};
    let bed = Bed::start(BIN).await;
    let so: url::Url = bed.url(SO).parse().unwrap();
    let so_addr =
        std::net::SocketAddr::new(so.host_str().unwrap().parse().unwrap(), so.port().unwrap());
    let port = free_port();
    let relay = Relay::start(port, so_addr).await;
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |t| {
        t.replace(&bed.url(SO), &format!("https://127.0.0.1:{port}"))
    });
    let mut gateway = GatewayProcess::start(BIN, &dir.join("gateway.toml"), ports.admin);
    gateway.wait_ready().await;
    // What the alerts watch: the certificates' expiry (the test PKI's leaves live five years, its
    // CAs ten) and the age past which the trusted list is not used (3 × the default refresh, 5 m).
    let m = gateway.metrics().await;
    let days = |certificate: &str| {
        metric(
            &m,
            "ishare_gateway_certificate_expiry_seconds",
            &[("certificate", certificate)],
        ) / 86_400.0
    };
    let listener = format!("listener 127.0.0.1:{}", ports.tls);
    for (certificate, from, to) in [
        ("identity", 5.0 * 365.0 - 2.0, 5.0 * 365.0),
        ("identity_issuer", 10.0 * 365.0 - 2.0, 10.0 * 365.0 + 3.0),
        ("scheme_root", 10.0 * 365.0 - 2.0, 10.0 * 365.0 + 3.0),
        (listener.as_str(), 5.0 * 365.0 - 2.0, 5.0 * 365.0),
    ] {
        let left = days(certificate);
        assert!(
            (from..=to).contains(&left),
            "{certificate}: {left} days\n{m}"
        );
    }
    let max_age = m
        .lines()
        .find_map(|l| l.strip_prefix("ishare_gateway_trusted_list_max_age_seconds "));
    assert_eq!(max_age, Some("900"), "{m}");
    // The scheme owner goes away: a call that needs it fails closed...
    drop(relay);
    let tls = format!("https://127.0.0.1:{}", ports.tls);
    let form = token_form(&bed.identity(CONSUMER), SP, None);
    let (status, body) = status_json(request_token(&bed.http, &tls, form).await).await;
    assert_refused(status, &body, (503, "scheme_owner_unavailable"));
    // ...but the gateway can still decide on what it knows: it stays ready.
    let (status, body) = gateway.ready().await.unwrap();
    assert_eq!(status, 200, "{body}");
    let admin = format!("http://127.0.0.1:{}", ports.admin);
    let health = health_check(&admin).await;
    assert!(health.status.success(), "{health:?}");
    // Back: the gateway finds out on its own (no request needs it), within seconds, not at its
    // next refresh (5 minutes): the consumer's token request works again.
    let _relay = Relay::start(port, so_addr).await;
    let refreshed = eventually(std::time::Duration::from_secs(10), || async {
        let m = gateway.metrics().await;
        let ok = [("endpoint", "trusted_list"), ("outcome", "ok")];
        metric(&m, "ishare_gateway_scheme_owner_calls_total", &ok) >= 2.0
    })
    .await;
    assert!(refreshed, "{}", gateway.process.tail());
    let form = token_form(&bed.identity(CONSUMER), SP, None);
    let (status, body) = status_json(request_token(&bed.http, &tls, form).await).await;
    assert_eq!(status, 200, "{body}");
    gateway.terminate().await;
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readiness_fails_while_the_scheme_owner_is_unreachable() {
    let bed = Bed::start(BIN).await;
    let unreachable = format!("https://127.0.0.1:{}", free_port());
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |t| {
        t.replace(&bed.url(SO), &unreachable)
    });
    let gateway = launch(&dir);
    let (status, body) = readiness(&format!("http://127.0.0.1:{}", ports.admin)).await;
    assert_eq!(status, 503, "{body}");
    assert!(
        body["problems"].to_string().contains("trusted list"),
        "{body}"
    );
    // The container's health check says so, with the reason.
    let admin = format!("http://127.0.0.1:{}", ports.admin);
    let health = health_check(&admin).await;
    let said = String::from_utf8_lossy(&health.stderr);
    assert!(!health.status.success(), "{said}");
    assert!(
        said.contains("/ready answered 503") && said.contains("trusted list"),
        "{said}"
    );
    // Token requests fail closed with 503, saying the scheme owner is unavailable: the first tries
    // it, the next ones within the retry pause do not, and all say the same.
    for _ in 0..3 {
        let resp = request_token(
            &bed.http,
            &format!("https://127.0.0.1:{}", ports.tls),
            token_form(&bed.identity(CONSUMER), SP, None),
        )
        .await;
        let (status, body) = status_json(resp).await;
        assert_eq!(
            (status, body["error"].as_str(), body["reason"].as_str()),
            (
                503,
                Some("temporarily_unavailable"),
                Some("scheme_owner_unavailable")
            ),
            "{body}"
        );
    }
    tokio::task::spawn_blocking(move || gateway.stop())
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trust_fails_closed_when_the_trusted_list_is_too_old() {
    let bed = Bed::start(BIN).await;
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |t| {
        t.replace("[scheme_owner]", "[scheme_owner]\nrefresh = \"1s\"")
    });
    let gateway = launch(&dir);
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let identity = bed.identity(CONSUMER);
    let http = reqwest::Client::new();
    let request = || {
        http.post(format!("{plain}/connect/token"))
            .form(&token_form(&identity, SP, None))
            .send()
    };
    let mut status = 0;
    for _ in 0..100 {
        if let Ok(r) = request().await {
            status = r.status().as_u16();
            if status == 200 {
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(status, 200);
    // The scheme owner goes away; once the list is older than three refresh intervals, trust fails.
    bed.stop().await;
    tokio::time::sleep(std::time::Duration::from_millis(3500)).await;
    let (status, body) = status_json(request().await.unwrap()).await;
    assert_eq!(
        (status, body["error"].as_str()),
        (503, Some("temporarily_unavailable")),
        "{body}"
    );
    assert!(
        !body.to_string().contains("127.0.0.1"),
        "no internal address in the answer: {body}"
    );
    tokio::task::spawn_blocking(move || gateway.stop())
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_are_verified_when_configured() {
    let bed = Bed::start(BIN).await;
    let data = bed.keys.data_dir.display().to_string();
    let (dir, ports) = gateway_dir(&bed, BIN, RULES, "", |t| {
        t.replace(
            &format!("key = \"{data}/tls/server.key.pem\""),
            &format!("key = \"{data}/tls/server.key.pem\"\nclient_ca = \"{data}/ca.pem\"\nclient_auth = \"required\""),
        )
    });
    assert!(std::fs::read_to_string(dir.join("gateway.toml"))
        .unwrap()
        .contains("client_auth = \"required\""));
    let gateway = launch(&dir);
    let url = format!("https://127.0.0.1:{}/status", ports.tls);
    let mut without = None;
    for _ in 0..100 {
        match bed.http.get(&url).send().await {
            Err(e)
                if e.is_connect() && !format!("{e:?}").to_lowercase().contains("certificate") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            other => {
                without = Some(other);
                break;
            }
        }
    }
    assert!(
        without.expect("the listener answers").is_err(),
        "no client certificate: handshake refused"
    );
    let creds = bed.creds(CONSUMER);
    let identity =
        reqwest::Identity::from_pem(format!("{}{}", creds.key_pem, creds.chain_pem).as_bytes())
            .unwrap();
    let with_cert = reqwest::Client::builder()
        .tls_certs_only(
            reqwest::Certificate::from_pem_bundle(&std::fs::read(&bed.keys.ca_file).unwrap())
                .unwrap(),
        )
        .identity(identity)
        .build()
        .unwrap();
    let resp = with_cert.get(&url).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    tokio::task::spawn_blocking(move || gateway.stop())
        .await
        .unwrap();
    let _ = std::fs::remove_dir_all(dir);
    bed.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_checks_configs_and_logs_one_line_per_request_without_secrets() {
    // `check` reports every problem with its file and key, and fails.
    let env = env().await;
    let broken = env.dir.join("broken.toml");
    let text = std::fs::read_to_string(env.config_path())
        .unwrap()
        .replace("name = \"echo\"", "name = \"echo\"\nspeed = \"fast\"")
        .replace("[admin]", "[admin]\ncolour = \"blue\"")
        .replace(
            "party_id = \"EU.EORI.NL000000000\"",
            "party_id = \"nobody\"",
        );
    std::fs::write(&broken, text).unwrap();
    std::fs::write(
        env.dir.join("policies/bad.toml"),
        "[[route]]\nname = \"x y\"\npath = \"/a/{id\"\nupstream = \"missing\"\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config", broken.to_str().unwrap()])
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!out.status.success());
    for expected in [
        "upstream[0].speed: unknown key",
        "admin.colour: unknown key",
        "scheme_owner.party_id",
        "bad.toml: route[0] (x y).name",
        "route[0] (x y).upstream",
        "route[0] (x y).path",
    ] {
        assert!(
            report.contains(expected),
            "missing {expected:?} in:\n{report}"
        );
    }
    std::fs::remove_file(env.dir.join("policies/bad.toml")).unwrap();
    let ok = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args(["check", "--config", env.config_path().to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        ok.status.success(),
        "{}",
        String::from_utf8_lossy(&ok.stdout)
    );

    // The real binary, JSON logs: one line per request, no token in it.
    let (dir, ports) = gateway_dir(&env.bed, BIN, RULES, "[log]\nformat = \"json\"\n", |t| t);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ishare-gateway"))
        .args([
            "run",
            "--config",
            dir.join("gateway.toml").to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let plain = format!("http://127.0.0.1:{}", ports.plain);
    let mut up = false;
    for _ in 0..200 {
        if reqwest::get(format!("http://127.0.0.1:{}/ready", ports.admin))
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            up = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(up, "the gateway process became ready");
    let form = token_form(&env.bed.identity(CONSUMER), SP, None);
    let assertion = form
        .iter()
        .find(|(k, _)| k == "client_assertion")
        .unwrap()
        .1
        .clone();
    let token: Value = request_token(&reqwest::Client::new(), &plain, form)
        .await
        .json()
        .await
        .unwrap();
    let token = token["access_token"].as_str().unwrap().to_string();
    let resp = reqwest::Client::new()
        .get(format!("{plain}/api/mine/secret-check?x=1"))
        .bearer_auth(&token)
        .header("delegation_evidence", "an.evidence.token")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    terminate(child.id());
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap())
        .await
        .unwrap();
    let log = String::from_utf8_lossy(&output.stdout).to_string();
    let access: Vec<Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"] == "access")
        .collect();
    assert_eq!(access.len(), 2, "{log}");
    let line = &access[1];
    assert_eq!(
        (
            line["route"].as_str(),
            line["client"].as_str(),
            line["status"].as_u64(),
            line["outcome"].as_str()
        ),
        (Some("mine"), Some(CONSUMER), Some(200), Some("forwarded"))
    );
    assert!(line["duration_ms"].as_f64().is_some());
    for secret in [
        token.as_str(),
        assertion.as_str(),
        "an.evidence.token",
        "x=1",
    ] {
        assert!(!log.contains(secret), "the log holds a secret: {secret}");
    }
    let _ = std::fs::remove_dir_all(dir);
    env.stop().await;
}

/// SIGTERM a child process.
fn terminate(pid: u32) {
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_token_requests_of_one_party_at_once_cost_one_lookup_of_its_record() {
    let env = env().await;
    // The gateway has not seen the consumer yet: its record is looked up once, whatever the
    // number of requests waiting for it, and none of them is refused as a lookup too many.
    let forms: Vec<_> = (0..40)
        .map(|_| token_form(&env.bed.identity(CONSUMER), SP, None))
        .collect();
    let tries: Vec<_> = forms
        .into_iter()
        .map(|form| {
            let (http, url) = (env.bed.http.clone(), env.url.clone());
            tokio::spawn(async move { status_json(request_token(&http, &url, form).await).await })
        })
        .collect();
    for t in tries {
        let (status, body) = t.await.unwrap();
        assert_eq!(status, 200, "{body}");
    }
    env.stop().await;
}
