//! What the backend receives is exactly what was decided on: one canonical form of the path and
//! the query, every form that backends read differently refused (unless a route accepts it), values
//! put into upstream paths as whole segments, and bytes beyond ASCII passed on unmangled.

mod support;

use serde_json::Value;
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
name = "files"
methods = ["GET"]
path = "/files/{{*rest}}"
upstream = "echo"
auth = "public"
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
