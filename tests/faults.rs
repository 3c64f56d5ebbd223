//! Faults and bad input, bounded in time: every one gets its documented status and a reason, never
//! a panic, a pass, or a connection left hanging. Slow clients do not starve the others.

use crate::support;

use base64::Engine;
use serde_json::Value;
use std::time::{Duration, Instant};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BIN: &str = "faults";

fn rules() -> String {
    format!(
        r#"
[[route]]
name = "status"
path = "/status"
upstream = "echo"
auth = "public"

[[route]]
name = "mine"
path = "/api/mine"
upstream = "echo"

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
name = "resetting"
methods = ["GET"]
path = "/api/resetting/{{id}}"
upstream = "echo"
[route.delegation]
policy_issuer = "{OWNER}"
resource_type = "CONTAINER"
identifiers = ["{{path.id}}"]
registry = "resetting"

[[route]]
name = "slow-backend"
path = "/slow"
upstream = "slow"
auth = "public"
"#
    )
}

/// A listener that accepts connections and closes them at once, and one that never answers.
async fn misbehaving() -> (String, String, Vec<tokio::task::JoinHandle<()>>) {
    let resetting = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (r, s) = (
        resetting.local_addr().unwrap(),
        silent.local_addr().unwrap(),
    );
    let tasks = vec![
        tokio::spawn(async move {
            while let Ok((stream, _)) = resetting.accept().await {
                drop(stream);
            }
        }),
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = silent.accept().await {
                held.push(stream);
            }
        }),
    ];
    (r.to_string(), s.to_string(), tasks)
}

async fn env() -> (Env, Vec<tokio::task::JoinHandle<()>>) {
    let (resetting, silent, tasks) = misbehaving().await;
    let env = Env::start(BIN, &rules(), move |_| {
        format!(
            r#"
[[registry]]
name = "resetting"
party_id = "{AR}"
url = "https://{resetting}"

[[upstream]]
name = "slow"
addresses = ["{silent}"]
read_timeout = "700ms"

[delegation]
registry_timeout = "1s"
"#
        )
    })
    .await;
    (env, tasks)
}

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    status_json(req.send().await.unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_dependencies_are_answered_in_time() {
    let (env, tasks) = env().await;
    let token = env.token(CONSUMER).await;
    let started = Instant::now();
    let (status, body) = send(
        env.bed
            .http
            .get(format!("{}/api/resetting/C1", env.url))
            .bearer_auth(&token),
    )
    .await;
    assert_refused(status, &body, (503, "registry_unreachable"));
    let (status, body) = send(env.bed.http.get(format!("{}/slow", env.url))).await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (504, Some("backend_timeout"))
    );
    assert!(started.elapsed() < Duration::from_secs(5));
    for t in tasks {
        t.abort();
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_do_not_starve_the_others() {
    let (env, tasks) = env().await;
    let addr = env.plain.trim_start_matches("http://").to_string();
    // Fifty connections that send half a header each and then nothing.
    let mut slow = Vec::new();
    for _ in 0..50 {
        let mut s = TcpStream::connect(&addr).await.unwrap();
        s.write_all(b"GET /status HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            .await
            .unwrap();
        slow.push(s);
    }
    // Everyone else is served at once, over both listeners.
    let started = Instant::now();
    for _ in 0..20 {
        let (status, _) = send(env.bed.http.get(format!("{}/status", env.url))).await;
        assert_eq!(status, 200);
        let (status, _) = send(env.bed.http.get(format!("{}/status", env.plain))).await;
        assert_eq!(status, 200);
    }
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    drop(slow);
    for t in tasks {
        t.abort();
    }
    env.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_malformed_input_gets_a_clear_answer() {
    let (env, tasks) = env().await;
    let http = &env.bed.http;
    // A header too large, and too many headers: refused, and the connection answered.
    let addr = env.plain.trim_start_matches("http://").to_string();
    let huge = format!(
        "GET /status HTTP/1.1\r\nHost: {addr}\r\nX-Big: {}\r\n\r\n",
        "a".repeat(2 << 20)
    );
    let mut s = TcpStream::connect(&addr).await.unwrap();
    let _ = s.write_all(huge.as_bytes()).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer);
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "{answer}"
    );
    let many: String = (0..300).map(|i| format!("X-H{i}: v\r\n")).collect();
    let answer = raw_request(
        &env.plain,
        format!("GET /status HTTP/1.1\r\nHost: {addr}\r\n{many}\r\n").as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    // A token request body over the limit.
    let (status, body) = send(
        http.post(format!("{}/connect/token", env.url))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("client_assertion={}", "a".repeat(100_000))),
    )
    .await;
    assert_eq!(
        (status, body["reason"].as_str()),
        (413, Some("body_too_large"))
    );
    // Malformed assertions: bad base64, deeply nested JSON, a huge header.
    let b64 = |v: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v);
    let header = b64(br#"{"alg":"RS256","typ":"JWT","x5c":["AAAA"]}"#);
    let nested = format!("{}{}", "[".repeat(10_000), "]".repeat(10_000));
    let assertions = [
        "not base64!.eyJ9.sig".to_string(),
        format!("{header}.{}.sig", b64(nested.as_bytes())),
        format!("{}.{}.sig", b64(nested.as_bytes()), b64(b"{}")),
        format!(
            "{}.e30.sig",
            b64(format!(
                r#"{{"alg":"RS256","typ":"JWT","pad":"{}"}}"#,
                "x".repeat(40_000)
            )
            .as_bytes())
        ),
    ];
    for assertion in &assertions {
        let (status, body) = status_json(
            env.token_response(&env.bed.identity(CONSUMER), Some(assertion.clone()))
                .await,
        )
        .await;
        assert_eq!(status, 400, "{body}");
        assert!(body["reason"].as_str().is_some(), "{body}");
    }
    // Malformed bearer tokens and evidence.
    let token = env.token(CONSUMER).await;
    for bearer in ["x", "a.b.c", &assertions[1], &"t".repeat(10_000)] {
        let (status, body) = send(
            http.get(format!("{}/api/mine", env.url))
                .bearer_auth(bearer),
        )
        .await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (401, Some("invalid_token"))
        );
    }
    for evidence in ["x", "a.b.c", &assertions[1], &assertions[3]] {
        let (status, body) = send(
            http.get(format!("{}/api/header-only/C1", env.url))
                .bearer_auth(&token)
                .header("delegation_evidence", evidence),
        )
        .await;
        assert_eq!(
            (status, body["reason"].as_str()),
            (403, Some("malformed_evidence")),
            "{evidence:.40}"
        );
    }
    // And the gateway still serves.
    let (status, _) = send(http.get(format!("{}/status", env.url))).await;
    assert_eq!(status, 200);
    for t in tasks {
        t.abort();
    }
    env.stop().await;
}
